// Derivatives of strata.nn.functional's kernels (decl/nn.def) and of the
// BLAS-style products of decl/linalg.def (mm/bmm/matmul are in
// derivatives_core.cpp). The forward kernels keep no statistics, so the norms,
// losses and attention recompute what they need from the saved inputs with
// Strata ops; every formula is written with differentiable ops so that
// double backward works.
#include <algorithm>
#include <cmath>
#include <limits>

#include "autograd/derivative_util.h"
#include "autograd/variable.h"
#include "ops/api/complex.h"
#include "core/shape.h"

namespace strata::autograd {
namespace {

using Dims = std::vector<int64_t>;

Tensor int_num(const Tensor& like, int64_t v) {
  return scalar_to_tensor(Scalar(v), ScalarType::Int64, like.device(), /*wrapped=*/true);
}

// Half types are computed in float32 like the forward kernels; the engine casts
// the gradients back to the inputs' dtypes.
Tensor upcast(const Tensor& t) {
  if (!t.defined()) return t;
  if (t.dtype() == ScalarType::Float16 || t.dtype() == ScalarType::BFloat16) return to_dtype(t, ScalarType::Float32);
  return t;
}

// softmax/log_softmax from exp/sum/log: the max is a constant shift (it does
// not change the value), so it is taken from a detached copy and the result
// stays differentiable through the core ops only.
Tensor shifted(const Tensor& x, int64_t dim) {
  if (x.numel() == 0) return x;
  Tensor m = amax(detach(x), Dims{dim}, true);
  // A row whose max is infinite would give nan after the shift (inf - inf); shift it by 0 instead.
  m = where(eq(sub(m, m), zeros_like(m)), m, zeros_like(m));
  return sub(x, m);
}
Tensor softmax_d(const Tensor& x, int64_t dim) {
  Tensor e = exp(shifted(x, dim));
  Tensor s = sum(e, Dims{dim}, true);
  // A row that is entirely -inf (a fully masked attention row) gets zeros, as torch's attention does.
  return div(e, where(eq(s, zeros_like(s)), ones_like(s), s));
}
Tensor log_softmax_d(const Tensor& x, int64_t dim) {
  Tensor s = shifted(x, dim);
  return sub(s, log(sum(exp(s), Dims{dim}, true)));
}

enum class Red { None, Mean, Sum };
Red reduction_of(const BackwardCtx& ctx, int i) {
  std::string_view r = ctx.arg_str(i);
  return r == "none" ? Red::None : r == "sum" ? Red::Sum : Red::Mean;
}

// All dims but `keep`.
Dims dims_except(int64_t ndim, int64_t keep) {
  Dims d;
  for (int64_t i = 0; i < ndim; ++i)
    if (i != keep) d.push_back(i);
  return d;
}

// Shape of length ndim with n at dim and 1 elsewhere (a per-channel vector broadcast along dim).
Dims channel_shape(int64_t ndim, int64_t dim, int64_t n) {
  Dims s(ndim, 1);
  s[dim] = n;
  return s;
}

// ---- linear algebra ------------------------------------------------------------
// Complex operands follow Note [Complex gradients]: a product's derivative
// multiplies by the conjugate of the other factor (and of alpha, beta), so the
// transposes below are adjoints; conj of a real tensor is the tensor itself.
Tensor adjoint_of(const Tensor& t, int64_t d0 = -2, int64_t d1 = -1) { return conj(transpose(t, d0, d1)); }
// g * conj(s) for a Scalar s.
Tensor scaled_conj(const Tensor& g, const Scalar& s) { return mul(g, conj(num(g, s))); }

// self * beta + alpha * (m1 @ m2) for mm (addmm) and bmm (baddbmm): the
// products transpose the last two dims.
using MatProduct = Tensor (*)(const Tensor&, const Tensor&, const std::optional<Tensor>&);
void scaled_product_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out, MatProduct product) {
  const Scalar beta = ctx.arg_scalar(3), alpha = ctx.arg_scalar(4);
  Tensor ga = scaled_conj(g[0], alpha);
  if (ctx.needs_grad(0)) out.set(0, scaled_conj(g[0], beta));
  if (ctx.needs_grad(1)) out.set(1, product(ga, adjoint_of(ctx.input(2)), std::nullopt));
  if (ctx.needs_grad(2)) out.set(2, product(adjoint_of(ctx.input(1)), ga, std::nullopt));
}

void addmm_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  scaled_product_backward(ctx, g, out, &mm);
}
STRATA_DERIVATIVE(addmm, save_inputs(1, 2), save_outputs(), addmm_backward);

void baddbmm_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  scaled_product_backward(ctx, g, out, &bmm);
}
STRATA_DERIVATIVE(baddbmm, save_inputs(1, 2), save_outputs(), baddbmm_backward);

