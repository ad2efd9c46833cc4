"""Matrix products against PyTorch: broadcasting, strided inputs, empty
matrices, out=, in-place variants, large sizes through the BLAS libraries and
every library choice (STRATA_BLAS)."""

import os
import subprocess
import sys

import numpy as np
import pytest

import strata as st

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(7)


def rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def check(s_result, t_result, rtol=1e-5, atol=1e-5):
    t = t_result.float().numpy() if t_result.dtype == torch.bfloat16 else t_result.numpy()
    s = s_result.float().numpy() if s_result.dtype is st.bfloat16 else s_result.numpy()
    assert s.shape == t.shape
    np.testing.assert_allclose(s.astype(np.float64), t.astype(np.float64), rtol=rtol, atol=atol)


BROADCAST = [((3,), (3,)), ((4, 3), (3,)), ((3,), (3, 5)), ((2, 4, 3), (3,)), ((3,), (2, 3, 5)),
             ((2, 4, 3), (3, 5)), ((4, 3), (2, 3, 5)), ((2, 1, 4, 3), (1, 6, 3, 5)), ((1, 4, 3), (7, 3, 5)),
             ((5, 2, 4, 3), (5, 1, 3, 2)), ((0, 4, 3), (3, 2)), ((2, 4, 0), (2, 0, 3))]


@pytest.mark.parametrize("sa,sb", BROADCAST, ids=[f"{a}@{b}" for a, b in BROADCAST])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matmul_broadcast(sa, sb, dtype):
    a, b = rand(*sa, dtype=dtype), rand(*sb, dtype=dtype)
    check(st.matmul(st.from_numpy(a), st.from_numpy(b)), torch.matmul(torch.from_numpy(a), torch.from_numpy(b)))


def test_matmul_operator_and_method():
    a, b = rand(3, 4), rand(4, 2)
    sa, sb = st.from_numpy(a), st.from_numpy(b)
    expected = torch.from_numpy(a) @ torch.from_numpy(b)
    check(sa.matmul(sb), expected)
    if hasattr(st.Tensor, "__matmul__"):
        check(sa @ sb, expected)


@pytest.mark.parametrize("layout", ["tt", "tn", "nt", "strided", "col-major-out"])
def test_mm_layouts(layout):
    m, k, n = 37, 29, 41
    a, b = rand(m, k), rand(k, n)
    if "t" in layout[:1]:
        a = np.ascontiguousarray(a.T).T
    if layout in ("tt", "nt"):
        b = np.ascontiguousarray(b.T).T
    if layout == "strided":
        a = np.repeat(np.repeat(a, 2, axis=0), 2, axis=1)[::2, ::2]
        b = np.repeat(b, 3, axis=1)[:, ::3]
    expected = torch.from_numpy(np.ascontiguousarray(a)) @ torch.from_numpy(np.ascontiguousarray(b))
    if layout == "col-major-out":
        out = st.from_numpy(np.zeros((n, m), np.float32).T)
        r = st.mm(st.from_numpy(a), st.from_numpy(b), out=out)
        # (identity of the returned wrapper is the binding's business; the data must land in out)
        check(out, expected, 1e-4, 1e-4)
    else:
        check(st.mm(st.from_numpy(a), st.from_numpy(b)), expected, 1e-4, 1e-4)


@pytest.mark.parametrize("n", [64, 257, 1024])
def test_large_sgemm_and_dgemm(n):
    for dt, tol in ((np.float32, 2e-3), (np.float64, 1e-9)):
        a, b = rand(n, n - 3, dtype=dt), rand(n - 3, n + 5, dtype=dt)
        check(st.mm(st.from_numpy(a), st.from_numpy(b)), torch.from_numpy(a) @ torch.from_numpy(b), tol, tol)


def test_skinny_shapes():
    for m, k, n in ((1, 512, 300), (64, 300, 257), (300, 1, 200), (5, 700, 1)):
        a, b = rand(m, k), rand(k, n)
        check(st.mm(st.from_numpy(a), st.from_numpy(b)), torch.from_numpy(a) @ torch.from_numpy(b), 1e-4, 1e-4)


