"""Process-wide switches from torch's top-level namespace: the default device,
deterministic algorithms and the float32 matmul precision.

Strata runs on the CPU, so the only default device is the CPU. Its CPU kernels
give the same result on every run for the same inputs and thread count, except
where writes to one element race: `use_deterministic_algorithms(True)` makes
index_put_ / x[idx] = v with repeated indices write them in index order (the
last one wins, as torch's deterministic path), and makes the ops torch lists as
having no deterministic implementation (put_ without accumulation,
max_unpool*d) raise its RuntimeError, or warn with warn_only=True
(src/core/deterministic.h)."""

from . import _C
from .backends import set_float32_matmul_precision, get_float32_matmul_precision  # noqa: F401

__all__ = ["get_default_device", "set_default_device", "use_deterministic_algorithms",
           "are_deterministic_algorithms_enabled", "is_deterministic_algorithms_warn_only_enabled",
           "set_float32_matmul_precision", "get_float32_matmul_precision"]

_CPU = _C.device("cpu")
_deterministic = [False, False]  # (enabled, warn_only)


def get_default_device():
    return _CPU


def set_default_device(device):
    if device is None:
        return
    d = device if isinstance(device, _C.device) else _C.device(device)
    if d.type == "cpu":
        return
    if d.type == "cuda":
        raise AssertionError(f"Strata not compiled with CUDA enabled: set_default_device({str(d)!r}) needs a CUDA "
                             "device, and this build has no CUDA backend")
    raise NotImplementedError(f"set_default_device({str(d)!r}): Strata's factories create tensors on the CPU only; "
                              "pass device= to a factory for other devices")


def use_deterministic_algorithms(mode, *, warn_only=False):
    if not isinstance(mode, bool):
        raise TypeError(f"use_deterministic_algorithms(): argument 'mode' must be bool, not {type(mode).__name__}")
    if not isinstance(warn_only, bool):
        raise TypeError(f"use_deterministic_algorithms(): argument 'warn_only' must be bool, not "
                        f"{type(warn_only).__name__}")
    _deterministic[0], _deterministic[1] = mode, warn_only
    _C._set_deterministic_algorithms(mode, warn_only)


def _alert_not_deterministic(op):
    """torch's error (or warning, warn_only) for an op without a deterministic implementation."""
    if not _deterministic[0]:
        return
    msg = (f"{op} does not have a deterministic implementation, but you set 'torch.use_deterministic_algorithms(True)'. "
           "You can turn off determinism just for this operation, or you can use the 'warn_only=True' option, if "
           "that's acceptable for your application.")
    if _deterministic[1]:
        import warnings
        warnings.warn(msg, UserWarning, stacklevel=3)
        return
    raise RuntimeError(msg)


def are_deterministic_algorithms_enabled():
    return _deterministic[0]


def is_deterministic_algorithms_warn_only_enabled():
    return _deterministic[1]
