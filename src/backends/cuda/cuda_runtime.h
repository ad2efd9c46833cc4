// Devices, streams and events of the CUDA backend, over the driver table (driver_api.h).
//
// Note [Streams and the current stream]
// As in torch: each device has a default stream (the driver's legacy stream, handle 0) and a pool of
// kStreamsPerPool streams created on first use and handed out round-robin by new_stream(), never destroyed, so
// that a stream handle the allocator remembers stays valid. Each thread has a current device and, per device, a
// current stream (the default one until set); every operation is enqueued on the current stream of its device.
#pragma once

#include <cstdint>
#include <string>

#include "backends/cuda/driver_api.h"

namespace strata::cuda {

// Registers the view ops' device-generic kernels for CUDA (cuda_tensor_ops.cpp); run once by the first lazy_init.
void share_view_kernels();

// Throws strata::Error with the reason when no usable driver or no device is there.
void lazy_init();
// 0 without a usable driver.
int device_count();
int current_device();
void set_device(int device);
// Throws IndexError naming `what` for an index outside [0, device_count()).
void check_device(int device, const char* what);
// `device` itself, or the current device for -1.
int resolve_device(int device);

// RAII: makes `device` current for a scope (no-op for -1).
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = -1;
  int prev_ctx_ = -1;
};

struct DeviceProperties {
  std::string name;
  int major = 0, minor = 0;
  size_t total_memory = 0;
  int multi_processor_count = 0;
  int max_threads_per_block = 0;
  int max_threads_per_multi_processor = 0;
  int warp_size = 0;
  int l2_cache_size = 0;
  int regs_per_block = 0;
  int shared_memory_per_block = 0;
  int shared_memory_per_block_optin = 0;
  int clock_rate_khz = 0;
};
const DeviceProperties& device_properties(int device);
// (free, total) bytes of `device` as the driver reports them.
std::pair<size_t, size_t> mem_get_info(int device);

// A stream of a device: a plain value (Note [Streams and the current stream]).
struct Stream {
  CUstream handle = nullptr;
  int device = 0;
  bool operator==(const Stream& o) const { return handle == o.handle && device == o.device; }
  bool operator!=(const Stream& o) const { return !(*this == o); }
  // An id unique among this process's streams (0 for each default stream), as torch's stream_id.
  int64_t id() const;
  bool query() const;  // whether all work queued so far has completed
  void synchronize() const;
  void wait(CUevent event) const;
};

constexpr int kStreamsPerPool = 32;

Stream default_stream(int device = -1);
Stream current_stream(int device = -1);
void set_current_stream(Stream s);
// The next stream of the device's pool.
Stream new_stream(int device = -1);
// Waits for all work on `device` (cuCtxSynchronize).
void synchronize(int device = -1);

// An event, owned: destroyed with the object.
class Event {
 public:
  explicit Event(bool enable_timing = false);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  // Records on `s` (creating the driver's event on s's device at the first record).
  void record(const Stream& s);
  bool query() const;
  void synchronize() const;
  // Milliseconds from this event to `end`; both must have timing on and have completed.
  float elapsed_time(const Event& end) const;
  bool recorded() const { return handle_ != nullptr && recorded_; }
  CUevent handle() const { return handle_; }
  int device() const { return device_; }
  bool timing() const { return timing_; }

 private:
  CUevent handle_ = nullptr;
  int device_ = -1;
  bool timing_ = false;
  bool recorded_ = false;
};

// Note [Sync debug mode]
// strata.cuda.set_sync_debug_mode: 0 off, 1 warn, 2 error at each implicit synchronization of the host with a
// device (a copy to the host: .cpu(), .item(), .tolist(), print, bool(); a blocking copy from the host). Explicit
// waits (synchronize(), Stream/Event.synchronize) are what the user asked for and are not reported. "warn" goes
// through a handler the Python binding installs (a UserWarning at the user's line); "error" throws.
void set_sync_debug_mode(int mode);
int sync_debug_mode();
using SyncWarnHandler = void (*)(const std::string& message);
void set_sync_warn_handler(SyncWarnHandler h);
void sync_point(const char* what);

// Makes `waiter` wait for all work queued on `waitee` so far (an event in between).
void stream_wait_stream(const Stream& waiter, const Stream& waitee);

}  // namespace strata::cuda
