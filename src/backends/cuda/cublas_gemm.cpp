// Matrix products on CUDA tensors through cuBLAS (cublas_api.h): the CUDA GEMM behind linalg.cpp's gemm_into
// (tensor_gemm_stub), cuBLAS handles and workspaces, and the CUDA kernels of mm, bmm, addmm, baddbmm, addbmm, mv,
// addmv, dot, vdot, matmul and linear.
//
// Note [Row-major GEMMs through cuBLAS]
// cuBLAS is column-major. A row-major m x n C with unit column stride is, read column-major, the n x m matrix C^T
// with leading dimension C's row stride, and C^T = B^T A^T, so Strata calls cublasGemm(n, m, k, B, A, C). Each
// operand is passed as it lies: a matrix with unit column stride (row-major) is its own transpose read
// column-major (op N, ld = row stride); one with unit row stride (column-major, e.g. a .t() view) is read with
// op T (ld = column stride). A C with unit row stride instead turns the problem around (C^T = B^T A^T with every
// matrix transposed). Only an operand with no unit stride (a slice with a step, an expanded view) is copied to a
// contiguous tensor first; a C with none is computed into a contiguous tensor and copied back. Size-1 dimensions
// have any stride, so their leading dimension is taken as the smallest one cuBLAS accepts.
// Batches: batch dims that collapse into one strided batch (for A, B and C alike; broadcast ones have stride 0)
// become one cublasGemmStridedBatchedEx; the rest are a loop of such calls. addbmm (every batch adds into the same
// C) is a loop of single GEMMs in stream order.
// Types: float32 (compute 32F, or 32F_FAST_TF32 when strata.backends.cuda.matmul.allow_tf32), float64 (64F),
// float16 and bfloat16 (operands and C in their type, compute 32F: float32 accumulation, as torch).
//
// Note [cuBLAS handles]
// One handle per (device, thread), taken from a per-device pool and returned to it when the thread ends (never
// destroyed: a handle outlives the threads that used it, as in torch); cuBLASLt handles likewise. Each call sets the handle's stream to the
// device's current stream and its workspace to the one of that (handle, stream), allocated once from the caching
// allocator on that stream, so that the allocator's stream-ordered reuse covers it. Workspace size: the sum of
// the SIZE_KiB:COUNT pairs of CUBLAS_WORKSPACE_CONFIG (":4096:8" = 32 MiB), else 32 MiB on compute capability 9.0
// and up and 8 MiB + 128 KiB below (torch's defaults).
#include <climits>
#include <cstdlib>
#include <map>
#include <mutex>

#include "backends/cuda/caching_allocator.h"
#include "backends/cuda/cublas_api.h"
#include "backends/cuda/cuda_runtime.h"
#include "dispatch/dispatcher.h"
#include "ops/api/core.h"
#include "ops/linalg_kernel.h"
#include "ops/op_list.h"
#include "ops/ops.h"

