"""torch's remaining everyday functions that are compositions of existing ops
(stacking and splitting, window functions, trapezoid rules, dtype info,
legacy tensor types, memory formats and layouts) and the process-wide flags
torch exposes at top level. Ops with kernels of their own (gcd, fmax,
repeat_interleave, the *_scatter family) come from decl/surface_more.def."""

import builtins
import math
import operator
import warnings

from . import _C
from . import _creation

_ops = _C._ops
Tensor = _C.Tensor

__all__ = [
    "hstack", "vstack", "dstack", "column_stack", "row_stack", "tensor_split", "hsplit", "vsplit", "dsplit",
    "scalar_tensor", "finfo", "iinfo", "typename", "is_nonzero", "is_same_size", "frombuffer", "unravel_index",
    "trapezoid", "trapz", "cumulative_trapezoid", "hann_window", "hamming_window", "blackman_window",
    "bartlett_window", "kaiser_window", "chain_matmul", "rsub", "fill", "fill_", "zero_", "detach",
    "set_warn_always", "is_warn_always_enabled", "is_anomaly_enabled", "set_anomaly_enabled",
    "is_anomaly_check_nan_enabled", "is_inference_mode_enabled", "get_num_interop_threads",
    "set_num_interop_threads", "set_flush_denormal", "get_autocast_cpu_dtype", "is_autocast_cpu_enabled",
    "set_autocast_enabled", "set_autocast_cpu_enabled", "set_autocast_cpu_dtype", "is_storage", "layout", "strided",
    "memory_format", "contiguous_format", "channels_last", "channels_last_3d", "preserve_format", "ldexp_", "isposinf", "isneginf", "isreal", "argwhere", "inner", "ger", "dist",
    "narrow_copy", "unsafe_split", "unsafe_chunk", "nonzero_static", "is_complex", "is_conj",
    "is_neg", "conj", "resolve_conj", "resolve_neg", "conj_physical", "is_signed", "is_inference", "ravel",
    "adjoint", "real", "imag", "angle",
]


def _is_tensor(x):
    return isinstance(x, Tensor)


# ---- layouts and memory formats ---------------------------------------------------------
class memory_format:
    """The physical order torch may give a tensor's elements: contiguous_format (row-major), channels_last /
    channels_last_3d (NHWC / NDHWC strides, python/strata/_channels_last.py) or preserve_format."""

    __slots__ = ("_name",)

    def __init__(self, name):
        self._name = name

    def __repr__(self):
        return f"torch.{self._name}"

    def __reduce__(self):
        return self._name


from ._creation import layout, strided  # noqa: E402  (Strata has only strided tensors)
contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
preserve_format = memory_format("preserve_format")


def _check_memory_format(memory_format, op):
    if memory_format is not None and not isinstance(memory_format, globals()["memory_format"]):
        raise TypeError(f"{op}(): argument 'memory_format' must be torch.memory_format, not "
                        f"{type(memory_format).__name__}")


# ---- stacking and splitting ---------------------------------------------------------------
def _seq(tensors, op):
    if _is_tensor(tensors) or not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{op}(): argument 'tensors' must be tuple of Tensors, not {type(tensors).__name__}")
    if not tensors:
        raise RuntimeError(f"{op} expects a non-empty TensorList")
    return tensors


def _at_least(t, n):
    d = t.dim()
    if d >= n:
        return t
    if n == 1:
        return t.reshape(1)
    if n == 2:
        return t.reshape(1, -1) if d == 1 else t.reshape(1, 1)
    if d == 0:
        return t.reshape(1, 1, 1)
    if d == 1:
        return t.reshape(1, -1, 1)
    return t.unsqueeze(-1)


def hstack(tensors, *, out=None):
    ts = [_at_least(t, 1) for t in _seq(tensors, "hstack")]
    return _ops.cat(ts, 0 if ts[0].dim() == 1 else 1, out=out)


def vstack(tensors, *, out=None):
    return _ops.cat([_at_least(t, 2) for t in _seq(tensors, "vstack")], 0, out=out)


row_stack = vstack


def dstack(tensors, *, out=None):
    return _ops.cat([_at_least(t, 3) for t in _seq(tensors, "dstack")], 2, out=out)


