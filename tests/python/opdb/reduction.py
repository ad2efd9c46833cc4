"""OpInfos of the reductions, scans and softmax. References compute in float64
(NumPy's float16 sums round at every step, which torch and strata do not) and
the harness compares at the tolerance of the tested dtype."""

import numpy as np

from .core import ALL, ALL_FLOAT, COMPLEX, INT, ErrorInput, OpInfo, SampleInput, make_array, register

NO_BOOL = ALL_FLOAT + INT


def _axis(a, dim):
    if dim is None or a.ndim == 0:
        return None
    if isinstance(dim, (list, tuple)):
        return tuple(dim) if len(dim) else None
    return dim


def _wide(a):
    """float64 for floats, int64 for ints and bool: the accumulation of the reference."""
    if a.dtype.kind == "c":
        return a.astype(np.complex128)
    return a.astype(np.float64) if a.dtype.kind == "f" else a.astype(np.int64)


def _keep(r, a, dim, keepdim):
    """np reductions with axis=None and keepdims on a 0-d array are fine; make
    0-d inputs give 0-d outputs whatever the dims."""
    r = np.asarray(r)
    if a.ndim == 0:
        return r.reshape(())
    return r


def reduce_samples(dims=((None, False), (0, False), (-1, True), ((0, 2), False), ((), False)),
                   low=-3.0, high=3.0, shapes=((), (0,), (5,), (3, 4), (2, 0, 3), (2, 3, 4), (2, 3, 4, 5)),
                   dim_kw="dim", allow_empty=True, extremes=True):
    """Samples of shape x (dim, keepdim). Dims that do not fit a shape are
    skipped; dim=() only for ops where [] means all dims."""
    def gen(dtype, rng):
        for shape in shapes:
            if not allow_empty and 0 in shape:
                continue
            a = make_array(shape, dtype, rng, low, high)
            for dim, keepdim in dims:
                if dim is not None:
                    ds = dim if isinstance(dim, tuple) else (dim,)
                    if len(shape) == 0 and (len(ds) > 1 or ds == ()):
                        continue
                    if any(not (-max(len(shape), 1) <= d < max(len(shape), 1)) for d in ds):
                        continue
                    if not allow_empty and a.size == 0:
                        continue
                # torch rejects keepdim without dim (sum(x, keepdim=True)).
                kw = {}
                if dim is not None:
                    kw = {dim_kw: list(dim) if isinstance(dim, tuple) else dim, "keepdim": keepdim}
                yield SampleInput((a,), kw, name=f"{shape} dim={dim} keepdim={keepdim}")
        a = make_array((4, 6), dtype, rng, low, high, noncontig=True)
        yield SampleInput((a,), {dim_kw: 0}, name="noncontig dim=0")
        yield SampleInput((a,), {dim_kw: 1}, name="noncontig dim=1")
        t = make_array((3, 5, 7), dtype, rng, low, high).transpose(2, 0, 1)
        yield SampleInput((t,), {dim_kw: [0, 2]}, name="transposed dims=[0, 2]")
        yield SampleInput((t,), {dim_kw: 1, "keepdim": True}, name="transposed dim=1")
        big = make_array((70, 300), dtype, rng, low, high)
        yield SampleInput((big,), {dim_kw: 0}, name="columns (70, 300)")
        yield SampleInput((big,), {dim_kw: 1}, name="rows (70, 300)")
        if extremes and dtype in ("float32", "float64"):
            e = np.array([[np.inf, 1.0, np.nan], [-np.inf, 0.0, 2.0]], dtype=dtype)
            yield SampleInput((e,), {dim_kw: 1}, name="extremes")
    return gen


