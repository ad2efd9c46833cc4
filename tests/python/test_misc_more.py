"""einsum and the structural, counting and index ops of decl/misc_more.def,
compared with PyTorch: values, dtypes, shapes, gradients, edge cases (empty,
0-d, non-contiguous, negative dims) and error messages."""

import numpy as np
import pytest

import strata as st

torch = pytest.importorskip("torch")


def S(t, grad=False):
    """strata tensor from a torch tensor (same values, dtype, shape)."""
    s = st.from_numpy(t.detach().numpy().copy())
    return s.requires_grad_() if grad else s


def N(x):
    return x.detach().numpy() if isinstance(x, torch.Tensor) else x.numpy()


def same(s, t, tol=1e-6):
    if isinstance(t, (tuple, list)):
        assert len(s) == len(t)
        for a, b in zip(s, t):
            same(a, b, tol)
        return
    assert tuple(s.shape) == tuple(t.shape), (s.shape, t.shape)
    assert str(s.dtype).split(".")[1] == str(t.dtype).split(".")[1], (s.dtype, t.dtype)
    if t.dtype.is_floating_point:
        np.testing.assert_allclose(N(s), N(t), rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(N(s), N(t))


def check_grad(fn_st, fn_t, *ts, tol=1e-6):
    """Forward and backward of fn on both libraries with the same float64 inputs and upstream gradient."""
    sts = [S(t, grad=True) for t in ts]
    tts = [t.detach().clone().requires_grad_() for t in ts]
    ro, to = fn_st(*sts), fn_t(*tts)
    same(ro, to, tol)
    g = torch.randn(to.shape, dtype=to.dtype)
    ro.backward(S(g))
    to.backward(g)
    for a, b in zip(sts, tts):
        np.testing.assert_allclose(N(a.grad), N(b.grad), rtol=tol, atol=tol)


def raises_like(fn_st, fn_t, exc=RuntimeError):
    with pytest.raises(Exception) as te:
        fn_t()
    with pytest.raises(exc):
        fn_st()
    assert isinstance(te.value, exc)


def rnd(*shape, dtype=torch.float64):
    return torch.randn(shape, dtype=torch.float64).to(dtype)


# ---- einsum ------------------------------------------------------------------------------

EINSUM_CASES = [
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ii->", [(4, 4)]),
    ("ii->i", [(4, 4)]),
    ("ii", [(3, 3)]),
    ("ij->ji", [(3, 4)]),
    ("ji", [(2, 3)]),
    ("i,j->ij", [(3,), (4,)]),
    ("...ij,...jk", [(2, 3, 4), (2, 4, 5)]),
    ("...ij,...jk->...ik", [(5, 2, 3, 4), (2, 4, 5)]),
    ("...ij->ij", [(5, 3, 4)]),
    ("ij,jk,kl->il", [(3, 4), (4, 5), (5, 6)]),
    ("ij,jk,kl", [(3, 4), (4, 5), (5, 6)]),
    ("ba,ac,cd,db->", [(2, 3), (3, 4), (4, 5), (5, 2)]),
    ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
    ("i,i->", [(5,), (5,)]),
    ("ij->", [(3, 4)]),
    ("bihd,bjhd->bhij", [(2, 5, 3, 4), (2, 6, 3, 4)]),
    ("bhij,bjhd->bihd", [(2, 3, 5, 6), (2, 6, 3, 4)]),
    ("iij->j", [(3, 3, 4)]),
    ("a,b,c->abc", [(2,), (3,), (4,)]),
    (",->", [(), ()]),
    ("i,->i", [(3,), ()]),
    ("ab,ab->a", [(3, 4), (3, 4)]),
    ("ab,cb->ac", [(0, 4), (3, 4)]),
    ("ij,jk->ik", [(3, 0), (0, 4)]),
    ("...,...->...", [(2, 3), (3,)]),
    ("ij,ij,ij->i", [(3, 4), (3, 4), (3, 4)]),
    ("Ab,bA->", [(3, 4), (4, 3)]),
    ("ij,kj->ik", [(3, 1), (2, 4)]),
    (" i j , j k -> i k ", [(2, 3), (3, 4)]),
]


@pytest.mark.parametrize("eq,shapes", EINSUM_CASES, ids=[c[0] for c in EINSUM_CASES])
def test_einsum_matches_torch_with_gradients(eq, shapes):
    ts = [rnd(*s) for s in shapes]
    check_grad(lambda *a: st.einsum(eq, *a), lambda *a: torch.einsum(eq, *a), *ts, tol=1e-10)


def test_einsum_forms_dtypes_and_noncontiguous():
    a, b = rnd(4, 3).t(), rnd(4, 5)  # a is a transposed (non-contiguous) view
    same(st.einsum("ij,jk->ik", [S(a), S(b)]), torch.einsum("ij,jk->ik", [a, b]), 1e-10)
    same(st.einsum(S(a), [0, 1], S(b), [1, 2], [0, 2]), torch.einsum(a, [0, 1], b, [1, 2], [0, 2]), 1e-10)
    same(st.einsum(S(a), [0, Ellipsis]), torch.einsum(a, [0, Ellipsis]), 1e-10)
    x, y = torch.randint(-3, 4, (2, 3)), torch.randint(-3, 4, (3, 4))
    same(st.einsum("ij,jk->ik", S(x), S(y)), torch.einsum("ij,jk->ik", x, y))
    f, g = rnd(2, 3, dtype=torch.float32), rnd(3, dtype=torch.float32)
    same(st.einsum("ij,j->i", S(f), S(g)), torch.einsum("ij,j->i", f, g), 1e-5)
    # The path argument (pairs of operand positions) gives the same result.
    ts = [rnd(3, 4), rnd(4, 5), rnd(5, 6)]
    r = st._C._ops.einsum("ij,jk,kl->il", [S(t) for t in ts], path=[1, 2, 0, 1])
    same(r, torch.einsum("ij,jk,kl->il", *ts), 1e-10)


def test_einsum_meta():
    a = st.empty(2, 3, 4, device="meta")
    b = st.empty(2, 4, 5, device="meta")
    r = st.einsum("bij,bjk->bik", a, b)
    assert r.device.type == "meta" and tuple(r.shape) == (2, 3, 5)


@pytest.mark.parametrize("eq,shapes,match", [
    ("ij,jk", [(2, 3), (4, 5)], "does not broadcast"),
    ("ij", [(2, 3), (3, 3)], "more operands"),
    ("ij,jk", [(2, 3)], "fewer operands"),
    ("ijk", [(2, 3)], "number of subscripts"),
    ("i1", [(2, 2)], "invalid subscript"),
    ("ij->kk", [(2, 3)], "does not appear"),
    ("ij->ii", [(2, 2)], "more than once"),
    ("ii->i", [(2, 3)], "sizes don't match"),
    ("i.j", [(2, 3)], "not part of any ellipsis"),
])
def test_einsum_errors(eq, shapes, match):
    ts = [rnd(*s) for s in shapes]
    with pytest.raises(RuntimeError, match=match):
        torch.einsum(eq, *ts)
    with pytest.raises(RuntimeError, match=match):
        st.einsum(eq, *[S(t) for t in ts])
    with pytest.raises(RuntimeError, match="same dtype"):
        st.einsum("i,i", S(rnd(3)), S(rnd(3, dtype=torch.float32)))


# ---- contractions ---------------------------------------------------------------------------

def test_tensordot():
    a, b = rnd(3, 4, 5), rnd(4, 5, 6)
    for dims in (2, ([1, 2], [0, 1]), ([2, 1], [1, 0]), 0, ([-1], [1])):
        check_grad(lambda x, y: st.tensordot(x, y, dims), lambda x, y: torch.tensordot(x, y, dims), a, b, tol=1e-10)
    same(st.tensordot(S(a), S(b), torch.tensor([[1, 2], [0, 1]])), torch.tensordot(a, b, [[1, 2], [0, 1]]), 1e-10)
    with pytest.raises(RuntimeError, match="contracted dimensions need to match"):
        st.tensordot(S(a), S(b), ([0], [0]))
    with pytest.raises(RuntimeError, match="same length"):
        st.tensordot(S(a), S(b), ([0, 1], [0]))


def test_addr_kron_block_diag_trace():
    m, u, v = rnd(3, 4), rnd(3), rnd(4)
    check_grad(lambda x, y, z: st.addr(x, y, z, beta=0.5, alpha=2), lambda x, y, z: torch.addr(x, y, z, beta=0.5,
               alpha=2), m, u, v, tol=1e-10)
    check_grad(lambda x, y, z: st.addr(x, y, z), lambda x, y, z: torch.addr(x, y, z), rnd(4), u, v, tol=1e-10)
    # outer (which addr once used) records the path back to both vectors.
    check_grad(st.outer, torch.outer, u, v, tol=1e-10)
    nan = torch.full((3, 4), float("nan"), dtype=torch.float64)
    same(st.addr(S(nan), S(u), S(v), beta=0), torch.addr(nan, u, v, beta=0), 1e-10)
    x = S(m)
    x.addr_(S(u), S(v))
    same(x, m.clone().addr_(u, v), 1e-10)
    with pytest.raises(RuntimeError, match="1-D"):
        st.addr(S(m), S(m), S(v))
    check_grad(st.kron, torch.kron, rnd(2, 3), rnd(3, 2), tol=1e-10)
    check_grad(st.kron, torch.kron, rnd(2), rnd(2, 3, 2), tol=1e-10)
    same(st.kron(S(torch.arange(3)), S(torch.arange(4))), torch.kron(torch.arange(3), torch.arange(4)))
    check_grad(lambda a, b, c: st.block_diag(a, b, c), lambda a, b, c: torch.block_diag(a, b, c), rnd(2, 3), rnd(3),
               rnd(2, 2), tol=1e-10)
    same(st.block_diag(S(torch.tensor(5)), S(torch.ones(2, 2, dtype=torch.int32))),
         torch.block_diag(torch.tensor(5), torch.ones(2, 2, dtype=torch.int32)))
    with pytest.raises(RuntimeError, match="2 or fewer dimensions"):
        st.block_diag(S(rnd(2, 2, 2)))
    check_grad(st.trace, torch.trace, rnd(3, 4), tol=1e-10)
    same(st.trace(S(torch.arange(9, dtype=torch.int32).reshape(3, 3))),
         torch.trace(torch.arange(9, dtype=torch.int32).reshape(3, 3)))
    with pytest.raises(RuntimeError, match="expected a matrix"):
        st.trace(S(rnd(3)))


def test_cross():
    a, b = rnd(4, 3), rnd(4, 3)
    check_grad(lambda x, y: st.linalg.cross(x, y), lambda x, y: torch.linalg.cross(x, y), a, b, tol=1e-10)
    check_grad(lambda x, y: st.cross(x, y, dim=0), lambda x, y: torch.cross(x, y, dim=0), rnd(3, 5), rnd(3, 5),
               tol=1e-10)
    same(st.cross(S(a), S(b)), torch.cross(a, b, dim=1), 1e-10)  # dim=None: first dim of size 3
    a1 = rnd(1, 3)  # broadcasts against b
    same(st.linalg.cross(S(a1), S(b)), torch.linalg.cross(a1, b), 1e-10)
    with pytest.raises(RuntimeError, match="must have length 3"):
        st.linalg.cross(S(rnd(4, 2)), S(rnd(4, 2)))


# ---- shapes, diagonals, grids ------------------------------------------------------------------

def test_diff_rot90_flips():
    x = rnd(4, 5)
    for kw in ({}, {"n": 2}, {"dim": 0}, {"n": 0}, {"n": 7}, {"prepend": rnd(4, 2), "append": rnd(4, 1)}):
        ks = {k: S(v) if isinstance(v, torch.Tensor) else v for k, v in kw.items()}
        same(st.diff(S(x), **ks), torch.diff(x, **kw), 1e-10)
    check_grad(lambda a: st.diff(a, n=2, dim=-1), lambda a: torch.diff(a, n=2, dim=-1), x, tol=1e-10)
    bools = torch.tensor([True, False, False, True])
    same(st.diff(S(bools)), torch.diff(bools))
    with pytest.raises(RuntimeError, match="order must be non-negative"):
        st.diff(S(x), n=-1)
    with pytest.raises(RuntimeError, match="at least one-dimensional"):
        st.diff(S(torch.tensor(1.0)))
    for k in (-3, -1, 0, 1, 2, 3, 5):
        same(st.rot90(S(x), k), torch.rot90(x, k))
        y = rnd(2, 3, 4)
        same(st.rot90(S(y), k, [2, 0]), torch.rot90(y, k, [2, 0]))
    check_grad(lambda a: st.rot90(a, 1), lambda a: torch.rot90(a, 1), x)
    with pytest.raises(RuntimeError, match="rotation dims"):
        st.rot90(S(x), 1, [0, 0])
    same(st.fliplr(S(x)), torch.fliplr(x))
    same(st.flipud(S(x)), torch.flipud(x))
    same(S(x).fliplr(), x.fliplr())
    with pytest.raises(RuntimeError, match=">= 2-d"):
        st.fliplr(S(rnd(3)))


def test_diag_family():
    v, m = rnd(4), rnd(3, 5)
    for off in (-2, 0, 1):
        same(st.diag(S(v), off), torch.diag(v, off))
        same(st.diag(S(m), off), torch.diag(m, off))
        same(st.diagflat(S(m), off), torch.diagflat(m, off))
        same(st.diag_embed(S(m), off), torch.diag_embed(m, off))
        b = rnd(2, 3, 4)
        same(st.diag_embed(S(b), off, 0, 2), torch.diag_embed(b, off, 0, 2))
        same(st.diag_embed(S(b), off, -1, 1), torch.diag_embed(b, off, -1, 1))
    inf = torch.tensor([float("inf"), 1.0])
    same(st.diag_embed(S(inf)), torch.diag_embed(inf))  # no inf * 0 = nan off the diagonal
    check_grad(lambda a: st.diag_embed(a, 1), lambda a: torch.diag_embed(a, 1), m, tol=1e-10)
    check_grad(lambda a: st.diag(a, -1), lambda a: torch.diag(a, -1), m, tol=1e-10)
    same(st.diag(S(torch.tensor([True, False]))), torch.diag(torch.tensor([True, False])))
    with pytest.raises(RuntimeError, match="1D or 2D"):
        st.diag(S(b))


def test_atleast_broadcast_meshgrid_cartesian():
    for t in (torch.tensor(1.0), rnd(3), rnd(2, 3), rnd(2, 3, 4)):
        for name in ("atleast_1d", "atleast_2d", "atleast_3d"):
            same(getattr(st, name)(S(t)), getattr(torch, name)(t))
    r = st.atleast_2d(S(rnd(3)), S(torch.tensor(2.0)))
    assert isinstance(r, tuple) and len(r) == 2
    a, b = rnd(3, 1), rnd(4)
    same(st.broadcast_tensors(S(a), S(b)), torch.broadcast_tensors(a, b))
    assert st.broadcast_shapes((3, 1), (4,), 1) == torch.broadcast_shapes((3, 1), (4,), 1)
    with pytest.raises(RuntimeError):
        st.broadcast_shapes((3,), (4,))
    with pytest.raises(RuntimeError, match="must match"):
        st.broadcast_tensors(S(rnd(3)), S(rnd(4)))
    x, y, z = rnd(3), rnd(4), torch.tensor(2.0, dtype=torch.float64)
    for idx in ("ij", "xy"):
        same(st.meshgrid(S(x), S(y), S(z), indexing=idx), torch.meshgrid(x, y, z, indexing=idx))
    same(st.meshgrid([S(x), S(y)]), torch.meshgrid([x, y], indexing="ij"))
    with pytest.raises(ValueError, match="indexing must be one of"):
        st.meshgrid(S(x), indexing="ab")
    same(st.cartesian_prod(S(x), S(y)), torch.cartesian_prod(x, y))
    same(st.cartesian_prod(S(x)), torch.cartesian_prod(x))
    check_grad(lambda a, b: st.cartesian_prod(a, b), lambda a, b: torch.cartesian_prod(a, b), x, y)
    i = torch.arange(4)
    for r_ in (0, 1, 2, 3, 5):
        for rep in (False, True):
            same(st.combinations(S(i), r_, rep), torch.combinations(i, r_, rep))
    with pytest.raises(RuntimeError, match="1D vector"):
        st.combinations(S(rnd(2, 2)))
    with pytest.raises(RuntimeError, match="would have more than"):
        st.combinations(S(torch.arange(100000)), 5)


def test_tri_indices_vander():
    for args in ((3, 3), (4, 3, 1), (3, 5, -1), (0, 3), (3, 4, 10), (3, 4, -10)):
        same(st.tril_indices(*args), torch.tril_indices(*args))
        same(st.triu_indices(*args), torch.triu_indices(*args))
    same(st.tril_indices(3, 3, dtype=st.int32), torch.tril_indices(3, 3, dtype=torch.int32))
    assert st.triu_indices(4, 4, device="meta").shape == (2, 10)
    with pytest.raises(RuntimeError, match="non-negative"):
        st.tril_indices(-1, 3)
    x = rnd(4)
    for n in (None, 0, 1, 3, 6):
        for inc in (False, True):
            same(st.vander(S(x), n, inc), torch.vander(x, n, inc), 1e-10)
    xi = torch.tensor([1, 2, 3], dtype=torch.int32)
    same(st.vander(S(xi)), torch.vander(xi))
    # torch's own vander backward fails (an in-place cumprod), so check ours numerically.
    z = st.tensor([0.0, 1.5, -2.0], dtype=st.float64, requires_grad=True)
    assert st.autograd.gradcheck(lambda a: st.vander(a, 4), (z,))


def test_cdist_pdist_cosine_similarity():
    a, b = rnd(5, 3), rnd(4, 3)
    for p in (0.0, 1.0, 2.0, 3.0, float("inf")):
        same(st.cdist(S(a), S(b), p=p), torch.cdist(a, b, p=p), 1e-10)
        same(st.pdist(S(a), p=p), torch.pdist(a, p=p), 1e-10)
    big_a, big_b = rnd(2, 30, 3), rnd(2, 27, 3)
    same(st.cdist(S(big_a), S(big_b)), torch.cdist(big_a, big_b), 1e-8)
    same(st.cdist(S(a), S(b), compute_mode="use_mm_for_euclid_dist"), torch.cdist(a, b), 1e-8)
    check_grad(lambda x, y: st.cdist(x, y), lambda x, y: torch.cdist(x, y), a, b, tol=1e-8)
    check_grad(lambda x: st.pdist(x, 1.0), lambda x: torch.pdist(x, 1.0), a, tol=1e-8)
    for n in (3, 30):  # zero distances (a point to itself), on the difference path and the GEMM path
        pts = rnd(n, 3)
        check_grad(lambda x: st.cdist(x, x), lambda x: torch.cdist(x, x), pts, tol=1e-6)
    with pytest.raises(RuntimeError, match="same number of columns"):
        st.cdist(S(a), S(rnd(4, 2)))
    with pytest.raises(ValueError, match="compute_mode"):
        st.cdist(S(a), S(b), compute_mode="nope")
    with pytest.raises(RuntimeError, match="2D"):
        st.pdist(S(rnd(3)))
    x, y = rnd(4, 5), rnd(4, 5)
    for d in (1, 0, -1):
        same(st.cosine_similarity(S(x), S(y), d), torch.cosine_similarity(x, y, d), 1e-10)
    w = rnd(5)  # broadcasts against x
    same(st.cosine_similarity(S(x), S(w), 1), torch.cosine_similarity(x, w, 1), 1e-10)
    z = torch.zeros(2, 3, dtype=torch.float64)
    same(st.cosine_similarity(S(z), S(z)), torch.cosine_similarity(z, z), 1e-10)
    check_grad(lambda p, q: st.cosine_similarity(p, q), lambda p, q: torch.cosine_similarity(p, q), x, y, tol=1e-8)


# ---- counting, binning, unique, search ----------------------------------------------------------

def test_bincount_histc_histogram():
    x = torch.tensor([0, 3, 1, 3, 5, 3])
    same(st.bincount(S(x)), torch.bincount(x))
    same(st.bincount(S(x), minlength=9), torch.bincount(x, minlength=9))
    for w in (torch.rand(6), torch.rand(6, dtype=torch.float64), torch.arange(6)):
        same(st.bincount(S(x), S(w)), torch.bincount(x, w), 1e-6)
    same(st.bincount(S(torch.zeros(0, dtype=torch.int64)), minlength=3),
         torch.bincount(torch.zeros(0, dtype=torch.int64), minlength=3))
    with pytest.raises(RuntimeError, match="non-negative"):
        st.bincount(S(torch.tensor([1, -1])))
    with pytest.raises(RuntimeError, match="1-d non-negative integral"):
        st.bincount(S(rnd(3)))
    v = torch.rand(50, dtype=torch.float32) * 10 - 2
    for args in ((), (10,), (7, 0, 5), (4, -1, -1), (5, 3, 3)):
        same(st.histc(S(v), *args), torch.histc(v, *args))
    v[3] = float("nan")  # not counted within an explicit range; no range to take from the data
    same(st.histc(S(v), 6, -1, 4), torch.histc(v, 6, -1, 4))
    with pytest.raises(RuntimeError, match="not finite"):
        st.histc(S(v))
    same(S(v).histc(4, 0, 8), v.histc(4, 0, 8))
    with pytest.raises(RuntimeError, match="bins must be > 0"):
        st.histc(S(v), 0)
    with pytest.raises(RuntimeError, match="max must be larger than min"):
        st.histc(S(v), 3, 5, 1)
    h = torch.rand(40, dtype=torch.float64)
    w = torch.rand(40, dtype=torch.float64)
    for kw in ({}, {"bins": 7}, {"bins": 5, "range": (0.2, 0.8)}, {"bins": 4, "density": True},
               {"bins": 6, "weight": w}, {"bins": torch.tensor([0.0, 0.1, 0.5, 1.0], dtype=torch.float64)},
               {"bins": torch.tensor([0.0, 0.3, 0.6], dtype=torch.float64), "weight": w, "density": True}):
        ks = {k: (S(val) if isinstance(val, torch.Tensor) else val) for k, val in kw.items()}
        same(st.histogram(S(h), **ks), tuple(torch.histogram(h, **kw)), 1e-10)
    same(S(h).histogram(3), tuple(h.histogram(3)), 1e-10)


def test_unique_family():
    x = torch.tensor([[3, 1, 2], [1, 3, 3], [3, 1, 2]])
    for ri in (False, True):
        for rc in (False, True):
            same(st.unique(S(x), return_inverse=ri, return_counts=rc),
                 torch.unique(x, return_inverse=ri, return_counts=rc))
            for d in (0, 1, -1):
                same(st.unique(S(x), return_inverse=ri, return_counts=rc, dim=d),
                     torch.unique(x, return_inverse=ri, return_counts=rc, dim=d))
            same(st.unique_consecutive(S(x), return_inverse=ri, return_counts=rc),
                 torch.unique_consecutive(x, return_inverse=ri, return_counts=rc))
            same(st.unique_consecutive(S(x), return_inverse=ri, return_counts=rc, dim=0),
                 torch.unique_consecutive(x, return_inverse=ri, return_counts=rc, dim=0))
    f = torch.tensor([2.5, -1.0, 2.5, 0.0])
    same(S(f).unique(), f.unique())
    same(st.unique(S(torch.zeros(0))), torch.unique(torch.zeros(0)))
    same(st.unique(S(torch.tensor(3.0)), return_inverse=True), torch.unique(torch.tensor(3.0), return_inverse=True))
    same(st.unique(S(torch.tensor([True, False, True]))), torch.unique(torch.tensor([True, False, True])))
    with pytest.raises(NotImplementedError, match="meta"):
        st.unique(st.empty(3, device="meta"))


def test_searchsorted_bucketize_isin():
    seq = torch.tensor([1.0, 3.0, 5.0, 7.0, 9.0])
    vals = torch.tensor([[3.0, 6.0, 9.0], [0.0, 10.0, 1.0]])
    for right in (False, True):
        same(st.searchsorted(S(seq), S(vals), right=right), torch.searchsorted(seq, vals, right=right))
        same(st.bucketize(S(vals), S(seq), right=right), torch.bucketize(vals, seq, right=right))
    same(st.searchsorted(S(seq), S(vals), side="right", out_int32=True),
         torch.searchsorted(seq, vals, side="right", out_int32=True))
    same(st.searchsorted(S(seq), 4.0), torch.searchsorted(seq, 4.0))
    rows = torch.tensor([[1, 3, 5, 7], [2, 4, 6, 8]])
    q = torch.tensor([[3, 6, 9], [3, 6, 9]])
    same(st.searchsorted(S(rows), S(q)), torch.searchsorted(rows, q))
    unsorted = torch.tensor([5.0, 1.0, 9.0, 3.0])
    sorter = torch.argsort(unsorted)
    same(st.searchsorted(S(unsorted), S(vals), sorter=S(sorter)), torch.searchsorted(unsorted, vals, sorter=sorter))
    nanseq = torch.tensor([1.0, 2.0, float("nan")])
    same(st.searchsorted(S(nanseq), S(torch.tensor([float("nan"), 1.5]))),
         torch.searchsorted(nanseq, torch.tensor([float("nan"), 1.5])))
    with pytest.raises(RuntimeError, match="side and right can't be set to opposites"):
        st.searchsorted(S(seq), S(vals), right=True, side="left")
    with pytest.raises(RuntimeError, match="first N-1 dimensions"):
        st.searchsorted(S(rows), S(q[:1]))
    with pytest.raises(RuntimeError, match="boundaries tensor must be 1 dimension"):
        st.bucketize(S(vals), S(rows))
    e, t = torch.tensor([[1, 2, 3], [4, 5, 6]]), torch.tensor([2, 5, 9, 2])
    same(st.isin(S(e), S(t)), torch.isin(e, t))
    same(st.isin(S(e), S(t), invert=True), torch.isin(e, t, invert=True))
    same(st.isin(S(e), S(torch.zeros(0, dtype=torch.int64))), torch.isin(e, torch.zeros(0, dtype=torch.int64)))
    same(st.isin(S(e.double()), S(t)), torch.isin(e.double(), t))
    assert st.isin(st.empty(2, 3, device="meta"), st.empty(4, device="meta")).shape == (2, 3)


# ---- scatter_reduce and the index ops --------------------------------------------------------------

@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(reduce, include_self):
    self_ = rnd(3, 5)
    index = torch.tensor([[0, 1, 0, 4], [2, 2, 2, 3], [1, 0, 1, 0]])
    src = rnd(3, 4)  # torch's backward needs src shaped like index (strata pads: see the opdb sample)
    src[0, 2] = 0.0  # a zero in a product group
    self_[1, 2] = 0.0
    fs = lambda s, i, x: st.scatter_reduce(s, 1, i, x, reduce, include_self=include_self)  # noqa: E731
    ft = lambda s, i, x: torch.scatter_reduce(s, 1, i, x, reduce, include_self=include_self)  # noqa: E731
    sts, sx = S(self_, grad=True), S(src, grad=True)
    tts, tx = self_.clone().requires_grad_(), src.clone().requires_grad_()
    r, t = fs(sts, S(index), sx), ft(tts, index, tx)
    same(r, t, 1e-10)
    g = torch.randn(t.shape, dtype=torch.float64)
    r.backward(S(g))
    t.backward(g)
    np.testing.assert_allclose(N(sts.grad), N(tts.grad), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(N(sx.grad), N(tx.grad), rtol=1e-8, atol=1e-10)
    ii = torch.tensor([0, 2, 0, 1, 2])
    xi, si = torch.tensor([5, 2, 7, 1, 3], dtype=torch.int32), torch.tensor([1, 4, 9], dtype=torch.int32)
    same(st.scatter_reduce(S(si), 0, S(ii), S(xi), reduce, include_self=include_self),
         torch.scatter_reduce(si, 0, ii, xi, reduce, include_self=include_self))
    m = S(self_)
    m.scatter_reduce_(1, S(index), S(src), reduce, include_self=include_self)
    same(m, self_.clone().scatter_reduce_(1, index, src, reduce, include_self=include_self), 1e-10)


def test_scatter_reduce_errors():
    with pytest.raises(RuntimeError, match="reduce argument must be"):
        st.scatter_reduce(S(rnd(3)), 0, S(torch.tensor([0])), S(rnd(1)), "max")
    with pytest.raises(IndexError, match="out of bounds"):
        st.scatter_reduce(S(rnd(3)), 0, S(torch.tensor([5])), S(rnd(1)), "sum")
    with pytest.raises(RuntimeError, match="int32/int64"):
        st.scatter_reduce(S(rnd(3)), 0, S(torch.tensor([0.0])), S(rnd(1)), "sum")
    # int32 indices are accepted, as torch 2.13 does
    i32 = torch.tensor([0, 2], dtype=torch.int32)
    x, src = rnd(3), rnd(2)
    np.testing.assert_allclose(st.scatter_reduce(S(x), 0, S(i32), S(src), "sum").numpy(),
                               torch.scatter_reduce(x, 0, i32, src, "sum").numpy())
    b = S(torch.tensor([True, False]))
    with pytest.raises(NotImplementedError, match="Bool"):
        st.scatter_reduce(b, 0, S(torch.tensor([0])), b[:1], "mean")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.bool])
