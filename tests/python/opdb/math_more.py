"""OpInfos of the ops in src/ops/decl/math_more.def: more pointwise math,
special functions (SciPy references), scans with indices and order
statistics (NumPy references that reproduce torch's choices: lower median,
ties by position)."""

import numpy as np

try:  # SciPy is the reference of the special functions (installed with scikit-learn)
    import scipy.special as sp
except ImportError:  # pragma: no cover
    sp = None

from .core import ALL_FLOAT, FLOAT, INT, ErrorInput, OpInfo, SampleInput, make_array, register, standard_shapes
from .pointwise import binary_samples, unary_samples

HALF_TOL = {"float16": (4e-3, 4e-3), "bfloat16": (2e-2, 2e-2)}


def f64(fn):
    """A float64 reference cast back to the input's dtype (SciPy computes in double)."""
    def ref(*args):
        dt = next(a.dtype for a in args if isinstance(a, np.ndarray))
        return np.asarray(fn(*[a.astype(np.float64) if isinstance(a, np.ndarray) else a for a in args])).astype(dt)
    return ref


def unary_errors_float_only(name):
    def gen(rng):
        yield ErrorInput((np.arange(3, dtype=np.int64),), error=NotImplementedError, match=f"{name}")
    return gen


# ---- unary ---------------------------------------------------------------------------
register(
    OpInfo("acosh", ref=np.arccosh, dtypes=ALL_FLOAT, samples=unary_samples(1.0, 5.0), method="acosh", tol=HALF_TOL),
    OpInfo("asinh", ref=np.arcsinh, dtypes=ALL_FLOAT, samples=unary_samples(), method="asinh", tol=HALF_TOL),
    OpInfo("atanh", ref=np.arctanh, dtypes=ALL_FLOAT, samples=unary_samples(-0.95, 0.95), method="atanh", tol=HALF_TOL),
    OpInfo("deg2rad", ref=np.deg2rad, dtypes=ALL_FLOAT, samples=unary_samples(-360, 360), method="deg2rad",
           tol=HALF_TOL),
    OpInfo("rad2deg", ref=np.rad2deg, dtypes=FLOAT, samples=unary_samples(), method="rad2deg"),
    OpInfo("frac", ref=lambda x: x - np.trunc(x), dtypes=ALL_FLOAT, samples=unary_samples(extremes=False),
           method="frac", errors=unary_errors_float_only("frac"), tol=HALF_TOL),
    OpInfo("sinc", ref=np.sinc, dtypes=FLOAT, samples=unary_samples(), method="sinc"),
    OpInfo("signbit", ref=np.signbit, dtypes=FLOAT + ("int32", "int64", "uint8"), samples=unary_samples(),
           method="signbit"),
)

if sp is not None:
    register(
        OpInfo("logit", ref=f64(sp.logit), dtypes=FLOAT, samples=unary_samples(0.05, 0.95), method="logit"),
        OpInfo("lgamma", ref=f64(sp.gammaln), dtypes=FLOAT, samples=unary_samples(0.1, 8.0, extremes=False),
               method="lgamma"),
        OpInfo("digamma", ref=f64(sp.psi), dtypes=FLOAT, samples=unary_samples(0.1, 8.0), method="digamma"),
        OpInfo("erfinv", ref=f64(sp.erfinv), dtypes=FLOAT, samples=unary_samples(-0.99, 0.99), method="erfinv"),
        OpInfo("i0", ref=f64(sp.i0), dtypes=FLOAT, samples=unary_samples(-6, 6, extremes=False), method="i0"),
        OpInfo("special.i1", ref=f64(sp.i1), dtypes=FLOAT, samples=unary_samples(-6, 6, extremes=False)),
    )


def logit_eps_samples(dtype, rng):
    yield SampleInput((make_array((4, 5), dtype, rng, -0.2, 1.2),), {"eps": 0.1}, name="eps")
    yield SampleInput((make_array((6,), dtype, rng, 0.05, 0.95),), {"eps": 1e-6}, name="small eps")


