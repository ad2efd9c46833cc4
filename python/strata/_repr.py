"""PyTorch-style printing of tensors (repr and str are the same).

Follows torch's format: one formatter per tensor decides between integer
mode (`1.`), fixed (`0.1235`) and scientific (`1.2346e+05`) notation from the
non-zero finite values, pads every element to a common width, wraps rows at
`linewidth`, and summarizes tensors with more than `threshold` elements to
`edgeitems` per edge. Suffixes (device, size, dtype, requires_grad) follow
the same rules as torch."""

import builtins
import math

from . import _C

__all__ = ["set_printoptions", "get_printoptions", "tensor_repr", "printoptions"]


class _PrintOptions:
    precision = 4
    threshold = 1000
    edgeitems = 3
    linewidth = 80
    sci_mode = None


PRINT_OPTS = _PrintOptions()


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None, sci_mode=None):
    """Same options as torch.set_printoptions; profile is 'default', 'short' or 'full'."""
    if profile == "default":
        PRINT_OPTS.precision, PRINT_OPTS.threshold, PRINT_OPTS.edgeitems, PRINT_OPTS.linewidth = 4, 1000, 3, 80
    elif profile == "short":
        PRINT_OPTS.precision, PRINT_OPTS.threshold, PRINT_OPTS.edgeitems, PRINT_OPTS.linewidth = 2, 1000, 2, 80
    elif profile == "full":
        PRINT_OPTS.precision, PRINT_OPTS.threshold, PRINT_OPTS.edgeitems, PRINT_OPTS.linewidth = 4, math.inf, 3, 80
    elif profile is not None:
        raise ValueError(f"set_printoptions: unknown profile {profile!r} (expected 'default', 'short' or 'full')")
    if precision is not None:
        PRINT_OPTS.precision = precision
    if threshold is not None:
        PRINT_OPTS.threshold = threshold
    if edgeitems is not None:
        PRINT_OPTS.edgeitems = edgeitems
    if linewidth is not None:
        PRINT_OPTS.linewidth = linewidth
    PRINT_OPTS.sci_mode = sci_mode


def get_printoptions():
    return {k: getattr(PRINT_OPTS, k) for k in ("precision", "threshold", "edgeitems", "linewidth", "sci_mode")}


class printoptions:
    """Context manager: set print options temporarily."""

    def __init__(self, **kwargs):
        self.kwargs = kwargs

    def __enter__(self):
        self.old = get_printoptions()
        set_printoptions(**self.kwargs)

    def __exit__(self, *exc):
        set_printoptions(**self.old)
        return False


# ---- nested data ------------------------------------------------------------
# The printer works on nested Python lists. For summarized tensors only the
# edges are read (with NumPy when available) so printing a huge tensor does
# not convert all of it.

_ELLIPSIS = object()


def _nested(t, summarize):
    """Nested lists of Python numbers; summarized dims hold _ELLIPSIS between the edges."""
    if not summarize:
        return t.tolist()
    try:
        import numpy as np  # noqa: F401

        arr = t.numpy()
    except Exception:
        return _summarize_list(t.tolist(), t.dim())
    return _summarize_array(arr)


def _summarize_array(a):
    e = PRINT_OPTS.edgeitems
    if a.ndim == 0:
        return a.item()
    n = a.shape[0]
    if n > 2 * e:
        idx = list(builtins.range(e)) + [None] + list(builtins.range(n - e, n))
    else:
        idx = list(builtins.range(n))
    if a.ndim == 1:
        return [_ELLIPSIS if i is None else a[i].item() for i in idx]
    return [_ELLIPSIS if i is None else _summarize_array(a[i]) for i in idx]


def _summarize_list(x, ndim):
    e = PRINT_OPTS.edgeitems
    if ndim == 0:
        return x
    n = len(x)
    idx = list(builtins.range(e)) + [None] + list(builtins.range(n - e, n)) if n > 2 * e else list(builtins.range(n))
    return [_ELLIPSIS if i is None else _summarize_list(x[i], ndim - 1) for i in idx]


def _flat(x, out):
    if isinstance(x, list):
        for v in x:
            _flat(v, out)
    elif x is not _ELLIPSIS:
        out.append(x)
    return out


# ---- number formatting ----------------------------------------------------------

class _Formatter:
    def __init__(self, values, floating):
        self.floating = floating
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1
        p = PRINT_OPTS.precision
        if not floating:
            for v in values:
                self.max_width = builtins.max(self.max_width, len(str(v)))
        else:
            nz = [v for v in values if math.isfinite(v) and v != 0]
            if not nz:
                return  # only zeros and non-finite values: plain formatting, width 1
            absv = [abs(v) for v in nz]
            vmin, vmax = builtins.min(absv), builtins.max(absv)
            self.int_mode = all(v == math.ceil(v) for v in nz)
            if PRINT_OPTS.sci_mode is None:
                self.sci_mode = vmax / vmin > 1000.0 or vmax > 1.0e8 or vmin < 1.0e-4
            else:
                self.sci_mode = PRINT_OPTS.sci_mode
            # The width is that of the widest value in the chosen notation; in
            # integer mode a trailing "." marks the tensor as floating point.
            if self.sci_mode:
                self.max_width = builtins.max(len(f"{v:.{p}e}") for v in nz)
            elif self.int_mode:
                self.max_width = builtins.max(len(f"{v:.0f}") + 1 for v in nz)
            else:
                self.max_width = builtins.max(len(f"{v:.{p}f}") for v in nz)

    def width(self):
        return self.max_width

    def format(self, v):
        p = PRINT_OPTS.precision
        if self.floating:
            if self.sci_mode:
                s = f"{v:{self.max_width}.{p}e}"
            elif self.int_mode:
                s = f"{v:.0f}"
                if not (math.isinf(v) or math.isnan(v)):
                    s += "."
            else:
                s = f"{v:.{p}f}"
        else:
            s = str(v)
        return (self.max_width - len(s)) * " " + s


