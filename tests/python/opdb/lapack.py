"""OpInfos of torch.linalg over LAPACK (decl/lapack.def and the compositions in strata/linalg.py):
references are NumPy/SciPy in float64, samples cover 2-D, batched, empty (0x0 and batch 0) and
non-contiguous inputs. Decompositions whose vectors are defined only up to sign (svd, eigh) are checked
here through their values (svdvals, eigvalsh) and in test_linalg_lapack.py through invariant products."""

import numpy as np
import scipy.linalg

from .core import COMPLEX, FLOAT, ErrorInput, OpInfo, SampleInput, make_array, register

TOL = {"float32": (2e-4, 2e-4), "float64": (1e-7, 1e-7)}
TOL_C = {**TOL, "complex64": (2e-4, 2e-4), "complex128": (1e-7, 1e-7)}


def f64(fn):
    """Reference computed in float64 / complex128 and cast back to the input's precision (tuples
    element-wise; a real result of complex input, like slogdet's logabsdet, stays real)."""
    def ref(*args, **kwargs):
        dt = next(a.dtype for a in args if isinstance(a, np.ndarray) and a.dtype.kind in "fc")
        wide = lambda a: a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)
        args = tuple(wide(a) if isinstance(a, np.ndarray) and a.dtype.kind in "fc" else a for a in args)
        real_dt = np.float32 if dt in (np.float32, np.complex64) else np.float64
        cplx_dt = np.complex64 if real_dt == np.float32 else np.complex128

        def back(x):
            x = np.asarray(x)
            return x.astype(real_dt) if x.dtype.kind == "f" else x.astype(cplx_dt) if x.dtype.kind == "c" else x
        r = fn(*args, **kwargs)
        return tuple(back(x) for x in r) if isinstance(r, tuple) else back(r)
    return ref


def arr(shape, dtype, rng, noncontig=False):
    return make_array(shape, dtype, rng, low=-1.0, high=1.0, noncontig=noncontig)


def wellcond(shape, dtype, rng, noncontig=False):
    """Square matrices with a dominant diagonal: condition numbers of a few units."""
    a = arr(shape, dtype, rng, noncontig)
    n = shape[-1]
    return (a + 2.0 * np.eye(n, dtype=a.dtype)) if n else a


def spd(shape, dtype, rng):
    """Symmetric (Hermitian for complex dtypes) positive-definite matrices."""
    a = arr(shape, dtype, rng)
    a = a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)
    n = shape[-1]
    s = a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n)
    return s.astype(dtype)


def square_samples(make):
    def samples(dtype, rng):
        for shape in [(3, 3), (1, 1), (2, 4, 4), (2, 1, 3, 3), (0, 0), (0, 3, 3), (2, 0, 0)]:
            yield SampleInput((make(shape, dtype, rng),), name=str(shape))
        yield SampleInput((make((4, 4), dtype, rng).T,), name="transposed")
        yield SampleInput((make((5, 5), dtype, rng)[::2, ::2],), name="strided")
    return samples


def general_samples(dtype, rng):
    for shape in [(3, 3), (4, 2), (2, 4), (2, 3, 2), (3, 0), (0, 3), (0, 2, 2)]:
        yield SampleInput((arr(shape, dtype, rng),), name=str(shape))
    yield SampleInput((arr((4, 3), dtype, rng).T,), name="transposed")
    yield SampleInput((arr((3, 4), dtype, rng, noncontig=True),), name="noncontig")


def f32(*shape):
    return np.ones(shape, np.float32)


def square_errors(op_name):
    def errors(rng):
        yield ErrorInput((f32(2, 3),), match=f"{op_name}: A must be batches of square matrices, but they are 2 by 3")
        yield ErrorInput((f32(3),), match="must have at least 2 dimensions")
        yield ErrorInput((np.ones((2, 2), np.int64),), match=r"Expected a floating point tensor.*int64")
    return errors


# ---- solve / inv / det ------------------------------------------------------------------

