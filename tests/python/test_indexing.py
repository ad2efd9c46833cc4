"""Tensor.__getitem__ / __setitem__ against NumPy (and torch when installed).

Index expressions are written once with NumPy arrays for the advanced parts;
`to_st` turns the arrays into strata tensors for the strata side."""

import numpy as np
import pytest

import strata as st

try:
    import torch
except Exception:  # pragma: no cover
    torch = None


def to_st(idx):
    if isinstance(idx, tuple):
        return tuple(to_st(i) for i in idx)
    if isinstance(idx, np.ndarray):
        return st.from_numpy(idx)
    return idx


def to_torch_idx(idx):
    if isinstance(idx, tuple):
        return tuple(to_torch_idx(i) for i in idx)
    if isinstance(idx, np.ndarray):
        return torch.from_numpy(idx)
    return idx


A = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
I = np.array  # noqa: E741

# (index, same result as NumPy?) -- ints are selects in torch, so an int
# separated from an array by a slice places dims differently from NumPy.
READS = [
    0, -1, (1, 2), (1, -1, 3, 4), slice(None), slice(1, None), slice(None, None, 2), (slice(None), 1),
    (Ellipsis, 1), (Ellipsis,), (1, Ellipsis, 2), (None,), (None, 1, None), (Ellipsis, None),
    (slice(None), None, slice(1, 3)), (slice(-100, 100),), (slice(3, 1),), (slice(None), slice(None, None, 3)),
    (), True, False, (None, True), (0, True),
    I([1, 0, 1]), [0, 1, -1], I([[0, 1], [1, 0]]), (I([0, 1]), I([2, 0])),
    (slice(None), I([0, 2, 2])), (slice(None), I([0, 2]), I([1, 3])),
    (I([0, 1]), slice(None), I([1, 3])),                 # separated -> front
    (I([0, 1]), slice(None), slice(None), I([1, 3])),    # separated -> front
    (slice(None), I([[0], [2]]), slice(None), I([1, 4])),  # separated, broadcast
    (Ellipsis, I([1, 3])), (Ellipsis, I([1, 3]), slice(None)),
    (None, I([0, 1]), None, I([1, 2])), (I([0, 1]), None, I([1, 2])),
    I([True, False]), (slice(None), I([True, False, True])), (A[..., 0] > 30),
    (slice(None), A[0, :, :, 0] > 20), (I([True, True]), slice(None), I([0, 2])),
    (slice(None), I([], dtype=np.int64)), [], (I([1]), I([[0], [2]]), I([0, 1, 2])),
    (I(1),), (slice(None), I(2)), (I([0, 1]), slice(None), I(1)),  # 0-d integer arrays select, like ints
    (slice(1, 1), I([0, 0])),  # zero-size result from an advanced index
]


def np_getitem(a, idx):
    if isinstance(idx, list):
        idx = np.array(idx, dtype=np.int64)
    return a[idx]


@pytest.mark.parametrize("idx", READS, ids=[repr(i)[:60] for i in READS])
def test_getitem_matches_numpy(idx):
    x = st.from_numpy(A.copy())
    expected = np_getitem(A, idx)
    got = x[to_st(idx)]
    assert tuple(got.shape) == expected.shape
    np.testing.assert_array_equal(got.numpy(), expected)
    if torch is not None:
        t = torch.from_numpy(A.copy())[to_torch_idx(idx)]
        assert tuple(t.shape) == expected.shape
        # Contiguity matters to users (x[:, idx].view(-1)): advanced results are fresh and contiguous like torch's.
        assert got.is_contiguous() == t.is_contiguous(), (got.stride(), t.stride())


@pytest.mark.parametrize("idx", READS, ids=[repr(i)[:60] for i in READS])
def test_getitem_on_meta_and_noncontiguous(idx):
    base = np.ascontiguousarray(A.transpose(3, 2, 1, 0)).transpose(3, 2, 1, 0)  # same values, reversed strides
    x = st.from_numpy(base)
    assert not x.is_contiguous()
    np.testing.assert_array_equal(x[to_st(idx)].numpy(), np_getitem(A, idx))
    sidx = to_st(idx)
    has_mask = any(isinstance(i, st.Tensor) and i.dtype is st.bool and i.ndim > 0
                   for i in (sidx if isinstance(sidx, tuple) else (sidx,)))
    if not has_mask:
        m = st.from_numpy(A.copy()).to("meta")[sidx]
        assert m.device.type == "meta" and tuple(m.shape) == np_getitem(A, idx).shape