namespace strata::cuda {

namespace {

using OptT = std::optional<Tensor>;

// ---- handles and workspaces (Note [cuBLAS handles]) ----------------------------------------------------------

size_t workspace_bytes(int device) {
  if (const char* e = std::getenv("CUBLAS_WORKSPACE_CONFIG"); e && *e) {
    size_t total = 0;
    const char* p = e;
    while (*p == ':') {
      char* end;
      unsigned long long kib = std::strtoull(p + 1, &end, 10);
      if (end == p + 1 || *end != ':') break;
      p = end;
      unsigned long long count = std::strtoull(p + 1, &end, 10);
      if (end == p + 1) break;
      total += static_cast<size_t>(kib) * 1024 * count;
      p = end;
    }
    if (total > 0) return total;
  }
  return device_properties(device).major >= 9 ? size_t(32) << 20 : (size_t(8) << 20) + (size_t(128) << 10);
}

struct HandleState {
  std::mutex mu;
  std::map<int, std::vector<cublasHandle_t>> free_handles;            // per device
  std::map<int, std::vector<cublasLtHandle_t>> free_lt_handles;       // per device
  std::map<std::pair<cublasHandle_t, CUstream>, DataPtr> workspaces;  // per (handle, stream)
};
HandleState& handle_state() {
  static auto* s = new HandleState();  // outlives static destructors: handles are never destroyed
  return *s;
}

struct ThreadHandles {
  std::map<int, cublasHandle_t> by_device;
  std::map<int, cublasLtHandle_t> lt_by_device;
  ~ThreadHandles() {
    HandleState& st = handle_state();
    std::lock_guard g(st.mu);
    for (auto& [dev, h] : by_device) st.free_handles[dev].push_back(h);
    for (auto& [dev, h] : lt_by_device) st.free_lt_handles[dev].push_back(h);
  }
};
thread_local ThreadHandles t_handles;

// This thread's cuBLASLt handle for `device` (current), from the same kind of pool.
cublasLtHandle_t lt_handle_for(int device) {
  if (auto it = t_handles.lt_by_device.find(device); it != t_handles.lt_by_device.end()) return it->second;
  HandleState& st = handle_state();
  cublasLtHandle_t h = nullptr;
  {
    std::lock_guard g(st.mu);
    auto& pool = st.free_lt_handles[device];
    if (!pool.empty()) h = pool.back(), pool.pop_back();
  }
  if (!h) cublas_check(cublas().cublasLtCreate(&h), "cublasLtCreate");
  t_handles.lt_by_device[device] = h;
  return h;
}

// The handle of this thread for `device` (current), set to stream `s` with its workspace (also returned, for
// cuBLASLt, which takes it per call).
cublasHandle_t handle_for(int device, const Stream& s, void** workspace = nullptr, size_t* workspace_size = nullptr) {
  const CublasApi& api = cublas();
  STRATA_CHECK(api.ok, "cuBLAS is not available: ", api.reason);
  ThreadHandles& mine = t_handles;
  HandleState& st = handle_state();
  cublasHandle_t h = nullptr;
  if (auto it = mine.by_device.find(device); it != mine.by_device.end()) {
    h = it->second;
  } else {
    {
      std::lock_guard g(st.mu);
      auto& pool = st.free_handles[device];
      if (!pool.empty()) h = pool.back(), pool.pop_back();
    }
    if (!h) cublas_check(api.cublasCreate(&h), "cublasCreate(handle)");
    mine.by_device[device] = h;
  }
  cublas_check(api.cublasSetStream(h, s.handle), "cublasSetStream(handle, stream)");
  void* ws = nullptr;
  size_t bytes = workspace_bytes(device);
  {
    std::lock_guard g(st.mu);
    auto key = std::make_pair(h, s.handle);
    auto it = st.workspaces.find(key);
    if (it == st.workspaces.end())
      it = st.workspaces.emplace(key, caching_allocator().allocate_on(bytes, device, s)).first;
    ws = it->second.get();
  }
  cublas_check(api.cublasSetWorkspace(h, ws, bytes), "cublasSetWorkspace(handle, workspace, bytes)");
  if (workspace) *workspace = ws, *workspace_size = bytes;
  cublas_check(api.cublasSetMathMode(h, allow_tf32() ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
               "cublasSetMathMode(handle, mode)");
  return h;
}

// ---- the GEMM (Note [Row-major GEMMs through cuBLAS]) --------------------------------------------------------

// One matrix operand: its last two dims as rows x cols with element strides, plus its batch strides.
struct Mat {
  Tensor t;  // keeps the memory alive
  char* ptr = nullptr;
  int64_t rows = 0, cols = 0, rs = 0, cs = 0;
  DimVector bs;
  bool flipped = false;  // transposed from t's own last two dims

  void transpose() { std::swap(rows, cols), std::swap(rs, cs), flipped = !flipped; }
  // Unit column stride (read by cuBLAS as op N of its transpose), with ld.
  bool row_major(int64_t* ld) const {
    if ((cs == 1 || cols <= 1) && (rows <= 1 || rs >= std::max<int64_t>(1, cols))) {
      *ld = rows <= 1 ? std::max<int64_t>(1, cols) : rs;
      return true;
    }
    return false;
  }
  bool col_major(int64_t* ld) const {
    if ((rs == 1 || rows <= 1) && (cols <= 1 || cs >= std::max<int64_t>(1, rows))) {
      *ld = cols <= 1 ? std::max<int64_t>(1, rows) : cs;
      return true;
    }
    return false;
  }
};

Mat make_mat(const Tensor& t, const DimVector& batch, bool broadcast_batch) {
  Mat m;
  m.t = t;
  m.ptr = static_cast<char*>(t.data_ptr());
  m.rows = t.size(-2), m.cols = t.size(-1), m.rs = t.stride(-2), m.cs = t.stride(-1);
  for (size_t d = 0; d < batch.size(); ++d) {
    const int64_t sz = t.size(static_cast<int64_t>(d));
    m.bs.push_back(broadcast_batch || (sz == 1 && batch[d] != 1) ? 0 : t.stride(static_cast<int64_t>(d)));
  }
  return m;
}

int cuda_type(ScalarType dt) {
  switch (dt) {
    case ScalarType::Float32: return CUDA_R_32F;
    case ScalarType::Float64: return CUDA_R_64F;
    case ScalarType::Float16: return CUDA_R_16F;
    default: return CUDA_R_16BF;
  }
}

int to_int(const char* op, const char* what, int64_t v) {
  STRATA_CHECK(v <= INT_MAX, op, ": ", what, " = ", v, " is too large for cuBLAS's 32-bit arguments");
  return static_cast<int>(v);
}

void cuda_gemm(const char* op, const Tensor& c_in, const Tensor& a_in, const Tensor& b_in, const Scalar& beta,
               const Scalar& alpha, bool reduce_batch) {
  const ScalarType dt = c_in.dtype();
  STRATA_CHECK_T(NotImplementedError,
                 dt == ScalarType::Float32 || dt == ScalarType::Float64 || dt == ScalarType::Float16 ||
                     dt == ScalarType::BFloat16,
                 "\"", op, "_cuda\" not implemented for '", scalar_type_name(dt),
                 "' (Strata's CUDA matrix products take float32, float64, float16 and bfloat16)");
  STRATA_CHECK(a_in.dtype() == dt && b_in.dtype() == dt, op, ": expected operands of dtype ", dtype_name(dt),
               ", but got ", dtype_name(a_in.dtype()), " and ", dtype_name(b_in.dtype()));
  if (c_in.numel() == 0) return;
  const int dev = c_in.device().index;
  DeviceGuard guard(dev);

  // Batch shape: C's (A's for addbmm, whose C has none).
  const int64_t nb = a_in.dim() - 2;
  DimVector batch;
  for (int64_t d = 0; d < nb; ++d) batch.push_back(reduce_batch ? a_in.size(d) : c_in.size(d));

  // C with a unit stride, else a contiguous stand-in copied back at the end.
  Tensor c = c_in;
  const bool read_c = beta.to_double() != 0.0;
  Mat cm = make_mat(c, batch, reduce_batch);
  int64_t ld_probe;
  const bool c_direct = cm.row_major(&ld_probe) || cm.col_major(&ld_probe);
  if (!c_direct) {
    c = empty_tensor(c_in.sizes(), dt, c_in.device());
    if (read_c) copy_(c, c_in, false);
    cm = make_mat(c, batch, reduce_batch);
  }
  Mat am = make_mat(a_in, batch, false), bm = make_mat(b_in, batch, false);
  // C column-major: compute C^T = B^T A^T instead (Note [Row-major GEMMs through cuBLAS]).
  if (!cm.row_major(&ld_probe)) {
    cm.transpose(), am.transpose(), bm.transpose();
    std::swap(am, bm);
  }
  int64_t ldc = 0;
  cm.row_major(&ldc);
  // cuBLAS's first operand is B (op N when row-major), its second A.
  auto prepare = [&](Mat& x, const char* name, int64_t* ld) -> int {
    if (x.row_major(ld)) return CUBLAS_OP_N;
    if (x.col_major(ld)) return CUBLAS_OP_T;
    // No unit stride: a contiguous copy (of the matrix as the caller gave it, transposed back if needed).
    const bool transposed = x.flipped;
    Tensor cont = contiguous(x.t);
    Mat y = make_mat(cont, batch, false);
    if (transposed) y.transpose();
    x = y;
    (void)name;
    if (x.row_major(ld)) return CUBLAS_OP_N;
    STRATA_CHECK(x.col_major(ld), "internal error: ", name, " of ", op, " has no unit stride after a copy");
    return CUBLAS_OP_T;
  };
  int64_t ldb = 0, lda = 0;
  const int opb = prepare(bm, "mat2", &ldb);
  const int opa = prepare(am, "mat1", &lda);

  // Collapse the batch dims (Note [Row-major GEMMs through cuBLAS]): drop size-1 dims, merge neighbours that
  // step alike in A, B and C.
  std::vector<int64_t> sizes, sa, sb, sc;
  for (size_t d = 0; d < batch.size(); ++d) {
    if (batch[d] == 1) continue;
    if (!sizes.empty() && sa.back() == am.bs[d] * batch[d] && sb.back() == bm.bs[d] * batch[d] &&
        sc.back() == cm.bs[d] * batch[d]) {
      sizes.back() *= batch[d];
      sa.back() = am.bs[d], sb.back() = bm.bs[d], sc.back() = cm.bs[d];
      continue;
    }
    sizes.push_back(batch[d]), sa.push_back(am.bs[d]), sb.push_back(bm.bs[d]), sc.push_back(cm.bs[d]);
  }
  if (sizes.empty()) sizes.push_back(1), sa.push_back(0), sb.push_back(0), sc.push_back(0);

  const int compute = dt == ScalarType::Float64 ? CUBLAS_COMPUTE_64F
                      : (dt == ScalarType::Float32 && allow_tf32()) ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                                      : CUBLAS_COMPUTE_32F;
  const int type = cuda_type(dt);
  const size_t es = c.element_size();
  const int m = to_int(op, "n", cm.cols), n = to_int(op, "m", cm.rows);
  int k = to_int(op, "k", am.cols);
  const int ilda = to_int(op, "lda", lda), ildb = to_int(op, "ldb", ldb), ildc = to_int(op, "ldc", ldc);
  const double al = alpha.to_double(), be = read_c ? beta.to_double() : 0.0;
  const float alf = static_cast<float>(al), bef = static_cast<float>(be);
  const double one_d = 1.0;
  const float one_f = 1.0f;
  const bool f64 = compute == CUBLAS_COMPUTE_64F;

  const Stream s = current_stream(dev);
  cublasHandle_t h = handle_for(dev, s);
  const CublasApi& api = cublas();
  auto call = [&](int64_t off_a, int64_t off_b, int64_t off_c, int64_t count, int64_t stride_a, int64_t stride_b,
                  int64_t stride_c, bool first) {
    const void* pa = (first || !reduce_batch) ? (f64 ? static_cast<const void*>(&be) : &bef)
                                              : (f64 ? static_cast<const void*>(&one_d) : &one_f);
    cublas_check(api.cublasGemmStridedBatchedEx(
                     h, opb, opa, m, n, k, f64 ? static_cast<const void*>(&al) : &alf, bm.ptr + off_b * es, type,
                     ildb, stride_b, am.ptr + off_a * es, type, ilda, stride_a, pa, cm.ptr + off_c * es, type, ildc,
                     stride_c, to_int(op, "batch", count), compute, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmStridedBatchedEx");
  };
  if (reduce_batch) {
    // Every batch adds into the one C, in stream order: first with beta, then with 1.
    int64_t total = 1;
    for (int64_t v : sizes) total *= v;
    if (total == 0) {  // no batch: C = beta C, a GEMM with k = 0 (which reads neither A nor B)
      k = 0;
      call(0, 0, 0, 1, 0, 0, 0, true);
    }
    std::vector<int64_t> idx(sizes.size(), 0);
    for (int64_t i = 0; i < total; ++i) {
      int64_t oa = 0, ob = 0;
      for (size_t d = 0; d < sizes.size(); ++d) oa += idx[d] * sa[d], ob += idx[d] * sb[d];
      call(oa, ob, 0, 1, 0, 0, 0, i == 0);
      for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
        if (++idx[d] < sizes[d]) break;
        idx[d] = 0;
      }
    }
  } else {
    // The innermost batch dim is one strided call; the outer ones loop.
    const size_t last = sizes.size() - 1;
    int64_t outer = 1;
    for (size_t d = 0; d < last; ++d) outer *= sizes[d];
    std::vector<int64_t> idx(last, 0);
    for (int64_t i = 0; i < outer; ++i) {
      int64_t oa = 0, ob = 0, oc = 0;
      for (size_t d = 0; d < last; ++d) oa += idx[d] * sa[d], ob += idx[d] * sb[d], oc += idx[d] * sc[d];
      call(oa, ob, oc, sizes[last], sa[last], sb[last], sc[last], true);
      for (int64_t d = static_cast<int64_t>(last) - 1; d >= 0; --d) {
        if (++idx[d] < sizes[d]) break;
        idx[d] = 0;
      }
    }
  }
  if (!c_direct) copy_(c_in, c, false);
}

const StubRegistrar<TensorGemmFn> g_gemm_reg(tensor_gemm_stub, DeviceType::CUDA, &cuda_gemm);

// Note [cuBLASLt bias epilogue]
// y (rows x n, unit column stride) = alpha x (rows x k) @ w (k x n) + bias (n, unit stride): one cublasLtMatmul
// with CUBLASLT_EPILOGUE_BIAS (the bias is added per row of cuBLAS's column-major D = y^T, i.e. per output
// feature), as torch does for addmm/linear with a 1-D bias. Returns false, having queued nothing, where cuBLASLt is
// missing, an operand has no unit stride, or the heuristic offers no algorithm; the caller then takes the cuBLAS
// path, as do operands not 16-byte aligned (views at odd offsets). Descriptors are created per call (host-side
// only).
bool lt_bias_gemm(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& bias, const Scalar& alpha) {
  const CublasApi& api = cublas();
  const ScalarType dt = y.dtype();
  // Degenerate sizes (a single row, column or k = 1) stay with cuBLAS, as torch keeps them off cuBLASLt.
  if (!api.ok || !api.lt_ok || y.size(0) <= 1 || y.size(1) <= 1 || x.size(1) <= 1 || bias.stride(0) != 1 ||
      y.stride(1) != 1 ||
      !(dt == ScalarType::Float32 || dt == ScalarType::Float64 || dt == ScalarType::Float16 ||
        dt == ScalarType::BFloat16) ||
      x.dtype() != dt || w.dtype() != dt || bias.dtype() != dt)
    return false;
  // cuBLASLt's heuristics assume 16-byte aligned pointers unless told otherwise: views at odd offsets take the
  // cuBLAS path.
  for (const Tensor* t : {&y, &x, &w, &bias})
    if (reinterpret_cast<uintptr_t>(t->data_ptr()) % 16 != 0) return false;
  Mat xm = make_mat(x, {}, false), wm = make_mat(w, {}, false), ym = make_mat(y, {}, false);
  int64_t ldx, ldw, ldy;
  if (!ym.row_major(&ldy)) return false;
  const int opw = wm.row_major(&ldw) ? CUBLAS_OP_N : wm.col_major(&ldw) ? CUBLAS_OP_T : -1;
  const int opx = xm.row_major(&ldx) ? CUBLAS_OP_N : xm.col_major(&ldx) ? CUBLAS_OP_T : -1;
  if (opw < 0 || opx < 0 || std::max({ym.rows, ym.cols, xm.cols, ldx, ldw, ldy}) > INT_MAX) return false;
  const int dev = y.device().index;
  DeviceGuard guard(dev);
  const Stream s = current_stream(dev);
  void* ws = nullptr;
  size_t ws_bytes = 0;
  handle_for(dev, s, &ws, &ws_bytes);  // the workspace of this (thread, stream)
  cublasLtHandle_t lt = lt_handle_for(dev);
  const int type = cuda_type(dt);
  const int compute = dt == ScalarType::Float64 ? CUBLAS_COMPUTE_64F
                      : (dt == ScalarType::Float32 && allow_tf32()) ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                                      : CUBLAS_COMPUTE_32F;
  const int scale = dt == ScalarType::Float64 ? CUDA_R_64F : CUDA_R_32F;
  // Column-major: D (n x rows) = op(W') (n x k) op(X') (k x rows); W' is w as it lies (op N: stored n x k).
  const uint64_t n = ym.cols, rows = ym.rows, k = xm.cols;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  struct Cleanup {
    const CublasApi& api;
    cublasLtMatmulDesc_t& d;
    cublasLtMatrixLayout_t &a, &b, &c;
    cublasLtMatmulPreference_t& p;
    ~Cleanup() {
      if (p) api.cublasLtMatmulPreferenceDestroy(p);
      for (cublasLtMatrixLayout_t l : {a, b, c})
        if (l) api.cublasLtMatrixLayoutDestroy(l);
      if (d) api.cublasLtMatmulDescDestroy(d);
    }
  } cleanup{api, desc, la, lb, lc, pref};
  const uint32_t epilogue = CUBLASLT_EPILOGUE_BIAS;
  const void* bias_ptr = bias.data_ptr();
  const uint64_t max_ws = ws_bytes;
  cublas_check(api.cublasLtMatmulDescCreate(&desc, compute, scale), "cublasLtMatmulDescCreate");
  cublas_check(api.cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opw, sizeof(opw)),
               "cublasLtMatmulDescSetAttribute(TRANSA)");
  cublas_check(api.cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opx, sizeof(opx)),
               "cublasLtMatmulDescSetAttribute(TRANSB)");
  cublas_check(api.cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)),
               "cublasLtMatmulDescSetAttribute(EPILOGUE)");
  cublas_check(api.cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_ptr,
                                                  sizeof(bias_ptr)),
               "cublasLtMatmulDescSetAttribute(BIAS_POINTER)");
  cublas_check(api.cublasLtMatrixLayoutCreate(&la, type, opw == CUBLAS_OP_N ? n : k, opw == CUBLAS_OP_N ? k : n, ldw),
               "cublasLtMatrixLayoutCreate(A)");
  cublas_check(api.cublasLtMatrixLayoutCreate(&lb, type, opx == CUBLAS_OP_N ? k : rows, opx == CUBLAS_OP_N ? rows : k,
                                              ldx),
               "cublasLtMatrixLayoutCreate(B)");
  cublas_check(api.cublasLtMatrixLayoutCreate(&lc, type, n, rows, ldy), "cublasLtMatrixLayoutCreate(C)");
  cublas_check(api.cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  cublas_check(api.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_ws,
                                                        sizeof(max_ws)),
               "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)");
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  if (api.cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, 1, &result, &found) !=
          CUBLAS_STATUS_SUCCESS ||
      found < 1)
    return false;
  const double al = alpha.to_double(), zero_d = 0.0;
  const float alf = static_cast<float>(al), zero_f = 0.0f;
  const bool f64 = scale == CUDA_R_64F;
  cublas_check(api.cublasLtMatmul(lt, desc, f64 ? static_cast<const void*>(&al) : &alf, w.data_ptr(), la,
                                  x.data_ptr(), lb, f64 ? static_cast<const void*>(&zero_d) : &zero_f, y.data_ptr(),
                                  lc, y.data_ptr(), lc, &result.algo, ws, ws_bytes, s.handle),
               "cublasLtMatmul");
  return true;
}