def solve_ref(A, B, left=True):
    if not left:
        return np.swapaxes(np.linalg.solve(np.swapaxes(A, -1, -2), np.swapaxes(B, -1, -2)), -1, -2)
    if B.ndim == 1 or (B.ndim == A.ndim - 1 and B.shape == A.shape[:-1]):
        return np.linalg.solve(A, B[..., None])[..., 0]
    return np.linalg.solve(A, B)


def solve_samples(dtype, rng):
    w = wellcond
    yield SampleInput((w((3, 3), dtype, rng), arr((3, 2), dtype, rng)), name="matrix rhs")
    yield SampleInput((w((3, 3), dtype, rng), arr((3,), dtype, rng)), name="vector rhs")
    yield SampleInput((w((2, 3, 3), dtype, rng), arr((2, 3), dtype, rng)), name="batched vector rhs")
    yield SampleInput((w((2, 3, 3), dtype, rng), arr((3, 4), dtype, rng)), name="broadcast B")
    yield SampleInput((w((3, 3), dtype, rng), arr((2, 3, 1), dtype, rng)), name="broadcast A")
    yield SampleInput((w((3, 3), dtype, rng), arr((2, 3), dtype, rng)), {"left": False}, name="left=False")
    yield SampleInput((w((4, 4), dtype, rng).T, arr((2, 4), dtype, rng).T), name="transposed")
    yield SampleInput((w((0, 0), dtype, rng), arr((0, 2), dtype, rng)), name="0x0")
    yield SampleInput((w((0, 3, 3), dtype, rng), arr((0, 3, 2), dtype, rng)), name="batch 0")


def solve_errors(rng):
    yield ErrorInput((f32(3, 3), f32(4, 2)), match=r"Incompatible shapes of A and B for the equation AX = B \(3x3 and 4x2\)")
    yield ErrorInput((f32(2, 3), f32(2, 1)), match="A must be batches of square matrices")
    yield ErrorInput((f32(3, 3), np.ones((3, 1))), match="Expected A and B to have the same dtype")
    yield ErrorInput((np.zeros((3, 3), np.float32), f32(3, 1)), error=RuntimeError,
                     match="The solver failed because the input matrix is singular")
    yield ErrorInput((np.zeros((2, 3, 3), np.float32), f32(3)), match=r"\(Batch element 0\): The solver failed")
    yield ErrorInput((f32(2, 3, 3), f32(3, 3, 1)), match="cannot be broadcast|broadcast")


def inv_errors(rng):
    yield from square_errors("linalg.inv")(rng)
    yield ErrorInput((np.zeros((3, 3), np.float32),), match="The diagonal element 1 is zero")


def slogdet_ref(A):
    s, l = np.linalg.slogdet(A)
    return s, l


def triangular_samples(dtype, rng):
    def tri(shape, upper):
        a = wellcond(shape, dtype, rng)
        return np.triu(a) if upper else np.tril(a)
    yield SampleInput((tri((3, 3), True), arr((3, 2), dtype, rng)), {"upper": True}, name="upper")
    yield SampleInput((tri((3, 3), False), arr((3, 2), dtype, rng)), {"upper": False}, name="lower")
    yield SampleInput((tri((2, 3, 3), True), arr((2, 3), dtype, rng)), {"upper": True, "left": False}, name="right")
    yield SampleInput((tri((3, 3), False), arr((3, 4), dtype, rng)), {"upper": False, "unitriangular": True},
                      name="unit")
    yield SampleInput((tri((4, 4), True).T, arr((2, 4), dtype, rng).T), {"upper": False}, name="transposed")
    yield SampleInput((tri((0, 0), True), arr((0, 2), dtype, rng)), {"upper": True}, name="0x0")


def triangular_ref(A, B, upper, left=True, unitriangular=False):
    T = np.triu(A) if upper else np.tril(A)
    if unitriangular:
        idx = np.arange(T.shape[-1])
        T = T.copy()
        T[..., idx, idx] = 1
    return solve_ref(T, B, left)


def triangular_errors(rng):
    yield ErrorInput((f32(3, 3), f32(4, 2)), {"upper": True}, match=r"Incompatible shapes .* \(3x3 and 4x2\)")
    yield ErrorInput((f32(3, 3), f32(3)), {"upper": True}, match="must have at least 2 dimensions")


