// Derivatives of the reduction family (src/ops/decl/reduction.def): prod,
// max/min (full, .dim), amax/amin, norm, logsumexp, cumsum, cumprod, softmax
// and log_softmax, var/std (+ _mean). sum and mean live in derivatives_core.cpp.
//
// Every formula is written with Strata ops so that double backward works.
// Masks (ties, zero positions, signs) are piecewise constant, so they are
// computed without history; where a masked-out branch would divide by zero,
// the denominator is made safe first, since where() sends a zero gradient into
// the unused branch and 0 * inf would turn it into nan in double backward.
#include "autograd/derivative_util.h"
#include "ops/api/complex.h"
#include "core/shape.h"

namespace strata::autograd {

namespace {

// Whether a tensor holds any exact zero. Meta tensors have no data: they take
// the zero-free formulas, which have the same shapes and dtypes.
bool any_zero(const Tensor& x) {
  if (x.device().is_meta() || x.numel() == 0) return false;
  GradModeGuard no_grad(false);
  return any(eq(x, num(x, 0.0))).item().to_bool();
}

// A constant (no history) computed from x: signs and masks.
Tensor sign_const(const Tensor& x) {
  GradModeGuard no_grad(false);
  return sign(x);
}

Tensor mask_as(const Tensor& mask, const Tensor& like) { return to_dtype(mask, like.dtype()); }

// The tensor's cast to an optional `dtype` argument, as the forward did.
Tensor cast_like_forward(const Tensor& x, const BackwardCtx& ctx, int dtype_arg) {
  if (ctx.arg_is_none(dtype_arg)) return x;
  ScalarType dt = ctx.arg(dtype_arg).to_dtype();
  return x.dtype() == dt ? x : to_dtype(x, dt);
}

// sum over `dim` from i to the end: the adjoint of cumsum.
Tensor reverse_cumsum(const Tensor& t, int64_t dim) {
  const int64_t d[1] = {dim};
  return flip(cumsum(flip(t, IntArrayRef(d)), dim), IntArrayRef(d));
}

// out[i] = prod_{j != i} x[j] along dim, exact with any number of zeros (no
// division): the exclusive product from the left times the one from the right.
Tensor prod_of_others(const Tensor& x, int64_t dim) {
  const int64_t n = x.size(dim);
  if (n == 1) return ones_like(x);
  std::vector<int64_t> one_sizes(x.sizes().begin(), x.sizes().end());
  one_sizes[dim] = 1;
  Tensor one = ones(one_sizes, x.dtype(), x.device());
  const int64_t d[1] = {dim};
  Tensor left = cumprod(cat(std::vector<Tensor>{one, narrow(x, dim, 0, n - 1)}, dim), dim);
  Tensor tail = flip(narrow(x, dim, 1, n - 1), IntArrayRef(d));
  Tensor right = flip(cumprod(cat(std::vector<Tensor>{one, tail}, dim), dim), IntArrayRef(d));
  return mul(left, right);
}

// Gradient split evenly among the elements selected by mask (ties of max/min).
// Like PyTorch's amax/amin, a slice with no selected element (a nan result)
// gets g / 0 * 0 = nan.
Tensor split_among(const Tensor& g, const Tensor& mask, const std::vector<int64_t>& dims) {
  Tensor m = mask_as(mask, g);
  Tensor count = dims.empty() ? sum(m) : sum(m, IntArrayRef(dims), true);
  return mul(div(g, count), m);
}

// prod and cumprod of a 0-d input are the identity; of an empty one, the
// gradient is empty. True when one of these answered.
bool trivial_product_grad(const Tensor& x, const Tensor& g, GradOut& out) {
  if (x.dim() == 0) {
    out.set(0, g);
    return true;
  }
  if (x.numel() == 0) {
    out.set(0, zeros_like(x, g.dtype()));
    return true;
  }
  return false;
}

// ---- prod ------------------------------------------------------------------------
void prod_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor x = cast_like_forward(ctx.input(0), ctx, 3);
  const int64_t nd = x.dim();
  if (trivial_product_grad(x, g[0], out)) return;
  std::vector<int64_t> dims;
  if (ctx.arg_is_none(1)) {
    for (int64_t i = 0; i < nd; ++i) dims.push_back(i);
  } else {
    dims.push_back(wrap_dim(ctx.arg_int(1), nd, "prod_backward"));
  }
  const bool keepdim = ctx.arg_bool(2);
  Tensor gx = unsqueeze_dims(g[0], dims, nd, keepdim);  // broadcasts against x in mul
  if (!any_zero(x)) {
    Tensor y = unsqueeze_dims(ctx.output(0), dims, nd, keepdim);
    out.set(0, mul(gx, cj(div(y, x))));
    return;
  }
  // With zeros, result / x is 0/0: use the product of the other elements,
  // which gives PyTorch's values (one zero: only it gets a gradient; several:
  // none) and stays exact for double backward.
  Tensor others = ctx.arg_is_none(1) ? reshape(prod_of_others(reshape(x, std::vector<int64_t>{-1}), 0), x.sizes())
                                      : prod_of_others(x, dims[0]);
  out.set(0, mul(gx, cj(others)));
}
STRATA_DERIVATIVE(prod, save_inputs(0), save_outputs(0), prod_backward);

// ---- max / min ---------------------------------------------------------------------
// Full reductions: the gradient is shared evenly by all elements equal to the
// result (all nans when the result is nan), like PyTorch's evenly_distribute.
void full_extremum_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor x = ctx.input(0), y = ctx.output(0);
  Tensor mask = logical_or(eq(x, y), logical_and(isnan(x), isnan(y)));
  Tensor count = sum(mask_as(mask, g[0]));
  out.set(0, where(mask, div(g[0], count), zeros_like(x, g[0].dtype())));
}
STRATA_DERIVATIVE_NAMED(max, save_inputs(0), save_outputs(0), full_extremum_backward, "MaxBackward1");
STRATA_DERIVATIVE_NAMED(min, save_inputs(0), save_outputs(0), full_extremum_backward, "MinBackward1");

