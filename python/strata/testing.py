"""strata.testing (torch.testing): assert_close with torch's default tolerances and messages, make_tensor.

Values are compared in NumPy (float64 for floating inputs): `|actual - expected| <= atol + rtol * |expected|`
element-wise, with NaNs equal only under `equal_nan`. Sequences and mappings are compared item by item, and
the message names the failing item as torch's does."""

import math
from collections.abc import Mapping, Sequence

import numpy as np

from . import _C

__all__ = ["assert_close", "assert_allclose", "make_tensor"]

# torch's defaults (rtol, atol) per dtype; integers and bool compare exactly.
_DEFAULT_TOL = {
    "float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5), "float64": (1e-7, 1e-7),
}


def _dtype_name(t):
    return str(t.dtype).rsplit(".", 1)[-1]


def _tolerances(t, rtol, atol):
    if (rtol is None) != (atol is None):
        raise ValueError("Both 'rtol' and 'atol' must be either specified or omitted, but got no "
                         f"{'rtol' if rtol is None else 'atol'}.")
    if rtol is not None:
        return rtol, atol
    return _DEFAULT_TOL.get(_dtype_name(t), (0.0, 0.0))


def _to_numpy(t):
    t = t.detach()
    if _dtype_name(t) in ("float16", "bfloat16"):
        t = t.float()
    return t.contiguous().numpy()


def _compare_tensors(actual, expected, rtol, atol, equal_nan, check_dtype, check_device, check_stride):
    for attr in ("shape",) + (("device",) if check_device else ()) + (("dtype",) if check_dtype else ()):
        a, e = getattr(actual, attr), getattr(expected, attr)
        if a != e:
            return f"The values for attribute '{attr}' do not match: {a} != {e}."
    if check_stride and actual.stride() != expected.stride():
        return f"The values for attribute 'stride()' do not match: {actual.stride()} != {expected.stride()}."
    rtol, atol = _tolerances(expected if check_dtype else actual, rtol, atol)
    a, e = _to_numpy(actual), _to_numpy(expected)
    exact = rtol == 0 and atol == 0
    floating = a.dtype.kind == "f" or e.dtype.kind == "f"
    calc = np.float64 if floating else np.int64
    a64, e64 = a.astype(calc), e.astype(calc)
    with np.errstate(invalid="ignore", over="ignore"):
        close = a64 == e64
        if floating:
            close |= np.isfinite(e64) & (np.abs(a64 - e64) <= atol + rtol * np.abs(e64))
            if equal_nan:
                close |= np.isnan(a64) & np.isnan(e64)
    if close.all():
        return None
    n, bad = close.size, int((~close).sum())
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        diff = np.abs(a64 - e64).astype(np.float64)
        rel = diff / np.abs(e64).astype(np.float64)
    diff = np.where(close, 0, diff)
    rel = np.where(close, 0, rel)
    ia, ir = np.unravel_index(np.argmax(diff), diff.shape), np.unravel_index(np.argmax(rel), rel.shape)
    show = (lambda v: repr(float(v))) if floating else (lambda v: str(int(v)))
    lines = [f"Tensor-likes are not {'equal' if exact else 'close'}!", "",
             f"Mismatched elements: {bad} / {n} ({100.0 * bad / n:.1f}%)"]
    tol_a = "" if exact else f" (up to {atol} allowed)"
    tol_r = "" if exact else f" (up to {rtol} allowed)"
    lines.append(f"Greatest absolute difference: {show(diff[ia])} at index {tuple(int(i) for i in ia)}{tol_a}")
    # torch computes the differences in the inputs' dtype: a float32 relative difference prints as one.
    shown_rel = float(rel[ir]) if a.dtype == np.float64 else float(np.float32(rel[ir]))
    lines.append(f"Greatest relative difference: {shown_rel!r} at index {tuple(int(i) for i in ir)}{tol_r}")
    return "\n".join(lines)


def _compare_scalars(actual, expected, rtol, atol, equal_nan, check_dtype):
    if check_dtype and type(actual) is not type(expected):
        return f"The values for attribute 'type' do not match: {type(actual)} != {type(expected)}."
    if rtol is None and atol is None:
        rtol, atol = (1e-7, 1e-7) if isinstance(expected, float) or isinstance(actual, float) else (0.0, 0.0)
    elif rtol is None or atol is None:
        _tolerances(None, rtol, atol)
    if actual == expected or (equal_nan and isinstance(actual, float) and isinstance(expected, float)
                              and math.isnan(actual) and math.isnan(expected)):
        return None
    diff = abs(actual - expected)
    if not (isinstance(diff, float) and math.isnan(diff)) and diff <= atol + rtol * abs(expected):
        return None
    exact = rtol == 0 and atol == 0
    rel = diff / abs(expected) if expected != 0 else math.inf
    return "\n".join([f"Scalars are not {'equal' if exact else 'close'}!", "",
                      f"Expected {expected} but got {actual}.",
                      f"Absolute difference: {diff}" + ("" if exact else f" (up to {atol} allowed)"),
                      f"Relative difference: {rel}" + ("" if exact else f" (up to {rtol} allowed)")])


