// More samplers over the CPU generator: log_normal_, cauchy_, geometric_,
// poisson and binomial. Each reproduces torch's CPU stream for the same seed
// (see Note [CPU random streams] in core/generator.h): the same words drawn in
// the same order, transformed with the same arithmetic in the same precision.
//
// All of them are serial samplers in torch (one element after the other, some
// with a data-dependent number of draws), so they run serially here too, in
// the order torch visits the output. Compiled with -ffp-contract=off (see
// CMakeLists.txt): where torch's build fuses a multiply-add, std::fma says so.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/shape.h"
#include "ops/creation_common.h"
#include "ops/ops.h"

namespace strata {
namespace {

// A uniform double in [0, 1) from the low 53 bits of a 64-bit draw, as all of
// these samplers use.
double uniform53(CPUGenerator& g) {
  return static_cast<double>(g.random64() & ((uint64_t(1) << 53) - 1)) * 0x1.0p-53;
}

// The order in which torch's iterator visits an in-place output: dimensions
// sorted by stride, the largest outermost (size-1 ones last, they do not
// matter). The same permutation as random.cpp's fills use.
std::vector<int64_t> visit_order(const Tensor& self) {
  std::vector<int64_t> perm, ones;
  for (int64_t d = 0; d < self.dim(); ++d) (self.size(d) == 1 ? ones : perm).push_back(d);
  std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) { return self.stride(a) > self.stride(b); });
  perm.insert(perm.end(), ones.begin(), ones.end());
  return perm;
}

// double -> T as torch's kernels convert their double samples: 16-bit floats
// through float (their constructors take a float); integers narrower than 32
// bits through int32, as x86 converts them, so that a sample too large for
// the type wraps as it does in torch (and the conversion stays defined).
template <typename T>
T from_double(double v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) return static_cast<T>(static_cast<float>(v));
  else if constexpr (std::is_integral_v<T> && sizeof(T) < 4) return static_cast<T>(static_cast<int32_t>(v));
  else return static_cast<T>(v);
}

// Fills self in torch's visiting order with sample(g), one element after the
// other, under the generator's lock. `allow_integral` admits integer outputs.
template <typename F>
const Tensor& serial_fill(const Tensor& self, OptInt gen, const char* kernel, bool allow_integral, const F& sample) {
  ScalarType dt = self.dtype();
  bool ok = is_floating_type(dt) || (allow_integral && dt != ScalarType::Bool);
  if (!ok) throw NotImplementedError(str("\"", kernel, "\" not implemented for '", dtype_name(dt), "'"));
  for (int64_t d = 0; d < self.dim(); ++d) {
    STRATA_CHECK(self.stride(d) != 0 || self.size(d) <= 1,
                 "unsupported operation: more than one element of the written-to tensor refers to a single memory "
                 "location. Please clone() the tensor before performing the operation.");
  }
  if (self.device().is_meta() || self.numel() == 0) return self;
  bool direct = self.is_contiguous();
  Tensor view = direct ? self : permute(self, visit_order(self));
  Tensor buf = direct ? self : empty_tensor(view.sizes(), dt, self.device());
  visit_dtype(dt, [&]<typename T>() {
    if constexpr (!std::is_same_v<T, bool>) {
      T* o = buf.data_ptr<T>();
      int64_t n = buf.numel();
      GeneratorGuard g(gen);
      for (int64_t i = 0; i < n; ++i) o[i] = from_double<T>(sample(*g));
    }
  });
  if (!direct) copy_(view, buf, false);
  self.bump_version();
  return self;
}

// The scalar Box-Muller normal torch's per-element samplers share with
// normal_: two uniforms make two normals, the second cached in the generator.
double scalar_normal(CPUGenerator& g, double mean, double sd) {
  double z;
  if (g.next_double_normal) {
    z = *g.next_double_normal;
    g.next_double_normal.reset();
  } else {
    double u1 = uniform53(g);
    double u2 = uniform53(g);
    double r = std::sqrt(-2.0 * std::log1p(-u2));
    double theta = 2.0 * std::numbers::pi * u1;
    g.next_double_normal = r * std::sin(theta);
    z = r * std::cos(theta);
  }
  return std::fma(z, sd, mean);
}

Tensor log_normal_impl(const Tensor& self, double mean, double std, OptInt gen) {
  STRATA_CHECK(std > 0.0, "log_normal_ expects std > 0.0, but found std=", std);
  return serial_fill(self, gen, "log_normal_cpu", false,
                     [=](CPUGenerator& g) { return std::exp(scalar_normal(g, mean, std)); });
}
STRATA_IMPL_CPU_META(log_normal_, log_normal_impl);