// max.dim / min.dim: the whole gradient goes to the index the forward
// returned (its saved `indices` output).
void extremum_dim_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const TensorGeometry& in = ctx.input_geometry(0);
  const int64_t nd = static_cast<int64_t>(in.sizes.size());
  if (nd == 0) {
    out.set(0, g[0]);
    return;
  }
  const int64_t d = wrap_dim(ctx.arg_int(1), nd, "max_backward");
  const bool keepdim = ctx.arg_bool(2);
  Tensor idx = keepdim ? ctx.output(1) : unsqueeze(ctx.output(1), d);
  Tensor gv = keepdim ? g[0] : unsqueeze(g[0], d);
  out.set(0, scatter(zeros(in.sizes, gv.dtype(), in.device), d, idx, gv));
}
STRATA_DERIVATIVE_NAMED(max_dim, save_inputs(), save_outputs(1), extremum_dim_backward, "MaxBackward0");
STRATA_DERIVATIVE_NAMED(min_dim, save_inputs(), save_outputs(1), extremum_dim_backward, "MinBackward0");

// amax / amin: split evenly among ties within each reduced slice.
void amax_amin_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor x = ctx.input(0);
  const int64_t nd = x.dim();
  auto dims = reduced_dims(ctx.arg(1), nd);
  const bool keepdim = ctx.arg_bool(2);
  Tensor y = unsqueeze_dims(ctx.output(0), dims, nd, keepdim);
  Tensor gk = unsqueeze_dims(g[0], dims, nd, keepdim);
  out.set(0, split_among(gk, eq(x, y), nd == 0 ? std::vector<int64_t>{} : dims));
}
STRATA_DERIVATIVE(amax, save_inputs(0), save_outputs(0), amax_amin_backward);
STRATA_DERIVATIVE(amin, save_inputs(0), save_outputs(0), amax_amin_backward);

