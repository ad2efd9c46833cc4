"""strata.blas: each BLAS routine against a plain NumPy reference (no SciPy),
in float32 and float64, with transposed (column-major) operands."""

import numpy as np
import pytest

import strata as st
from strata import blas

RNG = np.random.default_rng(3)
DTYPES = [np.float32, np.float64]
TOL = {np.float32: 1e-4, np.float64: 1e-10}


def rand(*shape, dtype=np.float64):
    return RNG.standard_normal(shape).astype(dtype)


def col_major(a):
    """The same matrix stored column-major (a transposed view)."""
    return np.ascontiguousarray(a.T).T


def T(a):
    return st.from_numpy(a)


def close(actual, expected, dtype):
    np.testing.assert_allclose(actual.numpy(), expected, rtol=TOL[dtype], atol=TOL[dtype])


def tri(n, dtype, upper):
    """A well-conditioned triangular matrix (dominant diagonal)."""
    a = rand(n, n, dtype=dtype) * 0.3 + np.eye(n, dtype=dtype) * 4
    return np.triu(a) if upper else np.tril(a)


@pytest.mark.parametrize("dtype", DTYPES)
def test_axpy_in_place(dtype):
    x, y = rand(7, dtype=dtype), rand(7, dtype=dtype)
    ty = T(y.copy())
    r = blas.axpy(T(x), ty, alpha=-2.5)
    close(r, y - 2.5 * x, dtype)
    close(ty, y - 2.5 * x, dtype)
    # strided x
    xs = rand(14, dtype=dtype)[::2]
    ty = T(y.copy())
    blas.axpy(T(xs), ty)
    close(ty, y + xs, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_dot_nrm2(dtype):
    x, y = rand(33, dtype=dtype), rand(66, dtype=dtype)[::2]
    r = blas.dot(T(x), T(y))
    assert r.shape == () and r.dtype is (st.float32 if dtype == np.float32 else st.float64)
    np.testing.assert_allclose(r.item(), float(np.sum(x.astype(np.float64) * y)), rtol=TOL[dtype])
    np.testing.assert_allclose(blas.nrm2(T(x)).item(), float(np.sqrt(np.sum(x.astype(np.float64) ** 2))),
                               rtol=TOL[dtype])
    assert blas.nrm2(T(np.zeros(0, dtype))).item() == 0
    big = np.array([3e200, 4e200])
    np.testing.assert_allclose(blas.nrm2(T(big)).item(), 5e200, rtol=1e-12)  # no overflow


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("layout", ["row", "col"])
def test_gemv(dtype, trans, layout):
    a = rand(5, 4, dtype=dtype)
    x = rand(5 if trans else 4, dtype=dtype)
    y = rand(4 if trans else 5, dtype=dtype)
    aa = col_major(a) if layout == "col" else a
    opa = a.T if trans else a
    close(blas.gemv(T(aa), T(x), T(y), alpha=2.0, beta=-0.5, trans=trans), 2.0 * opa @ x - 0.5 * y, dtype)
    close(blas.gemv(T(aa), T(x), trans=trans), opa @ x, dtype)
    # beta = 0: y is not read (NaN does not propagate)
    nan = np.full_like(y, np.nan)
    assert np.isfinite(blas.gemv(T(aa), T(x), T(nan), trans=trans).numpy()).all()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("unit", [False, True])
@pytest.mark.parametrize("layout", ["row", "col"])
def test_trsv(dtype, upper, trans, unit, layout):
    n = 6
    a = tri(n, dtype, upper)
    # the other triangle holds garbage that must not be read
    garbage = np.tril(rand(n, n, dtype=dtype), -1) if upper else np.triu(rand(n, n, dtype=dtype), 1)
    stored = a + garbage
    eff = a.copy()
    if unit:
        np.fill_diagonal(eff, 1)
        np.fill_diagonal(stored, 1000)  # diagonal is not read either
    b = rand(n, dtype=dtype)
    x = blas.trsv(T(col_major(stored) if layout == "col" else stored), T(b), upper=upper, trans=trans,
                  unit_diagonal=unit)
    opa = eff.T if trans else eff
    close(x, np.linalg.solve(opa.astype(np.float64), b.astype(np.float64)), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_gemm(dtype, ta, tb):
    m, k, n = 5, 7, 3
    a = rand(k, m, dtype=dtype) if ta else rand(m, k, dtype=dtype)
    b = rand(n, k, dtype=dtype) if tb else rand(k, n, dtype=dtype)
    c = rand(m, n, dtype=dtype)
    opa, opb = (a.T if ta else a), (b.T if tb else b)
    close(blas.gemm(T(a), T(b), T(c), alpha=0.5, beta=2.0, trans_a=ta, trans_b=tb), 0.5 * opa @ opb + 2 * c, dtype)
    close(blas.gemm(T(col_major(a)), T(col_major(b)), trans_a=ta, trans_b=tb), opa @ opb, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("trans", [False, True])
def test_syrk(dtype, upper, trans):
    n, k = 5, 3
    a = rand(k, n, dtype=dtype) if trans else rand(n, k, dtype=dtype)
    c = rand(n, n, dtype=dtype)
    opa = a.T if trans else a
    full = 1.5 * opa @ opa.T - c
    expected = np.where(np.triu(np.ones((n, n), bool)) if upper else np.tril(np.ones((n, n), bool)), full, c)
    close(blas.syrk(T(a), T(c), alpha=1.5, beta=-1.0, upper=upper, trans=trans), expected, dtype)
    r = blas.syrk(T(col_major(a)), upper=upper, trans=trans)
    mask = np.triu(np.ones((n, n), bool)) if upper else np.tril(np.ones((n, n), bool))
    close(r, np.where(mask, opa @ opa.T, 0), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("layout", ["row", "col"])
def test_trsm(dtype, left, upper, trans, layout):
    m, n = 4, 3
    a = tri(m if left else n, dtype, upper)
    b = rand(m, n, dtype=dtype)
    x = blas.trsm(T(col_major(a) if layout == "col" else a), T(b), alpha=2.0, left=left, upper=upper, trans=trans)
    opa = (a.T if trans else a).astype(np.float64)
    rhs = 2.0 * b.astype(np.float64)
    expected = np.linalg.solve(opa, rhs) if left else np.linalg.solve(opa.T, rhs.T).T
    close(x, expected, dtype)


def test_errors_and_meta():
    with pytest.raises(TypeError, match="float32 or float64"):
        blas.dot(T(np.arange(3)), T(np.arange(3)))
    with pytest.raises(TypeError, match="same dtype"):
        blas.dot(T(np.ones(3, np.float32)), T(np.ones(3)))
    with pytest.raises(RuntimeError, match="same length"):
        blas.axpy(T(np.ones(3)), T(np.ones(4)))
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        blas.gemm(T(np.ones((2, 3))), T(np.ones((2, 3))))
    with pytest.raises(RuntimeError, match="square"):
        blas.trsv(T(np.ones((2, 3))), T(np.ones(2)))
    with pytest.raises(RuntimeError, match="matrix"):
        blas.gemv(T(np.ones(3)), T(np.ones(3)))
    r = blas.gemm(T(np.ones((2, 3))).to("meta"), T(np.ones((2, 4))).to("meta"), trans_a=True)
    assert r.device.type == "meta" and tuple(r.shape) == (3, 4)
    assert tuple(blas.trsm(T(np.eye(3)).to("meta"), T(np.ones((2, 3))).to("meta"), left=False).shape) == (2, 3)


def test_empty():
    assert blas.gemm(T(np.ones((0, 3))), T(np.ones((3, 2)))).shape == (0, 2)
    r = blas.gemm(T(np.ones((2, 0))), T(np.ones((0, 2))), T(np.ones((2, 2))), beta=3.0)
    np.testing.assert_array_equal(r.numpy(), np.full((2, 2), 3.0))
    assert blas.dot(T(np.ones(0)), T(np.ones(0))).item() == 0


def test_backend_line():
    line = blas.backend()
    assert line.startswith("fp32 gemm:") and "threads" in line
