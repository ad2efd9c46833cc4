"""Affine-quantized tensors: strata.qint8 / quint8 / qint32, quantize_per_tensor / quantize_per_channel,
dequantize, int_repr and the q_* accessors (docs/SPARSE.md, "Quantized tensors").

A quantized tensor is a strata.Tensor whose C++ object is a QuantizedTensorImpl (src/sparse/quantized.h): it
shares the storage of its integer representation (int8 / uint8 / int32) and holds the scale and zero point
(or per-channel scales, zero points and axis). Its Quantized key routes every op given one to ``_handle``
below: view-like ops and clone act on the integer representation of a per-tensor quantized tensor; anything
else raises NotImplementedError naming the op (dequantize() first).

Rounding and clamping follow torch's CPU kernels: q = clamp(round_half_even(x * (1 / scale) + zero_point),
qmin, qmax) in float32; dequantize is (q - zero_point) * scale in float32 (per channel: in float64, rounded once).
"""

import numpy as np

from . import _C

Tensor = _C.Tensor
_ops = _C._ops


class dtype:  # noqa: N801  (torch's quantized dtypes print as torch.qint8 ...)
    """A quantized dtype: what tensor.dtype is for a quantized tensor."""

    is_floating_point = False
    is_complex = False

    def __init__(self, name, code, repr_dtype, qmin, qmax):
        self._name, self._code, self._repr_dtype = name, code, repr_dtype
        self._qmin, self._qmax = qmin, qmax
        self.is_signed = qmin < 0
        self.itemsize = repr_dtype.itemsize

    def __repr__(self):
        return "strata." + self._name

    def __reduce__(self):
        return self._name  # the module attribute strata.<name>

    def to_real(self):
        return self

    def to_complex(self):
        raise RuntimeError(f"to_complex() is not supported for {self!r}")


qint8 = dtype("qint8", 0, _C.int8, -128, 127)
quint8 = dtype("quint8", 1, _C.uint8, 0, 255)
qint32 = dtype("qint32", 2, _C.int32, -(2 ** 31), 2 ** 31 - 1)
_BY_CODE = [qint8, quint8, qint32]
_C._quant_set_dtypes(list(_BY_CODE))


class qscheme:  # noqa: N801
    def __init__(self, name):
        self._name = name

    def __repr__(self):
        return "strata." + self._name

    def __reduce__(self):
        return self._name


per_tensor_affine = qscheme("per_tensor_affine")
per_channel_affine = qscheme("per_channel_affine")
per_tensor_symmetric = qscheme("per_tensor_symmetric")
per_channel_symmetric = qscheme("per_channel_symmetric")
per_channel_affine_float_qparams = qscheme("per_channel_affine_float_qparams")

_is_quantized = _C._is_quantized


def _parts(t):
    p = _C._quant_parts(t)
    if p is None:
        raise RuntimeError("expected a quantized tensor (quantize_per_tensor / quantize_per_channel), got a "
                           f"{t.dtype} tensor")
    return p


def _check_qdtype(dt, what):
    if not isinstance(dt, dtype):
        raise RuntimeError(f"{what}: expected a quantized dtype (strata.qint8, strata.quint8 or strata.qint32), "
                           f"got {dt!r}")


def _check_float_input(x, what):
    if not isinstance(x, Tensor):
        raise TypeError(f"{what}: expected a Tensor, got {type(x).__name__}")
    if _is_quantized(x):
        raise RuntimeError(f"{what}: the input is already quantized ({x.dtype})")
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"{what}: expected a floating point input, got {x.dtype}")


def _as_float(v, what, name):
    if isinstance(v, Tensor):
        if v.numel() != 1:
            raise RuntimeError(f"{what}: {name} must be a single number, got a tensor of shape {list(v.shape)}")
        return v.item()
    return v


def _quantize(x, inv, zp, dt):
    # round_half_even(x * inv + zero_point) in float32, as torch's kernels (the zero point is added before
    # rounding: 0.5 + 3 rounds to 4), then the clamp in float64 so that qint32's bounds are exact.
    r = (x.float() * inv + zp).round().double()
    return r.clamp(dt._qmin, dt._qmax).to(dt._repr_dtype)


