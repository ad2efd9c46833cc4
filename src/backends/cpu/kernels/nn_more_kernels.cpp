// CPU kernels of 1-D/3-D and adaptive pooling, unpooling, interpolation and
// im2col/col2im (contracts in ops/nn_more_kernels.h). Every pooling and
// interpolation input arrives as contiguous (planes, D, H, W); forward kernels
// split the output rows (plane, od, oh) across threads, backward kernels the
// planes (a plane's gradient is written by one thread, so scatters need no
// atomics). float and double only.
#include <algorithm>
#include <cmath>
#include <limits>

#include "backends/cpu/kernels/conv_cols.h"
#include "backends/cpu/loops.h"
#include "ops/nn_more_kernels.h"

namespace strata {
namespace cpu {
inline namespace STRATA_CPU_NS {
namespace {

struct Dims3 {
  int64_t planes, d, h, w, od, oh, ow;
};
Dims3 dims_of(const Tensor& in, const Tensor& out) {
  return {in.size(0), in.size(1), in.size(2), in.size(3), out.size(1), out.size(2), out.size(3)};
}

// Threads take whole output rows; the grain keeps each chunk near kGrainSize units of work.
int64_t row_grain(int64_t work_per_row) {
  return std::max<int64_t>(1, kGrainSize / std::max<int64_t>(work_per_row, 1));
}

// Window [start, end) of output position o along one dim, before clipping to the input (torch's pooling).
struct Span {
  int64_t lo, hi;
};
inline Span window(int64_t o, const nn::Window3d& w, int dim) {
  const int64_t lo = o * w.s[dim] - w.p[dim];
  return {lo, lo + (w.k[dim] - 1) * w.d[dim] + 1};
}
// First tap inside the input and the clipped end, stepping by the dilation.
inline Span clip_dilated(Span s, int64_t n, int64_t dil) {
  int64_t lo = s.lo;
  if (lo < 0) lo += ((-lo + dil - 1) / dil) * dil;
  return {lo, std::min(s.hi, n)};
}

// Interior windows (inside the input in W, dilation 1 in W) of one output row: the output row itself is the
// running maximum and the taps are the outer loops, so the inner loop runs across output columns and
// vectorizes (strided loads, selects instead of branches). Taps are visited in the same order as in the general
// path, so ties and NaNs resolve the same way.
template <typename T>
void max_row_interior(const T* xpl, T* __restrict yrow, int64_t* __restrict irow, const Dims3& g,
                      const nn::Window3d& win, Span sd, Span sh, int64_t ow0, int64_t ow1) {
  const int64_t sw = win.s[2], pw = win.p[2], kw = win.k[2];
  const int64_t first = (sd.lo * g.h + sh.lo) * g.w - pw;
  for (int64_t ow = ow0; ow < ow1; ++ow) yrow[ow] = -std::numeric_limits<T>::infinity();
  if (irow)
    for (int64_t ow = ow0; ow < ow1; ++ow) irow[ow] = first + ow * sw;
  for (int64_t id = sd.lo; id < sd.hi; id += win.d[0])
    for (int64_t ih = sh.lo; ih < sh.hi; ih += win.d[1]) {
      const int64_t base = (id * g.h + ih) * g.w - pw;
      const T* __restrict row = xpl + base;
      for (int64_t c = 0; c < kw; ++c) {
        if (irow) {
#pragma omp simd
          for (int64_t ow = ow0; ow < ow1; ++ow) {
            const T v = row[ow * sw + c];
            // NaN wins and stays (torch propagates it).
            const bool take = (v > yrow[ow]) | (v != v);
            yrow[ow] = take ? v : yrow[ow];
            irow[ow] = take ? base + ow * sw + c : irow[ow];
          }
        } else {
#pragma omp simd
          for (int64_t ow = ow0; ow < ow1; ++ow) {
            const T v = row[ow * sw + c];
            const bool take = (v > yrow[ow]) | (v != v);
            yrow[ow] = take ? v : yrow[ow];
          }
        }
      }
    }
}

void max_pool3d_kernel(const Tensor& x, const Tensor& y, const Tensor& indices, const nn::Window3d& win) {
  visit_float32_64(y.dtype(), "max_pool", [&]<typename T>() {
    const Dims3 g = dims_of(x, y);
    const T* xp = x.data_ptr<T>();
    T* yp = y.data_ptr<T>();
    int64_t* ip = indices.defined() ? indices.data_ptr<int64_t>() : nullptr;
    const int64_t rows = g.planes * g.od * g.oh;
    // Output columns whose W window lies inside the input: [iw_lo, iw_hi).
    const int64_t kw = win.k[2], sw = win.s[2], pw = win.p[2];
    const int64_t iw_lo = std::min<int64_t>(g.ow, (pw + sw - 1) / sw);
    int64_t iw_hi = g.w - kw + pw >= 0 ? (g.w - kw + pw) / sw + 1 : 0;
    iw_hi = std::max(iw_lo, std::min(iw_hi, g.ow));
    const bool fast = win.d[2] == 1;
    parallel_for(0, rows, row_grain(g.ow * win.k[0] * win.k[1] * win.k[2]), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t oh = r % g.oh, od = (r / g.oh) % g.od, pl = r / (g.oh * g.od);
        const T* xpl = xp + pl * g.d * g.h * g.w;
        const Span sd = clip_dilated(window(od, win, 0), g.d, win.d[0]);
        const Span sh = clip_dilated(window(oh, win, 1), g.h, win.d[1]);
        T* yrow = yp + r * g.ow;
        int64_t* irow = ip ? ip + r * g.ow : nullptr;
        auto general = [&](int64_t ow) {
          const Span sw_ = clip_dilated(window(ow, win, 2), g.w, win.d[2]);
          T best = -std::numeric_limits<T>::infinity();
          int64_t bi = (sd.lo * g.h + sh.lo) * g.w + sw_.lo;
          for (int64_t id = sd.lo; id < sd.hi; id += win.d[0])
            for (int64_t ih = sh.lo; ih < sh.hi; ih += win.d[1]) {
              const int64_t base = (id * g.h + ih) * g.w;
              for (int64_t iw = sw_.lo; iw < sw_.hi; iw += win.d[2]) {
                const T v = xpl[base + iw];
                const bool take = (v > best) | (v != v);
                best = take ? v : best;
                bi = take ? base + iw : bi;
              }
            }
          yrow[ow] = best;
          if (irow) irow[ow] = bi;
        };
        if (!fast) {
          for (int64_t ow = 0; ow < g.ow; ++ow) general(ow);
          continue;
        }
        for (int64_t ow = 0; ow < iw_lo; ++ow) general(ow);
        if (sd.lo < sd.hi && sh.lo < sh.hi)
          max_row_interior<T>(xpl, yrow, irow, g, win, sd, sh, iw_lo, iw_hi);
        else
          for (int64_t ow = iw_lo; ow < iw_hi; ++ow) general(ow);
        for (int64_t ow = iw_hi; ow < g.ow; ++ow) general(ow);
      }
    });
  });
}

// torch's average window: the divisor counts the padded window clipped to input + padding (count_include_pad)
// or the window clipped to the input; the sum is over the input only.
struct AvgWindow {
  Span s[3];
  int64_t divisor;
};
inline AvgWindow avg_window(const int64_t o[3], const int64_t n[3], const nn::Window3d& w, bool include_pad,
                            int64_t divisor) {
  AvgWindow a;
  int64_t padded = 1, inner = 1;
  for (int i = 0; i < 3; ++i) {
    int64_t lo = o[i] * w.s[i] - w.p[i], hi = std::min(lo + w.k[i], n[i] + w.p[i]);
    padded *= hi - lo;
    lo = std::max<int64_t>(lo, 0), hi = std::min(hi, n[i]);
    inner *= std::max<int64_t>(hi - lo, 0);
    a.s[i] = {lo, hi};
  }
  a.divisor = divisor ? divisor : include_pad ? padded : inner;
  return a;
}

void avg_pool3d_kernel(const Tensor& x, const Tensor& y, const nn::Window3d& win, bool include_pad,
                       int64_t divisor) {
  visit_float32_64(y.dtype(), "avg_pool", [&]<typename T>() {
    const Dims3 g = dims_of(x, y);
    const int64_t n[3] = {g.d, g.h, g.w};
    const T* xp = x.data_ptr<T>();
    T* yp = y.data_ptr<T>();
    parallel_for(0, g.planes * g.od * g.oh, row_grain(g.ow * win.k[0] * win.k[1] * win.k[2]),
                 [&](int64_t r0, int64_t r1) {
                   for (int64_t r = r0; r < r1; ++r) {
                     const int64_t oh = r % g.oh, od = (r / g.oh) % g.od, pl = r / (g.oh * g.od);
                     const T* xpl = xp + pl * g.d * g.h * g.w;
                     for (int64_t ow = 0; ow < g.ow; ++ow) {
                       const int64_t o[3] = {od, oh, ow};
                       const AvgWindow a = avg_window(o, n, win, include_pad, divisor);
                       T s = 0;
                       for (int64_t id = a.s[0].lo; id < a.s[0].hi; ++id)
                         for (int64_t ih = a.s[1].lo; ih < a.s[1].hi; ++ih) {
                           const T* row = xpl + (id * g.h + ih) * g.w;
                           for (int64_t iw = a.s[2].lo; iw < a.s[2].hi; ++iw) s += row[iw];
                         }
                       // An empty window (all padding) gives 0, like torch.
                       const bool empty = a.s[0].lo >= a.s[0].hi || a.s[1].lo >= a.s[1].hi || a.s[2].lo >= a.s[2].hi;
                       yp[r * g.ow + ow] = empty ? T(0) : s / static_cast<T>(a.divisor);
                     }
                   }
                 });
  });
}

void avg_pool3d_backward_kernel(const Tensor& go, const Tensor& gx, const nn::Window3d& win, bool include_pad,
                                int64_t divisor) {
  visit_float32_64(gx.dtype(), "avg_pool_backward", [&]<typename T>() {
    const Dims3 g = dims_of(gx, go);
    const int64_t n[3] = {g.d, g.h, g.w}, in_plane = g.d * g.h * g.w, out_plane = g.od * g.oh * g.ow;
    const T* gp = go.data_ptr<T>();
    T* xp = gx.data_ptr<T>();
    parallel_for(0, g.planes, row_grain(std::max(in_plane, out_plane * win.k[0] * win.k[1] * win.k[2])),
                 [&](int64_t p0, int64_t p1) {
                   for (int64_t pl = p0; pl < p1; ++pl) {
                     T* xpl = xp + pl * in_plane;
                     const T* gpl = gp + pl * out_plane;
                     std::fill(xpl, xpl + in_plane, T(0));
                     for (int64_t od = 0; od < g.od; ++od)
                       for (int64_t oh = 0; oh < g.oh; ++oh)
                         for (int64_t ow = 0; ow < g.ow; ++ow) {
                           const int64_t o[3] = {od, oh, ow};
                           const AvgWindow a = avg_window(o, n, win, include_pad, divisor);
                           const T v = gpl[(od * g.oh + oh) * g.ow + ow] / static_cast<T>(a.divisor);
                           for (int64_t id = a.s[0].lo; id < a.s[0].hi; ++id)
                             for (int64_t ih = a.s[1].lo; ih < a.s[1].hi; ++ih) {
                               T* row = xpl + (id * g.h + ih) * g.w;
                               for (int64_t iw = a.s[2].lo; iw < a.s[2].hi; ++iw) row[iw] += v;
                             }
                         }
                   }
                 });
  });
}

inline int64_t adaptive_lo(int64_t o, int64_t in, int64_t out) { return (o * in) / out; }
inline int64_t adaptive_hi(int64_t o, int64_t in, int64_t out) { return ((o + 1) * in + out - 1) / out; }

void adaptive_pool3d_kernel(const Tensor& x, const Tensor& y, const Tensor& indices) {
  visit_float32_64(y.dtype(), "adaptive_pool", [&]<typename T>() {
    const Dims3 g = dims_of(x, y);
    const T* xp = x.data_ptr<T>();
    T* yp = y.data_ptr<T>();
    int64_t* ip = indices.defined() ? indices.data_ptr<int64_t>() : nullptr;
    if (!ip && g.od == 1 && g.oh == 1 && g.ow == 1) {
      // Global average pooling: one contiguous sum per plane.
      const int64_t n = g.d * g.h * g.w;
      parallel_for(0, g.planes, row_grain(n), [&](int64_t p0, int64_t p1) {
        for (int64_t pl = p0; pl < p1; ++pl) {
          const T* src = xp + pl * n;
          T s = 0;
#pragma omp simd reduction(+ : s)
          for (int64_t i = 0; i < n; ++i) s += src[i];
          yp[pl] = s / static_cast<T>(n);
        }
      });
      return;
    }
    const int64_t win = ((g.d + g.od - 1) / g.od + 1) * ((g.h + g.oh - 1) / g.oh + 1) * ((g.w + g.ow - 1) / g.ow + 1);
    parallel_for(0, g.planes * g.od * g.oh, row_grain(g.ow * win), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t oh = r % g.oh, od = (r / g.oh) % g.od, pl = r / (g.oh * g.od);
        const T* xpl = xp + pl * g.d * g.h * g.w;
        const int64_t d0 = adaptive_lo(od, g.d, g.od), d1 = adaptive_hi(od, g.d, g.od);
        const int64_t h0 = adaptive_lo(oh, g.h, g.oh), h1 = adaptive_hi(oh, g.h, g.oh);
        for (int64_t ow = 0; ow < g.ow; ++ow) {
          const int64_t w0 = adaptive_lo(ow, g.w, g.ow), w1 = adaptive_hi(ow, g.w, g.ow);
          if (ip) {
            T best = -std::numeric_limits<T>::infinity();
            int64_t bi = (d0 * g.h + h0) * g.w + w0;
            for (int64_t id = d0; id < d1; ++id)
              for (int64_t ih = h0; ih < h1; ++ih)
                for (int64_t iw = w0; iw < w1; ++iw) {
                  const int64_t at = (id * g.h + ih) * g.w + iw;
                  if (xpl[at] > best || std::isnan(xpl[at])) {
                    best = xpl[at];
                    bi = at;
                  }
                }
            yp[r * g.ow + ow] = best;
            ip[r * g.ow + ow] = bi;
          } else {
            T s = 0;
            for (int64_t id = d0; id < d1; ++id)
              for (int64_t ih = h0; ih < h1; ++ih) {
                const T* row = xpl + (id * g.h + ih) * g.w;
                // Vector partial sums for wide windows (global average pooling reads whole planes).
#pragma omp simd reduction(+ : s)
                for (int64_t iw = w0; iw < w1; ++iw) s += row[iw];
              }
            yp[r * g.ow + ow] = s / static_cast<T>((d1 - d0) * (h1 - h0) * (w1 - w0));
          }
        }
      }
    });
  });
}

