"""OpInfos of strata.nn.functional where a NumPy reference is short."""

import math

import numpy as np

from .core import ALL_FLOAT, FLOAT, ErrorInput, OpInfo, SampleInput, make_array, register, standard_shapes

_erf = np.vectorize(math.erf, otypes=[np.float64])
HALF_TOL = {"float16": (4e-3, 4e-3), "bfloat16": (2e-2, 2e-2)}


def act_samples(extremes=True):
    def gen(dtype, rng):
        for shape in standard_shapes():
            yield SampleInput((make_array(shape, dtype, rng),), name=str(shape))
        yield SampleInput((make_array((4, 6), dtype, rng, noncontig=True),), name="noncontig")
        if extremes and dtype in FLOAT:
            yield SampleInput((np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 50.0, -50.0], dtype=dtype),),
                              name="extremes")
    return gen


def with_kwargs(gen, **kw):
    def g(dtype, rng):
        for s in gen(dtype, rng):
            yield SampleInput(s.args, dict(kw), s.name)
    return g


def _same(fn):
    """Keeps the input's dtype (references compute in float64 for accuracy)."""
    def ref(x, *a, **k):
        return np.asarray(fn(x.astype(np.float64), *a, **k)).astype(x.dtype)
    return ref


def _softplus(x, beta=1.0, threshold=20.0):
    with np.errstate(over="ignore"):
        return np.where(x * beta > threshold, x, np.log1p(np.exp(x * beta)) / beta)


def _elu(x, alpha=1.0):
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))


def _silu(x):
    with np.errstate(over="ignore"):
        return x / (1 + np.exp(-x))


def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def act_errors(rng):
    yield ErrorInput((np.array([1, 2], dtype=np.int64),), error=RuntimeError, match="not implemented for")


register(
    OpInfo("nn.functional.relu", ref=lambda x: np.where(np.isnan(x) | (x > 0), x, np.zeros_like(x)),
           dtypes=ALL_FLOAT + ("int64", "int32"), samples=act_samples(), method="relu", tol=HALF_TOL),
    OpInfo("nn.functional.leaky_relu", ref=_same(lambda x, negative_slope=0.01: np.where(x > 0, x, x * negative_slope)),
           dtypes=ALL_FLOAT, samples=with_kwargs(act_samples(), negative_slope=0.2), tol=HALF_TOL, errors=act_errors),
    OpInfo("nn.functional.elu", ref=_same(_elu), dtypes=ALL_FLOAT, samples=act_samples(), tol=HALF_TOL),
    OpInfo("nn.functional.hardtanh", ref=_same(lambda x, min_val=-1.0, max_val=1.0: np.where(
        x < min_val, min_val, np.where(x > max_val, max_val, x))), dtypes=ALL_FLOAT,
           samples=with_kwargs(act_samples(), min_val=-0.5, max_val=2.0), tol=HALF_TOL),
    OpInfo("nn.functional.silu", ref=_same(_silu), dtypes=ALL_FLOAT, samples=act_samples(), tol=HALF_TOL),
    OpInfo("nn.functional.softplus", ref=_same(_softplus), dtypes=ALL_FLOAT,
           samples=with_kwargs(act_samples(), beta=2.0, threshold=4.0), tol=HALF_TOL),
    OpInfo("nn.functional.gelu", ref=_same(lambda x, approximate="none": 0.5 * x * (1 + _erf(x / math.sqrt(2)))),
           dtypes=FLOAT, samples=act_samples(extremes=False)),
    OpInfo("nn.functional.gelu", ref=_same(lambda x, approximate="tanh": _gelu_tanh(x)), dtypes=FLOAT,
           samples=with_kwargs(act_samples(), approximate="tanh")),
)


# ---- structured ops ----------------------------------------------------------------

def linear_samples(dtype, rng):
    for xs, ws, b in [((5, 3), (4, 3), True), ((2, 3, 3), (4, 3), False), ((0, 3), (2, 3), True),
                      ((3,), (4, 3), True)]:
        args = [make_array(xs, dtype, rng), make_array(ws, dtype, rng)]
        if b:
            args.append(make_array(ws[:1], dtype, rng))
        yield SampleInput(tuple(args), name=f"{xs}x{ws}")
    yield SampleInput((make_array((4, 3), dtype, rng, noncontig=True), make_array((5, 3), dtype, rng, noncontig=True)),
                      name="noncontig")


def _linear(x, w, b=None):
    y = x.astype(np.float64) @ w.astype(np.float64).T
    if b is not None:
        y = y + b
    return y.astype(x.dtype)


def linear_errors(rng):
    yield ErrorInput((np.ones((2, 3), np.float32), np.ones((4, 5), np.float32)), match="cannot be multiplied")


def layer_norm_samples(dtype, rng):
    yield SampleInput((make_array((4, 5), dtype, rng), [5]), name="2d")
    yield SampleInput((make_array((2, 3, 4), dtype, rng), [3, 4], make_array((3, 4), dtype, rng),
                       make_array((3, 4), dtype, rng)), name="affine")
    yield SampleInput((make_array((0, 3), dtype, rng), [3]), name="empty")
    yield SampleInput((make_array((3, 6), dtype, rng, noncontig=True), [6]), name="noncontig")