def quantize_per_tensor(input, scale, zero_point, dtype):  # noqa: A002
    """torch.quantize_per_tensor: affine quantization with one scale and zero point. A list of tensors gives a
    list (torch's overload)."""
    if isinstance(input, (list, tuple)):
        return [quantize_per_tensor(t, scale, zero_point, dtype) for t in input]
    what = "quantize_per_tensor"
    _check_qdtype(dtype, what)
    _check_float_input(input, what)
    scale = float(_as_float(scale, what, "scale"))
    zero_point = int(_as_float(zero_point, what, "zero_point"))
    if not scale > 0 or not np.isfinite(scale):
        raise RuntimeError(f"{what}: scale must be a positive finite number, got {scale}")
    if not dtype._qmin <= zero_point <= dtype._qmax:
        raise RuntimeError(f"{what}: zero_point {zero_point} is out of range for {dtype!r} "
                           f"[{dtype._qmin}, {dtype._qmax}]")
    inv = float(np.float32(1.0) / np.float32(scale))
    q = _quantize(input.detach(), inv, zero_point, dtype)
    return _C._quant_make(q, dtype._code, scale, zero_point, None, None, 0)


def quantize_per_channel(input, scales, zero_points, axis, dtype):  # noqa: A002
    """torch.quantize_per_channel: one scale (float64) and zero point (int64) per slice along axis."""
    what = "quantize_per_channel"
    _check_qdtype(dtype, what)
    _check_float_input(input, what)
    if not isinstance(scales, Tensor) or not isinstance(zero_points, Tensor):
        raise TypeError(f"{what}: scales and zero_points must be tensors")
    n = input.dim()
    if not -n <= axis < n:
        raise RuntimeError(f"{what}: axis {axis} is out of range for a {n}-d input")
    axis %= n
    c = input.shape[axis]
    if scales.dim() != 1 or zero_points.dim() != 1 or scales.shape[0] != c or zero_points.shape[0] != c:
        raise RuntimeError(f"{what}: expected {c} scales and zero points (the size of dim {axis}), got shapes "
                           f"{list(scales.shape)} and {list(zero_points.shape)}")
    scales = scales.to(_C.float64)
    zero_points = zero_points.to(_C.int64)
    if c and not bool((scales > 0).all()):
        raise RuntimeError(f"{what}: scales must be positive")
    shape = [1] * n
    shape[axis] = c
    inv = (1.0 / scales.float()).reshape(shape)
    q = _quantize(input.detach(), inv, zero_points.float().reshape(shape), dtype)
    return _C._quant_make(q, dtype._code, 1.0, 0, scales, zero_points, axis)


def quantize_per_tensor_dynamic(input, dtype, reduce_range):  # noqa: A002
    """torch.quantize_per_tensor_dynamic: scale and zero point chosen from input's min and max (fbgemm's
    ChooseQuantizationParams over the dtype's range, halved with reduce_range), then quantize_per_tensor."""
    what = "quantize_per_tensor_dynamic"
    if dtype not in (qint8, quint8):
        raise RuntimeError(f"{what}: dtype must be strata.qint8 or strata.quint8, got {dtype!r}")
    _check_float_input(input, what)
    from .ao.nn.quantized.dynamic import choose_qparams
    qmin, qmax = (-128, 127) if dtype is qint8 else (0, 255)
    if reduce_range:
        qmin, qmax = qmin // 2, qmax // 2
    lo, hi = (input.min().item(), input.max().item()) if input.numel() else (0.0, 0.0)
    scale, zp = choose_qparams(lo, hi, qmin, qmax)
    return quantize_per_tensor(input, scale, zp, dtype)


