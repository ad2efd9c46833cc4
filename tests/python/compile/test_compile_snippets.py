"""Every snippet of tests/python/test_torch_compat.py (typical torch code taking the framework as
its argument) runs under strata.compile and gives eager Strata's results: bit for bit with
backend="eager", to float tolerance with the default backend (generated kernels)."""

import os
import sys

import numpy as np
import pytest

import strata

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
pytest.importorskip("torch")  # test_torch_compat compares with torch at import time
import test_torch_compat as compat  # noqa: E402


def flat(x):
    if isinstance(x, (list, tuple)):
        return [flat(e) for e in x]
    if isinstance(x, dict):
        return {k: flat(v) for k, v in x.items()}
    if isinstance(x, strata.Tensor):
        x = x.detach()
        if x.dtype == strata.bfloat16:
            x = x.float()
        return ("tensor", str(x.dtype), tuple(x.shape), x.numpy().tobytes())
    if isinstance(x, np.ndarray):
        return ("ndarray", x.dtype.str, x.shape, x.tobytes())
    return x



def close(got, expected):
    """Float tensors to a few ulp (generated kernels' vectorized math: ir.NOT_BIT_EXACT), the rest exactly."""
    if isinstance(expected, (list, tuple)):
        return type(got) is type(expected) and len(got) == len(expected) and all(
            close(a, b) for a, b in zip(got, expected))
    if isinstance(expected, dict):
        return got.keys() == expected.keys() and all(close(got[k], expected[k]) for k in expected)
    if isinstance(expected, strata.Tensor) and expected.dtype.is_floating_point:
        a, b = flat(got), flat(expected)
        if a[:3] != b[:3]:
            return False
        x = np.frombuffer(a[3], dtype=np.uint8).view(expected.detach().numpy().dtype) if a[3] else np.zeros(0)
        y = np.frombuffer(b[3], dtype=np.uint8).view(x.dtype) if b[3] else np.zeros(0)
        return bool(np.allclose(x, y, rtol=1e-6, atol=1e-7, equal_nan=True))
    return flat(got) == flat(expected)


@pytest.mark.parametrize("name", sorted(compat.SNIPPETS))
def test_snippet_compiled_matches_eager(name):
    fn = compat.SNIPPETS[name]
    strata.manual_seed(0)
    expected = fn(strata)
    cf = strata.compile(fn, backend="eager")
    for _ in range(2):  # the capturing call and the cached one
        strata.manual_seed(0)
        got = cf(strata)
        assert flat(got) == flat(expected), name
    # The default backend (generated kernels) agrees to float tolerance.
    strata.compiler.reset()
    cf = strata.compile(fn)
    for _ in range(2):
        strata.manual_seed(0)
        got = cf(strata)
        assert close(got, expected), name
