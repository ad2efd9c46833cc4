"""Every snippet of tests/python/test_torch_compat.py (typical torch code taking the framework as
its argument) runs under strata.compile and gives eager Strata's results, bit for bit."""

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



@pytest.mark.parametrize("name", sorted(compat.SNIPPETS))
def test_snippet_compiled_matches_eager(name):
    fn = compat.SNIPPETS[name]
    strata.manual_seed(0)
    expected = fn(strata)
    cf = strata.compile(fn)
    for _ in range(2):  # the capturing call and the cached one
        strata.manual_seed(0)
        got = cf(strata)
        assert flat(got) == flat(expected), name