def test_scatter_reduce_dtypes(dtype):
    index = torch.tensor([0, 1, 0, 2, 1, 0])
    for reduce in ("sum", "prod", "mean", "amax", "amin"):
        if reduce == "mean" and dtype == torch.bool:
            continue
        for inc in (True, False):
            s, x = (torch.rand(3) * 4).to(dtype), (torch.rand(6) * 4).to(dtype)
            conv = (lambda t: st.tensor(t.float().numpy(), dtype=st.bfloat16)) if dtype == torch.bfloat16 else S
            r = st.scatter_reduce(conv(s), 0, S(index), conv(x), reduce, include_self=inc)
            t = torch.scatter_reduce(s, 0, index, x, reduce, include_self=inc)
            assert str(r.dtype).split(".")[1] == str(t.dtype).split(".")[1]
            np.testing.assert_allclose(r.float().numpy(), t.float().numpy(), rtol=1e-2, atol=1e-2)


def test_index_copy_fill_masked_scatter_put_take():
    x, idx = rnd(5, 3), torch.tensor([4, 0, 2])
    src = rnd(3, 3)
    check_grad(lambda a, b: st.index_copy(a, 0, S(idx), b), lambda a, b: torch.index_copy(a, 0, idx, b), x, src)
    i2, w = torch.tensor([2, 0]), rnd(5, 2)
    same(S(x).index_copy(-1, S(i2), S(w)), x.index_copy(-1, i2, w))
    y = S(x)
    y.index_copy_(0, S(idx), S(src))
    same(y, x.clone().index_copy_(0, idx, src))
    with pytest.raises(RuntimeError, match="same dtype"):
        st.index_copy(S(x), 0, S(idx), S(src.float()))
    check_grad(lambda a: st.index_fill(a, 1, S(torch.tensor([0, 2])), -1.5),
               lambda a: torch.index_fill(a, 1, torch.tensor([0, 2]), -1.5), x)
    y = S(x)
    y.index_fill_(0, S(torch.tensor([1])), 7)
    same(y, x.clone().index_fill_(0, torch.tensor([1]), 7))
    mask = torch.tensor([[True, False, True], [False, False, True], [True, True, False], [False] * 3, [True] * 3])
    source = rnd(12)
    check_grad(lambda a, s: st.masked_scatter(a, S(mask), s), lambda a, s: torch.masked_scatter(a, mask, s), x, source)
    y = S(x)
    y.masked_scatter_(S(mask[0]), S(source))
    same(y, x.clone().masked_scatter_(mask[0], source))
    with pytest.raises(RuntimeError, match="at least"):
        st.masked_scatter(S(x), S(mask), S(rnd(2)))
    pidx, pv = torch.tensor([[0, 13], [-1, 3]]), rnd(2, 2)  # no duplicates: torch leaves their result undefined
    check_grad(lambda a, v: st.put(a, S(pidx), v), lambda a, v: torch.put(a, pidx, v), x, pv)
    same(st.put(S(x), S(torch.tensor([1, 1])), S(torch.ones(2, dtype=torch.float64)), accumulate=True),
         torch.put(x, torch.tensor([1, 1]), torch.ones(2, dtype=torch.float64), accumulate=True))
    y = S(x)
    y.put_(S(pidx), S(pv))
    same(y, x.clone().put_(pidx, pv))
    with pytest.raises(IndexError, match="out of range"):
        st.put(S(x), S(torch.tensor([15])), S(rnd(1)))
    check_grad(lambda a: st.take(a, S(pidx)), lambda a: torch.take(a, pidx), x)
    same(S(x).take(S(torch.tensor(3))), x.take(torch.tensor(3)))
    with pytest.raises(IndexError, match="out of range"):
        st.take(S(x), S(torch.tensor([-16])))


