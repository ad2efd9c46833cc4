// Stubs of the non-pointwise kernels behind decl/surface_more.def (the
// pointwise ones use PointwiseFn stubs declared where they are registered).
#pragma once

#include "core/tensor.h"
#include "ops/stub.h"

namespace strata {

// in contiguous and floating; mantissa (in's dtype) and exponent (int32) contiguous.
using FrexpFn = void (*)(const Tensor& in, Tensor& mantissa, Tensor& exponent);
// repeats: contiguous int64, non-negative; out: int64 of length sum(repeats).
using RepeatIndexFn = void (*)(const Tensor& repeats, Tensor& out);

STRATA_DECLARE_STUB(frexp_stub, FrexpFn);
STRATA_DECLARE_STUB(repeat_interleave_index_stub, RepeatIndexFn);

}  // namespace strata