Tensor cauchy_impl(const Tensor& self, double median, double sigma, OptInt gen) {
  STRATA_CHECK(is_floating_type(self.dtype()), "Cauchy distribution is a continuous probability distribution. dtype "
               "must be a floating point but you specified ", dtype_name(self.dtype()));
  STRATA_CHECK(sigma > 0.0, "cauchy_ expects sigma > 0.0, but found sigma=", sigma);
  // The inverse CDF: median + sigma tan(pi (u - 1/2)).
  return serial_fill(self, gen, "cauchy_cpu", false, [=](CPUGenerator& g) {
    return std::fma(sigma, std::tan(std::numbers::pi * (uniform53(g) - 0.5)), median);
  });
}
STRATA_IMPL_CPU_META(cauchy_, cauchy_impl);

Tensor geometric_impl(const Tensor& self, double p, OptInt gen) {
  STRATA_CHECK(p > 0 && p < 1, "geometric_ expects p to be in (0, 1), but got p=", p);
  // The number of trials up to the first success: ceil(log u / log(1 - p)).
  const double denom = std::log1p(-p);
  return serial_fill(self, gen, "geometric_cpu", true,
                     [=](CPUGenerator& g) { return std::ceil(std::log(uniform53(g)) / denom); });
}
STRATA_IMPL_CPU_META(geometric_, geometric_impl);

// ---- poisson ---------------------------------------------------------------

// One Poisson(lambda) sample. Below a rate of 10: count uniforms until their
// running product drops to exp(-lambda) or below. From 10 on: Hoermann's
// transformed rejection with squeeze (PTRS, 1993), in double precision.
int64_t poisson_sample(double lambda, CPUGenerator& g) {
  STRATA_CHECK(lambda >= 0, "invalid Poisson rate, expected rate to be non-negative");
  if (lambda >= 10) {
    const double slam = std::sqrt(lambda);
    const double loglam = std::log(lambda);
    const double b = 0.931 + 2.53 * slam;
    const double a = -0.059 + 0.02483 * b;
    const double inv_alpha = 1.1239 + 1.1328 / (b - 3.4);
    const double v_r = 0.9277 - 3.6224 / (b - 2);
    for (;;) {
      double u = uniform53(g) - 0.5;
      double v = uniform53(g);
      double us = 0.5 - std::fabs(u);
      int64_t k = static_cast<int64_t>(std::floor((2 * a / us + b) * u + lambda + 0.43));
      if (us >= 0.07 && v <= v_r) return k;  // inside the squeeze
      if (k < 0 || (us < 0.013 && v > us)) continue;
      double lhs = std::log(v) + std::log(inv_alpha) - std::log(a / (us * us) + b);
      double rhs = -lambda + static_cast<double>(k) * loglam - std::lgamma(static_cast<double>(k) + 1);
      if (lhs <= rhs) return k;
    }
  }
  if (lambda == 0) return 0;
  const double threshold = std::exp(-lambda);
  int64_t count = 0;
  double prod = 1.0;
  for (;;) {
    prod *= uniform53(g);
    if (prod <= threshold) return count;
    ++count;
  }
}

Tensor poisson_impl(const Tensor& rates, OptInt gen) {
  if (!is_floating_type(rates.dtype())) {
    throw NotImplementedError(str("\"poisson_cpu\" not implemented for '", dtype_name(rates.dtype()), "'"));
  }
  Tensor out = empty_tensor(rates.sizes(), rates.dtype(), rates.device());
  if (rates.device().is_meta() || out.numel() == 0) return out;
  // The output is contiguous, so torch visits the rates in row-major order.
  Tensor r = contiguous(to_dtype(rates, ScalarType::Float64));
  const double* R = r.data_ptr<double>();
  visit_dtype(out.dtype(), [&]<typename T>() {
    if constexpr (is_float_v<T>) {
      T* o = out.data_ptr<T>();
      GeneratorGuard g(gen);
      for (int64_t i = 0; i < out.numel(); ++i) o[i] = from_double<T>(static_cast<double>(poisson_sample(R[i], *g)));
    }
  });
  return out;
}
STRATA_IMPL_CPU_META(poisson, poisson_impl);

// ---- binomial --------------------------------------------------------------
// torch's sampler works in the tensors' dtype T (float or double) with double
// accumulators; which operations run in T matters for equal streams, so the
// types below are spelled out.

