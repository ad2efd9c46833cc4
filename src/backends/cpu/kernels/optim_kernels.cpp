// CPU kernels of the fused optimizer steps (see ops/optim_kernels.h). One pass reads each element of the
// parameter, gradient and state once and writes the updated values back, in place of the ~10 whole-tensor
// passes (and temporaries) of the composed update. The arithmetic follows the composed update's order, in the
// parameter's own dtype, so fused and unfused steps agree to rounding. Compiled once per ISA level.
#include <algorithm>
#include <cmath>

#include "backends/cpu/loops.h"
#include "ops/optim_kernels.h"

namespace strata {
namespace cpu {
inline namespace STRATA_CPU_NS {
namespace {

// Weight decay folded into the loop at compile time, so each loop body is branch-free and vectorises.
enum WdMode : int { kNoWd = 0, kL2 = 1, kDecoupled = 2 };

template <typename T, int kWd, bool kAms>
void adam_range(T* __restrict p, const T* __restrict g, T* __restrict m, T* __restrict v, T* __restrict vmax,
                int64_t b, int64_t e, T sign, T wd, T decay, T w1, bool low, T b2, T w2, T bc2_sqrt, T eps,
                T neg_step_size) {
#pragma omp simd
  for (int64_t i = b; i < e; ++i) {
    T gi = g[i] * sign;
    T pi = p[i];
    if constexpr (kWd == kL2) gi += pi * wd;
    if constexpr (kWd == kDecoupled) pi *= decay;
    // torch's lerp: start + w * (end - start), or end - (end - start) * (1 - w) for w >= 0.5.
    const T mi = low ? m[i] + w1 * (gi - m[i]) : gi - (gi - m[i]) * (T(1) - w1);
    const T vi = v[i] * b2 + gi * gi * w2;
    T second = vi;
    if constexpr (kAms) {
      second = vmax[i] > vi ? vmax[i] : vi;
      vmax[i] = second;
    }
    const T denom = std::sqrt(second) / bc2_sqrt + eps;
    m[i] = mi;
    v[i] = vi;
    p[i] = pi + neg_step_size * (mi / denom);
  }
}

void adam_step_kernel(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                      const Tensor& max_exp_avg_sq, const optim::AdamHyper& h) {
  visit_float32_64(param.dtype(), "_fused_adam_step_", [&]<typename T>() {
    T* p = param.data_ptr<T>();
    const T* g = grad.data_ptr<T>();
    T* m = exp_avg.data_ptr<T>();
    T* v = exp_avg_sq.data_ptr<T>();
    T* vmax = max_exp_avg_sq.defined() ? max_exp_avg_sq.data_ptr<T>() : nullptr;
    // Scalars in double, as the composed update computes them in Python, then in T like its tensor ops.
    const double bc1 = 1 - std::pow(h.beta1, h.step);
    const T bc2_sqrt = static_cast<T>(std::sqrt(1 - std::pow(h.beta2, h.step)));
    const T neg_step_size = static_cast<T>(-(h.lr / bc1));
    const T w1 = static_cast<T>(1 - h.beta1), b2 = static_cast<T>(h.beta2), w2 = static_cast<T>(1 - h.beta2);
    const T wd = static_cast<T>(h.weight_decay), eps = static_cast<T>(h.eps);
    const T decay = static_cast<T>(1 - h.lr * h.weight_decay), sign = h.maximize ? T(-1) : T(1);
    const bool low = w1 < T(0.5);
    const int wd_mode = h.weight_decay == 0 ? kNoWd : (h.decoupled_weight_decay ? kDecoupled : kL2);
    auto run = [&]<int kWd, bool kAms>(int64_t b, int64_t e) {
      adam_range<T, kWd, kAms>(p, g, m, v, vmax, b, e, sign, wd, decay, w1, low, b2, w2, bc2_sqrt, eps,
                               neg_step_size);
    };
    parallel_for(0, param.numel(), kGrainSize, [&](int64_t b, int64_t e) {
      if (vmax) {
        if (wd_mode == kNoWd) run.template operator()<kNoWd, true>(b, e);
        else if (wd_mode == kL2) run.template operator()<kL2, true>(b, e);
        else run.template operator()<kDecoupled, true>(b, e);
      } else {
        if (wd_mode == kNoWd) run.template operator()<kNoWd, false>(b, e);
        else if (wd_mode == kL2) run.template operator()<kL2, false>(b, e);
        else run.template operator()<kDecoupled, false>(b, e);
      }
    });
  });
}

template <typename T, bool kWd, bool kMomentum>
void sgd_range(T* __restrict p, const T* __restrict g, T* __restrict bp, int64_t b, int64_t e, T sign, T wd, T mom,
               T damp, bool first, bool nesterov, T neg_lr) {
#pragma omp simd
  for (int64_t i = b; i < e; ++i) {
    T gi = g[i] * sign;
    const T pi = p[i];
    if constexpr (kWd) gi += pi * wd;
    if constexpr (kMomentum) {
      const T bi = first ? gi : bp[i] * mom + gi * damp;
      bp[i] = bi;
      gi = nesterov ? gi + bi * mom : bi;
    }
    p[i] = pi + gi * neg_lr;
  }
}

void sgd_step_kernel(const Tensor& param, const Tensor& grad, const Tensor& buf, const optim::SgdHyper& h) {
  visit_float32_64(param.dtype(), "_fused_sgd_step_", [&]<typename T>() {
    T* p = param.data_ptr<T>();
    const T* g = grad.data_ptr<T>();
    T* bp = buf.defined() ? buf.data_ptr<T>() : nullptr;
    const T neg_lr = static_cast<T>(-h.lr), mom = static_cast<T>(h.momentum);
    const T damp = static_cast<T>(1 - h.dampening), wd = static_cast<T>(h.weight_decay);
    const T sign = h.maximize ? T(-1) : T(1);
    const bool has_wd = h.weight_decay != 0, nesterov = h.nesterov, first = h.is_first_step;
    parallel_for(0, param.numel(), kGrainSize, [&](int64_t b, int64_t e) {
      if (bp) {
        if (has_wd) sgd_range<T, true, true>(p, g, bp, b, e, sign, wd, mom, damp, first, nesterov, neg_lr);
        else sgd_range<T, false, true>(p, g, bp, b, e, sign, wd, mom, damp, first, nesterov, neg_lr);
      } else {
        if (has_wd) sgd_range<T, true, false>(p, g, bp, b, e, sign, wd, mom, damp, first, nesterov, neg_lr);
        else sgd_range<T, false, false>(p, g, bp, b, e, sign, wd, mom, damp, first, nesterov, neg_lr);
      }
    });
  });
}

template <typename T, bool kWd>
void adagrad_range(T* __restrict p, const T* __restrict g, T* __restrict s, int64_t b, int64_t e, T sign, T wd,
                   T neg_clr, T eps) {
#pragma omp simd
  for (int64_t i = b; i < e; ++i) {
    T gi = g[i] * sign;
    const T pi = p[i];
    if constexpr (kWd) gi += pi * wd;
    const T si = s[i] + gi * gi;
    s[i] = si;
    p[i] = pi + neg_clr * (gi / (std::sqrt(si) + eps));
  }
}

void adagrad_step_kernel(const Tensor& param, const Tensor& grad, const Tensor& state_sum,
                         const optim::AdagradHyper& h) {
  visit_float32_64(param.dtype(), "_fused_adagrad_step_", [&]<typename T>() {
    T* p = param.data_ptr<T>();
    const T* g = grad.data_ptr<T>();
    T* s = state_sum.data_ptr<T>();
    const T neg_clr = static_cast<T>(-(h.lr / (1 + (h.step - 1) * h.lr_decay)));
    const T wd = static_cast<T>(h.weight_decay), eps = static_cast<T>(h.eps), sign = h.maximize ? T(-1) : T(1);
    const bool has_wd = h.weight_decay != 0;
    parallel_for(0, param.numel(), kGrainSize, [&](int64_t b, int64_t e) {
      if (has_wd) adagrad_range<T, true>(p, g, s, b, e, sign, wd, neg_clr, eps);
      else adagrad_range<T, false>(p, g, s, b, e, sign, wd, neg_clr, eps);
    });
  });
}

}  // namespace
}  // namespace STRATA_CPU_NS
}  // namespace cpu

STRATA_REGISTER_CPU_KERNEL(optim_adam_step_stub, cpu::adam_step_kernel);
STRATA_REGISTER_CPU_KERNEL(optim_sgd_step_stub, cpu::sgd_step_kernel);
STRATA_REGISTER_CPU_KERNEL(optim_adagrad_step_stub, cpu::adagrad_step_kernel);

}  // namespace strata
