// Derivatives of the elementwise ops (pointwise.def) and the activations
// (nn.def) beyond the basic arithmetic in derivatives_core.cpp. Subgradients
// at kinks and ties follow PyTorch's choices so gradients match torch exactly.
#include <cmath>

#include "autograd/derivative_util.h"

namespace strata::autograd {
namespace {

constexpr double kLn2 = 0.69314718055994530942;
constexpr double kLn10 = 2.30258509299404568402;
constexpr double kTwoOverSqrtPi = 1.12837916709551257390;     // 2 / sqrt(pi)

Tensor zero_like_g(const Tensor& g) { return zeros_like(g); }
Tensor masked(const Tensor& cond, const Tensor& g) { return where(cond, g, zeros_like(g)); }

// ---- exponentials and logarithms ---------------------------------------------
void exp2_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor y = ctx.output(0);
  out.set(0, mul(g[0], cj(mul(y, num(y, kLn2)))));
}
STRATA_DERIVATIVE(exp2, save_inputs(), save_outputs(0), exp2_backward);

void expm1_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor y = ctx.output(0);
  out.set(0, mul(g[0], cj(add(y, num(y, 1.0)))));
}
STRATA_DERIVATIVE(expm1, save_inputs(), save_outputs(0), expm1_backward);

void log2_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor x = ctx.input(0);
  out.set(0, div(g[0], cj(mul(x, num(x, kLn2)))));
}
STRATA_DERIVATIVE(log2, save_inputs(0), save_outputs(), log2_backward);

void log10_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor x = ctx.input(0);
  out.set(0, div(g[0], cj(mul(x, num(x, kLn10)))));
}
STRATA_DERIVATIVE(log10, save_inputs(0), save_outputs(), log10_backward);

void log1p_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor x = ctx.input(0);
  out.set(0, div(g[0], cj(add(x, num(x, 1.0)))));
}
STRATA_DERIVATIVE_NAMED(log1p, save_inputs(0), save_outputs(), log1p_backward, "Log1PBackward0");

void rsqrt_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor y = ctx.output(0);
  out.set(0, mul(mul(g[0], num(y, -0.5)), cj(mul(y, mul(y, y)))));
}
STRATA_DERIVATIVE(rsqrt, save_inputs(), save_outputs(0), rsqrt_backward);

void reciprocal_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor y = ctx.output(0);
  out.set(0, neg(mul(g[0], cj(mul(y, y)))));
}
STRATA_DERIVATIVE(reciprocal, save_inputs(), save_outputs(0), reciprocal_backward);

// ---- trigonometric and hyperbolic ----------------------------------------------
void sin_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  out.set(0, mul(g[0], cj(cos(ctx.input(0)))));
}
STRATA_DERIVATIVE(sin, save_inputs(0), save_outputs(), sin_backward);

void cos_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  out.set(0, mul(g[0], cj(neg(sin(ctx.input(0))))));
}
STRATA_DERIVATIVE(cos, save_inputs(0), save_outputs(), cos_backward);

void tan_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor y = ctx.output(0);
  out.set(0, mul(g[0], cj(add(mul(y, y), num(y, 1.0)))));
}
STRATA_DERIVATIVE(tan, save_inputs(), save_outputs(0), tan_backward);

// 1 / sqrt(1 - x^2), shared by asin and acos.
Tensor inv_sqrt_one_minus_sq(const Tensor& x) { return rsqrt(sub(num(x, 1.0), mul(x, x))); }

void asin_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  out.set(0, mul(g[0], cj(inv_sqrt_one_minus_sq(ctx.input(0)))));
}
STRATA_DERIVATIVE(asin, save_inputs(0), save_outputs(), asin_backward);

void acos_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  out.set(0, neg(mul(g[0], cj(inv_sqrt_one_minus_sq(ctx.input(0))))));
}
STRATA_DERIVATIVE(acos, save_inputs(0), save_outputs(), acos_backward);

void atan_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor x = ctx.input(0);
  out.set(0, div(g[0], cj(add(mul(x, x), num(x, 1.0)))));
}
STRATA_DERIVATIVE(atan, save_inputs(0), save_outputs(), atan_backward);

