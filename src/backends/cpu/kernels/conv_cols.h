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
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

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

// Small planes (the digits CNN's 8x8 and 4x4): copying row by row spends
// more time on loop overhead than on data (rows of 2 to 8 elements, strided),
// and so does a gather per element. These variants work channels-last
// instead: the image is transposed to [hw, c] once, and the transposed column
// buffer [L, taps * cg] (row l: for each tap, the cg channels of the input
// position it reads) is filled with one contiguous copy of cg values per
// (position, tap), through a table (shared by all images) of the input
// position of each (tap, output position), -1 in the padding. The GEMMs take
// the buffer transposed and the weight reordered to [o, taps, cg].
// With few channels per group the copies are too short to pay for the transposes (the digits CNN's first layer,
// one input channel, ran 2x slower this way), so those keep the row copies.
inline bool use_channels_last(int64_t h, int64_t w, int64_t ow_n, int64_t cg) {
  return ow_n < 16 && cg >= 8 && h * w < (int64_t{1} << 30);
}

inline std::vector<int32_t> make_table(int64_t h, int64_t w, int64_t oh_n, int64_t ow_n, const nn::Window2d& p) {
  std::vector<int32_t> t(static_cast<size_t>(p.kh * p.kw * oh_n * ow_n));
  size_t e = 0;
  for (int64_t i = 0; i < p.kh; ++i)
    for (int64_t j = 0; j < p.kw; ++j)
      for (int64_t oh = 0; oh < oh_n; ++oh)
        for (int64_t ow = 0; ow < ow_n; ++ow) {
          const int64_t ih = oh * p.sh - p.ph + i * p.dh, iw = ow * p.sw - p.pw + j * p.dw;
          t[e++] = (ih >= 0 && ih < h && iw >= 0 && iw < w) ? static_cast<int32_t>(ih * w + iw) : -1;
        }
  return t;
}

// One image: [c, hw] -> [hw, c], and back.
template <typename T>
void to_channels_last(const T* __restrict x, T* __restrict xh, int64_t c, int64_t hw) {
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t s = 0; s < hw; ++s) xh[s * c + ch] = x[ch * hw + s];
}
template <typename T>
void from_channels_last(const T* __restrict xh, T* __restrict x, int64_t c, int64_t hw) {
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t s = 0; s < hw; ++s) x[ch * hw + s] = xh[s * c + ch];
}

// Weight [o, cg, taps] <-> [o, taps, cg].
template <typename T>
void taps_major(const T* __restrict w, T* __restrict wr, int64_t o, int64_t cg, int64_t taps) {
  for (int64_t oc = 0; oc < o; ++oc)
    for (int64_t k = 0; k < cg; ++k)
      for (int64_t t = 0; t < taps; ++t) wr[(oc * taps + t) * cg + k] = w[(oc * cg + k) * taps + t];
}
template <typename T>
void channels_major(const T* __restrict wr, T* __restrict w, int64_t o, int64_t cg, int64_t taps) {
  for (int64_t oc = 0; oc < o; ++oc)
    for (int64_t k = 0; k < cg; ++k)
      for (int64_t t = 0; t < taps; ++t) w[(oc * cg + k) * taps + t] = wr[(oc * taps + t) * cg + k];
}

// rows [L, taps * cg] of one image from xh [hw, c], channels c0 .. c0 + cg.
template <typename T>
void im2row(const T* xh, int64_t c, int64_t c0, int64_t cg, T* rows, const int32_t* table, int64_t taps, int64_t L) {
  for (int64_t l = 0; l < L; ++l) {
    T* r = rows + l * taps * cg;
    for (int64_t t = 0; t < taps; ++t) {
      const int32_t off = table[t * L + l];
      if (off >= 0) std::copy_n(xh + off * c + c0, cg, r + t * cg);
      else std::fill_n(r + t * cg, cg, T(0));
    }
  }
}
// The transpose of im2row: adds the rows into xh.
template <typename T>
void row2im_add(const T* rows, T* xh, int64_t c, int64_t c0, int64_t cg, const int32_t* table, int64_t taps,
                int64_t L) {
  for (int64_t l = 0; l < L; ++l) {
    const T* r = rows + l * taps * cg;
    for (int64_t t = 0; t < taps; ++t) {
      const int32_t off = table[t * L + l];
      if (off < 0) continue;
      T* __restrict d = xh + off * c + c0;
      const T* __restrict s = r + t * cg;
#pragma omp simd
      for (int64_t k = 0; k < cg; ++k) d[k] += s[k];
    }
  }
}

// Column buffers of up to 1M elements are kept per thread between calls:
// a fresh multi-megabyte allocation is a fresh mmap whose page faults cost as
// much as the im2col itself on the digits CNN's convolutions. `slot` tells the
// buffers of one call apart.
template <typename T>
class Scratch {
 public:
  Scratch(size_t n, int slot) {
    constexpr size_t kKeep = size_t{1} << 20;
    if (n > kKeep) {
      own_.reset(new T[n]);
      ptr_ = own_.get();
      return;
    }
    thread_local std::vector<T> kept[4];
    std::vector<T>& v = kept[slot];
    if (v.size() < n) v.resize(n);
    ptr_ = v.data();
  }
  T* get() const { return ptr_; }

 private:
  std::unique_ptr<T[]> own_;
  T* ptr_ = nullptr;
};

// How many images to lay side by side: enough to make one GEMM large, few
// enough that the column buffer stays around 4M elements (16 MiB in float).
inline int64_t images_per_chunk(int64_t n, int64_t k, int64_t l) {
  const int64_t per = std::max<int64_t>(k * l, 1);
  return std::clamp<int64_t>((int64_t{1} << 22) / per, 1, std::max<int64_t>(n, 1));
}

}  // namespace conv_cols
}  // namespace STRATA_CPU_NS
}  // namespace strata::cpu
