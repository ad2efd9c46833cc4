// Complex-number ops (decl/complex.def).
#pragma once

#include "ops/op_list.h"

namespace strata {

inline Tensor real(const Tensor& self) { return call<OpId::real>(self); }
inline Tensor imag(const Tensor& self) { return call<OpId::imag>(self); }
inline Tensor view_as_real(const Tensor& self) { return call<OpId::view_as_real>(self); }
inline Tensor view_as_complex(const Tensor& self) { return call<OpId::view_as_complex>(self); }
inline Tensor conj_physical(const Tensor& self) { return call<OpId::conj_physical>(self); }
inline Tensor conj(const Tensor& self) { return call<OpId::conj>(self); }
inline Tensor resolve_conj(const Tensor& self) { return call<OpId::resolve_conj>(self); }
inline Tensor angle(const Tensor& self) { return call<OpId::angle>(self); }
inline Tensor sgn(const Tensor& self) { return call<OpId::sgn>(self); }
inline Tensor complex(const Tensor& real, const Tensor& imag) { return call<OpId::complex>(real, imag); }
inline Tensor polar(const Tensor& abs, const Tensor& angle) { return call<OpId::polar>(abs, angle); }

}  // namespace strata