def polygamma_samples(dtype, rng):
    for n in (0, 1, 2, 3):
        yield SampleInput((n, make_array((3, 4), dtype, rng, 0.2, 6.0)), name=f"n={n}")
    yield SampleInput((1, make_array((5,), dtype, rng, -3.0, -0.1)), name="n=1 negative")


def polygamma_errors(rng):
    yield ErrorInput((-1, np.ones(3, np.float32)), match="negative n")


def mvlgamma_samples(dtype, rng):
    for p in (1, 2, 3):
        yield SampleInput((make_array((3, 4), dtype, rng, 1.1, 6.0), p), name=f"p={p}")
    yield SampleInput((make_array((0, 2), dtype, rng), 2), name="empty")


def mvlgamma_errors(rng):
    yield ErrorInput((np.full(3, 0.4, np.float32), 2), match="greater than")
    yield ErrorInput((np.ones(3, np.float32), 0), match="p has to be greater than or equal to 1")


if sp is not None:
    register(
        OpInfo("logit", ref=lambda x, eps: f64(sp.logit)(np.clip(x, eps, 1 - eps)), dtypes=FLOAT,
               samples=logit_eps_samples),
        OpInfo("polygamma", ref=lambda n, x: sp.polygamma(n, x.astype(np.float64)).astype(x.dtype), dtypes=FLOAT,
               samples=polygamma_samples, errors=polygamma_errors, tol={"float32": (1e-4, 1e-5)}),
        OpInfo("mvlgamma", ref=lambda x, p: sp.multigammaln(x.astype(np.float64), p).astype(x.dtype) if x.size else x,
               dtypes=FLOAT, samples=mvlgamma_samples, errors=mvlgamma_errors, method="mvlgamma"),
    )


# ---- binary ---------------------------------------------------------------------------
def float_only_binary_errors(name):
    def gen(rng):
        yield ErrorInput((np.arange(3, dtype=np.int64), np.arange(3, dtype=np.int64)), error=NotImplementedError,
                         match=name)
        yield ErrorInput((np.ones((2, 3), np.float32), np.ones((4,), np.float32)), match="must match the size")
    return gen


def heaviside_errors(rng):
    yield ErrorInput((np.ones(3, np.float32), np.ones(3, np.float64)), match="different dtypes")


def zeros_in_lhs(dtype, rng):
    yield from binary_samples(0.1, 3.0)(dtype, rng)
    a = make_array((3, 4), dtype, rng, -2, 2)
    a[0] = 0
    yield SampleInput((a, make_array((3, 4), dtype, rng, 0.1, 3.0)), name="zeros")


def heaviside_samples(dtype, rng):
    yield from binary_samples(-2, 2)(dtype, rng)
    a = make_array((3, 4), dtype, rng, -2, 2)
    a[1] = 0
    yield SampleInput((a, make_array((4,), dtype, rng, -2, 2)), name="zeros")


if sp is not None:
    register(OpInfo("xlogy", ref=f64(sp.xlogy), dtypes=FLOAT, samples=zeros_in_lhs, method="xlogy"))


register(
    OpInfo("hypot", ref=np.hypot, dtypes=ALL_FLOAT, samples=binary_samples(), method="hypot",
           errors=float_only_binary_errors("hypot"), tol=HALF_TOL),
    OpInfo("logaddexp", ref=np.logaddexp, dtypes=ALL_FLOAT, samples=binary_samples(), method="logaddexp",
           errors=float_only_binary_errors("logaddexp"), tol=HALF_TOL),
    OpInfo("logaddexp2", ref=np.logaddexp2, dtypes=FLOAT, samples=binary_samples(), method="logaddexp2"),
    OpInfo("heaviside", ref=np.heaviside, dtypes=FLOAT + ("int64", "int32", "uint8"), samples=heaviside_samples,
           method="heaviside", errors=heaviside_errors),
    OpInfo("copysign", ref=np.copysign, dtypes=FLOAT, samples=binary_samples(), method="copysign"),
    OpInfo("float_power", ref=lambda a, b: np.float_power(a, b), dtypes=FLOAT + ("int64",),
           samples=binary_samples(0.5, 2.0), method="float_power"),
    OpInfo("clamp_min", ref=np.maximum, dtypes=FLOAT + ("int32", "int64"), samples=binary_samples(), method="clamp_min"),
    OpInfo("clamp_max", ref=np.minimum, dtypes=FLOAT + ("int32", "int64"), samples=binary_samples(), method="clamp_max"),
)


