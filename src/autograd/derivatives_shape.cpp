// Derivatives of the view ops (decl/view.def) and the shape and index ops
// (decl/shape.def). Composite ops (reshape, flatten, narrow, t, squeeze,
// squeeze.dim, unbind, tile, index_put, argsort, ...) need none: the
// primitives they are made of record themselves.
//
// Every formula is written out of place with Strata's own ops so that double
// backward works: writing into a fresh zeros tensor through a view (PyTorch's
// select_backward style) would not record, because views of tensors that need
// no gradient are not tracked. Gradients of views that may overlap (diagonal,
// unfold, as_strided) scatter-add through an index map instead of copying, so
// elements seen more than once accumulate.
#include <algorithm>

#include "autograd/derivative_util.h"
#include "core/shape.h"

namespace strata::autograd {

namespace {

int64_t numel_of(IntArrayRef sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

bool same_sizes(IntArrayRef a, IntArrayRef b) { return std::equal(a.begin(), a.end(), b.begin(), b.end()); }

// g with `before` zeros in front of it and `after` zeros behind it along d.
Tensor pad_dim(const Tensor& g, int64_t d, int64_t before, int64_t after) {
  if (before == 0 && after == 0) return g;
  auto zeros_part = [&](int64_t n) {
    DimVector s(g.sizes().begin(), g.sizes().end());
    s[d] = n;
    return zeros(s, g.dtype(), g.device());
  };
  std::vector<Tensor> parts;
  if (before > 0) parts.push_back(zeros_part(before));
  parts.push_back(g);
  if (after > 0) parts.push_back(zeros_part(after));
  return cat(parts, d);
}

// Zero-pads g at the end of each dim up to `sizes` (g is never larger).
Tensor pad_to(const Tensor& g, IntArrayRef sizes) {
  if (same_sizes(g.sizes(), sizes)) return g;
  // 0-d src with a 1-element index (scatter allows it): the same single element.
  if (g.dim() != static_cast<int64_t>(sizes.size())) return reshape(g, sizes);
  Tensor r = g;
  for (int64_t d = 0; d < r.dim(); ++d) r = pad_dim(r, d, 0, sizes[d] - r.sizes()[d]);
  return r;
}

// The gradient of a view given where each of its elements lives: `pos` (int64,
// g's shape) holds positions in a flat buffer of `len` elements. index_add
// accumulates, so positions seen several times (overlapping views) add up.
Tensor scatter_positions(const Tensor& g, const Tensor& pos, int64_t len) {
  Tensor buf = zeros(DimVector{len}, g.dtype(), g.device());
  return index_add(buf, 0, reshape(pos, DimVector{-1}), reshape(g, DimVector{-1}));
}

// Logical element numbers of a tensor of shape `sizes`, for replaying a view op
// on them.
Tensor logical_ids(IntArrayRef sizes, Device device) {
  return reshape(arange(Scalar(numel_of(sizes)), ScalarType::Int64, device), sizes);
}

// Whether distinct indices of (sizes, strides) always address distinct elements.
bool non_overlapping(IntArrayRef sizes, IntArrayRef strides) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size)
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 0) return true;
    if (sizes[i] > 1) dims.emplace_back(strides[i], sizes[i]);
  }
  std::sort(dims.begin(), dims.end());
  int64_t reach = 0;  // largest offset the smaller-stride dims reach
  for (auto [st, sz] : dims) {
    if (st <= reach) return false;
    reach += (sz - 1) * st;
  }
  return true;
}

// ---- views --------------------------------------------------------------------
void view_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  out.set(0, reshape(g[0], ctx.input_geometry(0).sizes));
}
STRATA_DERIVATIVE(view, save_inputs(), save_outputs(), view_backward);

void alias_backward(const BackwardCtx&, const variable_list& g, GradOut& out) { out.set(0, g[0]); }
STRATA_DERIVATIVE(alias, save_inputs(), save_outputs(), alias_backward);