void adaptive_avg_pool3d_backward_kernel(const Tensor& go, const Tensor& gx) {
  visit_float32_64(gx.dtype(), "adaptive_avg_pool_backward", [&]<typename T>() {
    const Dims3 g = dims_of(gx, go);
    const int64_t in_plane = g.d * g.h * g.w, out_plane = g.od * g.oh * g.ow;
    const T* gp = go.data_ptr<T>();
    T* xp = gx.data_ptr<T>();
    if (out_plane == 1) {
      // Global average pooling: every input element gets its plane's gradient / n.
      parallel_for(0, g.planes, row_grain(in_plane), [&](int64_t p0, int64_t p1) {
        for (int64_t pl = p0; pl < p1; ++pl)
          std::fill(xp + pl * in_plane, xp + (pl + 1) * in_plane, gp[pl] / static_cast<T>(in_plane));
      });
      return;
    }
    parallel_for(0, g.planes, row_grain(in_plane + out_plane), [&](int64_t p0, int64_t p1) {
      for (int64_t pl = p0; pl < p1; ++pl) {
        T* xpl = xp + pl * in_plane;
        const T* gpl = gp + pl * out_plane;
        std::fill(xpl, xpl + in_plane, T(0));
        for (int64_t od = 0; od < g.od; ++od) {
          const int64_t d0 = adaptive_lo(od, g.d, g.od), d1 = adaptive_hi(od, g.d, g.od);
          for (int64_t oh = 0; oh < g.oh; ++oh) {
            const int64_t h0 = adaptive_lo(oh, g.h, g.oh), h1 = adaptive_hi(oh, g.h, g.oh);
            for (int64_t ow = 0; ow < g.ow; ++ow) {
              const int64_t w0 = adaptive_lo(ow, g.w, g.ow), w1 = adaptive_hi(ow, g.w, g.ow);
              const T v = gpl[(od * g.oh + oh) * g.ow + ow] / static_cast<T>((d1 - d0) * (h1 - h0) * (w1 - w0));
              for (int64_t id = d0; id < d1; ++id)
                for (int64_t ih = h0; ih < h1; ++ih) {
                  T* row = xpl + (id * g.h + ih) * g.w;
                  for (int64_t iw = w0; iw < w1; ++iw) row[iw] += v;
                }
            }
          }
        }
      }
    });
  });
}

