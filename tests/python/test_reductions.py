"""Reductions, scans and softmax against PyTorch: edge cases (NaN, empty,
0-d, zero-size dims, ties), dtypes, overloads, accuracy and error messages."""

import math

import numpy as np
import pytest

import strata as st

torch = pytest.importorskip("torch")


def T(x):
    """strata tensor -> torch tensor (via NumPy)."""
    if x.dtype is st.bfloat16:
        return torch.from_numpy(x.float().numpy()).bfloat16()
    return torch.from_numpy(np.array(x.numpy()))


def S(t):
    """torch tensor -> strata tensor."""
    if t.dtype == torch.bfloat16:
        return st.tensor(t.float().numpy(), dtype=st.bfloat16)
    # from_numpy keeps the strides of transposed/sliced torch tensors.
    return st.from_numpy(t.numpy())


def ones(*shape, dtype=np.float32):
    return st.from_numpy(np.ones(shape, dtype=dtype))


def empty(*shape, device="cpu"):
    t = st.from_numpy(np.zeros(shape, dtype=np.float32))
    return t.to(device) if device != "cpu" else t


def same(a, b, rtol=1e-5, atol=1e-6):
    assert tuple(a.shape) == tuple(b.shape), (a.shape, b.shape)
    assert str(a.dtype).split(".")[1] == str(b.dtype).split(".")[1], (a.dtype, b.dtype)
    torch.testing.assert_close(T(a), b, rtol=rtol, atol=atol, equal_nan=True, check_dtype=False)


def both(fn, t, *args, **kwargs):
    """Runs fn on strata and torch versions of t and compares (tuples too)."""
    r = fn(st, S(t), *args, **kwargs)
    e = fn(torch, t, *args, **kwargs)
    if isinstance(e, tuple):
        for a, b in zip(r, e):
            same(a, b)
    else:
        same(r, e)


NAN = float("nan")


@pytest.mark.parametrize("op", ["sum", "mean", "prod", "amax", "amin", "max", "min", "logsumexp"])
def test_nan_propagates(op):
    t = torch.tensor([[1.0, NAN, 3.0], [4.0, 5.0, 6.0]])
    if op in ("max", "min"):
        both(lambda m, x: getattr(m, op)(x), t)
        both(lambda m, x: tuple(getattr(m, op)(x, 1)), t)
    elif op == "logsumexp":
        both(lambda m, x: m.logsumexp(x, 1), t)
    else:
        both(lambda m, x: getattr(m, op)(x), t)
        both(lambda m, x: getattr(m, op)(x, 1), t)


def test_nan_in_argmax_and_long_rows():
    t = torch.randn(3, 1000)
    t[1, 517] = NAN
    t[2, 3] = NAN
    t[2, 900] = NAN
    both(lambda m, x: m.argmax(x, 1), t)
    both(lambda m, x: m.argmin(x, 1), t)
    both(lambda m, x: m.amax(x, 1), t)
    both(lambda m, x: m.argmax(x, 0), t)


def test_empty_reductions():
    e = torch.empty(0)
    both(lambda m, x: m.sum(x), e)
    both(lambda m, x: m.prod(x), e)
    both(lambda m, x: m.mean(x), e)
    both(lambda m, x: m.all(x), e)
    both(lambda m, x: m.any(x), e)
    both(lambda m, x: m.count_nonzero(x), e)
    z = torch.empty(3, 0)
    both(lambda m, x: m.sum(x, 1), z)
    both(lambda m, x: m.prod(x, 1), z)
    both(lambda m, x: m.mean(x, 1), z)
    both(lambda m, x: m.sum(x, 0), z)
    both(lambda m, x: m.amax(x, 0), z)
    both(lambda m, x: m.logsumexp(x, 1), z)
    both(lambda m, x: m.softmax(x, 1), z)
    both(lambda m, x: m.cumsum(x, 1), z)
    both(lambda m, x: m.var(x, 1), z)