# ---- ternary ---------------------------------------------------------------------------
def addc_samples(nonzero_den):
    def gen(dtype, rng):
        def den(shape):
            d = make_array(shape, dtype, rng, 0.5, 3.0) if nonzero_den else make_array(shape, dtype, rng)
            return d
        for shape in [(), (0,), (5,), (3, 4)]:
            yield SampleInput((make_array(shape, dtype, rng), make_array(shape, dtype, rng), den(shape)), name=str(shape))
        yield SampleInput((make_array((3, 1, 4), dtype, rng), make_array((2, 1), dtype, rng), den((4,))),
                          {"value": 2}, name="broadcast value=2")
        yield SampleInput((make_array((4, 6), dtype, rng, noncontig=True), make_array((4, 6), dtype, rng), den((6,))),
                          {"value": -1}, name="noncontig")
    return gen


def addcdiv_errors(rng):
    yield ErrorInput((np.ones(3, np.float32), np.ones(3, np.int64), np.ones(3, np.int64)), match="Integer division")
    yield ErrorInput((np.ones((2, 3), np.float32), np.ones(4, np.float32), np.ones(3, np.float32)), match="size")


register(
    OpInfo("addcmul", ref=lambda a, b, c, value=1: (a + value * b * c).astype(np.result_type(a, b, c)),
           dtypes=ALL_FLOAT + ("int64", "int32"), samples=addc_samples(False), method="addcmul", tol=HALF_TOL),
    OpInfo("addcdiv", ref=lambda a, b, c, value=1: (a + value * b / c).astype(np.result_type(a, b, c)),
           dtypes=ALL_FLOAT, samples=addc_samples(True), method="addcdiv", errors=addcdiv_errors, tol=HALF_TOL),
)


# ---- scans with indices -------------------------------------------------------------------
def cum_extremum_ref(is_max):
    def ref(x, dim):
        if x.ndim == 0:
            return x.copy(), np.zeros((), np.int64)
        xm = np.moveaxis(x, dim, -1)
        vals = np.empty_like(xm)
        idx = np.empty(xm.shape, np.int64)
        for pos in np.ndindex(*xm.shape[:-1]):
            line = xm[pos]
            best, bi = None, 0
            for k, v in enumerate(line):
                take = best is None or (np.isnan(v) if v.dtype.kind == "f" else False) or (
                    v >= best if is_max else v <= best)
                if best is not None and v.dtype.kind == "f" and np.isnan(best) and not np.isnan(v):
                    take = False
                if take:
                    best, bi = v, k
                vals[pos + (k,)] = best
                idx[pos + (k,)] = bi
        return np.moveaxis(vals, -1, dim), np.moveaxis(idx, -1, dim)
    return ref


def scan_samples(dtype, rng):
    yield SampleInput((make_array((), dtype, rng), 0), name="0-d")
    yield SampleInput((make_array((0, 3), dtype, rng), 1), name="empty")
    yield SampleInput((make_array((7,), dtype, rng), 0), name="1-d")
    yield SampleInput((make_array((3, 5), dtype, rng), 1), name="rows")
    yield SampleInput((make_array((4, 3, 2), dtype, rng), 0), name="outer dim")
    yield SampleInput((make_array((4, 6), dtype, rng, noncontig=True), -1), name="noncontig")
    if dtype in FLOAT:
        yield SampleInput((np.array([1, 3, 3, 2, np.nan, 5, np.nan, 7], dtype=dtype), 0), name="ties and nan")


def scan_errors(rng):
    yield ErrorInput((np.ones((2, 3), np.float32), 2), error=IndexError, match="out of range")


