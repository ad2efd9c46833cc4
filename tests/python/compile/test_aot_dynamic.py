"""Symbolic sizes through AOT autograd (Note [Symbolic sizes through AOT autograd] in
python/strata/_dynamo/aot_dynamic.py): a compiled training function called with changing batch sizes
compiles at most twice (static, then one symbolic entry) under aot_eager and strata_cpp; the forward and
backward graphs take the sizes as inputs; results and .grad match eager at each size. Also the write with
grad into an input that does not require grad (Note [Writes with grad into inputs] in functionalize.py)."""

import io
import contextlib

import pytest

import strata
import strata.nn as nn
import strata.nn.functional as F
from strata._dynamo import eval_frame, logs
from strata._dynamo.aot import AOTUnsupported, make_joint
from strata._inductor import codecache

from test_aot import Transformer
from test_compile import MLP

BATCHES = (3, 5, 8, 13)
BACKENDS = ["aot_eager", "strata_cpp"]

try:
    codecache.compiler()
    HAVE_CXX = True
except Exception:  # noqa: BLE001
    HAVE_CXX = False


def _backends():
    return [b if b != "strata_cpp" or HAVE_CXX else pytest.param(b, marks=pytest.mark.skip("no C++ compiler"))
            for b in BACKENDS]


def entries(fn):
    code = getattr(fn, "__code__", None)
    return [e for s in eval_frame.states_of(code) for e in s.entries]


def grads(model, fn, *args, seed=3):
    model.zero_grad()
    strata.manual_seed(seed)
    loss = fn(model, *args)
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def close(a, b, what, exact):
    assert a.shape == b.shape, (what, a.shape, b.shape)
    if exact:
        assert strata.equal(a, b), (what, (a - b).abs().max())
    else:
        assert strata.allclose(a, b, rtol=1e-4, atol=1e-6), (what, (a - b).abs().max())


def sweep(model, step, make, backend, exact=False, sizes=BATCHES, **kw):
    """Trains one step per size compiled and eagerly; returns the compiled step's entries."""
    cstep = strata.compile(step, backend=backend, **kw)
    for n in sizes:
        args = make(n)
        loss_e, ref = grads(model, step, *args)
        loss_c, got = grads(model, cstep, *args)
        close(loss_c, loss_e, ("loss", n), exact)
        assert set(got) == set(ref)
        for k in ref:
            close(got[k], ref[k], (k, n), exact)
    return entries(step)


def symbolic_plan(es):
    """The CompiledFunction plan of the (last, symbolic) entry."""
    r = es[-1].run.__globals__["R"]
    assert hasattr(r, "plan"), "the symbolic entry did not go through AOT autograd"
    return r.plan


def mlp_step(model, x, t):
    return F.cross_entropy(model(x), t)


def _mlp_args(n):
    return strata.randn(n, 16), strata.randint(0, 2, (n,))


@pytest.mark.parametrize("backend", _backends())
def test_mlp_training_batch_sweep_compiles_twice(backend):
    strata.manual_seed(0)
    m = MLP(d=16).train()   # dropout: the compiled graph draws the same masks as eager for a seed
    es = sweep(m, mlp_step, _mlp_args, backend, exact=backend == "aot_eager")
    assert len(es) == 2 and not es[0].dynamic and es[1].dynamic
    plan = symbolic_plan(es)
    assert plan.dynamic
    fwd, bwd = plan.partition.forward, plan.partition.backward
    # The batch size is an input of both graphs: a size the forward computes and the backward reads.
    assert any(fwd.value(v).kind == "int" for v in fwd.inputs)
    assert any(bwd.value(v).kind == "int" for v in bwd.inputs)
    assert "int" in plan.saved_kinds


@pytest.mark.parametrize("backend", _backends())
def test_two_block_transformer_batch_and_sequence_sweep(backend):
    strata.manual_seed(0)
    m = Transformer(d=16)

    def step(model, x, t):
        return F.cross_entropy(model(x).reshape(-1, 7), t.reshape(-1))

    def make(n):
        T = 4 + n % 3
        return strata.randn(n, T, 16), strata.randint(0, 7, (n, T))
    es = sweep(m, step, make, backend)
    assert len(es) == 2 and es[1].dynamic
    plan = symbolic_plan(es)
    # Saved tensors have the capture's geometry in the graph and the call's at run time.
    assert any(k == "int" for k in plan.saved_kinds)


