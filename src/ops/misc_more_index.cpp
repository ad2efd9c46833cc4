// Counting, binning, sorted search and the scatter/index variants of
// decl/misc_more.def: bincount, histc, histogram, unique (all, by dim,
// consecutive), searchsorted, bucketize, isin, scatter_reduce, index_copy,
// index_fill, masked_scatter, put, take. The ones whose output size depends on
// the data (bincount, unique, histc without a range) cannot run on Meta.
#include "core/deterministic.h"
#include <algorithm>
#include <cmath>

#include "ops/out_overlap.h"
#include "ops/api/math_more.h"
#include "ops/api/misc_more.h"
#include "ops/misc_more_common.h"
#include "ops/misc_more_stubs.h"
#include "ops/ops.h"

namespace strata {

STRATA_DEFINE_STUB(searchsorted_stub, SearchsortedFn);
STRATA_DEFINE_STUB(scatter_reduce_stub, ScatterReduceFn);

using namespace misc_detail;

namespace {

void no_meta(const Tensor& t, const char* op) {
  if (t.device().is_meta()) {
    throw NotImplementedError(str(op, ": the output shape depends on the data, so it cannot run on the meta device ",
                                  "(input ", t.describe(), ")"));
  }
}

Tensor num(const Scalar& s, ScalarType dt, Device d) { return scalar_to_tensor(s, dt, d, true); }

// ---- bincount, histc, histogram ------------------------------------------------------

Tensor bincount_impl(const Tensor& self, const OptT& weights, int64_t minlength) {
  STRATA_CHECK(self.dim() == 1 && is_integral_type(self.dtype(), false),
               "bincount only supports 1-d non-negative integral inputs (got ", self.describe(), ")");
  STRATA_CHECK(minlength >= 0, "minlength should be >= 0");
  const bool has_w = weights && weights->defined();
  if (has_w) {
    STRATA_CHECK(weights->dim() == 1 && weights->size(0) == self.size(0),
                 "weights should be 1-d and have the same length as input (input ", self.shape_str(), ", weights ",
                 weights->shape_str(), ")");
  }
  // float32 weights count in float32; every other weight dtype in float64 (torch's rule).
  const ScalarType dt = !has_w ? ScalarType::Int64
                               : (weights->dtype() == ScalarType::Float32 ? ScalarType::Float32 : ScalarType::Float64);
  no_meta(self, "bincount");
  if (self.device().is_cpu()) {
    // One pass for the range and one for the counts, serial in input order: the
    // same sums, in the same order, as the scatter_add below (no ones tensor,
    // no separate min and max reductions, no per-element index checks).
    Tensor idx = contiguous(self.dtype() == ScalarType::Int64 ? self : to_dtype(self, ScalarType::Int64));
    const int64_t n = idx.numel();
    const int64_t* ix = n > 0 ? idx.data_ptr<int64_t>() : nullptr;
    int64_t hi = -1;
    if (n > 0) {  // the vectorized reductions: one pass, not a scalar loop here
      auto [lo_t, hi_t] = aminmax(idx);
      STRATA_CHECK(lo_t.item().to<int64_t>() >= 0, "bincount only supports 1-d non-negative integral inputs");
      hi = hi_t.item().to<int64_t>();
    }
    const int64_t len = std::max(minlength, hi + 1);
    // An empty input counts in int64 whatever the weights are (torch's rule).
    if (n == 0) return zeros(DimVector{len}, ScalarType::Int64, self.device());
    Tensor out = zeros(DimVector{len}, dt, self.device());
    if (!has_w) {
      int64_t* o = out.data_ptr<int64_t>();
      if (len <= (int64_t(1) << 16) && n < (int64_t(1) << 32)) {
        // Four 32-bit sub-counts, so that runs of one value do not wait on
        // their own store; integer sums, so the order does not matter.
        // Few bins: four copies (the common values repeat often); many bins:
        // one, half the size of the int64 output, so more of it stays in cache.
        const int64_t copies = len <= 2048 ? 4 : 1;
        std::vector<uint32_t> c(static_cast<size_t>(copies * len), 0);
        uint32_t* c0 = c.data();
        int64_t i = 0;
        for (; copies == 4 && i + 4 <= n; i += 4) {
          c0[ix[i]]++;
          c0[len + ix[i + 1]]++;
          c0[2 * len + ix[i + 2]]++;
          c0[3 * len + ix[i + 3]]++;
        }
        for (; i < n; ++i) c0[ix[i]]++;
        if (copies == 4) {
          for (int64_t b = 0; b < len; ++b)
            o[b] = int64_t(c0[b]) + int64_t(c0[len + b]) + int64_t(c0[2 * len + b]) + int64_t(c0[3 * len + b]);
        } else {
          for (int64_t b = 0; b < len; ++b) o[b] = c0[b];
        }
      } else {
        for (int64_t i = 0; i < n; ++i) o[ix[i]]++;
      }
      return out;
    }
    Tensor w = contiguous(to_dtype(*weights, dt));
    auto acc = [&]<typename W>() {
      W* o = out.data_ptr<W>();
      const W* wp = w.data_ptr<W>();
      for (int64_t i = 0; i < n; ++i) o[ix[i]] += wp[i];
    };
    if (dt == ScalarType::Float32) acc.template operator()<float>();
    else acc.template operator()<double>();
    return out;
  }
  int64_t len = minlength;
  if (self.numel() > 0) {
    STRATA_CHECK(min(self).item().to<int64_t>() >= 0, "bincount only supports 1-d non-negative integral inputs");
    len = std::max(len, max(self).item().to<int64_t>() + 1);
  }
  Tensor out = zeros(DimVector{len}, dt, self.device());
  if (self.numel() == 0) return out;
  Tensor idx = self.dtype() == ScalarType::Int64 ? self : to_dtype(self, ScalarType::Int64);
  Tensor src = has_w ? to_dtype(*weights, dt) : ones(DimVector{self.numel()}, dt, self.device());
  return scatter_add(out, 0, idx, src);
}
STRATA_IMPL_CPU_META(bincount, bincount_impl);

// Counts of x (any shape) in `bins` equal bins over [lo, hi], weighted; the
// last bin includes hi, values outside (and NaN) are not counted. The bin of
// x is (x - lo) * bins / (hi - lo), computed in x's dtype.
Tensor uniform_hist(const Tensor& x, int64_t bins, double lo, double hi, const Tensor& weight, ScalarType out_dt) {
  Tensor out = zeros(DimVector{bins}, out_dt, x.device());
  if (x.numel() == 0 || x.device().is_meta()) return out;
  const ScalarType dt = x.dtype();
  Tensor flat = reshape(x, DimVector{-1});
  Tensor valid = logical_and(ge(flat, num(Scalar(lo), dt, x.device())), le(flat, num(Scalar(hi), dt, x.device())));
  Tensor pos = div(mul(sub(flat, num(Scalar(lo), dt, x.device())), num(Scalar(int64_t(bins)), dt, x.device())),
                   num(Scalar(hi - lo), dt, x.device()));
  pos = to_dtype(trunc(where(valid, pos, num(Scalar(0.0), dt, x.device()))), ScalarType::Int64);
  pos = clamp(pos, num(Scalar(int64_t(0)), ScalarType::Int64, x.device()),
              num(Scalar(bins - 1), ScalarType::Int64, x.device()));
  Tensor w = weight.defined() ? to_dtype(reshape(weight, DimVector{-1}), out_dt)
                               : ones(DimVector{flat.numel()}, out_dt, x.device());
  w = where(valid, w, num(Scalar(0.0), out_dt, x.device()));
  return scatter_add(out, 0, pos, w);
}

std::pair<double, double> data_range(const Tensor& x, double lo, double hi, const char* op) {
  if (lo == hi && x.numel() > 0) {
    no_meta(x, op);
    lo = min(x).item().to<double>();
    hi = max(x).item().to<double>();
  }
  if (lo == hi) {
    lo -= 1;
    hi += 1;
  }
  STRATA_CHECK(std::isfinite(lo) && std::isfinite(hi), op, ": range of [", lo, ", ", hi, "] is not finite");
  STRATA_CHECK(lo < hi, op, ": max must be larger than min");
  return {lo, hi};
}

Tensor histc_impl(const Tensor& self, int64_t bins, const Scalar& min_, const Scalar& max_, const OptT& out) {
  STRATA_CHECK(is_floating_type(self.dtype()), "torch.histc: input tensor must be floating point, but got ",
               dtype_name(self.dtype()));
  STRATA_CHECK(bins > 0, "torch.histc: bins must be > 0, but got ", bins, " for bins");
  const double a = min_.to<double>(), b = max_.to<double>();
  STRATA_CHECK(a <= b, "torch.histc: max must be larger than min");
  if (self.device().is_meta()) {
    return finish_out(empty_tensor(DimVector{bins}, self.dtype(), self.device()), out, "histc");
  }
  auto [lo, hi] = data_range(self, a, b, "torch.histc");
  return finish_out(uniform_hist(self, bins, lo, hi, Tensor(), self.dtype()), out, "histc");
}
STRATA_IMPL_CPU_META(histc, histc_impl);

void check_hist_weight(const Tensor& self, const OptT& weight) {
  if (!weight || !weight->defined()) return;
  STRATA_CHECK(std::equal(weight->sizes().begin(), weight->sizes().end(), self.sizes().begin(), self.sizes().end()),
               "torch.histogram: if weight tensor is provided it should have the same shape as the input tensor "
               "excluding its innermost dimension, but got input with shape ", self.shape_str(),
               " and weight with shape ", weight->shape_str());
  STRATA_CHECK(weight->dtype() == self.dtype(), "torch.histogram: if weight tensor is provided, input tensor and "
               "weight tensor should have the same dtype, but got input(", dtype_name(self.dtype()), ") and weight(",
               dtype_name(weight->dtype()), ")");
}

Tensor density_of(const Tensor& hist, const Tensor& edges) {
  // hist / (total * bin width)
  Tensor widths = sub(narrow(edges, 0, 1, edges.size(0) - 1), narrow(edges, 0, 0, edges.size(0) - 1));
  return div(hist, mul(sum(hist), widths));
}

Tensor2 histogram_bin_ct_impl(const Tensor& self, int64_t bins, OptDouble min_, OptDouble max_, const OptT& weight,
                              bool density) {
  STRATA_CHECK(is_floating_type(self.dtype()), "torch.histogram: input tensor must be floating point, but got ",
               dtype_name(self.dtype()));
  STRATA_CHECK(bins > 0, "torch.histogram(): bins must be > 0, but got ", bins, " for dimension 0");
  check_hist_weight(self, weight);
  STRATA_CHECK(min_.has_value() == max_.has_value(), "torch.histogram: range must be given as (min, max)");
  if (self.device().is_meta()) {
    return {empty_tensor(DimVector{bins}, self.dtype(), self.device()),
            empty_tensor(DimVector{bins + 1}, self.dtype(), self.device())};
  }
  double a = min_.value_or(0), b = max_.value_or(0);
  STRATA_CHECK(a <= b, "torch.histogram(): min should not exceed max, but got min ", a, " max ", b);
  auto [lo, hi] = data_range(self, a, b, "torch.histogram()");
  Tensor edges = linspace(Scalar(lo), Scalar(hi), bins + 1, self.dtype(), self.device());
  Tensor hist = uniform_hist(self, bins, lo, hi, weight ? *weight : Tensor(), self.dtype());
  if (density) hist = density_of(hist, edges);
  return {hist, edges};
}
STRATA_IMPL_CPU_META(histogram_bin_ct, histogram_bin_ct_impl);

Tensor2 histogram_bins_tensor_impl(const Tensor& self, const Tensor& bins, const OptT& weight, bool density) {
  if (bins.impl()->is_wrapped_number()) {
    // histogram(x, 5): a Python int arrives as a wrapped number.
    return histogram_bin_ct_impl(self, bins.item().to<int64_t>(), std::nullopt, std::nullopt, weight, density);
  }
  STRATA_CHECK(is_floating_type(self.dtype()), "torch.histogram: input tensor must be floating point, but got ",
               dtype_name(self.dtype()));
  STRATA_CHECK(bins.dim() == 1 && bins.numel() >= 1, "torch.histogram(): bins tensor should have one dimension and "
               "at least 1 element, but got ", bins.describe());
  STRATA_CHECK(bins.dtype() == self.dtype(), "torch.histogram: input tensor and bins tensors should have the same "
               "dtype, but got input ", dtype_name(self.dtype()), " and bins ", dtype_name(bins.dtype()));
  check_hist_weight(self, weight);
  const int64_t nb = bins.size(0) - 1;
  Tensor edges = clone(bins);
  if (self.device().is_meta()) return {empty_tensor(DimVector{nb}, self.dtype(), self.device()), edges};
  Tensor hist = zeros(DimVector{nb}, self.dtype(), self.device());
  if (nb == 0 || self.numel() == 0) return {hist, edges};
  Tensor flat = reshape(self, DimVector{-1});
  Tensor e = contiguous(bins);
  Tensor first = narrow(e, 0, 0, 1), last = narrow(e, 0, nb, 1);
  Tensor valid = logical_and(ge(flat, first), le(flat, last));
  // Bin i holds [e_i, e_i+1); the last bin also holds its right edge.
  Tensor pos = sub(searchsorted(e, flat, false, true), num(Scalar(int64_t(1)), ScalarType::Int64, self.device()));
  pos = clamp(pos, num(Scalar(int64_t(0)), ScalarType::Int64, self.device()),
              num(Scalar(nb - 1), ScalarType::Int64, self.device()));
  Tensor w = weight && weight->defined() ? reshape(*weight, DimVector{-1})
                                         : ones(DimVector{flat.numel()}, self.dtype(), self.device());
  w = where(valid, w, num(Scalar(0.0), self.dtype(), self.device()));
  hist = scatter_add(hist, 0, pos, w);
  if (density) hist = density_of(hist, edges);
  return {hist, edges};
}
STRATA_IMPL_CPU_META(histogram_bins_tensor, histogram_bins_tensor_impl);

// ---- unique -----------------------------------------------------------------------------

// Given the sorted (or original, for unique_consecutive) sequence of n items
// and the bool "starts a new group" mask over them: the group id of each item
// and the size of each group.
std::pair<Tensor, Tensor> groups_of(const Tensor& starts, int64_t n) {
  Tensor id = sub(cumsum(starts, 0, ScalarType::Int64), num(Scalar(int64_t(1)), ScalarType::Int64, starts.device()));
  Tensor pos = reshape(nonzero(starts), DimVector{-1});
  Tensor ends = cat(std::vector<Tensor>{narrow(pos, 0, 1, pos.size(0) - 1),
                                        full(DimVector{1}, Scalar(n), ScalarType::Int64, starts.device())},
                    0);
  return {id, sub(ends, pos)};
}

Tensor empty_long(Device d) { return empty_tensor(DimVector{0}, ScalarType::Int64, d); }

Tensor3 unique2_impl(const Tensor& self, bool /*sorted*/, bool return_inverse, bool return_counts) {
  no_meta(self, "unique");
  const int64_t n = self.numel();
  Tensor flat = reshape(self, DimVector{-1});
  if (n == 0) {
    return {empty_tensor(DimVector{0}, self.dtype(), self.device()),
            return_inverse ? empty_tensor(self.sizes(), ScalarType::Int64, self.device()) : empty_long(self.device()),
            empty_long(self.device())};
  }
  // Unique values always come back sorted (torch's CPU behaviour for sorted=False too).
  auto [vals, perm] = sort(flat, 0, false, true);
  Tensor starts = cat(std::vector<Tensor>{ones(DimVector{1}, ScalarType::Bool, self.device()),
                                          ne(narrow(vals, 0, 1, n - 1), narrow(vals, 0, 0, n - 1))},
                      0);
  Tensor uniq = masked_select(vals, starts);
  Tensor inverse = empty_long(self.device()), counts = empty_long(self.device());
  if (return_inverse || return_counts) {
    auto [id, cnt] = groups_of(starts, n);
    if (return_inverse) {
      Tensor at_sorted = empty_tensor(DimVector{n}, ScalarType::Int64, self.device());
      inverse = reshape(scatter(at_sorted, 0, perm, id), self.sizes());
    }
    if (return_counts) counts = cnt;
  }
  return {uniq, inverse, counts};
}
STRATA_IMPL_CPU_META(_unique2, unique2_impl);

// The rows of `rows` (n, k) in lexicographic order: stable sorts by each column, last first.
Tensor lex_order(const Tensor& rows) {
  const int64_t n = rows.size(0), k = rows.size(1);
  Tensor perm = arange(Scalar(n), ScalarType::Int64, rows.device());
  for (int64_t c = k - 1; c >= 0; --c) {
    Tensor key = index_select(select(rows, 1, c), 0, perm);
    Tensor order = argsort(key, 0, false, true);
    perm = index_select(perm, 0, order);
  }
  return perm;
}

Tensor3 unique_rows(const Tensor& self, int64_t dim, bool sort_rows, bool return_inverse, bool return_counts,
                    const char* op) {
  no_meta(self, op);
  dim = wrap_dim(dim, self.dim(), op);
  const int64_t n = self.size(dim);
  Tensor moved = movedim(self, std::vector<int64_t>{dim}, std::vector<int64_t>{0});
  DimVector rest(moved.sizes().begin() + 1, moved.sizes().end());
  Tensor rows = reshape(moved, DimVector{n, -1});
  if (n == 0 || rows.size(1) == 0) {
    STRATA_CHECK(n == 0 || rows.size(1) > 0, op, ": Number of zero sized dimensions is more than one, so unique "
                 "cannot be applied");
    return {clone(self), empty_long(self.device()), empty_long(self.device())};
  }
  Tensor perm = sort_rows ? lex_order(rows) : arange(Scalar(n), ScalarType::Int64, self.device());
  Tensor sorted_rows = index_select(rows, 0, perm);
  Tensor starts = ones(DimVector{1}, ScalarType::Bool, self.device());
  if (n > 1) {
    Tensor diff_rows = any(ne(narrow(sorted_rows, 0, 1, n - 1), narrow(sorted_rows, 0, 0, n - 1)),
                           std::vector<int64_t>{1});
    starts = cat(std::vector<Tensor>{starts, diff_rows}, 0);
  }
  Tensor firsts = reshape(nonzero(starts), DimVector{-1});
  Tensor uniq_rows = index_select(sorted_rows, 0, firsts);
  DimVector ushape{uniq_rows.size(0)};
  ushape.insert(ushape.end(), rest.begin(), rest.end());
  Tensor uniq = movedim(reshape(uniq_rows, ushape), std::vector<int64_t>{0}, std::vector<int64_t>{dim});
  Tensor inverse = empty_long(self.device()), counts = empty_long(self.device());
  if (return_inverse || return_counts) {
    auto [id, cnt] = groups_of(starts, n);
    if (return_inverse) inverse = scatter(empty_tensor(DimVector{n}, ScalarType::Int64, self.device()), 0, perm, id);
    if (return_counts) counts = cnt;
  }
  return {contiguous(uniq), inverse, counts};
}

Tensor3 unique_dim_impl(const Tensor& self, int64_t dim, bool /*sorted*/, bool return_inverse, bool return_counts) {
  return unique_rows(self, dim, true, return_inverse, return_counts, "unique_dim");
}
STRATA_IMPL_CPU_META(_unique_dim, unique_dim_impl);

Tensor3 unique_consecutive_impl(const Tensor& self, bool return_inverse, bool return_counts, OptInt dim) {
  if (dim && self.dim() > 0) return unique_rows(self, *dim, false, return_inverse, return_counts, "unique_consecutive");
  no_meta(self, "unique_consecutive");
  const int64_t n = self.numel();
  Tensor flat = reshape(self, DimVector{-1});
  if (n == 0) {
    return {empty_tensor(DimVector{0}, self.dtype(), self.device()),
            return_inverse ? empty_tensor(self.sizes(), ScalarType::Int64, self.device()) : empty_long(self.device()),
            empty_long(self.device())};
  }
  Tensor starts = ones(DimVector{1}, ScalarType::Bool, self.device());
  if (n > 1) starts = cat(std::vector<Tensor>{starts, ne(narrow(flat, 0, 1, n - 1), narrow(flat, 0, 0, n - 1))}, 0);
  Tensor uniq = masked_select(flat, starts);
  Tensor inverse = empty_long(self.device()), counts = empty_long(self.device());
  if (return_inverse || return_counts) {
    auto [id, cnt] = groups_of(starts, n);
    if (return_inverse) inverse = reshape(id, self.sizes());
    if (return_counts) counts = cnt;
  }
  return {uniq, inverse, counts};
}
STRATA_IMPL_CPU_META(_unique_consecutive, unique_consecutive_impl);

// ---- sorted search -------------------------------------------------------------------------

Tensor searchsorted_impl(const Tensor& sorted_sequence, const Tensor& self, bool out_int32, bool right, OptStr side,
                         const OptT& sorter, const OptT& out) {
  const char* op = "torch.searchsorted()";
  if (side) {
    STRATA_CHECK(*side == "left" || *side == "right", op, ": side can only be 'left' or 'right' but got ", *side);
    STRATA_CHECK(!(right && *side == "left"), op, ": side and right can't be set to opposites, got side of left "
                 "while right was True");
    right = *side == "right";
  }
  STRATA_CHECK(sorted_sequence.dim() >= 1, op, ": boundaries tensor should have 1 or more dimensions (got a 0-d "
               "tensor)");
  const bool shared = sorted_sequence.dim() == 1;
  if (!shared) {
    bool ok = sorted_sequence.dim() == self.dim();
    for (int64_t d = 0; ok && d + 1 < self.dim(); ++d) ok = sorted_sequence.size(d) == self.size(d);
    STRATA_CHECK(ok, op, ": boundaries tensor should be 1 dimension or the first N-1 dimensions of boundaries tensor "
                 "and input value tensor must match, but we got boundaries tensor ", sorted_sequence.shape_str(),
                 " and input value tensor ", self.shape_str());
  }
  const bool has_sorter = sorter && sorter->defined();
  if (has_sorter) {
    STRATA_CHECK(sorter->dtype() == ScalarType::Int64, op, ": sorter must be a tensor of long dtype but got dtype ",
                 dtype_name(sorter->dtype()));
    STRATA_CHECK(std::equal(sorter->sizes().begin(), sorter->sizes().end(), sorted_sequence.sizes().begin(),
                            sorted_sequence.sizes().end()),
                 op, ": boundary and sorter must have the same size, but got boundary tensor ",
                 sorted_sequence.shape_str(), " and got sorter tensor ", sorter->shape_str());
  }
  STRATA_CHECK(self.device() == sorted_sequence.device(), op, ": expected all tensors on the same device, but got ",
               sorted_sequence.device().str(), " and ", self.device().str());
  const ScalarType out_dt = out_int32 ? ScalarType::Int32 : ScalarType::Int64;
  Tensor result = empty_tensor(self.sizes(), out_dt, self.device());
  if (has_out(out)) {
    STRATA_CHECK(out->dtype() == out_dt, op, ": output tensor's dtype is wrong, it can only be Int(int32) or "
                 "Long(int64) depending on whether out_int32 flag is True, but we got output tensor's dtype ",
                 dtype_name(out->dtype()), " and out_int32 flag is ", out_int32 ? "True" : "False");
  }
  if (self.device().is_meta() || self.numel() == 0) return finish_out(result, out, "searchsorted");
  // Compare in the common dtype of boundaries and values.
  const ScalarType dt = self.impl()->is_wrapped_number() ? sorted_sequence.dtype()
                                                          : promote_types(sorted_sequence.dtype(), self.dtype());
  STRATA_CHECK(dt != ScalarType::Bool, op, ": not implemented for 'Bool'");
  Tensor s = contiguous(sorted_sequence.dtype() == dt ? sorted_sequence : to_dtype(sorted_sequence, dt));
  Tensor v = contiguous(self.dtype() == dt ? self : to_dtype(self, dt));
  Tensor srt = has_sorter ? contiguous(*sorter) : Tensor();
  if (has_sorter && sorted_sequence.numel() > 0) {
    const int64_t m = sorted_sequence.size(-1);
    STRATA_CHECK(min(srt).item().to<int64_t>() >= 0 && max(srt).item().to<int64_t>() < m, op,
                 ": sorter index out of range");
  }
  if (sorted_sequence.size(-1) == 0) return finish_out(zero_(result), out, "searchsorted");
  searchsorted_stub(self.device().type, result, s, v, srt, right);
  return finish_out(result, out, "searchsorted");
}
STRATA_IMPL_CPU_META(searchsorted, searchsorted_impl);

Tensor bucketize_impl(const Tensor& self, const Tensor& boundaries, bool out_int32, bool right, const OptT& out) {
  STRATA_CHECK(boundaries.dim() == 1, "bucketize: boundaries tensor must be 1 dimension, but got dim(",
               boundaries.dim(), ")");
  return searchsorted(boundaries, self, out_int32, right, std::nullopt, std::nullopt, out);
}
STRATA_IMPL_COMPOSITE(bucketize, bucketize_impl);

Tensor isin_impl(const Tensor& elements, const Tensor& test_elements, bool /*assume_unique*/, bool invert,
                 const OptT& out) {
  const ScalarType dt = promote_types(elements.dtype(), test_elements.dtype());
  Tensor r;
  if (test_elements.numel() == 0 || elements.numel() == 0) {
    r = zeros(elements.sizes(), ScalarType::Bool, elements.device());
  } else {
    // Sort the test elements once; each element is then one binary search.
    Tensor t = reshape(test_elements.dtype() == dt ? test_elements : to_dtype(test_elements, dt), DimVector{-1});
    Tensor e = elements.dtype() == dt ? elements : to_dtype(elements, dt);
    Tensor sorted_t = std::get<0>(sort(t, 0, false, false));
    Tensor pos = searchsorted(sorted_t, e);
    pos = clamp(pos, std::nullopt, num(Scalar(t.numel() - 1), ScalarType::Int64, e.device()));
    Tensor found = reshape(index_select(sorted_t, 0, reshape(pos, DimVector{-1})), e.sizes());
    r = eq(found, e);
  }
  if (invert) r = logical_not(r);
  return finish_out(r, out, "isin");
}
STRATA_IMPL_COMPOSITE(isin, isin_impl);

// ---- scatter_reduce and the index ops -----------------------------------------------------

ScatterReduce parse_reduce(std::string_view r) {
  if (r == "sum") return ScatterReduce::Sum;
  if (r == "prod") return ScatterReduce::Prod;
  if (r == "mean") return ScatterReduce::Mean;
  if (r == "amax") return ScatterReduce::Amax;
  if (r == "amin") return ScatterReduce::Amin;
  throw Error(str("reduce argument must be either sum, prod, mean, amax or amin, got ", r));
}

Tensor scatter_reduce_impl(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                           std::string_view reduce, bool include_self, const OptT& out) {
  const char* op = "scatter_reduce";
  const ScatterReduce mode = parse_reduce(reduce);
  STRATA_CHECK_T(NotImplementedError, !(mode == ScatterReduce::Mean && self.dtype() == ScalarType::Bool), op,
                 "(): reduce='mean' is not implemented for 'Bool' tensors");
  dim = wrap_dim(dim, std::max<int64_t>(self.dim(), 1), op);
  // torch 2.13 takes int32 indices as in gather/scatter; the kernel reads int64.
  STRATA_CHECK(index.dtype() == ScalarType::Int64 || index.dtype() == ScalarType::Int32, op,
               "(): Expected dtype int32/int64 for index, but got ", dtype_name(index.dtype()));
  STRATA_CHECK(src.dtype() == self.dtype(), op, "(): Expected self.dtype to be equal to src.dtype (got ",
               dtype_name(self.dtype()), " and ", dtype_name(src.dtype()), ")");
  auto nd = [](const Tensor& t) { return std::max<int64_t>(t.dim(), 1); };
  auto sz = [](const Tensor& t, int64_t d) { return t.dim() == 0 ? int64_t(1) : t.size(d); };
  STRATA_CHECK(nd(index) == nd(self) && nd(src) == nd(self), op, ": Index tensor must have the same number of "
               "dimensions as self and src tensors (self ", self.shape_str(), ", index ", index.shape_str(), ", src ",
               src.shape_str(), ")");
  if (index.numel() > 0) {
    for (int64_t d = 0; d < nd(index); ++d) {
      STRATA_CHECK((d == dim || sz(index, d) <= sz(self, d)) && sz(index, d) <= sz(src, d), op, ": Expected index ",
                   index.shape_str(), " to be no larger than self ", self.shape_str(), " apart from dimension ", dim,
                   " and to be no larger size than src ", src.shape_str());
    }
  }
  STRATA_CHECK(self.device() == index.device() && self.device() == src.device(), op,
               ": expected all tensors on the same device");
  if (has_out(out) && out->is_same(self)) {
    // In place: reduce into a contiguous copy, then write it back.
    Tensor r = scatter_reduce_impl(self, dim, index, src, reduce, include_self, std::nullopt);
    if (!self.device().is_meta()) copy_(self, r);
    self.bump_version();
    return self;
  }
  Tensor result = contiguous(clone(self));
  if (self.device().is_meta() || index.numel() == 0) return finish_out(result, out, op);
  auto as1d = [](const Tensor& t) { return t.dim() == 0 ? reshape(t, DimVector{1}) : t; };
  Tensor r1 = as1d(result);
  const Tensor index64 = index.dtype() == ScalarType::Int64 ? index : to_dtype(index, ScalarType::Int64);
  scatter_reduce_stub(self.device().type, r1, dim, contiguous(as1d(index64)), contiguous(as1d(src)), mode,
                      include_self);
  return finish_out(result, out, op);
}
STRATA_IMPL_CPU_META(scatter_reduce, scatter_reduce_impl);

void check_index_vector(const Tensor& index, const char* op);

// index_reduce is scatter_reduce with the index spread along dim over source's shape.
Tensor index_reduce_impl(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                         std::string_view reduce, bool include_self, const OptT& out) {
  const char* op = "index_reduce";
  STRATA_CHECK(reduce == "prod" || reduce == "mean" || reduce == "amax" || reduce == "amin", op,
               "(): Expected reduce to be one of prod, mean, amax or amin but got ", reduce, ".");
  check_index_vector(index, op);
  Tensor s1 = self.dim() == 0 ? reshape(self, DimVector{1}) : self;
  Tensor src1 = source.dim() == 0 ? reshape(source, DimVector{1}) : source;
  dim = wrap_dim(dim, s1.dim(), op);
  const int64_t n = index.numel();
  bool ok = src1.dim() == s1.dim() && src1.size(dim) == n;
  for (int64_t d = 0; ok && d < s1.dim(); ++d) ok = d == dim || src1.size(d) == s1.size(d);
  STRATA_CHECK(ok, op, "(): Source/destination tensor must have the same shape apart from dimension ", dim,
               " whose size must equal the number of indices (", n, "); self ", self.shape_str(), ", source ",
               source.shape_str());
  DimVector ishape(s1.dim(), 1);
  ishape[dim] = n;
  Tensor spread = contiguous(expand(reshape(index, ishape), src1.sizes()));
  Tensor r = scatter_reduce(s1, dim, spread, src1, reduce, include_self);
  if (self.dim() == 0) r = reshape(r, DimVector{});
  return finish_out(r, out, op, &self);
}
STRATA_IMPL_COMPOSITE(index_reduce, index_reduce_impl);

void check_index_vector(const Tensor& index, const char* op) {
  if (std::string_view(op) == "index_fill") {
    STRATA_CHECK(index.dim() <= 1, op, "(): Index should have dimension 1 or 0 (got ", index.dim(), ")");
  }
  STRATA_CHECK_INDEX(index.dim() <= 1, op, "(): Index should have dimension 1 or 0 (got ", index.dim(), ")");
  STRATA_CHECK(index.dtype() == ScalarType::Int64, op, "(): Expected a long tensor for index, but got ",
               dtype_name(index.dtype()));
}

Tensor index_copy_impl(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, const OptT& out) {
  const char* op = "index_copy";
  check_index_vector(index, op);
  STRATA_CHECK(source.dtype() == self.dtype(), op, "(): self and source expected to have the same dtype, but got "
               "(self) ", dtype_name(self.dtype()), " and (source) ", dtype_name(source.dtype()));
  Tensor s1 = self.dim() == 0 ? reshape(self, DimVector{1}) : self;
  dim = wrap_dim(dim, s1.dim(), op);
  Tensor src1 = source.dim() == 0 ? reshape(source, DimVector{1}) : source;
  const int64_t n = index.numel();
  bool ok = src1.dim() == s1.dim() && src1.size(dim) == n;
  for (int64_t d = 0; ok && d < s1.dim(); ++d) ok = d == dim || src1.size(d) == s1.size(d);
  STRATA_CHECK(ok, op, "(): Source/destination tensor must have the same shape apart from dimension ", dim,
               " whose size must equal the number of indices (", n, "); self ", self.shape_str(), ", source ",
               source.shape_str());
  Tensor r = index_put(s1, std::vector<Tensor>{reshape(index, DimVector{-1})}, src1, false, dim);
  if (self.dim() == 0) r = reshape(r, DimVector{});
  return finish_out(r, out, op, &self);
}
STRATA_IMPL_COMPOSITE(index_copy, index_copy_impl);

Tensor index_fill_impl(const Tensor& self, int64_t dim, const Tensor& index, const Scalar& value, const OptT& out) {
  const char* op = "index_fill";
  check_index_vector(index, op);
  Tensor s1 = self.dim() == 0 ? reshape(self, DimVector{1}) : self;
  dim = wrap_dim(dim, s1.dim(), op);
  Tensor v = full({}, value, self.dtype(), self.device());  // holds its value on any device
  Tensor r = index_put(s1, std::vector<Tensor>{reshape(index, DimVector{-1})}, v, false, dim);
  if (self.dim() == 0) r = reshape(r, DimVector{});
  return finish_out(r, out, op, &self);
}
STRATA_IMPL_COMPOSITE(index_fill, index_fill_impl);

Tensor masked_scatter_impl(const Tensor& self, const Tensor& mask, const Tensor& source, const OptT& out) {
  const char* op = "masked_scatter";
  STRATA_CHECK(mask.dtype() == ScalarType::Bool, op, "_: expected BoolTensor for mask (got ", dtype_name(mask.dtype()),
               ")");
  STRATA_CHECK(source.dtype() == self.dtype(), op, ": expected self and source to have same dtypes but got ",
               dtype_name(self.dtype()), " and ", dtype_name(source.dtype()));
  DimVector shape = broadcast_shapes(self.sizes(), mask.sizes(), op);
  Tensor s = contiguous(expand(self, shape));
  if (self.device().is_meta()) return finish_out(s, out, op, &self);
  Tensor m = expand(mask, shape);
  const int64_t k = count_nonzero(m).item().to<int64_t>();
  STRATA_CHECK(source.numel() >= k, op, ": expected source to have at least ", k,
               " elements (the number of set mask elements), but got ", source.numel());
  Tensor values = narrow(reshape(source, DimVector{-1}), 0, 0, k);
  Tensor r = index_put(s, std::vector<Tensor>{m}, values);
  return finish_out(r, out, op, &self);
}
STRATA_IMPL_COMPOSITE(masked_scatter, masked_scatter_impl);

Tensor put_impl(const Tensor& self, const Tensor& index, const Tensor& source, bool accumulate, const OptT& out) {
  const char* op = "put";
  // Duplicate indices: which write wins is not defined (torch refuses it too).
  if (!accumulate) alert_not_deterministic("put_");
  STRATA_CHECK(index.dtype() == ScalarType::Int64, op, "(): Expected a long tensor for index, but got ",
               dtype_name(index.dtype()));
  STRATA_CHECK(source.dtype() == self.dtype(), op, "(): self and source expected to have the same dtype, but got "
               "self.dtype = ", dtype_name(self.dtype()), " and source.dtype = ", dtype_name(source.dtype()));
  STRATA_CHECK(source.numel() == index.numel(), op, "(): Expected source and index to have the same number of "
               "elements, but got source.numel() = ", source.numel(), ", index.numel() = ", index.numel());
  const int64_t n = self.numel();
  if (index.numel() > 0 && !self.device().is_meta()) {
    const int64_t lo = min(index).item().to<int64_t>(), hi = max(index).item().to<int64_t>();
    STRATA_CHECK_INDEX(lo >= -n && hi < n, op, "(): index out of range: tried to access index ",
                       lo < -n ? lo : hi, " on a tensor of ", n, " elements.");
  }
  Tensor flat = reshape(self, DimVector{-1});
  Tensor r = reshape(index_put(flat, std::vector<Tensor>{reshape(index, DimVector{-1})},
                               reshape(source, DimVector{-1}), accumulate),
                     self.sizes());
  return finish_out(r, out, op, &self);
}
STRATA_IMPL_COMPOSITE(put, put_impl);

Tensor take_impl(const Tensor& self, const Tensor& index_, const OptT& out) {
  const char* op = "take";
  if (out && out->defined()) check_out_overlap(op, *out, std::vector<Tensor>{self, index_});
  STRATA_CHECK(index_.dtype() == ScalarType::Int64, op, "(): Expected a long tensor for index, but got ",
               dtype_name(index_.dtype()));
  const int64_t n = self.numel();
  if (index_.numel() > 0 && !self.device().is_meta()) {
    const int64_t lo = min(index_).item().to<int64_t>(), hi = max(index_).item().to<int64_t>();
    STRATA_CHECK_INDEX(lo >= -n && hi < n, op, "(): index out of range: tried to access index ",
                       lo < -n ? lo : hi, " on a tensor of ", n, " elements.");
  }
  Tensor flat_index = reshape(index_, DimVector{-1});
  Tensor r = reshape(index(reshape(self, DimVector{-1}), std::vector<Tensor>{flat_index}), index_.sizes());
  return finish_out(r, out, op);
}
STRATA_IMPL_COMPOSITE(take, take_impl);

}  // namespace

}  // namespace strata