def dequantize(self):
    """(q - zero_point) * scale in float32; a float tensor is returned as it is (torch's rule). A list of
    tensors gives a list."""
    if isinstance(self, (list, tuple)):
        return [dequantize(t) for t in self]
    if not _is_quantized(self):
        return self
    q, _, scale, zp, scales, zps, axis = _parts(self)
    if scales is None:
        return (q.to(_C.int64) - zp).float() * float(np.float32(scale))
    shape = [1] * q.dim()
    shape[axis] = q.shape[axis]
    # per channel, torch multiplies in double and rounds the product to float32 once
    return ((q.to(_C.int64) - zps.reshape(shape)).double() * scales.reshape(shape)).float()


def int_repr(self):
    return _parts(self)[0].clone()


def q_scale(self):
    p = _parts(self)
    if p[4] is not None:
        raise RuntimeError("q_scale(): expected a per-tensor quantized tensor (use q_per_channel_scales())")
    return p[2]


def q_zero_point(self):
    p = _parts(self)
    if p[4] is not None:
        raise RuntimeError("q_zero_point(): expected a per-tensor quantized tensor (use q_per_channel_zero_points())")
    return p[3]


def _per_channel(self, what):
    p = _parts(self)
    if p[4] is None:
        raise RuntimeError(f"{what}(): expected a per-channel quantized tensor")
    return p


def q_per_channel_scales(self):
    return _per_channel(self, "q_per_channel_scales")[4].clone()


def q_per_channel_zero_points(self):
    return _per_channel(self, "q_per_channel_zero_points")[5].clone()


def q_per_channel_axis(self):
    return _per_channel(self, "q_per_channel_axis")[6]


def _qscheme(self):
    return per_tensor_affine if _parts(self)[4] is None else per_channel_affine


def _rewrap(t, q):
    _, code, scale, zp, scales, zps, axis = _parts(t)
    return _C._quant_make(q, code, scale, zp, scales, zps, axis)


# Ops that only move or select elements: on a per-tensor quantized tensor they act on the integer values.
_VIEWLIKE = {"view", "reshape", "flatten", "t", "transpose", "permute", "select", "slice", "squeeze", "unsqueeze",
             "contiguous", "narrow", "expand", "unflatten", "movedim", "clone", "flip", "roll", "_to_copy_like"}


def _handle(name, args, names):
    if name not in _VIEWLIKE or not _is_quantized(args[0]):
        return NotImplemented
    if "out" in names and args[names.index("out")] is not None:
        return NotImplemented
    p = _parts(args[0])
    if p[4] is not None and name != "clone":
        return NotImplemented  # per-channel: the axis would have to follow the op
    rest = [a for a in args[1:]]
    for a in rest:
        if isinstance(a, Tensor) and (_is_quantized(a) or _C._is_sparse(a)):
            return NotImplemented
    kwargs = {n: a for n, a in zip(names[1:], rest)}
    q = getattr(_ops, name)(p[0], **kwargs)
    return _rewrap(args[0], q)


_C._quant_set_handler(_handle)


def quantized_repr(t, prefix="tensor("):
    from ._repr import _tensor_str, _add_suffixes, tensor_repr
    _, _, scale, zp, scales, zps, axis = _parts(t)
    deq = dequantize(t)
    indent = len(prefix)
    body = "[]" if deq.numel() == 0 else _tensor_str(deq, indent)
    suffixes = ["size=" + str(tuple(t.shape)), f"dtype={t.dtype!r}"]
    if scales is None:
        suffixes += [f"quantization_scheme={per_tensor_affine!r}", f"scale={scale!r}", f"zero_point={zp}"]
    else:
        suffixes += [f"quantization_scheme={per_channel_affine!r}", "scale=" + tensor_repr(scales),
                     "zero_point=" + tensor_repr(zps), f"axis={axis}"]
    return _add_suffixes(prefix + body, suffixes, indent)


def _is_quantized_prop(self):
    return _is_quantized(self)


Tensor.is_quantized = property(_is_quantized_prop)
Tensor.dequantize = dequantize
Tensor.int_repr = int_repr
Tensor.q_scale = q_scale
Tensor.q_zero_point = q_zero_point
Tensor.q_per_channel_scales = q_per_channel_scales
Tensor.q_per_channel_zero_points = q_per_channel_zero_points
Tensor.q_per_channel_axis = q_per_channel_axis
Tensor.qscheme = _qscheme
