// Derivatives of convolution, pooling and pad (decl/nn.def). Convolution and
// pad are linear maps between flattened spatial planes, so their backward
// builds the map's index table on the host (integer tensors, not
// differentiated) and applies its transpose with index_select / index_add and
// matmul; pooling uses the gradient ops of decl/nn_more.def. Being made of
// differentiable ops, they support double backward.
// Convolution uses the fused _conv2d_backward kernel instead when no graph of
// the backward is recorded (the common case: plain loss.backward()).
#include <algorithm>

#include "autograd/derivative_util.h"
#include "autograd/variable.h"
#include "core/shape.h"

namespace strata::autograd {
namespace {

using Dims = std::vector<int64_t>;

Tensor host_index(const std::vector<int64_t>& v, Device dev) {
  Tensor t = empty_tensor(Dims{static_cast<int64_t>(v.size())}, ScalarType::Int64, Device(DeviceType::CPU));
  if (!v.empty()) std::copy(v.begin(), v.end(), t.data_ptr<int64_t>());
  return dev == t.device() ? t : to_device(t, dev);
}

// Stride/padding/dilation lists are recorded as given (one value or one per dim).
Dims per_dim(const std::vector<int64_t>& v, int k, int64_t dflt) {
  if (v.empty()) return Dims(k, dflt);
  if (v.size() == 1) return Dims(k, v[0]);
  return Dims(v.begin(), v.end());
}

// ---- convolution --------------------------------------------------------------------
// With cols = im2col(x) ([N, G, Cg*K, L], K kernel taps, L output positions)
// the forward is out = W_g @ cols per group, hence
//   dW = sum_n g @ cols^T,   dcols = W_g^T @ g,   dx = col2im(dcols),   db = sum g.
// Conv1d is conv2d with height 1.
void conv_backward(const BackwardCtx& ctx, const variable_list& grads, GradOut& out, int k, const Dims& stride,
                   const Dims& pad_lo, const Dims& dilation, int64_t groups) {
  Tensor x = ctx.input(0), w = ctx.input(1), g = grads[0];
  const bool batched = x.dim() == k + 2;
  const int64_t n = batched ? x.size(0) : 1, c = x.size(batched ? 1 : 0), o = w.size(0);
  const int64_t h = k == 2 ? x.size(-2) : 1, wd = x.size(-1);
  const int64_t kh = k == 2 ? w.size(-2) : 1, kw = w.size(-1);
  const int64_t oh = k == 2 ? g.size(-2) : 1, ow = g.size(-1);
  const int64_t sh = k == 2 ? stride[0] : 1, sw = stride[k - 1];
  const int64_t ph = k == 2 ? pad_lo[0] : 0, pw = pad_lo[k - 1];
  const int64_t dh = k == 2 ? dilation[0] : 1, dw = dilation[k - 1];
  const int64_t cg = c / groups, og = o / groups, kk = kh * kw, l = oh * ow, hw = h * wd;
  const bool bias_grad = ctx.input_defined(2) && ctx.needs_grad(2);
  if ((ctx.needs_grad(0) || ctx.needs_grad(1)) && x.numel() > 0 && g.numel() > 0 && !grad_mode_enabled()) {
    // No graph of this backward is recorded: one fused kernel (batched im2col/col2im + GEMM) instead of the
    // differentiable composite below, which stays for create_graph=True (double backward).
    Tensor g4 = reshape(to_dtype(g, x.dtype()), Dims{n, o, oh, ow});
    auto [gx, gw, gb] = call<OpId::_conv2d_backward>(g4, reshape(x, Dims{n, c, h, wd}), reshape(w, Dims{o, cg, kh, kw}),
                                                     Dims{sh, sw}, Dims{ph, pw}, Dims{dh, dw}, groups,
                                                     ctx.needs_grad(0), ctx.needs_grad(1));
    if (ctx.needs_grad(0)) out.set(0, reshape(gx, x.sizes()));
    if (ctx.needs_grad(1)) out.set(1, reshape(gw, w.sizes()));
    if (bias_grad) out.set(2, gb);
    return;
  }
  Tensor g5 = reshape(g, Dims{n, groups, og, l});
  if (bias_grad) out.set(2, reshape(sum(g5, Dims{0, 3}), Dims{o}));
  if (!ctx.needs_grad(0) && !ctx.needs_grad(1)) return;
  if (x.numel() == 0 || g.numel() == 0) {
    if (ctx.needs_grad(0)) out.set(0, zeros_like(x));
    if (ctx.needs_grad(1)) out.set(1, zeros_like(w));
    return;
  }
  // Input position of each (tap, output position); hw is an extra zero column for the padding.
  std::vector<int64_t> idx(static_cast<size_t>(kk * l));
  size_t e = 0;
  for (int64_t a = 0; a < kh; ++a)
    for (int64_t b = 0; b < kw; ++b)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          const int64_t ih = i * sh - ph + a * dh, iw = j * sw - pw + b * dw;
          idx[e++] = (ih >= 0 && ih < h && iw >= 0 && iw < wd) ? ih * wd + iw : hw;
        }
  Tensor index = host_index(idx, x.device());
  if (ctx.needs_grad(1)) {
    Tensor xp = pad(reshape(x, Dims{n, c, hw}), Dims{0, 1});
    Tensor cols = reshape(index_select(xp, 2, index), Dims{n, groups, cg * kk, l});
    Tensor gw = sum(matmul(g5, transpose(cols, -1, -2)), Dims{0});
    out.set(1, reshape(gw, w.sizes()));
  }
  if (ctx.needs_grad(0)) {
    Tensor wt = transpose(reshape(w, Dims{groups, og, cg * kk}), -1, -2);
    Tensor gcols = reshape(matmul(wt, g5), Dims{n, c, kk * l});
    Tensor gx = index_add(zeros(Dims{n, c, hw + 1}, gcols.dtype(), gcols.device()), 2, index, gcols);
    out.set(0, reshape(narrow(gx, 2, 0, hw), x.sizes()));
  }
}

template <int K>
void conv_int_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  conv_backward(ctx, g, out, K, per_dim(ctx.arg_ints(3), K, 1), per_dim(ctx.arg_ints(4), K, 0),
                per_dim(ctx.arg_ints(5), K, 1), ctx.arg_int(6));
}
template <int K>
void conv_str_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const Dims dil = per_dim(ctx.arg_ints(5), K, 1);
  Dims lo(K, 0);
  if (ctx.arg_str(4) == "same") {
    // Odd totals put the extra element on the right (as the forward), so the left padding is total / 2.
    const TensorGeometry& wg = ctx.input_geometry(1);
    for (int i = 0; i < K; ++i) lo[i] = dil[i] * (wg.sizes[2 + i] - 1) / 2;
  }
  conv_backward(ctx, g, out, K, per_dim(ctx.arg_ints(3), K, 1), lo, dil, ctx.arg_int(6));
}
STRATA_DERIVATIVE(conv1d, save_inputs(0, 1), save_outputs(), conv_int_backward<1>);
STRATA_DERIVATIVE_NAMED(conv1d_padding, save_inputs(0, 1), save_outputs(), conv_str_backward<1>, "Conv1DBackward0");
STRATA_DERIVATIVE(conv2d, save_inputs(0, 1), save_outputs(), conv_int_backward<2>);
STRATA_DERIVATIVE_NAMED(conv2d_padding, save_inputs(0, 1), save_outputs(), conv_str_backward<2>, "Conv2DBackward0");