def column_stack(tensors, *, out=None):
    ts = [t.reshape(t.numel(), 1) if t.dim() <= 1 else t for t in _seq(tensors, "column_stack")]
    return _ops.cat(ts, 1, out=out)


def _slice(t, dim, start, end):
    return _ops.slice(t, dim, start, end, 1)


def tensor_split(input, indices_or_sections, dim=0):
    if input.dim() == 0:
        raise RuntimeError("tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims")
    d = dim + input.dim() if dim < 0 else dim
    if not 0 <= d < input.dim():
        raise IndexError(f"Dimension out of range (expected to be in range of [{-input.dim()}, {input.dim() - 1}], "
                         f"but got {dim})")
    spec = indices_or_sections
    if _is_tensor(spec):
        if spec.dim() > 1:
            raise RuntimeError("tensor_split expected tensor_indices_or_sections to be a zero-dimensional or "
                               f"one-dimensional tensor, but got a tensor with {spec.dim()} dims")
        if spec.dtype is not _C.int64:
            raise RuntimeError("tensor_split expected tensor_indices_or_sections to have dtype of long, but got "
                               f"{spec.dtype}")
        spec = spec.item() if spec.dim() == 0 else spec.tolist()
    n = input.shape[d]
    if isinstance(spec, (list, tuple)):
        bounds = [0] + [builtins.int(i) for i in spec] + [n]
        parts = []
        for a, b in zip(bounds, bounds[1:]):
            a = builtins.min(builtins.max(a + n if a < 0 else a, 0), n)
            b = builtins.min(builtins.max(b + n if b < 0 else b, 0), n)
            parts.append(_slice(input, d, a, builtins.max(a, b)))
        return tuple(parts)
    sections = operator.index(spec)
    if sections <= 0:
        raise RuntimeError(f"number of sections must be larger than 0, got {sections}")
    base, extra = divmod(n, sections)
    parts, start = [], 0
    for i in range(sections):
        size = base + (1 if i < extra else 0)
        parts.append(_slice(input, d, start, start + size))
        start += size
    return tuple(parts)


def _directional_split(name, input, spec, dim, min_dims):
    if input.dim() < min_dims:
        raise RuntimeError(f"torch.{name} requires a tensor with at least {min_dims} dimension, but got a tensor "
                           f"with {input.dim()} dimensions!")
    if not isinstance(spec, (list, tuple)) and not _is_tensor(spec):
        sections = operator.index(spec)
        if sections != 0 and input.shape[dim] % sections:
            raise RuntimeError(f"torch.{name} attempted to split along dimension {dim}, but the size of the "
                               f"dimension {input.shape[dim]} is not divisible by the split_size {sections}!")
    return tensor_split(input, spec, dim)


def hsplit(input, indices_or_sections):
    return _directional_split("hsplit", input, indices_or_sections, 0 if input.dim() == 1 else 1, 1)


def vsplit(input, indices_or_sections):
    return _directional_split("vsplit", input, indices_or_sections, 0, 2)


def dsplit(input, indices_or_sections):
    return _directional_split("dsplit", input, indices_or_sections, 2, 3)


def unsafe_split(tensor, split_size_or_sections, dim=0):
    from ._shape import split

    return split(tensor, split_size_or_sections, dim)


def unsafe_chunk(input, chunks, dim=0):
    from ._shape import chunk

    return chunk(input, chunks, dim)


# ---- small functions ----------------------------------------------------------------------
def scalar_tensor(s, *, dtype=None, layout=None, device=None, pin_memory=None, requires_grad=False):
    t = _C._tensor(s, dtype if dtype is not None else _C.get_default_dtype(), device)
    if requires_grad:
        t.requires_grad_(True)
    return t


def is_nonzero(input):
    n = input.numel()
    if n == 0:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
    if n > 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return builtins.bool(input.item())


def is_same_size(input, other):
    return tuple(input._shape) == tuple(other._shape)


def typename(obj):
    if _is_tensor(obj):
        return obj.type()
    module = getattr(obj, "__module__", "") or ""
    qualname = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or type(obj).__qualname__
    if module in ("", "builtins") and not isinstance(obj, type):
        module, qualname = type(obj).__module__, type(obj).__qualname__
    return qualname if module in ("", "builtins") else f"{module}.{qualname}"


