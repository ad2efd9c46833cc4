// Helpers shared by the nn op implementations (ops/nn_*.cpp).
#pragma once

#include <string_view>

#include "core/shape.h"
#include "ops/nn_kernels.h"
#include "ops/ops.h"
#include "ops/tensor_iterator.h"
#include "profiler/hidden_copy.h"

namespace strata::nn {

// Kernels run in float32 for 16-bit floats and in the input's type otherwise.
inline ScalarType compute_type(ScalarType t) {
  return (t == ScalarType::Float16 || t == ScalarType::BFloat16) ? ScalarType::Float32 : t;
}
// A contiguous copy (or the tensor itself) in dtype t.
inline Tensor prep(const Tensor& x, ScalarType t) { return contiguous_input(to_dtype(x, t)); }
inline Tensor prep_opt(const std::optional<Tensor>& x, ScalarType t) {
  return x && x->defined() ? prep(*x, t) : Tensor();
}
inline bool has(const std::optional<Tensor>& t) { return t && t->defined(); }
// A view of a contiguous tensor with new sizes.
inline Tensor reshape_contig(const Tensor& t, IntArrayRef sizes) {
  DimVector s(sizes.begin(), sizes.end());
  return make_view(t, s, contiguous_strides(s), t.storage_offset());
}

inline Reduction parse_reduction(const char* op, std::string_view r) {
  if (r == "mean") return Reduction::Mean;
  if (r == "sum") return Reduction::Sum;
  if (r == "none") return Reduction::None;
  throw ValueError(str(op, ": ", r, " is not a valid value for reduction (expected 'none', 'mean' or 'sum')"));
}

// Expands a 1-element list to n elements and checks the length (int[2] args
// called from C++ with a single value).
inline DimVector expand_param(IntArrayRef v, size_t n, const char* op, const char* name) {
  if (v.size() == 1) return DimVector(n, v[0]);
  STRATA_CHECK(v.size() == n, op, ": expected ", name, " to be a single integer value or a list of ", n,
               " values to match the convolution dimensions, but got ", name, "=", shape_str(v));
  return DimVector(v.begin(), v.end());
}

inline void check_floating(const char* op, const Tensor& t, const char* what) {
  STRATA_CHECK(is_floating_type(t.dtype()), op, ": expected ", what, " to be a floating-point tensor, but got a ",
               t.describe());
}

// The operand checks every convolution makes (k spatial dims), with torch's messages: the input's rank
// (batched or not), the weight's rank, a floating dtype, and one dtype for input, weight and bias.
inline void check_conv_operands(const char* op, int k, const Tensor& input, const Tensor& weight,
                                const std::optional<Tensor>& bias) {
  const int64_t nd = input.dim();
  STRATA_CHECK(nd == k + 1 || nd == k + 2, op, ": Expected ", k + 1, "D (unbatched) or ", k + 2,
               "D (batched) input to ", op, ", but got input of size: ", input.shape_str());
  STRATA_CHECK(weight.dim() == k + 2, op, ": expected weight to be ", k + 2, "-dimensional, but got weight of size ",
               weight.shape_str());
  check_floating(op, input, "input");
  STRATA_CHECK(input.dtype() == weight.dtype(), op, ": Input type (", dtype_name(input.dtype()),
               ") and weight type (", dtype_name(weight.dtype()), ") should be the same");
  if (has(bias))
    STRATA_CHECK(input.dtype() == bias->dtype(), op, ": Input type (", dtype_name(input.dtype()),
                 ") and bias type (", dtype_name(bias->dtype()), ") should be the same");
}

inline void check_same_dtype(const char* op, const Tensor& a, const char* an, const Tensor& b, const char* bn) {
  STRATA_CHECK(a.dtype() == b.dtype(), op, ": expected ", an, " and ", bn, " to have the same dtype, but got ",
               dtype_name(a.dtype()), " != ", dtype_name(b.dtype()));
}

inline Device check_devices(const char* op, std::initializer_list<Tensor> ts) {
  std::vector<Tensor> v;
  for (const Tensor& t : ts)
    if (t.defined()) v.push_back(t);
  return common_device(v, op);
}

}  // namespace strata::nn