void pool_scatter_kernel(const Tensor& src, const Tensor& indices, const Tensor& out, bool accumulate) {
  visit_float32_64(out.dtype(), "_pool_scatter", [&]<typename T>() {
    const int64_t planes = out.size(0), p = out.size(1), q = src.size(1);
    const T* sp = src.data_ptr<T>();
    const int64_t* ip = indices.data_ptr<int64_t>();
    T* op = out.data_ptr<T>();
    parallel_for(0, planes, row_grain(p + q), [&](int64_t p0, int64_t p1) {
      for (int64_t pl = p0; pl < p1; ++pl) {
        T* o = op + pl * p;
        const T* s = sp + pl * q;
        const int64_t* ix = ip + pl * q;
        std::fill(o, o + p, T(0));
        if (accumulate) {
          for (int64_t i = 0; i < q; ++i) o[ix[i]] += s[i];
        } else {
          for (int64_t i = 0; i < q; ++i) o[ix[i]] = s[i];
        }
      }
    });
  });
}

// Tables of one axis in the kernel's type.
template <typename T>
struct AxisT {
  int64_t taps;
  const int64_t* idx;
  std::vector<T> w;
  explicit AxisT(const nn::InterpAxis& a) : taps(a.taps), idx(a.idx.data()), w(a.w.begin(), a.w.end()) {}
};

