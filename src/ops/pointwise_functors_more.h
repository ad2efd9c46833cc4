// Scalar functors of the ops in decl/math_more.def (see Note [One scalar
// functor per pointwise op] in pointwise_functors.h).
//
// The special functions (lgamma, digamma, polygamma, erfinv, i0, i1,
// mvlgamma) work in double whatever the storage type, so float32 results are
// correctly rounded in practice and float64 results are within 1e-13
// (relative, or absolute near lgamma's zeros) of SciPy, most within a few
// ulps (tests/python/test_math_more.py measures it). lgamma and erfinv are
// branch-free (selects through `pick`, fixed trip counts) so the CPU loops
// vectorize them through libmvec; digamma, polygamma, i0 and i1 loop a
// data-dependent number of times (recurrences up to an asymptotic region,
// series to convergence) and stay scalar.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "ops/pointwise_functors.h"

namespace strata::fn {

namespace special {

constexpr double kPi = 3.14159265358979323846;
constexpr double kLogPi = 1.14472988584940017414;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// B_2j for j = 1..12 (Euler-Maclaurin and the asymptotic series below).
constexpr double kBernoulli[12] = {1.0 / 6,         -1.0 / 30,          1.0 / 42,        -1.0 / 30,
                                   5.0 / 66,        -691.0 / 2730,      7.0 / 6,         -3617.0 / 510,
                                   43867.0 / 798,   -174611.0 / 330,    854513.0 / 138,  -236364091.0 / 2730};

// psi(x): reflection for x < 0, the recurrence psi(x) = psi(x + 1) - 1/x up to
// x >= 10, then the asymptotic series ln x - 1/(2x) - sum B_2k / (2k x^2k).
inline double digamma(double x) {
  if (x == 0) return std::copysign(kInf, -x);  // the sign of the zero picks the side
  double r = 0;
  if (x < 0) {
    if (x == std::trunc(x)) return kNaN;  // poles (and -inf)
    // psi(x) = psi(1 - x) - pi / tan(pi x); reduce first so tan keeps its accuracy.
    double f = x - std::floor(x);
    r = -kPi / std::tan(kPi * f);
    x = 1 - x;
  }
  while (x < 10) {
    r -= 1 / x;
    x += 1;
  }
  if (x == kInf) return r + x;
  const double z = 1 / (x * x);
  double tail = 0;
  for (int j = 11; j >= 0; --j) tail = tail * z + kBernoulli[j] / (2 * (j + 1));
  return r + std::log(x) - 0.5 / x - z * tail;
}

// Hurwitz zeta(s, q) = sum_k (q + k)^-s for integer s >= 2: direct terms until
// a = q + N >= max(10, s), then Euler-Maclaurin with 12 Bernoulli terms.
inline double hurwitz_zeta(double s, double q) {
  double sum = 0;
  const double lim = std::max(10.0, s + 2);
  int64_t guard = 0;
  while (q < lim && guard++ < 100000) {
    if (q == 0 || (q < 0 && q == std::trunc(q))) return kInf;
    sum += std::pow(q, -s);
    q += 1;
  }
  const double as = std::pow(q, -s);
  sum += q * as / (s - 1) + 0.5 * as;
  double fact = 1, poch = s, apow = as / q;
  for (int j = 1; j <= 12; ++j) {
    fact *= (2.0 * j - 1) * (2.0 * j);
    const double term = kBernoulli[j - 1] / fact * poch * apow;
    sum += term;
    if (std::fabs(term) < 1e-17 * std::fabs(sum)) break;
    poch *= (s + 2 * j - 1) * (s + 2 * j);
    apow /= q * q;
  }
  return sum;
}

// psi'(x): reflection psi1(x) = pi^2 / sin^2(pi x) - psi1(1 - x) below 1/2,
// then the Hurwitz zeta sum (psi1(x) = zeta(2, x)).
inline double trigamma(double x) {
  if (x == kInf) return 0;
  if (x == -kInf) return kNaN;
  if (x == 0 || (x < 0 && x == std::trunc(x))) return kInf;
  if (x < 0.5) {
    const double sp = std::sin(kPi * (x - std::floor(x)));
    return kPi * kPi / (sp * sp) - hurwitz_zeta(2, 1 - x);
  }
  return hurwitz_zeta(2, x);
}

// psi^(n)(x) = (-1)^(n+1) n! zeta(n + 1, x).
inline double polygamma(int64_t n, double x) {
  if (n == 0) return digamma(x);
  if (n == 1) return trigamma(x);
  if (std::isnan(x)) return x;
  double fact = 1;  // n!, finite up to n = 170 (beyond, the result overflows anyway)
  for (int64_t k = 2; k <= n; ++k) fact *= static_cast<double>(k);
  return ((n % 2) ? 1.0 : -1.0) * fact * hurwitz_zeta(static_cast<double>(n) + 1, x);
}

// c ? a : b on bits. A plain ?: whose result feeds a call (log, erf) stops
// GCC from if-converting the loop, so it would not vectorize.
STRATA_HD double pick(bool c, double a, double b) {
  const uint64_t m = -static_cast<uint64_t>(c);
  return std::bit_cast<double>((std::bit_cast<uint64_t>(a) & m) | (std::bit_cast<uint64_t>(b) & ~m));
}

// log|Gamma(x)|: Stirling's series at y >= 10 (8 terms, error below 1e-17),
// reached from z < 10 by log Gamma(z) = log Gamma(z + 10) - log(z (z+1) ... (z+9)),
// and reflection log|Gamma(x)| = log(pi / |sin(pi x)|) - log Gamma(1 - x) below
// 1/2 (sin reduced by the nearest integer first, so it stays exact). Accuracy:
// 1e-14 relative, 5e-14 absolute (near the zeros at 1 and 2).
STRATA_HD double lgamma(double x) {
  const bool refl = x < 0.5;
  const double z = pick(refl, 1.0 - x, x);
  const bool small = z < 10;
  const double y = pick(small, z + 10, z);
  const double w = pick(small, z, 1.0);  // keeps the unused product finite
  const double p = (w * (w + 1)) * ((w + 2) * (w + 3)) * ((w + 4) * (w + 5)) * ((w + 6) * (w + 7)) * ((w + 8) * (w + 9));
  const double lp = pick(small, std::log(p), 0.0);
  const double iy = 1 / y, iy2 = iy * iy;
  // sum_k B_2k / (2k (2k - 1) y^(2k - 1)), k = 1..8
  const double series =
      iy * (1.0 / 12 - iy2 * (1.0 / 360 - iy2 * (1.0 / 1260 - iy2 * (1.0 / 1680 - iy2 * (1.0 / 1188 -
      iy2 * (691.0 / 360360 - iy2 * (1.0 / 156 - iy2 * (3617.0 / 122400))))))));
  constexpr double kHalfLog2Pi = 0.91893853320467274178;
  const double lg = (y - 0.5) * std::log(y) - y + kHalfLog2Pi + series - lp;
  const double f = x - std::nearbyint(x);
  const double lr = std::log(kPi / std::fabs(std::sin(kPi * f)));  // inf at the poles
  const double r = pick(std::fabs(x) == kInf, kInf, pick(refl, lr - lg, lg));
  return pick((x == 1.0) | (x == 2.0), 0.0, r);  // exact zeros, as libm's (the series leaves ~1e-15)
}

// Note [erfinv]
// erfinv(y) = y * P(w) with w = -log((1 - y)(1 + y)), two polynomials fitted
// (Chebyshev least squares against 40-digit references) to erfinv(y) / y:
// one in w over [0, 6.25] (|y| < 0.998), one in sqrt(w) over [6.25, 50] (the
// rest of the doubles below 1). Relative error below 1.4e-9, so a float result
// rounded from the double value is correctly rounded or one ulp off, with no
// erf evaluation. Both pieces are evaluated and picked, so loops vectorize.
// For double see erfinv(double) below: Halley steps on erf(x) = y, with the
// residual taken on erfc near |y| = 1, where 1 - |y| is exact.
STRATA_HD double erfinv_start(double ay, double w) {
  const double u = (w - 3.125) * 0.32;  // [0, 6.25] -> [-1, 1]
  double pc = 6.486168317092933e-07;
  pc = pc * u + 3.488664961211398e-06;
  pc = pc * u - 1.3011448094535957e-05;
  pc = pc * u - 9.811649339182441e-06;
  pc = pc * u + 9.468755888087135e-05;
  pc = pc * u - 0.00012076435463746322;
  pc = pc * u - 0.000264968239304665;
  pc = pc * u + 0.0012340421942486914;
  pc = pc * u - 0.001271553289227669;
  pc = pc * u - 0.0041376370586370175;
  pc = pc * u + 0.017808345079437102;
  pc = pc * u - 0.022604417861524905;
  pc = pc * u - 0.05892256632886658;
  pc = pc * u + 0.7504943192931673;
  pc = pc * u + 1.6536545626771808;
  // sqrt(w) in [2.5, sqrt(50)] -> [-1, 1]
  constexpr double s0 = 2.5, s1 = 7.0710678118654752440;
  const double v = (std::sqrt(w) - s0) * (2 / (s1 - s0)) - 1;
  double pt = -0.00010479412963105258;
  pt = pt * v + 0.0003966116843653477;
  pt = pt * v - 0.0002194512238959325;
  pt = pt * v - 0.0008451662562192045;
  pt = pt * v + 0.0012914870957900049;
  pt = pt * v - 0.0003703370565991231;
  pt = pt * v - 0.0001606846610648104;
  pt = pt * v - 0.0002889227444092391;
  pt = pt * v + 0.0005533253475562818;
  pt = pt * v - 0.0005356067607066117;
  pt = pt * v + 0.0008654418309054096;
  pt = pt * v - 0.0016522694929125246;
  pt = pt * v + 0.0027497178809721824;
  pt = pt * v - 0.0034659165582107037;
  pt = pt * v + 0.0001183941011742018;
  pt = pt * v + 2.3091368016262974;
  pt = pt * v + 4.633227118835222;
  return ay * pick(w <= 6.25, pc, pt);
}

// double: the fitted start (relative error 1.4e-9) and one Halley step, which
// is cubic, so the result is at double rounding error. The residual takes erf
// below |y| = 0.5 and erfc above it, one of the two only (a branch, not a pick:
// evaluating both costs a libm call per element, the bulk of the time).
STRATA_HD double erfinv(double y) {
  const double ay = std::fabs(y);
  constexpr double two_over_sqrt_pi = 1.12837916709551257390;
  double x = erfinv_start(ay, -std::log((1 - ay) * (1 + ay)));
  const double r = ay <= 0.5 ? std::erf(x) - ay : (1 - ay) - std::erfc(x);
  const double d = two_over_sqrt_pi * std::exp(-x * x);
  x -= r / (d + x * r);
  const double res = pick(ay == 1, kInf, x);  // the iteration gives nan there
  return pick(ay > 1, kNaN, std::copysign(res, y));
}

// float (and the 16-bit types, whose opmath is float): the start alone.
STRATA_HD float erfinv(float y) {
  const double ay = std::fabs(static_cast<double>(y));
  const double x = erfinv_start(ay, -std::log((1 - ay) * (1 + ay)));
  const double res = pick(ay == 1, kInf, x);
  return static_cast<float>(pick(ay > 1, kNaN, std::copysign(res, static_cast<double>(y))));
}

// Modified Bessel functions of the first kind, orders 0 and 1. Below 30 the
// power series (all terms positive, so no cancellation; it runs to
// convergence); above it the asymptotic expansion
// e^x / sqrt(2 pi x) * sum_k (-1)^k a_k(nu) / x^k.
inline double bessel_i_asymptotic(double x, double nu) {
  const double mu = 4 * nu * nu;
  double term = 1, sum = 1;
  for (int k = 1; k <= 40; ++k) {
    const double next = term * (mu - (2.0 * k - 1) * (2.0 * k - 1)) / (8.0 * k * x) * -1.0;
    if (std::fabs(next) >= std::fabs(term)) break;  // the expansion started to diverge
    term = next;
    sum += term;
    if (std::fabs(term) < 1e-17 * std::fabs(sum)) break;
  }
  const double h = std::exp(x / 2);  // e^x in two halves: finite a little further
  return h * (h / std::sqrt(2 * kPi * x)) * sum;
}
inline double i0(double x) {
  x = std::fabs(x);
  if (std::isnan(x)) return x;
  if (x > 30) return bessel_i_asymptotic(x, 0);
  const double q = x * x / 4;
  double term = 1, sum = 1;
  for (int k = 1; k < 500; ++k) {
    term *= q / (double(k) * k);
    sum += term;
    if (term < 1e-17 * sum) break;
  }
  return sum;
}
inline double i1(double x) {
  const double ax = std::fabs(x);
  if (std::isnan(x)) return x;
  double r;
  if (ax > 30) {
    r = bessel_i_asymptotic(ax, 1);
  } else {
    const double q = ax * ax / 4;
    double term = 1, sum = 1;
    for (int k = 1; k < 500; ++k) {
      term *= q / (double(k) * (k + 1));
      sum += term;
      if (term < 1e-17 * sum) break;
    }
    r = ax / 2 * sum;
  }
  return x < 0 ? -r : r;  // odd, and i1(-0) is +0 as in torch
}

}  // namespace special

// ---- unary, floating --------------------------------------------------------
#define STRATA_FLOAT_UNARY_MORE(Name, expr)            \
  struct Name {                                        \
    template <typename T>                              \
    STRATA_HD T operator()(T a) const { return expr; } \
  };
STRATA_FLOAT_UNARY_MORE(Acosh, std::acosh(a))
STRATA_FLOAT_UNARY_MORE(Asinh, std::asinh(a))
STRATA_FLOAT_UNARY_MORE(Atanh, std::atanh(a))
STRATA_FLOAT_UNARY_MORE(Deg2Rad, a * static_cast<T>(special::kPi / 180))
STRATA_FLOAT_UNARY_MORE(Rad2Deg, a * static_cast<T>(180 / special::kPi))
STRATA_FLOAT_UNARY_MORE(Frac, a - std::trunc(a))
STRATA_FLOAT_UNARY_MORE(Lgamma, static_cast<T>(special::lgamma(a)))
STRATA_FLOAT_UNARY_MORE(Digamma, static_cast<T>(special::digamma(a)))
STRATA_FLOAT_UNARY_MORE(Erfinv, static_cast<T>(special::erfinv(a)))
STRATA_FLOAT_UNARY_MORE(I0, static_cast<T>(special::i0(a)))
STRATA_FLOAT_UNARY_MORE(I1, static_cast<T>(special::i1(a)))
#undef STRATA_FLOAT_UNARY_MORE

// sin(pi x) / (pi x), 1 at 0.
struct Sinc {
  template <typename T>
  STRATA_HD T operator()(T a) const {
    const T px = a * static_cast<T>(special::kPi);
    return a == T(0) ? T(1) : std::sin(px) / px;
  }
};
// log(x / (1 - x)), with x first clamped to [eps, 1 - eps] when eps >= 0.
struct Logit {
  double eps;  // < 0: no clamping
  template <typename T>
  STRATA_HD T operator()(T a) const {
    if (eps >= 0) {
      const T lo = static_cast<T>(eps), hi = T(1) - static_cast<T>(eps);
      a = a < lo ? lo : (a > hi ? hi : a);  // a nan stays nan
    }
    return std::log(a / (T(1) - a));
  }
};
struct Polygamma {
  int64_t n;
  template <typename T>
  STRATA_HD T operator()(T a) const { return static_cast<T>(special::polygamma(n, a)); }
};
// Multivariate log-gamma: p(p-1)/4 log(pi) + sum_{j<p} lgamma(x - j/2).
struct Mvlgamma {
  int64_t p;
  template <typename T>
  STRATA_HD T operator()(T a) const {
    double r = static_cast<double>(p) * static_cast<double>(p - 1) / 4 * special::kLogPi;
    for (int64_t j = 0; j < p; ++j) r += special::lgamma(static_cast<double>(a) - 0.5 * static_cast<double>(j));
    return static_cast<T>(r);
  }
};

// ---- unary -> bool ------------------------------------------------------------
struct SignBit {
  template <typename T>
  STRATA_HD bool operator()(T a) const {
    // The sign bit read directly (std::signbit inside an omp simd loop over
    // bfloat16 crashes GCC 12's vectorizer).
    if constexpr (std::is_same_v<T, float>) return (std::bit_cast<uint32_t>(a) >> 31) != 0;
    else if constexpr (std::is_same_v<T, double>) return (std::bit_cast<uint64_t>(a) >> 63) != 0;
    else if constexpr (std::is_signed_v<T>) return a < 0;
    else return false;
  }
};

// ---- binary -------------------------------------------------------------------
struct Hypot {
  template <typename T>
  STRATA_HD T operator()(T a, T b) const { return std::hypot(a, b); }
};
// log(e^a + e^b) as max + log1p(e^-|a - b|); equal infinities return themselves
// (the difference would be nan).
struct LogAddExp {
  template <typename T>
  STRATA_HD T operator()(T a, T b) const {
    if (a == b) return a + static_cast<T>(0.69314718055994530942);
    const T m = a > b ? a : b;
    return m + std::log1p(std::exp(-std::fabs(a - b)));
  }
};
struct LogAddExp2 {
  template <typename T>
  STRATA_HD T operator()(T a, T b) const {
    if (a == b) return a + T(1);
    const T m = a > b ? a : b;
    return m + std::log1p(std::exp2(-std::fabs(a - b))) * static_cast<T>(1.44269504088896340736);
  }
};
// x * log(y), 0 where x == 0 unless y is nan.
struct Xlogy {
  template <typename T>
  STRATA_HD T operator()(T a, T b) const {
    if (b != b) return b;
    return a == T(0) ? T(0) : a * std::log(b);
  }
};
struct Heaviside {
  template <typename T>
  STRATA_HD T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>) return a ? true : b;  // a bool is never negative
    else return a == T(0) ? b : static_cast<T>(a > T(0));
  }
};
struct Copysign {
  template <typename T>
  STRATA_HD T operator()(T a, T b) const { return std::copysign(a, b); }
};

// ---- ternary --------------------------------------------------------------------
// self + value * t1 * t2 (value cast to the computation type first, as torch
// does: an integer addcmul truncates a float value).
struct Addcmul {
  double value;
  template <typename T>
  STRATA_HD T operator()(T a, T b, T c) const {
    if constexpr (std::is_same_v<T, bool>) return a || (value != 0 && b && c);
    else return static_cast<T>(a + static_cast<T>(value) * b * c);
  }
};
struct Addcdiv {
  double value;
  template <typename T>
  STRATA_HD T operator()(T a, T b, T c) const { return a + static_cast<T>(value) * b / c; }
};

}  // namespace strata::fn
