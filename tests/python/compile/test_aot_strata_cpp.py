"""backend="strata_cpp" on training steps (AOT autograd, generated kernels in the forward and the
backward graph), kernel plans run from C++, memory plans and the compile modes. Everything is
compared with eager strata (and torch where a value of its own is checked)."""

import copy
import os
import sys

import pytest

import strata
import strata.nn as nn
import strata.nn.functional as F
from strata._dynamo import eval_frame
from strata._dynamo.backends import memory_plans
from strata._inductor import codecache

from test_aot import Transformer
from test_compile import MLP

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

try:
    codecache.compiler()
    HAVE_CXX = True
except Exception:  # noqa: BLE001
    HAVE_CXX = False
needs_cxx = pytest.mark.skipif(not HAVE_CXX, reason="no C++ compiler for generated kernels")


@pytest.fixture(autouse=True)
def _reset():
    strata.compiler.reset()
    yield
    strata.compiler.reset()


def entry_runner(fn):
    """The backend callable of fn's only compiled entry."""
    [st] = [st for st in eval_frame.states_of(fn.__code__) if st.entries]
    [entry] = st.entries
    return entry.run.__globals__["R"]


def grads(model, fn, *args, seed=5):
    model.zero_grad()
    strata.manual_seed(seed)
    loss = fn(model, *args)
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def check_training(model, step, *args, exact=False, mode=None, calls=2):
    loss_e, ref = grads(model, step, *args)
    f = strata.compile(step, backend="strata_cpp", mode=mode)
    for _ in range(calls):
        loss_c, got = grads(model, f, *args)
        assert set(got) == set(ref)
        if exact:
            assert strata.equal(loss_c, loss_e)
        else:
            assert strata.allclose(loss_c, loss_e, rtol=1e-5, atol=1e-6), (loss_c, loss_e)
        for n in ref:
            if exact:
                assert strata.equal(got[n], ref[n]), (n, (got[n] - ref[n]).abs().max())
            else:
                assert strata.allclose(got[n], ref[n], rtol=1e-4, atol=1e-6), (n, (got[n] - ref[n]).abs().max())
    return entry_runner(step)


@needs_cxx
@pytest.mark.parametrize("mode", ["eval", "train"])
def test_mlp_training_step_fuses_forward_and_backward(mode):
    strata.manual_seed(0)
    m = getattr(MLP(d=32), mode)()
    x, t = strata.randn(16, 32), strata.randint(0, 2, (16,))

    def step(model, x, t):
        return F.cross_entropy(model(x), t)

    run = check_training(m, step, x, t, exact=True)
    plan = run.plan
    # Both halves of the step are kernel plans; the backward's one fused group (the recomputed
    # relu/add chain, seven outputs at once) would raise its peak, so it runs node by node.
    assert plan.fwd.num_kernels >= 1
    assert plan.bwd.num_kernels + plan.bwd.memory_plan.dropped_kernels >= 1
    which = [w for w, _ in memory_plans(run)]
    assert "forward" in which and "backward" in which


@needs_cxx
def test_pointwise_backward_is_fused():
    strata.manual_seed(8)
    w = strata.randn(64, 48, requires_grad=True)
    b = strata.randn(48, requires_grad=True)

    def step(x):
        h = (x @ w + b).tanh() * 2 + 1
        return (h.sigmoid() * h - h.exp() * 0.1).sum()

    x = strata.randn(32, 64, requires_grad=True)
    ref = strata.autograd.grad(step(x), [x, w, b])
    f = strata.compile(step, backend="strata_cpp")
    got = strata.autograd.grad(f(x), [x, w, b])
    for r, g in zip(ref, got):
        assert strata.allclose(r, g, rtol=1e-5, atol=1e-5)
    plan = entry_runner(step).plan
    assert plan.fwd.num_kernels >= 1 and plan.bwd.num_kernels >= 1
    mp = plan.bwd.memory_plan
    assert mp.peak_bytes <= mp.node_by_node_peak


