// CPU inner loops of the elementwise ops in decl/math_more.def. Compiled once
// per ISA level.
#include "backends/cpu/loops.h"
#include "ops/pointwise.h"
#include "ops/pointwise_functors_more.h"

namespace strata {
namespace cpu {
inline namespace STRATA_CPU_NS {
namespace {

// Floating types only: the functors below are not meant for integers (and
// unary_kernel would instantiate them for every dtype).
template <typename Op>
void float_unary(TensorIterator& it, const Op& op) {
  visit_floating(it.common_dtype(), "op", [&]<typename T>() {
    cpu_kernel(it, [op](T a) -> T { return static_cast<T>(op(static_cast<opmath_t<T>>(a))); });
  });
}
#define STRATA_UNARY_K(name, Op) \
  void name##_kernel(TensorIterator& it, const PwArgs&) { float_unary(it, fn::Op{}); }
#define STRATA_BINARY_K(name, Op, Visit) \
  void name##_kernel(TensorIterator& it, const PwArgs&) { binary_kernel(it, fn::Op{}, Visit{}); }

STRATA_UNARY_K(acosh, Acosh)
STRATA_UNARY_K(asinh, Asinh)
STRATA_UNARY_K(atanh, Atanh)
STRATA_UNARY_K(deg2rad, Deg2Rad)
STRATA_UNARY_K(rad2deg, Rad2Deg)
STRATA_UNARY_K(frac, Frac)
STRATA_UNARY_K(sinc, Sinc)
STRATA_UNARY_K(lgamma, Lgamma)
STRATA_UNARY_K(digamma, Digamma)
// erfinv: contiguous runs through an explicit typed loop, short inputs
// included (cpu_kernel's one-run path for short inputs is left scalar by GCC
// for this functor, 5-9x slower per element than the same loop here).
void erfinv_kernel(TensorIterator& it, const PwArgs&) {
  visit_floating(it.common_dtype(), "erfinv", [&]<typename T>() {
    parallel_for(0, it.numel(), kGrainSize, [&](int64_t b, int64_t e) {
      it.for_each_run(b, e, [&](char** p, const int64_t* st, int64_t n) {
        const fn::Erfinv op{};
        if (st[0] == sizeof(T) && st[1] == sizeof(T)) {
          T* o = reinterpret_cast<T*>(p[0]);
          const T* a = reinterpret_cast<const T*>(p[1]);
          for (int64_t i = 0; i < n; ++i) o[i] = static_cast<T>(op(static_cast<opmath_t<T>>(a[i])));
          return;
        }
        for (int64_t i = 0; i < n; ++i) {
          const T a = *reinterpret_cast<const T*>(p[1] + i * st[1]);
          *reinterpret_cast<T*>(p[0] + i * st[0]) = static_cast<T>(op(static_cast<opmath_t<T>>(a)));
        }
      });
    });
  });
}
STRATA_UNARY_K(i0, I0)
STRATA_UNARY_K(special_i1, I1)
STRATA_BINARY_K(hypot, Hypot, VisitFloat)
STRATA_BINARY_K(logaddexp, LogAddExp, VisitFloat)
STRATA_BINARY_K(logaddexp2, LogAddExp2, VisitFloat)
STRATA_BINARY_K(xlogy, Xlogy, VisitFloat)
STRATA_BINARY_K(heaviside, Heaviside, VisitAll)
STRATA_BINARY_K(copysign, Copysign, VisitFloat)

void signbit_kernel(TensorIterator& it, const PwArgs&) { unary_bool_kernel(it, fn::SignBit{}); }
void logit_kernel(TensorIterator& it, const PwArgs& a) { float_unary(it, fn::Logit{a.a}); }
void polygamma_kernel(TensorIterator& it, const PwArgs& a) {
  float_unary(it, fn::Polygamma{static_cast<int64_t>(a.a)});
}
void mvlgamma_kernel(TensorIterator& it, const PwArgs& a) {
  float_unary(it, fn::Mvlgamma{static_cast<int64_t>(a.a)});
}

template <typename Op>
void ternary_kernel(TensorIterator& it, const Op& op) {
  visit_dtype(it.common_dtype(), [&]<typename T>() {
    using O = opmath_t<T>;
    cpu_kernel(it, [op](T a, T b, T c) -> T { return static_cast<T>(op(O(a), O(b), O(c))); });
  });
}
void addcmul_kernel(TensorIterator& it, const PwArgs& a) { ternary_kernel(it, fn::Addcmul{a.a}); }
void addcdiv_kernel(TensorIterator& it, const PwArgs& a) {
  visit_floating(it.common_dtype(), "addcdiv", [&]<typename T>() {
    using O = opmath_t<T>;
    const fn::Addcdiv op{a.a};
    cpu_kernel(it, [op](T x, T b, T c) -> T { return static_cast<T>(op(O(x), O(b), O(c))); });
  });
}

}  // namespace
}  // namespace STRATA_CPU_NS
}  // namespace cpu

#define STRATA_REG(name)                          \
  STRATA_DECLARE_STUB(name##_stub, PointwiseFn); \
  STRATA_REGISTER_CPU_KERNEL(name##_stub, cpu::name##_kernel);
STRATA_REG(acosh)
STRATA_REG(asinh)
STRATA_REG(atanh)
STRATA_REG(deg2rad)
STRATA_REG(rad2deg)
STRATA_REG(frac)
STRATA_REG(sinc)
STRATA_REG(lgamma)
STRATA_REG(digamma)
STRATA_REG(erfinv)
STRATA_REG(i0)
STRATA_REG(special_i1)
STRATA_REG(hypot)
STRATA_REG(logaddexp)
STRATA_REG(logaddexp2)
STRATA_REG(xlogy)
STRATA_REG(heaviside)
STRATA_REG(copysign)
STRATA_REG(signbit)
STRATA_REG(logit)
STRATA_REG(polygamma)
STRATA_REG(mvlgamma)
STRATA_REG(addcmul)
STRATA_REG(addcdiv)

}  // namespace strata