void addbmm_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const Scalar beta = ctx.arg_scalar(3), alpha = ctx.arg_scalar(4);
  if (ctx.needs_grad(0)) out.set(0, scaled_conj(g[0], beta));
  if (!ctx.needs_grad(1) && !ctx.needs_grad(2)) return;
  const TensorGeometry& b1 = ctx.input_geometry(1);
  // Every batch saw the same output gradient.
  Tensor ga = expand(unsqueeze(scaled_conj(g[0], alpha), 0), Dims{b1.sizes[0], g[0].size(0), g[0].size(1)});
  if (ctx.needs_grad(1)) out.set(1, bmm(ga, adjoint_of(ctx.input(2), 1, 2)));
  if (ctx.needs_grad(2)) out.set(2, bmm(adjoint_of(ctx.input(1), 1, 2), ga));
}
STRATA_DERIVATIVE(addbmm, save_inputs(1, 2), save_outputs(), addbmm_backward);

void addmv_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const Scalar beta = ctx.arg_scalar(3), alpha = ctx.arg_scalar(4);
  Tensor ga = scaled_conj(g[0], alpha);
  if (ctx.needs_grad(0)) out.set(0, scaled_conj(g[0], beta));
  if (ctx.needs_grad(1)) out.set(1, mul(unsqueeze(ga, 1), unsqueeze(conj(ctx.input(2)), 0)));
  if (ctx.needs_grad(2)) out.set(2, mv(adjoint_of(ctx.input(1), 0, 1), ga));
}
STRATA_DERIVATIVE(addmv, save_inputs(1, 2), save_outputs(), addmv_backward);

void mv_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  if (ctx.needs_grad(0)) out.set(0, mul(unsqueeze(g[0], 1), unsqueeze(conj(ctx.input(1)), 0)));
  if (ctx.needs_grad(1)) out.set(1, mv(adjoint_of(ctx.input(0), 0, 1), g[0]));
}
STRATA_DERIVATIVE(mv, save_inputs(0, 1), save_outputs(), mv_backward);

// dot = sum x y: gx = g conj(y), gy = g conj(x). vdot = sum conj(x) y:
// gx = conj(g) y, gy = g x (torch's formulas; all equal for real tensors).
void dot_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  if (ctx.needs_grad(0)) out.set(0, mul(g[0], conj(ctx.input(1))));
  if (ctx.needs_grad(1)) out.set(1, mul(g[0], conj(ctx.input(0))));
}
STRATA_DERIVATIVE(dot, save_inputs(0, 1), save_outputs(), dot_backward);
void vdot_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  if (ctx.needs_grad(0)) out.set(0, mul(conj(g[0]), ctx.input(1)));
  if (ctx.needs_grad(1)) out.set(1, mul(g[0], ctx.input(0)));
}
STRATA_DERIVATIVE(vdot, save_inputs(0, 1), save_outputs(), vdot_backward);

// ---- linear, embedding -------------------------------------------------------------
void linear_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor x = ctx.input(0), w = ctx.input(1), go = g[0];
  const bool w1 = w.dim() == 1;
  if (ctx.needs_grad(0)) {
    // x: [*, k]; w: [n, k] -> go: [*, n]; w: [k] -> go: [*].
    out.set(0, w1 ? mul(unsqueeze(go, -1), w) : matmul(go, w));
  }
  if (ctx.needs_grad(1)) {
    // Rows counted explicitly: with k == 0 or n == 0 a -1 in reshape would be ambiguous.
    const int64_t k = x.size(-1);
    int64_t rows = 1;
    for (int64_t d = 0; d + 1 < x.dim(); ++d) rows *= x.size(d);
    Tensor x2 = reshape(x, Dims{rows, k});
    if (w1) {
      out.set(1, mv(transpose(x2, 0, 1), reshape(go, Dims{rows})));
    } else {
      Tensor g2 = reshape(go, Dims{rows, w.size(0)});
      out.set(1, mm(transpose(g2, 0, 1), x2));
    }
  }
  if (ctx.needs_grad(2)) out.set(2, go);  // the engine sums it to bias's shape
}
STRATA_DERIVATIVE(linear, save_inputs(0, 1), save_outputs(), linear_backward);