register(
    OpInfo("cummax", ref=cum_extremum_ref(True), dtypes=FLOAT + ("int64", "int32", "uint8"), samples=scan_samples,
           method="cummax", errors=scan_errors),
    OpInfo("cummin", ref=cum_extremum_ref(False), dtypes=FLOAT + ("int64", "int16"), samples=scan_samples,
           method="cummin", errors=scan_errors),
    OpInfo("logcumsumexp", ref=lambda x, dim: np.logaddexp.accumulate(x, axis=dim) if x.ndim else x.copy(),
           dtypes=FLOAT, samples=scan_samples, method="logcumsumexp", errors=scan_errors),
)


# ---- reductions and order statistics ----------------------------------------------------------
def reduce_samples(dtype, rng):
    yield SampleInput((make_array((7,), dtype, rng),), name="1-d")
    yield SampleInput((make_array((3, 4), dtype, rng),), {"dim": 1}, name="dim=1")
    yield SampleInput((make_array((3, 4), dtype, rng),), {"dim": 0, "keepdim": True}, name="keepdim")
    yield SampleInput((make_array((2, 3, 4), dtype, rng, noncontig=True),), {"dim": -2}, name="noncontig")


def with_nans(dtype, rng, shape=(4, 5)):
    a = make_array(shape, dtype, rng)
    a[rng.random(shape) < 0.3] = np.nan
    return a


def nan_reduce_samples(dtype, rng):
    yield from reduce_samples(dtype, rng)
    yield SampleInput((with_nans(dtype, rng),), name="nans")
    yield SampleInput((with_nans(dtype, rng),), {"dim": 1, "keepdim": True}, name="nans dim")
    yield SampleInput((np.full((2, 3), np.nan, dtype),), {"dim": 0}, name="all nan")


def aminmax_ref(x, dim=None, keepdim=False):
    return np.min(x, axis=dim, keepdims=keepdim), np.max(x, axis=dim, keepdims=keepdim)


def aminmax_errors(rng):
    yield ErrorInput((np.ones((0, 3), np.float32),), {"dim": 0}, error=IndexError,
                     match="empty dimension")  # torch's category with a dim (test_differential.py)
    yield ErrorInput((np.ones((0,), np.float32),), match="empty dimension")


def nanmean_errors(rng):
    yield ErrorInput((np.arange(3, dtype=np.int64),), match="floating point")


register(
    OpInfo("aminmax", ref=aminmax_ref, dtypes=FLOAT + ("int64", "uint8"), samples=reduce_samples, method="aminmax",
           errors=aminmax_errors),
    OpInfo("nansum", ref=lambda x, dim=None, keepdim=False: np.asarray(np.nansum(x, axis=dim, keepdims=keepdim)),
           dtypes=FLOAT, samples=nan_reduce_samples, method="nansum"),
    OpInfo("nanmean", ref=lambda x, dim=None, keepdim=False: np.asarray(np.nanmean(x, axis=dim, keepdims=keepdim)),
           dtypes=FLOAT, samples=nan_reduce_samples, method="nanmean", errors=nanmean_errors),
)


def _line_select(x, dim, keepdim, pick):
    """Applies pick(line) -> (value, index) along dim."""
    if x.ndim == 0:
        v, i = pick(x.reshape(1))
        return np.asarray(v, x.dtype), np.asarray(i, np.int64)
    xm = np.moveaxis(x, dim, -1)
    vals = np.empty(xm.shape[:-1], x.dtype)
    idx = np.empty(xm.shape[:-1], np.int64)
    for pos in np.ndindex(*xm.shape[:-1]):
        vals[pos], idx[pos] = pick(xm[pos])
    if keepdim:
        vals, idx = np.expand_dims(vals, dim), np.expand_dims(idx, dim)
    return vals, idx


def kth_pick(k):
    def pick(line):
        order = np.argsort(line, kind="stable")  # nan last, ties by position
        return line[order[k]], order[k]
    return pick


def median_pick(ignore_nan):
    def pick(line):
        nan = np.isnan(line) if line.dtype.kind == "f" else np.zeros(line.shape, bool)
        if nan.any() and (not ignore_nan or nan.all()):
            first = int(np.argmax(nan))
            return line[first], first
        order = np.argsort(line, kind="stable")
        k = (int((~nan).sum()) - 1) // 2
        return line[order[k]], order[k]
    return pick


