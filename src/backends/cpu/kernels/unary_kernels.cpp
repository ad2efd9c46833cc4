// CPU inner loops of the unary elementwise ops. Compiled once per ISA level.
#include "backends/cpu/loops.h"
#include "ops/pointwise.h"
#include "ops/pointwise_functors.h"

namespace strata {
namespace cpu {
inline namespace STRATA_CPU_NS {
namespace {

using fn_t = void (*)(TensorIterator&, const PwArgs&);

#define STRATA_UNARY_K(name, Op, float_only)                                             \
  void name##_kernel(TensorIterator& it, const PwArgs&) { unary_kernel(it, fn::Op{}, float_only); }
#define STRATA_UNARY_KC(name, Op, float_only)                                            \
  void name##_kernel(TensorIterator& it, const PwArgs&) { unary_kernel_complex(it, fn::Op{}, float_only); }
#define STRATA_UNARY_BOOL_K(name, Op) \
  void name##_kernel(TensorIterator& it, const PwArgs&) { unary_bool_kernel(it, fn::Op{}, VisitEveryDtype{}); }
#define STRATA_BINARY_K(name, Op, Visit) \
  void name##_kernel(TensorIterator& it, const PwArgs&) { binary_kernel(it, fn::Op{}, Visit{}); }
#define STRATA_BINARY_BOOL_K(name, Op) \
  void name##_kernel(TensorIterator& it, const PwArgs&) { binary_bool_kernel(it, fn::Op{}); }

STRATA_UNARY_KC(exp, Exp, true)
STRATA_UNARY_KC(exp2, Exp2, true)
STRATA_UNARY_KC(expm1, Expm1, true)
STRATA_UNARY_KC(log, Log, true)
STRATA_UNARY_KC(log2, Log2, true)
STRATA_UNARY_KC(log10, Log10, true)
STRATA_UNARY_KC(log1p, Log1p, true)
STRATA_UNARY_KC(sqrt, Sqrt, true)
STRATA_UNARY_KC(rsqrt, Rsqrt, true)
STRATA_UNARY_KC(reciprocal, Reciprocal, true)
STRATA_UNARY_KC(sin, Sin, true)
STRATA_UNARY_KC(cos, Cos, true)
STRATA_UNARY_KC(tan, Tan, true)
STRATA_UNARY_KC(tanh, Tanh, true)
STRATA_UNARY_KC(asin, Asin, true)
STRATA_UNARY_KC(acos, Acos, true)
STRATA_UNARY_KC(atan, Atan, true)
STRATA_UNARY_KC(sinh, Sinh, true)
STRATA_UNARY_KC(cosh, Cosh, true)
STRATA_UNARY_KC(sigmoid, Sigmoid, true)
STRATA_UNARY_K(erf, Erf, true)
STRATA_UNARY_K(erfc, Erfc, true)
STRATA_UNARY_KC(neg, Neg, false)
STRATA_UNARY_K(sign, Sign, false)
STRATA_UNARY_KC(square, Square, false)
STRATA_UNARY_K(floor, Floor, false)
STRATA_UNARY_K(ceil, Ceil, false)
STRATA_UNARY_K(trunc, Trunc, false)
STRATA_UNARY_K(bitwise_not, BitwiseNot, false)
// isnan also reads the float8 dtypes (Note [Float8] in core/dtype.h).
struct VisitEveryDtypeAndFloat8 {
  template <typename F>
  decltype(auto) operator()(ScalarType t, F&& f) const {
    return visit_all_dtypes_and_float8(t, std::forward<F>(f));
  }
};
void isnan_kernel(TensorIterator& it, const PwArgs&) { unary_bool_kernel(it, fn::IsNan{}, VisitEveryDtypeAndFloat8{}); }
STRATA_UNARY_BOOL_K(isinf, IsInf)
STRATA_UNARY_BOOL_K(isfinite, IsFinite)
STRATA_UNARY_BOOL_K(logical_not, LogicalNot)

// abs of a complex input writes its real dtype (see abs_impl).
void abs_kernel(TensorIterator& it, const PwArgs&) {
  ScalarType t = it.input(0).dtype();
  if (t == ScalarType::ComplexFloat)
    cpu_kernel(it, [](std::complex<float> a) -> float { return std::abs(a); });
  else if (t == ScalarType::ComplexDouble)
    cpu_kernel(it, [](std::complex<double> a) -> double { return std::abs(a); });
  else if (is_float8_type(t))  // the signed float8 formats: |x| rounds back exactly
    visit_all_dtypes_and_float8(t, [&]<typename T>() {
      if constexpr (is_float8_v<T>) cpu_kernel(it, [](T a) -> T { return T(std::fabs(static_cast<float>(a))); });
    });
  else
    unary_kernel(it, fn::Abs{}, false);
}
void round_kernel(TensorIterator& it, const PwArgs& a) {
  if (a.a == 0) unary_kernel(it, fn::Round{}, false);
  else unary_kernel(it, fn::RoundDecimals{std::pow(10.0, a.a)}, false);
}
void nan_to_num_kernel(TensorIterator& it, const PwArgs& a) {
  unary_kernel(it, fn::NanToNum{a.a, a.b, a.c}, false);
}

}  // namespace
}  // namespace STRATA_CPU_NS
}  // namespace cpu

#define STRATA_REG(name)                                 \
  STRATA_DECLARE_STUB(name##_stub, PointwiseFn);        \
  STRATA_REGISTER_CPU_KERNEL(name##_stub, cpu::name##_kernel);
STRATA_REG(exp)
STRATA_REG(exp2)
STRATA_REG(expm1)
STRATA_REG(log)
STRATA_REG(log2)
STRATA_REG(log10)
STRATA_REG(log1p)
STRATA_REG(sqrt)
STRATA_REG(rsqrt)
STRATA_REG(reciprocal)
STRATA_REG(sin)
STRATA_REG(cos)
STRATA_REG(tan)
STRATA_REG(tanh)
STRATA_REG(asin)
STRATA_REG(acos)
STRATA_REG(atan)
STRATA_REG(sinh)
STRATA_REG(cosh)
STRATA_REG(sigmoid)
STRATA_REG(erf)
STRATA_REG(erfc)
STRATA_REG(neg)
STRATA_REG(abs)
STRATA_REG(sign)
STRATA_REG(square)
STRATA_REG(floor)
STRATA_REG(ceil)
STRATA_REG(trunc)
STRATA_REG(bitwise_not)
STRATA_REG(isnan)
STRATA_REG(isinf)
STRATA_REG(isfinite)
STRATA_REG(logical_not)
STRATA_REG(round)
STRATA_REG(nan_to_num)

}  // namespace strata
