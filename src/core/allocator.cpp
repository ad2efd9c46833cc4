#include "core/allocator.h"

#include <sys/mman.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "core/error.h"
#include "core/hot.h"

namespace strata {

namespace {

std::atomic<int64_t> g_allocated{0}, g_peak{0}, g_count{0};

// Note [CPU block cache]
// Blocks of at least kMapMin bytes are mapped by this allocator itself (mmap,
// rounded to whole pages, 64 KiB above 1 MiB) rather than taken from glibc,
// and kept on free for reuse by requests of the same rounded size, up to a cap
// on cached bytes; when a mapping fails, the cache is emptied and the mapping
// retried before reporting OOM. Why both:
// - reuse: a fresh block costs a page fault per 4 KiB on first touch, which
//   for a 128 MiB elementwise result is as much time as the arithmetic itself
//   (glibc hands blocks this big straight back to the kernel on free);
// - footprint: in glibc's heap, activation-sized blocks (64 KiB - 1 MiB)
//   interleave with the interpreter's and the libraries' small allocations, and
//   the holes they leave on free are neither reused for the next step's blocks
//   nor returned. On the digits CNN's training step (examples/train_digits.py)
//   the heap grew 6-10 MiB over the first steps for a 2.5 MiB peak of live
//   tensors. A block in the cache occupies exactly the pages it had touched,
//   and a training step asks for the same sizes every step, so its blocks come
//   back from the cache. (A block always spans whole pages; at 64 KiB and up
//   that is at most 6% over the request.)
constexpr size_t kMapMin = size_t(64) << 10;
constexpr size_t kPage = 4096;
constexpr size_t kLargeMin = size_t(1) << 20;
constexpr size_t kLargeGranule = size_t(1) << 16;

size_t cache_limit() {
  static const size_t limit = [] {
    if (const char* e = std::getenv("STRATA_CPU_CACHE_BYTES")) return static_cast<size_t>(std::strtoull(e, nullptr, 10));
    return size_t(2) << 30;
  }();
  return limit;
}

void* map_block(size_t rounded) {
  void* p = mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}
void unmap_block(void* base, size_t rounded) { munmap(base, rounded); }

struct BlockCache {
  std::mutex mu;
  std::multimap<size_t, void*> free_blocks;  // rounded size -> base pointer
  size_t cached_bytes = 0;

  // The smallest cached block of at least `rounded` bytes and less than twice
  // that (a block a little bigger than asked for serves as well as an exact
  // one, and keeps tensors whose sizes drift from piling up distinct sizes in
  // the cache); its size goes to *size.
  void* take(size_t rounded, size_t* size) {
    std::lock_guard<std::mutex> g(mu);
    auto it = free_blocks.lower_bound(rounded);
    if (it == free_blocks.end() || it->first >= 2 * rounded) return nullptr;
    void* p = it->second;
    *size = it->first;
    cached_bytes -= it->first;
    free_blocks.erase(it);
    return p;
  }
  bool put(size_t rounded, void* base) {
    std::lock_guard<std::mutex> g(mu);
    if (cached_bytes + rounded > cache_limit()) return false;
    free_blocks.emplace(rounded, base);
    cached_bytes += rounded;
    return true;
  }
  void release_all() {
    std::lock_guard<std::mutex> g(mu);
    for (auto& [sz, p] : free_blocks) unmap_block(p, sz);
    free_blocks.clear();
    cached_bytes = 0;
  }
};

BlockCache& cache() {
  static BlockCache* c = new BlockCache();  // outlives static destructors of tensors
  return *c;
}

// Note [CPU small-block cache]
// glibc's aligned_alloc + free of a ~100-byte block costs several hundred
// instructions (memalign's slow path splits a bigger chunk to align it), which
// was ~10 % of `a + b` on 4 floats. Blocks up to kSmallMax rounded bytes are
// therefore kept on free in per-thread LIFO lists, one per 64-byte size class,
// and handed out again without locking. A block freed on another thread than
// the one that allocated it simply joins that thread's lists. The lists are
// bounded (kSmallPerClass blocks per class, kSmallMaxCached bytes per thread),
// freed at thread exit, and emptied by empty_cpu_cache() on the calling thread.
constexpr size_t kSmallMax = 4096;
constexpr int kSmallClasses = static_cast<int>(kSmallMax / kCpuAlignment);
constexpr int kSmallPerClass = 32;
constexpr size_t kSmallMaxCached = size_t(1) << 20;

struct SmallCache {
  void* blocks[kSmallClasses][kSmallPerClass];
  int count[kSmallClasses] = {};
  size_t cached_bytes = 0;

