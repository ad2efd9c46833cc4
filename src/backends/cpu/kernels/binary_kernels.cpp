// CPU inner loops of the binary and ternary elementwise ops. Compiled once per ISA level.
#include "backends/cpu/loops.h"
#include "ops/pointwise.h"
#include "ops/pointwise_functors.h"
#include "core/hot.h"

namespace strata {
namespace cpu {
inline namespace STRATA_CPU_NS {
namespace {

using fn_t = void (*)(TensorIterator&, const PwArgs&);

#define STRATA_UNARY_K(name, Op, float_only)                                             \
  void name##_kernel(TensorIterator& it, const PwArgs&) { unary_kernel(it, fn::Op{}, float_only); }
#define STRATA_UNARY_BOOL_K(name, Op) \
  void name##_kernel(TensorIterator& it, const PwArgs&) { unary_bool_kernel(it, fn::Op{}); }
#define STRATA_BINARY_K(name, Op, Visit) \
  void name##_kernel(TensorIterator& it, const PwArgs&) { binary_kernel(it, fn::Op{}, Visit{}); }
#define STRATA_BINARY_BOOL_K(name, Op) \
  void name##_kernel(TensorIterator& it, const PwArgs&) { binary_bool_kernel(it, fn::Op{}); }

STRATA_HOT void add_kernel(TensorIterator& it, const PwArgs& a) {
  if (a.a == 1) binary_kernel(it, fn::Add{}, VisitAllAndComplex{});
  else if (a.a == -1) binary_kernel(it, fn::Sub{}, VisitAllAndComplex{});
  else binary_kernel(it, fn::AddAlpha{a.a}, VisitAllAndComplex{});
}
// The float8 dtypes (Note [Float8] in core/dtype.h) reach mul, eq, ne and where:
// they compute in float32 and round back.
struct VisitAllComplexAndFloat8 {
  template <typename F>
  decltype(auto) operator()(ScalarType t, F&& f) const {
    if (is_float8_type(t)) return visit_all_dtypes_and_float8(t, std::forward<F>(f));
    return visit_dtype_and_complex(t, std::forward<F>(f));
  }
};
struct VisitEveryDtypeAndFloat8 {
  template <typename F>
  decltype(auto) operator()(ScalarType t, F&& f) const { return visit_all_dtypes_and_float8(t, std::forward<F>(f)); }
};
STRATA_BINARY_K(mul, Mul, VisitAllComplexAndFloat8)
STRATA_BINARY_K(div_true, Div, VisitFloatAndComplex)
STRATA_BINARY_K(div_floor, DivFloor, VisitAll)
STRATA_BINARY_K(div_trunc, DivTrunc, VisitAll)
STRATA_BINARY_K(remainder, Remainder, VisitAll)
STRATA_BINARY_K(fmod, Fmod, VisitAll)
STRATA_BINARY_K(pow, Pow, VisitAllAndComplex)
STRATA_BINARY_K(maximum, Maximum, VisitAll)
STRATA_BINARY_K(minimum, Minimum, VisitAll)
STRATA_BINARY_K(clamp_min, ClampMin, VisitAll)
STRATA_BINARY_K(clamp_max, ClampMax, VisitAll)
STRATA_BINARY_K(atan2, Atan2, VisitFloat)
STRATA_BINARY_K(bitwise_and, BitwiseAnd, VisitIntegral)
STRATA_BINARY_K(bitwise_or, BitwiseOr, VisitIntegral)
STRATA_BINARY_K(bitwise_xor, BitwiseXor, VisitIntegral)
void eq_kernel(TensorIterator& it, const PwArgs&) { binary_bool_kernel(it, fn::Eq{}, VisitEveryDtypeAndFloat8{}); }
void ne_kernel(TensorIterator& it, const PwArgs&) { binary_bool_kernel(it, fn::Ne{}, VisitEveryDtypeAndFloat8{}); }
STRATA_BINARY_BOOL_K(lt, Lt)
STRATA_BINARY_BOOL_K(le, Le)
STRATA_BINARY_BOOL_K(gt, Gt)
STRATA_BINARY_BOOL_K(ge, Ge)
STRATA_BINARY_BOOL_K(logical_and, LogicalAnd)
STRATA_BINARY_BOOL_K(logical_or, LogicalOr)
STRATA_BINARY_BOOL_K(logical_xor, LogicalXor)

void where_kernel(TensorIterator& it, const PwArgs&) {
  visit_all_dtypes_and_float8(it.common_dtype(), [&]<typename T>() {
    cpu_kernel(it, [](bool c, T a, T b) -> T { return c ? a : b; });
  });
}
void lerp_kernel(TensorIterator& it, const PwArgs&) {
  visit_floating(it.common_dtype(), "lerp", [&]<typename T>() {
    using O = opmath_t<T>;
    cpu_kernel(it, [](T a, T b, T w) -> T { return static_cast<T>(fn::Lerp{}(O(a), O(b), O(w))); });
  });
}
void clamp_kernel(TensorIterator& it, const PwArgs&) {
  visit_dtype(it.common_dtype(), [&]<typename T>() {
    using O = opmath_t<T>;
    cpu_kernel(it, [](T a, T lo, T hi) -> T { return static_cast<T>(fn::Clamp{}(O(a), O(lo), O(hi))); });
  });
}

}  // namespace
}  // namespace STRATA_CPU_NS
}  // namespace cpu

#define STRATA_REG(name)                                 \
  STRATA_DECLARE_STUB(name##_stub, PointwiseFn);        \
  STRATA_REGISTER_CPU_KERNEL(name##_stub, cpu::name##_kernel);
STRATA_REG(mul)
STRATA_REG(div_true)
STRATA_REG(div_floor)
STRATA_REG(div_trunc)
STRATA_REG(remainder)
STRATA_REG(fmod)
STRATA_REG(pow)
STRATA_REG(maximum)
STRATA_REG(minimum)
STRATA_REG(clamp_min)
STRATA_REG(clamp_max)
STRATA_REG(atan2)
STRATA_REG(bitwise_and)
STRATA_REG(bitwise_or)
STRATA_REG(bitwise_xor)
STRATA_REG(eq)
STRATA_REG(ne)
STRATA_REG(lt)
STRATA_REG(le)
STRATA_REG(gt)
STRATA_REG(ge)
STRATA_REG(logical_and)
STRATA_REG(logical_or)
STRATA_REG(logical_xor)
STRATA_REG(add)
STRATA_REG(where)
STRATA_REG(lerp)
STRATA_REG(clamp)

}  // namespace strata
