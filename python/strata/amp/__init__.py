"""strata.amp: automatic mixed precision (torch.amp).

`with strata.autocast(device_type="cpu", dtype=strata.bfloat16):` runs matrix
products and convolutions in bfloat16 (or float16) and keeps softmax,
normalisations, losses and reductions in float32; see src/autocast/autocast.h.
Casts are ordinary differentiable ops, so gradients flow back to parameters
in their own dtype.
"""

import functools
import warnings

from .. import _C

__all__ = ["autocast", "is_autocast_available", "GradScaler"]


def is_autocast_available(device_type):
    return device_type == "cpu"


class autocast:
    def __init__(self, device_type="cpu", dtype=None, enabled=True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        if device_type == "cuda":
            # As torch without a GPU: warn and run the region unchanged (the
            # CPU autocast state is not touched, so an enclosing one still holds).
            if enabled:
                warnings.warn("CUDA is not available. Disabling autocast.", UserWarning, stacklevel=2)
            self.device, self.fast_dtype, self._enabled = device_type, dtype or _C.float16, False
            return
        if device_type != "cpu":
            raise RuntimeError(f"autocast: device_type '{device_type}' is not supported by Strata yet (only 'cpu')")
        self.device = device_type
        self.fast_dtype = dtype if dtype is not None else _C.bfloat16
        self._enabled = bool(enabled)
        if self.fast_dtype not in (_C.bfloat16, _C.float16):
            raise RuntimeError("In CPU autocast, but the target dtype is not supported. CPU Autocast only supports "
                               "dtype of torch.bfloat16, torch.float16 currently.")

    def __enter__(self):
        if self.device != "cpu":
            return self
        self._prev = (_C._is_autocast_enabled(), _C._get_autocast_dtype())
        _C._set_autocast_dtype(self.fast_dtype)
        _C._set_autocast_enabled(self._enabled)
        return self

    def __exit__(self, *exc):
        if self.device != "cpu":
            return False
        _C._set_autocast_dtype(self._prev[1])
        _C._set_autocast_enabled(self._prev[0])
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*a, **k):
            with autocast(self.device, self.fast_dtype, self._enabled):
                return fn(*a, **k)

        return wrapper


def is_autocast_enabled(device_type="cpu"):
    return device_type == "cpu" and _C._is_autocast_enabled()


def get_autocast_dtype(device_type="cpu"):
    return _C._get_autocast_dtype()


class GradScaler:
    """Loss scaling for float16 training. bfloat16 (the CPU default) needs none;
    with enabled=False this is the identity, as in torch. The default device is
    "cuda", as in torch; without a CUDA backend that scaler warns and disables
    itself, so GPU scripts run unchanged."""

    def __init__(self, device="cuda", init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,
                 enabled=True):
        if device == "cuda" and enabled:
            warnings.warn("strata.amp.GradScaler is enabled, but CUDA is not available.  Disabling.", UserWarning,
                          stacklevel=2)
            enabled = False
        self._enabled = enabled
        self._scale = init_scale

    def is_enabled(self):
        return self._enabled

    def scale(self, outputs):
        return outputs * self._scale if self._enabled else outputs

    def unscale_(self, optimizer):
        if not self._enabled:
            return
        from .._grad_mode import no_grad

        with no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        p.grad.mul_(1.0 / self._scale)

    def step(self, optimizer, *args, **kwargs):
        if self._enabled and not getattr(self, "_unscaled", False):
            self.unscale_(optimizer)
        self._unscaled = False
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale=None):
        if new_scale is not None:
            self._scale = float(new_scale)

    def get_scale(self):
        return self._scale if self._enabled else 1.0