void transpose_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  out.set(0, transpose(g[0], ctx.arg_int(1), ctx.arg_int(2)));
}
STRATA_DERIVATIVE(transpose, save_inputs(), save_outputs(), transpose_backward);

void permute_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const auto& dims = ctx.arg_ints(1);
  const int64_t n = static_cast<int64_t>(dims.size());
  std::vector<int64_t> inv(dims.size());
  for (int64_t i = 0; i < n; ++i) inv[wrap_dim(dims[i], n, "permute")] = i;
  out.set(0, permute(g[0], inv));
}
STRATA_DERIVATIVE(permute, save_inputs(), save_outputs(), permute_backward);

void expand_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  out.set(0, sum_to(g[0], ctx.input_geometry(0).sizes));
}
STRATA_DERIVATIVE(expand, save_inputs(), save_outputs(), expand_backward);

// Only size-1 dims come and go: reshape is always a view here.
void unsqueeze_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  out.set(0, reshape(g[0], ctx.input_geometry(0).sizes));
}
STRATA_DERIVATIVE(unsqueeze, save_inputs(), save_outputs(), unsqueeze_backward);
STRATA_DERIVATIVE_NAMED(squeeze_dims, save_inputs(), save_outputs(), unsqueeze_backward, "SqueezeBackward2");

void select_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const TensorGeometry& in = ctx.input_geometry(0);
  const int64_t n = static_cast<int64_t>(in.sizes.size());
  const int64_t d = wrap_dim(ctx.arg_int(1), n, "select");
  const int64_t size = in.sizes[d];
  int64_t idx = ctx.arg_int(2);
  if (idx < 0) idx += size;
  out.set(0, pad_dim(unsqueeze(g[0], d), d, idx, size - idx - 1));
}
STRATA_DERIVATIVE(select, save_inputs(), save_outputs(), select_backward);

void slice_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const TensorGeometry& in = ctx.input_geometry(0);
  const int64_t n = static_cast<int64_t>(in.sizes.size());
  const int64_t d = wrap_dim(ctx.arg_int(1), n, "slice");
  const int64_t step = ctx.arg_int(4);
  const int64_t size = in.sizes[d];
  // The start slice() used (same clamping as the forward).
  int64_t s = ctx.arg_opt_int(2).value_or(0);
  if (s < 0) s = std::max<int64_t>(s + size, 0);
  s = std::min(s, size);
  Tensor gr = g[0];
  const int64_t len = gr.sizes()[d];
  if (gr.numel() == 0 || len == 0) {
    out.set(0, zeros_of(in));
    return;
  }
  if (step > 1) {
    // Interleave step-1 zeros after each element: (.., len, 1, ..) -> (.., len, step, ..) -> (.., len*step, ..).
    Tensor h = pad_dim(unsqueeze(gr, d + 1), d + 1, 0, step - 1);
    DimVector sz(gr.sizes().begin(), gr.sizes().end());
    sz[d] = len * step;
    h = reshape(h, sz);
    const int64_t span = size - s;
    if (len * step > span) h = slice(h, d, int64_t(0), span, 1);
    gr = h;
  }
  out.set(0, pad_dim(gr, d, s, size - s - gr.sizes()[d]));
}
STRATA_DERIVATIVE(slice, save_inputs(), save_outputs(), slice_backward);

void diagonal_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const TensorGeometry& in = ctx.input_geometry(0);
  Tensor pos = diagonal(logical_ids(in.sizes, g[0].device()), ctx.arg_int(1), ctx.arg_int(2), ctx.arg_int(3));
  out.set(0, reshape(scatter_positions(g[0], pos, numel_of(in.sizes)), in.sizes));
}
STRATA_DERIVATIVE(diagonal, save_inputs(), save_outputs(), diagonal_backward);

