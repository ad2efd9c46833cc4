"""torch.linalg over LAPACK, against torch and NumPy in float64: decompositions (up to the sign freedom of
their vectors), singular and ill-conditioned input, batches, empty and non-contiguous input, LinAlgError,
gradients (gradcheck and torch's own gradients), and the torch-level names. The op database
(opdb/lapack.py) covers the per-op samples, error inputs and Meta shapes."""

import math

import numpy as np
import pytest
import torch

import strata as st
from strata import autograd

RNG = np.random.default_rng(42)


def rand(*shape):
    return RNG.standard_normal(shape)


def S(a, requires_grad=False):
    t = st.tensor(np.ascontiguousarray(a))
    return t.requires_grad_() if requires_grad else t


def T(a, requires_grad=False):
    t = torch.tensor(np.ascontiguousarray(a))
    return t.requires_grad_() if requires_grad else t


def close(a, b, tol=1e-10):
    a = a.detach().numpy() if hasattr(a, "detach") else np.asarray(a)
    b = b.detach().numpy() if hasattr(b, "detach") else np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def sym(a):
    return a + np.swapaxes(a, -1, -2)


def spd(*shape):
    a = rand(*shape)
    return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])


# ---- the LAPACK behind it -------------------------------------------------------------------

def test_lapack_comes_from_openblas_and_linalgerror_is_a_runtimeerror():
    assert issubclass(st.linalg.LinAlgError, RuntimeError)
    assert st.linalg.LinAlgError.__name__ == "LinAlgError"
    with pytest.raises(st.linalg.LinAlgError):
        st.linalg.inv(st.zeros(2, 2, dtype=st.float64))


# ---- decompositions against torch -------------------------------------------------------------

@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4), (2, 3, 6, 4), (0, 3), (3, 0), (0, 2, 2)])
@pytest.mark.parametrize("full", [False, True])
def test_svd_matches_torch_up_to_signs(shape, full):
    a = rand(*shape)
    U, s, Vh = st.linalg.svd(S(a), full_matrices=full)
    tU, ts, tVh = torch.linalg.svd(T(a), full_matrices=full)
    assert U.shape == tuple(tU.shape) and Vh.shape == tuple(tVh.shape) and s.shape == tuple(ts.shape)
    close(s, ts)
    k = min(shape[-2:])
    Uk, Vk = U.numpy()[..., :, :k], Vh.numpy()[..., :k, :]
    close(Uk * s.numpy()[..., None, :] @ Vk, a)  # reconstruction
    if full:  # the completed bases are orthonormal
        close(U.mT @ U, np.broadcast_to(np.eye(shape[-2]), U.shape))
        close(Vh @ Vh.mT, np.broadcast_to(np.eye(shape[-1]), Vh.shape))
    close(np.abs(Uk), np.abs(tU.numpy()[..., :, :k]), 1e-8)  # distinct singular values: vectors up to sign


def test_svd_noncontiguous_and_torch_svd_returns_V():
    a = rand(6, 8)[::2, 1::2]  # 3x4 strided view
    U, s, V = st.svd(S(a))
    assert V.shape == (4, 3)
    close((U * s.unsqueeze(-2)) @ V.mT, a)
    U0, s0, V0 = st.svd(S(a), compute_uv=False)
    close(s0, s)
    assert float(U0.abs().sum()) == 0 and U0.shape == (3, 3)


@pytest.mark.parametrize("shape", [(4, 4), (3, 5, 5), (1, 1), (0, 0), (2, 0, 0)])
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_matches_torch(shape, uplo):
    a = rand(*shape)
    w, V = st.linalg.eigh(S(a), UPLO=uplo)  # reads one triangle only, as torch
    tw, tV = torch.linalg.eigh(T(a), UPLO=uplo)
    close(w, tw)
    close(np.abs(V.numpy()), np.abs(tV.numpy()), 1e-8)
    close(st.linalg.eigvalsh(S(a), UPLO=uplo), tw)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4), (2, 4, 3), (0, 3), (3, 0)])
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr_matches_torch(shape, mode):
    a = rand(*shape)
    Q, R = st.linalg.qr(S(a), mode=mode)
    tQ, tR = torch.linalg.qr(T(a), mode=mode)
    assert Q.shape == tuple(tQ.shape) and R.shape == tuple(tR.shape)
    close(R, tR, 1e-9)
    if mode != "r":
        close(Q, tQ, 1e-9)