# ---- Cholesky, LU, QR, eigen and singular values --------------------------------------

def cholesky_ref(A, upper=False):
    L = np.linalg.cholesky(A)
    return np.conj(np.swapaxes(L, -1, -2)) if upper else L


def cholesky_samples(dtype, rng):
    for shape in [(3, 3), (1, 1), (2, 4, 4), (0, 0), (0, 2, 2)]:
        yield SampleInput((spd(shape, dtype, rng),), name=str(shape))
    yield SampleInput((spd((3, 3), dtype, rng),), {"upper": True}, name="upper")
    big = spd((6, 6), dtype, rng)
    yield SampleInput((big[::2, ::2],), name="strided")


def cholesky_errors(rng):
    yield from square_errors("linalg.cholesky")(rng)
    yield ErrorInput((-np.eye(3, dtype=np.float32),), match="the leading minor of order 1 is not positive-definite")
    m = np.stack([np.eye(2, dtype=np.float32), -np.eye(2, dtype=np.float32)])
    yield ErrorInput((m,), match=r"\(Batch element 1\).*not positive-definite")


def lu_ref_one(A):
    """Partial pivoting as LAPACK's getrf does (largest magnitude, first on ties)."""
    A = A.copy()
    m, n = A.shape
    k = min(m, n)
    piv = np.zeros(k, np.int32)
    for j in range(k):
        col = A[j:, j]
        # LAPACK's pivot: the largest |re| + |im| (izamax), which is |x| for real x
        p = j + int(np.argmax(np.abs(col.real) + np.abs(col.imag) if np.iscomplexobj(col) else np.abs(col)))
        piv[j] = p + 1
        if p != j:
            A[[j, p]] = A[[p, j]]
        if A[j, j] != 0:
            A[j + 1:, j] /= A[j, j]
        A[j + 1:, j + 1:] -= np.outer(A[j + 1:, j], A[j, j + 1:])
    return A, piv


def lu_factor_ref(A):
    batch = A.shape[:-2]
    m, n = A.shape[-2:]
    flat = A.reshape((int(np.prod(batch)), m, n))
    LU = np.empty_like(flat)
    piv = np.empty((flat.shape[0], min(m, n)), np.int32)
    for i in range(flat.shape[0]):
        LU[i], piv[i] = lu_ref_one(flat[i])
    return LU.reshape(A.shape), piv.reshape(batch + (min(m, n),))


def lu_samples(dtype, rng):
    for shape in [(3, 3), (4, 2), (2, 4), (2, 3, 3), (0, 0), (0, 3, 3)]:
        yield SampleInput((arr(shape, dtype, rng),), name=str(shape))
    yield SampleInput((arr((3, 3), dtype, rng).T,), name="transposed")


def lu_solve_samples(dtype, rng):
    for shape, bshape, kw in [((3, 3), (3, 2), {}), ((2, 4, 4), (2, 4, 1), {}), ((3, 3), (2, 3), {"left": False}),
                              ((3, 3), (3, 2), {"adjoint": True})]:
        A = wellcond(shape, dtype, rng)
        LU, piv = lu_factor_ref(A.astype(np.complex128 if A.dtype.kind == "c" else np.float64))
        yield SampleInput((LU.astype(dtype), piv, arr(bshape, dtype, rng)), kw, name=f"{shape} {kw}")


def lu_solve_ref(LU, piv, B, left=True, adjoint=False):
    n = LU.shape[-1]
    L = np.tril(LU, -1) + np.eye(n)
    U = np.triu(LU)
    P = np.broadcast_to(np.eye(n), LU.shape).copy()
    perm = np.broadcast_to(np.arange(n), LU.shape[:-1]).copy()
    for j in range(n):
        p = piv[..., j] - 1
        a = np.take_along_axis(perm, np.full(perm.shape[:-1] + (1,), j), -1)
        b = np.take_along_axis(perm, p[..., None], -1)
        np.put_along_axis(perm, np.full(perm.shape[:-1] + (1,), j), b, -1)
        np.put_along_axis(perm, p[..., None], a, -1)
    P = np.zeros(LU.shape)
    idx = np.arange(n)
    for bi in np.ndindex(LU.shape[:-2]):
        P[bi][perm[bi], idx] = 1
    A = P @ L @ U
    if adjoint:
        A = np.conj(np.swapaxes(A, -1, -2))
    return solve_ref(A, B, left)


