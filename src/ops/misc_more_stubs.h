// Kernel stubs of decl/misc_more.def (CPU versions in
// backends/cpu/kernels/misc_more_kernels.cpp).
#pragma once

#include "core/tensor.h"
#include "ops/stub.h"

namespace strata {

// out[..., i] = the insertion point of values[..., i] in sorted[..., :] (or in
// the 1-d sorted, shared by every row): the first position whose element is
// >= value (right: > value). sorted, values (same dtype), sorter (int64, or
// undefined) and out (int64 or int32) are contiguous; rows = values.numel() / n.
using SearchsortedFn = void (*)(const Tensor& out, const Tensor& sorted, const Tensor& values, const Tensor& sorter,
                                bool right);
enum class ScatterReduce { Sum, Prod, Mean, Amax, Amin };
// out (contiguous, holding self) reduced with src at index along dim, as
// scatter_reduce; index and src are contiguous with the same rank as out, src
// at least index's extent. Throws IndexError for an index out of range.
using ScatterReduceFn = void (*)(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src,
                                 ScatterReduce reduce, bool include_self);

STRATA_DECLARE_STUB(searchsorted_stub, SearchsortedFn);
STRATA_DECLARE_STUB(scatter_reduce_stub, ScatterReduceFn);

}  // namespace strata
