"""strata.optim.ASGD: averaged stochastic gradient descent (torch.optim.ASGD)."""

from .. import _C
from .._creation import zeros_like
from .optimizer import Optimizer, _grad_of, _use_grad
from ._functional import addcmul_, scalar, new_step, bump_step, check_lr, check_capturable

__all__ = ["ASGD"]


def _f32(v):
    return _C._tensor(float(v), _C.float32, None)


class ASGD(Optimizer):
    """``p = p*(1 - lambd*eta) - eta*g``; the running average ``ax`` starts averaging after ``t0`` steps;
    ``eta = lr / (1 + lambd*lr*t)^alpha``, ``mu = 1/max(1, t - t0)``. As in torch, ``eta`` and ``mu`` live in
    the state as float32 0-d tensors, so the step reads them back at float32 precision."""

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, foreach=None,
                 maximize=False, differentiable=False, capturable=False):
        check_lr(lr)
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    _group_defaults = dict(foreach=None, maximize=False, differentiable=False, capturable=False)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            for p in group["params"]:
                st = self.state.get(p)
                if st:
                    for key in ("eta", "mu"):
                        if key in st and not isinstance(st[key], _C.Tensor):
                            st[key] = _f32(st[key])

    @_use_grad
    def step(self):
        for group in self.param_groups:
            check_capturable(group)
            lr = scalar(group["lr"])
            lambd, alpha, t0, weight_decay = group["lambd"], group["alpha"], group["t0"], group["weight_decay"]
            for p in group["params"]:
                grad = _grad_of(p)
                if grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = new_step()
                    state["eta"] = _f32(lr)
                    state["mu"] = _f32(1.0)
                    state["ax"] = zeros_like(p)
                if group["maximize"]:
                    grad = -grad
                step = bump_step(state)
                if weight_decay != 0:
                    grad = grad.add(p, alpha=weight_decay)
                eta, mu = state["eta"].item(), state["mu"].item()
                ax = state["ax"]
                if group["foreach"]:
                    # torch's multi-tensor form: p -= eta * (g + lambd*p), the average always blended, and the new
                    # eta evaluated as float32 tensor arithmetic on the step counter.
                    addcmul_(p, grad.add(p, alpha=lambd), state["eta"], -1)
                    addcmul_(ax, p.sub(ax), state["mu"])
                    state["eta"].copy_(lr / ((state["step"] * (lambd * lr)).add_(1) ** alpha))
                else:
                    p.mul_(1 - lambd * eta)
                    p.add_(grad, alpha=-eta)
                    if mu != 1:
                        ax.add_(p.sub(ax).mul_(mu))
                    else:
                        ax.copy_(p)
                    # New values pass through float32 even when a loaded state holds float64 scalars, as torch's do.
                    state["eta"].copy_(_f32(lr / ((1 + lambd * lr * step) ** alpha)))
                state["mu"].copy_(_f32(1 / max(1, step - t0)))
