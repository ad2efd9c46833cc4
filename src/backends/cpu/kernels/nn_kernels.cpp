// CPU kernels of linear, embedding, one_hot, the normalizations and the
// losses (see ops/nn_kernels.h for the contracts). Compiled once per ISA
// level; float and double only (the ops convert 16-bit floats to float32).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backends/cpu/blas.h"
#include "backends/cpu/loops.h"
#include "ops/nn_kernels.h"

namespace strata {
namespace cpu {
inline namespace STRATA_CPU_NS {
namespace {

using nn::Reduction;

// Accumulation type: sums of float run in double so long rows keep 1e-6
// relative accuracy.
template <typename T>
using acc_t = double;

void linear_kernel(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y, int64_t m, int64_t n,
                   int64_t k) {
  visit_float32_64(y.dtype(), "linear", [&]<typename T>() {
    T* yp = y.data_ptr<T>();
    T beta = 0;
    if (bias.defined()) {
      const T* bp = bias.data_ptr<T>();
      parallel_for(0, m, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(n, 1)), [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) std::memcpy(yp + i * n, bp, n * sizeof(T));
      });
      beta = 1;
    }
    if (k == 0) {
      if (!bias.defined()) std::fill(yp, yp + m * n, T(0));
      return;
    }
    cpublas::gemm(cpublas::Trans::N, cpublas::Trans::T, m, n, k, T(1), x.data_ptr<T>(), k, w.data_ptr<T>(), k, beta,
                  yp, n);
  });
}

void minmax_kernel(const Tensor& idx, int64_t* lo, int64_t* hi) {
  const int64_t* p = idx.data_ptr<int64_t>();
  int64_t mn = p[0], mx = p[0];
  for (int64_t i = 1; i < idx.numel(); ++i) {
    mn = p[i] < mn ? p[i] : mn;
    mx = p[i] > mx ? p[i] : mx;
  }
  *lo = mn;
  *hi = mx;
}

// Rows are copied bytewise, so every weight dtype works.
void embedding_kernel(const Tensor& weight, const Tensor& idx, const Tensor& out) {
  const int64_t* ip = idx.data_ptr<int64_t>();
  const int64_t n = idx.numel();
  const size_t row = static_cast<size_t>(weight.size(1)) * weight.element_size();
  const char* wp = static_cast<const char*>(weight.data_ptr());
  char* op = static_cast<char*>(out.data_ptr());
  parallel_for(0, n, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(weight.size(1), 1)),
               [&](int64_t b, int64_t e) {
                 for (int64_t i = b; i < e; ++i) std::memcpy(op + i * row, wp + ip[i] * row, row);
               });
}

STRATA_ALWAYS_INLINE void prefetch_row(const void* p, int64_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (int64_t o = 0; o < bytes; o += 64) __builtin_prefetch(c + o, 0, 3);
}

// Note [embedding_bag order]: each bag is one pass over its indices, rows added in index order into a zeroed
// output row (the order torch's CPU kernel adds them in, so sums are bit-identical); mean divides the sum by the
// count of non-padding entries; max keeps the first maximum (a later value replaces it only when strictly
// greater, so a NaN first value stays). per_sample_weights scale each row with one multiply-add (torch's
// float32 kernel without padding_idx) or else a rounded product then an add (torch's other kernel).
// Bags are independent: threads split the bags.
void embedding_bag_kernel(const Tensor& weight, const Tensor& idx, const Tensor& offsets, int64_t mode,
                          const Tensor& psw, int64_t padding_idx, const Tensor& out, const Tensor& offset2bag,
                          const Tensor& aux) {
  visit_float32_64(weight.dtype(), "embedding_bag", [&]<typename T>() {
    const int64_t d = weight.size(1), n = idx.numel(), bags = out.size(0);
    const T* wp = weight.data_ptr<T>();
    const int64_t* ip = idx.data_ptr<int64_t>();
    const int64_t* offp = offsets.data_ptr<int64_t>();
    const T* pp = psw.defined() ? psw.data_ptr<T>() : nullptr;
    T* op = out.data_ptr<T>();
    int64_t* o2b = offset2bag.data_ptr<int64_t>();
    std::fill_n(o2b, n, int64_t{0});
    T* scale = mode == 2 ? nullptr : aux.data_ptr<T>();
    int64_t* argmax = mode == 2 ? aux.data_ptr<int64_t>() : nullptr;
    if (scale) std::fill_n(scale, n, T(0));
    const bool fused = std::is_same_v<T, float> && padding_idx < 0;  // see the Note
    // The rows are random reads: the row kAhead indices on is fetched while this one is added (32 measured
    // best of 8/16/32/64 on a (100000, 128) weight).
    constexpr int64_t kAhead = 32;
#if defined(__AVX512F__)
    constexpr int64_t kChunk = 512 / sizeof(T);  // 8 of the 32 vector registers
#else
    constexpr int64_t kChunk = 256 / sizeof(T);  // 8 of the 16 vector registers
#endif
    const int64_t row_bytes = d * static_cast<int64_t>(sizeof(T));
    const int64_t per = n / std::max<int64_t>(bags, 1) + 1;
    const int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(per * d, 1));
    parallel_for(0, bags, grain, [&](int64_t lo, int64_t hi) {
      std::vector<T> prod(pp && !fused ? static_cast<size_t>(d) : 0);
      for (int64_t b = lo; b < hi; ++b) {
        const int64_t s = offp[b], e = std::max(s, offp[b + 1]);
        T* __restrict orow = op + b * d;
        std::fill_n(orow, d, T(0));
        int64_t count = 0;
        if (mode == 2) {
          int64_t* arow = argmax + b * d;
          std::fill_n(arow, d, int64_t{-1});
          for (int64_t i = s; i < e; ++i) {
            o2b[i] = b;
            if (i + kAhead < n) prefetch_row(wp + ip[i + kAhead] * d, row_bytes);
            const int64_t r = ip[i];
            if (r == padding_idx) continue;
            const T* __restrict wrow = wp + r * d;
            if (count == 0) {
              for (int64_t j = 0; j < d; ++j) orow[j] = wrow[j], arow[j] = r;
            } else {
              for (int64_t j = 0; j < d; ++j) {
                if (wrow[j] > orow[j]) orow[j] = wrow[j], arow[j] = r;
              }
            }
            ++count;
          }
          continue;
        }
        for (int64_t i = s; i < e; ++i) {
          o2b[i] = b;
          count += ip[i] != padding_idx;
        }
        if (pp && !fused) {
          for (int64_t i = s; i < e; ++i) {
            if (i + kAhead < n) prefetch_row(wp + ip[i + kAhead] * d, row_bytes);
            const int64_t r = ip[i];
            if (r == padding_idx) continue;
            // Rounded product, then the add: two loops through memory, so no multiply-add is fused.
            const T* __restrict wrow = wp + r * d;
            const T w = pp[i];
            T* __restrict pr = prod.data();
#pragma omp simd
            for (int64_t j = 0; j < d; ++j) pr[j] = w * wrow[j];
#pragma omp simd
            for (int64_t j = 0; j < d; ++j) orow[j] += pr[j];
          }
        } else {
          // Columns in chunks of kChunk, each summed in registers over the bag's rows (same order of adds).
          for (int64_t j0 = 0, step = 0; j0 < d; j0 += step) {
            const int64_t left = d - j0;
            step = left >= kChunk ? kChunk : left >= kChunk / 2 ? kChunk / 2 : left >= kChunk / 4 ? kChunk / 4 : left;
            const int64_t pf = step * static_cast<int64_t>(sizeof(T));
            auto rows = [&](T* __restrict acc, auto width) {
              for (int64_t i = s; i < e; ++i) {
                if (i + kAhead < n) prefetch_row(wp + ip[i + kAhead] * d + j0, pf);
                const int64_t r = ip[i];
                if (r == padding_idx) continue;
                const T* __restrict wrow = wp + r * d + j0;
                if (pp) {
                  const T w = pp[i];
#pragma omp simd
                  for (int64_t j = 0; j < width; ++j) acc[j] = std::fma(w, wrow[j], acc[j]);
                } else {
#pragma omp simd
                  for (int64_t j = 0; j < width; ++j) acc[j] += wrow[j];
                }
              }
            };
            auto in_registers = [&](auto width) {
              T acc[width] = {};
              rows(acc, width);
              std::copy_n(acc, width(), orow + j0);
            };
            if (step == kChunk) in_registers(std::integral_constant<int64_t, kChunk>());
            else if (step == kChunk / 2) in_registers(std::integral_constant<int64_t, kChunk / 2>());
            else if (step == kChunk / 4) in_registers(std::integral_constant<int64_t, kChunk / 4>());
            else rows(orow + j0, step);
          }
        }
        const T f = mode == 1 && count > 0 ? T(1) / static_cast<T>(count) : T(1);
        for (int64_t i = s; i < e; ++i) scale[i] = ip[i] == padding_idx ? T(0) : f;
        if (mode == 1 && count > 1) {
          const T c = static_cast<T>(count);
#pragma omp simd
          for (int64_t j = 0; j < d; ++j) orow[j] /= c;
        }
      }
    });
  });
}

