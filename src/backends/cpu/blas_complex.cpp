// Complex GEMM and dot products through OpenBLAS's cblas_cgemm / cblas_zgemm
// and cblas_?dotu_sub / cblas_?dotc_sub (the library blas.cpp loads and checks
// for the real BLAS; see Note [Which LAPACK] in lapack.h for why we take a
// second reference to it). Before this, a complex product was four real GEMMs
// on the real/imaginary views (ops/linalg.cpp keeps that path as the fallback
// when these symbols are missing): that reads each operand twice through
// strided (stride-2) views and writes two temporaries; one cgemm/zgemm call
// does the same flops with packed complex kernels (docs/DESIGN.md "LAPACK"
// records the measured ratios).
//
// Layouts follow blas_gemm.cpp: a matrix whose rows or columns are dense goes
// to BLAS as it is (transposed if column-major), a column-major C is computed
// as C^T = B^T A^T, anything else is packed first.
#include <dlfcn.h>

#include <array>
#include <complex>
#include <vector>

#include "backends/cpu/blas.h"
#include "backends/cpu/lapack.h"
#include "backends/cpu/parallel.h"
#include "ops/linalg_kernel.h"

namespace strata {

namespace {

constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;

using GemmC = void (*)(int, int, int, int, int, int, const void*, const void*, int, const void*, int, const void*,
                       void*, int);
using DotC = void (*)(int, const void*, int, const void*, int, void*);

struct ComplexBlas {
  GemmC cgemm = nullptr, zgemm = nullptr;
  DotC cdotu = nullptr, zdotu = nullptr, cdotc = nullptr, zdotc = nullptr;
  bool ok = false;

  ComplexBlas() {
    (void)cpublas::other_library();  // blas.cpp loads (and if needed reloads) libopenblas first
    void* h = nullptr;
    for (const char* name : {"libopenblas.so.0", "libopenblas.so"})
      if ((h = dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;
    if (!h) return;
    auto sym = [&](auto& fn, const char* name) { fn = reinterpret_cast<std::decay_t<decltype(fn)>>(dlsym(h, name)); };
    sym(cgemm, "cblas_cgemm"), sym(zgemm, "cblas_zgemm");
    sym(cdotu, "cblas_cdotu_sub"), sym(zdotu, "cblas_zdotu_sub");
    sym(cdotc, "cblas_cdotc_sub"), sym(zdotc, "cblas_zdotc_sub");
    ok = cgemm && zgemm && cdotu && zdotu && cdotc && zdotc && matches_reference<float>() &&
         matches_reference<double>();
  }

  // A 3x4 by 4x2 product (B read transposed) against a plain loop, as blas.cpp
  // checks the real GEMMs before trusting them.
  template <typename R>
  bool matches_reference() const {
    using C = std::complex<R>;
    const int m = 3, n = 2, k = 4;
    std::vector<C> a(m * k), bt(n * k), c(m * n, C(1, 1)), ref(m * n);
    for (int i = 0; i < m * k; ++i) a[i] = C(R(i % 5) - 2, R(i % 3));
    for (int i = 0; i < n * k; ++i) bt[i] = C(R(i % 4), R(1) - R(i % 2));
    const C alpha(2, -1), beta(R(0.5), 1);
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        C s = 0;
        for (int p = 0; p < k; ++p) s += a[i * k + p] * bt[j * k + p];
        ref[i * n + j] = alpha * s + beta * C(1, 1);
      }
    GemmC f = std::is_same_v<R, float> ? cgemm : zgemm;
    f(kRowMajor, kNoTrans, kTrans, m, n, k, &alpha, a.data(), k, bt.data(), k, &beta, c.data(), n);
    for (int i = 0; i < m * n; ++i)
      if (std::abs(c[i] - ref[i]) > R(1e-4) * (1 + std::abs(ref[i]))) return false;
    return true;
  }
};

const ComplexBlas& blas() {
  static ComplexBlas b;
  return b;
}

struct Layout {
  bool ok;
  bool t;
  int64_t ld;
};

Layout layout_of(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  if (cs == 1 && (rows <= 1 || rs >= std::max<int64_t>(1, cols))) return {true, false, rs};
  if (rs == 1 && (cols <= 1 || cs >= std::max<int64_t>(1, rows))) return {true, true, cs};
  return {false, false, 0};
}

template <typename C>
struct Scratch {
  std::vector<C> a, b;
};

template <typename C>
void pack(const C* src, int64_t rows, int64_t cols, int64_t rs, int64_t cs, std::vector<C>& dst) {
  dst.resize(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) dst[i * cols + j] = src[i * rs + j * cs];
}

// One matrix: C = alpha A B + beta C, any strides.
template <typename C>
void gemm_one(int64_t m, int64_t n, int64_t k, C alpha, const C* a, int64_t a_rs, int64_t a_cs, const C* b,
              int64_t b_rs, int64_t b_cs, C beta, C* c, int64_t c_rs, int64_t c_cs, Scratch<C>& s) {
  if (m == 0 || n == 0) return;
  Layout lc = layout_of(m, n, c_rs, c_cs);
  if (lc.ok && lc.t && !(m <= 1 && n <= 1))  // column-major C: C^T = B^T A^T
    return gemm_one<C>(n, m, k, alpha, b, b_cs, b_rs, a, a_cs, a_rs, beta, c, c_cs, c_rs, s);
  if (!lc.ok) {
    std::vector<C> tmp(static_cast<size_t>(m * n));
    if (beta != C(0))
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) tmp[i * n + j] = c[i * c_rs + j * c_cs];
    gemm_one<C>(m, n, k, alpha, a, a_rs, a_cs, b, b_rs, b_cs, beta, tmp.data(), n, 1, s);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * c_rs + j * c_cs] = tmp[i * n + j];
    return;
  }
  if (k == 0) {  // BLAS would still read lda/ldb; C = beta C
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * c_rs + j * c_cs] = beta == C(0) ? C(0) : beta * c[i * c_rs + j * c_cs];
    return;
  }
  Layout la = layout_of(m, k, a_rs, a_cs), lb = layout_of(k, n, b_rs, b_cs);
  if (!la.ok) {
    pack(a, m, k, a_rs, a_cs, s.a);
    a = s.a.data();
    la = {true, false, k};
  }
  if (!lb.ok) {
    pack(b, k, n, b_rs, b_cs, s.b);
    b = s.b.data();
    lb = {true, false, n};
  }
  // BLAS wants ld >= 1 and >= the row length even where a dim is 1.
  int64_t lda = std::max<int64_t>(la.ld, la.t ? m : k), ldb = std::max<int64_t>(lb.ld, lb.t ? k : n);
  int64_t ldc = m <= 1 ? std::max<int64_t>(n, 1) : c_rs;
  GemmC f = std::is_same_v<C, std::complex<float>> ? blas().cgemm : blas().zgemm;
  f(kRowMajor, la.t ? kTrans : kNoTrans, lb.t ? kTrans : kNoTrans, int(m), int(n), int(k), &alpha, a, int(lda), b,
    int(ldb), &beta, c, int(ldc));
}

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

