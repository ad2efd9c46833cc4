// im2col / col2im shared by the convolution kernels (forward in
// nn_conv_kernels.cpp, backward in nn_backward_kernels.cpp). Kernel files
// only: the templates live in the per-ISA namespace so that the three
// compilations never share a symbol.
//
// Column layout: row r = (ch * kh + i) * kw + j (kernel tap), column l = output
// position oh * ow_n + ow; rows are `ld` apart so that several images can be
// laid side by side ([K, images * L]) and multiplied with one GEMM.
#pragma once

#include <algorithm>
#include <cstring>

#include "ops/nn_kernels.h"

namespace strata::cpu {
inline namespace STRATA_CPU_NS {
namespace conv_cols {

// Output columns [lo, hi) of a row whose input column (ow * sw + off_w) lies in [0, w).
inline void valid_cols(int64_t off_w, int64_t w, int64_t sw, int64_t ow_n, int64_t& lo, int64_t& hi) {
  lo = off_w >= 0 ? 0 : (-off_w + sw - 1) / sw;
  hi = w - 1 - off_w < 0 ? 0 : (w - 1 - off_w) / sw + 1;
  lo = std::min(lo, ow_n);
  hi = std::max(std::min(hi, ow_n), lo);
}

// col[r][l] = x[ch][oh*sh - ph + i*dh][ow*sw - pw + j*dw] (0 outside); x is (c, h, w).
template <typename T>
void im2col(const T* x, T* col, int64_t ld, int64_t c, int64_t h, int64_t w, int64_t oh_n, int64_t ow_n,
            const nn::Window2d& p) {
  for (int64_t ch = 0; ch < c; ++ch) {
    for (int64_t i = 0; i < p.kh; ++i) {
      for (int64_t j = 0; j < p.kw; ++j) {
        T* dst = col + ((ch * p.kh + i) * p.kw + j) * ld;
        const int64_t off_w = j * p.dw - p.pw;
        int64_t lo, hi;
        valid_cols(off_w, w, p.sw, ow_n, lo, hi);
        for (int64_t oh = 0; oh < oh_n; ++oh) {
          T* d = dst + oh * ow_n;
          const int64_t ih = oh * p.sh - p.ph + i * p.dh;
          if (ih < 0 || ih >= h) {
            std::fill(d, d + ow_n, T(0));
            continue;
          }
          const T* src = x + (ch * h + ih) * w + off_w;
          std::fill(d, d + lo, T(0));
          if (p.sw == 1) {
            std::memcpy(d + lo, src + lo, (hi - lo) * sizeof(T));
          } else {
            for (int64_t ow = lo; ow < hi; ++ow) d[ow] = src[ow * p.sw];
          }
          std::fill(d + hi, d + ow_n, T(0));
        }
      }
    }
  }
}

// The transpose of im2col: x[ch][ih][iw] += col[r][l] for every tap that reads
// (ih, iw); x must be zeroed (or hold what it should be added to).
template <typename T>
void col2im_add(const T* col, T* x, int64_t ld, int64_t c, int64_t h, int64_t w, int64_t oh_n, int64_t ow_n,
                const nn::Window2d& p) {
  for (int64_t ch = 0; ch < c; ++ch) {
    for (int64_t i = 0; i < p.kh; ++i) {
      for (int64_t j = 0; j < p.kw; ++j) {
        const T* src_row = col + ((ch * p.kh + i) * p.kw + j) * ld;
        const int64_t off_w = j * p.dw - p.pw;
        int64_t lo, hi;
        valid_cols(off_w, w, p.sw, ow_n, lo, hi);
        for (int64_t oh = 0; oh < oh_n; ++oh) {
          const int64_t ih = oh * p.sh - p.ph + i * p.dh;
          if (ih < 0 || ih >= h) continue;
          const T* s = src_row + oh * ow_n;
          T* dst = x + (ch * h + ih) * w + off_w;
          if (p.sw == 1) {
#pragma omp simd
            for (int64_t ow = lo; ow < hi; ++ow) dst[ow] += s[ow];
          } else {
            for (int64_t ow = lo; ow < hi; ++ow) dst[ow * p.sw] += s[ow];
          }
        }
      }
    }
  }
}

// How many images to lay side by side: enough to make one GEMM large, few
// enough that the column buffer stays around 4M elements (16 MiB in float).
inline int64_t images_per_chunk(int64_t n, int64_t k, int64_t l) {
  const int64_t per = std::max<int64_t>(k * l, 1);
  return std::clamp<int64_t>((int64_t{1} << 22) / per, 1, std::max<int64_t>(n, 1));
}

}  // namespace conv_cols
}  // namespace STRATA_CPU_NS
}  // namespace strata::cpu
