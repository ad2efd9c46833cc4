"""mode="max-autotune" (Note [Autotuning] in python/strata/_inductor/autotune.py): kernel variants and GEMM
routes timed on the captured shapes; results equal default mode's; decisions cached in memory and on disk."""

import json
import os
import subprocess
import sys

import pytest
try:
    import torch
except ImportError:  # the 3.12 test venv has no torch: the comparisons with torch are left out there
    torch = None

import strata
import strata.nn as nn
import strata.nn.functional as F
from compile_testutil import cache_dir, needs_gxx  # noqa: F401
from strata._inductor import autotune, codecache

pytestmark = [needs_gxx, pytest.mark.usefixtures("cache_dir")]


@pytest.fixture(autouse=True)
def _small_budget(monkeypatch):
    monkeypatch.setenv("STRATA_AUTOTUNE_BUDGET_MS", "10")
    autotune._memory.clear()


def _bits(t):
    return t.contiguous().view(strata.uint8).numpy().tobytes()


def _both(fn, *args):
    """(default result, max-autotune result, the decisions the max-autotune compile made)."""
    strata.compiler.reset()
    ref = strata.compile(fn, backend="strata_cpp")(*args)
    strata.compiler.reset()
    n = len(autotune.decisions)
    got = strata.compile(fn, backend="strata_cpp", mode="max-autotune")(*args)
    return ref, got, autotune.decisions[n:]


def _t(x):
    return torch.from_numpy(x.numpy().copy())


def test_pointwise_bitwise_equal_to_default():
    def f(x, y):
        return ((x * 1.5 + y).sigmoid() - y * x).tanh()

    x, y = strata.randn(600, 512), strata.randn(600, 512)
    ref, got, dec = _both(f, x, y)
    assert _bits(ref) == _bits(got)
    assert any(d["kind"] == "pointwise" for d in dec), dec
    if "-mprefer-vector-width=512" in codecache.isa_flags():
        # The 256-bit variant is a candidate (timed, or excluded where libmvec's narrower functions round
        # differently).
        assert any("vec=256" in d["times"] for d in dec), dec
    if torch is None:
        return
    tx, ty = _t(x), _t(y)
    torch.testing.assert_close(_t(got), ((tx * 1.5 + ty).sigmoid() - ty * tx).tanh(), rtol=1e-5, atol=1e-6)


def test_transposed_bitwise_equal_to_default():
    def f(x, y):
        return (x * 2 + y.t()).relu() * y.t()

    x, y = strata.randn(384, 320), strata.randn(320, 384)
    ref, got, dec = _both(f, x, y)
    assert _bits(ref) == _bits(got)
    tiled = [d for d in dec if d["kind"] == "tiled"]
    assert tiled, dec
    # The tile candidates were all timed (none excluded) and the winner is one of them.
    assert {"default", "tile=32", "tile=128"} <= set(tiled[0]["times"])
    assert tiled[0]["winner_name"] in tiled[0]["times"]


def test_row_kernels_bitwise_equal_to_default():
    ln = nn.LayerNorm(256)

    def f(x, r):
        return strata.softmax(x * 0.5, -1) + ln(x + r)

    x, r = strata.randn(300, 256), strata.randn(300, 256)
    ref, got, dec = _both(f, x, r)
    assert _bits(ref) == _bits(got)
    assert any(d["kind"] == "rows" for d in dec), dec


def test_column_reduction_bitwise_equal_to_default():
    def f(x):
        return ((x * 2 + 1).relu()).sum(0), (x - 0.5).abs().amax(0)

    x = strata.randn(700, 384)
    ref, got, dec = _both(f, x)
    for a, b in zip(ref, got):
        assert _bits(a) == _bits(b)
    cols = [d for d in dec if d["kind"] == "columns"]
    assert cols, dec
    # Sums try other tile widths; max keeps its width (its four-row fold runs on full tiles only).
    assert any("cols_w" in n for d in cols for n in d["times"])
    assert all("cols_w" not in n for d in cols if "amax" in d["name"] for n in d["times"])


def test_gemm_routes_match_default_to_float_tolerance():
    def f(x, w, b, w2):
        h = F.gelu(F.linear(x, w, b))
        return h @ w2

    x, w, b, w2 = strata.randn(256, 192), strata.randn(256, 192), strata.randn(256), strata.randn(256, 128)
    ref, got, dec = _both(f, x, w, b, w2)
    assert strata.allclose(ref, got, rtol=1e-4, atol=1e-4)
    gem = [d for d in dec if d["kind"] == "gemm"]
    # linear + gelu (a default GEMM step) and the matmul (eager in default mode) are both timed.
    assert len(gem) == 2, dec
    assert all(d["winner"] in ("dnnl", "eager") for d in gem)
    if torch is None:
        return
    tx, tw, tb, tw2 = map(_t, (x, w, b, w2))
    torch.testing.assert_close(_t(got), torch.nn.functional.gelu(torch.nn.functional.linear(tx, tw, tb)) @ tw2,
                               rtol=1e-4, atol=1e-3)


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(64, 128)
        self.ln = nn.LayerNorm(128)
        self.b = nn.Linear(128, 10)

    def forward(self, x):
        h = F.silu(self.ln(self.a(x)))
        return self.b(h * h.sigmoid() + 0.5)


