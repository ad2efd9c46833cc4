"""Complex linear algebra against torch and NumPy in complex128 (complex64 spot checks): linalg.eig /
eigvals (real and complex input), and the LAPACK ops that take complex input (solve, inv, det, slogdet,
cholesky, solve_triangular, lu_factor, lu_solve): batches, non-contiguous and empty input, singular input
(LinAlgError), and gradients of real losses of complex inputs compared with torch's."""

import numpy as np
import pytest

import strata as st

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(7)


def crand(*shape):
    return RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)


def S(a, requires_grad=False):
    t = st.tensor(np.ascontiguousarray(a))
    return t.requires_grad_() if requires_grad else t


def T(a, requires_grad=False):
    t = torch.tensor(np.ascontiguousarray(a))
    return t.requires_grad_() if requires_grad else t


def close(a, b, tol=1e-10):
    a = a.detach().resolve_conj().numpy() if hasattr(a, "detach") else np.asarray(a)
    b = b.detach().resolve_conj().numpy() if hasattr(b, "detach") else np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def close_up_to_phase(V, W, tol=1e-9):
    """Columns of V equal W's up to a unit factor each (eigenvectors are unique only up to e^{i phi};
    LAPACK builds may pick different signs)."""
    V, W = np.asarray(V.detach().numpy()), np.asarray(W.detach().numpy())
    assert V.shape == W.shape
    ph = np.sum(np.conj(V) * W, axis=-2, keepdims=True)
    ph = ph / np.abs(ph)
    np.testing.assert_allclose(V * ph, W, rtol=tol, atol=tol)


def hpd(*shape):
    a = crand(*shape)
    return a @ np.conj(np.swapaxes(a, -1, -2)) + shape[-1] * np.eye(shape[-1])


def grads_match(fn, *arrays, tol=1e-8):
    """fn(lib, *tensors) -> real scalar; strata's gradients equal torch's."""
    s = [S(a, True) for a in arrays]
    t = [T(a, True) for a in arrays]
    gs = st.autograd.grad(fn(st, *s), s, allow_unused=True)
    gt = torch.autograd.grad(fn(torch, *t), t, allow_unused=True)
    for a, b in zip(gs, gt):
        assert (a is None) == (b is None)
        if a is None:
            continue
        assert a.dtype.is_complex == b.dtype.is_complex
        close(a, b, tol)


# ---- eig / eigvals ------------------------------------------------------------------------------


@pytest.mark.parametrize("cplx", [False, True])
@pytest.mark.parametrize("shape", [(5, 5), (3, 4, 4), (2, 1, 6, 6), (1, 1)])
def test_eig_matches_torch_and_numpy(shape, cplx):
    a = crand(*shape) if cplx else RNG.standard_normal(shape)
    L, V = st.linalg.eig(S(a))
    assert L.dtype == st.complex128 and V.dtype == st.complex128
    tL, tV = torch.linalg.eig(T(a))
    # Same LAPACK algorithm (geev): same order as torch's, eigenvectors up to a unit factor.
    close(L, tL, 1e-9)
    close_up_to_phase(V, tV)
    # A V = V diag(L), unit-norm eigenvectors, and NumPy's eigenvalues as a set.
    Ln, Vn = L.numpy(), V.numpy()
    close(a @ Vn, Vn * Ln[..., None, :], 1e-9)
    close(np.linalg.norm(Vn, axis=-2), np.ones(Ln.shape), 1e-12)
    ref = np.linalg.eigvals(a)
    close(np.sort_complex(Ln.reshape(-1, shape[-1])), np.sort_complex(ref.reshape(-1, shape[-1])), 1e-9)
    close(st.linalg.eigvals(S(a)), tL, 1e-9)