// One output row (plane, od, oh): each (depth tap, height tap) pair adds its weighted, W-interpolated input
// row to the output row, so the inner loop runs along W with the row pointer fixed. The W taps are a template
// parameter so that the common 1-, 2- and 4-tap loops unroll.
template <typename T, int TW>
void interp_row(const T* xpl, T* yrow, const Dims3& g, const AxisT<T>& ad, const AxisT<T>& ah, const AxisT<T>& aw,
                int64_t od, int64_t oh) {
  const int64_t* iw = aw.idx;
  const T* ww = aw.w.data();
  bool first = true;
  for (int64_t a = 0; a < ad.taps; ++a) {
    const int64_t id = ad.idx[od * ad.taps + a];
    const T wa = ad.w[od * ad.taps + a];
    for (int64_t b = 0; b < ah.taps; ++b) {
      const T* row = xpl + (id * g.h + ah.idx[oh * ah.taps + b]) * g.w;
      const T wab = wa * ah.w[oh * ah.taps + b];
      for (int64_t ow = 0; ow < g.ow; ++ow) {
        T inner = row[iw[ow * TW]] * ww[ow * TW];
        for (int c = 1; c < TW; ++c) inner += row[iw[ow * TW + c]] * ww[ow * TW + c];
        yrow[ow] = first ? inner * wab : yrow[ow] + inner * wab;
      }
      first = false;
    }
  }
}

