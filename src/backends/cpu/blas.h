// The CPU BLAS interface every CPU kernel uses (matmul, conv, linear, the
// strata.blas ops). Row-major, like the tensors. The implementation picks the
// library at run time (see blas.cpp for how and why).
//
// All routines take element strides/leading dimensions. Callers must pass
// valid BLAS layouts (row-major: lda >= max(1, number of stored columns),
// increments > 0); the matmul layer in blas_gemm.cpp turns arbitrary tensor
// strides into such layouts (or copies).
#pragma once

#include <cstdint>
#include <string>

namespace strata::cpublas {

enum class Trans : char { N = 'N', T = 'T' };
enum class Uplo : char { Upper = 'U', Lower = 'L' };
enum class Side : char { Left = 'L', Right = 'R' };
enum class Diag : char { NonUnit = 'N', Unit = 'U' };

// C = alpha * op(A) @ op(B) + beta * C, with row-major leading dimensions.
// beta == 0 never reads C (NaNs in C do not propagate), as in BLAS.
void gemm(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
void gemm(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc);

// C (float32) = alpha * op(A) @ op(B) + beta * C with A and B in bfloat16
// (raw bits), through oneDNN's dnnl_gemm_bf16bf16f32 (AVX512_BF16 where the
// CPU has it). Returns false, doing nothing, when no library provides it.
bool gemm_bf16(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a, int64_t lda,
               const uint16_t* b, int64_t ldb, float beta, float* c, int64_t ldc);
bool has_gemm_bf16();

// y = alpha * op(A) @ x + beta * y; A is m x n row-major.
void gemv(Trans t, int64_t m, int64_t n, float alpha, const float* a, int64_t lda, const float* x, int64_t incx,
          float beta, float* y, int64_t incy);
void gemv(Trans t, int64_t m, int64_t n, double alpha, const double* a, int64_t lda, const double* x, int64_t incx,
          double beta, double* y, int64_t incy);

// y += alpha * x
void axpy(int64_t n, float alpha, const float* x, int64_t incx, float* y, int64_t incy);
void axpy(int64_t n, double alpha, const double* x, int64_t incx, double* y, int64_t incy);
float dot(int64_t n, const float* x, int64_t incx, const float* y, int64_t incy);
double dot(int64_t n, const double* x, int64_t incx, const double* y, int64_t incy);
float nrm2(int64_t n, const float* x, int64_t incx);
double nrm2(int64_t n, const double* x, int64_t incx);

// Solves op(A) x = b in place (x overwrites b); A is n x n triangular.
void trsv(Uplo uplo, Trans t, Diag diag, int64_t n, const float* a, int64_t lda, float* x, int64_t incx);
void trsv(Uplo uplo, Trans t, Diag diag, int64_t n, const double* a, int64_t lda, double* x, int64_t incx);

// C = alpha * op(A) @ op(A)^T + beta * C on the `uplo` triangle of the n x n C;
// op(A) is n x k (t == N: A is n x k; t == T: A is k x n).
void syrk(Uplo uplo, Trans t, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, float beta, float* c,
          int64_t ldc);
void syrk(Uplo uplo, Trans t, int64_t n, int64_t k, double alpha, const double* a, int64_t lda, double beta,
          double* c, int64_t ldc);

// Solves op(A) X = alpha B (side Left) or X op(A) = alpha B (side Right) in
// place; B is m x n, A is triangular (m x m or n x n).
void trsm(Side side, Uplo uplo, Trans t, Diag diag, int64_t m, int64_t n, float alpha, const float* a, int64_t lda,
          float* b, int64_t ldb);
void trsm(Side side, Uplo uplo, Trans t, Diag diag, int64_t m, int64_t n, double alpha, const double* a,
          int64_t lda, double* b, int64_t ldb);

// A one-line description of the library and kernel in use (for explain()),
// e.g. "fp32 gemm: oneDNN 2.6.0 sgemm; other: OpenBLAS 0.3.21 (Cooperlake), 2 threads".
std::string backend_name();

// Which implementation serves fp32 GEMM / everything else.
enum class Library { Dnnl, OpenBLAS, Native };
Library sgemm_library();
Library other_library();

namespace detail {
// True when OpenBLAS picked `corename` on a CPU with AVX-512 and that core is
// not an AVX-512 one (the 6x slow path PERFORMANCE.md describes).
bool needs_coretype_fix(bool cpu_has_avx512, const char* corename);
// The built-in blocked GEMM (used when no library is available; exposed for tests).
void native_gemm(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                 const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
void native_gemm(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
                 const double* b, int64_t ldb, double beta, double* c, int64_t ldc);
}  // namespace detail

}  // namespace strata::cpublas
