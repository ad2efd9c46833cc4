#pragma once

#include "ops/op_list.h"

namespace strata {

using OptTensor_ = std::optional<Tensor>;

inline Tensor gcd(const Tensor& a, const Tensor& b, const OptTensor_& out = std::nullopt) { return call<OpId::gcd>(a, b, out); }
inline Tensor lcm(const Tensor& a, const Tensor& b, const OptTensor_& out = std::nullopt) { return call<OpId::lcm>(a, b, out); }
inline Tensor bitwise_left_shift(const Tensor& a, const Tensor& b, const OptTensor_& out = std::nullopt) {
  return call<OpId::bitwise_left_shift>(a, b, out);
}
inline Tensor bitwise_right_shift(const Tensor& a, const Tensor& b, const OptTensor_& out = std::nullopt) {
  return call<OpId::bitwise_right_shift>(a, b, out);
}
inline Tensor fmax(const Tensor& a, const Tensor& b, const OptTensor_& out = std::nullopt) { return call<OpId::fmax>(a, b, out); }
inline Tensor fmin(const Tensor& a, const Tensor& b, const OptTensor_& out = std::nullopt) { return call<OpId::fmin>(a, b, out); }
inline Tensor nextafter(const Tensor& a, const Tensor& b, const OptTensor_& out = std::nullopt) {
  return call<OpId::nextafter>(a, b, out);
}
inline Tensor ldexp(const Tensor& self, const Tensor& other) { return call<OpId::ldexp>(self, other); }
inline std::tuple<Tensor, Tensor> frexp(const Tensor& self) { return call<OpId::frexp>(self); }
inline Tensor repeat_interleave(const Tensor& self, const Tensor& repeats, OptInt dim = std::nullopt,
                                OptInt output_size = std::nullopt) {
  return call<OpId::repeat_interleave>(self, repeats, dim, output_size);
}
inline Tensor repeat_interleave(const Tensor& repeats, OptInt output_size = std::nullopt) {
  return call<OpId::repeat_interleave_idx>(repeats, output_size);
}
inline Tensor renorm(const Tensor& self, const Scalar& p, int64_t dim, const Scalar& maxnorm) {
  return call<OpId::renorm>(self, p, dim, maxnorm);
}
inline Tensor slice_scatter(const Tensor& self, const Tensor& src, int64_t dim = 0, OptInt start = std::nullopt,
                            OptInt end = std::nullopt, int64_t step = 1) {
  return call<OpId::slice_scatter>(self, src, dim, start, end, step);
}
inline Tensor select_scatter(const Tensor& self, const Tensor& src, int64_t dim, int64_t index) {
  return call<OpId::select_scatter>(self, src, dim, index);
}
inline Tensor diagonal_scatter(const Tensor& self, const Tensor& src, int64_t offset = 0, int64_t dim1 = 0,
                               int64_t dim2 = 1) {
  return call<OpId::diagonal_scatter>(self, src, offset, dim1, dim2);
}
inline Tensor as_strided_scatter(const Tensor& self, const Tensor& src, IntArrayRef size, IntArrayRef stride,
                                 OptInt storage_offset = std::nullopt) {
  return call<OpId::as_strided_scatter>(self, src, size, stride, storage_offset);
}

}  // namespace strata
