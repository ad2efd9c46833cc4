"""strata.optim.RMSprop (torch.optim.RMSprop)."""

from .. import _C
from .._creation import zeros_like
from .optimizer import Optimizer, _grad_of, _use_grad
from ._functional import check_lr, addcmul_, addcdiv_, scalar, new_step, check_capturable

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    """``v = alpha*v + (1-alpha)*g*g``; the denominator is ``sqrt(v) + eps`` (centered: ``sqrt(v - mean(g)^2) + eps``
    with ``mean(g)`` a running average); with momentum ``buf = momentum*buf + g/denom`` and ``p -= lr*buf``,
    otherwise ``p -= lr * g/denom``."""

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        check_lr(lr)
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= momentum:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= alpha:
            raise ValueError(f"Invalid alpha value: {alpha}")
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered, weight_decay=weight_decay,
                        capturable=capturable, foreach=foreach, maximize=maximize, differentiable=differentiable)
        super().__init__(params, defaults)

    _group_defaults = dict(momentum=0, centered=False, maximize=False)

    @_use_grad
    def step(self):
        for group in self.param_groups:
            check_capturable(group)
            lr = scalar(group["lr"])
            alpha, eps, weight_decay = group["alpha"], group["eps"], group["weight_decay"]
            momentum, centered = group["momentum"], group["centered"]
            for p in group["params"]:
                grad = _grad_of(p)
                if grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = new_step()
                    state["square_avg"] = zeros_like(p)
                    if momentum > 0:
                        state["momentum_buffer"] = zeros_like(p)
                    if centered:
                        state["grad_avg"] = zeros_like(p)
                if group["maximize"]:
                    grad = -grad
                if isinstance(state["step"], _C.Tensor):
                    state["step"].add_(1)
                else:
                    state["step"] += 1
                if weight_decay != 0:
                    grad = grad.add(p, alpha=weight_decay)
                square_avg = state["square_avg"]
                addcmul_(square_avg.mul_(alpha), grad, grad, 1 - alpha)
                if centered:
                    grad_avg = state["grad_avg"]
                    grad_avg.lerp_(grad, 1 - alpha)
                    avg = (square_avg - grad_avg * grad_avg).sqrt_()
                else:
                    avg = square_avg.sqrt()
                avg = avg.add_(eps)
                if momentum > 0:
                    buf = state["momentum_buffer"]
                    addcdiv_(buf.mul_(momentum), grad, avg)
                    p.add_(buf, alpha=-lr)
                else:
                    addcdiv_(p, grad, avg, -lr)
