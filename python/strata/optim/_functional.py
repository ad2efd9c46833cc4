"""Whole-tensor helpers shared by the optimizers.

Strata has no addcmul_/addcdiv_ yet, so these compose them from whole-tensor ops
(one temporary each); no optimizer ever loops over elements in Python."""

from .. import _C

Tensor = _C.Tensor


def addcmul_(t, a, b, value=1.0):
    """t += value * a * b, in place."""
    return t.add_(a * b, alpha=value)


def addcdiv_(t, a, b, value=1.0):
    """t += value * a / b, in place."""
    return t.add_(a / b, alpha=value)


def scalar(v):
    """Hyper-parameters may be given as 0-d tensors (torch allows a Tensor lr); the math uses Python floats."""
    return float(v) if isinstance(v, Tensor) else v


def new_step():
    # torch keeps step counters as float32 0-d tensors on the CPU.
    return _C._tensor(0.0, _C.float32, None)


def check_unsupported(name, **flags):
    for flag, value in flags.items():
        if value:
            raise RuntimeError(f"{name}: {flag}=True is not supported by Strata (CPU-only, no fused kernels); "
                               f"pass {flag}=False")
