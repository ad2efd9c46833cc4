// A Scalar is a number with a category (bool, integer, floating) but no width:
// the C++ counterpart of a Python number passed to an op.
#pragma once

#include <complex>
#include <cstdint>
#include <string>

#include "core/dtype.h"

namespace strata {

class Scalar {
 public:
  enum class Kind : uint8_t { Bool, Int, Double, Complex };

  Scalar() : Scalar(int64_t(0)) {}
  Scalar(bool b) : kind_(Kind::Bool) { v_.i = b; }
  Scalar(int v) : kind_(Kind::Int) { v_.i = v; }
  Scalar(long v) : kind_(Kind::Int) { v_.i = v; }
  Scalar(long long v) : kind_(Kind::Int) { v_.i = static_cast<int64_t>(v); }
  Scalar(unsigned v) : kind_(Kind::Int) { v_.i = v; }
  Scalar(double v) : kind_(Kind::Double) { v_.d = v; }
  Scalar(float v) : kind_(Kind::Double) { v_.d = v; }
  Scalar(Half v) : Scalar(static_cast<float>(v)) {}
  Scalar(BFloat16 v) : Scalar(static_cast<float>(v)) {}
  template <ScalarType K>
  Scalar(Float8<K> v) : Scalar(static_cast<float>(v)) {}
  Scalar(uint8_t v) : Scalar(static_cast<int64_t>(v)) {}
  Scalar(int8_t v) : Scalar(static_cast<int64_t>(v)) {}
  Scalar(int16_t v) : Scalar(static_cast<int64_t>(v)) {}
  Scalar(uint16_t v) : Scalar(static_cast<int64_t>(v)) {}
  // uint64 beyond int64 wraps, as torch's item() of a uint64 tensor does not
  // (torch returns a Python int); kept as the bit pattern here.
  Scalar(unsigned long v) : Scalar(static_cast<int64_t>(v)) {}
  Scalar(std::complex<double> v) : kind_(Kind::Complex) {
    v_.c.re = v.real();
    v_.c.im = v.imag();
  }
  Scalar(std::complex<float> v) : Scalar(std::complex<double>(v)) {}

  Kind kind() const { return kind_; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_integral(bool include_bool) const { return kind_ == Kind::Int || (include_bool && is_bool()); }
  bool is_floating_point() const { return kind_ == Kind::Double; }
  bool is_complex() const { return kind_ == Kind::Complex; }

  // A complex Scalar gives its real part to to_double / to_int (the imaginary
  // part is dropped, as a complex -> real cast does).
  double to_double() const {
    return kind_ == Kind::Double ? v_.d : kind_ == Kind::Complex ? v_.c.re : static_cast<double>(v_.i);
  }
  int64_t to_int() const {
    return kind_ == Kind::Double ? static_cast<int64_t>(v_.d)
           : kind_ == Kind::Complex ? static_cast<int64_t>(v_.c.re)
                                    : v_.i;
  }
  bool to_bool() const {
    return kind_ == Kind::Double ? v_.d != 0 : kind_ == Kind::Complex ? (v_.c.re != 0 || v_.c.im != 0) : v_.i != 0;
  }
  std::complex<double> to_complex() const {
    return kind_ == Kind::Complex ? std::complex<double>(v_.c.re, v_.c.im) : std::complex<double>(to_double(), 0.0);
  }

  template <typename T>
  T to() const {
    if constexpr (std::is_same_v<T, bool>) {
      return to_bool();
    } else if constexpr (is_complex_v<T>) {
      return static_cast<T>(to_complex());
    } else if constexpr (is_float_v<T> || is_float8_v<T>) {
      return static_cast<T>(static_cast<opmath_t<T>>(to_double()));
    } else {
      if (kind_ == Kind::Double || kind_ == Kind::Complex) return static_cast<T>(static_cast<int64_t>(to_double()));
      return static_cast<T>(v_.i);
    }
  }

  // The dtype a Python number of this kind gets when it is the only operand.
  ScalarType natural_dtype() const {
    return kind_ == Kind::Bool     ? ScalarType::Bool
           : kind_ == Kind::Int    ? ScalarType::Int64
           : kind_ == Kind::Double ? default_dtype()
                                   : default_complex_dtype();
  }

  std::string repr() const;

 private:
  Kind kind_;
  union {
    int64_t i;
    double d;
    struct {
      double re, im;
    } c;
  } v_;
};

}  // namespace strata
