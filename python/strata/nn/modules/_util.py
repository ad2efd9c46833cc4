"""Helpers shared by the layer modules."""

import builtins
import collections.abc

from ... import _C
from ..parameter import Parameter


def _ntuple(n, name):
    def parse(x):
        if isinstance(x, collections.abc.Iterable) and not isinstance(x, str):
            return tuple(x)
        return tuple([x] * n)

    parse.__name__ = name
    return parse


_single = _ntuple(1, "_single")
_pair = _ntuple(2, "_pair")
_triple = _ntuple(3, "_triple")


def factory_kwargs(device, dtype):
    return {"device": device, "dtype": dtype}


def new_param(shape, device=None, dtype=None):
    """An uninitialised Parameter (reset_parameters fills it), on device/dtype or the defaults."""
    from ... import empty

    if dtype is not None and not dtype.is_floating_point:
        raise TypeError(f"only floating-point dtypes can hold parameters here, got {dtype}")
    return Parameter(empty(tuple(builtins.int(s) for s in shape), device=device, dtype=dtype))


def as_int(value, what):
    if isinstance(value, builtins.bool) or not hasattr(value, "__index__"):
        raise TypeError(f"{what} must be an int, got {type(value).__name__}")
    return value.__index__()


Tensor = _C.Tensor
