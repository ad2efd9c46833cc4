"""Interop: NumPy (zero-copy both ways), DLPack (NumPy and torch), tolist/item
for every dtype, and tensor() dtype inference compared with torch."""

import gc

import numpy as np
import pytest

import strata

ALL_DTYPES = [
    strata.bool,
    strata.uint8,
    strata.int8,
    strata.int16,
    strata.int32,
    strata.int64,
    strata.float16,
    strata.bfloat16,
    strata.float32,
    strata.float64,
]
NUMPY_DTYPES = {
    strata.bool: np.bool_,
    strata.uint8: np.uint8,
    strata.int8: np.int8,
    strata.int16: np.int16,
    strata.int32: np.int32,
    strata.int64: np.int64,
    strata.float16: np.float16,
    strata.float32: np.float32,
    strata.float64: np.float64,
}


def _addr(a):
    return a.__array_interface__["data"][0]


# ---------------------------------------------------------------------------
# numpy()


def test_numpy_is_zero_copy_both_ways():
    t = strata.tensor([1.0, 2.0, 3.0])
    a = t.numpy()
    assert a.dtype == np.float32 and a.shape == (3,)
    assert _addr(a) == t.data_ptr()
    a[0] = 10.0  # numpy -> tensor
    assert t.tolist() == [10.0, 2.0, 3.0]
    t.add_(1)  # tensor -> numpy
    assert a.tolist() == [11.0, 3.0, 4.0]
    assert np.shares_memory(a, t.numpy())


def test_numpy_keeps_tensor_alive():
    t = strata.tensor([[1, 2], [3, 4]], dtype=strata.int32)
    a = t.numpy()
    del t
    gc.collect()
    _ = [strata.tensor([9, 9, 9, 9], dtype=strata.int32) for _ in range(10)]  # reuse freed memory, if any
    assert a.tolist() == [[1, 2], [3, 4]]


def test_numpy_of_non_contiguous_tensor_keeps_strides():
    base = np.arange(12, dtype=np.float64).reshape(3, 4)
    t = strata.from_numpy(base.T)  # non-contiguous strata tensor over numpy memory
    assert not t.is_contiguous()
    a = t.numpy()
    assert a.shape == (4, 3) and a.strides == base.T.strides
    np.testing.assert_array_equal(a, base.T)
    assert np.shares_memory(a, base)


@pytest.mark.parametrize("dt", [d for d in ALL_DTYPES if d is not strata.bfloat16], ids=str)
def test_numpy_dtypes(dt):
    t = strata.tensor([1, 0, 1], dtype=dt)
    a = t.numpy()
    assert a.dtype == NUMPY_DTYPES[dt]
    assert a.tolist() == t.tolist()


def test_numpy_zero_size_and_0d():
    assert strata.tensor([]).numpy().shape == (0,)
    a = strata.tensor(3.5).numpy()
    assert a.shape == () and a.item() == 3.5


def test_bfloat16_numpy_is_type_error():
    t = strata.tensor([1.0], dtype=strata.bfloat16)
    with pytest.raises(TypeError, match="BFloat16"):
        t.numpy()
    with pytest.raises(TypeError, match="BFloat16"):
        np.asarray(t)
    # the way out works
    assert t.float().numpy().tolist() == [1.0]


def test_numpy_of_meta_tensor_is_type_error():
    m = strata.tensor([1.0], device="meta")
    with pytest.raises(TypeError, match="meta"):
        m.numpy()


def test_array_protocol():
    t = strata.tensor([1, 2, 3])
    a = np.asarray(t)
    assert a.dtype == np.int64 and np.shares_memory(a, t.numpy())
    assert np.array(t, dtype=np.float64).dtype == np.float64
    np.testing.assert_array_equal(np.add(t, 1), [2, 3, 4])


# ---------------------------------------------------------------------------
# from_numpy()


def test_from_numpy_shares_memory_both_ways():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = strata.from_numpy(a)
    assert t.data_ptr() == _addr(a)
    assert tuple(t.shape) == (2, 3) and t.dtype is strata.float32
    a[1, 2] = -1
    assert t.tolist()[1][2] == -1
    t.mul_(2)
    assert a[0, 1] == 2.0 and a[1, 2] == -2.0


def test_from_numpy_keeps_array_alive():
    a = np.arange(4, dtype=np.int64)
    t = strata.from_numpy(a)
    del a
    gc.collect()
    assert t.tolist() == [0, 1, 2, 3]


