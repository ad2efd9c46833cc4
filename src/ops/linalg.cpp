// Matrix products with PyTorch's semantics: matmul (with broadcasting), mm,
// bmm, mv, dot, vdot, outer, addmm, addmv, baddbmm, addbmm. Device-generic:
// checks, shapes, dtypes and out= handling here; the arithmetic is one batched
// strided GEMM per op (batched_gemm_stub, see linalg_kernel.h).
#include <algorithm>

#include "ops/linalg_kernel.h"
#include "ops/op_list.h"
#include "ops/api/complex.h"
#include "ops/ops.h"
#include "ops/pointwise.h"
#include "profiler/hidden_copy.h"

namespace strata {

STRATA_DEFINE_STUB(batched_gemm_stub, BatchedGemmFn);
STRATA_DEFINE_STUB(bf16_out_gemm_stub, Bf16OutGemmFn);
STRATA_DEFINE_STUB(complex_gemm_stub, ComplexGemmFn);
STRATA_DEFINE_STUB(complex_dot_stub, ComplexDotFn);
STRATA_DEFINE_STUB(tensor_gemm_stub, TensorGemmFn);

namespace {

using OptT = std::optional<Tensor>;

std::string mat_str(const Tensor& t) {
  std::string s;
  for (int64_t d = 0; d < t.dim(); ++d) s += (d ? "x" : "") + std::to_string(t.size(d));
  return s;
}

void check_same_dtype(const char* op, std::initializer_list<std::pair<const char*, const Tensor*>> ts) {
  const Tensor& first = *ts.begin()->second;
  for (auto& [name, t] : ts) {
    if (t->dtype() != first.dtype()) {
      std::string names, dts;
      for (auto& [n2, t2] : ts) {
        names += (names.empty() ? "" : ", ") + std::string(n2);
        dts += (dts.empty() ? "" : ", ") + std::string(dtype_name(t2->dtype()));
      }
      STRATA_CHECK(false, op, ": expected ", names, " to have the same dtype, but got: ", dts);
    }
    STRATA_CHECK(t->device() == first.device(), op, ": expected all tensors to be on the same device, but got ",
                 first.device().str(), " and ", t->device().str());
  }
}

void check_dtype_supported(const char* op, ScalarType dt) {
  STRATA_CHECK_T(NotImplementedError, dt != ScalarType::Bool && !is_barebones_unsigned(dt), op,
                 ": not implemented for '", scalar_type_name(dt), "' tensors");
}

bool shares_storage(const Tensor& a, const Tensor& b) { return a.impl()->storage() == b.impl()->storage(); }

// Where an op writes its result: `out` itself when it can be written directly
// (right dtype, contiguous, not overlapping an input), otherwise a fresh
// contiguous tensor that finish() copies into out.
struct OutSlot {
  OptT out;
  Tensor target;
  bool copy_back = false;