template <typename C>
void batched(const BatchedGemm& g, std::complex<double> alpha_d, std::complex<double> beta_d) {
  const C* a = static_cast<const C*>(g.a);
  const C* b = static_cast<const C*>(g.b);
  C* c = static_cast<C*>(g.c);
  const C alpha(alpha_d), beta(beta_d);
  int64_t total = 1;
  for (int64_t s : g.batch) total *= s;
  const double flops = 8.0 * g.m * g.n * g.k;
  if (!g.reduce_batch && total >= 2 && flops < 8.0 * 32 * 32 * 32 && get_num_threads() > 1) {
    // Many small matrices: one thread per matrix (the library would not split them).
    std::vector<std::array<int64_t, 3>> offs;
    offs.reserve(total);
    for_each_batch(g, [&](int64_t, int64_t oa, int64_t ob, int64_t oc) { offs.push_back({oa, ob, oc}); });
    int64_t grain = std::max<int64_t>(1, static_cast<int64_t>(262144.0 / std::max(flops, 1.0)));
    parallel_for(0, total, grain, [&](int64_t t0, int64_t t1) {
      Scratch<C> s;
      for (int64_t t = t0; t < t1; ++t) {
        auto [oa, ob, oc] = offs[t];
        gemm_one<C>(g.m, g.n, g.k, alpha, a + oa, g.a_rs, g.a_cs, b + ob, g.b_rs, g.b_cs, beta, c + oc, g.c_rs,
                    g.c_cs, s);
      }
    });
    return;
  }
  Scratch<C> s;
  for_each_batch(g, [&](int64_t t, int64_t oa, int64_t ob, int64_t oc) {
    C be = g.reduce_batch && t > 0 ? C(1) : beta;
    gemm_one<C>(g.m, g.n, g.k, alpha, a + oa, g.a_rs, g.a_cs, b + ob, g.b_rs, g.b_cs, be, c + oc, g.c_rs, g.c_cs, s);
  });
  if (g.reduce_batch && total == 0)
    gemm_one<C>(g.m, g.n, 0, alpha, a, g.a_rs, g.a_cs, b, g.b_rs, g.b_cs, beta, c, g.c_rs, g.c_cs, s);
}

bool complex_gemm_cpu(const BatchedGemm& g, std::complex<double> alpha, std::complex<double> beta) {
  if (!blas().ok) return false;
  lapack::sync_threads();  // OpenBLAS's thread count = strata.get_num_threads()
  if (g.dtype == ScalarType::ComplexFloat) batched<std::complex<float>>(g, alpha, beta);
  else batched<std::complex<double>>(g, alpha, beta);
  return true;
}

bool complex_dot_cpu(ScalarType dt, bool conj_x, int64_t n, const void* x, int64_t incx, const void* y, int64_t incy,
                     void* out) {
  const ComplexBlas& bl = blas();
  if (!bl.ok || n > INT32_MAX || incx <= 0 || incy <= 0 || incx > INT32_MAX || incy > INT32_MAX) return false;
  DotC f = dt == ScalarType::ComplexFloat ? (conj_x ? bl.cdotc : bl.cdotu) : (conj_x ? bl.zdotc : bl.zdotu);
  f(int(n), x, int(incx), y, int(incy), out);
  return true;
}

StubRegistrar<ComplexGemmFn> g_reg_complex_gemm(complex_gemm_stub, 0, &complex_gemm_cpu);
StubRegistrar<ComplexDotFn> g_reg_complex_dot(complex_dot_stub, 0, &complex_dot_cpu);

}  // namespace

}  // namespace strata