void embedding_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  if (!ctx.needs_grad(0)) return;
  STRATA_CHECK(!ctx.arg_bool(4), "embedding: sparse=True gradients are not supported (Strata has no sparse tensors); "
               "use sparse=False");
  const TensorGeometry& wg = ctx.input_geometry(0);
  const int64_t v = wg.sizes[0], d = wg.sizes[1];
  Tensor idx = reshape(to_dtype(ctx.input(1), ScalarType::Int64), Dims{-1});
  Tensor src = reshape(g[0], Dims{idx.numel(), d});  // not -1: d may be 0
  const int64_t padding_idx = ctx.arg_int(2);
  if (!grad_mode_enabled()) {
    // No graph of this backward is recorded: one accumulation kernel instead of zeros + index_add (+ the counts),
    // which stay for create_graph=True.
    out.set(0, call<OpId::_embedding_dense_backward>(g[0], ctx.input(1), v, padding_idx, ctx.arg_bool(3)));
    return;
  }
  // Rows of padding_idx get no gradient; -1 means none (F.embedding wraps negative indices before the call).
  if (padding_idx >= 0) src = where(unsqueeze(ne(idx, int_num(idx, padding_idx)), 1), src, zeros_like(src));
  if (ctx.arg_bool(3) && idx.numel() > 0) {
    // scale_grad_by_freq: each row's gradient is divided by how often its index occurs in the batch.
    Tensor counts = index_add(zeros(Dims{v}, src.dtype(), src.device()), 0, idx, ones(Dims{idx.numel()}, src.dtype(),
                                                                                     src.device()));
    src = div(src, unsqueeze(index_select(counts, 0, idx), 1));
  }
  out.set(0, index_add(zeros(Dims{v, d}, src.dtype(), src.device()), 0, idx, src));
}
STRATA_DERIVATIVE(embedding, save_inputs(1), save_outputs(), embedding_backward);

// _embedding_bag: sum/mean send grad_output's row of each index's bag, times the index's factor (aux, and its
// per_sample_weight), to the index's weight row; max sends each output element's gradient to the row it came
// from. per_sample_weights get the dot product of the bag's gradient with the index's weight row.
void embedding_bag_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const TensorGeometry& wg = ctx.input_geometry(0);
  const int64_t v = wg.sizes[0], d = wg.sizes[1];
  const int64_t mode = ctx.arg_int(3), padding_idx = ctx.arg_int(5);
  const bool by_freq = ctx.arg_bool(6);
  Tensor go = g[0], aux = ctx.output(2);
  if (mode == 2) {
    if (!ctx.needs_grad(0)) return;
    Tensor chosen = ge(aux, int_num(aux, 0));  // empty bags chose no row
    out.set(0, scatter_add(zeros(Dims{v, d}, go.dtype(), go.device()), 0, where(chosen, aux, zeros_like(aux)),
                           where(chosen, go, zeros_like(go))));
    return;
  }
  Tensor idx = to_dtype(ctx.input(1), ScalarType::Int64);
  const int64_t n = idx.numel();
  const bool has_psw = ctx.input_defined(4);
  if (n == 0 || go.size(0) == 0) {
    if (ctx.needs_grad(0)) out.set(0, zeros(Dims{v, d}, go.dtype(), go.device()));
    if (has_psw && ctx.needs_grad(4)) out.set(4, zeros(Dims{n}, go.dtype(), go.device()));
    return;
  }
  Tensor rows = index_select(go, 0, ctx.output(1));  // (n, d): each index's bag gradient
  if (ctx.needs_grad(0)) {
    Tensor f = has_psw ? mul(aux, ctx.input(4)) : aux;
    Tensor src = mul(rows, unsqueeze(f, 1));
    if (!grad_mode_enabled()) {
      out.set(0, call<OpId::_embedding_dense_backward>(src, idx, v, padding_idx, by_freq));
    } else {
      if (by_freq) {
        Tensor counts = index_add(zeros(Dims{v}, src.dtype(), src.device()), 0, idx,
                                  ones(Dims{n}, src.dtype(), src.device()));
        src = div(src, unsqueeze(index_select(counts, 0, idx), 1));
      }
      out.set(0, index_add(zeros(Dims{v, d}, src.dtype(), src.device()), 0, idx, src));
    }
  }
  if (has_psw && ctx.needs_grad(4)) {
    out.set(4, mul(sum(mul(rows, index_select(ctx.input(0), 0, idx)), Dims{1}), aux));
  }
}
STRATA_DERIVATIVE(_embedding_bag, save_inputs(0, 1, 4), save_outputs(1, 2), embedding_bag_backward);

// ---- normalization -------------------------------------------------------------------
// Shared tail of the norms: with xhat the normalized input and gxhat the
// gradient reaching it, d xhat/d x gives
//   rstd * (gxhat - mean(gxhat) - xhat * mean(gxhat * xhat))   (centered)
//   rstd * (gxhat - xhat * mean(gxhat * xhat))                  (rms)
Tensor norm_input_grad(const Tensor& gxhat, const Tensor& xhat, const Tensor& rstd, const Dims& dims, bool centered) {
  Tensor r = sub(gxhat, mul(xhat, mean(mul(gxhat, xhat), dims, true)));
  if (centered) r = sub(r, mean(gxhat, dims, true));
  return mul(r, rstd);
}

struct Normalized {
  Tensor xhat, rstd;
};
Normalized normalize(const Tensor& x, const Dims& dims, double eps, bool centered) {
  Tensor xc = centered ? sub(x, mean(x, dims, true)) : x;
  Tensor rstd = div(num(x, 1.0), sqrt(add(mean(mul(xc, xc), dims, true), num(x, eps))));
  return {mul(xc, rstd), rstd};
}

Dims trailing_dims(int64_t ndim, size_t k) {
  Dims d;
  for (int64_t i = ndim - static_cast<int64_t>(k); i < ndim; ++i) d.push_back(i);
  return d;
}

