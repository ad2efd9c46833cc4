"""backend="strata_cpp": the special functions (lgamma, digamma, erfinv, i0, the Bessel, ndtr, zeta,
incomplete-gamma and polynomial families, Note [Special functions in generated kernels] in
python/strata/_inductor/ir.py) fuse into generated kernels with the ops around them and give eager's
values; and generated kernels appear in the profiler under names made of their ops (Note [Kernel
names in the profiler] in fusion.py), with their time."""

import pytest

import strata
from strata._C import _compile
from strata._inductor import fusion, ir

from compile_testutil import cache_dir, needs_gxx  # noqa: F401  (cache_dir: a fixture)

pytestmark = [needs_gxx, pytest.mark.usefixtures("cache_dir")]

OPS = strata._C._ops
# Eager's build may contract a functor's double arithmetic into FMAs where the kernels do not
# (-ffp-contract=off): float64 results agree to a few ulps of the terms, which near a root of the
# function (lgamma at 1 and 2, a polynomial's zeros) is a larger relative error. Measured max: float32
# bit-exact except chebyshev_t (3.7e-5 relative at a zero), float64 2.6e-11 relative (lgamma near 1).
TOL = {strata.float32: dict(rtol=1e-6, atol=1e-6), strata.float64: dict(rtol=1e-12, atol=1e-13),
       strata.bfloat16: dict(rtol=0, atol=0)}


def _graph(fn, examples):
    g = _compile.Graph()
    ms = []
    for k, t in enumerate(examples):
        m = strata.empty(*t.shape, dtype=t.dtype, device="meta")
        g.add_input(f"x{k}", m, device=strata.device("cpu"))
        ms.append(m)
    with _compile.record(g):
        out = fn(*ms)
    out = out if isinstance(out, tuple) else (out,)
    g.set_outputs([g.value_of(o) for o in out])
    return g


def _inputs(dtype, n=1031):
    strata.manual_seed(0)
    x = strata.rand(n, dtype=strata.float64) * 1.8 - 0.9          # erfinv's domain
    pos = x.abs() * 3 + 0.2                                       # lgamma, zeta, the Bessel K family
    deg = (strata.arange(n, dtype=strata.float64) % 5)            # polynomial degrees 0..4
    return x.to(dtype), pos.to(dtype), deg.to(dtype)


def _unary_all(x, pos, deg):
    outs = []
    for op in ir.SPECIAL_UNARY:
        a = x if op == "erfinv" else (x.abs() * 0.9 + 0.05 if op == "special_ndtri" else pos)
        outs.append(getattr(OPS, op)(a * 1.0) + 0.0)   # a pointwise producer and consumer around each
    return tuple(outs)


def _binary_all(x, pos, deg):
    outs = []
    for op in ir.SPECIAL_BINARY:
        other = deg if "polynomial" in op else pos * 0.5 + 1.0
        outs.append(getattr(OPS, op)(x * 1.0 if "polynomial" in op else pos, other) * 2.0)
    return tuple(outs)


def _compare(got, ref, dtype):
    for k, (a, r) in enumerate(zip(got, ref)):
        assert a.dtype == r.dtype and a.shape == r.shape, k
        assert strata.allclose(a.double(), r.double(), equal_nan=True, **TOL[dtype]), \
            (k, float((a.double() - r.double()).abs().max()))


@pytest.mark.parametrize("dtype", [strata.float32, strata.float64])
@pytest.mark.parametrize("which", [_unary_all, _binary_all], ids=["unary", "binary"])
def test_special_functions_fuse_and_match_eager(which, dtype):
    args = _inputs(dtype)
    run = fusion.compile_graph(_graph(which, args))
    assert isinstance(run, fusion._Runner)
    assert len(run.kernel_sources) == 1, len(run.kernel_sources)  # every op in one kernel
    src = run.kernel_sources[0]
    assert "strata::fn::Lgamma" in src or "strata::fn::Zeta" in src
    _compare(run(*args), which(*args), dtype)


def test_integer_inputs_compute_in_the_default_float():
    def fn(i):
        return strata.lgamma(i + 1) * strata.special.ndtr(i) + strata.digamma(i.abs() + 1)

    i = strata.arange(-5, 60)
    run = fusion.compile_graph(_graph(fn, (i,)))
    assert len(run.kernel_sources) == 1
    (got,), ref = run(i), fn(i)
    assert got.dtype == ref.dtype == strata.float32
    _compare((got,), (ref,), strata.float32)


def test_bfloat16_rounds_like_eager():
    def fn(x):
        return strata.special.i0e(x * 2) + strata.erfinv(x * 0.5)

    x = strata.rand(257).to(strata.bfloat16)
    run = fusion.compile_graph(_graph(fn, (x,)))
    assert len(run.kernel_sources) == 1
    _compare(run(x), (fn(x),), strata.bfloat16)


def test_compiled_function_uses_them():
    def fn(x):
        return strata.special.log_ndtr(x).exp() - strata.special.ndtr(x)

    x = strata.randn(300, dtype=strata.float64)
    got = strata.compile(fn)(x)
    assert strata.allclose(got, fn(x), rtol=1e-12, atol=1e-14)


# ---- kernel names in the profiler -------------------------------------------------------------------

def _chain(x, y):
    return ((x * y + 1).relu() * 0.5 - y).abs()


@pytest.mark.parametrize("prof_kind", ["profiler", "autograd"])
def test_kernels_appear_in_the_profiler_under_their_ops(prof_kind):
    x, y = strata.randn(64, 64), strata.randn(64, 64)
    cf = strata.compile(_chain)
    cf(x, y)
    if prof_kind == "profiler":
        ctx = strata.profiler.profile()
    else:
        ctx = strata.autograd.profiler.profile()
    with ctx as prof:
        with strata.autograd.profiler.record_function("step"):
            got = cf(x, y)
    assert strata.equal(got, _chain(x, y))
    events = list(prof.events())
    kernels = [e for e in events if e.name.startswith("strata_fused_")]
    assert len(kernels) == 1, [e.name for e in events]
    k = kernels[0]
    assert k.name.startswith("strata_fused_mul_add_relu_sub_abs_"), k.name
    assert k.category == "kernel" and k.cpu_time_total >= 0
    step = next(e for e in events if e.name == "step")
    assert step.time_range.start <= k.time_range.start and k.time_range.end <= step.time_range.end
    table = prof.key_averages().table()
    assert k.name in table


def test_kernel_call_of_a_fused_runner_is_named():
    """The step-by-step runner (compile_graph's, what a graph with autograd or without a kernel plan
    runs) calls KernelCall, which records the same kind of range."""
    g = _graph(_chain, (strata.randn(8, 8), strata.randn(8, 8)))
    run = fusion.compile_graph(g)
    x, y = strata.randn(8, 8), strata.randn(8, 8)
    with strata.profiler.profile() as prof:
        run(x, y)
    names = [e.name for e in prof.events() if e.category == "kernel"]
    assert len(names) == 1 and names[0].startswith("strata_fused_mul_add_relu_sub_abs_"), names