void sinh_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  out.set(0, mul(g[0], cj(cosh(ctx.input(0)))));
}
STRATA_DERIVATIVE(sinh, save_inputs(0), save_outputs(), sinh_backward);

void cosh_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  out.set(0, mul(g[0], cj(sinh(ctx.input(0)))));
}
STRATA_DERIVATIVE(cosh, save_inputs(0), save_outputs(), cosh_backward);

void atan2_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor a = ctx.input(0), b = ctx.input(1);
  // At the origin torch gives both inputs a zero gradient instead of 0 * inf.
  // The denominator is replaced before the division so that double backward
  // does not see an inf in the discarded branch either.
  Tensor den = add(mul(a, a), mul(b, b));
  Tensor origin = eq(den, num(den, 0.0));
  Tensor recip = where(origin, zeros_like(den), reciprocal(where(origin, ones_like(den), den)));
  if (ctx.needs_grad(0)) out.set(0, mul(g[0], mul(b, recip)));
  if (ctx.needs_grad(1)) out.set(1, mul(g[0], mul(neg(a), recip)));
}
STRATA_DERIVATIVE(atan2, save_inputs(0, 1), save_outputs(), atan2_backward);

// ---- error function ----------------------------------------------------------------
// 2/sqrt(pi) * exp(-x^2)
Tensor erf_slope(const Tensor& x) { return mul(exp(neg(mul(x, x))), num(x, kTwoOverSqrtPi)); }

void erf_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  out.set(0, mul(g[0], erf_slope(ctx.input(0))));
}
STRATA_DERIVATIVE(erf, save_inputs(0), save_outputs(), erf_backward);

void erfc_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  out.set(0, neg(mul(g[0], erf_slope(ctx.input(0)))));
}
STRATA_DERIVATIVE(erfc, save_inputs(0), save_outputs(), erfc_backward);

// ---- sign-like and rounding --------------------------------------------------------
// torch multiplies by sgn(x): 0 at the kink and at nan. Built from
// comparisons rather than sign() so a nan input gives 0 whatever sign(nan) is.
void abs_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor x = ctx.input(0);
  if (is_complex_type(x.dtype())) {
    // |z| is real: dL/dz = g * z / |z| (sgn(z), 0 at 0).
    out.set(0, mul(g[0], sgn(x)));
    return;
  }
  Tensor s = sub(to_dtype(gt(x, num(x, 0.0)), g[0].dtype()), to_dtype(lt(x, num(x, 0.0)), g[0].dtype()));
  out.set(0, mul(g[0], s));
}
STRATA_DERIVATIVE(abs, save_inputs(0), save_outputs(), abs_backward);

// Piecewise constant: zero almost everywhere (torch returns zeros, not an error).
void zero_backward(const BackwardCtx&, const variable_list& g, GradOut& out) { out.set(0, zero_like_g(g[0])); }
STRATA_DERIVATIVE(sign, save_inputs(), save_outputs(), zero_backward);
STRATA_DERIVATIVE(floor, save_inputs(), save_outputs(), zero_backward);
STRATA_DERIVATIVE(ceil, save_inputs(), save_outputs(), zero_backward);
STRATA_DERIVATIVE(trunc, save_inputs(), save_outputs(), zero_backward);
STRATA_DERIVATIVE(round, save_inputs(), save_outputs(), zero_backward);

// Only finite inputs pass through; a multiply (not where) so that a nan
// incoming gradient stays nan, as in torch.
void nan_to_num_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  out.set(0, mul(g[0], isfinite(ctx.input(0))));
}
STRATA_DERIVATIVE(nan_to_num, save_inputs(0), save_outputs(), nan_to_num_backward);

// ---- remainder, fmod ------------------------------------------------------------------
// d/d(other) of self - q * other is -q with q the rounded quotient; q is
// piecewise constant, so it is computed without history (its own derivative
// is zero, as in torch's double backward).
void remainder_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  if (ctx.needs_grad(0)) out.set(0, g[0]);
  if (ctx.needs_grad(1)) {
    Tensor q = div(detach(ctx.input(0)), detach(ctx.input(1)), "floor");
    out.set(1, neg(mul(g[0], q)));
  }
}
STRATA_DERIVATIVE(remainder, save_inputs(0, 1), save_outputs(), remainder_backward);

