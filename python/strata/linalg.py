"""strata.linalg: torch.linalg over LAPACK (float32/float64, complex64/complex128; batched over leading dims).

The factorizations are ops (src/ops/decl/lapack.def, kernels in src/ops/lapack*.cpp, derivatives in
src/autograd/derivatives_lapack.cpp); the functions here that are not those ops are compositions of ops
(norms, pinv, matrix_rank, matrix_power, matrix_exp, multi_dot, ...), so autograd, Meta tensors and the
compiler go through them unchanged. Numerical failure (a singular matrix, a matrix that is not
positive-definite, no convergence) raises LinAlgError, a RuntimeError, as torch does.

eig and eigvals (LAPACK geev) return complex results for real and complex input. The other
decompositions and the compositions here also take complex64/complex128 (conjugate-transpose derivatives,
as torch); complex lstsq goes through QR.
"""

import math
from collections import namedtuple

from . import _C

_ops = _C._ops

LinAlgError = _C._LinAlgError
LinAlgError.__module__ = "strata.linalg"
LinAlgError.__qualname__ = LinAlgError.__name__ = "LinAlgError"

# cross(input, other, *, dim=-1, out=None): the op linalg_cross (decl/misc_more.def).
cross = _ops.linalg_cross
matmul = _ops.matmul

_SVD = namedtuple("linalg_svd", ["U", "S", "Vh"])
_EIGH = namedtuple("linalg_eigh", ["eigenvalues", "eigenvectors"])
_EIG = namedtuple("linalg_eig", ["eigenvalues", "eigenvectors"])
_LSTSQ = namedtuple("linalg_lstsq", ["solution", "residuals", "rank", "singular_values"])
_LU = namedtuple("linalg_lu", ["P", "L", "U"])
_LU_FACTOR = namedtuple("linalg_lu_factor", ["LU", "pivots"])
_INV_EX = namedtuple("linalg_inv_ex", ["inverse", "info"])
_SOLVE_EX = namedtuple("linalg_solve_ex", ["result", "info"])
_SLOGDET = namedtuple("linalg_slogdet", ["sign", "logabsdet"])


def _st():
    import strata
    return strata


def _out(result, out):
    """torch's out= for the composite functions: copy into out (resized) and return it."""
    if out is None:
        return result
    if isinstance(result, tuple):
        for o, r in zip(out, result):
            _out(r, o)
        return out
    if tuple(out.shape) != tuple(result.shape):
        out.resize_(result.shape)
    out.copy_(result)
    return out


def _needs_grad(*ts):
    st = _st()
    return st.is_grad_enabled() and any(isinstance(t, st.Tensor) and t.requires_grad for t in ts)


def _eps(dtype):
    st = _st()
    return st.finfo({st.complex64: st.float32, st.complex128: st.float64}.get(dtype, dtype)).eps


def _check_float(op, A, name="A", min_dim=2, complex_ok=False):
    st = _st()
    if not isinstance(A, st.Tensor):
        raise TypeError(f"{op}: expected a Tensor for {name}, got {type(A).__name__}")
    if A.dim() < min_dim:
        raise RuntimeError(f"{op}: The input tensor {name} must have at least {min_dim} dimensions, but got a tensor "
                           f"of shape {list(A.shape)}")
    if A.dtype not in (st.float32, st.float64) and not (complex_ok and A.dtype in (st.complex64, st.complex128)):
        raise RuntimeError(f"{op}: Expected a floating point tensor as input (float32 or float64). Got "
                           f"{str(A.dtype).split('.')[-1]} for {name} of shape {list(A.shape)}")


# ---- solving and inverting ------------------------------------------------------------

def solve(A, B, *, left=True, out=None):
    return _out(_ops.linalg_solve(A, B, left=left), out)


def solve_ex(A, B, *, left=True, check_errors=False, out=None):
    st = _st()
    _check_float("linalg.solve_ex", A, complex_ok=True)
    if A.device.type == "meta":
        return _out(_SOLVE_EX(_ops.linalg_solve(A, B, left=left),
                              st.empty(A.shape[:-2], dtype=st.int32, device="meta")), out)
    LU, piv, info = _ops.linalg_lu_factor_ex(A)
    if check_errors or not bool((info > 0).any()):
        result = _ops.linalg_solve(A, B, left=left)  # raises LinAlgError on a singular A
    else:  # singular and no check: LAPACK's answer (infs/NaNs), as torch returns it
        vec = _vector_rhs(A, B)
        result = _ops.linalg_lu_solve(LU, piv, B.unsqueeze(-1) if vec else B, left=left)
        if vec:
            result = result.squeeze(-1)
    return _out(_SOLVE_EX(result, info), out)