@needs_cxx
def test_transformer_training_matches_eager_and_fuses_the_backward():
    strata.manual_seed(1)
    m = Transformer(d=32)
    x, t = strata.randn(2, 8, 32), strata.randint(0, 7, (16,))

    def step(model, x, t):
        return F.cross_entropy(model(x).reshape(-1, 7), t)

    run = check_training(m, step, x, t)
    assert run.plan.fwd.num_kernels >= 2 and run.plan.bwd.num_kernels >= 1


@needs_cxx
def test_inputs_without_grad_and_no_grad_calls_run_fused_inference():
    strata.manual_seed(2)
    m = MLP(d=16).eval()
    x = strata.randn(8, 16)

    def fwd(model, x):
        return F.gelu(model(x)) * 2 + 1

    ref = fwd(m, x)
    f = strata.compile(fwd, backend="strata_cpp")
    with strata.no_grad():
        got = f(m, x)
        got2 = f(m, x)
    assert strata.allclose(got, ref.detach(), rtol=1e-6, atol=1e-6) and strata.equal(got, got2)
    assert not got.requires_grad
    # The same function with grad on (parameters require grad) trains through AOT.
    out = f(m, x)
    assert out.requires_grad and out.grad_fn is not None
    out.sum().backward()
    assert all(p.grad is not None for p in m.parameters())
    # Plain tensors only: one kernel plan, no AOT.
    strata.compiler.reset()

    def chain(a, b):
        return (a * b + 1).relu() - a.sigmoid()

    a, b = strata.randn(64, 33), strata.randn(64, 33)
    g = strata.compile(chain, backend="strata_cpp")
    assert strata.allclose(g(a, b), chain(a, b))
    r = entry_runner(chain)
    assert type(r).__name__ == "GraphRunner" and r.num_kernels == 1


@needs_cxx
def test_main_job_models_train_like_eager():
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import train_charlm
    import train_digits

    strata.manual_seed(0)
    digits = train_digits.build_model(strata).train()
    xd, yd = strata.randn(8, 1, 8, 8), strata.randint(0, 10, (8,))
    charlm = train_charlm.build_model(strata, vocab_size=20, block=16, d_model=32, n_layers=2, n_heads=4,
                                      dropout=0.1).train()
    xc, yc = strata.randint(0, 20, (4, 16)), strata.randint(0, 20, (4, 16))

    def digits_loss(model, x, y):
        return F.cross_entropy(model(x), y)

    def charlm_loss(model, x, y):
        return train_charlm.lm_loss(F, model(x), y)

    for model, loss, x, y in ((digits, digits_loss, xd, yd), (charlm, charlm_loss, xc, yc)):
        run = check_training(model, loss, x, y)
        if model is charlm:  # (the CNN's pointwise ops are single relus and dropout: nothing to fuse)
            assert run.plan.fwd.num_kernels + run.plan.bwd.num_kernels >= 1
        # A few AdamW steps, compiled and eager from the same start, stay together.
        twin = copy.deepcopy(model)
        f = strata.compile(loss, backend="strata_cpp")
        opts = [strata.optim.AdamW(mm.parameters(), lr=1e-3) for mm in (model, twin)]
        for i in range(3):
            losses = []
            for mm, opt, fn in ((model, opts[0], f), (twin, opts[1], loss)):
                opt.zero_grad()
                strata.manual_seed(10 + i)
                lv = fn(mm, x, y)
                lv.backward()
                opt.step()
                losses.append(lv.detach())
            assert strata.allclose(losses[0], losses[1], rtol=1e-4, atol=1e-5), losses
        for (n, p), q in zip(model.named_parameters(), twin.parameters()):
            assert strata.allclose(p, q, rtol=1e-4, atol=1e-5), n
        strata.compiler.reset()


