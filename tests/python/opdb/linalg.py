"""OpInfos of the matrix products (matmul, mm, bmm, mv, dot, vdot, outer,
addmm, addmv, baddbmm, addbmm)."""

import numpy as np

from .core import COMPLEX, FLOAT, ErrorInput, OpInfo, SampleInput, make_array, register

LINALG_DTYPES = FLOAT + ("float16", "bfloat16", "int32", "int64", "int8")
# Reduced floats are computed in float32 and rounded once; the reference is exact.
LINALG_TOL = {"float32": (1e-5, 1e-4), "float16": (4e-3, 4e-3), "bfloat16": (2e-2, 2e-2), "complex64": (1e-5, 1e-4),
              "complex128": (1e-10, 1e-10)}


def exact(fn):
    """Reference computed in float64 (ints: in their own type) and cast back."""
    def ref(*args, **kwargs):
        dt = next(a.dtype for a in args if isinstance(a, np.ndarray))
        if dt.kind in "fc":
            wide = np.float64 if dt.kind == "f" else np.complex128
            args = tuple(a.astype(wide) if isinstance(a, np.ndarray) else a for a in args)
            return np.asarray(fn(*args, **kwargs)).astype(dt)
        return np.asarray(fn(*args, **kwargs)).astype(dt)
    return ref


def arr(shape, dtype, rng, **kw):
    return make_array(shape, dtype, rng, **kw)


def transposed(shape, dtype, rng):
    """A matrix of `shape` stored column-major (a transposed view)."""
    return arr(shape[::-1], dtype, rng).T


def matmul_samples(dtype, rng):
    pairs = [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)), ((2, 2, 3), (3, 4)),
             ((3,), (2, 3, 4)), ((2, 3, 4), (4,)), ((2, 1, 2, 3), (5, 3, 4)), ((4, 3), (2, 3, 5)),
             ((0, 3), (3, 4)), ((2, 0), (0, 3)), ((2, 3), (3, 0)), ((2, 0, 3), (3, 2)), ((0,), (0,))]
    for sa, sb in pairs:
        yield SampleInput((arr(sa, dtype, rng), arr(sb, dtype, rng)), name=f"{sa}@{sb}")
    yield SampleInput((transposed((3, 4), dtype, rng), transposed((4, 5), dtype, rng)), name="transposed")
    yield SampleInput((arr((3, 4), dtype, rng, noncontig=True), arr((4, 2), dtype, rng, noncontig=True)),
                      name="noncontig")
    a = arr((2, 5, 4), dtype, rng).transpose(0, 2, 1)  # batch whose matrices are column-major
    yield SampleInput((a, arr((5, 3), dtype, rng)), name="batched-transposed-fold")
    yield SampleInput((arr((3, 2, 4), dtype, rng).transpose(1, 0, 2), arr((4, 3), dtype, rng)), name="unfoldable")


def mm_samples(dtype, rng):
    for sa, sb in [((2, 3), (3, 4)), ((1, 5), (5, 1)), ((0, 3), (3, 2)), ((3, 0), (0, 2)), ((4, 3), (3, 0))]:
        yield SampleInput((arr(sa, dtype, rng), arr(sb, dtype, rng)), name=f"{sa}@{sb}")
    yield SampleInput((transposed((3, 4), dtype, rng), arr((4, 2), dtype, rng)), name="a transposed")
    yield SampleInput((arr((3, 4), dtype, rng), transposed((4, 2), dtype, rng)), name="b transposed")
    yield SampleInput((arr((3, 4), dtype, rng, noncontig=True), arr((4, 6), dtype, rng, noncontig=True)),
                      name="noncontig")


def bmm_samples(dtype, rng):
    for sa, sb in [((2, 3, 4), (2, 4, 5)), ((0, 3, 4), (0, 4, 2)), ((2, 3, 0), (2, 0, 4)), ((3, 1, 2), (3, 2, 1))]:
        yield SampleInput((arr(sa, dtype, rng), arr(sb, dtype, rng)), name=f"{sa}@{sb}")
    yield SampleInput((arr((2, 4, 3), dtype, rng).transpose(0, 2, 1), arr((2, 4, 5), dtype, rng, noncontig=True)),
                      name="strided")


