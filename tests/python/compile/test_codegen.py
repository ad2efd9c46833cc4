"""backend="strata_cpp": pointwise groups fused into generated C++ kernels (python/strata/_inductor).

Each distinct kernel costs a g++ call (~1 s), so the tests share a handful of kernels and a cache
directory for the module."""

import os
import random
import subprocess
import sys
import textwrap

import pytest

import strata
import strata.nn.functional as F
from strata._inductor import codecache, fusion
from strata._inductor.ir import NOT_BIT_EXACT

from compile_testutil import cache_dir, needs_gxx  # noqa: F401  (cache_dir: a fixture)

pytestmark = [needs_gxx, pytest.mark.usefixtures("cache_dir")]


# op name in the kernel (the functor) -> how eager computes it on x (kept in one kernel: each op
# reads y = x * 1, exact, so every op is a node of the same group).
OPS = {
    "Add": lambda y, z, c: y + z, "AddScalar": lambda y, z, c: y + 1.5, "AddAlpha": lambda y, z, c: y.add(z, alpha=0.3),
    "Sub": lambda y, z, c: y - z, "Mul": lambda y, z, c: y * z, "Div": lambda y, z, c: y / z,
    "DivScalar": lambda y, z, c: y / 3, "Neg": lambda y, z, c: -y, "Relu": lambda y, z, c: y.relu(),
    "Sigmoid": lambda y, z, c: y.sigmoid(), "Tanh": lambda y, z, c: y.tanh(), "Exp": lambda y, z, c: y.exp(),
    "Log": lambda y, z, c: y.log(), "Sqrt": lambda y, z, c: y.sqrt(), "Rsqrt": lambda y, z, c: y.rsqrt(),
    "Abs": lambda y, z, c: y.abs(), "GeluErf": lambda y, z, c: F.gelu(y),
    "GeluTanh": lambda y, z, c: F.gelu(y, approximate="tanh"), "Silu": lambda y, z, c: F.silu(y),
    "Pow": lambda y, z, c: y ** 3.0, "Square": lambda y, z, c: y ** 2, "Maximum": lambda y, z, c: strata.maximum(y, z),
    "Minimum": lambda y, z, c: strata.minimum(y, z), "Where": lambda y, z, c: strata.where(c, y, z),
    "Clamp": lambda y, z, c: y.clamp(-0.5, 0.5), "ClampMin": lambda y, z, c: y.clamp(min=0.1),
    "ClampMax": lambda y, z, c: y.clamp(max=0.2),
}
# Named tolerances (float32, relative) for the ops that are not bit-exact (ir.NOT_BIT_EXACT).
RTOL = {"float32": 2e-6, "float64": 1e-14}


def _inputs(n, dtype, seed=0):
    g = strata.Generator().manual_seed(seed) if hasattr(strata, "Generator") else None
    strata.manual_seed(seed)
    x = strata.randn(n, dtype=dtype)
    z = strata.rand(n, dtype=dtype) + 0.5
    return x, z, x > 0.2


def _same(got, ref, exact, what):
    assert got.dtype == ref.dtype and tuple(got.shape) == tuple(ref.shape), what
    if exact:
        assert strata.equal(got, ref) or strata.allclose(got, ref, rtol=0, atol=0, equal_nan=True), what
    else:
        rtol = RTOL[str(ref.dtype).replace("strata.", "")]
        assert strata.allclose(got, ref, rtol=rtol, atol=rtol, equal_nan=True), \
            (what, float((got - ref).abs().max()))


def _all_ops(x, z, c):
    y = x * 1
    return tuple(fn(y, z, c) for fn in OPS.values())


@pytest.mark.parametrize("dtype", [strata.float32, strata.float64])
def test_each_op_matches_eager(dtype):
    # 5000 elements: several vector iterations and a scalar tail.
    x, z, c = _inputs(5003, dtype)
    before = dict(codecache.stats)
    got = strata.compile(_all_ops, backend="strata_cpp")(x, z, c)
    assert codecache.stats["compiles"] + codecache.stats["disk_hits"] + codecache.stats["memory_hits"] > \
        before["compiles"] + before["disk_hits"] + before["memory_hits"]
    ref = _all_ops(x, z, c)
    for name, a, b in zip(OPS, got, ref):
        exact = name not in NOT_BIT_EXACT and name not in ("GeluErf", "Square", "Pow")
        _same(a, b, exact, name)


