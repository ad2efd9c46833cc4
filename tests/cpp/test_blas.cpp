// cpublas::gemm against a plain loop for every transpose combination, odd
// sizes, padded leading dimensions, beta, and each implementation (the
// selected library and the built-in blocked GEMM on every ISA level it has).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backends/cpu/blas.h"

using namespace strata::cpublas;

namespace {

template <typename T>
void reference(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, T alpha, const std::vector<T>& a, int64_t lda,
               const std::vector<T>& b, int64_t ldb, T beta, std::vector<T>& c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p)
        acc += double(ta == Trans::N ? a[i * lda + p] : a[p * lda + i]) *
               double(tb == Trans::N ? b[p * ldb + j] : b[j * ldb + p]);
      c[i * ldc + j] = T(alpha * acc + (beta == T(0) ? 0.0 : double(beta) * c[i * ldc + j]));
    }
}

template <typename T, typename Gemm>
void check_all(Gemm&& gemm, double tol) {
  std::mt19937 rng(42);
  std::uniform_real_distribution<double> u(-1, 1);
  const int64_t shapes[][3] = {{1, 1, 1}, {7, 5, 3}, {33, 65, 17}, {97, 130, 300}, {1, 200, 64}, {150, 1, 9}, {1, 3000, 100},
                               {2000, 1, 50}, {1, 500, 400}, {4, 4, 0}};
  for (auto& s : shapes) {
    int64_t m = s[0], n = s[1], k = s[2];
    for (Trans ta : {Trans::N, Trans::T})
      for (Trans tb : {Trans::N, Trans::T})
        for (T beta : {T(0), T(0.5)}) {
          // padded leading dimensions (+3) to catch ld mix-ups
          int64_t lda = (ta == Trans::N ? k : m) + 3, ldb = (tb == Trans::N ? n : k) + 3, ldc = n + 3;
          std::vector<T> a((ta == Trans::N ? m : k) * lda), b((tb == Trans::N ? k : n) * ldb), c(m * ldc);
          for (auto& v : a) v = T(u(rng));
          for (auto& v : b) v = T(u(rng));
          for (auto& v : c) v = beta == T(0) ? T(NAN) : T(u(rng));  // beta 0 must not read C
          std::vector<T> expected = c;
          gemm(ta, tb, m, n, k, T(1.25), a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
          reference<T>(ta, tb, m, n, k, T(1.25), a, lda, b, ldb, beta, expected, ldc);
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j)
              ASSERT_NEAR(c[i * ldc + j], expected[i * ldc + j], tol * (1 + std::abs(double(expected[i * ldc + j]))))
                  << "m=" << m << " n=" << n << " k=" << k << " ta=" << char(ta) << " tb=" << char(tb)
                  << " beta=" << beta;
        }
  }
}

}  // namespace

TEST(Blas, GemmFloatAllTransposes) {
  check_all<float>([](auto... a) { gemm(a...); }, 1e-4);
}
TEST(Blas, GemmDoubleAllTransposes) {
  check_all<double>([](auto... a) { gemm(a...); }, 1e-11);
}
TEST(Blas, NativeGemmFloat) {
  check_all<float>([](auto... a) { detail::native_gemm(a...); }, 1e-4);
}
TEST(Blas, NativeGemmDouble) {
  check_all<double>([](auto... a) { detail::native_gemm(a...); }, 1e-11);
}

TEST(Blas, CoretypeFixDecision) {
  EXPECT_TRUE(detail::needs_coretype_fix(true, "Haswell"));
  EXPECT_TRUE(detail::needs_coretype_fix(true, "Prescott"));
  EXPECT_FALSE(detail::needs_coretype_fix(true, "SkylakeX"));
  EXPECT_FALSE(detail::needs_coretype_fix(true, "Cooperlake"));
  EXPECT_FALSE(detail::needs_coretype_fix(true, "sapphirerapids"));
  EXPECT_FALSE(detail::needs_coretype_fix(false, "Haswell"));  // no AVX-512: nothing better to force
}

TEST(Blas, Level2And1) {
  // y = 2 * A^T x + 0.5 y with A 3x2 row-major
  std::vector<double> a = {1, 2, 3, 4, 5, 6}, x = {1, -1, 2}, y = {1, 1};
  gemv(Trans::T, 3, 2, 2.0, a.data(), 2, x.data(), 1, 0.5, y.data(), 1);
  EXPECT_DOUBLE_EQ(y[0], 2 * (1 - 3 + 10) + 0.5);
  EXPECT_DOUBLE_EQ(y[1], 2 * (2 - 4 + 12) + 0.5);
  EXPECT_DOUBLE_EQ(dot(3, x.data(), 1, a.data(), 2), 1 - 3 + 10);
  EXPECT_FLOAT_EQ(nrm2(2, std::vector<float>{3, 4}.data(), 1), 5.f);
  std::vector<double> l = {2, 0, 1, 4}, b = {2, 9};  // lower [[2,0],[1,4]] x = b -> x = [1, 2]
  trsv(Uplo::Lower, Trans::N, Diag::NonUnit, 2, l.data(), 2, b.data(), 1);
  EXPECT_DOUBLE_EQ(b[0], 1);
  EXPECT_DOUBLE_EQ(b[1], 2);
}

TEST(Blas, BackendName) {
  std::string s = backend_name();
  EXPECT_NE(s.find("fp32 gemm:"), std::string::npos) << s;
}