def qr_ref(A, mode="reduced"):
    return np.linalg.qr(A, mode=mode) if mode != "r" else (np.zeros((0,), A.dtype), np.linalg.qr(A, mode="r"))


def qr_samples(dtype, rng):
    for shape in [(3, 3), (4, 2), (2, 4), (2, 3, 2)]:
        yield SampleInput((arr(shape, dtype, rng),), name=str(shape))
    yield SampleInput((arr((4, 2), dtype, rng),), {"mode": "complete"}, name="complete")
    yield SampleInput((arr((4, 2), dtype, rng),), {"mode": "r"}, name="r")
    yield SampleInput((arr((3, 4), dtype, rng).T,), name="transposed")
    yield SampleInput((arr((0, 3, 2), dtype, rng),), name="batch 0")


def qr_errors(rng):
    yield ErrorInput((f32(3, 3),), {"mode": "x"}, match="qr received unrecognized mode 'x'")
    yield ErrorInput((f32(3),), match="must have at least 2 dimensions")


def householder_ref(A, tau):
    m, n = A.shape[-2:]
    out = np.empty(A.shape, A.dtype)
    for bi in np.ndindex(A.shape[:-2]):
        Q = np.eye(m)
        for i in range(tau.shape[-1]):
            v = np.zeros(m, A.dtype)
            v[i] = 1
            v[i + 1:] = A[bi][i + 1:, i]
            Q = Q @ (np.eye(m) - tau[bi][i] * np.outer(v, v.conj()))
        out[bi] = Q[:, :n]
    return out


def householder_samples(dtype, rng):
    yield SampleInput((arr((4, 3), dtype, rng), arr((3,), dtype, rng)), name="4x3")
    yield SampleInput((arr((2, 4, 2), dtype, rng), arr((2, 1), dtype, rng)), name="batched, k < n")
    yield SampleInput((arr((3, 3), dtype, rng).T, arr((2,), dtype, rng)), name="transposed")


def householder_errors(rng):
    yield ErrorInput((f32(2, 3), f32(2)), match=r"input.shape\[-2\] must be greater than or equal to input.shape\[-1\]")
    yield ErrorInput((f32(3, 2), f32(3)), match=r"input.shape\[-1\] must be greater than or equal to tau.shape\[-1\]")


def eigvalsh_samples(dtype, rng):
    for shape in [(3, 3), (1, 1), (2, 4, 4), (0, 0), (0, 2, 2)]:
        a = arr(shape, dtype, rng)
        yield SampleInput((a + np.conj(np.swapaxes(a, -1, -2)),), name=str(shape))
    a = arr((3, 3), dtype, rng)
    yield SampleInput((a,), {"UPLO": "U"}, name="UPLO=U reads the upper triangle")
    yield SampleInput((a.T,), name="transposed")


def eigvalsh_ref(A, UPLO="L"):
    return np.linalg.eigvalsh(A, UPLO=UPLO)


def eigh_errors(rng):
    yield from square_errors("linalg.eigh")(rng)
    yield ErrorInput((f32(3, 3),), {"UPLO": "X"}, match="Expected UPLO argument to be 'L' or 'U'")
    yield ErrorInput((np.full((3, 3), np.nan, np.float32),), match="non-finite")


def eig_samples(dtype, rng):
    for shape in [(3, 3), (1, 1), (2, 4, 4), (2, 1, 3, 3), (0, 0), (0, 3, 3)]:
        yield SampleInput((arr(shape, dtype, rng),), name=str(shape))
    yield SampleInput((arr((4, 4), dtype, rng).T,), name="transposed")
    yield SampleInput((arr((5, 5), dtype, rng)[::2, ::2],), name="strided")
    yield SampleInput((np.array([[0.0, -1.0], [1.0, 0.0]]).astype(dtype),), name="rotation (i, -i)")


