"""Factories: signatures, dtype inference (vs torch), meta device, out=, errors."""

import numpy as np
import pytest

import strata as st

torch = pytest.importorskip("torch")


def tname(dt):
    return str(dt).split(".")[1]


@pytest.mark.parametrize("call", [
    "zeros(2, 3)", "zeros((2, 3))", "zeros([4])", "zeros(())", "zeros(0, 5)", "ones(3)", "empty(2, 2)",
    "full((2,), 3)", "full((2,), True)", "full((2,), 2.5)", "full((2, 2), -1, dtype={m}.float64)",
    "arange(5)", "arange(5.0)", "arange(0, 5, 0.5)", "arange(1, 4)", "arange(0, 10, 3, dtype={m}.int8)",
    "arange(0, 5, 1.5, dtype={m}.int64)", "arange(0.5, 5, dtype={m}.int64)", "arange(10, 0, -3)",
    "arange(-1.0, 1.0, 0.5, dtype={m}.float16)", "arange(0, 1, 0.1)", "arange({m}.tensor(4))",
    "linspace(0, 1, 5)", "linspace(0, 10, 4, dtype={m}.int64)", "linspace(-3, 7, 5, dtype={m}.int32)",
    "linspace(3, 3, 1)", "linspace(0, 1, 0)", "linspace(0.0, 1.0, 7, dtype={m}.float64)",
    "logspace(0, 2, 3)", "logspace(0, 2, 3, base=2, dtype={m}.int64)",
    "eye(3)", "eye(2, 3)", "eye(3, dtype={m}.bool)", "eye(0)",
    "zeros(2, dtype={m}.int32)", "ones(2, 2, dtype={m}.bool)",
])
def test_matches_torch(call):
    s = eval(call.format(m="st"), {"st": st, **{k: getattr(st, k) for k in dir(st) if not k.startswith("_")}},
             {"zeros": st.zeros})  # noqa: S307
    t = eval(call.format(m="torch"), {"torch": torch, **{k: getattr(torch, k) for k in
                                                          ("zeros", "ones", "empty", "full", "arange", "linspace",
                                                           "logspace", "eye")}})  # noqa: S307
    assert tuple(s.shape) == tuple(t.shape), call
    assert tname(s.dtype) == tname(t.dtype), call
    if not call.startswith("empty"):
        np.testing.assert_allclose(s.float().numpy() if s.dtype is st.bfloat16 else s.numpy(),
                                   t.float().numpy() if t.dtype == torch.bfloat16 else t.numpy(),
                                   rtol=1e-6, atol=0, err_msg=call)


def test_arange_float_step_count_like_torch():
    # torch's vectorized CPU loop rounds a little differently from element to
    # element (and per ISA), so values are compared to a few ulp; counts exactly.
    for start, end, step in [(0, 1, 0.1), (0, 0.3, 0.1), (1, 2.0000001, 0.1), (-5, 5, 0.7), (0, 1e6, 0.5)]:
        s, t = st.arange(start, end, step), torch.arange(start, end, step)
        assert s.shape[0] == t.shape[0], (start, end, step)
        np.testing.assert_allclose(s.numpy(), t.numpy(), rtol=1e-6, atol=1e-6)
        s64, t64 = (st.arange(start, end, step, dtype=st.float64), torch.arange(start, end, step, dtype=torch.float64))
        np.testing.assert_allclose(s64.numpy(), t64.numpy(), rtol=1e-14, atol=1e-14)


def test_linspace_close_to_torch_and_exact_endpoints():
    for args in [(0, 1, 10), (-7.3, 11.1, 33), (1e-3, 1e3, 101)]:
        for dt in ("float32", "float64"):
            s = st.linspace(*args, dtype=getattr(st, dt)).numpy()
            t = torch.linspace(*args, dtype=getattr(torch, dt)).numpy()
            np.testing.assert_allclose(s, t, rtol=1e-6 if dt == "float32" else 1e-14, atol=1e-6)
            assert s[0] == t[0] and s[-1] == t[-1]


@pytest.mark.parametrize("fn", ["zeros", "ones", "empty", "rand", "randn"])
def test_meta_device(fn):
    m = getattr(st, fn)(2, 3, device="meta")
    assert m.device.type == "meta" and tuple(m.shape) == (2, 3) and m.dtype is st.float32
    m = getattr(st, fn)((4,), dtype=st.float64, device=st.device("meta"))
    assert m.device.type == "meta" and m.dtype is st.float64


def test_meta_other_factories():
    assert st.full((2,), 7, device="meta").dtype is st.int64
    a = st.arange(0, 10, 3, device="meta")
    assert a.device.type == "meta" and tuple(a.shape) == (4,) and a.dtype is st.int64
    assert tuple(st.linspace(0, 1, 9, device="meta").shape) == (9,)
    assert tuple(st.eye(3, 5, device="meta").shape) == (3, 5)
    assert tuple(st.randint(0, 5, (7,), device="meta").shape) == (7,)
    assert tuple(st.randperm(6, device="meta").shape) == (6,)
    assert st.empty_strided((2, 3), (1, 2), device="meta").stride() == (1, 2)
    x = st.empty(2, 3, device="meta")
    for f in (st.zeros_like, st.ones_like, st.empty_like, st.rand_like, st.randn_like):
        y = f(x)
        assert y.device.type == "meta" and tuple(y.shape) == (2, 3)
    assert st.full_like(x, 2).device.type == "meta"
    assert x.new_zeros(4).device.type == "meta"
    x.normal_()  # no data: nothing to do, no error
    x.uniform_(0, 1)


