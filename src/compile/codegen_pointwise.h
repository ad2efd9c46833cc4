// Dtype conversions for the generated pointwise kernels of python/strata/_inductor (backend="strata_cpp").
//
// Note [Pointwise kernels follow eager's per-op dtypes]
// Eager runs each pointwise op through TensorIterator: its inputs are converted to the op's common
// dtype C (the copy kernel's conversion), the functor runs on opmath_t<C> (float for float16 and
// bfloat16) and the result is rounded to the output dtype. A generated kernel does the same for each
// fused node, in registers: convert<C>(operand), static_cast<opmath_t<C>>, the functor, static_cast to
// the node's dtype. Python numbers are converted to C by eager's own cast at compile time and written
// as exact literals. So a float16 chain rounds after every op exactly as eager does, and integer and
// bool arithmetic is C++'s on the same types as eager's kernels.
// Only the generated code includes this file; it is not part of the library build.
#pragma once
#include <cstdint>
#include <limits>
#include <type_traits>

#include "core/dtype.h"

namespace strata {
namespace codegen {

// backends/cpu/kernels/copy_kernels.cpp convert(): the conversion eager's TensorIterator applies to an
// input whose dtype differs from the op's, and the one `.to(dtype)` applies.
template <typename D, typename S>
STRATA_ALWAYS_INLINE D convert(S s) {
  if constexpr (std::is_same_v<D, S>) {
    return s;
  } else if constexpr (std::is_same_v<D, bool>) {
    return static_cast<opmath_t<S>>(s) != opmath_t<S>(0);
  } else if constexpr (is_reduced_float_v<D> || is_reduced_float_v<S>) {
    return static_cast<D>(static_cast<float>(static_cast<opmath_t<S>>(s)));
  } else {
    return static_cast<D>(s);
  }
}

// One node of a fused chain: operands already converted to C; the functor on opmath_t<C>; the result
// rounded to the node's dtype R.
template <typename C, typename R, typename F, typename... A>
STRATA_ALWAYS_INLINE R apply(const F& f, A... a) {
  using O = opmath_t<C>;
  return static_cast<R>(f(static_cast<O>(a)...));
}
// where / masked_fill: eager selects on C itself (no opmath round trip; the values are the same).
template <typename C, typename R>
STRATA_ALWAYS_INLINE R select(bool c, C a, C b) {
  return static_cast<R>(c ? a : b);
}

}  // namespace codegen
}  // namespace strata