def eig_ref(A):
    # NumPy calls the same reference LAPACK routine (geev): same eigenvalue order and eigenvector
    # normalization (unit norm, largest component real).
    c = np.complex64 if A.dtype in (np.float32, np.complex64) else np.complex128
    if A.size == 0:
        return np.zeros(A.shape[:-1], c), np.zeros(A.shape, c)
    L, V = np.linalg.eig(A)
    return L.astype(c), V.astype(c)


def eig_errors(op_name):
    def errors(rng):
        yield ErrorInput((f32(2, 3),), match=f"{op_name}: A must be batches of square matrices, but they are 2 by 3")
        yield ErrorInput((f32(3),), match="must have at least 2 dimensions")
        yield ErrorInput((np.ones((2, 2), np.int64),), match=r"Expected a floating point or complex tensor.*int64")
        if op_name == "linalg.eig":  # eigvals gives NaNs there (test_linalg_complex.py)
            yield ErrorInput((np.array([[1.0, np.inf], [0.0, 1.0]], np.float32),),
                             match="should not contain infs or NaNs")
    return errors


def svdvals_ref(A):
    return np.linalg.svd(A, compute_uv=False) if A.size else np.zeros(A.shape[:-2] + (min(A.shape[-2:]),))


def svd_errors(rng):
    yield ErrorInput((np.full((3, 2), np.inf, np.float32),), match="non-finite values")
    yield ErrorInput((f32(3),), match="must have at least 2 dimensions")


def lstsq_ref(A, B, rcond=None, driver=None):
    if B.ndim == A.ndim - 1:
        return (np.linalg.pinv(A) @ B[..., None])[..., 0],
    return np.linalg.pinv(A) @ B,


def lstsq_samples(dtype, rng):
    yield SampleInput((arr((5, 3), dtype, rng), arr((5, 2), dtype, rng)), name="tall")
    yield SampleInput((arr((2, 5, 3), dtype, rng), arr((2, 5), dtype, rng)), name="batched vector")
    for d in ("gels", "gelsy", "gelsd", "gelss"):
        yield SampleInput((arr((4, 2), dtype, rng), arr((4, 3), dtype, rng)), {"driver": d}, name=d)
    yield SampleInput((arr((2, 4), dtype, rng), arr((2, 1), dtype, rng)), {"driver": "gelsd"}, name="wide")
    yield SampleInput((arr((4, 2), dtype, rng).T.copy().T, arr((4, 3), dtype, rng, noncontig=True)), name="noncontig")
    for d in ("gelsy", "gelsd", "gelss"):  # rank 2 of 3: the minimum-norm solution, pinv(A) B (wide, so that
        a = arr((3, 4), dtype, rng)        # no residuals are due: Meta's shapes assume full rank)
        a[2] = 2 * a[0]  # exact in every precision
        # (an rcond well above rounding: the default eps * max(m, n) sits next to the dependent row's
        # rounded singular value, where a rank decision may flip)
        yield SampleInput((a, arr((3, 2), dtype, rng)), {"rcond": 1e-4, "driver": d}, name=f"rank-deficient {d}")


def lstsq_errors(rng):
    yield ErrorInput((f32(3, 2), f32(3, 1)), {"driver": "foo"}, match="parameter `driver` should be one of")
    yield ErrorInput((f32(3, 2), f32(4, 1)), match="size")


# ---- compositions ---------------------------------------------------------------------------

def matrix_norm_samples(dtype, rng):
    for ord_ in ("fro", "nuc", 1, -1, 2, -2, float("inf"), float("-inf")):
        yield SampleInput((arr((3, 4), dtype, rng),), {"ord": ord_}, name=str(ord_))
    yield SampleInput((arr((2, 3, 3), dtype, rng),), {"ord": 1, "keepdim": True}, name="keepdim")
    yield SampleInput((arr((3, 2, 4), dtype, rng),), {"ord": "fro", "dim": (0, 2)}, name="dims (0, 2)")
    yield SampleInput((arr((3, 4), dtype, rng).T,), {"ord": "nuc"}, name="transposed")


def matrix_norm_ref(A, ord="fro", dim=(-2, -1), keepdim=False):
    return np.linalg.norm(A, ord=ord, axis=dim, keepdims=keepdim)


