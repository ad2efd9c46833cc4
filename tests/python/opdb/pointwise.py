"""OpInfos of the elementwise ops."""

import numpy as np

from .core import ALL, ALL_FLOAT, COMPLEX, FLOAT, INT, ErrorInput, OpInfo, SampleInput, make_array, register, standard_shapes


def unary_samples(low=-3.0, high=3.0, extremes=True):
    def gen(dtype, rng):
        for shape in standard_shapes():
            yield SampleInput((make_array(shape, dtype, rng, low, high),), name=str(shape))
        yield SampleInput((make_array((4, 6), dtype, rng, low, high, noncontig=True),), name="noncontig")
        if extremes and dtype in ("float32", "float64"):
            yield SampleInput((np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e30], dtype=dtype),), name="extremes")
    return gen


def binary_samples(low=-3.0, high=3.0, nonzero_rhs=False):
    def gen(dtype, rng):
        def rhs(shape):
            b = make_array(shape, dtype, rng, low, high)
            if nonzero_rhs:
                b = np.where(b == 0, np.ones_like(b), b)
            return b
        for shape in standard_shapes():
            yield SampleInput((make_array(shape, dtype, rng, low, high), rhs(shape)), name=str(shape))
        yield SampleInput((make_array((3, 1, 4), dtype, rng, low, high), rhs((2, 1))), name="broadcast")
        yield SampleInput((make_array((4, 6), dtype, rng, low, high, noncontig=True), rhs((4, 6))), name="noncontig")
        yield SampleInput((make_array((2, 3), dtype, rng, low, high), rhs(())), name="0-d rhs")
    return gen


def complex_errors(op, binary=False):
    """Ops torch does not define for complex tensors raise NotImplementedError naming the op and dtype."""
    def gen(rng):
        z = (np.ones(3) + 1j).astype(np.complex64)
        yield ErrorInput((z, z) if binary else (z,), error=NotImplementedError, match=f"{op}.*ComplexFloat")
    return gen


def shape_mismatch_errors(rng):
    yield ErrorInput((np.ones((2, 3), np.float32), np.ones((4,), np.float32)), match="must match the size")


FLOAT_UNARY = {
    "exp": np.exp, "exp2": np.exp2, "expm1": np.expm1, "sin": np.sin, "cos": np.cos, "tan": np.tan,
    "tanh": np.tanh, "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh,
    "reciprocal": lambda x: np.divide(1, x),
}
POSITIVE_UNARY = {"log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p, "sqrt": np.sqrt,
                  "rsqrt": lambda x: 1 / np.sqrt(x)}

# complex64 references run in NumPy's complex64, whose functions round differently.
CTOL = {"complex64": (1e-4, 1e-5), "complex128": (1e-10, 1e-12)}
for name, ref in FLOAT_UNARY.items():
    register(OpInfo(name, ref=ref, dtypes=ALL_FLOAT + COMPLEX, samples=unary_samples(), method=name, errors=None,
                    tol={"float16": (4e-3, 4e-3), "bfloat16": (2e-2, 2e-2), **CTOL}))
for name, ref in POSITIVE_UNARY.items():
    register(OpInfo(name, ref=ref, dtypes=ALL_FLOAT + COMPLEX, samples=unary_samples(0.1, 5.0), method=name,
                    tol={"float16": (4e-3, 4e-3), "bfloat16": (2e-2, 2e-2), **CTOL}))

import math  # noqa: E402

