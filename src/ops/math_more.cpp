// Device-generic implementations of the elementwise ops in decl/math_more.def:
// dtype rules and argument checks, then the per-device stub (kernels in
// backends/cpu/kernels/math_more_kernels.cpp). Registered for CPU and Meta.
#include "ops/api/math_more.h"
#include "ops/op_list.h"
#include "ops/ops.h"
#include "ops/pointwise.h"

namespace strata {

// Stubs have external linkage: the per-ISA kernel files register into them.
#define STRATA_MM_STUBS(X)                                                                                         \
  X(acosh) X(asinh) X(atanh) X(deg2rad) X(rad2deg) X(frac) X(sinc) X(signbit) X(logit) X(lgamma) X(digamma)        \
  X(polygamma) X(mvlgamma) X(erfinv) X(i0) X(special_i1) X(hypot) X(logaddexp) X(logaddexp2) X(xlogy) X(heaviside) \
  X(copysign) X(addcmul) X(addcdiv)
#define STRATA_MM_DEFINE_STUB(name) STRATA_DEFINE_STUB(name##_stub, PointwiseFn);
STRATA_MM_STUBS(STRATA_MM_DEFINE_STUB)
#undef STRATA_MM_DEFINE_STUB
// clamp's one-sided kernels serve clamp_min and clamp_max (ops/pointwise.cpp).
STRATA_DECLARE_STUB(clamp_min_stub, PointwiseFn);
STRATA_DECLARE_STUB(clamp_max_stub, PointwiseFn);

namespace {

using OptT = std::optional<Tensor>;

// Ops torch defines for floating point only: integer inputs are an error
// there (not a promotion), with this message.
void require_floating(const char* op, std::initializer_list<Tensor> inputs) {
  ScalarType t = result_type(inputs);
  STRATA_CHECK_T(NotImplementedError, is_floating_type(t), "\"", op, "_cpu\" not implemented for '",
                 dtype_name(t), "' (", op, " is defined for floating point tensors only)");
}

#define STRATA_MM_UNARY(name, rule)                                     \
  Tensor name##_impl(const Tensor& self, const OptT& out) {             \
    return run_pointwise(#name, name##_stub, PwRule::rule, {self}, out); \
  }                                                                      \
  STRATA_IMPL_CPU_META(name, name##_impl);
STRATA_MM_UNARY(acosh, IntToFloat)
STRATA_MM_UNARY(asinh, IntToFloat)
STRATA_MM_UNARY(atanh, IntToFloat)
STRATA_MM_UNARY(deg2rad, IntToFloat)
STRATA_MM_UNARY(rad2deg, IntToFloat)
STRATA_MM_UNARY(sinc, IntToFloat)
STRATA_MM_UNARY(signbit, BoolOut)
STRATA_MM_UNARY(lgamma, IntToFloat)
STRATA_MM_UNARY(digamma, IntToFloat)
STRATA_MM_UNARY(erfinv, IntToFloat)
STRATA_MM_UNARY(i0, IntToFloat)
STRATA_MM_UNARY(special_i1, IntToFloat)
#undef STRATA_MM_UNARY

Tensor frac_impl(const Tensor& self, const OptT& out) {
  require_floating("frac", {self});
  return run_pointwise("frac", frac_stub, PwRule::Promote, {self}, out);
}
STRATA_IMPL_CPU_META(frac, frac_impl);

Tensor logit_impl(const Tensor& self, std::optional<double> eps, const OptT& out) {
  PwArgs a;
  a.a = eps.value_or(-1.0);
  return run_pointwise("logit", logit_stub, PwRule::IntToFloat, {self}, out, a);
}
STRATA_IMPL_CPU_META(logit, logit_impl);

Tensor polygamma_impl(int64_t n, const Tensor& self, const OptT& out) {
  STRATA_CHECK(n >= 0, "polygamma(n, x) does not support negative n (got n = ", n, ")");
  PwArgs a;
  a.a = static_cast<double>(n);
  return run_pointwise("polygamma", polygamma_stub, PwRule::IntToFloat, {self}, out, a);
}
STRATA_IMPL_CPU_META(polygamma, polygamma_impl);

Tensor mvlgamma_impl(const Tensor& self, int64_t p, const OptT& out) {
  STRATA_CHECK(p >= 1, "mvlgamma: p has to be greater than or equal to 1 (got p = ", p, ")");
  if (!self.device().is_meta() && self.numel() > 0) {
    // Defined only where every lgamma term is: x > (p - 1) / 2 (a nan fails too).
    Tensor bound = scalar_to_tensor(Scalar(0.5 * static_cast<double>(p - 1)), ScalarType::Float64, self.device(), true);
    STRATA_CHECK(!any_nonzero(logical_not(gt(self, bound))), "mvlgamma: All elements must be greater than (p-1)/2 = ",
                 0.5 * static_cast<double>(p - 1), " (input ", self.describe(), ")");
  }
  PwArgs a;
  a.a = static_cast<double>(p);
  return run_pointwise("mvlgamma", mvlgamma_stub, PwRule::IntToFloat, {self}, out, a);
}
STRATA_IMPL_CPU_META(mvlgamma, mvlgamma_impl);

#define STRATA_MM_BINARY(name, rule, float_only)                                    \
  Tensor name##_impl(const Tensor& self, const Tensor& other, const OptT& out) {    \
    if (float_only) require_floating(#name, {self, other});                         \
    return run_pointwise(#name, name##_stub, PwRule::rule, {self, other}, out);     \
  }                                                                                 \
  STRATA_IMPL_CPU_META(name, name##_impl);
STRATA_MM_BINARY(hypot, Promote, true)
STRATA_MM_BINARY(logaddexp, Promote, true)
STRATA_MM_BINARY(logaddexp2, Promote, true)
STRATA_MM_BINARY(xlogy, IntToFloat, false)
STRATA_MM_BINARY(copysign, IntToFloat, false)
#undef STRATA_MM_BINARY

Tensor heaviside_impl(const Tensor& self, const Tensor& values, const OptT& out) {
  // A Python number for values takes self's dtype; tensors must already agree.
  Tensor v = values.impl()->is_wrapped_number() ? to_dtype(values, self.dtype()) : values;
  STRATA_CHECK(self.dtype() == v.dtype(), "heaviside is not yet implemented for tensors with different dtypes (got ",
               dtype_name(self.dtype()), " and ", dtype_name(v.dtype()), ")");
  return run_pointwise("heaviside", heaviside_stub, PwRule::Promote, {self, v}, out);
}
STRATA_IMPL_CPU_META(heaviside, heaviside_impl);

Tensor clamp_min_impl(const Tensor& self, const Tensor& min, const OptT& out) {
  return run_pointwise("clamp_min", clamp_min_stub, PwRule::Promote, {self, min}, out);
}
STRATA_IMPL_CPU_META(clamp_min, clamp_min_impl);
Tensor clamp_max_impl(const Tensor& self, const Tensor& max, const OptT& out) {
  return run_pointwise("clamp_max", clamp_max_stub, PwRule::Promote, {self, max}, out);
}
STRATA_IMPL_CPU_META(clamp_max, clamp_max_impl);

Tensor addcmul_impl(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value, const OptT& out) {
  PwArgs a;
  a.a = value.to_double();
  return run_pointwise("addcmul", addcmul_stub, PwRule::Promote, {self, t1, t2}, out, a);
}
STRATA_IMPL_CPU_META(addcmul, addcmul_impl);

Tensor addcdiv_impl(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value, const OptT& out) {
  STRATA_CHECK(!(is_integral_type(t1.dtype(), true) && is_integral_type(t2.dtype(), true)),
               "addcdiv: Integer division with addcdiv is no longer supported, and in a future release addcdiv will "
               "perform a true division of tensor1 and tensor2. Use addcdiv with floating point tensor1 and tensor2 "
               "instead (got ", dtype_name(t1.dtype()), " and ", dtype_name(t2.dtype()), ")");
  require_floating("addcdiv", {self, t1, t2});
  PwArgs a;
  a.a = value.to_double();
  return run_pointwise("addcdiv", addcdiv_stub, PwRule::Promote, {self, t1, t2}, out, a);
}
STRATA_IMPL_CPU_META(addcdiv, addcdiv_impl);

// Always float64, computed by pow on float64 operands; an out= (or self, in
// place) of another dtype is an error rather than a silent downcast.
Tensor float_power_impl(const Tensor& self, const Tensor& exponent, const OptT& out) {
  if (out && out->defined()) {
    const bool inplace = out->is_same(self);
    STRATA_CHECK(out->dtype() == ScalarType::Float64, "the ", inplace ? "base given to float_power_" :
                 "output given to float_power", " has dtype ", dtype_name(out->dtype()),
                 " but the operation's result requires dtype Double");
  }
  auto as_double = [](const Tensor& t) { return t.dtype() == ScalarType::Float64 ? t : to_dtype(t, ScalarType::Float64); };
  return pow(as_double(self), as_double(exponent), out);
}
STRATA_IMPL_COMPOSITE(float_power, float_power_impl);

}  // namespace
}  // namespace strata
