// Derivatives of the recurrent layer ops (decl/rnn.def).
//
// First order (grad mode off while the backward runs, i.e. no create_graph): the fused backward op walks the steps in
// reverse with the gates the forward kept in its workspace.
//
// With create_graph (double backward, strata.func transforms, gradient penalties) the backward must itself be
// recorded, and the fused backward op has no derivative. Then the layer is recomputed from its saved inputs with
// differentiable composite ops (one input GEMM, per step GEMM + gate ops, as torch's CPU LSTM/GRU/RNN do), and the
// engine differentiates that recomputation with create_graph, so every gradient is a recorded function of the
// inputs and of the incoming gradients. The recomputation starts from fresh aliases of the inputs, so the gradients
// are the partial derivatives of this op even when its inputs share history (e.g. hx computed from input), and the
// aliases connect the result back to the inputs' graph. The first-order path is unchanged (one branch).
#include "autograd/derivative_util.h"
#include "autograd/engine.h"
#include "autograd/variable.h"
#include "ops/rnn_kernels.h"

namespace strata::autograd {
namespace {

std::optional<Tensor> opt(const Tensor& t) { return t.defined() ? std::optional<Tensor>(t) : std::nullopt; }

using nn::RnnCell;

// One layer in one direction with differentiable ops: [output, hy(, cy)], the values the fused forward computes.
// Optional tensors are undefined when absent; batch_sizes (CPU int64) makes input the packed (N, I) data.
variable_list recompute_layer(RnnCell cell, const Tensor& input, const Tensor& hx, const Tensor& cx,
                              const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh,
                              const Tensor& w_hr, const Tensor& batch_sizes, bool reverse) {
  const bool packed = batch_sizes.defined();
  const int64_t B = hx.size(0), I = input.size(-1);
  std::vector<int64_t> sizes;
  if (packed) {
    const Tensor bs = contiguous(batch_sizes);
    sizes.assign(bs.data_ptr<int64_t>(), bs.data_ptr<int64_t>() + bs.numel());
  } else {
    sizes.assign(static_cast<size_t>(input.size(0)), input.size(1));
  }
  const int64_t T = static_cast<int64_t>(sizes.size());
  std::vector<int64_t> offsets(sizes.size());
  for (int64_t t = 1; t < T; ++t) offsets[t] = offsets[t - 1] + sizes[t - 1];
  const Tensor x2 = packed ? input : reshape(input, std::vector<int64_t>{-1, I});
  // The input projection of every step at once.
  Tensor gi_all = matmul(x2, t(w_ih));
  if (b_ih.defined()) gi_all = add(gi_all, b_ih);
  const Tensor w_hh_t = t(w_hh);
  const Tensor w_hr_t = w_hr.defined() ? t(w_hr) : Tensor();
  Tensor h = hx, c = cx;
  // The rows active at a step are a prefix of the state rows; the others keep their state.
  auto update = [B](const Tensor& state, const Tensor& fresh, int64_t nb) {
    return nb == B ? fresh : cat(std::vector<Tensor>{fresh, narrow(state, 0, nb, B - nb)}, 0);
  };
  std::vector<Tensor> outs(static_cast<size_t>(T));
  for (int64_t k = 0; k < T; ++k) {
    const int64_t step = reverse ? T - 1 - k : k, nb = sizes[step];
    const Tensor gi = narrow(gi_all, 0, offsets[step], nb);
    const Tensor hp = nb == B ? h : narrow(h, 0, 0, nb);
    Tensor gh = matmul(hp, w_hh_t);
    if (b_hh.defined()) gh = add(gh, b_hh);
    Tensor hn;
    if (cell == RnnCell::Lstm) {
      const std::vector<Tensor> g = chunk(add(gi, gh), 4, 1);
      const Tensor cp = nb == B ? c : narrow(c, 0, 0, nb);
      const Tensor cn = add(mul(sigmoid(g[1]), cp), mul(sigmoid(g[0]), tanh(g[2])));
      hn = mul(sigmoid(g[3]), tanh(cn));
      if (w_hr.defined()) hn = matmul(hn, w_hr_t);
      c = update(c, cn, nb);
    } else if (cell == RnnCell::Gru) {
      const std::vector<Tensor> a = chunk(gi, 3, 1), b = chunk(gh, 3, 1);
      const Tensor r = sigmoid(add(a[0], b[0])), z = sigmoid(add(a[1], b[1]));
      const Tensor n = tanh(add(a[2], mul(r, b[2])));
      hn = add(n, mul(z, sub(hp, n)));  // (1 - z) n + z h
    } else {
      const Tensor pre = add(gi, gh);
      hn = cell == RnnCell::Tanh ? tanh(pre) : relu(pre);
    }
    h = update(h, hn, nb);
    outs[static_cast<size_t>(step)] = hn;
  }
  Tensor out = cat(outs, 0);
  if (!packed) out = reshape(out, std::vector<int64_t>{input.size(0), input.size(1), out.size(-1)});
  variable_list r{out, h};
  if (cell == RnnCell::Lstm) r.push_back(c);
  return r;
}

// The create_graph backward: recomputes the layer from aliases of the inputs that need a gradient and
// differentiates it with the engine (recording). args: schema positions of input, hx, (cx,) w_ih, w_hh, b_ih, b_hh,
// (w_hr), in that order; grads: the incoming gradients of [output, hy(, cy)].
void recorded_backward(const BackwardCtx& ctx, RnnCell cell, const variable_list& grads, const std::vector<int>& args,
                       int batch_sizes_arg, int reverse_arg, GradOut& out) {
  const bool lstm = cell == RnnCell::Lstm;
  std::vector<Tensor> v(args.size());
  variable_list wrt;
  std::vector<int> wrt_args;
  for (size_t k = 0; k < args.size(); ++k) {
    const int arg = args[k];
    if (!ctx.input_defined(arg)) continue;
    v[k] = ctx.input(arg);
    if (ctx.needs_grad(arg) && requires_grad(v[k])) {
      v[k] = alias(v[k]);
      wrt.push_back(v[k]);
      wrt_args.push_back(arg);
    }
  }
  if (wrt.empty()) return;
  const Tensor none;
  const size_t o = lstm ? 1 : 0;  // the LSTM has cx after hx
  const variable_list res =
      recompute_layer(cell, v[0], v[1], lstm ? v[2] : none, v[2 + o], v[3 + o], v[4 + o], v[5 + o],
                      lstm ? v[6 + o] : none, ctx.input_defined(batch_sizes_arg) ? ctx.input(batch_sizes_arg) : none,
                      ctx.arg_bool(reverse_arg));
  variable_list roots, seeds;
  for (size_t k = 0; k < res.size(); ++k) {
    if (k < grads.size() && grads[k].defined() && ctx.grad_defined(static_cast<int>(k)) && requires_grad(res[k])) {
      roots.push_back(res[k]);
      seeds.push_back(grads[k]);
    }
  }
  if (roots.empty()) return;
  BackwardOptions opt;
  opt.keep_graph = true;
  opt.create_graph = true;
  opt.allow_unused = true;
  opt.accumulate_grad = false;
  const variable_list g = run_backward(roots, seeds, wrt, opt);
  for (size_t k = 0; k < wrt_args.size(); ++k)
    if (g[k].defined()) out.set(wrt_args[k], g[k]);
}

// Hands the gradients of the tensor arguments `args` (schema positions) from the backward op's results `g` (whose
// entries for absent arguments are empty placeholders, skipped here).
void set_grads(const BackwardCtx& ctx, GradOut& out, const TensorVec& g, std::initializer_list<int> args) {
  size_t k = 0;
  for (int arg : args) {
    if (k < g.size() && g[k].defined() && ctx.input_defined(arg) && ctx.needs_grad(arg)) out.set(arg, g[k]);
    ++k;
  }
}

// _lstm_layer(input 0, hx 1, cx 2, w_ih 3, w_hh 4, b_ih 5, b_hh 6, w_hr 7, batch_sizes 8, reverse 9)
//   -> [output, hy, cy, workspace]
void lstm_layer_backward(const BackwardCtx& ctx, const variable_list& grads, GradOut& out) {
  if (grad_mode_enabled()) return recorded_backward(ctx, RnnCell::Lstm, grads, {0, 1, 2, 3, 4, 5, 6, 7}, 8, 9, out);
  const TensorVec g = call<OpId::_lstm_layer_backward>(
      grads[0], grads[1], grads[2], ctx.input(0), ctx.input(1), ctx.input(2), ctx.input(3), ctx.input(4),
      opt(ctx.input(7)), opt(ctx.input(8)), ctx.output(0), ctx.output(3), ctx.arg_bool(9),
      ctx.input_defined(5) || ctx.input_defined(6));
  set_grads(ctx, out, g, {0, 1, 2, 3, 4, 5, 6, 7});
}
STRATA_DERIVATIVE(_lstm_layer, save_inputs(0, 1, 2, 3, 4, 5, 6, 7, 8), save_outputs(0, 3), lstm_layer_backward);

// _gru_layer(input 0, hx 1, w_ih 2, w_hh 3, b_ih 4, b_hh 5, batch_sizes 6, reverse 7) -> [output, hy, workspace]
void gru_layer_backward(const BackwardCtx& ctx, const variable_list& grads, GradOut& out) {
  if (grad_mode_enabled()) return recorded_backward(ctx, RnnCell::Gru, grads, {0, 1, 2, 3, 4, 5}, 6, 7, out);
  const TensorVec g = call<OpId::_gru_layer_backward>(grads[0], grads[1], ctx.input(0), ctx.input(1), ctx.input(2),
                                                      ctx.input(3), opt(ctx.input(6)), ctx.output(0), ctx.output(2),
                                                      ctx.arg_bool(7), ctx.input_defined(4) || ctx.input_defined(5));
  set_grads(ctx, out, g, {0, 1, 2, 3, 4, 5});
}
STRATA_DERIVATIVE(_gru_layer, save_inputs(0, 1, 2, 3, 4, 5, 6), save_outputs(0, 2), gru_layer_backward);

// _rnn_{tanh,relu}_layer(input 0, hx 1, w_ih 2, w_hh 3, b_ih 4, b_hh 5, batch_sizes 6, reverse 7) -> [output, hy]
template <bool Relu>
void rnn_layer_backward(const BackwardCtx& ctx, const variable_list& grads, GradOut& out) {
  if (grad_mode_enabled())
    return recorded_backward(ctx, Relu ? RnnCell::Relu : RnnCell::Tanh, grads, {0, 1, 2, 3, 4, 5}, 6, 7, out);
  const TensorVec g = call<OpId::_rnn_layer_backward>(grads[0], grads[1], ctx.input(0), ctx.input(1), ctx.input(2),
                                                      ctx.input(3), opt(ctx.input(6)), ctx.output(0), ctx.arg_bool(7),
                                                      ctx.input_defined(4) || ctx.input_defined(5), Relu);
  set_grads(ctx, out, g, {0, 1, 2, 3, 4, 5});
}
STRATA_DERIVATIVE(_rnn_tanh_layer, save_inputs(0, 1, 2, 3, 4, 5, 6), save_outputs(0), rnn_layer_backward<false>);
STRATA_DERIVATIVE(_rnn_relu_layer, save_inputs(0, 1, 2, 3, 4, 5, 6), save_outputs(0), rnn_layer_backward<true>);

}  // namespace
}  // namespace strata::autograd