_CHAIN_OPS = ["add", "sub", "mul", "div", "neg", "relu", "sigmoid", "tanh", "exp", "log_abs", "sqrt_abs",
              "abs", "gelu", "gelu_tanh", "silu", "pow", "max", "min", "where", "clamp", "add_s", "mul_s"]


def _apply(op, t, x, c):
    return {
        "add": lambda: t + x, "sub": lambda: t - x, "mul": lambda: t * x, "div": lambda: t / (x.abs() + 1),
        "neg": lambda: -t, "relu": lambda: t.relu(), "sigmoid": lambda: t.sigmoid(), "tanh": lambda: t.tanh(),
        "exp": lambda: t.clamp(-5, 5).exp(), "log_abs": lambda: (t.abs() + 1).log(),
        "sqrt_abs": lambda: t.abs().sqrt(), "abs": lambda: t.abs(), "gelu": lambda: F.gelu(t),
        "gelu_tanh": lambda: F.gelu(t, approximate="tanh"), "silu": lambda: F.silu(t), "pow": lambda: t.clamp(-2, 2) ** 2.0,
        "max": lambda: strata.maximum(t, x), "min": lambda: strata.minimum(t, x), "where": lambda: strata.where(c, t, x),
        "clamp": lambda: t.clamp(-1.5, 1.5), "add_s": lambda: t + 0.25, "mul_s": lambda: t * 1.7,
    }[op]()


@pytest.mark.parametrize("seed", [1, 2])
def test_random_chains_match_eager(seed):
    rng = random.Random(seed)
    ops = [rng.choice(_CHAIN_OPS) for _ in range(12)]

    def chain(x, c):
        t = x
        for op in ops:
            t = _apply(op, t, x, c)
        return t

    x, _, c = _inputs(4099, strata.float32, seed)
    got = strata.compile(chain, backend="strata_cpp")(x, c)
    ref = chain(x, c)
    # Chains mix exact and inexact ops; an ulp in one op can grow through the chain's later ops.
    assert strata.allclose(got, ref, rtol=1e-5, atol=1e-5, equal_nan=True), (ops, float((got - ref).abs().max()))