def test_eig_real_input_gives_conjugate_pairs_and_float32_gives_complex64():
    a = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 2.0]])
    L = st.linalg.eigvals(S(a)).numpy()
    close(np.sort_complex(L), np.sort_complex(np.array([1j, -1j, 2.0])), 1e-12)
    for dt, ct in [(np.float32, st.complex64), (np.complex64, st.complex64)]:
        x = (crand(4, 4) if dt == np.complex64 else RNG.standard_normal((4, 4))).astype(dt)
        L, V = st.linalg.eig(S(x))
        assert L.dtype == ct and V.dtype == ct
        tL, tV = torch.linalg.eig(T(x))
        close(L, tL, 1e-4)
        close_up_to_phase(V, tV, 1e-4)


def test_eig_noncontiguous_empty_and_meta():
    a = crand(3, 6, 6)
    x = S(a).transpose(-2, -1)[:, ::2, ::2]
    close(st.linalg.eigvals(x), torch.linalg.eigvals(T(a).transpose(-2, -1)[:, ::2, ::2]), 1e-9)
    L, V = st.linalg.eig(st.zeros(2, 0, 0))
    assert tuple(L.shape) == (2, 0) and tuple(V.shape) == (2, 0, 0) and L.dtype == st.complex64
    L, V = st.linalg.eig(st.zeros(0, 3, 3, dtype=st.float64))
    assert tuple(L.shape) == (0, 3) and L.dtype == st.complex128
    L, V = st.linalg.eig(st.empty(4, 5, 5, device="meta"))
    assert L.device.type == "meta" and tuple(V.shape) == (4, 5, 5) and V.dtype == st.complex64


def test_eig_errors():
    with pytest.raises(RuntimeError, match="square"):
        st.linalg.eig(st.zeros(2, 3))
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        st.linalg.eigvals(st.zeros(3))
    with pytest.raises(RuntimeError, match="floating point or complex"):
        st.linalg.eig(st.zeros(2, 2, dtype=st.int64))
    with pytest.raises(RuntimeError, match="infs or NaNs"):
        st.linalg.eig(st.tensor([[1.0, float("nan")], [0.0, 1.0]]))
    # eigvals never hands non-finite input to LAPACK either: NaN eigenvalues for that matrix only
    x = st.stack([st.tensor([[1.0, float("inf")], [0.0, 1.0]]), st.tensor([[2.0, 0.0], [0.0, 3.0]])])
    L = st.linalg.eigvals(x)
    assert L[0].isnan().all() and sorted(L[1].real.tolist()) == [2.0, 3.0]


@pytest.mark.parametrize("cplx", [False, True])
def test_eig_gradients_match_torch(cplx):
    a = crand(2, 4, 4) if cplx else RNG.standard_normal((2, 4, 4))

    def eigvals_loss(lib, m):
        L = lib.linalg.eigvals(m)
        return (L.abs() ** 2).sum() + L.real.sum() + (L * L).imag.sum()

    def eig_loss(lib, m):
        L, V = lib.linalg.eig(m)
        return V.abs().sum() + (L.imag ** 2).sum() + L.real.sum()

    def eig_values_only_loss(lib, m):
        return lib.linalg.eig(m)[0].abs().sum()

    def eig_vectors_only_loss(lib, m):
        return (lib.linalg.eig(m)[1].abs() ** 2 * lib.arange(4.0)).sum()

    for fn in (eigvals_loss, eig_loss, eig_values_only_loss, eig_vectors_only_loss):
        grads_match(fn, a)


def test_eig_gradient_refuses_phase_dependent_loss():
    x = S(crand(3, 3), True)
    L, V = st.linalg.eig(x)
    with pytest.raises(RuntimeError, match="e\\^\\{i phi\\}"):
        V.real.sum().backward()


# ---- the LU / Cholesky family on complex input ------------------------------------------------