def test_like_functions_keep_dtype_and_override():
    x = st.tensor([[1, 2], [3, 4]], dtype=st.int32)
    assert st.zeros_like(x).dtype is st.int32
    np.testing.assert_array_equal(st.ones_like(x).numpy(), np.ones((2, 2), np.int32))
    assert st.full_like(x, 7).numpy().tolist() == [[7, 7], [7, 7]]
    assert st.full_like(x, 2.5, dtype=st.float64).dtype is st.float64
    assert st.empty_like(x, dtype=st.float16).dtype is st.float16
    assert st.rand_like(x, dtype=st.float32).dtype is st.float32
    r = st.randint_like(x, 10)
    assert r.dtype is st.int32 and 0 <= r.numpy().min() and r.numpy().max() < 10
    r = st.randint_like(x, 5, 8)
    assert 5 <= r.numpy().min() and r.numpy().max() < 8
    with pytest.raises(RuntimeError, match="floating point"):
        st.rand_like(x)


def test_new_methods():
    x = st.tensor([1.0, 2.0], dtype=st.float64)
    assert x.new_zeros(2, 3).dtype is st.float64
    assert tuple(x.new_ones((3,)).shape) == (3,)
    assert x.new_full((2,), 5).numpy().tolist() == [5.0, 5.0]
    assert x.new_empty(0).dtype is st.float64
    assert x.new_empty_strided((2, 2), (1, 2)).stride() == (1, 2)
    y = x.new_tensor([1, 2, 3])
    assert y.dtype is st.float64 and y.numpy().tolist() == [1.0, 2.0, 3.0]
    assert x.new_zeros(2, dtype=st.int8).dtype is st.int8


def test_empty_strided():
    t = st.empty_strided((2, 3), (1, 2))
    assert t.stride() == (1, 2) and tuple(t.shape) == (2, 3)
    assert st.empty_strided((0, 3), (3, 1)).numel() == 0
    with pytest.raises(RuntimeError, match="empty_strided"):
        st.empty_strided((2, 3), (1, -1))
    with pytest.raises(RuntimeError, match="mismatch"):
        st.empty_strided((2, 3), (1,))


def test_out_argument():
    out = st.empty(7)
    r = st.zeros(2, 3, out=out)
    assert r._is_same(out) and tuple(out.shape) == (2, 3) and out.numpy().sum() == 0
    out = st.empty(0, dtype=st.int64)
    st.arange(5, out=out)
    assert out.numpy().tolist() == [0, 1, 2, 3, 4]
    out = st.empty(3, dtype=st.float64)
    st.arange(3, out=out)  # out's dtype wins over the inferred int64, as in torch
    assert out.dtype is st.float64 and out.numpy().tolist() == [0.0, 1.0, 2.0]
    out = st.empty(4)
    st.linspace(0, 1, 4, out=out)
    np.testing.assert_allclose(out.numpy(), np.linspace(0, 1, 4), rtol=1e-6)
    out = st.empty(2, 2)
    st.eye(2, out=out)
    assert out.numpy().tolist() == [[1, 0], [0, 1]]
    with pytest.raises(RuntimeError, match="dtype"):
        st.zeros(2, out=st.empty(2), dtype=st.float64)


@pytest.mark.parametrize("call,match", [
    (lambda: st.zeros(-1), "negative dimension"),
    (lambda: st.ones(2, -3), "negative dimension"),
    (lambda: st.empty(-2), "negative dimension"),
    (lambda: st.full((-1,), 1.0), "negative dimension"),
    (lambda: st.arange(0, 10, 0), "step must be nonzero"),
    (lambda: st.arange(0, -10), "inconsistent with step sign"),
    (lambda: st.arange(10, 0, 1), "inconsistent with step sign"),
    (lambda: st.arange(0, float("nan")), "unsupported range"),
    (lambda: st.linspace(0, 1, -1), "non-negative"),
    (lambda: st.eye(-1), "greater or equal to 0"),
    (lambda: st.randint(5, 5, (3,)), "less than"),
    (lambda: st.randperm(-1), "non-negative"),
    (lambda: st.rand(2, dtype=st.int64), "floating point"),
    (lambda: st.randint(0, 300, (2,), dtype=st.uint8), "out of bounds"),
])
def test_errors(call, match):
    with pytest.raises(RuntimeError, match=match):
        call()


def test_type_errors():
    with pytest.raises(TypeError):
        st.zeros(2.5)
    with pytest.raises(TypeError):
        st.zeros("a")
    with pytest.raises(NotImplementedError):
        st.zeros(2, layout="sparse")
    assert st.zeros(2, layout=st.strided, pin_memory=False).numel() == 2


def test_requires_grad_flag():
    t = st.zeros(2, requires_grad=False)
    assert t.numel() == 2
    if hasattr(st.Tensor, "requires_grad_"):
        assert st.ones(2, requires_grad=True).requires_grad
    else:
        with pytest.raises(NotImplementedError):
            st.ones(2, requires_grad=True)


def test_zero_size_and_0d():
    assert st.zeros(()).dim() == 0 and st.zeros(()).item() == 0.0
    assert st.full((), 3).item() == 3
    assert st.arange(0).numel() == 0
    assert tuple(st.eye(0, 3).shape) == (0, 3)
    assert st.rand(0, 4).numel() == 0


def test_range_deprecated_inclusive():
    np.testing.assert_allclose(st.range(1, 4).numpy(), [1, 2, 3, 4])
    assert st.range(0, 1, 0.5).dtype is st.float32
