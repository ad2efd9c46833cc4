// cuBLAS as a table of function pointers, filled at first use either from libcublas.so.13 (dlopen, so that the build
// needs no CUDA headers) or from the fake cuBLAS (fake_cublas.cpp), which computes GEMMs on the fake driver's host
// memory in stream order, so that the GEMM path is tested on every machine.
//
// Note [cuBLAS selection]
// The table follows the driver (driver_api.h): with the fake driver it is the fake cuBLAS. Otherwise
// libcublasLt.so.13 and libcublas.so.13 are loaded from, in order: the directory in STRATA_CUBLAS_DIR, the
// directories the Python package named (set_cublas_search_dirs: the nvidia-cublas wheel's nvidia/cu13/lib or
// nvidia/cublas/lib under sys.path), and the dynamic linker's default search path. The first directory holding
// libcublas.so.13 wins; a library that loads but lacks a symbol makes the table unusable with a reason naming it.
// STRATA_CUBLAS=real loads the libraries even over the fake driver (for tests of this loader with stub libraries).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "backends/cuda/driver_api.h"

namespace strata::cuda {

using cublasHandle_t = struct cublasContext*;
using cublasStatus_t = int;

// cublasStatus_t values.
enum : cublasStatus_t {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_ARCH_MISMATCH = 8,
  CUBLAS_STATUS_MAPPING_ERROR = 11,
  CUBLAS_STATUS_EXECUTION_FAILED = 13,
  CUBLAS_STATUS_INTERNAL_ERROR = 14,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
};

// cublasOperation_t.
enum : int { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 };

// cudaDataType_t values of the element types Strata multiplies.
enum : int { CUDA_R_32F = 0, CUDA_R_64F = 1, CUDA_R_16F = 2, CUDA_R_16BF = 14 };

// cublasComputeType_t values.
enum : int {
  CUBLAS_COMPUTE_32F = 68,
  CUBLAS_COMPUTE_32F_PEDANTIC = 69,
  CUBLAS_COMPUTE_64F = 70,
  CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
};

// cublasMath_t and cublasGemmAlgo_t.
enum : int { CUBLAS_DEFAULT_MATH = 0, CUBLAS_TF32_TENSOR_OP_MATH = 3 };
constexpr int CUBLAS_GEMM_DEFAULT = -1;

// X(name, symbol, parameters): every function of the table (all return cublasStatus_t except where noted), with
// its symbol in libcublas.so.13 (the _v2 names cublas_v2.h's macros select).
#define STRATA_CUBLAS_FNS(X)                                                                                      \
  X(cublasCreate, "cublasCreate_v2", (cublasHandle_t * handle))                                                  \
  X(cublasDestroy, "cublasDestroy_v2", (cublasHandle_t handle))                                                  \
  X(cublasGetVersion, "cublasGetVersion_v2", (cublasHandle_t handle, int* version))                              \
  X(cublasSetStream, "cublasSetStream_v2", (cublasHandle_t handle, CUstream stream))                             \
  X(cublasSetWorkspace, "cublasSetWorkspace_v2", (cublasHandle_t handle, void* workspace, size_t bytes))         \
  X(cublasSetMathMode, "cublasSetMathMode", (cublasHandle_t handle, int mode))                                   \
  X(cublasGemmStridedBatchedEx, "cublasGemmStridedBatchedEx",                                                    \
    (cublasHandle_t handle, int transa, int transb, int m, int n, int k, const void* alpha, const void* A,        \
     int a_type, int lda, long long stride_a, const void* B, int b_type, int ldb, long long stride_b,            \
     const void* beta, void* C, int c_type, int ldc, long long stride_c, int batch_count, int compute_type,      \
     int algo))

// cuBLASLt: opaque handles and descriptors, the algorithm and heuristic-result structs with the library's layout,
// and the attributes Strata sets (cublasLt.h's values).
using cublasLtHandle_t = struct cublasLtContext*;
using cublasLtMatmulDesc_t = struct cublasLtMatmulDescOpaque*;
using cublasLtMatrixLayout_t = struct cublasLtMatrixLayoutOpaque*;
using cublasLtMatmulPreference_t = struct cublasLtMatmulPreferenceOpaque*;
struct cublasLtMatmulAlgo_t {
  uint64_t data[8];
};
struct cublasLtMatmulHeuristicResult_t {
  cublasLtMatmulAlgo_t algo;
  size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
};
enum : int {
  CUBLASLT_MATMUL_DESC_TRANSA = 3,       // int32 (cublasOperation_t)
  CUBLASLT_MATMUL_DESC_TRANSB = 4,       // int32
  CUBLASLT_MATMUL_DESC_EPILOGUE = 7,     // uint32
  CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8, // const void*
  CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,  // uint64
};
enum : uint32_t { CUBLASLT_EPILOGUE_DEFAULT = 1, CUBLASLT_EPILOGUE_BIAS = 4 };

// X(name, symbol, parameters) for libcublasLt.so.13.
#define STRATA_CUBLASLT_FNS(X)                                                                                    \
  X(cublasLtCreate, "cublasLtCreate", (cublasLtHandle_t * handle))                                               \
  X(cublasLtMatmulDescCreate, "cublasLtMatmulDescCreate",                                                        \
    (cublasLtMatmulDesc_t * desc, int compute_type, int scale_type))                                             \
  X(cublasLtMatmulDescDestroy, "cublasLtMatmulDescDestroy", (cublasLtMatmulDesc_t desc))                         \
  X(cublasLtMatmulDescSetAttribute, "cublasLtMatmulDescSetAttribute",                                            \
    (cublasLtMatmulDesc_t desc, int attr, const void* buf, size_t bytes))                                        \
  X(cublasLtMatrixLayoutCreate, "cublasLtMatrixLayoutCreate",                                                    \
    (cublasLtMatrixLayout_t * layout, int type, uint64_t rows, uint64_t cols, int64_t ld))                       \
  X(cublasLtMatrixLayoutDestroy, "cublasLtMatrixLayoutDestroy", (cublasLtMatrixLayout_t layout))                 \
  X(cublasLtMatmulPreferenceCreate, "cublasLtMatmulPreferenceCreate", (cublasLtMatmulPreference_t * pref))       \
  X(cublasLtMatmulPreferenceDestroy, "cublasLtMatmulPreferenceDestroy", (cublasLtMatmulPreference_t pref))       \
  X(cublasLtMatmulPreferenceSetAttribute, "cublasLtMatmulPreferenceSetAttribute",                                \
    (cublasLtMatmulPreference_t pref, int attr, const void* buf, size_t bytes))                                  \
  X(cublasLtMatmulAlgoGetHeuristic, "cublasLtMatmulAlgoGetHeuristic",                                            \
    (cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,     \
     cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d, cublasLtMatmulPreference_t pref, int requested,         \
     cublasLtMatmulHeuristicResult_t* results, int* returned))                                                   \
  X(cublasLtMatmul, "cublasLtMatmul",                                                                            \
    (cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* A,                       \
     cublasLtMatrixLayout_t a, const void* B, cublasLtMatrixLayout_t b, const void* beta, const void* C,         \
     cublasLtMatrixLayout_t c, void* D, cublasLtMatrixLayout_t d, const cublasLtMatmulAlgo_t* algo,              \
     void* workspace, size_t workspace_bytes, CUstream stream))

struct CublasApi {
#define STRATA_CUBLAS_FN_PTR(name, sym, params) cublasStatus_t(*name) params = nullptr;
  STRATA_CUBLAS_FNS(STRATA_CUBLAS_FN_PTR)
  STRATA_CUBLASLT_FNS(STRATA_CUBLAS_FN_PTR)
#undef STRATA_CUBLAS_FN_PTR
  bool lt_ok = false;     // every cuBLASLt function is there (else GEMMs with a bias take the cuBLAS path)
  std::string lt_reason;  // why lt_ok is false
  const char* (*cublasGetStatusString)(cublasStatus_t status) = nullptr;  // optional: names a status
  bool ok = false;
  bool is_fake = false;
  std::string reason;  // why ok is false
  std::string source;  // the path of libcublas.so.13 that was loaded, or "fake"
};

// The table, chosen and loaded at the first call (Note [cuBLAS selection]). Never null; check ok.
const CublasApi& cublas();

// Directories to try after STRATA_CUBLAS_DIR (the Python package sets them at import, from sys.path). Has effect
// only before the first cublas() call.
void set_cublas_search_dirs(std::vector<std::string> dirs);
// The directories tried, in order (for error messages and tests).
std::vector<std::string> cublas_search_dirs();

// "CUBLAS_STATUS_INVALID_VALUE" for a status.
std::string cublas_status_name(cublasStatus_t s);
// Throws strata::Error naming `what` and the status when s is not CUBLAS_STATUS_SUCCESS.
void cublas_check(cublasStatus_t s, const char* what);

// Whether float32 GEMMs may use TF32 tensor cores (strata.backends.cuda.matmul.allow_tf32; False by default, as
// torch's).
void set_allow_tf32(bool allow);
bool allow_tf32();

namespace fake {
// Fills `api` with the fake cuBLAS (fake_cublas.cpp).
void fill_cublas_table(CublasApi& api);
// The fake's own record of the last GEMM call's arguments (tests of the argument mapping).
struct GemmCall {
  int transa = 0, transb = 0, m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
  long long stride_a = 0, stride_b = 0, stride_c = 0;
  int batch = 0, a_type = 0, b_type = 0, c_type = 0, compute_type = 0;
  double alpha = 0, beta = 0;
  CUstream stream = nullptr;
};
GemmCall last_gemm_call();
int64_t gemm_calls();
// cublasLtMatmul calls so far, and those with the bias epilogue.
int64_t lt_matmul_calls();
int64_t lt_bias_calls();
}  // namespace fake

}  // namespace strata::cuda
