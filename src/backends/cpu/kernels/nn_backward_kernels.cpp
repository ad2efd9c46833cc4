// CPU kernels of the fused nn backward ops (ops/nn_backward_kernels.h).
// Compiled once per ISA level; float and double only.
#include <algorithm>
#include <cmath>
#include <memory>
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
    const int64_t chunk = conv_cols::images_per_chunk(n, std::max(K, og), L), taps = p.kh * p.kw, hw = h * w;
    const bool cl = conv_cols::use_channels_last(h, w, ow, cg) && K > 0;  // channels-last path, see conv_cols.h
    const std::vector<int32_t> table = cl ? conv_cols::make_table(h, w, oh, ow, p) : std::vector<int32_t>();
    conv_cols::Scratch<T> col(static_cast<size_t>(std::max<int64_t>(K, 1) * chunk * L), 0);
    conv_cols::Scratch<T> gbuf(static_cast<size_t>(og * chunk * L), 1);
    conv_cols::Scratch<T> xh(cl && gwp ? static_cast<size_t>(chunk * hw * c) : 0, 2);
    conv_cols::Scratch<T> gxh(cl && gxp ? static_cast<size_t>(chunk * hw * c) : 0, 3);
    // Channels-last weight (for gx) and weight gradient (summed, reordered at the end).
    std::vector<T> wr(cl && gxp ? static_cast<size_t>(o * K) : 0), gwr(cl && gwp ? static_cast<size_t>(o * K) : 0);
    if (!wr.empty()) conv_cols::taps_major(wp, wr.data(), o, cg, taps);
    for (int64_t b0 = 0; b0 < n; b0 += chunk) {
      const int64_t nb = std::min(chunk, n - b0), ld = nb * L;
      const int64_t grain_c = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(K * L, 1));
      if (cl && gwp)
        parallel_for(0, nb, grain_c, [&](int64_t lo, int64_t hi) {
          for (int64_t b = lo; b < hi; ++b)
            conv_cols::to_channels_last(xp + (b0 + b) * c * hw, xh.get() + b * hw * c, c, hw);
        });
      if (cl && gxp) std::fill_n(gxh.get(), nb * hw * c, T(0));
      for (int64_t gr = 0; gr < groups; ++gr) {
        const int64_t grain_g = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(og * L, 1));
        parallel_for(0, nb, grain_g, [&](int64_t lo, int64_t hi) {
          for (int64_t b = lo; b < hi; ++b)
            for (int64_t oc = 0; oc < og; ++oc)
              std::copy_n(gp + ((b0 + b) * o + gr * og + oc) * L, L, gbuf.get() + oc * ld + b * L);
        });
        for (int64_t oc = 0; oc < og; ++oc) {
          const T* row = gbuf.get() + oc * ld;
          T s = 0;
#pragma omp simd reduction(+ : s)
          for (int64_t l = 0; l < ld; ++l) s += row[l];
          gbp[gr * og + oc] += s;
        }
        if (K == 0) continue;
        if (gwp) {
          parallel_for(0, nb, grain_c, [&](int64_t lo, int64_t hi) {
            for (int64_t b = lo; b < hi; ++b) {
              if (cl)
                conv_cols::im2row(xh.get() + b * hw * c, c, gr * cg, cg, col.get() + b * L * K, table.data(), taps, L);
              else
                conv_cols::im2col(xp + ((b0 + b) * c + gr * cg) * hw, col.get() + b * L, ld, cg, h, w, oh, ow, p);
            }
          });
          if (cl)
            cpublas::gemm(cpublas::Trans::N, cpublas::Trans::N, og, K, ld, T(1), gbuf.get(), ld, col.get(), K, T(1),
                          gwr.data() + gr * og * K, K);
          else
            cpublas::gemm(cpublas::Trans::N, cpublas::Trans::T, og, K, ld, T(1), gbuf.get(), ld, col.get(), ld, T(1),
                          gwp + gr * og * K, K);
        }
        if (gxp) {
          if (cl)
            cpublas::gemm(cpublas::Trans::T, cpublas::Trans::N, ld, K, og, T(1), gbuf.get(), ld,
                          wr.data() + gr * og * K, K, T(0), col.get(), K);
          else
            cpublas::gemm(cpublas::Trans::T, cpublas::Trans::N, K, ld, og, T(1), wp + gr * og * K, K, gbuf.get(), ld,
                          T(0), col.get(), ld);
          parallel_for(0, nb, grain_c, [&](int64_t lo, int64_t hi) {
            for (int64_t b = lo; b < hi; ++b) {
              if (cl)
                conv_cols::row2im_add(col.get() + b * L * K, gxh.get() + b * hw * c, c, gr * cg, cg, table.data(),
                                      taps, L);
              else
                conv_cols::col2im_add(col.get() + b * L, gxp + ((b0 + b) * c + gr * cg) * hw, ld, cg, h, w, oh, ow,
                                      p);
            }
          });
        }
      }
      if (cl && gxp)
        parallel_for(0, nb, grain_c, [&](int64_t lo, int64_t hi) {
          for (int64_t b = lo; b < hi; ++b)
            conv_cols::from_channels_last(gxh.get() + b * hw * c, gxp + (b0 + b) * c * hw, c, hw);
        });
    }
    if (!gwr.empty()) conv_cols::channels_major(gwr.data(), gwp, o, cg, taps);
  });
}

// Per row, with xhat = (x - mean) * rstd and gxhat = go * w:
//   gx = rstd * (gxhat - mean(gxhat) - xhat * mean(gxhat * xhat)),
// and over rows gw = sum go * xhat, gb = sum go. Mean and variance in double,
// like the forward kernel (so xhat is the forward's); the sums of gradients in
// T. Each thread sums gw/gb over its rows into its own buffer.
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
      // Simple loops, one job each, so that each vectorizes.
      std::vector<T> xhat_buf(static_cast<size_t>(d)), gh_buf(static_cast<size_t>(d));
      T* __restrict xhat = xhat_buf.data();
      T* __restrict gh = gh_buf.data();
      for (int64_t part = plo; part < phi; ++part) {
        T* __restrict pw = partial.data() + 2 * d * part;
        T* __restrict pb = pw + d;
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
#pragma omp simd
          for (int64_t j = 0; j < d; ++j) xhat[j] = (xr[j] - m) * rstd;
          if (wp) {
#pragma omp simd
            for (int64_t j = 0; j < d; ++j) gh[j] = gr[j] * wp[j];
          } else {
            std::copy_n(gr, d, gh);
          }
          T a = 0, bsum = 0;
#pragma omp simd reduction(+ : a, bsum)
          for (int64_t j = 0; j < d; ++j) {
            a += gh[j];
            bsum += gh[j] * xhat[j];
          }
          const T ma = a / static_cast<T>(d), mb = bsum / static_cast<T>(d);
#pragma omp simd
          for (int64_t j = 0; j < d; ++j) gxr[j] = rstd * (gh[j] - ma - xhat[j] * mb);
#pragma omp simd
          for (int64_t j = 0; j < d; ++j) {
            pw[j] += gr[j] * xhat[j];
            pb[j] += gr[j];
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
