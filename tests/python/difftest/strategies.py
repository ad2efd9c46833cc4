"""Hypothesis strategies: shapes, layouts, dtypes and values of tensor arguments."""

import numpy as np
from hypothesis import strategies as hs
from hypothesis.extra import numpy as hnp

from opdb.core import np_dtype

from .compare import Arr

LAYOUTS = ("contig", "transposed", "strided", "offset", "expanded")
FLOATS = ("float16", "bfloat16", "float32", "float64")
COMPLEX = ("complex64", "complex128")
LARGE = {"float16": 3.0e4, "bfloat16": 1.0e30, "float32": 1.0e30, "float64": 1.0e200,
         "complex64": 1.0e30, "complex128": 1.0e200}


def shapes(max_dims=5, min_side=0, max_side=4):
    # 0-d, empty dims and size-1 (broadcast) dims all come up within a few examples.
    return hnp.array_shapes(min_dims=0, max_dims=max_dims, min_side=min_side, max_side=max_side)


def values(rng, shape, dtype, low, high, specials=False, integer=False, nonzero=False):
    """Random values in [low, high] of a strata dtype name; `specials` mixes in
    NaN, +-inf, -0.0, 0.0 and large magnitudes (floats) or the type's extremes (ints)."""
    n = int(np.prod(shape)) if shape else 1
    if dtype == "bool":
        v = rng.random(n) > 0.5
    elif dtype in COMPLEX:
        # real and imaginary parts drawn apart; specials go into either component (inf + nan j, -0.0 - 0.0j...)
        v = rng.uniform(low, high, n) + 1j * rng.uniform(low, high, n)
        if integer:
            v = np.floor(v.real) + 1j * np.floor(v.imag)
        if specials and n:
            pool = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, LARGE[dtype], -LARGE[dtype], low, high])
            k = rng.integers(1, max(2, n // 3) + 1)
            at = rng.integers(0, n, k)
            re, im = v.real.copy(), v.imag.copy()
            part = rng.integers(0, 3, k)          # 0: real part, 1: imaginary part, 2: both
            vals = rng.choice(pool, (2, k))
            re[at[part != 1]] = vals[0][part != 1]
            im[at[part != 0]] = vals[1][part != 0]
            v = re + 1j * im
        v = v.astype(dtype)
    elif dtype in FLOATS:
        v = rng.uniform(low, high, n)
        if integer:
            v = np.floor(v)
        if specials and n:
            pool = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, LARGE[dtype], -LARGE[dtype], low, high])
            k = rng.integers(1, max(2, n // 3) + 1)
            v[rng.integers(0, n, k)] = rng.choice(pool, k)
        v = v.astype(np_dtype(dtype))
    else:
        info = np.iinfo(dtype)
        lo = max(int(np.floor(low)), info.min)
        hi = min(int(np.ceil(high)), info.max)
        if hi < lo:
            lo, hi = 0, max(1, hi)
        v = rng.integers(lo, hi + 1, n)
        if specials and n:
            pool = np.array([info.min, info.max, 0, -1 if info.min < 0 else 1])
            k = rng.integers(1, max(2, n // 4) + 1)
            v[rng.integers(0, n, k)] = rng.choice(pool, k)
        v = v.astype(dtype)
    if nonzero and dtype != "bool":
        v = np.where(v == 0, np.ones_like(v), v)
    return v.reshape(shape)


@hs.composite
def tensors(draw, shape, dtype, low=-3.0, high=3.0, specials=None, integer=False, nonzero=False, layouts=LAYOUTS):
    """An Arr of the given shape/dtype with a drawn layout and values."""
    seed = draw(hs.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    if specials is None:
        specials = draw(hs.booleans())
    layout = draw(hs.sampled_from(layouts))
    if layout == "expanded":
        # zero strides: the base has size 1 in a drawn subset of dims
        dims = [i for i in range(len(shape))]
        bdims = draw(hs.sets(hs.sampled_from(dims), min_size=1)) if dims else set()
        bshape = tuple(1 if i in bdims else s for i, s in enumerate(shape))
        base = values(rng, bshape, dtype, low, high, specials, integer, nonzero)
        return Arr(np.broadcast_to(base, shape).copy(), dtype, "expanded", base)
    return Arr(values(rng, shape, dtype, low, high, specials, integer, nonzero), dtype, layout)