def mode_pick(line):
    order = np.argsort(line, kind="stable")
    s = line[order]
    best, best_at, i = 0, 0, 0
    while i < len(s):
        j = i + 1
        while j < len(s) and (s[j] == s[i] or (s.dtype.kind == "f" and np.isnan(s[j]) and np.isnan(s[i]))):
            j += 1
        if j - i > best:
            best, best_at = j - i, j - 1
        i = j
    return s[best_at], order[best_at]


def select_samples(with_nan):
    def gen(dtype, rng):
        yield SampleInput((make_array((), dtype, rng), 0), name="0-d")
        yield SampleInput((make_array((7,), dtype, rng), 0), name="1-d odd")
        yield SampleInput((make_array((3, 6), dtype, rng), 1), name="rows even")
        yield SampleInput((make_array((4, 3, 2), dtype, rng), 0, True), name="outer keepdim")
        yield SampleInput((make_array((4, 6), dtype, rng, noncontig=True), -1), name="noncontig")
        yield SampleInput((make_array((0, 3), dtype, rng), 1), name="empty outer")
        if dtype in INT or dtype == "bool":
            return
        ties = np.array([[2, 1, 2, 1, 3, 1], [5, 5, 4, 4, 6, 6]], dtype=dtype)
        yield SampleInput((ties, 1), name="ties")
        if with_nan:
            yield SampleInput((with_nans(dtype, rng, (5, 4)), 0), name="nans")
            yield SampleInput((np.full((2, 3), np.nan, dtype), 1), name="all nan")
    return gen


def select_errors(op):
    def gen(rng):
        yield ErrorInput((np.ones((0, 3), np.float32), 0), error=IndexError, match="non-zero size")
        yield ErrorInput((np.ones((2, 3), np.float32), 2), error=IndexError, match="out of range")
        if op != "mode":
            yield ErrorInput((np.ones(3, np.bool_), 0), error=NotImplementedError, match="Bool")
    return gen


def kth_samples(dtype, rng):
    yield SampleInput((make_array((), dtype, rng), 1, 0), name="0-d")
    yield SampleInput((make_array((7,), dtype, rng), 3), name="1-d")
    yield SampleInput((make_array((3, 6), dtype, rng), 6, 1, True), name="largest keepdim")
    yield SampleInput((make_array((4, 3, 2), dtype, rng), 1, 0), name="smallest outer")
    if dtype in FLOAT:
        yield SampleInput((with_nans(dtype, rng, (5, 4)), 4, 0), name="nans")


def kth_errors(rng):
    yield ErrorInput((np.ones(3, np.float32), 4), match="out of range")
    yield ErrorInput((np.ones(3, np.float32), 0), match="out of range")


SELECT_DTYPES = FLOAT + ("int64", "int32", "uint8")
register(
    OpInfo("median", ref=lambda x, dim, keepdim=False: _line_select(x, dim, keepdim, median_pick(False)),
           dtypes=SELECT_DTYPES, samples=select_samples(True), method="median", errors=select_errors("median")),
    OpInfo("nanmedian", ref=lambda x, dim, keepdim=False: _line_select(x, dim, keepdim, median_pick(True)),
           dtypes=FLOAT + ("int64",), samples=select_samples(True), method="nanmedian",
           errors=select_errors("nanmedian")),
    OpInfo("mode", ref=lambda x, dim, keepdim=False: _line_select(x, dim, keepdim, mode_pick),
           dtypes=SELECT_DTYPES + ("bool",), samples=select_samples(False), method="mode", errors=select_errors("mode")),
    OpInfo("kthvalue", ref=lambda x, k, dim=-1, keepdim=False: _line_select(x, dim, keepdim, kth_pick(k - 1)),
           dtypes=SELECT_DTYPES, samples=kth_samples, method="kthvalue", errors=kth_errors),
)