void row_norm_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out, double eps, bool centered,
                       int weight_arg, int bias_arg) {
  Tensor x = upcast(ctx.input(0)), w = upcast(ctx.input(weight_arg)), go = upcast(g[0]);
  if (x.numel() == 0) {
    for (int i : {0, weight_arg, bias_arg})
      if (i >= 0 && ctx.needs_grad(i)) out.set(i, zeros_of(ctx.input_geometry(i)));
    return;
  }
  const Dims dims = trailing_dims(x.dim(), ctx.arg_ints(1).size());
  Normalized n = normalize(x, dims, eps, centered);
  if (ctx.needs_grad(0)) out.set(0, norm_input_grad(w.defined() ? mul(go, w) : go, n.xhat, n.rstd, dims, centered));
  if (w.defined() && ctx.needs_grad(weight_arg)) out.set(weight_arg, mul(go, n.xhat));  // summed to w's shape
  if (bias_arg >= 0 && ctx.needs_grad(bias_arg)) out.set(bias_arg, go);
}

void layer_norm_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  if (!grad_mode_enabled()) {
    // No graph of this backward is recorded: one fused kernel (statistics recomputed per row) instead of the
    // ~20 ops of the composite, which stays for create_graph=True (double backward).
    Tensor w = ctx.input_defined(2) ? ctx.input(2) : Tensor();
    Tensor go = to_dtype(g[0], ctx.input_geometry(0).dtype);
    auto [gx, gw, gb] = call<OpId::_layer_norm_backward>(
        go, ctx.input(0), ctx.arg_ints(1), w.defined() ? std::optional<Tensor>(w) : std::nullopt, ctx.arg_double(4));
    if (ctx.needs_grad(0)) out.set(0, gx);
    if (w.defined() && ctx.needs_grad(2)) out.set(2, gw);
    if (ctx.input_defined(3) && ctx.needs_grad(3)) out.set(3, gb);
    return;
  }
  row_norm_backward(ctx, g, out, ctx.arg_double(4), true, 2, 3);
}
STRATA_DERIVATIVE(layer_norm, save_inputs(0, 2), save_outputs(), layer_norm_backward);

double default_rms_eps(ScalarType t) {
  switch (t) {
    case ScalarType::Float16: return 0.0009765625;
    case ScalarType::BFloat16: return 0.0078125;
    case ScalarType::Float32: return std::numeric_limits<float>::epsilon();
    default: return std::numeric_limits<double>::epsilon();
  }
}

void rms_norm_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const double eps = ctx.arg_opt_double(3).value_or(default_rms_eps(ctx.input_geometry(0).dtype));
  row_norm_backward(ctx, g, out, eps, false, 2, -1);
}
STRATA_DERIVATIVE(rms_norm, save_inputs(0, 2), save_outputs(), rms_norm_backward);

// Per-channel affine parameters: their gradients sum over every dim but 1
// (the engine's broadcast reduction would align them with the last dim).
void channel_affine_grads(const BackwardCtx& ctx, const Tensor& go, const Tensor& xhat, int weight_arg, int bias_arg,
                          GradOut& out) {
  const Dims red = dims_except(go.dim(), 1);
  if (ctx.input_defined(weight_arg) && ctx.needs_grad(weight_arg)) out.set(weight_arg, sum(mul(go, xhat), red));
  if (ctx.input_defined(bias_arg) && ctx.needs_grad(bias_arg)) out.set(bias_arg, sum(go, red));
}

void group_norm_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor x = upcast(ctx.input(0)), w = upcast(ctx.input(2)), go = upcast(g[0]);
  const int64_t groups = ctx.arg_int(1), n = x.size(0), c = x.size(1);
  if (x.numel() == 0) {
    for (int i : {0, 2, 3})
      if (ctx.input_defined(i) && ctx.needs_grad(i)) out.set(i, zeros_of(ctx.input_geometry(i)));
    return;
  }
  const Dims grouped{n, groups, -1}, dims{2};
  Normalized nz = normalize(reshape(x, grouped), dims, ctx.arg_double(4), true);
  Tensor xhat = reshape(nz.xhat, x.sizes());
  Tensor gxhat = w.defined() ? mul(go, reshape(w, channel_shape(x.dim(), 1, c))) : go;
  if (ctx.needs_grad(0))
    out.set(0, reshape(norm_input_grad(reshape(gxhat, grouped), nz.xhat, nz.rstd, dims, true), x.sizes()));
  channel_affine_grads(ctx, go, xhat, 2, 3, out);
}
STRATA_DERIVATIVE(group_norm, save_inputs(0, 2), save_outputs(), group_norm_backward);

