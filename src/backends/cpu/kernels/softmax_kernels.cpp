// softmax and log_softmax. Compiled once per ISA level.
//
// Rows (softmax over the contiguous innermost dim) are done in one fused pass
// per row that stays in cache: max, then exp(x - max) written out while
// summing, then a scale (log_softmax: x - max - log(sum)). Other dims are done
// vectorized across a block of the contiguous inner dim. exp is vexp.h's
// branch-free polynomial, which the compiler vectorizes.
#include <cmath>
#include <cstring>

#include "backends/cpu/kernels/vexp.h"
#include "backends/cpu/loops.h"
#include "ops/reduce_common.h"

namespace strata {
namespace cpu {
inline namespace STRATA_CPU_NS {
namespace {

template <typename T>
void softmax_rows(const T* in, T* out, int64_t outer, int64_t n, bool log) {
  using A = opmath_t<T>;
  int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(n, 1));
  parallel_for(0, outer, grain, [&](int64_t b, int64_t e) {
    constexpr int L = 16;
    for (int64_t o = b; o < e; ++o) {
      const T* __restrict x = in + o * n;
      T* __restrict y = out + o * n;
      A mx[L];
      for (int j = 0; j < L; ++j) mx[j] = -std::numeric_limits<A>::infinity();
      int64_t i = 0;
      for (; i + L <= n; i += L) {
#pragma omp simd
        for (int j = 0; j < L; ++j) {
          A v = static_cast<A>(x[i + j]);
          mx[j] = (v > mx[j] || v != v) ? v : mx[j];
        }
      }
      for (int j = 0; i + j < n; ++j) {
        A v = static_cast<A>(x[i + j]);
        mx[j] = (v > mx[j] || v != v) ? v : mx[j];
      }
      A m = mx[0];
      for (int j = 1; j < L; ++j) m = (mx[j] > m || mx[j] != mx[j]) ? mx[j] : m;
      // A row of -inf would give -inf - -inf = nan in every exp: shift by 0
      // instead; the sum is then 0 and the results nan, as in torch.
      A shift = m == -std::numeric_limits<A>::infinity() ? A(0) : m;
      A s = 0;
      if (log) {
#pragma omp simd reduction(+ : s)
        for (int64_t k = 0; k < n; ++k) s += vexp(static_cast<A>(x[k]) - shift);
        // (x - max) - log(sum): adding log(sum) to a large max first would
        // round it away.
        A ls = std::log(s);
#pragma omp simd
        for (int64_t k = 0; k < n; ++k) y[k] = static_cast<T>((static_cast<A>(x[k]) - shift) - ls);
      } else {
        if constexpr (std::is_same_v<T, A>) {
#pragma omp simd reduction(+ : s)
          for (int64_t k = 0; k < n; ++k) {
            A ev = vexp(x[k] - shift);
            y[k] = ev;
            s += ev;
          }
          A inv = A(1) / s;
#pragma omp simd
          for (int64_t k = 0; k < n; ++k) y[k] *= inv;
        } else {
          // 16-bit output: keep exp in float until the final scale.
          for (int64_t k = 0; k < n; ++k) s += vexp(static_cast<A>(x[k]) - shift);
          A inv = A(1) / s;
#pragma omp simd
          for (int64_t k = 0; k < n; ++k) y[k] = static_cast<T>(vexp(static_cast<A>(x[k]) - shift) * inv);
        }
      }
    }
  });
}

template <typename T>
void softmax_inner(const T* in, T* out, int64_t outer, int64_t n, int64_t inner, bool log) {
  using A = opmath_t<T>;
  constexpr int64_t W = 64;
  const int64_t nblk = (inner + W - 1) / W;
  int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(W * n, 1));
  parallel_for(0, outer * nblk, grain, [&](int64_t tb, int64_t te) {
    A mx[W], sm[W];
    for (int64_t t = tb; t < te; ++t) {
      int64_t o = t / nblk, j0 = (t % nblk) * W;
      int64_t w = std::min(W, inner - j0);
      const T* x = in + o * n * inner + j0;
      T* y = out + o * n * inner + j0;
      for (int64_t j = 0; j < W; ++j) {
        mx[j] = -std::numeric_limits<A>::infinity();
        sm[j] = 0;
      }
      for (int64_t r = 0; r < n; ++r) {
        const T* row = x + r * inner;
#pragma omp simd
        for (int64_t j = 0; j < w; ++j) {
          A v = static_cast<A>(row[j]);
          mx[j] = (v > mx[j] || v != v) ? v : mx[j];
        }
      }
      for (int64_t j = 0; j < w; ++j) mx[j] = mx[j] == -std::numeric_limits<A>::infinity() ? A(0) : mx[j];
      for (int64_t r = 0; r < n; ++r) {
        const T* row = x + r * inner;
#pragma omp simd
        for (int64_t j = 0; j < w; ++j) sm[j] += vexp(static_cast<A>(row[j]) - mx[j]);
      }
      if (log) {
        for (int64_t j = 0; j < w; ++j) sm[j] = std::log(sm[j]);
        for (int64_t r = 0; r < n; ++r) {
#pragma omp simd
          for (int64_t j = 0; j < w; ++j)
            y[r * inner + j] = static_cast<T>((static_cast<A>(x[r * inner + j]) - mx[j]) - sm[j]);
        }
      } else {
        for (int64_t j = 0; j < w; ++j) sm[j] = A(1) / sm[j];
        for (int64_t r = 0; r < n; ++r) {
#pragma omp simd
          for (int64_t j = 0; j < w; ++j)
            y[r * inner + j] = static_cast<T>(vexp(static_cast<A>(x[r * inner + j]) - mx[j]) * sm[j]);
        }
      }
    }
  });
}

void softmax_kernel(const Tensor& in, const Tensor& out, int64_t outer, int64_t n, int64_t inner, bool log) {
  if (outer * n * inner == 0) return;
  visit_floating(in.dtype(), log ? "log_softmax" : "softmax", [&]<typename T>() {
    if (inner == 1) softmax_rows<T>(in.data_ptr<T>(), out.data_ptr<T>(), outer, n, log);
    else softmax_inner<T>(in.data_ptr<T>(), out.data_ptr<T>(), outer, n, inner, log);
  });
}

}  // namespace
}  // namespace STRATA_CPU_NS
}  // namespace cpu

STRATA_REGISTER_CPU_KERNEL(softmax_stub, cpu::softmax_kernel);

}  // namespace strata
