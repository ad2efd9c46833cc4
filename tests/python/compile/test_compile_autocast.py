"""Autocast inside and around compiled regions (Note [Autocast in captured graphs] in
src/compile/recorder.cpp): an autocast block is captured into the graph (no break), the casts are
explicit nodes, each node replays under the autocast state it was recorded in, and the autocast
state at call time is guarded."""

import pytest

import strata as st
import strata.nn as nn
import strata.nn.functional as F

from compile_testutil import same

BACKENDS = ["eager", "aot_eager", "inductor"]


def _close(a, b):
    """Compiled vs eager: same structure and dtypes; backend="eager" bit for bit, the others to the
    tolerance of the lowest precision involved (generated code may round in another order)."""
    if isinstance(a, (tuple, list)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            _close(x, y)
        return
    if not isinstance(a, st.Tensor):
        assert a == b
        return
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
    tol = 2e-2 if a.dtype in (st.bfloat16, st.float16) else 1e-5
    assert st.allclose(a.float(), b.float(), rtol=tol, atol=tol), (a, b)


@pytest.fixture
def graphs(monkeypatch):
    """The graphs compiled while the test runs (each capture hands its graph to the backend once)."""
    from strata._dynamo import convert
    seen = []
    real = convert._backend_compile

    def counting(out, backend, example_args):
        seen.append(out.graph)
        return real(out, backend, example_args)
    monkeypatch.setattr(convert, "_backend_compile", counting)
    return seen


def block(x, w):
    y = x * 2
    with st.autocast("cpu", dtype=st.bfloat16):
        z = y @ w
        s = z.softmax(-1)
        with st.autocast("cpu", enabled=False):
            q = y @ w
        r = st.cat([z, y], 1)
    return z, s, z.float() + 1, q, r


def block_amp(x, w):
    with st.amp.autocast(device_type="cpu", dtype=st.float16):
        z = F.linear(x, w)
    return z, (z * 2).relu(), z.sum(-1)


def block_torch_style(x, w):
    with st.autocast(device_type="cpu"):   # torch.autocast(device_type=...) is strata.autocast
        z = st.mm(x, w.t())
        n = F.layer_norm(z, (8,))
    return z.tanh(), n


def block_disabled(x, w):
    with st.autocast("cpu", enabled=False):
        return x @ w


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [block, block_amp, block_torch_style, block_disabled])
def test_autocast_block_in_graph(fn, backend):
    st.manual_seed(0)
    x, w = st.randn(4, 8), st.randn(8, 8)
    ref = fn(x, w)
    c = st.compile(fn, backend=backend)
    for _ in range(2):   # capturing call and cached call
        got = c(x, w)
        if backend == "eager":
            same(got, ref)
        else:
            _close(got, ref)
        assert not st.is_autocast_enabled()
    e = st.compiler.explain(fn)(x, w)
    assert e.graph_count == 1 and e.graph_break_count == 0, e.break_reasons


def test_casts_are_nodes_and_nodes_carry_the_state(graphs):
    x, w = st.randn(4, 8), st.randn(8, 8)
    st.compile(block, backend="eager")(x, w)
    (g,) = graphs
    text = g.print_readable()
    # the matmul reads bfloat16 casts of its operands; the softmax a float32 cast of the product
    assert '_to_copy: "bf16[4, 8]"' in text and '_to_copy_1: "bf16[8, 8]"' in text, text
    assert 'matmul: "bf16[4, 8]" = strata.ops.matmul(_to_copy, _to_copy_1)' in text, text
    assert 'softmax: "f32[4, 8]" = strata.ops.softmax(_to_copy_2, -1)' in text, text
    # the enabled=False block's matmul is float32 on the uncast operands, and so marked
    assert 'matmul_1: "f32[4, 8]" = strata.ops.matmul(mul, w)' in text, text
    # the listing says where the autocast state changes
    assert text.index("# autocast: bfloat16") < text.index("_to_copy:") < text.index("# autocast: off") \
        < text.index("matmul_1:"), text
    assert text.count("# autocast: bfloat16") == 2, text   # entering, and back after enabled=False
    states = {g.value(n.outputs[0]).name: n.autocast for n in g.nodes}
    assert states["mul"] is None                 # x * 2 before the block
    assert states["_to_copy"] == states["matmul"] == states["softmax"] == states["cat"] == st.bfloat16
    assert states["matmul_1"] is None            # inside enabled=False
    assert states["add"] is None                 # after the block


@pytest.mark.parametrize("backend", BACKENDS)
def test_training_through_autocast_forward(backend):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1 = nn.Linear(8, 16)
            self.ln = nn.LayerNorm(16)
            self.l2 = nn.Linear(16, 4)

        def forward(self, x):
            with st.autocast("cpu", dtype=st.bfloat16):
                h = F.silu(self.ln(self.l1(x)))
                o = self.l2(h)
            return o.float().pow(2).mean(), o

    st.manual_seed(0)
    m = M()
    x = st.randn(6, 8)
    loss, o = m(x)
    loss.backward()
    ref = [p.grad.clone() for p in m.parameters()]
    m.zero_grad()
    cm = st.compile(m, backend=backend)
    loss2, o2 = cm(x)
    assert o2.dtype == st.bfloat16 and loss2.dtype == st.float32
    loss2.backward()
    _close((loss2, o2), (loss, o))
    for p, r in zip(m.parameters(), ref):
        assert p.grad.dtype == st.float32
        assert st.allclose(p.grad, r, rtol=2e-2, atol=2e-3), (p.grad, r)
    e = st.compiler.explain(m)(x)
    assert e.graph_count == 1 and e.graph_break_count == 0


