"""Generated CUDA kernels (python/strata/_inductor/cuda.py) on machines with no GPU.

The kernels come from the compiler's own lowering: a function is recorded into a graph, fusion.py lowers
its groups to the loop IR (the lowering is spied on while the strata_cpp backend compiles the graph), and
each lowered kernel is rendered as CUDA C, compiled by NVRTC to PTX and an sm_90a cubin, and disassembled.
The checks are the ones a reviewer makes on the SASS: no spills, no local memory (no stack frame, no
LDL/STL), 16-byte loads and stores where the layout allows, the MUFU instructions of the transcendentals,
warp shuffles and barriers in the row kernels. Numerics: the same source runs on the host through
src/backends/cuda/nvrtc_host_emulation.h (Note [Checking generated CUDA kernels without a GPU]) and is
compared with eager Strata. Nothing here runs on a GPU."""

import pytest

import strata
import strata.nn.functional as F
from strata._inductor import cuda, cuda_compile, fusion
from strata._inductor.ir import GENERAL_LOWERINGS, SPECIAL_BINARY, SPECIAL_HEADER_FUNCTORS, SPECIAL_UNARY

from compile_testutil import cache_dir, needs_gxx  # noqa: F401  (cache_dir: a fixture)

_ok, _why = cuda_compile.available()
pytestmark = [needs_gxx, pytest.mark.usefixtures("cache_dir"),
              pytest.mark.skipif(not _ok, reason=f"NVRTC 13.0 wheels not installed: {_why}")]

# Relative tolerance (per dtype) for values through libm on the host and libmvec in eager (an ulp or so), and
# for the row kernels' sums, whose order is the GPU's tree, not eager's.
TOL = {strata.float32: 3e-5, strata.float64: 1e-13, strata.float16: 2e-3, strata.bfloat16: 1.6e-2}


# ---- recording, lowering, rendering --------------------------------------------------------------------------

def _record(fn, inputs):
    """fn recorded on Meta tensors with the inputs' sizes, strides and dtypes."""
    from strata._C import _compile
    g = _compile.Graph()
    ms = []
    for k, t in enumerate(inputs):
        m = strata.empty_strided(tuple(t.shape), tuple(t.stride()), dtype=t.dtype, device="meta")
        g.add_input(f"x{k}", m, device=strata.device("cpu"))
        ms.append(m)
    with _compile.record(g):
        out = fn(*ms)
    out = out if isinstance(out, tuple) else (out,)
    g.set_outputs([g.value_of(o) for o in out])
    return g


def _lowered(fn, inputs, monkeypatch):
    """[(graph, "pointwise" | "rows", kernel IR, in_ids, out_ids)] of the kernels fusion.py lowers fn to."""
    got = []
    for name, kind in (("_lower_pw_group", "pointwise"), ("_lower_row_group", "rows")):
        orig = getattr(fusion, name)

        def spy(graph, *a, _orig=orig, _kind=kind, **kw):
            r = _orig(graph, *a, **kw)
            if r:
                got.append((graph, _kind, r[0], list(r[1]), list(r[2])))
            return r
        monkeypatch.setattr(fusion, name, spy)
    g = _record(fn, inputs)
    fusion.compile_graph(g)
    monkeypatch.undo()
    assert got, "fusion.py lowered no kernel"
    return got


def _render(kind, k, n=None):
    return cuda.render_pointwise(k, n=n) if kind == "pointwise" else cuda.render_rows(k)


def _checked(cs, k=None):
    """The compiled kernel, after the checks every kernel must pass. The one exception to "no local memory":
    CUDA's accurate sin/cos/tan reduce a huge argument (Payne-Hanek, __internal_trig_reduction_slowpathd) with
    a small array in local memory on a slow path, so a kernel that calls it may have that frame (no spills)."""
    c = cuda_compile.compile(cs)
    trig = "__internal_trig_reduction_slowpath" in c.log
    assert c.cubin[:4] == b"\x7fELF" and ".target sm_90a" in c.ptx and cs.name in c.ptx
    info = c.info
    assert info["spill_stores"] == 0 and info["spill_loads"] == 0, c.log
    assert info["stack"] == 0 or trig and info["stack"] <= 80, c.log   # no local memory frame
    assert 0 < info["registers"] <= 255, c.log
    ops = cuda_compile.sass_opcodes(c.sass())
    assert trig or not [o for o in ops if o.startswith(("LDL", "STL"))], ops
    return c, ops


