// Scalar functors of the pointwise ops in decl/surface_more.def (see Note [One
// scalar functor per pointwise op] in pointwise_functors.h). Edge cases follow
// PyTorch: shifts by a negative amount or by the bit width or more give 0
// (left) or the sign fill (right) instead of C++'s undefined behaviour; gcd
// and lcm are non-negative except where the absolute value wraps (INT_MIN).
#pragma once

#include <bit>
#include <cstdint>
#include <type_traits>

#include "ops/pointwise_functors.h"

namespace strata::fn {

struct Gcd {
  template <typename T>
  STRATA_HD T operator()(T a, T b) const {
    // |x| through the unsigned type: -INT_MIN is undefined for int64, and a compiler that
    // assumes it cannot happen may drop Lcm's check for the wrapped gcd of -1.
    if constexpr (std::is_signed_v<T>) {
      using U = std::make_unsigned_t<T>;
      if (a < 0) a = static_cast<T>(U(0) - static_cast<U>(a));
      if (b < 0) b = static_cast<T>(U(0) - static_cast<U>(b));
    }
    while (b != 0) {
      T r = static_cast<T>(a % b);
      a = b;
      b = r;
    }
    return a;
  }
};

struct Lcm {
  template <typename T>
  STRATA_HD T operator()(T a, T b) const {
    T g = Gcd{}(a, b);
    if (g == 0) return T(0);
    // gcd is -1 only where |INT_MIN| wraps (gcd(INT_MIN, INT_MIN + 1)): INT_MIN / -1
    // traps (SIGFPE; torch 2.13 crashes there), so the quotient is the wrapped negation.
    T q;
    if constexpr (std::is_signed_v<T>) {
      using U = std::make_unsigned_t<T>;
      q = g == T(-1) ? static_cast<T>(U(0) - static_cast<U>(a)) : static_cast<T>(a / g);
    } else {
      q = static_cast<T>(a / g);
    }
    // The product and its absolute value are taken in C++'s promoted type (int for the
    // small integer types, T itself from int32 on), wrapping, and only then narrowed:
    // what torch's kernel computes (lcm(INT32_MAX, -2) is 2 there, not -2).
    using W = std::conditional_t<(sizeof(T) < sizeof(int)), int, T>;
    using UW = std::make_unsigned_t<W>;
    W r = static_cast<W>(static_cast<UW>(static_cast<W>(q)) * static_cast<UW>(static_cast<W>(b)));
    if constexpr (std::is_signed_v<W>) {
      if (r < 0) r = static_cast<W>(UW(0) - static_cast<UW>(r));
    }
    return static_cast<T>(r);
  }
};

struct LeftShift {
  template <typename T>
  STRATA_HD T operator()(T a, T b) const {
    constexpr int64_t bits = sizeof(T) * 8;
    if (static_cast<int64_t>(b) < 0 || static_cast<int64_t>(b) >= bits) return T(0);
    // Shift the unsigned bit pattern: shifting a negative signed value is UB.
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) << static_cast<int>(b)));
  }
};

struct RightShift {
  template <typename T>
  STRATA_HD T operator()(T a, T b) const {
    constexpr int64_t bits = sizeof(T) * 8;
    if (static_cast<int64_t>(b) < 0 || static_cast<int64_t>(b) >= bits) return static_cast<T>(a < 0 ? -1 : 0);
    return static_cast<T>(a >> static_cast<int>(b));
  }
};

// Like maximum/minimum, but a nan loses to a number (nan only when both are).
struct Fmax {
  template <typename T>
  STRATA_HD T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (a != a) return b;
      if (b != b) return a;
    }
    return a > b ? a : b;
  }
};
struct Fmin {
  template <typename T>
  STRATA_HD T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (a != a) return b;
      if (b != b) return a;
    }
    return a < b ? a : b;
  }
};

// The next representable value of a's own storage type towards b, by stepping
// its bit pattern (so float16 and bfloat16 step by their own ulp, not float's).
struct NextAfter {
  template <typename Bits>
  static Bits step(Bits ua, bool a_negative, bool a_zero, bool up, Bits sign_bit) {
    if (a_zero) return static_cast<Bits>((up ? Bits(0) : sign_bit) | Bits(1));
    // Moving away from zero increments the magnitude bits.
    const bool away = up != a_negative;
    return static_cast<Bits>(away ? ua + 1 : ua - 1);
  }
  template <typename T>
  STRATA_HD T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      const float fa = static_cast<float>(a), fb = static_cast<float>(b);
      if (fa != fa || fb != fb) return T(fa + fb);
      if (fa == fb) return b;
      return T::from_bits(step<uint16_t>(a.bits, fa < 0, fa == 0, fb > fa, uint16_t(0x8000)));
    } else {
      using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
      if (a != a || b != b) return a + b;
      if (a == b) return b;
      const Bits sign = Bits(1) << (sizeof(T) * 8 - 1);
      return std::bit_cast<T>(step<Bits>(std::bit_cast<Bits>(a), a < 0, a == 0, b > a, sign));
    }
  }
};

}  // namespace strata::fn