def test_qr_of_noncontiguous_batch():
    a = rand(3, 5, 4).transpose(0, 2, 1)[:, ::1, ::2]  # (3, 4, 3) strided and transposed
    Q, R = st.linalg.qr(S(a))
    tQ, tR = torch.linalg.qr(torch.tensor(a))
    close(Q, tQ, 1e-9), close(R, tR, 1e-9)


def test_lu_family_matches_torch():
    a = rand(2, 4, 4)
    LU, piv = st.linalg.lu_factor(S(a))
    tLU, tpiv = torch.linalg.lu_factor(T(a))
    close(LU, tLU), np.testing.assert_array_equal(piv.numpy(), tpiv.numpy())
    assert piv.dtype is st.int32
    P, L, U = st.linalg.lu(S(a))
    tP, tL, tU = torch.linalg.lu(T(a))
    close(P, tP), close(L, tL), close(U, tU)
    close(P @ L @ U, a)
    b = rand(2, 4, 3)
    for left, adjoint in [(True, False), (True, True)]:
        close(st.linalg.lu_solve(LU, piv, S(b), left=left, adjoint=adjoint),
              torch.linalg.lu_solve(tLU, tpiv, T(b), left=left, adjoint=adjoint))
    bl = rand(2, 3, 4)
    close(st.linalg.lu_solve(LU, piv, S(bl), left=False), torch.linalg.lu_solve(tLU, tpiv, T(bl), left=False))
    close(st.lu_solve(S(b), LU, piv), torch.lu_solve(T(b), tLU, tpiv))
    # rectangular
    r = rand(3, 5)
    P, L, U = st.linalg.lu(S(r))
    close(P @ L @ U, r)


def test_householder_product_rebuilds_qr():
    a = rand(5, 3)
    tA, tau = torch.geqrf(T(a))
    close(st.linalg.householder_product(S(tA.numpy()), S(tau.numpy())), torch.linalg.householder_product(tA, tau))
    close(S(tA.numpy()).orgqr(S(tau.numpy())), torch.orgqr(tA, tau))


@pytest.mark.parametrize("driver", [None, "gels", "gelsy", "gelsd", "gelss"])
def test_lstsq_matches_torch(driver):
    a, b = rand(2, 6, 3), rand(2, 6, 2)
    r = st.linalg.lstsq(S(a), S(b), driver=driver)
    t = torch.linalg.lstsq(T(a), T(b), driver=driver)
    for name in ("solution", "residuals", "rank", "singular_values"):
        x, y = getattr(r, name), getattr(t, name)
        assert x.shape == tuple(y.shape), name
        if x.numel():
            close(x.to(st.float64), y.to(torch.float64), 1e-9)


def test_lstsq_rank_deficient_gives_minimum_norm_solution():
    a = rand(6, 4)
    a[:, 3] = a[:, 0] - a[:, 1]
    b = rand(6, 2)
    r = st.linalg.lstsq(S(a), S(b), driver="gelsd")
    assert int(r.rank) == 3
    close(r.solution, np.linalg.pinv(a) @ b, 1e-9)


# ---- singular, ill-conditioned, empty, batched ------------------------------------------------

def test_singular_inputs_raise_linalgerror_with_torch_wording():
    z = np.zeros((3, 3))
    with pytest.raises(st.linalg.LinAlgError, match="The solver failed because the input matrix is singular"):
        st.linalg.solve(S(z), S(rand(3)))
    batch = np.stack([np.eye(3), z])
    with pytest.raises(st.linalg.LinAlgError, match=r"\(Batch element 1\): The diagonal element 1 is zero"):
        st.linalg.inv(S(batch))
    with pytest.raises(st.linalg.LinAlgError, match="not positive-definite"):
        st.linalg.cholesky(S(-np.eye(3)))
    with pytest.raises(st.linalg.LinAlgError, match=r"U\[1,1\] is zero"):
        st.linalg.lu_factor(S(z))
    with pytest.raises(RuntimeError):  # LinAlgError is caught as RuntimeError, as in torch
        st.inverse(S(z))
    # no error, no NaN: det and slogdet of a singular matrix
    assert float(st.linalg.det(S(z))) == 0.0
    sign, logabs = st.linalg.slogdet(S(z))
    assert float(sign) == 0.0 and float(logabs) == -math.inf
    assert math.isnan(float(st.logdet(S(-np.eye(3)))))