def _vector(ops, kind):
    return sum(n for o, n in ops.items() if o.startswith(f"{kind}.E.128"))


# ---- host emulation ----------------------------------------------------------------------------------------

def _emulate(graph, kind, k, in_ids, out_ids, inputs, cs, block=64, grid=3):
    """Runs the rendered kernel on the host; {graph output position: tensor} of what it wrote."""
    pos_in = {v: i for i, v in enumerate(graph.inputs)}
    outs_pos = list(graph.outputs)
    if not all(v in pos_in for v in in_ids) or not all(v in outs_pos for v in out_ids):
        return None  # reads or writes an intermediate of the graph: checked through compile only
    ins = [inputs[pos_in[v]] for v in in_ids]
    outs = []
    for v in out_ids:
        val = graph.value(v)
        outs.append(strata.empty_strided(tuple(val.shape), tuple(val.stride), dtype=val.dtype))
    run = cuda_compile.emulate(cs)
    ptrs = [t.data_ptr() for t in ins + outs]
    if kind == "pointwise":
        ref = next((t for t, b in zip(ins, k.inputs) if any(b.strides)), outs[0])
        run(ptrs, ref.numel() if k.flat else 0, 0, grid, block)
    else:
        cols = outs[0].shape[-1] if outs[0].dim() else 1
        full = next(t for t, b in zip(ins, k.inputs) if b.kind == "full")
        rows = full.numel() // full.shape[-1]
        run(ptrs, rows, full.shape[-1], rows, block)
        del cols
    return {outs_pos.index(v): t for v, t in zip(out_ids, outs)}


def _close(got, ref, exact, what, scale=1):
    assert got.dtype == ref.dtype and tuple(got.shape) == tuple(ref.shape), (what, got.dtype, ref.dtype)
    if exact:
        ok = strata.equal(got, ref) or strata.allclose(got.double(), ref.double(), rtol=0, atol=0, equal_nan=True)
        assert ok, (what, float((got.double() - ref.double()).abs().max()))
    else:
        tol = TOL.get(ref.dtype, 0) * scale
        assert strata.allclose(got.double(), ref.double(), rtol=tol, atol=tol, equal_nan=True), \
            (what, float((got.double() - ref.double()).abs().nan_to_num().max()))


def _check_against_eager(fn, inputs, monkeypatch, inexact=lambda i: True, scale=1, block=64, grid=3):
    """Lowers fn, renders/compiles/checks every kernel, runs each kernel that maps graph inputs to graph
    outputs on the host, and compares with eager. Returns [(CudaSource, Compiled, opcodes)]."""
    ref = fn(*inputs)
    ref = ref if isinstance(ref, tuple) else (ref,)
    done, compared = [], 0
    for graph, kind, k, in_ids, out_ids in _lowered(fn, inputs, monkeypatch):
        cs = _render(kind, k)
        c, ops = _checked(cs, k)
        done.append((cs, c, ops, k))
        got = _emulate(graph, kind, k, in_ids, out_ids, inputs, cs, block=block, grid=grid)
        for i, t in (got or {}).items():
            _close(t, ref[i], not inexact(i), f"output {i} of {fn.__name__}", scale)
            compared += 1
    assert compared, "no kernel could be compared with eager"
    return done


# ---- pointwise: every lowered op ---------------------------------------------------------------------------

