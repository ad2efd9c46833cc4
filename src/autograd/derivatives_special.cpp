// Derivatives of the ops in decl/special.def that torch differentiates
// (torch has none for the Bessel, Airy, zeta and polynomial functions, nor
// for gammainc/gammaincc with respect to their first argument).
#include <cmath>

#include "autograd/derivative_util.h"
#include "ops/api/math_more.h"
#include "ops/api/special.h"

namespace strata::autograd {
namespace {

constexpr double kPi = 3.14159265358979323846;

Tensor masked(const Tensor& cond, const Tensor& g) { return where(cond, g, zeros_like(g)); }
Tensor is_zero(const Tensor& x) { return eq(x, num(x, 0.0)); }

// -(1 + log x)
void entr_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor x = ctx.input(0);
  out.set(0, mul(g[0], neg(add(log(x), num(x, 1.0)))));
}
STRATA_DERIVATIVE(special_entr, save_inputs(0), save_outputs(), entr_backward);

// 2 x erfcx(x) - 2 / sqrt(pi)
void erfcx_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor x = ctx.input(0), y = ctx.output(0);
  out.set(0, mul(g[0], sub(mul(num(x, 2.0), mul(x, y)), num(x, 2 / std::sqrt(kPi)))));
}
STRATA_DERIVATIVE(special_erfcx, save_inputs(0), save_outputs(0), erfcx_backward);

// i1e(x) - sign(x) i0e(x)
void i0e_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor x = ctx.input(0), y = ctx.output(0);
  out.set(0, mul(g[0], sub(special_i1e(x), mul(sign(x), y))));
}
STRATA_DERIVATIVE(special_i0e, save_inputs(0), save_outputs(0), i0e_backward);

// i0e(x) - i1e(x) (sign(x) + 1/x), 1/2 at 0.
void i1e_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor x = ctx.input(0), y = ctx.output(0);
  Tensor safe = where(is_zero(x), ones_like(x), x);
  Tensor d = sub(special_i0e(x), mul(y, add(sign(x), reciprocal(safe))));
  out.set(0, mul(g[0], where(is_zero(x), full_like(d, Scalar(0.5)), d)));
}
STRATA_DERIVATIVE(special_i1e, save_inputs(0), save_outputs(0), i1e_backward);

// The standard normal density.
void ndtr_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor x = ctx.input(0);
  out.set(0, mul(g[0], mul(exp(mul(mul(x, x), num(x, -0.5))), num(x, 1 / std::sqrt(2 * kPi)))));
}
STRATA_DERIVATIVE(special_ndtr, save_inputs(0), save_outputs(), ndtr_backward);

// density / ndtr, in log space: exp(-x^2/2 - log_ndtr(x)) / sqrt(2 pi)
void log_ndtr_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor x = ctx.input(0), y = ctx.output(0);
  out.set(0, mul(g[0], mul(exp(sub(mul(mul(x, x), num(x, -0.5)), y)), num(x, 1 / std::sqrt(2 * kPi)))));
}
STRATA_DERIVATIVE(special_log_ndtr, save_inputs(0), save_outputs(0), log_ndtr_backward);

// sqrt(2 pi) exp(ndtri(p)^2 / 2)
void ndtri_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor y = ctx.output(0);
  out.set(0, mul(g[0], mul(exp(mul(mul(y, y), num(y, 0.5))), num(y, std::sqrt(2 * kPi)))));
}
STRATA_DERIVATIVE(special_ndtri, save_inputs(), save_outputs(0), ndtri_backward);

// self: log1p(other), 0 where self == 0 and other <= -1 (torch's choice); other: self / (1 + other).
void xlog1py_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor x = ctx.input(0), y = ctx.input(1);
  if (ctx.needs_grad(0)) {
    Tensor zero_case = logical_and(is_zero(x), le(y, num(y, -1.0)));
    out.set(0, masked(logical_not(zero_case), special_xlog1py(g[0], y)));
  }
  if (ctx.needs_grad(1)) out.set(1, div(mul(g[0], x), add(y, num(y, 1.0))));
}
STRATA_DERIVATIVE(special_xlog1py, save_inputs(0, 1), save_outputs(), xlog1py_backward);

// d/dx P(a, x) = x^(a-1) e^-x / Gamma(a); the derivative in a is not implemented (as in torch).
Tensor gamma_density(const Tensor& a, const Tensor& x) {
  return exp(sub(sub(mul(sub(a, num(a, 1.0)), log(x)), x), lgamma(a)));
}
void igamma_grad(const BackwardCtx& ctx, const variable_list& g, GradOut& out, double sign) {
  STRATA_CHECK_T(NotImplementedError, !ctx.needs_grad(0), ctx.op_name(),
                 ": the derivative for 'self' (the shape parameter a) is not implemented");
  if (ctx.needs_grad(1)) out.set(1, mul(g[0], mul(gamma_density(ctx.input(0), ctx.input(1)), num(g[0], sign))));
}
void igamma_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) { igamma_grad(ctx, g, out, 1.0); }
void igammac_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) { igamma_grad(ctx, g, out, -1.0); }
STRATA_DERIVATIVE(igamma, save_inputs(0, 1), save_outputs(), igamma_backward);
STRATA_DERIVATIVE(igammac, save_inputs(0, 1), save_outputs(), igammac_backward);

// The implicit reparameterisation gradient of a Gamma(alpha, 1) sample.
void standard_gamma_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  out.set(0, mul(g[0], standard_gamma_grad(ctx.input(0), ctx.output(0))));
}
STRATA_DERIVATIVE(_standard_gamma, save_inputs(0), save_outputs(0), standard_gamma_backward);

}  // namespace
}  // namespace strata::autograd
