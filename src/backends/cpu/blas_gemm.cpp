// CPU implementation of the batched strided GEMM behind matmul, mm, bmm,
// addmm, addmv, dot, baddbmm and addbmm. Turns tensor strides into BLAS
// layouts: a matrix whose rows or columns are dense is passed as it is
// (transposed if it is column-major) instead of being copied; a column-major C
// is computed as C^T = B^T A^T. Only layouts BLAS cannot describe (both strides
// > 1, stride-0 expanded rows) are copied.
#include <algorithm>
#include <array>
#include <bit>
#include <vector>

#include "backends/cpu/blas.h"
#include "backends/cpu/dnnl_matmul.h"
#include "backends/cpu/gemm_native.h"
#include "backends/cpu/parallel.h"
#include "ops/linalg_kernel.h"

namespace strata {

namespace {

using cpublas::Trans;

struct Layout {
  bool ok;
  Trans t;
  int64_t ld;
};

// A rows x cols matrix with strides (rs, cs), as BLAS sees it.
Layout blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  if (cs == 1 && (rows <= 1 || rs >= std::max<int64_t>(1, cols))) return {true, Trans::N, rs};
  if (rs == 1 && (cols <= 1 || cs >= std::max<int64_t>(1, rows))) return {true, Trans::T, cs};
  return {false, Trans::N, 0};
}

template <typename T>
void pack(const T* src, int64_t rows, int64_t cols, int64_t rs, int64_t cs, std::vector<T>& dst) {
  dst.resize(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) dst[i * cols + j] = src[i * rs + j * cs];
}

template <typename T>
struct Scratch {
  std::vector<T> a, b, c;
};

// One matrix: C = alpha * A @ B + beta * C for any strides.
template <typename T>
void gemm_one(int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t a_rs, int64_t a_cs, const T* b,
              int64_t b_rs, int64_t b_cs, T beta, T* c, int64_t c_rs, int64_t c_cs, Scratch<T>& s) {
  if (m == 0 || n == 0) return;
  Layout lc = blas_layout(m, n, c_rs, c_cs);
  if (lc.ok && lc.t == Trans::T && !(m <= 1 && n <= 1)) {
    // Column-major C: compute C^T (n x m, row-major) = B^T @ A^T.
    return gemm_one<T>(n, m, k, alpha, b, b_cs, b_rs, a, a_cs, a_rs, beta, c, c_cs, c_rs, s);
  }
  if (!lc.ok) {
    std::vector<T> tmp(static_cast<size_t>(m * n));
    if (beta != T(0))
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) tmp[i * n + j] = c[i * c_rs + j * c_cs];
    gemm_one<T>(m, n, k, alpha, a, a_rs, a_cs, b, b_rs, b_cs, beta, tmp.data(), n, 1, s);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * c_rs + j * c_cs] = tmp[i * n + j];
    return;
  }
  Layout la = blas_layout(m, k, a_rs, a_cs), lb = blas_layout(k, n, b_rs, b_cs);
  if (!la.ok && k > 0) {
    pack(a, m, k, a_rs, a_cs, s.a);
    a = s.a.data();
    la = {true, Trans::N, k};
  }
  if (!lb.ok && k > 0) {
    pack(b, k, n, b_rs, b_cs, s.b);
    b = s.b.data();
    lb = {true, Trans::N, n};
  }
  cpublas::gemm(la.t, lb.t, m, n, k, alpha, a, la.ld, b, lb.ld, beta, c, m <= 1 ? std::max<int64_t>(n, 1) : c_rs);
}

// Visits every batch index of g.batch with the element offsets of A, B, C.
template <typename F>
void for_each_batch(const BatchedGemm& g, F&& f) {
  const int64_t nd = static_cast<int64_t>(g.batch.size());
  int64_t total = 1;
  for (int64_t s : g.batch) total *= s;
  DimVector idx(nd, 0);
  int64_t oa = 0, ob = 0, oc = 0;
  for (int64_t t = 0; t < total; ++t) {
    f(t, oa, ob, oc);
    for (int64_t d = nd - 1; d >= 0; --d) {
      if (++idx[d] < g.batch[d]) {
        oa += g.a_bs[d], ob += g.b_bs[d], oc += g.c_bs[d];
        break;
      }
      oa -= g.a_bs[d] * (g.batch[d] - 1), ob -= g.b_bs[d] * (g.batch[d] - 1), oc -= g.c_bs[d] * (g.batch[d] - 1);
      idx[d] = 0;
    }
  }
}

