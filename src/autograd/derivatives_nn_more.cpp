// Derivatives of the ops in decl/nn_more.def. Pooling, interpolation and
// im2col are linear in their input (or select from it), so each gradient is
// one kernel op (_pool_scatter, _avg_pool_backward, _interpolate_backward,
// col2im, ...), and the gradient of that op is the forward op again: double
// backward comes for free. conv3d and conv_transpose3d are composites and
// need no entry here.
#include "autograd/derivative_util.h"
#include "autograd/variable.h"

namespace strata::autograd {
namespace {

using Dims = std::vector<int64_t>;

Dims per_dim(const std::vector<int64_t>& v, size_t k, int64_t dflt) {
  if (v.empty()) return Dims(k, dflt);
  if (v.size() == 1) return Dims(k, v[0]);
  return v;
}
Dims sizes_of(const TensorGeometry& g) { return Dims(g.sizes.begin(), g.sizes.end()); }
Dims last_dims(IntArrayRef s, size_t k) { return Dims(s.end() - k, s.end()); }

// ---- max pooling: the gradient goes to each window's argmax ---------------------------
template <int K>
void max_pool_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const Dims in = sizes_of(ctx.input_geometry(0));
  out.set(0, call<OpId::_pool_scatter>(g[0], ctx.output(1), last_dims(in, K), true));
}
STRATA_DERIVATIVE_NAMED(max_pool1d_with_indices, save_inputs(), save_outputs(1), max_pool_backward<1>,
                        "MaxPool1DWithIndicesBackward0");
STRATA_DERIVATIVE_NAMED(max_pool3d_with_indices, save_inputs(), save_outputs(1), max_pool_backward<3>,
                        "MaxPool3DWithIndicesBackward0");
STRATA_DERIVATIVE_NAMED(adaptive_max_pool1d, save_inputs(), save_outputs(1), max_pool_backward<1>,
                        "AdaptiveMaxPool1DBackward0");
STRATA_DERIVATIVE_NAMED(adaptive_max_pool2d, save_inputs(), save_outputs(1), max_pool_backward<2>,
                        "AdaptiveMaxPool2DBackward0");
STRATA_DERIVATIVE_NAMED(adaptive_max_pool3d, save_inputs(), save_outputs(1), max_pool_backward<3>,
                        "AdaptiveMaxPool3DBackward0");

// The scatter's adjoint gathers the gradient at the indices, plane by plane.
void pool_scatter_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  if (!ctx.needs_grad(0)) return;
  const Tensor idx = ctx.input(1);
  const Dims src = sizes_of(ctx.input_geometry(0));
  const size_t k = ctx.arg_ints(2).size();
  int64_t planes = 1;
  for (size_t i = 0; i + k < src.size(); ++i) planes *= src[i];
  if (planes == 0 || idx.numel() == 0) {
    out.set(0, zeros_of(ctx.input_geometry(0)));
    return;
  }
  Tensor gg = gather(reshape(g[0], Dims{planes, -1}), 1, reshape(idx, Dims{planes, -1}));
  out.set(0, reshape(gg, src));
}
STRATA_DERIVATIVE_NAMED(_pool_scatter, save_inputs(1), save_outputs(), pool_scatter_backward,
                        "PoolScatterBackward0");

// ---- average pooling -------------------------------------------------------------------
template <int K>
void avg_pool_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const Dims k = per_dim(ctx.arg_ints(1), K, 1);
  const Dims s = ctx.arg_is_none(2) || ctx.arg_ints(2).empty() ? k : per_dim(ctx.arg_ints(2), K, 1);
  const Dims p = per_dim(ctx.arg_ints(3), K, 0);
  const std::optional<int64_t> divisor = K == 3 ? ctx.arg_opt_int(6) : std::nullopt;
  out.set(0, call<OpId::_avg_pool_backward>(g[0], sizes_of(ctx.input_geometry(0)), k, s, p, ctx.arg_bool(4),
                                            ctx.arg_bool(5), divisor));
}
STRATA_DERIVATIVE_NAMED(avg_pool1d, save_inputs(), save_outputs(), avg_pool_backward<1>, "AvgPool1DBackward0");
STRATA_DERIVATIVE_NAMED(avg_pool3d, save_inputs(), save_outputs(), avg_pool_backward<3>, "AvgPool3DBackward0");

