// Note [One scalar functor per pointwise op]
// Each pointwise op's math is written once here, on its compute type (float
// for 16-bit floats, see opmath_t). The CPU loops, a CUDA kernel and the
// fusion code generator all instantiate the same functor. Keep them free of
// branches that depend on data where possible so the CPU loops vectorize.
#pragma once

#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "core/dtype.h"

#if defined(__CUDACC__)
#define STRATA_HD __host__ __device__ __forceinline__
#else
#define STRATA_HD STRATA_ALWAYS_INLINE
#endif

namespace strata::fn {

// Signed integer +, -, * and negation wrap around in two's complement, as torch's results do (int64 max + 1
// is min), without the undefined behaviour of signed overflow in C++ (UBSan found x + (2**63 - 1) and
// -(int64 min) in tests/python/test_hostile.py): computed in the unsigned type of the promoted operands,
// which is the same machine code. Other types are unchanged.
template <typename T>
inline constexpr bool wraps_v = std::is_integral_v<T> && std::is_signed_v<T> && !std::is_same_v<T, bool>;
template <typename T>
using wrap_uint_t = std::make_unsigned_t<std::common_type_t<T, int>>;
template <typename T>
STRATA_HD T wrap_add(T a, T b) {
  if constexpr (wraps_v<T>) return static_cast<T>(static_cast<wrap_uint_t<T>>(a) + static_cast<wrap_uint_t<T>>(b));
  else return a + b;
}
template <typename T>
STRATA_HD T wrap_sub(T a, T b) {
  if constexpr (wraps_v<T>) return static_cast<T>(static_cast<wrap_uint_t<T>>(a) - static_cast<wrap_uint_t<T>>(b));
  else return a - b;
}
template <typename T>
STRATA_HD T wrap_mul(T a, T b) {
  if constexpr (wraps_v<T>) return static_cast<T>(static_cast<wrap_uint_t<T>>(a) * static_cast<wrap_uint_t<T>>(b));
  else return a * b;
}
template <typename T>
STRATA_HD T wrap_neg(T a) {
  if constexpr (wraps_v<T>) return static_cast<T>(wrap_uint_t<T>(0) - static_cast<wrap_uint_t<T>>(a));
  else return -a;
}

// ---- unary, any type -------------------------------------------------------
struct Neg {
  template <typename T>
  STRATA_HD T operator()(T a) const { return wrap_neg(a); }
};
struct Abs {
  template <typename T>
  STRATA_HD T operator()(T a) const {
    if constexpr (std::is_unsigned_v<T> || std::is_same_v<T, bool>) return a;
    else if constexpr (std::is_floating_point_v<T>) return std::fabs(a);
    else return a < 0 ? wrap_neg(a) : a;
  }
};
struct Sign {
  template <typename T>
  STRATA_HD T operator()(T a) const {
    // Both comparisons are false for NaN, so sign(NaN) is 0, as in torch; sign(-0.0) is 0 too.
    if constexpr (std::is_same_v<T, bool>) return a;
    else return T((T(0) < a) - (a < T(0)));
  }
};
struct Square {
  template <typename T>
  STRATA_HD T operator()(T a) const {
    if constexpr (std::is_same_v<T, bool>) return a;
    else return a * a;
  }
};
struct Floor {
  template <typename T>
  STRATA_HD T operator()(T a) const {
    if constexpr (std::is_floating_point_v<T>) return std::floor(a);
    else return a;
  }
};
struct Ceil {
  template <typename T>
  STRATA_HD T operator()(T a) const {
    if constexpr (std::is_floating_point_v<T>) return std::ceil(a);
    else return a;
  }
};
struct Trunc {
  template <typename T>
  STRATA_HD T operator()(T a) const {
    if constexpr (std::is_floating_point_v<T>) return std::trunc(a);
    else return a;
  }
};
// Round half to even, like torch.round and numpy.round.
struct Round {
  template <typename T>
  STRATA_HD T operator()(T a) const {
    if constexpr (std::is_floating_point_v<T>) return std::nearbyint(a);
    else return a;
  }
};
struct RoundDecimals {
  double scale;  // 10^decimals
  template <typename T>
  STRATA_HD T operator()(T a) const {
    if constexpr (std::is_floating_point_v<T>) {
      T s = static_cast<T>(scale);
      return scale >= 1 ? std::nearbyint(a * s) / s : std::nearbyint(a / (T(1) / s)) * (T(1) / s);
    } else {
      return a;
    }
  }
};

// ---- unary, floating -------------------------------------------------------
// The functions the C++ library lacks for std::complex (real types forward to
// std::). expm1 and log1p keep their accuracy near zero, as torch's do.
namespace cx {
template <typename T>
STRATA_HD T exp2(T a) {
  if constexpr (is_complex_v<T>) return std::exp(a * typename T::value_type(0.69314718055994530942));
  else return std::exp2(a);
}
template <typename T>
STRATA_HD T log2(T a) {
  if constexpr (is_complex_v<T>) return std::log(a) / typename T::value_type(0.69314718055994530942);
  else return std::log2(a);
}
template <typename T>
STRATA_HD T expm1(T a) {
  if constexpr (is_complex_v<T>) {
    // exp(x+iy)-1 = expm1(x)cos(y) - 2 sin^2(y/2) + i exp(x) sin(y)
    using R = typename T::value_type;
    R x = a.real(), y = a.imag(), s = std::sin(y / 2);
    return T(std::expm1(x) * std::cos(y) - 2 * s * s, std::exp(x) * std::sin(y));
  } else {
    return std::expm1(a);
  }
}
template <typename T>
STRATA_HD T log1p(T a) {
  if constexpr (is_complex_v<T>) {
    // log|1+z| = 0.5 log1p(2x + x^2 + y^2), arg(1+z) = atan2(y, 1+x)
    using R = typename T::value_type;
    R x = a.real(), y = a.imag();
    if (std::abs(x) < R(0.5) && std::abs(y) < R(0.5))
      return T(R(0.5) * std::log1p(x * (2 + x) + y * y), std::atan2(y, 1 + x));
    return std::log(T(1) + a);
  } else {
    return std::log1p(a);
  }
}
// Complex quotient with torch's formula (Smith's scaling; a zero divisor gives
// a/|c| + i b/|d|, so 1/0 = inf + nan j), without Annex G's recovery of
// infinities: a NaN anywhere gives NaN as in torch and NumPy.
template <typename T, typename U>
STRATA_HD auto div(T a, U b) {
  if constexpr (is_complex_v<T> && std::is_same_v<T, U>) {
    using R = typename T::value_type;
    const R ar = a.real(), ai = a.imag(), c = b.real(), d = b.imag();
    const R abs_c = std::abs(c), abs_d = std::abs(d);
    if (abs_c >= abs_d) {
      if (abs_c == R(0) && abs_d == R(0)) return T(ar / abs_c, ai / abs_d);
      const R rat = d / c, scl = R(1) / (c + d * rat);
      return T((ar + ai * rat) * scl, (ai - ar * rat) * scl);
    }
    const R rat = c / d, scl = R(1) / (d + c * rat);
    return T((ar * rat + ai) * scl, (ai * rat - ar) * scl);
  } else {
    return a / b;
  }
}
template <typename T>
STRATA_HD bool isnan(T a) {
  if constexpr (is_complex_v<T>) return std::isnan(a.real()) || std::isnan(a.imag());
  else if constexpr (std::is_floating_point_v<T>) return std::isnan(a);
  else return false;
}
}  // namespace cx
#define STRATA_FLOAT_UNARY(Name, expr)            \
  struct Name {                                   \
    template <typename T>                         \
    STRATA_HD T operator()(T a) const { return expr; } \
  };
STRATA_FLOAT_UNARY(Exp, std::exp(a))
STRATA_FLOAT_UNARY(Exp2, cx::exp2(a))
STRATA_FLOAT_UNARY(Expm1, cx::expm1(a))
STRATA_FLOAT_UNARY(Log, std::log(a))
STRATA_FLOAT_UNARY(Log2, cx::log2(a))
STRATA_FLOAT_UNARY(Log10, std::log10(a))
STRATA_FLOAT_UNARY(Log1p, cx::log1p(a))
STRATA_FLOAT_UNARY(Sqrt, std::sqrt(a))
STRATA_FLOAT_UNARY(Rsqrt, cx::div(T(1), std::sqrt(a)))
STRATA_FLOAT_UNARY(Reciprocal, cx::div(T(1), a))
STRATA_FLOAT_UNARY(Sin, std::sin(a))
STRATA_FLOAT_UNARY(Cos, std::cos(a))
STRATA_FLOAT_UNARY(Tan, std::tan(a))
STRATA_FLOAT_UNARY(Tanh, std::tanh(a))
STRATA_FLOAT_UNARY(Asin, std::asin(a))
STRATA_FLOAT_UNARY(Acos, std::acos(a))
STRATA_FLOAT_UNARY(Atan, std::atan(a))
STRATA_FLOAT_UNARY(Sinh, std::sinh(a))
STRATA_FLOAT_UNARY(Cosh, std::cosh(a))
STRATA_FLOAT_UNARY(Sigmoid, cx::div(T(1), T(1) + std::exp(-a)))
STRATA_FLOAT_UNARY(Erf, std::erf(a))
STRATA_FLOAT_UNARY(Erfc, std::erfc(a))
#undef STRATA_FLOAT_UNARY

struct NanToNum {
  double nan, posinf, neginf;
  template <typename T>
  STRATA_HD T operator()(T a) const {
    if constexpr (std::is_floating_point_v<T>) {
      return std::isnan(a) ? T(nan) : (a == std::numeric_limits<T>::infinity() ? T(posinf)
                                       : a == -std::numeric_limits<T>::infinity() ? T(neginf) : a);
    } else {
      return a;
    }
  }
};

// ---- unary -> bool ---------------------------------------------------------
struct IsNan {
  template <typename T>
  STRATA_HD bool operator()(T a) const { return cx::isnan(a); }
};
struct IsInf {
  template <typename T>
  STRATA_HD bool operator()(T a) const {
    if constexpr (is_complex_v<T>) return std::isinf(a.real()) || std::isinf(a.imag());
    else if constexpr (std::is_floating_point_v<T>) return std::isinf(a);
    else return false;
  }
};
struct IsFinite {
  template <typename T>
  STRATA_HD bool operator()(T a) const {
    if constexpr (is_complex_v<T>) return std::isfinite(a.real()) && std::isfinite(a.imag());
    else if constexpr (std::is_floating_point_v<T>) return std::isfinite(a);
    else return true;
  }
};
struct LogicalNot {
  template <typename T>
  STRATA_HD bool operator()(T a) const { return a == T(0); }
};
struct BitwiseNot {
  template <typename T>
  STRATA_HD T operator()(T a) const {
    if constexpr (std::is_same_v<T, bool>) return !a;
    else if constexpr (std::is_integral_v<T>) return static_cast<T>(~a);
    else return a;  // unreachable: float inputs are rejected before the kernel
  }
};

// ---- binary ----------------------------------------------------------------
struct Add {
  template <typename T>
  STRATA_HD T operator()(T a, T b) const { return wrap_add(a, b); }
};
struct AddAlpha {
  double alpha;
  template <typename T>
  STRATA_HD T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>) return a || (b && alpha != 0);
    else return wrap_add(a, wrap_mul(static_cast<T>(alpha), b));
  }
};
struct Sub {
  template <typename T>
  STRATA_HD T operator()(T a, T b) const { return wrap_sub(a, b); }
};
struct Mul {
  template <typename T>
  STRATA_HD T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>) return a && b;
    else return wrap_mul(a, b);
  }
};
struct Div {
  template <typename T>
  STRATA_HD T operator()(T a, T b) const { return cx::div(a, b); }
};
// Integer kernels are only reached after the caller checked for zero divisors.
struct DivTrunc {
  template <typename T>
  STRATA_HD T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) return std::trunc(a / b);
    else if constexpr (std::is_signed_v<T>) return b == T(-1) ? wrap_neg(a) : T(a / b);
    else return T(a / b);
  }
};
struct DivFloor {
  template <typename T>
  STRATA_HD T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (b == 0) return a / b;
      T mod = std::fmod(a, b);
      T div = (a - mod) / b;
      if (mod != 0 && ((b < 0) != (mod < 0))) div -= T(1);
      T fl;
      if (div != 0) {
        fl = std::floor(div);
        if (div - fl > T(0.5)) fl += T(1);
      } else {
        fl = std::copysign(T(0), a / b);
      }
      return fl;
    } else if constexpr (std::is_signed_v<T>) {
      if (b == T(-1)) return wrap_neg(a);
      T q = a / b, r = a % b;
      return (r != 0 && ((r < 0) != (b < 0))) ? T(q - 1) : q;
    } else {
      return T(a / b);
    }
  }
};
// Python's %: the result has the sign of the divisor.
struct Remainder {
  template <typename T>
  STRATA_HD T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      T m = std::fmod(a, b);
      return (m != 0 && ((m < 0) != (b < 0))) ? m + b : m;
    } else if constexpr (std::is_signed_v<T>) {
      if (b == T(-1)) return T(0);
      T m = a % b;
      return (m != 0 && ((m < 0) != (b < 0))) ? T(m + b) : m;
    } else {
      return T(a % b);
    }
  }
};
struct Fmod {
  template <typename T>
  STRATA_HD T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) return std::fmod(a, b);
    else if constexpr (std::is_signed_v<T>) return b == T(-1) ? T(0) : T(a % b);
    else return T(a % b);
  }
};
struct Pow {
  template <typename T>
  STRATA_HD T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T> || is_complex_v<T>) {
      return std::pow(a, b);
    } else if constexpr (std::is_same_v<T, bool>) {
      return a || !b;
    } else {
      // Exponentiation by squaring; negative exponents were rejected earlier
      // except for bases 1 and -1.
      if (b < 0) return a == 1 ? T(1) : (a == T(-1) ? ((b & 1) ? T(-1) : T(1)) : T(0));
      T r = 1, x = a;
      using U = std::make_unsigned_t<T>;
      U e = static_cast<U>(b);
      while (e) {
        if (e & 1) r = static_cast<T>(static_cast<U>(r) * static_cast<U>(x));
        x = static_cast<T>(static_cast<U>(x) * static_cast<U>(x));
        e >>= 1;
      }
      return r;
    }
  }
};
// NaN-propagating, like torch.maximum/minimum.
struct Maximum {
  template <typename T>
  STRATA_HD T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) return (a != a || b != b) ? a + b : (a > b ? a : b);
    else return a > b ? a : b;
  }
};
struct Minimum {
  template <typename T>
  STRATA_HD T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) return (a != a || b != b) ? a + b : (a < b ? a : b);
    else return a < b ? a : b;
  }
};
struct Atan2 {
  template <typename T>
  STRATA_HD T operator()(T a, T b) const { return std::atan2(a, b); }
};