@needs_cxx
def test_reduce_overhead_keeps_the_arena_and_outputs_stay_fresh():
    strata.manual_seed(3)
    w1, w2 = strata.randn(32, 32), strata.randn(32, 32)

    def f(x):
        h = (x * 2 + 1).tanh()
        h = (h @ w1).relu() * 3 - 1
        h = (h @ w2).sigmoid() + h.abs()
        return h * 0.5

    c = strata.compile(f, backend="strata_cpp", mode="reduce-overhead")
    xs = [strata.randn(16, 32) for _ in range(3)]
    outs = [c(x) for x in xs]
    r = entry_runner(f)
    assert r.keeps_arena and r.num_kernels >= 2
    assert r.arena_bytes > 0 and r.arena_allocated == r.arena_bytes
    assert r.calls == 3 and r.fallbacks == 0
    # Later calls neither reallocate the arena nor overwrite earlier results.
    for x, o in zip(xs, outs):
        assert strata.allclose(o, f(x), rtol=1e-6, atol=1e-6)
    assert len({o.data_ptr() for o in outs}) == 3


@needs_cxx
def test_memory_plan_reuses_arena_slots_and_explain_reports_it(monkeypatch):
    # with reinplacing each kernel output would take its dying input's storage instead of an arena slot
    from strata._dynamo import config
    monkeypatch.setattr(config, "reinplace", False)
    strata.manual_seed(4)
    ws = [strata.randn(64, 64) for _ in range(4)]

    def f(x):
        for w in ws:
            x = ((x * 1.5).tanh() + 1) @ w
        return x

    x = strata.randn(32, 64)
    c = strata.compile(f, backend="strata_cpp")
    assert strata.allclose(c(x), f(x), rtol=1e-5, atol=1e-5)
    mp = entry_runner(f).memory_plan
    # four kernel outputs, each dead after its matmul: fewer arena bytes than one buffer each
    assert mp.arena_values == 4 and mp.arena_bytes < mp.arena_unplanned_bytes
    assert mp.arena_bytes >= 32 * 64 * 4 and mp.peak_bytes >= mp.arena_bytes
    strata.compiler.reset()
    out = strata.compiler.explain(strata.compile(f, backend="strata_cpp"))(x)
    text = str(out)
    assert out.graph_count == 1
    if out.memory_plans[0]:  # explain compiles with the default backend
        assert "Memory Plans:" in text and out.peak_bytes[0] > 0


@needs_cxx
def test_kernel_step_falls_back_to_its_nodes_for_other_inputs():
    def f(a, b):
        return (a * b + 1).relu() - a.sigmoid()

    a, b = strata.randn(8, 8), strata.randn(8, 8)
    c = strata.compile(f, backend="strata_cpp")
    c(a, b)
    r = entry_runner(f)
    assert r.num_kernels == 1 and r.fallbacks == 0
    # Called directly (no guards) with a transposed input and with another size: the kernel step
    # runs its nodes instead and gives eager's result.
    at = strata.randn(8, 8).t()
    [got] = r(at, b)
    assert strata.allclose(got, f(at, b)) and r.fallbacks == 1
    a3, b3 = strata.randn(3, 5), strata.randn(3, 5)
    [got] = r(a3, b3)
    assert got.shape == (3, 5) and strata.allclose(got, f(a3, b3)) and r.fallbacks == 2


@needs_cxx
def test_training_step_peak_memory_is_not_above_eager():
    from strata import _C
    strata.manual_seed(5)
    m = MLP(d=256).train()
    x, t = strata.randn(512, 256), strata.randint(0, 2, (512,))

    def step(model, x, t):
        return F.cross_entropy(model(x), t)

    def peak(fn):
        m.zero_grad(set_to_none=True)
        _C._reset_peak_memory_stats()
        base = _C._cpu_allocator_stats()["allocated_bytes"]
        fn(m, x, t).backward()
        return _C._cpu_allocator_stats()["peak_bytes"] - base

    c = strata.compile(step, backend="strata_cpp")
    peak(c)
    eager, compiled = peak(step), peak(c)
    assert compiled <= eager, (compiled, eager)


