// Page-locked host memory (Note [Pinned host memory] in pinned_memory.h).
#include "backends/cuda/pinned_memory.h"

#include <bit>
#include <map>
#include <mutex>
#include <vector>

#include "core/error.h"

namespace strata::cuda {

namespace {

struct HostBlock {
  void* ptr = nullptr;
  size_t size = 0;
  bool allocated = false;
  std::vector<std::pair<CUevent, int>> events;  // (event, device) of the copies that used the block
};

struct State {
  std::mutex mu;
  std::map<uintptr_t, HostBlock*> blocks;    // every block by address
  std::multimap<size_t, HostBlock*> ready;   // free, no pending use
  std::vector<HostBlock*> waiting;           // free, copies still pending
  PinnedStats stats;
};

State& state() {
  static auto* s = new State();  // outlives static destructors
  return *s;
}

HostBlock* block_at(State& st, uintptr_t p, size_t n) {
  auto it = st.blocks.upper_bound(p);
  if (it == st.blocks.begin()) return nullptr;
  --it;
  HostBlock* b = it->second;
  return p >= it->first && p + n <= it->first + b->size ? b : nullptr;
}

// Drops the completed events of `b` (all of them with wait); returns whether none is left.
bool settle(HostBlock* b, bool wait) {
  std::vector<std::pair<CUevent, int>> left;
  for (auto [e, dev] : b->events) {
    DeviceGuard g(dev);
    CUresult r = wait ? driver().cuEventSynchronize(e) : driver().cuEventQuery(e);
    if (r == CUDA_ERROR_NOT_READY) {
      left.emplace_back(e, dev);
      continue;
    }
    driver().cuEventDestroy(e);
  }
  b->events = std::move(left);
  return b->events.empty();
}

void process_waiting(State& st, bool wait) {
  std::vector<HostBlock*> still;
  for (HostBlock* b : st.waiting) {
    if (settle(b, wait)) st.ready.emplace(b->size, b);
    else still.push_back(b);
  }
  st.waiting = std::move(still);
}

void release_ready(State& st) {
  for (auto& [sz, b] : st.ready) {
    driver().cuMemFreeHost(b->ptr);
    st.blocks.erase(reinterpret_cast<uintptr_t>(b->ptr));
    st.stats.cached_bytes -= static_cast<int64_t>(b->size);
    delete b;
  }
  st.ready.clear();
}

void pinned_free(void* ctx) {
  auto* b = static_cast<HostBlock*>(ctx);
  State& st = state();
  std::lock_guard lk(st.mu);
  b->allocated = false;
  st.stats.allocated_bytes -= static_cast<int64_t>(b->size);
  st.stats.cached_bytes += static_cast<int64_t>(b->size);
  try {
    if (settle(b, false)) {
      st.ready.emplace(b->size, b);
      return;
    }
  } catch (...) {  // a deleter reports nothing; the block waits with its events
  }
  st.waiting.push_back(b);
}

}  // namespace

DataPtr pinned_allocate(size_t nbytes) {
  if (nbytes == 0) return DataPtr();
  lazy_init();
  const size_t size = std::bit_ceil(std::max<size_t>(nbytes, 4096));
  State& st = state();
  std::lock_guard lk(st.mu);
  process_waiting(st, false);
  HostBlock* b = nullptr;
  if (auto it = st.ready.find(size); it != st.ready.end()) {
    b = it->second;
    st.ready.erase(it);
    st.stats.cached_bytes -= static_cast<int64_t>(size);
  } else {
    DeviceGuard g(current_device());  // the driver wants a current context
    void* p = nullptr;
    CUresult r = driver().cuMemHostAlloc(&p, size, CU_MEMHOSTALLOC_PORTABLE);
    ++st.stats.host_alloc_calls;
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
      process_waiting(st, true);
      release_ready(st);
      r = driver().cuMemHostAlloc(&p, size, CU_MEMHOSTALLOC_PORTABLE);
      ++st.stats.host_alloc_calls;
    }
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
      throw OutOfMemoryError(
          str("CUDA out of memory: pin_memory could not page-lock ", nbytes, " bytes of host memory"));
    }
    check(r, "cuMemHostAlloc");
    b = new HostBlock();
    b->ptr = p;
    b->size = size;
    st.blocks[reinterpret_cast<uintptr_t>(p)] = b;
  }
  b->allocated = true;
  st.stats.allocated_bytes += static_cast<int64_t>(size);
  return DataPtr(b->ptr, b, &pinned_free);
}

bool is_pinned(const void* ptr, size_t nbytes) {
  State& st = state();
  std::lock_guard lk(st.mu);
  HostBlock* b = block_at(st, reinterpret_cast<uintptr_t>(ptr), nbytes);
  return b && b->allocated;
}

void pinned_record_use(const void* ptr, const Stream& s) {
  State& st = state();
  std::lock_guard lk(st.mu);
  HostBlock* b = block_at(st, reinterpret_cast<uintptr_t>(ptr), 1);
  if (!b) return;
  settle(b, false);  // keep the list short for a block reused many times
  DeviceGuard g(s.device);
  CUevent e = nullptr;
  check(driver().cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), "cuEventCreate (pinned memory)");
  check(driver().cuEventRecord(e, s.handle), "cuEventRecord (pinned memory)");
  b->events.emplace_back(e, s.device);
}

void empty_pinned_cache() {
  if (!available()) return;
  State& st = state();
  std::lock_guard lk(st.mu);
  process_waiting(st, true);
  release_ready(st);
}

PinnedStats pinned_stats() {
  State& st = state();
  std::lock_guard lk(st.mu);
  return st.stats;
}

}  // namespace strata::cuda
