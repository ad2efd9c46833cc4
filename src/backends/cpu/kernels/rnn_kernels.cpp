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
//
// Threads: the time loops run in one OpenMP team per call, each thread owning a slice of the hidden units: its
// columns of the step GEMM (single-threaded, on its packed rows of w_hh), its part of the pointwise pass, and one
// barrier per step (see team_size). The whole-sequence GEMMs outside the loops use the BLAS's own threads.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "backends/cpu/blas.h"
#include "backends/cpu/kernels/vexp.h"
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

// The gate nonlinearities. float goes through the inlined polynomial exp (vexp.h): the LSTM step evaluates five
// of them per hidden unit, and libmvec's tanhf/expf calls cost a noticeable share of a step. tanh(x) =
// 1 - 2 / (exp(2x) + 1) is exact at the saturated ends and within a few 1e-8 absolute elsewhere. double keeps
// libm's functions.
STRATA_ALWAYS_INLINE float sigmoid(float x) { return 1.0f / (1.0f + vexp(-x)); }
STRATA_ALWAYS_INLINE double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
STRATA_ALWAYS_INLINE float tanh_(float x) { return 1.0f - 2.0f / (vexp(2.0f * x) + 1.0f); }
STRATA_ALWAYS_INLINE double tanh_(double x) { return std::tanh(x); }

template <typename T>
const T* cptr(const Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}
template <typename T>
T* mptr(const Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}

// Uninitialised scratch (every element is written before it is read, so no zero-fill pass), from the tensor
// allocator: its block cache hands back the pages of the previous call, where fresh memory for the multi-megabyte
// gradient buffers would cost a page fault per 4 KiB on every call.
template <typename T>
class Scratch {
 public:
  Scratch() = default;
  explicit Scratch(int64_t n)
      : t_(empty_tensor(std::vector<int64_t>{std::max<int64_t>(n, 1)},
                        std::is_same_v<T, double> ? ScalarType::Float64 : ScalarType::Float32, Device())) {}
  T* get() const { return t_.defined() ? t_.data_ptr<T>() : nullptr; }
  T& operator[](int64_t i) const { return get()[i]; }

 private:
  Tensor t_;
};
template <typename T>
Scratch<T> scratch(int64_t n) {
  return Scratch<T>(n);
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
Scratch<T> bias_sum(const T* a, const T* b, int64_t n) {
  auto s = scratch<T>(n);
  for (int64_t j = 0; j < n; ++j) s[j] = (a ? a[j] : T(0)) + (b ? b[j] : T(0));
  return s;
}

// Runs body(k, n) on a team of up to `team` threads (n is the team's actual size); team_barrier(n) inside body
// waits for the whole team.
template <typename F>
void run_team(int team, const F& body) {
#ifdef _OPENMP
  if (team > 1) {
#pragma omp parallel num_threads(team)
    body(omp_get_thread_num(), omp_get_num_threads());
    return;
  }
#endif
  body(0, 1);
}
inline void team_barrier(int n) {
#ifdef _OPENMP
  if (n > 1) {
#pragma omp barrier
  }
#else
  (void)n;
#endif
}

// Threads for a time loop: one team for the whole layer, each thread owning a slice of the hidden units (at least
// 16), so a step costs one barrier instead of the fork/join of a threaded GEMM plus that of a threaded pointwise
// pass (on a loaded machine each of those can wait a scheduler slice). Small layers run on the calling thread.
int team_size(const RnnGeom& g) {
  if (in_parallel_region()) return 1;
  const int64_t G = nn::rnn_gates(g.cell) * g.hidden;
  if (g.batch * G * g.out < (int64_t{1} << 18)) return 1;
  return static_cast<int>(std::clamp<int64_t>(g.hidden / 16, 1, get_num_threads()));
}

// [begin, end) of part k of n parts of [0, len), split at multiples of 16 where the length allows.
std::pair<int64_t, int64_t> slice_of(int64_t len, int k, int n) {
  auto at = [&](int i) {
    const int64_t e = len * i / n;
    return i == n ? len : std::min(len, (e + 8) / 16 * 16);
  };
  return {at(k), at(k + 1)};
}

// dst (cols x rows, row stride ldd) = src (rows x cols, contiguous) transposed, in 16 x 16 tiles: element by
// element, the strided side would touch a new cache line per element.
template <typename T>
__attribute__((noinline)) void transpose_rows(const T* __restrict src, int64_t rows, int64_t cols, T* __restrict dst,
                                              int64_t ldd) {
  constexpr int64_t kTile = 16;
  for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
    const int64_t r1 = std::min(rows, r0 + kTile);
    for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
      const int64_t c1 = std::min(cols, c0 + kTile);
      // Writes run along dst's rows: dst's row stride is often a multiple of 4 KiB, whose lines all share one L1
      // set, so a tile's 16 dst lines would evict each other if written column by column.
      for (int64_t c = c0; c < c1; ++c)
        for (int64_t r = r0; r < r1; ++r) dst[c * ldd + r] = src[r * cols + c];
    }
  }
}

