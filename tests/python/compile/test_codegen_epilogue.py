"""backend="strata_cpp": GEMM epilogue steps (Note [GEMM epilogue steps] in python/strata/_inductor/fusion.py,
Note [GEMM epilogues] in src/compile/gemm_epilogue.cpp): linear / matmul / mm / addmm followed by relu, gelu,
silu or a product with another tensor run as one oneDNN matmul primitive with a post-op.

Results are compared with a float64 NumPy reference (torch's formulas) and with eager Strata. They are not eager's bits: the
bias is added after the whole sum (eager starts the GEMM from it) and oneDNN computes erf / tanh / sigmoid
with its own approximations. GEMM_TOL is the tolerance, relative to the size of the products' terms
(sum_k |x_ik w_kj| + |b_j|), which bounds float32 accumulation differences for K up to a few thousand."""


import math

import numpy as np
import pytest

import strata
import strata.nn.functional as F
from strata._C import _compile
from strata._inductor import fusion

from compile_testutil import cache_dir, needs_gxx, record_graph as _record  # noqa: F401  (cache_dir: a fixture)

pytestmark = [needs_gxx, pytest.mark.usefixtures("cache_dir")]

GEMM_TOL = 2e-6    # times the term scale, per element
ACT_TOL = 1e-6     # oneDNN's erf/tanh/sigmoid against libm, relative to the activation's input scale


@pytest.fixture(autouse=True)
def any_size(monkeypatch):
    """The tests' products are small: fuse them regardless of GEMM_EPILOGUE_MIN_WORK (tested on its own)."""
    monkeypatch.setattr(fusion, "GEMM_EPILOGUE_MIN_WORK", 0)


def _supported():
    return _compile.gemm_epilogue_supported([8, 8, 8, 8, 1, 8, 1, 0, 1, 0])


needs_dnnl = pytest.mark.skipif(not _supported(), reason="oneDNN's matmul primitive is not available")


def _t(x):
    return np.ascontiguousarray(x.numpy()).astype(np.float64)


def _close(got, ref64, scale):
    """got (strata float32) against a float64 reference, per element within GEMM_TOL * scale."""
    err = np.abs(_t(got) - ref64)
    bound = GEMM_TOL * scale + ACT_TOL * (scale + 1)
    assert bool((err <= bound).all()), float((err - bound).max())


_erf = np.vectorize(math.erf)


def _silu(h):
    return h / (1 + np.exp(-h))


ACTS = {   # (strata, float64 reference with torch's definition)
    "relu": (F.relu, lambda h: np.maximum(h, 0)),
    "gelu": (F.gelu, lambda h: 0.5 * h * (1 + _erf(h / math.sqrt(2)))),
    "gelu_tanh": (lambda h: F.gelu(h, approximate="tanh"),
                  lambda h: 0.5 * h * (1 + np.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h ** 3)))),
    "silu": (F.silu, _silu),
}


def _steps(run):
    return [s for s in run.steps if isinstance(s, fusion._KernelStep) and "GEMM epilogue" in s.source]


@needs_dnnl
@pytest.mark.parametrize("act", list(ACTS))
@pytest.mark.parametrize("bias", [True, False])
def test_linear_act(act, bias):
    f, tf = ACTS[act]
    M, K, N = 37, 70, 53   # odd sizes: oneDNN's tails
    if bias:
        fn = lambda x, w, b: f(F.linear(x, w, b))  # noqa: E731
        shapes = [(M, K), (N, K), (N,)]
    else:
        fn = lambda x, w: f(F.linear(x, w))  # noqa: E731
        shapes = [(M, K), (N, K)]
    run = fusion.compile_graph(_record(fn, *shapes))
    assert isinstance(run, fusion._Runner) and len(_steps(run)) == 1 and len(run.steps) == 1
    strata.manual_seed(1)
    args = [strata.randn(*s) for s in shapes]
    (got,) = run(*args)
    ref_eager = fn(*args)
    assert got.shape == ref_eager.shape and got.dtype == strata.float32 and got.is_contiguous()
    x, w = (_t(a) for a in args[:2])
    b = _t(args[2]) if bias else np.zeros(N)
    scale = np.abs(x) @ np.abs(w).T + np.abs(b)
    _close(got, tf(x @ w.T + b), scale)
    _close(ref_eager, tf(x @ w.T + b), scale)  # eager is within the same bound