def test_solve_inv_det_slogdet_match_torch():
    a, b = crand(3, 5, 5), crand(3, 5, 2)
    close(st.linalg.solve(S(a), S(b)), torch.linalg.solve(T(a), T(b)))
    close(st.linalg.solve(S(a), S(b[..., 0])), torch.linalg.solve(T(a), T(b[..., 0])))
    bt = np.swapaxes(b, -1, -2)
    close(st.linalg.solve(S(a), S(bt), left=False), torch.linalg.solve(T(a), T(bt), left=False))
    close(st.linalg.inv(S(a)), np.linalg.inv(a))
    close(st.linalg.det(S(a)), np.linalg.det(a))
    sign, logabs = st.linalg.slogdet(S(a))
    ns, nl = np.linalg.slogdet(a)
    assert sign.dtype == st.complex128 and logabs.dtype == st.float64
    close(sign, ns)
    close(logabs, nl)
    # non-contiguous and complex64
    x = S(a).transpose(-2, -1)
    close(st.linalg.inv(x), np.linalg.inv(np.swapaxes(a, -1, -2)))
    a32 = a.astype(np.complex64)
    close(st.linalg.det(S(a32)), torch.linalg.det(T(a32)), 1e-4)


def test_cholesky_solve_triangular_lu_match_torch():
    h = hpd(2, 4, 4)
    close(st.linalg.cholesky(S(h)), torch.linalg.cholesky(T(h)))
    close(st.linalg.cholesky(S(h), upper=True), torch.linalg.cholesky(T(h), upper=True))
    a, b = crand(2, 4, 4), crand(2, 4, 3)
    for upper in (True, False):
        for left in (True, False):
            bb = b if left else np.swapaxes(b, -1, -2)
            close(st.linalg.solve_triangular(S(a), S(bb), upper=upper, left=left),
                  torch.linalg.solve_triangular(T(a), T(bb), upper=upper, left=left), 1e-9)
    LU, piv = st.linalg.lu_factor(S(a))
    tLU, tpiv = torch.linalg.lu_factor(T(a))
    close(LU, tLU)
    assert (piv.numpy() == tpiv.numpy()).all()
    for left in (True, False):
        for adjoint in (True, False):
            bb = b if left else np.swapaxes(b, -1, -2)
            close(st.linalg.lu_solve(LU, piv, S(bb), left=left, adjoint=adjoint),
                  torch.linalg.lu_solve(tLU, tpiv, T(bb), left=left, adjoint=adjoint), 1e-9)


def test_complex_singular_and_not_positive_definite_raise_linalgerror():
    z = np.zeros((2, 3, 3), dtype=np.complex128)
    z[0] = crand(3, 3)
    with pytest.raises(st.linalg.LinAlgError, match=r"\(Batch element 1\).*singular"):
        st.linalg.inv(S(z))
    with pytest.raises(st.linalg.LinAlgError, match="singular"):
        st.linalg.solve(S(z[1]), S(crand(3)))
    assert st.linalg.det(S(z))[1].item() == 0
    with pytest.raises(st.linalg.LinAlgError, match="positive-definite"):
        st.linalg.cholesky(S(-hpd(3, 3)))
    assert st.linalg.inv(S(np.zeros((0, 2, 2), complex))).shape == (0, 2, 2)
    assert st.linalg.det(S(np.zeros((2, 0, 0), complex))).numpy().tolist() == [1, 1]


def test_qr_svd_eigh_match_torch():
    a = crand(2, 5, 3)
    for mode in ("reduced", "complete"):
        Q, R = st.linalg.qr(S(a), mode)
        tQ, tR = torch.linalg.qr(T(a), mode)
        close(Q, tQ)  # the same Householder convention as torch's LAPACK: no phase freedom left
        close(R, tR)
    close(st.linalg.qr(S(a.transpose(0, 2, 1)))[1], torch.linalg.qr(T(a.transpose(0, 2, 1)))[1])
    for full in (False, True):
        U, s, Vh = st.linalg.svd(S(a), full_matrices=full)
        assert s.dtype == st.float64 and U.dtype == st.complex128
        close(s, np.linalg.svd(a, compute_uv=False))
        k = s.shape[-1]
        close((U[..., :k] * s.unsqueeze(-2)) @ Vh[..., :k, :], a)
        close(U.mH @ U, np.broadcast_to(np.eye(U.shape[-1]), tuple(U.shape[:-2]) + (U.shape[-1],) * 2))
    close(st.linalg.svdvals(S(a).mT), np.linalg.svd(a, compute_uv=False))
    h = crand(3, 4, 4)
    h = h + np.conj(np.swapaxes(h, -1, -2))
    for uplo in ("L", "U"):
        L, V = st.linalg.eigh(S(h), uplo)
        tL, tV = torch.linalg.eigh(T(h), uplo)
        assert L.dtype == st.float64
        close(L, tL)
        close_up_to_phase(V, tV)
        close(st.linalg.eigvalsh(S(h), uplo), tL)
    with pytest.raises(st.linalg.LinAlgError, match="non-finite"):
        st.linalg.eigh(S(np.full((2, 2), complex(np.nan, 0))))