def chain_matmul(*matrices, out=None):
    warnings.warn("torch.chain_matmul is deprecated and will be removed in a future PyTorch release. Use "
                  "torch.linalg.multi_dot instead, which accepts a list of two or more tensors rather than "
                  "multiple parameters.", UserWarning, stacklevel=2)
    if not matrices:
        raise RuntimeError("chain_matmul(): Expected one or more matrices")
    for m in matrices:
        if m.dim() != 2:
            raise RuntimeError(f"Tensor dimension is {m.dim()}, expected 2 instead.")
    r = matrices[0].clone() if len(matrices) == 1 else matrices[0]
    for m in matrices[1:]:
        r = _ops.mm(r, m)
    if out is not None:
        out.copy_(r)
        return out
    return r


def rsub(input, other, *, alpha=1):
    """other - alpha * input."""
    if not _is_tensor(other):
        other = _C._tensor(other, None, input.device)
    return _ops.sub(other, input, alpha=alpha)


def fill(input, value):
    return input.clone().fill_(value)


def fill_(input, value):
    return input.fill_(value)


def zero_(input):
    return input.zero_()


def detach(input):
    return input.detach()


def ldexp_(input, other):
    return input.copy_(_ops.ldexp(input, other))


def isposinf(input, *, out=None):
    r = _ops.eq(input, math.inf) if input.dtype.is_floating_point else _creation.zeros_like(input, dtype=_C.bool)
    return out.copy_(r) if out is not None else r


def isneginf(input, *, out=None):
    r = _ops.eq(input, -math.inf) if input.dtype.is_floating_point else _creation.zeros_like(input, dtype=_C.bool)
    return out.copy_(r) if out is not None else r


def isreal(input):
    """Strata has no complex dtypes: every element is real."""
    return _creation.ones_like(input, dtype=_C.bool)


def argwhere(input):
    return _ops.nonzero(input)


def nonzero_static(input, *, size, fill_value=-1):
    if size < 0:
        raise RuntimeError(f"nonzero_static: 'size' must be an non-negative integer, but got {size}")
    nz = _ops.nonzero(input)
    n = nz.shape[0]
    if n >= size:
        return nz[:size]
    pad = _ops.full([size - n, nz.shape[1]], fill_value, dtype=nz.dtype)
    return _ops.cat([nz, pad], 0)


def inner(input, other, *, out=None):
    if input.dim() == 0 or other.dim() == 0:
        r = _ops.mul(input, other)
    else:
        if input.shape[-1] != other.shape[-1]:
            raise RuntimeError("inner() the last dimension must match on both input tensors but got shapes "
                               f"{list(input.shape)} and {list(other.shape)}")
        n = input.shape[-1]
        r = _ops.matmul(input.reshape(-1, n), other.reshape(-1, n).t())
        r = r.reshape(list(input.shape[:-1]) + list(other.shape[:-1]))
    return out.copy_(r) if out is not None else r


def ger(input, vec2, *, out=None):
    r = _ops.outer(input, vec2)
    return out.copy_(r) if out is not None else r


def dist(input, other, p=2):
    return _ops.norm(_ops.sub(input, other), p)


def narrow_copy(input, dim, start, length):
    return input.narrow(dim, start, length).clone()


def unravel_index(indices, shape):
    if not _is_tensor(indices):
        indices = _C._tensor(indices, None, None)
    if indices.dtype.is_floating_point or indices.dtype is _C.bool:
        raise TypeError(f"expected 'indices' to be integer dtype, but got {indices.dtype}")
    shape = (shape,) if isinstance(shape, builtins.int) else tuple(shape)
    if builtins.any(s < 0 for s in shape):
        raise ValueError(f"'shape' cannot have negative values, but got {shape}")
    coords = []
    rest = indices.long()
    for s in reversed(shape):
        coords.append(_ops.remainder(rest, s))
        rest = _ops.floor_divide(rest, s)
    return tuple(reversed(coords))


