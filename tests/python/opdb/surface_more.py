"""OpInfos of the ops in src/ops/decl/surface_more.def: integer and bit-level
pointwise ops (NumPy references), the *_scatter family (a NumPy copy written
through the same view), repeat_interleave and renorm."""

import numpy as np

from .core import ALL_FLOAT, FLOAT, INT, ErrorInput, OpInfo, SampleInput, make_array, register
from .pointwise import binary_samples

SIGNED = ("int8", "int16", "int32", "int64")


def int_errors(name):
    def gen(rng):
        yield ErrorInput((np.ones(3, np.float32), np.ones(3, np.float32)), error=NotImplementedError, match=name)
        yield ErrorInput((np.ones(3, np.bool_), np.ones(3, np.bool_)), error=NotImplementedError, match=name)
        yield ErrorInput((np.ones((2, 3), np.int64), np.ones((4,), np.int64)), match="must match the size")
    return gen


def shift_samples(dtype, rng):
    bits = np.dtype(dtype).itemsize * 8
    for shape in ((), (5,), (3, 4)):
        yield SampleInput((make_array(shape, dtype, rng, -50, 50), make_array(shape, dtype, rng, 0, bits - 1)),
                          name=str(shape))
    yield SampleInput((make_array((3, 1), dtype, rng, -50, 50), make_array((4,), dtype, rng, 0, bits - 1)),
                      name="broadcast")


def np_lshift(a, b):
    return np.left_shift(a, b.astype(a.dtype))


def np_rshift(a, b):
    return np.right_shift(a, b.astype(a.dtype))


def np_nextafter(a, b):
    return np.nextafter(a, b)


def nextafter_errors(rng):
    yield ErrorInput((np.arange(3, dtype=np.int64), np.arange(3, dtype=np.int64)), error=NotImplementedError,
                     match="nextafter")


def fminmax_samples(dtype, rng):
    yield from binary_samples()(dtype, rng)
    if dtype not in FLOAT:
        return
    a = np.array([np.nan, 1.0, np.nan, -2.0, 3.0], dtype)
    b = np.array([2.0, np.nan, np.nan, -2.0, 1.0], dtype)
    yield SampleInput((a, b), name="nans")


register(
    OpInfo("gcd", ref=np.gcd, dtypes=INT, samples=binary_samples(-30, 30), method="gcd", errors=int_errors("gcd")),
    OpInfo("lcm", ref=np.lcm, dtypes=("int16", "int32", "int64"), samples=binary_samples(-30, 30), method="lcm",
           errors=int_errors("lcm")),
    OpInfo("bitwise_left_shift", ref=np_lshift, dtypes=INT, samples=shift_samples, method="bitwise_left_shift",
           errors=int_errors("bitwise_left_shift")),
    OpInfo("bitwise_right_shift", ref=np_rshift, dtypes=INT, samples=shift_samples, method="bitwise_right_shift",
           errors=int_errors("bitwise_right_shift")),
    OpInfo("fmax", ref=np.fmax, dtypes=FLOAT + ("int32", "int64"), samples=fminmax_samples, method="fmax"),
    OpInfo("fmin", ref=np.fmin, dtypes=FLOAT + ("int32", "int64"), samples=fminmax_samples, method="fmin"),
    OpInfo("nextafter", ref=np_nextafter, dtypes=FLOAT + ("float16",), samples=binary_samples(), method="nextafter",
           errors=nextafter_errors),
)


# ---- ldexp, frexp --------------------------------------------------------------------------------
def ldexp_samples(dtype, rng):
    # No 0-d exponent: the gradient harness turns 0-d integer arrays into 1-d
    # tensors, and a 1-d float32 power would then outrank a 0-d float64 self.
    for shape in ((1,), (6,), (2, 3)):
        yield SampleInput((make_array(shape, dtype, rng), np.asarray(rng.integers(-5, 6, size=shape), dtype=np.int64)),
                          name=str(shape))


def frexp_ref(x):
    m, e = np.frexp(x)
    return m, e.astype(np.int32)


def frexp_samples(dtype, rng):
    for shape in ((), (7,), (3, 4)):
        yield SampleInput((make_array(shape, dtype, rng, -100, 100),), name=str(shape))
    yield SampleInput((np.array([0.0, -0.0, 1.0, 0.75, 1e-30, -1e30], dtype),), name="edges")


