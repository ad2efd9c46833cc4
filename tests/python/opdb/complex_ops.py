"""OpInfos of the complex-number ops (real, imag, view_as_real, view_as_complex,
conj, conj_physical, angle, sgn, complex, polar), and error inputs of the ops
that do not take complex tensors (torch raises for them too)."""

import numpy as np

from .core import COMPLEX, FLOAT, ErrorInput, OpInfo, SampleInput, make_array, register, standard_shapes


def complex_unary(dtype, rng):
    for shape in standard_shapes():
        yield SampleInput((make_array(shape, dtype, rng),), name=str(shape))
    yield SampleInput((make_array((4, 6), dtype, rng, noncontig=True),), name="noncontig")


def nonempty_complex(dtype, rng):
    for shape in [(), (5,), (3, 4), (2, 3, 4)]:
        yield SampleInput((make_array(shape, dtype, rng),), name=str(shape))
    yield SampleInput((make_array((4, 6), dtype, rng, noncontig=True),), name="noncontig")


def pairs_last(dtype, rng):
    for shape in [(2,), (3, 2), (2, 4, 2)]:
        yield SampleInput((make_array(shape, dtype, rng),), name=str(shape))


def two_real(dtype, rng):
    for sa, sb in [((3,), (3,)), ((2, 3), (3,)), ((2, 1), (1, 4)), ((), ()), ((0,), (0,))]:
        yield SampleInput((make_array(sa, dtype, rng), make_array(sb, dtype, rng)), name=f"{sa},{sb}")


def unsupported_complex_errors(op_match):
    def gen(rng):
        z = (np.ones(3) + 1j).astype(np.complex64)
        yield ErrorInput((z, z), error=NotImplementedError, match=op_match)
    return gen


def unsupported_unary_errors(op_match, error=NotImplementedError):
    def gen(rng):
        yield ErrorInput(((np.ones(3) + 1j).astype(np.complex64),), error=error, match=op_match)
    return gen


def view_as_complex_errors(rng):
    yield ErrorInput((np.ones((2, 3), np.float32),), match="last dimension of size 2")
    yield ErrorInput((np.ones((2, 2), np.int32),), match="only supported for float and double")
    yield ErrorInput((np.ones((4, 2), np.float32)[::2].T.copy().T,), match="last dimension with stride 1|size 2")


def complex_errors(rng):
    yield ErrorInput((np.ones(2, np.float32), np.ones(2, np.float64)), match="Expected both inputs to be Float or Double")
    yield ErrorInput((np.ones(2, np.int64), np.ones(2, np.int64)), match="Expected both inputs to be Float or Double")
    yield ErrorInput((np.ones(2, np.float32), np.ones(3, np.float32)), match="must match the size")


register(
    OpInfo("real", ref=np.real, dtypes=COMPLEX + FLOAT, samples=complex_unary),
    OpInfo("imag", ref=np.imag, dtypes=COMPLEX, samples=complex_unary,
           errors=lambda rng: iter([ErrorInput((np.ones(2, np.float32),), match="imag is not implemented")])),
    OpInfo("view_as_real", ref=lambda z: np.stack([z.real, z.imag], -1), dtypes=COMPLEX, samples=complex_unary,
           errors=lambda rng: iter([ErrorInput((np.ones(2, np.float32),), match="only supported for complex")])),
    OpInfo("view_as_complex", ref=lambda x: x[..., 0] + 1j * x[..., 1], dtypes=FLOAT, samples=pairs_last,
           errors=view_as_complex_errors),
    OpInfo("conj", ref=np.conj, dtypes=COMPLEX + FLOAT, samples=complex_unary, method="conj"),
    OpInfo("conj_physical", ref=np.conj, dtypes=COMPLEX + FLOAT, samples=complex_unary, method="conj_physical"),
    OpInfo("resolve_conj", ref=lambda z: z, dtypes=COMPLEX, samples=complex_unary),
    OpInfo("angle", ref=np.angle, dtypes=COMPLEX + FLOAT, samples=complex_unary, method="angle",
           tol={"complex64": (1e-5, 1e-5)}),
    OpInfo("sgn", ref=lambda z: np.where(z == 0, 0, z / np.where(z == 0, 1, np.abs(z))).astype(z.dtype),
           dtypes=COMPLEX + FLOAT, samples=nonempty_complex, method="sgn"),
    OpInfo("complex", ref=lambda a, b: a + 1j * b, dtypes=FLOAT, samples=two_real, errors=complex_errors),
    OpInfo("polar", ref=lambda r, t: r * np.cos(t) + 1j * r * np.sin(t), dtypes=FLOAT, samples=two_real,
           tol={"float32": (1e-5, 1e-5)}),
)