def _vector_rhs(A, B):
    return B.dim() == 1 or (B.dim() == A.dim() - 1 and tuple(B.shape) == tuple(A.shape[:-1]))


def inv(A, *, out=None):
    return _out(_ops.linalg_inv(A), out)


def inv_ex(A, *, check_errors=False, out=None):
    _check_float("linalg.inv_ex", A, complex_ok=True)
    if A.device.type == "meta":
        return _out(_INV_EX(_ops.linalg_inv(A), _st().empty(A.shape[:-2], dtype=_st().int32, device="meta")), out)
    _, _, info = _ops.linalg_lu_factor_ex(A)
    if check_errors or not bool((info > 0).any()):
        inverse = _ops.linalg_inv(A)
    else:
        st = _st()
        LU, piv, _ = _ops.linalg_lu_factor_ex(A)
        eye = st.eye(A.shape[-1], dtype=A.dtype).expand(A.shape)
        inverse = _ops.linalg_lu_solve(LU, piv, eye)
    return _out(_INV_EX(inverse, info), out)


def det(A, *, out=None):
    return _out(_ops.linalg_det(A), out)


def slogdet(A, *, out=None):
    return _out(_SLOGDET(*_ops.linalg_slogdet(A)), out)


def solve_triangular(A, B, *, upper, left=True, unitriangular=False, out=None):
    return _out(_ops.linalg_solve_triangular(A, B, upper=upper, left=left, unitriangular=unitriangular), out)


def lu_factor_ex(A, *, pivot=True, check_errors=False, out=None):
    return _out(_ops.linalg_lu_factor_ex(A, pivot=pivot, check_errors=check_errors), out)


def lu_factor(A, *, pivot=True, out=None):
    LU, pivots, info = _ops.linalg_lu_factor_ex(A, pivot=pivot)
    if A.device.type != "meta" and info.numel() and bool((info > 0).any()):
        bad = int((info > 0).flatten().nonzero()[0, 0])
        k = int(info.flatten()[bad])
        where = f"(Batch element {bad}): " if info.dim() else ""
        raise LinAlgError(f"torch.linalg.lu_factor: {where}U[{k},{k}] is zero and using it on lu_solve would result "
                          "in a division by zero. If you still want to perform the factorization, consider calling "
                          "linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)")
    return _out(_LU_FACTOR(LU, pivots), out)


def lu_solve(LU, pivots, B, *, left=True, adjoint=False, out=None):
    return _out(_ops.linalg_lu_solve(LU, pivots, B, left=left, adjoint=adjoint), out)


def _permutation(pivots, m, dtype, device):
    """The m x m permutation matrices P (batched) with A = P L U for LAPACK's row interchanges."""
    import numpy as np
    st = _st()
    piv = pivots.numpy().astype(np.int64) - 1
    batch = piv.shape[:-1]
    flat = piv.reshape(-1, piv.shape[-1])
    perm = np.tile(np.arange(m), (flat.shape[0], 1))
    rows = np.arange(flat.shape[0])
    for i in range(flat.shape[1]):
        j = flat[:, i]
        a, b = perm[rows, i].copy(), perm[rows, j].copy()
        perm[rows, i], perm[rows, j] = b, a
    P = np.zeros((flat.shape[0], m, m))
    for r in range(flat.shape[0]):
        P[r, perm[r], np.arange(m)] = 1.0
    return st.tensor(P.reshape(batch + (m, m)), dtype=dtype, device=device)


def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):
    st = _st()
    m, n = LU_data.shape[-2], LU_data.shape[-1]
    k = min(m, n)
    if unpack_data:
        L = LU_data[..., :, :k].tril(-1) + st.eye(m, k, dtype=LU_data.dtype)
        U = LU_data[..., :k, :].triu()
    else:
        L = st.empty(0, dtype=LU_data.dtype)
        U = st.empty(0, dtype=LU_data.dtype)
    if unpack_pivots:
        if LU_data.device.type == "meta":
            P = st.empty(tuple(LU_data.shape[:-2]) + (m, m), dtype=LU_data.dtype, device="meta")
        else:
            P = _permutation(LU_pivots, m, LU_data.dtype, LU_data.device)
    else:
        P = st.empty(0, dtype=LU_data.dtype)
    return _LU(P, L, U)