void embedding_renorm_kernel(const Tensor& weight, const Tensor& idx, double max_norm, double norm_type) {
  visit_float32_64(weight.dtype(), "embedding_renorm_", [&]<typename T>() {
    const int64_t* ip = idx.data_ptr<int64_t>();
    std::vector<int64_t> rows(ip, ip + idx.numel());
    std::sort(rows.begin(), rows.end());
    rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
    const int64_t d = weight.size(1);
    T* wp = weight.data_ptr<T>();
    for (int64_t r : rows) {
      T* row = wp + r * d;
      double norm = 0;
      if (std::isinf(norm_type)) {
        for (int64_t j = 0; j < d; ++j) norm = std::max(norm, std::fabs(double(row[j])));
      } else {
        for (int64_t j = 0; j < d; ++j) norm += std::pow(std::fabs(double(row[j])), norm_type);
        norm = std::pow(norm, 1.0 / norm_type);
      }
      if (norm > max_norm) {
        const T scale = static_cast<T>(max_norm / (norm + 1e-7));
        for (int64_t j = 0; j < d; ++j) row[j] *= scale;
      }
    }
  });
}

void one_hot_kernel(const Tensor& idx, const Tensor& out, int64_t c) {
  const int64_t* ip = idx.data_ptr<int64_t>();
  int64_t* op = out.data_ptr<int64_t>();
  std::memset(op, 0, out.numel() * sizeof(int64_t));
  for (int64_t i = 0; i < idx.numel(); ++i) op[i * c + ip[i]] = 1;
}