// ---- norm ----------------------------------------------------------------------------
// d||x||_p / dx = sgn(x) |x|^(p-1) / ||x||^(p-1), with PyTorch's special cases:
// p = 0 has zero gradient, p = 1 is sgn(x), p = +-inf splits among the
// extremal |x| (and nans), and a zero norm gives a zero subgradient.
Tensor norm_grad_real(const BackwardCtx& ctx, const variable_list& g, const Tensor& x) {
  const int64_t nd = x.dim();
  const double p = ctx.arg_is_none(1) ? 2.0 : ctx.arg_scalar(1).to<double>();
  auto dims = reduced_dims(ctx.arg(2), nd);
  const bool keepdim = ctx.arg_bool(3);
  Tensor gk = unsqueeze_dims(g[0], dims, nd, keepdim);
  Tensor y = unsqueeze_dims(ctx.output(0), dims, nd, keepdim);
  if (p == 0.0) {
    return zeros_like(x, g[0].dtype());
  }
  Tensor sgn = sign_const(x);
  if (p == 1.0) {
    return mul(gk, sgn);
  }
  Tensor zero = num(y, 0.0);
  Tensor y_zero = eq(y, zero);
  Tensor y_safe = where(y_zero, num(y, 1.0), y);
  if (p == 2.0) {
    return mul(gk, where(y_zero, zero, div(x, y_safe)));
  }
  Tensor ax = mul(x, sgn);  // |x|, differentiable through mul alone
  if (std::isinf(p)) {
    Tensor mask;
    {
      GradModeGuard no_grad(false);
      mask = logical_or(eq(ax, y), isnan(ax));
    }
    return mul(sgn, split_among(gk, mask, nd == 0 ? std::vector<int64_t>{} : dims));
  }
  if (p < 1.0) {
    // |x|^(p-1) is infinite at 0; those elements get 0 (like PyTorch).
    Tensor x_zero = eq(x, num(x, 0.0));
    Tensor ax_safe = where(x_zero, num(x, 1.0), ax);
    Tensor scaled = where(x_zero, num(x, 0.0), mul(sgn, pow(ax_safe, num(x, p - 1.0))));
    return mul(mul(scaled, gk), pow(y, num(y, 1.0 - p)));
  }
  Tensor scaled = p < 2.0 ? mul(sgn, pow(ax, num(x, p - 1.0))) : mul(x, pow(ax, num(x, p - 2.0)));
  Tensor scale = where(y_zero, zero, div(gk, pow(y_safe, num(y, p - 1.0))));
  return mul(scaled, scale);
}
// ||z|| of complex z is the norm of |z|: the real gradient with respect to |z|
// times sgn(z) (Note [Complex gradients]: d|z| gives g z / |z|).
void norm_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor x = cast_like_forward(ctx.input(0), ctx, 4);
  if (is_complex_type(x.dtype())) out.set(0, mul(norm_grad_real(ctx, g, abs(x)), sgn(x)));
  else out.set(0, norm_grad_real(ctx, g, x));
}
// torch.norm runs linalg_vector_norm, hence PyTorch's node name.
STRATA_DERIVATIVE_NAMED(norm, save_inputs(0), save_outputs(0), norm_backward, "LinalgVectorNormBackward0");

// ---- var / std and their _mean forms -------------------------------------------------------
// These are composites, but the composite loses the mean output's history
// (its non-keepdim squeeze is a raw view) and differentiates std through sqrt,
// which gives nan where std is 0; PyTorch's rules give 0 there. Three schema
// layouts: .correction (dim, *, correction, keepdim), .dim (dim, unbiased,
// keepdim) and the legacy (unbiased) form over all dims.
enum class VarForm { Correction, Dim, Unbiased };

