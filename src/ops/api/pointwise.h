#pragma once

#include "ops/op_list.h"

namespace strata {

inline Tensor exp(const Tensor& self, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::exp>(self, out); }
inline Tensor exp2(const Tensor& self, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::exp2>(self, out); }
inline Tensor expm1(const Tensor& self, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::expm1>(self, out); }
inline Tensor log(const Tensor& self, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::log>(self, out); }
inline Tensor log2(const Tensor& self, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::log2>(self, out); }
inline Tensor log10(const Tensor& self, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::log10>(self, out); }
inline Tensor log1p(const Tensor& self, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::log1p>(self, out); }
inline Tensor sqrt(const Tensor& self, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::sqrt>(self, out); }
inline Tensor rsqrt(const Tensor& self, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::rsqrt>(self, out); }
inline Tensor reciprocal(const Tensor& self, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::reciprocal>(self, out); }
inline Tensor sin(const Tensor& self, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::sin>(self, out); }
inline Tensor cos(const Tensor& self, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::cos>(self, out); }
inline Tensor tan(const Tensor& self, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::tan>(self, out); }
inline Tensor tanh(const Tensor& self, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::tanh>(self, out); }
inline Tensor asin(const Tensor& self, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::asin>(self, out); }
inline Tensor acos(const Tensor& self, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::acos>(self, out); }
inline Tensor atan(const Tensor& self, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::atan>(self, out); }
inline Tensor sinh(const Tensor& self, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::sinh>(self, out); }
inline Tensor cosh(const Tensor& self, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::cosh>(self, out); }
inline Tensor sigmoid(const Tensor& self, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::sigmoid>(self, out); }
inline Tensor erf(const Tensor& self, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::erf>(self, out); }
inline Tensor erfc(const Tensor& self, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::erfc>(self, out); }
inline Tensor neg(const Tensor& self, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::neg>(self, out); }
inline Tensor abs(const Tensor& self, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::abs>(self, out); }
inline Tensor sign(const Tensor& self, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::sign>(self, out); }
inline Tensor square(const Tensor& self, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::square>(self, out); }
inline Tensor floor(const Tensor& self, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::floor>(self, out); }
inline Tensor ceil(const Tensor& self, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::ceil>(self, out); }
inline Tensor trunc(const Tensor& self, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::trunc>(self, out); }
inline Tensor isnan(const Tensor& self, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::isnan>(self, out); }
inline Tensor isinf(const Tensor& self, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::isinf>(self, out); }
inline Tensor isfinite(const Tensor& self, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::isfinite>(self, out); }
inline Tensor logical_not(const Tensor& self, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::logical_not>(self, out); }
inline Tensor bitwise_not(const Tensor& self, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::bitwise_not>(self, out); }
inline Tensor round(const Tensor& self, int64_t decimals = 0, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::round>(self, decimals, out); }
inline Tensor nan_to_num(const Tensor& self, std::optional<double> nan = 0.0, std::optional<double> posinf = std::nullopt, std::optional<double> neginf = std::nullopt, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::nan_to_num>(self, nan, posinf, neginf, out); }
inline Tensor add(const Tensor& self, const Tensor& other, const Scalar& alpha = 1, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::add>(self, other, alpha, out); }
inline Tensor sub(const Tensor& self, const Tensor& other, const Scalar& alpha = 1, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::sub>(self, other, alpha, out); }
inline Tensor div(const Tensor& self, const Tensor& other, std::optional<std::string_view> rounding_mode = std::nullopt, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::div>(self, other, rounding_mode, out); }
inline Tensor mul(const Tensor& self, const Tensor& other, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::mul>(self, other, out); }
inline Tensor remainder(const Tensor& self, const Tensor& other, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::remainder>(self, other, out); }
inline Tensor fmod(const Tensor& self, const Tensor& other, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::fmod>(self, other, out); }
inline Tensor pow(const Tensor& self, const Tensor& exponent, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::pow>(self, exponent, out); }
inline Tensor maximum(const Tensor& self, const Tensor& other, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::maximum>(self, other, out); }
inline Tensor minimum(const Tensor& self, const Tensor& other, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::minimum>(self, other, out); }
inline Tensor atan2(const Tensor& self, const Tensor& other, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::atan2>(self, other, out); }
inline Tensor floor_divide(const Tensor& self, const Tensor& other, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::floor_divide>(self, other, out); }
inline Tensor eq(const Tensor& self, const Tensor& other, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::eq>(self, other, out); }
inline Tensor ne(const Tensor& self, const Tensor& other, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::ne>(self, other, out); }
inline Tensor lt(const Tensor& self, const Tensor& other, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::lt>(self, other, out); }
inline Tensor le(const Tensor& self, const Tensor& other, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::le>(self, other, out); }
inline Tensor gt(const Tensor& self, const Tensor& other, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::gt>(self, other, out); }
inline Tensor ge(const Tensor& self, const Tensor& other, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::ge>(self, other, out); }
inline Tensor logical_and(const Tensor& self, const Tensor& other, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::logical_and>(self, other, out); }
inline Tensor logical_or(const Tensor& self, const Tensor& other, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::logical_or>(self, other, out); }
inline Tensor logical_xor(const Tensor& self, const Tensor& other, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::logical_xor>(self, other, out); }
inline Tensor bitwise_and(const Tensor& self, const Tensor& other, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::bitwise_and>(self, other, out); }
inline Tensor bitwise_or(const Tensor& self, const Tensor& other, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::bitwise_or>(self, other, out); }
inline Tensor bitwise_xor(const Tensor& self, const Tensor& other, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::bitwise_xor>(self, other, out); }
inline Tensor where(const Tensor& condition, const Tensor& self, const Tensor& other, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::where>(condition, self, other, out); }
inline Tensor lerp(const Tensor& self, const Tensor& end, const Tensor& weight, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::lerp>(self, end, weight, out); }
inline Tensor clamp(const Tensor& self, const std::optional<Tensor>& min = std::nullopt, const std::optional<Tensor>& max = std::nullopt, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::clamp>(self, min, max, out); }
inline Tensor masked_fill(const Tensor& self, const Tensor& mask, const Tensor& value, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::masked_fill>(self, mask, value, out); }

}  // namespace strata
