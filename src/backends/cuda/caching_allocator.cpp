// The CUDA caching allocator.
//
// Note [CUDA caching allocator]
// The driver's cuMemFree synchronizes the device, and cuMemAlloc/cuMemFree cost tens of microseconds, so memory is
// taken in segments and kept. The rules are torch's, so that memory figures and fragmentation behave the same:
// - Sizes: a request is rounded up to a multiple of 512 bytes (kMinBlockSize). Rounded requests up to 1 MiB are
//   small and come from 2 MiB segments; larger ones come from 20 MiB segments when below 10 MiB, else from a
//   segment of their own rounded up to 2 MiB.
// - Pools: free blocks wait in a small and a large pool per device, ordered by (stream, size, address); a request
//   takes the smallest free block of its own stream that fits (best fit). A block bigger than needed is split when
//   the rest is worth keeping (at least 512 bytes in the small pool, more than 1 MiB in the large one); on free, a
//   block merges with free neighbours of its segment.
// - Streams: a block belongs to the stream it was allocated on and is reused only by that stream, which is
//   correct without synchronization because work on one stream runs in order. A block used by other streams too
//   (record_stream) is, when freed, kept out of the pools until an event recorded on each of those streams at
//   the free has completed.
// - Out of memory: when the driver refuses a segment, every cached unsplit segment is released (after waiting for
//   the pending events of freed blocks) and the allocation retried once (num_alloc_retries); if that fails too,
//   OutOfMemoryError says what was asked, the device's capacity and free memory, and what Strata holds.
// - Private pools (graph capture): while one is active, allocations go to its own segments, so that a captured
//   graph's addresses stay its own across replays; its segments are released only after release_pool.
// One mutex guards everything; the driver's calls made under it are cheap except cuMemAlloc/cuMemFree.
#include "backends/cuda/caching_allocator.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "core/indexed_allocator.h"