@needs_dnnl
def test_addmm_mm_matmul_layouts():
    """addmm with a [N] bias, mm and matmul with a transposed weight, matmul of a 3-d input."""
    cases = [
        (lambda b, x, w: F.relu(strata.addmm(b, x, w)), [(24,), (16, 40), (40, 24)]),
        (lambda x, w: F.silu(strata.mm(x, w.t())), [(16, 40), (24, 40)]),
        (lambda x, w: F.gelu(x @ w), [(3, 5, 40), (40, 24)]),
        (lambda x, w: F.gelu(x.t() @ w), [(40, 16), (40, 24)]),   # a transposed first operand
    ]
    for fn, shapes in cases:
        run = fusion.compile_graph(_record(fn, *shapes))
        assert len(_steps(run)) == 1, shapes
        strata.manual_seed(2)
        args = [strata.randn(*s) for s in shapes]
        (got,) = run(*args)
        ref = fn(*args)
        assert got.shape == ref.shape
        assert strata.allclose(got, ref, rtol=1e-5, atol=1e-5), float((got - ref).abs().max())


@needs_dnnl
@pytest.mark.parametrize("order", ["gate_first", "up_first"])
def test_swiglu(order):
    if order == "gate_first":
        fn = lambda x, w1, w3: F.silu(x @ w1) * (x @ w3)  # noqa: E731
    else:
        fn = lambda x, w1, w3: (x @ w3) * F.silu(x @ w1)  # noqa: E731
    shapes = [(33, 48), (48, 70), (48, 70)]
    run = fusion.compile_graph(_record(fn, *shapes))
    # silu(x @ w1) is one step, (x @ w3) * that another: no pass over either product.
    assert len(_steps(run)) == 2 and len(run.steps) == 2
    strata.manual_seed(3)
    args = [strata.randn(*s) * 0.3 for s in shapes]
    (got,) = run(*args)
    x, w1, w3 = (_t(a) for a in args)
    ref = _silu(x @ w1) * (x @ w3)
    s1, s3 = np.abs(x) @ np.abs(w1), np.abs(x) @ np.abs(w3)
    _close(got, ref, s1 * s3 + s1 + s3)
    e = fn(*args)
    assert strata.allclose(got, e, rtol=1e-5, atol=1e-5)


def test_not_fused_when_the_product_is_read_elsewhere():
    # h is a graph output and feeds the relu: the relu cannot be folded in.
    g = _record(lambda x, w: (x @ w, F.relu(x @ w) + 0), (8, 16), (16, 8))
    run = fusion.compile_graph(g)
    steps = _steps(run) if isinstance(run, fusion._Runner) else []
    assert len(steps) == 1   # the second x @ w is read only by its relu
    g = _record(lambda x, w: (lambda h: (h, F.relu(h)))(x @ w), (8, 16), (16, 8))
    run = fusion.compile_graph(g)
    assert not isinstance(run, fusion._Runner) or not _steps(run)
    # float64, integer and a product of h with itself are left alone.
    for fn, shapes, dt in [(lambda x, w: F.relu(x @ w), [(8, 16), (16, 8)], strata.float64),
                           (lambda x, w: (x @ w) * (x @ w), [(8, 16), (16, 8)], strata.float32)]:
        gg = _compile.Graph()
        ms = []
        for k, sh in enumerate(shapes):
            m = strata.empty(*sh, device="meta", dtype=dt)
            gg.add_input(f"x{k}", m, device=strata.device("cpu"))
            ms.append(m)
        with _compile.record(gg):
            out = fn(*ms)
        gg.set_outputs([gg.value_of(out)])
        run = fusion.compile_graph(gg)
        if dt == strata.float64:
            assert not isinstance(run, fusion._Runner) or not _steps(run)
        else:
            assert isinstance(run, fusion._Runner) and len(_steps(run)) == 1   # one product times the other


