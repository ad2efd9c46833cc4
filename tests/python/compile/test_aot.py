"""AOT autograd (strata._dynamo.aot) and the aot_eager backend: the joint graph, the min-cut
partition's decisions, CompiledFunction's corner cases, and training steps of an MLP, a conv
net and a transformer-ish block against eager with the same seed."""

import pytest

import strata
import strata.nn as nn
import strata.nn.functional as F
from strata._C import _compile
from strata._dynamo import aot

from test_compile import MLP



def capture(fn, *examples):
    """The captured graph of fn (inputs: the examples, with their requires_grad)."""
    g = _compile.Graph()
    args = []
    for i, a in enumerate(examples):
        m = strata.empty_strided(tuple(a.shape), a.stride(), dtype=a.dtype, device="meta")
        if a.requires_grad:
            m.requires_grad_(True)
        g.add_input(f"a{i}", m, device=a.device)
        args.append(m)
    with _compile.record(g):
        out = fn(*args)
    out = out if isinstance(out, tuple) else (out,)
    g.set_outputs([g.value_of(o) for o in out])
    return g


def leaves(*shapes, seed=0):
    strata.manual_seed(seed)
    return [strata.randn(*s, requires_grad=True) for s in shapes]


def grads_of(fn, args, outs_to_loss=lambda o: o[0].sum()):
    for a in args:
        a.grad = None
    out = fn(*args)
    out = out if isinstance(out, tuple) else (out,)
    outs_to_loss(out).backward()
    res = [a.grad for a in args]
    for a in args:
        a.grad = None
    return out, res


def check_same_grads(fn, args, tangent_seed=3):
    """Compiled (aot_compile of the captured graph) vs eager: outputs and input grads equal."""
    compiled = aot.aot_compile(capture(fn, *args))
    strata.manual_seed(tangent_seed)
    out_c, g_c = grads_of(compiled, args)
    strata.manual_seed(tangent_seed)
    out_e, g_e = grads_of(fn, args)
    for a, b in zip(out_c, out_e):
        assert strata.equal(a, b)
    for a, b in zip(g_c, g_e):
        assert (a is None) == (b is None)
        if a is not None:
            assert strata.equal(a, b), (a - b).abs().max()
    return compiled


def decision(fn, *args):
    return aot.partition(aot.make_joint(capture(fn, *args)))


# -- the joint graph ---------------------------------------------------------------------------

def test_joint_graph_records_derivatives_and_engine_ops():
    x, w = leaves((4, 3), (3, 5))
    j = aot.make_joint(capture(lambda x, w: (x @ w).relu().sin(), x, w))
    ops = [n.op for n in j.graph.nodes]
    # forward, then the derivatives of sin, relu and matmul as recorded ops
    assert ops[:3] == ["matmul", "relu", "sin"]
    assert "threshold_backward" in ops and "cos" in ops and ops.count("matmul") == 3
    assert j.num_primals == 2 and j.num_tangents == 1
    assert [j.graph.value(v).name for v in j.graph.inputs] == ["a0", "a1", "tangent_0"]
    assert len(j.graph.outputs) == 3  # sin, grad a0, grad a1
    # backward nodes run with grad mode off, forward nodes follow the caller
    assert all(n.grad_enabled for n in j.graph.nodes[:3])
    assert not any(n.grad_enabled for n in j.graph.nodes[3:])


def test_joint_graph_accumulates_and_sums_broadcast_gradients():
    # x is used twice (the engine adds the two gradients) and b is broadcast (sum_to).
    x, b = leaves((4, 3), (3,))
    j = aot.make_joint(capture(lambda x, b: x * x.exp() + b, x, b))
    ops = [n.op for n in j.graph.nodes]
    assert "add" in ops[3:]
    assert any(op.startswith("sum") for op in ops)
    check_same_grads(lambda x, b: x * x.exp() + b, [x, b])


def test_composite_ops_are_decomposed_in_the_joint_graph():
    # expand_as is a composite without a derivative: autograd records the expand it calls
    # (and saves nothing of its own), so the joint graph holds the expand, not expand_as.
    x, = leaves((4, 6))
    fn = lambda x: F.normalize(x) * F.silu(x)  # noqa: E731
    g = capture(fn, x)
    assert "expand_as" in [n.op for n in g.nodes]
    ops = [n.op for n in aot.make_joint(g).graph.nodes]
    assert "expand_as" not in ops and "expand" in ops
    check_same_grads(fn, [x])