def test_empty_k_gives_zeros():
    a, b = np.zeros((3, 0), np.float32), np.zeros((0, 4), np.float32)
    r = st.mm(st.from_numpy(a), st.from_numpy(b))
    assert r.shape == (3, 4) and not r.numpy().any()
    r = st.matmul(st.from_numpy(np.zeros((2, 3, 0))), st.from_numpy(np.zeros((0, 5))))
    assert r.shape == (2, 3, 5) and not r.numpy().any()
    # addmm with K=0 is beta * self
    s = rand(3, 4)
    check(st.addmm(st.from_numpy(s), st.from_numpy(a), st.from_numpy(b), beta=2.0),
          torch.addmm(torch.from_numpy(s), torch.from_numpy(a), torch.from_numpy(b), beta=2.0))


def test_out_argument():
    a, b = rand(4, 3), rand(3, 5)
    out = st.from_numpy(np.zeros((4, 5), np.float32))
    r = st.mm(st.from_numpy(a), st.from_numpy(b), out=out)
    # (identity of the returned wrapper is the binding's business; the data must land in out)
    check(out, torch.from_numpy(a) @ torch.from_numpy(b))
    # wrong shape: resized
    out2 = st.from_numpy(np.zeros((1,), np.float32))
    st.matmul(st.from_numpy(rand(2, 4, 3)), st.from_numpy(b), out=out2)
    assert out2.shape == (2, 4, 5)
    with pytest.raises(RuntimeError, match="dtype"):
        st.mm(st.from_numpy(a), st.from_numpy(b), out=st.from_numpy(np.zeros((4, 5))))


def test_out_aliasing_an_input():
    a = rand(4, 4)
    sa = st.from_numpy(a.copy())
    st.mm(sa, st.from_numpy(a), out=sa)  # reads a while writing it: must use a temporary
    np.testing.assert_allclose(sa.numpy(), a @ a, rtol=1e-5, atol=1e-5)


def test_inplace_addmm_and_beta_zero_ignores_nan():
    s, a, b = rand(3, 4), rand(3, 2), rand(2, 4)
    ss = st.from_numpy(s.copy())
    r = ss.addmm_(st.from_numpy(a), st.from_numpy(b), beta=0.5, alpha=2.0)
    check(r, torch.from_numpy(s).addmm(torch.from_numpy(a), torch.from_numpy(b), beta=0.5, alpha=2.0))
    check(ss, torch.from_numpy(s).addmm(torch.from_numpy(a), torch.from_numpy(b), beta=0.5, alpha=2.0))
    nan = np.full((3, 4), np.nan, np.float32)
    r = st.addmm(st.from_numpy(nan), st.from_numpy(a), st.from_numpy(b), beta=0)
    assert np.isfinite(r.numpy()).all()


def test_addmv_baddbmm_addbmm_vs_torch():
    s, m, v = rand(5), rand(5, 3), rand(3)
    check(st.addmv(st.from_numpy(s), st.from_numpy(m), st.from_numpy(v), beta=0.3, alpha=-2),
          torch.addmv(torch.from_numpy(s), torch.from_numpy(m), torch.from_numpy(v), beta=0.3, alpha=-2))
    s3, b1, b2 = rand(1, 4), rand(3, 2, 5), rand(3, 5, 4)
    check(st.baddbmm(st.from_numpy(s3), st.from_numpy(b1), st.from_numpy(b2), alpha=1.5),
          torch.baddbmm(torch.from_numpy(s3), torch.from_numpy(b1), torch.from_numpy(b2), alpha=1.5))
    check(st.addbmm(st.from_numpy(s3), st.from_numpy(b1), st.from_numpy(b2), beta=2),
          torch.addbmm(torch.from_numpy(s3), torch.from_numpy(b1), torch.from_numpy(b2), beta=2), 1e-5, 1e-4)


