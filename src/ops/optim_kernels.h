// Contracts of the fused optimizer-step kernels (decl/optim.def). Every tensor handed to a kernel is
// contiguous, of one floating dtype (float32 or float64) and of the parameter's shape; the op
// implementation (ops/optim_fused.cpp) checks all of that first. Optional state is an undefined Tensor.
#pragma once

#include "core/tensor.h"
#include "ops/stub.h"

namespace strata::optim {

struct AdamHyper {
  double lr, beta1, beta2, weight_decay, eps, step;
  bool amsgrad, maximize, decoupled_weight_decay;
};
struct SgdHyper {
  double lr, momentum, dampening, weight_decay;
  bool nesterov, maximize, is_first_step;
};
struct AdagradHyper {
  double lr, lr_decay, weight_decay, eps, step;
  bool maximize;
};

using AdamStepFn = void (*)(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                            const Tensor& max_exp_avg_sq, const AdamHyper& h);
using SgdStepFn = void (*)(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SgdHyper& h);
using AdagradStepFn = void (*)(const Tensor& param, const Tensor& grad, const Tensor& state_sum,
                               const AdagradHyper& h);

}  // namespace strata::optim

namespace strata {
STRATA_DECLARE_STUB(optim_adam_step_stub, optim::AdamStepFn);
STRATA_DECLARE_STUB(optim_sgd_step_stub, optim::SgdStepFn);
STRATA_DECLARE_STUB(optim_adagrad_step_stub, optim::AdagradStepFn);
}  // namespace strata
