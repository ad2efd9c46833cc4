// Runs a generated CUDA kernel (python/strata/_inductor/cuda.py) on the host, so its numerics are checked against
// eager on machines with no GPU (Note [Checking generated CUDA kernels without a GPU] in
// python/strata/_inductor/cuda_compile.py). The rendered source is compiled by g++ with this header forced in
// first: the CUDA keywords become plain C++, and strata_emu::launch runs the grid one block at a time, each block
// as blockDim.x real threads, so __syncthreads (a std::barrier over the block) and warp shuffles (a per-warp
// exchange between two barriers over the warp) behave as on the device: every thread reaches them. __shared__
// arrays become function-local statics, shared by the threads of the one block that runs at a time.
// Only what the renderer emits is emulated: one-dimensional grids and blocks, full-warp shuffles.
#pragma once

#define STRATA_NVRTC_HOST_EMULATION 1

#include <barrier>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
};
inline thread_local dim3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __launch_bounds__(...)
#define __shared__ static

namespace strata_emu {
inline std::barrier<>* block_barrier = nullptr;
inline std::vector<std::unique_ptr<std::barrier<>>> warp_barriers;
alignas(16) inline unsigned char warp_slots[32][32][16];

template <typename F>
void launch(unsigned grid, unsigned block, F&& body) {
  gridDim.x = grid;
  blockDim.x = block;
  const unsigned warps = (block + 31) / 32;
  for (unsigned b = 0; b < grid; ++b) {
    std::barrier<> bar(block);
    block_barrier = &bar;
    warp_barriers.clear();
    for (unsigned w = 0; w < warps; ++w) {
      const unsigned n = block - 32 * w < 32 ? block - 32 * w : 32;
      warp_barriers.push_back(std::make_unique<std::barrier<>>(n));
    }
    std::vector<std::thread> threads;
    threads.reserve(block);
    for (unsigned t = 0; t < block; ++t) {
      threads.emplace_back([&body, b, t] {
        blockIdx.x = b;
        threadIdx.x = t;
        body();
      });
    }
    for (auto& th : threads) th.join();
  }
}
}  // namespace strata_emu

inline void __syncthreads() { strata_emu::block_barrier->arrive_and_wait(); }

template <typename T>
T __shfl_xor_sync(unsigned, T v, int mask) {
  static_assert(sizeof(T) <= 16);
  const unsigned w = threadIdx.x / 32, l = threadIdx.x % 32;
  std::memcpy(strata_emu::warp_slots[w][l], &v, sizeof(T));
  strata_emu::warp_barriers[w]->arrive_and_wait();
  T r;
  std::memcpy(&r, strata_emu::warp_slots[w][l ^ static_cast<unsigned>(mask)], sizeof(T));
  strata_emu::warp_barriers[w]->arrive_and_wait();
  return r;
}