register(
    OpInfo("erf", ref=np.vectorize(math.erf, otypes=[np.float64]), dtypes=FLOAT, samples=unary_samples(extremes=False),
           compare_dtype=False),
    OpInfo("neg", ref=np.negative, dtypes=FLOAT + ("int32", "int64", "int8") + COMPLEX, samples=unary_samples(), method="neg"),
    OpInfo("abs", ref=np.abs, dtypes=FLOAT + ("int32", "int64", "int16") + COMPLEX, samples=unary_samples(), method="abs"),
    # torch's sign(NaN) is 0 (NumPy's is NaN).
    OpInfo("sign", ref=lambda x: np.nan_to_num(np.sign(x), nan=0.0).astype(x.dtype), dtypes=FLOAT + ("int64",),
           samples=unary_samples()),
    OpInfo("floor", ref=np.floor, dtypes=FLOAT, samples=unary_samples(), errors=complex_errors("floor")),
    OpInfo("ceil", ref=np.ceil, dtypes=FLOAT, samples=unary_samples()),
    OpInfo("trunc", ref=np.trunc, dtypes=FLOAT, samples=unary_samples()),
    OpInfo("round", ref=np.round, dtypes=FLOAT, samples=unary_samples()),
    OpInfo("isnan", ref=np.isnan, dtypes=FLOAT + ("int64",) + COMPLEX, samples=unary_samples()),
    OpInfo("isinf", ref=np.isinf, dtypes=FLOAT + COMPLEX, samples=unary_samples()),
    OpInfo("isfinite", ref=np.isfinite, dtypes=FLOAT + COMPLEX, samples=unary_samples()),
    OpInfo("logical_not", ref=np.logical_not, dtypes=FLOAT + ("bool", "int32") + COMPLEX, samples=unary_samples()),
    OpInfo("bitwise_not", ref=np.invert, dtypes=("bool", "int32", "int64", "uint8"), samples=unary_samples()),
    OpInfo("add", ref=np.add, dtypes=ALL_FLOAT + INT + COMPLEX, samples=binary_samples(), errors=shape_mismatch_errors,
           method="add"),
    OpInfo("sub", ref=np.subtract, dtypes=FLOAT + ("int32", "int64") + COMPLEX, samples=binary_samples(), method="sub"),
    OpInfo("mul", ref=np.multiply, dtypes=ALL_FLOAT + INT + ("bool",) + COMPLEX, samples=binary_samples(), method="mul"),
    OpInfo("div", ref=lambda a, b: np.true_divide(a, b).astype(np.result_type(a.dtype, np.float32) if a.dtype.kind != "f" else a.dtype),
           dtypes=FLOAT + COMPLEX, samples=binary_samples(nonzero_rhs=True), method="div", tol=CTOL),
    OpInfo("maximum", ref=np.maximum, dtypes=FLOAT + ("int32", "int64"), samples=binary_samples(),
           errors=complex_errors("maximum", True)),
    OpInfo("minimum", ref=np.minimum, dtypes=FLOAT + ("int32", "int64"), samples=binary_samples()),
    OpInfo("remainder", ref=np.remainder, dtypes=FLOAT + ("int32", "int64"), samples=binary_samples(nonzero_rhs=True),
           errors=complex_errors("remainder", True)),
    OpInfo("fmod", ref=np.fmod, dtypes=FLOAT + ("int32", "int64"), samples=binary_samples(nonzero_rhs=True)),
    OpInfo("floor_divide", ref=np.floor_divide, dtypes=FLOAT + ("int32", "int64"),
           samples=binary_samples(nonzero_rhs=True)),
    OpInfo("pow", ref=np.power, dtypes=FLOAT + COMPLEX, samples=binary_samples(0.5, 2.0), tol=CTOL),
    OpInfo("atan2", ref=np.arctan2, dtypes=FLOAT, samples=binary_samples(), errors=complex_errors("atan2", True)),
    OpInfo("eq", ref=np.equal, dtypes=FLOAT + ("int64", "bool") + COMPLEX, samples=binary_samples(-2, 2)),
    OpInfo("ne", ref=np.not_equal, dtypes=FLOAT + ("int64",) + COMPLEX, samples=binary_samples(-2, 2)),
    OpInfo("lt", ref=np.less, dtypes=FLOAT + ("int64",), samples=binary_samples(), errors=complex_errors("lt", True)),
    OpInfo("le", ref=np.less_equal, dtypes=FLOAT + ("int64",), samples=binary_samples()),
    OpInfo("gt", ref=np.greater, dtypes=FLOAT + ("int64",), samples=binary_samples()),
    OpInfo("ge", ref=np.greater_equal, dtypes=FLOAT + ("int64",), samples=binary_samples()),
    OpInfo("logical_and", ref=np.logical_and, dtypes=("bool", "float32", "int64"), samples=binary_samples()),
    OpInfo("logical_or", ref=np.logical_or, dtypes=("bool", "float32"), samples=binary_samples()),
    OpInfo("logical_xor", ref=np.logical_xor, dtypes=("bool", "int32"), samples=binary_samples()),
    OpInfo("bitwise_and", ref=np.bitwise_and, dtypes=("bool", "int32", "int64", "uint8"), samples=binary_samples()),
    OpInfo("bitwise_or", ref=np.bitwise_or, dtypes=("bool", "int64"), samples=binary_samples()),
    OpInfo("bitwise_xor", ref=np.bitwise_xor, dtypes=("bool", "int64"), samples=binary_samples()),
)