def frexp_errors(rng):
    yield ErrorInput((np.arange(3, dtype=np.int64),), match="floating-point")


register(
    OpInfo("ldexp", ref=lambda a, b: (a * np.power(2.0, b)).astype(a.dtype), dtypes=FLOAT, samples=ldexp_samples,
           method="ldexp"),
    OpInfo("frexp", ref=frexp_ref, dtypes=FLOAT, samples=frexp_samples, method="frexp", errors=frexp_errors),
)


# ---- repeat_interleave, renorm -----------------------------------------------------------------------
def repeat_interleave_samples(dtype, rng):
    x = make_array((3, 4), dtype, rng)
    yield SampleInput((x, np.array([1, 0, 2], np.int64)), {"dim": 0}, name="tensor repeats dim 0")
    yield SampleInput((x, np.array([2, 1, 0, 3], np.int64)), {"dim": -1}, name="tensor repeats dim -1")
    yield SampleInput((x, np.array(2, np.int64)), name="0-d repeats flattened")
    yield SampleInput((x, np.array([3], np.int64)), {"dim": 1, "output_size": 12}, name="output_size")
    yield SampleInput((make_array((), dtype, rng), np.array(3, np.int64)), name="0-d input")


def repeat_interleave_ref(x, r, dim=None, output_size=None):
    if dim is None:
        x, dim = x.reshape(-1), 0
    return np.repeat(x, np.broadcast_to(r, (x.shape[dim],)) if r.size == 1 else r, axis=dim)


def repeat_interleave_errors(rng):
    x = np.ones((2, 3), np.float32)
    yield ErrorInput((x, np.array([1, 2, 3], np.int64)), {"dim": 0}, match="same size as input along dim")
    yield ErrorInput((x, np.array([1, -1], np.int64)), {"dim": 0}, match="can not be negative")
    yield ErrorInput((x, np.array([[1, 2]], np.int64)), {"dim": 0}, match="1D vector")
    yield ErrorInput((x, np.array([1, 1], np.int64)), {"dim": 0, "output_size": 5}, match="output_size")


def renorm_samples(dtype, rng):
    x = make_array((3, 4), dtype, rng)
    yield SampleInput((x, 2, 0, 1.5), name="p=2 dim 0")
    yield SampleInput((x, 1, 1, 2.0), name="p=1 dim 1")
    yield SampleInput((make_array((2, 3, 2), dtype, rng), 3, -1, 0.5), name="3-d p=3")
    yield SampleInput((x, 2, 0, 100.0), name="nothing clipped")


def renorm_ref(x, p, dim, maxnorm):
    axes = tuple(i for i in range(x.ndim) if i != dim % x.ndim)
    norms = np.sum(np.abs(x.astype(np.float64)) ** p, axis=axes, keepdims=True) ** (1.0 / p)
    factor = np.where(norms > maxnorm, maxnorm / (norms + 1e-7), 1.0)
    return (x * factor).astype(x.dtype)


def renorm_errors(rng):
    x = np.ones((2, 3), np.float32)
    yield ErrorInput((x, 0, 0, 1.0), match="non-positive-norm")
    yield ErrorInput((x, 2, 0, -1.0), match="maxnorm to be >= 0")
    yield ErrorInput((np.ones(3, np.float32), 2, 0, 1.0), match="at least 2 dimensions")
    yield ErrorInput((x, 2, 2, 1.0), error=IndexError, match="out of range")
    yield ErrorInput((np.ones((2, 3), np.int64), 2, 0, 1.0), error=NotImplementedError, match="renorm")


register(
    OpInfo("repeat_interleave", ref=repeat_interleave_ref, dtypes=FLOAT + ("int64",),
           samples=repeat_interleave_samples, errors=repeat_interleave_errors, method="repeat_interleave",
           meta=False),
    OpInfo("renorm", ref=renorm_ref, dtypes=FLOAT, samples=renorm_samples, errors=renorm_errors, method="renorm"),
)


# ---- *_scatter ---------------------------------------------------------------------------------------
def _written(x, idx, src):
    out = x.copy()
    out[idx] = src
    return out


