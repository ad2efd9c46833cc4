// The CPU BLAS interface every CPU kernel uses (matmul, conv, linear, the
// strata.blas ops). Row-major, like the tensors. The implementation picks the
// library at run time (see blas.cpp for how and why).
#pragma once

#include <cstdint>
#include <string>

namespace strata::cpublas {

enum class Trans : char { N = 'N', T = 'T' };

// C = alpha * op(A) @ op(B) + beta * C, with row-major leading dimensions.
void gemm(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
void gemm(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc);

// A one-line description of the library and kernel in use (for explain()).
std::string backend_name();

}  // namespace strata::cpublas
