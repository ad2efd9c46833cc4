"""OpInfos of the ops in src/ops/decl/special.def (torch.special's Bessel, Airy,
error-function, incomplete-gamma, zeta and polynomial functions). SciPy is not a
dependency, so the reference is torch.special itself (tests/python/test_special.py
also checks the hard ones against mpmath); torch's Bessel and Airy fits are good to
about 1e-7 absolute, hence their float64 tolerance."""

import numpy as np

from .core import ErrorInput, OpInfo, SampleInput, make_array, register, standard_shapes

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


def tref(name):
    fn = getattr(torch.special, name)

    def ref(*args):
        conv = [torch.from_numpy(np.array(a, copy=True)) if isinstance(a, np.ndarray) else a for a in args]
        return fn(*conv).numpy()
    return ref


def unary(low, high):
    def gen(dtype, rng):
        for shape in standard_shapes():
            yield SampleInput((make_array(shape, dtype, rng, low, high),), name=str(shape))
        yield SampleInput((make_array((4, 6), dtype, rng, low, high, noncontig=True),), name="noncontig")
        yield SampleInput((np.array([np.nan, 0.0, -0.0, low, high], dtype=dtype),), name="edges")
    return gen


def binary(lo_a, hi_a, lo_b, hi_b, integer_b=False):
    def gen(dtype, rng):
        def b(shape):
            v = make_array(shape, dtype, rng, lo_b, hi_b)
            return np.floor(v) if integer_b else v
        for shape in standard_shapes():
            yield SampleInput((make_array(shape, dtype, rng, lo_a, hi_a), b(shape)), name=str(shape))
        yield SampleInput((make_array((3, 1, 4), dtype, rng, lo_a, hi_a), b((2, 1))), name="broadcast")
        yield SampleInput((make_array((4, 6), dtype, rng, lo_a, hi_a, noncontig=True), b((4, 6))), name="noncontig")
    return gen


def shape_errors(name, binary_op=False):
    def gen(rng):
        if binary_op:
            yield ErrorInput((np.ones((2, 3), np.float32), np.ones((4,), np.float32)), match="shape|broadcast")
        else:
            yield ErrorInput((np.ones(3, np.float32),), {"out": np.zeros(3, np.int64)}, match="out|dtype|cast")
    return gen


LOOSE = {"float64": (1e-6, 1e-6), "float32": (2e-5, 2e-5)}
UNARY = [
    ("airy_ai", -10, 10, LOOSE), ("bessel_j0", -30, 30, LOOSE), ("bessel_j1", -30, 30, LOOSE),
    ("bessel_y0", 0.1, 30, LOOSE), ("bessel_y1", 0.1, 30, LOOSE), ("modified_bessel_i0", -20, 20, {}),
    ("modified_bessel_i1", -20, 20, {}), ("modified_bessel_k0", 0.01, 40, {}), ("modified_bessel_k1", 0.01, 40, {}),
    ("scaled_modified_bessel_k0", 0.01, 40, {}), ("scaled_modified_bessel_k1", 0.01, 40, {}),
    ("spherical_bessel_j0", -20, 20, {}), ("entr", 0.01, 5, {}), ("erfcx", -3, 20, {}), ("i0e", -20, 20, {}),
    ("i1e", -20, 20, {}), ("log_ndtr", -20, 5, {}), ("ndtr", -5, 5, {}), ("ndtri", 0.01, 0.99, {}),
]
POLY = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
        "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
        "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l",
        "legendre_polynomial_p"]

if torch is not None:
    register(*[OpInfo(f"special.{n}", ref=tref(n), samples=unary(lo, hi), errors=shape_errors(n), tol=tol)
               for n, lo, hi, tol in UNARY])
    register(*[OpInfo(f"special.{n}", ref=tref(n), samples=binary(0.0, 1.0, 0, 12, integer_b=True),
                      errors=shape_errors(n, True), tol={"float32": (1e-4, 1e-4), "float64": (1e-10, 1e-10)})
               for n in POLY])
    register(
        OpInfo("special.xlog1py", ref=tref("xlog1py"), samples=binary(-3, 3, -0.9, 5), errors=shape_errors("x", True)),
        OpInfo("special.zeta", ref=tref("zeta"), samples=binary(1.5, 6, 0.2, 5), errors=shape_errors("z", True)),
        # torch approximates large shapes (a > 20) to ~1e-9; the samples stay below.
        OpInfo("special.gammainc", ref=tref("gammainc"), samples=binary(0.2, 6, 0.1, 8), method="igamma",
               errors=shape_errors("g", True)),
        OpInfo("special.gammaincc", ref=tref("gammaincc"), samples=binary(0.2, 6, 0.1, 8), method="igammac",
               errors=shape_errors("g", True)),
    )