// The gradient op is linear in grad_output; its adjoint is the pooling itself.
void avg_pool_backward_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const Dims k = ctx.arg_ints(2), s = ctx.arg_ints(3), p = ctx.arg_ints(4);
  const bool ceil = ctx.arg_bool(5), include_pad = ctx.arg_bool(6);
  const std::optional<int64_t> divisor = ctx.arg_opt_int(7);
  const Dims st = s.empty() ? k : s;
  Tensor r;
  if (k.size() == 1) {
    // avg_pool1d has no divisor_override: run as 2-D with height 1.
    r = call<OpId::avg_pool2d>(unsqueeze(g[0], -2), Dims{1, k[0]}, OptIntArrayRef(Dims{1, st[0]}), Dims{0, p[0]},
                               ceil, include_pad, divisor);
    r = squeeze(r, -2);
  } else if (k.size() == 2) {
    r = call<OpId::avg_pool2d>(g[0], k, OptIntArrayRef(st), p, ceil, include_pad, divisor);
  } else {
    r = call<OpId::avg_pool3d>(g[0], k, OptIntArrayRef(st), p, ceil, include_pad, divisor);
  }
  out.set(0, r);
}
STRATA_DERIVATIVE_NAMED(_avg_pool_backward, save_inputs(), save_outputs(), avg_pool_backward_backward,
                        "AvgPoolBackwardBackward0");

template <int K>
void adaptive_avg_pool_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  out.set(0, call<OpId::_adaptive_avg_pool_backward>(g[0], sizes_of(ctx.input_geometry(0)), int64_t{K}));
}
STRATA_DERIVATIVE_NAMED(adaptive_avg_pool1d, save_inputs(), save_outputs(), adaptive_avg_pool_backward<1>,
                        "AdaptiveAvgPool1DBackward0");
STRATA_DERIVATIVE_NAMED(adaptive_avg_pool3d, save_inputs(), save_outputs(), adaptive_avg_pool_backward<3>,
                        "AdaptiveAvgPool3DBackward0");

void adaptive_avg_pool_backward_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const int64_t k = ctx.arg_int(2);
  const Dims os = last_dims(ctx.input_geometry(0).sizes, static_cast<size_t>(k));
  Tensor r = k == 1 ? call<OpId::adaptive_avg_pool1d>(g[0], os)
             : k == 2 ? call<OpId::adaptive_avg_pool2d>(g[0], os)
                      : call<OpId::adaptive_avg_pool3d>(g[0], os);
  out.set(0, r);
}
STRATA_DERIVATIVE_NAMED(_adaptive_avg_pool_backward, save_inputs(), save_outputs(),
                        adaptive_avg_pool_backward_backward, "AdaptiveAvgPoolBackwardBackward0");

// ---- interpolation ------------------------------------------------------------------------
void interpolate_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  out.set(0, call<OpId::_interpolate_backward>(g[0], sizes_of(ctx.input_geometry(0)), ctx.arg_str(2),
                                               ctx.arg_bool(3), ctx.arg_opt_double(4), ctx.arg_opt_double(5),
                                               ctx.arg_opt_double(6)));
}
STRATA_DERIVATIVE_NAMED(_interpolate, save_inputs(), save_outputs(), interpolate_backward, "UpsampleBackward0");

void interpolate_backward_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const TensorGeometry& go = ctx.input_geometry(0);
  const Dims os = last_dims(go.sizes, go.sizes.size() - 2);
  out.set(0, call<OpId::_interpolate>(g[0], os, ctx.arg_str(2), ctx.arg_bool(3), ctx.arg_opt_double(4),
                                      ctx.arg_opt_double(5), ctx.arg_opt_double(6)));
}
STRATA_DERIVATIVE_NAMED(_interpolate_backward, save_inputs(), save_outputs(), interpolate_backward_backward,
                        "UpsampleBackwardBackward0");