_PARAM = {
    "add": lambda y, z, c: y.add(z, alpha=0.25), "sub": lambda y, z, c: y - z, "mul": lambda y, z, c: y * z,
    "div": lambda y, z, c: y / z, "pow": lambda y, z, c: y.abs() ** z, "maximum": lambda y, z, c: strata.maximum(y, z),
    "minimum": lambda y, z, c: strata.minimum(y, z), "where": lambda y, z, c: strata.where(c, y, z),
    "masked_fill": lambda y, z, c: y.masked_fill(c, -2.5), "clamp": lambda y, z, c: y.clamp(-0.5, 0.75),
    "gelu": lambda y, z, c: F.gelu(y, approximate="tanh") + F.gelu(y),
    "leaky_relu": lambda y, z, c: F.leaky_relu(y, 0.1), "hardtanh": lambda y, z, c: F.hardtanh(y, -0.3, 0.6),
    "softplus": lambda y, z, c: F.softplus(y, 2.0, 10.0), "elu": lambda y, z, c: F.elu(y, 0.7),
    "hardsigmoid": lambda y, z, c: F.hardsigmoid(y), "hardswish": lambda y, z, c: F.hardswish(y),
    "mish": lambda y, z, c: F.mish(y), "silu": lambda y, z, c: F.silu(y), "relu": lambda y, z, c: y.relu(),
    "round": lambda y, z, c: (y * 4).round(), "_to_copy": lambda y, z, c: (y * 100).to(strata.int32).to(y.dtype),
    "log": lambda y, z, c: z.log(), "sqrt": lambda y, z, c: z.sqrt(), "rsqrt": lambda y, z, c: z.rsqrt(),
    "log1p": lambda y, z, c: z.log1p(), "log2": lambda y, z, c: z.log2(), "lgamma": lambda y, z, c: z.lgamma(),
    "digamma": lambda y, z, c: z.digamma(), "erfinv": lambda y, z, c: (y * 0.3).erfinv(),
    "xlogy": lambda y, z, c: strata.xlogy(y, z), "i0": lambda y, z, c: y.i0(),
    "special_i1": lambda y, z, c: strata.special.i1(y), "special_modified_bessel_i0": lambda y, z, c: strata.special.modified_bessel_i0(y),
    "special_modified_bessel_i1": lambda y, z, c: strata.special.modified_bessel_i1(y),
    "logical_not": lambda y, z, c: strata.logical_not(c).to(y.dtype),
}
_COMPARE = ("eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor")
_PREDICATE = ("isnan", "isinf", "isfinite")
# The lowered ops the CUDA renderer leaves to the C++ renderer: none (embedding gathers are not ops of this table).
_NOT_RENDERED = set()
# Special functions: arguments inside their domains (z in [0.5, 1.5); polynomial degrees 0..5).
_SPECIAL_ARGS = {
    "special_zeta": lambda y, z: (z + 1.5, z), "igamma": lambda y, z: (z, z * 2), "igammac": lambda y, z: (z, z * 2),
    "special_xlog1py": lambda y, z: (y, z), "special_ndtri": lambda y, z: (z * 0.6,),
    "special_log_ndtr": lambda y, z: (y * 3,), "special_entr": lambda y, z: (z,),
}


def _special(name):
    fn = getattr(strata.special, name[len("special_"):]) if name.startswith("special_") else getattr(strata, name)
    if name in _SPECIAL_ARGS:
        return lambda y, z, c: fn(*_SPECIAL_ARGS[name](y, z))
    if name in SPECIAL_BINARY:                  # the orthogonal polynomials: (x, n)
        return lambda y, z, c: fn(y, ((z - 0.5) * 6).floor())
    return lambda y, z, c: fn(z if name.endswith(("_y0", "_y1", "_k0", "_k1")) else y)


def _op(name):
    if name in _PARAM:
        return _PARAM[name]
    if name in _COMPARE:
        return lambda y, z, c, _n=name: getattr(strata, _n)(y, z).to(y.dtype)
    if name in _PREDICATE:
        return lambda y, z, c, _n=name: getattr(strata, _n)(y / (y - y.round())).to(y.dtype)
    if name in SPECIAL_UNARY or name in SPECIAL_BINARY:
        return _special(name)
    return lambda y, z, c, _n=name: getattr(strata, _n)(y)


