// Element types: the ScalarType enum, the 16-bit float types, their traits,
// and PyTorch's type-promotion lattice.
#pragma once

#include <bit>
#include <cmath>
#include <complex>
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
  // Appended in issue 13 (torch's barebones unsigned types and the complex types).
  UInt16,
  UInt32,
  UInt64,
  ComplexFloat,
  ComplexDouble,
  // torch's 8-bit floats (storage and conversion types; see Note [Float8]).
  Float8_e4m3fn,
  Float8_e5m2,
  Float8_e4m3fnuz,
  Float8_e5m2fnuz,
  Float8_e8m0fnu,
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

// Note [Float8]
// The five 8-bit float formats of torch, stored as their bits. They are storage
// and conversion types: a value converts to float32 exactly, and float32 (and
// through it every other dtype) converts to them rounding to nearest even with
// torch's overflow rule: e4m3fn saturates to +-448 (inf too; it has no inf),
// e5m2 goes to +-inf, the fnuz formats give their one NaN (0x80, also the
// result of any NaN; they have no -0), e8m0fnu (exponent only, unsigned) keeps
// |x|'s rounded power of two and gives NaN (0xff) for inf/NaN. The conversions
// are out of line in dtype.cpp. Arithmetic is limited to what torch's CPU build
// allows (see docs/DESIGN.md, "Dtypes").
uint8_t float8_from_float(float f, ScalarType t);
float float8_to_float(uint8_t bits, ScalarType t);
template <ScalarType kType>
struct Float8 {
  uint8_t bits = 0;
  Float8() = default;
  static constexpr Float8 from_bits(uint8_t b) {
    Float8 h;
    h.bits = b;
    return h;
  }
  Float8(float f) : bits(float8_from_float(f, kType)) {}
  operator float() const { return float8_to_float(bits, kType); }
};
using Float8_e4m3fn = Float8<ScalarType::Float8_e4m3fn>;
using Float8_e5m2 = Float8<ScalarType::Float8_e5m2>;
using Float8_e4m3fnuz = Float8<ScalarType::Float8_e4m3fnuz>;
using Float8_e5m2fnuz = Float8<ScalarType::Float8_e5m2fnuz>;
using Float8_e8m0fnu = Float8<ScalarType::Float8_e8m0fnu>;

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
STRATA_SCALAR_TYPE_OF(uint16_t, UInt16)
STRATA_SCALAR_TYPE_OF(uint32_t, UInt32)
STRATA_SCALAR_TYPE_OF(uint64_t, UInt64)
STRATA_SCALAR_TYPE_OF(std::complex<float>, ComplexFloat)
STRATA_SCALAR_TYPE_OF(std::complex<double>, ComplexDouble)
STRATA_SCALAR_TYPE_OF(Float8_e4m3fn, Float8_e4m3fn)
STRATA_SCALAR_TYPE_OF(Float8_e5m2, Float8_e5m2)
STRATA_SCALAR_TYPE_OF(Float8_e4m3fnuz, Float8_e4m3fnuz)
STRATA_SCALAR_TYPE_OF(Float8_e5m2fnuz, Float8_e5m2fnuz)
STRATA_SCALAR_TYPE_OF(Float8_e8m0fnu, Float8_e8m0fnu)
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
template <ScalarType K>
struct OpMath<Float8<K>> {
  using type = float;
};
template <typename T>
using opmath_t = typename OpMath<T>::type;
template <typename T>
struct IsFloat8 : std::false_type {};
template <ScalarType K>
struct IsFloat8<Float8<K>> : std::true_type {};
template <typename T>
constexpr bool is_float8_v = IsFloat8<T>::value;

template <typename T>
constexpr bool is_reduced_float_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;
template <typename T>
constexpr bool is_float_v = std::is_floating_point_v<T> || is_reduced_float_v<T>;
// Complex elements are std::complex<float|double> (interleaved re, im; the
// layout torch, NumPy and BLAS use). They compute in their own type.
template <typename T>
struct IsComplex : std::false_type {};
template <typename T>
struct IsComplex<std::complex<T>> : std::true_type {};
template <typename T>
constexpr bool is_complex_v = IsComplex<T>::value;

constexpr size_t element_size(ScalarType t) {
  switch (t) {
    case ScalarType::Bool:
    case ScalarType::UInt8:
    case ScalarType::Int8:
    case ScalarType::Float8_e4m3fn:
    case ScalarType::Float8_e5m2:
    case ScalarType::Float8_e4m3fnuz:
    case ScalarType::Float8_e5m2fnuz:
    case ScalarType::Float8_e8m0fnu:
      return 1;
    case ScalarType::Int16:
    case ScalarType::UInt16:
    case ScalarType::Float16:
    case ScalarType::BFloat16:
      return 2;
    case ScalarType::Int32:
    case ScalarType::UInt32:
    case ScalarType::Float32:
      return 4;
    case ScalarType::Int64:
    case ScalarType::UInt64:
    case ScalarType::Float64:
    case ScalarType::ComplexFloat:
      return 8;
    case ScalarType::ComplexDouble:
      return 16;
    default:
      return 0;
  }
}

