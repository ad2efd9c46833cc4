// Derivatives of the ops in decl/surface_more.def. The composites (ldexp,
// repeat_interleave, renorm) need none; gcd, lcm, the shifts, nextafter and
// frexp are not differentiable in torch either. Every formula uses the ops
// themselves, so double backward works.
#include "autograd/derivative_util.h"
#include "ops/api/surface_more.h"

namespace strata::autograd {
namespace {

// fmax/fmin: the whole gradient goes to the side the result came from; ties
// go to self, and a nan loses to a number (torch's rule).
void fextremum_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out, bool is_max) {
  Tensor a = ctx.input(0), b = ctx.input(1);
  Tensor self_wins = logical_or(is_max ? ge(a, b) : le(a, b), isnan(b));
  Tensor zero = zeros_like(g[0]);
  if (ctx.needs_grad(0)) out.set(0, where(self_wins, g[0], zero));
  if (ctx.needs_grad(1)) out.set(1, where(self_wins, zero, g[0]));
}
void fmax_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  fextremum_backward(ctx, g, out, true);
}
void fmin_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  fextremum_backward(ctx, g, out, false);
}
STRATA_DERIVATIVE(fmax, save_inputs(0, 1), save_outputs(), fmax_backward);
STRATA_DERIVATIVE(fmin, save_inputs(0, 1), save_outputs(), fmin_backward);

// *_scatter(self, src, view args): self's gradient is g with the viewed part
// zeroed (the same scatter of zeros), src's is the same view of g.
Tensor zeros_for_src(const BackwardCtx& ctx) { return zeros_of(ctx.input_geometry(1)); }

void slice_scatter_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const int64_t dim = ctx.arg_int(2), step = ctx.arg_int(5);
  const OptInt start = ctx.arg_opt_int(3), end = ctx.arg_opt_int(4);
  if (ctx.needs_grad(0)) out.set(0, slice_scatter(g[0], zeros_for_src(ctx), dim, start, end, step));
  if (ctx.needs_grad(1)) out.set(1, slice(g[0], dim, start, end, step));
}
STRATA_DERIVATIVE(slice_scatter, save_inputs(), save_outputs(), slice_scatter_backward);

void select_scatter_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const int64_t dim = ctx.arg_int(2), index = ctx.arg_int(3);
  if (ctx.needs_grad(0)) out.set(0, select_scatter(g[0], zeros_for_src(ctx), dim, index));
  if (ctx.needs_grad(1)) out.set(1, select(g[0], dim, index));
}
STRATA_DERIVATIVE(select_scatter, save_inputs(), save_outputs(), select_scatter_backward);

void diagonal_scatter_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const int64_t offset = ctx.arg_int(2), d1 = ctx.arg_int(3), d2 = ctx.arg_int(4);
  if (ctx.needs_grad(0)) out.set(0, diagonal_scatter(g[0], zeros_for_src(ctx), offset, d1, d2));
  if (ctx.needs_grad(1)) out.set(1, diagonal(g[0], offset, d1, d2));
}
STRATA_DERIVATIVE(diagonal_scatter, save_inputs(), save_outputs(), diagonal_scatter_backward);

// The forward addressed a contiguous copy of self, so the backward takes the
// same view of a contiguous g.
void as_strided_scatter_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const std::vector<int64_t>& size = ctx.arg_ints(2);
  const std::vector<int64_t>& stride = ctx.arg_ints(3);
  const OptInt offset = ctx.arg_opt_int(4);
  if (ctx.needs_grad(0)) out.set(0, as_strided_scatter(g[0], zeros_for_src(ctx), size, stride, offset));
  if (ctx.needs_grad(1)) out.set(1, clone(as_strided(contiguous(clone(g[0])), size, stride, offset)));
}
STRATA_DERIVATIVE(as_strided_scatter, save_inputs(), save_outputs(), as_strided_scatter_backward);

}  // namespace
}  // namespace strata::autograd