def single_dim_samples(allow_bool_extremes=True, low=-3.0, high=3.0, full=True, empty=True):
    """For ops taking one int dim (prod, cumsum, softmax, argmax)."""
    def gen(dtype, rng):
        cases = [((), 0), ((), -1), ((5,), 0), ((3, 4), 0), ((3, 4), 1), ((3, 4), -1), ((2, 3, 4), 1)]
        if empty:
            cases += [((0,), 0), ((2, 0, 3), 2), ((2, 0, 3), 0)]
        for shape, d in cases:
            yield SampleInput((make_array(shape, dtype, rng, low, high), d), name=f"{shape} dim={d}")
        a = make_array((4, 6), dtype, rng, low, high, noncontig=True)
        yield SampleInput((a, 0), name="noncontig dim 0")
        yield SampleInput((a, 1), name="noncontig dim 1")
        big = make_array((33, 200), dtype, rng, low, high)
        yield SampleInput((big, 0), name="big dim 0")
        yield SampleInput((big, 1), name="big dim 1")
        if dtype in ("float32", "float64"):
            e = np.array([[np.inf, 1.0, np.nan], [-np.inf, 0.0, 2.0], [1.0, 1.0, 1.0]], dtype=dtype)
            yield SampleInput((e, 1), name="extremes dim 1")
            yield SampleInput((e, 0), name="extremes dim 0")
    return gen


def bad_dim_errors(fn_args=lambda a, d: ((a,), {"dim": d})):
    def gen(rng):
        a = np.ones((2, 3), np.float32)
        args, kw = fn_args(a, 2)
        yield ErrorInput(args, kw, error=IndexError, match="Dimension out of range")
        args, kw = fn_args(a, -3)
        yield ErrorInput(args, kw, error=IndexError, match="Dimension out of range")
    return gen


def list_dim_errors(extra=()):
    def gen(rng):
        a = np.ones((2, 3), np.float32)
        yield ErrorInput((a,), {"dim": [2]}, error=IndexError, match="Dimension out of range")
        yield ErrorInput((a,), {"dim": [0, 0]}, error=RuntimeError, match="appears multiple times")
        yield ErrorInput((a,), {"dim": [1, -1]}, error=RuntimeError, match="appears multiple times")
        yield from extra
    return gen


# ---- references ------------------------------------------------------------------

def ref_sum(a, dim=None, keepdim=False, dtype=None):
    return _keep(np.sum(_wide(a), axis=_axis(a, dim), keepdims=keepdim), a, dim, keepdim)


def ref_mean(a, dim=None, keepdim=False, dtype=None):
    return _keep(np.mean(_wide(a), axis=_axis(a, dim), keepdims=keepdim), a, dim, keepdim)


def ref_prod(a, dim=None, keepdim=False, dtype=None):
    return _keep(np.prod(_wide(a), axis=_axis(a, dim), keepdims=keepdim), a, dim, keepdim)


def ref_amax(a, dim=(), keepdim=False):
    return _keep(np.max(a, axis=_axis(a, dim), keepdims=keepdim), a, dim, keepdim)


def ref_amin(a, dim=(), keepdim=False):
    return _keep(np.min(a, axis=_axis(a, dim), keepdims=keepdim), a, dim, keepdim)


def _arg(fn, a, dim, keepdim):
    if a.ndim == 0:
        return np.array(0, dtype=np.int64)
    return np.asarray(fn(a, axis=dim, keepdims=keepdim)).astype(np.int64)


def ref_argmax(a, dim=None, keepdim=False):
    return _arg(np.argmax, a, dim, keepdim)


def ref_argmin(a, dim=None, keepdim=False):
    return _arg(np.argmin, a, dim, keepdim)


def ref_max_dim(a, dim, keepdim=False):
    if a.ndim == 0:
        return a, np.array(0, dtype=np.int64)
    return np.max(a, axis=dim, keepdims=keepdim), _arg(np.argmax, a, dim, keepdim)


def ref_min_dim(a, dim, keepdim=False):
    if a.ndim == 0:
        return a, np.array(0, dtype=np.int64)
    return np.min(a, axis=dim, keepdims=keepdim), _arg(np.argmin, a, dim, keepdim)


