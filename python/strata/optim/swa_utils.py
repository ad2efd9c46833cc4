"""strata.optim.swa_utils: weight averaging (SWA / EMA) helpers (torch.optim.swa_utils).

``AveragedModel`` keeps a deep copy of a model whose parameters (and, with ``use_buffers``, buffers) track
an average of the trained model's; ``SWALR`` anneals each group's rate to a fixed ``swa_lr``; ``update_bn``
recomputes BatchNorm statistics for the averaged weights with one pass over data."""

import itertools
import math
from copy import deepcopy

from .. import _C
from .._grad_mode import no_grad
from ..nn.modules.module import Module
from .lr_scheduler import LRScheduler, _format_param

__all__ = ["AveragedModel", "update_bn", "SWALR", "get_ema_multi_avg_fn", "get_swa_multi_avg_fn", "get_ema_avg_fn",
           "get_swa_avg_fn"]


def _check_decay(decay):
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in [0,1] range.")


def get_ema_multi_avg_fn(decay=0.999):
    """In-place EMA over lists of tensors: ``ema = lerp(ema, current, 1 - decay)``."""
    _check_decay(decay)

    def ema_update(ema_param_list, current_param_list, _):
        with no_grad():
            if ema_param_list[0].is_floating_point():
                for p_ema, p_model in zip(ema_param_list, current_param_list):
                    p_ema.lerp_(p_model, 1 - decay)
            else:
                for p_ema, p_model in zip(ema_param_list, current_param_list):
                    p_ema.copy_(p_ema * decay + p_model * (1 - decay))

    return ema_update


def get_swa_multi_avg_fn():
    """In-place equal-weight running mean over lists of tensors."""

    def swa_update(averaged_param_list, current_param_list, num_averaged):
        n = float(num_averaged) if isinstance(num_averaged, _C.Tensor) else num_averaged
        with no_grad():
            if averaged_param_list[0].is_floating_point():
                for p_avg, p_model in zip(averaged_param_list, current_param_list):
                    p_avg.lerp_(p_model, 1 / (n + 1))
            else:
                for p_avg, p_model in zip(averaged_param_list, current_param_list):
                    p_avg.copy_(p_avg + (p_model - p_avg) / (n + 1))

    return swa_update


def get_ema_avg_fn(decay=0.999):
    """EMA of one tensor, returned as a new tensor: ``decay * ema + (1 - decay) * current``."""
    _check_decay(decay)

    def ema_update(ema_param, current_param, num_averaged):
        with no_grad():
            return decay * ema_param + (1 - decay) * current_param

    return ema_update


def get_swa_avg_fn():
    """Equal-weight running mean of one tensor, returned as a new tensor."""

    def swa_update(averaged_param, current_param, num_averaged):
        with no_grad():
            return averaged_param + (current_param - averaged_param) / (num_averaged + 1)

    return swa_update


class AveragedModel(Module):
    """A copy of ``model`` whose weights ``update_parameters(model)`` averages with the model's.

    The first update copies the weights; later ones apply ``multi_avg_fn`` (in place, over lists),
    ``avg_fn`` (one tensor at a time), or, when neither is given, the equal-weight SWA mean. Without
    ``use_buffers`` the buffers are copied from ``model`` rather than averaged. ``n_averaged`` is an int64
    buffer, so it is saved in ``state_dict``."""

    def __init__(self, model, device=None, avg_fn=None, multi_avg_fn=None, use_buffers=False):
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", _C._tensor(0, _C.int64, None))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def update_parameters(self, model):
        if self.use_buffers:
            self_params = list(itertools.chain(self.module.parameters(), self.module.buffers()))
            model_params = list(itertools.chain(model.parameters(), model.buffers()))
        else:
            self_params = list(self.parameters())
            model_params = list(model.parameters())
        n = int(self.n_averaged.item())
        with no_grad():
            averaged = [p.detach() for p in self_params]
            current = [p.detach().to(a.device) for p, a in zip(model_params, averaged)]
            if n == 0:
                for a, c in zip(averaged, current):
                    a.copy_(c)
            elif self.multi_avg_fn is None:
                # torch's CPU path: one tensor at a time (the default SWA mean when no function is given),
                # copied back so integer buffers truncate rather than fail.
                fn = self.avg_fn or get_swa_avg_fn()
                for a, c in zip(averaged, current):
                    a.copy_(fn(a, c, self.n_averaged))
            else:
                fn = self.multi_avg_fn
                # Like torch, the list-wise function sees tensors grouped by dtype.
                groups = {}
                for a, c in zip(averaged, current):
                    groups.setdefault(a.dtype, ([], []))
                    groups[a.dtype][0].append(a)
                    groups[a.dtype][1].append(c)
                for avg_list, cur_list in groups.values():
                    fn(avg_list, cur_list, self.n_averaged)
            if not self.use_buffers:
                for b_swa, b_model in zip(self.module.buffers(), model.buffers()):
                    b_swa.detach().copy_(b_model.detach().to(b_swa.device))
            self.n_averaged.add_(1)


def update_bn(loader, model, device=None):
    """Resets every BatchNorm's running statistics and recomputes them as a cumulative average over one pass of
    ``loader`` (each batch a tensor, or a list/tuple whose first element is the input)."""
    from ..nn.modules.normalization import _BatchNorm

    momenta = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    with no_grad():
        for batch in loader:
            if isinstance(batch, (list, tuple)):
                batch = batch[0]
            if device is not None:
                batch = batch.to(device)
            model(batch)
    for module, momentum in momenta.items():
        module.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneals each group's rate from its current value to ``swa_lr`` over ``anneal_epochs`` steps
    (``"cos"`` or ``"linear"``), then holds it there."""

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos", last_epoch=-1):
        swa_lrs = _format_param("swa_lr", optimizer, swa_lr)
        for lr, group in zip(swa_lrs, optimizer.param_groups):
            group["swa_lr"] = lr
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}")
        self._set_anneal_func(anneal_strategy)
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _linear_anneal(t):
        return t

    @staticmethod
    def _cosine_anneal(t):
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _get_initial_lr(lr, swa_lr, alpha):
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def _set_anneal_func(self, anneal_strategy):
        self._anneal_strategy = anneal_strategy
        self.anneal_func = self._cosine_anneal if anneal_strategy == "cos" else self._linear_anneal

    def get_lr(self):
        self._warn_outside_step()
        # The rate is recovered from the group's current value (undoing the previous step's blend), so other
        # schedulers may have changed it in between.
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_t = max(0, min(1, (step - 1) / max(1, self.anneal_epochs)))
        prev_alpha = self.anneal_func(prev_t)
        groups = self.optimizer.param_groups
        prev_lrs = [self._get_initial_lr(g["lr"], g["swa_lr"], prev_alpha) for g in groups]
        t = max(0, min(1, step / max(1, self.anneal_epochs)))
        alpha = self.anneal_func(t)
        return [g["swa_lr"] * alpha + lr * (1 - alpha) for g, lr in zip(groups, prev_lrs)]

    def state_dict(self):
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "anneal_func")}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)
        self._set_anneal_func(self._anneal_strategy)
