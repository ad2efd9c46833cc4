// Shared between the device-generic reduction code (ops/reduction.cpp,
// ops/reduce_scan_softmax.cpp) and the per-ISA CPU kernels: stub signatures
// and the coalesced geometry a reduction kernel runs over.
#pragma once

#include "core/small_vector.h"
#include "core/tensor.h"
#include "ops/stub.h"

namespace strata {

// Note [Reduction geometry]
// A reduction reads `in` and writes one value per output element. Dims of the
// input are split into kept dims (they index the output) and reduced dims;
// size-1 dims are dropped, each group is sorted innermost-first by input
// stride and adjacent dims that are contiguous with each other are merged.
// Strides count elements. Both groups have at least one entry (a size-1 dim
// with stride 0 stands in for an empty group), so kernels never special-case
// full reductions or reductions over nothing.
struct ReduceGeom {
  // Inline: a reduction of a few dims allocates nothing for its geometry.
  using Dims = SmallVec<int64_t, 6>;
  Dims keep_sizes, keep_in, keep_out;
  Dims red_sizes, red_in;
  int64_t nout = 1;  // product of keep_sizes
  int64_t nred = 1;  // product of red_sizes (0 for a reduction over an empty dim)
};

struct ReduceArgs {
  double p = 2;  // norm's order
};

// `out` is contiguous with the kept shape; its dtype is fixed per op (see
// reduction.cpp): sum/prod write the input dtype for floats and int64 for
// integers and bool; max/min the input dtype; all/any bool; count_nonzero int64.
using ReduceFn = void (*)(const Tensor& in, const Tensor& out, const ReduceGeom& g, const ReduceArgs& a);

// Over a contiguous input viewed as [outer, n, inner], reducing n: writes the
// index of the first max (or min) to `indices` (int64) and, when `values` is
// defined, the value too. NaN counts as larger (smaller) than everything.
using ArgReduceFn = void (*)(const Tensor& in, const Tensor& values, const Tensor& indices, int64_t outer, int64_t n,
                             int64_t inner, bool is_max);

// Contiguous in and out of one float dtype viewed as [outer, n, inner].
using SoftmaxFn = void (*)(const Tensor& in, const Tensor& out, int64_t outer, int64_t n, int64_t inner, bool log);
// Contiguous in/out as [outer, n, inner], scanning n. out has the input's dtype
// for floats and int64 for integers and bool.
using ScanFn = void (*)(const Tensor& in, const Tensor& out, int64_t outer, int64_t n, int64_t inner, bool prod);

STRATA_DECLARE_STUB(reduce_sum_stub, ReduceFn);
// sum with NaN counted as zero (floating inputs only).
STRATA_DECLARE_STUB(reduce_nansum_stub, ReduceFn);
STRATA_DECLARE_STUB(reduce_mean_stub, ReduceFn);
STRATA_DECLARE_STUB(reduce_prod_stub, ReduceFn);
STRATA_DECLARE_STUB(reduce_max_stub, ReduceFn);
STRATA_DECLARE_STUB(reduce_min_stub, ReduceFn);
STRATA_DECLARE_STUB(reduce_all_stub, ReduceFn);
STRATA_DECLARE_STUB(reduce_any_stub, ReduceFn);
STRATA_DECLARE_STUB(reduce_count_nonzero_stub, ReduceFn);
STRATA_DECLARE_STUB(reduce_norm_stub, ReduceFn);
STRATA_DECLARE_STUB(arg_reduce_stub, ArgReduceFn);
STRATA_DECLARE_STUB(softmax_stub, SoftmaxFn);
STRATA_DECLARE_STUB(scan_stub, ScanFn);

}  // namespace strata
