// cumsum and cumprod. Compiled once per ISA level. Floats accumulate in double
// (float32, float64) or float (16-bit floats), like PyTorch's CPU kernels,
// integers and bool in int64.
#include "backends/cpu/loops.h"
#include "ops/reduce_common.h"

namespace strata {
namespace cpu {
inline namespace STRATA_CPU_NS {
namespace {

// Complex values accumulate in complex128.
template <typename T>
using scan_acc_t = std::conditional_t<
    is_complex_v<T>, std::complex<double>,
    std::conditional_t<is_reduced_float_v<T>, float, std::conditional_t<is_float_v<T>, double, int64_t>>>;
template <typename T>
using scan_out_t = std::conditional_t<is_float_v<T> || is_complex_v<T>, T, int64_t>;

template <typename T, bool Prod>
void scan_impl(const T* in, scan_out_t<T>* out, int64_t outer, int64_t n, int64_t inner) {
  using A = scan_acc_t<T>;
  using O = scan_out_t<T>;
  if (inner == 1) {
    int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(n, 1));
    parallel_for(0, outer, grain, [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) {
        const T* x = in + o * n;
        O* y = out + o * n;
        A acc = Prod ? A(1) : A(0);
        for (int64_t k = 0; k < n; ++k) {
          A v = static_cast<A>(static_cast<opmath_t<T>>(x[k]));
          acc = Prod ? acc * v : acc + v;
          y[k] = static_cast<O>(acc);
        }
      }
    });
    return;
  }
  // Scanning an outer dim: carry a row of accumulators down the dim.
  constexpr int64_t W = 128;
  const int64_t nblk = (inner + W - 1) / W;
  int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(W * n, 1));
  parallel_for(0, outer * nblk, grain, [&](int64_t tb, int64_t te) {
    A acc[W];
    for (int64_t t = tb; t < te; ++t) {
      int64_t o = t / nblk, j0 = (t % nblk) * W;
      int64_t w = std::min(W, inner - j0);
      for (int64_t j = 0; j < W; ++j) acc[j] = Prod ? A(1) : A(0);
      for (int64_t r = 0; r < n; ++r) {
        const T* x = in + (o * n + r) * inner + j0;
        O* y = out + (o * n + r) * inner + j0;
#pragma omp simd
        for (int64_t j = 0; j < w; ++j) {
          A v = static_cast<A>(static_cast<opmath_t<T>>(x[j]));
          acc[j] = Prod ? acc[j] * v : acc[j] + v;
          y[j] = static_cast<O>(acc[j]);
        }
      }
    }
  });
}

void scan_kernel(const Tensor& in, const Tensor& out, int64_t outer, int64_t n, int64_t inner, bool prod) {
  if (outer * n * inner == 0) return;
  visit_dtype_and_complex(in.dtype(), [&]<typename T>() {
    auto* o = out.data_ptr<scan_out_t<T>>();
    if (prod) scan_impl<T, true>(in.data_ptr<T>(), o, outer, n, inner);
    else scan_impl<T, false>(in.data_ptr<T>(), o, outer, n, inner);
  });
}

}  // namespace
}  // namespace STRATA_CPU_NS
}  // namespace cpu

STRATA_REGISTER_CPU_KERNEL(scan_stub, cpu::scan_kernel);

}  // namespace strata