  static int cls(size_t rounded) { return static_cast<int>(rounded / kCpuAlignment) - 1; }
  void* take(size_t rounded) {
    int c = cls(rounded);
    if (count[c] == 0) return nullptr;
    cached_bytes -= rounded;
    return blocks[c][--count[c]];
  }
  bool put(size_t rounded, void* base) {
    int c = cls(rounded);
    if (count[c] == kSmallPerClass || cached_bytes + rounded > kSmallMaxCached) return false;
    cached_bytes += rounded;
    blocks[c][count[c]++] = base;
    return true;
  }
  void release_all() {
    for (int c = 0; c < kSmallClasses; ++c) {
      for (int i = 0; i < count[c]; ++i) std::free(blocks[c][i]);
      count[c] = 0;
    }
    cached_bytes = 0;
  }
  ~SmallCache();
};

// Tensors may be freed during static destruction, after this thread's cache
// is gone: then blocks go straight back to glibc.
thread_local bool t_small_dead = false;
thread_local SmallCache t_small;
SmallCache::~SmallCache() {
  release_all();
  t_small_dead = true;
}

// Each block has a 64-byte header in front holding the requested and the
// rounded size, so the deleter (a plain function pointer) can account for it.
struct Header {
  int64_t nbytes;
  int64_t rounded;
};
static_assert(sizeof(Header) <= kCpuAlignment);

STRATA_HOT void cpu_free(void* p) {
  if (!p) return;
  char* base = static_cast<char*>(p) - kCpuAlignment;
  Header h;
  std::memcpy(&h, base, sizeof h);
  g_allocated.fetch_sub(h.nbytes, std::memory_order_relaxed);
  size_t rounded = static_cast<size_t>(h.rounded);
  if (rounded <= kSmallMax) {
    if (!t_small_dead && t_small.put(rounded, base)) return;
  } else if (rounded >= kMapMin) {
    if (!cache().put(rounded, base)) unmap_block(base, rounded);
    return;
  }
  std::free(base);
}

class CpuAllocator final : public Allocator {
 public:
  STRATA_HOT DataPtr allocate(size_t nbytes) override {
    if (nbytes == 0) return DataPtr();
    size_t total = 0;
    if (__builtin_add_overflow(nbytes, kCpuAlignment, &total) || total > (size_t(1) << 48)) {
      throw OutOfMemoryError(str("CPU out of memory: tried to allocate ", nbytes, " bytes"));
    }
    size_t gran = total >= kLargeMin ? kLargeGranule : total >= kMapMin ? kPage : kCpuAlignment;
    size_t rounded = (total + gran - 1) / gran * gran;
    void* base = nullptr;
    if (rounded <= kSmallMax) {
      if (!t_small_dead) base = t_small.take(rounded);
      if (!base) base = std::aligned_alloc(kCpuAlignment, rounded);
    } else if (rounded < kMapMin) {
      base = std::aligned_alloc(kCpuAlignment, rounded);
    } else if (size_t got = 0; (base = cache().take(rounded, &got))) {
      rounded = got;  // the header records the block's own size, for the cache and munmap
    } else {
      base = map_block(rounded);
#ifdef MADV_HUGEPAGE
      // Fewer page faults on first touch of big blocks.
      if (base && rounded >= (size_t(8) << 20)) madvise(base, rounded, MADV_HUGEPAGE);
#endif
    }
    if (!base) {
      // Out of memory (or address space): give the cached blocks back to the
      // system and try once more before reporting it.
      cache().release_all();
      if (!t_small_dead) t_small.release_all();
      base = rounded < kMapMin ? std::aligned_alloc(kCpuAlignment, rounded) : map_block(rounded);
    }
    if (!base) {
      throw OutOfMemoryError(str("CPU out of memory: tried to allocate ", nbytes, " bytes (",
                                 static_cast<double>(nbytes) / (1 << 30), " GiB)"));
    }
    Header h{static_cast<int64_t>(nbytes), static_cast<int64_t>(rounded)};
    std::memcpy(base, &h, sizeof h);
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
std::atomic<Allocator*> g_allocators[kNumDeviceTypes] = {&g_cpu, nullptr, &g_meta, nullptr, nullptr};

}  // namespace

Allocator* get_allocator(DeviceType t) {
  Allocator* a = g_allocators[static_cast<int>(t)].load(std::memory_order_acquire);
  STRATA_CHECK(a != nullptr || t != DeviceType::MPS, "Strata is not linked with support for mps devices (",
               "strata.backends.mps.is_available() is False)");
  STRATA_CHECK(a != nullptr, "no allocator is registered for device type ", device_type_name(t),
               " (is its backend built and loaded?)");
  return a;
}

void set_allocator(DeviceType t, Allocator* a) { g_allocators[static_cast<int>(t)].store(a); }

AllocatorStats cpu_allocator_stats() { return {g_allocated.load(), g_peak.load(), g_count.load()}; }
void reset_cpu_peak_stats() { g_peak.store(g_allocated.load()); }
void empty_cpu_cache() {
  cache().release_all();
  if (!t_small_dead) t_small.release_all();
}

}  // namespace strata