@pytest.mark.parametrize(
    "make",
    [
        lambda a: a[:, ::2],
        lambda a: a.T,
        lambda a: a[1:, 1:3],
        lambda a: a[::2, ::3],
        lambda a: np.broadcast_to(a[:1], (5, 6)),
    ],
    ids=["step", "transpose", "slice", "step2d", "broadcast"],
)
def test_from_numpy_non_contiguous(make):
    base = np.arange(30, dtype=np.float64).reshape(5, 6)
    v = make(base)
    t = strata.from_numpy(v)
    assert tuple(t.shape) == v.shape
    assert t.stride() == tuple(s // v.itemsize for s in v.strides)
    assert t.tolist() == v.tolist()
    np.testing.assert_array_equal((t + 1).numpy(), v + 1)
    assert np.shares_memory(t.numpy(), base)


@pytest.mark.parametrize("make", [lambda: np.arange(4)[::-1], lambda: np.arange(12.0).reshape(3, 4)[:, ::-2]],
                         ids=["1d", "2d"])
def test_from_numpy_negative_strides_raise_like_torch(make):
    with pytest.raises(ValueError, match="negative"):
        strata.from_numpy(make())
    # a copy is fine (and tensor() copies anyway)
    assert strata.from_numpy(make().copy()).tolist() == make().tolist()
    assert strata.tensor(make()).tolist() == make().tolist()


def test_from_numpy_bad_arrays():
    with pytest.raises(TypeError):
        strata.from_numpy([1, 2])
    for dt in [np.longdouble, np.clongdouble, "datetime64[s]"]:
        with pytest.raises(TypeError, match="convert"):
            strata.from_numpy(np.zeros(2, dtype=dt))
    for dt in [object, "U3"]:
        with pytest.raises(TypeError, match="convert"):
            strata.from_numpy(np.zeros(2, dtype=dt))
    # byte strides that are not a multiple of the item size (a field of a record array)
    rec = np.zeros(3, dtype=[("a", "<f4"), ("b", "u1")])["a"]
    with pytest.raises(ValueError, match="strides"):
        strata.from_numpy(rec)
    # non-native byte order
    with pytest.raises(ValueError, match="byte order"):
        strata.from_numpy(np.arange(3, dtype=">i4"))


@pytest.mark.parametrize("dt", list(NUMPY_DTYPES.values()), ids=lambda d: np.dtype(d).name)
def test_from_numpy_dtypes(dt):
    a = np.array([1, 0, 1], dtype=dt)
    t = strata.from_numpy(a)
    assert t.dtype is next(k for k, v in NUMPY_DTYPES.items() if v is dt)
    assert t.tolist() == a.tolist()


def test_from_numpy_0d_and_empty():
    t = strata.from_numpy(np.array(2.5))
    assert tuple(t.shape) == () and t.item() == 2.5
    e = strata.from_numpy(np.zeros((0, 4), np.int32))
    assert tuple(e.shape) == (0, 4) and e.tolist() == []


# ---------------------------------------------------------------------------
# DLPack


def test_dlpack_to_numpy_zero_copy():
    t = strata.tensor([[1.0, 2.0], [3.0, 4.0]])
    a = np.from_dlpack(t)
    assert a.shape == (2, 2) and a.dtype == np.float32
    assert _addr(a) == t.data_ptr()
    t.add_(1)
    assert a.tolist() == [[2.0, 3.0], [4.0, 5.0]]
    assert t.__dlpack_device__() == (1, 0)


def test_dlpack_from_numpy_zero_copy():
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    t = strata.from_dlpack(a)
    assert tuple(t.shape) == (2, 3) and t.dtype is strata.int32
    assert t.data_ptr() == _addr(a)
    a[0, 0] = 42
    assert t.tolist()[0][0] == 42
    del a
    gc.collect()
    assert t.tolist()[0] == [42, 1, 2]
    # a DLPack capsule works too
    b = np.arange(3.0)
    assert strata.from_dlpack(b.__dlpack__()).tolist() == [0.0, 1.0, 2.0]


def test_dlpack_numpy_non_contiguous_and_kwargs():
    base = np.arange(12.0).reshape(3, 4)
    t = strata.from_dlpack(base[:, 1::2])
    assert t.tolist() == base[:, 1::2].tolist()
    v = strata.from_numpy(base).__dlpack__  # consumers pass keyword arguments
    assert v(max_version=(1, 0)) is not None
    assert v(stream=None, dl_device=(1, 0), copy=False) is not None
    c = np.from_dlpack(strata.from_numpy(base), copy=True)
    assert not np.shares_memory(c, base)
    with pytest.raises((ValueError, BufferError)):
        v(dl_device=(2, 0))


@pytest.mark.parametrize("dt", [d for d in ALL_DTYPES if d is not strata.bfloat16], ids=str)
def test_dlpack_numpy_roundtrip_dtypes(dt):
    t = strata.tensor([1, 0, 1], dtype=dt)
    a = np.from_dlpack(t)
    assert a.dtype == NUMPY_DTYPES[dt]
    back = strata.from_dlpack(a)
    assert back.dtype is dt and back.tolist() == t.tolist()


def test_dlpack_meta_tensor_refused():
    with pytest.raises(TypeError, match="meta"):
        strata.tensor([1.0], device="meta").__dlpack__()


def test_dlpack_with_torch():
    torch = pytest.importorskip("torch")
    t = strata.tensor([[1.0, 2.0], [3.0, 4.0]])
    tt = torch.from_dlpack(t)
    assert tt.dtype == torch.float32 and tt.shape == (2, 2)
    assert tt.data_ptr() == t.data_ptr()
    tt.add_(1)
    assert t.tolist() == [[2.0, 3.0], [4.0, 5.0]]

    src = torch.arange(6, dtype=torch.int64).reshape(2, 3)
    s = strata.from_dlpack(src)
    assert s.data_ptr() == src.data_ptr() and s.dtype is strata.int64
    src[0, 0] = 7
    assert s.tolist()[0][0] == 7
    # non-contiguous torch views
    v = strata.from_dlpack(src.t())
    assert v.tolist() == src.t().tolist()
    assert v.stride() == src.t().stride()
    del src
    gc.collect()
    assert s.tolist()[1] == [3, 4, 5]


@pytest.mark.parametrize("dt", ALL_DTYPES, ids=str)
def test_dlpack_torch_dtypes(dt):
    torch = pytest.importorskip("torch")
    t = strata.tensor([1, 0, 1], dtype=dt)
    tt = torch.from_dlpack(t)
    assert str(tt.dtype) == "torch." + str(dt).split(".")[1]
    assert tt.tolist() == t.tolist()
    back = strata.from_dlpack(tt)
    assert back.dtype is dt and back.tolist() == t.tolist()


# ---------------------------------------------------------------------------
# tolist / item


_PY_TYPE = {strata.bool: bool, strata.float16: float, strata.bfloat16: float, strata.float32: float,
            strata.float64: float}


@pytest.mark.parametrize("dt", ALL_DTYPES, ids=str)
def test_tolist_and_item_every_dtype(dt):
    vals = [1, 0, 1] if dt is strata.bool else [1, 0, 3]
    t = strata.tensor([vals, vals], dtype=dt)
    lst = t.tolist()
    expect_type = _PY_TYPE.get(dt, int)
    want = [[expect_type(v) for v in vals]] * 2
    assert lst == want
    assert all(type(x) is expect_type for row in lst for x in row)
    one = strata.tensor(vals[2], dtype=dt)
    assert type(one.item()) is expect_type and one.item() == expect_type(vals[2])
    assert type(strata.tensor([vals[2]], dtype=dt).item()) is expect_type  # any one-element shape
    assert one.tolist() == one.item()  # 0-d tolist is the scalar
    with pytest.raises(RuntimeError, match="3 elements|elements"):
        strata.tensor(vals, dtype=dt).item()


def test_item_extremes_exact():
    assert strata.tensor(2**63 - 1).item() == 2**63 - 1
    assert strata.tensor(-(2**63)).item() == -(2**63)
    assert strata.tensor(255, dtype=strata.uint8).item() == 255
    assert strata.tensor(-128, dtype=strata.int8).item() == -128
    assert strata.tensor(1e300, dtype=strata.float64).item() == 1e300
    assert strata.tensor(65504.0, dtype=strata.float16).item() == 65504.0
    nan = strata.tensor(float("nan")).item()
    assert nan != nan


def test_tolist_non_contiguous_matches_numpy():
    base = np.arange(24, dtype=np.int16).reshape(2, 3, 4)
    v = base.transpose(2, 0, 1)[::2]
    assert strata.from_numpy(v).tolist() == v.tolist()


def test_tolist_and_item_compare_with_torch():
    torch = pytest.importorskip("torch")
    for dt in ALL_DTYPES:
        name = str(dt).split(".")[1]
        data = [[0.5, -1.25, 3.0], [1e-3, 2.0, -0.0]] if dt.is_floating_point else [[1, 0, 1], [0, 1, 1]]
        s = strata.tensor(data, dtype=dt)
        t = torch.tensor(data, dtype=getattr(torch, name))
        assert s.tolist() == t.tolist(), name
        assert s.tolist()[0][1] == t[0, 1].item()


# ---------------------------------------------------------------------------
# tensor() dtype inference vs torch


def _data_cases(mod):
    """The same data built with either framework's tensor type (for nested 0-d tensors)."""
    return {
        "ints": [1, 2],
        "floats": [1.0, 2],
        "bools": [True, False],
        "bool+int": [True, 1],
        "int+float": [1, 2.5],
        "empty": [],
        "empty2d": [[]],
        "int": 3,
        "float": 3.0,
        "bool": True,
        "big int": 2**62,
        "tuple": (1, 2),
        "range": range(3),
        "nested mixed": [[1], [2.0]],
        "np.float64 scalar": np.float64(1),
        "np.float32 scalar": np.float32(1),
        "np.int32 scalar": np.int32(1),
        "np.int8 scalar": np.int8(1),
        "np.bool_ scalar": np.bool_(True),
        "np.float16 scalar": np.float16(1),
        "[np.float32]": [np.float32(1)],
        "[np.int32, np.int32]": [np.int32(1), np.int32(2)],
        "[np.float64, int]": [np.float64(1), 2],
        "[int, np.float32]": [1, np.float32(2)],
        "[np.bool_]": [np.bool_(True)],
        "[np.uint8]": [np.uint8(3)],
        "np int32 array": np.arange(3, dtype=np.int32),
        "np 0-d array": np.array(2.0),
        "list of arrays": [np.arange(2), np.arange(2)],
        "list of int32 arrays": [np.arange(2, dtype=np.int32)] * 3,
        "[tensor(1), 2.0]": [mod.tensor(1), 2.0],
        "[tensor(1., f64)]": [mod.tensor(1.0, dtype=mod.float64)],
        "[tensor(i32), tensor(i32)]": [mod.tensor(1, dtype=mod.int32), mod.tensor(2, dtype=mod.int32)],
        "[1e300]": [1e300],
    }


def test_tensor_dtype_inference_matches_torch():
    torch = pytest.importorskip("torch")
    s_cases, t_cases = _data_cases(strata), _data_cases(torch)
    bad = []
    for key in s_cases:
        tt = torch.tensor(t_cases[key])
        st = strata.tensor(s_cases[key])
        want = str(tt.dtype).replace("torch.", "")
        got = str(st.dtype).replace("strata.", "")
        if got != want or tuple(st.shape) != tuple(tt.shape) or st.tolist() != tt.tolist():
            bad.append(f"{key}: strata {got} {tuple(st.shape)} {st.tolist()} vs torch {want} {tuple(tt.shape)}")
    assert not bad, "\n".join(bad)


def test_tensor_dtype_inference_follows_default_dtype():
    old = strata.get_default_dtype()
    try:
        strata.set_default_dtype(strata.float64)
        assert strata.tensor([1.0, 2]).dtype is strata.float64
        assert strata.tensor(1.0).dtype is strata.float64
        assert strata.tensor([np.float32(1)]).dtype is strata.float32
        assert strata.tensor([1, 2]).dtype is strata.int64
        assert strata.tensor([]).dtype is strata.float64
    finally:
        strata.set_default_dtype(old)


def test_tensor_copies_its_input():
    a = np.arange(3.0)
    t = strata.tensor(a)
    a[0] = 9
    assert t.tolist() == [0.0, 1.0, 2.0]
    u = strata.tensor(t)
    t.add_(1)
    assert u.tolist() == [0.0, 1.0, 2.0]


def test_tensor_explicit_dtype():
    assert strata.tensor([1.7, -2.7], dtype=strata.int32).tolist() == [1, -2]
    assert strata.tensor([1, 2], dtype=strata.float16).tolist() == [1.0, 2.0]
    assert strata.tensor([0, 2], dtype=strata.bool).tolist() == [False, True]
    assert strata.tensor([True, False], dtype=strata.float32).tolist() == [1.0, 0.0]
    assert strata.tensor(np.arange(3), dtype=strata.float32).dtype is strata.float32