template <typename T>
void row_norm(const T* x, const T* w, const T* b, T* y, int64_t d, double eps, bool rms) {
  acc_t<T> mean = 0, var = 0;
  if (!rms) {
    acc_t<T> s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < d; ++j) s += x[j];
    mean = s / d;
  }
  acc_t<T> s2 = 0;
#pragma omp simd reduction(+ : s2)
  for (int64_t j = 0; j < d; ++j) {
    acc_t<T> c = x[j] - mean;
    s2 += c * c;
  }
  var = s2 / d;
  const T rstd = static_cast<T>(1.0 / std::sqrt(var + eps));
  const T m = static_cast<T>(mean);
  if (w && b) {
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) y[j] = (x[j] - m) * rstd * w[j] + b[j];
  } else if (w) {
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) y[j] = (x[j] - m) * rstd * w[j];
  } else if (b) {
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) y[j] = (x[j] - m) * rstd + b[j];
  } else {
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) y[j] = (x[j] - m) * rstd;
  }
}

template <typename T>
const T* opt_ptr(const Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}

void row_norm_kernel(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y, int64_t rows, int64_t d,
                     double eps, bool rms) {
  visit_float32_64(y.dtype(), rms ? "rms_norm" : "layer_norm", [&]<typename T>() {
    const T* xp = x.data_ptr<T>();
    const T *wp = opt_ptr<T>(w), *bp = opt_ptr<T>(b);
    T* yp = y.data_ptr<T>();
    parallel_for(0, rows, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(d, 1)), [&](int64_t s, int64_t e) {
      for (int64_t r = s; r < e; ++r) row_norm(xp + r * d, wp, bp, yp + r * d, d, eps, rms);
    });
  });
}