// Any number of taps per axis (antialiased tables are wider than 4), nothing unrolled.
template <typename T>
void interp_row_any(const T* xpl, T* yrow, const Dims3& g, const AxisT<T>& ad, const AxisT<T>& ah,
                    const AxisT<T>& aw, int64_t od, int64_t oh) {
  const int64_t tw = aw.taps;
  for (int64_t ow = 0; ow < g.ow; ++ow) {
    T acc = 0;
    for (int64_t a = 0; a < ad.taps; ++a) {
      const T* plane = xpl + ad.idx[od * ad.taps + a] * g.h * g.w;
      T mid = 0;
      for (int64_t b = 0; b < ah.taps; ++b) {
        const T* row = plane + ah.idx[oh * ah.taps + b] * g.w;
        T inner = 0;
        for (int64_t c = 0; c < tw; ++c) inner += row[aw.idx[ow * tw + c]] * aw.w[ow * tw + c];
        mid += inner * ah.w[oh * ah.taps + b];
      }
      acc += mid * ad.w[od * ad.taps + a];
    }
    yrow[ow] = acc;
  }
}

// The common case of one depth tap (1-D and 2-D inputs): all height and width taps in one pass over the row,
// both tap counts unrolled.
template <typename T, int TH, int TW>
void interp_row_hw(const T* xpl, T* yrow, const Dims3& g, const AxisT<T>& ad, const AxisT<T>& ah,
                   const AxisT<T>& aw, int64_t od, int64_t oh) {
  const T* plane = xpl + ad.idx[od] * g.h * g.w;
  const T wd = ad.w[od];
  const T* rows[TH];
  T wh[TH];
  for (int b = 0; b < TH; ++b) {
    rows[b] = plane + ah.idx[oh * TH + b] * g.w;
    wh[b] = wd * ah.w[oh * TH + b];
  }
  const int64_t* iw = aw.idx;
  const T* ww = aw.w.data();
  for (int64_t ow = 0; ow < g.ow; ++ow) {
    T acc = 0;
    for (int b = 0; b < TH; ++b) {
      T inner = rows[b][iw[ow * TW]] * ww[ow * TW];
      for (int c = 1; c < TW; ++c) inner += rows[b][iw[ow * TW + c]] * ww[ow * TW + c];
      acc = b == 0 ? inner * wh[0] : acc + inner * wh[b];
    }
    yrow[ow] = acc;
  }
}