def vector_norm_samples(dtype, rng):
    for ord_ in (2, 1, 0, 3.5, float("inf"), float("-inf"), -1):
        yield SampleInput((arr((3, 4), dtype, rng),), {"ord": ord_}, name=str(ord_))
    yield SampleInput((arr((2, 3, 4), dtype, rng),), {"ord": 2, "dim": (0, 2), "keepdim": True}, name="dims")
    yield SampleInput((arr((5,), dtype, rng, noncontig=True),), {"ord": 1}, name="noncontig")


def vector_norm_ref(x, ord=2, dim=None, keepdim=False):
    if dim is None:
        r = np.linalg.norm(x.reshape(-1), ord=ord)
        return np.reshape(r, (1,) * x.ndim) if keepdim else r
    if isinstance(dim, int):
        dim = (dim,)
    a = np.abs(x)
    if ord == np.inf:
        return a.max(axis=dim, keepdims=keepdim)
    if ord == -np.inf:
        return a.min(axis=dim, keepdims=keepdim)
    if ord == 0:
        return (a != 0).sum(axis=dim, keepdims=keepdim).astype(x.dtype)
    return (a ** ord).sum(axis=dim, keepdims=keepdim) ** (1.0 / ord)


def cond_samples(dtype, rng):
    for p in (None, 2, -2, 1, "fro", "nuc", float("inf")):
        yield SampleInput((wellcond((3, 3), dtype, rng),), {"p": p}, name=str(p))
    yield SampleInput((arr((4, 2), dtype, rng),), name="rectangular")


def cond_ref(A, p=None):
    return np.linalg.cond(A, p)


def rank_samples(dtype, rng):
    a = arr((4, 3), dtype, rng)
    a[:, 2] = a[:, 0] + a[:, 1]
    yield SampleInput((a,), name="rank 2")
    yield SampleInput((arr((2, 3, 5), dtype, rng),), name="batched full rank")
    s = arr((3, 3), dtype, rng)
    yield SampleInput((s + s.T,), {"hermitian": True}, name="hermitian")
    yield SampleInput((np.zeros((3, 3), dtype),), name="zero")
    yield SampleInput((a,), {"atol": 1.0}, name="atol")


def rank_ref(A, atol=None, rtol=None, hermitian=False):
    eps = np.finfo(A.dtype).eps  # the tolerance of the input's own precision
    A = A.astype(np.float64)
    s = np.abs(np.linalg.eigvalsh(A)) if hermitian else np.linalg.svd(A, compute_uv=False)
    smax = s.max(-1, keepdims=True) if s.shape[-1] else 0
    if rtol is None:
        rtol = eps * max(A.shape[-2:]) if atol is None else 0.0
    tol = np.maximum(atol or 0.0, rtol * smax)
    return (s > tol).sum(-1).astype(np.int64)


def pinv_samples(dtype, rng):
    for shape in [(3, 3), (4, 2), (2, 4), (2, 3, 2)]:
        yield SampleInput((arr(shape, dtype, rng),), name=str(shape))
    a = arr((4, 3), dtype, rng)
    a[:, 2] = a[:, 0]
    yield SampleInput((a,), name="rank deficient")
    s = arr((3, 3), dtype, rng)
    yield SampleInput((s + s.T,), {"hermitian": True}, name="hermitian")


def pinv_ref(A, hermitian=False):
    return np.linalg.pinv(A, hermitian=hermitian)


def matrix_power_samples(dtype, rng):
    for n in (0, 1, 2, 3, 5, -1, -2):
        yield SampleInput((wellcond((3, 3), dtype, rng) / 2, n), name=str(n))
    yield SampleInput((wellcond((2, 3, 3), dtype, rng) / 2, 3), name="batched")
    yield SampleInput((arr((0, 2, 2), dtype, rng), 2), name="batch 0")


def matrix_exp_samples(dtype, rng):
    yield SampleInput((arr((3, 3), dtype, rng),), name="small norm")
    yield SampleInput((arr((3, 3), dtype, rng) * 8,), name="needs squaring")
    yield SampleInput((arr((2, 4, 4), dtype, rng),), name="batched")
    yield SampleInput((arr((1, 1), dtype, rng),), name="1x1")
    yield SampleInput((arr((3, 3), dtype, rng).T,), name="transposed")


