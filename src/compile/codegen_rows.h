// Row reductions for the generated kernels of python/strata/_inductor (backend="strata_cpp").
//
// Note [Row reductions mirror eager's accumulation order]
// A row kernel reduces one contiguous row at a time, in the order eager's kernel for that op does,
// so that a fused reduction gives eager's bits. The loops themselves are written out by the renderer
// (python/strata/_inductor/cpp.py, render_rows) with the fused producers inlined in their bodies:
// GCC does not vectorise the same loops when the producers come in through a lambda.
//  - sum/mean/amax/amin as the reduction engine (backends/cpu/kernels/reduce_kernels.cpp, Note
//    [Reduction engine]): 128 bytes of accumulator lanes, lane l takes the elements i % L == l, the
//    tail goes to the first lanes, the lanes combine as a tree; rows longer than 4096 are cut into
//    4096-element blocks combined pairwise (sums) or in sequence (max/min): combine_blocks.
//  - `omp simd reduction(+)` loops, as softmax's and layer_norm's row sums are written
//    (softmax_kernels.cpp, nn_kernels.cpp); compiled at the same ISA level as eager's kernels.
//  - softmax's row max: 16 lanes combined in sequence.
// Only the generated code includes this file; it is not part of the library build.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace strata {
namespace codegen {

struct Sum {
  template <typename A>
  static A identity() { return A(0); }
  template <typename A>
  static A combine(A a, A b) { return a + b; }
  static constexpr bool kAccurate = true;
};
template <bool IsMax>
struct MinMax {
  template <typename A>
  static A identity() { return IsMax ? -std::numeric_limits<A>::infinity() : std::numeric_limits<A>::infinity(); }
  template <typename A>
  static A combine(A a, A b) {
    if constexpr (IsMax) return (a > b || a != a) ? a : b;
    else return (a < b || a != a) ? a : b;
  }
  static constexpr bool kAccurate = false;
};
using Max = MinMax<true>;
using Min = MinMax<false>;

constexpr int64_t kPairwiseBlock = 4096;

// The reduction engine's pairwise split (reduce_contig) over the partial results of a row's
// 4096-element blocks, which the generated code reduces with L lanes each (as reduce_block does).
template <typename Op, typename A>
inline A combine_blocks(const A* part, int64_t n) {
  if (!Op::kAccurate || n <= kPairwiseBlock) {
    if (n <= kPairwiseBlock) return part[0];
    A acc = Op::template identity<A>();
    for (int64_t i = 0, k = 0; i < n; i += kPairwiseBlock, ++k) acc = Op::combine(acc, part[k]);
    return acc;
  }
  int64_t half = (n / 2 + kPairwiseBlock - 1) / kPairwiseBlock * kPairwiseBlock;
  A lo = combine_blocks<Op, A>(part, half);
  A hi = combine_blocks<Op, A>(part + half / kPairwiseBlock, n - half);
  return Op::combine(lo, hi);
}

// Row-level helpers of the lowered softmax and layer_norm.
struct SoftmaxShift {  // a row of -inf is shifted by 0 (eager: the results are then nan, as in torch)
  template <typename T>
  T operator()(T m) const { return m == -std::numeric_limits<T>::infinity() ? T(0) : m; }
};
// a * b + c as eager's build compiles it: one FMA at an ISA level with FMA (its -ffp-contract=fast),
// two roundings below (x86-64-v2), where eager's kernels have no FMA instruction to contract into.
struct Fma {
  template <typename T>
  T operator()(T a, T b, T c) const {
#if defined(__FMA__)
    return std::fma(a, b, c);
#else
    return a * b + c;
#endif
  }
};

}  // namespace codegen
}  // namespace strata

namespace strata {
namespace codegen {
// softmax's exp (backends/cpu/kernels/vexp.h) as eager's build compiles it: at an ISA level with FMA
// its -ffp-contract=fast turns the range reduction and each Horner step into one FMA. The generated
// code is compiled with -ffp-contract=off, so the contractions are written out here.
#if defined(__FMA__)
#define STRATA_CG_FMA(a, b, c) std::fma(a, b, c)
#else
#define STRATA_CG_FMA(a, b, c) ((a) * (b) + (c))
#endif
struct VExp {
  float operator()(float x) const {
    x = x < -104.0f ? -104.0f : x;
    x = x > 88.7228f ? 88.7228f : x;
    float n = std::nearbyint(x * 1.44269504088896341f);
    float r = STRATA_CG_FMA(-n, 0.693359375f, x);
    r = STRATA_CG_FMA(-n, -2.12194440e-4f, r);
    float p = 1.0f / 5040;
    p = STRATA_CG_FMA(p, r, 1.0f / 720);
    p = STRATA_CG_FMA(p, r, 1.0f / 120);
    p = STRATA_CG_FMA(p, r, 1.0f / 24);
    p = STRATA_CG_FMA(p, r, 1.0f / 6);
    p = STRATA_CG_FMA(p, r, 0.5f);
    p = STRATA_CG_FMA(p, r, 1.0f);
    p = STRATA_CG_FMA(p, r, 1.0f);
    int32_t ni = static_cast<int32_t>(n);
    int32_t n1 = ni >> 1, n2 = ni - n1;
    float s1 = std::bit_cast<float>((n1 + 127) << 23);
    float s2 = std::bit_cast<float>((n2 + 127) << 23);
    return p * s1 * s2;
  }
  double operator()(double x) const { return std::exp(x); }  // libmvec's vector exp, as eager
};
#undef STRATA_CG_FMA
}  // namespace codegen
}  // namespace strata
