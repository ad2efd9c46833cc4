"""nn.Parameter: a Tensor subclass that Modules register as a learnable parameter.

The subclass instance is built by the core's ``Tensor._make_subclass(cls, data, requires_grad)`` (an alias of
``data``'s storage with ``cls`` as its Python type, as in torch). Every place that creates a Parameter goes through
``_make_subclass`` below, and every place that asks "is this a parameter?" goes through ``is_parameter``, so the
construction is defined once."""

from .. import _C

Tensor = _C.Tensor

__all__ = ["Parameter", "is_parameter"]


def _make_subclass(cls, data, requires_grad):
    maker = getattr(Tensor, "_make_subclass", None)
    if maker is None:
        raise RuntimeError(
            "nn.Parameter needs Tensor._make_subclass, which comes with the autograd core and is not available in "
            "this build of strata")
    return maker(cls, data, requires_grad)


def is_parameter(value):
    """True for Parameter instances, and (like torch's _ParameterMeta) for tensors flagged with ``_is_param``."""
    if isinstance(value, Parameter):
        return True
    return isinstance(value, Tensor) and getattr(value, "_is_param", False) is True


class Parameter(Tensor):
    """Parameter(data=None, requires_grad=True): a tensor that is a module parameter.

    Shares ``data``'s storage. ``data=None`` gives an empty float tensor (default dtype)."""

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = _C._ops.empty([0])
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter(): data must be a Tensor, not {type(data).__name__}")
        if cls is Parameter and getattr(type(data), "_strata_param_subclass", False):
            # a tensor subclass that stays itself as a parameter (DTensor: torch's Parameter(dtensor) is a DTensor)
            return data._as_parameter(requires_grad)
        return _make_subclass(cls, data, requires_grad)

    def __init__(self, *args, **kwargs):
        # All the work is in __new__; Tensor's own __init__ (nanobind) takes no arguments.
        pass

    def __repr__(self):
        return "Parameter containing:\n" + Tensor.__repr__(self)