def test_meta_shapes_of_composites():
    m = lambda *s: st.empty(*s, device="meta")  # noqa: E731
    assert st.tensordot(m(3, 4, 5), m(4, 5, 6), 2).shape == (3, 6)
    assert st.kron(m(2, 3), m(4, 5)).shape == (8, 15)
    assert st.diag_embed(m(2, 3), 1).shape == (2, 4, 4)
    assert st.cdist(m(5, 3), m(4, 3)).shape == (5, 4)
    assert st.scatter_reduce(m(3, 5), 1, st.empty(3, 2, dtype=st.int64, device="meta"), m(3, 2), "sum").shape == (3, 5)
    assert st.searchsorted(m(5), m(2, 3)).shape == (2, 3)
    assert st.histc(m(10), 4, 0, 1).shape == (4,)


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_index_reduce(reduce, include_self):
    x, index, src = rnd(4, 3), torch.tensor([0, 2, 0, 3, 0]), rnd(5, 3)
    check_grad(lambda a, s: st.index_reduce(a, 0, S(index), s, reduce, include_self=include_self),
               lambda a, s: torch.index_reduce(a, 0, index, s, reduce, include_self=include_self), x, src, tol=1e-8)
    y = S(x)
    y.index_reduce_(1, S(torch.tensor([2, 2])), S(torch.full((4, 2), 2.0, dtype=torch.float64)), reduce,
                    include_self=include_self)
    same(y, x.clone().index_reduce_(1, torch.tensor([2, 2]), torch.full((4, 2), 2.0, dtype=torch.float64), reduce,
                                    include_self=include_self), 1e-10)
    xi = torch.tensor([5, 7, 9])
    same(st.index_reduce(S(xi), 0, S(torch.tensor([0, 0, 2])), S(torch.tensor([2, 4, 1])), reduce),
         torch.index_reduce(xi, 0, torch.tensor([0, 0, 2]), torch.tensor([2, 4, 1]), reduce))


def test_index_reduce_errors():
    with pytest.raises(RuntimeError, match="Expected reduce to be one of"):
        st.index_reduce(S(rnd(3)), 0, S(torch.tensor([0])), S(rnd(1)), "sum")
    with pytest.raises(RuntimeError, match="same shape apart from dimension"):
        st.index_reduce(S(rnd(3, 2)), 0, S(torch.tensor([0])), S(rnd(2, 2)), "prod")


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_scatter_reduce_3d_noncontiguous(dim):
    self_ = rnd(4, 5, 3).transpose(0, 2)  # (3, 5, 4), non-contiguous
    shape = [2, 3, 2]
    index = torch.randint(0, self_.shape[dim], shape)
    src = rnd(3, 4, 3).permute(2, 1, 0)[:2, :3, :2]  # a non-contiguous (2, 3, 2) view of a larger tensor
    for reduce in ("sum", "amax", "mean"):
        same(st.scatter_reduce(S(self_), dim, S(index), S(src), reduce),
             torch.scatter_reduce(self_, dim, index, src, reduce), 1e-10)