// log(k!) - (log sqrt(2 pi) + (k + 1/2) log(k + 1) - (k + 1)): the error of
// Stirling's formula, tabulated for k < 10 and by its series beyond.
double stirling_tail(double k) {
  static constexpr double kTail[10] = {0.0810614667953272,  0.0413406959554092,  0.0276779256849983,
                                       0.02079067210376509, 0.0166446911898211,  0.0138761288230707,
                                       0.0118967099458917,  0.0104112652619720,  0.00925546218271273,
                                       0.00833056343336287};
  if (k <= 9) return kTail[static_cast<size_t>(k)];
  double kp1sq = (k + 1) * (k + 1);
  return (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (k + 1);
}

// Inversion by geometric waiting times (for count * p < 10): the number of
// successes is how many Geometric(p) gaps fit in `count` trials.
template <typename T>
T binomial_inversion(T count, T prob, CPUGenerator& g) {
  const double logq = static_cast<double>(std::log1p(-prob));  // in T
  double gap_sum = 0;
  T successes = 0;
  for (;;) {
    gap_sum += std::ceil(std::log(uniform53(g)) / logq);
    if (gap_sum > static_cast<double>(count)) return successes;
    successes = successes + 1;
  }
}

// Hoermann's BTRS transformed rejection (1993), for count * p >= 10.
template <typename T>
T binomial_btrs(T count, T prob, CPUGenerator& g) {
  const double stddev = static_cast<double>(std::sqrt(count * prob * (1 - prob)));  // in T
  const double b = 1.15 + 2.53 * stddev;
  const double a = -0.0873 + 0.0248 * b + 0.01 * static_cast<double>(prob);
  const double c = static_cast<double>(count * prob) + 0.5;
  const double v_r = 0.92 - 4.2 / b;
  const double r = static_cast<double>(prob / (1 - prob));
  const double alpha = (2.83 + 5.1 / b) * stddev;
  const double m = static_cast<double>(std::floor((count + 1) * prob));  // in T
  const double n = static_cast<double>(count);
  for (;;) {
    double u = uniform53(g) - 0.5;
    double v = uniform53(g);
    double us = 0.5 - std::fabs(u);
    T k = static_cast<T>(std::floor((2 * a / us + b) * u + c));
    if (k < 0 || k > count) continue;
    if (us >= 0.07 && v <= v_r) return k;  // inside the squeeze
    const double kd = static_cast<double>(k);
    const double n_k1 = static_cast<double>(count - k + 1);  // in T
    v = std::log(v * alpha / (a / (us * us) + b));
    double bound = (m + 0.5) * std::log((m + 1) / (r * (n - m + 1))) +
                   static_cast<double>(count + 1) * std::log((n - m + 1) / n_k1) +
                   (kd + 0.5) * std::log(r * n_k1 / static_cast<double>(k + 1)) + stirling_tail(m) +
                   stirling_tail(n - m) - stirling_tail(kd) - stirling_tail(static_cast<double>(count - k));
    if (v <= bound) return k;
  }
}

template <typename T>
T binomial_sample(T count, T prob, CPUGenerator& g) {
  if (count <= 0 || prob <= 0) return 0;
  if (prob >= 1) return count;
  if (prob <= T(0.5)) {
    return count * prob >= T(10) ? binomial_btrs(count, prob, g) : binomial_inversion(count, prob, g);
  }
  if (prob > T(0.5)) {
    // Sample the failures, the rarer outcome.
    const T q = static_cast<T>(1.0 - static_cast<double>(prob));
    return count - (count * q >= T(10) ? binomial_btrs(count, q, g) : binomial_inversion(count, q, g));
  }
  return std::numeric_limits<T>::quiet_NaN();  // prob is NaN
}

Tensor binomial_impl(const Tensor& count, const Tensor& prob, OptInt gen) {
  STRATA_CHECK_VALUE(is_floating_type(count.dtype()), "binomial only supports floating-point dtypes for count, got: ",
                     dtype_name(count.dtype()));
  STRATA_CHECK_VALUE(is_floating_type(prob.dtype()), "binomial only supports floating-point dtypes for prob, got: ",
                     dtype_name(prob.dtype()));
  STRATA_CHECK(count.dtype() == prob.dtype(), "binomial: Found dtype ", dtype_name(prob.dtype()), " but expected ",
               dtype_name(count.dtype()));
  if (count.dtype() != ScalarType::Float32 && count.dtype() != ScalarType::Float64) {
    throw NotImplementedError(str("\"binomial_cpu\" not implemented for '", dtype_name(count.dtype()), "'"));
  }
  DimVector shape = broadcast_shapes(count.sizes(), prob.sizes(), "binomial");
  bool meta = count.device().is_meta() || prob.device().is_meta();
  Tensor out = empty_tensor(shape, count.dtype(), meta ? Device(DeviceType::Meta) : count.device());
  if (meta || out.numel() == 0) return out;
  Tensor c = contiguous(expand(count, shape));
  Tensor p = contiguous(expand(prob, shape));
  visit_dtype(out.dtype(), [&]<typename T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      const T* C = c.data_ptr<T>();
      const T* P = p.data_ptr<T>();
      const int64_t n = out.numel();
      // An infinite or NaN count never fills with waiting times (torch loops
      // forever there): refuse it up front.
      for (int64_t i = 0; i < n; ++i) {
        STRATA_CHECK(std::isfinite(static_cast<double>(C[i])) || !(P[i] > 0 && P[i] < 1),
                     "binomial: count must be finite where 0 < prob < 1, got count=", static_cast<double>(C[i]));
      }
      T* o = out.data_ptr<T>();
      GeneratorGuard g(gen);
      for (int64_t i = 0; i < n; ++i) o[i] = binomial_sample<T>(C[i], P[i], *g);
    }
  });
  return out;
}
STRATA_IMPL_CPU_META(binomial, binomial_impl);

}  // namespace
}  // namespace strata