def test_ex_variants_report_info_instead_of_raising():
    z = np.stack([np.eye(2), np.zeros((2, 2))])
    inv, info = st.linalg.inv_ex(S(z))
    assert info.tolist() == [0, 1] and info.dtype is st.int32
    close(inv[0], np.eye(2))
    L, info = st.linalg.cholesky_ex(S(np.stack([np.eye(2), -np.eye(2)])))
    t_info = torch.linalg.cholesky_ex(T(np.stack([np.eye(2), -np.eye(2)]))).info
    assert info.tolist() == t_info.tolist()
    res, info = st.linalg.solve_ex(S(z), S(np.ones((2, 2, 1))))
    assert info.tolist() == [0, 1]
    close(res[0], np.ones((2, 1)))
    with pytest.raises(st.linalg.LinAlgError):
        st.linalg.inv_ex(S(z), check_errors=True)


def test_ill_conditioned_solve_is_as_accurate_as_numpy():
    n = 9
    hilbert = 1.0 / (np.arange(n)[:, None] + np.arange(n)[None, :] + 1)  # cond ~ 5e11
    x_true = np.ones((n, 1))
    b = hilbert @ x_true
    ours = st.linalg.solve(S(hilbert), S(b)).numpy()
    ref = np.linalg.solve(hilbert, b)
    err, err_ref = np.abs(ours - x_true).max(), np.abs(ref - x_true).max()
    assert err <= max(10 * err_ref, 1e-12), (err, err_ref)
    close(st.linalg.cond(S(hilbert)), np.linalg.cond(hilbert), 1e-4)
    assert int(st.linalg.matrix_rank(S(hilbert))) == np.linalg.matrix_rank(hilbert)


@pytest.mark.parametrize("fn", ["inv", "det", "slogdet", "cholesky", "eigvalsh", "svdvals", "qr", "matrix_exp"])
def test_empty_and_zero_batch(fn):
    for shape in [(0, 0), (0, 3, 3), (2, 0, 0)]:
        a = np.zeros(shape)
        ours = getattr(st.linalg, fn)(S(a))
        ref = getattr(torch.linalg, fn)(T(a))
        for o, r in zip(ours if isinstance(ours, tuple) else [ours], ref if isinstance(ref, tuple) else [ref]):
            assert o.shape == tuple(r.shape), (fn, shape)
            if o.numel():
                close(o, r)


def test_batched_small_matrices_match_loop_and_thread_count():
    a = rand(300, 6, 6) + 3 * np.eye(6)
    b = rand(300, 6, 2)
    old = st.get_num_threads()
    try:
        st.set_num_threads(1)
        one = st.linalg.solve(S(a), S(b)).numpy()
        st.set_num_threads(max(2, old))
        many = st.linalg.solve(S(a), S(b)).numpy()
    finally:
        st.set_num_threads(old)
    np.testing.assert_array_equal(one, many)
    close(many, np.linalg.solve(a, b))
    c = spd(300, 5, 5)
    close(st.linalg.cholesky(S(c)), np.linalg.cholesky(c))
    close(st.linalg.det(S(a)), np.linalg.det(a), 1e-8)


def test_bad_inputs_name_op_shapes_and_dtypes():
    with pytest.raises(RuntimeError, match=r"linalg.solve: Incompatible shapes of A and B .* \(3x3 and 2x1\)"):
        st.linalg.solve(S(rand(3, 3)), S(rand(2, 1)))
    with pytest.raises(RuntimeError, match=r"linalg.inv: Expected a floating point tensor .* Got int64"):
        st.linalg.inv(st.ones(2, 2, dtype=st.int64))
    with pytest.raises(RuntimeError, match="float16"):
        st.linalg.cholesky(st.ones(2, 2, dtype=st.float16))
    with pytest.raises(RuntimeError, match="same dtype"):
        st.linalg.solve_triangular(S(rand(2, 2)), st.ones(2, 1), upper=True)
    with pytest.raises(st.linalg.LinAlgError, match="non-finite"):
        st.linalg.svd(S(np.full((2, 2), np.nan)))


# ---- gradients -----------------------------------------------------------------------------

def gradcheck(fn, *arrays):
    leaves = tuple(S(a, True) for a in arrays)
    assert autograd.gradcheck(fn, leaves, eps=1e-6, atol=1e-6, rtol=1e-4)


