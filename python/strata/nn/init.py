"""strata.nn.init: torch.nn.init's in-place initialisers. Each runs under no_grad and returns its tensor."""

import math
import warnings

from .. import _C
from .._grad_mode import no_grad

_ops = _C._ops
Tensor = _C.Tensor

__all__ = [
    "calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_", "eye_",
    "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "orthogonal_", "dirac_",
]


def _strata():
    import importlib

    return importlib.import_module(__name__.rsplit(".", 2)[0])


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for a nonlinearity (torch's table)."""
    linear_fns = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                  "conv_transpose3d"]
    if nonlinearity in linear_fns or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            negative_slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            negative_slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + negative_slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor):
    if tensor.dim() < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive = 1
    for s in tensor.shape[2:]:
        receptive *= s
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _gen(generator):
    from ..random import _gen_id

    return _gen_id(generator)


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    # The op returns a new Python object for the same tensor; callers (Parameters) need the one they passed.
    with no_grad():
        _ops.uniform_(tensor, float(a), float(b), generator=_gen(generator))
    return tensor


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    with no_grad():
        _ops.normal_(tensor, float(mean), float(std), generator=_gen(generator))
    return tensor


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Normal(mean, std) truncated to [a, b], by rejection, drawing what torch draws: normal
    proposals redrawn where they fall outside [a, b] when those are rare (kept mass > 0.3),
    otherwise uniform proposals on [a, b] accepted with probability pdf / pdf(mode)."""

    def norm_cdf(x):
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0

    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. "
                      "The distribution of values may be incorrect.", stacklevel=2)
    if tensor.device.type == "meta":
        return tensor
    st = _strata()
    g = _gen(generator)
    with no_grad():
        if norm_cdf((b - mean) / std) - norm_cdf((a - mean) / std) > 0.3:
            # The bounds as the tensor's dtype holds them, so the mask agrees with its values.
            lo = st.tensor(a, dtype=tensor.dtype).item()
            hi = st.tensor(b, dtype=tensor.dtype).item()
            result = _ops.normal_(tensor, mean, std, generator=g)
            while True:
                outside = _ops.logical_or(_ops.lt(result, lo), _ops.gt(result, hi))
                if not outside.any():
                    break
                redraw = _ops.normal_(st.empty_like(result), mean, std, generator=g)
                result = st.where(outside, redraw, result)
            if result is not tensor:
                tensor.copy_(result)
            return tensor

        mode = max(a, min(mean, b))
        log_peak = -0.5 * ((mode - mean) / std) ** 2

        def log_ratio(x):  # log pdf(x) - log pdf(mode), in the tensor's dtype
            return _ops.sub(_ops.mul(_ops.pow(_ops.div(_ops.sub(x, mean), std), 2), -0.5), log_peak)

        def rejected(ratio, buf):
            return _ops.gt(_ops.log(_ops.uniform_(buf, 0.0, 1.0, generator=g)), ratio)

        buf = st.empty_like(tensor)
        result = _ops.uniform_(tensor, a, b, generator=g)
        pending = rejected(log_ratio(result), buf)
        if pending.any():
            candidates = st.empty_like(tensor)
            while True:
                _ops.uniform_(candidates, a, b, generator=g)
                result = st.where(pending, candidates, result)
                pending = st.where(pending, rejected(log_ratio(candidates), buf), pending)
                if not pending.any():
                    break
            tensor.copy_(result)
        return tensor


def constant_(tensor, val):
    with no_grad():
        tensor.fill_(val)
    return tensor


def ones_(tensor):
    return constant_(tensor, 1.0)


def zeros_(tensor):
    with no_grad():
        tensor.zero_()
    return tensor


def eye_(tensor):
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    with no_grad():
        tensor.copy_(_ops.eye(tensor.shape[0], tensor.shape[1], dtype=tensor.dtype, device=tensor.device))
        return tensor


def dirac_(tensor, groups=1):
    """Fills a 3/4/5-D convolution weight with the Dirac delta, so the convolution preserves its input's
    channels (in each of `groups` groups)."""
    dims = tensor.dim()
    if dims not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    sizes = tensor.shape
    if sizes[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    out_per_group = sizes[0] // groups
    min_dim = min(out_per_group, sizes[1])
    with no_grad():
        tensor.zero_()
        centre = tuple(s // 2 for s in sizes[2:])
        for g in range(groups):
            for d in range(min_dim):
                tensor[(g * out_per_group + d, d) + centre] = 1
    return tensor


def _no_op_if_empty(tensor):
    if tensor.numel() == 0:
        warnings.warn("Initializing zero-element tensors is a no-op")
        return True
    return False


def xavier_uniform_(tensor, gain=1.0, generator=None):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(tensor, 0.0, std, generator)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    if _no_op_if_empty(tensor):
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    if _no_op_if_empty(tensor):
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return normal_(tensor, 0.0, std, generator)


def orthogonal_(tensor, gain=1, generator=None):
    if tensor.dim() < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    st = _strata()
    linalg = getattr(st, "linalg", None)
    qr = getattr(linalg, "qr", None) if linalg is not None else getattr(st, "qr", None)
    if qr is None:
        raise NotImplementedError("nn.init.orthogonal_ needs a QR decomposition (strata.linalg.qr), "
                                  "which this build does not have")
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    with no_grad():
        flat = st.randn(rows, cols, dtype=tensor.dtype, generator=generator)
        if rows < cols:
            flat = flat.t()
        q, r = qr(flat)
        d = _ops.sign(r.diagonal())
        q = _ops.mul(q, d)
        if rows < cols:
            q = q.t()
        tensor.copy_(q.reshape(tuple(tensor.shape)))
        tensor.mul_(gain)
        return tensor



def _deprecated(new):
    name = new.__name__[:-1]

    def old(*args, **kwargs):
        warnings.warn(f"`nn.init.{name}` is now deprecated in favor of `nn.init.{new.__name__}`.", FutureWarning,
                      stacklevel=2)
        return new(*args, **kwargs)

    old.__name__ = old.__qualname__ = name
    old.__doc__ = f"Deprecated alias of :func:`{new.__name__}`."
    return old


# torch's pre-1.0 names, still found in older scripts: each warns and calls the in-place form.
uniform = _deprecated(uniform_)
normal = _deprecated(normal_)
constant = _deprecated(constant_)
xavier_uniform = _deprecated(xavier_uniform_)
xavier_normal = _deprecated(xavier_normal_)
kaiming_uniform = _deprecated(kaiming_uniform_)
kaiming_normal = _deprecated(kaiming_normal_)
orthogonal = _deprecated(orthogonal_)
