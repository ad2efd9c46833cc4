// Implementations of the ops in decl/surface_more.def: dtype rules and argument
// checks for the pointwise ones, the *_scatter family (a copy of self with src
// written through one view of it), frexp, repeat_interleave and renorm.
#include "ops/surface_more.h"

#include <algorithm>

#include "core/shape.h"
#include "ops/api/surface_more.h"
#include "ops/op_list.h"
#include "ops/ops.h"
#include "ops/pointwise.h"

namespace strata {

#define STRATA_SM_STUBS(X) X(gcd) X(lcm) X(bitwise_left_shift) X(bitwise_right_shift) X(fmax) X(fmin) X(nextafter)
#define STRATA_SM_DEFINE_STUB(name) STRATA_DEFINE_STUB(name##_stub, PointwiseFn);
STRATA_SM_STUBS(STRATA_SM_DEFINE_STUB)
#undef STRATA_SM_DEFINE_STUB
STRATA_DEFINE_STUB(frexp_stub, FrexpFn);
STRATA_DEFINE_STUB(repeat_interleave_index_stub, RepeatIndexFn);

namespace {

using OptT = std::optional<Tensor>;

// torch defines gcd, lcm and the shifts for integer types without bool, and
// nextafter for floating types: anything else is NotImplementedError there.
void require_dtype(const char* op, std::initializer_list<Tensor> inputs, bool want_integral) {
  ScalarType t = result_type(inputs);
  const bool ok = want_integral ? (is_integral_type(t, false)) : is_floating_type(t);
  STRATA_CHECK_T(NotImplementedError, ok, "\"", op, "\" not implemented for '", dtype_name(t), "' (", op,
                 want_integral ? " is defined for integer tensors only)"
                               : " is defined for floating point tensors only)");
}

#define STRATA_SM_BINARY(name, want_integral)                                       \
  Tensor name##_impl(const Tensor& self, const Tensor& other, const OptT& out) {    \
    require_dtype(#name, {self, other}, want_integral);                             \
    return run_pointwise(#name, name##_stub, PwRule::Promote, {self, other}, out);  \
  }                                                                                  \
  STRATA_IMPL_CPU_META(name, name##_impl);
STRATA_SM_BINARY(gcd, true)
STRATA_SM_BINARY(lcm, true)
STRATA_SM_BINARY(bitwise_left_shift, true)
STRATA_SM_BINARY(bitwise_right_shift, true)
STRATA_SM_BINARY(nextafter, false)
#undef STRATA_SM_BINARY

Tensor fmax_impl(const Tensor& self, const Tensor& other, const OptT& out) {
  return run_pointwise("fmax", fmax_stub, PwRule::Promote, {self, other}, out);
}
STRATA_IMPL_CPU_META(fmax, fmax_impl);
Tensor fmin_impl(const Tensor& self, const Tensor& other, const OptT& out) {
  return run_pointwise("fmin", fmin_stub, PwRule::Promote, {self, other}, out);
}
STRATA_IMPL_CPU_META(fmin, fmin_impl);

// self * 2^other, as torch computes it (so integer inputs give the default float).
Tensor ldexp_impl(const Tensor& self, const Tensor& other) {
  Tensor two = scalar_to_tensor(Scalar(2.0), ScalarType::Float64, other.device(), true);
  return mul(self, pow(two, other));
}
STRATA_IMPL_COMPOSITE(ldexp, ldexp_impl);

std::tuple<Tensor, Tensor> frexp_impl(const Tensor& self) {
  STRATA_CHECK(is_floating_type(self.dtype()), "torch.frexp() only supports floating-point dtypes, got ",
               dtype_name(self.dtype()));
  Tensor m = empty(self.sizes(), self.dtype(), self.device());
  Tensor e = empty(self.sizes(), ScalarType::Int32, self.device());
  if (!self.device().is_meta() && self.numel() > 0) frexp_stub(self.device().type, contiguous(self), m, e);
  return {m, e};
}
STRATA_IMPL_CPU_META(frexp, frexp_impl);

// ---- repeat_interleave --------------------------------------------------------------
Tensor repeat_interleave_idx_impl(const Tensor& repeats, OptInt output_size) {
  STRATA_CHECK(repeats.dim() == 1, "repeat_interleave only accept 1D vector as repeat, got repeats of shape ",
               repeats.shape_str());
  STRATA_CHECK_T(NotImplementedError, repeats.dtype() == ScalarType::Int64 || repeats.dtype() == ScalarType::Int32,
                 "repeat_interleave: repeats has to be Long or Int tensor, got ", dtype_name(repeats.dtype()));
  if (output_size)
    STRATA_CHECK(*output_size >= 0, "repeat_interleave: output_size must be non-negative, got ", *output_size);
  if (repeats.device().is_meta()) {
    // The length is data: Meta can only know it when the caller says it.
    STRATA_CHECK(output_size.has_value(), "repeat_interleave: a meta repeats tensor needs output_size");
    const int64_t n = *output_size;
    return empty(IntArrayRef(&n, 1), repeats.dtype(), repeats.device());
  }
  Tensor r = contiguous(to_dtype(repeats, ScalarType::Int64));
  const int64_t* rp = r.data_ptr<int64_t>();
  int64_t total = 0;
  for (int64_t i = 0; i < r.numel(); ++i) {
    STRATA_CHECK(rp[i] >= 0, "repeats can not be negative (repeat_interleave got ", rp[i], " at index ", i, ")");
    total += rp[i];
  }
  STRATA_CHECK(!output_size || *output_size == total,
               "repeat_interleave: allocated size does not match required size (output_size = ", *output_size,
               ", sum of repeats = ", total, ")");
  Tensor out = empty(IntArrayRef(&total, 1), ScalarType::Int64, repeats.device());
  if (total > 0) repeat_interleave_index_stub(repeats.device().type, r, out);
  // torch gives the indices the dtype of repeats.
  return repeats.dtype() == ScalarType::Int64 ? out : to_dtype(out, repeats.dtype());
}
STRATA_IMPL_CPU_META(repeat_interleave_idx, repeat_interleave_idx_impl);

// Built from index_select, so its gradient (an index_add) comes for free.
Tensor repeat_interleave_impl(const Tensor& self, const Tensor& repeats, OptInt dim, OptInt output_size) {
  Tensor input = dim ? self : flatten(self);
  const int64_t d = dim ? wrap_dim(*dim, std::max<int64_t>(self.dim(), 1), "repeat_interleave") : 0;
  const int64_t one = 1;
  if (input.dim() == 0) input = reshape(input, IntArrayRef(&one, 1));
  const int64_t n = input.sizes()[d];
  Tensor reps = repeats;
  if (reps.dim() == 0 || (reps.dim() == 1 && reps.numel() == 1)) {
    if (!reps.device().is_meta() && !is_floating_type(reps.dtype()) && reps.dtype() != ScalarType::Bool) {
      // One count for every slice (k.repeat_interleave(n_rep, dim=1) in
      // grouped-query attention): a broadcast and one copy, no index gather.
      const int64_t k = reps.item().to_int();
      STRATA_CHECK(k >= 0, "repeats can not be negative (repeat_interleave got ", k, ")");
      STRATA_CHECK(!output_size || *output_size == n * k,
                   "repeat_interleave: allocated size does not match required size (output_size = ",
                   output_size.value_or(0), ", sum of repeats = ", n * k, ")");
      Tensor u = unsqueeze(input, d + 1);
      DimVector wide(u.sizes().begin(), u.sizes().end());
      wide[d + 1] = k;
      DimVector out(input.sizes().begin(), input.sizes().end());
      out[d] = n * k;
      return reshape(expand(u, wide), out);
    }
    reps = expand(reshape(reps, IntArrayRef(&one, 1)), IntArrayRef(&n, 1));
  } else {
    STRATA_CHECK(reps.dim() == 1, "repeat_interleave only accept 1D vector as repeat, got repeats of shape ",
                 reps.shape_str());
    STRATA_CHECK(reps.sizes()[0] == n, "repeats must have the same size as input along dim, but got repeats.size(0) = ",
                 reps.sizes()[0], " and input.size(", d, ") = ", n);
  }
  return index_select(input, d, repeat_interleave(reps, output_size));
}
STRATA_IMPL_COMPOSITE(repeat_interleave, repeat_interleave_impl);

// ---- renorm ---------------------------------------------------------------------------
// Each slice along dim whose p-norm exceeds maxnorm is scaled down to it
// (torch's 1e-7 guard included, so results match bit for bit in float32).
Tensor renorm_impl(const Tensor& self, const Scalar& p, int64_t dim, const Scalar& maxnorm) {
  STRATA_CHECK(p.to_double() > 0, "renorm: non-positive-norm not supported");
  STRATA_CHECK(maxnorm.to_double() >= 0, "renorm: expected maxnorm to be >= 0 but got ", maxnorm.to_double());
  STRATA_CHECK(self.dim() > 1, "renorm: input needs at least 2 dimensions, got ", self.dim(), " dimensions");
  STRATA_CHECK_T(NotImplementedError, is_floating_type(self.dtype()), "\"renorm\" not implemented for '",
                 dtype_name(self.dtype()), "' (renorm is defined for floating point tensors only)");
  const int64_t d = wrap_dim(dim, self.dim(), "renorm");
  std::vector<int64_t> others;
  for (int64_t i = 0; i < self.dim(); ++i)
    if (i != d) others.push_back(i);
  Tensor norms = norm(self, p, IntArrayRef(others), true);
  Tensor maxn = scalar_to_tensor(maxnorm, self.dtype(), self.device());
  Tensor scale = div(maxn, add(norms, scalar_to_tensor(Scalar(1e-7), self.dtype(), self.device())));
  Tensor factor = where(gt(norms, maxn), scale, ones_like(norms));
  return mul(self, factor);
}
STRATA_IMPL_COMPOSITE(renorm, renorm_impl);

// ---- *_scatter: out-of-place writes through a view --------------------------------------
Tensor scatter_through(const Tensor& out, const Tensor& view, const Tensor& src) {
  STRATA_CHECK(std::ranges::equal(view.sizes(), src.sizes()),
               "expected src to have a size equal to the slice of self. src size = ", shape_str(src.sizes()),
               ", slice size = ", shape_str(view.sizes()));
  copy_(view, src);
  return out;
}

Tensor slice_scatter_impl(const Tensor& self, const Tensor& src, int64_t dim, OptInt start, OptInt end, int64_t step) {
  Tensor out = contiguous(clone(self));
  return scatter_through(out, slice(out, dim, start, end, step), src);
}
STRATA_IMPL_CPU_META(slice_scatter, slice_scatter_impl);

Tensor select_scatter_impl(const Tensor& self, const Tensor& src, int64_t dim, int64_t index) {
  Tensor out = contiguous(clone(self));
  return scatter_through(out, select(out, dim, index), src);
}
STRATA_IMPL_CPU_META(select_scatter, select_scatter_impl);

Tensor diagonal_scatter_impl(const Tensor& self, const Tensor& src, int64_t offset, int64_t dim1, int64_t dim2) {
  Tensor out = contiguous(clone(self));
  return scatter_through(out, diagonal(out, offset, dim1, dim2), src);
}
STRATA_IMPL_CPU_META(diagonal_scatter, diagonal_scatter_impl);

// The view is taken of a contiguous copy, so size/stride/offset address self's
// elements in row-major order, as torch's do for a contiguous self.
Tensor as_strided_scatter_impl(const Tensor& self, const Tensor& src, IntArrayRef size, IntArrayRef stride,
                               OptInt storage_offset) {
  Tensor out = contiguous(clone(self));
  return scatter_through(out, as_strided(out, size, stride, storage_offset), src);
}
STRATA_IMPL_CPU_META(as_strided_scatter, as_strided_scatter_impl);

}  // namespace
}  // namespace strata
