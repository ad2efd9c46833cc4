// The one device stub behind every matmul-family op: a batched, strided GEMM.
// linalg.cpp does the checks, shapes, dtypes and broadcasting (as batch
// strides of 0) and hands the device this description.
#pragma once

#include <complex>
#include <vector>

#include "core/tensor.h"
#include "ops/stub.h"

namespace strata {

struct BatchedGemm {
  // Float32, Float64, an integer type, or BFloat16: then A and B hold bfloat16
  // and C is float32 (float16 is converted to float32 before).
  ScalarType dtype;
  int64_t m = 0, n = 0, k = 0;
  DimVector batch;                 // batch shape (empty: one matrix)
  DimVector a_bs, b_bs, c_bs;      // strides of the batch dims (0 where broadcast)
  const void* a = nullptr;
  int64_t a_rs = 0, a_cs = 0;      // element strides of one matrix
  const void* b = nullptr;
  int64_t b_rs = 0, b_cs = 0;
  void* c = nullptr;
  int64_t c_rs = 0, c_cs = 0;
  double alpha = 1, beta = 0;      // floating dtypes
  int64_t ialpha = 1, ibeta = 0;   // integer dtypes
  bool reduce_batch = false;       // addbmm: every batch adds into the same C (c_bs all 0)
};
using BatchedGemmFn = void (*)(const BatchedGemm&);
STRATA_DECLARE_STUB(batched_gemm_stub, BatchedGemmFn);
// One bfloat16 product (no batch, alpha 1, beta 0) with a bfloat16 C: g.c is
// bfloat16 here, not float32. Returns false, touching nothing, when the
// backend has no direct way; the caller then goes through a float32 C.
using Bf16OutGemmFn = bool (*)(const BatchedGemm&);
STRATA_DECLARE_STUB(bf16_out_gemm_stub, Bf16OutGemmFn);

// Complex64/complex128 products (C = alpha A B + beta C with complex alpha and
// beta; g.alpha/g.beta unused) in one complex GEMM per matrix. Returns false,
// touching nothing, when the backend has no complex GEMM; the caller then
// computes the product as four real GEMMs.
using ComplexGemmFn = bool (*)(const BatchedGemm&, std::complex<double> alpha, std::complex<double> beta);
STRATA_DECLARE_STUB(complex_gemm_stub, ComplexGemmFn);
// out = sum x_i y_i (conj_x: sum conj(x_i) y_i) over n complex elements with
// positive strides; false when the backend cannot (the caller falls back).
using ComplexDotFn = bool (*)(ScalarType dt, bool conj_x, int64_t n, const void* x, int64_t incx, const void* y,
                              int64_t incy, void* out);
STRATA_DECLARE_STUB(complex_dot_stub, ComplexDotFn);

// A device whose GEMM library takes tensors as they are (CUDA's cuBLAS: float16/bfloat16 operands and C directly,
// strided operands through its transpose flags): c = beta c + alpha a @ b with gemm_into's conventions (same
// number of batch dims, size-1 batch dims of a and b broadcast; reduce_batch as BatchedGemm's).
using TensorGemmFn = void (*)(const char* op, const Tensor& c, const Tensor& a, const Tensor& b, const Scalar& beta,
                              const Scalar& alpha, bool reduce_batch);
STRATA_DECLARE_STUB(tensor_gemm_stub, TensorGemmFn);

}  // namespace strata
