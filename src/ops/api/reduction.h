#pragma once

#include "ops/op_list.h"

namespace strata {

inline Tensor sum(const Tensor& self, OptIntArrayRef dim = std::nullopt, bool keepdim = false, OptDType dtype = std::nullopt) {
  return call<OpId::sum>(self, dim, keepdim, dtype);
}
inline Tensor mean(const Tensor& self, OptIntArrayRef dim = std::nullopt, bool keepdim = false, OptDType dtype = std::nullopt) {
  return call<OpId::mean>(self, dim, keepdim, dtype);
}
inline Tensor prod(const Tensor& self, OptInt dim = std::nullopt, bool keepdim = false, OptDType dtype = std::nullopt) {
  return call<OpId::prod>(self, dim, keepdim, dtype);
}
inline Tensor max(const Tensor& self) { return call<OpId::max>(self); }
inline Tensor2 max(const Tensor& self, int64_t dim, bool keepdim = false) { return call<OpId::max_dim>(self, dim, keepdim); }
inline Tensor max(const Tensor& self, const Tensor& other) { return call<OpId::max_other>(self, other); }
inline Tensor min(const Tensor& self) { return call<OpId::min>(self); }
inline Tensor2 min(const Tensor& self, int64_t dim, bool keepdim = false) { return call<OpId::min_dim>(self, dim, keepdim); }
inline Tensor min(const Tensor& self, const Tensor& other) { return call<OpId::min_other>(self, other); }
inline Tensor amax(const Tensor& self, IntArrayRef dim = {}, bool keepdim = false) { return call<OpId::amax>(self, dim, keepdim); }
inline Tensor amin(const Tensor& self, IntArrayRef dim = {}, bool keepdim = false) { return call<OpId::amin>(self, dim, keepdim); }
inline Tensor argmax(const Tensor& self, OptInt dim = std::nullopt, bool keepdim = false) {
  return call<OpId::argmax>(self, dim, keepdim);
}
inline Tensor argmin(const Tensor& self, OptInt dim = std::nullopt, bool keepdim = false) {
  return call<OpId::argmin>(self, dim, keepdim);
}
inline Tensor var(const Tensor& self, OptIntArrayRef dim = std::nullopt, const std::optional<Scalar>& correction = std::nullopt,
                  bool keepdim = false) {
  return call<OpId::var>(self, dim, correction, keepdim);
}
inline Tensor std(const Tensor& self, OptIntArrayRef dim = std::nullopt, const std::optional<Scalar>& correction = std::nullopt,
                  bool keepdim = false) {
  return call<OpId::std>(self, dim, correction, keepdim);
}
inline Tensor2 var_mean(const Tensor& self, OptIntArrayRef dim = std::nullopt,
                        const std::optional<Scalar>& correction = std::nullopt, bool keepdim = false) {
  return call<OpId::var_mean>(self, dim, correction, keepdim);
}
inline Tensor2 std_mean(const Tensor& self, OptIntArrayRef dim = std::nullopt,
                        const std::optional<Scalar>& correction = std::nullopt, bool keepdim = false) {
  return call<OpId::std_mean>(self, dim, correction, keepdim);
}
inline Tensor logsumexp(const Tensor& self, IntArrayRef dim, bool keepdim = false) {
  return call<OpId::logsumexp>(self, dim, keepdim);
}
inline Tensor all(const Tensor& self, OptIntArrayRef dim = std::nullopt, bool keepdim = false) {
  return call<OpId::all>(self, dim, keepdim);
}
inline Tensor any(const Tensor& self, OptIntArrayRef dim = std::nullopt, bool keepdim = false) {
  return call<OpId::any>(self, dim, keepdim);
}
inline Tensor norm(const Tensor& self, const std::optional<Scalar>& p = Scalar(2), OptIntArrayRef dim = std::nullopt,
                   bool keepdim = false, OptDType dtype = std::nullopt) {
  return call<OpId::norm>(self, p, dim, keepdim, dtype);
}
inline Tensor count_nonzero(const Tensor& self, OptIntArrayRef dim = std::nullopt) {
  return call<OpId::count_nonzero>(self, dim);
}
inline Tensor cumsum(const Tensor& self, int64_t dim, OptDType dtype = std::nullopt) {
  return call<OpId::cumsum>(self, dim, dtype);
}
inline Tensor cumprod(const Tensor& self, int64_t dim, OptDType dtype = std::nullopt) {
  return call<OpId::cumprod>(self, dim, dtype);
}
inline Tensor softmax(const Tensor& self, int64_t dim, OptDType dtype = std::nullopt) {
  return call<OpId::softmax>(self, dim, dtype);
}
inline Tensor log_softmax(const Tensor& self, int64_t dim, OptDType dtype = std::nullopt) {
  return call<OpId::log_softmax>(self, dim, dtype);
}

}  // namespace strata
