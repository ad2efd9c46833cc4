// CPU kernels of convolution (im2col + cpublas::gemm), pooling and padding
// (see ops/nn_kernels.h for the contracts). Compiled once per ISA
// level; float and double only, except pad which copies bytes.
//
// float32 convolutions (over 0.2 MFLOP, not 1x1: dnnl_conv::preferred) go to
// oneDNN's convolution primitive when the library loads (backends/cpu/
// dnnl_conv.cpp, Note [oneDNN convolution]: 1.7x faster than im2col + GEMM on
// the small CNN's second layer); the im2col + GEMM path below is the fallback
// and handles float64.
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "backends/cpu/blas.h"
#include "backends/cpu/dnnl_conv.h"
#include "backends/cpu/loops.h"
#include "backends/cpu/kernels/conv_cols.h"
#include "ops/nn_kernels.h"

namespace strata {
namespace cpu {
inline namespace STRATA_CPU_NS {
namespace {


// Images are laid side by side in one column buffer ([K, B * L], see
// conv_cols.h) so that each group needs one GEMM per chunk of B images: the
// small convolutions of typical CNNs (8x8 to 32x32 planes) otherwise run one
// tiny GEMM per image, which cost ~8x more than the arithmetic on the digits
// CNN. The GEMM writes [og, B * L]; a copy moves it to (n, o, L) and adds the bias.
void conv2d_kernel(const Tensor& x, const Tensor& wt, const Tensor& bias, const Tensor& y, const nn::Window2d& p,
                   int64_t groups) {
  visit_float32_64(y.dtype(), "conv2d", [&]<typename T>() {
    const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
    const int64_t o = y.size(1), oh = y.size(2), ow = y.size(3);
    const int64_t cg = c / groups, og = o / groups, K = cg * p.kh * p.kw, L = oh * ow;
    const T *xp = x.data_ptr<T>(), *wp = wt.data_ptr<T>();
    const T* bp = bias.defined() ? bias.data_ptr<T>() : nullptr;
    T* yp = y.data_ptr<T>();
    if (K == 0) {
      for (int64_t r = 0; r < n * o; ++r) std::fill(yp + r * L, yp + (r + 1) * L, bp ? bp[r % o] : T(0));
      return;
    }
    if constexpr (std::is_same_v<T, float>) {
      const dnnl_conv::Conv2dShape s{n, c, h, w, o, p.kh, p.kw, oh, ow, p.sh, p.sw, p.ph, p.pw, p.dh, p.dw, groups};
      if (dnnl_conv::preferred(s) && dnnl_conv::forward_f32(s, xp, wp, bp, yp)) return;
    }
    const int64_t chunk = conv_cols::images_per_chunk(n, K, L), taps = p.kh * p.kw, hw = h * w;
    const bool cl = conv_cols::use_channels_last(h, w, ow, cg);  // channels-last path, see conv_cols.h
    const std::vector<int32_t> table = cl ? conv_cols::make_table(h, w, oh, ow, p) : std::vector<int32_t>();
    conv_cols::Scratch<T> col(static_cast<size_t>(K * chunk * L), 0), out(static_cast<size_t>(og * chunk * L), 1);
    conv_cols::Scratch<T> xh(cl ? static_cast<size_t>(chunk * hw * c) : 0, 2);
    std::vector<T> wr(cl ? static_cast<size_t>(o * K) : 0);
    if (cl) conv_cols::taps_major(wp, wr.data(), o, cg, taps);
    for (int64_t b0 = 0; b0 < n; b0 += chunk) {
      const int64_t nb = std::min(chunk, n - b0), ld = nb * L;
      const int64_t grain_in = std::max<int64_t>(1, kGrainSize / (K * L));
      if (cl)
        parallel_for(0, nb, grain_in, [&](int64_t lo, int64_t hi) {
          for (int64_t b = lo; b < hi; ++b)
            conv_cols::to_channels_last(xp + (b0 + b) * c * hw, xh.get() + b * hw * c, c, hw);
        });
      for (int64_t g = 0; g < groups; ++g) {
        parallel_for(0, nb, grain_in, [&](int64_t lo, int64_t hi) {
          for (int64_t b = lo; b < hi; ++b) {
            if (cl)
              conv_cols::im2row(xh.get() + b * hw * c, c, g * cg, cg, col.get() + b * L * K, table.data(), taps, L);
            else
              conv_cols::im2col(xp + ((b0 + b) * c + g * cg) * hw, col.get() + b * L, ld, cg, h, w, oh, ow, p);
          }
        });
        if (cl)
          cpublas::gemm(cpublas::Trans::N, cpublas::Trans::T, og, ld, K, T(1), wr.data() + g * og * K, K, col.get(),
                        K, T(0), out.get(), ld);
        else
          cpublas::gemm(cpublas::Trans::N, cpublas::Trans::N, og, ld, K, T(1), wp + g * og * K, K, col.get(), ld,
                        T(0), out.get(), ld);
        const int64_t grain_out = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(og * L, 1));
        parallel_for(0, nb, grain_out, [&](int64_t lo, int64_t hi) {
          for (int64_t b = lo; b < hi; ++b)
            for (int64_t oc = 0; oc < og; ++oc) {
              const T* src = out.get() + oc * ld + b * L;
              T* dst = yp + ((b0 + b) * o + g * og + oc) * L;
              const T bv = bp ? bp[g * og + oc] : T(0);
#pragma omp simd
              for (int64_t l = 0; l < L; ++l) dst[l] = src[l] + bv;
            }
        });
      }
    }
  });
}

void avg_pool2d_kernel(const Tensor& x, const Tensor& y, const nn::Window2d& p, bool count_include_pad,
                       int64_t divisor) {
  visit_float32_64(y.dtype(), "avg_pool2d", [&]<typename T>() {
    const int64_t planes = x.size(0), h = x.size(1), w = x.size(2), oh_n = y.size(1), ow_n = y.size(2);
    const T* xp = x.data_ptr<T>();
    T* yp = y.data_ptr<T>();
    parallel_for(0, planes, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(oh_n * ow_n * p.kh * p.kw, 1)),
                 [&](int64_t lo, int64_t hi) {
                   for (int64_t pl = lo; pl < hi; ++pl) {
                     const T* xpl = xp + pl * h * w;
                     for (int64_t oh = 0; oh < oh_n; ++oh) {
                       int64_t hs = oh * p.sh - p.ph, he = std::min(hs + p.kh, h + p.ph);
                       for (int64_t ow = 0; ow < ow_n; ++ow) {
                         int64_t ws = ow * p.sw - p.pw, we = std::min(ws + p.kw, w + p.pw);
                         const int64_t pool = (he - hs) * (we - ws);
                         const int64_t h0 = std::max<int64_t>(hs, 0), h1 = std::min(he, h);
                         const int64_t w0 = std::max<int64_t>(ws, 0), w1 = std::min(we, w);
                         opmath_t<T> s = 0;
                         for (int64_t ih = h0; ih < h1; ++ih)
                           for (int64_t iw = w0; iw < w1; ++iw) s += xpl[ih * w + iw];
                         int64_t div = divisor ? divisor : (count_include_pad ? pool : (h1 - h0) * (w1 - w0));
                         yp[(pl * oh_n + oh) * ow_n + ow] = div ? static_cast<T>(s / div) : T(0);
                       }
                     }
                   }
                 });
  });
}

template <typename U>
void pad_impl(const Tensor& x, const Tensor& y, const std::vector<std::vector<int64_t>>& maps, U fill) {
  const int64_t nd = y.dim();
  const U* xp = static_cast<const U*>(x.data_ptr());
  U* yp = static_cast<U*>(y.data_ptr());
  const int64_t inner = y.size(nd - 1);
  const int64_t outer = inner ? y.numel() / inner : 0;
  const std::vector<int64_t>& last = maps[nd - 1];
  parallel_for(0, outer, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(inner, 1)), [&](int64_t lo, int64_t hi) {
    std::vector<int64_t> idx(nd, 0);
    for (int64_t r = lo; r < hi; ++r) {
      int64_t rem = r, off = 0;
      bool outside = false;
      for (int64_t d = nd - 2; d >= 0; --d) {
        const int64_t i = rem % y.size(d);
        rem /= y.size(d);
        const int64_t src = maps[d][i];
        if (src < 0) outside = true;
        off += src * x.stride(d);
      }
      U* dst = yp + r * inner;
      if (outside) {
        std::fill(dst, dst + inner, fill);
        continue;
      }
      const U* s = xp + off;
      for (int64_t j = 0; j < inner; ++j) dst[j] = last[j] < 0 ? fill : s[last[j]];
    }
  });
}

void pad_kernel(const Tensor& x, const Tensor& y, const std::vector<std::vector<int64_t>>& maps, double value) {
  uint64_t bits = 0;
  visit_dtype(y.dtype(), [&]<typename T>() {
    T v = static_cast<T>(static_cast<opmath_t<T>>(value));
    std::memcpy(&bits, &v, sizeof(T));
  });
  switch (y.element_size()) {
    case 1: return pad_impl<uint8_t>(x, y, maps, static_cast<uint8_t>(bits));
    case 2: return pad_impl<uint16_t>(x, y, maps, static_cast<uint16_t>(bits));
    case 4: return pad_impl<uint32_t>(x, y, maps, static_cast<uint32_t>(bits));
    default: return pad_impl<uint64_t>(x, y, maps, bits);
  }
}

}  // namespace
}  // namespace STRATA_CPU_NS
}  // namespace cpu

STRATA_REGISTER_CPU_KERNEL(nn_conv2d_stub, cpu::conv2d_kernel);
STRATA_REGISTER_CPU_KERNEL(nn_avg_pool2d_stub, cpu::avg_pool2d_kernel);
STRATA_REGISTER_CPU_KERNEL(nn_pad_stub, cpu::pad_kernel);

}  // namespace strata