OPS = {name: _op(name) for name in sorted(GENERAL_LOWERINGS) if name not in _NOT_RENDERED}


def test_the_op_list_is_the_lowering_table():
    # A newly lowered op is rendered for CUDA by the same functor; this list follows ir.GENERAL_LOWERINGS.
    assert set(OPS) | _NOT_RENDERED == set(GENERAL_LOWERINGS)
    assert len(OPS) >= 90


def _op_inputs(dtype, n=1003, seed=0):
    strata.manual_seed(seed)
    x = strata.randn(n, dtype=dtype)
    z = strata.rand(n, dtype=dtype) + 0.5
    return x, z, x > 0.2


_EXACT_FUNCTORS = {"add", "sub", "mul", "neg", "abs", "relu", "maximum", "minimum", "where", "masked_fill", "clamp",
                   "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "logical_not",
                   "isnan", "isinf", "isfinite", "sign", "floor", "ceil", "trunc", "round", "square", "_to_copy",
                   "hardtanh", "leaky_relu", "sqrt", "div", "reciprocal", "hardsigmoid"}


@pytest.mark.parametrize("dtype", [strata.float32, strata.float64])
def test_every_lowered_op_compiles_vectorizes_and_matches_eager(dtype, monkeypatch):
    # A few kernels of ~24 outputs each; the special functions (ops/special_functors.h: long series and
    # recurrences, four lanes of each inlined per vector) ~7 a kernel, which keeps them in registers.
    special = {n for n in OPS if GENERAL_LOWERINGS[n] and (n in SPECIAL_BINARY or
                                                           SPECIAL_UNARY.get(n) in SPECIAL_HEADER_FUNCTORS)}
    names = [n for n in OPS if n not in special]
    chunks = [names[i:i + 24] for i in range(0, len(names), 24)]
    sp = sorted(special)
    chunks += [sp[i:i + 7] for i in range(0, len(sp), 7)]
    for chunk in chunks:
        def fn(x, z, c, _chunk=tuple(chunk)):
            y = x * 1
            return tuple(OPS[n](y, z, c) for n in _chunk)
        fn.__name__ = f"ops_{chunk[0]}_{chunk[-1]}"
        done = _check_against_eager(fn, _op_inputs(dtype), monkeypatch,
                                    inexact=lambda i, _c=chunk: _c[i] not in _EXACT_FUNCTORS, scale=8)
        for cs, c, ops, k in done:
            assert k.flat and cs.vec == 16 // (4 if dtype == strata.float32 else 8)
            assert _vector(ops, "LDG") >= 1 and _vector(ops, "STG") >= 1, ops


def test_a_kernel_of_many_special_functions_does_not_spill(monkeypatch):
    # Every special function of ops/special_functors.h fused into one float32 kernel (compile only): with
    # __launch_bounds__(256) alone ptxas stopped at 128 registers and spilled (440 bytes); heavy kernels get
    # (256, 1).
    names = sorted(n for n in OPS if n in SPECIAL_BINARY or SPECIAL_UNARY.get(n) in SPECIAL_HEADER_FUNCTORS)

    def fn(x, z, c):
        y = x * 1
        return tuple(OPS[n](y, z, c) for n in names)
    (graph, kind, k, *_), = _lowered(fn, _op_inputs(strata.float32, n=64), monkeypatch)
    cs = _render(kind, k)
    assert "__launch_bounds__(256, 1)" in cs.source and len(k.outputs) == len(names) >= 20
    c, ops = _checked(cs, k)


@pytest.mark.parametrize("dtype", [strata.int32, strata.int64, strata.uint8])
def test_integer_bool_and_cast_semantics(dtype, monkeypatch):
    def ints(a, b, f):
        s = a + b * 3 - 7
        m = strata.maximum(a, b).clamp(-50, 50)
        w = strata.where(a > b, a, b * 2)
        bl = strata.logical_xor(a > 0, b < 3)
        cv = (a.to(strata.float32) * 0.5 + f).to(dtype)       # float -> int truncation as eager's cast
        return s, m, w, bl, cv, a.abs() * b.sign()
    strata.manual_seed(1)
    lo = 0 if dtype == strata.uint8 else -20
    a, b = strata.randint(lo, 20, (777,)).to(dtype), strata.randint(lo, 20, (777,)).to(dtype)
    f = strata.randn(777) * 10
    done = _check_against_eager(ints, (a, b, f), monkeypatch, inexact=lambda i: False)
    assert any(_vector(ops, "LDG") for _, _, ops, _ in done)


