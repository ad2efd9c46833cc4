// Page-locked ("pinned") host memory for asynchronous copies between the host and CUDA devices.
//
// Note [Pinned host memory]
// A copy from pageable host memory is staged by the driver and waits for it; from page-locked memory it is a DMA
// the GPU runs in stream order, so `copy_(non_blocking=True)` returns at once. The host block must then stay
// intact until the copy has run: each copy records an event on its stream (record_use), and a freed block is
// handed out again only once all of them have completed. Blocks are cached by size (rounded up to a power of
// two, as torch's host allocator does), since cuMemHostAlloc is slow; empty_pinned_cache() frees the cache.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backends/cuda/cuda_runtime.h"
#include "core/allocator.h"
#include "core/tensor.h"

namespace strata::cuda {

// Page-locked host memory of at least nbytes (throws OutOfMemoryError when the driver refuses it).
DataPtr pinned_allocate(size_t nbytes);
// Whether [ptr, ptr + nbytes) lies in a live block of pinned_allocate.
bool is_pinned(const void* ptr, size_t nbytes = 1);
// Work just queued on `s` reads or writes the pinned block holding ptr.
void pinned_record_use(const void* ptr, const Stream& s);
void empty_pinned_cache();

struct PinnedStats {
  int64_t allocated_bytes = 0;  // in blocks handed out
  int64_t cached_bytes = 0;     // in free blocks (ready or waiting for their events)
  int64_t host_alloc_calls = 0;
};
PinnedStats pinned_stats();

// A contiguous copy of the CPU tensor t in pinned memory (Tensor.pin_memory; cuda_tensor_ops.cpp).
Tensor pin_memory(const Tensor& t);

}  // namespace strata::cuda
