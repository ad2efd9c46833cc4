"""strata.testing.assert_close against torch.testing.assert_close: what passes, what fails, and the message."""

import numpy as np
import pytest

import strata

torch = pytest.importorskip("torch")


def _msg(lib, a, e, **kw):
    try:
        lib.testing.assert_close(a, e, **kw)
    except (AssertionError, TypeError, ValueError) as err:
        return type(err).__name__, str(err).replace("torch.", "strata.")
    return None


def _pair(fn):
    return fn(strata), fn(torch)


CASES = [
    lambda L: (L.tensor([1.0, 2.0, 3.0]), L.tensor([1.0, 2.5, 3.0]), {}),
    lambda L: (L.tensor([1.0, 2.0]), L.tensor([1.0, 2.0 + 1e-6]), {}),
    lambda L: (L.tensor([1, 2]), L.tensor([1, 3]), {}),
    lambda L: (L.tensor([1, 2]), L.tensor([1.0, 2.0]), {}),
    lambda L: (L.tensor([1, 2]), L.tensor([1.0, 2.0]), {"check_dtype": False}),
    lambda L: (L.ones(2), L.ones(3), {}),
    lambda L: (L.ones(2, 2), L.ones(2, 2) * 1.1, {}),
    lambda L: (L.ones(2, 2), L.ones(2, 2) * 1.1, {"rtol": 0.2, "atol": 0.0}),
    lambda L: (L.tensor([float("nan"), 1.0]), L.tensor([float("nan"), 1.0]), {}),
    lambda L: (L.tensor([float("nan"), 1.0]), L.tensor([float("nan"), 1.0]), {"equal_nan": True}),
    lambda L: (L.tensor([float("inf")]), L.tensor([float("inf")]), {}),
    lambda L: ([L.ones(2), L.zeros(2)], [L.ones(2), L.ones(2)], {}),
    lambda L: ({"a": L.ones(2), "b": L.zeros(1)}, {"a": L.ones(2), "b": L.ones(1)}, {}),
    lambda L: (1.0, 1.1, {}),
    lambda L: (1.0, 1.0 + 1e-9, {}),
    lambda L: (3, 3, {}),
    lambda L: (L.tensor([1.0, 2.0], dtype=L.float64), L.tensor([1.0, 2.0 + 1e-6], dtype=L.float64), {}),
    lambda L: (L.tensor([1.0, 2.0], dtype=L.float16), L.tensor([1.0, 2.001], dtype=L.float16), {}),
    lambda L: (L.ones(2), L.ones(2), {"rtol": 1e-3}),
]


@pytest.mark.parametrize("i", range(len(CASES)))
def test_assert_close_matches_torch(i):
    (sa, se, skw), (ta, te, tkw) = _pair(CASES[i])
    got, want = _msg(strata, sa, se, **skw), _msg(torch, ta, te, **tkw)
    assert (got is None) == (want is None), (got, want)
    if want is not None:
        assert got[0] == want[0]
        assert got[1] == want[1]


def test_custom_msg_and_make_tensor():
    with pytest.raises(AssertionError, match="^custom$"):
        strata.testing.assert_close(strata.ones(1), strata.zeros(1), msg="custom")
    t = strata.testing.make_tensor(3, 4, dtype=strata.float32, low=-1, high=1, noncontiguous=True)
    assert t.shape == (3, 4) and not t.is_contiguous() and float(t.abs().max()) <= 1
    i = strata.testing.make_tensor((5,), dtype=strata.int64, low=0, high=3)
    assert i.dtype == strata.int64 and set(np.unique(i.numpy())) <= {0, 1, 2}
