"""Differential tests against PyTorch over the op database (tests/python/opdb).

For every OpInfo with a torch counterpart, hypothesis draws cases (shapes with
0-d/empty/size-1 dims, memory layouts, dtypes from the op's declared set, values
with NaN/inf/-0.0/large where the op takes floats, dims/keepdim) and each case
runs in strata and torch through the function, the method, out=, out= aliasing
the first argument and the in-place variant where they exist, and with every
tensor on the meta device (or only the first: meta and CPU operands mixed, which
must raise unless the CPU one is 0-d; shapes and dtypes compared): result dtypes, shapes and values (NaN
positions equal) must agree, and when one library raises the other must raise an
exception of the same category. The op database's error inputs must raise in
torch too, in the same category. docs/DESIGN.md ("Differential testing").

CI profile: derandomize=True, STRATA_DIFFTEST_EXAMPLES examples per op and
variant (default 10), no deadline. Set STRATA_DIFFTEST_EXAMPLES=100 for a long run.
STRATA_DIFFTEST_STATS=path writes the counts (cases run, raised in both,
allow-listed) as JSON when the session ends.
"""

import atexit
import collections
import importlib
import json
import os
import pkgutil
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402

import strata as st  # noqa: E402
import opdb as _opdb_pkg  # noqa: E402
from opdb.core import REGISTRY  # noqa: E402
from difftest.allowlist import allowed, is_complex  # noqa: E402
from difftest.cases import STRATEGIES, check, op_dtypes, variants  # noqa: E402
from difftest.compare import Mismatch, category  # noqa: E402
from difftest.families import NO_TORCH, family, torch_callable  # noqa: E402

for _m in pkgutil.iter_modules(_opdb_pkg.__path__):
    if _m.name != "core":
        importlib.import_module(f"opdb.{_m.name}")

EXAMPLES = int(os.environ.get("STRATA_DIFFTEST_EXAMPLES", "10"))
PROFILE = settings(derandomize=True, max_examples=EXAMPLES, deadline=None, database=None,
                   suppress_health_check=list(HealthCheck), print_blob=False)

# out= aliasing an input and the device variants (meta, meta and CPU mixed) of every op: fewer examples each.
FEW = settings(PROFILE, max_examples=max(2, EXAMPLES // 3))
EXTRA_VARIANTS = ("out_alias", "meta", "meta_mixed")

STATS = collections.Counter()


def _dump_stats():
    path = os.environ.get("STRATA_DIFFTEST_STATS")
    if path:
        with open(path, "w") as f:
            json.dump(dict(STATS), f, indent=1, sort_keys=True)


atexit.register(_dump_stats)

CASES = []
for _i, _info in enumerate(REGISTRY):
    _fam, _p = family(_info)
    for _v in variants(_info, _fam):
        CASES.append(pytest.param(_info, _fam, _p, _v, id=f"{_info.name}-{_i}-{_fam}-{_v}"))


@pytest.mark.parametrize("info,fam,params,variant", CASES)
def test_matches_torch(info, fam, params, variant):
    tfn = torch_callable(info.name)
    if tfn is None:
        pytest.skip(NO_TORCH.get(info.name, "no torch counterpart"))
    if not op_dtypes(info):
        pytest.skip("every dtype of the op is skipped in the op database")
    STATS["ops"] += variant == "fn"

    @(FEW if variant in EXTRA_VARIANTS else PROFILE)
    @given(STRATEGIES[fam](info, params))
    def run(case):
        args, kwargs = case
        STATS["cases"] += 1
        STATS["complex cases"] += bool(is_complex(args, kwargs))
        try:
            STATS[check(info, tfn, variant, args, kwargs)] += 1
        except Mismatch as m:
            if allowed(info.name, variant, str(m), args, kwargs):
                STATS["allow-listed"] += 1
                return
            raise

    run()


ERR_CASES = [pytest.param(i, id=f"{i.name}-{n}") for n, i in enumerate(REGISTRY) if i.errors]


@pytest.mark.parametrize("info", ERR_CASES)
def test_error_inputs_raise_in_torch_too(info):
    """Each error input of the op database raises in torch, in strata's category."""
    from test_opdb import to_strata, to_torch  # the op database's own conversions
    tfn = torch_callable(info.name)
    if tfn is None:
        pytest.skip(NO_TORCH.get(info.name, "no torch counterpart"))
    bad = []
    for k, e in enumerate(info.errors(np.random.default_rng(0))):
        args = tuple(to_torch(to_strata(a, "float32")) for a in e.args)
        kwargs = {n: to_torch(to_strata(v, "float32")) for n, v in e.kwargs.items()}
        STATS["error-inputs"] += 1
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tfn(*args, **kwargs)
            msg = f"error input {k} ({e.match!r}): strata raises {e.error.__name__}, torch returns"
        except Exception as t:  # noqa: BLE001
            if category(t) == category(e.error()):
                continue
            msg = (f"error input {k} ({e.match!r}): strata raises {e.error.__name__}, torch "
                   f"{type(t).__name__}: {str(t)[:200]}")
        if allowed(info.name, "error-input", msg):
            STATS["allow-listed"] += 1
            continue
        bad.append(msg)
    assert not bad, f"{info.name}: " + "\n".join(bad)


def test_harness_detects_disagreements():
    """The comparison itself can fail: values, NaN positions, dtypes, shapes, categories."""
    from difftest.compare import compare
    tol = lambda dt: (1e-5, 1e-5)  # noqa: E731
    compare(st.tensor([1.0, float("nan")]), torch.tensor([1.0, float("nan")]), tol, "same")
    bad = [
        (st.tensor([1.0, 2.0]), torch.tensor([1.0, 2.1])),
        (st.tensor([1.0, float("nan")]), torch.tensor([1.0, 0.0])),
        (st.tensor([1.0]), torch.tensor([1.0], dtype=torch.float64)),
        (st.tensor([1.0]), torch.tensor([[1.0]])),
        ((st.tensor([1.0]),), (torch.tensor([1.0]), torch.tensor([1.0]))),
        (1, 1.5),
    ]
    for a, t in bad:
        with pytest.raises(Mismatch):
            compare(a, t, tol, "bad")
    assert category(NotImplementedError()) == "RuntimeError"
    assert category(IndexError()) == "IndexError" != category(RuntimeError())


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64"])
def test_lcm_int_min_does_not_trap(dtype):
    """Found by the differential run: gcd(INT_MIN, INT_MIN + 1) is -1 once |INT_MIN|
    wraps, and INT_MIN / -1 traps (torch 2.13 dies of SIGFPE here). strata wraps
    like NumPy."""
    m = int(np.iinfo(dtype).min)
    a = np.array([m, m, m + 1, 6], dtype=dtype)
    b = np.array([m + 1, -1, m, -4], dtype=dtype)
    r = st.lcm(st.from_numpy(a), st.from_numpy(b))
    np.testing.assert_array_equal(r.numpy(), np.lcm(a, b))


def test_lcm_wraps_in_torchs_type():
    """Found by the 200-example run: for int32 the product wraps in int32 before the
    absolute value, as in torch (NumPy widens first and gives -2)."""
    a = torch.tensor([2**31 - 1, 6, -(2**31) + 1], dtype=torch.int32)
    b = torch.tensor([-2, -4, 3], dtype=torch.int32)
    r = st.lcm(st.from_numpy(a.numpy()), st.from_numpy(b.numpy()))
    np.testing.assert_array_equal(r.numpy(), torch.lcm(a, b).numpy())