@pytest.mark.parametrize("dtype", [strata.float16, strata.bfloat16])
def test_reduced_precision_chains_round_per_op(dtype, monkeypatch):
    def chain(x, y):
        a = (x * 1.5 + y).sigmoid() * y
        return a, (a - x).relu().to(strata.float32), strata.where(x > 0, x, y * 0.5)
    strata.manual_seed(2)
    x, y = strata.randn(3001).to(dtype), strata.randn(3001).to(dtype)
    done = _check_against_eager(chain, (x, y), monkeypatch, inexact=lambda i: i < 2)
    for cs, c, ops, k in done:
        # VEC follows the widest vector-accessed element: the float32 output is written 16 bytes at a time,
        # the 16-bit inputs and outputs 8 bytes at a time.
        assert cs.vec == 4
        assert _vector(ops, "STG") >= 1 and any(o.startswith("LDG.E.64") for o in ops), ops

    def only_16bit(x, y):
        return (x * y - 0.75).tanh(), strata.maximum(x, y) + 1
    done = _check_against_eager(only_16bit, (x, y), monkeypatch, inexact=lambda i: i == 0)
    for cs, c, ops, k in done:
        assert cs.vec == 8 and _vector(ops, "LDG") >= 2 and _vector(ops, "STG") >= 2, ops   # 8 halves a vector


# ---- pointwise: broadcasts, strides, alignment, index width -------------------------------------------------

def test_broadcast_row_and_column_operands_vectorize(monkeypatch):
    def bias(x, b, c):
        return (x * b + c).tanh(), x - c
    strata.manual_seed(3)
    x, b, c = strata.randn(48, 256), strata.randn(256), strata.randn(48, 1)
    done = _check_against_eager(bias, (x, b, c), monkeypatch, inexact=lambda i: i == 0, scale=4)
    (cs, c_, ops, k), = done
    assert not k.flat and cs.vec == 4 and cs.index == "int32_t"
    # x and b are read as float4, c once per vector; both outputs written as float4.
    assert _vector(ops, "LDG") >= 2 and _vector(ops, "STG") >= 2, ops


def test_transposed_operand_takes_the_scalar_path_and_matches(monkeypatch):
    def mixed(x, t, r):
        return x * t + r, (x - t).exp()
    strata.manual_seed(4)
    x, t, r = strata.randn(33, 70), strata.randn(70, 33).t(), strata.randn(70)
    done = _check_against_eager(mixed, (x, t, r), monkeypatch, inexact=lambda i: i == 1, scale=4)
    for cs, c, ops, k in done:
        assert cs.vec == 1 and _vector(ops, "LDG") == 0


def test_misaligned_views_run_the_scalar_path(monkeypatch):
    # The kernel is rendered for contiguous inputs; at run time a view one element in is not 16-byte aligned,
    # and the kernel's alignment check sends it down the scalar loop.
    def f(x, y):
        return x * y - 0.5
    strata.manual_seed(5)
    base_x, base_y = strata.randn(1001), strata.randn(1001)
    x, y = base_x[1:], base_y[1:]
    assert x.data_ptr() % 16 != 0
    ref = f(x, y)
    (graph, kind, k, in_ids, out_ids), = _lowered(f, (x, y), monkeypatch)
    cs = _render(kind, k)
    assert cs.vec == 4
    got = _emulate(graph, kind, k, in_ids, out_ids, (x, y), cs)
    _close(got[0], ref, True, "misaligned")
    for cs in (cs, cuda.render_pointwise(k, n=1000)):     # int64 (n unknown) and int32 indices
        got = _emulate(graph, kind, k, in_ids, out_ids, (base_x[:999].contiguous(), base_y[:999].contiguous()), cs)
        # (the output is allocated at the recorded 1000 elements; a flat kernel writes the first n = 999)
        _close(got[0][:999], f(base_x[:999], base_y[:999]), True, f"aligned, n not a multiple of VEC, {cs.index}")


