"""index_add over whole slices (the row-wise scatter path): values against torch for every dim of
3-D tensors, duplicate indices, alpha, integer/half dtypes, non-contiguous inputs (generic path),
and the out-of-range error leaving self untouched."""
import numpy as np
import pytest

import strata as st

torch = pytest.importorskip("torch")


def _pair(shape, dtype, rng):
    a = rng.standard_normal(shape).astype(np.float64)
    return st.tensor(a).to(getattr(st, dtype)), torch.tensor(a).to(getattr(torch, dtype))


@pytest.mark.parametrize("dim", [0, 1, 2])
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "int64"])
def test_matches_torch(dim, dtype):
    rng = np.random.default_rng(dim)
    shape = [5, 6, 40]
    src_shape = list(shape)
    src_shape[dim] = 9
    s, t = _pair(shape, dtype, rng)
    ss, ts = _pair(src_shape, dtype, rng)
    if dtype == "int64":
        s, t = (s * 10).to(st.int64), (t * 10).to(torch.int64)
        ss, ts = (ss * 10).to(st.int64), (ts * 10).to(torch.int64)
    idx = rng.integers(0, shape[dim], 9)
    idx[3] = idx[0]  # duplicates accumulate
    for alpha in (1, 3):
        got = s.index_add(dim, st.tensor(idx), ss, alpha=alpha)
        want = t.index_add(dim, torch.tensor(idx), ts, alpha=alpha)
        low = dtype == "bfloat16"  # each add rounds to bfloat16: a few ulp apart after duplicates
        np.testing.assert_allclose(got.to(st.float64).numpy(), want.to(torch.float64).numpy(),
                                   rtol=2e-2 if low else 1e-6, atol=3e-2 if low else 0)


def test_large_rows_and_inplace():
    rng = np.random.default_rng(1)
    out = np.zeros((300, 1500), np.float32)
    src = rng.standard_normal((2000, 1500)).astype(np.float32)
    idx = rng.integers(0, 300, 2000)
    s = st.tensor(out)
    s.index_add_(0, st.tensor(idx), st.tensor(src))
    want = torch.tensor(out).index_add_(0, torch.tensor(idx), torch.tensor(src))
    np.testing.assert_allclose(s.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


def test_noncontiguous_source():
    rng = np.random.default_rng(2)
    src = rng.standard_normal((64, 4)).astype(np.float32)
    idx = rng.integers(0, 10, 64)
    got = st.zeros(4, 10).index_add(1, st.tensor(idx), st.tensor(src).t())
    want = torch.zeros(4, 10).index_add(1, torch.tensor(idx), torch.tensor(src).t())
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


def test_bad_index_raises_and_leaves_self():
    s = st.ones(4, 32)
    with pytest.raises(IndexError, match="index_add"):
        s.index_add_(0, st.tensor([0, 4]), st.ones(2, 32))
    assert float(s.sum()) == 128.0


def test_gradient():
    x = st.zeros(6, 16, dtype=st.float64, requires_grad=True)
    src = st.randn(10, 16, dtype=st.float64, requires_grad=True)
    idx = st.tensor([0, 1, 1, 5, 2, 2, 2, 0, 3, 4])
    assert st.autograd.gradcheck(lambda a, b: a.index_add(0, idx, b, alpha=2.0), (x, src))
