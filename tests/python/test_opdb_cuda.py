"""The op database on `cuda` against the CPU (scripts/test_gpu.sh; docs/CUDA.md, "GPU test suite").

Every sample of every OpInfo runs on the CPU and, with its tensors moved to `cuda`, on the GPU; the GPU result must
be on `cuda` and match the CPU result at the op database's tolerances. An op with no CUDA kernel must raise
NotImplementedError (then the case is skipped with the error's first line, and listed in the report file named by
STRATA_OPDB_CUDA_REPORT); any other error fails. The marked test needs a real GPU (skipped without one); the
unmarked one runs the same harness in a subprocess on the fake driver, so the harness stays right everywhere.
"""

import os
import subprocess
import sys

import numpy as np
import pytest

import strata as st
from test_opdb import CASES, compare, resolve, to_numpy_ref, to_strata

HERE = os.path.dirname(os.path.abspath(__file__))
PKG_PARENT = os.path.join(os.path.dirname(os.path.dirname(HERE)), "python")


def to_device(x, device):
    if isinstance(x, st.Tensor):
        return x.to(device)
    if isinstance(x, (list, tuple)) and x and all(isinstance(e, st.Tensor) for e in x):
        return type(x)(e.to(device) for e in x)
    return x


def run_case(info, dtype):
    """'ok' when every sample matched the CPU on cuda, 'no kernel: <message>' (NotImplementedError), or 'host: ...'
    for an op with no tensor inputs that takes no device, or one the CPU cannot compute on this machine."""
    fn = resolve(info.name, st)
    rng = np.random.default_rng(1234)
    n = 0
    for s in info.samples(dtype, rng):
        args = tuple(to_strata(a, dtype) for a in s.args)
        kwargs = {k: to_strata(v, dtype) for k, v in s.kwargs.items()}
        what = f"{info.name}[{dtype}] sample {n} {s.name} on cuda"
        try:
            on_cpu = fn(*args, **kwargs)
        except Exception as e:  # the CPU cannot compute it here (an optional library missing, e.g. MKL's FFT)
            return f"host: the CPU reference failed on this machine: {type(e).__name__}: {str(e).splitlines()[0][:160]}"
        if isinstance(on_cpu, (tuple, list)):
            expected = [to_numpy_ref(e) if isinstance(e, st.Tensor) else e for e in on_cpu]
        else:
            expected = to_numpy_ref(on_cpu) if isinstance(on_cpu, st.Tensor) else on_cpu
        dargs = [to_device(a, "cuda") for a in args]
        dkwargs = {k: to_device(v, "cuda") for k, v in kwargs.items()}
        if not any(isinstance(x, st.Tensor) or (isinstance(x, (list, tuple)) and x and isinstance(x[0], st.Tensor))
                   for x in list(args) + list(kwargs.values())):
            if "device" in dkwargs:
                return "host: the sample names its device"
            dkwargs["device"] = "cuda"  # a factory: asked for on cuda
        try:
            actual = fn(*dargs, **dkwargs)
        except TypeError as e:
            if "device" in dkwargs and "device" in str(e):
                return "host: no tensor inputs and no device argument"
            raise
        except NotImplementedError as e:
            return "no kernel: " + str(e).splitlines()[0][:200]
        outs = list(actual) if isinstance(actual, (tuple, list)) else [actual]
        for o in outs:
            if isinstance(o, st.Tensor):
                assert o.device.type == "cuda", f"{what}: result on {o.device}"
        cpu = [o.cpu() if isinstance(o, st.Tensor) else o for o in outs]
        compare(cpu if isinstance(actual, (tuple, list)) else cpu[0], expected, dtype, info, what)
        n += 1
    assert n > 0, "an OpInfo must produce samples"
    return "ok"


_REPORT = {}


@pytest.fixture(scope="module", autouse=True)
def _write_report():
    yield
    path = os.environ.get("STRATA_OPDB_CUDA_REPORT")
    if path and _REPORT:
        ok = sorted(k for k, v in _REPORT.items() if v == "ok")
        missing = sorted((k, v) for k, v in _REPORT.items() if v.startswith("no kernel"))
        with open(path, "w") as f:
            f.write(f"op database on cuda: {len(ok)} cases match the CPU, {len(missing)} have no CUDA kernel\n")
            f.write("matching: " + " ".join(ok) + "\n\n")
            for k, v in missing:
                f.write(f"{k}: {v}\n")
            for k, v in sorted(_REPORT.items()):
                if v.startswith("host"):
                    f.write(f"{k}: {v}\n")


@pytest.mark.cuda
@pytest.mark.parametrize("info,dtype", CASES, ids=[f"{i.name}-{d}" for i, d in CASES])
def test_op_on_cuda_matches_cpu(info, dtype):
    for d, reason in info.skip:
        if d == dtype:
            pytest.skip(reason)
    outcome = run_case(info, dtype)
    _REPORT[f"{info.name}[{dtype}]"] = outcome
    if outcome != "ok":
        pytest.skip(outcome)


FAKE_RUN = """
import sys, collections
sys.path.insert(0, HERE)
import test_opdb_cuda as t
counts = collections.Counter()
for info, dtype in t.CASES:
    if any(d == dtype for d, _ in info.skip):
        continue
    counts[t.run_case(info, dtype).split(':')[0]] += 1
print("FAKE-OPDB", counts["ok"], counts["no kernel"], counts["host"])
"""


def test_the_harness_runs_on_the_fake_driver():
    # Without kernels most ops raise NotImplementedError; the views, copies and factories run through the fake
    # driver and must match the CPU. An error of any other kind fails here as it would on the GPU.
    env = dict(os.environ, STRATA_CUDA_DRIVER="fake", PYTHONPATH=PKG_PARENT + os.pathsep + HERE)
    r = subprocess.run([sys.executable, "-c", f"HERE = {HERE!r}\n" + FAKE_RUN], env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0 and "FAKE-OPDB" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]
    ok, missing, host = map(int, r.stdout.split("FAKE-OPDB")[1].split())
    assert ok > 0 and missing > 0, r.stdout