namespace strata::cuda {

size_t round_size(size_t n) {
  if (n < kMinBlockSize) return kMinBlockSize;
  return (n + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

size_t allocation_size(size_t rounded) {
  if (rounded <= kSmallSize) return kSmallBuffer;
  if (rounded < kMinLargeAlloc) return kLargeBuffer;
  return (rounded + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

std::string format_size(uint64_t bytes) {
  char buf[64];
  if (bytes <= 1024) std::snprintf(buf, sizeof buf, "%" PRIu64 " bytes", bytes);
  else if (bytes <= 1048576) std::snprintf(buf, sizeof buf, "%.2f KiB", bytes / 1024.0);
  else if (bytes <= 1073741824ull) std::snprintf(buf, sizeof buf, "%.2f MiB", bytes / 1048576.0);
  else std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / 1073741824.0);
  return buf;
}

namespace {

struct BlockPool;
struct PrivatePool;

struct Block {
  int device = 0;
  CUstream stream = nullptr;
  size_t size = 0;
  size_t requested = 0;
  BlockPool* pool = nullptr;
  uintptr_t ptr = 0;
  bool allocated = false;
  bool in_pool = false;
  Block* prev = nullptr;  // neighbours within the segment
  Block* next = nullptr;
  std::vector<CUstream> stream_uses;
  int event_count = 0;
  bool is_split() const { return prev || next; }
};

struct BlockLess {
  bool operator()(const Block* a, const Block* b) const {
    if (a->stream != b->stream) return reinterpret_cast<uintptr_t>(a->stream) < reinterpret_cast<uintptr_t>(b->stream);
    if (a->size != b->size) return a->size < b->size;
    return a->ptr < b->ptr;
  }
};

struct BlockPool {
  std::set<Block*, BlockLess> blocks;
  bool is_small;
  PrivatePool* owner;
  BlockPool(bool small, PrivatePool* o) : is_small(small), owner(o) {}
};

struct PrivatePool {
  int use_count = 1;
  int64_t segments = 0;
  BlockPool small{true, this};
  BlockPool large{false, this};
};

struct DeviceAllocator {
  int device = 0;
  DeviceStats stats;
  BlockPool small{true, nullptr};
  BlockPool large{false, nullptr};
  std::unordered_map<uintptr_t, Block*> active;    // allocated blocks by address
  std::map<uintptr_t, Block*> segments;             // first block of each segment by address
  std::map<MempoolId, std::unique_ptr<PrivatePool>> pools;
  std::optional<MempoolId> active_pool;
  bool filter_stream = false;
  CUstream pool_stream = nullptr;
  // Events recorded at the free of blocks used on other streams, oldest first per stream (a stream's events
  // complete in order; one stalled stream does not hold back the blocks waiting on another).
  std::map<CUstream, std::deque<std::pair<CUevent, Block*>>> events;
};

struct State {
  std::mutex mu;
  std::vector<std::unique_ptr<DeviceAllocator>> devices;
  std::vector<CUevent> spare_events;
  uint64_t next_pool = 1;

  DeviceAllocator& dev(int d) {
    if (devices.size() <= static_cast<size_t>(d)) devices.resize(static_cast<size_t>(d) + 1);
    if (!devices[d]) {
      devices[d] = std::make_unique<DeviceAllocator>();
      devices[d]->device = d;
    }
    return *devices[d];
  }
};

State& state() {
  static auto* s = new State();  // outlives static destructors (tensors freed late)
  return *s;
}

// ---- inactive_split accounting: free blocks in a pool that are pieces of a split segment ----------------------
void count_inactive(DeviceAllocator& da, const Block* b, int sign) {
  if (!b || !b->in_pool || !b->is_split()) return;
  da.stats.inactive_split.add(b->pool->is_small, sign);
  da.stats.inactive_split_bytes.add(b->pool->is_small, sign * static_cast<int64_t>(b->size));
}

void pool_insert(DeviceAllocator& da, Block* b) {
  b->in_pool = true;
  b->pool->blocks.insert(b);
  count_inactive(da, b, +1);
}

void pool_erase(DeviceAllocator& da, Block* b) {
  count_inactive(da, b, -1);
  b->pool->blocks.erase(b);
  b->in_pool = false;
}

CUevent take_event(State& st) {
  if (!st.spare_events.empty()) {
    CUevent e = st.spare_events.back();
    st.spare_events.pop_back();
    return e;
  }
  CUevent e = nullptr;
  check(driver().cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), "cuEventCreate (caching allocator)");
  return e;
}

void free_block(DeviceAllocator& da, Block* b);

// Merges `b` (free, not in a pool) with its neighbour `n` when `n` is free and in its pool.
void try_merge(DeviceAllocator& da, Block* b, Block* n) {
  if (!n || n->allocated || n->event_count > 0 || !n->in_pool) return;
  pool_erase(da, n);
  if (b->prev == n) {  // n lies before b: b takes its address
    b->ptr = n->ptr;
    b->prev = n->prev;
    if (b->prev) b->prev->next = b;
    else da.segments[b->ptr] = b;
  } else {
    b->next = n->next;
    if (b->next) b->next->prev = b;
  }
  b->size += n->size;
  delete n;
}

// Returns a block nobody uses any more to its pool, merged with its free neighbours.
void free_block(DeviceAllocator& da, Block* b) {
  const bool small = b->pool->is_small;
  da.stats.active.add(small, -1);
  da.stats.active_bytes.add(small, -static_cast<int64_t>(b->size));
  da.stats.requested_bytes.add(small, -static_cast<int64_t>(b->requested));
  b->requested = 0;
  b->stream_uses.clear();
  try_merge(da, b, b->prev);
  try_merge(da, b, b->next);
  pool_insert(da, b);
}

// Returns to their pools the freed blocks whose events have completed, in order.
void process_events(State& st, DeviceAllocator& da, bool wait) {
  for (auto it = da.events.begin(); it != da.events.end();) {
    auto& q = it->second;
    while (!q.empty()) {
      auto [e, b] = q.front();
      CUresult r = wait ? driver().cuEventSynchronize(e) : driver().cuEventQuery(e);
      if (r == CUDA_ERROR_NOT_READY) break;
      check(r, wait ? "cuEventSynchronize (caching allocator)" : "cuEventQuery (caching allocator)");
      st.spare_events.push_back(e);
      q.pop_front();
      if (--b->event_count == 0) free_block(da, b);
    }
    it = q.empty() ? da.events.erase(it) : std::next(it);
  }
}

BlockPool& pool_for(DeviceAllocator& da, size_t rounded, CUstream stream) {
  const bool small = rounded <= kSmallSize;
  if (da.active_pool && (!da.filter_stream || da.pool_stream == stream)) {
    PrivatePool& pp = *da.pools.at(*da.active_pool);
    return small ? pp.small : pp.large;
  }
  return small ? da.small : da.large;
}

Block* find_free(DeviceAllocator& da, BlockPool& pool, CUstream stream, size_t rounded) {
  Block key;
  key.stream = stream;
  key.size = rounded;
  key.ptr = 0;
  auto it = pool.blocks.lower_bound(&key);
  if (it == pool.blocks.end() || (*it)->stream != stream) return nullptr;
  Block* b = *it;
  pool_erase(da, b);
  return b;
}

// A new segment of `size` bytes from the driver, or null when the driver is out of memory.
Block* new_segment(DeviceAllocator& da, BlockPool& pool, CUstream stream, size_t size) {
  CUdeviceptr p = 0;
  CUresult r = driver().cuMemAlloc(&p, size);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) return nullptr;
  check(r, "cuMemAlloc");
  ++da.stats.num_device_alloc;
  auto* b = new Block();
  b->device = da.device;
  b->stream = stream;
  b->size = size;
  b->pool = &pool;
  b->ptr = p;
  da.segments[p] = b;
  if (pool.owner) ++pool.owner->segments;
  da.stats.segment.add(pool.is_small, 1);
  da.stats.reserved_bytes.add(pool.is_small, static_cast<int64_t>(size));
  return b;
}

void release_segment(DeviceAllocator& da, Block* b) {
  pool_erase(da, b);
  check(driver().cuMemFree(b->ptr), "cuMemFree");
  ++da.stats.num_device_free;
  da.segments.erase(b->ptr);
  if (b->pool->owner) --b->pool->owner->segments;
  da.stats.segment.add(b->pool->is_small, -1);
  da.stats.reserved_bytes.add(b->pool->is_small, -static_cast<int64_t>(b->size));
  delete b;
}

void release_free_segments(DeviceAllocator& da, BlockPool& pool) {
  std::vector<Block*> whole;
  for (Block* b : pool.blocks) {
    if (!b->is_split()) whole.push_back(b);
  }
  for (Block* b : whole) release_segment(da, b);
}

// Releases the cached unsplit segments of the device's pools and of released private pools.
void release_cached(State& st, DeviceAllocator& da) {
  process_events(st, da, /*wait=*/true);
  release_free_segments(da, da.small);
  release_free_segments(da, da.large);
  for (auto it = da.pools.begin(); it != da.pools.end();) {
    PrivatePool& pp = *it->second;
    if (pp.use_count == 0) {
      release_free_segments(da, pp.small);
      release_free_segments(da, pp.large);
    }
    if (pp.use_count == 0 && pp.segments == 0) it = da.pools.erase(it);
    else ++it;
  }
}

void free_fn(void* ctx);

}  // namespace

DataPtr CachingAllocator::allocate(size_t nbytes) {
  int d = current_device();
  return allocate_on(nbytes, d, current_stream(d));
}

DataPtr CachingAllocator::allocate_on_device(size_t nbytes, Device* device) {
  int d = resolve_device(device->index);
  device->index = static_cast<int8_t>(d);
  return allocate_on(nbytes, d, current_stream(d));
}

DataPtr CachingAllocator::allocate_on(size_t nbytes, int device, const Stream& stream) {
  if (nbytes == 0) return DataPtr();
  // The device's context is made current only for driver calls: a cached block costs none.
  std::optional<DeviceGuard> guard;
  auto context = [&] {
    if (!guard) guard.emplace(device);
  };
  State& st = state();
  std::lock_guard lk(st.mu);
  DeviceAllocator& da = st.dev(device);
  if (!da.events.empty()) {
    context();
    process_events(st, da, /*wait=*/false);
  }
  STRATA_CHECK_T(OutOfMemoryError, nbytes <= (size_t(1) << 56), "CUDA out of memory. Tried to allocate ",
                 format_size(nbytes), " on GPU ", device, ", more than any device has");
  const size_t rounded = round_size(nbytes);
  BlockPool& pool = pool_for(da, rounded, stream.handle);
  Block* b = find_free(da, pool, stream.handle, rounded);
  if (!b) {
    context();
    b = new_segment(da, pool, stream.handle, allocation_size(rounded));
  }
  if (!b) {
    // Give the cached segments back to the driver and try once more (a live private pool keeps its segments: its
    // blocks must keep their addresses).
    release_cached(st, da);
    ++da.stats.num_alloc_retries;
    b = new_segment(da, pool, stream.handle, allocation_size(rounded));
  }
  if (!b) {
    ++da.stats.num_ooms;
    size_t free = 0, total = 0;
    driver().cuMemGetInfo(&free, &total);
    const int64_t allocated = da.stats.allocated_bytes.s[kAll].current;
    const int64_t reserved = da.stats.reserved_bytes.s[kAll].current;
    throw OutOfMemoryError(str(
        "CUDA out of memory. Tried to allocate ", format_size(rounded), ". GPU ", device,
        " has a total capacity of ", format_size(total), " of which ", format_size(free),
        " is free. Of the allocated memory ", format_size(static_cast<uint64_t>(allocated)),
        " is allocated by Strata, and ", format_size(static_cast<uint64_t>(reserved - allocated)),
        " is reserved by Strata but unallocated. (Strata released its cached blocks and retried before raising; "
        "strata.cuda.memory_summary() shows where the memory is.)"));
  }
  // Split off what is worth keeping.
  const size_t rest = b->size - rounded;
  if (pool.is_small ? rest >= kMinBlockSize : rest > kSmallSize) {
    auto* r = new Block();
    r->device = device;
    r->stream = b->stream;
    r->size = rest;
    r->pool = &pool;
    r->ptr = b->ptr + rounded;
    r->prev = b;
    r->next = b->next;
    if (r->next) r->next->prev = r;
    b->next = r;
    b->size = rounded;
    pool_insert(da, r);
  }
  b->allocated = true;
  b->requested = nbytes;
  da.active[b->ptr] = b;
  const bool small = pool.is_small;
  da.stats.allocation.add(small, 1);
  da.stats.allocated_bytes.add(small, static_cast<int64_t>(b->size));
  da.stats.active.add(small, 1);
  da.stats.active_bytes.add(small, static_cast<int64_t>(b->size));
  da.stats.requested_bytes.add(small, static_cast<int64_t>(nbytes));
  return DataPtr(reinterpret_cast<void*>(b->ptr), b, &free_fn);
}

namespace {
void free_fn(void* ctx) {
  auto* b = static_cast<Block*>(ctx);
  State& st = state();
  std::lock_guard lk(st.mu);
  DeviceAllocator& da = st.dev(b->device);
  da.active.erase(b->ptr);
  b->allocated = false;
  const bool small = b->pool->is_small;
  da.stats.allocation.add(small, -1);
  da.stats.allocated_bytes.add(small, -static_cast<int64_t>(b->size));
  if (b->stream_uses.empty() || !available()) {
    free_block(da, b);
    return;
  }
  // Used on other streams: reusable once each has reached this point.
  try {
    DeviceGuard g(b->device);
    for (CUstream s : b->stream_uses) {
      CUevent e = take_event(st);
      check(driver().cuEventRecord(e, s), "cuEventRecord (caching allocator)");
      ++b->event_count;
      da.events[s].emplace_back(e, b);
    }
  } catch (...) {
    // A deleter cannot throw: without the events, wait for the device instead.
    driver().cuCtxSynchronize();
    if (b->event_count == 0) free_block(da, b);
  }
}
}  // namespace

void CachingAllocator::record_stream(const void* ptr, const Stream& stream) {
  State& st = state();
  std::lock_guard lk(st.mu);
  for (auto& da : st.devices) {
    if (!da) continue;
    // The block that starts at or before ptr.
    auto it = da->active.find(reinterpret_cast<uintptr_t>(ptr));
    Block* b = nullptr;
    if (it != da->active.end()) {
      b = it->second;
    } else {
      for (auto& [p, blk] : da->active) {
        if (reinterpret_cast<uintptr_t>(ptr) >= p && reinterpret_cast<uintptr_t>(ptr) < p + blk->size) b = blk;
      }
    }
    if (!b) continue;
    if (stream.handle == b->stream) return;
    if (std::find(b->stream_uses.begin(), b->stream_uses.end(), stream.handle) == b->stream_uses.end()) {
      b->stream_uses.push_back(stream.handle);
    }
    return;
  }
}

void CachingAllocator::empty_cache() {
  if (!available()) return;
  State& st = state();
  std::lock_guard lk(st.mu);
  for (auto& da : st.devices) {
    if (!da) continue;
    DeviceGuard g(da->device);
    release_cached(st, *da);
  }
}

DeviceStats CachingAllocator::stats(int device) {
  State& st = state();
  std::lock_guard lk(st.mu);
  return st.dev(device).stats;
}

void CachingAllocator::reset_peak_stats(int device) {
  State& st = state();
  std::lock_guard lk(st.mu);
  DeviceStats& s = st.dev(device).stats;
  for (StatArray* a : {&s.allocation, &s.segment, &s.active, &s.inactive_split, &s.allocated_bytes,
                       &s.reserved_bytes, &s.active_bytes, &s.inactive_split_bytes, &s.requested_bytes}) {
    for (Stat& x : a->s) x.peak = x.current;
  }
}

void CachingAllocator::reset_accumulated_stats(int device) {
  State& st = state();
  std::lock_guard lk(st.mu);
  DeviceStats& s = st.dev(device).stats;
  for (StatArray* a : {&s.allocation, &s.segment, &s.active, &s.inactive_split, &s.allocated_bytes,
                       &s.reserved_bytes, &s.active_bytes, &s.inactive_split_bytes, &s.requested_bytes}) {
    for (Stat& x : a->s) x.allocated = x.freed = 0;
  }
  s.num_alloc_retries = s.num_ooms = s.num_sync_all_streams = s.num_device_alloc = s.num_device_free = 0;
}

std::map<std::string, int64_t> CachingAllocator::memory_stats(int device) {
  DeviceStats s = stats(device);
  std::map<std::string, int64_t> out;
  const char* pools[] = {"all", "small_pool", "large_pool"};
  auto put = [&](const char* name, const StatArray& a) {
    for (int p = 0; p < kNumStatPools; ++p) {
      std::string base = std::string(name) + "." + pools[p] + ".";
      out[base + "current"] = a.s[p].current;
      out[base + "peak"] = a.s[p].peak;
      out[base + "allocated"] = a.s[p].allocated;
      out[base + "freed"] = a.s[p].freed;
    }
  };
  put("allocation", s.allocation);
  put("segment", s.segment);
  put("active", s.active);
  put("inactive_split", s.inactive_split);
  put("allocated_bytes", s.allocated_bytes);
  put("reserved_bytes", s.reserved_bytes);
  put("active_bytes", s.active_bytes);
  put("inactive_split_bytes", s.inactive_split_bytes);
  put("requested_bytes", s.requested_bytes);
  out["num_alloc_retries"] = s.num_alloc_retries;
  out["num_ooms"] = s.num_ooms;
  out["num_sync_all_streams"] = s.num_sync_all_streams;
  out["num_device_alloc"] = s.num_device_alloc;
  out["num_device_free"] = s.num_device_free;
  out["max_split_size"] = -1;  // no limit (torch's default)
  return out;
}

std::string CachingAllocator::memory_summary(int device) {
  DeviceStats s = stats(device);
  std::string out;
  char line[160];
  const char* rule = "|===========================================================================|\n";
  const char* thin = "|---------------------------------------------------------------------------|\n";
  out += rule;
  std::snprintf(line, sizeof line, "|%s%-75s|\n", "", ("                  Strata CUDA memory summary, device ID " +
                                                       std::to_string(device)).c_str());
  out += line;
  out += thin;
  std::snprintf(line, sizeof line,
                "|            CUDA OOMs: %-13" PRId64 "|        cudaMalloc retries: %-10" PRId64 "|\n", s.num_ooms,
                s.num_alloc_retries);
  out += line;
  out += rule;
  out += "|        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |\n";
  auto rows = [&](const char* title, const StatArray& a, bool bytes) {
    out += thin;
    const char* names[] = {"", "      from large pool", "      from small pool"};
    const int order[] = {kAll, kLargePool, kSmallPool};
    for (int i = 0; i < 3; ++i) {
      const Stat& x = a.s[order[i]];
      auto f = [&](int64_t v) { return bytes ? format_size(static_cast<uint64_t>(v)) : std::to_string(v); };
      std::snprintf(line, sizeof line, "| %-22s| %10s | %10s | %10s | %10s |\n", i == 0 ? title : names[i],
                    f(x.current).c_str(), f(x.peak).c_str(), f(x.allocated).c_str(), f(x.freed).c_str());
      out += line;
    }
  };
  rows("Allocated memory", s.allocated_bytes, true);
  rows("Active memory", s.active_bytes, true);
  rows("Requested memory", s.requested_bytes, true);
  rows("GPU reserved memory", s.reserved_bytes, true);
  rows("Non-releasable memory", s.inactive_split_bytes, true);
  rows("Allocations", s.allocation, false);
  rows("Active allocs", s.active, false);
  rows("GPU reserved segments", s.segment, false);
  rows("Non-releasable allocs", s.inactive_split, false);
  out += rule;
  return out;
}

std::vector<BlockInfo> CachingAllocator::snapshot(int device) {
  State& st = state();
  std::lock_guard lk(st.mu);
  std::vector<BlockInfo> out;
  DeviceAllocator& da = st.dev(device);
  for (auto& [p, head] : da.segments) {
    for (Block* b = head; b; b = b->next) {
      out.push_back({b->ptr, b->size, b->allocated, b->pool->is_small, Stream{b->stream, device}.id()});
    }
  }
  return out;
}

MempoolId CachingAllocator::new_pool_id() {
  State& st = state();
  std::lock_guard lk(st.mu);
  return {st.next_pool++, 0};
}

void CachingAllocator::begin_allocate_to_pool(int device, MempoolId id, const Stream* only_stream) {
  State& st = state();
  std::lock_guard lk(st.mu);
  DeviceAllocator& da = st.dev(device);
  STRATA_CHECK(!da.active_pool, "begin_allocate_to_pool: cuda:", device, " is already allocating to a private pool");
  auto& pp = da.pools[id];
  if (!pp) pp = std::make_unique<PrivatePool>();
  else ++pp->use_count;
  da.active_pool = id;
  da.filter_stream = only_stream != nullptr;
  da.pool_stream = only_stream ? only_stream->handle : nullptr;
}

void CachingAllocator::end_allocate_to_pool(int device, MempoolId id) {
  State& st = state();
  std::lock_guard lk(st.mu);
  DeviceAllocator& da = st.dev(device);
  STRATA_CHECK(da.active_pool == id, "end_allocate_to_pool: cuda:", device, " is not allocating to that pool");
  da.active_pool.reset();
  da.filter_stream = false;
}

void CachingAllocator::release_pool(int device, MempoolId id) {
  State& st = state();
  std::lock_guard lk(st.mu);
  DeviceAllocator& da = st.dev(device);
  auto it = da.pools.find(id);
  STRATA_CHECK(it != da.pools.end() && it->second->use_count > 0, "release_pool: no such private pool on cuda:",
               device);
  if (--it->second->use_count == 0 && available()) {
    DeviceGuard g(device);
    release_free_segments(da, it->second->small);
    release_free_segments(da, it->second->large);
    if (it->second->segments == 0) da.pools.erase(it);
  }
}

CachingAllocator& caching_allocator() {
  static auto* a = new CachingAllocator();
  return *a;
}

void install_caching_allocator() {
  set_allocator(DeviceType::CUDA, &caching_allocator());
  set_indexed_allocate(DeviceType::CUDA,
                       [](size_t nbytes, Device* device) {
                         return caching_allocator().allocate_on_device(nbytes, device);
                       });
}

}  // namespace strata::cuda
