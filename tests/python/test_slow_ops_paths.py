"""The fast CPU paths of topk (heap selection), index_select along the last dim, bincount and float64
erfinv: results against torch (values) and against the stable sort (topk's tie order), edge cases and errors."""

import numpy as np
import pytest
import torch

import strata as st


def tt(a):
    return torch.tensor(np.asarray(a))


# ---- topk ----------------------------------------------------------------------------------------

def ref_topk(x, k, dim, largest):
    v, i = st.sort(x, dim=dim, descending=largest, stable=True)
    return v.narrow(dim, 0, k), i.narrow(dim, 0, k)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32, np.int16])
@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("k", [0, 1, 3, 10, 40, 200])
def test_topk_heap_matches_stable_sort_and_torch(dtype, largest, k):
    rng = np.random.default_rng(k)
    a = rng.integers(-20, 20, (7, 300)).astype(dtype)  # many duplicates
    if np.issubdtype(dtype, np.floating):
        a[rng.random(a.shape) < 0.05] = np.nan
        a[rng.random(a.shape) < 0.05] = -0.0
        a[0, :5] = np.inf
        a[1, :] = np.nan
    x = st.tensor(a)
    v, i = st.topk(x, k, largest=largest)
    rv, ri = ref_topk(x, k, -1, largest)
    np.testing.assert_array_equal(i.numpy(), ri.numpy())
    np.testing.assert_array_equal(v.numpy(), rv.numpy())
    tv, _ = torch.topk(tt(a), k, largest=largest)
    np.testing.assert_array_equal(v.numpy(), tv.numpy())


@pytest.mark.parametrize("largest", [True, False])
def test_topk_noncontiguous_and_other_dims(largest):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((50, 64, 3)).astype(np.float32)
    x = st.tensor(a)
    for dim in (0, 1, 2):
        xs = x.transpose(0, 2) if dim == 2 else x
        v, i = st.topk(xs, 2, dim=dim % xs.dim(), largest=largest)
        tv, ti = torch.topk(tt(a).transpose(0, 2) if dim == 2 else tt(a), 2, dim=dim % 3, largest=largest)
        np.testing.assert_array_equal(v.numpy(), tv.numpy())
        np.testing.assert_array_equal(i.numpy(), ti.numpy())
    step = st.tensor(a)[:, ::2, 0]
    v, i = st.topk(step, 4, largest=largest)
    tv, ti = torch.topk(tt(a)[:, ::2, 0], 4, largest=largest)
    np.testing.assert_array_equal(v.numpy(), tv.numpy())
    np.testing.assert_array_equal(i.numpy(), ti.numpy())


def test_topk_half_types_large_k_empty_and_errors():
    a = np.random.default_rng(2).standard_normal((4, 500)).astype(np.float32)
    for sdt, tdt in ((st.float16, torch.float16), (st.bfloat16, torch.bfloat16)):
        v, i = st.topk(st.tensor(a).to(sdt), 5)
        tv, ti = torch.topk(tt(a).to(tdt), 5)
        np.testing.assert_array_equal(v.float().numpy(), tv.float().numpy())
    v, i = st.topk(st.tensor(a), 500)  # k == n: the sort path
    rv, ri = ref_topk(st.tensor(a), 500, -1, True)
    np.testing.assert_array_equal(i.numpy(), ri.numpy())
    v, i = st.topk(st.tensor(np.zeros((3, 0), np.float32)), 0)
    assert tuple(v.shape) == (3, 0) and tuple(i.shape) == (3, 0)
    with pytest.raises(Exception, match="topk"):
        st.topk(st.tensor(a), 501)
    with pytest.raises(Exception, match="topk"):
        st.topk(st.tensor(a), -1)


# ---- index_select along the last dim ---------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.int16, np.int64])
@pytest.mark.parametrize("idt", [np.int64, np.int32])
def test_index_select_last_dim(dtype, idt):
    rng = np.random.default_rng(3)
    a = (rng.standard_normal((4, 5, 30)) * 10).astype(dtype)
    j = rng.integers(0, 30, 17).astype(idt)
    j[0] = j[1]  # duplicates
    for dim in (-1, 2):
        got = st.index_select(st.tensor(a), dim, st.tensor(j))
        np.testing.assert_array_equal(got.numpy(), torch.index_select(tt(a), dim, tt(j)).numpy())
    # non-contiguous self (transposed, strided) and a strided index
    s = st.tensor(a).transpose(0, 2)[::2]
    t = tt(a).transpose(0, 2)[::2]
    jj = rng.integers(0, 4, 9).astype(idt)
    np.testing.assert_array_equal(st.index_select(s, 2, st.tensor(jj)).numpy(),
                                  torch.index_select(t, 2, tt(jj)).numpy())
    np.testing.assert_array_equal(st.index_select(st.tensor(a), 2, st.tensor(j)[::2]).numpy(),
                                  torch.index_select(tt(a), 2, tt(j)[::2]).numpy())
    # 1-d and empty index
    np.testing.assert_array_equal(st.index_select(st.tensor(a[0, 0]), 0, st.tensor(j)).numpy(), a[0, 0][j])
    e = st.index_select(st.tensor(a), 2, st.tensor(np.zeros(0, idt)))
    assert tuple(e.shape) == (4, 5, 0)