def ref_var(a, dim=None, correction=1, keepdim=False):
    ax = _axis(a, dim)
    w = a.astype(np.float64)
    n = w.size if ax is None else int(np.prod([w.shape[d] for d in (ax if isinstance(ax, tuple) else (ax,))]))
    m = np.mean(w, axis=ax, keepdims=True)
    s = np.sum((w - m) ** 2, axis=ax, keepdims=keepdim)
    with np.errstate(divide="ignore", invalid="ignore"):
        return _keep(s / max(0, n - correction), a, dim, keepdim)


def ref_std(a, dim=None, correction=1, keepdim=False):
    return np.sqrt(ref_var(a, dim, correction, keepdim))


def ref_var_mean(a, dim=None, correction=1, keepdim=False):
    return ref_var(a, dim, correction, keepdim), ref_mean(a, dim, keepdim)


def ref_std_mean(a, dim=None, correction=1, keepdim=False):
    return ref_std(a, dim, correction, keepdim), ref_mean(a, dim, keepdim)


def ref_logsumexp(a, dim, keepdim=False):
    w = a.astype(np.float64)
    ax = _axis(a, dim)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if w.size == 0:
            return _keep(np.log(np.sum(np.exp(w), axis=ax, keepdims=keepdim)), a, dim, keepdim)
        m = np.max(w, axis=ax, keepdims=True)
        m = np.where(np.isinf(m), 0, m)
        r = np.log(np.sum(np.exp(w - m), axis=ax, keepdims=True)) + m
        if not keepdim and ax is not None:
            r = np.squeeze(r, axis=ax)
        elif not keepdim:
            r = r.reshape(())
        return _keep(r, a, dim, keepdim)


def ref_all(a, dim=None, keepdim=False):
    if isinstance(dim, (list, tuple)) and len(dim) == 0:
        return a != 0  # all/any with dim=[] reduce nothing (unlike sum)
    return _keep(np.all(a, axis=_axis(a, dim), keepdims=keepdim), a, dim, keepdim)


def ref_any(a, dim=None, keepdim=False):
    if isinstance(dim, (list, tuple)) and len(dim) == 0:
        return a != 0
    return _keep(np.any(a, axis=_axis(a, dim), keepdims=keepdim), a, dim, keepdim)


def ref_count_nonzero(a, dim=None):
    return _keep(np.count_nonzero(a, axis=_axis(a, dim)), a, dim, False)


def ref_norm(a, p=2, dim=None, keepdim=False):
    if p == "nuc":   # the sum of the singular values over two dims (all of a 2-D input)
        d0, d1 = [d % a.ndim for d in (dim if dim is not None else (0, 1))]
        m = np.moveaxis(a.astype(np.float64), (d0, d1), (-2, -1))
        r = np.linalg.svd(m, compute_uv=False).sum(-1)
        if keepdim:
            r = np.expand_dims(np.expand_dims(r, min(d0, d1)), max(d0, d1))
        return np.asarray(r).astype(a.dtype)
    w = np.abs(a.astype(np.float64))
    ax = _axis(a, dim)
    if p == np.inf:
        r = np.max(w, axis=ax, keepdims=keepdim)
    elif p == -np.inf:
        r = np.min(w, axis=ax, keepdims=keepdim)
    elif p == 0:
        r = np.sum(w != 0, axis=ax, keepdims=keepdim).astype(np.float64)
    else:
        r = np.sum(w ** p, axis=ax, keepdims=keepdim) ** (1.0 / p)
    return _keep(r, a, dim, keepdim)


def _scan(fn, a, dim):
    if a.ndim == 0:
        return fn(_wide(a).reshape(1)).reshape(())
    return fn(_wide(a), axis=dim)


def ref_cumsum(a, dim, dtype=None):
    return _scan(np.cumsum, a, dim)


def ref_cumprod(a, dim, dtype=None):
    return _scan(np.cumprod, a, dim)


def ref_softmax(a, dim, dtype=None):
    w = a.astype(np.float64)
    if w.ndim == 0:
        return np.ones((), np.float64) if not np.isnan(w) else w
    with np.errstate(invalid="ignore", over="ignore"):
        m = np.max(w, axis=dim, keepdims=True) if w.size else 0
        m = np.where(m == -np.inf, 0, m)
        e = np.exp(w - m)
        return e / np.sum(e, axis=dim, keepdims=True)