// Windows overlap when step < size: index_add sums each element's uses.
void unfold_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const TensorGeometry& in = ctx.input_geometry(0);
  Tensor pos = unfold(logical_ids(in.sizes, g[0].device()), ctx.arg_int(1), ctx.arg_int(2), ctx.arg_int(3));
  out.set(0, reshape(scatter_positions(g[0], pos, numel_of(in.sizes)), in.sizes));
}
STRATA_DERIVATIVE(unfold, save_inputs(), save_outputs(), unfold_backward);

// Note [as_strided backward]
// as_strided addresses storage, not the input's logical elements. Accumulate
// the gradient per storage element (several view elements may share one),
// then read back what each input element addresses. An input that overlaps
// itself (an expanded tensor) shares a storage element among several input
// elements; like PyTorch, split its gradient evenly among them.
void as_strided_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  Tensor in = ctx.input(0);
  const TensorGeometry& geo = ctx.input_geometry(0);
  const Tensor& gr = g[0];
  if (gr.numel() == 0 || in.numel() == 0) {
    out.set(0, zeros_of(geo));
    return;
  }
  const auto& size = ctx.arg_ints(1);
  const auto& stride = ctx.arg_ints(2);
  const int64_t off = ctx.arg_opt_int(3).value_or(in.storage_offset());
  auto reach = [](IntArrayRef sz, IntArrayRef st, int64_t o) {
    for (size_t i = 0; i < sz.size(); ++i) o += (sz[i] - 1) * st[i];
    return o + 1;
  };
  const int64_t len = std::max(reach(size, stride, off), reach(in.sizes(), in.strides(), in.storage_offset()));
  Tensor storage_ids = arange(Scalar(len), ScalarType::Int64, gr.device());
  Tensor pos = as_strided(storage_ids, size, stride, off);
  Tensor in_pos = reshape(as_strided(storage_ids, in.sizes(), in.strides(), in.storage_offset()), DimVector{-1});
  Tensor buf = scatter_positions(gr, pos, len);
  Tensor r = index_select(buf, 0, in_pos);
  if (!non_overlapping(in.sizes(), in.strides())) {
    Tensor count = index_add(zeros(DimVector{len}, gr.dtype(), gr.device()), 0, in_pos,
                             ones(DimVector{in.numel()}, gr.dtype(), gr.device()));
    r = div(r, index_select(count, 0, in_pos));
  }
  out.set(0, reshape(r, geo.sizes));
}
STRATA_DERIVATIVE(as_strided, save_inputs(0), save_outputs(), as_strided_backward);

// ---- splitting and joining ------------------------------------------------------
// Outputs that received no gradient arrive as zeros, so the pieces always cat.
void split_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const TensorGeometry& in = ctx.input_geometry(0);
  if (g.empty()) {
    out.set(0, zeros_of(in));
    return;
  }
  const int64_t d = wrap_dim(ctx.arg_int(2), static_cast<int64_t>(in.sizes.size()), "split");
  out.set(0, g.size() == 1 ? g[0] : cat(g, d));
}
STRATA_DERIVATIVE(split_Tensor, save_inputs(), save_outputs(), split_backward);
STRATA_DERIVATIVE_NAMED(split_sizes, save_inputs(), save_outputs(), split_backward, "SplitWithSizesBackward0");
STRATA_DERIVATIVE(split_with_sizes, save_inputs(), save_outputs(), split_backward);
// torch.chunk is split underneath, hence PyTorch's node name.
STRATA_DERIVATIVE_NAMED(chunk, save_inputs(), save_outputs(), split_backward, "SplitBackward0");