void group_norm_kernel(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y, int64_t n, int64_t c,
                       int64_t s, int64_t groups, double eps) {
  visit_float32_64(y.dtype(), "group_norm", [&]<typename T>() {
    const T* xp = x.data_ptr<T>();
    const T *wp = opt_ptr<T>(w), *bp = opt_ptr<T>(b);
    T* yp = y.data_ptr<T>();
    const int64_t cg = c / groups, block = cg * s;
    parallel_for(0, n * groups, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(block, 1)),
                 [&](int64_t lo, int64_t hi) {
                   for (int64_t ng = lo; ng < hi; ++ng) {
                     const T* xb = xp + ng * block;
                     T* yb = yp + ng * block;
                     double sum = 0, sq = 0;
#pragma omp simd reduction(+ : sum)
                     for (int64_t i = 0; i < block; ++i) sum += xb[i];
                     const double mean = block ? sum / block : 0;
#pragma omp simd reduction(+ : sq)
                     for (int64_t i = 0; i < block; ++i) sq += (xb[i] - mean) * (xb[i] - mean);
                     const double rstd = 1.0 / std::sqrt((block ? sq / block : 0) + eps);
                     const int64_t g = ng % groups;
                     for (int64_t ch = 0; ch < cg; ++ch) {
                       const int64_t cc = g * cg + ch;
                       const double scale = rstd * (wp ? double(wp[cc]) : 1.0);
                       const T sc = static_cast<T>(scale);
                       const T sh = static_cast<T>((bp ? double(bp[cc]) : 0.0) - mean * scale);
                       const T* xc = xb + ch * s;
                       T* yc = yb + ch * s;
#pragma omp simd
                       for (int64_t i = 0; i < s; ++i) yc[i] = xc[i] * sc + sh;
                     }
                   }
                 });
  });
}

void batch_norm_kernel(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& mean, const Tensor& var,
                       const Tensor& y, const Tensor& batch_mean, const Tensor& batch_var, int64_t n, int64_t c,
                       int64_t s, bool training, double eps) {
  visit_float32_64(y.dtype(), "batch_norm", [&]<typename T>() {
    const T* xp = x.data_ptr<T>();
    const T *wp = opt_ptr<T>(w), *bp = opt_ptr<T>(b);
    T* yp = y.data_ptr<T>();
    const double* mp = training ? nullptr : mean.data_ptr<double>();
    const double* vp = training ? nullptr : var.data_ptr<double>();
    double* bm = training ? batch_mean.data_ptr<double>() : nullptr;
    double* bv = training ? batch_var.data_ptr<double>() : nullptr;
    parallel_for(0, c, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t ch = lo; ch < hi; ++ch) {
        double mu, var_c;
        if (training) {
          double sum = 0, sq = 0;
          for (int64_t i = 0; i < n; ++i) {
            const T* xc = xp + (i * c + ch) * s;
#pragma omp simd reduction(+ : sum)
            for (int64_t j = 0; j < s; ++j) sum += xc[j];
          }
          const int64_t cnt = n * s;
          mu = cnt ? sum / cnt : 0;
          for (int64_t i = 0; i < n; ++i) {
            const T* xc = xp + (i * c + ch) * s;
#pragma omp simd reduction(+ : sq)
            for (int64_t j = 0; j < s; ++j) sq += (xc[j] - mu) * (xc[j] - mu);
          }
          var_c = cnt ? sq / cnt : 0;
          bm[ch] = mu;
          bv[ch] = var_c;
        } else {
          mu = mp[ch];
          var_c = vp[ch];
        }
        const double scale = (wp ? double(wp[ch]) : 1.0) / std::sqrt(var_c + eps);
        const T sc = static_cast<T>(scale);
        const T sh = static_cast<T>((bp ? double(bp[ch]) : 0.0) - mu * scale);
        for (int64_t i = 0; i < n; ++i) {
          const T* xc = xp + (i * c + ch) * s;
          T* yc = yp + (i * c + ch) * s;
#pragma omp simd
          for (int64_t j = 0; j < s; ++j) yc[j] = xc[j] * sc + sh;
        }
      }
    });
  });
}

