"""strata.optim.Adamax: Adam with an infinity-norm second moment (torch.optim.Adamax)."""

from .._creation import zeros_like
from .._functions import maximum
from .optimizer import Optimizer, _grad_of, _use_grad
from ._functional import check_adam_args, addcdiv_, scalar, new_step, bump_step, check_capturable

__all__ = ["Adamax"]


class Adamax(Optimizer):
    """``m = lerp(m, g, 1-b1)``, ``u = max(b2*u, |g| + eps)``, ``p -= lr/(1-b1^t) * m/u``."""

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, foreach=None, *,
                 maximize=False, differentiable=False, capturable=False):
        check_adam_args(lr, betas, eps, weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, foreach=foreach, maximize=maximize,
                        differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    _group_defaults = dict(foreach=None, maximize=False, differentiable=False, capturable=False)

    @_use_grad
    def step(self):
        for group in self.param_groups:
            check_capturable(group)
            lr = scalar(group["lr"])
            beta1, beta2 = group["betas"]
            eps, weight_decay = group["eps"], group["weight_decay"]
            for p in group["params"]:
                grad = _grad_of(p)
                if grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = new_step()
                    state["exp_avg"] = zeros_like(p)
                    state["exp_inf"] = zeros_like(p)
                step = bump_step(state)
                if group["maximize"]:
                    grad = -grad
                if weight_decay != 0:
                    grad = grad.add(p, alpha=weight_decay)
                exp_avg, exp_inf = state["exp_avg"], state["exp_inf"]
                exp_avg.lerp_(grad, 1 - beta1)
                maximum(exp_inf.mul_(beta2), grad.abs().add_(eps), out=exp_inf)
                addcdiv_(p, exp_avg, exp_inf, -lr / (1 - beta1 ** step))