def test_norms_cond_pinv_rank_exp_lstsq_on_complex_match_torch():
    a, h = crand(2, 5, 3), hpd(3, 3)
    for ord in ("fro", "nuc", 2, -2, 1, -1, float("inf")):
        close(st.linalg.matrix_norm(S(a), ord), torch.linalg.matrix_norm(T(a), ord))
    for ord in (2, 1, 0, float("inf"), -float("inf"), 3.5):
        close(st.linalg.vector_norm(S(a), ord, dim=-1), torch.linalg.vector_norm(T(a), ord, dim=-1))
    close(st.linalg.norm(S(a)), torch.linalg.norm(T(a)))
    for p in (None, 1, "fro", float("inf")):
        close(st.linalg.cond(S(h), p), torch.linalg.cond(T(h), p), 1e-9)
    close(st.linalg.pinv(S(a)), torch.linalg.pinv(T(a)))
    close(st.linalg.pinv(S(h), hermitian=True), torch.linalg.pinv(T(h), hermitian=True))
    low = crand(4, 2) @ crand(2, 5)
    assert st.linalg.matrix_rank(S(low)).item() == 2 == torch.linalg.matrix_rank(T(low)).item()
    close(st.linalg.matrix_exp(S(a[..., :3, :])), torch.linalg.matrix_exp(T(a[..., :3, :])), 1e-9)
    close(st.linalg.vecdot(S(a), S(a[::-1].copy())), torch.linalg.vecdot(T(a), T(a[::-1].copy())))
    b = crand(2, 5, 2)
    close(st.linalg.lstsq(S(a), S(b)).solution, torch.linalg.lstsq(T(a), T(b)).solution)
    r, tr = st.linalg.lstsq(S(a), S(b), driver="gelsd"), torch.linalg.lstsq(T(a), T(b), driver="gelsd")
    for x, y in zip((r.solution, r.residuals, r.rank, r.singular_values),
                    (tr.solution, tr.residuals, tr.rank, tr.singular_values)):
        close(x, y)


def test_eigh_svd_qr_matrix_exp_gradients_match_torch():
    x = crand(2, 4, 4)

    def eigh_loss(lib, m):
        h = m + m.mH
        L, V = lib.linalg.eigh(h)
        return (L * lib.arange(4.0)).sum() + (V.abs() ** 2 * lib.arange(4.0)).sum() + lib.linalg.eigvalsh(h).sum()
    grads_match(eigh_loss, x)
    grads_match(lambda lib, m: lib.linalg.matrix_exp(m * 0.5).abs().sum(), x, tol=1e-7)
    for shape in [(2, 4, 4), (5, 3), (3, 5)]:
        a = crand(*shape)
        k = min(shape[-2:])

        def svd_loss(lib, m):
            U, S, Vh = lib.linalg.svd(m, full_matrices=False)
            return (U.abs() ** 2 * lib.arange(float(k))).sum() + S.sum() + (U @ Vh).real.sum()

        def qr_loss(lib, m):
            Q, R = lib.linalg.qr(m)
            return (Q.abs() ** 2 * lib.arange(float(k))).sum() + (R * lib.arange(float(R.shape[-1]))).imag.sum()
        grads_match(svd_loss, a)
        grads_match(lambda lib, m: lib.linalg.svdvals(m).sum() + lib.linalg.pinv(m).abs().sum(), a, tol=1e-7)
        grads_match(qr_loss, a)


