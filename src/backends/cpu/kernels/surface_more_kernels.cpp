// CPU inner loops of the pointwise ops in decl/surface_more.def, plus frexp's
// two-output loop and repeat_interleave's index expansion. Compiled once per
// ISA level.
#include <cmath>

#include "backends/cpu/loops.h"
#include "ops/pointwise.h"
#include "ops/pointwise_functors_surface.h"
#include "ops/surface_more.h"

namespace strata {
namespace cpu {
inline namespace STRATA_CPU_NS {
namespace {

// Integer types without bool: torch rejects bool for gcd, lcm and the shifts
// (checked before the kernel runs), and the functors are not meant for it.
struct VisitIntNoBool {
  template <typename F>
  decltype(auto) operator()(ScalarType t, F&& f) const {
    switch (t) {
      case ScalarType::UInt8: return f.template operator()<uint8_t>();
      case ScalarType::Int8: return f.template operator()<int8_t>();
      case ScalarType::Int16: return f.template operator()<int16_t>();
      case ScalarType::Int32: return f.template operator()<int32_t>();
      case ScalarType::Int64: return f.template operator()<int64_t>();
      default: throw NotImplementedError(str("integer op: not implemented for dtype ", dtype_name(t)));
    }
  }
};

// Computes in the storage type itself (no opmath widening): integer ops and
// nextafter, whose result depends on the exact type.
template <typename Op, typename Visit>
void exact_binary_kernel(TensorIterator& it, const Op& op, Visit visit) {
  visit(it.common_dtype(), [&]<typename T>() { cpu_kernel(it, [op](T a, T b) -> T { return op(a, b); }); });
}

void gcd_kernel(TensorIterator& it, const PwArgs&) { exact_binary_kernel(it, fn::Gcd{}, VisitIntNoBool{}); }
void lcm_kernel(TensorIterator& it, const PwArgs&) { exact_binary_kernel(it, fn::Lcm{}, VisitIntNoBool{}); }
void bitwise_left_shift_kernel(TensorIterator& it, const PwArgs&) {
  exact_binary_kernel(it, fn::LeftShift{}, VisitIntNoBool{});
}
void bitwise_right_shift_kernel(TensorIterator& it, const PwArgs&) {
  exact_binary_kernel(it, fn::RightShift{}, VisitIntNoBool{});
}
void fmax_kernel(TensorIterator& it, const PwArgs&) { binary_kernel(it, fn::Fmax{}, VisitAll{}); }
void fmin_kernel(TensorIterator& it, const PwArgs&) { binary_kernel(it, fn::Fmin{}, VisitAll{}); }
void nextafter_kernel(TensorIterator& it, const PwArgs&) { exact_binary_kernel(it, fn::NextAfter{}, VisitFloat{}); }

// in is contiguous; mantissa has in's dtype, exponent is int32, both contiguous.
void frexp_kernel(const Tensor& in, Tensor& mantissa, Tensor& exponent) {
  const int64_t n = in.numel();
  int32_t* e = exponent.data_ptr<int32_t>();
  visit_floating(in.dtype(), "frexp", [&]<typename T>() {
    const T* x = in.data_ptr<T>();
    T* m = mantissa.data_ptr<T>();
    parallel_for(0, n, 32768, [&](int64_t b, int64_t end) {
      for (int64_t i = b; i < end; ++i) {
        using O = std::conditional_t<std::is_same_v<T, double>, double, float>;
        const O v = static_cast<O>(x[i]);
        int ex = 0;
        // glibc leaves the exponent of inf and nan unspecified; torch reports 0.
        const O mv = std::isfinite(v) ? std::frexp(v, &ex) : v;
        m[i] = static_cast<T>(mv);
        e[i] = std::isfinite(v) ? ex : 0;
      }
    });
  });
}

// repeats (int64, contiguous, checked non-negative) -> [0 x r0, 1 x r1, ...].
void repeat_interleave_index_kernel(const Tensor& repeats, Tensor& out) {
  const int64_t* r = repeats.data_ptr<int64_t>();
  int64_t* o = out.data_ptr<int64_t>();
  const int64_t n = repeats.numel();
  int64_t k = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < r[i]; ++j) o[k++] = i;
}

}  // namespace
}  // namespace STRATA_CPU_NS
}  // namespace cpu

#define STRATA_REG(name)                          \
  STRATA_DECLARE_STUB(name##_stub, PointwiseFn); \
  STRATA_REGISTER_CPU_KERNEL(name##_stub, cpu::name##_kernel);
STRATA_REG(gcd)
STRATA_REG(lcm)
STRATA_REG(bitwise_left_shift)
STRATA_REG(bitwise_right_shift)
STRATA_REG(fmax)
STRATA_REG(fmin)
STRATA_REG(nextafter)
#undef STRATA_REG
STRATA_REGISTER_CPU_KERNEL(frexp_stub, cpu::frexp_kernel);
STRATA_REGISTER_CPU_KERNEL(repeat_interleave_index_stub, cpu::repeat_interleave_index_kernel);

}  // namespace strata