def mv_samples(dtype, rng):
    for sa, sb in [((2, 3), (3,)), ((0, 3), (3,)), ((3, 0), (0,)), ((1, 1), (1,))]:
        yield SampleInput((arr(sa, dtype, rng), arr(sb, dtype, rng)), name=f"{sa}@{sb}")
    yield SampleInput((transposed((4, 3), dtype, rng), arr((6,), dtype, rng, noncontig=True)[:3]), name="strided")


def dot_samples(dtype, rng):
    for n in (0, 1, 5, 17):
        yield SampleInput((arr((n,), dtype, rng), arr((n,), dtype, rng)), name=str(n))
    yield SampleInput((arr((5,), dtype, rng, noncontig=True), arr((5,), dtype, rng)), name="noncontig")


def outer_samples(dtype, rng):
    for n, m in ((3, 4), (0, 2), (1, 1)):
        yield SampleInput((arr((n,), dtype, rng), arr((m,), dtype, rng)), name=f"{n}x{m}")
    yield SampleInput((arr((3,), dtype, rng, noncontig=True), arr((2,), dtype, rng)), name="noncontig")


def coef(dtype, beta, alpha):
    """beta/alpha keyword values valid for dtype (integers need integral ones)."""
    if dtype.startswith("int"):
        return {"beta": int(round(beta)) or 2, "alpha": int(round(alpha)) or 3}
    return {"beta": beta, "alpha": alpha}


def addmm_samples(dtype, rng):
    yield SampleInput((arr((2, 4), dtype, rng), arr((2, 3), dtype, rng), arr((3, 4), dtype, rng)), name="plain")
    yield SampleInput((arr((4,), dtype, rng), arr((2, 3), dtype, rng), arr((3, 4), dtype, rng)),
                      coef(dtype, 0.5, 2.0), name="broadcast self")
    yield SampleInput((arr((2, 4), dtype, rng), arr((2, 0), dtype, rng), arr((0, 4), dtype, rng)),
                      coef(dtype, 2.0, 1.0), name="K=0")
    yield SampleInput((arr((1, 1), dtype, rng), transposed((2, 3), dtype, rng), arr((3, 4), dtype, rng)),
                      coef(dtype, 1.5, -1.0), name="transposed")


def addmv_samples(dtype, rng):
    yield SampleInput((arr((2,), dtype, rng), arr((2, 3), dtype, rng), arr((3,), dtype, rng)), name="plain")
    yield SampleInput((arr((1,), dtype, rng), arr((2, 3), dtype, rng), arr((3,), dtype, rng)),
                      coef(dtype, 2.0, 0.5), name="broadcast self")
    yield SampleInput((arr((2,), dtype, rng), arr((2, 0), dtype, rng), arr((0,), dtype, rng)), name="K=0")


def baddbmm_samples(dtype, rng):
    yield SampleInput((arr((2, 3, 4), dtype, rng), arr((2, 3, 5), dtype, rng), arr((2, 5, 4), dtype, rng)),
                      name="plain")
    yield SampleInput((arr((3, 4), dtype, rng), arr((2, 3, 5), dtype, rng), arr((2, 5, 4), dtype, rng)),
                      coef(dtype, 0.5, 2.0), name="broadcast self")
    yield SampleInput((arr((0, 3, 4), dtype, rng), arr((0, 3, 5), dtype, rng), arr((0, 5, 4), dtype, rng)),
                      name="empty batch")


def addbmm_samples(dtype, rng):
    yield SampleInput((arr((3, 4), dtype, rng), arr((2, 3, 5), dtype, rng), arr((2, 5, 4), dtype, rng)),
                      name="plain")
    yield SampleInput((arr((4,), dtype, rng), arr((3, 3, 2), dtype, rng), arr((3, 2, 4), dtype, rng)),
                      coef(dtype, 2.0, 0.5), name="broadcast self")
    yield SampleInput((arr((3, 4), dtype, rng), arr((0, 3, 5), dtype, rng), arr((0, 5, 4), dtype, rng)),
                      coef(dtype, 2.0, 1.0), name="empty batch")


def f32(*shape):
    return np.ones(shape, np.float32)


def matmul_errors(rng):
    yield ErrorInput((f32(2, 3), f32(4, 5)), match=r"shapes cannot be multiplied \(2x3 and 4x5\)")
    yield ErrorInput((f32(2, 3, 4), f32(5, 4, 2)), match="must match the size")
    yield ErrorInput((f32(), f32(3)), match="at least 1D")
    yield ErrorInput((f32(2, 3), np.ones((3, 5), np.float64)), match="same dtype")
    yield ErrorInput((f32(3), f32(4)), match="inconsistent tensor size")
    yield ErrorInput((np.ones((2, 2), bool), np.ones((2, 2), bool)), error=NotImplementedError, match="Bool")


