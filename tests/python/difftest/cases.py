"""Family strategies (one drawn case = args, kwargs) and running one variant
(function, method, out=, in-place) of a case in strata and torch."""

import warnings

import numpy as np
import torch
from hypothesis import strategies as hs
from hypothesis.extra import numpy as hnp

import strata as st

from .allowlist import TORCH_CRASHES
from .families import TORCH_OVERRIDES
from .compare import Arr, Mismatch, category, compare, dtype_name, materialize, resolve, tol_for
from .strategies import LAYOUTS, shapes, tensors, values


def op_dtypes(info):
    skipped = {d for d, _ in info.skip}
    return tuple(d for d in info.dtypes if d not in skipped)


@hs.composite
def unary_case(draw, info, p):
    dtype = draw(hs.sampled_from(op_dtypes(info)))
    x = draw(tensors(draw(shapes()), dtype, p["low"], p["high"]))
    return (x,), dict(p["kwargs"])


@hs.composite
def binary_case(draw, info, p):
    dts = op_dtypes(info)
    da = draw(hs.sampled_from(dts))
    sa, sb = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=4, max_side=4)).input_shapes
    a = draw(tensors(sa, da, *p["a"]))
    kind = draw(hs.sampled_from(("same", "other", "scalar"))) if p["mixed"] else "same"
    db = draw(hs.sampled_from(dts)) if kind == "other" else da
    b = draw(tensors(sb, db, *p["b"], integer=p["integer_b"], nonzero=p["nonzero_rhs"]))
    if kind == "scalar":
        rng = np.random.default_rng(draw(hs.integers(0, 2**16)))
        b = values(rng, (), da, *p["b"], nonzero=p["nonzero_rhs"]).item()
    kw = dict(p["kwargs"])
    if info.name in ("add", "sub"):
        # alpha: an int, a float (an error for integral tensors in both) or absent
        alpha = draw(hs.sampled_from((None, 2, -1.5)))
        if alpha is not None:
            kw["alpha"] = alpha
    return (a, b), kw


def _dim_choices(draw, nd):
    n = max(nd, 1)
    return draw(hs.integers(-n, n - 1))


@hs.composite
def reduce_case(draw, info, p):
    dtype = draw(hs.sampled_from(op_dtypes(info)))
    shape = draw(shapes(min_side=0 if p["allow_empty"] else 1))
    x = draw(tensors(shape, dtype, p["low"], p["high"]))
    nd = len(shape)
    how = draw(hs.sampled_from(("all", "int", "list")))
    kw = {}
    if how == "int":
        kw = {p["dim_kw"]: _dim_choices(draw, nd), "keepdim": draw(hs.booleans())}
    elif how == "list" and nd >= 1:
        dims = draw(hs.lists(hs.integers(0, nd - 1), min_size=1, max_size=nd, unique=True))
        dims = [d - nd if draw(hs.booleans()) else d for d in dims]
        kw = {p["dim_kw"]: dims, "keepdim": draw(hs.booleans())}
    return (x,), kw


@hs.composite
def dim_case(draw, info, p):
    dtype = draw(hs.sampled_from(op_dtypes(info)))
    shape = draw(shapes(min_side=0 if p["empty"] else 1))
    x = draw(tensors(shape, dtype, p["low"], p["high"]))
    return (x, _dim_choices(draw, len(shape))), {}


_SAMPLE_CACHE = {}


def _arrs(x, dtype, draw):
    if isinstance(x, np.ndarray) and x.dtype.kind in "fiubc":
        layout = draw(hs.sampled_from(LAYOUTS[:4]))
        name = "bfloat16" if dtype == "bfloat16" and x.dtype.kind == "f" else x.dtype.name
        return Arr(x, name, layout)
    if isinstance(x, (list, tuple)):
        return type(x)(_arrs(e, dtype, draw) for e in x)
    return x


@hs.composite
def generic_case(draw, info, p):
    """One of the op database's samples (drawn seed and dtype), every tensor
    argument in a drawn layout (values unchanged, so domains stay valid)."""
    dtype = draw(hs.sampled_from(op_dtypes(info)))
    seed = draw(hs.integers(0, 3))
    key = (id(info), dtype, seed)
    if key not in _SAMPLE_CACHE:
        _SAMPLE_CACHE[key] = list(info.samples(dtype, np.random.default_rng(1234 + 7919 * seed)))
    samples = _SAMPLE_CACHE[key]
    s = samples[draw(hs.integers(0, len(samples) - 1))]
    args = tuple(_arrs(a, dtype, draw) for a in s.args)
    kwargs = {k: _arrs(v, dtype, draw) for k, v in s.kwargs.items()}
    return args, kwargs


STRATEGIES = {"unary": unary_case, "binary": binary_case, "reduce": reduce_case, "dim": dim_case,
              "generic": generic_case}


