"""torch's other names for ops Strata has (bound to the very same callables,
so an alias costs nothing), and the few math functions with no op of their
own (positive, rsub, polygamma's method form)."""

from . import _C

Tensor = _C.Tensor
_ops = _C._ops

# alias -> op, for strata.<alias> and Tensor.<alias> (and <alias>_ where the op has an in-place form).
_ALIASES = {
    "clip": "clamp",
    "arccos": "acos",
    "arcsin": "asin",
    "arctan": "atan",
    "arctan2": "atan2",
    "arccosh": "acosh",
    "arcsinh": "asinh",
    "arctanh": "atanh",
    "absolute": "abs",
    "negative": "neg",
    "multiply": "mul",
    "divide": "div",
    "true_divide": "div",
    "subtract": "sub",
    "greater": "gt",
    "greater_equal": "ge",
    "less": "lt",
    "less_equal": "le",
    "not_equal": "ne",
    "fix": "trunc",
}
# Function-only aliases (torch has no Tensor method of these names).
_FUNCTION_ALIASES = {"concat": "cat", "concatenate": "cat"}

__all__ = []


def _install():
    g = globals()
    for alias, name in list(_ALIASES.items()) + list(_FUNCTION_ALIASES.items()):
        g[alias] = getattr(_ops, name)
        __all__.append(alias)
    for alias, name in _ALIASES.items():
        setattr(Tensor, alias, getattr(Tensor, name))
        inplace = Tensor.__dict__.get(name + "_")
        if inplace is not None:
            setattr(Tensor, alias + "_", inplace)


_install()


def positive(input):
    """input itself (torch.positive); an error for bool tensors, like unary +."""
    if input.dtype is _C.bool:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return input


def rsub(input, other, alpha=1):
    """other - alpha * input."""
    return _ops.sub(other, input, alpha=alpha)


Tensor.positive = positive
# polygamma's op takes n first (torch's schema); its method form takes self first.
Tensor.polygamma = lambda self, n: _ops.polygamma(n, self)


def _polygamma_(self, n):
    _ops.polygamma(n, self, out=self)
    return self


Tensor.polygamma_ = _polygamma_

__all__ += ["positive", "rsub"]