void batch_norm_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor x = upcast(ctx.input(0)), w = upcast(ctx.input(1)), go = upcast(g[0]);
  const bool training = ctx.arg_bool(5);
  const double eps = ctx.arg_double(7);
  const int64_t c = x.size(1);
  if (x.numel() == 0) {
    for (int i : {0, 1, 2})
      if (ctx.input_defined(i) && ctx.needs_grad(i)) out.set(i, zeros_of(ctx.input_geometry(i)));
    return;
  }
  const Dims cshape = channel_shape(x.dim(), 1, c);
  const Dims red = dims_except(x.dim(), 1);
  Tensor gxhat = w.defined() ? mul(go, reshape(w, cshape)) : go;
  if (training) {
    Normalized nz = normalize(x, red, eps, true);
    if (ctx.needs_grad(0)) out.set(0, norm_input_grad(gxhat, nz.xhat, nz.rstd, red, true));
    channel_affine_grads(ctx, go, nz.xhat, 1, 2, out);
    return;
  }
  // Evaluation: the running statistics are constants.
  Tensor rm = reshape(to_dtype(detach(ctx.input(3)), x.dtype()), cshape);
  Tensor rv = reshape(to_dtype(detach(ctx.input(4)), x.dtype()), cshape);
  Tensor rstd = div(num(x, 1.0), sqrt(add(rv, num(x, eps))));
  if (ctx.needs_grad(0)) out.set(0, mul(gxhat, rstd));
  channel_affine_grads(ctx, go, mul(sub(x, rm), rstd), 1, 2, out);
}
STRATA_DERIVATIVE(batch_norm, save_inputs(0, 1, 3, 4), save_outputs(), batch_norm_backward);

// ---- losses ------------------------------------------------------------------------------
// The classification losses are all  loss_p = -sum_c q[p, c] * z[p, c]  with z
// = log_softmax(input) (cross_entropy) or z = input (nll_loss), divided by
// `denom` for reduction='mean'. q holds the targets' weights, label smoothing
// and ignore_index.
struct ClassCoeffs {
  Tensor q;      // input's shape
  Tensor denom;  // 0-d, never 0 (a batch of ignored targets has zero gradient, like torch)
};

ClassCoeffs class_index_coeffs(const Tensor& like, const Tensor& target, const Tensor& weight, int64_t ignore_index,
                               double smoothing, int64_t cdim) {
  const int64_t c = like.size(cdim);
  const ScalarType dt = like.dtype();
  Tensor t = unsqueeze(to_dtype(target, ScalarType::Int64), cdim);
  Tensor classes = reshape(arange(Scalar(c), ScalarType::Int64, like.device()), channel_shape(like.dim(), cdim, c));
  Tensor onehot = to_dtype(eq(t, classes), dt);
  Tensor valid = to_dtype(ne(t, int_num(t, ignore_index)), dt);
  Tensor wb = weight.defined() ? reshape(to_dtype(weight, dt), channel_shape(like.dim(), cdim, c)) : Tensor();
  Tensor wt = wb.defined() ? mul(sum(mul(onehot, wb), Dims{cdim}, true), valid) : valid;
  Tensor q = mul(onehot, wt);
  if (smoothing > 0) {
    q = mul(q, num(q, 1.0 - smoothing));
    Tensor sm = mul(valid, num(valid, smoothing / static_cast<double>(c)));
    q = add(q, wb.defined() ? mul(sm, wb) : sm);
  }
  Tensor denom = sum(wt);
  denom = where(eq(denom, zeros_like(denom)), ones_like(denom), denom);
  return {q, denom};
}

// The gradient of the per-position losses, shaped to broadcast against input.
Tensor position_grad(const Tensor& go, Red red, int64_t cdim, const Tensor& denom) {
  if (red == Red::None) return unsqueeze(go, cdim);
  if (red == Red::Mean) return div(go, denom);
  return go;
}

// Like torch, these losses are not differentiable with respect to their class or element weights.
void check_not_differentiable(const BackwardCtx& ctx, int arg, const char* name) {
  STRATA_CHECK_T(NotImplementedError, !(ctx.input_defined(arg) && ctx.needs_grad(arg)), ctx.op_name(),
                 ": the derivative for '", name, "' is not implemented (the function is not differentiable with "
                 "respect to it)");
}

