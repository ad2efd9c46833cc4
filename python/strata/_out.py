"""out= for ops whose schema has no out argument (Note [out= of ops without an
out argument], python/src/op_bind.cpp).

The binding calls fallback(name, args, kwargs, out) when a call with `out=`
matches no overload and no overload declares `out`. The op runs without out=,
then its result is written into `out` under torch's rule for that op:

  exact   out's dtype must be the result's (RuntimeError otherwise)
  cast    the result's dtype must cast to out's (torch's can_cast)
  bool    out is bool or uint8 (all, any)
  accum   the op runs in out's dtype (dtype=out.dtype), as torch's sum.out

Ops returning several tensors take a tuple (or list) of as many tensors, each
under the rule of its position. `out` is resized to the result's shape when
it differs (torch's resize_output) and the result copied in; the returned
object holds the very tensors passed in (a named tuple where the op returns
one). Ops not listed return NotImplemented: the binding then raises its usual
TypeError, as torch does for an op without out=.
"""

from . import _C

_EXACT, _CAST, _BOOL, _ACCUM = "exact", "cast", "bool", "accum"

# op name -> rule (one for every output; a tuple op applies it to each)
RULES = {
    "sum": _ACCUM, "prod": _ACCUM, "nansum": _ACCUM,
    "mean": _CAST, "nanmean": _CAST,
    "amax": _EXACT, "amin": _EXACT,
    "all": _BOOL, "any": _BOOL,
    # max/min: max(x) and max(x, other) cast, max(x, dim) is exact (see _rule_for)
    "max": _CAST, "min": _CAST,
    "median": _EXACT, "nanmedian": _EXACT, "kthvalue": _EXACT, "mode": _EXACT, "aminmax": _EXACT,
    "sort": _EXACT, "topk": _EXACT, "cummax": _EXACT, "cummin": _EXACT, "frexp": _EXACT,
    "quantile": _EXACT, "nanquantile": _EXACT, "msort": _EXACT, "logcumsumexp": _EXACT, "renorm": _EXACT,
    "ldexp": _CAST, "logsumexp": _CAST,
    "cumsum": _ACCUM, "cumprod": _ACCUM,
    "argmax": _EXACT, "argmin": _EXACT,
    "var": _CAST, "std": _CAST, "norm": _EXACT,
}

# torch has no kernel for these (op, out dtype) pairs: '"cumsum_out_cpu" not implemented for 'Bool''
_NO_KERNEL = {("cumsum", "bool"), ("cumprod", "bool")}

# ops where torch has no out= for the form without a dim (median(x), nanmedian(x)):
# (op, number of positional arguments below which out= is refused)
_NEEDS_DIM = {"median": 2, "nanmedian": 2}


def _dtype_name(d):
    return str(d).split(".")[-1]


def _tensors(x):
    if isinstance(x, _C.Tensor):
        yield x
    elif isinstance(x, (list, tuple)):
        for e in x:
            yield from _tensors(e)


def _check_grad(name, args, kwargs):
    if not _C._is_grad_enabled():
        return
    for t in (*_tensors(args), *_tensors(list(kwargs.values()))):
        if t.requires_grad:
            raise RuntimeError(f"{name}(): functions with out=... arguments don't support automatic "
                               "differentiation, but one of the arguments requires grad.")


def _can_cast(src, dst):
    cat = lambda d: 0 if d is _C.bool else (3 if d.is_complex else 2 if d.is_floating_point else 1)  # noqa: E731
    return cat(src) <= cat(dst)


def _write(name, rule, r, o, what):
    if not isinstance(o, _C.Tensor):
        raise TypeError(f"{name}(): argument 'out' must be {what}, not {type(o).__name__}")
    if rule == _EXACT and o.dtype is not r.dtype:
        raise RuntimeError(f"{name}(): expected out tensor to have dtype {_dtype_name(r.dtype)}, but got "
                           f"{_dtype_name(o.dtype)} instead")
    if rule == _BOOL and o.dtype not in (_C.bool, _C.uint8):
        raise RuntimeError(f"{name} only supports bool tensor for result, got: {_dtype_name(o.dtype)}")
    if rule in (_CAST, _ACCUM) and not _can_cast(r.dtype, o.dtype):
        raise RuntimeError(f"{name}(): result type {_dtype_name(r.dtype)} can't be cast to the desired output "
                           f"type {_dtype_name(o.dtype)}")
    if o.device != r.device:
        raise RuntimeError(f"{name}(): expected out tensor on {r.device}, but got it on {o.device}")
    if tuple(o.shape) != tuple(r.shape):
        o.resize_(r.shape)
    o.copy_(r)


def fallback(name, args, kwargs, out):
    rule = RULES.get(name)
    if rule is None or (name in _NEEDS_DIM and len(args) < _NEEDS_DIM[name] and "dim" not in kwargs):
        return NotImplemented
    _check_grad(name, args, kwargs)
    fn = getattr(_C._ops, name)
    if isinstance(out, _C.Tensor) and ((name, _dtype_name(out.dtype)) in _NO_KERNEL or name in ("nansum", "nanmean")
                                       and not (out.is_floating_point() or out.is_complex())):
        name = "nansum" if name == "nanmean" else name
        raise NotImplementedError(f'"{name}_out_cpu" not implemented for {_dtype_name(out.dtype)!r}')
    if rule == _ACCUM and isinstance(out, _C.Tensor) and kwargs.get("dtype") is None:
        kwargs = dict(kwargs, dtype=out.dtype)
        rule = _EXACT
    r = fn(*args, **kwargs)
    if isinstance(r, tuple):
        if not isinstance(out, (tuple, list)) or not all(isinstance(o, _C.Tensor) for o in out):
            raise TypeError(f"{name}(): argument 'out' must be tuple of Tensors, not {type(out).__name__}")
        if len(out) != len(r):
            raise TypeError(f"{name}(): expected tuple of {len(r)} elements but got {len(out)}")
        if name in ("max", "min"):
            rule = _EXACT     # max.dim_max: values of the input's dtype, int64 indices
        for ri, oi in zip(r, out):
            _write(name, rule, ri, oi, "Tensor")
        return type(r)(*out) if hasattr(r, "_fields") else tuple(out)
    _write(name, rule, r, out, "Tensor")
    return out