// Fused log_softmax + gather (+ label smoothing): one pass for the max, one
// for the sum of exponentials, without materialising log-probabilities.
// Per position it records the nll term, the smoothing term and the target's
// weight; the reduction then runs serially in double (deterministic).
void class_loss_kernel(const Tensor& input, const Tensor& target, const Tensor& weight, const Tensor& out,
                       const nn::ClassLossArgs& a) {
  visit_float32_64(input.dtype(), a.logits ? "cross_entropy" : "nll_loss", [&]<typename T>() {
    const T* xp = input.data_ptr<T>();
    const int64_t* tp = target.data_ptr<int64_t>();
    const T* wp = opt_ptr<T>(weight);
    const int64_t n = a.n, c = a.c, d = a.d, P = n * d;
    const bool smooth = a.label_smoothing > 0;
    std::vector<double> nll(P), sm(smooth ? P : 0), wt(P);
    double wsum_all = 0;
    if (smooth && wp)
      for (int64_t k = 0; k < c; ++k) wsum_all += wp[k];
    parallel_for(0, n, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(c * d, 1)), [&](int64_t lo, int64_t hi) {
      std::vector<double> mx(d), se(d), wx(d);
      for (int64_t i = lo; i < hi; ++i) {
        const T* xi = xp + i * c * d;
        if (a.logits) {
          std::fill(se.begin(), se.end(), 0.0);
          if (d == 1) {
            // The common (N, C) case: contiguous rows, vectorised max and sum of exponentials.
            T m = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : m)
            for (int64_t k = 0; k < c; ++k) m = xi[k] > m ? xi[k] : m;
            if (!std::isfinite(m)) m = T(0);
            opmath_t<T> s = 0;
#pragma omp simd reduction(+ : s)
            for (int64_t k = 0; k < c; ++k) s += std::exp(xi[k] - m);
            mx[0] = m;
            se[0] = s;
          } else {
            std::fill(mx.begin(), mx.end(), -std::numeric_limits<double>::infinity());
            for (int64_t k = 0; k < c; ++k) {
              const T* row = xi + k * d;
              for (int64_t j = 0; j < d; ++j) mx[j] = row[j] > mx[j] ? double(row[j]) : mx[j];
            }
            for (int64_t j = 0; j < d; ++j)
              if (!std::isfinite(mx[j])) mx[j] = 0.0;
            for (int64_t k = 0; k < c; ++k) {
              const T* row = xi + k * d;
              for (int64_t j = 0; j < d; ++j) se[j] += std::exp(double(row[j]) - mx[j]);
            }
          }
        }
        // lse[j] = mx + log(se) is the log-normaliser; logp = x - lse.
        if (smooth) {
          std::fill(wx.begin(), wx.end(), 0.0);
          if (d == 1 && !wp) {
            double t = 0;
#pragma omp simd reduction(+ : t)
            for (int64_t k = 0; k < c; ++k) t += xi[k];
            wx[0] = t;
          } else {
            for (int64_t k = 0; k < c; ++k) {
              const double wk = wp ? double(wp[k]) : 1.0;
              const T* row = xi + k * d;
              for (int64_t j = 0; j < d; ++j) wx[j] += wk * double(row[j]);
            }
          }
        }
        for (int64_t j = 0; j < d; ++j) {
          const int64_t pos = i * d + j;
          const int64_t t = tp[pos];
          const double lse = a.logits ? mx[j] + std::log(se[j]) : 0.0;
          if (t == a.ignore_index) {
            nll[pos] = 0;
            wt[pos] = 0;
            if (smooth) sm[pos] = 0;
            continue;
          }
          const double wk = wp ? double(wp[t]) : 1.0;
          nll[pos] = -wk * (double(xi[t * d + j]) - lse);
          wt[pos] = wk;
          if (smooth) sm[pos] = -(wx[j] - lse * (wp ? wsum_all : double(c)));
        }
      }
    });
    const double eps = a.label_smoothing;
    if (a.reduction == Reduction::None) {
      T* op = out.data_ptr<T>();
      for (int64_t p = 0; p < P; ++p) op[p] = static_cast<T>((1 - eps) * nll[p] + (smooth ? eps / c * sm[p] : 0.0));
      return;
    }
    double snll = 0, ssm = 0, sw = 0, valid = 0;
    for (int64_t p = 0; p < P; ++p) {
      snll += nll[p];
      sw += wt[p];
      valid += tp[p] != a.ignore_index;
      if (smooth) ssm += sm[p];
    }
    double r;
    if (a.reduction == Reduction::Sum) {
      r = (1 - eps) * snll + eps / c * ssm;
    } else {
      r = (1 - eps) * (snll / sw);
      // The smoothing term is normalised like the nll term: by the targets' weights, or by the
      // number of non-ignored targets.
      if (smooth) r += eps / c * (wp ? ssm / sw : ssm / valid);
    }
    *out.data_ptr<T>() = static_cast<T>(r);
  });
}

