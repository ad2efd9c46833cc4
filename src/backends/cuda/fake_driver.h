// A fake CUDA driver: the functions of driver_api.h run on the host, so that everything above the driver (devices,
// streams, events, the caching allocator, copies) is tested on machines without a GPU.
//
// Note [Fake driver semantics]
// - Devices: `num_devices` (env STRATA_CUDA_FAKE_DEVICES, default 2) of compute capability 9.0 named
//   "Strata fake device N", each with `memory_bytes` (env STRATA_CUDA_FAKE_MEMORY, default 8 GiB) of which
//   cuMemAlloc hands out at most that much (so out-of-memory is testable); set_total_memory changes it at any time.
// - Device memory is host memory; it is filled with kAllocPoison when allocated and with kFreePoison when freed, and
//   every copy and memset checks that its device range lies inside one live allocation (CUDA_ERROR_INVALID_VALUE
//   when enqueued, CUDA_ERROR_ILLEGAL_ADDRESS, sticky on the stream, when it runs after the memory was freed).
// - Streams are FIFO queues. Nothing runs when it is enqueued: a stream's operations run, in order, when the
//   stream is synchronized, when an event recorded on it is synchronized (up to that event), at cuCtxSynchronize,
//   when a test calls run_pending, and - unless set_manual_progress(true) - when the stream or an event is queried.
//   With manual progress a query only reports (CUDA_ERROR_NOT_READY while work is queued), so tests decide when
//   work completes, as a busy GPU would.
// - The legacy default stream (handle 0) is one more FIFO per device; its implicit ordering with other streams is
//   not modelled (Strata orders its streams with events, which are).
// - Events complete when their stream reaches them; cuStreamWaitEvent makes the waiting stream stop at that point
//   until the event completes (synchronizing the waiting stream runs the event's stream up to the event). Timing
//   events read a steady clock when they complete.
// - Kernels: cuModuleLoadData accepts any image; cuModuleGetFunction finds host functions registered with
//   register_kernel, and cuLaunchKernel queues a call of one on the stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/driver_api.h"

namespace strata::cuda::fake {

constexpr unsigned char kAllocPoison = 0xDB;
constexpr unsigned char kFreePoison = 0xDF;

// Fills `api` with the fake driver's functions (and marks it fake and usable).
void fill_table(DriverApi& api);

// ---- test hooks -----------------------------------------------------------------------------------------------
// Runs at most `max_ops` operations at the head of `stream` (of the current device when stream is 0); stops early
// at a wait on an event that has not completed. Returns how many ran.
size_t run_pending(CUstream stream, size_t max_ops = SIZE_MAX);
// Operations queued on `stream`.
size_t pending(CUstream stream);
void set_manual_progress(bool manual);
bool manual_progress();
void set_total_memory(int device, size_t bytes);
// Bytes cuMemAlloc has handed out and not taken back on `device`, and how many allocations that is.
size_t used_memory(int device);
int64_t live_allocations(int device);
// cuMemAlloc calls so far (successful or not), for tests of the allocator's caching.
int64_t alloc_calls();

// A kernel of the fake driver reads its parameters at launch (as the driver copies them then) and returns the work
// that runs when the stream reaches it.
using HostKernel = std::function<void()> (*)(void** params, unsigned grid_x, unsigned block_x);
void register_kernel(const std::string& name, HostKernel fn);

// Queues host work on `stream` (of the current device when 0) as a library's kernel would be queued (the fake
// cuBLAS's GEMMs): the device ranges (base, bytes) it touches are checked now (CUDA_ERROR_INVALID_VALUE) and again
// when it runs (CUDA_ERROR_ILLEGAL_ADDRESS, sticky on the stream). Needs a current context, as cuLaunchKernel.
CUresult enqueue_host_work(CUstream stream, std::vector<std::pair<uintptr_t, size_t>> ranges,
                           std::function<void()> work);

}  // namespace strata::cuda::fake