void cross_entropy_backward(const BackwardCtx& ctx, const variable_list& grads, GradOut& out) {
  Tensor x = upcast(ctx.input(0)), target = ctx.input(1), w = upcast(ctx.input(2));
  const bool probs = is_floating_type(target.dtype());
  if (!probs) check_not_differentiable(ctx, 2, "weight");
  if (probs) target = upcast(target);
  const variable_list g{upcast(grads[0])};
  const Red red = reduction_of(ctx, 3);
  const double eps = ctx.arg_double(5);
  const int64_t cdim = x.dim() >= 2 ? 1 : 0, c = x.size(cdim);
  if (x.numel() == 0) {
    for (int i : {0, 1, 2})
      if (ctx.input_defined(i) && ctx.needs_grad(i)) out.set(i, zeros_of(ctx.input_geometry(i)));
    return;
  }
  // No graph of this backward is recorded: input's gradient in one kernel (softmax recomputed per position) instead
  // of the composite below, which stays for create_graph=True and for the gradients of probability targets and
  // their weights.
  const bool fused = ctx.needs_grad(0) && !grad_mode_enabled();
  if (fused) {
    Tensor w0 = ctx.input_defined(2) ? ctx.input(2) : Tensor();
    out.set(0, call<OpId::_cross_entropy_loss_backward>(
                   grads[0], ctx.input(0), ctx.input(1), w0.defined() ? std::optional<Tensor>(w0) : std::nullopt,
                   ctx.arg_str(3), ctx.arg_int(4), eps));
  }
  if (probs) {
    // Class probabilities: q = w * (t * (1 - eps) + eps / C); 'mean' divides by the number of positions.
    Tensor wb = w.defined() ? reshape(w, channel_shape(x.dim(), cdim, c)) : Tensor();
    Tensor tq = add(mul(target, num(target, 1.0 - eps)), num(target, eps / static_cast<double>(c)));
    Tensor q = wb.defined() ? mul(tq, wb) : tq;
    Tensor denom = num(x, static_cast<double>(x.numel() / c));
    Tensor gp = position_grad(g[0], red, cdim, denom);
    if (ctx.needs_grad(0) && !fused) {
      Tensor p = softmax_d(x, cdim);
      out.set(0, mul(gp, sub(mul(p, sum(q, Dims{cdim}, true)), q)));
    }
    if (ctx.needs_grad(1) || (wb.defined() && ctx.needs_grad(2))) {
      Tensor lp = mul(log_softmax_d(x, cdim), gp);
      if (ctx.needs_grad(1)) {
        Tensor d = mul(lp, num(x, -(1.0 - eps)));
        out.set(1, wb.defined() ? mul(d, wb) : d);
      }
      if (wb.defined() && ctx.needs_grad(2)) out.set(2, neg(sum(mul(lp, tq), dims_except(x.dim(), cdim))));
    }
    return;
  }
  if (!ctx.needs_grad(0) || fused) return;
  if (!w.defined() && eps == 0.0) {
    // The common case, in few passes over the [N, C] logits: (softmax(x) - onehot(t)) * coef, with coef the
    // gradient of each position's loss (0 where ignored); the onehot part is a scatter into the class dim.
    Tensor t = unsqueeze(to_dtype(target, ScalarType::Int64), cdim);
    Tensor keep = ne(t, int_num(t, ctx.arg_int(4)));
    Tensor valid = to_dtype(keep, x.dtype());
    Tensor denom = sum(valid);
    denom = where(eq(denom, zeros_like(denom)), ones_like(denom), denom);
    Tensor coef = mul(valid, position_grad(g[0], red, cdim, denom));
    Tensor r = mul(softmax(x, cdim), coef);
    out.set(0, scatter_add(r, cdim, where(keep, t, zeros_like(t)), neg(coef)));
    return;
  }
  ClassCoeffs cc = class_index_coeffs(x, target, w, ctx.arg_int(4), eps, cdim);
  Tensor gp = position_grad(g[0], red, cdim, cc.denom);
  Tensor p = softmax_d(x, cdim);
  out.set(0, mul(gp, sub(mul(p, sum(cc.q, Dims{cdim}, true)), cc.q)));
}
STRATA_DERIVATIVE(cross_entropy_loss, save_inputs(0, 1, 2), save_outputs(), cross_entropy_backward);

void nll_loss_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  check_not_differentiable(ctx, 2, "weight");
  if (!ctx.needs_grad(0)) return;
  Tensor x = ctx.input(0);
  if (x.numel() == 0) return out.set(0, zeros_like(x));
  const int64_t cdim = x.dim() >= 2 ? 1 : 0;
  ClassCoeffs cc = class_index_coeffs(x, ctx.input(1), ctx.input(2), ctx.arg_int(4), 0.0, cdim);
  out.set(0, neg(mul(position_grad(g[0], reduction_of(ctx, 3), cdim, cc.denom), cc.q)));
}
STRATA_DERIVATIVE(nll_loss, save_inputs(0, 1, 2), save_outputs(), nll_loss_backward);

// Number of elements of the unreduced loss (inputs broadcast together).
double loss_numel(const BackwardCtx& ctx, std::initializer_list<int> args) {
  DimVector shape;
  for (int a : args) {
    if (!ctx.input_defined(a)) continue;
    shape = broadcast_shapes(shape, ctx.input_geometry(a).sizes, ctx.op_name().c_str());
  }
  return static_cast<double>(checked_numel(shape, "loss"));
}

// Scales the pointwise derivative d by the loss's incoming gradient.
Tensor reduce_grad(const Tensor& go, const Tensor& d, Red red, double count) {
  Tensor r = mul(go, d);
  return red == Red::Mean ? div(r, num(r, count)) : r;
}

