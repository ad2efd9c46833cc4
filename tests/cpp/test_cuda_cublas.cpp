// The fake cuBLAS (src/backends/cuda/fake_cublas.cpp) behind the cuBLAS table: its argument checks, its column-major
// GEMM with transposes, leading dimensions, batch strides, alpha/beta and compute types, and its stream order and
// memory checks on the fake driver. No GPU needed.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "backends/cuda/caching_allocator.h"
#include "backends/cuda/cublas_api.h"
#include "backends/cuda/cuda_runtime.h"
#include "backends/cuda/fake_driver.h"
#include "core/dtype.h"
#include "core/error.h"

using namespace strata;
using namespace strata::cuda;

namespace {

class CudaCublas : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(use_fake_driver()) << "another driver was loaded first";
    ASSERT_TRUE(available()) << unavailable_reason();
    set_device(0);
    fake::set_manual_progress(false);
    ASSERT_TRUE(cublas().ok && cublas().is_fake) << cublas().reason;
    ASSERT_EQ(cublas().cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cublas().cublasSetStream(h, current_stream(0).handle), CUBLAS_STATUS_SUCCESS);
  }
  void TearDown() override {
    fake::set_manual_progress(false);
    cublas().cublasDestroy(h);
  }
  // Device memory holding `v` (written with a synchronous copy).
  template <typename T>
  T* upload(const std::vector<T>& v) {
    CUdeviceptr p;
    EXPECT_EQ(driver().cuMemAlloc(&p, v.size() * sizeof(T)), CUDA_SUCCESS);
    EXPECT_EQ(driver().cuMemcpyHtoDAsync(p, v.data(), v.size() * sizeof(T), nullptr), CUDA_SUCCESS);
    current_stream(0).synchronize();
    allocs.push_back(p);
    return reinterpret_cast<T*>(p);
  }
  cublasHandle_t h = nullptr;
  std::vector<CUdeviceptr> allocs;
  ~CudaCublas() override {
    for (CUdeviceptr p : allocs) driver().cuMemFree(p);
  }
};

