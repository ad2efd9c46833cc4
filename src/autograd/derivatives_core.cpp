// Derivatives of the basic arithmetic, sum/mean and matrix products: the ops
// every model uses. Other families live in derivatives_<family>.cpp.
#include "autograd/derivative_util.h"
#include "core/shape.h"

namespace strata::autograd {

std::vector<int64_t> reduced_dims(const IValue& dim_arg, int64_t ndim) {
  std::vector<int64_t> dims;
  if (dim_arg.is_none() || (!dim_arg.is_none() && dim_arg.to_int_list().empty())) {
    for (int64_t i = 0; i < ndim; ++i) dims.push_back(i);
    return dims;
  }
  for (int64_t d : dim_arg.to_int_list()) dims.push_back(ndim == 0 ? 0 : wrap_dim(d, ndim, "backward"));
  std::sort(dims.begin(), dims.end());
  dims.erase(std::unique(dims.begin(), dims.end()), dims.end());
  return dims;
}

Tensor unsqueeze_dims(const Tensor& g, const std::vector<int64_t>& dims, int64_t in_ndim, bool keepdim) {
  if (keepdim || in_ndim == 0) return g;
  Tensor r = g;
  for (int64_t d : dims) r = unsqueeze(r, d);  // ascending, so earlier inserts shift later dims correctly
  return r;
}

namespace {

// ---- arithmetic -------------------------------------------------------------
void add_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  if (ctx.needs_grad(0)) out.set(0, g[0]);
  if (ctx.needs_grad(1)) {
    Scalar alpha = ctx.arg_scalar(2);
    out.set(1, alpha.to<double>() == 1.0 ? g[0] : mul(g[0], num(g[0], alpha)));
  }
}
STRATA_DERIVATIVE(add, save_inputs(), save_outputs(), add_backward);

void sub_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  if (ctx.needs_grad(0)) out.set(0, g[0]);
  if (ctx.needs_grad(1)) {
    Scalar alpha = ctx.arg_scalar(2);
    out.set(1, alpha.to<double>() == 1.0 ? neg(g[0]) : mul(g[0], num(g[0], -alpha.to<double>())));
  }
}
STRATA_DERIVATIVE(sub, save_inputs(), save_outputs(), sub_backward);

void mul_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  // conj: see Note [Complex gradients] (autograd/derivatives_complex.cpp).
  if (ctx.needs_grad(0)) out.set(0, mul(g[0], cj(ctx.input(1))));
  if (ctx.needs_grad(1)) out.set(1, mul(g[0], cj(ctx.input(0))));
}
STRATA_DERIVATIVE(mul, save_inputs(0, 1), save_outputs(), mul_backward);

void div_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  STRATA_CHECK(ctx.arg_is_none(2), "div: the derivative with rounding_mode='", ctx.arg_str(2),
               "' is zero almost everywhere and is not implemented");
  Tensor other = cj(ctx.input(1));
  if (ctx.needs_grad(0)) out.set(0, div(g[0], other));
  if (ctx.needs_grad(1)) out.set(1, neg(div(mul(g[0], cj(ctx.input(0))), mul(other, other))));
}
STRATA_DERIVATIVE(div, save_inputs(0, 1), save_outputs(), div_backward);

void neg_backward(const BackwardCtx&, const variable_list& g, GradOut& out) { out.set(0, neg(g[0])); }
STRATA_DERIVATIVE(neg, save_inputs(), save_outputs(), neg_backward);

void exp_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  out.set(0, mul(g[0], cj(ctx.output(0))));
}
STRATA_DERIVATIVE(exp, save_inputs(), save_outputs(0), exp_backward);

void log_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  out.set(0, div(g[0], cj(ctx.input(0))));
}
STRATA_DERIVATIVE(log, save_inputs(0), save_outputs(), log_backward);

// The fused one-pass backwards of ops/activation_backward.cpp (differentiable
// themselves, so double backward works).
void tanh_deriv(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor y = ctx.output(0);
  if (is_complex_type(y.dtype())) {  // the fused kernel is real-only: g * conj(1 - y^2)
    out.set(0, mul(g[0], cj(sub(num(y, 1.0), mul(y, y)))));
    return;
  }
  out.set(0, tanh_backward(g[0], y));
}
STRATA_DERIVATIVE(tanh, save_inputs(), save_outputs(0), tanh_deriv);

void sigmoid_deriv(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor y = ctx.output(0);
  if (is_complex_type(y.dtype())) {  // g * conj(y (1 - y))
    out.set(0, mul(g[0], cj(mul(y, sub(num(y, 1.0), y)))));
    return;
  }
  out.set(0, sigmoid_backward(g[0], y));
}
STRATA_DERIVATIVE(sigmoid, save_inputs(), save_outputs(0), sigmoid_deriv);

void sqrt_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  out.set(0, div(g[0], mul(cj(ctx.output(0)), num(g[0], 2.0))));
}
STRATA_DERIVATIVE(sqrt, save_inputs(), save_outputs(0), sqrt_backward);

void square_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  out.set(0, mul(g[0], mul(cj(ctx.input(0)), num(g[0], 2.0))));
}
STRATA_DERIVATIVE(square, save_inputs(0), save_outputs(), square_backward);