// ---- the ops' CUDA kernels --------------------------------------------------------------------------------------

std::string describe(const Tensor& t) {
  return std::string(dtype_name(t.dtype())) + t.shape_str() + " on " + t.device().str();
}

// torch's check: every tensor on the same CUDA device, else name the first that is not, and (beyond torch) every
// operand's dtype, shape and device.
void check_devices(const char* op, std::initializer_list<std::pair<const char*, const Tensor*>> ts) {
  const Tensor* first = nullptr;
  for (auto& [name, t] : ts) {
    if (!t || !t->defined()) continue;
    if (!first) {
      first = t;
      continue;
    }
    if (t->device() == first->device() && t->device().type == DeviceType::CUDA) continue;
    std::string all;
    for (auto& [n2, t2] : ts)
      if (t2 && t2->defined()) all += (all.empty() ? "" : ", ") + std::string(n2) + ": " + describe(*t2);
    STRATA_CHECK(false, "Expected all tensors to be on the same device, but got ", name, " is on ",
                 t->device().str(), ", different from other tensors on ", first->device().str(),
                 " (when checking argument in method wrapper_CUDA_", op, "); ", op, " got ", all);
  }
}

// The device-generic implementation registered for the CPU (linalg.cpp), which reaches cuda_gemm through
// tensor_gemm_stub.
template <typename Fn>
Fn cpu_impl(OpId id) {
  const OperatorEntry* e = Dispatcher::get().find(op_entry_name(id));
  STRATA_CHECK(e && e->kernel_for(DispatchKey::CPU).unboxed, "internal error: ", op_entry_name(id),
               " has no CPU kernel to share with CUDA");
  return reinterpret_cast<Fn>(e->kernel_for(DispatchKey::CPU).unboxed);
}
using Fn2 = Tensor (*)(DispatchKeySet, const Tensor&, const Tensor&, const OptT&);
using Fn3 = Tensor (*)(DispatchKeySet, const Tensor&, const Tensor&, const Tensor&, const Scalar&, const Scalar&,
                       const OptT&);

