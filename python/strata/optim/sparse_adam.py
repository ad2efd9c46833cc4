"""strata.optim.SparseAdam (torch.optim.SparseAdam).

SparseAdam updates only the rows a sparse gradient touches. Strata has no sparse tensors, so no gradient it
produces can be sparse: the constructor accepts dense parameters as torch does, and ``step`` refuses every dense
gradient with torch's error, pointing at Adam."""

from .optimizer import Optimizer, _grad_of, _use_grad
from ._functional import check_lr

__all__ = ["SparseAdam"]


class SparseAdam(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, maximize=False):
        check_lr(lr)
        if not 0.0 < eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, maximize=maximize))

    @_use_grad
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                if _grad_of(p) is not None:
                    raise RuntimeError("SparseAdam does not support dense gradients, please consider Adam instead")