def frombuffer(buffer, *, dtype, count=-1, offset=0, requires_grad=False):
    """A 1-D tensor sharing the memory of an object that implements the buffer protocol."""
    import numpy as np

    from . import from_numpy

    mv = memoryview(buffer)
    total = mv.nbytes
    itemsize = dtype.itemsize
    if total == 0 and count != 0 or count == 0:
        raise ValueError(f"both buffer length ({total}) and count ({count}) must not be 0")
    if not 0 <= offset < total:
        raise ValueError(f"offset ({offset} bytes) must be non-negative and no greater than buffer length "
                         f"({total} bytes) minus 1")
    if count < 0:
        if (total - offset) % itemsize:
            raise ValueError(f"buffer length ({total - offset} bytes) after offset ({offset} bytes) must be a "
                             f"multiple of element size ({itemsize})")
        count = (total - offset) // itemsize
    elif offset + count * itemsize > total:
        raise ValueError(f"requested buffer length ({count} * {itemsize} bytes) after offset ({offset} bytes) "
                         f"must not be greater than actual buffer length ({total} bytes)")
    raw = np.frombuffer(mv.cast("B"), dtype=np.uint8, count=count * itemsize, offset=offset)
    if not raw.flags.writeable:
        warnings.warn("The given buffer is not writable, and Strata does not support non-writable tensors. This "
                      "means you can write to the underlying (supposedly non-writable) buffer using the tensor.",
                      UserWarning, stacklevel=2)
    t = from_numpy(raw)
    t = t.view(dtype) if dtype is not _C.uint8 else t
    if requires_grad:
        t.requires_grad_(True)
    return t


# ---- trapezoid rules ----------------------------------------------------------------------
def _trap_dx(y, x, dx, dim, op):
    if x is not None and dx is not None:
        raise TypeError(f"{op}() received an invalid combination of arguments: x and dx are mutually exclusive")
    if y.dim() == 0:
        raise IndexError(f"{op}: Dimension out of range (expected to be in range of [-1, 0], but got {dim})")
    n = y.shape[dim]
    if x is None:
        return None, (1.0 if dx is None else dx), n
    if not _is_tensor(x):
        raise TypeError(f"{op}(): argument 'x' must be Tensor, not {type(x).__name__}")
    if x.dim() == 1:
        if x.shape[0] != n:
            raise RuntimeError(f"{op}: There must be one `x` value for each sample point")
        shape = [1] * y.dim()
        shape[dim] = n
        x = x.reshape(shape)
    elif x.shape[dim] != n:
        raise RuntimeError(f"{op}: There must be one `x` value for each sample point")
    return _ops.diff(x, 1, dim) if hasattr(_ops, "diff") else _slice(x, dim, 1, None) - _slice(x, dim, 0, -1), None, n


def trapezoid(y, x=None, *, dx=None, dim=-1):
    d, h, n = _trap_dx(y, x, dx, dim, "trapezoid")
    if n == 0:
        return _ops.sum(y, [dim]) * 0
    mid = _ops.add(_slice(y, dim, 1, None), _slice(y, dim, 0, n - 1))
    if d is None:
        return _ops.sum(mid, [dim]) * (h / 2)
    return _ops.sum(_ops.mul(mid, d), [dim]) / 2


def trapz(y, x=None, *, dx=None, dim=-1):
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    d, h, n = _trap_dx(y, x, dx, dim, "cumulative_trapezoid")
    mid = _ops.add(_slice(y, dim, 1, None), _slice(y, dim, 0, builtins.max(n - 1, 0)))
    area = mid * (h / 2) if d is None else _ops.mul(mid, d) / 2
    return _ops.cumsum(area, dim)


# ---- window functions ---------------------------------------------------------------------
def _window(name, n, periodic, dtype, device, requires_grad, body):
    dtype = dtype if dtype is not None else _C.get_default_dtype()
    if not dtype.is_floating_point:
        raise RuntimeError(f"{name} expects floating point dtypes, got: {dtype}")
    if n < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got window_length={n}")
    if n <= 1:
        w = _ops.ones([n], dtype=dtype, device=device)
    else:
        # Computed in float64 and rounded once, so every dtype is correctly rounded.
        m = n if periodic else n - 1
        k = _ops.arange(0, n, 1, dtype=_C.float64, device=device)
        w = body(k, m).to(dtype)
    if requires_grad:
        w.requires_grad_(True)
    return w


def _cosine_sum(coeffs):
    def body(k, m):
        w = 0
        for j, a in enumerate(coeffs):
            w = w + a * _ops.cos(k * (2 * math.pi * j / m)) if j else _creation.full_like(k, a)
        return w
    return body


