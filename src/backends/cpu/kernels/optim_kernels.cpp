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

// torch's lerp: start + w * (end - start), or end - (end - start) * (1 - w) for w >= 0.5.
template <typename T>
inline T lerp(T start, T end, T w) {
  return w < T(0.5) ? start + w * (end - start) : end - (end - start) * (T(1) - w);
}

void adam_step_kernel(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                      const Tensor& max_exp_avg_sq, const optim::AdamHyper& h) {
  visit_float32_64(param.dtype(), "_fused_adam_step_", [&]<typename T>() {
    T* __restrict p = param.data_ptr<T>();
    const T* __restrict g = grad.data_ptr<T>();
    T* __restrict m = exp_avg.data_ptr<T>();
    T* __restrict v = exp_avg_sq.data_ptr<T>();
    T* __restrict vmax = max_exp_avg_sq.defined() ? max_exp_avg_sq.data_ptr<T>() : nullptr;
    // Scalars in double, as the composed update computes them in Python, then in T like its tensor ops.
    const double bc1 = 1 - std::pow(h.beta1, h.step);
    const double bc2_sqrt = std::sqrt(1 - std::pow(h.beta2, h.step));
    const T step_size = static_cast<T>(h.lr / bc1), inv_bc2 = static_cast<T>(bc2_sqrt);
    const T w1 = static_cast<T>(1 - h.beta1), b2 = static_cast<T>(h.beta2), w2 = static_cast<T>(1 - h.beta2);
    const T wd = static_cast<T>(h.weight_decay), eps = static_cast<T>(h.eps);
    const T decay = static_cast<T>(1 - h.lr * h.weight_decay);
    const bool has_wd = h.weight_decay != 0, decoupled = h.decoupled_weight_decay, neg = h.maximize;
    parallel_for(0, param.numel(), kGrainSize, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        T gi = neg ? -g[i] : g[i];
        T pi = p[i];
        if (has_wd) {
          if (decoupled) pi *= decay;
          else gi += pi * wd;
        }
        const T mi = lerp(m[i], gi, w1);
        const T vi = v[i] * b2 + gi * gi * w2;
        T second = vi;
        if (vmax) {
          second = std::max(vmax[i], vi);
          vmax[i] = second;
        }
        const T denom = std::sqrt(second) / inv_bc2 + eps;
        m[i] = mi;
        v[i] = vi;
        p[i] = pi + (-step_size) * (mi / denom);
      }
    });
  });
}

void sgd_step_kernel(const Tensor& param, const Tensor& grad, const Tensor& buf, const optim::SgdHyper& h) {
  visit_float32_64(param.dtype(), "_fused_sgd_step_", [&]<typename T>() {
    T* __restrict p = param.data_ptr<T>();
    const T* __restrict g = grad.data_ptr<T>();
    T* __restrict bp = buf.defined() ? buf.data_ptr<T>() : nullptr;
    const T lr = static_cast<T>(h.lr), mom = static_cast<T>(h.momentum);
    const T damp = static_cast<T>(1 - h.dampening), wd = static_cast<T>(h.weight_decay);
    const bool has_wd = h.weight_decay != 0, neg = h.maximize, nesterov = h.nesterov, first = h.is_first_step;
    parallel_for(0, param.numel(), kGrainSize, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        T gi = neg ? -g[i] : g[i];
        const T pi = p[i];
        if (has_wd) gi += pi * wd;
        if (bp) {
          const T bi = first ? gi : bp[i] * mom + gi * damp;
          bp[i] = bi;
          gi = nesterov ? gi + bi * mom : bi;
        }
        p[i] = pi + gi * (-lr);
      }
    });
  });
}

void adagrad_step_kernel(const Tensor& param, const Tensor& grad, const Tensor& state_sum,
                         const optim::AdagradHyper& h) {
  visit_float32_64(param.dtype(), "_fused_adagrad_step_", [&]<typename T>() {
    T* __restrict p = param.data_ptr<T>();
    const T* __restrict g = grad.data_ptr<T>();
    T* __restrict s = state_sum.data_ptr<T>();
    const T clr = static_cast<T>(h.lr / (1 + (h.step - 1) * h.lr_decay));
    const T wd = static_cast<T>(h.weight_decay), eps = static_cast<T>(h.eps);
    const bool has_wd = h.weight_decay != 0, neg = h.maximize;
    parallel_for(0, param.numel(), kGrainSize, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        T gi = neg ? -g[i] : g[i];
        const T pi = p[i];
        if (has_wd) gi += pi * wd;
        const T si = s[i] + gi * gi;
        s[i] = si;
        p[i] = pi + (-clr) * (gi / (std::sqrt(si) + eps));
      }
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