def test_empty_max_raises():
    with pytest.raises(RuntimeError, match=r"max\(\): Expected reduction dim to be specified for input.numel\(\) == 0"):
        st.max(empty(0))
    with pytest.raises(RuntimeError, match="Expected reduction dim to be specified"):
        empty(2, 0).min()
    with pytest.raises(IndexError, match="Expected reduction dim 1 to have non-zero size"):
        empty(3, 0).max(1)
    with pytest.raises(IndexError, match="non-zero size"):
        st.amax(empty(3, 0), 1)
    with pytest.raises(IndexError, match="Expected reduction dim to be specified"):  # torch's category
        st.argmax(empty(0))
    with pytest.raises(IndexError, match="Expected reduction dim to be specified"):
        st.argmin(empty(2, 0))
    assert tuple(empty(0, 3).amax(1).shape) == (0,)


def test_zero_d_inputs():
    t = torch.tensor(2.5)
    for d in (0, -1):
        both(lambda m, x: m.sum(x, d), t)
        both(lambda m, x: m.sum(x, d, keepdim=True), t)
        both(lambda m, x: m.mean(x, d), t)
        both(lambda m, x: m.prod(x, d), t)
        both(lambda m, x: m.amax(x, d), t)
        both(lambda m, x: tuple(m.max(x, d)), t)
        both(lambda m, x: m.argmax(x, d), t)
        both(lambda m, x: m.cumsum(x, d), t)
        both(lambda m, x: m.softmax(x, d), t)
        both(lambda m, x: m.log_softmax(x, d), t)
        both(lambda m, x: m.logsumexp(x, d), t)
    with pytest.raises(IndexError, match="Dimension out of range"):
        st.tensor(2.5).sum(1)


def test_bad_dims():
    x = ones(2, 3)
    with pytest.raises(IndexError, match="Dimension out of range"):
        st.sum(x, 5)
    with pytest.raises(IndexError, match="Dimension out of range"):
        x.max(-3)
    with pytest.raises(IndexError, match="Dimension out of range"):
        st.softmax(x, 2)
    with pytest.raises(RuntimeError, match="appears multiple times"):
        st.sum(x, (0, 0))
    with pytest.raises(RuntimeError, match="appears multiple times"):
        st.mean(x, (1, -1))


def test_dtype_rules():
    for dt in (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64):
        t = torch.tensor([[1, 0, 1], [1, 1, 0]]).to(dt)
        both(lambda m, x: m.sum(x), t)
        both(lambda m, x: m.sum(x, 0), t)
        both(lambda m, x: m.prod(x, 1), t)
        both(lambda m, x: m.cumsum(x, 1), t)
        both(lambda m, x: m.cumprod(x, 0), t)
        both(lambda m, x: m.all(x, 1), t)
        both(lambda m, x: m.any(x), t)
        both(lambda m, x: m.amax(x, 0), t)
        both(lambda m, x: m.count_nonzero(x, 0), t)
        with pytest.raises(RuntimeError, match="could not infer output dtype"):
            st.mean(S(t))
    t = torch.arange(6).reshape(2, 3)
    both(lambda m, x: m.sum(x, dtype=m.int32), t)
    both(lambda m, x: m.sum(x, 1, dtype=m.float64), t)
    both(lambda m, x: m.mean(x, dtype=m.float32), t)
    both(lambda m, x: m.cumsum(x, 0, dtype=m.float32), t)
    both(lambda m, x: m.softmax(x, 1, dtype=m.float64), t)
    both(lambda m, x: m.logsumexp(x, 1), t)
    with pytest.raises(RuntimeError, match="floating point"):
        st.var(S(t))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_accumulates_in_float(dtype):
    # 4096 ones: a half-precision running sum stalls at 2048 (fp16) or 256 (bf16).
    t = torch.ones(4096, dtype=dtype)
    both(lambda m, x: m.sum(x), t)
    both(lambda m, x: m.mean(x), t)
    both(lambda m, x: m.sum(x, 0), t.reshape(64, 64))
    x = torch.randn(33, 70).to(dtype)
    r = st.softmax(S(x), 1)
    torch.testing.assert_close(T(r).float(), torch.softmax(x, 1).float(), rtol=2e-2, atol=2e-3)
    r = st.var(S(x), 1)
    torch.testing.assert_close(T(r).float(), torch.var(x, 1).float(), rtol=2e-2, atol=2e-2)