def lu(A, *, pivot=True, out=None):
    LU, pivots, _ = _ops.linalg_lu_factor_ex(A, pivot=pivot)
    return _out(lu_unpack(LU, pivots), out)


# ---- factorizations ----------------------------------------------------------------------

def cholesky_ex(A, *, upper=False, check_errors=False, out=None):
    return _out(_ops.linalg_cholesky_ex(A, upper=upper, check_errors=check_errors), out)


def cholesky(A, *, upper=False, out=None):
    return _out(_ops.linalg_cholesky_ex(A, upper=upper, check_errors=True)[0], out)


def qr(A, mode="reduced", *, out=None):
    return _out(_ops.linalg_qr(A, mode), out)


def svd(A, full_matrices=True, *, driver=None, out=None):
    if driver is not None:
        raise RuntimeError("torch.linalg.svd: keyword argument `driver=` is only supported on CUDA inputs with "
                           "cuSOLVER backend.")
    return _out(_SVD(*_ops._linalg_svd(A, full_matrices, True)), out)


def svdvals(A, *, driver=None, out=None):
    if driver is not None:
        raise RuntimeError("torch.linalg.svdvals: keyword argument `driver=` is only supported on CUDA inputs with "
                           "cuSOLVER backend.")
    return _out(_ops._linalg_svd(A, False, False)[1], out)


def eigh(A, UPLO="L", *, out=None):
    return _out(_EIGH(*_ops._linalg_eigh(A, UPLO, True)), out)


def eigvalsh(A, UPLO="L", *, out=None):
    return _out(_ops._linalg_eigh(A, UPLO, False)[0], out)


def eig(A, *, out=None):
    """Eigenvalues and eigenvectors of general square matrices (LAPACK geev); complex results for real
    and complex input, eigenvectors of unit norm (largest component real), as torch."""
    return _out(_EIG(*_ops.linalg_eig(A)), out)


def eigvals(A, *, out=None):
    # The eigenvalues' gradient needs the eigenvectors: the op recomputes them in its backward.
    return _out(_ops.linalg_eigvals(A), out)


def householder_product(A, tau, *, out=None):
    if not _needs_grad(A, tau):
        return _out(_ops.linalg_householder_product(A, tau), out)
    # The orgqr op has no derivative of its own: with a gradient, the product H_0 ... H_{k-1} of the
    # reflectors H_i = I - tau_i v_i v_i^H (v_i: a unit at row i above A's column i below the diagonal)
    # is applied to the first n columns of the identity from the right end, one rank-one update per
    # reflector, whose ops carry first and higher derivatives (A's upper triangle is not read, as in torch).
    Q = _ops.linalg_householder_product(A.detach(), tau.detach())  # the op's checks and messages
    st = _st()
    m, n, k = A.shape[-2], A.shape[-1], tau.shape[-1]
    V = st.tril(A, -1) + st.eye(m, n, dtype=A.dtype, device=A.device)
    Q = st.eye(m, n, dtype=A.dtype, device=A.device).expand(*Q.shape)
    if k == 0:  # no reflector: the identity, still an output of A and tau (with zero gradients), as torch's
        Q = Q + 0 * V + 0 * tau.sum(-1)[..., None, None]
    for i in range(k - 1, -1, -1):
        v = V[..., :, i:i + 1]
        Q = Q - (tau[..., i, None, None] * v) @ (v.mH @ Q)
    return _out(Q, out)


_LSTSQ_PINV = []


def _lstsq_pinv(A, B, X):
    """X = pinv(A) B for rank-deficient A, its value given (the driver's solution), with torch's gradient:
    gB = pinv(A)^H gX, and for A the gradient of P = pinv(A) (d P = -P dA P + P P^H dA^H (I - A P)
    + (I - P A) dA^H P^H P, valid where the rank does not change) contracted with gX B^H."""
    if not _LSTSQ_PINV:
        st = _st()

        class LstsqPinv(st.autograd.Function):
            @staticmethod
            def forward(ctx, A, B, X):
                ctx.save_for_backward(A, B)
                return X.clone()

            @staticmethod
            def backward(ctx, gX):
                A, B = ctx.saved_tensors
                P = pinv(A)
                Ph = P.mH
                gA = gB = None
                if ctx.needs_input_grad[0]:
                    Gh = B @ gX.mH  # (gX B^H)^H: the gradient reaching P, adjoint
                    gA = -(Ph @ Gh.mH @ Ph) + (Gh - A @ (P @ Gh)) @ (P @ Ph) + (Ph @ P) @ (Gh - (Gh @ P) @ A)
                    gA = gA.sum_to_size(*A.shape)
                if ctx.needs_input_grad[1]:
                    gB = (Ph @ gX).sum_to_size(*B.shape)
                return gA, gB, None

        _LSTSQ_PINV.append(LstsqPinv)
    return _LSTSQ_PINV[0].apply(A, B, X)


