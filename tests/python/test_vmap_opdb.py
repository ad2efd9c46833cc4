"""vmap over the op database (tests/python/opdb): for every op and float32 sample, a batch of 3 perturbed copies of
each array argument (batch dim 0, and for a second run the last dim) goes through strata.vmap and through a Python
loop of the same op; the results must agree. Ops with a batching rule, ops that decompose and ops that take the
per-entry fallback are all covered; samples whose loop raises (an op that needs concrete values) are skipped."""

import importlib
import pkgutil
import warnings

import numpy as np
import pytest

import strata as st
import opdb as _opdb_pkg
from opdb.core import REGISTRY

for _m in pkgutil.iter_modules(_opdb_pkg.__path__):
    if _m.name != "core":
        importlib.import_module(f"opdb.{_m.name}")

# Random ops (tested in test_vmap.py), and ops vmap cannot batch by design or does not yet: data-dependent
# Python code (a value read with item()/float()) and data-dependent output shapes (docs/VMAP.md, "Not supported").
SKIP = {"multinomial", "bernoulli", "poisson", "nn.functional.dropout",
        "quantile", "nanquantile", "linalg.matrix_exp", "linalg.lu_factor",
        "unique", "unique_consecutive", "nonzero"}


def resolve(name):
    obj = st
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def _batched(x, k, rng, dim):
    # k copies of x stacked at dim; floating copies after the first are perturbed slightly.
    copies = [x]
    for _ in range(k - 1):
        y = x.copy()
        if y.dtype.kind == "f" and y.size:
            y = y + rng.uniform(-1e-2, 1e-2, size=y.shape).astype(y.dtype)
        copies.append(y)
    return np.stack(copies, axis=dim)


def _flat(r):
    if isinstance(r, (tuple, list)):
        return [t for x in r for t in _flat(x)]
    return [r]


CASES = [(info, i) for info in REGISTRY if "float32" in info.dtypes and info.samples is not None
         and info.name not in SKIP for i in range(2)]


@pytest.mark.parametrize("info,which", CASES, ids=[f"{c[0].name}-{c[1]}" for c in CASES])
def test_vmap_matches_loop(info, which):
    fn = resolve(info.name)
    rng = np.random.default_rng(0)
    n = 0
    for sample in info.samples("float32", rng):
        if n >= 3:
            break
        arrays = [i for i, a in enumerate(sample.args) if isinstance(a, np.ndarray) and a.ndim >= 1]
        if not arrays:
            continue
        dim = 0 if which == 0 else -1
        args = list(sample.args)
        in_dims = [None] * len(args)
        for i in arrays:
            args[i] = st.from_numpy(np.ascontiguousarray(_batched(args[i], 3, rng, dim)))
            in_dims[i] = dim if dim == 0 else args[i].dim() - 1
        args = [st.from_numpy(a) if isinstance(a, np.ndarray) else a for a in args]
        try:
            want = [fn(*[a.select(d, b) if d is not None else a for a, d in zip(args, in_dims)], **sample.kwargs)
                    for b in range(3)]
        except Exception:
            continue  # the op refuses the perturbed sample
        want_leaves = [_flat(w) for w in want]
        if not all(isinstance(t, st.Tensor) for t in want_leaves[0]):
            continue
        n += 1
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = st.vmap(lambda *a: fn(*a, **sample.kwargs), in_dims=tuple(in_dims))(*args)
        got_leaves = _flat(got)
        assert len(got_leaves) == len(want_leaves[0])
        for j, g in enumerate(got_leaves):
            w = st.stack([wl[j] for wl in want_leaves])
            assert tuple(g.shape) == tuple(w.shape), (sample.name, tuple(g.shape), tuple(w.shape))
            assert g.dtype == w.dtype, sample.name
            gn, wn = g.numpy(), w.numpy()
            if gn.dtype.kind in "fc":  # float and complex results: vectorised and scalar paths may differ by an ulp
                np.testing.assert_allclose(gn, wn, rtol=1e-4, atol=1e-4, equal_nan=True, err_msg=sample.name)
            else:
                np.testing.assert_array_equal(gn, wn, err_msg=sample.name)
