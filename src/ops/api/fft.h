// FFT primitives (decl/fft.def).
#pragma once

#include "ops/op_list.h"

namespace strata {

inline Tensor _fft_c2c(const Tensor& self, IntArrayRef dim, int64_t normalization, bool forward) {
  return call<OpId::_fft_c2c>(self, dim, normalization, forward);
}
inline Tensor _fft_r2c(const Tensor& self, IntArrayRef dim, int64_t normalization, bool onesided) {
  return call<OpId::_fft_r2c>(self, dim, normalization, onesided);
}
inline Tensor _fft_c2r(const Tensor& self, IntArrayRef dim, int64_t normalization, int64_t last_dim_size) {
  return call<OpId::_fft_c2r>(self, dim, normalization, last_dim_size);
}

}  // namespace strata