def test_gradcheck_cholesky_and_eigh_through_symmetric_inputs():
    a = spd(3, 3)
    gradcheck(lambda x: st.linalg.cholesky((x + x.mT) / 2), a)
    gradcheck(lambda x: st.linalg.cholesky((x + x.mT) / 2, upper=True), a)
    b = sym(rand(2, 3, 3))
    gradcheck(lambda x: st.linalg.eigvalsh((x + x.mT) / 2), b)
    # eigenvectors up to sign: a sign-invariant function of them
    gradcheck(lambda x: st.linalg.eigh((x + x.mT) / 2).eigenvectors.abs(), b)


def test_gradcheck_svd_gauge_invariant_functions():
    for shape in [(4, 3), (3, 4), (3, 3)]:
        a = rand(*shape)
        gradcheck(lambda x: st.linalg.svdvals(x), a)
        gradcheck(lambda x: (lambda r: (r.U * r.S.unsqueeze(-2)) @ r.Vh)(st.linalg.svd(x, full_matrices=False)), a)
        gradcheck(lambda x: (lambda r: r.U.abs() + 0 * r.S.sum())(st.linalg.svd(x, full_matrices=False)), a)
        gradcheck(lambda x: st.linalg.svd(x, full_matrices=False).Vh.abs(), a)


def test_gradcheck_qr_solve_and_friends():
    gradcheck(lambda x: st.linalg.qr(x), rand(4, 3))
    gradcheck(lambda x: st.linalg.qr(x), rand(3, 5))
    gradcheck(lambda x: st.linalg.qr(x, mode="complete"), rand(3, 3))
    A = rand(3, 3) + 3 * np.eye(3)
    gradcheck(lambda x, y: st.linalg.solve(x, y, left=False), A, rand(2, 3))
    gradcheck(lambda x, y: st.linalg.solve(x, y), rand(2, 3, 3) + 3 * np.eye(3), rand(3))
    gradcheck(lambda x, y: st.linalg.solve_triangular(x, y, upper=False, left=False, unitriangular=True), A,
              rand(2, 3))
    gradcheck(lambda x: st.linalg.matrix_exp(x), rand(3, 3) * 3)
    gradcheck(lambda x: st.linalg.pinv(x), rand(4, 3))
    gradcheck(lambda x, y: st.linalg.lstsq(x, y).solution, rand(5, 3), rand(5, 2))
    gradcheck(lambda x, y: st.linalg.lstsq(x, y).solution, rand(2, 4), rand(2, 1))
    gradcheck(lambda x: st.linalg.matrix_norm(x, "nuc"), rand(3, 4))
    gradcheck(lambda x: st.logdet(x @ x.mT), rand(3, 3))


@pytest.mark.parametrize("name", ["cholesky", "eigh", "svd", "qr", "inv", "det", "slogdet", "pinv", "matrix_exp"])
def test_gradients_match_torch(name):
    a = rand(4, 4)
    inputs = {"cholesky": spd(4, 4), "eigh": sym(a)}.get(name, a)

    def loss(mod, x):
        la = mod.linalg
        if name == "cholesky":
            return (la.cholesky(x) * weights(mod, 4, 4)).sum()
        if name == "eigh":
            w, v = la.eigh(x)
            return (w * weights(mod, 4)).sum() + ((v * v) * weights(mod, 4, 4)).sum()
        if name == "svd":
            u, s, vh = la.svd(x)
            return (s * weights(mod, 4)).sum() + ((u * u) * weights(mod, 4, 4)).sum() + (vh.abs()).sum()
        if name == "qr":
            q, r = la.qr(x)
            return (q * weights(mod, 4, 4)).sum() + (r * weights(mod, 4, 4)).sum()
        if name == "slogdet":
            return la.slogdet(x)[1] * 2
        return (getattr(la, name)(x) * (weights(mod, 4, 4) if name != "det" else 1.0)).sum()

    xs, xt = S(inputs, True), T(inputs, True)
    loss(st, xs).backward()
    loss(torch, xt).backward()
    close(xs.grad, xt.grad, 1e-8)


def weights(mod, *shape):
    w = np.arange(1, np.prod(shape) + 1, dtype=np.float64).reshape(shape) / np.prod(shape)
    return mod.tensor(w)