def test_phase_dependent_losses_are_refused():
    x = crand(4, 4)
    h = S(x, True)
    with pytest.raises(RuntimeError, match=r"e\^\{i phi\}"):
        st.linalg.eigh(h + h.mH)[1].real.sum().backward()
    m = S(x, True)
    with pytest.raises(RuntimeError, match=r"e\^\{i phi\}"):
        st.linalg.svd(m)[0].real.sum().backward()


def test_lu_family_gradients_match_torch():
    a, b = crand(2, 4, 4), crand(2, 4, 3)
    grads_match(lambda lib, m, r: lib.linalg.solve(m, r).abs().sum(), a, b)
    grads_match(lambda lib, m, r: (lib.linalg.solve(m, r, left=False).real ** 2).sum(), a, np.swapaxes(b, -1, -2))
    grads_match(lambda lib, m: lib.linalg.inv(m).imag.sum(), a)
    grads_match(lambda lib, m: lib.linalg.det(m).abs().sum() + lib.linalg.det(m).real.sum(), a)
    grads_match(lambda lib, m: lib.linalg.slogdet(m)[1].sum() + lib.linalg.slogdet(m)[0].imag.sum(), a)
    for upper in (True, False):
        grads_match(lambda lib, m, r: lib.linalg.solve_triangular(m, r, upper=upper).abs().sum(), a, b)
    for left in (True, False):
        for adjoint in (True, False):
            bb = b if left else np.swapaxes(b, -1, -2)

            def f(lib, m, r):
                LU, piv = lib.linalg.lu_factor(m)
                return lib.linalg.lu_solve(LU, piv, r, left=left, adjoint=adjoint).abs().sum()
            grads_match(f, a, bb)


def test_cholesky_gradient_matches_torch_through_hermitian_input():
    x = crand(2, 3, 3)

    def f(lib, m):
        h = m @ m.mH + 3 * lib.eye(3, dtype=m.dtype)
        return lib.linalg.cholesky(h).abs().sum() + lib.linalg.cholesky(h, upper=True).imag.sum()
    grads_match(f, x)


# ---- complex products: values and gradients ----------------------------------------------------


PRODUCTS = {
    "mm": lambda L, x, y, s, v: L.mm(x, y),
    "matmul_batched": lambda L, x, y, s, v: L.matmul(x.expand(2, 3, 4), y),
    "bmm": lambda L, x, y, s, v: L.bmm(x[None].expand(2, 3, 4), y[None].expand(2, 4, 2)),
    "addmm": lambda L, x, y, s, v: L.addmm(s, x, y, beta=0.5 - 1j, alpha=2 + 1j),
    "baddbmm": lambda L, x, y, s, v: L.baddbmm(s[None], x[None], y[None], beta=1j, alpha=-1.5),
    "addbmm": lambda L, x, y, s, v: L.addbmm(s, x[None].expand(2, 3, 4), y[None].expand(2, 4, 2), alpha=1j),
    "mv": lambda L, x, y, s, v: L.mv(x, v),
    "addmv": lambda L, x, y, s, v: L.addmv(s[:, 0], x, v, beta=2j, alpha=1 - 1j),
    "dot": lambda L, x, y, s, v: L.dot(x[0], v),
    "vdot": lambda L, x, y, s, v: L.vdot(x[0], v),
    "transposed_operands": lambda L, x, y, s, v: L.mm(y.mT, x.mT),
    "adjoint_operands": lambda L, x, y, s, v: L.mm(y.mH, x.mH),
}


@pytest.mark.parametrize("name", list(PRODUCTS))
def test_complex_products_and_their_gradients_match_torch(name):
    f = PRODUCTS[name]
    arrays = (crand(3, 4), crand(4, 2), crand(3, 2), crand(4))
    close(f(st, *map(S, arrays)), f(torch, *map(T, arrays)), 1e-12)
    grads_match(lambda lib, *xs: (f(lib, *xs).abs() ** 2).sum() + f(lib, *xs).imag.sum(), *arrays, tol=1e-10)


