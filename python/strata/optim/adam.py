"""strata.optim.Adam (torch.optim.Adam), with optional AMSGrad and decoupled weight decay."""

from .. import _C
from .._creation import zeros_like
from .._functions import maximum
from .optimizer import Optimizer, _grad_of, _use_grad
from ._functional import check_adam_args, addcmul_, addcdiv_, scalar, new_step, check_fused, check_capturable, check_fused_param, bump_step, fused_kernel, fusable

__all__ = ["Adam"]

_fused_adam_step_ = fused_kernel("_fused_adam_step_")


class Adam(Optimizer):
    """``m = b1*m + (1-b1)*g``, ``v = b2*v + (1-b2)*g*g``,
    ``p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)`` (AMSGrad uses the running max of ``v``).
    ``weight_decay`` adds ``wd*p`` to ``g``, or with ``decoupled_weight_decay`` scales ``p`` by
    ``1 - lr*wd`` first (AdamW)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *,
                 foreach=None, maximize=False, capturable=False, differentiable=False, fused=None,
                 decoupled_weight_decay=False):
        check_adam_args(lr, betas, eps, weight_decay)
        check_fused(fused, foreach, differentiable)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad, maximize=maximize,
                        foreach=foreach, capturable=capturable, differentiable=differentiable, fused=fused,
                        decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    _group_defaults = dict(amsgrad=False, maximize=False, decoupled_weight_decay=False)

    @_use_grad
    def step(self):
        for group in self.param_groups:
            check_capturable(group)
            lr = scalar(group["lr"])
            beta1, beta2 = (scalar(b) for b in group["betas"])
            eps, weight_decay, amsgrad = group["eps"], group["weight_decay"], group["amsgrad"]
            fused = _fused_adam_step_ if group.get("fused") else None
            for p in group["params"]:
                grad = _grad_of(p)
                if grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    if group.get("fused"):
                        check_fused_param(p)
                    state["step"] = new_step()
                    state["exp_avg"] = zeros_like(p)
                    state["exp_avg_sq"] = zeros_like(p)
                    if amsgrad:
                        state["max_exp_avg_sq"] = zeros_like(p)
                step = bump_step(state)
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                if fused is not None:
                    max_sq = state["max_exp_avg_sq"] if amsgrad else None
                    if fusable(p, grad, exp_avg, exp_avg_sq, max_sq):
                        # One kernel pass over the parameter and its state (ops/optim_fused.cpp).
                        fused(p, grad, exp_avg, exp_avg_sq, max_sq, lr=lr, beta1=beta1, beta2=beta2,
                              weight_decay=weight_decay, eps=eps, step=float(step), amsgrad=amsgrad,
                              maximize=group["maximize"], decoupled_weight_decay=group["decoupled_weight_decay"])
                        continue
                if group["maximize"]:
                    grad = -grad
                if weight_decay != 0:
                    if group["decoupled_weight_decay"]:
                        p.mul_(1 - lr * weight_decay)
                    else:
                        grad = grad.add(p, alpha=weight_decay)
                exp_avg.lerp_(grad, 1 - beta1)
                addcmul_(exp_avg_sq.mul_(beta2), grad, grad, 1 - beta2)
                bias_correction1 = 1 - beta1 ** step
                bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
                if amsgrad:
                    max_sq = state["max_exp_avg_sq"]
                    maximum(max_sq, exp_avg_sq, out=max_sq)
                    denom = (max_sq.sqrt() / bias_correction2_sqrt).add_(eps)
                else:
                    denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
                addcdiv_(p, exp_avg, denom, -lr / bias_correction1)