def test_basic_indexing_returns_views_and_advanced_copies():
    x = st.from_numpy(A.copy())
    v = x[1, :, 2:]
    assert v._storage_ptr() == x._storage_ptr()
    c = x[[0, 1]]
    assert c._storage_ptr() != x._storage_ptr()
    assert not x[...]._is_same(x) and x[...]._storage_ptr() == x._storage_ptr()
    assert not x[:]._is_same(x)
    # A 0-d integer tensor selects like an int (torch returns a view too).
    assert x[st.tensor(1)]._storage_ptr() == x._storage_ptr()


def test_zero_dim_tensor_indexing():
    x = st.tensor(5.0)
    assert x[()].shape == () and x[()].item() == 5.0
    assert x[...].shape == ()
    assert x[None].shape == (1,)
    assert x[True].shape == (1,)
    assert x[False].shape == (0,)
    with pytest.raises(IndexError, match="invalid index of a 0-dim tensor"):
        x[0]
    x[()] = 7
    assert x.item() == 7.0
    x[...] = st.tensor(2.5)
    assert x.item() == 2.5


ERRORS = [
    (5, IndexError, "index 5 is out of bounds for dimension 0 with size 2"),
    (-3, IndexError, "index -3 is out of bounds for dimension 0 with size 2"),
    ((0, 3), IndexError, "index 3 is out of bounds for dimension 1 with size 3"),
    ((0, 0, 0, 0, 0), IndexError, "too many indices for tensor of dimension 4"),
    ((Ellipsis, Ellipsis), IndexError, "single ellipsis"),
    (slice(None, None, -1), ValueError, "step must be greater than zero"),
    (slice(None, None, 0), ValueError, "cannot be zero"),
    (1.5, IndexError, "only integers, slices"),
    (I([2]), IndexError, "index 2 is out of bounds for dimension 0 with size 2"),
    ((slice(None), I([0, 5])), IndexError, "index 5 is out of bounds"),
    (I([True, False, True]), IndexError, "shape of the mask"),
    ((slice(None), np.ones((3, 5), bool)), IndexError, "shape of the mask"),
    ((I([0, 1]), I([0, 1, 2])), IndexError, "broadcast"),
    (I([0.5]), IndexError, "long, int, byte or bool"),
]


@pytest.mark.parametrize("idx,err,match", ERRORS, ids=[repr(e[0])[:40] for e in ERRORS])
def test_index_errors(idx, err, match):
    x = st.from_numpy(A.copy())
    with pytest.raises(err, match=match):
        x[to_st(idx)]
    if torch is not None and repr(idx) != "(Ellipsis, Ellipsis)":  # torch accepts several ellipses; NumPy does not
        with pytest.raises(err):
            torch.from_numpy(A.copy())[to_torch_idx(idx)]


def test_unsupported_index_types():
    x = st.from_numpy(A.copy())
    for bad in ["a", 1.5, object(), {1: 2}]:
        with pytest.raises((IndexError, TypeError)):
            x[bad]


# ---- writes --------------------------------------------------------------------------

WRITES = [
    (0, 1.5), (-1, -2), ((1, 2), 7), (slice(None), 3), ((slice(None), 1), np.arange(4 * 5.0).reshape(4, 5)),
    ((Ellipsis, 1), np.arange(4.0)), ((slice(None, None, 2), slice(1, 3)), 0.25),
    ((None, 1), np.ones((1, 3, 4, 5))), ((0,), np.ones((1, 1, 3, 4, 5))),  # leading 1s are dropped
    (I([1, 0]), 5), ([0, 1, 1], np.zeros((3, 3, 4, 5))), ((I([0, 1]), I([2, 0])), np.arange(2 * 4 * 5.0).reshape(2, 4, 5)),
    ((slice(None), I([0, 2])), np.arange(5.0)), ((I([0, 1]), slice(None), I([1, 3])), np.arange(2 * 3 * 5.0).reshape(2, 3, 5)),
    ((slice(None), I([[0], [2]]), slice(None), I([1, 4])), 3.0), (A > 50, -1.0), (A > 50, np.arange(float((A > 50).sum()))),
    ((slice(None), A[0, :, :, 0] > 20), 2), ((Ellipsis, I([4, 0])), np.arange(2.0)), (I([], dtype=np.int64), 1.0),
    ((slice(1, 1), I([0, 0])), 4.0), (False, 3.0), (True, 3.0), (I(1), 8.0), ([1], np.ones((1, 3, 4, 5))),
]