void mse_loss_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor d = mul(sub(ctx.input(0), ctx.input(1)), num(g[0], 2.0));
  Tensor r = reduce_grad(g[0], d, reduction_of(ctx, 2), loss_numel(ctx, {0, 1}));
  if (ctx.needs_grad(0)) out.set(0, r);
  if (ctx.needs_grad(1)) out.set(1, neg(r));
}
STRATA_DERIVATIVE(mse_loss, save_inputs(0, 1), save_outputs(), mse_loss_backward);

void l1_loss_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor diff = sub(ctx.input(0), ctx.input(1));
  Tensor z = zeros_like(diff);
  // sign(diff) from comparisons so the result is differentiable (its derivative is 0).
  Tensor s = sub(to_dtype(gt(diff, z), diff.dtype()), to_dtype(lt(diff, z), diff.dtype()));
  Tensor r = reduce_grad(g[0], s, reduction_of(ctx, 2), loss_numel(ctx, {0, 1}));
  if (ctx.needs_grad(0)) out.set(0, r);
  if (ctx.needs_grad(1)) out.set(1, neg(r));
}
STRATA_DERIVATIVE(l1_loss, save_inputs(0, 1), save_outputs(), l1_loss_backward);

// loss = w * ((1 - t) x + (1 + (pw - 1) t) softplus(-x))
void bce_logits_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  check_not_differentiable(ctx, 2, "weight");
  check_not_differentiable(ctx, 3, "pos_weight");
  Tensor x = ctx.input(0), t = ctx.input(1), w = ctx.input(2), pw = ctx.input(3);
  const Red red = reduction_of(ctx, 4);
  const double count = loss_numel(ctx, {0, 1, 2, 3});
  auto scaled = [&](Tensor d) { return reduce_grad(g[0], w.defined() ? mul(d, w) : d, red, count); };
  Tensor one = num(x, 1.0);
  Tensor coef = pw.defined() ? add(one, mul(sub(pw, one), t)) : Tensor();  // 1 + (pw - 1) t
  if (ctx.needs_grad(0)) {
    // d/dx = sigmoid(x) (1 + (pw - 1) t) - pw t
    Tensor s = sigmoid(x);
    out.set(0, scaled(pw.defined() ? sub(mul(s, coef), mul(pw, t)) : sub(s, t)));
  }
  if (ctx.needs_grad(1)) {
    // d/dt = -x + (pw - 1) softplus(-x) = -x - (pw - 1) log_sigmoid(x)
    Tensor d = neg(x);
    if (pw.defined()) d = sub(d, mul(sub(pw, one), log_sigmoid(x)));
    out.set(1, scaled(d));
  }
}
STRATA_DERIVATIVE(binary_cross_entropy_with_logits, save_inputs(0, 1, 2, 3), save_outputs(), bce_logits_backward);

// loss = -w (t log(x) + (1 - t) log(1 - x)), both logs clamped at -100 like the forward.
void bce_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  check_not_differentiable(ctx, 2, "weight");
  Tensor x = ctx.input(0), t = ctx.input(1), w = ctx.input(2);
  const Red red = reduction_of(ctx, 3);
  const double count = loss_numel(ctx, {0, 1, 2});
  Tensor one = num(x, 1.0);
  auto scaled = [&](Tensor d) { return reduce_grad(g[0], w.defined() ? mul(d, w) : d, red, count); };
  auto clamped_log = [&](const Tensor& v) {
    Tensor l = log(v);
    Tensor floor = num(l, -100.0);
    return where(lt(l, floor), floor, l);
  };
  if (ctx.needs_grad(0)) {
    // (x - t) / max(x (1 - x), 1e-12), as torch's kernel
    Tensor den = mul(x, sub(one, x));
    Tensor lo = num(den, 1e-12);
    den = where(lt(den, lo), lo, den);
    out.set(0, scaled(div(sub(x, t), den)));
  }
  if (ctx.needs_grad(1)) out.set(1, scaled(sub(clamped_log(sub(one, x)), clamped_log(x))));
}
STRATA_DERIVATIVE(binary_cross_entropy, save_inputs(0, 1, 2), save_outputs(), bce_backward);

// ---- attention ------------------------------------------------------------------------------
// Recomputes P = softmax(q k^T * scale + mask) and applies
//   dv = P^T dO,  dP = dO v^T,  dS = P * (dP - rowsum(dP * P)),  dq = dS k * scale,  dk = dS^T q * scale.
// Grouped-query attention repeats each key/value head over its group of query heads (and sums back).
Tensor repeat_heads(const Tensor& t, int64_t group) {
  if (group == 1) return t;
  Dims s(t.sizes().begin(), t.sizes().end());
  Dims e = s;
  e.insert(e.end() - 2, group);
  Tensor r = expand(unsqueeze(t, -3), e);
  s[s.size() - 3] *= group;
  return reshape(r, s);
}
Tensor sum_heads(const Tensor& t, int64_t group) {
  if (group == 1) return t;
  Dims s(t.sizes().begin(), t.sizes().end());
  Dims r = s;
  r[r.size() - 3] /= group;
  r.insert(r.end() - 2, group);
  return sum(reshape(t, r), Dims{-3});
}

