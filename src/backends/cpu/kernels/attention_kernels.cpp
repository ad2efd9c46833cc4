// CPU kernels of scaled_dot_product_attention and its fused backward (contract
// in ops/nn_attention_kernels.h). Compiled once per ISA level; float and double.
//
// Each (batch, head) matrix is one task: the L x S score block lives in a
// per-thread buffer, produced by one GEMM that reads q and k in place
// (strided rows), then masked, scaled and softmaxed row by row while it is in
// cache, then multiplied into v. The backward recomputes that block instead
// of saving the probabilities (for T=64 it is one small GEMM and one exp per
// element; saving would cost an L x S tensor per head for the whole step).
// Tasks run in parallel across batch indices; the GEMMs inside run on one
// thread each (cpublas does not nest parallel regions).
#include <algorithm>
#include <limits>
#include <vector>

#include "backends/cpu/blas.h"
#include "backends/cpu/kernels/vexp.h"
#include "backends/cpu/loops.h"
#include "ops/nn_attention_kernels.h"

namespace strata {
namespace cpu {
inline namespace STRATA_CPU_NS {
namespace {

using cpublas::Trans;

template <typename T>
struct Operands {
  const T *q, *k, *v;
  const T* mf;     // additive mask, or null
  const bool* mb;  // boolean mask, or null
};

constexpr int64_t kLanes = 16;

// Columns of row i that causal masking keeps.
inline int64_t kept_columns(const nn::AttnGeom& g, int64_t i) { return g.causal ? std::min(i + 1, g.s) : g.s; }

// Causal attention computes its L x S products in blocks of rows, each only as wide as its last row's kept
// columns: for L = S = 64 in two blocks, 3/4 of the full products' work.
constexpr int64_t kCausalRows = 32;
inline int64_t row_block(const nn::AttnGeom& g) { return g.causal ? kCausalRows : std::max<int64_t>(g.l, 1); }
// Columns that rows [.., r1) of a row block keep.
inline int64_t block_columns(const nn::AttnGeom& g, int64_t r1) { return g.causal ? std::min(r1, g.s) : g.s; }

// Row stride of the per-thread score buffers: whole vectors, so that the row loops below have no scalar tails
// (they run over the kept columns rounded up to whole vectors; the columns past them are only overwritten).
inline int64_t padded(int64_t s) { return std::max<int64_t>((s + kLanes - 1) / kLanes * kLanes, kLanes); }

// P (L x S, row stride ldp) = softmax(scale q k^T + mask) of batch index b. Rows where everything is masked are
// zeros (as torch's math path gives), and so is everything causal masking removes.
template <typename T>
void probabilities(const nn::AttnGeom& g, const Operands<T>& x, int64_t b, T* P, int64_t ldp) {
  const int64_t L = g.l, S = g.s;
  if (S == 0) return;
  for (int64_t r0 = 0; r0 < L; r0 += row_block(g)) {
    const int64_t r1 = std::min(L, r0 + row_block(g));
    cpublas::gemm(Trans::N, Trans::T, r1 - r0, block_columns(g, r1), g.e, static_cast<T>(g.scale),
                  x.q + g.q.off[b] + r0 * g.q.rs, g.q.rs, x.k + g.k.off[b], g.k.rs, T(0), P + r0 * ldp, ldp);
  }
  const T ninf = -std::numeric_limits<T>::infinity();
  for (int64_t i = 0; i < L; ++i) {
    T* __restrict row = P + i * ldp;
    const int64_t n = kept_columns(g, i), nv = (n + kLanes - 1) / kLanes * kLanes;
    if (x.mb) {
      const bool* mr = x.mb + g.mask.off[b] + i * g.m_rs;
      const int64_t cs = g.m_cs;
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) row[j] = mr[j * cs] ? row[j] : ninf;
    } else if (x.mf) {
      const T* mr = x.mf + g.mask.off[b] + i * g.m_rs;
      const int64_t cs = g.m_cs;
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) row[j] += mr[j * cs];
    }
    // Max ignoring NaN (a NaN score still makes the row NaN through exp).
    T lane[kLanes];
    for (int64_t t = 0; t < kLanes; ++t) lane[t] = ninf;
    for (int64_t j0 = 0; j0 < nv; j0 += kLanes) {
#pragma omp simd
      for (int64_t t = 0; t < kLanes; ++t) {
        const T v = j0 + t < n ? row[j0 + t] : ninf;
        lane[t] = v > lane[t] ? v : lane[t];
      }
    }
    T mx = ninf;
    for (int64_t t = 0; t < kLanes; ++t) mx = lane[t] > mx ? lane[t] : mx;
    if (mx == ninf) {
      // Nothing to attend to: zeros, unless a NaN score should propagate.
      bool nan = false;
      for (int64_t j = 0; j < n; ++j) nan |= row[j] != row[j];
      std::fill(row, row + S, nan ? std::numeric_limits<T>::quiet_NaN() : T(0));
      std::fill(row + S, row + ldp, T(0));
      continue;
    }
    for (int64_t t = 0; t < kLanes; ++t) lane[t] = 0;
    for (int64_t j0 = 0; j0 < nv; j0 += kLanes) {
#pragma omp simd
      for (int64_t t = 0; t < kLanes; ++t) {
        const T ev = vexp(row[j0 + t] - mx);
        row[j0 + t] = ev;
        lane[t] += j0 + t < n ? ev : T(0);
      }
    }
    T sum = 0;
    for (int64_t t = 0; t < kLanes; ++t) sum += lane[t];
    const T inv = T(1) / sum;
    for (int64_t j0 = 0; j0 < nv; j0 += kLanes) {
#pragma omp simd
      for (int64_t t = 0; t < kLanes; ++t) row[j0 + t] *= inv;
    }
    std::fill(row + n, row + ldp, T(0));
  }
}

template <typename T>
Operands<T> operands(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, const nn::AttnGeom& g) {
  return {q.data_ptr<T>(), k.data_ptr<T>(), v.data_ptr<T>(), g.mask_kind == 2 ? mask.data_ptr<T>() : nullptr,
          g.mask_kind == 1 ? mask.data_ptr<bool>() : nullptr};
}

void attention_forward_kernel(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                              const Tensor& out, const nn::AttnGeom& g) {
  visit_float32_64(out.dtype(), "scaled_dot_product_attention", [&]<typename T>() {
    const Operands<T> x = operands<T>(q, k, v, mask, g);
    T* op = out.data_ptr<T>();
    parallel_for(0, g.batch, 1, [&](int64_t lo, int64_t hi) {
      const int64_t ldp = padded(g.s);
      std::vector<T> buf(static_cast<size_t>(g.l * ldp));
      for (int64_t b = lo; b < hi; ++b) {
        probabilities(g, x, b, buf.data(), ldp);
        // S == 0 gives k = 0: the GEMM writes zeros.
        for (int64_t r0 = 0; r0 < g.l; r0 += row_block(g)) {
          const int64_t r1 = std::min(g.l, r0 + row_block(g));
          cpublas::gemm(Trans::N, Trans::N, r1 - r0, g.ev, block_columns(g, r1), T(1), buf.data() + r0 * ldp, ldp,
                        x.v + g.v.off[b], g.v.rs, T(0), op + g.out.off[b] + r0 * g.out.rs, g.out.rs);
        }
      }
    });
  });
}

// With P the probabilities and dO = grad_out:
//   dV = P^T dO,  dP = dO V^T,  dS = P * (dP - rowsum(P * dP)),  dQ = scale dS K,  dK = scale dS^T Q.
void attention_backward_kernel(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                               const Tensor& mask, const Tensor& gq, const Tensor& gk, const Tensor& gv,
                               const nn::AttnGeom& g) {
  visit_float32_64(gq.dtype(), "_scaled_dot_product_attention_backward", [&]<typename T>() {
    const Operands<T> x = operands<T>(q, k, v, mask, g);
    const T* gop = grad_out.data_ptr<T>();
    T *gqp = gq.data_ptr<T>(), *gkp = gk.data_ptr<T>(), *gvp = gv.data_ptr<T>();
    const int64_t L = g.l, S = g.s, ldp = padded(S);
    const T scale = static_cast<T>(g.scale);
    parallel_for(0, g.batch, 1, [&](int64_t lo, int64_t hi) {
      std::vector<T> buf(static_cast<size_t>(2 * L * ldp));
      T* P = buf.data();
      T* D = P + L * ldp;
      for (int64_t b = lo; b < hi; ++b) {
        probabilities(g, x, b, P, ldp);
        const T* go = gop + g.out.off[b];
        cpublas::gemm(Trans::T, Trans::N, S, g.ev, L, T(1), P, ldp, go, g.out.rs, T(0), gvp + g.gv.off[b], g.gv.rs);
        cpublas::gemm(Trans::N, Trans::T, L, S, g.ev, T(1), go, g.out.rs, x.v + g.v.off[b], g.v.rs, T(0), D, ldp);
        for (int64_t i = 0; i < L; ++i) {
          const T* __restrict p = P + i * ldp;
          T* __restrict d = D + i * ldp;
          const int64_t n = kept_columns(g, i), nv = (n + kLanes - 1) / kLanes * kLanes;
          T lane[kLanes] = {};
          for (int64_t j0 = 0; j0 < nv; j0 += kLanes) {
#pragma omp simd
            for (int64_t t = 0; t < kLanes; ++t) lane[t] += j0 + t < n ? p[j0 + t] * d[j0 + t] : T(0);
          }
          T dot = 0;
          for (int64_t t = 0; t < kLanes; ++t) dot += lane[t];
          for (int64_t j0 = 0; j0 < nv; j0 += kLanes) {
#pragma omp simd
            for (int64_t t = 0; t < kLanes; ++t) d[j0 + t] = p[j0 + t] * (d[j0 + t] - dot);
          }
          std::fill(d + n, d + S, T(0));
        }
        cpublas::gemm(Trans::N, Trans::N, L, g.e, S, scale, D, ldp, x.k + g.k.off[b], g.k.rs, T(0), gqp + g.gq.off[b],
                      g.gq.rs);
        cpublas::gemm(Trans::T, Trans::N, S, g.e, L, scale, D, ldp, x.q + g.q.off[b], g.q.rs, T(0), gkp + g.gk.off[b],
                      g.gk.rs);
      }
    });
  });
}

}  // namespace
}  // namespace STRATA_CPU_NS
}  // namespace cpu

STRATA_REGISTER_CPU_KERNEL(nn_attention_forward_stub, cpu::attention_forward_kernel);
STRATA_REGISTER_CPU_KERNEL(nn_attention_backward_stub, cpu::attention_backward_kernel);

}  // namespace strata