@pytest.mark.parametrize("rank", [0, 1, 2])
def test_det_gradient_at_singular_matrices_matches_torch(rank):
    # rank-deficient 3x3 matrices (in a batch with an invertible one): finite gradients, as torch's
    u, v = rand(3, rank), rand(rank, 3)
    a = np.stack([u @ v, rand(3, 3)])
    xs, xt = S(a, True), T(a, True)
    w = rand(2)
    (st.linalg.det(xs) * S(w)).sum().backward()
    (torch.linalg.det(xt) * T(w)).sum().backward()
    assert np.isfinite(xs.grad.numpy()).all()
    close(xs.grad, xt.grad, 1e-9)


# ---- the rest of the surface ----------------------------------------------------------------

def test_norms_match_torch():
    a = rand(2, 3, 4)
    for ord_ in ["fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf]:
        close(st.linalg.matrix_norm(S(a), ord_), torch.linalg.matrix_norm(T(a), ord_))
        close(st.linalg.matrix_norm(S(a), ord_, dim=(0, 2), keepdim=True),
              torch.linalg.matrix_norm(T(a), ord_, dim=(0, 2), keepdim=True))
    for ord_ in [2, 1, 0, 3, math.inf, -math.inf, 0.5]:
        close(st.linalg.vector_norm(S(a), ord_), torch.linalg.vector_norm(T(a), ord_))
        close(st.linalg.vector_norm(S(a), ord_, dim=1), torch.linalg.vector_norm(T(a), ord_, dim=1))
    close(st.linalg.norm(S(a)), torch.linalg.norm(T(a)))
    close(st.linalg.norm(S(a[0]), "nuc"), torch.linalg.norm(T(a[0]), "nuc"))
    close(st.linalg.norm(S(a[0, 0]), 3), torch.linalg.norm(T(a[0, 0]), 3))
    close(st.linalg.norm(S(a), dim=(1, 2)), torch.linalg.norm(T(a), dim=(1, 2)))
    for p in [None, 1, -1, 2, -2, "fro", "nuc", math.inf]:
        close(st.linalg.cond(S(a[:, :, :3])), torch.linalg.cond(T(a[:, :, :3])), 1e-8)


def test_rank_pinv_power_exp_multidot_vecdot():
    a = rand(5, 4)
    a[:, 3] = a[:, 0]
    assert st.linalg.matrix_rank(S(a)).item() == torch.linalg.matrix_rank(T(a)).item() == 3
    close(st.linalg.pinv(S(a)), torch.linalg.pinv(T(a)), 1e-9)
    close(st.pinverse(S(a)), torch.pinverse(T(a)), 1e-9)
    s = sym(rand(4, 4))
    close(st.linalg.pinv(S(s), hermitian=True), torch.linalg.pinv(T(s), hermitian=True), 1e-9)
    m = rand(2, 3, 3)
    for n in (-3, 0, 1, 4):
        close(st.linalg.matrix_power(S(m), n), torch.linalg.matrix_power(T(m), n), 1e-9)
        close(S(m).matrix_power(n), torch.matrix_power(T(m), n), 1e-9)
    for scale in (0.1, 1, 20):
        close(st.linalg.matrix_exp(S(m * scale)), torch.linalg.matrix_exp(T(m * scale)), 1e-9)
    close(st.matrix_exp(S(m)), torch.matrix_exp(T(m)), 1e-12)
    ts = [rand(3, 10), rand(10, 2), rand(2, 8)]
    close(st.linalg.multi_dot([S(t) for t in ts]), torch.linalg.multi_dot([T(t) for t in ts]))
    close(st.linalg.vecdot(S(ts[0]), S(ts[0])), torch.linalg.vecdot(T(ts[0]), T(ts[0])))
    close(st.chain_matmul(*[S(t) for t in ts]), torch.linalg.multi_dot([T(t) for t in ts]))


def test_torch_level_names_and_methods():
    a = rand(3, 3) + 3 * np.eye(3)
    c = spd(3, 3)
    b = rand(3, 2)
    close(st.inverse(S(a)), torch.inverse(T(a)))
    close(S(a).inverse(), torch.inverse(T(a)))
    close(S(a).det(), torch.det(T(a)))
    close(S(c).logdet(), torch.logdet(T(c)))
    close(S(a).slogdet()[1], torch.slogdet(T(a))[1])
    L = st.cholesky(S(c))
    close(L, torch.cholesky(T(c)))
    close(S(c).cholesky(upper=True), torch.linalg.cholesky(T(c), upper=True))
    close(st.cholesky_solve(S(b), L), torch.cholesky_solve(T(b), T(L.numpy())))
    close(S(b).cholesky_solve(L), torch.cholesky_solve(T(b), T(L.numpy())))
    close(st.cholesky_solve(S(b), L.mT, upper=True), torch.cholesky_solve(T(b), T(L.numpy().T), upper=True))
    close(st.cholesky_inverse(L), torch.cholesky_inverse(T(L.numpy())))
    q, r = st.qr(S(rand(4, 3)), some=False)
    assert q.shape == (4, 4) and r.shape == (4, 3)
    x, cloned = st.triangular_solve(S(b), S(np.triu(a)), transpose=True)
    tx, _ = torch.triangular_solve(T(b), T(np.triu(a)), transpose=True)
    close(x, tx)
    LU, piv = st.lu(S(a))
    P, Lf, U = st.lu_unpack(LU, piv)
    close(P @ Lf @ U, a)


def test_orthogonal_init_uses_qr():
    w = st.empty(6, 4)
    st.nn.init.orthogonal_(w, gain=2.0)
    close((w.mT @ w).double() / 4, np.eye(4), 1e-5)
    w = st.empty(3, 2, 4)  # rows < cols after flattening
    st.nn.init.orthogonal_(w)
    flat = w.reshape(3, 8).double()
    close(flat @ flat.mT, np.eye(3), 1e-5)


def test_meta_shapes_match_torch():
    for fn, args in [("svd", ((5, 3),)), ("qr", ((3, 5),)), ("eigh", ((2, 4, 4),)), ("cholesky", ((3, 3),)),
                     ("solve", ((2, 3, 3), (3, 2))), ("inv", ((3, 3),)), ("slogdet", ((2, 3, 3),)),
                     ("lu_factor", ((3, 5),)), ("svdvals", ((2, 3, 5),)), ("pinv", ((5, 3),)),
                     ("householder_product", ((4, 3), (2,)))]:
        ours = getattr(st.linalg, fn)(*[st.empty(*s, dtype=st.float64, device="meta") for s in args])
        ref = getattr(torch.linalg, fn)(*[torch.empty(*s, dtype=torch.float64, device="meta") for s in args])
        ours = ours if isinstance(ours, tuple) else (ours,)
        ref = ref if isinstance(ref, tuple) else (ref,)
        for o, r in zip(ours, ref):
            assert o.device.type == "meta" and o.shape == tuple(r.shape), fn
            assert str(o.dtype).split(".")[-1] == str(r.dtype).split(".")[-1], fn


@pytest.mark.parametrize("layout", ["row-major", "column-major", "broadcast", "strided"])
@pytest.mark.parametrize("upper,left", [(True, True), (False, True), (True, False)])
def test_solve_triangular_layouts_and_zero_diagonal(layout, upper, left):
    a = rand(2, 4, 4) + 4 * np.eye(4)
    b = rand(2, 4, 3) if left else rand(2, 3, 4)
    sa = {"row-major": S(a), "column-major": S(a.transpose(0, 2, 1).copy()).mT,
          "broadcast": S(a[:1]), "strided": S(np.repeat(a, 2, axis=-1))[..., ::2]}[layout]
    ta = torch.tensor(sa.numpy())
    close(st.linalg.solve_triangular(sa, S(b), upper=upper, left=left),
          torch.linalg.solve_triangular(ta, T(b), upper=upper, left=left))
    z = sa.clone()
    z[..., 1, 1] = 0  # singular: inf/nan as torch, no error
    tz = torch.tensor(z.numpy())
    ours = st.linalg.solve_triangular(z, S(b), upper=upper, left=left).numpy()
    ref = torch.linalg.solve_triangular(tz, T(b), upper=upper, left=left).numpy()
    np.testing.assert_array_equal(np.isfinite(ours), np.isfinite(ref))
    np.testing.assert_allclose(ours[np.isfinite(ours)], ref[np.isfinite(ref)], rtol=1e-10)


def test_lu_solve_reuses_factors_in_place_and_copies_otherwise():
    a = rand(3, 5, 5) + 5 * np.eye(5)
    LU, piv = st.linalg.lu_factor(S(a))
    b = rand(3, 5, 2)
    ref = np.linalg.solve(a, b)
    close(st.linalg.lu_solve(LU, piv, S(b)), ref)
    close(st.linalg.lu_solve(LU.contiguous(), piv, S(b)), ref)  # row-major copy of the factors
    close(st.linalg.lu_solve(LU[:1], piv[:1], S(b)), np.linalg.solve(a[:1], b))  # broadcast over B's batch


@pytest.mark.parametrize("case", ["identity", "repeated", "graded", "zero", "tiny", "huge", "float32"])
def test_eigh_small_matrices_reconstruct(case):
    # orders up to 64 take the tridiagonal-QL kernel, larger ones syevd: both must give an orthonormal basis
    for n in (1, 2, 5, 8, 64, 65):
        q, _ = np.linalg.qr(rand(n, n))
        vals = {"identity": np.ones(n), "repeated": np.array([1.0, 1.0, 2.0] * n)[:n],
                "graded": 10.0 ** np.arange(-8, -8 + 3 * n, 3)[:n], "zero": np.zeros(n),
                "tiny": 1e-300 * np.arange(1, n + 1), "huge": 1e300 * np.arange(-n, n, 2), "float32": np.arange(n, dtype=np.float64)}[case]
        a = (q * vals) @ q.T
        a = (a + a.T) / 2
        dt = st.float32 if case == "float32" else st.float64
        w, V = st.linalg.eigh(st.tensor(a, dtype=dt))
        w, V = w.double().numpy(), V.double().numpy()
        tol = 1e-5 if case == "float32" else 1e-12
        scale = max(np.abs(vals).max(), 1e-300)
        np.testing.assert_allclose(w, np.sort(vals), rtol=0, atol=tol * scale * 10 * max(1, n // 8))
        np.testing.assert_allclose(V.T @ V, np.eye(n), atol=tol * 10 * max(1, n // 8))
        np.testing.assert_allclose((V * w) @ V.T, a, atol=tol * scale * 10 * max(1, n // 8))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_batches_of_small_matrices_match_torch(dtype, uplo):
    # the QL kernel (n <= 64) on batches, the unread triangle holding other values, against torch's syevd
    eps = np.finfo(dtype).eps
    for shape in [(50, 3, 3), (20, 8, 8), (6, 17, 17), (3, 33, 33), (2, 64, 64), (70, 70)]:
        n = shape[-1]
        a = rand(*shape).astype(dtype)
        tw, tV = torch.linalg.eigh(T(a), UPLO=uplo)
        w, V = st.linalg.eigh(S(a), UPLO=uplo)
        sym = np.tril(a) + np.swapaxes(np.tril(a, -1), -1, -2) if uplo == "L" else \
            np.triu(a) + np.swapaxes(np.triu(a, 1), -1, -2)
        norm = np.abs(sym).max() * n
        w64, V64 = w.numpy().astype(np.float64), V.numpy().astype(np.float64)
        assert w.dtype == S(a).dtype and V.shape == shape
        np.testing.assert_allclose(w64, tw.numpy(), rtol=0, atol=20 * eps * norm)
        np.testing.assert_allclose(np.swapaxes(V64, -1, -2) @ V64, np.broadcast_to(np.eye(n), shape),
                                   atol=20 * eps * n)
        np.testing.assert_allclose((V64 * w64[..., None, :]) @ np.swapaxes(V64, -1, -2), sym, atol=20 * eps * norm)
        assert (np.diff(w64, axis=-1) >= 0).all()
        np.testing.assert_allclose(st.linalg.eigvalsh(S(a), UPLO=uplo).numpy(), w.numpy(), rtol=0,
                                   atol=20 * eps * norm)


def test_gaussian_process_marginal_likelihood_runs_unchanged_and_matches_torch():
    x = rand(20, 2)
    y = rand(20)

    def nll(mod, log_ls, log_noise):
        X, Y = mod.tensor(x), mod.tensor(y)
        d2 = ((X.unsqueeze(1) - X.unsqueeze(0)) ** 2).sum(-1)
        K = mod.exp(-0.5 * d2 / mod.exp(2 * log_ls)) + mod.exp(log_noise) * mod.eye(20, dtype=mod.float64)
        L = mod.linalg.cholesky(K)
        alpha = mod.cholesky_solve(Y.unsqueeze(-1), L).squeeze(-1)
        return 0.5 * (Y @ alpha) + mod.log(mod.diagonal(L)).sum() + 10 * math.log(2 * math.pi)

    ps = [st.tensor(0.3, dtype=st.float64, requires_grad=True), st.tensor(-1.0, dtype=st.float64, requires_grad=True)]
    pt = [torch.tensor(0.3, dtype=torch.float64, requires_grad=True),
          torch.tensor(-1.0, dtype=torch.float64, requires_grad=True)]
    ls, lt = nll(st, *ps), nll(torch, *pt)
    ls.backward(), lt.backward()
    close(ls, lt)
    for a, b in zip(ps, pt):
        close(a.grad, b.grad, 1e-9)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n", [1, 4, 7, 16])
def test_cholesky_batches_of_small_matrices_match_torch(dtype, n):
    # orders <= 16 factor several matrices per vector instruction; a batch of 37 leaves a remainder, and
    # matrices that are not positive-definite (failing at different minors) sit among good ones
    a = rand(37, n, n)
    a = a @ np.swapaxes(a, -1, -2) + n * np.eye(n)
    for i, j in [(3, 0), (9, n - 1), (20, n // 2), (36, n - 1)]:
        a[i, j, j] = -1.0
    a[5] = np.triu(a[5], 1) * 7 + np.tril(a[5])  # the upper triangle is not read
    a = a.astype(dtype)
    L, info = st.linalg.cholesky_ex(S(a))
    tL, tinfo = torch.linalg.cholesky_ex(T(a))
    np.testing.assert_array_equal(info.numpy(), tinfo.numpy())
    ok = tinfo.numpy() == 0
    eps = np.finfo(dtype).eps
    np.testing.assert_allclose(L.numpy()[ok], tL.numpy()[ok], rtol=0, atol=50 * eps * n)
    bad = np.nonzero(~ok)[0]
    for i in bad:  # the factor up to the failing minor, as potf2 leaves it
        k = info.numpy()[i] - 1
        np.testing.assert_allclose(L.numpy()[i][:k, :k], np.linalg.cholesky(a[i][:k, :k].astype(np.float64)),
                                   rtol=0, atol=50 * eps * n)
        assert (np.triu(L.numpy()[i], 1) == 0).all()
    U = st.linalg.cholesky_ex(S(a), upper=True).L
    np.testing.assert_allclose(U.numpy()[ok], np.swapaxes(tL.numpy(), -1, -2)[ok], rtol=0, atol=50 * eps * n)


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
@pytest.mark.parametrize("shape,k", [((5, 3), 3), ((4, 4), 2), ((2, 6, 3), 3), ((3, 3), 1)])
def test_householder_product_gradients_match_torch(dtype, shape, k):
    rng = np.random.default_rng(3)
    cplx = dtype == "complex128"
    a = rng.standard_normal(shape) + (1j * rng.standard_normal(shape) if cplx else 0)
    tau = rng.standard_normal(shape[:-2] + (k,)) + (1j * rng.standard_normal(shape[:-2] + (k,)) if cplx else 0)
    sdt, tdt = getattr(st, dtype), getattr(torch, dtype)
    A, tA = st.tensor(a, dtype=sdt, requires_grad=True), torch.tensor(a, dtype=tdt, requires_grad=True)
    tau_s, tau_t = st.tensor(tau, dtype=sdt, requires_grad=True), torch.tensor(tau, dtype=tdt, requires_grad=True)
    Q, tQ = st.linalg.householder_product(A, tau_s), torch.linalg.householder_product(tA, tau_t)
    close(Q.detach(), tQ.detach(), 1e-12)
    w = rng.standard_normal(Q.shape)
    (Q.real * st.tensor(w) + (Q.imag * st.tensor(w * 2) if cplx else 0)).sum().backward()
    (tQ.real * torch.tensor(w) + (tQ.imag * torch.tensor(w * 2) if cplx else 0)).sum().backward()
    close(A.grad, tA.grad, 1e-11)
    close(tau_s.grad, tau_t.grad, 1e-11)
    fn = st.linalg.householder_product
    assert autograd.gradcheck(fn, (A, tau_s)) and autograd.gradgradcheck(fn, (A, tau_s))


def test_householder_product_without_reflectors_is_the_identity_with_a_graph():
    A = st.tensor(rand(4, 3), requires_grad=True)
    Q = st.linalg.householder_product(A, st.zeros(0, dtype=st.float64, requires_grad=True))
    assert Q.requires_grad
    close(Q.detach(), np.eye(4, 3))