void cat_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const size_t n = ctx.list_size(0);
  // cat skips legacy empty 1-d tensors of shape (0,) when the others have more dims.
  auto skipped = [&](size_t i) {
    const auto& s = ctx.input_geometry(0, static_cast<int>(i)).sizes;
    return s.size() == 1 && s[0] == 0 && static_cast<int64_t>(s.size()) != g[0].dim();
  };
  const int64_t d = wrap_dim(ctx.arg_int(1), std::max<int64_t>(g[0].dim(), 1), "cat");
  std::vector<Tensor> grads(n);
  int64_t offset = 0;
  for (size_t i = 0; i < n; ++i) {
    const TensorGeometry& geo = ctx.input_geometry(0, static_cast<int>(i));
    if (skipped(i)) {
      if (ctx.needs_grad(0, static_cast<int>(i))) grads[i] = zeros_of(geo);
      continue;
    }
    const int64_t len = geo.sizes[d];
    if (ctx.needs_grad(0, static_cast<int>(i))) grads[i] = slice(g[0], d, offset, offset + len, 1);
    offset += len;
  }
  out.set_list(0, std::move(grads));
}
STRATA_DERIVATIVE(cat, save_inputs(), save_outputs(), cat_backward);

void stack_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const size_t n = ctx.list_size(0);
  const int64_t d = wrap_dim(ctx.arg_int(1), g[0].dim(), "stack");
  std::vector<Tensor> grads(n);
  for (size_t i = 0; i < n; ++i)
    if (ctx.needs_grad(0, static_cast<int>(i))) grads[i] = select(g[0], d, static_cast<int64_t>(i));
  out.set_list(0, std::move(grads));
}
STRATA_DERIVATIVE(stack, save_inputs(), save_outputs(), stack_backward);

// ---- reordering and repetition ------------------------------------------------------
void flip_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  out.set(0, flip(g[0], ctx.arg_ints(1)));
}
STRATA_DERIVATIVE(flip, save_inputs(), save_outputs(), flip_backward);

void roll_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  std::vector<int64_t> shifts = ctx.arg_ints(1);
  for (int64_t& s : shifts) s = -s;
  out.set(0, roll(g[0], shifts, ctx.arg_ints(2)));
}
STRATA_DERIVATIVE(roll, save_inputs(), save_outputs(), roll_backward);

// The output is the input (padded with leading 1s) tiled r_i times per dim:
// view it as (r0, s0, r1, s1, ...) and sum over the r's.
void repeat_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const TensorGeometry& in = ctx.input_geometry(0);
  const auto& reps = ctx.arg_ints(1);
  const size_t m = reps.size(), lead = m - in.sizes.size();
  DimVector split_shape;
  std::vector<int64_t> sum_dims;
  for (size_t i = 0; i < m; ++i) {
    sum_dims.push_back(static_cast<int64_t>(split_shape.size()));
    split_shape.push_back(reps[i]);
    split_shape.push_back(i < lead ? 1 : in.sizes[i - lead]);
  }
  if (m == 0) {
    out.set(0, g[0]);
    return;
  }
  Tensor r = sum(reshape(g[0], split_shape), IntArrayRef(sum_dims), /*keepdim=*/false);
  out.set(0, reshape(r, in.sizes));
}
STRATA_DERIVATIVE(repeat, save_inputs(), save_outputs(), repeat_backward);

void tril_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  out.set(0, tril(g[0], ctx.arg_int(1)));
}
STRATA_DERIVATIVE(tril, save_inputs(), save_outputs(), tril_backward);

void triu_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  out.set(0, triu(g[0], ctx.arg_int(1)));
}
STRATA_DERIVATIVE(triu, save_inputs(), save_outputs(), triu_backward);

// ---- gather / scatter -------------------------------------------------------------------
void gather_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  out.set(0, scatter_add(zeros_of(ctx.input_geometry(0)), ctx.arg_int(1), ctx.input(2), g[0]));
}
STRATA_DERIVATIVE(gather, save_inputs(2), save_outputs(), gather_backward);

// src may be larger than index: its elements outside index's extent are unused.
Tensor src_grad(const BackwardCtx& ctx, const Tensor& g) {
  return pad_to(gather(g, ctx.arg_int(1), ctx.input(2)), ctx.input_geometry(3).sizes);
}

