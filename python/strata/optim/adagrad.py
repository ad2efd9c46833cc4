"""strata.optim.Adagrad (torch.optim.Adagrad)."""

from .._creation import full_like
from .optimizer import Optimizer, _grad_of, _use_grad
from ._functional import check_lr, addcmul_, addcdiv_, scalar, new_step, check_fused, check_fused_param, bump_step, fused_kernel, fusable

__all__ = ["Adagrad"]

_fused_adagrad_step_ = fused_kernel("_fused_adagrad_step_")


class Adagrad(Optimizer):
    """``sum += g*g``; ``p -= lr / (1 + (t-1)*lr_decay) * g / (sqrt(sum) + eps)``.

    As in torch, the state (``step`` and ``sum``, which starts at ``initial_accumulator_value``) is created
    eagerly in the constructor, not at the first step."""

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10,
                 foreach=None, *, maximize=False, differentiable=False, fused=None):
        check_lr(lr)
        if not 0.0 <= lr_decay:
            raise ValueError(f"Invalid lr_decay value: {lr_decay}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= initial_accumulator_value:
            raise ValueError(f"Invalid initial_accumulator_value value: {initial_accumulator_value}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        check_fused(fused, foreach, differentiable)
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach, maximize=maximize,
                        differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                if fused:
                    check_fused_param(p)
                state = self.state[p]
                state["step"] = new_step()
                state["sum"] = full_like(p, group["initial_accumulator_value"])

    _group_defaults = dict(maximize=False)

    @_use_grad
    def step(self):
        for group in self.param_groups:
            lr = scalar(group["lr"])
            lr_decay, eps, weight_decay = group["lr_decay"], group["eps"], group["weight_decay"]
            fused = _fused_adagrad_step_ if group.get("fused") else None
            for p in group["params"]:
                grad = _grad_of(p)
                if grad is None:
                    continue
                state = self.state[p]
                step = bump_step(state)
                if fused is not None and fusable(p, grad, state["sum"]):
                    # One kernel pass over the parameter and its sum (ops/optim_fused.cpp).
                    fused(p, grad, state["sum"], lr=lr, lr_decay=lr_decay, weight_decay=weight_decay, eps=eps,
                          step=float(step), maximize=group["maximize"])
                    continue
                if group["maximize"]:
                    grad = -grad
                if weight_decay != 0:
                    grad = grad.add(p, alpha=weight_decay)
                clr = lr / (1 + (step - 1) * lr_decay)
                state_sum = state["sum"]
                addcmul_(state_sum, grad, grad, 1)
                std = state_sum.sqrt().add_(eps)
                addcdiv_(p, grad, std, -clr)