bool same_batch_dims(const Tensor& a, const Tensor& b) {
  return a.dim() == b.dim() && std::equal(a.sizes().begin(), a.sizes().end() - 2, b.sizes().begin());
}
// Whether the mask's batch dims broadcast to q's without enlarging them.
bool mask_fits(const Tensor& mask, const Tensor& q) {
  if (!mask.defined()) return true;
  const int64_t mb = mask.dim() - 2, qb = q.dim() - 2;
  if (mb > qb) return false;
  for (int64_t i = 0; i < mb; ++i)
    if (mask.size(i) != 1 && mask.size(i) != q.size(qb - mb + i)) return false;
  return true;
}

void sdpa_backward(const BackwardCtx& ctx, const variable_list& grads, GradOut& out) {
  {
    const Tensor q = ctx.input(0), k = ctx.input(1), v = ctx.input(2), mask = ctx.input(3);
    // No graph of this backward is recorded, no gradient for the mask, no broadcasting between q, k and v: one fused
    // kernel (probabilities recomputed per head, gradients written in the inputs' layouts) instead of the ~15 ops
    // below, which stay for create_graph=True (double backward) and the other cases.
    const bool mask_grad = mask.defined() && ctx.needs_grad(3);
    const bool fused =
        !grad_mode_enabled() && !mask_grad && same_batch_dims(q, k) && same_batch_dims(q, v) && mask_fits(mask, q);
    if (fused) {
      auto [gq, gk, gv] = call<OpId::_scaled_dot_product_attention_backward>(
          to_dtype(grads[0], q.dtype()), q, k, v, mask.defined() ? std::optional<Tensor>(mask) : std::nullopt,
          ctx.arg_bool(5), ctx.arg_opt_double(6));
      if (ctx.needs_grad(0)) out.set(0, gq);
      if (ctx.needs_grad(1)) out.set(1, gk);
      if (ctx.needs_grad(2)) out.set(2, gv);
      return;
    }
  }
  Tensor q = upcast(ctx.input(0)), k = upcast(ctx.input(1)), v = upcast(ctx.input(2)), mask = ctx.input(3);
  if (mask.defined() && mask.dtype() != ScalarType::Bool) mask = upcast(mask);
  const variable_list g{upcast(grads[0])};
  const bool causal = ctx.arg_bool(5);
  const int64_t L = q.size(-2), S = k.size(-2), E = q.size(-1);
  const double scale = ctx.arg_opt_double(6).value_or(E > 0 ? 1.0 / std::sqrt(static_cast<double>(E)) : 1.0);
  int64_t group = 1;
  if (ctx.arg_bool(7) && q.dim() >= 3 && k.dim() >= 3 && q.size(-3) != k.size(-3)) group = q.size(-3) / k.size(-3);
  Tensor kr = repeat_heads(k, group), vr = repeat_heads(v, group);
  Tensor s = mul(matmul(q, transpose(kr, -2, -1)), num(q, scale));
  Tensor keep;  // where attention is allowed
  if (causal) {
    Tensor rows = unsqueeze(arange(Scalar(L), ScalarType::Int64, q.device()), 1);
    keep = ge(rows, unsqueeze(arange(Scalar(S), ScalarType::Int64, q.device()), 0));
  } else if (mask.defined() && mask.dtype() == ScalarType::Bool) {
    keep = mask;
  } else if (mask.defined()) {
    s = add(s, mask);
  }
  if (keep.defined()) s = where(keep, s, num(s, -std::numeric_limits<double>::infinity()));
  // Without a mask no row is entirely masked (causal rows keep their diagonal), so when no graph of this backward
  // is recorded the softmax kernel (one op) can replace the composite softmax_d (seven), which exists to be
  // differentiable and to give fully masked rows zeros.
  Tensor p = !mask.defined() && !grad_mode_enabled() ? softmax(s, -1) : softmax_d(s, -1);
  Tensor go = g[0];
  if (ctx.needs_grad(2)) out.set(2, sum_heads(matmul(transpose(p, -2, -1), go), group));
  if (!ctx.needs_grad(0) && !ctx.needs_grad(1) && !(mask.defined() && ctx.needs_grad(3))) return;
  Tensor gp = matmul(go, transpose(vr, -2, -1));
  Tensor gs = mul(p, sub(gp, sum(mul(gp, p), Dims{-1}, true)));
  if (ctx.needs_grad(0)) out.set(0, mul(matmul(gs, kr), num(gs, scale)));
  if (ctx.needs_grad(1)) out.set(1, sum_heads(mul(matmul(transpose(gs, -2, -1), q), num(gs, scale)), group));
  if (mask.defined() && ctx.needs_grad(3)) out.set(3, gs);
}
STRATA_DERIVATIVE(scaled_dot_product_attention, save_inputs(0, 1, 2, 3), save_outputs(), sdpa_backward);

}  // namespace
}  // namespace strata::autograd