template <typename T, int TH>
void interp_row_hw_w(const T* xpl, T* yrow, const Dims3& g, const AxisT<T>& ad, const AxisT<T>& ah,
                     const AxisT<T>& aw, int64_t od, int64_t oh) {
  switch (aw.taps) {
    case 1: interp_row_hw<T, TH, 1>(xpl, yrow, g, ad, ah, aw, od, oh); break;
    case 2: interp_row_hw<T, TH, 2>(xpl, yrow, g, ad, ah, aw, od, oh); break;
    default: interp_row_hw<T, TH, 4>(xpl, yrow, g, ad, ah, aw, od, oh); break;
  }
}

void interpolate_kernel(const Tensor& x, const Tensor& y, const nn::InterpAxis* axes) {
  visit_float32_64(y.dtype(), "interpolate", [&]<typename T>() {
    const Dims3 g = dims_of(x, y);
    const AxisT<T> ad(axes[0]), ah(axes[1]), aw(axes[2]);
    const T* xp = x.data_ptr<T>();
    T* yp = y.data_ptr<T>();
    parallel_for(0, g.planes * g.od * g.oh, row_grain(g.ow * ad.taps * ah.taps * aw.taps),
                 [&](int64_t r0, int64_t r1) {
                   for (int64_t r = r0; r < r1; ++r) {
                     const int64_t oh = r % g.oh, od = (r / g.oh) % g.od, pl = r / (g.oh * g.od);
                     const T* xpl = xp + pl * g.d * g.h * g.w;
                     T* yrow = yp + r * g.ow;
                     if (ad.taps > 4 || ah.taps > 4 || aw.taps > 4 || ad.taps == 3 || ah.taps == 3 || aw.taps == 3) {
                       interp_row_any<T>(xpl, yrow, g, ad, ah, aw, od, oh);
                       continue;
                     }
                     if (ad.taps == 1) {
                       switch (ah.taps) {
                         case 1: interp_row_hw_w<T, 1>(xpl, yrow, g, ad, ah, aw, od, oh); break;
                         case 2: interp_row_hw_w<T, 2>(xpl, yrow, g, ad, ah, aw, od, oh); break;
                         default: interp_row_hw_w<T, 4>(xpl, yrow, g, ad, ah, aw, od, oh); break;
                       }
                       continue;
                     }
                     switch (aw.taps) {
                       case 1: interp_row<T, 1>(xpl, yrow, g, ad, ah, aw, od, oh); break;
                       case 2: interp_row<T, 2>(xpl, yrow, g, ad, ah, aw, od, oh); break;
                       default: interp_row<T, 4>(xpl, yrow, g, ad, ah, aw, od, oh); break;
                     }
                   }
                 });
  });
}

