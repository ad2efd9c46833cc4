// Device-generic implementations of the elementwise ops: dtype rules, argument
// checks, then the per-device stub. Registered for CPU and Meta.
#include "ops/pointwise.h"

#include "ops/op_list.h"
#include "ops/ops.h"
#include "core/hot.h"

namespace strata {

void resize_out(Tensor& out, IntArrayRef shape, const char* op) {
  int64_t n = checked_numel(shape, op);
  DimVector sz(shape.begin(), shape.end());
  size_t need = static_cast<size_t>(n) * out.element_size();
  size_t have = out.impl()->storage()->nbytes();
  if (need + out.storage_offset() * out.element_size() <= have) {
    out.impl()->set_geometry(sz, contiguous_strides(sz), out.storage_offset());
  } else {
    out.impl()->set_storage(make_storage(need, out.device()));
    out.impl()->set_geometry(sz, contiguous_strides(sz), 0);
  }
}

namespace {
// Note [Complex and barebones-unsigned kernels]
// Kernels are written for the ten original dtypes; a pointwise op takes the
// complex or the uint16/32/64 dtypes only where it is named here (its kernel
// visits them too). Any other op raises torch's NotImplementedError naming the
// op and the dtype before a kernel runs, on every backend and on Meta.
bool takes_complex(std::string_view op) {
  static constexpr std::string_view ops[] = {
      "exp",   "exp2",  "expm1", "log",      "log2",  "log10",     "log1p",       "sqrt",  "rsqrt", "reciprocal",
      "sin",   "cos",   "tan",   "tanh",     "asin",  "acos",      "atan",        "sinh",  "cosh",  "sigmoid",
      "neg",   "abs",   "square", "isnan",   "isinf", "isfinite",  "logical_not", "mul",   "add",   "sub",
      "div",   "pow",   "eq",    "ne",       "where", "masked_fill", "logical_and", "logical_or", "logical_xor", "sgn"};
  for (auto o : ops)
    if (o == op) return true;
  return false;
}
bool takes_barebones_unsigned(std::string_view op) {
  static constexpr std::string_view ops[] = {"eq", "ne", "where", "masked_fill", "logical_not", "logical_and",
                                             "logical_or", "logical_xor", "isnan", "isinf", "isfinite"};
  for (auto o : ops)
    if (o == op) return true;
  return false;
}
// The float8 dtypes (Note [Float8]): what torch's CPU build computes for them.
// abs is not defined for the unsigned e8m0fnu; mul takes two float8 tensors
// (a Python number operand is refused, as torch does).
bool takes_float8(std::string_view op, ScalarType t) {
  static constexpr std::string_view ops[] = {"eq", "ne", "where", "isnan", "mul", "abs"};
  if (op == "abs" && t == ScalarType::Float8_e8m0fnu) return false;
  for (auto o : ops)
    if (o == op) return true;
  return false;
}
[[noreturn]] void not_implemented_for(const char* op, ScalarType t) {
  throw NotImplementedError(str("\"", op, "\" not implemented for '", scalar_type_name(t), "' (", op,
                                " does not support ", dtype_name(t), " tensors)"));
}
}  // namespace

void check_pointwise_dtype(const char* op, ScalarType t) {
  if (is_basic_type(t)) return;
  if (is_float8_type(t)) {
    if (!takes_float8(op, t)) not_implemented_for(op, t);
    return;
  }
  if (is_complex_type(t) ? !takes_complex(op) : !takes_barebones_unsigned(op)) not_implemented_for(op, t);
}

STRATA_HOT Tensor run_pointwise(const char* op, const DispatchStub<PointwiseFn>& stub, PwRule rule,
                     std::initializer_list<Tensor> inputs, const std::optional<Tensor>& out, const PwArgs& args, int skip_promotion_of) {
  TensorIterator::Config cfg;
  cfg.op = op;
  cfg.skip_promotion_of = skip_promotion_of;
  if (out && out->defined()) {
    cfg.out = *out;
    cfg.inplace = inputs.size() > 0 && out->is_same(*inputs.begin());
  }
  switch (rule) {
    case PwRule::Promote:
      break;
    case PwRule::IntToFloat:
      cfg.int_to_float = true;
      break;
    case PwRule::BoolOut:
      cfg.out_dtype = ScalarType::Bool;
      break;
    case PwRule::BoolCompute:
      cfg.out_dtype = ScalarType::Bool;
      cfg.compute_dtype = ScalarType::Bool;
      break;
    case PwRule::IntegralOnly:
      break;
  }
  TensorIterator it(std::move(cfg), inputs);
  if (rule == PwRule::IntegralOnly) {
    STRATA_CHECK_T(NotImplementedError, is_integral_type(it.common_dtype(), true), op, ": expected integral or bool tensors, but got ",
                      dtype_name(it.common_dtype()), " (bitwise ops are not defined for floating point)");
  }
  if (!is_basic_type(it.common_dtype())) [[unlikely]] {
    check_pointwise_dtype(op, it.common_dtype());
    // torch multiplies float8 tensors only by float8 tensors, never by a Python number.
    if (is_float8_type(it.common_dtype()) && std::string_view(op) == "mul")
      for (const Tensor& t : inputs)
        if (t.impl()->is_wrapped_number()) not_implemented_for(op, it.common_dtype());
  }
  if (!it.is_meta() && it.numel() > 0) stub(it.device().type, it, args);
  if (it.output().defined() && out && out->defined()) out->bump_version();
  return it.finish();
}

namespace {

using OptT = std::optional<Tensor>;

#define STRATA_POINTWISE_UNARY(name, rule)                                      \
  STRATA_DEFINE_STUB(name##_stub, PointwiseFn);                                 \
  Tensor name##_impl(const Tensor& self, const OptT& out) {                     \
    return run_pointwise(#name, name##_stub, rule, {self}, out);                \
  }                                                                             \
  STRATA_IMPL_CPU_META(name, name##_impl);

#define STRATA_POINTWISE_BINARY(name, rule)                                     \
  STRATA_DEFINE_STUB(name##_stub, PointwiseFn);                                 \
  Tensor name##_impl(const Tensor& self, const Tensor& other, const OptT& out) { \
    return run_pointwise(#name, name##_stub, rule, {self, other}, out);         \
  }                                                                             \
  STRATA_IMPL_CPU_META(name, name##_impl);

}  // namespace

// Stubs must have external linkage: the per-ISA kernel files register into them.
#define STRATA_PW_UNARY_LIST(X) \
  X(exp, IntToFloat) X(exp2, IntToFloat) X(expm1, IntToFloat) X(log, IntToFloat) X(log2, IntToFloat) \
  X(log10, IntToFloat) X(log1p, IntToFloat) X(sqrt, IntToFloat) X(rsqrt, IntToFloat)                \
  X(reciprocal, IntToFloat) X(sin, IntToFloat) X(cos, IntToFloat) X(tan, IntToFloat)                 \
  X(tanh, IntToFloat) X(asin, IntToFloat) X(acos, IntToFloat) X(atan, IntToFloat) X(sinh, IntToFloat) \
  X(cosh, IntToFloat) X(sigmoid, IntToFloat) X(erf, IntToFloat) X(erfc, IntToFloat)                   \
  X(sign, Promote) X(square, Promote) X(floor, Promote) X(ceil, Promote)             \
  X(trunc, Promote) X(isnan, BoolOut) X(isinf, BoolOut) X(isfinite, BoolOut)                          \
  X(logical_not, BoolCompute) X(bitwise_not, IntegralOnly)

#define STRATA_PW_BINARY_LIST(X)                                                                      \
  X(mul, Promote) X(maximum, Promote) X(minimum, Promote)     \
  X(atan2, IntToFloat) X(eq, BoolOut) X(ne, BoolOut) X(lt, BoolOut) X(le, BoolOut) X(gt, BoolOut)    \
  X(ge, BoolOut) X(logical_and, BoolCompute) X(logical_or, BoolCompute) X(logical_xor, BoolCompute)  \
  X(bitwise_and, IntegralOnly) X(bitwise_or, IntegralOnly) X(bitwise_xor, IntegralOnly)

#define STRATA_X_UNARY(n, r) STRATA_POINTWISE_UNARY(n, PwRule::r)
#define STRATA_X_BINARY(n, r) STRATA_POINTWISE_BINARY(n, PwRule::r)
STRATA_PW_UNARY_LIST(STRATA_X_UNARY)

// abs and angle of a complex tensor are real (float32 for complex64).
STRATA_DEFINE_STUB(abs_stub, PointwiseFn);
Tensor abs_impl(const Tensor& self, const OptT& out) {
  if (!is_complex_type(self.dtype())) return run_pointwise("abs", abs_stub, PwRule::Promote, {self}, out);
  // out=self (abs(z, out=z)) writes |z| + 0j, as torch; Tensor.abs_ refuses a complex tensor in Python.
  TensorIterator::Config cfg;
  cfg.op = "abs";
  cfg.out_dtype = to_real_value_type(self.dtype());
  if (out && out->defined()) cfg.out = *out;
  TensorIterator it(std::move(cfg), {self});
  if (!it.is_meta() && it.numel() > 0) abs_stub(it.device().type, it, PwArgs{});
  if (out && out->defined()) out->bump_version();
  return it.finish();
}
STRATA_IMPL_CPU_META(abs, abs_impl);
STRATA_PW_BINARY_LIST(STRATA_X_BINARY)

// ---- ops with extra arguments or checks -------------------------------------

namespace {

// Integer division by zero raises (it would be SIGFPE on x86 otherwise).
void check_int_divisor(const char* op, const Tensor& self, const Tensor& other) {
  ScalarType common = result_type({self, other});
  if (!is_integral_type(common, true) || other.device().is_meta() || other.numel() == 0) return;
  Tensor zero = eq(other, scalar_to_tensor(Scalar(int64_t(0)), other.dtype(), other.device(), true));
  STRATA_CHECK(!any_nonzero(zero), op, ": ZeroDivisionError: integer division by zero (divisor ",
               other.describe(), ")");
}

}  // namespace

STRATA_DEFINE_STUB(neg_stub, PointwiseFn);
Tensor neg_impl(const Tensor& self, const OptT& out) {
  STRATA_CHECK(self.dtype() != ScalarType::Bool, "neg: Negation, the `-` operator, on a bool tensor is not "
                    "supported. If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.");
  return run_pointwise("neg", neg_stub, PwRule::Promote, {self}, out);
}
STRATA_IMPL_CPU_META(neg, neg_impl);

STRATA_DEFINE_STUB(round_stub, PointwiseFn);
Tensor round_impl(const Tensor& self, int64_t decimals, const OptT& out) {
  PwArgs a;
  a.a = static_cast<double>(decimals);
  return run_pointwise("round", round_stub, PwRule::Promote, {self}, out, a);
}
STRATA_IMPL_CPU_META(round, round_impl);

STRATA_DEFINE_STUB(nan_to_num_stub, PointwiseFn);
Tensor nan_to_num_impl(const Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                       std::optional<double> neginf, const OptT& out) {
  PwArgs a;
  a.a = nan.value_or(0.0);
  // Defaults: the largest and lowest finite value of self's dtype.
  double big = 0;
  switch (self.dtype()) {
    case ScalarType::Float16: big = 65504.0; break;
    case ScalarType::BFloat16: big = 3.3895313892515355e38; break;
    case ScalarType::Float32: big = std::numeric_limits<float>::max(); break;
    default: big = std::numeric_limits<double>::max(); break;
  }
  a.b = posinf.value_or(big);
  a.c = neginf.value_or(-big);
  return run_pointwise("nan_to_num", nan_to_num_stub, PwRule::Promote, {self}, out, a);
}
STRATA_IMPL_CPU_META(nan_to_num, nan_to_num_impl);

STRATA_DEFINE_STUB(add_stub, PointwiseFn);
// self + alpha * other for a complex alpha (the kernels take a real alpha):
// out of line, so the hot add path keeps its small frame.
[[gnu::noinline, gnu::cold]] Tensor add_complex_alpha(const Tensor& self, const Tensor& other, const Scalar& alpha,
                                                      const OptT& out, bool subtract) {
  Tensor scaled = mul(other, scalar_to_tensor(alpha, ScalarType::ComplexDouble, Device(), true));
  return subtract ? sub(self, scaled, Scalar(1), out) : add(self, scaled, Scalar(1), out);
}

STRATA_HOT Tensor add_impl(const Tensor& self, const Tensor& other, const Scalar& alpha, const OptT& out) {
  // The default alpha (the integer 1) passes both checks for every dtype.
  if (!(alpha.is_integral(false) && alpha.to_int() == 1)) {
    if (alpha.is_complex()) [[unlikely]]
      return add_complex_alpha(self, other, alpha, out, false);
    ScalarType common = result_type({self, other});
    STRATA_CHECK(!(alpha.is_floating_point() && is_integral_type(common, true)), "add: For integral input tensors, "
                 "argument alpha must not be a floating point number.");
    STRATA_CHECK(!(alpha.is_integral(false) && common == ScalarType::Bool) || alpha.to_int() == 1 ||
                     alpha.to_int() == 0,
                 "add: Boolean alpha only supported for Boolean results.");
  }
  PwArgs a;
  a.a = alpha.to_double();
  return run_pointwise("add", add_stub, PwRule::Promote, {self, other}, out, a);
}
STRATA_IMPL_CPU_META(add, add_impl);

Tensor sub_impl(const Tensor& self, const Tensor& other, const Scalar& alpha, const OptT& out) {
  STRATA_CHECK(self.dtype() != ScalarType::Bool || other.dtype() != ScalarType::Bool,
                    "sub: Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or "
                    "`logical_xor()` operator instead.");
  STRATA_CHECK(self.dtype() != ScalarType::Bool && other.dtype() != ScalarType::Bool,
                    "sub: Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to "
                    "invert a mask, use the `~` or `logical_not()` operator instead.");
  STRATA_CHECK(!(alpha.is_floating_point() && is_integral_type(result_type({self, other}), true)),
                    "sub: For integral input tensors, argument alpha must not be a floating point number.");
  if (alpha.is_complex()) [[unlikely]]
    return add_complex_alpha(self, other, alpha, out, true);
  PwArgs a;
  a.a = -alpha.to_double();
  return run_pointwise("sub", add_stub, PwRule::Promote, {self, other}, out, a);
}
STRATA_IMPL_CPU_META(sub, sub_impl);

STRATA_DEFINE_STUB(div_true_stub, PointwiseFn);
STRATA_DEFINE_STUB(div_floor_stub, PointwiseFn);
STRATA_DEFINE_STUB(div_trunc_stub, PointwiseFn);
Tensor div_impl(const Tensor& self, const Tensor& other, std::optional<std::string_view> mode, const OptT& out) {
  if (!mode) return run_pointwise("div", div_true_stub, PwRule::IntToFloat, {self, other}, out);
  STRATA_CHECK_VALUE(*mode == "floor" || *mode == "trunc", "div expected rounding_mode to be one of None, 'trunc', "
                     "or 'floor' but found '", *mode, "'");
  check_int_divisor("div", self, other);
  return run_pointwise("div", *mode == "floor" ? div_floor_stub : div_trunc_stub, PwRule::Promote, {self, other},
                       out);
}
STRATA_IMPL_CPU_META(div, div_impl);

Tensor floor_divide_impl(const Tensor& self, const Tensor& other, const OptT& out) {
  check_int_divisor("floor_divide", self, other);
  return run_pointwise("floor_divide", div_floor_stub, PwRule::Promote, {self, other}, out);
}
STRATA_IMPL_CPU_META(floor_divide, floor_divide_impl);

STRATA_DEFINE_STUB(pow_stub, PointwiseFn);
Tensor pow_impl(const Tensor& self, const Tensor& exponent, const OptT& out) {
  ScalarType common = result_type({self, exponent});
  // Only a negative Python-number exponent is an error; tensors of exponents
  // compute elementwise (2 ** -1 == 0), as in torch.
  if (is_integral_type(common, false) && exponent.impl()->is_wrapped_number() && !exponent.device().is_meta() &&
      is_integral_type(exponent.dtype(), false)) {
    Tensor negative = lt(exponent, scalar_to_tensor(Scalar(int64_t(0)), exponent.dtype(), exponent.device(), true));
    STRATA_CHECK(!any_nonzero(negative), "pow: Integers to negative integer powers are not allowed.");
  }
  return run_pointwise("pow", pow_stub, PwRule::Promote, {self, exponent}, out);
}
STRATA_IMPL_CPU_META(pow, pow_impl);

// remainder and fmod on integers need the same zero check as division.
STRATA_DEFINE_STUB(remainder_stub, PointwiseFn);
Tensor remainder_impl(const Tensor& self, const Tensor& other, const OptT& out) {
  check_int_divisor("remainder", self, other);
  return run_pointwise("remainder", remainder_stub, PwRule::Promote, {self, other}, out);
}
STRATA_IMPL_CPU_META(remainder, remainder_impl);

STRATA_DEFINE_STUB(fmod_stub, PointwiseFn);
Tensor fmod_impl(const Tensor& self, const Tensor& other, const OptT& out) {
  check_int_divisor("fmod", self, other);
  return run_pointwise("fmod", fmod_stub, PwRule::Promote, {self, other}, out);
}
STRATA_IMPL_CPU_META(fmod, fmod_impl);

STRATA_DEFINE_STUB(where_stub, PointwiseFn);
Tensor where_impl(const Tensor& cond, const Tensor& self, const Tensor& other, const OptT& out) {
  STRATA_CHECK(cond.dtype() == ScalarType::Bool || cond.dtype() == ScalarType::UInt8,
                    "where expected condition to be a boolean tensor, but got a tensor with dtype ",
                    dtype_name(cond.dtype()));
  Tensor c = cond.dtype() == ScalarType::Bool ? cond : to_dtype(cond, ScalarType::Bool);
  return run_pointwise("where", where_stub, PwRule::Promote, {c, self, other}, out, {}, 0);
}
STRATA_IMPL_CPU_META(where, where_impl);

STRATA_DEFINE_STUB(lerp_stub, PointwiseFn);
Tensor lerp_impl(const Tensor& self, const Tensor& end, const Tensor& weight, const OptT& out) {
  STRATA_CHECK_TYPE(is_floating_type(self.dtype()) && self.dtype() == end.dtype(), "lerp: expected self and end to "
                    "be floating-point tensors of the same dtype, but got ", dtype_name(self.dtype()), " and ",
                    dtype_name(end.dtype()));
  return run_pointwise("lerp", lerp_stub, PwRule::Promote, {self, end, weight}, out);
}
STRATA_IMPL_CPU_META(lerp, lerp_impl);

STRATA_DEFINE_STUB(clamp_stub, PointwiseFn);
STRATA_DEFINE_STUB(clamp_min_stub, PointwiseFn);
STRATA_DEFINE_STUB(clamp_max_stub, PointwiseFn);
Tensor clamp_impl(const Tensor& self, const OptT& min, const OptT& max, const OptT& out) {
  bool has_min = min && min->defined(), has_max = max && max->defined();
  STRATA_CHECK(has_min || has_max, "clamp: At least one of 'min' or 'max' must not be None");
  if (has_min && has_max) return run_pointwise("clamp", clamp_stub, PwRule::Promote, {self, *min, *max}, out);
  if (has_min) return run_pointwise("clamp", clamp_min_stub, PwRule::Promote, {self, *min}, out);
  return run_pointwise("clamp", clamp_max_stub, PwRule::Promote, {self, *max}, out);
}
STRATA_IMPL_CPU_META(clamp, clamp_impl);

Tensor masked_fill_impl(const Tensor& self, const Tensor& mask, const Tensor& value, const OptT& out) {
  STRATA_CHECK(mask.dtype() == ScalarType::Bool, "masked_fill only supports boolean masks, but got mask with "
                    "dtype ", dtype_name(mask.dtype()));
  STRATA_CHECK(value.dim() == 0, "masked_fill only supports a 0-dimensional value tensor, but got tensor with ",
               value.dim(), " dimension(s).");
  // The result keeps self's dtype (value is cast into it), in place or not, so
  // promotion between self and the cast value cannot change it.
  Tensor v = to_dtype(value, self.dtype());
  return run_pointwise("masked_fill", where_stub, PwRule::Promote, {mask, v, self}, out, {}, 0);
}
STRATA_IMPL_CPU_META(masked_fill, masked_fill_impl);

}  // namespace strata