def lstsq(A, B, rcond=None, *, driver=None):
    st = _st()
    _check_float("torch.linalg.lstsq", A, complex_ok=True)
    if driver is not None and driver not in ("gels", "gelsy", "gelsd", "gelss"):
        raise RuntimeError("torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)")
    m, n = A.shape[-2], A.shape[-1]
    vec = _vector_rhs(A, B)
    cplx = A.is_complex()
    # LAPACK's drivers (real and complex): rank-deficient input gets their minimum-norm (gelsd, gelss) or
    # complete-orthogonal (gelsy) solutions, ranks and singular values, as torch's.
    solution, rank, sv = _ops._linalg_lstsq(A.detach(), B.detach(), rcond, driver=driver)
    if _needs_grad(A, B):
        # The drivers have no derivative: the solution is recomputed with ops that have one. For full-rank A
        # that is R^-1 Q^H B (m >= n) or Q R^-H B (m < n) with A (or A^H) = QR; otherwise torch's gradient
        # of pinv(A) B (_lstsq_pinv), the solution's value staying the driver's.
        Bm = B.unsqueeze(-1) if vec else B
        full = A.device.type == "meta" or min(m, n) == 0 or bool(
            ((rank if rank.numel() else matrix_rank(A.detach())) == min(m, n)).all())
        if full and m >= n:
            Q, R = _ops.linalg_qr(A)
            sol = _ops.linalg_solve_triangular(R, Q.mH @ Bm, upper=True)
        elif full:
            Q, R = _ops.linalg_qr(A.mH)
            sol = Q @ _ops.linalg_solve_triangular(R.mH, Bm, upper=False)
        else:
            X = solution.unsqueeze(-1) if vec else solution
            sol = _lstsq_pinv(A, Bm, X)
        solution = sol.squeeze(-1) if vec else sol
    residuals = st.empty(0, dtype=A.real.dtype if cplx else A.dtype, device=A.device)
    # torch's rule: residuals for tall A when every matrix has full rank, except with gelsy.
    # (Meta tensors have no ranks: their shapes assume full rank.)
    if m > n and driver not in (None, "gelsy"):
        meta = A.device.type == "meta"
        if meta or rank.numel() == 0 or bool((rank == n).all()):
            r = A @ (solution.unsqueeze(-1) if vec else solution) - (B.unsqueeze(-1) if vec else B)
            residuals = (r.abs() ** 2 if cplx else r * r).sum(-2)
            if vec:
                residuals = residuals.squeeze(-1)
    return _LSTSQ(solution, residuals, rank, sv)


# ---- norms -------------------------------------------------------------------------------

def _dims(dim, ndim):
    if dim is None:
        return None
    if isinstance(dim, int):
        return (dim % ndim if ndim else 0,)
    return tuple(d % ndim for d in dim)


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None, out=None):
    st = _st()
    if dtype is not None:
        x = x.to(dtype)
    if x.is_complex():
        x = x.abs()  # every vector norm is a norm of |x_i|; the result is real, as torch's
    if not x.is_floating_point():
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point or complex tensor as input. Got "
                           f"{str(x.dtype).split('.')[-1]}")
    dims = _dims(dim, x.dim())
    if dims == ():
        dims = None
    if x.numel() == 0 and ord in (math.inf, -math.inf) or (x.numel() == 0 and ord < 0):
        if dims is None or any(x.shape[d] == 0 for d in dims):
            raise RuntimeError(f"linalg.vector_norm cannot compute the {ord} norm on an empty tensor because the "
                               "operation does not have an identity")
    a = x.abs()
    if ord == math.inf:
        r = a.amax(dims if dims is not None else tuple(range(x.dim())), keepdim=keepdim)
    elif ord == -math.inf:
        r = a.amin(dims if dims is not None else tuple(range(x.dim())), keepdim=keepdim)
    elif ord == 0:
        r = (a != 0).to(x.dtype).sum(dims, keepdim=keepdim)
    elif ord == 1:
        r = a.sum(dims, keepdim=keepdim)
    elif ord == 2:
        r = _ops.norm(x, 2, list(dims) if dims is not None else None, keepdim)
    else:
        r = a.pow(ord).sum(dims, keepdim=keepdim).pow(1.0 / ord)
    if dims is None and keepdim:
        r = r.reshape((1,) * x.dim())
    return _out(r, out)


