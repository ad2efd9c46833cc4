"""Methods, operators and properties of strata.Tensor.

Most methods are generated: every op in the C++ op table whose first argument
is `self` becomes a method, and every op that takes `out=` also gets an
in-place variant `name_` that writes into self. What is written here by hand
is only what has no op behind it (conversions, Python protocols)."""

import builtins

from . import _C
from ._size import Size

Tensor = _C.Tensor
_ops = _C._ops


def _install_generated_methods():
    seen = set()
    for info in _C._op_schemas():
        name = info["name"]
        if name in seen or name.startswith("_"):
            continue
        seen.add(name)
        args = info["args"]
        if not args or args[0]["name"] != "self" or args[0]["type"] != "Tensor":
            continue
        if not hasattr(Tensor, name):
            setattr(Tensor, name, _C._op_method(name))
        has_out = builtins.any(a["name"] == "out" for a in args)
        if has_out and not name.endswith("_") and not hasattr(Tensor, name + "_"):
            # self.<name>_(*args, **kwargs): <name>(self, *args, out=self, **kwargs), returns self (in C).
            setattr(Tensor, name + "_", _C._op_inplace_method(name))


_install_generated_methods()

_abs_into_self = Tensor.abs_


def _abs_(self):
    """self = |self|. A complex tensor cannot hold its real absolute value in place (torch's error); the op
    itself cannot tell this from abs(z, out=z), which writes |z| + 0j as torch does."""
    if self.is_complex():
        raise RuntimeError(f"In-place abs is not supported for complex tensors (got a {self.dtype} tensor of "
                           f"shape {list(self.shape)} on {self.device})")
    return _abs_into_self(self)


Tensor.abs_ = _abs_

# ---- properties --------------------------------------------------------------
Tensor.shape = property(lambda self: Size(self._shape))


def _dim_index(n, dim):
    # torch's messages: a 0-d tensor has no dims to index; others name the valid range.
    if n == 0:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    return dim


def _size(self, dim=None):
    s = self._shape
    if dim is None:
        return Size(s)
    return s[_dim_index(len(s), dim)]


def _stride(self, dim=None):
    s = self._stride()
    if dim is None:
        return s
    return s[_dim_index(len(s), dim)]


Tensor.size = _size
Tensor.stride = _stride
Tensor.__len__ = lambda self: _len(self)


def _len(self):
    if self.ndim == 0:
        raise TypeError("len() of a 0-d tensor")
    return self._shape[0]


Tensor.__hash__ = lambda self: id(self)


# ---- conversions -------------------------------------------------------------
def _to(self, *args, **kwargs):
    dtype = kwargs.pop("dtype", None)
    device = kwargs.pop("device", None)
    copy = kwargs.pop("copy", False)
    non_blocking = bool(kwargs.pop("non_blocking", False))
    # A memory format other than preserve_format asks for a dense result in that layout (python/strata/
    # _channels_last.py); preserve_format keeps a channels-last layout through a copy.
    mf = kwargs.pop("memory_format", None)
    dense = mf not in (None, _creation_preserve_format())
    for a in args:
        if isinstance(a, _C.dtype):
            dtype = a
        elif isinstance(a, (str, _C.device)):
            device = a
        elif isinstance(a, Tensor):
            dtype, device = a.dtype, a.device
        else:
            raise TypeError(f"to() received an invalid argument: {type(a).__name__}")
    if kwargs:
        raise TypeError(f"to() got an unexpected keyword argument '{next(iter(kwargs))}'")
    if device is not None and not isinstance(device, _C.device):
        device = _C.device(device)
    same_dtype = dtype is None or dtype is self.dtype
    same_device = device is None or device == self.device
    if not same_device and device.type == "cuda" == self.device.type and device.index is None:
        from . import cuda  # "cuda" names the current device

        same_device = self.device.index == cuda.current_device()
    if same_dtype and same_device and not copy:
        return _channels_last().convert(self, mf, "to") if dense else self
    if not same_device and device.type == "cuda":
        from . import cuda

        if not cuda.is_available():
            from ._tensor_compat import no_cuda_device

            raise no_cuda_device(device, "Tensor.to()")
    if not same_device and device.type == "mps":  # torch's CPU-only builds say the same
        raise RuntimeError("Strata is not linked with support for mps devices")
    if not same_dtype and self.dtype.is_complex and not dtype.is_complex:
        import warnings

        warnings.warn("Casting complex values to real discards the imaginary part", UserWarning, stacklevel=2)
    if non_blocking and device is not None and device.type == "cuda" and self.device.type == "cpu":
        # An asynchronous copy from the host (it is one when the source is pinned): no wait at the end.
        r = _ops.empty(list(self.shape), dtype=self.dtype if dtype is None else dtype, device=device)
        r.copy_(self, non_blocking=True)
    else:
        r = _ops._to_copy(self, dtype=dtype, device=device)
    if not dense:
        mf = None if self.is_contiguous() else _channels_last().suggest(self)
    return _channels_last().convert(r, mf, "to") if mf is not None else r


