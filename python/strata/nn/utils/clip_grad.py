"""Gradient clipping (torch.nn.utils.clip_grad).

The grads are scaled in place with whole-tensor ops; ``foreach`` is accepted for torch
compatibility and ignored (Strata has no fused multi-tensor kernels)."""

import math

from ... import _C

__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "get_total_norm", "clip_grads_with_norm_"]


def _as_list(parameters):
    if isinstance(parameters, _C.Tensor):
        return [parameters]
    return list(parameters)


def _grads(parameters):
    return [g for g in (getattr(p, "grad", None) for p in parameters) if g is not None]


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The ``norm_type`` norm of all ``tensors`` together (the norm of their norms), as a 0-d tensor."""
    from ..._functions import tensor
    from ..._functions import stack

    tensors = _as_list(tensors)
    norm_type = float(norm_type)
    if len(tensors) == 0:
        return tensor(0.0)
    if any(getattr(t, "_strata_dtensor", False) for t in tensors):
        # sharded gradients: each shard's contribution is reduced over the mesh
        from ...distributed.tensor._api import _total_norm
        return _total_norm(tensors, norm_type, error_if_nonfinite)
    norms = [t.norm(norm_type) for t in tensors]
    dtypes = {n.dtype for n in norms}
    if len(dtypes) > 1:
        # torch promotes mixed-precision norms before combining them.
        target = norms[0].dtype
        for n in norms[1:]:
            target = _C.promote_types(target, n.dtype)
        norms = [n.to(dtype=target) for n in norms]
    total_norm = stack(norms).norm(norm_type)
    if error_if_nonfinite and bool(total_norm.isnan().logical_or(total_norm.isinf())):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, so it "
                           "cannot be clipped. To disable this error and scale the gradients by the non-finite norm "
                           "anyway, set `error_if_nonfinite=False`")
    return total_norm


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scales the grads of ``parameters`` by ``min(1, max_norm / (total_norm + 1e-6))`` in place."""
    grads = _grads(_as_list(parameters))
    if len(grads) == 0:
        return
    max_norm = float(max_norm)
    clip_coef = (total_norm + 1e-6).reciprocal().mul_(max_norm).clamp_(max=1.0)
    for g in grads:
        g.mul_(clip_coef)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Scales the gradients of ``parameters`` in place so that their total ``norm_type`` norm is at most
    ``max_norm``; returns the total norm before clipping. Parameters without a grad are skipped."""
    parameters = _as_list(parameters)
    if not isinstance(max_norm, _C.Tensor):
        max_norm = float(max_norm)
    grads = _grads(parameters)
    total_norm = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(parameters, max_norm, total_norm, foreach)
    return total_norm


def clip_grad_norm(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Deprecated alias of clip_grad_norm_ (as in torch)."""
    import warnings
    warnings.warn("`torch.nn.utils.clip_grad_norm` is now deprecated in favor of `torch.nn.utils.clip_grad_norm_`.",
                  FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamps every gradient of ``parameters`` to ``[-clip_value, clip_value]`` in place."""
    clip_value = float(clip_value)
    if math.isnan(clip_value):
        raise ValueError("clip_grad_value_: clip_value must not be NaN")
    for g in _grads(_as_list(parameters)):
        g.clamp_(min=-clip_value, max=clip_value)