def _move_to_end(A, d0, d1):
    return A.movedim((d0, d1), (-2, -1))


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None, out=None):
    st = _st()
    if dtype is not None:
        A = A.to(dtype)
    if A.dim() < 2:
        raise RuntimeError(f"linalg.matrix_norm: The input tensor A must have at least 2 dimensions, but got a "
                           f"tensor of shape {list(A.shape)}")
    d0, d1 = _dims(dim, A.dim())
    if d0 == d1:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different. Got ({dim[0]}, {dim[1]})")
    if ord == "fro":
        r = vector_norm(A, 2, (d0, d1), keepdim)
    elif ord == "nuc":
        r = svdvals(_move_to_end(A, d0, d1)).sum(-1)
        if keepdim:
            r = r.unsqueeze(min(d0, d1)).unsqueeze(max(d0, d1))
    elif ord in (2, -2):
        s = svdvals(_move_to_end(A, d0, d1))
        r = s.amax(-1) if ord == 2 else s.amin(-1)
        if keepdim:
            r = r.unsqueeze(min(d0, d1)).unsqueeze(max(d0, d1))
    elif ord in (1, -1, math.inf, -math.inf):
        if ord in (math.inf, -math.inf):
            d0, d1 = d1, d0
        s = A.abs().sum(d0, keepdim=True)
        r = s.amax(d1, keepdim=True) if ord > 0 else s.amin(d1, keepdim=True)
        if not keepdim:
            r = r.squeeze((d0, d1))
    else:
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    return _out(r, out)


def norm(A, ord=None, dim=None, keepdim=False, *, out=None, dtype=None):
    if isinstance(dim, int):
        dim = (dim,)
    if ord is None:
        if dim is not None and len(dim) == 2:
            return matrix_norm(A, "fro", dim, keepdim, dtype=dtype, out=out)
        return vector_norm(A, 2, dim, keepdim, dtype=dtype, out=out)
    if isinstance(ord, str) or (dim is not None and len(dim) == 2) or (dim is None and A.dim() == 2):
        return matrix_norm(A, ord, dim if dim is not None else (-2, -1), keepdim, dtype=dtype, out=out)
    if dim is None and A.dim() != 1:
        raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got "
                           f"{A.dim()}D.")
    return vector_norm(A, ord, dim, keepdim, dtype=dtype, out=out)


def cond(A, p=None, *, out=None):
    st = _st()
    _check_float("linalg.cond", A, complex_ok=True)
    if p in (None, 2, -2):
        s = svdvals(A)
        r = s.amax(-1) / s.amin(-1) if p in (None, 2) else s.amin(-1) / s.amax(-1)
        return _out(r, out)
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"linalg.cond: A must be batches of square matrices, but they are {A.shape[-2]} by "
                           f"{A.shape[-1]} matrices")
    Ainv, info = inv_ex(A)
    r = matrix_norm(A, p) * matrix_norm(Ainv, p)
    if A.device.type != "meta" and bool((info > 0).any()):
        r = st.where(info > 0, st.full_like(r, math.inf), r)
    return _out(r, out)


def matrix_rank(A, tol=None, hermitian=False, *, atol=None, rtol=None, out=None):
    st = _st()
    _check_float("linalg.matrix_rank", A, complex_ok=True)
    if tol is not None:
        atol, rtol = tol, 0.0
    s = eigvalsh(A).abs() if hermitian else svdvals(A)
    smax = s.amax(-1, keepdim=True) if s.shape[-1] else st.zeros(tuple(s.shape[:-1]) + (1,), dtype=s.dtype)
    if rtol is None:
        rtol = _eps(A.dtype) * max(A.shape[-2], A.shape[-1]) if atol is None or _is_zero(atol) else 0.0
    tol_t = _as_tensor(rtol, s) * smax
    if atol is not None:
        tol_t = st.maximum(_as_tensor(atol, s).unsqueeze(-1) if isinstance(atol, st.Tensor) else _as_tensor(atol, s),
                           tol_t)
    return _out((s > tol_t).sum(-1), out)