void var_std_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out, VarForm form, bool is_std,
                      bool with_mean) {
  Tensor x = ctx.input(0);
  const int64_t nd = x.dim();
  std::vector<int64_t> dims;
  double correction = 1.0;
  bool keepdim = false;
  if (form == VarForm::Unbiased) {
    for (int64_t i = 0; i < nd; ++i) dims.push_back(i);
    correction = ctx.arg_bool(1) ? 1.0 : 0.0;
  } else {
    dims = reduced_dims(ctx.arg(1), nd);
    if (form == VarForm::Dim) {
      correction = ctx.arg_bool(2) ? 1.0 : 0.0;
    } else if (!ctx.arg_is_none(2)) {
      correction = ctx.arg_scalar(2).to<double>();
    }
    keepdim = ctx.arg_bool(3);
  }
  int64_t n = 1;
  for (int64_t d : dims) n *= nd == 0 ? 1 : x.size(d);
  std::vector<int64_t> red = nd == 0 ? std::vector<int64_t>{} : dims;
  Tensor gv = unsqueeze_dims(g[0], dims, nd, keepdim);
  if (is_std) {
    Tensor s = unsqueeze_dims(ctx.output(0), dims, nd, keepdim);
    Tensor s_zero = eq(s, num(s, 0.0));
    Tensor s_safe = where(s_zero, num(s, 1.0), s);
    gv = where(s_zero, num(s, 0.0), div(gv, mul(s_safe, num(s, 2.0))));
  }
  Tensor m = red.empty() ? mean(x) : mean(x, IntArrayRef(red), true);
  const double denom = std::max(0.0, static_cast<double>(n) - correction);
  // An output that received no gradient contributes nothing (its zeros would
  // turn into nan against 1/denom = inf when n <= correction).
  Tensor r;
  if (!with_mean || ctx.grad_defined(0)) r = mul(mul(gv, sub(x, m)), num(x, 2.0 / denom));
  if (with_mean && ctx.grad_defined(1)) {
    Tensor gm = expand(div(unsqueeze_dims(g[1], dims, nd, keepdim), num(x, static_cast<double>(n))), x.sizes());
    r = r.defined() ? add(r, gm) : gm;
  }
  if (r.defined()) out.set(0, r);
}

#define STRATA_VAR_STD_DERIVATIVE(op, form, is_std, with_mean, saved_out)                   \
  void op##_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {        \
    var_std_backward(ctx, g, out, VarForm::form, is_std, with_mean);                         \
  }                                                                                          \
  STRATA_DERIVATIVE(op, save_inputs(0), saved_out, op##_backward)
STRATA_VAR_STD_DERIVATIVE(var, Correction, false, false, save_outputs());
STRATA_VAR_STD_DERIVATIVE(var_dim, Dim, false, false, save_outputs());
STRATA_VAR_STD_DERIVATIVE(var_unbiased, Unbiased, false, false, save_outputs());
STRATA_VAR_STD_DERIVATIVE(std, Correction, true, false, save_outputs(0));
STRATA_VAR_STD_DERIVATIVE(std_dim, Dim, true, false, save_outputs(0));
STRATA_VAR_STD_DERIVATIVE(std_unbiased, Unbiased, true, false, save_outputs(0));
STRATA_VAR_STD_DERIVATIVE(var_mean, Correction, false, true, save_outputs());
STRATA_VAR_STD_DERIVATIVE(var_mean_dim, Dim, false, true, save_outputs());
STRATA_VAR_STD_DERIVATIVE(var_mean_unbiased, Unbiased, false, true, save_outputs());
STRATA_VAR_STD_DERIVATIVE(std_mean, Correction, true, true, save_outputs(0));
STRATA_VAR_STD_DERIVATIVE(std_mean_dim, Dim, true, true, save_outputs(0));
STRATA_VAR_STD_DERIVATIVE(std_mean_unbiased, Unbiased, true, true, save_outputs(0));
#undef STRATA_VAR_STD_DERIVATIVE

// ---- logsumexp -------------------------------------------------------------------------
// A composite, but its own derivative is cheaper than differentiating the
// max-shifted formula and gives PyTorch's exact rule: g * exp(x - result).
void logsumexp_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor x = ctx.input(0);
  const int64_t nd = x.dim();
  auto dims = reduced_dims(ctx.arg(1), nd);
  const bool keepdim = ctx.arg_bool(2);
  Tensor y = unsqueeze_dims(ctx.output(0), dims, nd, keepdim);
  out.set(0, mul(unsqueeze_dims(g[0], dims, nd, keepdim), exp(sub(x, y))));
}
STRATA_DERIVATIVE(logsumexp, save_inputs(0), save_outputs(0), logsumexp_backward);

