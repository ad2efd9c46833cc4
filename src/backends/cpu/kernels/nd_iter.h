// Strided N-d iteration shared by the shape/index kernels: visits a range of
// the linear index space of a shape as runs along the innermost dim, giving
// the byte offset of each operand and the multi-index of the run's start.
#pragma once

#include <cstdint>
#include <algorithm>
#include <cstring>

#include "core/dtype.h"

#ifndef STRATA_CPU_NS
#error "nd_iter.h is for kernel files compiled per ISA level"
#endif

namespace strata::cpu {
inline namespace STRATA_CPU_NS {

constexpr int kMaxIterDims = 64;

template <int K>
struct NdGeom {
  int nd = 0;
  int64_t sizes[kMaxIterDims];
  int64_t strides[K][kMaxIterDims];  // bytes
  int64_t numel() const {
    int64_t n = 1;
    for (int d = 0; d < nd; ++d) n *= sizes[d];
    return n;
  }
};

// f(const int64_t* offsets /*K*/, const int64_t* idx /*nd*/, int64_t n): a run of n elements along
// the last dim, starting at multi-index idx.
template <int K, typename F>
void for_each_run_nd(const NdGeom<K>& g, int64_t begin, int64_t end, F&& f) {
  const int nd = g.nd;
  int64_t off[K] = {};
  if (nd == 0) {
    if (begin < end) f(off, static_cast<const int64_t*>(nullptr), int64_t(1));
    return;
  }
  int64_t idx[kMaxIterDims];
  int64_t rem = begin;
  for (int d = nd - 1; d >= 0; --d) {
    idx[d] = rem % g.sizes[d];
    rem /= g.sizes[d];
  }
  for (int k = 0; k < K; ++k)
    for (int d = 0; d < nd; ++d) off[k] += idx[d] * g.strides[k][d];
  const int last = nd - 1;
  int64_t pos = begin;
  while (pos < end) {
    int64_t n = std::min<int64_t>(g.sizes[last] - idx[last], end - pos);
    f(static_cast<const int64_t*>(off), static_cast<const int64_t*>(idx), n);
    pos += n;
    if (pos >= end) break;
    // Carry into the outer dims.
    for (int k = 0; k < K; ++k) off[k] -= idx[last] * g.strides[k][last];
    idx[last] = 0;
    for (int d = last - 1; d >= 0; --d) {
      idx[d]++;
      for (int k = 0; k < K; ++k) off[k] += g.strides[k][d];
      if (idx[d] < g.sizes[d]) break;
      for (int k = 0; k < K; ++k) off[k] -= idx[d] * g.strides[k][d];
      idx[d] = 0;
    }
  }
}

// A 16-byte element (complex128) for kernels that only move elements.
struct Elem16 {
  uint64_t lo, hi;
  Elem16() = default;
  constexpr explicit Elem16(int v) : lo(static_cast<uint64_t>(v)), hi(0) {}  // E(0): zero
};

// An unsigned integer type of each element size: kernels that only move
// elements are instantiated per size, not per dtype.
template <typename F>
decltype(auto) visit_elem_size(size_t es, F&& f) {
  switch (es) {
    case 1: return f.template operator()<uint8_t>();
    case 2: return f.template operator()<uint16_t>();
    case 4: return f.template operator()<uint32_t>();
    case 16: return f.template operator()<Elem16>();
    default: return f.template operator()<uint64_t>();
  }
}

STRATA_ALWAYS_INLINE int64_t load_index(const char* p, bool is64) {
  if (is64) {
    int64_t v;
    std::memcpy(&v, p, 8);
    return v;
  }
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

}  // namespace STRATA_CPU_NS
}  // namespace strata::cpu
