"""Tensor printing: strata's repr must equal torch's (with 'torch.' -> 'strata.')."""

import math

import numpy as np
import pytest

import strata as st

torch = pytest.importorskip("torch")

DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int8", "uint8", "bool"]


def both(data, dtype=None):
    """The same tensor in strata and torch (from a NumPy array or nested list)."""
    a = np.asarray(data)
    if a.ndim == 0:
        a = a.item()  # a Python number, so both libraries make a 0-d tensor
    if dtype is None:
        return st.tensor(a), torch.tensor(a)
    return st.tensor(a, dtype=getattr(st, dtype)), torch.tensor(a, dtype=getattr(torch, dtype))


def check(s, t):
    expected = repr(t).replace("torch.", "strata.")
    assert repr(s) == expected, f"\nstrata:\n{s!r}\ntorch:\n{expected}"
    assert str(s) == expected


CASES = {
    "ints": [1, 2, 3],
    "neg_ints": [[-1, 20, 300], [4, -5000, 6]],
    "floats": [0.1, 2.5, -3.25],
    "int_valued_floats": [1.0, 2.0, -3.0],
    "mixed_zero": [0.0, 1.5, 0.0],
    "all_zero": [0.0, 0.0],
    "large": [1e10, 2.0, 3.5],
    "small": [1e-5, 1.0, 2.0],
    "int_valued_wide": [1.0, 1e5],
    "int_valued_huge": [1.0, 1e9],
    "nonfinite": [float("inf"), float("-inf"), float("nan"), 1.5],
    "nonfinite_int_mode": [float("nan"), 2.0, float("inf")],
    "only_nonfinite": [float("nan"), float("inf")],
    "neg_zero": [-0.0, 0.0, 1.0],
    "3d": np.arange(24).reshape(2, 3, 4) / 7.0,
    "4d": np.arange(16).reshape(2, 2, 2, 2),
    "wrap": np.linspace(-1, 1, 50),
    "wrap_ints": np.arange(100) * 1234,
    "wrap_2d": np.linspace(0, 100, 60).reshape(3, 20),
    "bools": [[True, False], [False, True]],
}


@pytest.mark.parametrize("name", list(CASES))
def test_repr_matches_torch(name):
    data = np.asarray(CASES[name])
    if data.dtype.kind == "f":
        dtypes = ["float32", "float64", "float16", "bfloat16"]
    elif data.dtype.kind == "b":
        dtypes = ["bool", "int32", "float32"]
    else:
        dtypes = ["int64", "int32", "float32"]
    for dt in dtypes:
        if dt in ("float16", "bfloat16") and np.abs(data[np.isfinite(data)]).max(initial=0) > 6e4:
            continue
        check(*both(data, dt))


def test_zero_dim():
    check(*both(3.5))
    check(*both(3.5, "float64"))
    check(*both(7))
    check(*both(True))
    check(*both(1e-8))
    check(*both(float("nan")))
    check(*both(-2.0, "float16"))


def test_empty_tensors():
    check(st.zeros(0), torch.zeros(0))
    check(st.zeros(0, 3), torch.zeros(0, 3))
    check(st.zeros(2, 0, dtype=st.int64), torch.zeros(2, 0, dtype=torch.int64))
    check(st.zeros(0, dtype=st.float64), torch.zeros(0, dtype=torch.float64))
    check(st.zeros(0, dtype=st.bool), torch.zeros(0, dtype=torch.bool))


def test_meta_tensors():
    check(st.empty(2, 3, device="meta"), torch.empty(2, 3, device="meta"))
    check(st.empty(4, dtype=st.int64, device="meta"), torch.empty(4, dtype=torch.int64, device="meta"))
    check(st.empty((), dtype=st.float16, device="meta"), torch.empty((), dtype=torch.float16, device="meta"))


@pytest.mark.parametrize("shape", [(2000,), (40, 40), (5, 300), (1001,), (3, 4, 100)])
def test_summarized(shape):
    data = (np.arange(math.prod(shape)) % 97 - 40).reshape(shape) / 8.0
    check(*both(data, "float32"))
    check(*both(data.astype(np.int64)))


def test_summarized_only_edges_count_for_width():
    data = np.zeros(2000)
    data[1000] = 123456.789  # hidden by the summary: must not widen the columns
    data[:3] = [0.5, 1.0, 2.0]
    check(*both(data, "float32"))


def test_dtype_suffix_wraps_to_new_line():
    data = np.linspace(-1, 1, 16).reshape(2, 8)
    check(*both(data, "float64"))
    check(*both(np.arange(19) * 1000, "int16"))


def test_noncontiguous_and_views():
    a = np.arange(12, dtype=np.float32).reshape(3, 4) / 3
    s = st.tensor(a).t() if hasattr(st.Tensor, "t") else st.from_numpy(a.T.copy())
    check(s, torch.tensor(a).t())


def test_set_printoptions():
    s, t = both(np.array([1.123456789, 2.5, 1e-3]), "float64")
    try:
        for kwargs in [dict(precision=2), dict(precision=8), dict(sci_mode=True), dict(sci_mode=False),
                       dict(linewidth=30), dict(threshold=5, edgeitems=1), dict(profile="short")]:
            st.set_printoptions(**kwargs)
            torch.set_printoptions(**kwargs)
            check(s, t)
            big_s, big_t = both(np.arange(40).reshape(4, 10) / 3.0)
            check(big_s, big_t)
    finally:
        st.set_printoptions(profile="default")
        torch.set_printoptions(profile="default")
    check(s, t)


def test_default_dtype_changes_suffix():
    try:
        st.set_default_dtype(st.float64)
        torch.set_default_dtype(torch.float64)
        check(*both([1.5, 2.5], "float64"))
        check(*both([1.5, 2.5], "float32"))
        check(st.zeros(0, dtype=st.float32), torch.zeros(0, dtype=torch.float32))
    finally:
        st.set_default_dtype(st.float32)
        torch.set_default_dtype(torch.float32)


def test_random_tensor_repr_matches_torch_on_same_values():
    rng = np.random.default_rng(0)
    for shape in [(5,), (3, 7), (2, 3, 4)]:
        for scale in [1.0, 1e-6, 1e6]:
            data = rng.standard_normal(shape) * scale
            for dt in ("float32", "float64"):
                check(*both(data, dt))