constexpr bool is_float8_type(ScalarType t) {
  return static_cast<int>(t) >= static_cast<int>(ScalarType::Float8_e4m3fn) &&
         static_cast<int>(t) <= static_cast<int>(ScalarType::Float8_e8m0fnu);
}
// The float8 types count as floating (torch's is_floating_point).
constexpr bool is_floating_type(ScalarType t) {
  return t == ScalarType::Float16 || t == ScalarType::BFloat16 || t == ScalarType::Float32 ||
         t == ScalarType::Float64 || is_float8_type(t);
}
constexpr bool is_integral_type(ScalarType t, bool include_bool) {
  return (include_bool && t == ScalarType::Bool) || t == ScalarType::UInt8 || t == ScalarType::Int8 ||
         t == ScalarType::Int16 || t == ScalarType::Int32 || t == ScalarType::Int64 || t == ScalarType::UInt16 ||
         t == ScalarType::UInt32 || t == ScalarType::UInt64;
}
constexpr bool is_signed_type(ScalarType t) {
  return t != ScalarType::Bool && t != ScalarType::UInt8 && t != ScalarType::UInt16 && t != ScalarType::UInt32 &&
         t != ScalarType::UInt64 && t != ScalarType::Float8_e8m0fnu;
}
constexpr bool is_complex_type(ScalarType t) {
  return t == ScalarType::ComplexFloat || t == ScalarType::ComplexDouble;
}
// The dtypes autograd differentiates: floating and complex.
// (float8 included, as torch: such a tensor may require grad; its ops are few.)
constexpr bool is_differentiable_type(ScalarType t) { return is_floating_type(t) || is_complex_type(t); }
// uint16/32/64: torch's "barebones" unsigned types (creation, copy, conversion,
// comparison for equality, shape ops, sum; no arithmetic kernels).
constexpr bool is_barebones_unsigned(ScalarType t) {
  return t == ScalarType::UInt16 || t == ScalarType::UInt32 || t == ScalarType::UInt64;
}
// The types the original kernels are instantiated for (visit_dtype).
constexpr bool is_basic_type(ScalarType t) { return static_cast<int>(t) <= static_cast<int>(ScalarType::Float64); }
// complex64 <-> float32, complex128 <-> float64 (16-bit floats pair with complex64).
constexpr ScalarType to_complex_type(ScalarType t) {
  return t == ScalarType::Float64 || t == ScalarType::ComplexDouble ? ScalarType::ComplexDouble
                                                                    : ScalarType::ComplexFloat;
}
constexpr ScalarType to_real_value_type(ScalarType t) {
  return t == ScalarType::ComplexFloat ? ScalarType::Float32 : t == ScalarType::ComplexDouble ? ScalarType::Float64 : t;
}
// torch's name for the C++ type, used in "not implemented for 'ComplexFloat'".
std::string_view scalar_type_name(ScalarType t);

// Python-facing name without the "strata." prefix, e.g. "float32".
std::string_view dtype_name(ScalarType t);
// Parses "float32", "float", "half", "long", ... ; returns Undefined if unknown.
ScalarType dtype_from_name(std::string_view name);

// PyTorch's promotion lattice (promote_types), symmetric.
ScalarType promote_types(ScalarType a, ScalarType b);

ScalarType default_dtype();
void set_default_dtype(ScalarType t);
// complex128 when the default dtype is float64, else complex64 (torch's rule).
inline ScalarType default_complex_dtype() { return to_complex_type(default_dtype()); }

// Calls f.template operator()<T>() with T the C++ type of `t`, for the ten
// original types (bool .. float64). The unsigned and complex types throw a
// NotImplementedError naming the dtype: a kernel opts in to them with the
// visitors below.
template <typename F>
decltype(auto) visit_dtype(ScalarType t, F&& f);
// The original types plus complex64/complex128.
template <typename F>
decltype(auto) visit_dtype_and_complex(ScalarType t, F&& f);
// Every type but the float8 ones (copy, fill, equality, gathers).
template <typename F>
decltype(auto) visit_all_dtypes(ScalarType t, F&& f);
// Every type including float8 (conversion, fill, item, equality: what torch's
// CPU build does for float8).
template <typename F>
decltype(auto) visit_all_dtypes_and_float8(ScalarType t, F&& f);

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
      throw NotImplementedError(str("not implemented for '", scalar_type_name(t), "' (dtype ", dtype_name(t), ")"));
  }
}
template <typename F>
decltype(auto) visit_dtype_and_complex(ScalarType t, F&& f) {
  if (t == ScalarType::ComplexFloat) return f.template operator()<std::complex<float>>();
  if (t == ScalarType::ComplexDouble) return f.template operator()<std::complex<double>>();
  return visit_dtype(t, std::forward<F>(f));
}
template <typename F>
decltype(auto) visit_all_dtypes(ScalarType t, F&& f) {
  switch (t) {
    case ScalarType::UInt16:
      return f.template operator()<uint16_t>();
    case ScalarType::UInt32:
      return f.template operator()<uint32_t>();
    case ScalarType::UInt64:
      return f.template operator()<uint64_t>();
    default:
      return visit_dtype_and_complex(t, std::forward<F>(f));
  }
}
template <typename F>
decltype(auto) visit_all_dtypes_and_float8(ScalarType t, F&& f) {
  switch (t) {
    case ScalarType::Float8_e4m3fn:
      return f.template operator()<Float8_e4m3fn>();
    case ScalarType::Float8_e5m2:
      return f.template operator()<Float8_e5m2>();
    case ScalarType::Float8_e4m3fnuz:
      return f.template operator()<Float8_e4m3fnuz>();
    case ScalarType::Float8_e5m2fnuz:
      return f.template operator()<Float8_e5m2fnuz>();
    case ScalarType::Float8_e8m0fnu:
      return f.template operator()<Float8_e8m0fnu>();
    default:
      return visit_all_dtypes(t, std::forward<F>(f));
  }
}
}  // namespace strata