#define STRATA_CMP(Name, op)                                          \
  struct Name {                                                       \
    template <typename T>                                             \
    STRATA_HD bool operator()(T a, T b) const { return a op b; }      \
  };
STRATA_CMP(Eq, ==)
STRATA_CMP(Ne, !=)
STRATA_CMP(Lt, <)
STRATA_CMP(Le, <=)
STRATA_CMP(Gt, >)
STRATA_CMP(Ge, >=)
#undef STRATA_CMP

struct LogicalAnd {
  template <typename T>
  STRATA_HD bool operator()(T a, T b) const { return static_cast<bool>(a) && static_cast<bool>(b); }
};
struct LogicalOr {
  template <typename T>
  STRATA_HD bool operator()(T a, T b) const { return static_cast<bool>(a) || static_cast<bool>(b); }
};
struct LogicalXor {
  template <typename T>
  STRATA_HD bool operator()(T a, T b) const { return static_cast<bool>(a) != static_cast<bool>(b); }
};
struct BitwiseAnd {
  template <typename T>
  STRATA_HD T operator()(T a, T b) const { return static_cast<T>(a & b); }
};
struct BitwiseOr {
  template <typename T>
  STRATA_HD T operator()(T a, T b) const { return static_cast<T>(a | b); }
};
struct BitwiseXor {
  template <typename T>
  STRATA_HD T operator()(T a, T b) const { return static_cast<T>(a ^ b); }
};

