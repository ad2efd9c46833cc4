// CPU loops of the activation functions (ops/nn_activation.cpp). Compiled once
// per ISA level. Only float types are instantiated except for relu.
#include "backends/cpu/kernels/gelu_math.h"
#include "backends/cpu/loops.h"
#include "ops/nn_functors.h"
#include "ops/pointwise.h"

namespace strata {
namespace cpu {
inline namespace STRATA_CPU_NS {
namespace {

// Float-only ops instantiate their loops for the four float types only.
template <typename Op>
void float_unary(TensorIterator& it, const Op& op) {
  visit_floating(it.common_dtype(), "activation", [&]<typename T>() {
    cpu_kernel(it, [op](T a) -> T { return static_cast<T>(op(static_cast<opmath_t<T>>(a))); });
  });
}

#if defined(__AVX512F__)
// float32 gelu (erf form): contiguous runs 16 at a time through gelu_math::gelu_erf16 (masked tail), other strides
// element by element with the scalar form of the same math.
void gelu_erf_f32_avx512(TensorIterator& it) {
  parallel_for(0, it.numel(), kGrainSize, [&](int64_t b, int64_t e) {
    it.for_each_run(b, e, [&](char** p, const int64_t* st, int64_t n) {
      if (st[0] == sizeof(float) && st[1] == sizeof(float)) {
        float* out = reinterpret_cast<float*>(p[0]);
        const float* in = reinterpret_cast<const float*>(p[1]);
        int64_t i = 0;
        for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, gelu_math::gelu_erf16(_mm512_loadu_ps(in + i)));
        if (i < n) {
          const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
          _mm512_mask_storeu_ps(out + i, m, gelu_math::gelu_erf16(_mm512_maskz_loadu_ps(m, in + i)));
        }
        return;
      }
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<float*>(p[0] + i * st[0]) =
            gelu_math::GeluErfF32{}(*reinterpret_cast<const float*>(p[1] + i * st[1]));
    });
  });
}
#endif

void relu_kernel(TensorIterator& it, const PwArgs&) { unary_kernel(it, fn::Relu{}, false); }
void gelu_kernel(TensorIterator& it, const PwArgs& a) {
  if (a.a != 0) float_unary(it, fn::GeluTanh{});
  else {
#if defined(__AVX512F__)
    ScalarType t = it.common_dtype();
    if (t == ScalarType::Float32) return gelu_erf_f32_avx512(it);
    if (t != ScalarType::Float64) {  // 16-bit floats computed in float
      visit_floating(t, "gelu", [&]<typename T>() {
        if constexpr (!std::is_same_v<T, double>) {
          cpu_kernel(it, [](T a) -> T { return static_cast<T>(gelu_math::GeluErfF32{}(static_cast<float>(a))); });
        }
      });
      return;
    }
#endif
    float_unary(it, fn::GeluErf{});
  }
}
void silu_kernel(TensorIterator& it, const PwArgs&) { float_unary(it, fn::Silu{}); }
void mish_kernel(TensorIterator& it, const PwArgs&) { float_unary(it, fn::Mish{}); }
void hardsigmoid_kernel(TensorIterator& it, const PwArgs&) { float_unary(it, fn::Hardsigmoid{}); }
void hardswish_kernel(TensorIterator& it, const PwArgs&) { float_unary(it, fn::Hardswish{}); }
void log_sigmoid_kernel(TensorIterator& it, const PwArgs&) { float_unary(it, fn::LogSigmoid{}); }
void softplus_kernel(TensorIterator& it, const PwArgs& a) { float_unary(it, fn::Softplus{a.a, a.b}); }
void leaky_relu_kernel(TensorIterator& it, const PwArgs& a) { float_unary(it, fn::LeakyRelu{a.a}); }
void elu_kernel(TensorIterator& it, const PwArgs& a) { float_unary(it, fn::Elu{a.a, a.b, a.c}); }
void hardtanh_kernel(TensorIterator& it, const PwArgs& a) { float_unary(it, fn::Hardtanh{a.a, a.b}); }

// Losses that are elementwise before their reduction.
void bce_logits_kernel(TensorIterator& it, const PwArgs&) {
  visit_floating(it.common_dtype(), "binary_cross_entropy_with_logits", [&]<typename T>() {
    using O = opmath_t<T>;
    cpu_kernel(it, [](T x, T t, T pw) -> T {
      return static_cast<T>(fn::BceWithLogits{}(static_cast<O>(x), static_cast<O>(t), static_cast<O>(pw)));
    });
  });
}
void bce_kernel(TensorIterator& it, const PwArgs&) {
  visit_floating(it.common_dtype(), "binary_cross_entropy", [&]<typename T>() {
    using O = opmath_t<T>;
    cpu_kernel(it, [](T x, T t) -> T { return static_cast<T>(fn::Bce{}(static_cast<O>(x), static_cast<O>(t))); });
  });
}

}  // namespace
}  // namespace STRATA_CPU_NS
}  // namespace cpu

#define STRATA_NN_REG(name)                           \
  STRATA_DECLARE_STUB(nn_##name##_stub, PointwiseFn); \
  STRATA_REGISTER_CPU_KERNEL(nn_##name##_stub, cpu::name##_kernel);
STRATA_NN_REG(relu)
STRATA_NN_REG(gelu)
STRATA_NN_REG(silu)
STRATA_NN_REG(mish)
STRATA_NN_REG(hardsigmoid)
STRATA_NN_REG(hardswish)
STRATA_NN_REG(log_sigmoid)
STRATA_NN_REG(softplus)
STRATA_NN_REG(leaky_relu)
STRATA_NN_REG(elu)
STRATA_NN_REG(hardtanh)
STRATA_NN_REG(bce_logits)
STRATA_NN_REG(bce)

}  // namespace strata