def test_training_step_matches_default():
    strata.manual_seed(0)
    m = _Net()
    x, y = strata.randn(512, 64), strata.randint(0, 10, (512,))

    def step(m, x, y):
        return F.cross_entropy(m(x), y)

    results = []
    for mode in ("default", "max-autotune"):
        strata.compiler.reset()
        c = strata.compile(step, backend="strata_cpp", mode=mode)
        m.zero_grad()
        loss = c(m, x, y)
        loss.backward()
        results.append((loss.detach().clone(), {k: p.grad.clone() for k, p in m.named_parameters()}))
    (l0, g0), (l1, g1) = results
    assert strata.allclose(l0, l1, rtol=1e-5, atol=1e-6)
    for k in g0:
        assert strata.allclose(g0[k], g1[k], rtol=1e-4, atol=1e-5), k


def test_no_cudagraphs_mode_tunes_too():
    def f(x):
        return (x * 3 - 1).exp() + x

    x = strata.randn(1 << 18)
    strata.compiler.reset()
    n = autotune.stats["benchmarks"] + autotune.stats["memory_hits"] + autotune.stats["disk_hits"]
    got = strata.compile(f, backend="strata_cpp", mode="max-autotune-no-cudagraphs")(x)
    assert autotune.stats["benchmarks"] + autotune.stats["memory_hits"] + autotune.stats["disk_hits"] > n
    strata.compiler.reset()
    assert _bits(got) == _bits(strata.compile(f, backend="strata_cpp")(x))


def test_default_mode_does_not_tune():
    def f(x):
        return (x * 3 - 1).exp() + x

    before = dict(autotune.stats)
    strata.compile(f, backend="strata_cpp")(strata.randn(1 << 18))
    assert autotune.stats == before


def test_a_candidate_with_different_bits_is_excluded():
    """A variant whose result differs from the default's is never chosen, however fast."""
    head = '#include <cstdint>\nextern "C" void strata_kernel(void* const* bufs, int64_t n) {\n' \
           '  const float* x = static_cast<const float*>(bufs[0]); float* y = static_cast<float*>(bufs[1]);\n'
    good = head + "  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * 2.0f;\n}\n"
    bad = head + "  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * 2.0f + (i == 7 ? 1.0f : 0.0f);\n}\n"
    n = 1000
    cands = [{}, {"block": 1}]

    def make_call(fn):
        return strata._C._compile.KernelCall(codecache.ctypes.cast(fn, codecache.ctypes.c_void_p).value, False, 1, 0,
                                             n, 1, strata.float32, [[]], [strata.float32], name="test_kernel")
    excluded = autotune.stats["excluded"]
    spec = [((n,), (1,), strata.float32)]
    src, params = autotune.tune_kernel("test_kernel", "pointwise", lambda p: bad if p else good, cands, make_call,
                                       lambda: [strata.randn(n)], spec)
    assert src == good and params == {}
    assert autotune.stats["excluded"] == excluded + 1
    assert autotune.decisions[-1]["times"]["block=1"].startswith("excluded")


def test_ties_keep_the_default():
    assert autotune._pick([1.0, 0.99, 1.5]) == 0
    assert autotune._pick([1.0, 0.9, 1.5]) == 1
    assert autotune._pick([1.0, 1.0, 1.0]) == 0


def test_unknown_mode_still_raises():
    with pytest.raises(ValueError, match="unknown mode 'max-autotune-please'"):
        strata.compile(lambda x: x + 1, backend="strata_cpp", mode="max-autotune-please")(strata.randn(3))


def test_decisions_are_logged(capsys):
    strata._dynamo.logs.set_logs(autotune=True)
    try:
        strata.compile(lambda x: (x * 2 + x.t()).relu(), backend="strata_cpp",
                       mode="max-autotune")(strata.randn(256, 256))
    finally:
        strata._dynamo.logs.set_logs(autotune=False)
    err = capsys.readouterr().err
    assert "[strata.compile:autotune]" in err and "winner" in err and "tile=32" in err


