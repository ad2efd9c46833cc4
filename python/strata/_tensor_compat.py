"""Tensor methods about devices and legacy types, with torch's behaviour on a
machine without a GPU: `format()`, `type()`, `cuda()`, `pin_memory()`,
`is_pinned()`. Strata has no CUDA backend, so moving a tensor to a GPU raises
AssertionError naming the device (the exception torch raises there)."""

from . import _C
from . import _legacy_types as _legacy

Tensor = _C.Tensor

# Legacy tensor-type names (torch.FloatTensor, ...) for Tensor.type(); the
# prefix is Strata's, as in dtype reprs (strata.float32), and "torch." is
# accepted on input so that torch scripts' strings work unchanged.
_TYPE_NAMES = {
    _C.float32: "FloatTensor", _C.float64: "DoubleTensor", _C.float16: "HalfTensor", _C.bfloat16: "BFloat16Tensor",
    _C.int64: "LongTensor", _C.int32: "IntTensor", _C.int16: "ShortTensor", _C.int8: "CharTensor",
    _C.uint8: "ByteTensor", _C.bool: "BoolTensor",
}
_BY_NAME = {name: dt for dt, name in _TYPE_NAMES.items()}
# Types with no legacy tensor class still have torch's name ("torch.Float8_e4m3fnTensor"), as output only.
_TYPE_NAMES.update({dt: n + "Tensor" for dt, n in (
    (_C.float8_e4m3fn, "Float8_e4m3fn"), (_C.float8_e5m2, "Float8_e5m2"), (_C.float8_e4m3fnuz, "Float8_e4m3fnuz"),
    (_C.float8_e5m2fnuz, "Float8_e5m2fnuz"), (_C.float8_e8m0fnu, "Float8_e8m0fnu"))})


def no_cuda_device(device, what):
    # The exception type torch's CPU-only build raises; the reason is why this process has no usable CUDA.
    from . import cuda

    return AssertionError(f"CUDA unavailable: {what} asked for device '{device}', and this process has no CUDA "
                          f"backend (strata.cuda.is_available() is False: {cuda.is_available_reason()})")


def _format(self, spec):
    # As torch: a 0-d tensor formats as its Python number ("{:.4f}", "{:d}");
    # anything else is str(self) for an empty spec and a TypeError otherwise.
    if self.ndim == 0 and self.device.type != "meta":
        return self.item().__format__(spec)
    return object.__format__(self, spec)


def _type(self, dtype=None, non_blocking=False, **kwargs):
    if dtype is None:
        return "strata." + _TYPE_NAMES[self.dtype]
    if isinstance(dtype, str):
        name = dtype
        for prefix in ("torch.", "strata."):
            if name.startswith(prefix):
                name = name[len(prefix):]
                break
        else:
            raise ValueError(f"invalid type: '{dtype}'")
        if name.startswith("cuda."):
            raise no_cuda_device("cuda", f"Tensor.type({dtype!r})")
        if name not in _BY_NAME:
            raise ValueError(f"invalid type: '{dtype}'")
        dtype = _BY_NAME[name]
    if isinstance(dtype, _legacy._LegacyTensorType):  # strata.FloatTensor and friends
        if dtype.is_cuda:
            raise no_cuda_device("cuda", f"Tensor.type({dtype!r})")
        dtype = dtype.dtype
    if not isinstance(dtype, _C.dtype):
        raise TypeError(f"type(): argument 'dtype' must be a dtype or a type name string, not {type(dtype).__name__}")
    return self if dtype is self.dtype else self.to(dtype)


def _cuda(self, device=None, non_blocking=False, memory_format=None):
    if device is None:
        device = "cuda"
    elif not isinstance(device, (str, _C.device)):
        device = f"cuda:{int(device)}"
    from . import cuda

    if not cuda.is_available():
        raise no_cuda_device(device, "Tensor.cuda()")
    return self.to(device, non_blocking=non_blocking)


def _pin_memory(self, device=None):
    # Pinned (page-locked) host memory only exists for copies to an accelerator (src/backends/cuda/pinned_memory.h).
    from . import cuda

    if not cuda.is_available():
        raise RuntimeError("Cannot access accelerator device when none is available: Tensor.pin_memory() needs one "
                           f"(strata.cuda.is_available() is False: {cuda.is_available_reason()})")
    if _C._cuda.is_pinned(self):
        return self
    return _C._cuda.pin_memory(self)


def _is_pinned(self, device=None):
    return _C._cuda.is_pinned(self)


def _new(self, *args, **kwargs):
    """The legacy constructor on a tensor: `t.new(2, 3)` uninitialised, `t.new(data)`,
    `t.new()` empty, all of t's dtype."""
    return _legacy.new_tensor_like(self.dtype, "Tensor.new", args, kwargs)


def _legacy_tensor_ctor(*args, **kwargs):
    """strata.Tensor(...) (torch.Tensor's legacy constructor; called by the binding's __init__):
    the default dtype, as torch.Tensor is the default tensor type."""
    from . import get_default_dtype
    return _legacy.new_tensor_like(get_default_dtype(), "Tensor", args, dict(kwargs))


Tensor.__format__ = _format
Tensor.type = _type
Tensor.cuda = _cuda
Tensor.pin_memory = _pin_memory
Tensor.is_pinned = _is_pinned
Tensor.new = _new