template <typename T>
void batched_float(const BatchedGemm& g) {
  const T* a = static_cast<const T*>(g.a);
  const T* b = static_cast<const T*>(g.b);
  T* c = static_cast<T*>(g.c);
  const T alpha = static_cast<T>(g.alpha), beta = static_cast<T>(g.beta);
  int64_t total = 1;
  for (int64_t s : g.batch) total *= s;
  const double flops = 2.0 * g.m * g.n * g.k;
  if (!g.reduce_batch && total >= 2 && flops < 2.0 * 48 * 48 * 48 && get_num_threads() > 1) {
    // Many small matrices: one thread per matrix (the libraries would not split them).
    std::vector<std::array<int64_t, 3>> offs;
    offs.reserve(total);
    for_each_batch(g, [&](int64_t, int64_t oa, int64_t ob, int64_t oc) { offs.push_back({oa, ob, oc}); });
    int64_t grain = std::max<int64_t>(1, static_cast<int64_t>(65536.0 / std::max(flops, 1.0)));
    parallel_for(0, total, grain, [&](int64_t t0, int64_t t1) {
      Scratch<T> s;
      for (int64_t t = t0; t < t1; ++t) {
        auto [oa, ob, oc] = offs[t];
        gemm_one<T>(g.m, g.n, g.k, alpha, a + oa, g.a_rs, g.a_cs, b + ob, g.b_rs, g.b_cs, beta, c + oc, g.c_rs,
                    g.c_cs, s);
      }
    });
    return;
  }
  Scratch<T> s;
  for_each_batch(g, [&](int64_t t, int64_t oa, int64_t ob, int64_t oc) {
    T be = g.reduce_batch && t > 0 ? T(1) : beta;
    gemm_one<T>(g.m, g.n, g.k, alpha, a + oa, g.a_rs, g.a_cs, b + ob, g.b_rs, g.b_cs, be, c + oc, g.c_rs, g.c_cs, s);
  });
  if (g.reduce_batch && total == 0) {
    // No batches: C = beta * C.
    gemm_one<T>(g.m, g.n, 0, alpha, a, g.a_rs, g.a_cs, b, g.b_rs, g.b_cs, beta, c, g.c_rs, g.c_cs, s);
  }
}

// bfloat16 A and B, float32 C (see BatchedGemm). oneDNN's bf16 GEMM when
// present; otherwise the operands are widened to float32 matrix by matrix.
void batched_bf16(const BatchedGemm& g) {
  const auto* a = static_cast<const uint16_t*>(g.a);
  const auto* b = static_cast<const uint16_t*>(g.b);
  float* c = static_cast<float*>(g.c);
  const float alpha = static_cast<float>(g.alpha), beta = static_cast<float>(g.beta);
  const bool lib = cpublas::has_gemm_bf16();
  std::vector<uint16_t> pa, pb;
  Scratch<float> s;
  std::vector<float> fa, fb;
  auto widen = [](const uint16_t* src, int64_t rows, int64_t cols, int64_t rs, int64_t cs, std::vector<float>& dst) {
    dst.resize(static_cast<size_t>(rows * cols));
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        dst[i * cols + j] = std::bit_cast<float>(static_cast<uint32_t>(src[i * rs + j * cs]) << 16);
  };
  int64_t total = 1;
  for (int64_t d : g.batch) total *= d;
  auto one = [&](int64_t t, int64_t oa, int64_t ob, int64_t oc) {
    const float be = g.reduce_batch && t > 0 ? 1.f : beta;
    const uint16_t* ap = a + oa;
    const uint16_t* bp = b + ob;
    Layout lc = blas_layout(g.m, g.n, g.c_rs, g.c_cs);
    Layout la = blas_layout(g.m, g.k, g.a_rs, g.a_cs), lb = blas_layout(g.k, g.n, g.b_rs, g.b_cs);
    if (lib && lc.ok && lc.t == Trans::N) {
      if (!la.ok) {
        pack(ap, g.m, g.k, g.a_rs, g.a_cs, pa);
        ap = pa.data(), la = {true, Trans::N, g.k};
      }
      if (!lb.ok) {
        pack(bp, g.k, g.n, g.b_rs, g.b_cs, pb);
        bp = pb.data(), lb = {true, Trans::N, g.n};
      }
      cpublas::gemm_bf16(la.t, lb.t, g.m, g.n, g.k, alpha, ap, la.ld, bp, lb.ld, be, c + oc,
                         g.m <= 1 ? std::max<int64_t>(g.n, 1) : g.c_rs);
      return;
    }
    widen(ap, g.m, g.k, g.a_rs, g.a_cs, fa);
    widen(bp, g.k, g.n, g.b_rs, g.b_cs, fb);
    gemm_one<float>(g.m, g.n, g.k, alpha, fa.data(), g.k, 1, fb.data(), g.n, 1, be, c + oc, g.c_rs, g.c_cs, s);
  };
  for_each_batch(g, one);
  if (g.reduce_batch && total == 0) {
    gemm_one<float>(g.m, g.n, 0, alpha, nullptr, 0, 1, nullptr, 0, 1, beta, c, g.c_rs, g.c_cs, s);
  }
}