#define STRATA_CUDA_BINARY(opname, n1, n2)                                                                  \
  Tensor opname##_cuda(const Tensor& a, const Tensor& b, const OptT& out) {                                \
    check_devices(#opname, {{n1, &a}, {n2, &b}, {"out", out ? &*out : nullptr}});                         \
    static const Fn2 impl = cpu_impl<Fn2>(OpId::opname);                                                    \
    return impl(DispatchKeySet(), a, b, out);                                                               \
  }                                                                                                         \
  STRATA_IMPL(opname, CUDA, opname##_cuda)

STRATA_CUDA_BINARY(mm, "self", "mat2");
STRATA_CUDA_BINARY(bmm, "self", "mat2");
STRATA_CUDA_BINARY(mv, "self", "vec");
STRATA_CUDA_BINARY(dot, "self", "tensor");
STRATA_CUDA_BINARY(vdot, "self", "other");
STRATA_CUDA_BINARY(matmul, "self", "other");
#undef STRATA_CUDA_BINARY

// A tensor of ones on the device (written from the host without waiting: the driver stages pageable memory).
Tensor device_ones(int64_t n, ScalarType dt, Device d) {
  Tensor host = ones(std::vector<int64_t>{n, 1}, dt, Device());
  Tensor o = empty_tensor(std::vector<int64_t>{n, 1}, dt, d);
  copy_(o, host, true);
  return o;
}

// rows x n filled with scale * bias (bias of n elements, any stride) by a rank-1 GEMM (ones @ bias): a bias
// broadcast that stays on the device, where a broadcasting copy would go through the host.
Tensor broadcast_bias(const Tensor& bias, int64_t rows, int64_t n, const Scalar& scale) {
  Tensor c = empty_tensor(std::vector<int64_t>{rows, n}, bias.dtype(), bias.device());
  Tensor b = make_view(bias, DimVector{1, n}, DimVector{n * bias.stride(-1), bias.stride(-1)}, bias.storage_offset());
  cuda_gemm("addmm", c, device_ones(rows, bias.dtype(), bias.device()), b, Scalar(0.0), scale, false);
  return c;
}

bool row_bias(const Tensor& self, int64_t n) {
  return (self.dim() == 1 && self.size(0) == n) || (self.dim() == 2 && self.size(0) == 1 && self.size(1) == n);
}

#define STRATA_CUDA_ADD_PRODUCT(opname, n1, n2)                                                                   \
  Tensor opname##_cuda(const Tensor& self, const Tensor& x, const Tensor& y, const Scalar& beta,                 \
                       const Scalar& alpha, const OptT& out) {                                                    \
    check_devices(#opname, {{"self", &self}, {n1, &x}, {n2, &y}, {"out", out ? &*out : nullptr}});              \
    static const Fn3 impl = cpu_impl<Fn3>(OpId::opname);                                                          \
    return impl(DispatchKeySet(), self, x, y, beta, alpha, out);                                                  \
  }                                                                                                               \
  STRATA_IMPL(opname, CUDA, opname##_cuda)

STRATA_CUDA_ADD_PRODUCT(baddbmm, "batch1", "batch2");
STRATA_CUDA_ADD_PRODUCT(addbmm, "batch1", "batch2");
STRATA_CUDA_ADD_PRODUCT(addmv, "mat", "vec");
#undef STRATA_CUDA_ADD_PRODUCT

Tensor addmm_cuda(const Tensor& self, const Tensor& mat1, const Tensor& mat2, const Scalar& beta,
                  const Scalar& alpha, const OptT& out) {
  check_devices("addmm", {{"self", &self}, {"mat1", &mat1}, {"mat2", &mat2}, {"out", out ? &*out : nullptr}});
  static const Fn3 impl = cpu_impl<Fn3>(OpId::addmm);
  // A row bias (the nn.Linear case) is broadcast on the device, then the product added with beta = 1; the shared
  // implementation does the checks and everything else.
  if (!(out && out->defined()) && mat1.dim() == 2 && mat2.dim() == 2 && mat1.size(1) == mat2.size(0) &&
      self.dtype() == mat1.dtype() && mat1.dtype() == mat2.dtype() && !beta.is_complex() &&
      beta.to_double() != 0.0 && row_bias(self, mat2.size(1)) && mat1.size(0) > 0 && mat2.size(1) > 0 &&
      (self.dtype() == ScalarType::Float32 || self.dtype() == ScalarType::Float64 ||
       self.dtype() == ScalarType::Float16 || self.dtype() == ScalarType::BFloat16)) {
    if (beta.to_double() == 1.0 && self.stride(-1) == 1) {  // Note [cuBLASLt bias epilogue]
      Tensor y = empty_tensor(std::vector<int64_t>{mat1.size(0), mat2.size(1)}, self.dtype(), self.device());
      Tensor b = make_view(self, DimVector{mat2.size(1)}, DimVector{1}, self.storage_offset());
      if (lt_bias_gemm(y, mat1, mat2, b, alpha)) return y;
    }
    Tensor c = broadcast_bias(self, mat1.size(0), mat2.size(1), beta);
    return impl(DispatchKeySet(), c, mat1, mat2, Scalar(1.0), alpha, c);
  }
  return impl(DispatchKeySet(), self, mat1, mat2, beta, alpha, out);
}
STRATA_IMPL(addmm, CUDA, addmm_cuda);

Tensor linear_cuda(const Tensor& input, const Tensor& weight, const OptT& bias) {
  check_devices("linear", {{"input", &input}, {"weight", &weight}, {"bias", bias ? &*bias : nullptr}});
  STRATA_CHECK(input.dim() >= 1, "linear: input must have at least 1 dimension, but got a 0-d tensor");
  STRATA_CHECK(weight.dim() == 1 || weight.dim() == 2, "linear: weight must be 1-D or 2-D, but got weight of shape ",
               weight.shape_str());
  const bool has_bias = bias && bias->defined();
  STRATA_CHECK(input.dtype() == weight.dtype() && (!has_bias || bias->dtype() == input.dtype()),
               "linear: expected input, weight", has_bias ? " and bias" : "", " to have the same dtype, but got ",
               describe(input), ", ", describe(weight), has_bias ? ", " + describe(*bias) : std::string());
  const int64_t k = input.size(-1), wk = weight.size(-1), n = weight.dim() == 2 ? weight.size(0) : 1;
  DimVector lead(input.sizes().begin(), input.sizes().end() - 1);
  int64_t rows = 1;
  for (int64_t s : lead) rows *= s;
  STRATA_CHECK(wk == k, "linear: mat1 and mat2 shapes cannot be multiplied (", rows, "x", k, " and ", wk, "x", n,
               ") for input of shape ", input.shape_str(), " and weight of shape ", weight.shape_str());
  DimVector out_shape = lead;
  if (weight.dim() == 2) out_shape.push_back(n);
  Tensor x = reshape(input, std::vector<int64_t>{rows, k});
  Tensor wt = weight.dim() == 2 ? transpose(weight, 0, 1) : reshape(weight, std::vector<int64_t>{k, 1});
  Tensor y;
  if (has_bias && bias->dim() == 1 && bias->size(0) == n && weight.dim() == 2 && rows > 0 && n > 0) {
    y = empty_tensor(std::vector<int64_t>{rows, n}, input.dtype(), input.device());
    if (!lt_bias_gemm(y, x, wt, *bias, Scalar(1.0))) {  // Note [cuBLASLt bias epilogue]
      y = broadcast_bias(*bias, rows, n, Scalar(1.0));
      cuda_gemm("linear", y, x, wt, Scalar(1.0), Scalar(1.0), false);
    }
  } else if (has_bias) {
    // Any other bias broadcasts to the output (torch's rule); the broadcasting copy goes through the host.
    Tensor full = empty_tensor(out_shape, input.dtype(), input.device());
    copy_(full, *bias, false);
    y = reshape(full, std::vector<int64_t>{rows, n});
    cuda_gemm("linear", y, x, wt, Scalar(1.0), Scalar(1.0), false);
  } else {
    y = empty_tensor(std::vector<int64_t>{rows, n}, input.dtype(), input.device());
    cuda_gemm("linear", y, x, wt, Scalar(0.0), Scalar(1.0), false);
  }
  return reshape(y, out_shape);
}
STRATA_IMPL(linear, CUDA, linear_cuda);

}  // namespace

}  // namespace strata::cuda
