"""Helpers shared by the distributions (torch.distributions.utils)."""

import numbers

import strata as _st

__all__ = ["_standard_gamma", "_standard_gamma_grad", "broadcast_all", "clamp_probs", "lazy_property", "logits_to_probs", "probs_to_logits"]


def broadcast_all(*values):
    """Tensors and numbers broadcast to one shape; numbers become tensors of the default dtype
    (or of the first tensor's dtype)."""
    tensors = [v for v in values if isinstance(v, _st.Tensor)]
    if not all(isinstance(v, (_st.Tensor, numbers.Number)) for v in values):
        raise ValueError("Input arguments must all be instances of numbers.Number or strata.Tensor.")
    if not tensors:
        dt = _st.get_default_dtype()
        return tuple(_st.tensor(float(v), dtype=dt) for v in values)
    like = tensors[0]
    vals = [v if isinstance(v, _st.Tensor) else _st.tensor(v, dtype=like.dtype, device=like.device) for v in values]
    return tuple(_st.broadcast_tensors(*vals))


def _batch_shape(values, like):
    """The batch shape of a distribution built from `values` (numbers or tensors): () when all are
    numbers, else the shape of `like`, one of the broadcast parameters."""
    if all(isinstance(v, numbers.Number) for v in values):
        return _st.Size()
    return like.size()


def _sum_rightmost(value, dim):
    if dim == 0:
        return value
    return value.reshape(tuple(value.shape[:value.dim() - dim]) + (-1,)).sum(-1)


def clamp_probs(probs):
    eps = _st.finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def logits_to_probs(logits, is_binary=False):
    return _st.sigmoid(logits) if is_binary else _st.softmax(logits, -1)


def probs_to_logits(probs, is_binary=False):
    ps = clamp_probs(probs)
    if is_binary:
        return _st.log(ps) - _st.log1p(-ps)
    return _st.log(ps)


class lazy_property:
    """Computed on first access, then stored on the instance (a plain attribute from then on)."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        self.__doc__ = wrapped.__doc__

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return self
        with _st.enable_grad():
            value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value


def _standard_gamma(input, generator=None):
    """Gamma(input, 1) samples (torch._standard_gamma), differentiable in input."""
    from .._creation import _gen_id
    return _st._C._ops._standard_gamma(input, _gen_id(generator))


def _standard_gamma_grad(input, output):
    """d output / d input for output = _standard_gamma(input) (torch._standard_gamma_grad)."""
    return _st._C._ops._standard_gamma_grad(input, output)
