"""Tests generated from the op database (tests/python/opdb): every sample of
every op is compared with its NumPy reference at per-dtype tolerances, with
PyTorch's result dtype (when torch is installed), and on the meta device;
every error input must raise the declared exception."""

import importlib
import pkgutil

import numpy as np
import pytest

import strata as st
from opdb import core as opdb_core
from opdb.core import REGISTRY, TOL

# Import every family module so that it registers its OpInfos.
import opdb as _opdb_pkg

for _m in pkgutil.iter_modules(_opdb_pkg.__path__):
    if _m.name != "core":
        importlib.import_module(f"opdb.{_m.name}")

try:
    import torch
except Exception:  # pragma: no cover
    torch = None


def resolve(name, module):
    obj = module
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def to_strata(x, dtype):
    if isinstance(x, np.ndarray):
        if dtype == "bfloat16" and x.dtype.kind == "f":
            return st.tensor(x.astype(np.float32), dtype=st.bfloat16)
        if x.dtype == np.float16 or x.dtype.kind in "fiubc":
            return st.from_numpy(x) if x.dtype != object else st.tensor(x)
    if isinstance(x, (list, tuple)) and x and all(isinstance(e, np.ndarray) for e in x):
        return type(x)(to_strata(e, dtype) for e in x)
    return x


def to_numpy_ref(x):
    """What the reference sees: exactly the values the strata tensor holds."""
    if isinstance(x, st.Tensor):
        if x.dtype is st.bfloat16:
            return x.float().numpy()
        return x.numpy()
    if isinstance(x, (list, tuple)) and x and all(isinstance(e, st.Tensor) for e in x):
        return type(x)(to_numpy_ref(e) for e in x)
    return x


def to_torch(x):
    if isinstance(x, st.Tensor):
        t = torch.from_numpy(np.array(to_numpy_ref(x)))
        return t.to(getattr(torch, str(x.dtype).split(".")[1]))
    if isinstance(x, (list, tuple)) and x and all(isinstance(e, st.Tensor) for e in x):
        return type(x)(to_torch(e) for e in x)
    if isinstance(x, st.dtype):
        return getattr(torch, str(x).split(".")[1])
    return x


def to_meta(x):
    if isinstance(x, st.Tensor):
        return x.to("meta")
    if isinstance(x, (list, tuple)) and x and all(isinstance(e, st.Tensor) for e in x):
        return type(x)(to_meta(e) for e in x)
    return x


def as_list(r):
    return list(r) if isinstance(r, (tuple, list)) else [r]


def compare(actual, expected, dtype, info, what):
    rtol, atol = info.tol.get(dtype, TOL.get(dtype, (0, 0)))
    for a, e in zip(as_list(actual), as_list(expected)):
        a_np = to_numpy_ref(a) if isinstance(a, st.Tensor) else np.asarray(a)
        e_np = np.asarray(e)
        assert tuple(a_np.shape) == tuple(e_np.shape), f"{what}: shape {a_np.shape} != reference {e_np.shape}"
        if a_np.dtype.kind == "c" or e_np.dtype.kind == "c":
            assert a_np.dtype.kind == e_np.dtype.kind, f"{what}: dtype {a_np.dtype} but reference {e_np.dtype}"
            np.testing.assert_allclose(a_np.astype(np.complex128), e_np.astype(np.complex128), rtol=rtol, atol=atol,
                                       equal_nan=True, err_msg=what)
        elif a_np.dtype.kind in "fc" or e_np.dtype.kind in "fc":
            np.testing.assert_allclose(a_np.astype(np.float64), e_np.astype(np.float64), rtol=rtol, atol=atol,
                                       equal_nan=True, err_msg=what)
        else:
            np.testing.assert_array_equal(a_np, e_np, err_msg=what)


CASES = [(info, dt) for info in REGISTRY for dt in info.dtypes]


@pytest.mark.parametrize("info,dtype", CASES, ids=[f"{i.name}-{d}" for i, d in CASES])
def test_op_matches_reference(info, dtype):
    for d, reason in info.skip:
        if d == dtype:
            pytest.skip(reason)
    fn = resolve(info.name, st)
    rng = np.random.default_rng(1234)
    n = 0
    for s in info.samples(dtype, rng):
        args = tuple(to_strata(a, dtype) for a in s.args)
        kwargs = {k: to_strata(v, dtype) for k, v in s.kwargs.items()}
        ref_args = tuple(to_numpy_ref(a) for a in args)
        ref_kwargs = {k: to_numpy_ref(v) for k, v in kwargs.items()}
        what = f"{info.name}[{dtype}] sample {n} {s.name}"
        expected = info.ref(*ref_args, **ref_kwargs)
        actual = fn(*args, **kwargs)
        compare(actual, expected, dtype, info, what)
        if info.method:
            compare(getattr(args[0], info.method)(*args[1:], **kwargs), expected, dtype, info, what + " (method)")
        if torch is not None and info.compare_dtype:
            tfn = resolve(info.name, torch)
            tres = tfn(*[to_torch(a) for a in args], **{k: to_torch(v) for k, v in kwargs.items()})
            for a, t in zip(as_list(actual), as_list(tres)):
                if isinstance(a, st.Tensor):
                    assert str(a.dtype).split(".")[1] == str(t.dtype).split(".")[1], (
                        f"{what}: dtype {a.dtype} but torch gives {t.dtype}")
        if info.meta:
            m = fn(*[to_meta(a) for a in args], **{k: to_meta(v) for k, v in kwargs.items()})
            for mm, a in zip(as_list(m), as_list(actual)):
                if isinstance(a, st.Tensor):
                    assert mm.device.type == "meta"
                    assert tuple(mm.shape) == tuple(a.shape) and mm.dtype is a.dtype, f"{what}: meta disagrees"
        n += 1
    assert n > 0, "an OpInfo must produce samples"


ERR_CASES = [info for info in REGISTRY if info.errors]


@pytest.mark.parametrize("info", ERR_CASES, ids=[i.name for i in ERR_CASES])
def test_op_error_inputs(info):
    fn = resolve(info.name, st)
    rng = np.random.default_rng(0)
    for e in info.errors(rng):
        args = tuple(to_strata(a, "float32") for a in e.args)
        kwargs = {k: to_strata(v, "float32") for k, v in e.kwargs.items()}
        with pytest.raises(e.error, match=e.match):
            fn(*args, **kwargs)
