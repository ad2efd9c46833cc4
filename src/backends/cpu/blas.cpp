// Placeholder GEMM (a plain triple loop) until the BLAS loader lands; keeps
// callers building. Correct for any transposes, not fast.
#include "backends/cpu/blas.h"

namespace strata::cpublas {

namespace {
template <typename T>
void naive_gemm(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
                int64_t ldb, T beta, T* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      T acc = 0;
      for (int64_t p = 0; p < k; ++p) {
        T av = ta == Trans::N ? a[i * lda + p] : a[p * lda + i];
        T bv = tb == Trans::N ? b[p * ldb + j] : b[j * ldb + p];
        acc += av * bv;
      }
      c[i * ldc + j] = alpha * acc + (beta == T(0) ? T(0) : beta * c[i * ldc + j]);
    }
  }
}
}  // namespace

void gemm(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  naive_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void gemm(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  naive_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
std::string backend_name() { return "naive (placeholder)"; }

}  // namespace strata::cpublas