// ---- pooling -------------------------------------------------------------------------
// The fused gradient ops of decl/nn_more.def (one pass per plane; each differentiable through the pooling).
void avg_pool2d_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const TensorGeometry& in = ctx.input_geometry(0);
  const Dims k = per_dim(ctx.arg_ints(1), 2, 1);
  const Dims s = ctx.arg_is_none(2) || ctx.arg_ints(2).empty() ? k : per_dim(ctx.arg_ints(2), 2, 1);
  const Dims p = per_dim(ctx.arg_ints(3), 2, 0);
  out.set(0, call<OpId::_avg_pool_backward>(g[0], Dims(in.sizes.begin(), in.sizes.end()), k, s, p, ctx.arg_bool(4),
                                            ctx.arg_bool(5), ctx.arg_opt_int(6)));
}
STRATA_DERIVATIVE_NAMED(avg_pool2d, save_inputs(), save_outputs(), avg_pool2d_backward, "AvgPool2DBackward0");

void adaptive_avg_pool2d_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const TensorGeometry& in = ctx.input_geometry(0);
  out.set(0, call<OpId::_adaptive_avg_pool_backward>(g[0], Dims(in.sizes.begin(), in.sizes.end()), int64_t{2}));
}
STRATA_DERIVATIVE_NAMED(adaptive_avg_pool2d, save_inputs(), save_outputs(), adaptive_avg_pool2d_backward,
                        "AdaptiveAvgPool2DBackward0");

