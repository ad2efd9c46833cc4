// CPU kernels of the recurrent layer ops (contract in ops/rnn_kernels.h).
// Compiled once per ISA level; float and double.
//
// Forward: the input projection of every step is one GEMM over all N rows,
// written straight into the workspace (LSTM, GRU) or the output (Tanh/ReLU),
// so the per-step work is one GEMM of the state by w_hh (accumulated onto
// that projection) and one pointwise pass over the active rows that applies
// the biases and nonlinearities and updates the state in place.
//
// Backward walks the steps in reverse. Per step it only does what is
// sequential: the pointwise pass that turns the state gradients into the
// pre-activation gate gradients (kept for all N rows), and one GEMM that
// carries them back through w_hh. The weight, bias and input gradients are
// then whole-sequence products: dW_ih = dG^T X, dW_hh = dG^T H_prev,
// dX = dG W_ih, db = column sums of dG (one GEMM each instead of one per step,
// where K = B would leave BLAS far from its peak).
#include <algorithm>
#include <cmath>
#include <memory>

#include "backends/cpu/blas.h"
#include "backends/cpu/loops.h"
#include "ops/rnn_kernels.h"

namespace strata {
namespace cpu {
inline namespace STRATA_CPU_NS {
namespace {

using cpublas::Trans;
using nn::RnnCell;
using nn::RnnGeom;

// Rows per chunk of the pointwise passes when they are split across threads: below this many elements a step's
// pass (a few microseconds) is not worth waking the second thread for.
constexpr int64_t kPointwiseGrain = 8192;

template <typename T>
STRATA_ALWAYS_INLINE T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

template <typename T>
const T* cptr(const Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}
template <typename T>
T* mptr(const Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}

// Uninitialised scratch (every element is written before it is read, so no zero-fill pass).
template <typename T>
std::unique_ptr<T[]> scratch(int64_t n) {
  return std::unique_ptr<T[]>(new T[static_cast<size_t>(std::max<int64_t>(n, 1))]);
}

// C = alpha op(A) op(B) + beta C, also for empty products (k == 0 leaves beta C, which BLAS may not honour).
template <typename T>
void gemm(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b, int64_t ldb,
          T beta, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (beta == T(0))
      for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, T(0));
    return;
  }
  cpublas::gemm(ta, tb, m, n, k, T(1), a, std::max<int64_t>(lda, 1), b, std::max<int64_t>(ldb, 1), beta, c,
                std::max<int64_t>(ldc, 1));
}

// The time step processed s-th, and the step processed before step t (-1 for the first).
inline int64_t step_at(const RnnGeom& g, int64_t s) { return g.reverse ? g.steps - 1 - s : s; }
inline int64_t prev_step(const RnnGeom& g, int64_t t) {
  const int64_t p = g.reverse ? t + 1 : t - 1;
  return p < 0 || p >= g.steps ? -1 : p;
}
// Row b of the state entering step t: the previous step's row when that step had it, else the initial state's row.
template <typename T>
const T* prev_row(const RnnGeom& g, int64_t t, int64_t b, const T* steps_base, int64_t ld, const T* init,
                  int64_t init_ld) {
  const int64_t p = prev_step(g, t);
  if (p >= 0 && b < g.batch_sizes[p]) return steps_base + (g.offsets[p] + b) * ld;
  return init + b * init_ld;
}

template <typename F>
void for_rows(int64_t rows, int64_t width, const F& f) {
  parallel_for(0, rows, std::max<int64_t>(1, kPointwiseGrain / std::max<int64_t>(width, 1)), f);
}

// b_ih + b_hh (either may be absent), or zeros.
template <typename T>
std::unique_ptr<T[]> bias_sum(const T* a, const T* b, int64_t n) {
  auto s = scratch<T>(n);
  for (int64_t j = 0; j < n; ++j) s[j] = (a ? a[j] : T(0)) + (b ? b[j] : T(0));
  return s;
}

template <typename T>
void rnn_forward(const RnnGeom& g, const nn::RnnForwardArgs& a) {
  const int64_t H = g.hidden, P = g.out, I = g.in, N = g.rows, B = g.batch;
  const int64_t G = nn::rnn_gates(g.cell) * H, W = nn::rnn_workspace_cols(g.cell, H, g.proj);
  const T *x = cptr<T>(a.x), *hx = cptr<T>(a.hx), *cx = cptr<T>(a.cx), *w_ih = cptr<T>(a.w_ih),
          *w_hh = cptr<T>(a.w_hh), *b_ih = cptr<T>(a.b_ih), *b_hh = cptr<T>(a.b_hh), *w_hr = cptr<T>(a.w_hr);
  T *out = mptr<T>(a.out), *hy = mptr<T>(a.hy), *cy = mptr<T>(a.cy), *ws = mptr<T>(a.ws);
  const bool lstm = g.cell == RnnCell::Lstm, gru = g.cell == RnnCell::Gru;
  std::copy(hx, hx + B * P, hy);
  if (lstm) std::copy(cx, cx + B * H, cy);
  // The input projection of every step; the biases are added in the pointwise passes.
  T* xp = lstm || gru ? ws : out;
  const int64_t ldx = lstm || gru ? W : H;
  gemm<T>(Trans::N, Trans::T, N, G, I, x, I, w_ih, I, T(0), xp, ldx);
  // GRU keeps its two biases apart (b_hn sits inside r * (w_hn h + b_hn)); the others only need their sum.
  auto bias = gru ? bias_sum<T>(b_ih, nullptr, G) : bias_sum<T>(b_ih, b_hh, G);
  auto bias_h = gru ? bias_sum<T>(b_hh, nullptr, G) : nullptr;
  auto gh = gru ? scratch<T>(B * G) : nullptr;  // h w_hh^T of one step (GRU)
  const T* bs = bias.get();
  const T* bh = bias_h.get();
  for (int64_t s = 0; s < g.steps; ++s) {
    const int64_t t = step_at(g, s), nb = g.batch_sizes[t], off = g.offsets[t];
    T* xr = xp + off * ldx;
    if (gru)
      gemm<T>(Trans::N, Trans::T, nb, G, P, hy, P, w_hh, P, T(0), gh.get(), G);
    else
      gemm<T>(Trans::N, Trans::T, nb, G, P, hy, P, w_hh, P, T(1), xr, ldx);
    switch (g.cell) {
      case RnnCell::Tanh:
      case RnnCell::Relu: {
        const bool relu = g.cell == RnnCell::Relu;
        for_rows(nb, H, [&](int64_t b0, int64_t b1) {
          for (int64_t b = b0; b < b1; ++b) {
            T* __restrict r = xr + b * H;
            T* __restrict h = hy + b * H;
            if (relu) {
#pragma omp simd
              for (int64_t j = 0; j < H; ++j) {
                const T v = std::max(r[j] + bs[j], T(0));
                r[j] = v;
                h[j] = v;
              }
            } else {
#pragma omp simd
              for (int64_t j = 0; j < H; ++j) {
                const T v = std::tanh(r[j] + bs[j]);
                r[j] = v;
                h[j] = v;
              }
            }
          }
        });
        break;
      }
      case RnnCell::Lstm:
        for_rows(nb, 4 * H, [&](int64_t b0, int64_t b1) {
          for (int64_t b = b0; b < b1; ++b) {
            T* __restrict r = xr + b * W;
            T* __restrict c = cy + b * H;
            // Without a projection h goes straight to the output and the state; with one, o * tanh(c) is kept in
            // the workspace and projected below.
            T* __restrict hraw = g.proj ? r + 5 * H : out + (off + b) * P;
            T* __restrict h = g.proj ? nullptr : hy + b * H;
#pragma omp simd
            for (int64_t j = 0; j < H; ++j) {
              const T i = sigmoid(r[j] + bs[j]), f = sigmoid(r[H + j] + bs[H + j]);
              const T gg = std::tanh(r[2 * H + j] + bs[2 * H + j]), o = sigmoid(r[3 * H + j] + bs[3 * H + j]);
              const T cn = f * c[j] + i * gg;
              r[j] = i;
              r[H + j] = f;
              r[2 * H + j] = gg;
              r[3 * H + j] = o;
              r[4 * H + j] = cn;
              c[j] = cn;
              hraw[j] = o * std::tanh(cn);
            }
            if (h) std::copy(hraw, hraw + H, h);
          }
        });
        if (g.proj) {
          gemm<T>(Trans::N, Trans::T, nb, P, H, xr + 5 * H, W, w_hr, H, T(0), hy, P);
          std::copy(hy, hy + nb * P, out + off * P);
        }
        break;
      case RnnCell::Gru:
        for_rows(nb, 3 * H, [&](int64_t b0, int64_t b1) {
          for (int64_t b = b0; b < b1; ++b) {
            T* __restrict r = xr + b * W;
            const T* __restrict q = gh.get() + b * G;
            T* __restrict h = hy + b * H;
            T* __restrict o = out + (off + b) * H;
#pragma omp simd
            for (int64_t j = 0; j < H; ++j) {
              const T rr = sigmoid(r[j] + bs[j] + q[j] + bh[j]);
              const T z = sigmoid(r[H + j] + bs[H + j] + q[H + j] + bh[H + j]);
              const T hn = q[2 * H + j] + bh[2 * H + j];
              const T n = std::tanh(r[2 * H + j] + bs[2 * H + j] + rr * hn);
              const T v = (T(1) - z) * n + z * h[j];
              r[j] = rr;
              r[H + j] = z;
              r[2 * H + j] = n;
              r[3 * H + j] = hn;
              h[j] = v;
              o[j] = v;
            }
          }
        });
        break;
    }
  }
}

// Column sums of an (n x m) row-major matrix into s.
template <typename T>
void column_sums(const T* a, int64_t n, int64_t m, T* s) {
  std::fill(s, s + m, T(0));
  for (int64_t i = 0; i < n; ++i) {
    const T* __restrict r = a + i * m;
#pragma omp simd
    for (int64_t j = 0; j < m; ++j) s[j] += r[j];
  }
}

template <typename T>
void rnn_backward(const RnnGeom& g, const nn::RnnBackwardArgs& a) {
  const int64_t H = g.hidden, P = g.out, I = g.in, N = g.rows, B = g.batch;
  const int64_t G = nn::rnn_gates(g.cell) * H, W = nn::rnn_workspace_cols(g.cell, H, g.proj);
  const bool lstm = g.cell == RnnCell::Lstm, gru = g.cell == RnnCell::Gru;
  const T *gout = cptr<T>(a.gout), *ghy = cptr<T>(a.ghy), *gcy = cptr<T>(a.gcy), *x = cptr<T>(a.x),
          *hx = cptr<T>(a.hx), *cx = cptr<T>(a.cx), *w_ih = cptr<T>(a.w_ih), *w_hh = cptr<T>(a.w_hh),
          *w_hr = cptr<T>(a.w_hr), *out = cptr<T>(a.out), *ws = cptr<T>(a.ws);
  // The state gradients live in dhx/dcx: after the last (first in time) step they are those gradients.
  T *dh = mptr<T>(a.dhx), *dc = mptr<T>(a.dcx);
  std::copy(ghy, ghy + B * P, dh);
  if (lstm) std::copy(gcy, gcy + B * H, dc);
  auto dG = scratch<T>(N * G);                       // pre-activation gradients seen by w_ih (all cells)
  auto dGh = gru ? scratch<T>(N * G) : nullptr;      // ... and by w_hh where they differ (GRU's n gate)
  auto hprev = scratch<T>(N * P);                    // the state entering each row's step
  auto dHtot = g.proj ? scratch<T>(N * P) : nullptr; // total gradient of each projected h
  auto dhr = g.proj ? scratch<T>(B * H) : nullptr;   // ... carried back through w_hr
  for (int64_t s = g.steps - 1; s >= 0; --s) {
    const int64_t t = step_at(g, s), nb = g.batch_sizes[t], off = g.offsets[t];
    for (int64_t b = 0; b < nb; ++b) {
      T* __restrict d = dh + b * P;
      const T* __restrict go = gout + (off + b) * P;
#pragma omp simd
      for (int64_t j = 0; j < P; ++j) d[j] += go[j];
      const T* hp = prev_row(g, t, b, out, P, hx, P);
      std::copy(hp, hp + P, hprev.get() + (off + b) * P);
    }
    const T* dhs = dh;  // gradient of o * tanh(c) (LSTM) or of the state
    if (g.proj) {
      std::copy(dh, dh + nb * P, dHtot.get() + off * P);
      gemm<T>(Trans::N, Trans::N, nb, H, P, dh, P, w_hr, H, T(0), dhr.get(), H);
      dhs = dhr.get();
    }
    T* dgs = dG.get() + off * G;
    switch (g.cell) {
      case RnnCell::Tanh:
      case RnnCell::Relu: {
        const bool relu = g.cell == RnnCell::Relu;
        for_rows(nb, H, [&](int64_t b0, int64_t b1) {
          for (int64_t b = b0; b < b1; ++b) {
            const T* __restrict y = out + (off + b) * H;
            const T* __restrict d = dh + b * H;
            T* __restrict o = dgs + b * G;
            if (relu) {
#pragma omp simd
              for (int64_t j = 0; j < H; ++j) o[j] = y[j] > T(0) ? d[j] : T(0);
            } else {
#pragma omp simd
              for (int64_t j = 0; j < H; ++j) o[j] = d[j] * (T(1) - y[j] * y[j]);
            }
          }
        });
        break;
      }
      case RnnCell::Lstm:
        for_rows(nb, 4 * H, [&](int64_t b0, int64_t b1) {
          for (int64_t b = b0; b < b1; ++b) {
            const T* __restrict r = ws + (off + b) * W;
            const T* __restrict cp = prev_row(g, t, b, ws + 4 * H, W, cx, H);
            const T* __restrict d = dhs + b * H;
            T* __restrict dcb = dc + b * H;
            T* __restrict o = dgs + b * G;
#pragma omp simd
            for (int64_t j = 0; j < H; ++j) {
              const T i = r[j], f = r[H + j], gg = r[2 * H + j], og = r[3 * H + j];
              const T tc = std::tanh(r[4 * H + j]);
              const T dct = dcb[j] + d[j] * og * (T(1) - tc * tc);
              o[j] = dct * gg * i * (T(1) - i);
              o[H + j] = dct * cp[j] * f * (T(1) - f);
              o[2 * H + j] = dct * i * (T(1) - gg * gg);
              o[3 * H + j] = d[j] * tc * og * (T(1) - og);
              dcb[j] = dct * f;
            }
          }
        });
        break;
      case RnnCell::Gru:
        for_rows(nb, 3 * H, [&](int64_t b0, int64_t b1) {
          for (int64_t b = b0; b < b1; ++b) {
            const T* __restrict r = ws + (off + b) * W;
            const T* __restrict hp = hprev.get() + (off + b) * P;
            T* __restrict d = dh + b * H;
            T* __restrict ox = dgs + b * G;
            T* __restrict oh = dGh.get() + (off + b) * G;
#pragma omp simd
            for (int64_t j = 0; j < H; ++j) {
              const T rr = r[j], z = r[H + j], n = r[2 * H + j], hn = r[3 * H + j], dv = d[j];
              const T dn = dv * (T(1) - z) * (T(1) - n * n);
              const T dz = dv * (hp[j] - n) * z * (T(1) - z);
              const T dr = dn * hn * rr * (T(1) - rr);
              ox[j] = dr;
              ox[H + j] = dz;
              ox[2 * H + j] = dn;
              oh[j] = dr;
              oh[H + j] = dz;
              oh[2 * H + j] = dn * rr;
              d[j] = dv * z;
            }
          }
        });
        break;
    }
    if (gru)
      gemm<T>(Trans::N, Trans::N, nb, H, G, dGh.get() + off * G, G, w_hh, H, T(1), dh, H);
    else
      gemm<T>(Trans::N, Trans::N, nb, P, G, dgs, G, w_hh, P, T(0), dh, P);
  }
  const T* dgh = gru ? dGh.get() : dG.get();
  gemm<T>(Trans::N, Trans::N, N, I, G, dG.get(), G, w_ih, I, T(0), mptr<T>(a.dx), I);
  gemm<T>(Trans::T, Trans::N, G, I, N, dG.get(), G, x, I, T(0), mptr<T>(a.dw_ih), I);
  gemm<T>(Trans::T, Trans::N, G, P, N, dgh, G, hprev.get(), P, T(0), mptr<T>(a.dw_hh), P);
  if (a.db_ih.defined()) column_sums(dG.get(), N, G, mptr<T>(a.db_ih));
  if (a.db_hh.defined()) column_sums(dgh, N, G, mptr<T>(a.db_hh));
  if (g.proj && a.dw_hr.defined())
    gemm<T>(Trans::T, Trans::N, P, H, N, dHtot.get(), P, ws + 5 * H, W, T(0), mptr<T>(a.dw_hr), H);
}

void rnn_forward_kernel(const RnnGeom& g, const nn::RnnForwardArgs& a) {
  if (a.x.dtype() == ScalarType::Float64)
    rnn_forward<double>(g, a);
  else
    rnn_forward<float>(g, a);
}
void rnn_backward_kernel(const RnnGeom& g, const nn::RnnBackwardArgs& a) {
  if (a.x.dtype() == ScalarType::Float64)
    rnn_backward<double>(g, a);
  else
    rnn_backward<float>(g, a);
}

}  // namespace
}  // namespace STRATA_CPU_NS
}  // namespace cpu

STRATA_REGISTER_CPU_KERNEL(rnn_forward_stub, cpu::rnn_forward_kernel);
STRATA_REGISTER_CPU_KERNEL(rnn_backward_stub, cpu::rnn_backward_kernel);

}  // namespace strata