def _step_peak(fn, model, *args):
    """Bytes allocated at the peak of one forward + backward above what was held before it (the CPU
    allocator's own counters: deterministic, unlike timings)."""
    from strata import _C
    model.zero_grad(set_to_none=True)
    _C._reset_peak_memory_stats()
    base = _C._cpu_allocator_stats()["allocated_bytes"]
    fn(model, *args).backward()
    return _C._cpu_allocator_stats()["peak_bytes"] - base


def _mlp_case():
    m = MLP(d=256).train()
    x, t = strata.randn(512, 256), strata.randint(0, 2, (512,))
    return m, (x, t), lambda model, x, t: F.cross_entropy(model(x), t)


def _transformer_case():
    m = Transformer(d=64)
    x, t = strata.randn(4, 32, 64), strata.randint(0, 7, (128,))
    return m, (x, t), lambda model, x, t: F.cross_entropy(model(x).reshape(-1, 7), t)


def _digits_cnn_case():
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import train_digits
    m = train_digits.build_model(strata).train()
    x, t = strata.randn(64, 1, 8, 8), strata.randint(0, 10, (64,))
    return m, (x, t), lambda model, x, t: F.cross_entropy(model(x), t)


@needs_cxx
@pytest.mark.parametrize("case", [_mlp_case, _transformer_case, _digits_cnn_case], ids=["mlp", "transformer", "cnn"])
def test_fused_training_step_peak_is_not_above_aot_eager(case):
    # Kernels hold their inputs until they end and make their outputs at once, and the schedule moves
    # nodes; none of that may raise the peak above the same partition run node by node (aot_eager).
    # Two blocks' recomputed GELUs fused horizontally once held a block's activation through the
    # other block's backward (Note [Horizontal joins hold memory] in fusion.py); in the CNN's backward
    # two muls of one value in one kernel made both results at once (+32 KB): the kernel is left out and
    # its nodes sink back to their readers (_choose_kernels, _sink in backends.py).
    strata.manual_seed(5)
    m, args, loss = case()

    def step(model, x, t):
        return loss(model, x, t)

    peaks = {}
    for backend in ("aot_eager", "strata_cpp"):
        strata.compiler.reset()
        c = strata.compile(step, backend=backend)
        _step_peak(c, m, *args)
        peaks[backend] = _step_peak(c, m, *args)
    eager = _step_peak(step, m, *args)
    assert peaks["strata_cpp"] <= peaks["aot_eager"] + 1024, peaks
    assert peaks["strata_cpp"] <= eager, (peaks, eager)


def test_attention_meta_layout_matches_cpu_so_heads_are_not_copied():
    # scaled_dot_product_attention's CPU kernels write their results in the query's layout; Meta gives the
    # same strides (the fused backward's gradients too), so a captured "heads back to [B, T, C]" transpose +
    # reshape is a view, not a copy, in the forward and the backward graph.
    b, t, h, d = 2, 8, 4, 8
    q = strata.randn(b, t, h * d).view(b, t, h, d).transpose(1, 2)
    for dev in ("cpu", "meta"):
        x = strata.empty(b, t, h * d, device=dev).view(b, t, h, d).transpose(1, 2) if dev == "meta" else q
        out = F.scaled_dot_product_attention(x, x, x, is_causal=True)
        assert out.stride() == q.stride(), (dev, out.stride())

    lq, lk, lv = (nn.Linear(h * d, h * d) for _ in range(3))

    def step(x):
        def heads(t_):
            return t_.view(b, t, h, d).transpose(1, 2)
        y = F.scaled_dot_product_attention(heads(lq(x)), heads(lk(x)), heads(lv(x)), is_causal=True)
        return y.transpose(1, 2).reshape(b, t, h * d).square().sum()

    x = strata.randn(b, t, h * d, requires_grad=True)
    params = [x, lq.weight, lk.weight, lv.weight]
    ref = strata.autograd.grad(step(x), params)
    f = strata.compile(step, backend="aot_eager")
    got = strata.autograd.grad(f(x), params)
    for r, g in zip(ref, got):
        assert strata.allclose(r, g, rtol=1e-5, atol=1e-6)
    part = entry_runner(step).plan.partition
    assert [n.op for n in part.forward.nodes + part.backward.nodes].count("clone") == 0