def variants(info, fam):
    short = info.name.split(".")[-1]
    v = ["fn"]
    if info.method and hasattr(torch.Tensor, info.method) and info.name not in TORCH_OVERRIDES:
        v.append("method")
    if (fam in ("unary", "binary", "reduce") and not info.name.startswith("_C.")
            and not info.name.endswith("_backward")):
        v.append("out")
    if fam in ("unary", "binary") and hasattr(st.Tensor, short + "_") and hasattr(torch.Tensor, short + "_"):
        v.append("inplace")
    if "out" in v and fam in ("unary", "binary"):
        v.append("out_alias")
    if not info.name.startswith("_C."):
        v.append("meta")
        if fam == "binary":
            v.append("meta_mixed")
    return v


def _to_meta(x, lib, first_only=False):
    """Every tensor of a materialized argument tuple moved to the meta device (first_only: only args[0])."""
    if first_only:
        return (_to_meta(x[0], lib),) + tuple(x[1:])
    if isinstance(x, (st.Tensor, torch.Tensor)):
        # the drawn layout kept (strides, zero strides of an expanded argument), as the CPU variants see it
        return lib.empty_strided(tuple(x.shape), x.stride(), dtype=x.dtype, device="meta")
    if isinstance(x, (list, tuple)):
        return type(x)(_to_meta(e, lib) for e in x)
    if isinstance(x, dict):
        return {n: _to_meta(v, lib) for n, v in x.items()}
    return x


def _shapes_only(x):
    """What a meta result can be compared on: device, shape and dtype of every tensor."""
    if isinstance(x, (st.Tensor, torch.Tensor)):
        return f"{x.device.type} {tuple(x.shape)} {dtype_name(x.dtype)}"
    if isinstance(x, (list, tuple)):
        return [_shapes_only(e) for e in x]
    return x


def run_one(lib, info, tfn, variant, args, kwargs):
    """(result, exception, materialized tensor args after the call)."""
    a = materialize(args, lib)
    k = materialize(kwargs, lib)
    short = info.name.split(".")[-1]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if variant == "fn":
                r = resolve(info.name, st)(*a, **k) if lib is st else tfn(*a, **k)
            elif variant == "method":
                r = getattr(a[0], info.method)(*a[1:], **k)
            elif variant == "inplace":
                r = getattr(a[0], short + "_")(*a[1:], **k)
                r = (r is a[0], r)
            elif variant == "out":
                out = lib.empty(0, dtype=a[0].dtype)
                fn = resolve(info.name, st) if lib is st else tfn
                r = fn(*a, **k, out=out)
                r = (r is out, out)
            elif variant == "out_alias":
                # out= is the first argument itself (in its drawn layout): full aliasing computes as in place;
                # a zero-stride (expanded) out, a dtype the result cannot be cast to, or a result that must
                # resize the input raise in both
                fn = resolve(info.name, st) if lib is st else tfn
                r = fn(*a, **k, out=a[0])
                r = (r is a[0], a[0])
            elif variant in ("meta", "meta_mixed"):
                # device arguments: every tensor on the meta device (shapes and dtypes without values), or only
                # the first (meta and CPU operands mixed: only a 0-d CPU operand may join another device)
                a = _to_meta(a, lib, first_only=variant == "meta_mixed")
                k = _to_meta(k, lib) if variant == "meta" else k
                fn = resolve(info.name, st) if lib is st else tfn
                r = _shapes_only(fn(*a, **k))
        return r, None, a
    except Exception as e:  # noqa: BLE001 -- the category is what is compared
        return None, e, a


def check(info, tfn, variant, args, kwargs):
    """Raises Mismatch when strata and torch disagree on this case."""
    what = f"{info.name} ({variant})"
    rs, es, a_s = run_one(st, info, tfn, variant, args, kwargs)
    crash = TORCH_CRASHES.get(info.name)
    if crash and crash[0](args, kwargs):
        return "torch would crash"      # strata returned or raised: it did not crash
    rt, et, a_t = run_one(torch, info, tfn, variant, args, kwargs)
    if variant in ("out", "out_alias") and isinstance(et, TypeError) and "out" in str(et):
        return "out= not in torch"      # torch has no out= overload: nothing to compare
    if variant in ("meta", "meta_mixed") and isinstance(et, NotImplementedError) and es is None:
        return "no meta kernel in torch"  # strata computed the shape; torch cannot say
    if es is not None or et is not None:
        if es is None:
            raise Mismatch(f"{what}: torch raises {type(et).__name__}: {str(et)[:300]} but strata returns")
        if et is None:
            raise Mismatch(f"{what}: strata raises {type(es).__name__}: {str(es)[:300]} but torch returns")
        if category(es) != category(et):
            raise Mismatch(f"{what}: strata raises {type(es).__name__} ({str(es)[:200]}) but torch "
                           f"{type(et).__name__} ({str(et)[:200]})")
        return "raised"
    tol = tol_for(info)
    compare(rs, rt, tol, what)
    if variant in ("meta", "meta_mixed"):
        return "ok"  # the CPU arguments were not written to
    # the tensor arguments after the call (in-place writes, out= untouched inputs)
    compare(a_s, a_t, tol, what + " args after the call")
    return "ok"
