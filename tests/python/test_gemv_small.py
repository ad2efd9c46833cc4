"""The built-in gemv behind vector-shaped products (one row or one column: a batch-1 linear layer).

Covers short and odd row lengths (shorter than one vector register, a register plus a tail), both memory layouts
of the matrix (gemv 'N' and 'T'), strided vectors, alpha/beta through addmm, float32 and float64, and sizes large
enough to take the threaded paths. Results are compared with float64 NumPy."""

import numpy as np
import pytest

import strata

DTYPES = [np.float32, np.float64]
# (m, n, k): C (m x n) = A (m x k) @ B (k x n), with m == 1 or n == 1
SHAPES = [(1, n, k) for n in (1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 33, 64, 100, 256) for k in (1, 3, 8, 13, 16, 17, 64, 65)]
SHAPES += [(m, 1, k) for m in (2, 3, 4, 5, 9, 17, 64, 257) for k in (1, 7, 16, 31, 64, 100)]
BIG = [(1, 512, 256), (1, 300, 701), (1, 16, 16384), (1, 3, 40000), (1, 1000, 100), (700, 1, 300), (16384, 1, 8),
       (5, 1, 30000)]

rng = np.random.default_rng(1234)


def tol(dt, k):
    return (2e-6 if dt == np.float32 else 1e-14) * max(k, 1) ** 0.5 * 8


def check(got, ref, dt, k):
    got = np.asarray(got, dtype=np.float64)
    scale = 1.0 + np.abs(ref).max(initial=0.0)
    err = np.abs(got - ref).max(initial=0.0) / scale
    assert err <= tol(dt, k), f"max relative error {err}"


def operand(shape, dt, transposed):
    """A strata matrix with the given logical shape, stored row-major or as the transpose of a row-major one."""
    if transposed:
        a = rng.standard_normal(shape[::-1]).astype(dt)
        return strata.from_numpy(a).t(), a.T
    a = rng.standard_normal(shape).astype(dt)
    return strata.from_numpy(a), a


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_vector_shaped_matmul(dt, ta, tb):
    for m, n, k in SHAPES:
        A, a = operand((m, k), dt, ta)
        B, b = operand((k, n), dt, tb)
        check((A @ B).numpy(), a.astype(np.float64) @ b.astype(np.float64), dt, k)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_vector_shaped_matmul_large(dt, ta, tb):
    for m, n, k in BIG:
        A, a = operand((m, k), dt, ta)
        B, b = operand((k, n), dt, tb)
        check((A @ B).numpy(), a.astype(np.float64) @ b.astype(np.float64), dt, k)


@pytest.mark.parametrize("dt", DTYPES)
def test_large_on_one_and_two_threads(dt):
    prev = strata.get_num_threads()
    try:
        for nt in (1, 2):
            strata.set_num_threads(nt)
            for m, n, k in BIG[:4]:
                A, a = operand((m, k), dt, False)
                B, b = operand((k, n), dt, True)
                check((A @ B).numpy(), a.astype(np.float64) @ b.astype(np.float64), dt, k)
    finally:
        strata.set_num_threads(prev)


@pytest.mark.parametrize("dt", DTYPES)
def test_strided_vectors(dt):
    # Rows and columns taken out of bigger matrices with steps: the vector operand has a stride > 1.
    for n, k in [(5, 3), (64, 64), (17, 40), (256, 64), (8, 1500)]:
        big = rng.standard_normal((3, 3 * k)).astype(dt)
        x = strata.from_numpy(big)[1:2, ::3]  # 1 x k, element stride 3
        xr = big[1:2, ::3]
        wt = rng.standard_normal((n, k)).astype(dt)
        W = strata.from_numpy(wt)
        check((x @ W.t()).numpy(), xr.astype(np.float64) @ wt.T.astype(np.float64), dt, k)
        check((x @ strata.from_numpy(np.ascontiguousarray(wt.T))).numpy(), xr.astype(np.float64) @ wt.T, dt, k)
        colsrc = rng.standard_normal((k, 4)).astype(dt)
        col = strata.from_numpy(colsrc)[:, 2:3]  # k x 1, row stride 4
        check((W @ col).numpy(), wt.astype(np.float64) @ colsrc[:, 2:3], dt, k)
        check((strata.from_numpy(np.ascontiguousarray(wt.T)).t() @ col).numpy(), wt.astype(np.float64) @ colsrc[:, 2:3],
              dt, k)


