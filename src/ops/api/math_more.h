// C++ API of the ops in decl/math_more.def. Not part of ops/ops.h (so that
// editing it rebuilds only its users); include it where needed.
#pragma once

#include "ops/op_list.h"

namespace strata {

using OptTensorOut = const std::optional<Tensor>&;

#define STRATA_MM_UNARY(name) \
  inline Tensor name(const Tensor& self, OptTensorOut out = std::nullopt) { return call<OpId::name>(self, out); }
STRATA_MM_UNARY(acosh)
STRATA_MM_UNARY(asinh)
STRATA_MM_UNARY(atanh)
STRATA_MM_UNARY(deg2rad)
STRATA_MM_UNARY(rad2deg)
STRATA_MM_UNARY(frac)
STRATA_MM_UNARY(sinc)
STRATA_MM_UNARY(signbit)
STRATA_MM_UNARY(lgamma)
STRATA_MM_UNARY(digamma)
STRATA_MM_UNARY(erfinv)
STRATA_MM_UNARY(i0)
STRATA_MM_UNARY(special_i1)
#undef STRATA_MM_UNARY

#define STRATA_MM_BINARY(name)                                                          \
  inline Tensor name(const Tensor& self, const Tensor& other, OptTensorOut out = std::nullopt) { \
    return call<OpId::name>(self, other, out);                                          \
  }
STRATA_MM_BINARY(hypot)
STRATA_MM_BINARY(logaddexp)
STRATA_MM_BINARY(logaddexp2)
STRATA_MM_BINARY(xlogy)
STRATA_MM_BINARY(heaviside)
STRATA_MM_BINARY(copysign)
STRATA_MM_BINARY(float_power)
STRATA_MM_BINARY(clamp_min)
STRATA_MM_BINARY(clamp_max)
#undef STRATA_MM_BINARY

inline Tensor logit(const Tensor& self, OptDouble eps = std::nullopt, OptTensorOut out = std::nullopt) {
  return call<OpId::logit>(self, eps, out);
}
inline Tensor polygamma(int64_t n, const Tensor& self, OptTensorOut out = std::nullopt) {
  return call<OpId::polygamma>(n, self, out);
}
inline Tensor mvlgamma(const Tensor& self, int64_t p, OptTensorOut out = std::nullopt) {
  return call<OpId::mvlgamma>(self, p, out);
}
inline Tensor addcmul(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value = 1,
                      OptTensorOut out = std::nullopt) {
  return call<OpId::addcmul>(self, t1, t2, value, out);
}
inline Tensor addcdiv(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value = 1,
                      OptTensorOut out = std::nullopt) {
  return call<OpId::addcdiv>(self, t1, t2, value, out);
}
inline Tensor2 cummax(const Tensor& self, int64_t dim) { return call<OpId::cummax>(self, dim); }
inline Tensor2 cummin(const Tensor& self, int64_t dim) { return call<OpId::cummin>(self, dim); }
inline Tensor logcumsumexp(const Tensor& self, int64_t dim) { return call<OpId::logcumsumexp>(self, dim); }
inline Tensor2 aminmax(const Tensor& self, OptInt dim = std::nullopt, bool keepdim = false) {
  return call<OpId::aminmax>(self, dim, keepdim);
}
inline Tensor nansum(const Tensor& self, OptIntArrayRef dim = std::nullopt, bool keepdim = false,
                     OptDType dtype = std::nullopt) {
  return call<OpId::nansum>(self, dim, keepdim, dtype);
}
inline Tensor nanmean(const Tensor& self, OptIntArrayRef dim = std::nullopt, bool keepdim = false,
                      OptDType dtype = std::nullopt) {
  return call<OpId::nanmean>(self, dim, keepdim, dtype);
}
inline Tensor median(const Tensor& self) { return call<OpId::median>(self); }
inline Tensor2 median(const Tensor& self, int64_t dim, bool keepdim = false) {
  return call<OpId::median_dim>(self, dim, keepdim);
}
inline Tensor nanmedian(const Tensor& self) { return call<OpId::nanmedian>(self); }
inline Tensor2 nanmedian(const Tensor& self, int64_t dim, bool keepdim = false) {
  return call<OpId::nanmedian_dim>(self, dim, keepdim);
}
inline Tensor2 kthvalue(const Tensor& self, int64_t k, int64_t dim = -1, bool keepdim = false) {
  return call<OpId::kthvalue>(self, k, dim, keepdim);
}
inline Tensor2 mode(const Tensor& self, int64_t dim = -1, bool keepdim = false) {
  return call<OpId::mode>(self, dim, keepdim);
}
inline Tensor quantile(const Tensor& self, const Tensor& q, OptInt dim = std::nullopt, bool keepdim = false,
                       std::string_view interpolation = "linear") {
  return call<OpId::quantile>(self, q, dim, keepdim, interpolation);
}
inline Tensor nanquantile(const Tensor& self, const Tensor& q, OptInt dim = std::nullopt, bool keepdim = false,
                          std::string_view interpolation = "linear") {
  return call<OpId::nanquantile>(self, q, dim, keepdim, interpolation);
}
inline Tensor msort(const Tensor& self) { return call<OpId::msort>(self); }

}  // namespace strata