def _check(actual, expected, path, kw):
    if isinstance(actual, _C.Tensor) or isinstance(expected, _C.Tensor):
        a = actual if isinstance(actual, _C.Tensor) else None
        e = expected if isinstance(expected, _C.Tensor) else None
        if a is None or e is None:  # a tensor against a number or an array: the other side becomes a tensor
            other = actual if a is None else expected
            if not isinstance(other, (int, float, bool, np.ndarray)):
                return path, (f"No comparison pair was able to handle inputs of type {type(actual)} and "
                              f"{type(expected)}."), TypeError
            from . import tensor as _tensor

            conv = _tensor(other)
            a, e = (conv, e) if a is None else (a, conv)
        msg = _compare_tensors(a, e, kw["rtol"], kw["atol"], kw["equal_nan"], kw["check_dtype"],
                               kw["check_device"], kw["check_stride"])
        return (path, msg, AssertionError) if msg else None
    if isinstance(actual, (bool, int, float)) and isinstance(expected, (bool, int, float)):
        msg = _compare_scalars(actual, expected, kw["rtol"], kw["atol"], kw["equal_nan"], kw["check_dtype"])
        return (path, msg, AssertionError) if msg else None
    if isinstance(actual, Mapping) and isinstance(expected, Mapping):
        if set(actual) != set(expected):
            return path, (f"The keys of the mappings do not match:\nMissing keys in the actual mapping: "
                          f"{sorted(set(expected) - set(actual), key=repr)}\nAdditional keys in the actual mapping: "
                          f"{sorted(set(actual) - set(expected), key=repr)}"), AssertionError
        for k in expected:
            r = _check(actual[k], expected[k], path + [k], kw)
            if r:
                return r
        return None
    if isinstance(actual, Sequence) and isinstance(expected, Sequence) and \
            not isinstance(actual, str) and not isinstance(expected, str):
        if len(actual) != len(expected):
            return path, (f"The length of the sequences mismatch: {len(actual)} != {len(expected)}"), AssertionError
        for i, (x, y) in enumerate(zip(actual, expected)):
            r = _check(x, y, path + [i], kw)
            if r:
                return r
        return None
    if actual == expected:
        return None
    return path, (f"No comparison pair was able to handle inputs of type {type(actual)} and {type(expected)}."), \
        TypeError


def assert_close(actual, expected, *, allow_subclasses=True, rtol=None, atol=None, equal_nan=False,
                 check_device=True, check_dtype=True, check_layout=True, check_stride=False, msg=None):
    """Raises AssertionError unless `actual` and `expected` are close (torch.testing.assert_close)."""
    if (rtol is None) != (atol is None):
        raise ValueError(f"Both 'rtol' and 'atol' must be either specified or omitted, but got no "
                         f"{'rtol' if rtol is None else 'atol'}.")
    kw = dict(allow_subclasses=allow_subclasses, rtol=rtol, atol=atol, equal_nan=equal_nan,
              check_device=check_device, check_dtype=check_dtype, check_stride=check_stride)
    result = _check(actual, expected, [], kw)
    if result is None:
        return
    path, message, exc = result
    if msg is not None:
        message = msg(message) if callable(msg) else msg
    elif path:
        message += "\n\nThe failure occurred for item " + "".join(f"[{p!r}]" for p in path)
    raise exc(message)


def assert_allclose(actual, expected, rtol=None, atol=None, equal_nan=True, msg=""):
    """The deprecated form: dtypes need not match."""
    from . import tensor as _tensor

    actual = actual if isinstance(actual, _C.Tensor) else _tensor(actual)
    expected = expected if isinstance(expected, _C.Tensor) else _tensor(expected, dtype=actual.dtype)
    assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=equal_nan, check_dtype=False,
                 msg=msg or None)


def make_tensor(*shape, dtype, device=None, low=None, high=None, requires_grad=False, noncontiguous=False,
                exclude_zero=False, memory_format=None):
    """A tensor of `shape` with values uniform in [low, high) (defaults by dtype: -9..9, bool 0/1)."""
    from . import empty, randint, rand, bool as _bool

    if len(shape) == 1 and isinstance(shape[0], (list, tuple)):
        shape = tuple(shape[0])
    name = str(dtype).rsplit(".", 1)[-1]
    if dtype == _bool:
        t = randint(0, 2, shape, device=device).to(_bool)
    elif name.startswith(("int", "uint")):
        lo = -9 if low is None else math.ceil(low)
        hi = 10 if high is None else math.ceil(high)
        lo = max(lo, 0) if name == "uint8" else lo
        t = randint(lo, hi, shape, dtype=dtype, device=device)
    else:
        lo = -9.0 if low is None else low
        hi = 9.0 if high is None else high
        t = (rand(*shape, device=device) * (hi - lo) + lo).to(dtype)
    if exclude_zero:
        t = t.masked_fill(t == 0, 1 if not name.startswith("float") and name != "bfloat16" else
                          float(np.finfo(np.float32).tiny))
    if noncontiguous and t.numel() > 1:
        wide = empty(*shape[:-1], shape[-1] * 2, dtype=dtype, device=device)
        wide[..., ::2] = t
        t = wide[..., ::2]
    if requires_grad:
        t.requires_grad_(True)
    return t