def _vector_str(x, indent, fmt):
    element_length = fmt.width() + 2
    per_line = builtins.max(1, int(math.floor((PRINT_OPTS.linewidth - indent) / element_length)))
    data = [" ..." if v is _ELLIPSIS else fmt.format(v) for v in x]
    lines = [", ".join(data[i:i + per_line]) for i in builtins.range(0, len(data), per_line)]
    return "[" + ("," + "\n" + " " * (indent + 1)).join(lines) + "]"


def _tensor_str_rec(x, ndim, indent, fmt):
    if ndim == 0:
        return fmt.format(x)
    if ndim == 1:
        return _vector_str(x, indent, fmt)
    slices = ["..." if s is _ELLIPSIS else _tensor_str_rec(s, ndim - 1, indent + 1, fmt) for s in x]
    return "[" + ("," + "\n" * (ndim - 1) + " " * (indent + 1)).join(slices) + "]"


class _ComplexFormatter:
    """torch's layout for complex values: the real parts share one formatter,
    the imaginary parts another; `re+imj` with the sign of the imaginary part."""

    def __init__(self, values):
        self.re = _Formatter([v.real for v in values], True)
        self.im = _Formatter([v.imag for v in values], True)

    def width(self):
        return self.re.width() + self.im.width() + 1

    def format(self, v):
        imag = (self.im.format(v.imag) + "j").lstrip()
        return self.re.format(v.real) + (imag if imag[0] in "+-" else "+" + imag)


def _tensor_str(t, indent):
    summarize = t.numel() > PRINT_OPTS.threshold
    if t.dtype in (_C.float16, _C.bfloat16) or (t.dtype.itemsize == 1 and t.dtype.is_floating_point):
        t = t.float()  # the 16- and 8-bit floats print their float32 values, as torch does
    x = _nested(t, summarize)
    if t.dtype.is_complex:
        fmt = _ComplexFormatter(_flat(x, []) if t.dim() else [x])
        return _tensor_str_rec(x, t.dim(), indent, fmt)
    fmt = _Formatter(_flat(x, []) if t.dim() else [x], t.dtype.is_floating_point)
    return _tensor_str_rec(x, t.dim(), indent, fmt)


def _add_suffixes(tensor_str, suffixes, indent):
    parts = [tensor_str]
    last_line_len = len(tensor_str) - tensor_str.rfind("\n") + 1
    for suffix in suffixes:
        if last_line_len + len(suffix) + 2 > PRINT_OPTS.linewidth:
            parts.append(",\n" + " " * indent + suffix)
            last_line_len = indent + len(suffix)
        else:
            parts.append(", " + suffix)
            last_line_len += len(suffix) + 2
    parts.append(")")
    return "".join(parts)


def tensor_repr(t, prefix="tensor("):
    if _C._is_sparse(t):  # indices, values, size, nnz, layout (python/strata/_sparse.py)
        from ._sparse import sparse_repr
        return sparse_repr(t, prefix)
    if _C._is_nested(t):  # size with its nested int, offsets (python/strata/_nested.py)
        from ._nested import nested_repr
        return nested_repr(t)
    if _C._is_quantized(t):  # the dequantized values, dtype, scheme, scale, zero point (python/strata/_quantized.py)
        from ._quantized import quantized_repr
        return quantized_repr(t, prefix)
    inner = _C._vmap_unwrap(t)
    if inner is not None:  # inside vmap: the physical tensor, as torch prints it
        value, bdim, level = inner
        return f"BatchedTensor(lvl={level}, bdim={bdim}, value=\n{tensor_repr(value, prefix)}\n)"
    indent = len(prefix)
    suffixes = []
    default = _C.get_default_dtype()
    if t.device.type != "cpu":
        suffixes.append(f"device='{t.device}'")
    if t.device.type == "meta":
        suffixes.append("size=" + str(tuple(t.shape)))
        if t.dtype is not default:
            suffixes.append(f"dtype={t.dtype!r}")
        body = "..."
    elif t.numel() == 0:
        # Like NumPy: the shape is printed unless it is (0,); with no elements
        # the dtype cannot be inferred from the values, so it is printed too.
        if t.dim() != 1:
            suffixes.append("size=" + str(tuple(t.shape)))
        if t.dtype is not default:
            suffixes.append(f"dtype={t.dtype!r}")
        body = "[]"
    else:
        if not PRINT_OPTS.edgeitems:
            suffixes.append("size=" + str(tuple(t.shape)))
        if t.dtype not in (default, default.to_complex(), _C.int64, _C.bool):
            suffixes.append(f"dtype={t.dtype!r}")
        # A CUDA tensor's values are read back to the host (a sync point, as in torch).
        body = _tensor_str(t.cpu() if t.device.type == "cuda" else t, indent)
    grad_fn = getattr(t, "grad_fn", None)
    if grad_fn is not None:
        name = type(grad_fn).__name__ if not hasattr(grad_fn, "name") else grad_fn.name()
        suffixes.append(f"grad_fn=<{name}>")
    elif getattr(t, "requires_grad", False):
        suffixes.append("requires_grad=True")
    return _add_suffixes(prefix + body, suffixes, indent)
