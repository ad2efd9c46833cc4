"""The legacy tensor types: strata.FloatTensor, strata.LongTensor, ... and their
strata.cuda counterparts, as torch keeps them for older scripts.

Each is a class whose instances are never made: calling it builds an ordinary
strata.Tensor of its dtype (`FloatTensor(2, 3)` uninitialised of that shape,
`FloatTensor([1, 2])` from data, `FloatTensor()` empty), and
`isinstance(t, FloatTensor)` tests the tensor's dtype and device.
`Tensor.type(FloatTensor)` converts to its dtype. The CUDA ones exist so that
code naming them imports, and raise when used: there is no CUDA backend."""

import builtins

from . import _C
from ._size import Size

__all__ = ["FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor", "IntTensor", "ShortTensor",
           "CharTensor", "ByteTensor", "BoolTensor"]

_DTYPES = {"FloatTensor": _C.float32, "DoubleTensor": _C.float64, "HalfTensor": _C.float16,
           "BFloat16Tensor": _C.bfloat16, "LongTensor": _C.int64, "IntTensor": _C.int32, "ShortTensor": _C.int16,
           "CharTensor": _C.int8, "ByteTensor": _C.uint8, "BoolTensor": _C.bool}


def new_tensor_like(dtype, what, args, kwargs):
    """torch's legacy constructor: `()` empty, sizes uninitialised, a sequence or
    array as data, a tensor of the same dtype aliased."""
    device = kwargs.pop("device", None)
    if kwargs:
        raise TypeError(f"{what}() got an unexpected keyword argument '{next(iter(kwargs))}' (it takes sizes or "
                        "data, and device=)")
    if device is not None and (_C.device(device) if isinstance(device, str) else device).type != "cpu":
        raise TypeError(f"{what}(): Strata creates these on the CPU only, got device={device}")
    from . import empty, tensor

    if not args:
        return empty(0, dtype=dtype)
    first = args[0]
    if len(args) == 1 and isinstance(first, _C.Tensor):
        if first.dtype is not dtype:
            raise TypeError(f"{what}(): expected a tensor of dtype {dtype}, got one of dtype {first.dtype}")
        return first.detach()
    if builtins.all(isinstance(a, builtins.int) and not isinstance(a, builtins.bool) for a in args) or \
            (len(args) == 1 and isinstance(first, Size)):
        sizes = tuple(first) if len(args) == 1 and not isinstance(first, builtins.int) else args
        for s in sizes:
            if s < 0:
                raise RuntimeError(f"Trying to create tensor with negative dimension {s}: {list(sizes)}")
        return empty(*sizes, dtype=dtype)
    if len(args) == 1 and not isinstance(first, (builtins.int, builtins.float, builtins.bool, builtins.complex)):
        return tensor(first, dtype=dtype)
    raise TypeError(f"{what}(): takes sizes (ints) or one sequence of data, got "
                    f"({', '.join(type(a).__name__ for a in args)}); a single number is not a sequence")


class _LegacyTensorType(type):
    def __call__(cls, *args, **kwargs):
        if cls.is_cuda:
            raise TypeError(f"type {cls.__module__}.{cls.__qualname__} not available: Strata not compiled with CUDA "
                            "enabled (strata.cuda.is_available() is False)")
        return new_tensor_like(cls.dtype, f"strata.{cls.__name__}", args, dict(kwargs))

    def __instancecheck__(cls, obj):
        return isinstance(obj, _C.Tensor) and obj.dtype is cls.dtype and (obj.device.type == "cuda") == cls.is_cuda

    def __repr__(cls):
        return f"<class '{cls.__module__}.{cls.__qualname__}'>"


def _make(name, module, is_cuda):
    return _LegacyTensorType(name, (), {"dtype": _DTYPES[name], "is_cuda": is_cuda, "__module__": module,
                                        "__doc__": f"Legacy tensor type of dtype {_DTYPES[name]}"
                                                   + (" on CUDA (unavailable: no CUDA backend)." if is_cuda else ".")})


for _name in __all__:
    globals()[_name] = _make(_name, "strata", False)
CUDA_TYPES = {name: _make(name, "strata.cuda", True) for name in __all__}