def test_index_width_follows_the_sizes(monkeypatch):
    def f(x):
        return x * 2 + 1
    (graph, kind, k, *_), = _lowered(f, (strata.randn(64),), monkeypatch)
    assert k.flat
    assert cuda.render_pointwise(k, n=1000).index == "int32_t"
    assert cuda.render_pointwise(k, n=cuda.INT32_LIMIT).index == "int64_t"
    assert cuda.render_pointwise(k).index == "int64_t"          # n unknown: int64
    big = cuda.render_pointwise(k, n=3 << 31)
    c, ops = _checked(big)
    small, big_ptx = _checked(cuda.render_pointwise(k, n=1000))[0].ptx, c.ptx
    # 64-bit index arithmetic only where the size needs it.
    assert "mul.wide.s32" in small or "mul.wide.u32" in small or "cvt.s64.s32" in small
    assert "setp.lt.s64" in big_ptx and "setp.lt.s64" not in small


def test_occupancy_and_report(monkeypatch):
    # The calculator's arithmetic: 32 registers fill an SM with 256-thread blocks, 40 leave 6 blocks of 8 warps,
    # 170 leave one block.
    assert cuda_compile.occupancy(32, 256) == 1.0
    assert cuda_compile.occupancy(40, 256) == 0.75
    assert cuda_compile.occupancy(170, 256) == 0.125
    assert cuda_compile.occupancy(16, 1024, smem=200 * 1024) == 0.5     # one 1024-thread block by shared memory

    def f(x, b):
        return (x * b).sigmoid()
    (graph, kind, k, *_), = _lowered(f, (strata.randn(8, 64), strata.randn(64)), monkeypatch)
    c, ops = _checked(_render(kind, k), k)
    text = c.report(256)
    assert text.startswith("strata_kernel (sm_90a): ") and f"{c.info['registers']} registers" in text
    assert "0 B spill stores" in text and "LDG.E.128" in text and "MUFU.EX2" in text