// The gradient goes to each window's argmax (indices are flat within a plane, as torch's).
Tensor max_pool_scatter(const Tensor& g, const Tensor& indices, const TensorGeometry& in) {
  const int64_t nd = static_cast<int64_t>(in.sizes.size());
  const int64_t hw = in.sizes[nd - 2] * in.sizes[nd - 1];
  const int64_t planes = hw == 0 ? 0 : checked_numel(in.sizes) / hw;
  if (planes == 0 || g.numel() == 0) return zeros_of(in);
  // _pool_scatter (decl/nn_more.def): one pass per plane, differentiable (its derivative gathers).
  return call<OpId::_pool_scatter>(g, indices, Dims{in.sizes[nd - 2], in.sizes[nd - 1]}, true);
}

// max_pool2d_with_indices keeps its indices output; max_pool2d has none, so
// its backward recomputes them from the saved input.
void max_pool2d_with_indices_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  out.set(0, max_pool_scatter(g[0], ctx.output(1), ctx.input_geometry(0)));
}
STRATA_DERIVATIVE_NAMED(max_pool2d_with_indices, save_inputs(), save_outputs(1), max_pool2d_with_indices_backward,
                        "MaxPool2DWithIndicesBackward0");

void max_pool2d_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  std::optional<std::vector<int64_t>> stride;
  if (!ctx.arg_is_none(2)) stride = ctx.arg_ints(2);
  Tensor indices = std::get<1>(max_pool2d_with_indices(detach(ctx.input(0)), ctx.arg_ints(1), stride,
                                                       ctx.arg_ints(3), ctx.arg_ints(4), ctx.arg_bool(5)));
  out.set(0, max_pool_scatter(g[0], indices, ctx.input_geometry(0)));
}
STRATA_DERIVATIVE_NAMED(max_pool2d, save_inputs(0), save_outputs(), max_pool2d_backward, "MaxPool2DBackward0");

// ---- pad -------------------------------------------------------------------------------
void pad_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const std::vector<int64_t>& p = ctx.arg_ints(1);
  const std::string_view mode = ctx.arg_str(2);
  if (mode == "constant") {
    // Padding with the negated widths crops what was added and zero-fills what was cropped.
    Dims neg_p;
    for (int64_t v : p) neg_p.push_back(-v);
    out.set(0, pad(g[0], neg_p));
    return;
  }
  // reflect / replicate / circular act on each padded dim separately, as out = index_select(in, d, map_d);
  // the backward applies the transposes (index_add) in reverse order.
  const TensorGeometry& in = ctx.input_geometry(0);
  const int64_t nd = static_cast<int64_t>(in.sizes.size());
  Tensor r = g[0];
  for (size_t i = 0; 2 * i < p.size(); ++i) {
    const int64_t d = nd - 1 - static_cast<int64_t>(i), n = in.sizes[d], lo = p[2 * i];
    const int64_t m = r.size(d);
    std::vector<int64_t> map(static_cast<size_t>(m));
    for (int64_t o = 0; o < m; ++o) {
      int64_t s = o - lo;
      if (mode == "reflect") {
        if (s < 0) s = -s;
        if (s >= n) s = 2 * (n - 1) - s;
      } else if (mode == "replicate") {
        s = std::clamp<int64_t>(s, 0, n - 1);
      } else {
        s = ((s % n) + n) % n;
      }
      map[o] = s;
    }
    Dims shape(r.sizes().begin(), r.sizes().end());
    shape[d] = n;
    r = index_add(zeros(shape, r.dtype(), r.device()), d, host_index(map, r.device()), r);
  }
  out.set(0, r);
}
STRATA_DERIVATIVE(pad, save_inputs(), save_outputs(), pad_backward);

}  // namespace
}  // namespace strata::autograd