@pytest.mark.parametrize("dt", DTYPES)
def test_mv_strided_output(dt):
    a = rng.standard_normal((37, 19)).astype(dt)
    v = rng.standard_normal(19).astype(dt)
    out = strata.zeros(37, 2, dtype=strata.float32 if dt == np.float32 else strata.float64)
    strata.mv(strata.from_numpy(a), strata.from_numpy(v), out=out[:, 1])
    check(out[:, 1].numpy(), a.astype(np.float64) @ v, dt, 19)
    assert (out[:, 0].numpy() == 0).all()


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("alpha,beta", [(1.0, 1.0), (2.5, 0.5), (-1.0, 0.0), (0.0, 2.0), (1.0, -3.0)])
def test_addmm_alpha_beta(dt, alpha, beta):
    for m, n, k in [(1, 256, 64), (1, 10, 256), (1, 7, 5), (1, 33, 17), (9, 1, 70), (1, 512, 256)]:
        c = rng.standard_normal((m, n)).astype(dt)
        A, a = operand((m, k), dt, False)
        B, b = operand((k, n), dt, n > 1)
        got = strata.addmm(strata.from_numpy(c), A, B, beta=beta, alpha=alpha)
        ref = beta * c.astype(np.float64) + alpha * (a.astype(np.float64) @ b.astype(np.float64))
        check(got.numpy(), ref, dt, k)
        # A broadcast (bias-like) input.
        bias = rng.standard_normal(n).astype(dt)
        got = strata.addmm(strata.from_numpy(bias), A, B, beta=beta, alpha=alpha)
        ref = beta * bias.astype(np.float64) + alpha * (a.astype(np.float64) @ b.astype(np.float64))
        check(got.numpy(), ref, dt, k)


@pytest.mark.parametrize("dt", DTYPES)
def test_beta_zero_ignores_nan_input(dt):
    # BLAS semantics (and torch's): with beta == 0 the input is not read, so NaN in it does not propagate.
    c = np.full((1, 40), np.nan, dtype=dt)
    A, a = operand((1, 24), dt, False)
    B, b = operand((24, 40), dt, True)
    got = strata.addmm(strata.from_numpy(c), A, B, beta=0.0).numpy()
    assert np.isfinite(got).all()
    check(got, a.astype(np.float64) @ b.astype(np.float64), dt, 24)


@pytest.mark.parametrize("dt", DTYPES)
def test_linear_batch_one(dt):
    for n, k in [(256, 64), (10, 256), (1, 1), (3, 5), (16, 16), (17, 15), (40, 7), (1000, 300)]:
        x = rng.standard_normal((1, k)).astype(dt)
        w = rng.standard_normal((n, k)).astype(dt)
        b = rng.standard_normal(n).astype(dt)
        F = strata.nn.functional
        got = F.linear(strata.from_numpy(x), strata.from_numpy(w), strata.from_numpy(b))
        check(got.numpy(), x.astype(np.float64) @ w.T.astype(np.float64) + b, dt, k)
        got = F.linear(strata.from_numpy(x[0]), strata.from_numpy(w))
        check(got.numpy(), x[0].astype(np.float64) @ w.T.astype(np.float64), dt, k)


def test_special_values_propagate():
    # inf and NaN in the matrix reach exactly the outputs whose dot products include them.
    w = np.ones((9, 20), np.float32)
    w[2, 19] = np.inf  # in the tail of a row (after the vector part)
    w[5, 0] = np.nan
    x = np.ones((1, 20), np.float32)
    got = (strata.from_numpy(x) @ strata.from_numpy(w).t()).numpy()[0]
    assert np.isposinf(got[2]) and np.isnan(got[5])
    others = [i for i in range(9) if i not in (2, 5)]
    assert (got[others] == 20).all()
    got = (strata.from_numpy(x) @ strata.from_numpy(np.ascontiguousarray(w.T))).numpy()[0]
    assert np.isposinf(got[2]) and np.isnan(got[5]) and (got[others] == 20).all()


def test_matches_torch():
    torch = pytest.importorskip("torch")
    for n, k in [(256, 64), (10, 256), (64, 64), (5, 3)]:
        x = rng.standard_normal((1, k)).astype(np.float32)
        w = rng.standard_normal((k, n)).astype(np.float32)
        ours = (strata.from_numpy(x) @ strata.from_numpy(w)).numpy()
        theirs = (torch.from_numpy(x) @ torch.from_numpy(w)).numpy()
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)
