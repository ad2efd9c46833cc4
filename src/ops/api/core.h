#pragma once

#include "ops/op_list.h"

namespace strata {

inline Tensor copy_(const Tensor& self, const Tensor& src, bool non_blocking = false) {
  return call<OpId::copy_>(self, src, non_blocking);
}
inline Tensor to_dtype(const Tensor& self, ScalarType dtype) {
  if (self.dtype() == dtype) return self;
  return call<OpId::_to_copy>(self, OptDType(dtype), OptDevice());
}
inline Tensor to_device(const Tensor& self, Device device) {
  if (self.device() == device) return self;
  return call<OpId::_to_copy>(self, OptDType(), OptDevice(device));
}
inline Tensor clone(const Tensor& self) { return call<OpId::clone>(self); }
inline Tensor contiguous(const Tensor& self) { return call<OpId::contiguous>(self); }
inline Tensor fill_(const Tensor& self, const Scalar& v) { return call<OpId::fill_>(self, v); }
inline Tensor zero_(const Tensor& self) { return call<OpId::zero_>(self); }

// True if any element of a tensor is nonzero (a sync point on devices).
bool any_nonzero(const Tensor& t);

}  // namespace strata