@needs_cxx
def test_dynamic_batch_inference_and_training():
    strata.manual_seed(6)
    m = MLP(d=16).eval()

    def fwd(model, x):
        return (model(x) * 2).tanh()

    c = strata.compile(fwd, backend="strata_cpp", dynamic=True)
    for n in (4, 7, 12):
        x = strata.randn(n, 16)
        with strata.no_grad():
            assert strata.allclose(c(m, x), fwd(m, x), rtol=1e-6, atol=1e-6)
        # with grad: eager autograd through the replayed graph
        m.zero_grad()
        c(m, x).sum().backward()
        got = {k: p.grad.clone() for k, p in m.named_parameters()}
        m.zero_grad()
        fwd(m, x).sum().backward()
        for k, p in m.named_parameters():
            assert strata.allclose(got[k], p.grad, rtol=1e-5, atol=1e-6), k


def test_modes_are_accepted_and_an_unknown_mode_raises():
    def f(x):
        return x.sin() * 2 + x.cos()

    x = strata.randn(5)
    for mode in ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"):
        strata.compiler.reset()
        assert strata.allclose(strata.compile(f, backend="strata_cpp", mode=mode)(x), f(x))
    strata.compiler.reset()
    with pytest.raises(ValueError, match="unknown mode 'fastest'"):
        strata.compile(f, backend="strata_cpp", mode="fastest")(x)


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(12, 24)
        self.ln = nn.LayerNorm(24)
        self.b = nn.Linear(24, 3)

    def forward(self, x):
        h = F.silu(self.ln(self.a(x)))
        return self.b(h * h.sigmoid() + 0.5)


@needs_cxx
def test_compiled_module_trains_like_torch():
    torch = pytest.importorskip("torch")
    strata.manual_seed(7)
    m = _Net()
    tm = torch.nn.Module()
    tm.a, tm.ln, tm.b = torch.nn.Linear(12, 24), torch.nn.LayerNorm(24), torch.nn.Linear(24, 3)
    with torch.no_grad():
        for (n, p) in m.named_parameters():
            dict(tm.named_parameters())[n].copy_(torch.from_numpy(p.detach().numpy()))
    x = strata.randn(10, 12)
    tx = torch.from_numpy(x.numpy())
    cm = strata.compile(m, backend="strata_cpp")
    cm(x).square().mean().backward()
    th = torch.nn.functional.silu(tm.ln(tm.a(tx)))
    tm.b(th * th.sigmoid() + 0.5).square().mean().backward()
    for n, p in m.named_parameters():
        tg = dict(tm.named_parameters())[n].grad.numpy()
        assert abs(p.grad.numpy() - tg).max() < 1e-5, n


@needs_cxx
def test_retain_graph_keeps_saved_values_and_a_second_backward_without_it_raises():
    strata.manual_seed(9)
    w = strata.randn(8, 8, requires_grad=True)

    def f(x):
        return ((x @ w).tanh() * 3 + 1).sigmoid().sum()

    x = strata.randn(4, 8)
    ref = f(x)
    ref.backward(retain_graph=True)
    ref.backward()
    expected = w.grad.clone()
    w.grad = None
    c = strata.compile(f, backend="strata_cpp")
    y = c(x)
    y.backward(retain_graph=True)   # saved values stay with the graph
    y.backward()                    # and this one frees them as it goes
    assert strata.allclose(w.grad, expected, rtol=1e-5, atol=1e-6)
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()