@needs_dnnl
def test_bias_linear_without_epilogue_is_a_gemm_step():
    # Note [Bias GEMM steps]: the pre-activation has two readers (as in a training forward, which saves it),
    # so no epilogue; the linear with a bias still runs as the primitive, the bias added as it writes.
    M, K, N = 37, 70, 53
    fn = lambda x, w, b: (lambda h: (h, F.gelu(h) * 2))(F.linear(x, w, b))  # noqa: E731
    run = fusion.compile_graph(_record(fn, (M, K), (N, K), (N,)))
    steps = _steps(run)
    assert len(steps) == 1 and steps[0].in_ids and "GEMM step for node " in steps[0].source
    strata.manual_seed(4)
    x, w, b = strata.randn(M, K), strata.randn(N, K), strata.randn(N)
    h, y = run(x, w, b)
    xn, wn, bn = _t(x), _t(w), _t(b)
    scale = np.abs(xn) @ np.abs(wn).T + np.abs(bn)
    _close(h, xn @ wn.T + bn, scale)
    he, ye = fn(x, w, b)
    assert strata.allclose(y, ye, rtol=1e-5, atol=1e-5)
    # Without a bias the product stays eager's (the primitive is not faster there).
    run = fusion.compile_graph(_record(lambda x, w: (lambda h: (h, F.gelu(h) * 2))(F.linear(x, w)), (M, K), (N, K)))
    assert not isinstance(run, fusion._Runner) or not _steps(run)


@needs_dnnl
def test_compiled_function_and_fallback():
    """Through strata.compile: results, a kernel-plan run, and another layout (a guard miss recompiles)."""
    def fn(x, w, b):
        return F.gelu(F.linear(x, w, b)) * 2

    strata.manual_seed(4)
    x, w, b = strata.randn(64, 96), strata.randn(80, 96) * 0.1, strata.randn(80)
    c = strata.compile(fn)
    got, ref = c(x, w, b), fn(x, w, b)
    assert strata.allclose(got, ref, rtol=1e-5, atol=1e-5)
    xt = strata.randn(96, 64).t()  # non-contiguous input: guards recompile, the result still matches
    got, ref = c(xt, w, b), fn(xt, w, b)
    assert strata.allclose(got, ref, rtol=1e-5, atol=1e-5)
    # Under autograd the graph goes through AOT: gradients match eager.
    wg = w.clone().requires_grad_(True)
    c(x, wg, b).sum().backward()
    w2 = w.clone().requires_grad_(True)
    fn(x, w2, b).sum().backward()
    assert strata.allclose(wg.grad, w2.grad, rtol=1e-4, atol=1e-5)


def test_unsupported_descriptor_is_declined():
    assert not _compile.gemm_epilogue_supported([8, 8, 8, 8, 1, 8, 1, 0, 99, 0])   # unknown activation
    assert not _compile.gemm_epilogue_supported([0, 8, 8, 8, 1, 8, 1, 0, 1, 0])    # empty
    assert not _compile.gemm_epilogue_supported([8, 8])                            # malformed


def test_small_products_stay_eager(monkeypatch):
    monkeypatch.setattr(fusion, "GEMM_EPILOGUE_MIN_WORK", 1 << 20)
    fn = lambda x, w, b: F.relu(F.linear(x, w, b))  # noqa: E731
    run = fusion.compile_graph(_record(fn, (64, 64), (64, 64), (64,)))
    assert not isinstance(run, fusion._Runner) or not _steps(run)
    if _supported():
        run = fusion.compile_graph(_record(fn, (64, 128), (128, 128), (128,)))
        assert len(_steps(run)) == 1


@needs_dnnl
def test_other_layout_runs_the_nodes():
    """An input whose strides differ from the captured ones: the step declines and the nodes run (the
    fused runner and the kernel plan both)."""
    from strata._dynamo.backends import _compile_cpp
    fn = lambda x, w, b: F.gelu(F.linear(x, w, b), approximate="tanh")  # noqa: E731
    g = _record(fn, (32, 48), (40, 48), (40,))
    strata.manual_seed(5)
    x, w, b = strata.randn(32, 48), strata.randn(40, 48), strata.randn(40)
    xt = strata.randn(48, 32).t()          # same sizes, transposed strides
    for run in (fusion.compile_graph(g), _compile_cpp(g, "default")):
        (got,) = run(x, w, b)
        assert strata.allclose(got, fn(x, w, b), rtol=1e-5, atol=1e-5)
        (got,) = run(xt, w, b)
        assert strata.equal(got, fn(xt, w, b))   # eager's nodes: eager's bits
    plan = _compile_cpp(g, "default")
    assert plan.memory_plan.kernels == 1