// Cross entropy against class probabilities (soft targets).
void prob_loss_kernel(const Tensor& input, const Tensor& target, const Tensor& weight, const Tensor& out,
                      const nn::ClassLossArgs& a) {
  visit_float32_64(input.dtype(), "cross_entropy", [&]<typename T>() {
    const T *xp = input.data_ptr<T>(), *tp = target.data_ptr<T>();
    const T* wp = opt_ptr<T>(weight);
    const int64_t n = a.n, c = a.c, d = a.d, P = n * d;
    const double eps = a.label_smoothing;
    std::vector<double> loss(P);
    parallel_for(0, n, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(c * d, 1)), [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        const T* xi = xp + i * c * d;
        const T* ti = tp + i * c * d;
        for (int64_t j = 0; j < d; ++j) {
          double mx = -std::numeric_limits<double>::infinity();
          for (int64_t k = 0; k < c; ++k) mx = std::max(mx, double(xi[k * d + j]));
          if (!std::isfinite(mx) && !std::isnan(mx)) mx = 0;
          double se = 0;
          for (int64_t k = 0; k < c; ++k) se += std::exp(double(xi[k * d + j]) - mx);
          const double lse = mx + std::log(se);
          double l = 0;
          for (int64_t k = 0; k < c; ++k) {
            const double t = double(ti[k * d + j]) * (1 - eps) + eps / c;
            l -= (wp ? double(wp[k]) : 1.0) * t * (double(xi[k * d + j]) - lse);
          }
          loss[i * d + j] = l;
        }
      }
    });
    if (a.reduction == Reduction::None) {
      T* op = out.data_ptr<T>();
      for (int64_t p = 0; p < P; ++p) op[p] = static_cast<T>(loss[p]);
      return;
    }
    double s = 0;
    for (double v : loss) s += v;
    *out.data_ptr<T>() = static_cast<T>(a.reduction == Reduction::Sum ? s : s / static_cast<double>(P));
  });
}

void sum_kernel(const Tensor& x, const Tensor& out, double scale) {
  visit_float32_64(x.dtype(), "loss reduction", [&]<typename T>() {
    const T* p = x.data_ptr<T>();
    const int64_t n = x.numel();
    double s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < n; ++i) s += p[i];
    *out.data_ptr<T>() = static_cast<T>(s * scale);
  });
}

}  // namespace
}  // namespace STRATA_CPU_NS
}  // namespace cpu

STRATA_REGISTER_CPU_KERNEL(nn_linear_stub, cpu::linear_kernel);
STRATA_REGISTER_CPU_KERNEL(nn_minmax_stub, cpu::minmax_kernel);
STRATA_REGISTER_CPU_KERNEL(nn_embedding_stub, cpu::embedding_kernel);
STRATA_REGISTER_CPU_KERNEL(nn_one_hot_stub, cpu::one_hot_kernel);
STRATA_REGISTER_CPU_KERNEL(nn_embedding_bag_stub, cpu::embedding_bag_kernel);
STRATA_REGISTER_CPU_KERNEL(nn_embedding_renorm_stub, cpu::embedding_renorm_kernel);
STRATA_REGISTER_CPU_KERNEL(nn_row_norm_stub, cpu::row_norm_kernel);
STRATA_REGISTER_CPU_KERNEL(nn_group_norm_stub, cpu::group_norm_kernel);
STRATA_REGISTER_CPU_KERNEL(nn_batch_norm_stub, cpu::batch_norm_kernel);
STRATA_REGISTER_CPU_KERNEL(nn_class_loss_stub, cpu::class_loss_kernel);
STRATA_REGISTER_CPU_KERNEL(nn_prob_loss_stub, cpu::prob_loss_kernel);
STRATA_REGISTER_CPU_KERNEL(nn_sum_stub, cpu::sum_kernel);

}  // namespace strata
