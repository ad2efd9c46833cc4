// Element types: the ScalarType enum, the 16-bit float types, their traits,
// and PyTorch's type-promotion lattice.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>

#define STRATA_ALWAYS_INLINE inline __attribute__((always_inline))

namespace strata {

// The order is part of the ABI of the op table and of the Python binding.
enum class ScalarType : int8_t {
  Bool = 0,
  UInt8,
  Int8,
  Int16,
  Int32,
  Int64,
  Float16,
  BFloat16,
  Float32,
  Float64,
  Undefined,
};
constexpr int kNumScalarTypes = static_cast<int>(ScalarType::Undefined);

// IEEE binary16 stored as bits; arithmetic happens in float (see opmath_t).
struct Half {
  uint16_t bits = 0;
  Half() = default;
  static constexpr Half from_bits(uint16_t b) {
    Half h;
    h.bits = b;
    return h;
  }
  STRATA_ALWAYS_INLINE Half(float f) : bits(std::bit_cast<uint16_t>(static_cast<_Float16>(f))) {}
  STRATA_ALWAYS_INLINE operator float() const { return static_cast<float>(std::bit_cast<_Float16>(bits)); }
};

// bfloat16: the top 16 bits of a float32, rounded to nearest even.
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  static constexpr BFloat16 from_bits(uint16_t b) {
    BFloat16 h;
    h.bits = b;
    return h;
  }
  STRATA_ALWAYS_INLINE BFloat16(float f) {
    uint32_t u = std::bit_cast<uint32_t>(f);
    if (std::isnan(f)) {
      bits = 0x7fc0;
    } else {
      uint32_t rounding_bias = 0x7fff + ((u >> 16) & 1);
      bits = static_cast<uint16_t>((u + rounding_bias) >> 16);
    }
  }
  STRATA_ALWAYS_INLINE operator float() const { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }
};

template <typename T>
struct ScalarTypeOf;
#define STRATA_SCALAR_TYPE_OF(cpp, st) \
  template <>                          \
  struct ScalarTypeOf<cpp> {           \
    static constexpr ScalarType value = ScalarType::st; \
  };
STRATA_SCALAR_TYPE_OF(bool, Bool)
STRATA_SCALAR_TYPE_OF(uint8_t, UInt8)
STRATA_SCALAR_TYPE_OF(int8_t, Int8)
STRATA_SCALAR_TYPE_OF(int16_t, Int16)
STRATA_SCALAR_TYPE_OF(int32_t, Int32)
STRATA_SCALAR_TYPE_OF(int64_t, Int64)
STRATA_SCALAR_TYPE_OF(Half, Float16)
STRATA_SCALAR_TYPE_OF(BFloat16, BFloat16)
STRATA_SCALAR_TYPE_OF(float, Float32)
STRATA_SCALAR_TYPE_OF(double, Float64)
#undef STRATA_SCALAR_TYPE_OF

// The type arithmetic is carried out in: 16-bit floats compute in float.
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

constexpr size_t element_size(ScalarType t) {
  switch (t) {
    case ScalarType::Bool:
    case ScalarType::UInt8:
    case ScalarType::Int8:
      return 1;
    case ScalarType::Int16:
    case ScalarType::Float16:
    case ScalarType::BFloat16:
      return 2;
    case ScalarType::Int32:
    case ScalarType::Float32:
      return 4;
    case ScalarType::Int64:
    case ScalarType::Float64:
      return 8;
    default:
      return 0;
  }
}

constexpr bool is_floating_type(ScalarType t) {
  return t == ScalarType::Float16 || t == ScalarType::BFloat16 || t == ScalarType::Float32 ||
         t == ScalarType::Float64;
}
constexpr bool is_integral_type(ScalarType t, bool include_bool) {
  return (include_bool && t == ScalarType::Bool) || t == ScalarType::UInt8 || t == ScalarType::Int8 ||
         t == ScalarType::Int16 || t == ScalarType::Int32 || t == ScalarType::Int64;
}
constexpr bool is_signed_type(ScalarType t) {
  return t != ScalarType::Bool && t != ScalarType::UInt8;
}

// Python-facing name without the "strata." prefix, e.g. "float32".
std::string_view dtype_name(ScalarType t);
// Parses "float32", "float", "half", "long", ... ; returns Undefined if unknown.
ScalarType dtype_from_name(std::string_view name);

// PyTorch's promotion lattice (promote_types), symmetric.
ScalarType promote_types(ScalarType a, ScalarType b);

ScalarType default_dtype();
void set_default_dtype(ScalarType t);

// Calls f.template operator()<T>() with T the C++ type of `t`.
template <typename F>
decltype(auto) visit_dtype(ScalarType t, F&& f);

}  // namespace strata

#include "core/error.h"

namespace strata {
template <typename F>
decltype(auto) visit_dtype(ScalarType t, F&& f) {
  switch (t) {
    case ScalarType::Bool:
      return f.template operator()<bool>();
    case ScalarType::UInt8:
      return f.template operator()<uint8_t>();
    case ScalarType::Int8:
      return f.template operator()<int8_t>();
    case ScalarType::Int16:
      return f.template operator()<int16_t>();
    case ScalarType::Int32:
      return f.template operator()<int32_t>();
    case ScalarType::Int64:
      return f.template operator()<int64_t>();
    case ScalarType::Float16:
      return f.template operator()<Half>();
    case ScalarType::BFloat16:
      return f.template operator()<BFloat16>();
    case ScalarType::Float32:
      return f.template operator()<float>();
    case ScalarType::Float64:
      return f.template operator()<double>();
    default:
      throw Error("visit_dtype: undefined dtype");
  }
}
}  // namespace strata