def test_graph_extract_and_aot_alias_resolution():
    x, w = leaves((4, 3), (3, 5))
    g = capture(lambda x, w: ((x @ w).relu() + 1).sum(1), x, w)
    relu = g.nodes[1].outputs[0]
    # the tail of the graph as its own graph: relu's result becomes an input
    tail = g.extract([relu], [2, 3], [g.outputs[0]])
    assert [n.op for n in tail.nodes] == ["add", "sum"]
    assert [tail.value(v).name for v in tail.inputs] == ["relu"] and tail.value(tail.inputs[0]).is_input
    r = (x @ w).relu().detach()
    assert strata.equal(tail.run([r])[0], (r + 1).sum(1))
    with pytest.raises(RuntimeError, match="neither an input of the new graph nor made by a chosen node"):
        g.extract([], [1], [relu])
    # record(aot=True): an exact alias of a bound tensor made outside the dispatcher stands
    # for its value (autograd's saved outputs); plain recording refuses it
    j = _compile.Graph()
    m = strata.randn(3, device="meta")
    j.add_input("m", m)
    alias = m.detach()  # an alias made without the dispatcher
    with _compile.record(j, aot=True):
        y = alias * 2
    assert j.nodes[0].input_ids == [j.inputs[0]]
    j2 = _compile.Graph()
    j2.add_input("m", m)
    with _compile.record(j2), pytest.raises(RuntimeError, match="not part of the graph"):
        alias * 2
    assert y.shape == (3,)


# -- the partition -------------------------------------------------------------------------------

def test_partition_matmul_relu_sin_saves_one_intermediate():
    x, w = leaves((4, 3), (3, 5))
    p = decision(lambda x, w: (x @ w).relu().sin(), x, w)
    names = [s[0] for s in p.saved]
    inter = [n for n in names if n not in ("a0", "a1")]
    assert sorted(n for n in names if n in ("a0", "a1")) == ["a0", "a1"]
    assert len(inter) == 1 and inter[0] in ("matmul", "relu"), names
    assert p.saved_bytes == 4 * (12 + 15 + 20)
    # the baseline (what eager autograd keeps) saves the same amount here: relu's output
    full = aot.partition(aot.make_joint(capture(lambda x, w: (x @ w).relu().sin(), x, w)), recompute=False)
    assert sorted(s[0] for s in full.saved) == ["a0", "a1", "relu"]
    assert full.saved_bytes == p.saved_bytes
    # the matmul is never recomputed
    assert "matmul" not in p.recomputed


def test_partition_pointwise_chain_saves_only_the_input():
    x, = leaves((4, 3))
    fn = lambda x: x.sin().cos().exp()  # noqa: E731
    p = decision(fn, x)
    assert [s[0] for s in p.saved] == ["a0"]
    assert p.forward.num_ops == 3
    # eager keeps x (for sin), sin(x) (for cos) and the output exp(...) (for exp)
    full = aot.partition(p.joint, recompute=False)
    assert sorted(s[0] for s in full.saved) == ["a0", "exp", "sin"] and full.saved_bytes == 3 * p.saved_bytes
    assert "exp" in p.recomputed
    check_same_grads(fn, [x])


def test_partition_never_recomputes_reductions_or_random_ops():
    x, = leaves((5, 4))
    p = decision(lambda x: (x - x.mean(1, keepdim=True)).exp(), x)
    assert "mean.dim" not in p.recomputed and not any(op.startswith("mean") or op.startswith("sum")
                                                       for op in p.recomputed)
    strata.manual_seed(0)
    p = decision(lambda x: F.dropout(x, 0.5, training=True).sin(), x)
    assert not any(op.startswith("bernoulli") for op in p.recomputed)
    assert not any(n.op.startswith("bernoulli") for n in p.backward.nodes)
    assert any(n.op.startswith("bernoulli") for n in p.forward.nodes)


def test_dinic_min_cut_on_a_small_network():
    net = aot._FlowNetwork()
    s, a, b, t = (net.node() for _ in range(4))
    net.edge(s, a, 3)
    net.edge(s, b, 2)
    net.edge(a, b, 1)
    net.edge(a, t, 2)
    net.edge(b, t, 3)
    assert net.max_flow(s, t) == 5
    side = net.reachable(s)
    assert side[s] and not side[t]


# -- CompiledFunction ---------------------------------------------------------------------------