def _channels_last():
    from . import _channels_last as cl

    return cl


def _creation_preserve_format():
    from ._surface_more import preserve_format

    return preserve_format


Tensor.to = _to
Tensor.cpu = lambda self: _to(self, device="cpu")
Tensor.type_as = lambda self, other: _to(self, dtype=other.dtype)
for _name, _dt in [
    ("float", _C.float32),
    ("double", _C.float64),
    ("half", _C.float16),
    ("bfloat16", _C.bfloat16),
    ("int", _C.int32),
    ("long", _C.int64),
    ("short", _C.int16),
    ("char", _C.int8),
    ("byte", _C.uint8),
    ("bool", _C.bool),
]:
    setattr(Tensor, _name, (lambda d: lambda self: _to(self, dtype=d))(_dt))


def _numpy(self, force=False):
    return self._numpy()


Tensor.numpy = _numpy


def _array(self, dtype=None, copy=None):
    import numpy as np

    a = self._numpy()
    return a.astype(dtype) if dtype is not None else a


Tensor.__array__ = _array


def _item_check(self, what):
    if self.numel() != 1:
        raise RuntimeError(f"a Tensor with {self.numel()} elements cannot be converted to Scalar")
    return self.item()


Tensor.__float__ = lambda self: builtins.float(_item_check(self, "float"))
Tensor.__int__ = lambda self: builtins.int(_item_check(self, "int"))
Tensor.__complex__ = lambda self: builtins.complex(_item_check(self, "complex"))


def _index(self):
    if self.dtype.is_floating_point or self.numel() != 1:
        raise TypeError("only integer tensors of a single element can be converted to an index")
    return self.item()


Tensor.__index__ = _index


def _bool(self):
    if self.numel() != 1:
        raise RuntimeError(
            f"Boolean value of Tensor with more than one value is ambiguous" if self.numel() > 1 else "Boolean value of Tensor with no values is ambiguous"
        )
    return builtins.bool(self.item())


Tensor.__bool__ = _bool


def _iter(self):
    if self.ndim == 0:
        raise TypeError("iteration over a 0-d tensor")
    for i in range(self._shape[0]):
        yield self[i]


Tensor.__iter__ = _iter

# ---- operators ---------------------------------------------------------------
# Operators whose op takes (self, other) in that order are the op's C method
# itself (the same generic binding as Tensor.add), not a Python lambda around
# it: one Python frame less on every `a + b` (docs/BINDING.md, "Optimisations").
# (profiler.explain wraps these too, to time the Python binding.)
OPERATOR_METHODS = {
    "__add__": "add", "__radd__": "add", "__sub__": "sub", "__mul__": "mul", "__rmul__": "mul",
    "__truediv__": "div", "__floordiv__": "floor_divide", "__mod__": "remainder", "__pow__": "pow",
    "__matmul__": "matmul", "__neg__": "neg", "__abs__": "abs",
    "__eq__": "eq", "__ne__": "ne", "__lt__": "lt", "__le__": "le", "__gt__": "gt", "__ge__": "ge",
    "__rsub__": "sub", "__rtruediv__": "div", "__rfloordiv__": "floor_divide", "__rmod__": "remainder",
    "__rpow__": "pow", "__rmatmul__": "matmul",
}
# Comparisons return NotImplemented for operands that are neither Tensors nor
# numbers (None, str, ...), so Python falls back as for torch tensors.
_COMPARISONS = {"__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__"}
# The reflected operators that swap operands (self.__rsub__(other) is
# sub(other, self)) are C methods too.
_SWAPPED = {"__rsub__", "__rtruediv__", "__rfloordiv__", "__rmod__", "__rpow__", "__rmatmul__"}
# Binary operators return NotImplemented for an operand the op does not take
# (the op raised TypeError), so Python tries the other operand's reflected
# method and otherwise raises "unsupported operand type(s)", as torch does.
_UNARY = {"__neg__", "__abs__"}
for _dunder, _op in OPERATOR_METHODS.items():
    if _dunder in _COMPARISONS:
        _make = _C._op_comparison_method
    elif _dunder in _SWAPPED:
        _make = _C._op_reflected_operator_method
    elif _dunder in _UNARY:
        _make = _C._op_method
    else:
        _make = _C._op_operator_method
    setattr(Tensor, _dunder, _make(_op))
