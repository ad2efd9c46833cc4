"""Module-level functions: every op of the C++ op table, plus the few
functions that only exist in Python (tensor construction, NumPy/DLPack)."""

import builtins as _builtins

from . import _C

_ops = _C._ops

__all__ = []


def _export_ops():
    g = globals()
    for info in _C._op_schemas():
        name = info["name"]
        if name.startswith("_") or name.endswith("_") or name in g:
            continue
        g[name] = getattr(_ops, name)
        __all__.append(name)


_export_ops()


def tensor(data, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """Copies data (nested sequences, numbers, NumPy arrays, tensors) into a new tensor."""
    t = _C._tensor(data, dtype, device)
    if requires_grad:
        t.requires_grad_(True)
    return t


def as_tensor(data, dtype=None, device=None):
    if isinstance(data, _C.Tensor):
        if (dtype is None or data.dtype is dtype) and (device is None or data.device == _C.device(str(device))):
            return data
        return data.to(dtype=dtype, device=device)
    if type(data).__module__ == "numpy" and type(data).__name__ == "ndarray" and dtype is None and device is None:
        try:
            return from_numpy(data)
        except (TypeError, ValueError):
            pass
    return _C._tensor(data, dtype, device)


def asarray(obj, dtype=None, device=None, copy=None):
    if copy:
        return _C._tensor(obj, dtype, device)
    return as_tensor(obj, dtype, device)


def from_numpy(array):
    """A tensor sharing memory with a NumPy array (no copy)."""
    if type(array).__module__ != "numpy":
        raise TypeError(f"expected np.ndarray (got {type(array).__name__})")
    dt = array.dtype
    if dt.name not in _NUMPY_DTYPES:
        raise TypeError(f"can't convert np.ndarray of type numpy.{dt.name}. The only supported types are: "
                        + ", ".join(_NUMPY_DTYPES) + ".")
    if not dt.isnative:
        raise ValueError("given numpy array has byte order different from the native byte order. Conversion "
                         "between byte orders is currently not supported.")
    if _builtins.any(st % dt.itemsize for st in array.strides):
        raise ValueError("given numpy array strides not a multiple of the element byte size. Copy the numpy array "
                         "to reallocate the memory.")
    return _C._from_numpy(array)


_NUMPY_DTYPES = ("complex128", "complex64", "float64", "float32", "float16", "int64", "int32", "int16", "int8",
                 "uint64", "uint32", "uint16", "uint8", "bool")


def from_dlpack(ext):
    """A tensor sharing memory with any object that implements DLPack."""
    if isinstance(ext, _C.Tensor):
        return ext
    return _C._from_dlpack(ext)


def is_tensor(obj):
    return isinstance(obj, _C.Tensor)


def is_floating_point(t):
    return t.dtype.is_floating_point


def numel(t):
    return t.numel()


def can_cast(from_, to):
    cat = lambda d: 0 if d is _C.bool else (3 if d.is_complex else 2 if d.is_floating_point else 1)  # noqa: E731
    return cat(from_) <= cat(to)


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """|input - other| <= atol + rtol * |other| elementwise; equal infinities are close."""
    if not isinstance(other, _C.Tensor):
        other = _C._tensor(other, input.dtype, input.device)
    if input.dtype is not other.dtype:
        raise RuntimeError(f"isclose: {input.dtype} did not match {other.dtype}")
    if rtol < 0 or atol < 0:
        raise RuntimeError(f"isclose: rtol ({rtol}) and atol ({atol}) must be non-negative")
    close = _ops.eq(input, other)
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        if input.dtype is _C.bool:
            return close
        a, b = input.double(), other.double()
        return _ops.logical_or(close, _ops.le(_ops.abs(a - b), atol + rtol * _ops.abs(b)))
    if equal_nan:
        close = _ops.logical_or(close, _ops.logical_and(_ops.isnan(input), _ops.isnan(other)))
    finite = _ops.logical_and(_ops.isfinite(input), _ops.isfinite(other))
    within = _ops.le(_ops.abs(input - other), atol + rtol * _ops.abs(other))
    return _ops.logical_or(close, _ops.logical_and(finite, within))


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    return _builtins.bool(_ops.all(isclose(input, other, rtol, atol, equal_nan)).item())


def equal(input, other):
    """True if both tensors have the same shape and elements."""
    if tuple(input._shape) != tuple(other._shape):
        return False
    return _builtins.bool(_ops.all(_ops.eq(input, other)).item())


__all__ += [
    "isclose",
    "allclose",
    "equal",
    "tensor",
    "as_tensor",
    "asarray",
    "from_numpy",
    "from_dlpack",
    "is_tensor",
    "is_floating_point",
    "numel",
    "can_cast",
]
