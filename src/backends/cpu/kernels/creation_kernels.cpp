// arange / linspace / logspace. Compiled once per ISA level.
#include <cmath>

#include "backends/cpu/loops.h"
#include "ops/creation_common.h"

namespace strata {
namespace cpu {
inline namespace STRATA_CPU_NS {
namespace {

template <typename T>
void range_fill(T* __restrict o, int64_t n, const RangeParams& p) {
  if (p.kind == RangeParams::Arange) {
    if constexpr (std::is_integral_v<T>) {
      const int64_t s = p.istart, st = p.istep;
      parallel_for(0, n, kGrainSize, [&](int64_t b, int64_t e) {
#pragma omp simd
        for (int64_t i = b; i < e; ++i) o[i] = static_cast<T>(s + st * i);
      });
    } else {
      // torch accumulates float/double ranges in double and 16-bit ones in float.
      using Acc = std::conditional_t<is_reduced_float_v<T>, float, double>;
      const Acc s = static_cast<Acc>(p.start), st = static_cast<Acc>(p.step);
      parallel_for(0, n, kGrainSize, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) o[i] = static_cast<T>(s + st * static_cast<Acc>(i));
      });
    }
    return;
  }
  // linspace/logspace: the first half counts up from start, the second half
  // down from end, so both endpoints are exact. Floating types compute in
  // their own precision and integers with a double step, like torch.
  using Step = std::conditional_t<std::is_integral_v<T>, double, opmath_t<T>>;
  using Val = std::conditional_t<std::is_integral_v<T>, T, opmath_t<T>>;
  const Val s = std::is_integral_v<T> ? static_cast<Val>(p.istart) : static_cast<Val>(p.start);
  const Val e_ = std::is_integral_v<T> ? static_cast<Val>(p.iend) : static_cast<Val>(p.end);
  const int64_t steps = p.steps;
  const Step step = steps > 1 ? (static_cast<Step>(e_) - static_cast<Step>(s)) / static_cast<Step>(steps - 1) : Step(0);
  const int64_t half = steps / 2;
  const bool log = p.kind == RangeParams::Logspace;
  const Step base = static_cast<Step>(p.base);
  if (steps == 1) {
    o[0] = static_cast<T>(log ? std::pow(base, static_cast<Step>(s)) : static_cast<Step>(s));
    return;
  }
  parallel_for(0, n, kGrainSize, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      Step v = i < half ? static_cast<Step>(s) + step * static_cast<Step>(i)
                        : static_cast<Step>(e_) - step * static_cast<Step>(steps - i - 1);
      if (log) v = std::pow(base, v);
      o[i] = static_cast<T>(v);
    }
  });
}

void range_kernel(const Tensor& out, const RangeParams& p) {
  visit_dtype(out.dtype(), [&]<typename T>() {
    if constexpr (std::is_same_v<T, bool>) {
      throw NotImplementedError("arange/linspace: not implemented for 'Bool'");
    } else {
      range_fill<T>(out.data_ptr<T>(), out.numel(), p);
    }
  });
}

}  // namespace
}  // namespace STRATA_CPU_NS
}  // namespace cpu

STRATA_REGISTER_CPU_KERNEL(range_stub, cpu::range_kernel);

}  // namespace strata