TEST_F(CudaCublas, ColumnMajorGemmWithTransposesAndLeadingDimensions) {
  // A is stored 3 x 2 with lda 4 (op T gives 2 x 3), B 3 x 2 with ldb 3 (op N), C 2 x 2 with ldc 3.
  std::vector<double> a{1, 2, 3, -1, 4, 5, 6, -1}, b{1, 0, 2, 0, 1, 1}, c{10, 20, -7, 30, 40, -7};
  double *A = upload(a), *B = upload(b), *C = upload(c);
  const double alpha = 2, beta = 0.5;
  ASSERT_EQ(cublas().cublasGemmStridedBatchedEx(h, CUBLAS_OP_T, CUBLAS_OP_N, 2, 2, 3, &alpha, A, CUDA_R_64F, 4, 0,
                                                B, CUDA_R_64F, 3, 0, &beta, C, CUDA_R_64F, 3, 0, 1,
                                                CUBLAS_COMPUTE_64F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_SUCCESS);
  // op(A) = [[1 2 3] [4 5 6]], op(B) = [[1 0] [0 1] [2 1]] (column-major B: columns (1,0,2), (0,1,1)).
  // op(A) op(B) = [[7 5] [16 11]]; C = 2 * that + 0.5 * C.
  current_stream(0).synchronize();
  std::vector<double> got(6);
  std::memcpy(got.data(), C, sizeof(double) * 6);
  EXPECT_EQ(got, (std::vector<double>{2 * 7 + 5, 2 * 16 + 10, -7, 2 * 5 + 15, 2 * 11 + 20, -7}));
}

TEST_F(CudaCublas, BatchStridesHalfOperandsAndStreamOrder) {
  fake::set_manual_progress(true);
  // Two batches of 1 x 1 x 2 (float16 in, float32 C): C_i = A_i . B (B broadcast with stride 0).
  std::vector<Half> a{Half(1.0f), Half(2.0f), Half(3.0f), Half(4.0f)}, b{Half(0.5f), Half(0.25f)};
  std::vector<float> c{-1, -1};
  Half *A = upload(a), *B = upload(b);
  float* C = upload(c);
  const float one = 1, zero = 0;
  const size_t before = fake::pending(current_stream(0).handle);
  ASSERT_EQ(cublas().cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 2, &one, A, CUDA_R_16F, 1, 2, B,
                                                CUDA_R_16F, 2, 0, &zero, C, CUDA_R_32F, 1, 1, 2, CUBLAS_COMPUTE_32F,
                                                CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(fake::pending(current_stream(0).handle), before + 1);
  EXPECT_EQ(C[0], -1.0f);  // queued, not run
  EXPECT_EQ(fake::run_pending(current_stream(0).handle), before + 1);
  EXPECT_EQ(C[0], 1.0f);
  EXPECT_EQ(C[1], 2.5f);
  fake::GemmCall g = fake::last_gemm_call();
  EXPECT_EQ(g.batch, 2);
  EXPECT_EQ(g.stride_a, 2);
  EXPECT_EQ(g.stride_b, 0);
  EXPECT_EQ(g.c_type, CUDA_R_32F);
}

TEST_F(CudaCublas, ArgumentChecksAsDocumented) {
  std::vector<float> v(16, 1.0f);
  float* P = upload(v);
  const float one = 1;
  auto gemm = [&](int ta, int m, int n, int k, int lda, int ldb, int ldc, int type, int compute) {
    return cublas().cublasGemmStridedBatchedEx(h, ta, CUBLAS_OP_N, m, n, k, &one, P, type, lda, 0, P, type, ldb, 0,
                                               &one, P, type, ldc, 0, 1, compute, CUBLAS_GEMM_DEFAULT);
  };
  EXPECT_EQ(gemm(CUBLAS_OP_N, 2, 2, 2, 2, 2, 2, CUDA_R_32F, CUBLAS_COMPUTE_32F), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(gemm(CUBLAS_OP_N, 3, 2, 2, 2, 2, 3, CUDA_R_32F, CUBLAS_COMPUTE_32F), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(gemm(CUBLAS_OP_T, 2, 2, 3, 2, 3, 2, CUDA_R_32F, CUBLAS_COMPUTE_32F), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(gemm(CUBLAS_OP_N, 2, 2, 2, 2, 2, 1, CUDA_R_32F, CUBLAS_COMPUTE_32F), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(gemm(CUBLAS_OP_N, -1, 2, 2, 2, 2, 2, CUDA_R_32F, CUBLAS_COMPUTE_32F), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(gemm(CUBLAS_OP_N, 2, 2, 2, 2, 2, 2, CUDA_R_32F, CUBLAS_COMPUTE_64F), CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(gemm(CUBLAS_OP_N, 2, 2, 2, 2, 2, 2, CUDA_R_16F, CUBLAS_COMPUTE_32F_FAST_TF32),
            CUBLAS_STATUS_NOT_SUPPORTED);
  // A range past the allocation is refused when queued.
  EXPECT_EQ(gemm(CUBLAS_OP_N, 4, 4, 4, 5, 4, 4, CUDA_R_32F, CUBLAS_COMPUTE_32F), CUBLAS_STATUS_INVALID_VALUE);
  current_stream(0).synchronize();
  EXPECT_THROW(cublas_check(CUBLAS_STATUS_NOT_SUPPORTED, "cublasGemmStridedBatchedEx"), Error);
  try {
    cublas_check(CUBLAS_STATUS_INVALID_VALUE, "cublasGemmStridedBatchedEx");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("CUBLAS_STATUS_INVALID_VALUE"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cublasGemmStridedBatchedEx"), std::string::npos) << e.what();
  }
}

TEST_F(CudaCublas, Tf32ComputeRoundsOperands) {
  std::vector<float> a{1.0f + 1.0f / (1 << 20), 1.0f}, b{1.0f, 1.0f}, c{0};
  float *A = upload(a), *B = upload(b), *C = upload(c);
  const float one = 1, zero = 0;
  for (int compute : {CUBLAS_COMPUTE_32F, CUBLAS_COMPUTE_32F_FAST_TF32}) {
    ASSERT_EQ(cublas().cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 2, &one, A, CUDA_R_32F, 1, 0, B,
                                                  CUDA_R_32F, 2, 0, &zero, C, CUDA_R_32F, 1, 0, 1, compute,
                                                  CUBLAS_GEMM_DEFAULT),
              CUBLAS_STATUS_SUCCESS);
    current_stream(0).synchronize();
    EXPECT_EQ(C[0], compute == CUBLAS_COMPUTE_32F ? 2.0f + 1.0f / (1 << 20) : 2.0f);
  }
}

TEST_F(CudaCublas, LtBiasEpilogueAndHeuristicRefusal) {
  const CublasApi& api = cublas();
  ASSERT_TRUE(api.lt_ok);
  cublasLtHandle_t lt;
  ASSERT_EQ(api.cublasLtCreate(&lt), CUBLAS_STATUS_SUCCESS);
  // D (2 x 2) = A (2 x 3, op N, lda 2) B (3 x 2, op N, ldb 3) + bias per row.
  std::vector<float> a{1, 4, 2, 5, 3, 6}, b{1, 0, 2, 0, 1, 1}, d{-1, -1, -1, -1}, bias{100, 200};
  float *A = upload(a), *B = upload(b), *D = upload(d), *Bias = upload(bias);
  cublasLtMatmulDesc_t desc;
  ASSERT_EQ(api.cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
  const uint32_t epi = CUBLASLT_EPILOGUE_BIAS;
  const void* bp = Bias;
  ASSERT_EQ(api.cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(api.cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof(bp)),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(api.cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, 2),
            CUBLAS_STATUS_INVALID_VALUE);
  cublasLtMatrixLayout_t la, lb, lc, bad;
  ASSERT_EQ(api.cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, 2, 3, 2), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(api.cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, 3, 2, 3), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(api.cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, 2, 2, 2), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(api.cublasLtMatrixLayoutCreate(&bad, CUDA_R_32F, 4, 2, 4), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulPreference_t pref;
  ASSERT_EQ(api.cublasLtMatmulPreferenceCreate(&pref), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulHeuristicResult_t r{};
  int found = -1;
  EXPECT_EQ(api.cublasLtMatmulAlgoGetHeuristic(lt, desc, la, bad, lc, lc, pref, 1, &r, &found),
            CUBLAS_STATUS_NOT_SUPPORTED);  // k of A (3) and of B (4) differ
  EXPECT_EQ(found, 0);
  ASSERT_EQ(api.cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, 1, &r, &found), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(found, 1);
  const float one = 1, zero = 0;
  const int64_t before = fake::lt_bias_calls();
  ASSERT_EQ(api.cublasLtMatmul(lt, desc, &one, A, la, B, lb, &zero, D, lc, D, lc, &r.algo, nullptr, 0,
                               current_stream(0).handle),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(fake::lt_bias_calls(), before + 1);
  current_stream(0).synchronize();
  // A = [[1 2 3] [4 5 6]], B columns (1,0,2), (0,1,1): A B = [[7 5] [16 11]]; + bias (100, 200) per row.
  EXPECT_EQ(std::vector<float>(D, D + 4), (std::vector<float>{107, 216, 105, 211}));
  for (auto l : {la, lb, lc, bad}) api.cublasLtMatrixLayoutDestroy(l);
  api.cublasLtMatmulPreferenceDestroy(pref);
  api.cublasLtMatmulDescDestroy(desc);
}

}  // namespace
