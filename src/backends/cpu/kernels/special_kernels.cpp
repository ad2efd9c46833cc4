// CPU inner loops of the ops in decl/special.def. Compiled once per ISA level.
#include "backends/cpu/loops.h"
#include "ops/pointwise.h"
#include "ops/special_functors.h"

namespace strata {
namespace cpu {
inline namespace STRATA_CPU_NS {
namespace {

// The element lambda is forced inline: in this file (many large functors) GCC
// otherwise leaves it as a call, and the contiguous loop then cannot vectorize
// even a branch-free functor (ndtri float32: 20 ms -> 2.5 ms per 1e6 on AVX-512).
template <typename Op>
void float_unary(TensorIterator& it, const Op& op) {
  visit_floating(it.common_dtype(), "op", [&]<typename T>() {
    cpu_kernel(it, [op](T a) __attribute__((always_inline)) -> T {
      return static_cast<T>(op(static_cast<opmath_t<T>>(a)));
    });
  });
}
#define STRATA_UNARY_K(name, Op) \
  void name##_kernel(TensorIterator& it, const PwArgs&) { float_unary(it, fn::Op{}); }
#define STRATA_BINARY_K(name, Op) \
  void name##_kernel(TensorIterator& it, const PwArgs&) { binary_kernel(it, fn::Op{}, VisitFloat{}); }

STRATA_UNARY_K(special_airy_ai, AiryAi)
STRATA_UNARY_K(special_bessel_j0, BesselJ0)
STRATA_UNARY_K(special_bessel_j1, BesselJ1)
STRATA_UNARY_K(special_bessel_y0, BesselY0)
STRATA_UNARY_K(special_bessel_y1, BesselY1)
STRATA_UNARY_K(special_modified_bessel_k0, ModifiedBesselK0)
STRATA_UNARY_K(special_modified_bessel_k1, ModifiedBesselK1)
STRATA_UNARY_K(special_scaled_modified_bessel_k0, ScaledModifiedBesselK0)
STRATA_UNARY_K(special_scaled_modified_bessel_k1, ScaledModifiedBesselK1)
STRATA_UNARY_K(special_spherical_bessel_j0, SphericalBesselJ0)
STRATA_UNARY_K(special_entr, Entr)
STRATA_UNARY_K(special_erfcx, Erfcx)
STRATA_UNARY_K(special_i0e, I0e)
STRATA_UNARY_K(special_i1e, I1e)
STRATA_UNARY_K(special_log_ndtr, LogNdtr)
STRATA_UNARY_K(special_ndtr, Ndtr)
STRATA_UNARY_K(special_ndtri, Ndtri)
STRATA_BINARY_K(special_xlog1py, Xlog1py)
STRATA_BINARY_K(special_zeta, Zeta)
STRATA_BINARY_K(igamma, Igamma)
STRATA_BINARY_K(igammac, Igammac)
STRATA_BINARY_K(special_chebyshev_polynomial_t, ChebyshevT)
STRATA_BINARY_K(special_chebyshev_polynomial_u, ChebyshevU)
STRATA_BINARY_K(special_chebyshev_polynomial_v, ChebyshevV)
STRATA_BINARY_K(special_chebyshev_polynomial_w, ChebyshevW)
STRATA_BINARY_K(special_shifted_chebyshev_polynomial_t, ShiftedChebyshevT)
STRATA_BINARY_K(special_shifted_chebyshev_polynomial_u, ShiftedChebyshevU)
STRATA_BINARY_K(special_shifted_chebyshev_polynomial_v, ShiftedChebyshevV)
STRATA_BINARY_K(special_shifted_chebyshev_polynomial_w, ShiftedChebyshevW)
STRATA_BINARY_K(special_hermite_polynomial_h, HermiteH)
STRATA_BINARY_K(special_hermite_polynomial_he, HermiteHe)
STRATA_BINARY_K(special_laguerre_polynomial_l, LaguerreL)
STRATA_BINARY_K(special_legendre_polynomial_p, LegendreP)
STRATA_BINARY_K(_standard_gamma_grad, StandardGammaGrad)

}  // namespace
}  // namespace STRATA_CPU_NS
}  // namespace cpu

#define STRATA_REG(name)                          \
  STRATA_DECLARE_STUB(name##_stub, PointwiseFn); \
  STRATA_REGISTER_CPU_KERNEL(name##_stub, cpu::name##_kernel);
STRATA_REG(special_airy_ai)
STRATA_REG(special_bessel_j0)
STRATA_REG(special_bessel_j1)
STRATA_REG(special_bessel_y0)
STRATA_REG(special_bessel_y1)
STRATA_REG(special_modified_bessel_k0)
STRATA_REG(special_modified_bessel_k1)
STRATA_REG(special_scaled_modified_bessel_k0)
STRATA_REG(special_scaled_modified_bessel_k1)
STRATA_REG(special_spherical_bessel_j0)
STRATA_REG(special_entr)
STRATA_REG(special_erfcx)
STRATA_REG(special_i0e)
STRATA_REG(special_i1e)
STRATA_REG(special_log_ndtr)
STRATA_REG(special_ndtr)
STRATA_REG(special_ndtri)
STRATA_REG(special_xlog1py)
STRATA_REG(special_zeta)
STRATA_REG(igamma)
STRATA_REG(igammac)
STRATA_REG(special_chebyshev_polynomial_t)
STRATA_REG(special_chebyshev_polynomial_u)
STRATA_REG(special_chebyshev_polynomial_v)
STRATA_REG(special_chebyshev_polynomial_w)
STRATA_REG(special_shifted_chebyshev_polynomial_t)
STRATA_REG(special_shifted_chebyshev_polynomial_u)
STRATA_REG(special_shifted_chebyshev_polynomial_v)
STRATA_REG(special_shifted_chebyshev_polynomial_w)
STRATA_REG(special_hermite_polynomial_h)
STRATA_REG(special_hermite_polynomial_he)
STRATA_REG(special_laguerre_polynomial_l)
STRATA_REG(special_legendre_polynomial_p)
STRATA_REG(_standard_gamma_grad)

}  // namespace strata