def test_the_ptx_is_the_version_the_lent_machines_take(monkeypatch, tmp_path):
    # PTX ISA 9.0 (CUDA 13.0): what driver 580 and ptxas 13.0 accept; NVRTC 13.5's newer PTX they reject. Where
    # the CUDA 13.0 toolkit is installed (/usr/local/cuda here and on the lent machines) its ptxas assembles it.
    import os
    import shutil
    import subprocess

    def f(x, b):
        return (x * b).exp()
    (graph, kind, k, *_), = _lowered(f, (strata.randn(8, 64), strata.randn(64)), monkeypatch)
    c, _ = _checked(_render(kind, k), k)
    assert ".version 9.0" in c.ptx.splitlines()
    ptxas = shutil.which("ptxas") or next((p for p in ["/usr/local/cuda/bin/ptxas"] if os.path.exists(p)), None)
    if ptxas is None:
        pytest.skip("no ptxas (CUDA 13.0 toolkit) on this machine")
    (tmp_path / "k.ptx").write_text(c.ptx)
    r = subprocess.run([ptxas, "-arch=sm_90a", "-v", str(tmp_path / "k.ptx"), "-o", str(tmp_path / "k.cubin")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "0 bytes spill stores" in r.stderr + r.stdout


def test_launch_config_caps_the_grid():
    assert cuda.launch_config(10, 4) == (1, 256)
    g, b = cuda.launch_config(1 << 30, 4, sm_count=132)
    assert b == 256 and g == 132 * 8 * 8 and g * b <= cuda.MAX_THREADS


# ---- transcendentals in SASS -------------------------------------------------------------------------------

# What the accurate CUDA math functions compile to (CUDA 13.0, sm_90a, measured): exp, erf, tanh and sigmoid
# start from MUFU.EX2 (with MUFU.RCP for the divisions), sqrt/rsqrt from MUFU.RSQ (RSQ64H in float64), float64
# division from MUFU.RCP64H; float32 log is a polynomial on FFMA with no MUFU at all (logf does not use LG2).
@pytest.mark.parametrize("dtype, op, expect, absent", [
    (strata.float32, lambda y: y.exp(), {"MUFU.EX2"}, set()),
    (strata.float32, lambda y: y.erf(), {"MUFU.EX2"}, set()),
    (strata.float32, lambda y: y.tanh(), {"MUFU.EX2", "MUFU.RCP"}, set()),
    (strata.float32, lambda y: y.sigmoid(), {"MUFU.EX2", "MUFU.RCP"}, set()),
    (strata.float32, lambda y: F.gelu(y, approximate="tanh"), {"MUFU.EX2", "MUFU.RCP"}, set()),
    (strata.float32, lambda y: y.abs().rsqrt(), {"MUFU.RSQ"}, set()),
    (strata.float32, lambda y: y.abs().sqrt(), {"MUFU.RSQ"}, set()),
    (strata.float32, lambda y: y.abs().log(), set(), {"MUFU.LG2"}),
    (strata.float64, lambda y: y.abs().rsqrt(), {"MUFU.RSQ64H"}, set()),
    (strata.float64, lambda y: 1.5 / y, {"MUFU.RCP64H"}, set()),
])
def test_transcendentals_in_sass(dtype, op, expect, absent, monkeypatch):
    def f(x):
        return op(x * 1)   # one op alone is left to eager: two make a kernel
    (graph, kind, k, *_), = _lowered(f, (strata.randn(256, dtype=dtype),), monkeypatch)
    c, ops = _checked(_render(kind, k), k)
    mufu = sorted(o for o in ops if o.startswith("MUFU"))
    assert expect <= set(ops) and not absent & set(ops), mufu


# ---- row kernels -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("block", [32, 64, 128])
def test_row_kernels_match_eager(block, monkeypatch):
    def rows(x, w, b):
        return (strata.softmax(x, -1), F.layer_norm(x, (x.shape[-1],), w, b), x.sum(-1), x.mean(-1),
                x.amax(-1), strata.log_softmax(x, -1))
    strata.manual_seed(6)
    x, w, b = strata.randn(7, 300), strata.randn(300), strata.randn(300)
    x[2, 5] = float("-inf")
    done = _check_against_eager(rows, (x, w, b), monkeypatch, inexact=lambda i: i != 4, scale=4, block=block)
    kinds = {cs.kind for cs, *_ in done}
    assert "rows" in kinds
    for cs, c, ops, k in done:
        if cs.kind == "rows":
            assert ops.get("SHFL.BFLY", 0) >= 5 and any(o.startswith("BAR.SYNC") for o in ops), ops
            assert c.info["smem"] > 0
            # 300 columns: a multiple of 4, so the rows are read and written as float4.
            assert cs.vec == 4 and _vector(ops, "LDG") >= 1 and _vector(ops, "STG") >= 1, ops


def test_rms_norm_like_row_kernel(monkeypatch):
    def rms(x):
        return x * strata.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6)
    strata.manual_seed(7)
    done = _check_against_eager(rms, (strata.randn(5, 130),), monkeypatch, scale=4)
    assert [cs.kind for cs, *_ in done] == ["rows"]


# ---- NVRTC errors ------------------------------------------------------------------------------------------

def test_compile_errors_name_the_kernel_and_carry_the_log():
    with pytest.raises(RuntimeError, match=r"(?s)kernel my_broken_kernel failed to compile for sm_90a.*undefined"):
        cuda_compile.compile('extern "C" __global__ void k(float* a) { a[0] = nope; }', name="my_broken_kernel")
    with pytest.raises(ValueError, match="sm_90a"):
        cuda_compile.compile('extern "C" __global__ void k() {}', name="k", arch="compute_90a")
