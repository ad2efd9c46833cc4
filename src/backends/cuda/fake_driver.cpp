// The fake CUDA driver (Note [Fake driver semantics] in fake_driver.h).
#include "backends/cuda/fake_driver.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace strata::cuda::fake {

namespace {

struct FakeEvent;

// One queued operation: either work (a copy, a memset, a kernel), the completion of an event, or a wait for one.
struct Op {
  std::function<CUresult()> work;
  FakeEvent* completes = nullptr;
  uint64_t generation = 0;  // of `completes`: a later record supersedes this one
  FakeEvent* waits_for = nullptr;
  uint64_t wait_generation = 0;
};

struct FakeStream {
  int device = 0;
  std::deque<Op> ops;
  CUresult sticky = CUDA_SUCCESS;  // the first failure of queued work, reported by the next sync
};

struct FakeEvent {
  bool timing = true;
  uint64_t generation = 0;      // records so far
  uint64_t completed = 0;       // the generation that last completed
  FakeStream* stream = nullptr; // where the latest record was queued
  double time_ms = 0;
};

struct Allocation {
  size_t size;
  int device;
};

struct Device {
  std::string name;
  size_t total = 0;
  size_t used = 0;
  int64_t live = 0;
  std::unique_ptr<FakeStream> legacy = std::make_unique<FakeStream>();
};

struct State {
  std::recursive_mutex mu;
  std::vector<Device> devices;
  std::map<uintptr_t, Allocation> allocations;  // base -> allocation
  std::map<uintptr_t, size_t> pinned;            // page-locked host blocks: base -> size
  std::unordered_map<FakeStream*, std::unique_ptr<FakeStream>> streams;
  std::unordered_map<FakeEvent*, std::unique_ptr<FakeEvent>> events;
  std::vector<std::unique_ptr<FakeEvent>> destroyed_events;
  std::map<std::string, HostKernel> kernels;
  bool manual = false;
  bool initialized = false;
  int64_t alloc_calls = 0;
};

State& state() {
  static State* s = [] {
    auto* st = new State();  // outlives static destructors
    int n = 2;
    size_t mem = size_t(8) << 30;
    if (const char* e = std::getenv("STRATA_CUDA_FAKE_DEVICES")) n = std::max(0, std::atoi(e));
    if (const char* e = std::getenv("STRATA_CUDA_FAKE_MEMORY")) mem = std::strtoull(e, nullptr, 10);
    st->devices.resize(n);
    for (int i = 0; i < n; ++i) {
      st->devices[i].name = "Strata fake device " + std::to_string(i);
      st->devices[i].total = mem;
    }
    return st;
  }();
  return *s;
}

thread_local int t_device = -1;  // the device whose (primary) context is current

double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

// The queue behind a handle: 0 is the legacy default stream of the current device.
FakeStream* stream_of(CUstream s) {
  State& st = state();
  if (!s) {
    if (t_device < 0 || t_device >= static_cast<int>(st.devices.size())) return nullptr;
    return st.devices[t_device].legacy.get();
  }
  auto it = st.streams.find(reinterpret_cast<FakeStream*>(s));
  return it == st.streams.end() ? nullptr : it->second.get();
}

FakeEvent* event_of(CUevent e) {
  auto& evs = state().events;
  auto it = evs.find(reinterpret_cast<FakeEvent*>(e));
  return it == evs.end() ? nullptr : it->second.get();
}

bool event_done(const FakeEvent* e) { return e->completed == e->generation; }

// Whether [p, p + n) lies inside one live allocation.
bool in_live_allocation(uintptr_t p, size_t n) {
  auto& allocs = state().allocations;
  auto it = allocs.upper_bound(p);
  if (it == allocs.begin()) return false;
  --it;
  return p >= it->first && p + n <= it->first + it->second.size;
}

bool drain_until(FakeStream* s, const FakeEvent* target, uint64_t gen, size_t max_ops, size_t* ran);

// Runs the head of `s`; returns false when it is a wait that cannot proceed without running another stream
// (`follow` says whether to run that stream up to the event).
thread_local int t_follow_depth = 0;  // nested runs of other streams (a cycle of waits would recurse forever)

bool step(FakeStream* s, bool follow) {
  Op& op = s->ops.front();
  if (op.waits_for) {
    FakeEvent* e = op.waits_for;
    if (e->completed < op.wait_generation) {
      if (!follow || !e->stream || e->stream == s || t_follow_depth > 64) return false;
      size_t ran = 0;
      ++t_follow_depth;
      drain_until(e->stream, e, op.wait_generation, SIZE_MAX, &ran);
      --t_follow_depth;
      if (e->completed < op.wait_generation) return false;
    }
  } else if (op.completes) {
    FakeEvent* e = op.completes;
    if (op.generation > e->completed) {
      e->completed = op.generation;
      e->time_ms = now_ms();
    }
  } else if (op.work) {
    CUresult r = op.work();
    if (r != CUDA_SUCCESS && s->sticky == CUDA_SUCCESS) s->sticky = r;
  }
  s->ops.pop_front();
  return true;
}

// Runs `s` until `target` reaches generation `gen` (or to its end when target is null), at most max_ops ops.
bool drain_until(FakeStream* s, const FakeEvent* target, uint64_t gen, size_t max_ops, size_t* ran) {
  while (!s->ops.empty() && *ran < max_ops) {
    if (target && target->completed >= gen) return true;
    if (!step(s, /*follow=*/target != nullptr || max_ops == SIZE_MAX)) return false;
    ++*ran;
  }
  return target ? target->completed >= gen : s->ops.empty();
}

CUresult sync_stream(FakeStream* s) {
  size_t ran = 0;
  drain_until(s, nullptr, 0, SIZE_MAX, &ran);
  CUresult r = s->sticky;
  s->sticky = CUDA_SUCCESS;
  // Work left means a wait that can never be satisfied (a cycle of waits, or an event re-recorded behind its
  // waiter): a GPU would hang; the fake says so.
  if (r == CUDA_SUCCESS && !s->ops.empty()) r = CUDA_ERROR_NOT_READY;
  return r;
}

CUresult need_context() {
  State& st = state();
  if (!st.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (t_device < 0) return CUDA_ERROR_INVALID_CONTEXT;
  return CUDA_SUCCESS;
}

// ---- the driver's functions ------------------------------------------------------------------------------------
CUresult f_cuInit(unsigned) {
  std::lock_guard g(state().mu);
  state().initialized = true;
  return CUDA_SUCCESS;
}
CUresult f_cuDriverGetVersion(int* v) {
  *v = 13000;
  return CUDA_SUCCESS;
}
CUresult f_cuDeviceGetCount(int* n) {
  State& st = state();
  if (!st.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  *n = static_cast<int>(st.devices.size());
  return CUDA_SUCCESS;
}
CUresult f_cuDeviceGet(CUdevice* d, int ordinal) {
  if (ordinal < 0 || ordinal >= static_cast<int>(state().devices.size())) return CUDA_ERROR_INVALID_DEVICE;
  *d = ordinal;
  return CUDA_SUCCESS;
}
bool valid_device(CUdevice d) { return d >= 0 && d < static_cast<int>(state().devices.size()); }
CUresult f_cuDeviceGetName(char* name, int len, CUdevice d) {
  if (!valid_device(d)) return CUDA_ERROR_INVALID_DEVICE;
  if (len <= 0) return CUDA_ERROR_INVALID_VALUE;
  std::snprintf(name, static_cast<size_t>(len), "%s", state().devices[d].name.c_str());
  return CUDA_SUCCESS;
}
CUresult f_cuDeviceGetAttribute(int* v, int attr, CUdevice d) {
  if (!valid_device(d)) return CUDA_ERROR_INVALID_DEVICE;
  switch (attr) {  // an H100 SXM's figures
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *v = 48 * 1024; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *v = 32; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: *v = 65536; break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: *v = 1980000; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = 132; break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: *v = 50 * 1024 * 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: *v = 2048; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *v = 227 * 1024; break;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}
CUresult f_cuDeviceTotalMem(size_t* bytes, CUdevice d) {
  std::lock_guard g(state().mu);
  if (!valid_device(d)) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = state().devices[d].total;
  return CUDA_SUCCESS;
}
CUresult f_cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice d) {
  if (!state().initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (!valid_device(d)) return CUDA_ERROR_INVALID_DEVICE;
  *ctx = reinterpret_cast<CUcontext>(static_cast<uintptr_t>(d + 1));
  return CUDA_SUCCESS;
}
CUresult f_cuCtxSetCurrent(CUcontext ctx) {
  int d = static_cast<int>(reinterpret_cast<uintptr_t>(ctx)) - 1;
  if (ctx && !valid_device(d)) return CUDA_ERROR_INVALID_CONTEXT;
  t_device = ctx ? d : -1;
  return CUDA_SUCCESS;
}
CUresult f_cuCtxSynchronize() {
  State& st = state();
  std::lock_guard g(st.mu);
  if (CUresult r = need_context()) return r;
  CUresult first = sync_stream(st.devices[t_device].legacy.get());
  // Streams may wait on each other: run them all while any makes progress.
  for (bool again = true; again;) {
    again = false;
    for (auto& [k, s] : st.streams) {
      if (s->device != t_device || s->ops.empty()) continue;
      const size_t before = s->ops.size();
      CUresult r = sync_stream(s.get());
      if (r != CUDA_ERROR_NOT_READY && first == CUDA_SUCCESS) first = r;
      again = again || s->ops.size() < before;
    }
  }
  for (auto& [k, s] : st.streams) {
    if (s->device == t_device && !s->ops.empty() && first == CUDA_SUCCESS) first = CUDA_ERROR_NOT_READY;
  }
  return first;
}
CUresult f_cuMemGetInfo(size_t* free, size_t* total) {
  State& st = state();
  std::lock_guard g(st.mu);
  if (CUresult r = need_context()) return r;
  const Device& d = st.devices[t_device];
  *total = d.total;
  *free = d.total > d.used ? d.total - d.used : 0;
  return CUDA_SUCCESS;
}
CUresult f_cuMemAlloc(CUdeviceptr* p, size_t bytes) {
  State& st = state();
  std::lock_guard g(st.mu);
  if (CUresult r = need_context()) return r;
  ++st.alloc_calls;
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  Device& d = st.devices[t_device];
  if (bytes > d.total || d.used > d.total - bytes) return CUDA_ERROR_OUT_OF_MEMORY;
  void* mem = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (!mem) return CUDA_ERROR_OUT_OF_MEMORY;
  std::memset(mem, kAllocPoison, bytes);
  d.used += bytes;
  ++d.live;
  *p = reinterpret_cast<uintptr_t>(mem);
  st.allocations[*p] = Allocation{bytes, t_device};
  return CUDA_SUCCESS;
}
CUresult f_cuMemFree(CUdeviceptr p) {
  State& st = state();
  std::lock_guard g(st.mu);
  auto it = st.allocations.find(p);
  if (it == st.allocations.end()) return CUDA_ERROR_INVALID_VALUE;
  Device& d = st.devices[it->second.device];
  d.used -= it->second.size;
  --d.live;
  std::memset(reinterpret_cast<void*>(p), kFreePoison, it->second.size);
  st.allocations.erase(it);
  std::free(reinterpret_cast<void*>(p));
  return CUDA_SUCCESS;
}

CUresult f_cuMemHostAlloc(void** p, size_t bytes, unsigned) {
  State& st = state();
  std::lock_guard g(st.mu);
  if (!st.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  void* mem = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  if (!mem) return CUDA_ERROR_OUT_OF_MEMORY;
  *p = mem;
  st.pinned[reinterpret_cast<uintptr_t>(mem)] = bytes;
  return CUDA_SUCCESS;
}
CUresult f_cuMemFreeHost(void* p) {
  State& st = state();
  std::lock_guard g(st.mu);
  auto it = st.pinned.find(reinterpret_cast<uintptr_t>(p));
  if (it == st.pinned.end()) return CUDA_ERROR_INVALID_VALUE;
  std::memset(p, kFreePoison, it->second);
  st.pinned.erase(it);
  std::free(p);
  return CUDA_SUCCESS;
}
bool is_pinned_range(const void* p, size_t n) {
  auto& pinned = state().pinned;
  const auto a = reinterpret_cast<uintptr_t>(p);
  auto it = pinned.upper_bound(a);
  if (it == pinned.begin()) return false;
  --it;
  return a >= it->first && a + n <= it->first + it->second;
}

// Queues `work` on `s` after checking the device ranges it touches now; it checks them again when it runs.
CUresult enqueue(CUstream s, std::vector<std::pair<uintptr_t, size_t>> ranges, std::function<void()> work) {
  State& st = state();
  std::lock_guard g(st.mu);
  if (CUresult r = need_context()) return r;
  FakeStream* fs = stream_of(s);
  if (!fs) return CUDA_ERROR_INVALID_HANDLE;
  for (auto& [p, n] : ranges) {
    if (n && !in_live_allocation(p, n)) return CUDA_ERROR_INVALID_VALUE;
  }
  Op op;
  op.work = [ranges = std::move(ranges), work = std::move(work)]() -> CUresult {
    for (auto& [p, n] : ranges) {
      if (n && !in_live_allocation(p, n)) return CUDA_ERROR_ILLEGAL_ADDRESS;
    }
    work();
    return CUDA_SUCCESS;
  };
  fs->ops.push_back(std::move(op));
  return CUDA_SUCCESS;
}

CUresult f_cuMemcpyHtoDAsync(CUdeviceptr dst, const void* src, size_t n, CUstream s) {
  // From page-locked memory the copy reads the source when it runs (truly asynchronous: the caller must keep it
  // intact until then, which the fake lets tests see); from pageable memory the driver copies the source before
  // returning (the caller may reuse it at once).
  bool pinned;
  {
    std::lock_guard g(state().mu);
    pinned = is_pinned_range(src, n);
  }
  if (pinned) return enqueue(s, {{dst, n}}, [=] { std::memcpy(reinterpret_cast<void*>(dst), src, n); });
  auto staged = std::make_shared<std::vector<unsigned char>>(static_cast<const unsigned char*>(src),
                                                             static_cast<const unsigned char*>(src) + n);
  return enqueue(s, {{dst, n}}, [=] { std::memcpy(reinterpret_cast<void*>(dst), staged->data(), n); });
}
CUresult f_cuMemcpyDtoHAsync(void* dst, CUdeviceptr src, size_t n, CUstream s) {
  return enqueue(s, {{src, n}}, [=] { std::memcpy(dst, reinterpret_cast<const void*>(src), n); });
}
CUresult f_cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  return enqueue(s, {{dst, n}, {src, n}},
                 [=] { std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n); });
}
CUresult f_cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream s) {
  return enqueue(s, {{dst, n}}, [=] { std::memset(reinterpret_cast<void*>(dst), v, n); });
}
CUresult f_cuStreamCreate(CUstream* out, unsigned) {
  State& st = state();
  std::lock_guard g(st.mu);
  if (CUresult r = need_context()) return r;
  auto s = std::make_unique<FakeStream>();
  s->device = t_device;
  *out = reinterpret_cast<CUstream>(s.get());
  st.streams[s.get()] = std::move(s);
  return CUDA_SUCCESS;
}
CUresult f_cuStreamDestroy(CUstream s) {
  State& st = state();
  std::lock_guard g(st.mu);
  FakeStream* fs = stream_of(s);
  if (!fs || !s) return CUDA_ERROR_INVALID_HANDLE;
  sync_stream(fs);  // the driver finishes queued work of a destroyed stream
  for (auto& [k, e] : st.events) {
    if (e->stream == fs) e->stream = nullptr;
  }
  st.streams.erase(fs);
  return CUDA_SUCCESS;
}
CUresult f_cuStreamSynchronize(CUstream s) {
  std::lock_guard g(state().mu);
  if (CUresult r = need_context()) return r;
  FakeStream* fs = stream_of(s);
  if (!fs) return CUDA_ERROR_INVALID_HANDLE;
  return sync_stream(fs);
}
CUresult f_cuStreamQuery(CUstream s) {
  State& st = state();
  std::lock_guard g(st.mu);
  if (CUresult r = need_context()) return r;
  FakeStream* fs = stream_of(s);
  if (!fs) return CUDA_ERROR_INVALID_HANDLE;
  if (!st.manual) return sync_stream(fs);
  return fs->ops.empty() ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
CUresult f_cuStreamWaitEvent(CUstream s, CUevent e, unsigned) {
  std::lock_guard g(state().mu);
  if (CUresult r = need_context()) return r;
  FakeStream* fs = stream_of(s);
  FakeEvent* fe = event_of(e);
  if (!fs || !fe) return CUDA_ERROR_INVALID_HANDLE;
  if (event_done(fe)) return CUDA_SUCCESS;  // nothing to wait for
  Op op;
  op.waits_for = fe;
  op.wait_generation = fe->generation;
  fs->ops.push_back(std::move(op));
  return CUDA_SUCCESS;
}
CUresult f_cuEventCreate(CUevent* out, unsigned flags) {
  State& st = state();
  std::lock_guard g(st.mu);
  if (CUresult r = need_context()) return r;
  auto e = std::make_unique<FakeEvent>();
  e->timing = !(flags & CU_EVENT_DISABLE_TIMING);
  *out = reinterpret_cast<CUevent>(e.get());
  st.events[e.get()] = std::move(e);
  return CUDA_SUCCESS;
}
CUresult f_cuEventRecord(CUevent e, CUstream s) {
  std::lock_guard g(state().mu);
  if (CUresult r = need_context()) return r;
  FakeStream* fs = stream_of(s);
  FakeEvent* fe = event_of(e);
  if (!fs || !fe) return CUDA_ERROR_INVALID_HANDLE;
  Op op;
  op.completes = fe;
  op.generation = ++fe->generation;
  fe->stream = fs;
  fs->ops.push_back(std::move(op));
  return CUDA_SUCCESS;
}
CUresult f_cuEventQuery(CUevent e) {
  State& st = state();
  std::lock_guard g(st.mu);
  FakeEvent* fe = event_of(e);
  if (!fe) return CUDA_ERROR_INVALID_HANDLE;
  if (!event_done(fe) && !st.manual && fe->stream) {
    size_t ran = 0;
    drain_until(fe->stream, fe, fe->generation, SIZE_MAX, &ran);
  }
  return event_done(fe) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
CUresult f_cuEventSynchronize(CUevent e) {
  std::lock_guard g(state().mu);
  FakeEvent* fe = event_of(e);
  if (!fe) return CUDA_ERROR_INVALID_HANDLE;
  if (!event_done(fe) && fe->stream) {
    size_t ran = 0;
    drain_until(fe->stream, fe, fe->generation, SIZE_MAX, &ran);
  }
  return event_done(fe) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
CUresult f_cuEventElapsedTime(float* ms, CUevent a, CUevent b) {
  std::lock_guard g(state().mu);
  FakeEvent* ea = event_of(a);
  FakeEvent* eb = event_of(b);
  if (!ea || !eb || !ea->timing || !eb->timing || ea->generation == 0 || eb->generation == 0) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  if (!event_done(ea) || !event_done(eb)) return CUDA_ERROR_NOT_READY;
  *ms = static_cast<float>(eb->time_ms - ea->time_ms);
  return CUDA_SUCCESS;
}
CUresult f_cuEventDestroy(CUevent e) {
  State& st = state();
  std::lock_guard g(st.mu);
  FakeEvent* fe = event_of(e);
  if (!fe) return CUDA_ERROR_INVALID_HANDLE;
  // Queued records and waits still point at it (the driver lets a destroyed event's pending record and waits
  // complete): the handle becomes invalid and the object is kept.
  auto it = st.events.find(fe);
  st.destroyed_events.push_back(std::move(it->second));
  st.events.erase(it);
  return CUDA_SUCCESS;
}
struct FakeModule {};
CUresult f_cuModuleLoadData(CUmodule* m, const void* image) {
  if (!image) return CUDA_ERROR_INVALID_VALUE;
  *m = reinterpret_cast<CUmodule>(new FakeModule());
  return CUDA_SUCCESS;
}
CUresult f_cuModuleUnload(CUmodule m) {
  delete reinterpret_cast<FakeModule*>(m);
  return CUDA_SUCCESS;
}
CUresult f_cuModuleGetFunction(CUfunction* f, CUmodule, const char* name) {
  State& st = state();
  std::lock_guard g(st.mu);
  auto it = st.kernels.find(name);
  if (it == st.kernels.end()) return CUDA_ERROR_NOT_FOUND;
  *f = reinterpret_cast<CUfunction>(it->second);
  return CUDA_SUCCESS;
}
CUresult f_cuLaunchKernel(CUfunction fn, unsigned gx, unsigned, unsigned, unsigned bx, unsigned, unsigned, unsigned,
                          CUstream s, void** params, void**) {
  if (!fn) return CUDA_ERROR_INVALID_HANDLE;
  auto k = reinterpret_cast<HostKernel>(fn);
  // The parameters are read now, as the driver copies them at launch.
  return enqueue(s, {}, k(params, gx, bx));
}
CUresult f_cuGetErrorName(CUresult r, const char** s) {
  switch (r) {
    case CUDA_SUCCESS: *s = "CUDA_SUCCESS"; break;
    case CUDA_ERROR_INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *s = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case CUDA_ERROR_NOT_INITIALIZED: *s = "CUDA_ERROR_NOT_INITIALIZED"; break;
    case CUDA_ERROR_NO_DEVICE: *s = "CUDA_ERROR_NO_DEVICE"; break;
    case CUDA_ERROR_INVALID_DEVICE: *s = "CUDA_ERROR_INVALID_DEVICE"; break;
    case CUDA_ERROR_INVALID_CONTEXT: *s = "CUDA_ERROR_INVALID_CONTEXT"; break;
    case CUDA_ERROR_INVALID_HANDLE: *s = "CUDA_ERROR_INVALID_HANDLE"; break;
    case CUDA_ERROR_NOT_FOUND: *s = "CUDA_ERROR_NOT_FOUND"; break;
    case CUDA_ERROR_NOT_READY: *s = "CUDA_ERROR_NOT_READY"; break;
    case CUDA_ERROR_ILLEGAL_ADDRESS: *s = "CUDA_ERROR_ILLEGAL_ADDRESS"; break;
    default: *s = nullptr; return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}
CUresult f_cuGetErrorString(CUresult r, const char** s) {
  switch (r) {
    case CUDA_SUCCESS: *s = "no error"; break;
    case CUDA_ERROR_INVALID_VALUE: *s = "invalid argument"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *s = "out of memory"; break;
    case CUDA_ERROR_NOT_INITIALIZED: *s = "initialization error"; break;
    case CUDA_ERROR_NO_DEVICE: *s = "no CUDA-capable device is detected"; break;
    case CUDA_ERROR_INVALID_DEVICE: *s = "invalid device ordinal"; break;
    case CUDA_ERROR_INVALID_CONTEXT: *s = "invalid device context"; break;
    case CUDA_ERROR_INVALID_HANDLE: *s = "invalid resource handle"; break;
    case CUDA_ERROR_NOT_FOUND: *s = "named symbol not found"; break;
    case CUDA_ERROR_NOT_READY: *s = "device not ready"; break;
    case CUDA_ERROR_ILLEGAL_ADDRESS: *s = "an illegal memory access was encountered"; break;
    default: *s = nullptr; return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

}  // namespace

void fill_table(DriverApi& api) {
#define STRATA_FAKE_FN(name, sym, ret, params) api.name = &f_##name;
  STRATA_CUDA_DRIVER_FNS(STRATA_FAKE_FN)
#undef STRATA_FAKE_FN
  api.is_fake = true;
  api.source = "fake";
}

size_t run_pending(CUstream s, size_t max_ops) {
  std::lock_guard g(state().mu);
  FakeStream* fs = stream_of(s);
  if (!fs) return 0;
  size_t ran = 0;
  while (!fs->ops.empty() && ran < max_ops && step(fs, /*follow=*/false)) ++ran;
  return ran;
}

size_t pending(CUstream s) {
  std::lock_guard g(state().mu);
  FakeStream* fs = stream_of(s);
  return fs ? fs->ops.size() : 0;
}

void set_manual_progress(bool manual) {
  std::lock_guard g(state().mu);
  state().manual = manual;
}
bool manual_progress() { return state().manual; }

void set_total_memory(int device, size_t bytes) {
  std::lock_guard g(state().mu);
  if (valid_device(device)) state().devices[device].total = bytes;
}
size_t used_memory(int device) {
  std::lock_guard g(state().mu);
  return valid_device(device) ? state().devices[device].used : 0;
}
int64_t live_allocations(int device) {
  std::lock_guard g(state().mu);
  return valid_device(device) ? state().devices[device].live : 0;
}
int64_t alloc_calls() {
  std::lock_guard g(state().mu);
  return state().alloc_calls;
}
void register_kernel(const std::string& name, HostKernel fn) {
  std::lock_guard g(state().mu);
  state().kernels[name] = fn;
}
CUresult enqueue_host_work(CUstream s, std::vector<std::pair<uintptr_t, size_t>> ranges, std::function<void()> work) {
  return enqueue(s, std::move(ranges), std::move(work));
}

}  // namespace strata::cuda::fake
