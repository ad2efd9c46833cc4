// Scalar functors of the activation functions, written once on the compute
// type (float for 16-bit floats) like ops/pointwise_functors.h, so that the CPU
// loops, a device kernel or the fusion code generator can share them.
#pragma once

#include <cmath>
#include <type_traits>

#include "ops/pointwise_functors.h"

namespace strata::fn {

// NaN propagates (torch.relu(nan) is nan).
struct Relu {
  template <typename T>
  STRATA_HD T operator()(T a) const {
    if constexpr (std::is_floating_point_v<T>) return (a != a || a > T(0)) ? a : T(0);
    else return a > T(0) ? a : T(0);
  }
};
struct GeluErf {
  template <typename T>
  STRATA_HD T operator()(T a) const { return T(0.5) * a * (T(1) + std::erf(a * T(0.70710678118654752440))); }
};
struct GeluTanh {
  template <typename T>
  STRATA_HD T operator()(T a) const {
    const T k = T(0.79788456080286535588);  // sqrt(2 / pi)
    return T(0.5) * a * (T(1) + std::tanh(k * (a + T(0.044715) * a * a * a)));
  }
};
struct Silu {
  template <typename T>
  STRATA_HD T operator()(T a) const { return a / (T(1) + std::exp(-a)); }
};
struct Mish {
  template <typename T>
  STRATA_HD T operator()(T a) const { return a * std::tanh(a > T(20) ? a : std::log1p(std::exp(a))); }
};
// Linear above threshold (in units of beta * x), where log1p(exp) would only
// lose precision or overflow.
struct Softplus {
  double beta, threshold;
  template <typename T>
  STRATA_HD T operator()(T a) const {
    T b = static_cast<T>(beta);
    return a * b > static_cast<T>(threshold) ? a : std::log1p(std::exp(a * b)) / b;
  }
};
struct LeakyRelu {
  double slope;
  template <typename T>
  STRATA_HD T operator()(T a) const { return a > T(0) ? a : a * static_cast<T>(slope); }
};
struct Elu {
  double alpha, scale, input_scale;
  template <typename T>
  STRATA_HD T operator()(T a) const {
    return a <= T(0) ? std::expm1(a * static_cast<T>(input_scale)) * static_cast<T>(alpha * scale)
                     : a * static_cast<T>(scale);
  }
};
// Comparisons are false for NaN, so NaN passes through like torch's clamp.
struct Hardtanh {
  double lo, hi;
  template <typename T>
  STRATA_HD T operator()(T a) const {
    return a < static_cast<T>(lo) ? static_cast<T>(lo) : (a > static_cast<T>(hi) ? static_cast<T>(hi) : a);
  }
};
struct Hardsigmoid {
  template <typename T>
  STRATA_HD T operator()(T a) const {
    T r = a + T(3);
    r = r < T(0) ? T(0) : (r > T(6) ? T(6) : r);
    return r / T(6);
  }
};
struct Hardswish {
  template <typename T>
  STRATA_HD T operator()(T a) const {
    T r = a + T(3);
    r = r < T(0) ? T(0) : (r > T(6) ? T(6) : r);
    return a * r / T(6);
  }
};
// log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)): no overflow for either sign.
struct LogSigmoid {
  template <typename T>
  STRATA_HD T operator()(T a) const { return (a < T(0) ? a : T(0)) - std::log1p(std::exp(-std::fabs(a))); }
};
// Elementwise binary_cross_entropy_with_logits:
// (1 - t) x + (1 + (pw - 1) t) (log1p(exp(-|x|)) + max(-x, 0)).
struct BceWithLogits {
  template <typename T>
  STRATA_HD T operator()(T x, T t, T pw) const {
    T lw = (pw - T(1)) * t + T(1);
    return (T(1) - t) * x + lw * (std::log1p(std::exp(-std::fabs(x))) + (x < T(0) ? -x : T(0)));
  }
};
// Elementwise binary_cross_entropy; the logs are clamped at -100 like torch.
struct Bce {
  template <typename T>
  STRATA_HD T operator()(T x, T t) const {
    T lx = std::log(x), l1x = std::log1p(-x);
    lx = lx < T(-100) ? T(-100) : lx;
    l1x = l1x < T(-100) ? T(-100) : l1x;
    return (t - T(1)) * l1x - t * lx;
  }
};

}  // namespace strata::fn