@pytest.mark.parametrize("backend", _backends())
def test_dynamic_true_compiles_once_and_dynamic_false_every_size(backend):
    strata.manual_seed(1)
    m = MLP(d=16).eval()
    es = sweep(m, mlp_step, _mlp_args, backend, dynamic=True)
    assert len(es) == 1 and es[0].dynamic
    symbolic_plan(es)
    strata.compiler.reset()
    es = sweep(m, mlp_step, _mlp_args, backend, dynamic=False)
    assert len(es) == len(BATCHES) and not any(e.dynamic for e in es)


@pytest.mark.parametrize("backend", _backends())
def test_mark_dynamic_first_call(backend):
    strata.manual_seed(2)
    m = nn.Sequential(nn.Linear(8, 12), nn.GELU(), nn.Linear(12, 3))

    def step(model, x):
        return (model(x).softmax(-1) * x[:, :3]).mean()

    def make(n):
        x = strata.randn(n, 8)
        strata._dynamo.mark_dynamic(x, 0)
        return (x,)
    es = sweep(m, step, make, backend)
    assert len(es) == 1 and es[0].dynamic
    symbolic_plan(es)


@pytest.mark.parametrize("backend", _backends())
def test_input_gradients_and_size_dependent_numbers(backend):
    # mean (1 / numel), var (2 / (n - 1)), a symbolic slice (x.shape[0] // 2), input grads.
    def f(x, w):
        h = (x @ w).tanh()
        return h.mean() + h.var() + (h[: x.shape[0] // 2] * 2).sum() + h.std(0).sum()

    cf = strata.compile(f, backend=backend)
    w = strata.randn(6, 6, requires_grad=True)
    for n in BATCHES:
        x = strata.randn(n, 6, requires_grad=True)
        ref = f(x, w)
        gx, gw = strata.autograd.grad(ref, [x, w])
        got = cf(x, w)
        hx, hw = strata.autograd.grad(got, [x, w])
        close(got, ref, n, False)
        close(hx, gx, ("x.grad", n), False)
        close(hw, gw, ("w.grad", n), False)
    es = entries(f)
    assert len(es) == 2 and es[1].dynamic
    symbolic_plan(es)


def test_recompiles_log_counts_the_entries(monkeypatch):
    monkeypatch.setattr(logs, "_enabled", logs._parse("recompiles"))
    strata.manual_seed(0)
    m = MLP(d=16).eval()
    buf = io.StringIO()
    with contextlib.redirect_stderr(buf), contextlib.redirect_stdout(buf):
        sweep(m, mlp_step, _mlp_args, "aot_eager")
    text = buf.getvalue()
    # One recompile (the second call, size 5): later sizes hit the symbolic entry.
    assert text.count("recompiling") == 1, text
    assert "version 2" in text and "size()[0] == 3" in text, text


def test_no_grad_calls_of_a_symbolic_entry_run_without_autograd():
    strata.manual_seed(4)
    m = MLP(d=16).eval()
    f = strata.compile(lambda x: m(x).relu(), backend="aot_eager", dynamic=True)
    for n in BATCHES:
        x = strata.randn(n, 16)
        with strata.no_grad():
            out = f(x)
        assert not out.requires_grad
        close(out, m(x).relu().detach(), n, True)


def test_a_size_dependent_structure_falls_back_to_eager_autograd(monkeypatch):
    # A joint graph that cannot be made symbolic runs as the eager backend (correct at every size).
    from strata._dynamo import aot_dynamic

    def refuse(*a, **k):
        raise AOTUnsupported("refused by the test")
    monkeypatch.setattr(aot_dynamic, "_symbolize", refuse)
    strata.manual_seed(0)
    m = MLP(d=16).eval()
    es = sweep(m, mlp_step, _mlp_args, "aot_eager", exact=True)
    assert len(es) == 2 and es[1].dynamic
    assert not hasattr(es[1].run.__globals__["R"], "plan")


# ---- a write with grad into an input (Note [Writes with grad into inputs]) -------------------------------

@pytest.mark.parametrize("backend", ["eager"] + _backends())
def test_write_with_grad_into_an_input_gives_eager_gradients(backend):
    def add_into(buf, w):
        buf.add_(w * 2)
        return buf.sum()

    def mul_into(buf, w):
        buf.mul_(w)       # the backward needs buf's old value
        return (buf * 3).sum()

    def returns_buf(buf, w):
        buf.add_(w * w)
        return buf

    for fn in (add_into, mul_into, returns_buf):
        strata.compiler.reset()
        res = []
        for f in (fn, strata.compile(fn, backend=backend)):
            w = strata.tensor([1.0, 2.0, 3.0], requires_grad=True)
            buf = strata.ones(3)
            out = f(buf, w)
            (out * strata.tensor([1.0, 10.0, 100.0])).sum().backward()
            res.append((out.detach().clone(), w.grad.clone(), buf.detach().clone(), buf.requires_grad,
                        out is buf))
        (o1, g1, b1, r1, same1), (o2, g2, b2, r2, same2) = res
        assert strata.equal(o1, o2) and strata.equal(b1, b2), fn.__name__
        assert strata.equal(g1, g2), (fn.__name__, g1, g2)
        assert r1 == r2 and same1 == same2, fn.__name__


@pytest.mark.parametrize("backend", _backends())
def test_written_input_then_used_by_a_later_loss(backend):
    # buf's history after the compiled call is the copy's: a loss computed from it later reaches w.
    def f(buf, w):
        buf.add_(w.sin())
        return (buf * buf).sum()

    res = []
    for g in (f, strata.compile(f, backend=backend)):
        w = strata.tensor([0.5, -1.0, 2.0], requires_grad=True)
        buf = strata.ones(3)
        loss = g(buf, w) + (buf * 5).sum()
        loss.backward()
        res.append(w.grad.clone())
    assert strata.allclose(res[0], res[1], rtol=1e-6, atol=1e-7), res


def test_the_partition_refuses_a_backward_write_into_a_forward_tensor():
    # With functionalization off, the in-place write's derivative fills a zero buffer through a view: the
    # joint graph is refused (the eager backend runs it) rather than partitioned without that write.
    from strata._dynamo import aot, config

    def fn(buf, w):
        buf.add_(w * 2)
        return buf.sum()
    b = strata.zeros(3)
    w = strata.ones(3, requires_grad=True)
    graph = _captured(fn, b, w)
    joint = make_joint(graph)
    with pytest.raises(AOTUnsupported, match="writes into a tensor the forward side made"):
        aot.partition(joint)
    old = config.functionalize
    config.functionalize = False
    try:
        w = strata.ones(3, requires_grad=True)
        strata.compile(fn, backend="aot_eager")(strata.zeros(3), w).backward()
        assert w.grad.tolist() == [2.0, 2.0, 2.0]
    finally:
        config.functionalize = old


def _captured(fn, *args):
    seen = {}

    def backend(gm, examples):
        seen["graph"] = gm.graph
        return gm
    strata.compile(fn, backend=backend)(*args)
    strata.compiler.reset()
    return seen["graph"]


@pytest.mark.parametrize("backend", _backends())
def test_no_grad_graph_with_writes_is_functionalized_with_symbolic_sizes(backend):
    def f(x, buf):
        h = x * 2
        h[:, 0] = 1.0
        h.add_(1).relu_()
        buf.mul_(0.5).add_(h.sum(0))
        return h.sigmoid() * 3

    cf = strata.compile(f, backend=backend)
    for n in BATCHES:
        x = strata.randn(n, 4)
        b1, b2 = strata.ones(4), strata.ones(4)
        with strata.no_grad():
            ref, got = f(x, b1), cf(x, b2)
        close(got, ref, n, backend == "aot_eager")
        assert strata.equal(b1, b2), n
    es = entries(f)
    assert len(es) == 2 and es[1].dynamic
    run = es[1].run.__globals__["R"]
    ops = [nd.op for nd in run.graph.nodes]
    # h[:, 0] = 1.0 became a scatter into h's new value; the graph's only write is buf's, at its end.
    assert "select_scatter" in ops
    assert any(run.graph.value(v).kind == "int" for v in run.graph.inputs)


class _RowNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(16, 32)
        self.l2 = nn.Linear(32, 16)
        self.ln = nn.LayerNorm(16)

    def forward(self, x):
        h = F.gelu(self.l1(x)) * 1.5 + 0.25
        h = self.l2(h).tanh() * x.sigmoid()
        return self.ln(h + x).softmax(-1)


def _row_kernel_log(fn):
    buf = io.StringIO()
    old = set(logs._enabled)
    logs._enabled.add("output_code")
    try:
        with contextlib.redirect_stderr(buf):
            fn()
    finally:
        logs._enabled.clear()
        logs._enabled.update(old)
    return buf.getvalue()


@pytest.mark.skipif(not HAVE_CXX, reason="no C++ compiler")
def test_row_kernels_fuse_with_symbolic_outer_dims_in_training_and_inference():
    # Note [Row kernels with symbolic sizes]: layer_norm + softmax (+ the pointwise ops around them) over a
    # static row length with a symbolic batch are one row kernel behind a flat entry point, forward and
    # backward, and in calls without grad.
    strata.manual_seed(0)
    m = _RowNet()

    def step(model, x):
        return (model(x) * strata.arange(16.0)).sum()

    def train():
        sweep(m, step, lambda n: (strata.randn(n, 16),), "strata_cpp")
    text = _row_kernel_log(train)
    assert text.count("generated row kernel, any number of rows") >= 2, text[-2000:]
    plan = symbolic_plan(entries(step))
    assert plan.fwd.fallbacks == 0 and plan.bwd.fallbacks == 0 and plan.fwd.calls >= 3
    strata.compiler.reset()

    f = strata.compile(lambda x: m(x), backend="strata_cpp", dynamic=True)

    def infer():
        for n in BATCHES:
            x = strata.randn(n, 16)
            with strata.no_grad():
                close(f(x), m(x), n, False)
    text = _row_kernel_log(infer)
    assert "generated row kernel, any number of rows" in text


@pytest.mark.parametrize("backend", _backends())
def test_write_with_grad_into_an_input_with_symbolic_sizes(backend):
    def f(buf, w):
        buf.add_(w * 2)
        return (buf * buf).sum()

    cf = strata.compile(f, backend=backend)
    for n in BATCHES:
        res = []
        for g in (f, cf):
            strata.manual_seed(n)
            w = strata.randn(n, 4).requires_grad_(True)
            buf = strata.ones(n, 4)
            (g(buf, w) + buf.sum()).backward()
            res.append((w.grad.clone(), buf.detach().clone()))
        close(res[1][0], res[0][0], ("w.grad", n), False)
        assert strata.equal(res[1][1], res[0][1]), n
    es = entries(f)
    assert len(es) == 2 and es[1].dynamic
    symbolic_plan(es)


@pytest.mark.parametrize("backend", _backends())
def test_main_job_models_train_with_symbolic_batch(backend):
    # The char transformer (dropout, attention) and the digits CNN of examples/, training mode.
    import os
    import sys
    from test_compiled_models import load_example
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    sys.path.insert(0, os.path.join(root, "examples"))
    import train_digits
    charlm = load_example("train_charlm")
    strata.manual_seed(0)
    lm = charlm.build_model(strata, 20, 16, d_model=32, n_layers=2, n_heads=4, dropout=0.1).train()

    def lm_step(model, x, y):
        return F.cross_entropy(model(x).reshape(-1, 20), y.reshape(-1))
    es = sweep(lm, lm_step, lambda n: (strata.randint(0, 20, (n, 16)), strata.randint(0, 20, (n, 16))), backend,
               exact=backend == "aot_eager")
    assert len(es) == 2 and es[1].dynamic
    symbolic_plan(es)

    cnn = train_digits.build_model(strata).train()

    def cnn_step(model, x, y):
        return F.cross_entropy(model(x), y)
    es = sweep(cnn, cnn_step, lambda n: (strata.randn(n, 1, 8, 8), strata.randint(0, 10, (n,))), backend,
               exact=backend == "aot_eager")
    assert len(es) == 2 and es[1].dynamic
    symbolic_plan(es)


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("backend", ["eager"] + _backends())
def test_tensors_handed_on_at_a_graph_break_keep_their_history(backend, dynamic):
    # Note [Inputs returned by a compiled function]: the graph before the break returns h and w for the
    # rest of the frame, which writes into h in place; with aliases in their place h's history went stale
    # (x.grad and w.grad were wrong under aot_eager and strata_cpp).
    def f(h, w):
        y = (h * 2).sum() + w.exp().sum()
        h.mul_(w)
        return y + (h * h).sum()

    cf = strata.compile(f, backend=backend, dynamic=dynamic)
    for n in (3, 5, 8):
        res = []
        for g in (f, cf):
            strata.manual_seed(n)
            x = strata.randn(n, requires_grad=True)
            w = strata.randn(n, requires_grad=True)
            h = x * 1
            (g(h, w) + h.sum()).backward()
            res.append((x.grad.clone(), w.grad.clone(), h.detach().clone()))
        for a, b in zip(*res):
            close(b, a, (backend, n), False)