// Adds one output-gradient row, weighted by its (depth, height) tap weight, into an input row through the W taps.
template <typename T, int TW>
void interp_row_backward(const T* grow, T* row, const AxisT<T>& aw, T wab, int64_t ow_n) {
  const int64_t* iw = aw.idx;
  const T* ww = aw.w.data();
  for (int64_t ow = 0; ow < ow_n; ++ow) {
    const T v = grow[ow] * wab;
    for (int c = 0; c < TW; ++c) row[iw[ow * TW + c]] += v * ww[ow * TW + c];
  }
}

void interpolate_backward_kernel(const Tensor& go, const Tensor& gx, const nn::InterpAxis* axes) {
  visit_float32_64(gx.dtype(), "interpolate_backward", [&]<typename T>() {
    const Dims3 g = dims_of(gx, go);
    const AxisT<T> ad(axes[0]), ah(axes[1]), aw(axes[2]);
    const int64_t in_plane = g.d * g.h * g.w, out_plane = g.od * g.oh * g.ow;
    const T* gp = go.data_ptr<T>();
    T* xp = gx.data_ptr<T>();
    parallel_for(0, g.planes, row_grain(in_plane + out_plane * ad.taps * ah.taps * aw.taps),
                 [&](int64_t p0, int64_t p1) {
                   for (int64_t pl = p0; pl < p1; ++pl) {
                     T* xpl = xp + pl * in_plane;
                     const T* gpl = gp + pl * out_plane;
                     std::fill(xpl, xpl + in_plane, T(0));
                     for (int64_t od = 0; od < g.od; ++od)
                       for (int64_t a = 0; a < ad.taps; ++a) {
                         const int64_t id = ad.idx[od * ad.taps + a];
                         const T wa = ad.w[od * ad.taps + a];
                         for (int64_t oh = 0; oh < g.oh; ++oh)
                           for (int64_t b = 0; b < ah.taps; ++b) {
                             T* row = xpl + (id * g.h + ah.idx[oh * ah.taps + b]) * g.w;
                             const T wab = wa * ah.w[oh * ah.taps + b];
                             const T* grow = gpl + (od * g.oh + oh) * g.ow;
                             switch (aw.taps) {
                               case 1: interp_row_backward<T, 1>(grow, row, aw, wab, g.ow); break;
                               case 2: interp_row_backward<T, 2>(grow, row, aw, wab, g.ow); break;
                               case 4: interp_row_backward<T, 4>(grow, row, aw, wab, g.ow); break;
                               default:
                                 for (int64_t ow = 0; ow < g.ow; ++ow) {
                                   const T v = grow[ow] * wab;
                                   for (int64_t c = 0; c < aw.taps; ++c)
                                     row[aw.idx[ow * aw.taps + c]] += v * aw.w[ow * aw.taps + c];
                                 }
                             }
                           }
                       }
                   }
                 });
  });
}