def mm_errors(rng):
    yield ErrorInput((f32(2, 3), f32(4, 5)), match=r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)")
    yield ErrorInput((f32(2, 3), f32(3)), match="mat2 must be a matrix")
    yield ErrorInput((f32(2, 3), np.ones((3, 2), np.float64)), match="same dtype")


def bmm_errors(rng):
    yield ErrorInput((f32(2, 3), f32(2, 3)), match="batch1 must be a 3D tensor")
    yield ErrorInput((f32(2, 2, 3), f32(3, 3, 4)), match=r"Expected size for first two dimensions of batch2")


def addmm_errors(rng):
    yield ErrorInput((f32(3), f32(2, 3), f32(3, 4)), match="cannot be broadcast")
    yield ErrorInput((f32(2, 4), f32(2, 3), f32(2, 4)), match="shapes cannot be multiplied")
    yield ErrorInput((np.ones((2, 4)), f32(2, 3), f32(3, 4)), match="same dtype")


def mv_errors(rng):
    yield ErrorInput((f32(2, 3), f32(4)), match=r"size mismatch.*mat \(2x3\), vec \(4\)")
    yield ErrorInput((f32(2, 3), f32(3, 1)), match="matrix @ vector expected")


def dot_errors(rng):
    yield ErrorInput((f32(3), f32(4)), match="inconsistent tensor size")
    yield ErrorInput((f32(3, 1), f32(3)), match="1D tensors expected")
    yield ErrorInput((f32(3), np.ones(3)), match="same dtype")


def outer_errors(rng):
    yield ErrorInput((f32(3), f32(2, 2)), match="Expected 1-D argument vec2")


def addmm_ref(s, a, b, beta=1, alpha=1):
    return beta * s + alpha * (a @ b)


def addbmm_ref(s, a, b, beta=1, alpha=1):
    return beta * s + alpha * np.matmul(a, b).sum(axis=0)


register(
    OpInfo("matmul", ref=exact(np.matmul), dtypes=LINALG_DTYPES + COMPLEX, samples=matmul_samples, errors=matmul_errors,
           tol=LINALG_TOL, method="matmul"),
    OpInfo("mm", ref=exact(np.matmul), dtypes=LINALG_DTYPES + COMPLEX, samples=mm_samples, errors=mm_errors, tol=LINALG_TOL,
           method="mm"),
    OpInfo("bmm", ref=exact(np.matmul), dtypes=LINALG_DTYPES + COMPLEX, samples=bmm_samples, errors=bmm_errors,
           tol=LINALG_TOL, method="bmm"),
    OpInfo("mv", ref=exact(np.matmul), dtypes=LINALG_DTYPES, samples=mv_samples, errors=mv_errors, tol=LINALG_TOL,
           method="mv"),
    OpInfo("dot", ref=exact(np.dot), dtypes=LINALG_DTYPES + COMPLEX, samples=dot_samples, errors=dot_errors, tol=LINALG_TOL,
           method="dot"),
    OpInfo("vdot", ref=exact(np.vdot), dtypes=FLOAT + ("int64",) + COMPLEX, samples=dot_samples, tol=LINALG_TOL),
    OpInfo("outer", ref=exact(np.outer), dtypes=LINALG_DTYPES, samples=outer_samples, errors=outer_errors,
           tol=LINALG_TOL, method="outer"),
    OpInfo("addmm", ref=exact(addmm_ref), dtypes=LINALG_DTYPES, samples=addmm_samples, errors=addmm_errors,
           tol=LINALG_TOL, method="addmm"),
    OpInfo("addmv", ref=exact(addmm_ref), dtypes=LINALG_DTYPES, samples=addmv_samples, tol=LINALG_TOL,
           method="addmv"),
    OpInfo("baddbmm", ref=exact(addmm_ref), dtypes=LINALG_DTYPES, samples=baddbmm_samples, tol=LINALG_TOL,
           method="baddbmm"),
    OpInfo("addbmm", ref=exact(addbmm_ref), dtypes=LINALG_DTYPES, samples=addbmm_samples, tol=LINALG_TOL,
           method="addbmm"),
)
