// Scans with indices (cummax, cummin), logcumsumexp, order statistics
// (median, nanmedian, kthvalue, mode) and the composites built on sorting and
// reductions (quantile, nanquantile, msort, aminmax, nansum, nanmean).
// Kernels run through the stubs of ops/order_stats.h; registered for CPU and
// Meta (the composites for every backend).
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/shape.h"
#include "ops/api/math_more.h"
#include "ops/op_list.h"
#include "ops/ops.h"
#include "ops/order_stats.h"

namespace strata {

STRATA_DEFINE_STUB(cum_extremum_stub, CumExtremumFn);
STRATA_DEFINE_STUB(logcumsumexp_stub, LogCumSumExpFn);
STRATA_DEFINE_STUB(select_stub, SelectFn);

namespace {

// A 0-d tensor has one dim for these ops (dim 0 or -1), of size 1.
int64_t wrap_line_dim(const Tensor& t, int64_t dim, const char* op) {
  return wrap_dim(dim, std::max<int64_t>(t.dim(), 1), op);
}

struct Lines {
  int64_t outer = 1, n = 1, inner = 1;
};
Lines lines_of(const Tensor& t, int64_t d) {
  Lines l;
  for (int64_t i = 0; i < t.dim(); ++i) (i < d ? l.outer : i == d ? l.n : l.inner) *= t.size(i);
  return l;
}

void check_not_bool(const char* op, const Tensor& self) {
  STRATA_CHECK_T(NotImplementedError, self.dtype() != ScalarType::Bool, "\"", op, "_cpu\" not implemented for 'Bool' (",
                 op, " of a ", self.describe(), ")");
}

// ---- cummax / cummin / logcumsumexp -----------------------------------------------
Tensor2 cum_extremum(const char* op, const Tensor& self, int64_t dim, bool is_max) {
  const int64_t d = wrap_line_dim(self, dim, op);
  Tensor values = empty_tensor(self.sizes(), self.dtype(), self.device());
  Tensor indices = empty_tensor(self.sizes(), ScalarType::Int64, self.device());
  if (self.device().is_meta() || self.numel() == 0) return {values, indices};
  const Lines l = lines_of(self, d);
  cum_extremum_stub(self.device().type, contiguous(self), values, indices, l.outer, l.n, l.inner, is_max);
  return {values, indices};
}

Tensor2 cummax_impl(const Tensor& self, int64_t dim) { return cum_extremum("cummax", self, dim, true); }
STRATA_IMPL_CPU_META(cummax, cummax_impl);
Tensor2 cummin_impl(const Tensor& self, int64_t dim) { return cum_extremum("cummin", self, dim, false); }
STRATA_IMPL_CPU_META(cummin, cummin_impl);

Tensor logcumsumexp_impl(const Tensor& self, int64_t dim) {
  const int64_t d = wrap_line_dim(self, dim, "logcumsumexp");
  STRATA_CHECK_T(NotImplementedError, is_floating_type(self.dtype()), "\"logcumsumexp_out_cpu\" not implemented for '",
                 dtype_name(self.dtype()), "' (logcumsumexp is defined for floating point tensors only)");
  Tensor out = empty_tensor(self.sizes(), self.dtype(), self.device());
  if (self.device().is_meta() || self.numel() == 0) return out;
  const Lines l = lines_of(self, d);
  logcumsumexp_stub(self.device().type, contiguous(self), out, l.outer, l.n, l.inner);
  return out;
}
STRATA_IMPL_CPU_META(logcumsumexp, logcumsumexp_impl);

// ---- selections along a dim -------------------------------------------------------
// k is 1-based (kthvalue's); other kinds ignore it.
Tensor2 select_dim(const char* op, const Tensor& self, int64_t dim, bool keepdim, SelectKind kind, int64_t k) {
  const int64_t nd = self.dim();
  const int64_t d = wrap_line_dim(self, dim, op);
  const int64_t n = nd == 0 ? 1 : self.size(d);
  if (kind == SelectKind::Kth) {
    STRATA_CHECK(k >= 1 && k <= n, op, "(): selected number k out of range for dimension ", d, " (k = ", k,
                 ", but the dimension has size ", n, " in input of shape ", self.shape_str(), ")");
  } else {
    STRATA_CHECK_INDEX(n != 0, op, "(): Expected reduction dim ", d, " to have non-zero size. (input of shape ",
                       self.shape_str(), ")");
  }
  DimVector shape;
  for (int64_t i = 0; i < nd; ++i) {
    if (i != d) shape.push_back(self.size(i));
    else if (keepdim) shape.push_back(1);
  }
  Tensor values = empty_tensor(shape, self.dtype(), self.device());
  Tensor indices = empty_tensor(shape, ScalarType::Int64, self.device());
  if (self.device().is_meta() || values.numel() == 0) return {values, indices};
  const Lines l = lines_of(self, d);
  select_stub(self.device().type, contiguous(self), values, indices, l.outer, l.n, l.inner, kind, k - 1);
  return {values, indices};
}

// The whole tensor as one line; an empty one gives nan.
Tensor select_all(const char* op, const Tensor& self, SelectKind kind) {
  Tensor values = empty_tensor({}, self.dtype(), self.device());
  if (self.device().is_meta()) return values;
  if (self.numel() == 0) {
    STRATA_CHECK(is_floating_type(self.dtype()), op, "(): an empty ", self.describe(), " has no median");
    return full({}, Scalar(std::numeric_limits<double>::quiet_NaN()), self.dtype(), self.device());
  }
  Tensor indices = empty_tensor({}, ScalarType::Int64, self.device());
  select_stub(self.device().type, contiguous(self), values, indices, 1, self.numel(), 1, kind, 0);
  return values;
}

Tensor median_impl(const Tensor& self) {
  check_not_bool("median", self);
  return select_all("median", self, SelectKind::Median);
}
STRATA_IMPL_CPU_META(median, median_impl);
Tensor2 median_dim_impl(const Tensor& self, int64_t dim, bool keepdim) {
  check_not_bool("median", self);
  return select_dim("median", self, dim, keepdim, SelectKind::Median, 0);
}
STRATA_IMPL_CPU_META(median_dim, median_dim_impl);
Tensor nanmedian_impl(const Tensor& self) {
  check_not_bool("nanmedian", self);
  return select_all("nanmedian", self, SelectKind::NanMedian);
}
STRATA_IMPL_CPU_META(nanmedian, nanmedian_impl);
Tensor2 nanmedian_dim_impl(const Tensor& self, int64_t dim, bool keepdim) {
  check_not_bool("nanmedian", self);
  return select_dim("nanmedian", self, dim, keepdim, SelectKind::NanMedian, 0);
}
STRATA_IMPL_CPU_META(nanmedian_dim, nanmedian_dim_impl);
Tensor2 kthvalue_impl(const Tensor& self, int64_t k, int64_t dim, bool keepdim) {
  check_not_bool("kthvalue", self);
  return select_dim("kthvalue", self, dim, keepdim, SelectKind::Kth, k);
}
STRATA_IMPL_CPU_META(kthvalue, kthvalue_impl);
Tensor2 mode_impl(const Tensor& self, int64_t dim, bool keepdim) {
  return select_dim("mode", self, dim, keepdim, SelectKind::Mode, 0);
}
STRATA_IMPL_CPU_META(mode, mode_impl);

// ---- composites ---------------------------------------------------------------------
Tensor wrapped(double v, const Tensor& like) {
  return scalar_to_tensor(Scalar(v), is_floating_type(like.dtype()) ? like.dtype() : ScalarType::Float64, like.device(),
                          true);
}

Tensor2 aminmax_impl(const Tensor& self, OptInt dim, bool keepdim) {
  if (dim) {
    const int64_t d = wrap_line_dim(self, *dim, "aminmax");
    STRATA_CHECK_INDEX(self.dim() == 0 || self.size(d) != 0, "aminmax(): cannot compute aminmax over an empty dimension as "
                 "the operation has no identity (input of shape ", self.shape_str(), ", dim ", d, ")");
    const int64_t dd[1] = {*dim};
    return {amin(self, IntArrayRef(dd, 1), keepdim), amax(self, IntArrayRef(dd, 1), keepdim)};
  }
  STRATA_CHECK(self.numel() != 0, "aminmax(): cannot compute aminmax over an empty dimension as the operation has no "
               "identity (input of shape ", self.shape_str(), ")");
  return {amin(self, {}, keepdim), amax(self, {}, keepdim)};
}
STRATA_IMPL_COMPOSITE(aminmax, aminmax_impl);

// nansum lives in reduction.cpp (a single reduction pass where no gradient is needed).

Tensor nanmean_impl(const Tensor& self, OptIntArrayRef dim, bool keepdim, OptDType dtype) {
  const ScalarType t = dtype ? *dtype : self.dtype();
  STRATA_CHECK(is_floating_type(t), "nanmean(): expected input to have floating point or complex dtype but got ",
               dtype_name(t));
  Tensor x = t == self.dtype() ? self : to_dtype(self, t);
  Tensor count = sum(logical_not(isnan(x)), dim, keepdim);
  return div(nansum(x, dim, keepdim), count);
}
STRATA_IMPL_COMPOSITE(nanmean, nanmean_impl);

enum class Interp { Linear, Lower, Higher, Midpoint, Nearest };

// Sorts along the reduced dim (moved last; nan sorts last), finds each q's
// rank among the line's elements and reads or interpolates the sorted values.
// Differentiable through sort, gather and lerp.
Tensor quantile_common(const char* op, const Tensor& self, const Tensor& q_in, OptInt dim, bool keepdim,
                       std::string_view interpolation, bool ignore_nan) {
  STRATA_CHECK(self.dtype() == ScalarType::Float32 || self.dtype() == ScalarType::Float64, op,
               "() input tensor must be either float or double dtype (got ", self.describe(), ")");
  // A Python number arrives as a wrapped 0-d CPU tensor: it becomes a 0-d
  // tensor of self's dtype on self's device.
  Tensor q = q_in.impl()->is_wrapped_number() ? scalar_to_tensor(q_in.item(), self.dtype(), self.device()) : q_in;
  STRATA_CHECK(q.dim() <= 1, op, "() q must be a scalar or 1D tensor (got shape ", q.shape_str(), ")");
  STRATA_CHECK(q.dtype() == self.dtype(), op, "() q tensor must be same dtype as the input tensor (got ",
               dtype_name(q.dtype()), " and ", dtype_name(self.dtype()), ")");
  STRATA_CHECK(self.numel() > 0, op, "() input tensor must be non-empty");
  Interp mode;
  if (interpolation == "linear") mode = Interp::Linear;
  else if (interpolation == "lower") mode = Interp::Lower;
  else if (interpolation == "higher") mode = Interp::Higher;
  else if (interpolation == "midpoint") mode = Interp::Midpoint;
  else if (interpolation == "nearest") mode = Interp::Nearest;
  else STRATA_CHECK(false, op, "() interpolation must be one of linear, lower, higher, midpoint or nearest, but got ",
                    interpolation);
  if (q_in.impl()->is_wrapped_number()) {
    const double qv = q_in.item().to_double();
    STRATA_CHECK(qv >= 0 && qv <= 1, op, "() q must be in the range [0, 1] but got ", qv);
  } else if (!q.device().is_meta() && q.numel() > 0) {
    STRATA_CHECK(!any_nonzero(logical_or(lt(q, wrapped(0.0, q)), gt(q, wrapped(1.0, q)))), op,
                 "() q values must be in the range [0, 1]");
  }
  const int64_t nd = self.dim();
  const bool scalar_q = q.dim() == 0;
  int64_t d = 0;
  Tensor x;
  if (dim) {
    d = wrap_line_dim(self, *dim, op);
    const int64_t src[1] = {d}, dst[1] = {-1};
    x = nd == 0 ? reshape(self, std::vector<int64_t>{1}) : movedim(self, IntArrayRef(src, 1), IntArrayRef(dst, 1));
  } else {
    x = reshape(self, std::vector<int64_t>{-1});
  }
  Tensor sorted = std::get<0>(sort(x, -1));
  const int64_t n = sorted.size(-1);
  Tensor qv = reshape(q, std::vector<int64_t>{-1});
  // Ranks depend on q only (and on which elements are nan): linear
  // interpolation is differentiable in q too, as the composite records.
  Tensor ranks;
  {
    if (ignore_nan) {
      Tensor valid = sum(logical_not(isnan(sorted)), std::vector<int64_t>{-1}, true);
      // All-nan lines: rank -q, clamped to 0, reads a nan.
      ranks = clamp_min(mul(qv, sub(valid, wrapped(1.0, valid))), wrapped(0.0, qv));
    } else {
      Tensor has_nan = isnan(narrow(sorted, -1, n - 1, 1));
      ranks = where(has_nan, wrapped(static_cast<double>(n - 1), qv), mul(qv, wrapped(static_cast<double>(n - 1), qv)));
    }
    if (ranks.dim() < sorted.dim()) {
      std::vector<int64_t> full_shape(sorted.sizes().begin(), sorted.sizes().end());
      full_shape.back() = qv.size(0);
      ranks = contiguous(expand(ranks, full_shape));
    }
  }
  auto take = [&](const Tensor& r) { return gather(sorted, -1, to_dtype(r, ScalarType::Int64)); };
  Tensor r;
  switch (mode) {
    case Interp::Lower: r = take(floor(ranks)); break;
    case Interp::Higher: r = take(ceil(ranks)); break;
    case Interp::Nearest: r = take(round(ranks)); break;
    case Interp::Linear:
    case Interp::Midpoint: {
      Tensor lo = floor(ranks), hi = ceil(ranks);
      Tensor w = mode == Interp::Linear ? sub(ranks, lo) : full_like(ranks, Scalar(0.5));
      r = lerp(take(lo), take(hi), w);
      break;
    }
  }
  // r is [..., nq]: q's dim goes first, or away for a scalar q.
  if (scalar_q) {
    r = squeeze(r, -1);
  } else {
    const int64_t src[1] = {-1}, dst[1] = {0};
    r = movedim(r, IntArrayRef(src, 1), IntArrayRef(dst, 1));
  }
  if (keepdim) {
    if (dim) {
      if (nd > 0) r = unsqueeze(r, d + (scalar_q ? 0 : 1));
    } else {
      std::vector<int64_t> shape;
      if (!scalar_q) shape.push_back(qv.size(0));
      for (int64_t i = 0; i < nd; ++i) shape.push_back(1);
      r = reshape(r, shape);
    }
  }
  return r;
}

Tensor quantile_impl(const Tensor& self, const Tensor& q, OptInt dim, bool keepdim, std::string_view interpolation) {
  return quantile_common("quantile", self, q, dim, keepdim, interpolation, false);
}
STRATA_IMPL_COMPOSITE(quantile, quantile_impl);
Tensor nanquantile_impl(const Tensor& self, const Tensor& q, OptInt dim, bool keepdim,
                        std::string_view interpolation) {
  return quantile_common("nanquantile", self, q, dim, keepdim, interpolation, true);
}
STRATA_IMPL_COMPOSITE(nanquantile, nanquantile_impl);

Tensor msort_impl(const Tensor& self) { return std::get<0>(sort(self, 0, false)); }
STRATA_IMPL_COMPOSITE(msort, msort_impl);

}  // namespace
}  // namespace strata
