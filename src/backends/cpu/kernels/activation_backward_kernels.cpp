// CPU loops of the fused activation backwards (ops/activation_backward.cpp).
// Compiled once per ISA level; one binary pass (grad, x) -> grad_input with the
// math of ops/activation_backward_functors.h in opmath. Only threshold_backward
// instantiates non-float types.
#include "backends/cpu/kernels/gelu_math.h"
#include "backends/cpu/loops.h"
#include "ops/activation_backward_functors.h"
#include "ops/pointwise.h"

namespace strata {
namespace cpu {
inline namespace STRATA_CPU_NS {
namespace {

void threshold_backward_kernel(TensorIterator& it, const PwArgs& a) {
  binary_kernel(it, fn::ThresholdBackward{a.a}, VisitAll{});
}
void gelu_backward_kernel(TensorIterator& it, const PwArgs& a) {
  if (a.a != 0) binary_kernel(it, fn::GeluTanhBackward{}, VisitFloat{});
  else {
#if defined(__AVX512F__)
    // float32 and 16-bit floats: the vectorised Phi of the forward (gelu_math.h), one pass instead of libmvec's erf
    // and exp.
    ScalarType t = it.common_dtype();
    if (t != ScalarType::Float64) {
      visit_floating(t, "gelu_backward", [&]<typename T>() {
        if constexpr (!std::is_same_v<T, double>) {
          cpu_kernel(it, [](T g, T x) -> T {
            return static_cast<T>(gelu_math::GeluErfBackwardF32{}(static_cast<float>(g), static_cast<float>(x)));
          });
        }
      });
      return;
    }
#endif
    binary_kernel(it, fn::GeluErfBackward{}, VisitFloat{});
  }
}
void silu_backward_kernel(TensorIterator& it, const PwArgs&) { binary_kernel(it, fn::SiluBackward{}, VisitFloat{}); }
void sigmoid_backward_kernel(TensorIterator& it, const PwArgs&) {
  binary_kernel(it, fn::SigmoidBackward{}, VisitFloat{});
}
void tanh_backward_kernel(TensorIterator& it, const PwArgs&) { binary_kernel(it, fn::TanhBackward{}, VisitFloat{}); }

}  // namespace
}  // namespace STRATA_CPU_NS
}  // namespace cpu

#define STRATA_ACT_BW_REG(name)                           \
  STRATA_DECLARE_STUB(act_##name##_stub, PointwiseFn); \
  STRATA_REGISTER_CPU_KERNEL(act_##name##_stub, cpu::name##_kernel);
STRATA_ACT_BW_REG(threshold_backward)
STRATA_ACT_BW_REG(gelu_backward)
STRATA_ACT_BW_REG(silu_backward)
STRATA_ACT_BW_REG(sigmoid_backward)
STRATA_ACT_BW_REG(tanh_backward)

}  // namespace strata