def ref_log_softmax(a, dim, dtype=None):
    w = a.astype(np.float64)
    if w.ndim == 0:
        return np.zeros((), np.float64) + (w - w)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        m = np.max(w, axis=dim, keepdims=True) if w.size else 0
        m = np.where(m == -np.inf, 0, m)
        return w - m - np.log(np.sum(np.exp(w - m), axis=dim, keepdims=True))


# ---- samples with extra arguments ---------------------------------------------------

def sum_dtype_samples(dtype, rng):
    yield from reduce_samples()(dtype, rng)
    a = make_array((3, 4), dtype, rng)
    yield SampleInput((a,), {"dtype": "float64"}, name="dtype=float64")
    yield SampleInput((a,), {"dim": 1, "dtype": "int32"} if dtype in INT + ("bool",) else {"dim": 1},
                      name="dtype=int32")


def var_samples(dtype, rng):
    for s in reduce_samples(dims=((None, False), (0, False), (-1, True), ((0, 2), False)))(dtype, rng):
        yield s
    a = make_array((5, 7), dtype, rng)
    yield SampleInput((a,), {"dim": 1, "correction": 0}, name="correction=0")
    yield SampleInput((a,), {"dim": [0], "correction": 2, "keepdim": True}, name="correction=2 keepdim")
    yield SampleInput((make_array((1, 3), dtype, rng),), {"dim": 0}, name="single element: nan")


def norm_samples(dtype, rng):
    for s in reduce_samples(dims=((None, False), (0, False), (-1, True), ((0, 2), False)))(dtype, rng):
        yield s
    a = make_array((4, 5), dtype, rng)
    for p in (1, 3, 0.5, 0, float("inf"), float("-inf")):
        yield SampleInput((a,), {"p": p, "dim": 1}, name=f"p={p}")
    yield SampleInput((a,), {"p": 1.5}, name="p=1.5 all")
    if dtype in ("float32", "float64"):   # the nuclear norm (LAPACK: float32/float64 only, as torch)
        yield SampleInput((a,), {"p": "nuc"}, name="nuc")
        yield SampleInput((make_array((3, 2, 4), dtype, rng),), {"p": "nuc", "dim": (2, 0), "keepdim": True},
                          name="nuc dims keepdim")
        yield SampleInput((a.T,), {"p": "nuc", "dim": (-1, -2)}, name="nuc transposed")


def logsumexp_samples(dtype, rng):
    for s in reduce_samples(dims=((0, False), (-1, True), ((0, 2), False)))(dtype, rng):
        yield s
    if dtype in ("float32", "float64"):
        yield SampleInput((np.array([[1000.0, 1000.0], [-np.inf, -np.inf]], dtype=dtype),), {"dim": 1}, name="big")


def _fix_dtype_kwargs(gen):
    """Turn dtype names in kwargs into strata dtypes (the harness maps them for torch)."""
    import strata as st

    def wrapped(dtype, rng):
        for s in gen(dtype, rng):
            if "dtype" in s.kwargs and isinstance(s.kwargs["dtype"], str):
                s.kwargs = dict(s.kwargs, dtype=getattr(st, s.kwargs["dtype"]))
            yield s
    return wrapped


def full_samples(dtype, rng):
    """Whole-tensor reductions without arguments (max(), min())."""
    for shape in ((), (5,), (3, 4), (2, 3, 4)):
        yield SampleInput((make_array(shape, dtype, rng),), name=str(shape))
    yield SampleInput((make_array((4, 6), dtype, rng, noncontig=True),), name="noncontig")
    yield SampleInput((make_array((100, 300), dtype, rng),), name="big")
    if dtype in ("float32", "float64"):
        yield SampleInput((np.array([1.0, np.nan, np.inf], dtype=dtype),), name="nan")