// ---- scans -------------------------------------------------------------------------------
void cumsum_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const int64_t nd = static_cast<int64_t>(ctx.input_geometry(0).sizes.size());
  if (nd == 0 || g[0].numel() == 0) {
    out.set(0, g[0]);
    return;
  }
  out.set(0, reverse_cumsum(g[0], wrap_dim(ctx.arg_int(1), nd, "cumsum_backward")));
}
STRATA_DERIVATIVE(cumsum, save_inputs(), save_outputs(), cumsum_backward);

// dL/dx_i = sum_{k>=i} g_k prod_{j<=k, j!=i} x_j. Without zeros that is
// reverse_cumsum(g * y)_i / x_i. With zeros, per slice with first zero at z:
// positions before z keep that formula (y_k = 0 for k >= z is right there), z
// itself gets reverse_cumsum(g * y')_z where y' is the cumprod with x_z set to
// 1, and positions after z get 0. Second derivatives are exact without zeros;
// with zeros they miss the d(grad_i)/d(x_z) terms for i > z.
void cumprod_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor x = cast_like_forward(ctx.input(0), ctx, 2);
  const int64_t nd = x.dim();
  if (trivial_product_grad(x, g[0], out)) return;
  const int64_t d = wrap_dim(ctx.arg_int(1), nd, "cumprod_backward");
  Tensor y = ctx.output(0);
  if (!any_zero(x)) {
    out.set(0, div(reverse_cumsum(mul(g[0], cj(y)), d), cj(x)));
    return;
  }
  STRATA_CHECK_T(NotImplementedError, !is_complex_type(x.dtype()), "cumprod_backward: complex inputs with zeros are "
                 "not supported (got a ", x.describe(), ")");
  Tensor before, first;
  {
    GradModeGuard no_grad(false);
    Tensor is_zero = eq(x, num(x, 0.0));
    Tensor zeros_so_far = cumsum(to_dtype(is_zero, ScalarType::Int64), d);
    before = eq(zeros_so_far, num(zeros_so_far, 0.0));
    first = logical_and(is_zero, eq(zeros_so_far, num(zeros_so_far, 1.0)));
  }
  Tensor one = num(x, 1.0);
  Tensor x_safe = where(before, x, one);
  Tensor at_before = div(reverse_cumsum(mul(g[0], y), d), x_safe);
  Tensor y_skip = cumprod(where(first, one, x), d);
  Tensor at_first = reverse_cumsum(mul(g[0], y_skip), d);
  out.set(0, where(before, at_before, where(first, at_first, zeros_like(at_first))));
}
STRATA_DERIVATIVE(cumprod, save_inputs(0), save_outputs(0), cumprod_backward);

// ---- softmax -------------------------------------------------------------------------------
void softmax_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor y = ctx.output(0);
  const int64_t nd = y.dim();
  const int64_t d[1] = {nd == 0 ? 0 : wrap_dim(ctx.arg_int(1), nd, "softmax_backward")};
  Tensor gy = mul(g[0], y);
  out.set(0, sub(gy, mul(y, sum(gy, IntArrayRef(d), true))));
}
STRATA_DERIVATIVE_NAMED(softmax, save_inputs(), save_outputs(0), softmax_backward, "SoftmaxBackward0");

void log_softmax_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor y = ctx.output(0);
  const int64_t nd = y.dim();
  const int64_t d[1] = {nd == 0 ? 0 : wrap_dim(ctx.arg_int(1), nd, "log_softmax_backward")};
  out.set(0, sub(g[0], mul(exp(y), sum(g[0], IntArrayRef(d), true))));
}
STRATA_DERIVATIVE_NAMED(log_softmax, save_inputs(), save_outputs(0), log_softmax_backward, "LogSoftmaxBackward0");

}  // namespace
}  // namespace strata::autograd