// ---- ternary ---------------------------------------------------------------
struct Where {
  template <typename T>
  STRATA_HD T operator()(bool c, T a, T b) const { return c ? a : b; }
};
// PyTorch's lerp: exact at both ends.
struct Lerp {
  template <typename T>
  STRATA_HD T operator()(T a, T b, T w) const {
    return (w < T(0.5)) ? a + w * (b - a) : b - (b - a) * (T(1) - w);
  }
};
// clamp(x, lo, hi) with NaN in x propagated; min applied before max like torch.
struct Clamp {
  template <typename T>
  STRATA_HD T operator()(T a, T lo, T hi) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (a != a) return a;
      T r = lo != lo ? lo : (a < lo ? lo : a);
      return hi != hi ? hi : (r > hi ? hi : r);
    } else {
      T r = a < lo ? lo : a;
      return r > hi ? hi : r;
    }
  }
};
struct ClampMin {
  template <typename T>
  STRATA_HD T operator()(T a, T lo) const { return Maximum{}(a, lo); }
};
struct ClampMax {
  template <typename T>
  STRATA_HD T operator()(T a, T hi) const { return Minimum{}(a, hi); }
};

}  // namespace strata::fn
#include "ops/pointwise_functors_more.h"  // the math_more ops (decl/math_more.def)