def argmax_samples(dtype, rng):
    for i, s in enumerate(single_dim_samples(empty=False)(dtype, rng)):
        yield SampleInput(s.args[:1], {"dim": s.args[1], "keepdim": i % 2 == 0}, s.name)
    for shape in ((), (5,), (3, 4)):
        yield SampleInput((make_array(shape, dtype, rng),), name=f"{shape} flattened")
    yield SampleInput((make_array((3, 4), dtype, rng),), {"keepdim": True}, name="flattened keepdim")
    # Ties: the first index wins.
    yield SampleInput((np.array([[1, 3, 3, 0], [2, 2, 1, 1]]).astype(np.dtype(dtype) if dtype != "bfloat16" else np.float32),),
                      {"dim": 1}, name="ties")


def mean_errors(rng):
    yield ErrorInput((np.arange(6).reshape(2, 3),), {}, error=RuntimeError, match="could not infer output dtype")
    yield from list_dim_errors()(rng)


def max_errors(rng):
    yield ErrorInput((np.ones((0, 3), np.float32),), {}, error=RuntimeError, match="Expected reduction dim to be specified")


def max_dim_errors(rng):
    yield ErrorInput((np.ones((0, 3), np.float32), 0), {}, error=IndexError, match="to have non-zero size")
    yield ErrorInput((np.ones((2, 3), np.float32), 2), {}, error=IndexError, match="Dimension out of range")


def amax_errors(rng):
    yield ErrorInput((np.ones((0, 3), np.float32),), {}, error=RuntimeError, match="Expected reduction dim")
    yield ErrorInput((np.ones((0, 3), np.float32),), {"dim": 0}, error=IndexError, match="non-zero size")
    yield from list_dim_errors()(rng)


def argmax_errors(rng):
    # torch raises IndexError here (RuntimeError for max/amax): found by test_differential.py
    yield ErrorInput((np.ones((0, 3), np.float32),), {}, error=IndexError, match="Expected reduction dim")
    yield ErrorInput((np.ones((2, 3), bool),), {}, error=RuntimeError, match="bool")
    yield from bad_dim_errors()(rng)


def var_errors(rng):
    yield ErrorInput((np.arange(6).reshape(2, 3),), {}, error=RuntimeError, match="floating point")
    yield from list_dim_errors()(rng)


def softmax_errors(rng):
    yield ErrorInput((np.arange(6).reshape(2, 3), 0), {}, error=NotImplementedError, match="not implemented for")
    yield ErrorInput((np.ones((2, 3), np.float32), 2), {}, error=IndexError, match="Dimension out of range")


def cumsum_errors(rng):
    yield ErrorInput((np.ones((2, 3), np.float32), 2), {}, error=IndexError, match="Dimension out of range")
    yield ErrorInput((np.ones((), np.float32), 1), {}, error=IndexError, match="Dimension out of range")


def norm_errors(rng):
    yield ErrorInput((np.arange(6).reshape(2, 3),), {}, error=RuntimeError, match="floating point")
    yield ErrorInput((np.ones((2, 3, 4), np.float32),), {"p": "nuc"}, error=RuntimeError, match="dim must be a 2-tuple")
    yield ErrorInput((np.ones((2, 3), np.float32),), {"p": "nuc", "dim": (1, -1)}, error=RuntimeError,
                     match="dims must be different")
    yield ErrorInput((np.ones((3,), np.float32),), {"p": "nuc"}, error=RuntimeError, match="at least 2 dimensions")
    yield ErrorInput((np.ones((2, 3), np.float16),), {"p": "nuc"}, error=RuntimeError, match="Low precision")
    yield from list_dim_errors()(rng)


FTOL = {"float16": (4e-3, 4e-3), "bfloat16": (3e-2, 3e-2), "complex64": (1e-5, 1e-5)}