void scatter_src_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  // Overwritten elements of self get no gradient.
  if (ctx.needs_grad(0)) out.set(0, scatter(g[0], ctx.arg_int(1), ctx.input(2), Scalar(0.0)));
  if (ctx.needs_grad(3)) out.set(3, src_grad(ctx, g[0]));
}
STRATA_DERIVATIVE(scatter_src, save_inputs(2), save_outputs(), scatter_src_backward);

void scatter_value_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  out.set(0, scatter(g[0], ctx.arg_int(1), ctx.input(2), Scalar(0.0)));
}
STRATA_DERIVATIVE_NAMED(scatter_value, save_inputs(2), save_outputs(), scatter_value_backward, "ScatterBackward1");

void scatter_add_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  if (ctx.needs_grad(0)) out.set(0, g[0]);
  if (ctx.needs_grad(3)) out.set(3, src_grad(ctx, g[0]));
}
STRATA_DERIVATIVE(scatter_add, save_inputs(2), save_outputs(), scatter_add_backward);

void index_select_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  out.set(0, index_add(zeros_of(ctx.input_geometry(0)), ctx.arg_int(1), ctx.input(2), g[0]));
}
STRATA_DERIVATIVE(index_select, save_inputs(2), save_outputs(), index_select_backward);

void index_add_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  if (ctx.needs_grad(0)) out.set(0, g[0]);
  if (ctx.needs_grad(3)) {
    Tensor r = index_select(g[0], ctx.arg_int(1), ctx.input(2));
    const Scalar alpha = ctx.arg_scalar(4);
    if (alpha.to<double>() != 1.0) r = mul(r, num(r, alpha));
    // A 0-d source of a 0-d self selects a 1-element tensor.
    const auto& src = ctx.input_geometry(3).sizes;
    if (!same_sizes(r.sizes(), src)) r = reshape(r, src);
    out.set(3, r);
  }
}
STRATA_DERIVATIVE(index_add, save_inputs(2), save_outputs(), index_add_backward);

// self and indices broadcast against each other except along dim; the engine
// sums the broadcast self-gradient back to self's shape.
// The forward takes indices in [-n, n) (negative ones count from the end); scatter_add takes [0, n) only.
static Tensor wrap_negative_indices(const Tensor& idx, int64_t n) {
  if (n <= 0 || idx.numel() == 0) return idx;
  return where(lt(idx, zeros_like(idx)), add(idx, full_like(idx, Scalar(n))), idx);
}

void take_along_dim_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const TensorGeometry& in = ctx.input_geometry(0);
  Tensor idx = ctx.input(1);
  const Tensor& gr = g[0];
  if (ctx.arg_is_none(2)) {
    const int64_t n = numel_of(in.sizes);
    Tensor flat = scatter_add(zeros(DimVector{n}, in.dtype, in.device), 0,
                              wrap_negative_indices(reshape(idx, DimVector{-1}), n), reshape(gr, DimVector{-1}));
    out.set(0, reshape(flat, in.sizes));
    return;
  }
  const int64_t d = wrap_dim(ctx.arg_int(2), gr.dim(), "take_along_dim");
  DimVector self_b(gr.sizes().begin(), gr.sizes().end());
  self_b[d] = in.sizes[d];  // same ndim as indices (checked by the forward)
  out.set(0, scatter_add(zeros(self_b, gr.dtype(), gr.device()), d,
                         wrap_negative_indices(expand(idx, gr.sizes()), in.sizes[d]), gr));
}
STRATA_DERIVATIVE_NAMED(take_along_dim, save_inputs(1), save_outputs(), take_along_dim_backward, "GatherBackward0");