def test_accurate_large_float_sum():
    # 2^24 + 1 values: naive float32 accumulation of 1.0 stops at 2^24.
    n = (1 << 24) + 4096
    x = ones(n)
    assert st.sum(x).item() == float(n)
    rng = np.random.default_rng(0)
    a = rng.uniform(0, 1, size=(1 << 22)).astype(np.float32)
    exact = float(np.sum(a.astype(np.float64)))
    got = st.sum(st.from_numpy(a)).item()
    assert abs(got - exact) / exact < 1e-6
    # Column reduction over many rows.
    b = a.reshape(4096, 1024)
    exact_cols = b.astype(np.float64).sum(0)
    got_cols = st.sum(st.from_numpy(b), 0).numpy()
    np.testing.assert_allclose(got_cols, exact_cols, rtol=2e-6)


def test_argmax_ties_first_index():
    t = torch.tensor([[1, 3, 3, 0], [2, 2, 1, 1]])
    both(lambda m, x: m.argmax(x, 1), t)
    both(lambda m, x: m.argmin(x, 1), t)
    both(lambda m, x: m.argmax(x, 0), t)
    both(lambda m, x: m.argmax(x), t)
    both(lambda m, x: tuple(m.max(x, 1)), t)
    both(lambda m, x: tuple(m.min(x, 0, keepdim=True)), t)
    both(lambda m, x: m.argmax(x, keepdim=True), t)


def test_max_overloads_and_named_tuple():
    a = torch.randn(3, 4)
    b = torch.randn(3, 4)
    r = st.max(S(a), S(b))
    same(r, torch.max(a, b))
    same(st.min(S(a), S(b)), torch.min(a, b))
    res = S(a).max(dim=1, keepdim=True)
    same(res.values, a.max(1, True).values)
    same(res.indices, a.max(1, True).indices)
    v, i = st.min(S(a), 0)
    same(v, a.min(0).values)
    same(i, a.min(0).indices)
    same(S(a).max(), a.max())


def test_var_std_signatures():
    a = torch.randn(4, 5, 6, dtype=torch.float64)
    both(lambda m, x: m.var(x), a)
    both(lambda m, x: m.var(x, False), a)
    both(lambda m, x: x.var(1), a)
    both(lambda m, x: x.var(1, True, True), a)
    both(lambda m, x: x.var(dim=(0, 2), unbiased=False), a)
    both(lambda m, x: m.var(x, dim=1, correction=0, keepdim=True), a)
    both(lambda m, x: m.std(x, dim=[0, 1], correction=2), a)
    both(lambda m, x: m.std(x, 2, keepdim=True), a)
    both(lambda m, x: m.var_mean(x, 1), a)
    both(lambda m, x: m.std_mean(x, dim=(0, 2), keepdim=True), a)
    both(lambda m, x: m.var_mean(x, unbiased=False), a)
    both(lambda m, x: m.std(x), a[:1, :1, :1])  # one element: nan


def test_norm_variants():
    a = torch.randn(3, 4)
    both(lambda m, x: m.norm(x), a)
    both(lambda m, x: x.norm(), a)
    both(lambda m, x: m.norm(x, "fro"), a)
    both(lambda m, x: m.norm(x, p="fro", dim=(0, 1)), a)
    for p in (1, 2, 3, 0.5, 0, float("inf"), float("-inf")):
        both(lambda m, x: m.norm(x, p, 1), a)
        both(lambda m, x: m.norm(x, p=p, dim=0, keepdim=True), a)
    with pytest.raises(RuntimeError, match="floating point"):
        st.norm(ones(3, dtype=np.int64))


