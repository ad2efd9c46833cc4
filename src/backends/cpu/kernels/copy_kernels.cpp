// dtype-converting copy and fill. Compiled once per ISA level.
#include <cstring>

#include "backends/cpu/loops.h"
#include "ops/pointwise.h"

namespace strata {
namespace cpu {
inline namespace STRATA_CPU_NS {
namespace {

template <typename D, typename S>
STRATA_ALWAYS_INLINE D convert(S s) {
  if constexpr (std::is_same_v<D, S>) {
    return s;
  } else if constexpr (std::is_same_v<D, bool>) {
    return static_cast<opmath_t<S>>(s) != opmath_t<S>(0);
  } else if constexpr (is_complex_v<D> && is_complex_v<S>) {
    return D(s);
  } else if constexpr (is_complex_v<D>) {
    using V = typename D::value_type;
    return D(static_cast<V>(static_cast<opmath_t<S>>(s)), V(0));
  } else if constexpr (is_complex_v<S>) {
    // complex -> real keeps the real part (the frontend warns, as torch does).
    return convert<D>(s.real());
  } else if constexpr (is_reduced_float_v<D> || is_reduced_float_v<S> || is_float8_v<D> || is_float8_v<S>) {
    // float8 (Note [Float8]) converts through float32 both ways, as torch's does.
    return static_cast<D>(static_cast<float>(static_cast<opmath_t<S>>(s)));
  } else {
    return static_cast<D>(s);
  }
}

void copy_kernel(TensorIterator& it, const PwArgs&) {
  ScalarType dst = it.output_dtype(), src = it.input(0).dtype();
  if (dst == src && it.is_contiguous()) {
    // Same dtype, both dense: a parallel memcpy.
    size_t es = element_size(dst);
    char* o = it.data(0);
    const char* i = it.data(1);
    parallel_for(0, it.numel(), kGrainSize * 4, [&](int64_t b, int64_t e) {
      std::memcpy(o + b * es, i + b * es, (e - b) * es);
    });
    return;
  }
  visit_all_dtypes_and_float8(dst, [&]<typename D>() {
    visit_all_dtypes_and_float8(src, [&]<typename S>() { cpu_kernel(it, [](S s) -> D { return convert<D>(s); }); });
  });
}

// a.c says how the value travels: 0 a double in a.a, 1 an int64 bit pattern in
// a.b, 2 a complex (a.a, a.b).
void fill_kernel(TensorIterator& it, const PwArgs& a) {
  visit_all_dtypes_and_float8(it.output_dtype(), [&]<typename T>() {
    T v;
    if (a.c == 2) {
      v = convert<T>(std::complex<double>(a.a, a.b));
    } else if (a.c == 0) {
      v = convert<T>(a.a);
    } else {
      int64_t iv;
      std::memcpy(&iv, &a.b, sizeof iv);
      v = convert<T>(iv);
    }
    cpu_kernel(it, [v]() -> T { return v; });
  });
}

}  // namespace
}  // namespace STRATA_CPU_NS
}  // namespace cpu

STRATA_DECLARE_STUB(copy_stub, PointwiseFn);
STRATA_DECLARE_STUB(fill_stub, PointwiseFn);
STRATA_REGISTER_CPU_KERNEL(copy_stub, cpu::copy_kernel);
STRATA_REGISTER_CPU_KERNEL(fill_stub, cpu::fill_kernel);

}  // namespace strata
