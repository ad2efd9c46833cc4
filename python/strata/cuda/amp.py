"""strata.cuda.amp: the deprecated spellings torch.cuda.amp.autocast(...) and
torch.cuda.amp.GradScaler(...). They warn as torch does and forward to
strata.amp with device "cuda", which (without a CUDA backend) warns again and
disables itself, so a script written for a GPU runs in float32 on the CPU."""

import warnings

from .. import amp as _amp

__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd"]


class autocast(_amp.autocast):
    def __init__(self, enabled=True, dtype=None, cache_enabled=True):
        warnings.warn("`strata.cuda.amp.autocast(args...)` is deprecated. Please use "
                      "`strata.amp.autocast('cuda', args...)` instead.", FutureWarning, stacklevel=2)
        super().__init__("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(_amp.GradScaler):
    def __init__(self, init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000, enabled=True):
        warnings.warn("`strata.cuda.amp.GradScaler(args...)` is deprecated. Please use "
                      "`strata.amp.GradScaler('cuda', args...)` instead.", FutureWarning, stacklevel=2)
        super().__init__("cuda", init_scale, growth_factor, backoff_factor, growth_interval, enabled)


def custom_fwd(fwd=None, *, cast_inputs=None):
    """Decorator for a custom autograd Function's forward. Without a CUDA
    autocast there is nothing to cast: it returns the function unchanged."""
    if fwd is None:
        return lambda f: f
    return fwd


def custom_bwd(bwd=None):
    """Decorator for a custom autograd Function's backward: unchanged, as above."""
    if bwd is None:
        return lambda f: f
    return bwd
