#include "core/allocator.h"

#include <atomic>
#include <cstdlib>
#include <mutex>

#include "core/error.h"

namespace strata {

namespace {

std::atomic<int64_t> g_allocated{0}, g_peak{0}, g_count{0};

// The real allocation size is stored in a 64-byte header in front of the
// block so the deleter (a plain function pointer) can account for it.
void cpu_free(void* p) {
  if (!p) return;
  char* base = static_cast<char*>(p) - kCpuAlignment;
  int64_t n = *reinterpret_cast<int64_t*>(base);
  g_allocated.fetch_sub(n, std::memory_order_relaxed);
  std::free(base);
}

class CpuAllocator final : public Allocator {
 public:
  DataPtr allocate(size_t nbytes) override {
    if (nbytes == 0) return DataPtr();
    size_t total = 0;
    if (__builtin_add_overflow(nbytes, kCpuAlignment, &total) || total > (size_t(1) << 48)) {
      throw OutOfMemoryError(str("CPU out of memory: tried to allocate ", nbytes, " bytes"));
    }
    // Round up to a multiple of the alignment, as aligned_alloc requires.
    total = (total + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
    void* base = std::aligned_alloc(kCpuAlignment, total);
    if (!base) {
      throw OutOfMemoryError(str("CPU out of memory: tried to allocate ", nbytes, " bytes (",
                                 static_cast<double>(nbytes) / (1 << 30), " GiB)"));
    }
    *static_cast<int64_t*>(base) = static_cast<int64_t>(nbytes);
    int64_t now = g_allocated.fetch_add(nbytes, std::memory_order_relaxed) + nbytes;
    int64_t peak = g_peak.load(std::memory_order_relaxed);
    while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
    }
    g_count.fetch_add(1, std::memory_order_relaxed);
    void* p = static_cast<char*>(base) + kCpuAlignment;
    return DataPtr(p, p, &cpu_free);
  }
};

// Meta tensors have shapes and dtypes but no memory.
class MetaAllocator final : public Allocator {
 public:
  DataPtr allocate(size_t) override { return DataPtr(); }
};

CpuAllocator g_cpu;
MetaAllocator g_meta;
std::atomic<Allocator*> g_allocators[kNumDeviceTypes] = {&g_cpu, nullptr, &g_meta, nullptr};

}  // namespace

Allocator* get_allocator(DeviceType t) {
  Allocator* a = g_allocators[static_cast<int>(t)].load(std::memory_order_acquire);
  STRATA_CHECK(a != nullptr, "no allocator is registered for device type ", device_type_name(t),
               " (is its backend built and loaded?)");
  return a;
}

void set_allocator(DeviceType t, Allocator* a) { g_allocators[static_cast<int>(t)].store(a); }

AllocatorStats cpu_allocator_stats() {
  return {g_allocated.load(), g_peak.load(), g_count.load()};
}
void reset_cpu_peak_stats() { g_peak.store(g_allocated.load()); }

}  // namespace strata