def test_complex64_products_match_torch():
    a, b = crand(33, 17).astype(np.complex64), crand(17, 9).astype(np.complex64)
    close(st.mm(S(a), S(b)), torch.mm(T(a), T(b)), 1e-4)
    close(st.vdot(S(a[0]), S(a[1])), torch.vdot(T(a[0]), T(a[1])), 1e-4)


def test_tril_triu_move_whole_complex128_elements():
    a = crand(2, 4, 5)
    close(st.triu(S(a), 1), np.triu(a, 1), 0)
    close(st.tril(S(a)), np.tril(a), 0)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_complex_gemm_layouts_match_numpy(dtype):
    tol = 1e-4 if dtype == "complex64" else 1e-12
    a, b = crand(2, 5, 7).astype(dtype), crand(2, 7, 3).astype(dtype)
    ref = a @ b
    sa, sb = S(a), S(b)
    close(st.matmul(sa, sb), ref, tol)
    # transposed (column-major) operands, strided ones, a broadcast batch
    close(st.matmul(S(np.swapaxes(a, -1, -2)).mT, S(np.swapaxes(b, -1, -2)).mT), ref, tol)
    big = S(crand(2, 10, 14).astype(dtype))
    close(st.matmul(big[:, ::2, ::2], sb), big.numpy()[:, ::2, ::2] @ b, tol)
    close(st.matmul(sa[0], sb), a[0] @ b, tol)
    # a column-major and a strided out=
    out = st.empty(2, 3, 5, dtype=getattr(st, dtype)).mT
    st.matmul(sa, sb, out=out)
    close(out, ref, tol)
    # k = 0, empty batch, addbmm's sum over the batch
    close(st.matmul(S(np.zeros((3, 0), dtype)), S(np.zeros((0, 2), dtype))), np.zeros((3, 2), dtype), 0)
    assert st.bmm(S(np.zeros((0, 2, 3), dtype)), S(np.zeros((0, 3, 4), dtype))).shape == (0, 2, 4)
    close(st.addbmm(S(np.ones((5, 3), dtype)), sa, sb, beta=1j), 1j * np.ones((5, 3)) + ref.sum(0), tol * 10)
    # vdot on strided and reversed vectors (reversed: negative strides are not handed to BLAS)
    v, w = crand(9).astype(dtype), crand(9).astype(dtype)
    close(st.vdot(S(v)[::2], S(w)[::2]), np.vdot(v[::2], w[::2]), tol)
    close(st.vdot(S(v).flip(0), S(w)), np.vdot(v[::-1], w), tol)
    close(st.dot(S(v), S(w)), np.dot(v, w), tol)