def _is_zero(x):
    return not isinstance(x, _st().Tensor) and x == 0


def _as_tensor(v, like):
    st = _st()
    if isinstance(v, st.Tensor):
        return v.to(like.dtype).unsqueeze(-1) if v.dim() else v.to(like.dtype)
    return st.tensor(float(v), dtype=like.dtype)


def pinv(A, *, atol=None, rtol=None, hermitian=False, rcond=None, out=None):
    st = _st()
    _check_float("linalg.pinv", A, complex_ok=True)
    if rcond is not None:
        rtol = rcond
    m, n = A.shape[-2], A.shape[-1]
    if hermitian:
        L, V = eigh(A)
        s = L.abs()
    else:
        U, s, Vh = _ops._linalg_svd(A, False, True)
    smax = s.amax(-1, keepdim=True) if s.shape[-1] else st.zeros(tuple(s.shape[:-1]) + (1,), dtype=s.dtype)
    if rtol is None:
        rtol = _eps(A.dtype) * max(m, n) if atol is None or _is_zero(atol) else 0.0
    tol = _as_tensor(rtol, s) * smax
    if atol is not None:
        tol = st.maximum(_as_tensor(atol, s), tol)
    keep = s > tol
    if hermitian:
        Linv = st.where(keep, 1.0 / st.where(keep, L, st.ones_like(L)), st.zeros_like(L))
        return _out((V * Linv.unsqueeze(-2)) @ V.mH, out)
    sinv = st.where(keep, 1.0 / st.where(keep, s, st.ones_like(s)), st.zeros_like(s))
    return _out((Vh.mH * sinv.unsqueeze(-2)) @ U.mH, out)


# ---- products and functions of matrices ------------------------------------------------

def matrix_power(A, n, *, out=None):
    st = _st()
    if A.dim() < 2 or A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"linalg.matrix_power: A must be batches of square matrices, but they are "
                           f"{'x'.join(map(str, A.shape[-2:]))} matrices" if A.dim() >= 2 else
                           f"linalg.matrix_power: The input tensor A must have at least 2 dimensions.")
    if not isinstance(n, int):
        raise TypeError(f"linalg.matrix_power: n must be an int, got {type(n).__name__}")
    if n == 0:
        r = st.eye(A.shape[-1], dtype=A.dtype, device=A.device).expand(A.shape).clone()
        return _out(r, out)
    if n < 0:
        A = inv(A)
        n = -n
    result = None
    base = A
    while n:
        if n & 1:
            result = base if result is None else result @ base
        n >>= 1
        if n:
            base = base @ base
    return _out(result if result is not A else A.clone(), out)


# Pade [13/13] coefficients and the largest 1-norm they are accurate to double
# precision for (Higham, "The scaling and squaring method for the matrix
# exponential revisited", 2005).
_PADE13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0, 129060195264000.0,
           10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0, 40840800.0, 960960.0, 16380.0, 182.0, 1.0)
_THETA13 = 5.371920351148152


def matrix_exp(A):
    """Scaling and squaring with the [13/13] Pade approximant, written with matmul and
    solve, so it is differentiable (and batched) through those ops."""
    st = _st()
    _check_float("linalg.matrix_exp", A, complex_ok=True)
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"linalg.matrix_exp: A must be batches of square matrices, but they are "
                           f"{A.shape[-2]} by {A.shape[-1]} matrices")
    n = A.shape[-1]
    if A.numel() == 0 or A.device.type == "meta":
        return A.clone() if A.device.type == "meta" else st.empty(A.shape, dtype=A.dtype)
    if n == 1:
        return A.exp()
    with st.no_grad():
        norm1 = float(A.abs().sum(-2).amax())
    s = 0 if not math.isfinite(norm1) or norm1 <= _THETA13 else int(math.ceil(math.log2(norm1 / _THETA13)))
    X = A / (2.0 ** s) if s else A
    b = _PADE13
    eye = st.eye(n, dtype=A.dtype, device=A.device)
    X2 = X @ X
    X4 = X2 @ X2
    X6 = X4 @ X2
    U = X @ (X6 @ (b[13] * X6 + b[11] * X4 + b[9] * X2) + b[7] * X6 + b[5] * X4 + b[3] * X2 + b[1] * eye)
    V = X6 @ (b[12] * X6 + b[10] * X4 + b[8] * X2) + b[6] * X6 + b[4] * X4 + b[2] * X2 + b[0] * eye
    R = _ops.linalg_solve(V - U, V + U)
    for _ in range(s):
        R = R @ R
    return R


