// Scalar functors of the fused activation backwards, grad_input = grad * f'(.),
// written once on the compute type (float for 16-bit floats) like
// ops/nn_functors.h. The arithmetic follows PyTorch's kernels term by term so
// that float32 gradients round the same way.
#pragma once

#include <cmath>

#include "ops/pointwise_functors.h"

namespace strata::fn {

// relu / threshold: the gradient passes where self > threshold. NaN compares
// false, so it passes there too (as in torch).
struct ThresholdBackward {
  double threshold;
  template <typename T>
  STRATA_HD T operator()(T g, T x) const { return x <= static_cast<T>(threshold) ? T(0) : g; }
};
// d/dx x Phi(x) = Phi(x) + x phi(x)
struct GeluErfBackward {
  template <typename T>
  STRATA_HD T operator()(T g, T x) const {
    T cdf = T(0.5) * (T(1) + std::erf(x * T(0.70710678118654752440)));
    T pdf = std::exp(T(-0.5) * x * x) * T(0.39894228040143267794);  // 1 / sqrt(2 pi)
    return g * (cdf + x * pdf);
  }
};
// d/dx 0.5 x (1 + tanh(u)), u = k (x + kappa x^3)
struct GeluTanhBackward {
  template <typename T>
  STRATA_HD T operator()(T g, T x) const {
    const T k = T(0.79788456080286535588), kappa = T(0.044715);  // sqrt(2 / pi)
    T x2 = x * x;
    T t = std::tanh(k * (x + kappa * x2 * x));
    T left = T(0.5) * x;
    T right = T(1) + t;
    T dinner = k * (T(1) + T(3) * kappa * x2);
    return g * (T(0.5) * right + left * (T(1) - t * t) * dinner);
  }
};
// d/dx x s(x) = s (1 + x (1 - s))
struct SiluBackward {
  template <typename T>
  STRATA_HD T operator()(T g, T x) const {
    T s = T(1) / (T(1) + std::exp(-x));
    return g * s * (T(1) + x * (T(1) - s));
  }
};
// In terms of the forward's output y.
struct SigmoidBackward {
  template <typename T>
  STRATA_HD T operator()(T g, T y) const { return g * (T(1) - y) * y; }
};
struct TanhBackward {
  template <typename T>
  STRATA_HD T operator()(T g, T y) const { return g * (T(1) - y * y); }
};

}  // namespace strata::fn