template <typename T>
void rnn_forward(const RnnGeom& g, const nn::RnnForwardArgs& a) {
  const int64_t H = g.hidden, P = g.out, I = g.in, N = g.rows, B = g.batch, gates = nn::rnn_gates(g.cell);
  const int64_t G = gates * H, W = nn::rnn_workspace_cols(g.cell, H, g.proj);
  const T *x = cptr<T>(a.x), *hx = cptr<T>(a.hx), *cx = cptr<T>(a.cx), *w_ih = cptr<T>(a.w_ih),
          *w_hh = cptr<T>(a.w_hh), *b_ih = cptr<T>(a.b_ih), *b_hh = cptr<T>(a.b_hh), *w_hr = cptr<T>(a.w_hr);
  T *out = mptr<T>(a.out), *hy = mptr<T>(a.hy), *cy = mptr<T>(a.cy), *ws = mptr<T>(a.ws);
  const RnnCell cell = g.cell;
  const bool lstm = cell == RnnCell::Lstm, gru = cell == RnnCell::Gru, relu = cell == RnnCell::Relu;
  std::copy(hx, hx + B * P, hy);
  if (lstm) std::copy(cx, cx + B * H, cy);
  // The input projection of every step (all threads); the biases are added in the pointwise passes.
  T* xp = lstm || gru ? ws : out;
  const int64_t ldx = lstm || gru ? W : H;
  gemm<T>(Trans::N, Trans::T, N, G, I, x, I, w_ih, I, T(0), xp, ldx);
  // GRU keeps its two biases apart (b_hn sits inside r * (w_hn h + b_hn)); the others only need their sum.
  auto bias = gru ? bias_sum<T>(b_ih, nullptr, G) : bias_sum<T>(b_ih, b_hh, G);
  auto bias_h = bias_sum<T>(gru ? b_hh : nullptr, nullptr, G);
  const T* bs = bias.get();
  const T* bh = bias_h.get();
  const int team = team_size(g);
  // Each thread's rows of w_hh (its hidden units, gate by gate) packed together, and its h w_hh^T block.
  auto wpack = scratch<T>(G * P);
  // (sized for any split: OpenMP may give a smaller team than asked for)
  auto prod = scratch<T>(team * B * G);
  // The state alternates between hy and a second buffer: a step reads all of one while writing the other.
  auto hbuf = scratch<T>(B * P);
  T* const hstate[2] = {hy, hbuf.get()};

  auto body = [&](int k, int n) {
    const auto [j0, j1] = slice_of(H, k, n);
    const auto [p0, p1] = g.proj ? slice_of(P, k, n) : std::pair<int64_t, int64_t>{j0, j1};
    const int64_t hk = j1 - j0, gk = gates * hk;
    // Transposed, (P x gates * hk): the per-step GEMM then reads it untransposed, which oneDNN runs faster for these
    // short, wide products.
    T* wk = wpack.get() + gates * j0 * P;
    for (int64_t q = 0; q < gates; ++q) transpose_rows(w_hh + (q * H + j0) * P, hk, P, wk + q * hk, gk);
    T* pk = prod.get() + k * B * G;
    for (int64_t s = 0; s < g.steps; ++s) {
      const int64_t t = step_at(g, s), nb = g.batch_sizes[t], off = g.offsets[t];
      const T* hcur = hstate[s & 1];
      T* hnext = hstate[(s + 1) & 1];
      if (hk > 0) gemm<T>(Trans::N, Trans::N, nb, gk, P, hcur, P, wk, gk, T(0), pk, gk);
      for (int64_t b = 0; b < nb; ++b) {
        T* __restrict r = xp + (off + b) * ldx + j0;  // this slice of the row's input projection
        const T* __restrict q = pk + b * gk;
        const T* __restrict bb = bs + j0;
        if (lstm) {
          T* __restrict c = cy + b * H + j0;
          T* __restrict hraw = g.proj ? r + 5 * H : out + (off + b) * P + j0;
#pragma omp simd
          for (int64_t j = 0; j < hk; ++j) {
            const T i = sigmoid(r[j] + q[j] + bb[j]), f = sigmoid(r[H + j] + q[hk + j] + bb[H + j]);
            const T gg = tanh_(r[2 * H + j] + q[2 * hk + j] + bb[2 * H + j]);
            const T o = sigmoid(r[3 * H + j] + q[3 * hk + j] + bb[3 * H + j]);
            const T cn = f * c[j] + i * gg;
            r[j] = i;
            r[H + j] = f;
            r[2 * H + j] = gg;
            r[3 * H + j] = o;
            r[4 * H + j] = cn;
            c[j] = cn;
            hraw[j] = o * tanh_(cn);
          }
          if (!g.proj) std::copy(hraw, hraw + hk, hnext + b * P + j0);
        } else if (gru) {
          const T* __restrict hp = hcur + b * H + j0;
          const T* __restrict bbh = bh + j0;
          T* __restrict hn = hnext + b * H + j0;
          T* __restrict o = out + (off + b) * H + j0;
#pragma omp simd
          for (int64_t j = 0; j < hk; ++j) {
            const T rr = sigmoid(r[j] + bb[j] + q[j] + bbh[j]);
            const T z = sigmoid(r[H + j] + bb[H + j] + q[hk + j] + bbh[H + j]);
            const T hnv = q[2 * hk + j] + bbh[2 * H + j];
            const T nv = tanh_(r[2 * H + j] + bb[2 * H + j] + rr * hnv);
            const T v = (T(1) - z) * nv + z * hp[j];
            r[j] = rr;
            r[H + j] = z;
            r[2 * H + j] = nv;
            r[3 * H + j] = hnv;
            hn[j] = v;
            o[j] = v;
          }
        } else {
          T* __restrict hn = hnext + b * H + j0;
          if (relu) {
#pragma omp simd
            for (int64_t j = 0; j < hk; ++j) r[j] = hn[j] = std::max(r[j] + q[j] + bb[j], T(0));
          } else {
#pragma omp simd
            for (int64_t j = 0; j < hk; ++j) r[j] = hn[j] = tanh_(r[j] + q[j] + bb[j]);
          }
        }
      }
      if (g.proj) {
        // h = (o * tanh(c)) w_hr^T needs every hidden unit: wait for the other slices, then project this thread's
        // columns of h.
        team_barrier(n);
        if (p1 > p0) {
          gemm<T>(Trans::N, Trans::T, nb, p1 - p0, H, xp + off * W + 5 * H, W, w_hr + p0 * H, H, T(0), hnext + p0, P);
          for (int64_t b = 0; b < nb; ++b) std::copy(hnext + b * P + p0, hnext + b * P + p1, out + (off + b) * P + p0);
        }
      }
      // Rows that do not run at this step keep their state.
      for (int64_t b = nb; b < B; ++b) std::copy(hcur + b * P + p0, hcur + b * P + p1, hnext + b * P + p0);
      team_barrier(n);
    }
  };
  run_team(team, body);
  if (g.steps & 1) std::copy(hstate[1], hstate[1] + B * P, hy);
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
  auto dGh = gru ? scratch<T>(N * G) : Scratch<T>();  // ... and by w_hh where they differ (GRU's n gate)
  auto hprev = scratch<T>(N * P);                    // the state entering each row's step
  auto dHtot = g.proj ? scratch<T>(N * P) : Scratch<T>();  // total gradient of each projected h
  auto dhr = g.proj ? scratch<T>(B * H) : Scratch<T>();   // ... carried back through w_hr
  // Without a projection the step's work splits like the forward's: each thread owns a slice of the hidden units
  // (the same columns of dh, since H_out == H) for the pointwise pass and the columns of dh that it computes in the
  // GEMM through w_hh. The GEMM reads every thread's gate gradients, hence one barrier per step; the next step's
  // pointwise pass touches only the thread's own columns, so it needs none. With a projection, dh is needed whole
  // (by the GEMM through w_hr) before the pointwise pass, so that case runs on one thread (whose GEMMs are threaded).
  const int team = g.proj ? 1 : team_size(g);
  auto body = [&](int k, int n) {
    // Plain variables, not structured bindings: clang cannot capture those in the `omp simd` loops below.
    const std::pair<int64_t, int64_t> hidden = slice_of(H, k, n);
    const int64_t j0 = hidden.first, j1 = hidden.second;
    const int64_t c0 = n == 1 ? 0 : j0, c1 = n == 1 ? P : j1;
    const int64_t hk = j1 - j0;
    for (int64_t s = g.steps - 1; s >= 0; --s) {
      const int64_t t = step_at(g, s), nb = g.batch_sizes[t], off = g.offsets[t];
      for (int64_t b = 0; b < nb; ++b) {
        T* __restrict d = dh + b * P;
        const T* __restrict go = gout + (off + b) * P;
#pragma omp simd
        for (int64_t j = c0; j < c1; ++j) d[j] += go[j];
        const T* hp = prev_row(g, t, b, out, P, hx, P);
        std::copy(hp + c0, hp + c1, hprev.get() + (off + b) * P + c0);
      }
      const T* dhs = dh;  // gradient of o * tanh(c) (LSTM) or of the state
      int64_t ldd = P;
      if (g.proj) {
        std::copy(dh, dh + nb * P, dHtot.get() + off * P);
        gemm<T>(Trans::N, Trans::N, nb, H, P, dh, P, w_hr, H, T(0), dhr.get(), H);
        dhs = dhr.get();
        ldd = H;
      }
      T* dgs = dG.get() + off * G;
      // Rows [b0, b1) of this step, hidden units [j0, j1).
      auto pointwise = [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b) {
          T* __restrict o = dgs + b * G + j0;
          if (lstm) {
            const T* __restrict r = ws + (off + b) * W + j0;
            const T* __restrict cp = prev_row(g, t, b, ws + 4 * H, W, cx, H) + j0;
            const T* __restrict d = dhs + b * ldd + j0;
            T* __restrict dcb = dc + b * H + j0;
#pragma omp simd
            for (int64_t j = 0; j < hk; ++j) {
              const T i = r[j], f = r[H + j], gg = r[2 * H + j], og = r[3 * H + j];
              const T tc = tanh_(r[4 * H + j]);
              const T dct = dcb[j] + d[j] * og * (T(1) - tc * tc);
              o[j] = dct * gg * i * (T(1) - i);
              o[H + j] = dct * cp[j] * f * (T(1) - f);
              o[2 * H + j] = dct * i * (T(1) - gg * gg);
              o[3 * H + j] = d[j] * tc * og * (T(1) - og);
              dcb[j] = dct * f;
            }
          } else if (gru) {
            const T* __restrict r = ws + (off + b) * W + j0;
            const T* __restrict hp = hprev.get() + (off + b) * P + j0;
            T* __restrict d = dh + b * H + j0;
            T* __restrict oh = dGh.get() + (off + b) * G + j0;
#pragma omp simd
            for (int64_t j = 0; j < hk; ++j) {
              const T rr = r[j], z = r[H + j], nv = r[2 * H + j], hn = r[3 * H + j], dv = d[j];
              const T dn = dv * (T(1) - z) * (T(1) - nv * nv);
              const T dz = dv * (hp[j] - nv) * z * (T(1) - z);
              const T dr = dn * hn * rr * (T(1) - rr);
              o[j] = dr;
              o[H + j] = dz;
              o[2 * H + j] = dn;
              oh[j] = dr;
              oh[H + j] = dz;
              oh[2 * H + j] = dn * rr;
              d[j] = dv * z;
            }
          } else {
            const T* __restrict y = out + (off + b) * H + j0;
            const T* __restrict d = dh + b * H + j0;
            if (g.cell == RnnCell::Relu) {
#pragma omp simd
              for (int64_t j = 0; j < hk; ++j) o[j] = y[j] > T(0) ? d[j] : T(0);
            } else {
#pragma omp simd
              for (int64_t j = 0; j < hk; ++j) o[j] = d[j] * (T(1) - y[j] * y[j]);
            }
          }
        }
      };
      if (n == 1)
        for_rows(nb, G, pointwise);
      else
        pointwise(0, nb);
      team_barrier(n);
      // dh of the rows that ran = (gate gradients) w_hh (+ dh z, already in dh, for GRU), columns [c0, c1).
      if (c1 > c0) {
        if (gru)
          gemm<T>(Trans::N, Trans::N, nb, c1 - c0, G, dGh.get() + off * G, G, w_hh + c0, H, T(1), dh + c0, H);
        else
          gemm<T>(Trans::N, Trans::N, nb, c1 - c0, G, dgs, G, w_hh + c0, P, T(0), dh + c0, P);
      }
    }
  };
  run_team(team, body);
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
