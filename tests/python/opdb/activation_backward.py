"""OpInfos of the fused activation backwards (src/ops/decl/activation_backward.def).

torch has these only as torch.ops.aten.* (no torch.<name>), so the generic torch dtype check is off here;
tests/python/test_autograd_fused_act.py compares values and dtypes with torch.ops.aten directly.
"""

import math

import numpy as np

from .core import ALL_FLOAT, FLOAT, ErrorInput, OpInfo, SampleInput, make_array, register, standard_shapes

_erf = np.vectorize(math.erf, otypes=[np.float64])
HALF_TOL = {"float16": (4e-3, 4e-3), "bfloat16": (2e-2, 2e-2)}


def bw_samples(low=-3.0, high=3.0, extremes=True, **kw):
    """(grad_output, x) pairs: same shapes, broadcast, non-contiguous, 0-d, empty, extreme x."""
    def gen(dtype, rng):
        for shape in standard_shapes():
            yield SampleInput((make_array(shape, dtype, rng), make_array(shape, dtype, rng, low, high)), dict(kw),
                              name=str(shape))
        yield SampleInput((make_array((3, 1, 4), dtype, rng), make_array((2, 1), dtype, rng, low, high)), dict(kw),
                          name="broadcast")
        yield SampleInput((make_array((4, 6), dtype, rng, noncontig=True),
                           make_array((4, 6), dtype, rng, low, high, noncontig=True)), dict(kw), name="noncontig")
        yield SampleInput((make_array((2, 3), dtype, rng), make_array((), dtype, rng, low, high)), dict(kw),
                          name="0-d self")
        if extremes and dtype in FLOAT:
            x = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 30.0, -30.0], dtype=dtype)
            yield SampleInput((np.ones_like(x) * 1.5, x), dict(kw), name="extremes")
    return gen


def _f64(fn):
    """Computes in float64 and returns the promoted dtype of the two inputs (like the op)."""
    def ref(g, x, *a, **k):
        with np.errstate(all="ignore"):
            r = fn(g.astype(np.float64), x.astype(np.float64), *a, **k)
        return np.asarray(r).astype(np.result_type(g.dtype, x.dtype))
    return ref


def _threshold_backward(g, x, threshold):
    return np.where(x <= threshold, np.zeros_like(g * x), g * np.ones_like(x)).astype(np.result_type(g, x))


def _gelu_backward(g, x, approximate="none"):
    if approximate == "tanh":
        k, kappa = math.sqrt(2 / math.pi), 0.044715
        t = np.tanh(k * (x + kappa * x ** 3))
        return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * kappa * x * x))
    cdf = 0.5 * (1 + _erf(x / math.sqrt(2)))
    pdf = np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
    return g * (cdf + x * pdf)


def _silu_backward(g, x):
    s = 1 / (1 + np.exp(-x))
    return g * s * (1 + x * (1 - s))


def float_errors(name, *extra):
    def gen(rng):
        i = np.array([1, -2, 3], dtype=np.int64)
        yield ErrorInput((i, i) + extra, error=NotImplementedError, match=f"{name}: not implemented for")
        yield ErrorInput((np.ones((2, 3), np.float32), np.ones((4,), np.float32)) + extra, match="must match the size")
    return gen


def threshold_errors(rng):
    b = np.array([True, False])
    yield ErrorInput((b, b, 0), error=NotImplementedError, match="threshold_backward: not implemented for 'bool'")
    yield ErrorInput((np.ones((2, 3), np.float32), np.ones((4,), np.float32), 0), match="must match the size")


def gelu_errors(rng):
    yield from float_errors("gelu_backward")(rng)
    x = np.ones(3, np.float32)
    yield ErrorInput((x, x), {"approximate": "sigmoid"}, match="approximate argument must be either none or tanh")


register(
    OpInfo("threshold_backward", ref=_threshold_backward, dtypes=ALL_FLOAT + ("int64", "int32", "uint8"),
           samples=bw_samples(threshold=0), tol=HALF_TOL, compare_dtype=False, errors=threshold_errors),
    OpInfo("threshold_backward", ref=_threshold_backward, dtypes=FLOAT,
           samples=bw_samples(threshold=0.5), compare_dtype=False),
    OpInfo("gelu_backward", ref=_f64(_gelu_backward), dtypes=ALL_FLOAT, samples=bw_samples(), tol=HALF_TOL,
           compare_dtype=False, errors=gelu_errors),
    OpInfo("gelu_backward", ref=_f64(_gelu_backward), dtypes=ALL_FLOAT, samples=bw_samples(approximate="tanh"),
           tol=HALF_TOL, compare_dtype=False),
    OpInfo("silu_backward", ref=_f64(_silu_backward), dtypes=ALL_FLOAT, samples=bw_samples(), tol=HALF_TOL,
           compare_dtype=False, errors=float_errors("silu_backward")),
    # sigmoid/tanh backward take the forward's output, in (0, 1) and (-1, 1).
    OpInfo("sigmoid_backward", ref=_f64(lambda g, y: g * (1 - y) * y), dtypes=ALL_FLOAT,
           samples=bw_samples(0.0, 1.0), tol=HALF_TOL, compare_dtype=False, errors=float_errors("sigmoid_backward")),
    OpInfo("tanh_backward", ref=_f64(lambda g, y: g * (1 - y * y)), dtypes=ALL_FLOAT,
           samples=bw_samples(-1.0, 1.0), tol=HALF_TOL, compare_dtype=False, errors=float_errors("tanh_backward")),
)
