// The part of src/core/dtype.h that the scalar functors use, for kernels compiled by NVRTC (which cannot
// take the library's dtype.h: it needs <string>, the ScalarType tables and core/error.h). Generated CUDA
// kernels find this file before src/ on their include path. The 16-bit floats are CUDA's __half and
// __nv_bfloat16, which compute in float as strata::Half and strata::BFloat16 do.
#pragma once
#include <cuda/std/complex>
#include <cuda/std/cstdint>
#include <cuda/std/type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "strata_std_alias.h"

#define STRATA_ALWAYS_INLINE __forceinline__

namespace strata {
using Half = __half;
using BFloat16 = __nv_bfloat16;

template <typename T>
struct OpMath {
  using type = T;
};
template <>
struct OpMath<Half> {
  using type = float;
};
template <>
struct OpMath<BFloat16> {
  using type = float;
};
template <typename T>
using opmath_t = typename OpMath<T>::type;

template <typename T>
constexpr bool is_reduced_float_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;
template <typename T>
constexpr bool is_float_v = std::is_floating_point_v<T> || is_reduced_float_v<T>;
template <typename T>
struct IsComplex : std::false_type {};
template <typename T>
struct IsComplex<std::complex<T>> : std::true_type {};
template <typename T>
constexpr bool is_complex_v = IsComplex<T>::value;
}  // namespace strata