# Two plain Tensors go from the type's number slot straight to the op
# (op_bind.cpp, Note [Operator slots]).
_C._install_operator_slots()
# In-place operators are the in-place method itself (a C method that returns
# self), as torch binds them in C; no Python frame on `a += b`.
INPLACE_OPERATOR_METHODS = {
    "__iadd__": "add_", "__isub__": "sub_", "__imul__": "mul_", "__itruediv__": "div_",
    "__ifloordiv__": "floor_divide_", "__imod__": "remainder_", "__ipow__": "pow_",
    "__iand__": "bitwise_and_", "__ior__": "bitwise_or_", "__ixor__": "bitwise_xor_",
}
for _dunder, _method in INPLACE_OPERATOR_METHODS.items():
    setattr(Tensor, _dunder, Tensor.__dict__[_method])
Tensor.__pos__ = lambda self: self
Tensor.__invert__ = lambda self: _ops.logical_not(self) if self.dtype is _C.bool else _ops.bitwise_not(self)
Tensor.__and__ = lambda self, other: _logical_or_bitwise("and", self, other)
Tensor.__rand__ = lambda self, other: _logical_or_bitwise("and", self, other)
Tensor.__or__ = lambda self, other: _logical_or_bitwise("or", self, other)
Tensor.__ror__ = lambda self, other: _logical_or_bitwise("or", self, other)
Tensor.__xor__ = lambda self, other: _logical_or_bitwise("xor", self, other)
Tensor.__rxor__ = lambda self, other: _logical_or_bitwise("xor", self, other)


def _logical_or_bitwise(kind, a, b):
    return getattr(_ops, "bitwise_" + kind)(a, b)


def _isclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    from ._functions import isclose

    return isclose(self, other, rtol, atol, equal_nan)


def _allclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    from ._functions import allclose

    return allclose(self, other, rtol, atol, equal_nan)


Tensor.isclose = _isclose
Tensor.allclose = _allclose
Tensor.equal = lambda self, other: __import__("strata").equal(self, other)

# Aliases with PyTorch's names.
Tensor.true_divide = lambda self, other: _ops.div(self, other)
Tensor.multiply = Tensor.mul
Tensor.subtract = Tensor.sub
Tensor.divide = Tensor.div
Tensor.absolute = Tensor.abs
Tensor.negative = Tensor.neg
Tensor.clip = Tensor.clamp
Tensor.clip_ = Tensor.clamp_
Tensor.fix = Tensor.trunc
Tensor.greater = Tensor.gt
Tensor.less = Tensor.lt
Tensor.greater_equal = Tensor.ge
Tensor.less_equal = Tensor.le
Tensor.not_equal = Tensor.ne
Tensor.new_tensor = lambda self, data, dtype=None, device=None: _C._tensor(data, dtype or self.dtype, device or self.device)
Tensor.dim_order = lambda self: tuple(sorted(range(self.ndim), key=lambda d: -self._stride()[d]))


def _repr(self):
    from ._repr import tensor_repr

    return tensor_repr(self)


Tensor.__repr__ = _repr
Tensor.__str__ = _repr