void pow_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor base = ctx.input(0), e = ctx.input(1);
  if (ctx.needs_grad(0)) {
    // e * base^(e-1), with 0 where e == 0 (so 0^0 does not give nan)
    Tensor d = mul(e, pow(base, sub(e, num(e, 1.0))));
    d = where(eq(e, num(e, 0.0)), zeros_like(d), d);
    out.set(0, mul(g[0], cj(d)));
  }
  if (ctx.needs_grad(1)) {
    // base^e * log(base), with 0 where base == 0 and e >= 0
    Tensor y = ctx.output(0);
    Tensor d = mul(y, log(base));
    d = where(logical_and(eq(base, num(base, 0.0)), ge(e, num(e, 0.0))), zeros_like(d), d);
    out.set(1, mul(g[0], cj(d)));
  }
}
STRATA_DERIVATIVE(pow, save_inputs(0, 1), save_outputs(0), pow_backward);

// Like torch: threshold_backward(grad, relu(x), 0), so the gradient passes where the output is > 0 or NaN.
void relu_deriv(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  out.set(0, threshold_backward(g[0], ctx.output(0), Scalar(0)));
}
STRATA_DERIVATIVE(relu, save_inputs(), save_outputs(0), relu_deriv);

void where_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor cond = ctx.input(0);
  Tensor z = zeros_like(g[0]);
  if (ctx.needs_grad(1)) out.set(1, where(cond, g[0], z));
  if (ctx.needs_grad(2)) out.set(2, where(cond, z, g[0]));
}
STRATA_DERIVATIVE(where, save_inputs(0), save_outputs(), where_backward);

// ---- copies and casts --------------------------------------------------------
void clone_backward(const BackwardCtx&, const variable_list& g, GradOut& out) { out.set(0, g[0]); }
STRATA_DERIVATIVE(clone, save_inputs(), save_outputs(), clone_backward);

void to_copy_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const TensorGeometry& in = ctx.input_geometry(0);
  Tensor r = g[0];
  if (r.device() != in.device) r = to_device(r, in.device);
  out.set(0, to_dtype(r, in.dtype));
}
STRATA_DERIVATIVE_NAMED(_to_copy, save_inputs(), save_outputs(), to_copy_backward, "ToCopyBackward0");

void copy_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  // self is entirely overwritten: its old value gets no gradient.
  if (ctx.needs_grad(0)) out.set(0, zeros_like(g[0]));
  if (ctx.needs_grad(1)) {
    const TensorGeometry& src = ctx.input_geometry(1);
    Tensor r = g[0];
    if (r.device() != src.device) r = to_device(r, src.device);
    out.set(1, r);
  }
}
STRATA_DERIVATIVE(copy_, save_inputs(), save_outputs(), copy_backward);

// ---- reductions ----------------------------------------------------------------
void sum_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const TensorGeometry& in = ctx.input_geometry(0);
  const int64_t nd = static_cast<int64_t>(in.sizes.size());
  auto dims = reduced_dims(ctx.arg(1), nd);
  out.set(0, expand(unsqueeze_dims(g[0], dims, nd, ctx.arg_bool(2)), in.sizes));
}
STRATA_DERIVATIVE(sum, save_inputs(), save_outputs(), sum_backward);

void mean_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const TensorGeometry& in = ctx.input_geometry(0);
  const int64_t nd = static_cast<int64_t>(in.sizes.size());
  auto dims = reduced_dims(ctx.arg(1), nd);
  int64_t count = 1;
  for (int64_t d : dims) count *= nd == 0 ? 1 : in.sizes[d];
  Tensor r = expand(unsqueeze_dims(g[0], dims, nd, ctx.arg_bool(2)), in.sizes);
  out.set(0, div(r, num(r, static_cast<double>(count))));
}
STRATA_DERIVATIVE(mean, save_inputs(), save_outputs(), mean_backward);

// ---- matrix products -------------------------------------------------------------
void mm_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  if (ctx.needs_grad(0)) out.set(0, mm(g[0], cj(transpose(ctx.input(1), 0, 1))));
  if (ctx.needs_grad(1)) out.set(1, mm(cj(transpose(ctx.input(0), 0, 1)), g[0]));
}
STRATA_DERIVATIVE(mm, save_inputs(0, 1), save_outputs(), mm_backward);

void bmm_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  if (ctx.needs_grad(0)) out.set(0, bmm(g[0], cj(transpose(ctx.input(1), 1, 2))));
  if (ctx.needs_grad(1)) out.set(1, bmm(cj(transpose(ctx.input(0), 1, 2)), g[0]));
}
STRATA_DERIVATIVE(bmm, save_inputs(0, 1), save_outputs(), bmm_backward);

// matmul: treat 1-D operands as a row (left) or column (right) matrix, use the
// batched rule, then sum broadcast batch dims and drop the added dims again.
void matmul_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor a = ctx.input(0), b = ctx.input(1);
  const bool a1 = a.dim() == 1, b1 = b.dim() == 1;
  Tensor A = a1 ? unsqueeze(a, 0) : a;
  Tensor B = b1 ? unsqueeze(b, -1) : b;
  Tensor G = g[0];
  if (a1 && b1) {
    G = reshape(G, std::vector<int64_t>{1, 1});
  } else {
    if (a1) G = unsqueeze(G, -2);
    if (b1) G = unsqueeze(G, -1);
  }
  if (ctx.needs_grad(0)) {
    Tensor ga = matmul(G, cj(transpose(B, -1, -2)));
    out.set(0, reshape(sum_to(ga, A.sizes()), a.sizes()));
  }
  if (ctx.needs_grad(1)) {
    Tensor gb = matmul(cj(transpose(A, -1, -2)), G);
    out.set(1, reshape(sum_to(gb, B.sizes()), b.sizes()));
  }
}
STRATA_DERIVATIVE(matmul, save_inputs(0, 1), save_outputs(), matmul_backward);

}  // namespace
}  // namespace strata::autograd
