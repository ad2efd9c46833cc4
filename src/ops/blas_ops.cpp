// The strata.blas ops: BLAS levels 1-3 as named ops over float32/float64
// tensors (python/strata/blas.py documents the Python surface). These are the
// CPU BLAS by definition, so the implementation calls cpublas directly; on the
// Meta device only shapes and dtypes are computed.
//
// Tensors are passed to BLAS without copies when their layout allows: a
// column-major matrix is handed over as the transpose of a row-major one, with
// trans (and for triangular routines uplo) flipped to compensate.
#include <algorithm>

#include "backends/cpu/blas.h"
#include "ops/op_list.h"
#include "ops/ops.h"

namespace strata {

namespace {

using OptT = std::optional<Tensor>;
using cpublas::Diag;
using cpublas::Side;
using cpublas::Trans;
using cpublas::Uplo;

void check_float(const char* op, std::initializer_list<const Tensor*> ts) {
  const Tensor& f = **ts.begin();
  for (const Tensor* t : ts) {
    STRATA_CHECK_TYPE(t->dtype() == ScalarType::Float32 || t->dtype() == ScalarType::Float64, op,
                      ": expected float32 or float64 tensors, but got ", dtype_name(t->dtype()));
    STRATA_CHECK_TYPE(t->dtype() == f.dtype(), op, ": expected all tensors to have the same dtype, but got ",
                      dtype_name(f.dtype()), " and ", dtype_name(t->dtype()));
    STRATA_CHECK(t->device() == f.device(), op, ": expected all tensors on one device, but got ", f.device().str(),
                 " and ", t->device().str());
    STRATA_CHECK(t->device().is_cpu() || t->device().is_meta(), op, ": BLAS ops run on the CPU, got a tensor on ",
                 t->device().str());
  }
}

void check_dim(const char* op, const char* name, const Tensor& t, int64_t dim) {
  STRATA_CHECK(t.dim() == dim, op, ": expected ", name, " to be ", dim == 1 ? "a vector (1-D)" : "a matrix (2-D)",
               ", but got a ", t.dim(), "-D tensor of shape ", t.shape_str());
}

// A matrix in memory as BLAS sees it: row-major M with leading dimension ld,
// where M is either the tensor (transposed = false) or its transpose.
struct Mat {
  Tensor keep;  // owns a copy when one was needed
  const void* p;
  int64_t ld;
  bool transposed;
};

Mat as_blas(const Tensor& t) {
  int64_t r = t.size(0), c = t.size(1), rs = t.stride(0), cs = t.stride(1);
  if (cs == 1 && (r <= 1 || rs >= std::max<int64_t>(1, c))) return {t, t.data_ptr(), std::max<int64_t>(rs, 1), false};
  if (rs == 1 && (c <= 1 || cs >= std::max<int64_t>(1, r))) return {t, t.data_ptr(), std::max<int64_t>(cs, 1), true};
  Tensor cc = contiguous(t);
  return {cc, cc.data_ptr(), std::max<int64_t>(c, 1), false};
}

Trans flip(Trans t, bool f) { return f ? (t == Trans::N ? Trans::T : Trans::N) : t; }
Uplo flip(Uplo u, bool f) { return f ? (u == Uplo::Upper ? Uplo::Lower : Uplo::Upper) : u; }

// A vector BLAS can step through (stride > 0), copying when it cannot.
Tensor as_blas_vec(const Tensor& v) { return v.size(0) > 1 && v.stride(0) <= 0 ? contiguous(v) : v; }
int64_t inc(const Tensor& v) { return std::max<int64_t>(v.stride(0), 1); }

template <typename F>
auto visit_blas(ScalarType dt, F&& f) {
  if (dt == ScalarType::Float32) return f.template operator()<float>();
  return f.template operator()<double>();
}

// Result tensor: a fresh contiguous copy of init (when given and used), else empty.
Tensor fresh(IntArrayRef shape, const Tensor& like, const OptT& init, bool use_init) {
  Tensor r = empty_tensor(shape, like.dtype(), like.device());
  if (init && init->defined() && use_init) copy_(r, *init, false);
  else if (!r.device().is_meta()) zero_(r);
  return r;
}

// ---- level 1 --------------------------------------------------------------------

Tensor blas_axpy_impl(const Tensor& x, const Tensor& y, const Scalar& alpha) {
  const char* op = "blas_axpy";
  check_float(op, {&x, &y});
  check_dim(op, "x", x, 1), check_dim(op, "y", y, 1);
  STRATA_CHECK(x.size(0) == y.size(0), op, ": x and y must have the same length, got ", x.size(0), " and ",
               y.size(0));
  STRATA_CHECK(y.size(0) <= 1 || y.stride(0) > 0, op, ": y (stride ", y.stride(0),
               ") has elements that share memory and cannot be written in place");
  if (y.device().is_meta() || y.numel() == 0) return y;
  Tensor xs = as_blas_vec(x);
  if (xs.impl()->storage() == y.impl()->storage()) xs = clone(xs);  // y's writes must not change x
  visit_blas(x.dtype(), [&]<typename T>() {
    cpublas::axpy(x.size(0), static_cast<T>(alpha.to_double()), xs.data_ptr<T>(), inc(xs), y.data_ptr<T>(), inc(y));
  });
  y.bump_version();
  return y;
}
STRATA_IMPL_CPU_META(blas_axpy, blas_axpy_impl);

Tensor blas_dot_impl(const Tensor& x, const Tensor& y) {
  const char* op = "blas_dot";
  check_float(op, {&x, &y});
  check_dim(op, "x", x, 1), check_dim(op, "y", y, 1);
  STRATA_CHECK(x.size(0) == y.size(0), op, ": x and y must have the same length, got ", x.size(0), " and ",
               y.size(0));
  Tensor r = empty_tensor(std::vector<int64_t>{}, x.dtype(), x.device());
  if (r.device().is_meta()) return r;
  Tensor xs = as_blas_vec(x), ys = as_blas_vec(y);
  visit_blas(x.dtype(), [&]<typename T>() {
    *r.data_ptr<T>() = cpublas::dot(x.size(0), xs.data_ptr<T>(), inc(xs), ys.data_ptr<T>(), inc(ys));
  });
  return r;
}
STRATA_IMPL_CPU_META(blas_dot, blas_dot_impl);

Tensor blas_nrm2_impl(const Tensor& x) {
  const char* op = "blas_nrm2";
  check_float(op, {&x});
  check_dim(op, "x", x, 1);
  Tensor r = empty_tensor(std::vector<int64_t>{}, x.dtype(), x.device());
  if (r.device().is_meta()) return r;
  Tensor xs = as_blas_vec(x);
  visit_blas(x.dtype(), [&]<typename T>() { *r.data_ptr<T>() = cpublas::nrm2(x.size(0), xs.data_ptr<T>(), inc(xs)); });
  return r;
}
STRATA_IMPL_CPU_META(blas_nrm2, blas_nrm2_impl);

// ---- level 2 --------------------------------------------------------------------

Tensor blas_gemv_impl(const Tensor& a, const Tensor& x, const OptT& y, const Scalar& alpha, const Scalar& beta,
                      bool trans) {
  const char* op = "blas_gemv";
  bool has_y = y && y->defined();
  if (has_y) check_float(op, {&a, &x, &*y});
  else check_float(op, {&a, &x});
  check_dim(op, "a", a, 2), check_dim(op, "x", x, 1);
  int64_t rows = trans ? a.size(1) : a.size(0), cols = trans ? a.size(0) : a.size(1);
  STRATA_CHECK(x.size(0) == cols, op, ": op(a) has shape [", rows, ", ", cols, "] (trans=", trans ? "True" : "False",
               ") but x has length ", x.size(0));
  if (has_y) {
    check_dim(op, "y", *y, 1);
    STRATA_CHECK(y->size(0) == rows, op, ": y must have length ", rows, ", got ", y->size(0));
  }
  bool use_y = has_y && beta.to_double() != 0.0;
  Tensor r = fresh(std::vector<int64_t>{rows}, a, y, use_y);
  if (r.device().is_meta() || rows == 0) return r;
  Mat m = as_blas(a);
  Tensor xs = as_blas_vec(x);
  visit_blas(a.dtype(), [&]<typename T>() {
    // Memory M is a or a^T; gemv takes M's own shape.
    int64_t mr = m.transposed ? a.size(1) : a.size(0), mc = m.transposed ? a.size(0) : a.size(1);
    cpublas::gemv(flip(trans ? Trans::T : Trans::N, m.transposed), mr, mc, static_cast<T>(alpha.to_double()),
                  static_cast<const T*>(m.p), m.ld, xs.data_ptr<T>(), inc(xs),
                  use_y ? static_cast<T>(beta.to_double()) : T(0), r.data_ptr<T>(), 1);
  });
  return r;
}
STRATA_IMPL_CPU_META(blas_gemv, blas_gemv_impl);

Tensor blas_trsv_impl(const Tensor& a, const Tensor& b, bool upper, bool trans, bool unit_diagonal) {
  const char* op = "blas_trsv";
  check_float(op, {&a, &b});
  check_dim(op, "a", a, 2), check_dim(op, "b", b, 1);
  STRATA_CHECK(a.size(0) == a.size(1), op, ": a must be square, got shape ", a.shape_str());
  STRATA_CHECK(b.size(0) == a.size(0), op, ": b must have length ", a.size(0), ", got ", b.size(0));
  Tensor r = fresh(b.sizes(), b, b, true);
  if (r.device().is_meta() || r.numel() == 0) return r;
  Mat m = as_blas(a);
  visit_blas(a.dtype(), [&]<typename T>() {
    cpublas::trsv(flip(upper ? Uplo::Upper : Uplo::Lower, m.transposed), flip(trans ? Trans::T : Trans::N, m.transposed),
                  unit_diagonal ? Diag::Unit : Diag::NonUnit, a.size(0), static_cast<const T*>(m.p), m.ld,
                  r.data_ptr<T>(), 1);
  });
  return r;
}
STRATA_IMPL_CPU_META(blas_trsv, blas_trsv_impl);

// ---- level 3 --------------------------------------------------------------------

Tensor blas_gemm_impl(const Tensor& a, const Tensor& b, const OptT& c, const Scalar& alpha, const Scalar& beta,
                      bool trans_a, bool trans_b) {
  const char* op = "blas_gemm";
  bool has_c = c && c->defined();
  if (has_c) check_float(op, {&a, &b, &*c});
  else check_float(op, {&a, &b});
  check_dim(op, "a", a, 2), check_dim(op, "b", b, 2);
  int64_t m = trans_a ? a.size(1) : a.size(0), k = trans_a ? a.size(0) : a.size(1);
  int64_t k2 = trans_b ? b.size(1) : b.size(0), n = trans_b ? b.size(0) : b.size(1);
  STRATA_CHECK(k == k2, op, ": op(a) (", m, "x", k, ") and op(b) (", k2, "x", n, ") cannot be multiplied");
  if (has_c) {
    check_dim(op, "c", *c, 2);
    STRATA_CHECK(c->size(0) == m && c->size(1) == n, op, ": c must have shape [", m, ", ", n, "], got ",
                 c->shape_str());
  }
  bool use_c = has_c && beta.to_double() != 0.0;
  Tensor r = fresh(std::vector<int64_t>{m, n}, a, c, use_c);
  if (r.device().is_meta() || r.numel() == 0) return r;
  Mat ma = as_blas(a), mb = as_blas(b);
  visit_blas(a.dtype(), [&]<typename T>() {
    cpublas::gemm(flip(trans_a ? Trans::T : Trans::N, ma.transposed), flip(trans_b ? Trans::T : Trans::N, mb.transposed),
                  m, n, k, static_cast<T>(alpha.to_double()), static_cast<const T*>(ma.p), ma.ld,
                  static_cast<const T*>(mb.p), mb.ld, use_c ? static_cast<T>(beta.to_double()) : T(0),
                  r.data_ptr<T>(), std::max<int64_t>(n, 1));
  });
  return r;
}
STRATA_IMPL_CPU_META(blas_gemm, blas_gemm_impl);

Tensor blas_syrk_impl(const Tensor& a, const OptT& c, const Scalar& alpha, const Scalar& beta, bool upper,
                      bool trans) {
  const char* op = "blas_syrk";
  bool has_c = c && c->defined();
  if (has_c) check_float(op, {&a, &*c});
  else check_float(op, {&a});
  check_dim(op, "a", a, 2);
  int64_t n = trans ? a.size(1) : a.size(0), k = trans ? a.size(0) : a.size(1);
  if (has_c) {
    check_dim(op, "c", *c, 2);
    STRATA_CHECK(c->size(0) == n && c->size(1) == n, op, ": c must have shape [", n, ", ", n, "], got ",
                 c->shape_str());
  }
  // The triangle syrk does not touch keeps c's values (zeros without c), as in BLAS.
  Tensor r = fresh(std::vector<int64_t>{n, n}, a, c, has_c);
  if (r.device().is_meta() || n == 0) return r;
  bool use_c = has_c && beta.to_double() != 0.0;
  Mat ma = as_blas(a);
  visit_blas(a.dtype(), [&]<typename T>() {
    cpublas::syrk(upper ? Uplo::Upper : Uplo::Lower, flip(trans ? Trans::T : Trans::N, ma.transposed), n, k,
                  static_cast<T>(alpha.to_double()), static_cast<const T*>(ma.p), ma.ld,
                  use_c ? static_cast<T>(beta.to_double()) : T(0), r.data_ptr<T>(), n);
  });
  return r;
}
STRATA_IMPL_CPU_META(blas_syrk, blas_syrk_impl);

Tensor blas_trsm_impl(const Tensor& a, const Tensor& b, const Scalar& alpha, bool left, bool upper, bool trans,
                      bool unit_diagonal) {
  const char* op = "blas_trsm";
  check_float(op, {&a, &b});
  check_dim(op, "a", a, 2), check_dim(op, "b", b, 2);
  STRATA_CHECK(a.size(0) == a.size(1), op, ": a must be square, got shape ", a.shape_str());
  int64_t need = left ? b.size(0) : b.size(1);
  STRATA_CHECK(a.size(0) == need, op, ": a is ", a.size(0), "x", a.size(1), " but b has ", left ? "rows" : "columns",
               " of length ", need, " (left=", left ? "True" : "False", ")");
  Tensor r = fresh(b.sizes(), b, b, true);
  if (r.device().is_meta() || r.numel() == 0) return r;
  Mat ma = as_blas(a);
  visit_blas(a.dtype(), [&]<typename T>() {
    cpublas::trsm(left ? Side::Left : Side::Right, flip(upper ? Uplo::Upper : Uplo::Lower, ma.transposed),
                  flip(trans ? Trans::T : Trans::N, ma.transposed), unit_diagonal ? Diag::Unit : Diag::NonUnit,
                  b.size(0), b.size(1), static_cast<T>(alpha.to_double()), static_cast<const T*>(ma.p), ma.ld,
                  r.data_ptr<T>(), std::max<int64_t>(b.size(1), 1));
  });
  return r;
}
STRATA_IMPL_CPU_META(blas_trsm, blas_trsm_impl);

}  // namespace

}  // namespace strata