def full_median_samples(dtype, rng):
    yield SampleInput((make_array((7,), dtype, rng),), name="odd")
    yield SampleInput((make_array((3, 4), dtype, rng),), name="even")
    yield SampleInput((make_array((), dtype, rng),), name="0-d")
    if dtype in FLOAT:
        yield SampleInput((with_nans(dtype, rng),), name="nans")


def full_median_ref(ignore_nan):
    def ref(x):
        flat = x.reshape(-1)
        return np.asarray(median_pick(ignore_nan)(flat)[0], x.dtype)
    return ref


register(
    OpInfo("median", ref=full_median_ref(False), dtypes=FLOAT + ("int64",), samples=full_median_samples),
    OpInfo("nanmedian", ref=full_median_ref(True), dtypes=FLOAT, samples=full_median_samples),
    OpInfo("msort", ref=lambda x: np.sort(x, axis=0, kind="stable"), dtypes=FLOAT + ("int64",),
           samples=lambda dtype, rng: (SampleInput((make_array(s, dtype, rng),), name=str(s))
                                       for s in [(5,), (4, 3), (3, 2, 2), (0, 2)]),
           method="msort"),
)


# ---- quantile ------------------------------------------------------------------------------
INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def quantile_samples(with_nan):
    def gen(dtype, rng):
        q1 = np.array([0.1, 0.3, 0.55, 0.9, 0.95], dtype)  # no rank lands on an integer (a kink in q)
        yield SampleInput((make_array((9,), dtype, rng), 0.3), name="scalar q")
        yield SampleInput((make_array((9,), dtype, rng), q1), name="1-d q")
        for interp in INTERPOLATIONS:
            yield SampleInput((make_array((3, 8), dtype, rng), q1), {"dim": 1, "interpolation": interp}, name=interp)
        yield SampleInput((make_array((4, 3, 2), dtype, rng), 0.75), {"dim": 0, "keepdim": True}, name="keepdim")
        yield SampleInput((make_array((4, 3), dtype, rng), q1[:2]), {"keepdim": True}, name="flat keepdim")
        yield SampleInput((make_array((4, 6), dtype, rng, noncontig=True), q1), {"dim": -1}, name="noncontig")
        yield SampleInput((make_array((4, 6), dtype, rng), np.array([0.0, 1.0], dtype)), {"dim": 0}, name="ends")
        if with_nan:
            yield SampleInput((with_nans(dtype, rng, (4, 6)), q1), {"dim": 1}, name="nans")
            yield SampleInput((np.full((2, 3), np.nan, dtype), 0.5), {"dim": 1}, name="all nan")
    return gen


def quantile_ref(npfn):
    def ref(x, q, dim=None, keepdim=False, interpolation="linear"):
        r = npfn(x.astype(np.float64), np.asarray(q, np.float64), axis=dim, keepdims=keepdim, method=interpolation)
        return np.asarray(r).astype(x.dtype)
    return ref


def quantile_errors(rng):
    yield ErrorInput((np.arange(4, dtype=np.int64), 0.5), match="float or double")
    yield ErrorInput((np.ones(4, np.float32), 1.5), match="range")
    yield ErrorInput((np.ones(4, np.float32), np.ones((1, 1), np.float32)), match="scalar or 1D")
    yield ErrorInput((np.ones(4, np.float32), np.ones(1, np.float64)), match="same dtype")
    yield ErrorInput((np.ones(0, np.float32), 0.5), match="non-empty")
    yield ErrorInput((np.ones(4, np.float32), 0.5), {"interpolation": "cubic"}, match="interpolation")


import warnings  # noqa: E402

warnings.filterwarnings("ignore", message="All-NaN slice encountered")
warnings.filterwarnings("ignore", message="Mean of empty slice")
register(
    OpInfo("quantile", ref=quantile_ref(np.quantile), dtypes=FLOAT, samples=quantile_samples(True), method="quantile",
           errors=quantile_errors),
    OpInfo("nanquantile", ref=quantile_ref(np.nanquantile), dtypes=FLOAT, samples=quantile_samples(True),
           method="nanquantile", errors=quantile_errors),
)