def matrix_exp_ref(A):
    if A.ndim == 2:
        return scipy.linalg.expm(A)
    return np.stack([scipy.linalg.expm(a) for a in A.reshape((-1,) + A.shape[-2:])]).reshape(A.shape)


def vecdot_samples(dtype, rng):
    yield SampleInput((arr((3, 4), dtype, rng), arr((3, 4), dtype, rng)), name="rows")
    yield SampleInput((arr((3, 4), dtype, rng), arr((4,), dtype, rng)), name="broadcast")
    yield SampleInput((arr((3, 4), dtype, rng), arr((3, 4), dtype, rng)), {"dim": 0}, name="dim 0")


def multi_dot_samples(dtype, rng):
    yield SampleInput(([arr((2, 3), dtype, rng), arr((3, 4), dtype, rng), arr((4, 2), dtype, rng)],), name="3")
    yield SampleInput(([arr((3,), dtype, rng), arr((3, 5), dtype, rng), arr((5, 2), dtype, rng),
                        arr((2,), dtype, rng)],), name="vector ends")
    yield SampleInput(([arr((10, 2), dtype, rng), arr((2, 10), dtype, rng), arr((10, 3), dtype, rng)],), name="order")


def multi_dot_ref(ts):
    return np.linalg.multi_dot([t.astype(np.float64) for t in ts]).astype(ts[0].dtype)


def det_samples(dtype, rng):
    yield from square_samples(wellcond)(dtype, rng)
    s = arr((3, 3), dtype, rng)
    s[2] = 0
    yield SampleInput((s,), name="singular (a zero row)")


def logdet_ref(A):
    s, l = np.linalg.slogdet(A)
    return np.where(s < 0, np.nan, l)


def cholesky_solve_samples(dtype, rng):
    L = np.linalg.cholesky(spd((3, 3), "float64", rng)).astype(dtype)
    yield SampleInput((arr((3, 2), dtype, rng), L), name="lower")
    yield SampleInput((arr((3, 2), dtype, rng), L.T.copy(), True), name="upper")
    Lb = np.linalg.cholesky(spd((2, 3, 3), "float64", rng)).astype(dtype)
    yield SampleInput((arr((2, 3, 1), dtype, rng), Lb), name="batched")


def cholesky_solve_ref(B, L, upper=False):
    A = np.swapaxes(L, -1, -2) @ L if upper else L @ np.swapaxes(L, -1, -2)
    return np.linalg.solve(A, B)


def cholesky_inverse_samples(dtype, rng):
    L = np.linalg.cholesky(spd((3, 3), "float64", rng)).astype(dtype)
    yield SampleInput((L,), name="lower")
    yield SampleInput((L.T.copy(), True), name="upper")


def cholesky_inverse_ref(L, upper=False):
    A = np.swapaxes(L, -1, -2) @ L if upper else L @ np.swapaxes(L, -1, -2)
    return np.linalg.inv(A)