@st.autocast("cpu", dtype=st.bfloat16)
def decorated(x, w):
    return x @ w


def calls_decorated(x, w):
    return decorated(x, w).float().relu() + (x @ w)


@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize("fn", [decorated, calls_decorated])
def test_decorator_form(fn, backend):
    x, w = st.randn(4, 8), st.randn(8, 8)
    ref = fn(x, w)
    got = st.compile(fn, backend=backend)(x, w)
    (same if backend == "eager" else _close)(got, ref)
    e = st.compiler.explain(fn)(x, w)
    assert e.graph_count == 1 and e.graph_break_count == 0, e.break_reasons


def test_decorator_applied_inside_region():
    def f(x, w):
        mm = st.autocast("cpu", dtype=st.bfloat16)(st.mm)
        return mm(x, w), x @ w
    x, w = st.randn(4, 8), st.randn(8, 8)
    same(st.compile(f, backend="eager")(x, w), f(x, w))
    assert st.compiler.explain(f)(x, w).graph_break_count == 0


def plain(x, w):
    return (x @ w).relu(), (x @ w).sum(-1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_autocast_outside_is_guarded(backend, graphs):
    """Compiled under one autocast state, called under another: a recompile, not a wrong result."""
    x, w = st.randn(4, 8), st.randn(8, 8)
    c = st.compile(plain, backend=backend)
    check = same if backend == "eager" else _close
    check(c(x, w), plain(x, w))
    assert len(graphs) == 1
    with st.autocast("cpu", dtype=st.bfloat16):
        got, ref = c(x, w), plain(x, w)
    assert got[0].dtype == st.bfloat16
    check(got, ref)
    assert len(graphs) == 2
    with st.autocast("cpu", dtype=st.float16):
        got, ref = c(x, w), plain(x, w)
    assert got[0].dtype == st.float16
    check(got, ref)
    assert len(graphs) == 3
    with st.autocast("cpu", dtype=st.bfloat16):
        check(c(x, w), plain(x, w))
    check(c(x, w), plain(x, w))
    assert len(graphs) == 3     # each state hits its own entry now
    with st.autocast("cpu", dtype=st.bfloat16):   # an inner enabled=False block under an outer autocast
        same(st.compile(block_disabled, backend="eager")(x, w), block_disabled(x, w))


def test_guard_names_autocast():
    x, w = st.randn(4, 8), st.randn(8, 8)
    e = st.compiler.explain(plain)(x, w)
    text = "\n".join(str(g) for g in e.out_guards)
    assert "autocast_enabled == False" in text, text


def breaks_inside(x, w):
    y = x + 1
    with st.autocast("cpu", dtype=st.bfloat16):
        z = y @ w
        print("inside")
        z2 = z @ w.t()
    return z2.sum(-1), z2, st.is_autocast_enabled()


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_break_inside_autocast_block(backend, capsys):
    x, w = st.randn(4, 8), st.randn(8, 8)
    ref = breaks_inside(x, w)
    c = st.compile(breaks_inside, backend=backend)
    for _ in range(2):
        got = c(x, w)
        (same if backend == "eager" else _close)(got, ref)
        assert not st.is_autocast_enabled()
    assert capsys.readouterr().out.count("inside") == 3


def test_state_restored_when_capture_fails():
    def f(x):
        with st.autocast("cpu"):
            y = x @ x
            raise ValueError("boom")
        return y
    x = st.randn(4, 4)
    with pytest.raises(ValueError, match="boom"):
        st.compile(f, backend="eager")(x)
    assert not st.is_autocast_enabled()
    assert st.get_autocast_dtype("cpu") == st.bfloat16


def test_bad_autocast_dtype_raises_as_eager():
    def f(x):
        with st.autocast("cpu", dtype=st.float64):
            return x @ x
    x = st.randn(4, 4)
    with pytest.raises(RuntimeError, match="CPU Autocast only supports"):
        f(x)
    with pytest.raises(RuntimeError, match="CPU Autocast only supports"):
        st.compile(f, backend="eager")(x)
    assert not st.is_autocast_enabled()


def test_compare_with_torch():
    torch = pytest.importorskip("torch")
    import numpy as np

    def make(T):
        def f(x, w):
            with T.autocast(device_type="cpu", dtype=T.bfloat16):
                z = x @ w
                s = T.relu(z) * 2
            return z, s, z.float().exp()
        return f
    xn, wn = np.random.RandomState(0).randn(2, 4, 8).astype("float32")[0], \
        np.random.RandomState(1).randn(8, 8).astype("float32")
    got = st.compile(make(st), backend="eager")(st.tensor(xn), st.tensor(wn))
    ref = make(torch)(torch.tensor(xn), torch.tensor(wn))
    for g, r in zip(got, ref):
        assert str(g.dtype).split(".")[-1] == str(r.dtype).split(".")[-1]
        assert np.allclose(g.float().numpy(), r.float().numpy(), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_training_with_autocast_around_the_compiled_module(backend):
    """The usual AMP step: the compiled model called inside autocast, backward outside it."""
    st.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    x = st.randn(6, 8)

    def step(model):
        model.zero_grad()
        with st.autocast("cpu", dtype=st.bfloat16):
            o = model(x)
        o.float().pow(2).mean().backward()
        return o, [p.grad.clone() for p in model.parameters()]

    o, grads = step(m)
    cm = st.compile(m, backend=backend)
    for _ in range(2):
        o2, grads2 = step(cm)
        _close(o2, o)
        for a, b in zip(grads2, grads):
            assert a.dtype == b.dtype == st.float32
            assert st.allclose(a, b, rtol=2e-2, atol=2e-3)
