// The fused optimizer steps (decl/optim.def): argument checks, then one kernel pass per parameter.
#include <algorithm>

#include "ops/nn_util.h"
#include "ops/op_list.h"
#include "ops/optim_kernels.h"

namespace strata {

STRATA_DEFINE_STUB(optim_adam_step_stub, optim::AdamStepFn);
STRATA_DEFINE_STUB(optim_sgd_step_stub, optim::SgdStepFn);
STRATA_DEFINE_STUB(optim_adagrad_step_stub, optim::AdagradStepFn);

namespace optim {
namespace {

// The kernels walk every state tensor in lockstep with the parameter, so all must match it exactly: same
// shape and dtype, one device, contiguous. Optimizer state is created with zeros_like(param), so these hold
// for any state the optimizers build themselves.
Device check_group(const char* op, const Tensor& param, std::initializer_list<std::pair<const Tensor*, const char*>> ts) {
  STRATA_CHECK_TYPE(param.dtype() == ScalarType::Float32 || param.dtype() == ScalarType::Float64, op,
                    ": expected a float32 or float64 parameter, but got ", param.describe());
  std::vector<Tensor> all{param};
  for (auto [t, name] : ts) {
    if (!t->defined()) continue;
    STRATA_CHECK(std::ranges::equal(t->sizes(), param.sizes()), op, ": expected ", name,
                 " to have the parameter's shape ", param.shape_str(), ", but got ", t->shape_str());
    nn::check_same_dtype(op, param, "the parameter", *t, name);
    all.push_back(*t);
  }
  Device dev = common_device(all, op);
  if (dev.is_meta() || param.numel() == 0) return dev;  // nothing to touch (empty tensors may carry 0 strides)
  STRATA_CHECK(param.is_contiguous(), op, ": expected a contiguous parameter");
  for (auto [t, name] : ts)
    STRATA_CHECK(!t->defined() || t->is_contiguous(), op, ": expected ", name, " to be contiguous");
  return dev;
}

void bump(std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    if (t->defined()) t->bump_version();
}

Tensor adam_step_impl(const Tensor& self, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                      const std::optional<Tensor>& max_exp_avg_sq, double lr, double beta1, double beta2,
                      double weight_decay, double eps, double step, bool amsgrad, bool maximize,
                      bool decoupled_weight_decay) {
  const char* op = "_fused_adam_step_";
  Tensor vmax = nn::has(max_exp_avg_sq) ? *max_exp_avg_sq : Tensor();
  STRATA_CHECK(!amsgrad || vmax.defined(), op, ": amsgrad=True needs max_exp_avg_sq");
  STRATA_CHECK(step >= 1, op, ": expected step >= 1 (the count after this step), but got ", step);
  Device dev = check_group(op, self, {{&grad, "grad"}, {&exp_avg, "exp_avg"}, {&exp_avg_sq, "exp_avg_sq"},
                                      {&vmax, "max_exp_avg_sq"}});
  if (dev.is_meta() || self.numel() == 0) return self;
  AdamHyper h{lr, beta1, beta2, weight_decay, eps, step, amsgrad, maximize, decoupled_weight_decay};
  optim_adam_step_stub(dev.type, self, grad, exp_avg, exp_avg_sq, amsgrad ? vmax : Tensor(), h);
  bump({&self, &exp_avg, &exp_avg_sq, &vmax});
  return self;
}

Tensor sgd_step_impl(const Tensor& self, const Tensor& grad, const std::optional<Tensor>& momentum_buffer, double lr,
                     double momentum, double dampening, double weight_decay, bool nesterov, bool maximize,
                     bool is_first_step) {
  const char* op = "_fused_sgd_step_";
  Tensor buf = nn::has(momentum_buffer) ? *momentum_buffer : Tensor();
  STRATA_CHECK(momentum == 0 || buf.defined(), op, ": momentum != 0 needs a momentum_buffer");
  Device dev = check_group(op, self, {{&grad, "grad"}, {&buf, "momentum_buffer"}});
  if (dev.is_meta() || self.numel() == 0) return self;
  SgdHyper h{lr, momentum, dampening, weight_decay, nesterov, maximize, is_first_step};
  optim_sgd_step_stub(dev.type, self, grad, momentum != 0 ? buf : Tensor(), h);
  bump({&self, &buf});
  return self;
}

Tensor adagrad_step_impl(const Tensor& self, const Tensor& grad, const Tensor& state_sum, double lr, double lr_decay,
                         double weight_decay, double eps, double step, bool maximize) {
  const char* op = "_fused_adagrad_step_";
  STRATA_CHECK(step >= 1, op, ": expected step >= 1 (the count after this step), but got ", step);
  Device dev = check_group(op, self, {{&grad, "grad"}, {&state_sum, "state_sum"}});
  if (dev.is_meta() || self.numel() == 0) return self;
  AdagradHyper h{lr, lr_decay, weight_decay, eps, step, maximize};
  optim_adagrad_step_stub(dev.type, self, grad, state_sum, h);
  bump({&self, &state_sum});
  return self;
}

}  // namespace
}  // namespace optim

STRATA_IMPL_CPU_META(_fused_adam_step_, optim::adam_step_impl);
STRATA_IMPL_CPU_META(_fused_sgd_step_, optim::sgd_step_impl);
STRATA_IMPL_CPU_META(_fused_adagrad_step_, optim::adagrad_step_impl);

}  // namespace strata
