// Derivatives of the ops of decl/misc_more.def that are not composites:
// scatter_reduce (sum, mean, amax, amin, prod; with or without self).
#include "autograd/derivative_util.h"
#include "core/shape.h"
#include "ops/api/misc_more.h"

namespace strata::autograd {

namespace {

Tensor as1d(const Tensor& t) { return t.dim() == 0 ? reshape(t, DimVector{1}) : t; }

// A gradient shaped like index, zero-padded to src's (larger or equal) shape.
Tensor pad_to_src(const Tensor& g, IntArrayRef src_sizes) {
  std::vector<int64_t> p;
  bool any = false;
  for (int64_t d = g.dim() - 1; d >= 0; --d) {
    const int64_t extra = (src_sizes.empty() ? 1 : src_sizes[d]) - g.size(d);
    p.push_back(0);
    p.push_back(extra);
    any = any || extra != 0;
  }
  return any ? pad(g, p, "constant", 0.0) : g;
}

void scatter_reduce_backward(const BackwardCtx& ctx, const variable_list& grads, GradOut& out) {
  const TensorGeometry& self_geo = ctx.input_geometry(0);
  const TensorGeometry& src_geo = ctx.input_geometry(3);
  const Tensor self = as1d(ctx.input(0));
  const Tensor index = as1d(ctx.input(2));
  const Tensor src_full = as1d(ctx.input(3));
  const Tensor result = as1d(ctx.output(0));
  const Tensor g = as1d(grads[0]);
  const int64_t dim = wrap_dim(ctx.arg_int(1), self.dim());
  const std::string_view reduce = ctx.arg_str(4);
  const bool include_self = ctx.arg_bool(5);
  // The part of src that index covers.
  Tensor src = src_full;
  for (int64_t d = 0; d < index.dim(); ++d) src = narrow(src, d, 0, index.size(d));
  const Tensor zero = num(g, 0.0), one = num(g, 1.0);
  // Elements of self that received at least one value.
  const Tensor scattered = ne(scatter(zeros_like(g), dim, index, Scalar(1.0)), zero);
  Tensor gs, gsrc;
  if (reduce == "sum") {
    gs = include_self ? g : where(scattered, zero, g);
    gsrc = gather(g, dim, index);
  } else if (reduce == "mean") {
    Tensor count = scatter_add(include_self ? ones_like(g) : zeros_like(g), dim, index, ones_like(src));
    count = clamp(count, one, std::nullopt);
    Tensor gc = div(g, count);
    gs = include_self ? gc : where(scattered, zero, g);
    gsrc = gather(gc, dim, index);
  } else if (reduce == "amax" || reduce == "amin") {
    // The gradient is shared equally by every element equal to the result.
    Tensor self_is = eq(self, result);
    if (!include_self) self_is = logical_and(self_is, logical_not(scattered));
    Tensor src_is = eq(src, gather(result, dim, index));
    Tensor count = scatter_add(to_dtype(self_is, g.dtype()), dim, index, to_dtype(src_is, g.dtype()));
    Tensor gc = div(g, clamp(count, one, std::nullopt));
    gs = where(self_is, gc, zero);
    gsrc = where(src_is, gather(gc, dim, index), zero);
  } else {  // prod
    // d result / d x = product of the other members of x's group: result / x
    // when x != 0; otherwise the product of the group's nonzero members when x
    // is its only zero, else 0.
    const Tensor self_zero = eq(self, zero), src_zero = eq(src, zero);
    Tensor zeros_in = scatter_add(include_self ? to_dtype(self_zero, g.dtype()) : zeros_like(g), dim, index,
                                  to_dtype(src_zero, g.dtype()));
    Tensor prod_nz = scatter_reduce(where(self_zero, one, self), dim, index, where(src_zero, one, src), "prod",
                                    include_self);
    auto others = [&](const Tensor& x, const Tensor& x_zero, const Tensor& res, const Tensor& nz, const Tensor& zc) {
      Tensor safe = where(x_zero, one, x);
      return where(x_zero, where(eq(zc, one), nz, zero), div(res, safe));
    };
    Tensor o_self = others(self, self_zero, result, prod_nz, zeros_in);
    gs = where(scattered, include_self ? mul(g, o_self) : zero, g);
    Tensor o_src = others(src, src_zero, gather(result, dim, index), gather(prod_nz, dim, index),
                          gather(zeros_in, dim, index));
    gsrc = mul(gather(g, dim, index), o_src);
  }
  if (ctx.needs_grad(0)) out.set(0, reshape(gs, self_geo.sizes));
  if (ctx.needs_grad(3)) {
    Tensor r = pad_to_src(gsrc, src_full.sizes());
    out.set(3, reshape(r, src_geo.sizes));
  }
}
STRATA_DERIVATIVE(scatter_reduce, save_inputs(0, 2, 3), save_outputs(0), scatter_reduce_backward);

}  // namespace

}  // namespace strata::autograd