def test_index_select_last_dim_errors():
    a = st.tensor(np.zeros((3, 4), np.float32))
    for bad in ([0, 4], [-1], [2, -5]):
        with pytest.raises(IndexError, match="index_select"):
            st.index_select(a, 1, st.tensor(np.array(bad, np.int64)))
    with pytest.raises(Exception, match="index_select"):
        st.index_select(a, 1, st.tensor(np.array([0.0])))


# ---- bincount -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("n,hi", [(0, 1), (1, 1), (1000, 7), (5000, 3000), (20000, 70000)])
@pytest.mark.parametrize("minlength", [0, 5, 100000])
def test_bincount_counts_and_weights(n, hi, minlength):
    rng = np.random.default_rng(n + hi)
    b = rng.integers(0, hi, n)
    np.testing.assert_array_equal(st.bincount(st.tensor(b), minlength=minlength).numpy(),
                                  torch.bincount(tt(b), minlength=minlength).numpy())
    for wdt in (np.float32, np.float64, np.int64):
        w = (rng.standard_normal(n) * 5).astype(wdt)
        s = st.bincount(st.tensor(b), st.tensor(w), minlength=minlength)
        t = torch.bincount(tt(b), tt(w), minlength=minlength)
        assert str(s.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
        np.testing.assert_array_equal(s.numpy(), t.numpy())  # sums in input order, as torch


def test_bincount_dtypes_noncontiguous_and_errors():
    b = np.array([3, 1, 1, 0, 7, 3, 3], np.int32)
    np.testing.assert_array_equal(st.bincount(st.tensor(b)).numpy(), torch.bincount(tt(b)).numpy())
    u = np.array([3, 1, 1, 0], np.uint8)
    np.testing.assert_array_equal(st.bincount(st.tensor(u)).numpy(), torch.bincount(tt(u)).numpy())
    big = np.arange(20, dtype=np.int64)
    np.testing.assert_array_equal(st.bincount(st.tensor(big)[::3]).numpy(), torch.bincount(tt(big)[::3]).numpy())
    w = np.linspace(0, 1, 20)
    np.testing.assert_array_equal(st.bincount(st.tensor(big)[::3], st.tensor(w)[::3]).numpy(),
                                  torch.bincount(tt(big)[::3], tt(w)[::3]).numpy())
    with pytest.raises(Exception, match="bincount"):
        st.bincount(st.tensor(np.array([1, -1, 2])))
    with pytest.raises(Exception, match="bincount"):
        st.bincount(st.tensor(np.array([[1, 2]])))
    with pytest.raises(Exception, match="bincount"):
        st.bincount(st.tensor(np.array([1.0, 2.0])))
    with pytest.raises(Exception, match="weights"):
        st.bincount(st.tensor(np.array([1, 2])), st.tensor(np.array([1.0])))
    with pytest.raises(Exception, match="minlength"):
        st.bincount(st.tensor(np.array([1, 2])), minlength=-1)


# ---- erfinv float64 -------------------------------------------------------------------------------------

def test_erfinv_float64_against_torch_and_inverse():
    rng = np.random.default_rng(4)
    y = np.concatenate([rng.uniform(-1, 1, 20000), 1 - np.logspace(-16, -1, 200), np.logspace(-300, -1, 200),
                        [0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 1.5, -2.0, np.nan, np.inf]])
    s = st.erfinv(st.tensor(y)).numpy()
    t = torch.erfinv(tt(y)).numpy()
    np.testing.assert_allclose(s, t, rtol=1e-12, atol=0)
    np.testing.assert_array_equal(np.signbit(s[np.isfinite(s)]), np.signbit(t[np.isfinite(t)]))
    assert np.isnan(s[-2]) and np.isnan(s[-1]) and np.isnan(s[-3]) and np.isnan(s[-4])
    # short and long inputs and a strided view agree
    x = st.tensor(y)
    np.testing.assert_array_equal(st.erfinv(x[:100]).numpy(), s[:100])
    np.testing.assert_array_equal(st.erfinv(x[::3]).numpy(), s[::3])
