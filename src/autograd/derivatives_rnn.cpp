// Derivatives of the recurrent layer ops (decl/rnn.def): each calls its fused
// backward op, which walks the steps in reverse with the gates the forward
// kept in its workspace. That backward is not itself differentiable, so a
// graph of it (create_graph=True, i.e. double backward through an RNN) is
// refused with NotImplementedError rather than silently giving wrong
// second derivatives.
#include "autograd/derivative_util.h"
#include "autograd/variable.h"

namespace strata::autograd {
namespace {

std::optional<Tensor> opt(const Tensor& t) { return t.defined() ? std::optional<Tensor>(t) : std::nullopt; }

void check_first_order(const BackwardCtx& ctx) {
  STRATA_CHECK_T(NotImplementedError, !grad_mode_enabled(), ctx.op_name(),
                 ": double backward (create_graph=True) through the recurrent layers is not implemented");
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
  check_first_order(ctx);
  const TensorVec g = call<OpId::_lstm_layer_backward>(
      grads[0], grads[1], grads[2], ctx.input(0), ctx.input(1), ctx.input(2), ctx.input(3), ctx.input(4),
      opt(ctx.input(7)), opt(ctx.input(8)), ctx.output(0), ctx.output(3), ctx.arg_bool(9),
      ctx.input_defined(5) || ctx.input_defined(6));
  set_grads(ctx, out, g, {0, 1, 2, 3, 4, 5, 6, 7});
}
STRATA_DERIVATIVE(_lstm_layer, save_inputs(0, 1, 2, 3, 4, 7, 8), save_outputs(0, 3), lstm_layer_backward);

// _gru_layer(input 0, hx 1, w_ih 2, w_hh 3, b_ih 4, b_hh 5, batch_sizes 6, reverse 7) -> [output, hy, workspace]
void gru_layer_backward(const BackwardCtx& ctx, const variable_list& grads, GradOut& out) {
  check_first_order(ctx);
  const TensorVec g = call<OpId::_gru_layer_backward>(grads[0], grads[1], ctx.input(0), ctx.input(1), ctx.input(2),
                                                      ctx.input(3), opt(ctx.input(6)), ctx.output(0), ctx.output(2),
                                                      ctx.arg_bool(7), ctx.input_defined(4) || ctx.input_defined(5));
  set_grads(ctx, out, g, {0, 1, 2, 3, 4, 5});
}
STRATA_DERIVATIVE(_gru_layer, save_inputs(0, 1, 2, 3, 6), save_outputs(0, 2), gru_layer_backward);

// _rnn_{tanh,relu}_layer(input 0, hx 1, w_ih 2, w_hh 3, b_ih 4, b_hh 5, batch_sizes 6, reverse 7) -> [output, hy]
template <bool Relu>
void rnn_layer_backward(const BackwardCtx& ctx, const variable_list& grads, GradOut& out) {
  check_first_order(ctx);
  const TensorVec g = call<OpId::_rnn_layer_backward>(grads[0], grads[1], ctx.input(0), ctx.input(1), ctx.input(2),
                                                      ctx.input(3), opt(ctx.input(6)), ctx.output(0), ctx.arg_bool(7),
                                                      ctx.input_defined(4) || ctx.input_defined(5), Relu);
  set_grads(ctx, out, g, {0, 1, 2, 3, 4, 5});
}
STRATA_DERIVATIVE(_rnn_tanh_layer, save_inputs(0, 1, 2, 3, 6), save_outputs(0), rnn_layer_backward<false>);
STRATA_DERIVATIVE(_rnn_relu_layer, save_inputs(0, 1, 2, 3, 6), save_outputs(0), rnn_layer_backward<true>);

}  // namespace
}  // namespace strata::autograd
