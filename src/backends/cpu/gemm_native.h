// Built-in GEMM loops, compiled once per ISA level (kernels/gemm_kernels.cpp)
// and reached through stubs: the fallback when no BLAS library loads, and the
// integer matmul (no BLAS has one).
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "ops/stub.h"

namespace strata::cpublas {

// Row-major C = alpha * op(A) @ op(B) + beta * C; ta/tb are 'N' or 'T'.
template <typename T>
using NativeGemmFn = void (*)(char ta, char tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
                              const T* b, int64_t ldb, T beta, T* c, int64_t ldc);

// BLAS gemv on a row-major m x n A: trans 'N': y(m) = alpha * A @ x + beta * y;
// 'T': y(n) = alpha * A^T @ x + beta * y. Used for the vector-shaped GEMMs
// (M == 1 or N == 1), which are memory-bound and where the libraries lose.
template <typename T>
using NativeGemvFn = void (*)(char trans, int64_t m, int64_t n, T alpha, const T* a, int64_t lda, const T* x,
                              int64_t incx, T beta, T* y, int64_t incy);

// Integer C = alpha * A @ B + beta * C with arbitrary element strides; values
// wrap like the integer type does. beta == 0 never reads C.
struct IntGemmArgs {
  ScalarType dtype;
  int64_t m, n, k;
  const void* a;
  int64_t a_rs, a_cs;
  const void* b;
  int64_t b_rs, b_cs;
  void* c;
  int64_t c_rs, c_cs;
  int64_t alpha, beta;
};
using IntGemmFn = void (*)(const IntGemmArgs&);

}  // namespace strata::cpublas

namespace strata {
STRATA_DECLARE_STUB(native_sgemm_stub, cpublas::NativeGemmFn<float>);
STRATA_DECLARE_STUB(native_dgemm_stub, cpublas::NativeGemmFn<double>);
STRATA_DECLARE_STUB(int_gemm_stub, cpublas::IntGemmFn);
STRATA_DECLARE_STUB(native_sgemv_stub, cpublas::NativeGemvFn<float>);
STRATA_DECLARE_STUB(native_dgemv_stub, cpublas::NativeGemvFn<double>);
}  // namespace strata
