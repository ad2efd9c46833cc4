"""OpInfos of the deterministic factories (arange, linspace, logspace, eye, full)."""

import numpy as np

from .core import ErrorInput, OpInfo, SampleInput, np_dtype, register

NUMERIC = ("float32", "float64", "int64", "int32", "int16", "int8", "uint8")


def _st_dtype(name):
    import strata as st

    return getattr(st, name)


def arange_samples(dtype, rng):
    d = _st_dtype(dtype)
    is_float = dtype.startswith("float")
    yield SampleInput((10,), {"dtype": d}, name="end")
    yield SampleInput((2, 11), {"dtype": d}, name="start-end")
    yield SampleInput((5, 5), {"dtype": d}, name="empty")
    yield SampleInput((0, 20, 3), {"dtype": d}, name="step")
    if dtype != "uint8":
        yield SampleInput((10, -4, -3), {"dtype": d}, name="negative step")
    if is_float:
        yield SampleInput((0.0, 1.0, 0.1), {"dtype": d}, name="float step")
        yield SampleInput((-1.5, 2.25, 0.25), {"dtype": d}, name="quarter step")
        yield SampleInput((1.0, 0.0, -0.3), {"dtype": d}, name="negative float step")


def arange_ref(*args, dtype=None):
    start, end, step = (0, args[0], 1) if len(args) == 1 else (args + (1,))[:3]
    npd = np.dtype(np_dtype(str(dtype).split(".")[1]))
    if npd.kind == "f":
        # torch (and strata) accumulate in double and round once.
        n = int(np.ceil((end - start) / step))
        return (start + step * np.arange(n, dtype=np.float64)).astype(npd)
    return np.arange(int(start), int(end), int(step), dtype=np.int64).astype(npd)


def linspace_samples(dtype, rng):
    d = _st_dtype(dtype)
    for args in [(0, 1, 5), (-3, 7, 5), (2, 2, 3), (0, 10, 1), (0, 10, 0), (5, -5, 11), (0, 100, 7)]:
        if dtype == "uint8" and min(args[:2]) < 0:
            continue
        yield SampleInput(args, {"dtype": d}, name=str(args))
    if dtype.startswith("float"):
        yield SampleInput((-1.5, 2.5, 9), {"dtype": d}, name="float bounds")


def linspace_ref(start, end, steps, dtype=None):
    npd = np.dtype(np_dtype(str(dtype).split(".")[1]))
    if npd.kind == "f":
        return np.linspace(start, end, steps).astype(npd)
    # torch: integer bounds, a double step, the second half counted back from end, truncation.
    if steps == 1:
        return np.array([start], dtype=npd)
    step = (end - start) / (steps - 1) if steps > 1 else 0.0
    i = np.arange(steps)
    v = np.where(i < steps // 2, start + step * i, end - step * (steps - 1 - i))
    return np.trunc(v).astype(npd)


def logspace_samples(dtype, rng):
    d = _st_dtype(dtype)
    yield SampleInput((0, 3, 4), {"dtype": d}, name="base 10")
    yield SampleInput((-2.0, 2.0, 9, 2.0), {"dtype": d}, name="base 2")
    yield SampleInput((1, 1, 0), {"dtype": d}, name="empty")


def logspace_ref(start, end, steps, base=10.0, dtype=None):
    return np.logspace(start, end, steps, base=base).astype(np.dtype(np_dtype(str(dtype).split(".")[1])))


def eye_samples(dtype, rng):
    d = _st_dtype(dtype)
    for args in [(0,), (1,), (3,), (2, 4), (4, 2), (3, 0)]:
        yield SampleInput(args, {"dtype": d}, name=str(args))


def eye_ref(n, m=None, dtype=None):
    return np.eye(n, m, dtype=np.dtype(np_dtype(str(dtype).split(".")[1])))


def full_samples(dtype, rng):
    d = _st_dtype(dtype)
    val = True if dtype == "bool" else (2.5 if dtype.startswith("float") else 7)
    for shape in [(), (0,), (3,), (2, 3), (2, 0, 4)]:
        yield SampleInput((shape, val), {"dtype": d}, name=str(shape))


def full_ref(shape, val, dtype=None):
    return np.full(shape, val, dtype=np.dtype(np_dtype(str(dtype).split(".")[1])))


def full_inferred_samples(dtype, rng):
    for val in [3, -2.5, True, 0]:
        yield SampleInput(((2, 2), val), name=repr(val))


def full_inferred_ref(shape, val):
    dt = np.bool_ if isinstance(val, bool) else (np.int64 if isinstance(val, int) else np.float32)
    return np.full(shape, val, dtype=dt)


def arange_errors(rng):
    yield ErrorInput((0, 10, 0), match="step must be nonzero")
    yield ErrorInput((0, -10, 1), match="inconsistent with step sign")
    yield ErrorInput((0, float("inf")), match="unsupported range")
    yield ErrorInput((0.0, 10.0, -0.5), match="inconsistent with step sign")


def linspace_errors(rng):
    yield ErrorInput((0, 1, -1), match="number of steps must be non-negative")


def eye_errors(rng):
    yield ErrorInput((-1,), match="n must be greater or equal to 0")
    yield ErrorInput((2, -3), match="m must be greater or equal to 0")


def full_errors(rng):
    yield ErrorInput(((2, -1), 1.0), match="negative dimension")
    yield ErrorInput(((2,), "x"), error=TypeError, match="fill_value")


# meta=False: the harness moves tensor arguments to the meta device, and
# factories have none; test_creation.py covers device="meta" for each of them.
register(
    OpInfo("arange", ref=arange_ref, dtypes=NUMERIC + ("float16", "bfloat16"), samples=arange_samples,
           errors=arange_errors, meta=False),
    OpInfo("linspace", ref=linspace_ref, dtypes=NUMERIC, samples=linspace_samples, errors=linspace_errors,
           tol={"float32": (1e-6, 1e-6)}, meta=False),
    OpInfo("logspace", ref=logspace_ref, dtypes=("float32", "float64"), samples=logspace_samples,
           tol={"float32": (1e-5, 1e-5)}, meta=False),
    OpInfo("eye", ref=eye_ref, dtypes=NUMERIC + ("bool", "float16", "bfloat16"), samples=eye_samples,
           errors=eye_errors, meta=False),
    OpInfo("full", ref=full_ref, dtypes=NUMERIC + ("bool", "float16", "bfloat16"), samples=full_samples,
           errors=full_errors, meta=False),
    OpInfo("full", ref=full_inferred_ref, dtypes=("float32",), samples=full_inferred_samples, meta=False),
)