@pytest.mark.parametrize("idx,value", WRITES, ids=[repr(w[0])[:50] for w in WRITES])
def test_setitem_matches_numpy(idx, value):
    expected = A.copy()
    key = np.array(idx, np.int64) if isinstance(idx, list) else idx
    expected[key] = value
    x = st.from_numpy(A.copy())
    v0 = x._version
    sval = st.from_numpy(np.asarray(value, np.float32)) if isinstance(value, np.ndarray) else value
    x[to_st(idx)] = sval
    np.testing.assert_array_equal(x.numpy(), expected)
    assert x._version > v0 or expected.size == 0
    # The same through a non-contiguous view of a bigger tensor.
    big = np.zeros((2, 3, 4, 10), np.float32)
    big[..., ::2] = A
    y = st.from_numpy(big)[..., ::2]
    y[to_st(idx)] = sval
    np.testing.assert_array_equal(y.numpy(), expected)
    np.testing.assert_array_equal(st.from_numpy(big)[..., 1::2].numpy(), 0)  # untouched in between


def test_setitem_casts_and_broadcasts():
    x = st.tensor(np.zeros((3, 4), np.int32))
    x[0] = 2.7  # float into int: truncates like torch
    x[1] = st.tensor([1.9, 2.1, 3.5, 4.0], dtype=st.float64)
    x[[2, 2]] = st.tensor([7, 8, 9, 10], dtype=st.int64)
    assert x.dtype is st.int32
    np.testing.assert_array_equal(x.numpy(), [[2, 2, 2, 2], [1, 2, 3, 4], [7, 8, 9, 10]])
    b = st.tensor(np.zeros(4, bool))
    b[st.tensor([1, 3])] = True
    assert b.tolist() == [False, True, False, True]
    h = st.tensor(np.zeros(3, np.float32), dtype=st.bfloat16)
    h[1:] = 1.5
    assert h.float().tolist() == [0.0, 1.5, 1.5]


def test_setitem_from_lists_and_self_overlap():
    x = st.tensor(np.arange(6.0).reshape(2, 3))
    x[0] = [10, 11, 12]
    x[1] = x[0]
    np.testing.assert_array_equal(x.numpy(), [[10, 11, 12], [10, 11, 12]])
    y = st.tensor(np.arange(5.0))
    with pytest.raises(RuntimeError, match="refer to a single memory location"):  # as torch: overlapping write
        y[1:] = y[:-1]
    np.testing.assert_array_equal(y.numpy(), [0, 1, 2, 3, 4])
    y[1:] = y[:-1].clone()
    np.testing.assert_array_equal(y.numpy(), [0, 0, 1, 2, 3])
    z = st.tensor(np.arange(5.0))
    z[[1, 2, 3, 4]] = z[[0, 1, 2, 3]]
    np.testing.assert_array_equal(z.numpy(), [0, 0, 1, 2, 3])


def test_setitem_errors():
    x = st.tensor(np.zeros((3, 4), np.float32))
    with pytest.raises(RuntimeError):
        x[0] = st.tensor(np.ones(3, np.float32))
    with pytest.raises(RuntimeError, match="cannot be broadcast to indexing result"):
        x[[0, 1]] = st.tensor(np.ones(3, np.float32))
    with pytest.raises(IndexError):
        x[3] = 1.0
    with pytest.raises(IndexError):
        x[[0, 3]] = 1.0
    with pytest.raises(ValueError):
        x[::-1] = 1.0
    with pytest.raises(IndexError, match="shape of the mask"):
        x[st.tensor([True, False])] = 1.0
    with pytest.raises(TypeError):
        x[0] = None


