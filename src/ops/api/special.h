// C++ API of the ops in decl/special.def. Include where needed.
#pragma once

#include "ops/op_list.h"

namespace strata {

inline Tensor special_airy_ai(const Tensor& self) { return call<OpId::special_airy_ai>(self, std::optional<Tensor>()); }
inline Tensor special_bessel_j0(const Tensor& self) { return call<OpId::special_bessel_j0>(self, std::optional<Tensor>()); }
inline Tensor special_bessel_j1(const Tensor& self) { return call<OpId::special_bessel_j1>(self, std::optional<Tensor>()); }
inline Tensor special_bessel_y0(const Tensor& self) { return call<OpId::special_bessel_y0>(self, std::optional<Tensor>()); }
inline Tensor special_bessel_y1(const Tensor& self) { return call<OpId::special_bessel_y1>(self, std::optional<Tensor>()); }
inline Tensor special_modified_bessel_i0(const Tensor& self) { return call<OpId::special_modified_bessel_i0>(self, std::optional<Tensor>()); }
inline Tensor special_modified_bessel_i1(const Tensor& self) { return call<OpId::special_modified_bessel_i1>(self, std::optional<Tensor>()); }
inline Tensor special_modified_bessel_k0(const Tensor& self) { return call<OpId::special_modified_bessel_k0>(self, std::optional<Tensor>()); }
inline Tensor special_modified_bessel_k1(const Tensor& self) { return call<OpId::special_modified_bessel_k1>(self, std::optional<Tensor>()); }
inline Tensor special_scaled_modified_bessel_k0(const Tensor& self) { return call<OpId::special_scaled_modified_bessel_k0>(self, std::optional<Tensor>()); }
inline Tensor special_scaled_modified_bessel_k1(const Tensor& self) { return call<OpId::special_scaled_modified_bessel_k1>(self, std::optional<Tensor>()); }
inline Tensor special_spherical_bessel_j0(const Tensor& self) { return call<OpId::special_spherical_bessel_j0>(self, std::optional<Tensor>()); }
inline Tensor special_entr(const Tensor& self) { return call<OpId::special_entr>(self, std::optional<Tensor>()); }
inline Tensor special_erfcx(const Tensor& self) { return call<OpId::special_erfcx>(self, std::optional<Tensor>()); }
inline Tensor special_i0e(const Tensor& self) { return call<OpId::special_i0e>(self, std::optional<Tensor>()); }
inline Tensor special_i1e(const Tensor& self) { return call<OpId::special_i1e>(self, std::optional<Tensor>()); }
inline Tensor special_log_ndtr(const Tensor& self) { return call<OpId::special_log_ndtr>(self, std::optional<Tensor>()); }
inline Tensor special_ndtr(const Tensor& self) { return call<OpId::special_ndtr>(self, std::optional<Tensor>()); }
inline Tensor special_ndtri(const Tensor& self) { return call<OpId::special_ndtri>(self, std::optional<Tensor>()); }
inline Tensor special_xlog1py(const Tensor& self, const Tensor& other) { return call<OpId::special_xlog1py>(self, other, std::optional<Tensor>()); }
inline Tensor special_zeta(const Tensor& self, const Tensor& other) { return call<OpId::special_zeta>(self, other, std::optional<Tensor>()); }
inline Tensor igamma(const Tensor& self, const Tensor& other) { return call<OpId::igamma>(self, other, std::optional<Tensor>()); }
inline Tensor igammac(const Tensor& self, const Tensor& other) { return call<OpId::igammac>(self, other, std::optional<Tensor>()); }
inline Tensor special_chebyshev_polynomial_t(const Tensor& self, const Tensor& other) { return call<OpId::special_chebyshev_polynomial_t>(self, other, std::optional<Tensor>()); }
inline Tensor special_chebyshev_polynomial_u(const Tensor& self, const Tensor& other) { return call<OpId::special_chebyshev_polynomial_u>(self, other, std::optional<Tensor>()); }
inline Tensor special_chebyshev_polynomial_v(const Tensor& self, const Tensor& other) { return call<OpId::special_chebyshev_polynomial_v>(self, other, std::optional<Tensor>()); }
inline Tensor special_chebyshev_polynomial_w(const Tensor& self, const Tensor& other) { return call<OpId::special_chebyshev_polynomial_w>(self, other, std::optional<Tensor>()); }
inline Tensor special_shifted_chebyshev_polynomial_t(const Tensor& self, const Tensor& other) { return call<OpId::special_shifted_chebyshev_polynomial_t>(self, other, std::optional<Tensor>()); }
inline Tensor special_shifted_chebyshev_polynomial_u(const Tensor& self, const Tensor& other) { return call<OpId::special_shifted_chebyshev_polynomial_u>(self, other, std::optional<Tensor>()); }
inline Tensor special_shifted_chebyshev_polynomial_v(const Tensor& self, const Tensor& other) { return call<OpId::special_shifted_chebyshev_polynomial_v>(self, other, std::optional<Tensor>()); }
inline Tensor special_shifted_chebyshev_polynomial_w(const Tensor& self, const Tensor& other) { return call<OpId::special_shifted_chebyshev_polynomial_w>(self, other, std::optional<Tensor>()); }
inline Tensor special_hermite_polynomial_h(const Tensor& self, const Tensor& other) { return call<OpId::special_hermite_polynomial_h>(self, other, std::optional<Tensor>()); }
inline Tensor special_hermite_polynomial_he(const Tensor& self, const Tensor& other) { return call<OpId::special_hermite_polynomial_he>(self, other, std::optional<Tensor>()); }
inline Tensor special_laguerre_polynomial_l(const Tensor& self, const Tensor& other) { return call<OpId::special_laguerre_polynomial_l>(self, other, std::optional<Tensor>()); }
inline Tensor special_legendre_polynomial_p(const Tensor& self, const Tensor& other) { return call<OpId::special_legendre_polynomial_p>(self, other, std::optional<Tensor>()); }
inline Tensor standard_gamma_grad(const Tensor& self, const Tensor& output) { return call<OpId::_standard_gamma_grad>(self, output); }

}  // namespace strata