def test_large_complex64_products_match_numpy():
    # complex64 products above ~110^3 multiply-adds take four real (oneDNN) GEMMs, below one cgemm.
    a, b = crand(130, 120).astype(np.complex64), crand(120, 140).astype(np.complex64)
    ref = a.astype(np.complex128) @ b
    np.testing.assert_allclose(st.mm(S(a), S(b)).numpy(), ref, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(st.mm(S(a[:20]), S(b[:, :20])).numpy(), ref[:20, :20], rtol=1e-4, atol=1e-3)


def test_torch_level_names_on_complex_match_torch():
    h, b = hpd(2, 4, 4), crand(2, 4, 2)
    close(st.logdet(S(h)), torch.logdet(T(h)))
    for upper in (False, True):
        close(st.cholesky_solve(S(b), st.linalg.cholesky(S(h), upper=upper), upper=upper),
              torch.cholesky_solve(T(b), torch.linalg.cholesky(T(h), upper=upper), upper=upper))
    close(st.cholesky_inverse(st.linalg.cholesky(S(h))), torch.cholesky_inverse(torch.linalg.cholesky(T(h))))
    a = crand(3, 5, 3)
    close(st.svd(S(a))[2].abs(), torch.svd(T(a))[2].abs())  # torch.svd returns V = Vh^H
    A, tau = crand(2, 4, 3), 0.3 * crand(2, 2)
    close(st.linalg.householder_product(S(A), S(tau)), torch.linalg.householder_product(T(A), T(tau)))


@pytest.mark.parametrize("p", [2, 1, 3, float("inf"), 0.5])
def test_norm_op_on_complex_matches_torch(p):
    z = crand(3, 4)
    z[0, 0] = 0
    close(st.norm(S(z), p), torch.norm(T(z), p))
    close(S(z).norm(p, dim=1), T(z).norm(p, dim=1))
    grads_match(lambda lib, m: lib.norm(m, p, dim=1).sum() + lib.norm(m, p), z)
    assert st.empty(2, 3, dtype=st.complex64, device="meta").norm(dim=1).dtype == st.float32


@pytest.mark.parametrize("dtype", ["float64", "complex128", "complex64"])
@pytest.mark.parametrize("shape", [(2, 6, 4), (4, 6), (5, 5)])
@pytest.mark.parametrize("driver", ["gels", "gelsy", "gelsd", "gelss"])
def test_lstsq_drivers_on_rank_deficient_input_match_torch(dtype, shape, driver):
    # LAPACK's real and complex least-squares drivers: solution, residuals, rank and singular values as
    # torch's; rank-deficient A (last column a combination of two others) for the rank-revealing drivers
    rng = np.random.default_rng(5)
    cplx = dtype.startswith("complex")
    mk = lambda *s: rng.standard_normal(s) + (1j * rng.standard_normal(s) if cplx else 0)
    a = mk(*shape)
    if driver != "gels":
        a[..., :, -1] = a[..., :, 0] + 2 * a[..., :, 1]
    b = mk(*shape[:-1], 3)
    sdt, tdt = getattr(st, dtype), getattr(torch, dtype)
    tol = 1e-3 if dtype == "complex64" else 1e-9
    # the rounded dependent column leaves a singular value of a few eps * ||A||, close to the default rcond
    # (eps * max(m, n)), where either library's rank decision may flip with rounding: a clear threshold
    rcond = 1e-4 if dtype == "complex64" else 1e-9
    r = st.linalg.lstsq(st.tensor(a, dtype=sdt), st.tensor(b, dtype=sdt), rcond=rcond, driver=driver)
    t = torch.linalg.lstsq(torch.tensor(a, dtype=tdt), torch.tensor(b, dtype=tdt), rcond=rcond, driver=driver)
    for x, y in zip(r, t):
        assert tuple(x.shape) == tuple(y.shape) and str(x.dtype)[7:] == str(y.dtype)[6:], (x.shape, y.shape)
    # the solution is the minimum-norm one, pinv(A) B (torch's gelsy, under MKL, returned another one for
    # rank-deficient input in a few percent of runs, so the solution and gelsy's rank are checked against NumPy)
    np.testing.assert_allclose(r.solution.numpy(), np.linalg.pinv(a) @ b, rtol=tol, atol=tol)
    if driver == "gelsy":
        assert (r.rank.numpy() == np.linalg.matrix_rank(a)).all()
    for x, y in list(zip(r, t))[1:] if driver != "gelsy" else []:
        if x.numel():
            np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=tol, atol=tol)
    if dtype == "complex64":
        return
    # gradients: through QR for full rank, torch's pinv formula otherwise
    A, B = st.tensor(a, dtype=sdt, requires_grad=True), st.tensor(b, dtype=sdt, requires_grad=True)
    tA, tB = torch.tensor(a, dtype=tdt, requires_grad=True), torch.tensor(b, dtype=tdt, requires_grad=True)
    w = rng.standard_normal(r.solution.shape)
    (st.linalg.lstsq(A, B, rcond, driver=driver).solution.real * st.tensor(w)).sum().backward()
    (torch.linalg.lstsq(tA, tB, rcond, driver=driver).solution.real * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(A.grad.numpy(), tA.grad.numpy(), rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(B.grad.numpy(), tB.grad.numpy(), rtol=1e-8, atol=1e-8)