register(
    OpInfo("linalg.solve", dtypes=FLOAT + COMPLEX, ref=f64(solve_ref), samples=solve_samples, errors=solve_errors, tol=TOL),
    OpInfo("linalg.inv", dtypes=FLOAT + COMPLEX, ref=f64(np.linalg.inv), samples=square_samples(wellcond), errors=inv_errors, tol=TOL),
    OpInfo("inverse", ref=f64(np.linalg.inv), samples=square_samples(wellcond), tol=TOL, method="inverse"),
    OpInfo("linalg.det", dtypes=FLOAT + COMPLEX, ref=f64(np.linalg.det), samples=det_samples, errors=square_errors("linalg.det"), tol=TOL),
    OpInfo("det", ref=f64(np.linalg.det), samples=det_samples, tol=TOL, method="det"),
    OpInfo("linalg.slogdet", dtypes=FLOAT + COMPLEX, ref=f64(slogdet_ref), samples=det_samples, errors=square_errors("linalg.slogdet"),
           tol=TOL),
    OpInfo("logdet", ref=f64(logdet_ref), samples=det_samples, tol=TOL, method="logdet"),
    OpInfo("linalg.solve_triangular", dtypes=FLOAT + COMPLEX, ref=f64(triangular_ref), samples=triangular_samples,
           errors=triangular_errors, tol=TOL),
    OpInfo("linalg.cholesky", dtypes=FLOAT + COMPLEX, ref=f64(cholesky_ref), samples=cholesky_samples, errors=cholesky_errors, tol=TOL),
    OpInfo("cholesky_solve", ref=f64(cholesky_solve_ref), samples=cholesky_solve_samples, tol=TOL),
    OpInfo("cholesky_inverse", ref=f64(cholesky_inverse_ref), samples=cholesky_inverse_samples, tol=TOL),
    OpInfo("linalg.lu_factor", dtypes=FLOAT + COMPLEX, ref=f64(lu_factor_ref), samples=lu_samples, tol=TOL),
    OpInfo("linalg.lu_solve", dtypes=FLOAT + COMPLEX, ref=f64(lu_solve_ref), samples=lu_solve_samples, tol=TOL),
    OpInfo("linalg.qr", dtypes=FLOAT + COMPLEX, ref=f64(qr_ref), samples=qr_samples, errors=qr_errors, tol=TOL),
    OpInfo("linalg.householder_product", dtypes=FLOAT + COMPLEX, ref=f64(householder_ref), samples=householder_samples,
           errors=householder_errors, tol=TOL),
    OpInfo("linalg.eigvalsh", dtypes=FLOAT + COMPLEX, ref=f64(eigvalsh_ref), samples=eigvalsh_samples, errors=eigh_errors, tol=TOL),
    OpInfo("linalg.eig", ref=eig_ref, dtypes=FLOAT + COMPLEX, samples=eig_samples,
           errors=eig_errors("linalg.eig"), tol=TOL_C,
           skip=(("float32", "NumPy's float32 eig runs in double precision, and a real eigenvector's sign can "
                             "differ from sgeev's (test_linalg_complex.py compares float32 up to phase)"),)),
    OpInfo("linalg.eigvals", ref=lambda A: eig_ref(A)[0], dtypes=FLOAT + COMPLEX, samples=eig_samples,
           errors=eig_errors("linalg.eigvals"), tol=TOL_C),
    OpInfo("linalg.svdvals", dtypes=FLOAT + COMPLEX, ref=f64(svdvals_ref), samples=general_samples, errors=svd_errors, tol=TOL),
    OpInfo("linalg.lstsq", dtypes=FLOAT + COMPLEX, ref=f64(lstsq_ref), samples=lstsq_samples, errors=lstsq_errors, tol=TOL),
    OpInfo("linalg.matrix_norm", dtypes=FLOAT + COMPLEX, ref=f64(matrix_norm_ref), samples=matrix_norm_samples, tol=TOL),
    OpInfo("linalg.vector_norm", dtypes=FLOAT + COMPLEX, ref=f64(vector_norm_ref), samples=vector_norm_samples, tol=TOL),
    OpInfo("linalg.cond", ref=f64(cond_ref), samples=cond_samples, tol={"float32": (1e-3, 1e-3)}, meta=False),
    OpInfo("linalg.matrix_rank", ref=rank_ref, samples=rank_samples, meta=False),
    OpInfo("linalg.pinv", dtypes=FLOAT + COMPLEX, ref=f64(pinv_ref), samples=pinv_samples, tol={"float32": (1e-3, 1e-3)}),
    OpInfo("linalg.matrix_power", ref=f64(np.linalg.matrix_power), samples=matrix_power_samples, tol=TOL),
    OpInfo("linalg.matrix_exp", dtypes=FLOAT + COMPLEX, ref=f64(matrix_exp_ref), samples=matrix_exp_samples,
           tol={"float32": (1e-4, 1e-4), "float64": (1e-10, 1e-10)}, meta=False),
    OpInfo("linalg.vecdot", ref=f64(lambda x, y, dim=-1: (x * y).sum(dim)), samples=vecdot_samples, tol=TOL),
    OpInfo("linalg.multi_dot", ref=multi_dot_ref, samples=multi_dot_samples, tol=TOL),
)
