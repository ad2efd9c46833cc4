// Small helpers shared by the derivative files.
#pragma once

#include "autograd/derivative.h"
#include "autograd/variable.h"
#include "ops/api/complex.h"
#include "ops/ops.h"

namespace strata::autograd {

// A Python-number-like 0-d tensor: takes part in type promotion by category
// only, so `mul(g, num(g, 2))` keeps g's dtype.
inline Tensor num(const Tensor& like, double v) {
  return scalar_to_tensor(Scalar(v), is_differentiable_type(like.dtype()) ? like.dtype() : ScalarType::Float64,
                          like.device(), /*wrapped=*/true);
}
inline Tensor num(const Tensor& like, const Scalar& v) {
  return scalar_to_tensor(v, is_differentiable_type(like.dtype()) ? like.dtype() : ScalarType::Float64, like.device(),
                          /*wrapped=*/true);
}
// conj for a complex tensor, the tensor itself otherwise (no op call on the
// real path). See Note [Complex gradients].
inline Tensor cj(const Tensor& t) { return is_complex_type(t.dtype()) ? conj(t) : t; }
inline Tensor zeros_of(const TensorGeometry& g) { return zeros(g.sizes, g.dtype, g.device); }

// Dims of a reduction as recorded (None -> all dims), wrapped and sorted.
std::vector<int64_t> reduced_dims(const IValue& dim_arg, int64_t ndim);
// Re-inserts reduced dims (keepdim=False) so a gradient broadcasts against
// the input again.
Tensor unsqueeze_dims(const Tensor& g, const std::vector<int64_t>& dims, int64_t in_ndim, bool keepdim);

}  // namespace strata::autograd
