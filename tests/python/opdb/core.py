"""The op database: one OpInfo per op, with its NumPy reference, dtypes, sample
inputs and error inputs. test_opdb.py generates the tests from every OpInfo
registered in the family modules (opdb/pointwise.py, opdb/reduction.py, ...).

Sample generators yield SampleInput(args, kwargs) whose args are NumPy arrays
or Python values; the harness converts arrays to strata tensors (keeping
non-contiguous layouts) and compares op(*strata_args) with ref(*numpy_args).
"""

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np

ALL_FLOAT = ("float32", "float64", "float16", "bfloat16")
FLOAT = ("float32", "float64")
INT = ("int8", "uint8", "int16", "int32", "int64")
BOOL = ("bool",)
ALL = FLOAT + ("float16", "bfloat16") + INT + BOOL
COMPLEX = ("complex64", "complex128")

# Comparison tolerances per dtype (rtol, atol).
TOL = {
    "float64": (1e-7, 1e-7),
    "float32": (1e-5, 1e-5),
    "float16": (2e-3, 2e-3),
    "bfloat16": (1.6e-2, 1.6e-2),
    "complex128": (1e-7, 1e-7),
    "complex64": (1e-5, 1e-5),
}


@dataclass
class SampleInput:
    args: tuple
    kwargs: dict = field(default_factory=dict)
    name: str = ""


@dataclass
class ErrorInput:
    args: tuple
    kwargs: dict = field(default_factory=dict)
    error: type = RuntimeError
    match: str = ""


@dataclass
class OpInfo:
    name: str                       # strata.<name> (dotted for submodules, e.g. "nn.functional.relu")
    ref: Callable                   # NumPy reference over the same args
    dtypes: tuple = FLOAT
    samples: Optional[Callable] = None   # samples(dtype: str, rng) -> iterable of SampleInput
    errors: Optional[Callable] = None    # errors(rng) -> iterable of ErrorInput
    tol: dict = field(default_factory=dict)   # per-dtype overrides of TOL
    method: Optional[str] = None    # also test tensor.<method>(...) when set
    meta: bool = True               # run the samples on the meta device and check shapes/dtypes
    compare_dtype: bool = True      # the result dtype must equal the reference's (after mapping)
    skip: tuple = ()                # (dtype, reason) pairs known not to work yet


REGISTRY: list = []


def register(*infos):
    REGISTRY.extend(infos)
    return infos


# ---- helpers to build sample arrays ------------------------------------------

def np_dtype(name):
    if name == "bfloat16":
        return np.float32  # NumPy has no bfloat16: references run in float32
    return np.dtype(name)


def make_array(shape, dtype, rng, low=-3.0, high=3.0, noncontig=False):
    """Random array of a strata dtype name; `noncontig` gives a strided view."""
    if dtype == "bool":
        a = rng.random(shape) > 0.5
    elif dtype in INT:
        lo = 0 if dtype == "uint8" else int(low)
        a = rng.integers(lo, max(int(high), lo + 1) + 1, size=shape).astype(dtype)
    elif dtype in COMPLEX:
        # Real and imaginary parts each uniform in [low, high).
        a = (rng.uniform(low, high, size=shape) + 1j * rng.uniform(low, high, size=shape)).astype(dtype)
    else:
        a = rng.uniform(low, high, size=shape).astype(np_dtype(dtype))
    a = np.asarray(a)
    if noncontig and len(shape) >= 1:
        big = np.repeat(a, 2, axis=-1)
        a = big[..., ::2]
        assert not a.flags["C_CONTIGUOUS"] or a.size <= 1
    return a


def standard_shapes():
    """Shapes every elementwise op should handle: 0-d, empty, 1-d, 2-d, 3-d."""
    return [(), (0,), (5,), (3, 4), (2, 0, 3), (2, 3, 4)]
