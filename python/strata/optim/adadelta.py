"""strata.optim.Adadelta (torch.optim.Adadelta)."""

from .._creation import zeros_like
from .optimizer import Optimizer, _grad_of, _use_grad
from ._functional import addcmul_, scalar, new_step, bump_step, check_lr, check_capturable

__all__ = ["Adadelta"]


class Adadelta(Optimizer):
    """``v = rho*v + (1-rho)*g^2``; ``delta = sqrt(u + eps) / sqrt(v + eps) * g``;
    ``u = rho*u + (1-rho)*delta^2``; ``p -= lr * delta``."""

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *, capturable=False,
                 maximize=False, differentiable=False):
        check_lr(lr)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize, capturable=capturable,
                        foreach=foreach, differentiable=differentiable)
        super().__init__(params, defaults)

    _group_defaults = dict(foreach=None, maximize=False, differentiable=False, capturable=False)

    @_use_grad
    def step(self):
        for group in self.param_groups:
            check_capturable(group)
            lr = scalar(group["lr"])
            rho, eps, weight_decay = group["rho"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                grad = _grad_of(p)
                if grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = new_step()
                    state["square_avg"] = zeros_like(p)
                    state["acc_delta"] = zeros_like(p)
                bump_step(state)
                if group["maximize"]:
                    grad = -grad
                if weight_decay != 0:
                    grad = grad.add(p, alpha=weight_decay)
                square_avg, acc_delta = state["square_avg"], state["acc_delta"]
                addcmul_(square_avg.mul_(rho), grad, grad, 1 - rho)
                std = square_avg.add(eps).sqrt_()
                delta = acc_delta.add(eps).sqrt_().div_(std).mul_(grad)
                addcmul_(acc_delta.mul_(rho), delta, delta, 1 - rho)
                p.add_(delta, alpha=-lr)