def test_memory_cache_hit_in_process():
    def f(x):
        return (x * 2 + x.t()).relu()

    x = strata.randn(256, 256)
    strata.compile(f, backend="strata_cpp", mode="max-autotune")(x)
    b, m = autotune.stats["benchmarks"], autotune.stats["memory_hits"]
    strata.compiler.reset()
    strata.compile(f, backend="strata_cpp", mode="max-autotune")(x)
    assert autotune.stats["benchmarks"] == b and autotune.stats["memory_hits"] > m


_SUB = r"""
import json, strata
import strata.nn.functional as F
from strata._inductor import autotune, codecache
strata.manual_seed(0)
x, w, b = strata.randn(256, 256), strata.randn(384, 256), strata.randn(384)
def f(x, w, b):
    return (F.linear(x, w, b) * 2).relu().sum(0), (x * 2 + x.t()).relu()
out = strata.compile(f, backend="strata_cpp", mode="max-autotune")(x, w, b)
print(json.dumps({"stats": autotune.stats, "compiles": codecache.stats["compiles"], "sum": float(out[0].sum()),
                  "t": float(out[1].sum())}))
"""


def _run_sub(d):
    env = dict(os.environ, STRATA_CACHE_DIR=d, PYTHONPATH=os.pathsep.join(sys.path), STRATA_AUTOTUNE_BUDGET_MS="10")
    r = subprocess.run([sys.executable, "-c", _SUB], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_a_new_process_reads_decisions_from_disk_and_ignores_corrupt_ones(tmp_path):
    d = str(tmp_path)
    first = _run_sub(d)
    tuned = first["stats"]["benchmarks"] + first["stats"]["gemm_benchmarks"]
    assert tuned >= 2 and first["stats"]["disk_hits"] == 0
    # A fresh process: every decision comes from disk, nothing is timed, the same results.
    second = _run_sub(d)
    assert second["stats"]["benchmarks"] == 0 and second["stats"]["gemm_benchmarks"] == 0
    assert second["stats"]["disk_hits"] == tuned
    assert first["compiles"] > 0 and second["compiles"] == 0   # the chosen kernels are on disk too
    assert (second["sum"], second["t"]) == (first["sum"], first["t"])
    # Corrupt decisions (garbage, a record of another key, a winner that is no candidate) are ignored and
    # the kernels timed again; no crash, the same results.
    files = sorted(os.listdir(os.path.join(d, "codegen", "autotune")))
    assert len(files) == tuned
    for k, name in enumerate(files):
        p = os.path.join(d, "codegen", "autotune", name)
        rec = json.loads(open(p).read())
        if k % 3 == 0:
            text = '{"version": 1, "key": "trunc'
        elif k % 3 == 1:
            text = json.dumps(dict(rec, key="0" * 64))
        else:
            text = json.dumps(dict(rec, winner={"tile": 7}) if rec["kind"] != "gemm" else dict(rec, winner="blas"))
        with open(p, "w") as f:
            f.write(text)
    third = _run_sub(d)
    assert third["stats"]["corrupt"] == tuned
    assert third["stats"]["benchmarks"] + third["stats"]["gemm_benchmarks"] == tuned
    # The tiled kernel's result is the default's bits under any candidate; the GEMM may have changed route.
    assert third["t"] == first["t"] and abs(third["sum"] - first["sum"]) <= 1e-4 * abs(first["sum"]) + 1e-3
    assert _run_sub(d)["stats"]["disk_hits"] == tuned


def test_tuning_leaves_the_random_stream_alone():
    """Timing draws its inputs from a generator of its own: dropout after a max-autotune compile draws what it
    draws after a default compile."""
    def f(x):
        return F.dropout(x * 2 + 1, 0.5, training=True).relu() + x.t()

    x = strata.randn(300, 300)
    outs = []
    for mode in ("default", "max-autotune"):
        strata.compiler.reset()
        strata.manual_seed(123)
        c = strata.compile(f, backend="strata_cpp", mode=mode)
        outs.append((c(x), strata.rand(4)))
    assert _bits(outs[0][0]) == _bits(outs[1][0])
    assert _bits(outs[0][1]) == _bits(outs[1][1])


def test_symbolic_sizes_are_not_tuned():
    """A graph with symbolic sizes runs one kernel for every size: nothing to time it on, so no tuning."""
    def f(x, y):
        return ((x * y + 1).relu() > 0.5).float() * x

    before = autotune.stats["benchmarks"] + autotune.stats["memory_hits"] + autotune.stats["disk_hits"]
    c = strata.compile(f, backend="strata_cpp", mode="max-autotune", dynamic=True)
    for n in (1000, 37, 5000):
        x, y = strata.randn(n, 300), strata.randn(n, 300)
        assert _bits(c(x, y)) == _bits(f(x, y))
    assert autotune.stats["benchmarks"] + autotune.stats["memory_hits"] + autotune.stats["disk_hits"] == before
