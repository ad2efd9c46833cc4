// Row reductions for the generated kernels of python/strata/_inductor (backend="strata_cpp").
//
// Note [Row reductions mirror eager's accumulation order]
// A row kernel reduces one contiguous row at a time; f(j) computes the fused producers' value at
// column j. Each reduction here walks the row in the order eager's kernel for that op does, so a
// fused reduction gives eager's bits:
//  - reduce_lanes: sum/mean/amax/amin as the reduction engine (backends/cpu/kernels/
//    reduce_kernels.cpp, Note [Reduction engine]): 128 bytes of accumulator lanes, lane j takes the
//    elements i % L == j, the tail goes to the first lanes, the lanes combine as a tree, and rows
//    longer than 4096 (sums) are split pairwise into 4096-element blocks.
//  - reduce_simd: an `omp simd reduction(+)` loop, as softmax's and layer_norm's row sums are
//    written (softmax_kernels.cpp, nn_kernels.cpp); the generated code is compiled at the same ISA
//    level so GCC picks the same vector width and final combine.
//  - softmax_max: softmax's row max (16 lanes, combined in sequence).
// Only this file and the generated code include it; it is not part of the library build.
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

template <typename Op, typename A, typename F>
inline A reduce_block(const F& f, int64_t b, int64_t n) {
  constexpr int64_t L = 128 / sizeof(A) < 8 ? 8 : 128 / sizeof(A);
  A acc[L];
  for (int64_t j = 0; j < L; ++j) acc[j] = Op::template identity<A>();
  int64_t i = 0;
  for (; i + L <= n; i += L) {
#pragma omp simd
    for (int64_t j = 0; j < L; ++j) acc[j] = Op::combine(acc[j], static_cast<A>(f(b + i + j)));
  }
  for (int64_t j = 0; i + j < n; ++j) acc[j] = Op::combine(acc[j], static_cast<A>(f(b + i + j)));
  for (int64_t w = L / 2; w > 0; w /= 2)
    for (int64_t j = 0; j < w; ++j) acc[j] = Op::combine(acc[j], acc[j + w]);
  return acc[0];
}

template <typename Op, typename A, typename F>
inline A reduce_lanes(const F& f, int64_t b, int64_t n) {
  if (!Op::kAccurate || n <= kPairwiseBlock) {
    if (n <= kPairwiseBlock) return reduce_block<Op, A>(f, b, n);
    A acc = Op::template identity<A>();
    for (int64_t i = 0; i < n; i += kPairwiseBlock)
      acc = Op::combine(acc, reduce_block<Op, A>(f, b + i, n - i < kPairwiseBlock ? n - i : kPairwiseBlock));
    return acc;
  }
  int64_t half = (n / 2 + kPairwiseBlock - 1) / kPairwiseBlock * kPairwiseBlock;
  A lo = reduce_lanes<Op, A>(f, b, half);
  A hi = reduce_lanes<Op, A>(f, b + half, n - half);
  return Op::combine(lo, hi);
}

template <typename A, typename F>
inline A reduce_simd(const F& f, int64_t n) {
  A s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t k = 0; k < n; ++k) s += static_cast<A>(f(k));
  return s;
}

// layer_norm's second pass: sum of (x - mean)^2 in A; eager's build contracts c * c + s into an FMA.
template <typename A, typename F>
inline A reduce_simd_sqdev(const F& f, int64_t n, A mean) {
  A s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t k = 0; k < n; ++k) {
    A c = static_cast<A>(f(k)) - mean;
    s = std::fma(c, c, s);
  }
  return s;
}

template <typename A, typename F>
inline A softmax_max(const F& f, int64_t n) {
  constexpr int L = 16;
  A mx[L];
  for (int j = 0; j < L; ++j) mx[j] = -std::numeric_limits<A>::infinity();
  int64_t i = 0;
  for (; i + L <= n; i += L) {
#pragma omp simd
    for (int j = 0; j < L; ++j) {
      A v = static_cast<A>(f(i + j));
      mx[j] = (v > mx[j] || v != v) ? v : mx[j];
    }
  }
  for (int j = 0; i + j < n; ++j) {
    A v = static_cast<A>(f(i + j));
    mx[j] = (v > mx[j] || v != v) ? v : mx[j];
  }
  A m = mx[0];
  for (int j = 1; j < L; ++j) m = (mx[j] > m || mx[j] != mx[j]) ? mx[j] : m;
  return m;
}

// Row-level helpers of the lowered softmax and layer_norm.
struct SoftmaxShift {  // a row of -inf is shifted by 0 (eager: the results are then nan, as in torch)
  template <typename T>
  T operator()(T m) const { return m == -std::numeric_limits<T>::infinity() ? T(0) : m; }
};
struct Fma {
  template <typename T>
  T operator()(T a, T b, T c) const { return std::fma(a, b, c); }
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
