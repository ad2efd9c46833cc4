"""strata.optim.NAdam: Adam with Nesterov momentum and a momentum-decay schedule (torch.optim.NAdam)."""

from .. import _C
from .._creation import zeros_like
from .optimizer import Optimizer, _grad_of, _use_grad
from ._functional import check_adam_args, addcmul_, addcdiv_, scalar, new_step, bump_step, check_capturable

__all__ = ["NAdam"]


class NAdam(Optimizer):
    """``mu_t = b1 * (1 - 0.5 * 0.96^(t*momentum_decay))``; the update mixes the current gradient (weighted by
    ``1 - mu_t``) and the look-ahead momentum (weighted by ``mu_{t+1}``), each bias-corrected by the running
    product of the ``mu``. ``mu_product`` is kept as a float32 0-d tensor, as torch keeps it."""

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False):
        check_adam_args(lr, betas, eps, weight_decay)
        if not 0.0 <= momentum_decay:
            raise ValueError(f"Invalid momentum_decay value: {momentum_decay}")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, momentum_decay=momentum_decay,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=differentiable)
        super().__init__(params, defaults)

    _group_defaults = dict(maximize=False, foreach=None, capturable=False, differentiable=False,
                           decoupled_weight_decay=False)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            for p in group["params"]:
                st = self.state.get(p)
                if st and not isinstance(st.get("mu_product"), _C.Tensor) and "mu_product" in st:
                    st["mu_product"] = _C._tensor(float(st["mu_product"]), _C.float32, None)

    @_use_grad
    def step(self):
        for group in self.param_groups:
            check_capturable(group)
            lr = scalar(group["lr"])
            beta1, beta2 = group["betas"]
            eps, weight_decay, momentum_decay = group["eps"], group["weight_decay"], group["momentum_decay"]
            for p in group["params"]:
                grad = _grad_of(p)
                if grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = new_step()
                    state["mu_product"] = _C._tensor(1.0, _C.float32, None)
                    state["exp_avg"] = zeros_like(p)
                    state["exp_avg_sq"] = zeros_like(p)
                if group["maximize"]:
                    grad = -grad
                step = bump_step(state)
                bias_correction2 = 1 - beta2 ** step
                if weight_decay != 0:
                    if group["decoupled_weight_decay"]:
                        p.mul_(1 - lr * weight_decay)
                    else:
                        grad = grad.add(p, alpha=weight_decay)
                mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))
                mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * momentum_decay)))
                mu_product_t = state["mu_product"]
                mu_product_t.mul_(mu)
                mu_product = mu_product_t.item()
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                exp_avg.lerp_(grad, 1 - beta1)
                addcmul_(exp_avg_sq.mul_(beta2), grad, grad, 1 - beta2)
                denom = exp_avg_sq.div(bias_correction2).sqrt_().add_(eps)
                addcdiv_(p, grad, denom, -lr * (1.0 - mu) / (1.0 - mu_product))
                addcdiv_(p, exp_avg, denom, -lr * mu_next / (1.0 - mu_product * mu_next))
