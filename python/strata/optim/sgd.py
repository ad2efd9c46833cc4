"""strata.optim.SGD: stochastic gradient descent with optional (Nesterov) momentum (torch.optim.SGD)."""

from .._creation import zeros_like
from .optimizer import Optimizer, _grad_of, _use_grad
from ._functional import check_lr, scalar, check_fused, check_fused_param, fused_kernel, fusable

__all__ = ["SGD"]

_fused_sgd_step_ = fused_kernel("_fused_sgd_step_")


class SGD(Optimizer):
    """``buf = momentum * buf + (1 - dampening) * g`` (the first step seeds ``buf = g``), then
    ``p -= lr * (g + momentum * buf if nesterov else buf)``; ``g`` includes ``weight_decay * p``
    and is negated when ``maximize``."""

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *,
                 maximize=False, foreach=None, differentiable=False, fused=None):
        check_lr(lr)
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        check_fused(fused, foreach, differentiable)
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay, nesterov=nesterov,
                        maximize=maximize, foreach=foreach, differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)

    _group_defaults = dict(nesterov=False, maximize=False)

    @_use_grad
    def step(self):
        for group in self.param_groups:
            lr = scalar(group["lr"])
            momentum, dampening = group["momentum"], group["dampening"]
            weight_decay, nesterov = group["weight_decay"], group["nesterov"]
            fused = _fused_sgd_step_ if group.get("fused") else None
            for p in group["params"]:
                grad = _grad_of(p)
                if grad is None:
                    continue
                if group.get("fused"):
                    check_fused_param(p)
                if fused is not None:
                    buf = self.state[p].get("momentum_buffer") if momentum != 0 else None
                    if fusable(p, grad, buf):
                        first = momentum != 0 and buf is None
                        if first:
                            buf = self.state[p]["momentum_buffer"] = zeros_like(p)
                        # One kernel pass over the parameter and its buffer (ops/optim_fused.cpp).
                        fused(p, grad, buf, lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                              nesterov=nesterov, maximize=group["maximize"], is_first_step=first)
                        continue
                if group["maximize"]:
                    grad = -grad
                if weight_decay != 0:
                    grad = grad.add(p, alpha=weight_decay)
                if momentum != 0:
                    state = self.state[p]
                    buf = state.get("momentum_buffer")
                    if buf is None:
                        buf = grad.clone()
                        state["momentum_buffer"] = buf
                    else:
                        buf.mul_(momentum).add_(grad, alpha=1 - dampening)
                    grad = grad.add(buf, alpha=momentum) if nesterov else buf
                p.add_(grad, alpha=-lr)
