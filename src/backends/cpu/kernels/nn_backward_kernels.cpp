// CPU kernels of the fused nn backward ops (ops/nn_backward_kernels.h).
// Compiled once per ISA level; float and double only.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/cpu/blas.h"
#include "backends/cpu/loops.h"
#include "backends/cpu/kernels/conv_cols.h"
#include "ops/nn_backward_kernels.h"

namespace strata {
namespace cpu {
inline namespace STRATA_CPU_NS {
namespace {

// With cols = im2col(x) ([K, B * L] for a chunk of B images) and G the
// gradient laid out the same way ([og, B * L]), per group:
//   gw += G @ cols^T,   dcols = W^T @ G,   gx = col2im(dcols),   gb = row sums of G.
// One GEMM per group and chunk instead of per image: the per-image GEMMs of the
// composite backward (index_select + matmul + index_add) were ~10x slower than
// torch on the digits CNN.
void conv2d_backward_kernel(const Tensor& g, const Tensor& x, const Tensor& wt, const Tensor& gx, const Tensor& gw,
                            const Tensor& gb, const nn::Window2d& p, int64_t groups) {
  visit_float32_64(g.dtype(), "_conv2d_backward", [&]<typename T>() {
    const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
    const int64_t o = g.size(1), oh = g.size(2), ow = g.size(3);
    const int64_t cg = c / groups, og = o / groups, K = cg * p.kh * p.kw, L = oh * ow;
    const T *gp = g.data_ptr<T>(), *xp = x.data_ptr<T>(), *wp = wt.data_ptr<T>();
    T* gxp = gx.defined() ? gx.data_ptr<T>() : nullptr;
    T* gwp = gw.defined() ? gw.data_ptr<T>() : nullptr;
    T* gbp = gb.data_ptr<T>();
    if (gxp) std::fill(gxp, gxp + gx.numel(), T(0));
    if (gwp) std::fill(gwp, gwp + gw.numel(), T(0));
    std::fill(gbp, gbp + o, T(0));
    if (n == 0 || L == 0) return;
    const int64_t chunk = conv_cols::images_per_chunk(n, std::max(K, og), L);
    std::vector<T> col(static_cast<size_t>(std::max<int64_t>(K, 1) * chunk * L));
    std::vector<T> gbuf(static_cast<size_t>(og * chunk * L));
    for (int64_t b0 = 0; b0 < n; b0 += chunk) {
      const int64_t nb = std::min(chunk, n - b0), ld = nb * L;
      for (int64_t gr = 0; gr < groups; ++gr) {
        const int64_t grain_g = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(og * L, 1));
        parallel_for(0, nb, grain_g, [&](int64_t lo, int64_t hi) {
          for (int64_t b = lo; b < hi; ++b)
            for (int64_t oc = 0; oc < og; ++oc)
              std::copy_n(gp + ((b0 + b) * o + gr * og + oc) * L, L, gbuf.data() + oc * ld + b * L);
        });
        for (int64_t oc = 0; oc < og; ++oc) {
          const T* row = gbuf.data() + oc * ld;
          T s = 0;
#pragma omp simd reduction(+ : s)
          for (int64_t l = 0; l < ld; ++l) s += row[l];
          gbp[gr * og + oc] += s;
        }
        if (K == 0) continue;
        const int64_t grain_c = std::max<int64_t>(1, kGrainSize / (K * L));
        if (gwp) {
          parallel_for(0, nb, grain_c, [&](int64_t lo, int64_t hi) {
            for (int64_t b = lo; b < hi; ++b)
              conv_cols::im2col(xp + ((b0 + b) * c + gr * cg) * h * w, col.data() + b * L, ld, cg, h, w, oh, ow, p);
          });
          cpublas::gemm(cpublas::Trans::N, cpublas::Trans::T, og, K, ld, T(1), gbuf.data(), ld, col.data(), ld, T(1),
                        gwp + gr * og * K, K);
        }
        if (gxp) {
          cpublas::gemm(cpublas::Trans::T, cpublas::Trans::N, K, ld, og, T(1), wp + gr * og * K, K, gbuf.data(), ld,
                        T(0), col.data(), ld);
          parallel_for(0, nb, grain_c, [&](int64_t lo, int64_t hi) {
            for (int64_t b = lo; b < hi; ++b)
              conv_cols::col2im_add(col.data() + b * L, gxp + ((b0 + b) * c + gr * cg) * h * w, ld, cg, h, w, oh, ow,
                                    p);
          });
        }
      }
    }
  });
}

// Per row, with xhat = (x - mean) * rstd and gxhat = go * w:
//   gx = rstd * (gxhat - mean(gxhat) - xhat * mean(gxhat * xhat)),
// and over rows gw = sum go * xhat, gb = sum go. Statistics in double, like the
// forward kernel. Each thread sums gw/gb over its rows into its own buffer.
void layer_norm_backward_kernel(const Tensor& go, const Tensor& x, const Tensor& w, const Tensor& gx,
                                const Tensor& gw, const Tensor& gb, int64_t rows, int64_t d, double eps) {
  visit_float32_64(go.dtype(), "_layer_norm_backward", [&]<typename T>() {
    const T *gop = go.data_ptr<T>(), *xp = x.data_ptr<T>();
    const T* wp = w.defined() ? w.data_ptr<T>() : nullptr;
    T *gxp = gx.data_ptr<T>(), *gwp = gw.data_ptr<T>(), *gbp = gb.data_ptr<T>();
    std::fill(gwp, gwp + d, T(0));
    std::fill(gbp, gbp + d, T(0));
    if (rows == 0 || d == 0) return;
    const int64_t grain = std::max<int64_t>(1, kGrainSize / d);
    const int64_t parts = std::max<int64_t>(1, std::min<int64_t>(get_num_threads(), (rows + grain - 1) / grain));
    const int64_t per = (rows + parts - 1) / parts;
    std::vector<T> partial(static_cast<size_t>(2 * d * parts), T(0));
    parallel_for(0, parts, 1, [&](int64_t plo, int64_t phi) {
      std::vector<T> xhat(static_cast<size_t>(d));
      for (int64_t part = plo; part < phi; ++part) {
        T* pw = partial.data() + 2 * d * part;
        T* pb = pw + d;
        for (int64_t r = part * per; r < std::min(rows, (part + 1) * per); ++r) {
          const T *xr = xp + r * d, *gr = gop + r * d;
          T* gxr = gxp + r * d;
          double s = 0, s2 = 0;
#pragma omp simd reduction(+ : s)
          for (int64_t j = 0; j < d; ++j) s += xr[j];
          const double mean = s / d;
#pragma omp simd reduction(+ : s2)
          for (int64_t j = 0; j < d; ++j) s2 += (xr[j] - mean) * (xr[j] - mean);
          const T rstd = static_cast<T>(1.0 / std::sqrt(s2 / d + eps)), m = static_cast<T>(mean);
          double a = 0, bsum = 0;
#pragma omp simd reduction(+ : a, bsum)
          for (int64_t j = 0; j < d; ++j) {
            const T xh = (xr[j] - m) * rstd;
            const T gh = wp ? gr[j] * wp[j] : gr[j];
            xhat[j] = xh;
            a += gh;
            bsum += gh * xh;
            pw[j] += gr[j] * xh;
            pb[j] += gr[j];
          }
          const T ma = static_cast<T>(a / d), mb = static_cast<T>(bsum / d);
#pragma omp simd
          for (int64_t j = 0; j < d; ++j) {
            const T gh = wp ? gr[j] * wp[j] : gr[j];
            gxr[j] = rstd * (gh - ma - xhat[j] * mb);
          }
        }
      }
    });
    for (int64_t part = 0; part < parts; ++part) {
      const T* pw = partial.data() + 2 * d * part;
#pragma omp simd
      for (int64_t j = 0; j < d; ++j) {
        gwp[j] += pw[j];
        gbp[j] += pw[d + j];
      }
    }
  });
}

}  // namespace
}  // namespace STRATA_CPU_NS
}  // namespace cpu

STRATA_REGISTER_CPU_KERNEL(nn_conv2d_backward_stub, cpu::conv2d_backward_kernel);
STRATA_REGISTER_CPU_KERNEL(nn_layer_norm_backward_stub, cpu::layer_norm_backward_kernel);

}  // namespace strata