void batched_int(const BatchedGemm& g) {
  const size_t es = element_size(g.dtype);
  int64_t total = 1;
  for (int64_t s : g.batch) total *= s;
  auto run = [&](int64_t oa, int64_t ob, int64_t oc, int64_t beta, int64_t k) {
    cpublas::IntGemmArgs a{g.dtype, g.m, g.n, k,
                           static_cast<const char*>(g.a) + oa * es, g.a_rs, g.a_cs,
                           static_cast<const char*>(g.b) + ob * es, g.b_rs, g.b_cs,
                           static_cast<char*>(g.c) + oc * es, g.c_rs, g.c_cs, g.ialpha, beta};
    int_gemm_stub(DeviceType::CPU, a);
  };
  for_each_batch(g, [&](int64_t t, int64_t oa, int64_t ob, int64_t oc) {
    run(oa, ob, oc, g.reduce_batch && t > 0 ? 1 : g.ibeta, g.k);
  });
  if (g.reduce_batch && total == 0) {
    run(0, 0, 0, g.ibeta, 0);  // alpha * (empty sum) + beta * C
  }
}

void batched_gemm_cpu_impl(const BatchedGemm& g) {
  switch (g.dtype) {
    case ScalarType::Float32: return batched_float<float>(g);
    case ScalarType::Float64: return batched_float<double>(g);
    case ScalarType::BFloat16: return batched_bf16(g);
    default: return batched_int(g);
  }
}

void batched_gemm_cpu(const BatchedGemm& g) {
  if (g.m == 0 || g.n == 0) return;
  if (g.k == 0 && (!g.a || !g.b)) {
    // Empty inner dim: A and B are never read and may have no data at all; stepping their (null) pointers
    // through the batch is undefined (UBSan, fuzz_meta_ops: matmul of [2, 3, 0] by [0, 4]). C = beta * C.
    BatchedGemm z = g;
    std::fill(z.a_bs.begin(), z.a_bs.end(), int64_t(0));
    std::fill(z.b_bs.begin(), z.b_bs.end(), int64_t(0));
    return batched_gemm_cpu_impl(z);
  }
  batched_gemm_cpu_impl(g);
}

// The (row, column) strides oneDNN's matmul gets for a matrix blas_layout accepts: a size-1 dim's stride is
// arbitrary in a view, so the leading dimension is at least the dense one, as fix_ld does for the GEMM routines.
void dense_strides(const Layout& l, int64_t rows, int64_t cols, int64_t& rs, int64_t& cs) {
  const int64_t ld = std::max(l.ld, l.t == Trans::N ? cols : rows);
  rs = l.t == Trans::N ? ld : 1;
  cs = l.t == Trans::N ? 1 : ld;
}

bool bf16_out_gemm_cpu(const BatchedGemm& g) {
  // Vector-like products (fewer than 16 rows or columns) stay with the GEMM
  // routine: the primitive took 2-4x longer on 1x4096 @ 4096x4096 and
  // 4x4096 @ 4096x4096 here (memory-bound, the rounding pass is tiny there).
  // So do long inner dimensions, where the rounding pass is a small share and
  // the routine's kernel was faster (4096^3: 616 ms against 678).
  if (!g.batch.empty() || g.m < 16 || g.n < 16 || g.k == 0 || g.k > 1024) return false;
  const Layout la = blas_layout(g.m, g.k, g.a_rs, g.a_cs), lb = blas_layout(g.k, g.n, g.b_rs, g.b_cs),
               lc = blas_layout(g.m, g.n, g.c_rs, g.c_cs);
  if (!la.ok || !lb.ok || !lc.ok) return false;
  int64_t a_rs, a_cs, b_rs, b_cs, c_rs, c_cs;
  dense_strides(la, g.m, g.k, a_rs, a_cs);
  dense_strides(lb, g.k, g.n, b_rs, b_cs);
  dense_strides(lc, g.m, g.n, c_rs, c_cs);
  return cpu::dnnl_matmul::gemm_bf16_out(g.m, g.n, g.k, static_cast<const uint16_t*>(g.a), a_rs, a_cs,
                                         static_cast<const uint16_t*>(g.b), b_rs, b_cs, static_cast<uint16_t*>(g.c),
                                         c_rs, c_cs);
}

StubRegistrar<BatchedGemmFn> g_reg(batched_gemm_stub, 0, &batched_gemm_cpu);
StubRegistrar<Bf16OutGemmFn> g_reg_bf16_out(bf16_out_gemm_stub, 0, &bf16_out_gemm_cpu);

}  // namespace

}  // namespace strata