def test_compiled_function_grad_fn_and_inputs_without_grad():
    x, = leaves((4, 3))
    w = strata.randn(3, 2)  # does not require grad
    f = check_same_grads(lambda x, w: (x @ w).tanh(), [x, w])
    out = f(x, w)[0]
    assert "CompiledFunctionBackward" in repr(out.grad_fn)
    assert out.requires_grad


def test_non_differentiable_outputs_and_unused_inputs():
    x, y = leaves((4, 3), (4, 3))

    def fn(x, y):
        return x.sin(), x.argmax(1), (x > 0)

    f = aot.aot_compile(capture(fn, x, y))
    a, idx, mask = f(x, y)
    assert a.requires_grad and not idx.requires_grad and not mask.requires_grad
    assert strata.equal(idx, x.argmax(1)) and strata.equal(mask, x > 0)
    a.sum().backward()
    assert strata.equal(x.grad, x.detach().cos())
    assert y.grad is None  # not used: no gradient


def test_output_that_is_an_input():
    x, y = leaves((3,), (3,))

    def fn(x, y):
        return x, x * y

    f = aot.aot_compile(capture(fn, x, y))
    a, b = f(x, y)
    assert strata.equal(a, x)
    (a * 2 + b).sum().backward()
    assert strata.equal(x.grad, 2 + y.detach())
    assert strata.equal(y.grad, x.detach())


def test_grad_mode_off_runs_forward_only():
    x, = leaves((4,))
    f = aot.aot_compile(capture(lambda x: x.exp(), x))
    with strata.no_grad():
        out = f(x)[0]
    assert not out.requires_grad and out.grad_fn is None
    assert strata.equal(out, x.detach().exp())


def test_double_backward_raises():
    x, = leaves((4,))
    f = aot.aot_compile(capture(lambda x: x.exp() * x, x))
    y = f(x)[0].sum()
    (g,) = strata.autograd.grad(y, x, create_graph=False)
    assert strata.allclose(g, (x.detach().exp() * (x.detach() + 1)))
    y = f(x)[0].sum()
    with pytest.raises(RuntimeError, match="double backward"):
        strata.autograd.grad(y, x, create_graph=True)


def test_saved_input_modified_in_place_is_caught():
    x, = leaves((4,))
    w = strata.randn(4)
    f = aot.aot_compile(capture(lambda x, w: (x * w), x, w))
    out = f(x, w)[0]
    with strata.no_grad():
        w.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


@pytest.mark.parametrize("functionalize", [False, True])
def test_unsupported_graph_falls_back_to_the_plain_runner(functionalize, monkeypatch):
    from strata._dynamo import config
    monkeypatch.setattr(config, "functionalize", functionalize)
    x, = leaves((4, 4))
    # an in-place write on a tensor that requires grad whose derivative needs the old value:
    # autograd clones it outside the dispatcher, so the joint trace cannot see the clone. The
    # functionalized graph has mul in place of mul_, which traces.
    def fn(x):
        y = x * 1
        y.mul_(x)
        return y

    g = capture(fn, x)
    f = aot.aot_compile(g)
    assert hasattr(f, "plan") == functionalize
    out = f(x)[0]
    out.sum().backward()
    assert strata.allclose(x.grad, 2 * x.detach())


# -- strata.compile(backend="aot_eager") on models -------------------------------------------------

def train_step_grads(model, step, compiled, seed=5):
    model.zero_grad()
    fn = strata.compile(step, backend="aot_eager") if compiled else step
    strata.manual_seed(seed)
    loss = fn(model)
    loss.backward()
    return loss, {n: p.grad.clone() for n, p in model.named_parameters()}


def compare_training(model, step, exact=True):
    loss_e, ref = train_step_grads(model, step, False)
    loss_c, got = train_step_grads(model, step, True)
    assert strata.equal(loss_e, loss_c)
    for n in ref:
        if exact:
            assert strata.equal(got[n], ref[n]), (n, (got[n] - ref[n]).abs().max())
        else:
            assert strata.allclose(got[n], ref[n], rtol=1e-5, atol=1e-6), n
    return got


def compiled_plan(step):
    from strata._dynamo import eval_frame
    [st] = eval_frame.states_of(step.__code__)
    [entry] = st.entries
    return entry.run.__globals__["R"].plan