// ---- transposed convolution ----------------------------------------------------------------
// conv_transpose is the adjoint of conv2d in its input, hence dx = conv(g, w) and dw = conv2d's weight
// gradient with the roles of input and grad_output swapped. 1-D runs as 2-D with height 1.
template <int K>
void conv_transpose_backward(const BackwardCtx& ctx, const variable_list& grads, GradOut& out) {
  const Tensor g = grads[0];
  const Dims stride = per_dim(ctx.arg_ints(3), K, 1), padding = per_dim(ctx.arg_ints(4), K, 0);
  const Dims dilation = per_dim(ctx.arg_ints(7), K, 1);
  const int64_t groups = ctx.arg_int(6);
  if (ctx.input_defined(2) && ctx.needs_grad(2)) {
    Dims dims;
    if (g.dim() == K + 2) dims.push_back(0);
    for (int i = 0; i < K; ++i) dims.push_back(g.dim() - K + i);
    out.set(2, sum(g, dims));
  }
  if (!ctx.needs_grad(0) && !ctx.needs_grad(1)) return;
  const Tensor x = ctx.input(0), w = ctx.input(1);
  if (ctx.needs_grad(0)) {
    Tensor gx = K == 1 ? call<OpId::conv1d>(g, w, std::optional<Tensor>(), stride, padding, dilation, groups)
                       : call<OpId::conv2d>(g, w, std::optional<Tensor>(), stride, padding, dilation, groups);
    out.set(0, gx);
  }
  if (ctx.needs_grad(1) && grad_mode_enabled()) {
    // create_graph: the weight gradient from differentiable ops. Per group, with N as the channel dim,
    // gw[ci, co, a, b] = sum_n,i,j x[n, ci, i, j] g[n, co, i * s - p + a * d, ...] is conv2d(g^T, x^T) with
    // stride and dilation swapped (cut to the kernel size: output_padding can make it longer).
    const bool batched = x.dim() == K + 2;
    auto as4 = [&](const Tensor& t) {
      Tensor b = batched ? t : unsqueeze(t, 0);
      return K == 1 ? unsqueeze(b, -2) : b;
    };
    const Tensor x4 = as4(x), g4 = as4(g);
    const int64_t cing = x4.size(1) / groups, coutg = g4.size(1) / groups;
    const int64_t kh = K == 2 ? w.size(2) : 1, kw = w.size(-1);
    std::vector<Tensor> parts;
    for (int64_t gi = 0; gi < groups; ++gi) {
      Tensor xg = transpose(narrow(x4, 1, gi * cing, cing), 0, 1);
      Tensor gg = transpose(narrow(g4, 1, gi * coutg, coutg), 0, 1);
      Tensor r = call<OpId::conv2d>(gg, xg, std::optional<Tensor>(), Dims{K == 2 ? dilation[0] : 1, dilation[K - 1]},
                        Dims{K == 2 ? padding[0] : 0, padding[K - 1]}, Dims{K == 2 ? stride[0] : 1, stride[K - 1]},
                        1);
      r = narrow(narrow(r, 2, 0, kh), 3, 0, kw);
      parts.push_back(transpose(r, 0, 1));
    }
    Tensor gw = parts.size() == 1 ? parts[0] : cat(parts, 0);
    out.set(1, reshape(gw, w.sizes()));
  } else if (ctx.needs_grad(1)) {
    const bool batched = x.dim() == K + 2;
    const int64_t n = batched ? x.size(0) : 1;
    auto as4 = [&](const Tensor& t) {
      const int64_t h = K == 2 ? t.size(-2) : 1;
      return reshape(t, Dims{n, t.size(batched ? 1 : 0), h, t.size(-1)});
    };
    const Tensor w4 = reshape(w, Dims{w.size(0), w.size(1), K == 2 ? w.size(2) : 1, w.size(-1)});
    auto res = call<OpId::_conv2d_backward>(as4(detach(x)), as4(detach(g)), detach(w4),
                                            Dims{K == 2 ? stride[0] : 1, stride[K - 1]},
                                            Dims{K == 2 ? padding[0] : 0, padding[K - 1]},
                                            Dims{K == 2 ? dilation[0] : 1, dilation[K - 1]}, groups, false, true);
    out.set(1, reshape(std::get<1>(res), w.sizes()));
  }
}
STRATA_DERIVATIVE_NAMED(conv_transpose1d, save_inputs(0, 1), save_outputs(), conv_transpose_backward<1>,
                        "ConvolutionBackward0");
STRATA_DERIVATIVE_NAMED(conv_transpose2d, save_inputs(0, 1), save_outputs(), conv_transpose_backward<2>,
                        "ConvolutionBackward0");

// ---- im2col / col2im: each other's adjoint -------------------------------------------------
void im2col_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const Dims os = last_dims(ctx.input_geometry(0).sizes, 2);
  out.set(0, call<OpId::col2im>(g[0], os, ctx.arg_ints(1), ctx.arg_ints(2), ctx.arg_ints(3), ctx.arg_ints(4)));
}
STRATA_DERIVATIVE_NAMED(im2col, save_inputs(), save_outputs(), im2col_backward, "Im2ColBackward0");

void col2im_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  out.set(0, call<OpId::im2col>(g[0], ctx.arg_ints(2), ctx.arg_ints(3), ctx.arg_ints(4), ctx.arg_ints(5)));
}
STRATA_DERIVATIVE_NAMED(col2im, save_inputs(), save_outputs(), col2im_backward, "Col2ImBackward0");

}  // namespace
}  // namespace strata::autograd