void im2col_kernel(const Tensor& x, const Tensor& cols, int64_t oh, int64_t ow, const nn::Window2d& p) {
  visit_float32_64(x.dtype(), "im2col", [&]<typename T>() {
    const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3), l = oh * ow;
    const T* xp = x.data_ptr<T>();
    T* cp = cols.data_ptr<T>();
    parallel_for(0, n, row_grain(c * p.kh * p.kw * l), [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b)
        conv_cols::im2col(xp + b * c * h * w, cp + b * c * p.kh * p.kw * l, l, c, h, w, oh, ow, p);
    });
  });
}

void col2im_kernel(const Tensor& cols, const Tensor& x, int64_t oh, int64_t ow, const nn::Window2d& p) {
  visit_float32_64(x.dtype(), "col2im", [&]<typename T>() {
    const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3), l = oh * ow;
    const T* cp = cols.data_ptr<T>();
    T* xp = x.data_ptr<T>();
    parallel_for(0, n, row_grain(c * p.kh * p.kw * l), [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        T* xb = xp + b * c * h * w;
        std::fill(xb, xb + c * h * w, T(0));
        conv_cols::col2im_add(cp + b * c * p.kh * p.kw * l, xb, l, c, h, w, oh, ow, p);
      }
    });
  });
}

}  // namespace
}  // namespace STRATA_CPU_NS
}  // namespace cpu

STRATA_REGISTER_CPU_KERNEL(nn_max_pool3d_stub, cpu::max_pool3d_kernel);
STRATA_REGISTER_CPU_KERNEL(nn_avg_pool3d_stub, cpu::avg_pool3d_kernel);
STRATA_REGISTER_CPU_KERNEL(nn_avg_pool3d_backward_stub, cpu::avg_pool3d_backward_kernel);
STRATA_REGISTER_CPU_KERNEL(nn_adaptive_pool3d_stub, cpu::adaptive_pool3d_kernel);
STRATA_REGISTER_CPU_KERNEL(nn_adaptive_avg_pool3d_backward_stub, cpu::adaptive_avg_pool3d_backward_kernel);
STRATA_REGISTER_CPU_KERNEL(nn_pool_scatter_stub, cpu::pool_scatter_kernel);
STRATA_REGISTER_CPU_KERNEL(nn_interpolate_stub, cpu::interpolate_kernel);
STRATA_REGISTER_CPU_KERNEL(nn_interpolate_backward_stub, cpu::interpolate_backward_kernel);
STRATA_REGISTER_CPU_KERNEL(nn_im2col_stub, cpu::im2col_kernel);
STRATA_REGISTER_CPU_KERNEL(nn_col2im_stub, cpu::col2im_kernel);

}  // namespace strata