@pytest.mark.parametrize("mode", ["eval", "train"])
def test_mlp_training_step_matches_eager_bit_for_bit(mode):
    strata.manual_seed(0)
    m = MLP()
    getattr(m, mode)()
    x = strata.randn(6, 8)
    target = strata.randint(0, 2, (6,))

    def step(model):
        return F.cross_entropy(model(x), target)

    compare_training(m, step)
    p = compiled_plan(step).partition
    # dropout's mask is made in the forward and saved, never redrawn in the backward
    assert not any(n.op.startswith("bernoulli") for n in p.backward.nodes)
    assert any(n.op.startswith("bernoulli") for n in p.forward.nodes) == (mode == "train")
    # the min-cut keeps less than eager autograd does: the relu/add/gelu chain is recomputed
    full = aot.partition(p.joint, recompute=False)
    assert p.saved_bytes < full.saved_bytes and len(p.saved) < len(full.saved)
    assert "add" in p.recomputed  # residual adds; of equal-cost cuts the one nearest the backward (relu saved)
    assert not any(op.startswith(("linear", "matmul", "mm", "addmm")) for op in p.recomputed)


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4 * 4 * 4, 5)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn(self.conv(x))), 2)
        return self.fc(strata.flatten(x, 1))


def test_conv_net_batchnorm_train_matches_eager_and_updates_running_stats():
    strata.manual_seed(0)
    m = ConvNet().train()
    x = strata.randn(2, 3, 8, 8)
    target = strata.randint(0, 5, (2,))

    def step(model):
        return F.cross_entropy(model(x), target)

    before = m.bn.running_mean.clone()
    _, ref = train_step_grads(m, step, False)
    eager_stats = (m.bn.running_mean.clone(), m.bn.running_var.clone(), int(m.bn.num_batches_tracked))
    m.bn.reset_running_stats()
    _, got = train_step_grads(m, step, True)
    assert not strata.equal(before, eager_stats[0])
    assert strata.equal(m.bn.running_mean, eager_stats[0])
    assert strata.equal(m.bn.running_var, eager_stats[1])
    assert int(m.bn.num_batches_tracked) == eager_stats[2]
    for n in ref:
        assert strata.equal(got[n], ref[n]), (n, (got[n] - ref[n]).abs().max())
    p = compiled_plan(step).partition
    assert p.saved_bytes <= aot.partition(p.joint, recompute=False).saved_bytes
    assert not any(op.startswith(("conv", "batch_norm", "max_pool")) for op in p.recomputed)


class Block(nn.Module):
    def __init__(self, d=16, heads=2):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        h = self.heads
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        q = q.reshape(b, t, h, d // h).transpose(1, 2)
        k = k.reshape(b, t, h, d // h).transpose(1, 2)
        v = v.reshape(b, t, h, d // h).transpose(1, 2)
        att = F.softmax(q @ k.transpose(-2, -1) * (d // h) ** -0.5, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Transformer(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.blocks = nn.ModuleList([Block(d), Block(d)])
        self.out = nn.Linear(d, 7)

    def forward(self, x):
        for blk in self.blocks:
            x = blk(x)
        return self.out(x)


def test_transformer_block_matches_eager():
    strata.manual_seed(0)
    m = Transformer()
    x = strata.randn(2, 5, 16)
    target = strata.randint(0, 7, (10,))

    def step(model):
        return F.cross_entropy(model(x).reshape(10, 7), target)

    compare_training(m, step)
    p = compiled_plan(step).partition
    full = aot.partition(p.joint, recompute=False)
    assert p.saved_bytes < full.saved_bytes


def test_aot_eager_is_listed_and_grad_mode_off_call():
    assert "aot_eager" in strata._dynamo.backends.list_backends()
    lin = nn.Linear(3, 2)
    f = strata.compile(lambda x: lin(x).relu(), backend="aot_eager")
    x = strata.randn(4, 3)
    with strata.no_grad():
        out = f(x)
    assert not out.requires_grad
    assert strata.equal(out, lin(x).relu().detach())


def test_aot_log_prints_the_decision_and_fallbacks(capsys, monkeypatch):
    from strata._dynamo import config, logs
    # Without functionalization the in-place write below cannot be traced.
    monkeypatch.setattr(config, "functionalize", False)
    logs.set_logs(aot=True)
    try:
        x, = leaves((4, 3))
        aot.aot_compile(capture(lambda x: x.sin().cos().exp(), x))
        err = capsys.readouterr().err
        assert "[strata.compile:aot] joint graph of" in err and "saved 1 values, 48 bytes" in err

        def fn(x):
            y = x * 1
            y.mul_(x)
            return y

        aot.aot_compile(capture(fn, x))
        assert "runs as the eager backend" in capsys.readouterr().err
    finally:
        logs.set_logs(aot=False)
