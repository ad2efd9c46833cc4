"""Running one case in strata and torch, and comparing what came back."""

import math

import numpy as np
import torch

import strata as st
from opdb.core import TOL

# Exception categories: the first base class in this list that the exception
# is an instance of. NotImplementedError is a RuntimeError, as in torch
# ("... not implemented for 'Half'" is a RuntimeError there).
CATEGORIES = (IndexError, TypeError, ValueError, RuntimeError)


def category(exc):
    for c in CATEGORIES:
        if isinstance(exc, c):
            return c.__name__
    return type(exc).__name__


def dtype_name(d):
    return str(d).split(".")[-1]


# ---- building the same tensor in both libraries ------------------------------------------

def _base(lib, arr, dtype):
    """A fresh contiguous tensor of `lib` holding arr's values in `dtype`."""
    arr = np.ascontiguousarray(arr)
    if lib is torch:
        t = torch.from_numpy(arr.copy())
    else:
        t = st.from_numpy(arr.copy())
    if dtype == "bfloat16" and arr.dtype != np.dtype("bool"):
        t = t.to(getattr(lib, "bfloat16"))
    return t


def build(lib, arr, dtype, layout="contig", expand_from=None):
    """arr's values in `lib` with the given memory layout (the values never change):
    contig, transposed (dims reversed: a permuted view of a contiguous copy),
    strided (every other element of a buffer twice as wide in the last dim),
    offset (a view starting one row into a bigger buffer), expanded (zero strides:
    `expand_from` holds the base with size-1 dims that broadcast to arr.shape)."""
    nd = arr.ndim
    if layout == "expanded" and expand_from is not None and nd >= 1:
        return _base(lib, expand_from, dtype).expand(*arr.shape)
    if layout == "transposed" and nd >= 2:
        perm = tuple(reversed(range(nd)))
        return _base(lib, arr.transpose(perm), dtype).permute(*perm)
    if layout == "strided" and nd >= 1:
        big = np.repeat(arr, 2, axis=-1)
        return _base(lib, big, dtype)[..., ::2]
    if layout == "offset" and nd >= 1:
        pad = np.zeros((1,) + arr.shape[1:], dtype=arr.dtype)
        return _base(lib, np.concatenate([pad, arr], axis=0), dtype)[1:]
    return _base(lib, arr, dtype)


class Arr:
    """A tensor argument as drawn: values, dtype name and layout."""

    def __init__(self, values, dtype, layout="contig", expand_from=None):
        self.values, self.dtype, self.layout, self.expand_from = values, dtype, layout, expand_from

    def __repr__(self):
        v = self.values
        body = np.array2string(v, threshold=20, precision=4) if v.size <= 20 else f"<{v.size} values>"
        return f"Arr({self.dtype}, shape={v.shape}, {self.layout}, {body})"


def materialize(x, lib):
    """Arr / nested lists of Arr -> lib tensors; dtype names -> lib dtypes."""
    if isinstance(x, Arr):
        return build(lib, x.values, x.dtype, x.layout, x.expand_from)
    if isinstance(x, list):
        return [materialize(e, lib) for e in x]
    if isinstance(x, tuple):
        return tuple(materialize(e, lib) for e in x)
    if isinstance(x, dict):
        return {k: materialize(v, lib) for k, v in x.items()}
    if lib is torch and isinstance(x, st.dtype):
        return getattr(torch, dtype_name(x))
    return x


def resolve(name, module):
    obj = module
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def call(fn_of_lib, lib, args, kwargs):
    """Calls fn_of_lib(lib) on materialized args; returns (result, exception, args)."""
    a = materialize(args, lib)
    k = materialize(kwargs, lib)
    try:
        return fn_of_lib(lib)(*a, **k), None, (a, k)
    except Exception as e:  # noqa: BLE001 -- the category is what is compared
        return None, e, (a, k)


# ---- comparing results ---------------------------------------------------------------------

class Mismatch(AssertionError):
    pass