def _layer_norm(x, ns, w=None, b=None, eps=1e-5):
    axes = tuple(range(x.ndim - len(ns), x.ndim))
    xd = x.astype(np.float64)
    m = xd.mean(axis=axes, keepdims=True) if xd.size else xd
    v = ((xd - m) ** 2).mean(axis=axes, keepdims=True) if xd.size else xd
    y = (xd - m) / np.sqrt(v + eps)
    if w is not None:
        y = y * w
    if b is not None:
        y = y + b
    return y.astype(x.dtype)


def loss_samples(dtype, rng):
    for shape in [(3, 4), (), (0,), (2, 3, 2)]:
        for red in ["mean", "sum", "none"]:
            yield SampleInput((make_array(shape, dtype, rng), make_array(shape, dtype, rng)), {"reduction": red},
                              name=f"{shape}-{red}")


def _reduce(e, reduction, dtype):
    if reduction == "none":
        return e.astype(dtype)
    with np.errstate(invalid="ignore"):
        return np.asarray(e.mean() if reduction == "mean" else e.sum()).astype(dtype)


def pad_samples(dtype, rng):
    yield SampleInput((make_array((3, 4), dtype, rng), [1, 2]), name="constant")
    yield SampleInput((make_array((2, 3, 4), dtype, rng), [1, 0, 2, 1], "constant", 1.5), name="value")
    yield SampleInput((make_array((2, 3, 4), dtype, rng), [2, 1, 1, 2], "reflect"), name="reflect")
    yield SampleInput((make_array((2, 3, 4), dtype, rng), [3, 1], "replicate"), name="replicate")
    yield SampleInput((make_array((1, 3, 4), dtype, rng), [2, 3, 1, 0], "circular"), name="circular")
    yield SampleInput((make_array((0, 3, 4), dtype, rng), [1, 1], "reflect"), name="empty")


def _pad(x, pad, mode="constant", value=None):
    widths = [(0, 0)] * x.ndim
    for i in range(len(pad) // 2):
        widths[x.ndim - 1 - i] = (pad[2 * i], pad[2 * i + 1])
    npmode = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}[mode]
    if npmode == "constant":
        return np.pad(x, widths, mode="constant", constant_values=value or 0)
    return np.pad(x, widths, mode=npmode)


def one_hot_samples(dtype, rng):
    yield SampleInput((np.array([[0, 3], [2, 1]], dtype=np.int64),), name="infer")
    yield SampleInput((np.array([1, 0, 2], dtype=np.int64), 5), name="given")
    yield SampleInput((np.zeros((0,), dtype=np.int64), 3), name="empty")


def embedding_samples(dtype, rng):
    yield SampleInput((np.array([[1, 2], [4, 0]], dtype=np.int64), make_array((5, 3), dtype, rng)), name="2d")
    yield SampleInput((np.zeros((0,), dtype=np.int64), make_array((5, 3), dtype, rng)), name="empty")
    yield SampleInput((np.array(3, dtype=np.int64), make_array((5, 3), dtype, rng)), name="0-d")


def embedding_errors(rng):
    yield ErrorInput((np.array([7], np.int64), np.ones((5, 3), np.float32)), error=IndexError, match="out of range")


register(
    OpInfo("nn.functional.linear", ref=_linear, dtypes=ALL_FLOAT, samples=linear_samples, errors=linear_errors,
           tol={"float16": (1e-2, 1e-2), "bfloat16": (6e-2, 6e-2)}),
    OpInfo("nn.functional.layer_norm", ref=_layer_norm, dtypes=ALL_FLOAT, samples=layer_norm_samples,
           tol={"float16": (1e-2, 1e-2), "bfloat16": (6e-2, 6e-2)}),
    OpInfo("nn.functional.mse_loss", ref=lambda a, b, reduction="mean": _reduce((a.astype(np.float64) - b) ** 2,
                                                                                reduction, a.dtype),
           dtypes=FLOAT, samples=loss_samples),
    OpInfo("nn.functional.l1_loss", ref=lambda a, b, reduction="mean": _reduce(np.abs(a.astype(np.float64) - b),
                                                                               reduction, a.dtype),
           dtypes=FLOAT, samples=loss_samples),
    OpInfo("nn.functional.pad", ref=_pad, dtypes=ALL_FLOAT + ("int64", "uint8"), samples=pad_samples),
    OpInfo("nn.functional.one_hot", ref=lambda t, n=-1: np.eye(n if n >= 0 else int(t.max()) + 1,
                                                               dtype=np.int64)[t],
           dtypes=("int64",), samples=one_hot_samples, meta=False),  # num_classes=-1 needs the data
    OpInfo("nn.functional.embedding", ref=lambda i, w: w[i], dtypes=ALL_FLOAT + ("int64",),
           samples=embedding_samples, errors=embedding_errors),
)
