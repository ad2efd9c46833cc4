// Allocator interface, one per device type. The CUDA backend plugs its caching
// allocator in through set_allocator without touching the core.
#pragma once

#include <cstddef>
#include <memory>

#include "core/device.h"

namespace strata {

// Owning pointer to device memory. The deleter gets `ctx`, which is the
// pointer itself for allocator memory or an owner object for memory borrowed
// from elsewhere (NumPy arrays, DLPack capsules).
class DataPtr {
 public:
  using Deleter = void (*)(void* ctx);
  DataPtr() = default;
  DataPtr(void* ptr, void* ctx, Deleter d) : ptr_(ptr), ctx_(ctx), deleter_(d) {}
  DataPtr(DataPtr&& o) noexcept : ptr_(o.ptr_), ctx_(o.ctx_), deleter_(o.deleter_) { o.deleter_ = nullptr; }
  DataPtr& operator=(DataPtr&& o) noexcept {
    if (this != &o) {
      reset();
      ptr_ = o.ptr_;
      ctx_ = o.ctx_;
      deleter_ = o.deleter_;
      o.deleter_ = nullptr;
    }
    return *this;
  }
  DataPtr(const DataPtr&) = delete;
  DataPtr& operator=(const DataPtr&) = delete;
  ~DataPtr() { reset(); }
  void* get() const { return ptr_; }
  void reset() {
    if (deleter_) deleter_(ctx_);
    deleter_ = nullptr;
    ptr_ = ctx_ = nullptr;
  }

 private:
  void* ptr_ = nullptr;
  void* ctx_ = nullptr;
  Deleter deleter_ = nullptr;
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  // Throws OutOfMemoryError (never returns null) when nbytes > 0 cannot be had.
  virtual DataPtr allocate(size_t nbytes) = 0;
};

Allocator* get_allocator(DeviceType t);
// Installs an allocator for a device type; the caller keeps it alive.
void set_allocator(DeviceType t, Allocator* a);

constexpr size_t kCpuAlignment = 64;

// Statistics of the CPU allocator, for tests and the profiler.
struct AllocatorStats {
  int64_t allocated_bytes = 0;
  int64_t peak_bytes = 0;
  int64_t num_allocs = 0;
};
AllocatorStats cpu_allocator_stats();
void reset_cpu_peak_stats();
// Returns cached free blocks of the CPU allocator to the system.
void empty_cpu_cache();

}  // namespace strata
