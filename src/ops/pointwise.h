// Shared machinery for pointwise ops: the stub signature and the
// device-generic drivers that set up a TensorIterator and run a stub.
#pragma once

#include "ops/stub.h"
#include "ops/tensor_iterator.h"

namespace strata {

// Scalar parameters a pointwise kernel may need (alpha, nan_to_num's values).
struct PwArgs {
  double a = 0, b = 0, c = 0;
};
using PointwiseFn = void (*)(TensorIterator&, const PwArgs&);

// How an op picks its compute and output dtypes.
enum class PwRule {
  Promote,         // common dtype of the inputs (add, mul, maximum)
  IntToFloat,      // like Promote, but integers and bool compute in the default float (exp, div)
  BoolOut,         // compute in the common dtype, write bool (eq, isnan)
  BoolCompute,     // compute and write bool regardless of inputs (logical_and)
  IntegralOnly,    // like Promote, integer and bool only (bitwise ops)
};

// Runs stub over inputs; out (optional) may alias input 0 for in-place use.
Tensor run_pointwise(const char* op, const DispatchStub<PointwiseFn>& stub, PwRule rule,
                     std::initializer_list<Tensor> inputs, const std::optional<Tensor>& out, const PwArgs& args = {},
                     int skip_promotion_of = -1);

// An out= tensor given for an op: resize it to shape (keeping it when it already
// has that shape). Bumps the version counter of out's storage.
void resize_out(Tensor& out, IntArrayRef shape, const char* op);

}  // namespace strata