void fmod_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  if (ctx.needs_grad(0)) out.set(0, g[0]);
  if (ctx.needs_grad(1)) {
    Tensor q = div(detach(ctx.input(0)), detach(ctx.input(1)), "trunc");
    out.set(1, neg(mul(g[0], q)));
  }
}
STRATA_DERIVATIVE(fmod, save_inputs(0, 1), save_outputs(), fmod_backward);

// ---- maximum, minimum -------------------------------------------------------------------
// Ties split the gradient in half. A nan on either side compares false
// everywhere, so both inputs get the full gradient (torch does the same).
Tensor extremum_grad(const Tensor& g, const Tensor& a, const Tensor& b, bool loses_when_less) {
  Tensor half = where(eq(a, b), div(g, num(g, 2.0)), g);
  Tensor loses = loses_when_less ? lt(a, b) : gt(a, b);
  return where(loses, zeros_like(half), half);
}

void maximum_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor a = ctx.input(0), b = ctx.input(1);
  if (ctx.needs_grad(0)) out.set(0, extremum_grad(g[0], a, b, true));
  if (ctx.needs_grad(1)) out.set(1, extremum_grad(g[0], b, a, true));
}
STRATA_DERIVATIVE(maximum, save_inputs(0, 1), save_outputs(), maximum_backward);

void minimum_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor a = ctx.input(0), b = ctx.input(1);
  if (ctx.needs_grad(0)) out.set(0, extremum_grad(g[0], a, b, false));
  if (ctx.needs_grad(1)) out.set(1, extremum_grad(g[0], b, a, false));
}
STRATA_DERIVATIVE(minimum, save_inputs(0, 1), save_outputs(), minimum_backward);

// ---- lerp, clamp, masked_fill ---------------------------------------------------------------
void lerp_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor w = ctx.input(2);
  if (ctx.needs_grad(0)) out.set(0, mul(g[0], sub(num(g[0], 1.0), w)));
  if (ctx.needs_grad(1)) out.set(1, mul(g[0], w));
  if (ctx.needs_grad(2)) out.set(2, mul(g[0], sub(ctx.input(1), ctx.input(0))));
}
STRATA_DERIVATIVE(lerp, save_inputs(0, 1, 2), save_outputs(), lerp_backward);

// self gets the gradient where min <= x <= max (so not where min > max, where
// the result is max); a bound gets it where it is the active one.
void clamp_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor x = ctx.input(0), lo = ctx.input(1), hi = ctx.input(2);
  const bool has_lo = lo.defined(), has_hi = hi.defined();
  if (ctx.needs_grad(0)) {
    Tensor keep;
    if (has_lo && has_hi) keep = logical_and(ge(x, lo), le(x, hi));
    else keep = has_lo ? ge(x, lo) : le(x, hi);
    out.set(0, masked(keep, g[0]));
  }
  if (has_lo && ctx.needs_grad(1)) {
    Tensor active = has_hi ? logical_and(lt(x, lo), lt(lo, hi)) : lt(x, lo);
    out.set(1, masked(active, g[0]));
  }
  if (has_hi && ctx.needs_grad(2)) {
    Tensor active = has_lo ? logical_or(gt(x, hi), lt(hi, lo)) : gt(x, hi);
    out.set(2, masked(active, g[0]));
  }
}
// Named after torch's node for the Scalar-bounds overload, by far the common call.
STRATA_DERIVATIVE_NAMED(clamp, save_inputs(0, 1, 2), save_outputs(), clamp_backward, "ClampBackward1");

void masked_fill_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor mask = ctx.input(1);
  Tensor z = zeros_like(g[0]);
  if (ctx.needs_grad(0)) out.set(0, where(mask, z, g[0]));
  if (ctx.needs_grad(2)) out.set(2, sum(where(mask, g[0], z)));
}
STRATA_DERIVATIVE(masked_fill, save_inputs(1), save_outputs(), masked_fill_backward);

// ---- activations -----------------------------------------------------------------------------
// Fused one-pass kernels (ops/activation_backward.cpp); their own derivatives give double backward.
void gelu_deriv(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  out.set(0, gelu_backward(g[0], ctx.input(0), ctx.arg_str(1)));
}
STRATA_DERIVATIVE(gelu, save_inputs(0), save_outputs(), gelu_deriv);