  OutSlot(const char* op, const OptT& o, IntArrayRef shape, ScalarType dtype, Device device,
          std::initializer_list<const Tensor*> inputs, const Tensor* may_alias = nullptr) {
    if (o && o->defined()) {
      out = *o;
      STRATA_CHECK(out->dtype() == dtype, op, ": Expected out tensor to have dtype ", dtype_name(dtype),
                   ", but got ", dtype_name(out->dtype()), " instead");
      STRATA_CHECK(out->device() == device, op, ": Expected out tensor to be on ", device.str(), ", but got ",
                   out->device().str());
      if (!std::equal(shape.begin(), shape.end(), out->sizes().begin(), out->sizes().end()))
        resize_out(*out, shape, op);
      bool alias = false;
      for (const Tensor* t : inputs)
        if (shares_storage(*t, *out) && !(may_alias && t == may_alias && t->is_same(*out))) alias = true;
      if (!alias && out->is_contiguous()) {
        target = *out;
        return;
      }
      copy_back = true;
    }
    target = empty_tensor(shape, dtype, device);
  }
  Tensor finish() {
    if (!out) return target;
    if (copy_back) copy_(*out, target, false);
    out->bump_version();
    return *out;
  }
};

// Sizes/strides helpers for building views without the view ops.
Tensor view_as(const Tensor& t, DimVector sizes, DimVector strides) {
  return make_view(t, std::move(sizes), std::move(strides), t.storage_offset());
}

// t broadcast to shape as a stride-0 view (t is known to be broadcastable).
Tensor expand_to(const Tensor& t, IntArrayRef shape) {
  int64_t pad = static_cast<int64_t>(shape.size()) - t.dim();
  DimVector st(shape.size(), 0);
  for (int64_t d = 0; d < t.dim(); ++d) st[pad + d] = t.size(d) == shape[pad + d] ? t.stride(d) : 0;
  return view_as(t, DimVector(shape.begin(), shape.end()), st);
}

// The strided batched GEMM description of c = beta * c + alpha * a @ b (a, b
// and c with the same number of batch dims; size-1 batch dims broadcast).
BatchedGemm describe_gemm(ScalarType dt, const Tensor& c, const Tensor& a, const Tensor& b, const Scalar& beta,
                          const Scalar& alpha, bool reduce_batch) {
  BatchedGemm g;
  g.dtype = dt;
  const int64_t nb = a.dim() - 2;
  g.m = a.size(-2), g.k = a.size(-1), g.n = b.size(-1);
  for (int64_t d = 0; d < nb; ++d) {
    int64_t sa = a.size(d), sb = b.size(d);
    int64_t s = reduce_batch ? sa : c.size(d);
    g.batch.push_back(s);
    g.a_bs.push_back(sa == 1 && s != 1 ? 0 : a.stride(d));
    g.b_bs.push_back(sb == 1 && s != 1 ? 0 : b.stride(d));
    g.c_bs.push_back(reduce_batch ? 0 : c.stride(d));
  }
  g.a = a.data_ptr(), g.a_rs = a.stride(-2), g.a_cs = a.stride(-1);
  g.b = b.data_ptr(), g.b_rs = b.stride(-2), g.b_cs = b.stride(-1);
  g.c = c.data_ptr(), g.c_rs = c.stride(-2), g.c_cs = c.stride(-1);
  if (is_floating_type(dt)) {
    g.alpha = alpha.to_double(), g.beta = beta.to_double();
  } else {
    g.ialpha = alpha.to_int(), g.ibeta = beta.to_int();
    g.beta = static_cast<double>(g.ibeta);
  }
  g.reduce_batch = reduce_batch;
  return g;
}

// c[..., m, n] = beta * c + alpha * a[..., m, k] @ b[..., k, n], where a, b and c
// have the same number of batch dims (size-1 batch dims of a and b broadcast).
// reduce_batch: c is 2-D and every batch of a/b is added into it (addbmm).
void gemm_into(const char* op, const Tensor& c, const Tensor& a, const Tensor& b, const Scalar& beta,
               const Scalar& alpha, bool reduce_batch = false);

// Complex products: one complex GEMM per matrix where the device has one (the
// CPU: OpenBLAS's cgemm/zgemm, backends/cpu/blas_complex.cpp); otherwise four
// real GEMMs on the real/imaginary views (the real BLAS does the work):
// (ar + i ai)(br + i bi) = (ar br - ai bi) + i(ar bi + ai br).
void complex_gemm_into(const char* op, const Tensor& c, const Tensor& a, const Tensor& b, const Scalar& beta,
                       const Scalar& alpha, bool reduce_batch) {
  // complex64 products from about 110^3 multiply-adds up stay with four real GEMMs: there they are four
  // oneDNN sgemm calls, which beat one OpenBLAS cgemm (bench/linalg_complex.py, one thread: 0.60x of
  // torch's time against cgemm's 0.83x at n = 256, 0.49x against 0.81x at 1024; cgemm wins below n = 96).
  // complex128 always takes zgemm (0.76-0.96x of torch's time; four dgemm calls 0.98-1.42x).
  const bool big_c64 = c.dtype() == ScalarType::ComplexFloat &&
                       static_cast<double>(a.size(-2)) * static_cast<double>(a.size(-1)) * b.size(-1) > 1.3e6;
  if (c.device().is_cpu() && a.dtype() == c.dtype() && b.dtype() == c.dtype() && !big_c64 &&
      complex_gemm_stub.cpu[0]) {
    BatchedGemm g = describe_gemm(c.dtype(), c, a, b, Scalar(0.0), Scalar(1.0), reduce_batch);
    const bool read_c = beta.is_complex() || beta.to_double() != 0.0;
    if (complex_gemm_stub.get(DeviceType::CPU)(g, alpha.to_complex(), read_c ? beta.to_complex() : 0.0)) return;
  }
  ScalarType rt = to_real_value_type(c.dtype());
  Tensor ar = real(a), ai = imag(a), br = real(b), bi = imag(b);
  Tensor re = empty_tensor(c.sizes(), rt, c.device()), im = empty_tensor(c.sizes(), rt, c.device());
  gemm_into(op, re, ar, br, Scalar(0.0), Scalar(1.0), reduce_batch);
  gemm_into(op, re, ai, bi, Scalar(1.0), Scalar(-1.0), reduce_batch);
  gemm_into(op, im, ar, bi, Scalar(0.0), Scalar(1.0), reduce_batch);
  gemm_into(op, im, ai, br, Scalar(1.0), Scalar(1.0), reduce_batch);
  Tensor prod = complex(re, im);
  const bool unit_alpha = !alpha.is_complex() && alpha.to_double() == 1.0;
  if (!unit_alpha) prod = mul(prod, scalar_to_tensor(alpha, c.dtype(), c.device(), true));
  const bool read_c = beta.is_complex() || beta.to_double() != 0.0;
  if (read_c) prod = add(mul(c, scalar_to_tensor(beta, c.dtype(), c.device(), true)), prod);
  copy_(c, prod, false);
}

void gemm_into(const char* op, const Tensor& c, const Tensor& a, const Tensor& b, const Scalar& beta,
               const Scalar& alpha, bool reduce_batch) {
  if (c.device().is_meta() || c.numel() == 0) return;
  ScalarType dt = c.dtype();
  if (c.device().type == DeviceType::CUDA) return tensor_gemm_stub(DeviceType::CUDA, op, c, a, b, beta, alpha,
                                                                   reduce_batch);  // backends/cuda/cublas_gemm.cpp
  if (is_complex_type(dt)) return complex_gemm_into(op, c, a, b, beta, alpha, reduce_batch);
  if (dt == ScalarType::Float16 || dt == ScalarType::BFloat16) {
    // Accumulate in float32 and round once at the end. bfloat16 operands go
    // to the backend as they are (oneDNN's bf16 GEMM on the CPU); float16
    // ones are widened first.
    const bool bf16 = dt == ScalarType::BFloat16 && a.dtype() == dt && b.dtype() == dt;
    // Straight to bfloat16 where the backend can (oneDNN's matmul on the CPU):
    // no float32 C and no rounding pass (Note [oneDNN matmul for bfloat16 results]).
    if (bf16 && c.device().is_cpu() && c.dim() == 2 && a.dim() == 2 && b.dim() == 2 && !reduce_batch &&
        beta.to_double() == 0.0 && alpha.to_double() == 1.0 &&
        bf16_out_gemm_stub.get(c.device().type)(describe_gemm(dt, c, a, b, beta, alpha, false)))
      return;
    Tensor af = bf16 ? a : to_dtype(a, ScalarType::Float32), bf = bf16 ? b : to_dtype(b, ScalarType::Float32);
    Tensor cf = empty_tensor(c.sizes(), ScalarType::Float32, c.device());
    bool read_c = beta.to_double() != 0.0;
    if (read_c) copy_(cf, c, false);
    if (bf16) {
      BatchedGemm g = describe_gemm(dt, cf, af, bf, read_c ? beta : Scalar(0.0), alpha, reduce_batch);
      batched_gemm_stub(c.device().type, g);
    } else {
      gemm_into(op, cf, af, bf, read_c ? beta : Scalar(0.0), alpha, reduce_batch);
    }
    copy_(c, cf, false);
    return;
  }
  batched_gemm_stub(c.device().type, describe_gemm(dt, c, a, b, beta, alpha, reduce_batch));
}

// A 1-D tensor as a 1 x n row or an n x 1 column (views, no copies).
Tensor as_row(const Tensor& v) { return view_as(v, {1, v.size(0)}, {v.size(0) * v.stride(0), v.stride(0)}); }
Tensor as_col(const Tensor& v) { return view_as(v, {v.size(0), 1}, {v.stride(0), 1}); }

void check_mm_shapes(const Tensor& a, const Tensor& b) {
  STRATA_CHECK(a.size(-1) == b.size(-2), "mat1 and mat2 shapes cannot be multiplied (", a.size(-2), "x", a.size(-1),
               " and ", b.size(-2), "x", b.size(-1), ")");
}

void check_self_broadcast(const char* op, const Tensor& self, IntArrayRef target) {
  bool ok = self.dim() <= static_cast<int64_t>(target.size());
  for (int64_t i = 0; ok && i < self.dim(); ++i) {
    int64_t s = self.size(self.dim() - 1 - i), t = target[target.size() - 1 - i];
    ok = s == t || s == 1;
  }
  STRATA_CHECK(ok, op, ": the input (self) of shape ", self.shape_str(), " cannot be broadcast to the result shape ",
               shape_str(target));
}

// ---- mm / bmm / addmm / baddbmm / addbmm --------------------------------------

Tensor mm_impl(const Tensor& self, const Tensor& mat2, const OptT& out) {
  STRATA_CHECK(self.dim() == 2, "mm: self must be a matrix, but got a ", self.dim(), "-D tensor of shape ",
               self.shape_str());
  STRATA_CHECK(mat2.dim() == 2, "mm: mat2 must be a matrix, but got a ", mat2.dim(), "-D tensor of shape ",
               mat2.shape_str());
  check_mm_shapes(self, mat2);
  check_same_dtype("mm", {{"self", &self}, {"mat2", &mat2}});
  check_dtype_supported("mm", self.dtype());
  const int64_t shape[2] = {self.size(0), mat2.size(1)};
  OutSlot slot("mm", out, shape, self.dtype(), self.device(), {&self, &mat2});
  gemm_into("mm", slot.target, self, mat2, Scalar(0.0), Scalar(1.0));
  return slot.finish();
}
STRATA_IMPL_CPU_META(mm, mm_impl);

void check_bmm(const char* op, const Tensor& b1, const Tensor& b2) {
  STRATA_CHECK(b1.dim() == 3, op, ": batch1 must be a 3D tensor, but got shape ", b1.shape_str());
  STRATA_CHECK(b2.dim() == 3, op, ": batch2 must be a 3D tensor, but got shape ", b2.shape_str());
  STRATA_CHECK(b2.size(0) == b1.size(0) && b2.size(1) == b1.size(2), op,
               ": Expected size for first two dimensions of batch2 tensor to be: [", b1.size(0), ", ", b1.size(2),
               "] but got: [", b2.size(0), ", ", b2.size(1), "].");
}

Tensor bmm_impl(const Tensor& self, const Tensor& mat2, const OptT& out) {
  check_bmm("bmm", self, mat2);
  check_same_dtype("bmm", {{"self", &self}, {"mat2", &mat2}});
  check_dtype_supported("bmm", self.dtype());
  const int64_t shape[3] = {self.size(0), self.size(1), mat2.size(2)};
  OutSlot slot("bmm", out, shape, self.dtype(), self.device(), {&self, &mat2});
  gemm_into("bmm", slot.target, self, mat2, Scalar(0.0), Scalar(1.0));
  return slot.finish();
}
STRATA_IMPL_CPU_META(bmm, bmm_impl);

// out = beta * self + alpha * (product computed by gemm_into over a and b).
Tensor add_product(const char* op, const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta,
                   const Scalar& alpha, const OptT& out, DimVector shape, bool reduce_batch) {
  check_self_broadcast(op, self, shape);
  check_dtype_supported(op, self.dtype());
  // In place (addmm_): self cannot grow to the broadcast shape.
  STRATA_CHECK(!(out && out->is_same(self)) ||
                   std::equal(shape.begin(), shape.end(), self.sizes().begin(), self.sizes().end()),
               op, ": output with shape ", self.shape_str(), " doesn't match the broadcast shape ", shape_str(shape));
  OutSlot slot(op, out, shape, self.dtype(), self.device(), {&self, &a, &b}, &self);
  bool read_self = beta.to_bool();  // a complex beta with a zero real part reads self too
  if (read_self && !slot.target.is_same(self)) copy_(slot.target, expand_to(self, shape), false);
  gemm_into(op, slot.target, a, b, read_self ? beta : Scalar(0.0), alpha, reduce_batch);
  return slot.finish();
}

Tensor addmm_impl(const Tensor& self, const Tensor& mat1, const Tensor& mat2, const Scalar& beta, const Scalar& alpha,
                  const OptT& out) {
  STRATA_CHECK(mat1.dim() == 2, "addmm: mat1 must be a matrix, got ", mat1.dim(), "-D tensor");
  STRATA_CHECK(mat2.dim() == 2, "addmm: mat2 must be a matrix, got ", mat2.dim(), "-D tensor");
  check_mm_shapes(mat1, mat2);
  check_same_dtype("addmm", {{"self", &self}, {"mat1", &mat1}, {"mat2", &mat2}});
  return add_product("addmm", self, mat1, mat2, beta, alpha, out, {mat1.size(0), mat2.size(1)}, false);
}
STRATA_IMPL_CPU_META(addmm, addmm_impl);

Tensor baddbmm_impl(const Tensor& self, const Tensor& b1, const Tensor& b2, const Scalar& beta, const Scalar& alpha,
                    const OptT& out) {
  check_bmm("baddbmm", b1, b2);
  check_same_dtype("baddbmm", {{"self", &self}, {"batch1", &b1}, {"batch2", &b2}});
  return add_product("baddbmm", self, b1, b2, beta, alpha, out, {b1.size(0), b1.size(1), b2.size(2)}, false);
}
STRATA_IMPL_CPU_META(baddbmm, baddbmm_impl);

Tensor addbmm_impl(const Tensor& self, const Tensor& b1, const Tensor& b2, const Scalar& beta, const Scalar& alpha,
                   const OptT& out) {
  check_bmm("addbmm", b1, b2);
  check_same_dtype("addbmm", {{"self", &self}, {"batch1", &b1}, {"batch2", &b2}});
  return add_product("addbmm", self, b1, b2, beta, alpha, out, {b1.size(1), b2.size(2)}, true);
}
STRATA_IMPL_CPU_META(addbmm, addbmm_impl);

// ---- vector products ------------------------------------------------------------

Tensor addmv_impl(const Tensor& self, const Tensor& mat, const Tensor& vec, const Scalar& beta, const Scalar& alpha,
                  const OptT& out) {
  STRATA_CHECK(mat.dim() == 2 && vec.dim() == 1 && self.dim() <= 1, "addmv: vector + matrix @ vector expected, got ",
               self.dim(), ", ", mat.dim(), ", ", vec.dim());
  STRATA_CHECK(mat.size(1) == vec.size(0) && (self.dim() == 0 || self.size(0) == mat.size(0) || self.size(0) == 1),
               "addmv: size mismatch, got input (", self.dim() ? self.size(0) : 1, "), mat (", mat_str(mat),
               "), vec (", vec.size(0), ")");
  check_same_dtype("addmv", {{"self", &self}, {"mat", &mat}, {"vec", &vec}});
  check_self_broadcast("addmv", self, std::vector<int64_t>{mat.size(0)});
  check_dtype_supported("addmv", self.dtype());
  OutSlot slot("addmv", out, std::vector<int64_t>{mat.size(0)}, self.dtype(), self.device(), {&self, &mat, &vec},
               &self);
  bool read_self = beta.to_bool();
  if (read_self && !slot.target.is_same(self))
    copy_(slot.target, expand_to(self, std::vector<int64_t>{mat.size(0)}), false);
  gemm_into("addmv", as_col(slot.target), mat, as_col(vec), read_self ? beta : Scalar(0.0), alpha);
  return slot.finish();
}
STRATA_IMPL_CPU_META(addmv, addmv_impl);

Tensor mv_impl(const Tensor& self, const Tensor& vec, const OptT& out) {
  STRATA_CHECK(self.dim() == 2 && vec.dim() == 1, "mv: vector + matrix @ vector expected, got 1, ", self.dim(), ", ",
               vec.dim());
  STRATA_CHECK(self.size(1) == vec.size(0), "mv: size mismatch, got input (", self.size(0), "), mat (",
               mat_str(self), "), vec (", vec.size(0), ")");
  check_same_dtype("mv", {{"self", &self}, {"vec", &vec}});
  check_dtype_supported("mv", self.dtype());
  OutSlot slot("mv", out, std::vector<int64_t>{self.size(0)}, self.dtype(), self.device(), {&self, &vec});
  gemm_into("mv", as_col(slot.target), self, as_col(vec), Scalar(0.0), Scalar(1.0));
  return slot.finish();
}
STRATA_IMPL_CPU_META(mv, mv_impl);

Tensor dot_common(const char* op, const Tensor& self, const Tensor& other, const OptT& out, bool conj_self = false) {
  STRATA_CHECK(self.dim() == 1 && other.dim() == 1, op, ": 1D tensors expected, but got ", self.dim(), "D and ",
               other.dim(), "D tensors");
  STRATA_CHECK(self.size(0) == other.size(0), op, ": inconsistent tensor size, expected tensor [", self.size(0),
               "] and src [", other.size(0), "] to have the same number of elements, but got ", self.size(0),
               " and ", other.size(0), " elements respectively");
  STRATA_CHECK(self.dtype() == other.dtype(), op, ": expected both vectors to have same dtype, but found ",
               dtype_name(self.dtype()), " and ", dtype_name(other.dtype()));
  check_same_dtype(op, {{"self", &self}, {"other", &other}});
  check_dtype_supported(op, self.dtype());
  OutSlot slot(op, out, std::vector<int64_t>{}, self.dtype(), self.device(), {&self, &other});
  Tensor c = view_as(slot.target, {1, 1}, {1, 1});
  if (conj_self && !self.device().is_meta()) {  // complex vdot: cdotc/zdotc, or conj(self) and a product
    if (self.device().is_cpu() && complex_dot_stub.cpu[0] && self.numel() > 0 &&
        complex_dot_stub.get(DeviceType::CPU)(self.dtype(), true, self.numel(), self.data_ptr(), self.stride(0),
                                              other.data_ptr(), other.stride(0), slot.target.data_ptr()))
      return slot.finish();
    gemm_into(op, c, as_row(conj_physical(self)), as_col(other), Scalar(0.0), Scalar(1.0));
    return slot.finish();
  }
  gemm_into(op, c, as_row(self), as_col(other), Scalar(0.0), Scalar(1.0));
  return slot.finish();
}
Tensor dot_impl(const Tensor& self, const Tensor& other, const OptT& out) { return dot_common("dot", self, other, out); }
Tensor vdot_impl(const Tensor& self, const Tensor& other, const OptT& out) {
  // vdot conjugates its first argument (a no-op for real dtypes).
  return dot_common("vdot", self, other, out, is_complex_type(self.dtype()) && self.dtype() == other.dtype());
}
STRATA_IMPL_CPU_META(dot, dot_impl);
STRATA_IMPL_CPU_META(vdot, vdot_impl);

Tensor outer_impl(const Tensor& self, const Tensor& vec2, const OptT& out) {
  STRATA_CHECK(self.dim() == 1, "outer: Expected 1-D argument self, but got ", self.dim(), "-D");
  STRATA_CHECK(vec2.dim() == 1, "outer: Expected 1-D argument vec2, but got ", vec2.dim(), "-D");
  // An outer product is a broadcast multiply (and promotes dtypes like one).
  // unsqueeze (an op) rather than a raw view, so that autograd, which this
  // composite runs under, records the path back to self and vec2.
  return mul(unsqueeze(self, 1), unsqueeze(vec2, 0), out);
}
STRATA_IMPL_COMPOSITE(outer, outer_impl);

// ---- matmul -------------------------------------------------------------------

// Can the batch dims and the row dim of t (..., m, k) be read as one dim of
// rows (B*m, k) without copying? Returns the row stride when they can.
std::optional<int64_t> fold_rows(const Tensor& t) {
  int64_t nd = t.dim();
  int64_t row_stride = -1, expected = -1;
  for (int64_t d = nd - 2; d >= 0; --d) {
    if (t.size(d) == 1) continue;
    if (row_stride < 0) {
      row_stride = t.stride(d);
    } else if (t.stride(d) != expected) {
      return std::nullopt;
    }
    expected = t.stride(d) * t.size(d);
  }
  return row_stride < 0 ? std::max<int64_t>(t.size(-1), 1) * std::max<int64_t>(t.stride(-1), 1) : row_stride;
}

Tensor matmul_impl(const Tensor& self, const Tensor& other, const OptT& out) {
  const int64_t da = self.dim(), db = other.dim();
  STRATA_CHECK(da > 0 && db > 0, "both arguments to matmul need to be at least 1D, but they are ", da, "D and ", db,
               "D");
  if (self.dtype() != other.dtype())
    STRATA_CHECK(false, "matmul: expected m1 and m2 to have the same dtype, but got: ", dtype_name(self.dtype()),
                 " != ", dtype_name(other.dtype()));
  if (da == 1 && db == 1) return dot_common("matmul", self, other, out);
  if (da == 2 && db == 1) return mv_impl(self, other, out);
  if (da == 2 && db == 2) return mm_impl(self, other, out);
  check_same_dtype("matmul", {{"self", &self}, {"other", &other}});
  check_dtype_supported("matmul", self.dtype());

  Tensor a = da == 1 ? as_row(self) : self;
  Tensor b = db == 1 ? as_col(other) : other;
  check_mm_shapes(a, b);
  const int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1);
  DimVector ba(a.sizes().begin(), a.sizes().end() - 2), bb(b.sizes().begin(), b.sizes().end() - 2);
  DimVector batch = broadcast_shapes(ba, bb, "matmul");
  DimVector shape = batch;
  if (da > 1) shape.push_back(m);
  if (db > 1) shape.push_back(n);
  OutSlot slot("matmul", out, shape, self.dtype(), self.device(), {&self, &other});
  DimVector c_sizes = batch;
  c_sizes.push_back(m);
  c_sizes.push_back(n);