def hann_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, pin_memory=False,
                requires_grad=False):
    return _window("hann_window", window_length, periodic, dtype, device, requires_grad, _cosine_sum((0.5, -0.5)))


def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None, layout=None, device=None,
                   pin_memory=False, requires_grad=False):
    return _window("hamming_window", window_length, periodic, dtype, device, requires_grad,
                   _cosine_sum((alpha, -beta)))


def blackman_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, pin_memory=False,
                    requires_grad=False):
    return _window("blackman_window", window_length, periodic, dtype, device, requires_grad,
                   _cosine_sum((0.42, -0.5, 0.08)))


def bartlett_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, pin_memory=False,
                    requires_grad=False):
    return _window("bartlett_window", window_length, periodic, dtype, device, requires_grad,
                   lambda k, m: 1 - _ops.abs(k * (2 / m) - 1))


def _i0(x):
    # Power series of the modified Bessel function I0 in float64; the terms
    # peak near k = x/2 and 80 of them reach double precision for x <= 60.
    q = (x * x) / 4
    term = _creation.ones_like(x)
    total = term
    for k in range(1, 80):
        term = term * q / (k * k)
        total = total + term
    return total


def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, layout=None, device=None, pin_memory=False,
                  requires_grad=False):
    def body(k, m):
        r = k * (2 / m) - 1
        return _i0(beta * _ops.sqrt(_ops.clamp(1 - r * r, min=0))) / _i0(_creation.full_like(k, beta))
    return _window("kaiser_window", window_length, periodic, dtype, device, requires_grad, body)


# ---- dtype information ----------------------------------------------------------------------
# (mantissa bits, minimum normal exponent, maximum exponent) of each floating dtype.
_FLOAT_FORMATS = {"float16": (10, -14, 15), "bfloat16": (7, -126, 127), "float32": (23, -126, 127),
                  "float64": (52, -1022, 1023)}


def _dtype_name(dt):
    return repr(dt).split(".")[-1]


# eps, max, min, smallest normal of the float8 formats (Note [Float8] in src/core/dtype.h).
_FLOAT8_INFO = {
    "float8_e4m3fn": (0.125, 448.0, -448.0, 2.0 ** -6),
    "float8_e5m2": (0.25, 57344.0, -57344.0, 2.0 ** -14),
    "float8_e4m3fnuz": (0.125, 240.0, -240.0, 2.0 ** -7),
    "float8_e5m2fnuz": (0.125, 57344.0, -57344.0, 2.0 ** -15),
    "float8_e8m0fnu": (1.0, 2.0 ** 127, 2.0 ** -127, 2.0 ** -127),
}


class finfo:
    """Machine limits of a floating-point dtype (torch.finfo)."""

    def __init__(self, type=None):
        dt = type if type is not None else _C.get_default_dtype()
        name = _dtype_name(dt)
        if name in _FLOAT8_INFO:  # torch's limits of the 8-bit formats (no sign-symmetric max for e8m0fnu)
            self.bits = 8
            self.eps, self.max, self.min, self.tiny = _FLOAT8_INFO[name]
            self.smallest_normal = self.tiny
            self.resolution = 1.0
            self.dtype = name
            return
        if name not in _FLOAT_FORMATS:
            raise TypeError(f"torch.finfo() requires a floating point input type. Use torch.iinfo to handle "
                            f"'torch.finfo'")
        mant, emin, emax = _FLOAT_FORMATS[name]
        self.bits = dt.itemsize * 8
        self.eps = 2.0 ** -mant
        self.max = (2.0 - self.eps) * 2.0 ** emax
        self.min = -self.max
        self.tiny = self.smallest_normal = 2.0 ** emin
        self.resolution = 10.0 ** -builtins.int(-math.log10(self.eps))
        self.dtype = name

    def __eq__(self, other):
        return isinstance(other, finfo) and self.dtype == other.dtype

    def __hash__(self):
        return hash(("finfo", self.dtype))

    def __repr__(self):
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
                f"smallest_normal={self.smallest_normal:g}, tiny={self.tiny:g}, dtype={self.dtype})")


