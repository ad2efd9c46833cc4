// CPU kernels of the fused cross_entropy and embedding backward ops
// (ops/fused_backward_kernels.h). Compiled once per ISA level; float and double.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/kernels/vexp.h"
#include "backends/cpu/loops.h"
#include "ops/fused_backward_kernels.h"

namespace strata {
namespace cpu {
inline namespace STRATA_CPU_NS {
namespace {

// Per position p, with q the weighted, smoothed target distribution over the
// C classes (class index t: q_k = w_t (1 - eps) [k == t] + eps / C * w_k, zero
// where t is ignored; probabilities: q_k = w_k (t_k (1 - eps) + eps / C)):
//   gx_k = coef_p * (softmax(x_p)_k * sum(q) - q_k),
// coef_p the gradient of position p's loss (divided by the mean's denominator).
// The exponentials are written to gx first and scaled in a second pass.
template <typename T>
struct CeBackward {
  using A = opmath_t<T>;
  const T* go;
  bool go_per_position;
  const T* x;
  const int64_t* t;  // class indices, or null
  const T* tp;       // probabilities, or null
  const T* w;        // class weights, or null
  T* gx;
  int64_t n, c, d, ignore;
  A eps, inv_denom, wsum;

  A coef(int64_t p) const { return static_cast<A>(go[go_per_position ? p : 0]) * inv_denom; }
  A weight(int64_t k) const { return w ? static_cast<A>(w[k]) : A(1); }

  // softmax's max shift; a row of -inf (or +inf) shifts by 0, like the forward kernel.
  static A shift_of(A m) { return std::isfinite(m) ? m : A(0); }

  void row(int64_t i) const {  // d == 1: position i is the contiguous row i
    const T* __restrict xr = x + i * c;
    T* __restrict g = gx + i * c;
    if (!tp && t[i] == ignore) {
      std::fill_n(g, c, T(0));
      return;
    }
    A m = -std::numeric_limits<A>::infinity();
#pragma omp simd reduction(max : m)
    for (int64_t k = 0; k < c; ++k) m = static_cast<A>(xr[k]) > m ? static_cast<A>(xr[k]) : m;
    const A sh = shift_of(m);
    A s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t k = 0; k < c; ++k) {
      A e = vexp(static_cast<A>(xr[k]) - sh);
      g[k] = static_cast<T>(e);
      s += e;
    }
    A cf = coef(i);
    if (tp) {
      const T* __restrict tr = tp + i * c;
      const A a = A(1) - eps, b = eps / static_cast<A>(c);
      A sq = 0;
#pragma omp simd reduction(+ : sq)
      for (int64_t k = 0; k < c; ++k) sq += weight(k) * (static_cast<A>(tr[k]) * a + b);
      const A sc = cf * sq / s;
#pragma omp simd
      for (int64_t k = 0; k < c; ++k)
        g[k] = static_cast<T>(static_cast<A>(g[k]) * sc - cf * weight(k) * (static_cast<A>(tr[k]) * a + b));
      return;
    }
    const int64_t ti = t[i];
    const A wt = weight(ti), sq = (A(1) - eps) * wt + eps / static_cast<A>(c) * wsum;
    const A sc = cf * sq / s;
    if (eps == A(0)) {
#pragma omp simd
      for (int64_t k = 0; k < c; ++k) g[k] = static_cast<T>(static_cast<A>(g[k]) * sc);
    } else {
      const A cs = cf * eps / static_cast<A>(c);
#pragma omp simd
      for (int64_t k = 0; k < c; ++k) g[k] = static_cast<T>(static_cast<A>(g[k]) * sc - cs * weight(k));
    }
    g[ti] = static_cast<T>(static_cast<A>(g[ti]) - cf * (A(1) - eps) * wt);
  }

  // d > 1: the d positions of image i side by side, vectorized across them. buf holds 3 * d values.
  void image(int64_t i, A* __restrict buf) const {
    A* __restrict mx = buf;
    A* __restrict se = buf + d;
    A* __restrict cf = buf + 2 * d;
    const T* __restrict xi = x + i * c * d;
    T* __restrict g = gx + i * c * d;
    std::fill_n(mx, d, -std::numeric_limits<A>::infinity());
    std::fill_n(se, d, A(0));
    for (int64_t k = 0; k < c; ++k)
#pragma omp simd
      for (int64_t j = 0; j < d; ++j) {
        const A v = static_cast<A>(xi[k * d + j]);
        mx[j] = v > mx[j] ? v : mx[j];
      }
    for (int64_t j = 0; j < d; ++j) mx[j] = shift_of(mx[j]);
    for (int64_t k = 0; k < c; ++k)
#pragma omp simd
      for (int64_t j = 0; j < d; ++j) {
        A e = vexp(static_cast<A>(xi[k * d + j]) - mx[j]);
        g[k * d + j] = static_cast<T>(e);
        se[j] += e;
      }
    const A a = A(1) - eps, b = eps / static_cast<A>(c);
    if (tp) {
      const T* __restrict ti = tp + i * c * d;
      std::fill_n(mx, d, A(0));  // reused: sum(q) per position
      for (int64_t k = 0; k < c; ++k)
#pragma omp simd
        for (int64_t j = 0; j < d; ++j) mx[j] += weight(k) * (static_cast<A>(ti[k * d + j]) * a + b);
      for (int64_t j = 0; j < d; ++j) {
        cf[j] = coef(i * d + j);
        se[j] = cf[j] * mx[j] / se[j];
      }
      for (int64_t k = 0; k < c; ++k)
#pragma omp simd
        for (int64_t j = 0; j < d; ++j)
          g[k * d + j] = static_cast<T>(static_cast<A>(g[k * d + j]) * se[j] -
                                        cf[j] * weight(k) * (static_cast<A>(ti[k * d + j]) * a + b));
      return;
    }
    const int64_t* __restrict tt = t + i * d;
    for (int64_t j = 0; j < d; ++j) {
      const bool valid = tt[j] != ignore;
      cf[j] = valid ? coef(i * d + j) : A(0);
      const A sq = valid ? a * weight(tt[j]) + b * wsum : A(0);
      se[j] = cf[j] * sq / se[j];
      cf[j] *= b;  // the smoothing term's factor
    }
    for (int64_t k = 0; k < c; ++k) {
      const A wk = weight(k);
#pragma omp simd
      for (int64_t j = 0; j < d; ++j)
        g[k * d + j] = static_cast<T>(static_cast<A>(g[k * d + j]) * se[j] - cf[j] * wk);
    }
    for (int64_t j = 0; j < d; ++j) {
      if (tt[j] == ignore) {
        for (int64_t k = 0; k < c; ++k) g[k * d + j] = T(0);  // exactly 0 even where softmax was nan
        continue;
      }
      T& gt = g[tt[j] * d + j];
      gt = static_cast<T>(static_cast<A>(gt) - coef(i * d + j) * a * weight(tt[j]));
    }
  }
};

void cross_entropy_backward_kernel(const Tensor& go, const Tensor& x, const Tensor& target, const Tensor& weight,
                                   const Tensor& gx, const nn::ClassLossArgs& a, bool probs) {
  visit_float32_64(x.dtype(), "_cross_entropy_loss_backward", [&]<typename T>() {
    using A = opmath_t<T>;
    CeBackward<T> k{};
    k.go = go.data_ptr<T>();
    k.go_per_position = a.reduction == nn::Reduction::None;
    k.x = x.data_ptr<T>();
    k.t = probs ? nullptr : target.data_ptr<int64_t>();
    k.tp = probs ? target.data_ptr<T>() : nullptr;
    k.w = weight.defined() ? weight.data_ptr<T>() : nullptr;
    k.gx = gx.data_ptr<T>();
    k.n = a.n;
    k.c = a.c;
    k.d = a.d;
    k.ignore = a.ignore_index;
    k.eps = static_cast<A>(a.label_smoothing);
    const int64_t P = a.n * a.d;
    A wsum = 0;
    for (int64_t j = 0; j < a.c; ++j) wsum += k.weight(j);
    k.wsum = wsum;
    k.inv_denom = 1;
    if (a.reduction == nn::Reduction::Mean) {
      // Class indices: the summed weights of the non-ignored targets (1 where that is 0, like torch: the gradient is
      // then 0); probabilities: the number of positions.
      double den = 0;
      if (probs) {
        den = static_cast<double>(P);
      } else {
        for (int64_t p = 0; p < P; ++p)
          if (k.t[p] != a.ignore_index) den += static_cast<double>(k.weight(k.t[p]));
      }
      k.inv_denom = static_cast<A>(den == 0 ? 1.0 : 1.0 / den);
    }
    const int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(a.c * a.d, 1));
    parallel_for(0, a.n, grain, [&](int64_t lo, int64_t hi) {
      if (a.d == 1) {
        for (int64_t i = lo; i < hi; ++i) k.row(i);
        return;
      }
      std::vector<A> buf(static_cast<size_t>(3 * a.d));
      for (int64_t i = lo; i < hi; ++i) k.image(i, buf.data());
    });
  });
}

// out[idx[i]] += grad[i] (times 1 / count(idx[i]) with scale_grad_by_freq), skipping padding_idx. Threads split
// the columns, each walking every index: no atomics or per-thread copies of out, and the sums come out in index
// order whatever the thread count.
void embedding_backward_kernel(const Tensor& grad, const Tensor& idx, const Tensor& out, int64_t padding_idx,
                               bool scale_grad_by_freq) {
  visit_float32_64(grad.dtype(), "_embedding_dense_backward", [&]<typename T>() {
    const int64_t m = idx.numel(), v = out.size(0), d = out.size(1);
    const T* gp = grad.data_ptr<T>();
    const int64_t* ip = idx.data_ptr<int64_t>();
    T* op = out.data_ptr<T>();
    std::fill_n(op, v * d, T(0));
    if (m == 0 || d == 0) return;
    std::vector<T> inv;
    if (scale_grad_by_freq) {
      std::vector<int64_t> counts(static_cast<size_t>(v), 0);
      for (int64_t i = 0; i < m; ++i) ++counts[ip[i]];
      inv.resize(static_cast<size_t>(v));
      for (int64_t r = 0; r < v; ++r) inv[r] = counts[r] ? T(1) / static_cast<T>(counts[r]) : T(0);
    }
    constexpr int64_t kBlock = 16;  // columns per unit of work: a 64-byte line of float
    const int64_t blocks = (d + kBlock - 1) / kBlock;
    // Adds are cheap next to a thread start: a model's 2048 x 128 gradient measured 22 us on one thread and
    // 46 us on two, so only much larger gradients are split.
    const int64_t grain = std::max<int64_t>(1, 8 * kGrainSize / (m * kBlock));
    parallel_for(0, blocks, grain, [&](int64_t lo, int64_t hi) {
      const int64_t c0 = lo * kBlock, c1 = std::min(d, hi * kBlock);
      for (int64_t i = 0; i < m; ++i) {
        const int64_t r = ip[i];
        if (r == padding_idx) continue;
        const T* __restrict src = gp + i * d;
        T* __restrict dst = op + r * d;
        if (scale_grad_by_freq) {
          const T s = inv[r];
#pragma omp simd
          for (int64_t j = c0; j < c1; ++j) dst[j] += src[j] * s;
        } else {
#pragma omp simd
          for (int64_t j = c0; j < c1; ++j) dst[j] += src[j];
        }
      }
    });
  });
}

}  // namespace
}  // namespace STRATA_CPU_NS
}  // namespace cpu

STRATA_REGISTER_CPU_KERNEL(nn_cross_entropy_backward_stub, cpu::cross_entropy_backward_kernel);
STRATA_REGISTER_CPU_KERNEL(nn_embedding_backward_stub, cpu::embedding_backward_kernel);

}  // namespace strata