def _to_np(t):
    if t.dtype in (torch.bfloat16, st.bfloat16) or dtype_name(t.dtype) == "bfloat16":
        t = t.float()
    if isinstance(t, torch.Tensor):
        return t.detach().resolve_conj().resolve_neg().numpy()   # torch's lazy conj/neg bits
    return t.detach().numpy()


def compare_values(a, e, tol, what):
    a = np.asarray(a)
    e = np.asarray(e)
    if a.shape != e.shape:
        raise Mismatch(f"{what}: shape {a.shape} but torch gives {e.shape}")
    if a.dtype.kind in "fc" or e.dtype.kind in "fc":
        a64 = a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)
        e64 = e.astype(np.complex128 if e.dtype.kind == "c" else np.float64)
        an, en = np.isnan(a64), np.isnan(e64)
        if not np.array_equal(an, en):
            raise Mismatch(f"{what}: NaN positions differ\nstrata={a}\ntorch={e}")
        rtol, atol = tol
        ok = np.isclose(a64, e64, rtol=rtol, atol=atol, equal_nan=True)
        if not ok.all():
            idx = np.argwhere(~ok)[:5].tolist()
            raise Mismatch(f"{what}: values differ at {idx} (rtol={rtol}, atol={atol})\nstrata={a}\ntorch={e}")
    else:
        if not np.array_equal(a, e):
            raise Mismatch(f"{what}: values differ\nstrata={a}\ntorch={e}")


def compare(actual, expected, tol_of, what, check_dtype=True):
    """Recursive comparison of a strata result with a torch result."""
    if isinstance(expected, torch.Tensor):
        if not isinstance(actual, st.Tensor):
            raise Mismatch(f"{what}: strata gives {type(actual).__name__}, torch a Tensor")
        if check_dtype and dtype_name(actual.dtype) != dtype_name(expected.dtype):
            raise Mismatch(f"{what}: dtype {dtype_name(actual.dtype)} but torch gives {dtype_name(expected.dtype)}")
        if tuple(actual.shape) != tuple(expected.shape):
            raise Mismatch(f"{what}: shape {tuple(actual.shape)} but torch gives {tuple(expected.shape)}")
        compare_values(_to_np(actual), _to_np(expected), tol_of(dtype_name(expected.dtype)), what)
        return
    if isinstance(expected, (tuple, list)):
        if not isinstance(actual, (tuple, list)) or len(actual) != len(expected):
            raise Mismatch(f"{what}: strata gives {type(actual).__name__} of "
                           f"{len(actual) if hasattr(actual, '__len__') else '?'}, torch "
                           f"{type(expected).__name__} of {len(expected)}")
        for i, (a, e) in enumerate(zip(actual, expected)):
            compare(a, e, tol_of, f"{what}[{i}]", check_dtype)
        return
    if isinstance(expected, torch.dtype):
        if dtype_name(actual) != dtype_name(expected):
            raise Mismatch(f"{what}: {actual} but torch gives {expected}")
        return
    if expected is None or isinstance(expected, (str, torch.device)):
        if str(actual) != str(expected):
            raise Mismatch(f"{what}: {actual!r} but torch gives {expected!r}")
        return
    if isinstance(expected, (bool, int, float, complex)):
        if isinstance(actual, st.Tensor) or type(actual) is not type(expected) and not (
                isinstance(actual, (int, float)) and isinstance(expected, (int, float))
                and not isinstance(actual, bool) and not isinstance(expected, bool)):
            raise Mismatch(f"{what}: {type(actual).__name__} {actual!r} but torch gives "
                           f"{type(expected).__name__} {expected!r}")
        if isinstance(expected, float) and math.isnan(expected):
            if not (isinstance(actual, float) and math.isnan(actual)):
                raise Mismatch(f"{what}: {actual!r} but torch gives nan")
            return
        compare_values(actual, expected, tol_of("float64"), what)
        return
    raise Mismatch(f"{what}: cannot compare torch's {type(expected).__name__}")


def tol_for(info, extra=None):
    def tol_of(dtype):
        if extra and dtype in extra:
            return extra[dtype]
        return info.tol.get(dtype, TOL.get(dtype, (0, 0)))
    return tol_of