void masked_select_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const TensorGeometry& in = ctx.input_geometry(0);
  Tensor mask = ctx.input(1);
  DimVector b = broadcast_shapes(in.sizes, mask.sizes(), "masked_select");
  // Flattened so that a 0-d mask works too.
  Tensor flat_mask = reshape(expand(mask, b), DimVector{-1});
  Tensor flat = index_put(zeros(DimVector{numel_of(b)}, g[0].dtype(), g[0].device()), std::vector<Tensor>{flat_mask},
                          g[0], false, 0);
  out.set(0, reshape(flat, b));
}
STRATA_DERIVATIVE(masked_select, save_inputs(1), save_outputs(), masked_select_backward);

// values = self gathered at indices: put the gradient back where it came from.
Tensor value_selecting_backward(const BackwardCtx& ctx, const Tensor& g, int64_t dim) {
  const TensorGeometry& in = ctx.input_geometry(0);
  if (in.sizes.empty()) return reshape(g, in.sizes);
  const int64_t d = wrap_dim(dim, static_cast<int64_t>(in.sizes.size()), ctx.op_name().c_str());
  return scatter(zeros_of(in), d, ctx.output(1), g);
}

void sort_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  out.set(0, value_selecting_backward(ctx, g[0], ctx.arg_int(1)));
}
STRATA_DERIVATIVE(sort, save_inputs(), save_outputs(1), sort_backward);

void topk_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  out.set(0, value_selecting_backward(ctx, g[0], ctx.arg_int(2)));
}
STRATA_DERIVATIVE(topk, save_inputs(), save_outputs(1), topk_backward);

// ---- advanced indexing ------------------------------------------------------------------
void index_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  out.set(0, index_put(zeros_of(ctx.input_geometry(0)), ctx.input_list(1), g[0], /*accumulate=*/true,
                       ctx.arg_int(2)));
}
STRATA_DERIVATIVE(index, save_inputs(1), save_outputs(), index_backward);

// Slot 0 is self's old value: only the positions that were not overwritten
// (all of them when accumulating) pass the gradient on.
void index_put_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const std::vector<Tensor> indices = ctx.input_list(1);
  const bool accumulate = ctx.arg_bool(3);
  const int64_t dim = ctx.arg_int(4);
  if (ctx.needs_grad(0)) {
    out.set(0, accumulate ? g[0]
                          : index_put(g[0], indices, zeros(DimVector{}, g[0].dtype(), g[0].device()), false, dim));
  }
  if (ctx.needs_grad(2)) {
    Tensor gv = index(g[0], indices, dim);
    bool may_repeat = false;
    for (const Tensor& t : indices) may_repeat |= t.dtype() != ScalarType::Bool && t.dtype() != ScalarType::UInt8;
    if (!accumulate && may_repeat && gv.numel() > 0 && !gv.device().is_meta()) {
      // With repeated indices only the value written last survives, so only it gets a gradient. Replaying the
      // write with value ids finds the survivors (PyTorch instead gives every duplicate the gradient, which
      // disagrees with finite differences).
      Tensor ids = reshape(arange(Scalar(gv.numel()), ScalarType::Int64, gv.device()), gv.sizes());
      Tensor slot = index_put(zeros(g[0].sizes(), ScalarType::Int64, g[0].device()), indices, ids, false, dim);
      gv = where(eq(index(slot, indices, dim), ids), gv, zeros_like(gv));
    }
    out.set(2, gv);
  }
}
STRATA_DERIVATIVE(index_put_, save_inputs(1), save_outputs(), index_put_backward);

// fill_ is what `x[i] = 3.0` and zero_() lower to: the overwritten values get
// no gradient (without this, writes through views would leave stale history).
void fill_backward(const BackwardCtx&, const variable_list& g, GradOut& out) { out.set(0, zeros_like(g[0])); }
STRATA_DERIVATIVE(fill_, save_inputs(), save_outputs(), fill_backward);
// zero_ is composite, but an in-place composite cannot pass through the autograd layer: it needs its own node.
STRATA_DERIVATIVE(zero_, save_inputs(), save_outputs(), fill_backward);

}  // namespace
}  // namespace strata::autograd
