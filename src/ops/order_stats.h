// Kernel stubs of the scans with indices and the order statistics of
// decl/math_more.def (CPU versions in backends/cpu/kernels/order_stat_kernels.cpp).
// Every stub works on a contiguous input viewed as [outer, n, inner] along
// the scanned or reduced dim; outputs are contiguous.
#pragma once

#include "core/tensor.h"
#include "ops/stub.h"

namespace strata {

// Running max (or min) along n with the index it came from: values/indices have
// the input's shape. A later equal value takes over the index (as torch), and
// a nan sticks once seen (each later nan takes over the index).
using CumExtremumFn = void (*)(const Tensor& in, const Tensor& values, const Tensor& indices, int64_t outer, int64_t n,
                               int64_t inner, bool is_max);
// out = log(cumsum(exp(in))) along n, floating types.
using LogCumSumExpFn = void (*)(const Tensor& in, const Tensor& out, int64_t outer, int64_t n, int64_t inner);

enum class SelectKind {
  Kth,        // the k-th smallest (k is 0-based here), nan the greatest value
  Median,     // the lower median; a slice holding a nan gives that nan (the first one)
  NanMedian,  // the lower median of the non-nan elements; all nan gives nan (index of the first)
  Mode,       // the most frequent value, the smallest of equally frequent ones; index of its last occurrence
};
// One value and its index per [outer, inner] position; values/indices are
// [outer, inner] (values in the input dtype, indices int64).
using SelectFn = void (*)(const Tensor& in, const Tensor& values, const Tensor& indices, int64_t outer, int64_t n,
                          int64_t inner, SelectKind kind, int64_t k);

STRATA_DECLARE_STUB(cum_extremum_stub, CumExtremumFn);
STRATA_DECLARE_STUB(logcumsumexp_stub, LogCumSumExpFn);
STRATA_DECLARE_STUB(select_stub, SelectFn);

}  // namespace strata
