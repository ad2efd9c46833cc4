// Devices, streams and events (cuda_runtime.h).
#include "backends/cuda/cuda_runtime.h"

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "core/error.h"

namespace strata::cuda {

namespace {

struct DeviceState {
  std::once_flag ctx_once;
  CUcontext ctx = nullptr;
  CUresult ctx_result = CUDA_SUCCESS;
  std::once_flag props_once;
  DeviceProperties props;
  std::once_flag pool_once;
  std::array<CUstream, kStreamsPerPool> pool{};
  std::atomic<uint32_t> next{0};
};

struct Devices {
  int count = 0;
  std::string error;  // why there is no device, when count == 0
  std::unique_ptr<DeviceState[]> state;
};

const Devices& devices() {
  static const Devices* d = [] {
    auto* ds = new Devices();  // outlives static destructors (tensors freed late still find their device)
    const DriverApi& api = driver();
    if (!api.ok) {
      ds->error = api.reason;
      return ds;
    }
    int n = 0;
    CUresult r = api.cuDeviceGetCount(&n);
    if (r != CUDA_SUCCESS) {
      ds->error = "cuDeviceGetCount failed: " + error_text(r);
      return ds;
    }
    if (n == 0) ds->error = "the NVIDIA driver (" + api.source + ") sees no CUDA device";
    ds->count = n;
    ds->state = std::make_unique<DeviceState[]>(static_cast<size_t>(n));
    if (n > 0) share_view_kernels();
    return ds;
  }();
  return *d;
}

thread_local int t_device = 0;
// The device whose primary context is current on this thread (-1: none made current by Strata yet).
thread_local int t_ctx_device = -1;
// Current stream per device of this thread; a null entry means the default stream.
thread_local std::vector<CUstream> t_streams;
thread_local std::vector<bool> t_stream_set;

DeviceState& dstate(int device) { return devices().state[static_cast<size_t>(device)]; }

// Makes the primary context of `device` current on this thread (retained once per process).
// Always calls the driver (cheap): libraries on the runtime API (cuBLAS, NVRTC users) may have switched the
// current context since, so t_ctx_device is a record, not a cache.
void make_current(int device) {
  DeviceState& s = dstate(device);
  const DriverApi& api = driver();
  std::call_once(s.ctx_once, [&] { s.ctx_result = api.cuDevicePrimaryCtxRetain(&s.ctx, device); });
  check(s.ctx_result, "cuDevicePrimaryCtxRetain");
  check(api.cuCtxSetCurrent(s.ctx), "cuCtxSetCurrent");
  t_ctx_device = device;
}

}  // namespace

void lazy_init() {
  const Devices& d = devices();
  if (d.count == 0) throw Error("CUDA is not available: " + d.error);
}

int device_count() { return devices().count; }

void check_device(int device, const char* what) {
  lazy_init();
  STRATA_CHECK_INDEX(device >= 0 && device < device_count(), what, ": invalid CUDA device index ", device,
                     " (this process sees ", device_count(), " device", device_count() == 1 ? "" : "s", ")");
}

int resolve_device(int device) {
  if (device < 0) device = t_device;
  check_device(device, "cuda");
  return device;
}

int current_device() {
  lazy_init();
  return t_device;
}

void set_device(int device) {
  check_device(device, "set_device");
  make_current(device);
  t_device = device;
}

DeviceGuard::DeviceGuard(int device) {
  if (device < 0) return;
  check_device(device, "DeviceGuard");
  prev_ = t_device;
  prev_ctx_ = t_ctx_device;
  make_current(device);
  t_device = device;
}

DeviceGuard::~DeviceGuard() {
  if (prev_ < 0) return;
  t_device = prev_;
  // Only a context that was current before comes back: restoring "device 0" must not create its context on a
  // thread (or a process) that never used that device.
  if (prev_ctx_ < 0) return;
  try {
    make_current(prev_ctx_);
  } catch (...) {  // that context was current a moment ago; nothing to report from a destructor
  }
}

const DeviceProperties& device_properties(int device) {
  device = resolve_device(device);
  DeviceState& s = dstate(device);
  std::call_once(s.props_once, [&] {
    const DriverApi& api = driver();
    DeviceProperties& p = s.props;
    char name[256] = {};
    check(api.cuDeviceGetName(name, sizeof name, device), "cuDeviceGetName");
    p.name = name;
    check(api.cuDeviceTotalMem(&p.total_memory, device), "cuDeviceTotalMem");
    auto attr = [&](int a) {
      int v = 0;
      check(api.cuDeviceGetAttribute(&v, a, device), "cuDeviceGetAttribute");
      return v;
    };
    p.major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    p.minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    p.multi_processor_count = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    p.max_threads_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
    p.max_threads_per_multi_processor = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
    p.warp_size = attr(CU_DEVICE_ATTRIBUTE_WARP_SIZE);
    p.l2_cache_size = attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
    p.regs_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK);
    p.shared_memory_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
    p.shared_memory_per_block_optin = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    p.clock_rate_khz = attr(CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
  });
  return s.props;
}

std::pair<size_t, size_t> mem_get_info(int device) {
  DeviceGuard g(resolve_device(device));
  size_t free = 0, total = 0;
  check(driver().cuMemGetInfo(&free, &total), "cuMemGetInfo");
  return {free, total};
}

// ---- streams --------------------------------------------------------------------------------------------------
namespace {
std::mutex g_ids_mu;
std::vector<std::pair<CUstream, int64_t>>& stream_ids() {
  static auto* v = new std::vector<std::pair<CUstream, int64_t>>();
  return *v;
}
}  // namespace

int64_t Stream::id() const {
  if (!handle) return 0;
  std::lock_guard g(g_ids_mu);
  for (auto& [h, i] : stream_ids()) {
    if (h == handle) return i;
  }
  return -1;
}

bool Stream::query() const {
  DeviceGuard g(device);
  CUresult r = driver().cuStreamQuery(handle);
  if (r == CUDA_ERROR_NOT_READY) return false;
  check(r, "cuStreamQuery");
  return true;
}

void Stream::synchronize() const {
  DeviceGuard g(device);
  check(driver().cuStreamSynchronize(handle), "cuStreamSynchronize");
}

void Stream::wait(CUevent event) const {
  DeviceGuard g(device);
  check(driver().cuStreamWaitEvent(handle, event, 0), "cuStreamWaitEvent");
}

Stream default_stream(int device) { return Stream{nullptr, resolve_device(device)}; }

Stream current_stream(int device) {
  device = resolve_device(device);
  if (static_cast<int>(t_streams.size()) > device && t_stream_set[device]) return Stream{t_streams[device], device};
  return Stream{nullptr, device};
}

void set_current_stream(Stream s) {
  check_device(s.device, "set_current_stream");
  if (static_cast<int>(t_streams.size()) <= s.device) {
    t_streams.resize(static_cast<size_t>(device_count()), nullptr);
    t_stream_set.resize(static_cast<size_t>(device_count()), false);
  }
  t_streams[s.device] = s.handle;
  t_stream_set[s.device] = true;
}

Stream new_stream(int device) {
  device = resolve_device(device);
  DeviceState& s = dstate(device);
  std::call_once(s.pool_once, [&] {
    DeviceGuard g(device);
    std::lock_guard lk(g_ids_mu);
    for (auto& h : s.pool) {
      check(driver().cuStreamCreate(&h, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
      // Ids as torch numbers them: the device in the low bits, the pool slot above.
      stream_ids().emplace_back(h, static_cast<int64_t>(stream_ids().size() + 1) * 32 + device);
    }
  });
  return Stream{s.pool[s.next.fetch_add(1) % kStreamsPerPool], device};
}

void synchronize(int device) {
  DeviceGuard g(resolve_device(device));
  check(driver().cuCtxSynchronize(), "cuCtxSynchronize");
}

// ---- events ---------------------------------------------------------------------------------------------------
Event::Event(bool enable_timing) : timing_(enable_timing) {}

Event::~Event() {
  if (handle_ && available()) {
    try {
      DeviceGuard g(device_);
      driver().cuEventDestroy(handle_);
    } catch (...) {  // a destructor reports nothing
    }
  }
}

void Event::record(const Stream& s) {
  DeviceGuard g(s.device);
  if (!handle_) {
    check(driver().cuEventCreate(&handle_, timing_ ? CU_EVENT_DEFAULT : CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    device_ = s.device;
  }
  STRATA_CHECK(device_ == s.device, "Event.record: the event was created on cuda:", device_,
               " and cannot record a stream of cuda:", s.device);
  check(driver().cuEventRecord(handle_, s.handle), "cuEventRecord");
  recorded_ = true;
}

bool Event::query() const {
  if (!handle_) return true;  // never recorded: nothing to wait for, as torch
  DeviceGuard g(device_);
  CUresult r = driver().cuEventQuery(handle_);
  if (r == CUDA_ERROR_NOT_READY) return false;
  check(r, "cuEventQuery");
  return true;
}

void Event::synchronize() const {
  if (!handle_) return;
  DeviceGuard g(device_);
  check(driver().cuEventSynchronize(handle_), "cuEventSynchronize");
}

float Event::elapsed_time(const Event& end) const {
  STRATA_CHECK(timing_ && end.timing_, "elapsed_time: both events must be created with enable_timing=True");
  STRATA_CHECK(recorded() && end.recorded(), "elapsed_time: both events must be recorded before calculating ",
               "elapsed time");
  DeviceGuard g(device_);
  float ms = 0;
  CUresult r = driver().cuEventElapsedTime(&ms, handle_, end.handle_);
  STRATA_CHECK(r != CUDA_ERROR_NOT_READY, "elapsed_time: an event has not completed yet (synchronize it first)");
  check(r, "cuEventElapsedTime");
  return ms;
}

namespace {
std::atomic<int> g_sync_debug{0};
std::atomic<SyncWarnHandler> g_sync_warn{nullptr};
}  // namespace

void set_sync_debug_mode(int mode) {
  STRATA_CHECK_VALUE(mode >= 0 && mode <= 2, "set_sync_debug_mode: expected 0 (default), 1 (warn) or 2 (error), got ",
                     mode);
  g_sync_debug.store(mode);
}
int sync_debug_mode() { return g_sync_debug.load(std::memory_order_relaxed); }
void set_sync_warn_handler(SyncWarnHandler h) { g_sync_warn.store(h); }

void sync_point(const char* what) {
  const int mode = g_sync_debug.load(std::memory_order_relaxed);
  if (mode == 0) [[likely]]
    return;
  std::string msg = str("called a synchronizing CUDA operation: ", what);
  if (mode == 2) throw Error(msg);
  if (SyncWarnHandler h = g_sync_warn.load()) h(msg);
}

void stream_wait_stream(const Stream& waiter, const Stream& waitee) {
  if (waiter == waitee) return;
  Event e(false);
  e.record(waitee);
  waiter.wait(e.handle());
}

}  // namespace strata::cuda