def _gelu_chain(x):
    return 0.5 * x * (1 + strata.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


def test_exact_chain_and_fallbacks(capsys):
    x = strata.randn(64, 48)
    fn = lambda x: ((x * 2 + 1).relu() - x).abs()  # noqa: E731
    cf = strata.compile(fn, backend="strata_cpp")
    assert strata.equal(cf(x), fn(x))
    # A non-contiguous input: captured again (stride guard) with nothing to fuse, runs node by node.
    xt = strata.randn(48, 64).t()
    assert strata.equal(cf(xt), fn(xt))


def test_runner_falls_back_on_noncontiguous_input():
    from strata._C import _compile
    g = _compile.Graph()
    m = strata.empty(8, 6, device="meta")
    g.add_input("x", m, device=strata.device("cpu"))
    with _compile.record(g):
        out = ((m * 2 + 1).relu() - m).abs()
    g.set_outputs([g.value_of(out)])
    run = fusion.compile_graph(g)
    assert isinstance(run, fusion._Runner) and len(run.kernel_sources) == 1
    # One kernel over the graph's inputs: the runner is that kernel's C++ call (KernelCall).
    assert run.single is not None
    with pytest.raises(RuntimeError, match="expected 1 tensors, got 2"):
        run.single(strata.randn(8, 6), strata.randn(8, 6))
    x = strata.randn(8, 6)
    ref = ((x * 2 + 1).relu() - x).abs()
    assert strata.equal(run(x)[0], ref)
    y = strata.randn(6, 8).t()
    assert strata.equal(run(y)[0], ((y * 2 + 1).relu() - y).abs())


def test_mixed_graph_segments():
    # Pointwise groups around a matmul and a reduction: kernels and node-by-node segments interleave.
    def fn(x, w):
        h = (x * 2 + 1).relu()
        h = h @ w
        return (h.sigmoid() * h - 1).sum(1), h
    x, w = strata.randn(16, 8), strata.randn(8, 4)
    got = strata.compile(fn, backend="strata_cpp")(x, w)
    ref = fn(x, w)
    assert strata.allclose(got[0], ref[0], rtol=1e-6, atol=1e-6)
    assert strata.equal(got[1], ref[1])


def test_autograd_inputs_are_not_fused():
    x = strata.randn(32, requires_grad=True)
    fn = lambda x: (x * 2 + 1).relu()  # noqa: E731
    before = codecache.stats["compiles"]
    out = strata.compile(fn, backend="strata_cpp")(x)
    assert out.requires_grad and codecache.stats["compiles"] == before
    out.sum().backward()
    assert strata.equal(x.grad, ((x.detach() * 2 + 1) > 0).to(strata.float32) * 2)


def test_output_code_log(capsys):
    from strata._dynamo import logs
    logs.set_logs(output_code=True)
    try:
        x = strata.randn(64, 48)
        strata.compile(lambda x: ((x * 2 + 1).relu() - x).abs(), backend="strata_cpp")(x)
    finally:
        logs.set_logs(output_code=False)
    err = capsys.readouterr().err
    assert "strata::fn::Relu{}" in err and "relu (node" in err and "test_codegen.py:" in err


_SUB = textwrap.dedent("""
    import strata
    from strata._inductor import codecache
    x = strata.randn(64, 48)
    fn = lambda x: ((x * 2 + 1).relu() - x).abs()
    assert strata.equal(strata.compile(fn, backend="strata_cpp")(x), fn(x))
    print(codecache.stats["compiles"], codecache.stats["disk_hits"], codecache.stats["corrupt"])
""")


def _run_sub(cache_dir):
    env = dict(os.environ, STRATA_CACHE_DIR=cache_dir, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, "-c", _SUB], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return [int(v) for v in r.stdout.split()]


def test_disk_cache_hit_and_corrupt_entry(cache_dir):
    x = strata.randn(64, 48)
    strata.compile(lambda x: ((x * 2 + 1).relu() - x).abs(), backend="strata_cpp")(x)
    # A fresh process finds the kernel on disk: no compiler call.
    assert _run_sub(cache_dir) == [0, 1, 0]
    # Corrupt every entry: the next process recompiles instead of crashing. The bad file replaces the
    # entry as a new file: this process still has the old one mapped, and truncating a mapped
    # shared object in place would crash it (SIGBUS), not test the cache.
    d = os.path.join(cache_dir, "codegen")
    for name in os.listdir(d):
        with open(os.path.join(d, name + ".bad"), "wb") as f:
            f.write(b"not an ELF file")
        os.replace(os.path.join(d, name + ".bad"), os.path.join(d, name))
    assert _run_sub(cache_dir) == [1, 0, 1]
    assert _run_sub(cache_dir) == [0, 1, 0]


# ---- row kernels: reductions over the last dim, softmax, layer_norm ------------------------------

def _row_ops(x, w, b, rowin):
    # One row group (every node reads or makes values of x's shape or its rows): one kernel.
    e = (x - x.amax(-1, keepdim=True)).exp()
    sm = e / e.sum(-1, keepdim=True)
    fsm = F.softmax(x * 2, -1) + 1
    ln = F.layer_norm(x + 1, (x.shape[-1],), w, b).relu()
    ln0 = F.layer_norm(x * 3, (x.shape[-1],))
    lnw = F.layer_norm(x - 1, (x.shape[-1],), w)
    s = (x * x).sum(-1)
    m = (x + 0.5).mean(-1, keepdim=True) * 2
    mn = x.abs().amin(-1)
    bc = x * rowin + rowin  # a [..., 1] graph input broadcast along the row
    return sm, fsm, ln, ln0, lnw, s, m, mn, bc


# The ops whose fused result is eager's bits; the rest at the stated relative tolerance. The written-out
# softmax runs exp through libmvec as eager's exp does, except that a loop's scalar tail calls libm in
# one and not the other (an ulp, ir.NOT_BIT_EXACT). F.softmax and layer_norm are eager's bits: their
# loops are written out as eager writes them (src/compile/codegen_rows.h, Note [Row reductions mirror
# eager's accumulation order]), softmax's exp with eager's FMA contractions spelled out.
_ROW_EXACT = {"float32": {"fsm", "ln", "ln0", "lnw", "s", "m", "mn", "bc"},
              "float64": {"fsm", "ln", "ln0", "lnw", "s", "m", "mn", "bc"}}
_ROW_RTOL = {"float32": 1e-6, "float64": 1e-15}


@pytest.mark.parametrize("dtype", [strata.float32, strata.float64])
def test_row_kernels_match_eager(dtype):
    # 4103 columns: vector iterations, a scalar tail and the pairwise split of sums above 4096;
    # 5 rows: rows start at every alignment.
    strata.manual_seed(3)
    x = strata.randn(5, 4103, dtype=dtype) * 3
    w, b = strata.randn(4103, dtype=dtype), strata.randn(4103, dtype=dtype)
    rowin = strata.randn(5, 1, dtype=dtype)
    before = codecache.stats["compiles"] + codecache.stats["disk_hits"] + codecache.stats["memory_hits"]
    got = strata.compile(_row_ops, backend="strata_cpp")(x, w, b, rowin)
    assert codecache.stats["compiles"] + codecache.stats["disk_hits"] + codecache.stats["memory_hits"] == before + 1
    ref = _row_ops(x, w, b, rowin)
    dt = str(dtype).replace("strata.", "")
    names = ["sm", "fsm", "ln", "ln0", "lnw", "s", "m", "mn", "bc"]
    for name, a, r in zip(names, got, ref):
        assert a.dtype == r.dtype and tuple(a.shape) == tuple(r.shape), name
        if name in _ROW_EXACT[dt]:
            assert strata.equal(a, r), (name, float((a - r).abs().max()))
        else:
            assert strata.allclose(a, r, rtol=_ROW_RTOL[dt], atol=_ROW_RTOL[dt]), (name, float((a - r).abs().max()))


@pytest.mark.parametrize("cols", [5, 63, 64, 65, 200])
def test_softmax_row_max_lanes_keep_eager_bits(cols):
    # Note [Softmax row max lanes] in cpp.py: the row max runs in 64 lanes (eager: 16); rows whose max is
    # a signed zero, rows with -inf, a NaN, and widths around one vector block give eager's bits.
    strata.manual_seed(4)
    x = strata.randn(6, cols) * 4
    x[1] = -x[1].abs()
    x[1, cols // 2] = 0.0
    x[1, 0] = -0.0
    x[2, :] = float("-inf")
    x[3, cols - 1] = float("nan")
    x[4, 0] = float("-inf")
    x[5] = 0.0
    x[5, cols // 3] = -0.0
    got = strata.compile(lambda t: F.softmax(t, -1), backend="strata_cpp")(x)
    ref = F.softmax(x, -1)
    same = (got == ref) | (got.isnan() & ref.isnan())
    assert bool(same.all()), (got - ref).abs().max()
    assert strata.equal(got.signbit(), ref.signbit())


def test_row_group_structure_and_fallbacks():
    from strata._C import _compile
    g = _compile.Graph()
    m = strata.empty(6, 40, device="meta")
    g.add_input("x", m, device=strata.device("cpu"))
    with _compile.record(g):
        e = (m - m.amax(-1, keepdim=True)).exp()
        out = e / e.sum(-1, keepdim=True)
        col = out.sum(0)  # over the first dim: not a row reduction, runs through the dispatcher
    g.set_outputs([g.value_of(out), g.value_of(col)])
    run = fusion.compile_graph(g)
    assert isinstance(run, fusion._Runner) and len(run.kernel_sources) == 1
    src = run.kernel_sources[0]
    assert "combine_blocks<strata::codegen::Max" in src and "combine_blocks<strata::codegen::Sum" in src
    assert "amax (node 0" in src and "for (int64_t j = 0; j < cols; ++j)" in src
    assert "scr_" in src  # exp is stored by the sum loop and read back by the output loop
    x = strata.randn(6, 40)
    ref_out = (x - x.amax(-1, keepdim=True)).exp()
    ref_out = ref_out / ref_out.sum(-1, keepdim=True)
    got = run(x)
    assert strata.allclose(got[0], ref_out, rtol=1e-6, atol=1e-7)
    assert strata.allclose(got[1], ref_out.sum(0), rtol=1e-6, atol=1e-6)
    # A non-contiguous input of the same shape runs the whole graph node by node.
    y = strata.randn(40, 6).t()
    r = (y - y.amax(-1, keepdim=True)).exp()
    assert strata.allclose(run(y)[0], r / r.sum(-1, keepdim=True), rtol=1e-6, atol=1e-7)
