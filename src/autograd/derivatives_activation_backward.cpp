// Derivatives of the fused activation backwards (decl/activation_backward.def),
// so that double backward through relu/gelu/silu/sigmoid/tanh keeps working.
// Each op is linear in grad_output, whose derivative is the op itself again;
// the derivative in the other argument is grad_output x f''.
#include "autograd/derivative_util.h"

namespace strata::autograd {
namespace {

constexpr double kInvSqrt2Pi = 0.39894228040143267794;   // 1 / sqrt(2 pi)
constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2 / pi)
constexpr double kGeluKappa = 0.044715;

// where(self <= threshold, 0, grad_output): piecewise constant in self.
void threshold_backward_deriv(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  if (ctx.needs_grad(0)) out.set(0, threshold_backward(g[0], ctx.input(1), ctx.arg_scalar(2)));
  if (ctx.needs_grad(1)) out.set(1, zeros_of(ctx.input_geometry(1)));
}
STRATA_DERIVATIVE(threshold_backward, save_inputs(1), save_outputs(), threshold_backward_deriv);

void gelu_backward_deriv(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor x = ctx.input(1);
  std::string_view approximate = ctx.arg_str(2);
  if (ctx.needs_grad(0)) out.set(0, gelu_backward(g[0], x, approximate));
  if (!ctx.needs_grad(1)) return;
  Tensor x2 = mul(x, x);
  Tensor d2;
  if (approximate == "tanh") {
    // f = 0.5 x (1 + t), t = tanh(u), u = k (x + kappa x^3):
    // f'' = (1 - t^2) (u' + 0.5 x (u'' - 2 t u'^2)), u' = k (1 + 3 kappa x^2), u'' = 6 k kappa x
    Tensor t = tanh(mul(add(x, mul(mul(x2, x), num(x, kGeluKappa))), num(x, kSqrt2OverPi)));
    Tensor du = mul(add(mul(x2, num(x, 3.0 * kGeluKappa)), num(x, 1.0)), num(x, kSqrt2OverPi));
    Tensor ddu = mul(x, num(x, 6.0 * kSqrt2OverPi * kGeluKappa));
    Tensor inner = sub(ddu, mul(mul(t, num(x, 2.0)), mul(du, du)));
    d2 = mul(sub(num(x, 1.0), mul(t, t)), add(du, mul(mul(x, num(x, 0.5)), inner)));
  } else {
    // (Phi + x phi)' = 2 phi - x^2 phi
    Tensor pdf = mul(exp(mul(x2, num(x, -0.5))), num(x, kInvSqrt2Pi));
    d2 = mul(pdf, sub(num(x, 2.0), x2));
  }
  out.set(1, mul(mul(g[0], ctx.input(0)), d2));
}
STRATA_DERIVATIVE(gelu_backward, save_inputs(0, 1), save_outputs(), gelu_backward_deriv);

// (s (1 + x (1 - s)))' = s (1 - s) (2 + x (1 - 2 s))
void silu_backward_deriv(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor x = ctx.input(1);
  if (ctx.needs_grad(0)) out.set(0, silu_backward(g[0], x));
  if (!ctx.needs_grad(1)) return;
  Tensor s = sigmoid(x);
  Tensor one_minus_2s = sub(num(x, 1.0), mul(s, num(x, 2.0)));
  Tensor d2 = mul(mul(s, sub(num(x, 1.0), s)), add(num(x, 2.0), mul(x, one_minus_2s)));
  out.set(1, mul(mul(g[0], ctx.input(0)), d2));
}
STRATA_DERIVATIVE(silu_backward, save_inputs(0, 1), save_outputs(), silu_backward_deriv);

// grad_output (1 - y) y
void sigmoid_backward_deriv(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor y = ctx.input(1);
  if (ctx.needs_grad(0)) out.set(0, sigmoid_backward(g[0], y));
  if (ctx.needs_grad(1)) out.set(1, mul(mul(g[0], ctx.input(0)), sub(num(y, 1.0), mul(y, num(y, 2.0)))));
}
STRATA_DERIVATIVE(sigmoid_backward, save_inputs(0, 1), save_outputs(), sigmoid_backward_deriv);

// grad_output (1 - y^2)
void tanh_backward_deriv(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor y = ctx.input(1);
  if (ctx.needs_grad(0)) out.set(0, tanh_backward(g[0], y));
  if (ctx.needs_grad(1)) out.set(1, mul(mul(g[0], ctx.input(0)), mul(y, num(y, -2.0))));
}
STRATA_DERIVATIVE(tanh_backward, save_inputs(0, 1), save_outputs(), tanh_backward_deriv);

}  // namespace
}  // namespace strata::autograd
