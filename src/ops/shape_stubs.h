// Kernel stubs of the shape/index ops (implemented per device; CPU versions in
// backends/cpu/kernels/shape_kernels.cpp and sort_kernels.cpp).
#pragma once

#include "core/tensor.h"
#include "ops/stub.h"

namespace strata {

// out = tril/triu(self) (lower selects tril); out and self have the same shape (>= 2-d).
using TriFn = void (*)(const Tensor& out, const Tensor& self, int64_t diagonal, bool lower);
// out[p] = self[p with p[dim] = index[p]]; out and index have one shape, self the same
// rank. Negative indices are wrapped when wrap_negative (take_along_dim). Throws IndexError.
using GatherFn = void (*)(const Tensor& out, const Tensor& self, int64_t dim, const Tensor& index, bool wrap_negative,
                          const char* op);
enum class ScatterMode { Src, Value, Add };
// For every position p of index: out[p with p[dim] = index[p]] = src[p] (or value, or += src[p] * alpha).
// Duplicate indices: later positions along dim win (Src/Value) or accumulate in order (Add).
using ScatterFn = void (*)(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src, ScatterMode mode,
                           const Scalar& value, const char* op);
// Coordinates of the nonzero elements of a contiguous tensor, as an (n, ndim) int64 tensor.
using NonzeroFn = Tensor (*)(const Tensor& self);
// Elements of a contiguous self where the contiguous bool mask of the same shape is set, 1-d.
using MaskedSelectFn = Tensor (*)(const Tensor& self, const Tensor& mask);
// values/indices = sort of self along dim (stable; NaN is the greatest value).
using SortFn = void (*)(const Tensor& values, const Tensor& indices, const Tensor& self, int64_t dim, bool descending);
// values/indices = the k largest (or smallest) along dim, in sorted order.
using TopkFn = void (*)(const Tensor& values, const Tensor& indices, const Tensor& self, int64_t k, int64_t dim,
                        bool largest);

STRATA_DECLARE_STUB(tri_stub, TriFn);
STRATA_DECLARE_STUB(gather_stub, GatherFn);
STRATA_DECLARE_STUB(scatter_stub, ScatterFn);
STRATA_DECLARE_STUB(nonzero_stub, NonzeroFn);
STRATA_DECLARE_STUB(masked_select_stub, MaskedSelectFn);
STRATA_DECLARE_STUB(sort_stub, SortFn);
STRATA_DECLARE_STUB(topk_stub, TopkFn);

}  // namespace strata