def test_many_small_batches():
    a, b = rand(300, 5, 7), rand(300, 7, 3)
    check(st.bmm(st.from_numpy(a), st.from_numpy(b)), torch.bmm(torch.from_numpy(a), torch.from_numpy(b)))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_reduced_precision(dtype):
    a, b = rand(6, 40), rand(40, 5)
    sa = st.tensor(a, dtype=getattr(st, dtype))
    sb = st.tensor(b, dtype=getattr(st, dtype))
    ta, tb = torch.from_numpy(a).to(getattr(torch, dtype)), torch.from_numpy(b).to(getattr(torch, dtype))
    r = st.matmul(sa, sb)
    assert r.dtype is getattr(st, dtype)
    tol = 1e-2 if dtype == "float16" else 5e-2
    check(r, torch.matmul(ta, tb), tol, tol)


def test_integer_matmul_wraps_like_torch():
    a = RNG.integers(-100, 100, (4, 50)).astype(np.int8)
    b = RNG.integers(-100, 100, (50, 3)).astype(np.int8)
    r = st.mm(st.from_numpy(a), st.from_numpy(b))
    t = torch.mm(torch.from_numpy(a), torch.from_numpy(b))
    np.testing.assert_array_equal(r.numpy(), t.numpy())
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    np.testing.assert_array_equal(st.matmul(st.from_numpy(a64), st.from_numpy(b64)).numpy(), a64 @ b64)


def test_meta():
    a = st.from_numpy(rand(2, 1, 4, 3)).to("meta")
    b = st.from_numpy(rand(6, 3, 5)).to("meta")
    r = st.matmul(a, b)
    assert r.device.type == "meta" and tuple(r.shape) == (2, 6, 4, 5)
    r = st.addmm(st.from_numpy(rand(5)).to("meta"), st.from_numpy(rand(4, 3)).to("meta"),
                 st.from_numpy(rand(3, 5)).to("meta"))
    assert tuple(r.shape) == (4, 5)
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        st.mm(st.from_numpy(rand(2, 3)).to("meta"), st.from_numpy(rand(2, 3)).to("meta"))


def test_outer_promotes():
    r = st.outer(st.from_numpy(rand(3)), st.from_numpy(np.arange(2)))
    t = torch.outer(torch.from_numpy(rand(3)), torch.from_numpy(np.arange(2)))
    assert str(r.dtype).split(".")[1] == str(t.dtype).split(".")[1]


SCRIPT = """
import numpy as np, strata as st
rng = np.random.default_rng(0)
for (m, k, n) in ((70, 50, 90), (1, 300, 200), (130, 1, 7)):
    a = rng.standard_normal((m, k)).astype(np.float32); b = rng.standard_normal((n, k)).astype(np.float32).T
    r = st.mm(st.from_numpy(a), st.from_numpy(b)).numpy()
    np.testing.assert_allclose(r, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    a64 = a.astype(np.float64); r = st.mm(st.from_numpy(a64), st.from_numpy(b.astype(np.float64))).numpy()
    np.testing.assert_allclose(r, a64 @ b, rtol=1e-10, atol=1e-10)
print(st.blas.backend())
"""


@pytest.mark.parametrize("choice", ["dnnl", "openblas", "naive"])
def test_every_blas_choice(choice):
    env = dict(os.environ, STRATA_BLAS=choice)
    p = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    line = p.stdout.strip().splitlines()[-1]
    if choice == "naive":
        assert "built-in" in line.split(";")[0]
    elif choice == "dnnl":
        assert "oneDNN" in line.split(";")[0] or "OpenBLAS" in line  # falls back when libdnnl is missing
    else:
        assert "OpenBLAS" in line.split(";")[0] or "built-in" in line


def test_inplace_cannot_broadcast_self():
    s = st.from_numpy(rand(4))
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        s.addmm_(st.from_numpy(rand(2, 3)), st.from_numpy(rand(3, 4)))
