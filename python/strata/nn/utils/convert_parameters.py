"""Flattening parameters into one vector and back (torch.nn.utils.convert_parameters)."""

from ... import _C

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def _check_device(param, old_device):
    if old_device is None:
        return param.device
    if param.device != old_device:
        raise TypeError("Found two parameters on different devices, this is currently not supported.")
    return old_device


def parameters_to_vector(parameters):
    """The parameters flattened and concatenated into one 1-d tensor (a copy)."""
    from ..._functions import cat

    if isinstance(parameters, _C.Tensor):
        raise TypeError(f"expected an iterable of Tensors, but got: {type(parameters).__name__}")
    device = None
    vec = []
    for param in parameters:
        device = _check_device(param, device)
        vec.append(param.reshape(-1))
    return cat(vec)


def vector_to_parameters(vec, parameters):
    """Copies consecutive slices of the 1-d ``vec`` into ``parameters`` (shaped like each parameter).

    torch rebinds each ``param.data`` to a view of ``vec``; Strata has no ``.data`` yet, so the values
    are copied in place instead: the parameters get the values but do not alias ``vec``."""
    from ..._grad_mode import no_grad

    if not isinstance(vec, _C.Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    if vec.dim() != 1:
        raise RuntimeError(f"vector_to_parameters: expected a 1-d vector, got shape {list(vec.shape)}")
    device = None
    params = list(parameters)
    total = sum(p.numel() for p in params)
    if total != vec.numel():
        raise RuntimeError(f"vector_to_parameters: the vector has {vec.numel()} elements but the parameters need "
                           f"{total}")
    pointer = 0
    with no_grad():
        for param in params:
            device = _check_device(param, device)
            n = param.numel()
            param.copy_(vec[pointer:pointer + n].view(list(param.shape)))
            pointer += n