_INT_RANGES = {"uint8": (8, 0, 255), "int8": (8, -128, 127), "int16": (16, -32768, 32767),
               "int32": (32, -2**31, 2**31 - 1), "int64": (64, -2**63, 2**63 - 1)}


class iinfo:
    """Machine limits of an integer dtype (torch.iinfo)."""

    def __init__(self, type):
        name = _dtype_name(type)
        if name == "bool":
            raise TypeError("torch.bool is not supported by torch.iinfo")
        if name not in _INT_RANGES:
            raise TypeError("torch.iinfo() requires an integer input type. Use torch.finfo to handle 'torch.iinfo'")
        self.bits, self.min, self.max = _INT_RANGES[name]
        self.dtype = name

    def __eq__(self, other):
        return isinstance(other, iinfo) and self.dtype == other.dtype

    def __hash__(self):
        return hash(("iinfo", self.dtype))

    def __repr__(self):
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"


# ---- process-wide flags ---------------------------------------------------------------------
_warn_always = False
_interop_threads = None


def set_warn_always(b):
    global _warn_always
    _warn_always = builtins.bool(b)


def is_warn_always_enabled():
    return _warn_always


def is_anomaly_enabled():
    return _C._is_anomaly_enabled()


def is_anomaly_check_nan_enabled():
    return _C._is_anomaly_check_nan_enabled()


def set_anomaly_enabled(enabled, check_nan=True):
    _C._set_anomaly_enabled(builtins.bool(enabled), builtins.bool(check_nan))


def is_inference_mode_enabled():
    from . import _grad_mode

    return _grad_mode.is_inference_mode_enabled()


def get_num_interop_threads():
    """Strata runs inter-op work on the calling thread; this reports what was
    set (torch's default, the intra-op thread count, otherwise)."""
    return _interop_threads if _interop_threads is not None else _C.get_num_threads()


def set_num_interop_threads(n):
    global _interop_threads
    n = operator.index(n)
    if n <= 0:
        raise RuntimeError("Expected positive number of threads")
    if _interop_threads is not None:
        raise RuntimeError("Error: cannot set number of interop threads after parallel work has started or "
                           "set_num_interop_threads called")
    _interop_threads = n


def set_flush_denormal(mode):
    """Flushing denormals needs the CPU's FTZ/DAZ flags set on every worker
    thread, which Strata does not do: returns False ("not supported"), as torch
    does on CPUs without the feature."""
    builtins.bool(mode)
    return False


def is_autocast_cpu_enabled():
    return _C._is_autocast_enabled()


def get_autocast_cpu_dtype():
    return _C._get_autocast_dtype()


def set_autocast_enabled(device_type, enabled=None):
    # torch accepts (enabled) as the deprecated CUDA form and (device_type, enabled).
    if enabled is None:
        device_type, enabled = "cuda", device_type
    if device_type != "cpu":
        raise RuntimeError(f"set_autocast_enabled: device_type '{device_type}' is not supported by Strata (only 'cpu')")
    _C._set_autocast_enabled(builtins.bool(enabled))


def set_autocast_cpu_enabled(enabled):
    _C._set_autocast_enabled(builtins.bool(enabled))


def set_autocast_cpu_dtype(dtype):
    if dtype not in (_C.bfloat16, _C.float16):
        raise RuntimeError("Currently, AutocastCPU only support Bfloat16 or Float16 as the autocast_cpu_dtype")
    _C._set_autocast_dtype(dtype)


# Function forms of Tensor methods (defined in _tensor_surface.py).
def is_complex(input):
    return input.is_complex()


def is_conj(input):
    return input.is_conj()


def is_neg(input):
    return input.is_neg()


def conj(input):
    return input.conj()


def resolve_conj(input):
    return input.resolve_conj()


def resolve_neg(input):
    return input.resolve_neg()


def conj_physical(input):
    return input.conj_physical()


def is_signed(input):
    return input.is_signed()


def is_inference(input):
    return input.is_inference()


def ravel(input):
    return input.reshape(-1)


def adjoint(input):
    return input.adjoint()


def real(input):
    return input.real


def imag(input):
    return input.imag


def angle(input):
    return input.angle()


def is_storage(obj):
    from ._tensor_pickle import Storage
    from ._tensor_surface import TypedStorage

    return isinstance(obj, (Storage, TypedStorage))