def test_softmax_stability_and_dims():
    a = torch.tensor([[1000.0, 1001.0, 999.0], [-1000.0, -1001.0, -999.0], [-math.inf, 0.0, 1.0]])
    both(lambda m, x: m.softmax(x, 1), a)
    both(lambda m, x: m.log_softmax(x, 1), a)
    b = torch.tensor([[-math.inf, -math.inf], [1.0, 2.0]])
    both(lambda m, x: m.softmax(x, 1), b)
    both(lambda m, x: m.log_softmax(x, 1), b)
    c = torch.randn(3, 5, 7, 2)
    for d in range(-4, 4):
        both(lambda m, x: m.softmax(x, d), c)
        both(lambda m, x: m.log_softmax(x, d), c)
        both(lambda m, x: x.softmax(d), c.transpose(1, 2))
    big = torch.randn(64, 3000) * 30
    both(lambda m, x: m.softmax(x, 1), big)
    both(lambda m, x: m.log_softmax(x, 1), big)
    both(lambda m, x: m.softmax(x, 0), big)


def test_cumsum_cumprod():
    a = torch.randn(4, 50, 3)
    for d in range(3):
        both(lambda m, x: m.cumsum(x, d), a)
        both(lambda m, x: m.cumprod(x * 0.1 + 1, d), a)
    both(lambda m, x: m.cumsum(x, 1), a.transpose(0, 2))


def test_strided_and_expanded_inputs():
    a = torch.randn(6, 8, 10)
    p = a.permute(2, 0, 1)
    both(lambda m, x: m.sum(x, (0, 2)), p)
    both(lambda m, x: m.sum(x, 1), p)
    both(lambda m, x: m.amax(x, (1, 2), keepdim=True), p)
    s = a[:, ::2, 1::3]
    both(lambda m, x: m.mean(x, 1), s)
    both(lambda m, x: m.prod(x, 2), s)
    # Stride-0 (broadcast) dims.
    e = torch.arange(5.0).reshape(1, 5).expand(4, 5)
    both(lambda m, x: m.sum(x, 0), e)
    both(lambda m, x: m.sum(x, 1), e)
    both(lambda m, x: m.amax(x, 0), e)


def test_parallel_paths_large():
    torch.manual_seed(5)  # this seed once exposed a column sum that drifted to 3e-5 over 131072 rows
    a = torch.randn(1 << 18)
    both(lambda m, x: m.amax(x), a)
    both(lambda m, x: m.argmax(x), a)
    # Products of +-1 and a few 2s and 0.5s are exact in float32.
    signs = torch.sign(a) * torch.where(a.abs() > 2.5, 2.0, 1.0) / torch.where(a.abs() > 2.6, 2.0, 1.0)
    both(lambda m, x: m.prod(x), signs)
    b = torch.randn(3, 1 << 17)
    both(lambda m, x: m.sum(x, 1), b)
    both(lambda m, x: m.amin(x, 1), b)
    # A column sum over 131072 rows cancels heavily, so an elementwise relative
    # tolerance is meaningless; bound the error by the sum of magnitudes instead
    # (a plain running float32 sum would miss this bound by ~100x).
    bt = b.t().contiguous()
    got = torch.from_numpy(st.sum(S(bt), 0).numpy()).double()
    exact = bt.double().sum(0)
    assert ((got - exact).abs() <= 2e-7 * bt.double().abs().sum(0)).all(), (got - exact).abs()


def test_meta_device():
    x = empty(4, 5, device="meta")
    assert tuple(st.sum(x, 1).shape) == (4,)
    assert st.sum(st.from_numpy(np.zeros(3, np.int8)).to("meta")).dtype is st.int64
    v, i = st.max(x, 0, keepdim=True)
    assert tuple(v.shape) == (1, 5) and i.dtype is st.int64 and v.device.type == "meta"
    assert tuple(st.var_mean(x, 1)[1].shape) == (4,)
    assert tuple(st.softmax(x, 0).shape) == (4, 5)
    assert tuple(st.logsumexp(x, (0, 1)).shape) == ()
    assert st.all(x).dtype is st.bool
