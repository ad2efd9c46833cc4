"""channels_last / channels_last_3d memory formats.

A channels_last tensor is an ordinary strided tensor whose strides put C fastest, then W, H (, D), N: for a
contiguous (N, C, H, W) the strides are (H*W*C, 1, W*C, C), torch's. It is made with empty_strided (empty,
*_like) or, for a copy of existing values, as permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2), which is
differentiable with the ops strata already has. Pointwise ops keep the layout (TensorIterator allocates its output
in the layout of a channels_last first input); conv2d, batch_norm and the 2-d poolings give a channels_last input a
channels_last result (computed in the contiguous layout, then laid out again), as torch does on the CPU.
"""

from . import _C
from ._surface_more import channels_last, channels_last_3d, contiguous_format, memory_format, preserve_format

_ops = _C._ops

# (rank, permutation to the channels-last order, permutation back)
_FORMATS = {
    "channels_last": (4, (0, 2, 3, 1), (0, 3, 1, 2)),
    "channels_last_3d": (5, (0, 2, 3, 4, 1), (0, 4, 1, 2, 3)),
}


def check(mf, op):
    if mf is not None and not isinstance(mf, memory_format):
        raise TypeError(f"{op}(): argument 'memory_format' must be torch.memory_format, not {type(mf).__name__}")


def _spec(mf, ndim, op):
    rank, to, back = _FORMATS[mf._name]
    if ndim != rank:
        # torch's messages
        raise RuntimeError(f"required rank {rank} tensor to use {mf._name} format")
    return to, back


def strides(shape, mf):
    """torch's strides of a dense tensor of `shape` in format mf (channels_last or channels_last_3d)."""
    to, _ = _spec(mf, len(shape), "memory_format")
    out = [0] * len(shape)
    s = 1
    for d in reversed(to):
        out[d] = s
        s *= max(shape[d], 1)
    return tuple(out)


def suggest(t):
    """The channels-last format t is laid out in (not plain contiguous), or None."""
    nd = t.dim()
    if nd not in (4, 5) or t.is_contiguous():
        return None
    mf = channels_last if nd == 4 else channels_last_3d
    return mf if t.is_contiguous(memory_format=mf) else None


def empty(shape, mf, dtype=None, device=None):
    return _ops.empty_strided(list(shape), list(strides(shape, mf)), dtype=dtype, device=device)


def _strides_like(t, mf):
    """torch's is_strides_like_channels_last(_3d): whether to(memory_format=mf) may return t itself. Stricter than
    is_contiguous(memory_format=) for size-1 dims: a (2, 4, 1, 1) row-major tensor is both contiguous and
    channels-last contiguous, but to() still lays it out with the channels-last strides (4, 1, 4, 4)."""
    to, _ = _FORMATS[mf._name][1:]
    sizes, strides_ = t.shape, t.stride()
    if strides_[1] == 0:
        return False
    least = 0
    for d in (1,) + tuple(reversed(to[1:-1])) + (0,):
        if sizes[d] == 0 or strides_[d] < least or (d == 0 and least == strides_[1]):
            return False
        least = strides_[d] * (sizes[d] if sizes[d] > 1 else 1)
    return True


def convert(t, mf, op="contiguous"):
    """t laid out in memory format mf (t itself when it already is): differentiable. contiguous() keeps a tensor
    that is_contiguous(memory_format=mf); to() keeps one whose strides are channels-last-like, as torch."""
    check(mf, op)
    if mf is None or mf is contiguous_format:
        return t.contiguous()
    if mf is preserve_format:
        return t if suggest(t) is not None else t.contiguous()
    to, back = _spec(mf, t.dim(), op)
    if (_strides_like(t, mf) if op == "to" else t.is_contiguous(memory_format=mf)):
        return t
    return _ops.clone(t.permute(*to)).permute(*back)  # the op's clone is row-major in the permuted order


def clone(t, mf):
    """clone(memory_format=): preserve_format (the default) keeps a channels-last layout, as torch's does."""
    check(mf, "clone")
    if mf is None or mf is preserve_format:
        mf = suggest(t)
        if mf is None:
            return _ops.clone(t)
    elif mf is contiguous_format:
        return _ops.clone(t)
    to, back = _spec(mf, t.dim(), "clone")
    return _ops.clone(t.permute(*to)).permute(*back)  # the op's clone is row-major: of the permuted order here


def like_layout(input, mf):
    """The format of a *_like result: channels_last asked for, or input's kept (preserve_format), else None."""
    if mf is None or mf is preserve_format:
        return suggest(input)
    if mf is contiguous_format:
        return None
    _spec(mf, input.dim(), "empty_like")
    return mf


def keep_layout(fn):
    """Wraps an NCHW op so that a channels-last input gets a channels-last result (as torch's CPU kernels give)."""
    def wrapped(input, *args, **kwargs):
        mf = suggest(input) if isinstance(input, _C.Tensor) else None
        out = fn(input, *args, **kwargs)
        if mf is None:
            return out
        if isinstance(out, tuple):
            parts = [convert(o, mf) if o.dim() == input.dim() else o for o in out]
            return type(out)(*parts) if hasattr(out, "_fields") else type(out)(parts)
        return convert(out, mf) if out.dim() == input.dim() else out
    wrapped.__name__ = fn.__name__
    wrapped.__qualname__ = getattr(fn, "__qualname__", fn.__name__)
    wrapped.__doc__ = fn.__doc__
    wrapped.__wrapped__ = fn
    return wrapped
