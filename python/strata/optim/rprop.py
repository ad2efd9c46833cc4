"""strata.optim.Rprop: resilient backpropagation (torch.optim.Rprop)."""

from .._creation import zeros_like, full_like
from .optimizer import Optimizer, _grad_of, _use_grad
from ._functional import addcmul_, scalar, new_step, bump_step, check_lr, check_capturable

__all__ = ["Rprop"]


class Rprop(Optimizer):
    """Each element keeps its own step size: multiplied by ``etaplus`` while the gradient keeps its sign, by
    ``etaminus`` when it flips (and that element then skips its update), clamped to ``step_sizes``;
    ``p -= sign(g) * step_size``."""

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *, capturable=False, foreach=None,
                 maximize=False, differentiable=False):
        check_lr(lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        defaults = dict(lr=lr, etas=etas, step_sizes=step_sizes, foreach=foreach, maximize=maximize,
                        differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    _group_defaults = dict(foreach=None, maximize=False, differentiable=False, capturable=False)

    @_use_grad
    def step(self):
        for group in self.param_groups:
            check_capturable(group)
            etaminus, etaplus = group["etas"]
            step_size_min, step_size_max = group["step_sizes"]
            for p in group["params"]:
                grad = _grad_of(p)
                if grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = new_step()
                    state["prev"] = zeros_like(p)
                    state["step_size"] = full_like(grad, scalar(group["lr"]))
                if group["maximize"]:
                    grad = -grad
                bump_step(state)
                prev, step_size = state["prev"], state["step_size"]
                sign = grad.mul(prev).sign()
                flipped = sign.lt(0)
                sign.masked_fill_(sign.gt(0), etaplus).masked_fill_(flipped, etaminus).masked_fill_(sign.eq(0), 1)
                step_size.mul_(sign).clamp_(step_size_min, step_size_max)
                grad = grad.masked_fill(flipped, 0)
                addcmul_(p, grad.sign(), step_size, -1)
                prev.copy_(grad)