def slice_scatter_ref(x, src, dim=0, start=None, end=None, step=1):
    idx = [slice(None)] * x.ndim
    idx[dim] = slice(start, end, step)
    return _written(x, tuple(idx), src)


def slice_scatter_samples(dtype, rng):
    x = make_array((4, 6), dtype, rng)
    yield SampleInput((x, make_array((4, 2), dtype, rng)), {"dim": 1, "start": 1, "end": 5, "step": 2}, name="step")
    yield SampleInput((x, make_array((2, 6), dtype, rng)), {"dim": 0, "start": -2}, name="negative start")
    yield SampleInput((x, make_array((4, 6), dtype, rng)), name="whole")
    yield SampleInput((x, make_array((0, 6), dtype, rng)), {"start": 2, "end": 2}, name="empty")


def select_scatter_ref(x, src, dim, index):
    idx = [slice(None)] * x.ndim
    idx[dim] = index
    return _written(x, tuple(idx), src)


def select_scatter_samples(dtype, rng):
    x = make_array((3, 4, 2), dtype, rng)
    yield SampleInput((x, make_array((4, 2), dtype, rng), 0, 1), name="dim 0")
    yield SampleInput((x, make_array((3, 4), dtype, rng), -1, -1), name="dim -1 index -1")


def diagonal_scatter_ref(x, src, offset=0, dim1=0, dim2=1):
    out = x.copy()
    view = np.diagonal(out, offset, dim1, dim2)
    # np.diagonal is read-only: write through the index arrays it covers.
    n = view.shape[-1]
    i = np.arange(n) + (0 if offset >= 0 else -offset)
    j = np.arange(n) + (offset if offset >= 0 else 0)
    moved = np.moveaxis(out, (dim1, dim2), (-2, -1))
    moved[..., i, j] = src
    return out


def diagonal_scatter_samples(dtype, rng):
    x = make_array((4, 5), dtype, rng)
    yield SampleInput((x, make_array((4,), dtype, rng)), name="main")
    yield SampleInput((x, make_array((3,), dtype, rng), 2), name="offset 2")
    yield SampleInput((x, make_array((3,), dtype, rng), -1), name="offset -1")
    yield SampleInput((make_array((2, 3, 3), dtype, rng), make_array((2, 3), dtype, rng), 0, 1, 2), name="batched")


def as_strided_scatter_ref(x, src, size, stride, storage_offset=0):
    out = x.copy().reshape(-1)
    idx = np.full(size, storage_offset or 0)
    for d, (n, s) in enumerate(zip(size, stride)):
        shape = [1] * len(size)
        shape[d] = n
        idx = idx + (np.arange(n) * s).reshape(shape)
    out[idx] = src
    return out.reshape(x.shape)


def as_strided_scatter_samples(dtype, rng):
    x = make_array((3, 4), dtype, rng)
    yield SampleInput((x, make_array((2, 2), dtype, rng), (2, 2), (4, 1), 1), name="block")
    yield SampleInput((x, make_array((3,), dtype, rng), (3,), (5,)), name="diagonal")


def scatter_errors(rng):
    x = np.ones((2, 3), np.float32)
    yield ErrorInput((x, np.zeros((2, 2), np.float32), 1, 0, 1), match="size equal to the slice")


def select_scatter_errors(rng):
    x = np.ones((2, 3), np.float32)
    yield ErrorInput((x, np.zeros(3, np.float32), 0, 5), error=IndexError, match="out of range")
    yield ErrorInput((x, np.zeros(2, np.float32), 0, 0), match="size equal to the slice")


register(
    OpInfo("slice_scatter", ref=slice_scatter_ref, dtypes=FLOAT + ("int64",), samples=slice_scatter_samples,
           errors=scatter_errors, method="slice_scatter"),
    OpInfo("select_scatter", ref=select_scatter_ref, dtypes=FLOAT + ("int64",), samples=select_scatter_samples,
           errors=select_scatter_errors, method="select_scatter"),
    OpInfo("diagonal_scatter", ref=diagonal_scatter_ref, dtypes=FLOAT + ("int64",),
           samples=diagonal_scatter_samples, method="diagonal_scatter"),
    OpInfo("as_strided_scatter", ref=as_strided_scatter_ref, dtypes=FLOAT, samples=as_strided_scatter_samples,
           method="as_strided_scatter"),
)