void silu_deriv(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  out.set(0, silu_backward(g[0], ctx.input(0)));
}
STRATA_DERIVATIVE(silu, save_inputs(0), save_outputs(), silu_deriv);

void mish_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor x = ctx.input(0);
  Tensor t = tanh(softplus(x, 1.0, 20.0));
  Tensor d = add(t, mul(mul(x, sigmoid(x)), sub(num(x, 1.0), mul(t, t))));
  out.set(0, mul(g[0], d));
}
STRATA_DERIVATIVE(mish, save_inputs(0), save_outputs(), mish_backward);

// sigmoid(beta x) below the threshold, 1 above it (where the op is linear).
// sigmoid instead of torch's z / (z + 1) avoids inf / inf for large thresholds.
void softplus_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor x = ctx.input(0);
  const double beta = ctx.arg_double(1), threshold = ctx.arg_double(2);
  Tensor bx = mul(x, num(x, beta));
  out.set(0, where(gt(bx, num(x, threshold)), g[0], mul(g[0], sigmoid(bx))));
}
STRATA_DERIVATIVE(softplus, save_inputs(0), save_outputs(), softplus_backward);

// At 0 the slope is negative_slope, like torch (x > 0 is the linear side).
void leaky_relu_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor x = ctx.input(0);
  const double slope = ctx.arg_double(1);
  out.set(0, where(gt(x, num(x, 0.0)), g[0], mul(g[0], num(x, slope))));
}
STRATA_DERIVATIVE(leaky_relu, save_inputs(0), save_outputs(), leaky_relu_backward);

// x <= 0: alpha scale input_scale exp(input_scale x); x > 0: scale. The exp
// sees only the non-positive part so that the unused branch cannot overflow
// to inf (0 * inf would poison double backward with nan).
void elu_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor x = ctx.input(0);
  const double alpha = ctx.arg_double(1), scale = ctx.arg_double(2), input_scale = ctx.arg_double(3);
  Tensor neg_side = le(x, num(x, 0.0));
  Tensor xn = where(neg_side, x, zeros_like(x));
  Tensor dneg = mul(exp(mul(xn, num(x, input_scale))), num(x, alpha * scale * input_scale));
  out.set(0, where(neg_side, mul(g[0], dneg), mul(g[0], num(x, scale))));
}
STRATA_DERIVATIVE(elu, save_inputs(0), save_outputs(), elu_backward);

// Zero on the clipped sides and at the bounds themselves (torch's convention).
void hardtanh_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor x = ctx.input(0);
  Tensor inside = logical_and(gt(x, num(x, ctx.arg_double(1))), lt(x, num(x, ctx.arg_double(2))));
  out.set(0, masked(inside, g[0]));
}
STRATA_DERIVATIVE(hardtanh, save_inputs(0), save_outputs(), hardtanh_backward);

void hardsigmoid_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor x = ctx.input(0);
  Tensor inside = logical_and(gt(x, num(x, -3.0)), lt(x, num(x, 3.0)));
  out.set(0, masked(inside, div(g[0], num(g[0], 6.0))));
}
STRATA_DERIVATIVE(hardsigmoid, save_inputs(0), save_outputs(), hardsigmoid_backward);

// x <= -3: 0; -3 < x < 3: x / 3 + 1/2; x >= 3: 1 (torch's boundary choices).
void hardswish_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor x = ctx.input(0);
  Tensor mid = mul(g[0], add(div(x, num(x, 3.0)), num(x, 0.5)));
  Tensor r = where(lt(x, num(x, 3.0)), mid, g[0]);
  out.set(0, masked(gt(x, num(x, -3.0)), r));
}
STRATA_DERIVATIVE(hardswish, save_inputs(0), save_outputs(), hardswish_backward);

// d/dx log(sigmoid(x)) = 1 - sigmoid(x) = sigmoid(-x), exact for large |x|.
void log_sigmoid_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  out.set(0, mul(g[0], sigmoid(neg(ctx.input(0)))));
}
STRATA_DERIVATIVE(log_sigmoid, save_inputs(0), save_outputs(), log_sigmoid_backward);

}  // namespace
}  // namespace strata::autograd