def test_index_put_accumulate():
    x = st.tensor(np.zeros(5, np.float32))
    x.index_put_([st.tensor([0, 1, 1, 4, 1])], st.tensor(np.ones(5, np.float32)), accumulate=True)
    np.testing.assert_array_equal(x.numpy(), [1, 3, 0, 0, 1])
    m = st.tensor(np.zeros((3, 2), np.float64))
    st.index_put(m, [st.tensor([2, 2])], st.tensor(np.ones((2, 2))), True)  # out of place leaves m alone
    assert m.numpy().sum() == 0
    m.index_put_([st.tensor([2, 2])], st.tensor(np.ones((2, 2))), True)
    np.testing.assert_array_equal(m.numpy(), [[0, 0], [0, 0], [2, 2]])
    # Many duplicates across threads stay exact.
    n = 200000
    idx = st.tensor(np.arange(n) % 7)
    acc = st.tensor(np.zeros(7, np.float64))
    acc.index_put_([idx], st.tensor(np.ones(n)), accumulate=True)
    np.testing.assert_array_equal(acc.numpy(), np.bincount(np.arange(n) % 7))


def test_large_gather_and_mask_multithreaded():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((300, 257)).astype(np.float32)
    x = st.from_numpy(a)
    rows = rng.integers(-300, 300, 5000)
    np.testing.assert_array_equal(x[st.tensor(rows)].numpy(), a[rows])
    mask = a > 0.3
    np.testing.assert_array_equal(x[st.from_numpy(mask)].numpy(), a[mask])
    cols = rng.integers(0, 257, 100)
    np.testing.assert_array_equal(x[:, st.tensor(cols)].numpy(), a[:, cols])
    xt = st.from_numpy(np.ascontiguousarray(a.T)).t()
    np.testing.assert_array_equal(xt[st.tensor(rows), 5:].numpy(), a[rows, 5:])


def test_all_dtypes_roundtrip():
    for dt in [st.float32, st.float64, st.float16, st.bfloat16, st.int8, st.uint8, st.int16, st.int32, st.int64,
               st.bool]:
        x = st.tensor(np.arange(12).reshape(3, 4) % 2, dtype=dt)
        y = x[[2, 0], 1:]
        assert y.dtype is dt and y.shape == (2, 3)
        x[[0, 1]] = x[[2, 2]]
        assert x.float().numpy().tolist() == [[0, 1, 0, 1]] * 3


def test_iteration_uses_getitem():
    x = st.tensor(np.arange(6.0).reshape(3, 2))
    rows = [r.tolist() for r in x]
    assert rows == [[0, 1], [2, 3], [4, 5]]


@pytest.mark.skipif(torch is None, reason="torch not installed")
def test_torch_specific_int_placement():
    # torch treats ints as selects: x[0, :, [0, 1]] keeps the slice dim first (NumPy would not).
    x = st.from_numpy(A.copy())
    t = torch.from_numpy(A.copy())
    for idx in [(0, slice(None), I([0, 1])), (slice(None), 0, slice(None), I([1, 2])), (I([0, 1]), 0, I([1, 2]))]:
        np.testing.assert_array_equal(x[to_st(idx)].numpy(), t[to_torch_idx(idx)].numpy())


def test_random_layouts_gather_and_put():
    # Post dims that cannot be merged (permuted, strided) and sizes that split
    # into several parallel chunks in the middle of a block.
    rng = np.random.default_rng(7)
    for trial in range(30):
        nd = int(rng.integers(2, 5))
        shape = [int(s) for s in rng.integers(1, 9, nd)]
        if trial % 5 == 0:
            shape[0], shape[-1] = 40, 37
        perm = [int(p) for p in rng.permutation(nd)]
        steps = tuple(slice(None, None, int(rng.integers(1, 3))) for _ in range(nd))
        base = rng.standard_normal(shape).astype(np.float32)
        x = st.from_numpy(base).permute(*perm)[steps]
        a = base.transpose(perm)[steps]
        d = int(rng.integers(0, nd))
        n = a.shape[d]
        idx = rng.integers(-n, n, int(rng.integers(0, 50))) if n else np.zeros(0, np.int64)
        key = (slice(None),) * d + (idx,)
        skey = (slice(None),) * d + (st.tensor(idx, dtype=st.int64),)
        np.testing.assert_array_equal(x[skey].numpy(), a[key])
        idx = np.unique(idx % max(n, 1))  # duplicates: which write wins is unspecified
        key = (slice(None),) * d + (idx,)
        skey = (slice(None),) * d + (st.tensor(idx, dtype=st.int64),)
        vals = rng.standard_normal(a[key].shape).astype(np.float32)
        expected = a.copy()
        expected[key] = vals
        x[skey] = st.from_numpy(vals)
        np.testing.assert_array_equal(x.numpy(), expected)
        np.testing.assert_array_equal(base.transpose(perm)[steps], expected)  # written through to the base
