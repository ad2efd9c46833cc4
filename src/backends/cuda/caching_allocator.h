// The CUDA caching allocator: device memory is taken from the driver in segments and handed out as blocks that are
// cached on free, with torch's rules (Note [CUDA caching allocator] in caching_allocator.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/cuda_runtime.h"
#include "core/allocator.h"

namespace strata::cuda {

// Sizes (torch's).
constexpr size_t kMinBlockSize = 512;             // every request is rounded up to a multiple of this
constexpr size_t kSmallSize = size_t(1) << 20;    // requests up to this go to the small pool
constexpr size_t kSmallBuffer = size_t(2) << 20;  // segment size of the small pool
constexpr size_t kLargeBuffer = size_t(20) << 20; // segment size for large requests below kMinLargeAlloc
constexpr size_t kMinLargeAlloc = size_t(10) << 20;
constexpr size_t kRoundLarge = size_t(2) << 20;   // large segments of kMinLargeAlloc and up are rounded to this

size_t round_size(size_t n);
size_t allocation_size(size_t rounded);

// One counter: its current value, its peak, and the totals added and taken away.
struct Stat {
  int64_t current = 0, peak = 0, allocated = 0, freed = 0;
  void add(int64_t n) {
    current += n;
    if (n > 0) allocated += n;
    else freed -= n;
    if (current > peak) peak = current;
  }
};

// Per pool kind: all, small_pool, large_pool.
enum StatPool { kAll = 0, kSmallPool = 1, kLargePool = 2, kNumStatPools = 3 };
struct StatArray {
  Stat s[kNumStatPools];
  void add(bool small, int64_t n) {
    s[kAll].add(n);
    s[small ? kSmallPool : kLargePool].add(n);
  }
};

struct DeviceStats {
  StatArray allocation, segment, active, inactive_split;
  StatArray allocated_bytes, reserved_bytes, active_bytes, inactive_split_bytes, requested_bytes;
  int64_t num_alloc_retries = 0, num_ooms = 0, num_sync_all_streams = 0, num_device_alloc = 0, num_device_free = 0;
};

// Identifies a private pool (torch's MempoolId_t).
using MempoolId = std::pair<uint64_t, uint64_t>;

struct BlockInfo {  // for snapshots and tests
  uintptr_t ptr;
  size_t size;
  bool allocated;
  bool small;
  int64_t stream_id;
};

class CachingAllocator final : public Allocator {
 public:
  // On the current device and its current stream.
  DataPtr allocate(size_t nbytes) override;
  // On device->index (the current device for -1, then written back) and that device's current stream.
  DataPtr allocate_on_device(size_t nbytes, Device* device);
  DataPtr allocate_on(size_t nbytes, int device, const Stream& stream);

  // The block holding `ptr` is used by `stream` too: when freed it is reused only after the work queued on
  // `stream` up to the free has completed. No-op for memory this allocator did not hand out.
  void record_stream(const void* ptr, const Stream& stream);
  // Releases every cached, unsplit segment of every device (outside private pools) to the driver.
  void empty_cache();

  DeviceStats stats(int device);
  void reset_peak_stats(int device);
  void reset_accumulated_stats(int device);
  // torch.cuda.memory_stats's keys ("allocated_bytes.all.current", ...).
  std::map<std::string, int64_t> memory_stats(int device);
  std::string memory_summary(int device);
  // Every block of every segment of `device`, in address order.
  std::vector<BlockInfo> snapshot(int device);

  // Private pools (for CUDA graph capture): while a pool is active on a device, allocations on it (from `stream`
  // only, unless it is the null handle with filter_stream false) come from the pool's own segments; blocks freed
  // return to the pool they came from.
  MempoolId new_pool_id();
  void begin_allocate_to_pool(int device, MempoolId id, const Stream* only_stream = nullptr);
  void end_allocate_to_pool(int device, MempoolId id);
  // Drops the caller's use of the pool; its segments go back to the driver once unused and empty.
  void release_pool(int device, MempoolId id);
};

CachingAllocator& caching_allocator();
// Installs the caching allocator for DeviceType::CUDA (idempotent).
void install_caching_allocator();

// "20.00 MiB"
std::string format_size(uint64_t bytes);

}  // namespace strata::cuda
