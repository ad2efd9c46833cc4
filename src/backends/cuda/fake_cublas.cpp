// The fake cuBLAS (Note [Fake cuBLAS]): the functions of cublas_api.h over the fake driver.
//
// Note [Fake cuBLAS]
// A handle records its stream, workspace and math mode. cublasGemmStridedBatchedEx checks its arguments as cuBLAS
// documents (sizes >= 0, leading dimensions at least the stored rows, the supported type combinations: 32F with a
// 32F, 32F_PEDANTIC or 32F_FAST_TF32 compute type, 64F with 64F, 16F/16BF operands with a 16F/16BF or 32F C and 32F
// compute), reads alpha and beta at the call (host pointer mode), and queues on the handle's stream the GEMM in
// column-major terms: C_i = alpha op(A_i) op(B_i) + beta C_i for i < batch, A_i = A + i stride_a, with the
// accumulation in the compute type (float for 32F, with both operands rounded to TF32's 10-bit mantissa for
// 32F_FAST_TF32; double for 64F). C is not read when beta is 0, as in cuBLAS. Device memory is host memory, so the
// work reads and writes the pointers directly, when the stream reaches it.
#include <cmath>
#include <cstring>
#include <mutex>

#include "backends/cuda/cublas_api.h"
#include "backends/cuda/fake_driver.h"
#include "core/dtype.h"

