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


def check_lr(lr):
    if isinstance(lr, Tensor) and lr.numel() != 1:
        raise ValueError("Tensor lr must be 1-element")
    if not 0.0 <= scalar(lr):
        raise ValueError(f"Invalid learning rate: {lr}")


def new_step():
    # torch keeps step counters as float32 0-d tensors on the CPU.
    return _C._tensor(0.0, _C.float32, None)


def bump_step(state):
    """Adds one to ``state["step"]`` (a float32 0-d tensor, or a plain number from an old state dict) and
    returns the new count as a Python float."""
    step_t = state["step"]
    if isinstance(step_t, Tensor):
        step_t.add_(1)
        return step_t.item()
    state["step"] = step_t + 1
    return state["step"]


def check_fused(fused, foreach, differentiable):
    """The constructor checks torch makes for ``fused=True`` (Adam, AdamW, SGD, Adagrad)."""
    if fused:
        if differentiable:
            raise RuntimeError("`fused` does not support `differentiable`")
        if foreach:
            raise RuntimeError("`fused` and `foreach` cannot be `True` together.")


def check_capturable(group):
    # CUDA-graph capture needs an accelerator; torch accepts the flag at construction and refuses at step
    # time for CPU parameters, and so do we.
    if group.get("capturable"):
        raise AssertionError("If capturable=True, params and state_steps must be on supported devices: "
                             "['cuda', 'xpu', 'hpu', 'privateuseone', 'xla'].")


def check_fused_param(p):
    if not p.is_floating_point():
        raise RuntimeError("`fused=True` requires all the params to be floating point Tensors of supported devices: "
                           f"['cpu'] but {p.dtype} and {p.device.type}")


def fused_kernel(name):
    """The fused step op of this build (``fused=True``), or None for a build without it: the optimizers then run
    the composed update, which computes the same values."""
    return getattr(_C._ops, name, None)


def fusable(p, *tensors):
    """Whether the fused kernels take this parameter and its tensors: contiguous float32/float64 CPU tensors of
    one shape and dtype (anything else takes the composed update)."""
    if (p.dtype is not _C.float32 and p.dtype is not _C.float64) or not p.is_contiguous() or p.device.type != "cpu":
        return False
    shape = p.shape
    for t in tensors:
        if t is not None and (t.dtype is not p.dtype or not t.is_contiguous() or t.shape != shape):
            return False
    return True


def check_adam_args(lr, betas, eps, weight_decay):
    """The checks every Adam-family optimizer makes on its arguments, with torch's messages."""
    check_lr(lr)
    if not 0.0 <= eps:
        raise ValueError(f"Invalid epsilon value: {eps}")
    if not 0.0 <= betas[0] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
    if not 0.0 <= betas[1] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
    if not 0.0 <= weight_decay:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")