register(
    OpInfo("sum", ref=ref_sum, dtypes=ALL, samples=_fix_dtype_kwargs(sum_dtype_samples), method="sum",
           errors=list_dim_errors(), tol={"float16": (4e-3, 1e-2), "bfloat16": (3e-2, 1e-1)}),
    OpInfo("mean", ref=ref_mean, dtypes=ALL_FLOAT + COMPLEX, samples=reduce_samples(), method="mean", errors=mean_errors,
           tol=FTOL),
    OpInfo("prod", ref=ref_prod, dtypes=ALL + COMPLEX, samples=single_dim_samples(low=0.5, high=1.5), method="prod",
           tol=FTOL, errors=bad_dim_errors()),
    OpInfo("amax", ref=ref_amax, dtypes=ALL, samples=reduce_samples(allow_empty=False), method="amax",
           errors=amax_errors),
    OpInfo("amin", ref=ref_amin, dtypes=ALL, samples=reduce_samples(allow_empty=False), method="amin",
           errors=amax_errors),
    OpInfo("max", ref=lambda a: np.max(a), dtypes=ALL, samples=full_samples, errors=max_errors, method="max"),
    OpInfo("min", ref=lambda a: np.min(a), dtypes=ALL, samples=full_samples, method="min"),
    OpInfo("max", ref=ref_max_dim, dtypes=NO_BOOL, samples=single_dim_samples(empty=False), method="max",
           errors=max_dim_errors),
    OpInfo("min", ref=ref_min_dim, dtypes=NO_BOOL, samples=single_dim_samples(empty=False), method="min"),
    OpInfo("argmax", ref=ref_argmax, dtypes=NO_BOOL, samples=argmax_samples,
           method="argmax", errors=argmax_errors),
    OpInfo("argmin", ref=ref_argmin, dtypes=NO_BOOL, samples=argmax_samples,
           method="argmin"),
    OpInfo("var", ref=ref_var, dtypes=ALL_FLOAT, samples=var_samples, method="var", errors=var_errors, tol=FTOL),
    OpInfo("std", ref=ref_std, dtypes=ALL_FLOAT, samples=var_samples, method="std", errors=var_errors, tol=FTOL),
    OpInfo("var_mean", ref=ref_var_mean, dtypes=ALL_FLOAT, samples=var_samples, tol=FTOL),
    OpInfo("std_mean", ref=ref_std_mean, dtypes=ALL_FLOAT, samples=var_samples, tol=FTOL),
    OpInfo("logsumexp", ref=ref_logsumexp, dtypes=ALL_FLOAT + ("int64",), samples=logsumexp_samples,
           method="logsumexp", tol=dict(FTOL, int64=(1e-5, 1e-5))),
    OpInfo("all", ref=ref_all, dtypes=ALL, samples=reduce_samples(low=0, high=2), method="all",
           errors=list_dim_errors()),
    OpInfo("any", ref=ref_any, dtypes=ALL, samples=reduce_samples(low=-1, high=1), method="any"),
    OpInfo("count_nonzero", ref=ref_count_nonzero, dtypes=ALL,
           samples=lambda dt, rng: (SampleInput(s.args, {k: v for k, v in s.kwargs.items() if k != "keepdim"}, s.name)
                                    for s in reduce_samples(low=-1, high=1)(dt, rng)
                                    if not s.kwargs.get("keepdim"))),
    OpInfo("norm", ref=ref_norm, dtypes=ALL_FLOAT, samples=norm_samples, method="norm", errors=norm_errors,
           tol={"float16": (4e-3, 1e-2), "bfloat16": (3e-2, 1e-1)}),
    OpInfo("cumsum", ref=ref_cumsum, dtypes=ALL, samples=single_dim_samples(), method="cumsum", errors=cumsum_errors,
           tol={"float16": (4e-3, 1e-2), "bfloat16": (3e-2, 2e-1)}),
    OpInfo("cumprod", ref=ref_cumprod, dtypes=ALL, samples=single_dim_samples(low=0.5, high=1.5),
           method="cumprod", tol=FTOL),
    OpInfo("softmax", ref=ref_softmax, dtypes=ALL_FLOAT, samples=single_dim_samples(), method="softmax",
           errors=softmax_errors, tol=FTOL),
    OpInfo("log_softmax", ref=ref_log_softmax, dtypes=ALL_FLOAT, samples=single_dim_samples(),
           method="log_softmax", errors=softmax_errors, tol=FTOL),
)