namespace strata::cuda::fake {

namespace {

struct FakeHandle {
  CUstream stream = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  int math_mode = CUBLAS_DEFAULT_MATH;
};

std::mutex g_mu;
GemmCall g_last;
int64_t g_calls = 0;

size_t type_size(int t) {
  switch (t) {
    case CUDA_R_32F: return 4;
    case CUDA_R_64F: return 8;
    case CUDA_R_16F:
    case CUDA_R_16BF: return 2;
    default: return 0;
  }
}

double load(const void* p, int t, int64_t i) {
  switch (t) {
    case CUDA_R_32F: return static_cast<const float*>(p)[i];
    case CUDA_R_64F: return static_cast<const double*>(p)[i];
    case CUDA_R_16F: return static_cast<float>(static_cast<const Half*>(p)[i]);
    default: return static_cast<float>(static_cast<const BFloat16*>(p)[i]);
  }
}

void store(void* p, int t, int64_t i, double v) {
  switch (t) {
    case CUDA_R_32F: static_cast<float*>(p)[i] = static_cast<float>(v); break;
    case CUDA_R_64F: static_cast<double*>(p)[i] = v; break;
    case CUDA_R_16F: static_cast<Half*>(p)[i] = Half(static_cast<float>(v)); break;
    default: static_cast<BFloat16*>(p)[i] = BFloat16(static_cast<float>(v)); break;
  }
}

// A float32 value rounded to TF32 (10 explicit mantissa bits, round to nearest even), as tensor cores read it.
float to_tf32(float x) {
  if (!std::isfinite(x)) return x;
  uint32_t b;
  std::memcpy(&b, &x, 4);
  b += 0xFFFu + ((b >> 13) & 1u);
  b &= ~0x1FFFu;
  std::memcpy(&x, &b, 4);
  return x;
}

bool supported(int at, int bt, int ct, int compute) {
  if (at != bt) return false;
  switch (at) {
    case CUDA_R_32F:
      return ct == CUDA_R_32F && (compute == CUBLAS_COMPUTE_32F || compute == CUBLAS_COMPUTE_32F_PEDANTIC ||
                                  compute == CUBLAS_COMPUTE_32F_FAST_TF32);
    case CUDA_R_64F: return ct == CUDA_R_64F && compute == CUBLAS_COMPUTE_64F;
    case CUDA_R_16F:
    case CUDA_R_16BF: return (ct == at || ct == CUDA_R_32F) && compute == CUBLAS_COMPUTE_32F;
    default: return false;
  }
}

cublasStatus_t f_cublasCreate(cublasHandle_t* h) {
  if (!h) return CUBLAS_STATUS_INVALID_VALUE;
  *h = reinterpret_cast<cublasHandle_t>(new FakeHandle());
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t f_cublasDestroy(cublasHandle_t h) {
  if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete reinterpret_cast<FakeHandle*>(h);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t f_cublasGetVersion(cublasHandle_t, int* v) {
  *v = 130100;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t f_cublasSetStream(cublasHandle_t h, CUstream s) {
  if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
  reinterpret_cast<FakeHandle*>(h)->stream = s;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t f_cublasSetWorkspace(cublasHandle_t h, void* w, size_t bytes) {
  if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (bytes > 0 && (!w || reinterpret_cast<uintptr_t>(w) % 256 != 0)) return CUBLAS_STATUS_INVALID_VALUE;
  auto* fh = reinterpret_cast<FakeHandle*>(h);
  fh->workspace = w;
  fh->workspace_bytes = bytes;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t f_cublasSetMathMode(cublasHandle_t h, int mode) {
  if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
  reinterpret_cast<FakeHandle*>(h)->math_mode = mode;
  return CUBLAS_STATUS_SUCCESS;
}

// Checks the leading dimensions and types of a column-major GEMM and queues it on `stream`: D_i = alpha op(A_i)
// op(B_i) + beta C_i (+ bias[row] when bias is set: cuBLASLt's bias epilogue, bias of D's type), D = C.
cublasStatus_t queue_gemm(CUstream stream, int transa, int transb, int m, int n, int k, double al, double be,
                          const void* A, int at, int lda, long long sa, const void* B, int bt, int ldb, long long sb,
                          void* C, int ct, int ldc, long long sc, int batch, int compute, const void* bias) {
  if (transa < 0 || transa > 2 || transb < 0 || transb > 2 || m < 0 || n < 0 || k < 0 || batch < 0 ||
      sa < 0 || sb < 0 || sc < 0)
    return CUBLAS_STATUS_INVALID_VALUE;
  const bool ta = transa != CUBLAS_OP_N, tb = transb != CUBLAS_OP_N;
  const int a_rows = ta ? k : m, a_cols = ta ? m : k, b_rows = tb ? n : k, b_cols = tb ? k : n;
  if (lda < std::max(1, a_rows) || ldb < std::max(1, b_rows) || ldc < std::max(1, m))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (!supported(at, bt, ct, compute)) return CUBLAS_STATUS_NOT_SUPPORTED;
  const bool f64 = compute == CUBLAS_COMPUTE_64F;
  if (m == 0 || n == 0 || batch == 0) return CUBLAS_STATUS_SUCCESS;
  const size_t es_a = type_size(at), es_b = type_size(bt), es_c = type_size(ct);
  auto span = [&](int rows, int cols, int ld, long long stride, size_t es) -> size_t {
    if (rows == 0 || cols == 0) return 0;
    return (static_cast<size_t>(batch - 1) * stride + static_cast<size_t>(cols - 1) * ld + rows) * es;
  };
  std::vector<std::pair<uintptr_t, size_t>> ranges{
      {reinterpret_cast<uintptr_t>(A), k ? span(a_rows, a_cols, lda, sa, es_a) : 0},
      {reinterpret_cast<uintptr_t>(B), k ? span(b_rows, b_cols, ldb, sb, es_b) : 0},
      {reinterpret_cast<uintptr_t>(C), span(m, n, ldc, sc, es_c)},
      {reinterpret_cast<uintptr_t>(bias), bias ? m * es_c : 0}};
  const bool tf32 = compute == CUBLAS_COMPUTE_32F_FAST_TF32;
  auto work = [=] {
    std::vector<double> acol(k), brow(k);
    for (int i = 0; i < batch; ++i) {
      const char* a = static_cast<const char*>(A) + static_cast<size_t>(i) * sa * es_a;
      const char* b = static_cast<const char*>(B) + static_cast<size_t>(i) * sb * es_b;
      char* c = static_cast<char*>(C) + static_cast<size_t>(i) * sc * es_c;
      for (int col = 0; col < n; ++col) {
        for (int p = 0; p < k; ++p) brow[p] = load(b, bt, tb ? col + static_cast<int64_t>(p) * ldb
                                                               : p + static_cast<int64_t>(col) * ldb);
        for (int row = 0; row < m; ++row) {
          const int64_t ci = row + static_cast<int64_t>(col) * ldc;
          double r;
          if (f64) {
            double acc = 0;
            for (int p = 0; p < k; ++p)
              acc += load(a, at, ta ? p + static_cast<int64_t>(row) * lda : row + static_cast<int64_t>(p) * lda) *
                     brow[p];
            r = al * acc + (be != 0 ? be * load(c, ct, ci) : 0.0);
          } else {
            float acc = 0;
            for (int p = 0; p < k; ++p) {
              float x = static_cast<float>(
                  load(a, at, ta ? p + static_cast<int64_t>(row) * lda : row + static_cast<int64_t>(p) * lda));
              float y = static_cast<float>(brow[p]);
              if (tf32) x = to_tf32(x), y = to_tf32(y);
              acc += x * y;
            }
            float rf = static_cast<float>(al) * acc;
            if (be != 0) rf += static_cast<float>(be) * static_cast<float>(load(c, ct, ci));
            r = rf;
          }
          if (bias) r = f64 ? r + load(bias, ct, row) : static_cast<float>(r) + static_cast<float>(load(bias, ct, row));
          store(c, ct, ci, r);
        }
      }
    }
  };
  CUresult r = enqueue_host_work(stream, std::move(ranges), std::move(work));
  return r == CUDA_SUCCESS ? CUBLAS_STATUS_SUCCESS
                           : (r == CUDA_ERROR_INVALID_VALUE ? CUBLAS_STATUS_INVALID_VALUE
                                                            : CUBLAS_STATUS_EXECUTION_FAILED);
}

cublasStatus_t f_cublasGemmStridedBatchedEx(cublasHandle_t h, int transa, int transb, int m, int n, int k,
                                            const void* alpha, const void* A, int at, int lda, long long sa,
                                            const void* B, int bt, int ldb, long long sb, const void* beta, void* C,
                                            int ct, int ldc, long long sc, int batch, int compute, int) {
  if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!alpha || !beta) return CUBLAS_STATUS_INVALID_VALUE;
  auto* fh = reinterpret_cast<FakeHandle*>(h);
  // Refused before alpha and beta are read: their type follows the compute type, which may not match the caller's.
  if (!supported(at, bt, ct, compute)) return CUBLAS_STATUS_NOT_SUPPORTED;
  const bool f64 = compute == CUBLAS_COMPUTE_64F;
  const double al = f64 ? *static_cast<const double*>(alpha) : *static_cast<const float*>(alpha);
  const double be = f64 ? *static_cast<const double*>(beta) : *static_cast<const float*>(beta);
  {
    std::lock_guard g(g_mu);
    g_last = GemmCall{transa, transb, m, n, k, lda, ldb, ldc, sa, sb, sc, batch, at, bt, ct, compute, al, be,
                      fh->stream};
    ++g_calls;
  }
  return queue_gemm(fh->stream, transa, transb, m, n, k, al, be, A, at, lda, sa, B, bt, ldb, sb, C, ct, ldc, sc,
                    batch, compute, nullptr);
}

// ---- cuBLASLt: descriptors are plain structs; one "algorithm" (the naive loop) ----------------------------------

struct LtDesc {
  int compute = 0, scale = 0, transa = CUBLAS_OP_N, transb = CUBLAS_OP_N;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
};
struct LtLayout {
  int type = 0;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
};
struct LtPref {
  uint64_t max_workspace = 0;
};
int64_t g_lt_calls = 0, g_lt_bias_calls = 0;

template <typename T>
bool read_attr(T* dst, const void* buf, size_t bytes) {
  if (!buf || bytes != sizeof(T)) return false;
  std::memcpy(dst, buf, sizeof(T));
  return true;
}

cublasStatus_t f_cublasLtCreate(cublasLtHandle_t* h) {
  if (!h) return CUBLAS_STATUS_INVALID_VALUE;
  *h = reinterpret_cast<cublasLtHandle_t>(new int(0));
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t f_cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* d, int compute, int scale) {
  auto* x = new LtDesc();
  x->compute = compute, x->scale = scale;
  *d = reinterpret_cast<cublasLtMatmulDesc_t>(x);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t f_cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
  delete reinterpret_cast<LtDesc*>(d);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t f_cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, int attr, const void* buf, size_t bytes) {
  auto* x = reinterpret_cast<LtDesc*>(d);
  bool ok = false;
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA: ok = read_attr(&x->transa, buf, bytes); break;
    case CUBLASLT_MATMUL_DESC_TRANSB: ok = read_attr(&x->transb, buf, bytes); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE: ok = read_attr(&x->epilogue, buf, bytes); break;
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: ok = read_attr(&x->bias, buf, bytes); break;
    default: break;
  }
  return ok ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}
cublasStatus_t f_cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* l, int type, uint64_t rows, uint64_t cols,
                                            int64_t ld) {
  if (type_size(type) == 0) return CUBLAS_STATUS_INVALID_VALUE;
  *l = reinterpret_cast<cublasLtMatrixLayout_t>(new LtLayout{type, rows, cols, ld});
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t f_cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
  delete reinterpret_cast<LtLayout*>(l);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t f_cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* p) {
  *p = reinterpret_cast<cublasLtMatmulPreference_t>(new LtPref());
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t f_cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
  delete reinterpret_cast<LtPref*>(p);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t f_cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p, int attr, const void* buf,
                                                      size_t bytes) {
  if (attr != CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES) return CUBLAS_STATUS_INVALID_VALUE;
  return read_attr(&reinterpret_cast<LtPref*>(p)->max_workspace, buf, bytes) ? CUBLAS_STATUS_SUCCESS
                                                                             : CUBLAS_STATUS_INVALID_VALUE;
}
// The problem's m, n, k from the layouts and transposes, or false when they do not fit together.
bool lt_shape(const LtDesc& d, const LtLayout& a, const LtLayout& b, const LtLayout& c, const LtLayout& dd, int* m,
              int* n, int* k) {
  const uint64_t am = d.transa == CUBLAS_OP_N ? a.rows : a.cols, ak = d.transa == CUBLAS_OP_N ? a.cols : a.rows;
  const uint64_t bk = d.transb == CUBLAS_OP_N ? b.rows : b.cols, bn = d.transb == CUBLAS_OP_N ? b.cols : b.rows;
  if (ak != bk || c.rows != am || c.cols != bn || dd.rows != c.rows || dd.cols != c.cols || dd.ld != c.ld ||
      dd.type != c.type)
    return false;
  *m = static_cast<int>(am), *n = static_cast<int>(bn), *k = static_cast<int>(ak);
  return true;
}
cublasStatus_t f_cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
                                                cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                                                cublasLtMatrixLayout_t d, cublasLtMatmulPreference_t,
                                                int requested, cublasLtMatmulHeuristicResult_t* results,
                                                int* returned) {
  if (requested < 1 || !results || !returned) return CUBLAS_STATUS_INVALID_VALUE;
  const auto& x = *reinterpret_cast<LtDesc*>(desc);
  const auto &la = *reinterpret_cast<LtLayout*>(a), &lb = *reinterpret_cast<LtLayout*>(b),
             &lc = *reinterpret_cast<LtLayout*>(c), &ld = *reinterpret_cast<LtLayout*>(d);
  int m, n, k;
  *returned = 0;
  if (!lt_shape(x, la, lb, lc, ld, &m, &n, &k) || !supported(la.type, lb.type, lc.type, x.compute))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  std::memset(&results[0], 0, sizeof(results[0]));
  results[0].algo.data[0] = 1;
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1;
  *returned = 1;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t f_cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t desc, const void* alpha, const void* A,
                                cublasLtMatrixLayout_t a, const void* B, cublasLtMatrixLayout_t b, const void* beta,
                                const void* C, cublasLtMatrixLayout_t c, void* D, cublasLtMatrixLayout_t d,
                                const cublasLtMatmulAlgo_t* algo, void*, size_t, CUstream stream) {
  if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!alpha || !beta || !algo || algo->data[0] != 1) return CUBLAS_STATUS_INVALID_VALUE;
  const auto& x = *reinterpret_cast<LtDesc*>(desc);
  const auto &la = *reinterpret_cast<LtLayout*>(a), &lb = *reinterpret_cast<LtLayout*>(b),
             &lc = *reinterpret_cast<LtLayout*>(c), &ld = *reinterpret_cast<LtLayout*>(d);
  int m, n, k;
  if (!lt_shape(x, la, lb, lc, ld, &m, &n, &k)) return CUBLAS_STATUS_INVALID_VALUE;
  const bool f64 = x.compute == CUBLAS_COMPUTE_64F;
  const double al = f64 ? *static_cast<const double*>(alpha) : *static_cast<const float*>(alpha);
  const double be = f64 ? *static_cast<const double*>(beta) : *static_cast<const float*>(beta);
  if (be != 0 && C != D) return CUBLAS_STATUS_NOT_SUPPORTED;  // the fake computes in place only
  const bool with_bias = x.epilogue == CUBLASLT_EPILOGUE_BIAS;
  if (with_bias && !x.bias) return CUBLAS_STATUS_INVALID_VALUE;
  if (x.epilogue != CUBLASLT_EPILOGUE_DEFAULT && !with_bias) return CUBLAS_STATUS_NOT_SUPPORTED;
  {
    std::lock_guard g(g_mu);
    ++g_lt_calls;
    if (with_bias) ++g_lt_bias_calls;
  }
  return queue_gemm(stream, x.transa, x.transb, m, n, k, al, be, A, la.type, static_cast<int>(la.ld), 0, B, lb.type,
                    static_cast<int>(lb.ld), 0, D, ld.type, static_cast<int>(ld.ld), 0, 1, x.compute,
                    with_bias ? x.bias : nullptr);
}

const char* f_cublasGetStatusString(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "the operation completed successfully";
    case CUBLAS_STATUS_INVALID_VALUE: return "an unsupported value or parameter was passed to the function";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    default: return "unknown error";
  }
}

}  // namespace

void fill_cublas_table(CublasApi& api) {
#define STRATA_FAKE_CUBLAS_FN(name, sym, params) api.name = &f_##name;
  STRATA_CUBLAS_FNS(STRATA_FAKE_CUBLAS_FN)
  STRATA_CUBLASLT_FNS(STRATA_FAKE_CUBLAS_FN)
#undef STRATA_FAKE_CUBLAS_FN
  api.cublasGetStatusString = &f_cublasGetStatusString;
  api.is_fake = true;
  api.ok = true;
  api.lt_ok = true;
  api.source = "fake";
}

GemmCall last_gemm_call() {
  std::lock_guard g(g_mu);
  return g_last;
}
int64_t gemm_calls() {
  std::lock_guard g(g_mu);
  return g_calls;
}
int64_t lt_matmul_calls() {
  std::lock_guard g(g_mu);
  return g_lt_calls;
}
int64_t lt_bias_calls() {
  std::lock_guard g(g_mu);
  return g_lt_bias_calls;
}

}  // namespace strata::cuda::fake
