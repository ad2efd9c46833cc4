"""torch's top-level linear-algebra names (torch.inverse, torch.det, torch.svd, ...) and the Tensor
methods of the same names, over strata.linalg."""

from collections import namedtuple

from . import _C
from . import linalg as _la

_ops = _C._ops
Tensor = _C.Tensor

_SVD = namedtuple("svd", ["U", "S", "V"])
_QR = namedtuple("qr", ["Q", "R"])
_SLOGDET = namedtuple("slogdet", ["sign", "logabsdet"])
_TRISOLVE = namedtuple("triangular_solve", ["solution", "cloned_coefficient"])
_LU_UNPACK = namedtuple("lu_unpack", ["P", "L", "U"])


def inverse(input, *, out=None):
    return _la.inv(input, out=out)


def det(input):
    return _ops.linalg_det(input)


def slogdet(input):
    return _SLOGDET(*_ops.linalg_slogdet(input))


def logdet(input):
    """log(det(A)): NaN where det < 0, -inf where det == 0 (differentiable through slogdet)."""
    import strata as st
    sign, logabs = _ops.linalg_slogdet(input)
    if sign.is_complex():  # log det = log|det| + i arg(det) (complex: no NaN branch)
        return st.complex(logabs, sign.angle())
    return st.where(sign < 0, st.full_like(logabs, float("nan")), logabs)


def cholesky(input, upper=False, *, out=None):
    return _la.cholesky(input, upper=upper, out=out)


def cholesky_solve(B, L, upper=False, *, out=None):
    """Solves A X = B for A = L L^H (upper: A = U^H U) given the factor."""
    if upper:
        Y = _ops.linalg_solve_triangular(L.mH, B, upper=False)
        X = _ops.linalg_solve_triangular(L, Y, upper=True)
    else:
        Y = _ops.linalg_solve_triangular(L, B, upper=False)
        X = _ops.linalg_solve_triangular(L.mH, Y, upper=True)
    return _la._out(X, out)


def cholesky_inverse(L, upper=False, *, out=None):
    import strata as st
    n = L.shape[-1]
    eye = st.eye(n, dtype=L.dtype, device=L.device).expand(L.shape)
    return cholesky_solve(eye, L, upper, out=out)


def qr(input, some=True, *, out=None):
    return _la._out(_QR(*_ops.linalg_qr(input, "reduced" if some else "complete")), out)


def svd(input, some=True, compute_uv=True, *, out=None):
    import strata as st
    if compute_uv:
        U, S, Vh = _ops._linalg_svd(input, not some, True)
        return _la._out(_SVD(U, S, Vh.mH), out)
    S = _ops._linalg_svd(input, False, False)[1]
    m, n = input.shape[-2], input.shape[-1]
    k = min(m, n)
    batch = tuple(input.shape[:-2])
    U = st.zeros(batch + ((m, m) if not some else (m, k)), dtype=input.dtype, device=input.device)
    V = st.zeros(batch + ((n, n) if not some else (n, k)), dtype=input.dtype, device=input.device)
    return _la._out(_SVD(U, S, V), out)


def pinverse(input, rcond=1e-15):
    return _la.pinv(input, rtol=rcond)


def matrix_power(input, n, *, out=None):
    return _la.matrix_power(input, n, out=out)


def matrix_exp(A):
    return _la.matrix_exp(A)


def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True, *, out=None):
    return _la._out(_LU_UNPACK(*_la.lu_unpack(LU_data, LU_pivots, unpack_data, unpack_pivots)), out)


def lu_solve(b, LU_data, LU_pivots, *, out=None):
    return _la.lu_solve(LU_data, LU_pivots, b, out=out)


def lu(A, pivot=True, get_infos=False, out=None):
    LU, pivots, info = _ops.linalg_lu_factor_ex(A, pivot=pivot)
    return (LU, pivots, info) if get_infos else (LU, pivots)


def triangular_solve(b, A, upper=True, transpose=False, unitriangular=False, *, out=None):
    M = A.mT if transpose else A
    X = _ops.linalg_solve_triangular(M, b, upper=upper != transpose, unitriangular=unitriangular)
    return _la._out(_TRISOLVE(X, A.clone()), out)


def orgqr(input, tau):
    return _la.householder_product(input, tau)


def chain_matmul(*matrices, out=None):
    if len(matrices) == 1:
        return matrices[0].clone()
    return _la.multi_dot(matrices, out=out)


__all__ = ["inverse", "det", "slogdet", "logdet", "cholesky", "cholesky_solve", "cholesky_inverse", "qr", "svd",
           "pinverse", "matrix_power", "matrix_exp", "lu_unpack", "lu_solve", "lu", "triangular_solve", "orgqr",
           "chain_matmul"]


def _install_methods():
    def method(fn):
        def m(self, *args, **kwargs):
            return fn(self, *args, **kwargs)
        m.__name__ = fn.__name__
        return m

    names = {"inverse": inverse, "det": det, "slogdet": slogdet, "logdet": logdet, "cholesky": cholesky,
             "cholesky_inverse": cholesky_inverse, "qr": qr, "svd": svd, "pinverse": pinverse,
             "matrix_power": matrix_power, "matrix_exp": matrix_exp, "orgqr": orgqr,
             "lu": lu, "lu_solve": lu_solve}
    for name, fn in names.items():
        setattr(Tensor, name, method(fn))

    # Tensor.cholesky_solve(input2, upper) and Tensor.triangular_solve(A, ...) take the right-hand side as self.
    Tensor.cholesky_solve = lambda self, input2, upper=False: cholesky_solve(self, input2, upper)
    Tensor.triangular_solve = lambda self, A, upper=True, transpose=False, unitriangular=False: (
        triangular_solve(self, A, upper, transpose, unitriangular))


_install_methods()
