// Device-generic implementations of the ops in decl/special.def: dtype rules
// (integer inputs compute in the default float, as in torch) and the
// per-device stubs (kernels in backends/cpu/kernels/special_kernels.cpp);
// registered for CPU and Meta. Also the gamma sampler behind
// torch.distributions' Gamma, Beta and Dirichlet.
#include <cmath>
#include <numbers>

#include "ops/api/special.h"
#include "ops/creation_common.h"
#include "ops/op_list.h"
#include "ops/ops.h"
#include "ops/pointwise.h"

namespace strata {

#define STRATA_SPECIAL_STUBS(X)                                                                                       \
  X(special_airy_ai) X(special_bessel_j0) X(special_bessel_j1) X(special_bessel_y0) X(special_bessel_y1)             \
  X(special_modified_bessel_k0) X(special_modified_bessel_k1) X(special_scaled_modified_bessel_k0)                    \
  X(special_scaled_modified_bessel_k1) X(special_spherical_bessel_j0) X(special_entr) X(special_erfcx)                \
  X(special_i0e) X(special_i1e) X(special_log_ndtr) X(special_ndtr) X(special_ndtri) X(special_xlog1py)              \
  X(special_zeta) X(igamma) X(igammac) X(special_chebyshev_polynomial_t) X(special_chebyshev_polynomial_u)           \
  X(special_chebyshev_polynomial_v) X(special_chebyshev_polynomial_w) X(special_shifted_chebyshev_polynomial_t)      \
  X(special_shifted_chebyshev_polynomial_u) X(special_shifted_chebyshev_polynomial_v)                                \
  X(special_shifted_chebyshev_polynomial_w) X(special_hermite_polynomial_h) X(special_hermite_polynomial_he)        \
  X(special_laguerre_polynomial_l) X(special_legendre_polynomial_p) X(_standard_gamma_grad)
#define STRATA_SPECIAL_DEFINE_STUB(name) STRATA_DEFINE_STUB(name##_stub, PointwiseFn);
STRATA_SPECIAL_STUBS(STRATA_SPECIAL_DEFINE_STUB)
#undef STRATA_SPECIAL_DEFINE_STUB
// modified_bessel_i0/i1 are i0 and i1 under torch.special's names (ops/math_more.cpp).
STRATA_DECLARE_STUB(i0_stub, PointwiseFn);
STRATA_DECLARE_STUB(special_i1_stub, PointwiseFn);

namespace {

using OptT = std::optional<Tensor>;

#define STRATA_SPECIAL_UNARY(name, stub)                                \
  Tensor name##_impl(const Tensor& self, const OptT& out) {             \
    return run_pointwise(#name, stub, PwRule::IntToFloat, {self}, out);  \
  }                                                                      \
  STRATA_IMPL_CPU_META(name, name##_impl);
STRATA_SPECIAL_UNARY(special_airy_ai, special_airy_ai_stub)
STRATA_SPECIAL_UNARY(special_bessel_j0, special_bessel_j0_stub)
STRATA_SPECIAL_UNARY(special_bessel_j1, special_bessel_j1_stub)
STRATA_SPECIAL_UNARY(special_bessel_y0, special_bessel_y0_stub)
STRATA_SPECIAL_UNARY(special_bessel_y1, special_bessel_y1_stub)
STRATA_SPECIAL_UNARY(special_modified_bessel_i0, i0_stub)
STRATA_SPECIAL_UNARY(special_modified_bessel_i1, special_i1_stub)
STRATA_SPECIAL_UNARY(special_modified_bessel_k0, special_modified_bessel_k0_stub)
STRATA_SPECIAL_UNARY(special_modified_bessel_k1, special_modified_bessel_k1_stub)
STRATA_SPECIAL_UNARY(special_scaled_modified_bessel_k0, special_scaled_modified_bessel_k0_stub)
STRATA_SPECIAL_UNARY(special_scaled_modified_bessel_k1, special_scaled_modified_bessel_k1_stub)
STRATA_SPECIAL_UNARY(special_spherical_bessel_j0, special_spherical_bessel_j0_stub)
STRATA_SPECIAL_UNARY(special_entr, special_entr_stub)
STRATA_SPECIAL_UNARY(special_erfcx, special_erfcx_stub)
STRATA_SPECIAL_UNARY(special_i0e, special_i0e_stub)
STRATA_SPECIAL_UNARY(special_i1e, special_i1e_stub)
STRATA_SPECIAL_UNARY(special_log_ndtr, special_log_ndtr_stub)
STRATA_SPECIAL_UNARY(special_ndtr, special_ndtr_stub)
STRATA_SPECIAL_UNARY(special_ndtri, special_ndtri_stub)
#undef STRATA_SPECIAL_UNARY

#define STRATA_SPECIAL_BINARY(name)                                                    \
  Tensor name##_impl(const Tensor& self, const Tensor& other, const OptT& out) {       \
    return run_pointwise(#name, name##_stub, PwRule::IntToFloat, {self, other}, out);  \
  }                                                                                    \
  STRATA_IMPL_CPU_META(name, name##_impl);
STRATA_SPECIAL_BINARY(special_xlog1py)
STRATA_SPECIAL_BINARY(special_zeta)
STRATA_SPECIAL_BINARY(igamma)
STRATA_SPECIAL_BINARY(igammac)
STRATA_SPECIAL_BINARY(special_chebyshev_polynomial_t)
STRATA_SPECIAL_BINARY(special_chebyshev_polynomial_u)
STRATA_SPECIAL_BINARY(special_chebyshev_polynomial_v)
STRATA_SPECIAL_BINARY(special_chebyshev_polynomial_w)
STRATA_SPECIAL_BINARY(special_shifted_chebyshev_polynomial_t)
STRATA_SPECIAL_BINARY(special_shifted_chebyshev_polynomial_u)
STRATA_SPECIAL_BINARY(special_shifted_chebyshev_polynomial_v)
STRATA_SPECIAL_BINARY(special_shifted_chebyshev_polynomial_w)
STRATA_SPECIAL_BINARY(special_hermite_polynomial_h)
STRATA_SPECIAL_BINARY(special_hermite_polynomial_he)
STRATA_SPECIAL_BINARY(special_laguerre_polynomial_l)
STRATA_SPECIAL_BINARY(special_legendre_polynomial_p)
#undef STRATA_SPECIAL_BINARY

Tensor standard_gamma_grad_impl(const Tensor& self, const Tensor& output) {
  STRATA_CHECK(is_floating_type(self.dtype()) && self.dtype() == output.dtype(),
               "_standard_gamma_grad: expected floating point tensors of one dtype, got ", self.describe(), " and ",
               output.describe());
  return run_pointwise("_standard_gamma_grad", _standard_gamma_grad_stub, PwRule::Promote, {self, output},
                       std::nullopt);
}
STRATA_IMPL_CPU_META(_standard_gamma_grad, standard_gamma_grad_impl);

// ---- the gamma sampler ---------------------------------------------------------------
double uniform53(CPUGenerator& g) {
  return static_cast<double>(g.random64() & ((uint64_t(1) << 53) - 1)) * 0x1.0p-53;
}
double std_normal(CPUGenerator& g) {
  // Box-Muller on two fresh uniforms (1 - u keeps the log finite).
  const double u1 = uniform53(g), u2 = uniform53(g);
  return std::sqrt(-2.0 * std::log1p(-u1)) * std::cos(2.0 * std::numbers::pi * u2);
}
// Gamma(alpha, 1): Marsaglia and Tsang's squeeze for alpha >= 1; below 1 a
// Gamma(alpha + 1) sample times U^(1/alpha).
double gamma_sample(double alpha, CPUGenerator& g) {
  if (!(alpha > 0)) return alpha == 0 ? 0.0 : std::numeric_limits<double>::quiet_NaN();
  double scale = 1;
  if (alpha < 1) {
    double u;
    do u = uniform53(g);
    while (u == 0);
    scale = std::pow(u, 1 / alpha);
    alpha += 1;
  }
  const double d = alpha - 1.0 / 3.0, c = 1 / std::sqrt(9 * d);
  for (;;) {
    double z, v;
    do {
      z = std_normal(g);
      v = 1 + c * z;
    } while (v <= 0);
    v = v * v * v;
    const double u = uniform53(g);
    if (u < 1 - 0.0331 * z * z * z * z) return scale * d * v;
    if (std::log(u) < 0.5 * z * z + d * (1 - v + std::log(v))) return scale * d * v;
  }
}

Tensor standard_gamma_impl(const Tensor& alpha, OptInt gen) {
  if (!is_floating_type(alpha.dtype())) {
    throw NotImplementedError(str("\"gamma_cpu\" not implemented for '", dtype_name(alpha.dtype()), "'"));
  }
  Tensor out = empty_tensor(alpha.sizes(), alpha.dtype(), alpha.device());
  if (alpha.device().is_meta() || out.numel() == 0) return out;
  Tensor a = contiguous(to_dtype(alpha, ScalarType::Float64));
  const double* A = a.data_ptr<double>();
  visit_dtype(out.dtype(), [&]<typename T>() {
    if constexpr (is_float_v<T>) {
      T* o = out.data_ptr<T>();
      // The smallest normal number of T: a sample that underflows stays positive (as in torch).
      double tiny = std::numeric_limits<double>::min();
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, BFloat16>) tiny = std::numeric_limits<float>::min();
      if constexpr (std::is_same_v<T, Half>) tiny = 0x1.0p-14;
      GeneratorGuard g(gen);
      for (int64_t i = 0; i < out.numel(); ++i) {
        // As in torch, the result is at least the smallest normal number: a sample that
        // underflows, and a concentration <= 0 or nan (which Gamma's validation rejects).
        const double s = gamma_sample(A[i], *g);
        o[i] = static_cast<T>(s >= tiny ? s : tiny);
      }
    }
  });
  return out;
}
STRATA_IMPL_CPU_META(_standard_gamma, standard_gamma_impl);

}  // namespace
}  // namespace strata