  if (b.dim() == 2) {
    // (..., m, k) @ (k, n): fold the batch into M and run one large GEMM.
    int64_t rows = m;
    for (int64_t s : batch) rows *= s;
    std::optional<int64_t> rs = fold_rows(a);
    Tensor af = a;
    if (!rs) {
      af = contiguous_input(a, "self");
      rs = k;
    }
    Tensor a2 = view_as(af, {rows, k}, {*rs, af.stride(-1)});
    Tensor c2 = view_as(slot.target, {rows, n}, {n, 1});
    gemm_into("matmul", c2, a2, b, Scalar(0.0), Scalar(1.0));
    return slot.finish();
  }
  // General batched case: broadcast batch dims become stride-0 batch dims.
  auto expand = [&](const Tensor& t) {
    int64_t pad = static_cast<int64_t>(batch.size()) - (t.dim() - 2);
    DimVector sz(pad, 1), st(pad, 0);
    for (int64_t d = 0; d < t.dim(); ++d) sz.push_back(t.size(d)), st.push_back(t.stride(d));
    return view_as(t, sz, st);
  };
  Tensor c = view_as(slot.target, c_sizes, contiguous_strides(c_sizes));
  gemm_into("matmul", c, expand(a), expand(b), Scalar(0.0), Scalar(1.0));
  return slot.finish();
}
STRATA_IMPL_CPU_META(matmul, matmul_impl);

}  // namespace

}  // namespace strata
