// C++ API of the fused activation backwards (see decl/activation_backward.def).
#pragma once

#include "ops/op_list.h"

namespace strata {

inline Tensor threshold_backward(const Tensor& grad_output, const Tensor& self, const Scalar& threshold) {
  return call<OpId::threshold_backward>(grad_output, self, threshold);
}
inline Tensor gelu_backward(const Tensor& grad_output, const Tensor& self, std::string_view approximate = "none") {
  return call<OpId::gelu_backward>(grad_output, self, approximate);
}
inline Tensor silu_backward(const Tensor& grad_output, const Tensor& self) {
  return call<OpId::silu_backward>(grad_output, self);
}
inline Tensor sigmoid_backward(const Tensor& grad_output, const Tensor& output) {
  return call<OpId::sigmoid_backward>(grad_output, output);
}
inline Tensor tanh_backward(const Tensor& grad_output, const Tensor& output) {
  return call<OpId::tanh_backward>(grad_output, output);
}

}  // namespace strata