def vecdot(x, y, *, dim=-1, out=None):
    # torch conjugates x (a no-op for real tensors)
    return _out((x.conj() * y).sum(dim), out)


def multi_dot(tensors, *, out=None):
    st = _st()
    ts = list(tensors)
    if len(ts) < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(ts)}")
    first_vec, last_vec = ts[0].dim() == 1, ts[-1].dim() == 1
    if first_vec:
        ts[0] = ts[0].unsqueeze(0)
    if last_vec:
        ts[-1] = ts[-1].unsqueeze(-1)
    for i, t in enumerate(ts):
        if t.dim() != 2:
            raise RuntimeError(f"multi_dot(): tensor {i} must be 2D but got {t.dim()}D")
    for i in range(len(ts) - 1):
        if ts[i].shape[1] != ts[i + 1].shape[0]:
            raise RuntimeError(f"multi_dot(): tensors {i} and {i + 1} with shapes {list(ts[i].shape)} and "
                               f"{list(ts[i + 1].shape)} cannot be multiplied")
    # Cheapest order of the chain (the classic dynamic programme over split points).
    dims = [ts[0].shape[0]] + [t.shape[1] for t in ts]
    k = len(ts)
    cost = [[0] * k for _ in range(k)]
    split = [[0] * k for _ in range(k)]
    for length in range(1, k):
        for i in range(k - length):
            j = i + length
            cost[i][j] = None
            for s in range(i, j):
                c = cost[i][s] + cost[s + 1][j] + dims[i] * dims[s + 1] * dims[j + 1]
                if cost[i][j] is None or c < cost[i][j]:
                    cost[i][j], split[i][j] = c, s

    def product(i, j):
        if i == j:
            return ts[i]
        s = split[i][j]
        return product(i, s) @ product(s + 1, j)

    r = product(0, k - 1)
    if first_vec:
        r = r.squeeze(0)
    if last_vec:
        r = r.squeeze(-1)
    return _out(r, out)


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    return A.diagonal(offset, dim1, dim2)


def vander(x, N=None):
    st = _st()
    n = x.shape[-1] if N is None else N
    if n < 0:
        raise RuntimeError("N must be non-negative.")
    return x.unsqueeze(-1) ** st.arange(n, dtype=x.dtype if x.is_floating_point() else st.int64)


def tensorinv(A, ind=2, *, out=None):
    if ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    out_shape = tuple(A.shape[ind:]) + tuple(A.shape[:ind])
    rows = math.prod(A.shape[:ind])
    cols = math.prod(A.shape[ind:])
    if rows != cols:
        raise RuntimeError("Expected self to satisfy the requirement prod(self.shape[ind:]) == "
                           "prod(self.shape[:ind]), but got " + f"{cols} != {rows}")
    return _out(inv(A.reshape(rows, cols)).reshape(out_shape), out)


def tensorsolve(A, B, dims=None, *, out=None):
    if dims is not None:
        nd = A.dim()
        dims = [d % nd for d in dims]
        rest = [d for d in range(nd) if d not in dims]
        A = A.permute(rest + dims)
    res_shape = tuple(A.shape[B.dim():])
    n = math.prod(res_shape)
    return _out(solve(A.reshape(B.numel(), n), B.reshape(-1)).reshape(res_shape), out)


def ldl_factor(*args, **kwargs):
    raise NotImplementedError("strata.linalg.ldl_factor is not implemented yet (torch.linalg.ldl_factor)")


ldl_factor_ex = ldl_solve = ldl_factor


__all__ = ["LinAlgError", "cholesky", "cholesky_ex", "cond", "cross", "det", "diagonal", "eig", "eigh", "eigvals",
           "eigvalsh", "householder_product", "inv", "inv_ex", "lstsq", "lu", "lu_factor", "lu_factor_ex",
           "lu_solve", "matmul", "matrix_exp", "matrix_norm", "matrix_power", "matrix_rank", "multi_dot", "norm",
           "pinv", "qr", "slogdet", "solve", "solve_ex", "solve_triangular", "svd", "svdvals", "tensorinv",
           "tensorsolve", "vander", "vecdot", "vector_norm"]
