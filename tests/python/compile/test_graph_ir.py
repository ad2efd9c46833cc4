"""strata._C._compile: recording strata calls on meta tensors into a graph, and
running the graph on real tensors with results bit-identical to eager."""

import pytest

import strata
import strata.nn.functional as F
from strata._C import _compile


def meta_like(t):
    m = strata.empty_strided(tuple(t.shape), t.stride(), dtype=t.dtype, device="meta")
    if t.requires_grad:
        m.requires_grad_(True)
    return m


def flatten(out):
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in flatten(o)]
    return [out]


def capture(fn, *examples, source=None):
    """Records fn over meta stand-ins of the examples; outputs are fn's results."""
    g = _compile.Graph()
    args = []
    for i, a in enumerate(examples):
        if isinstance(a, strata.Tensor):
            m = meta_like(a)
            g.add_input(f"a{i}", m, device=a.device)
            args.append(m)
        else:
            g.add_input(f"a{i}", a)
            args.append(a)
    with _compile.record(g):
        if source:
            _compile.set_source(source)
        out = fn(*args)
    g.set_outputs([g.value_of(o) for o in flatten(out)])
    return g


def same(a, b):
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    assert tuple(a.shape) == tuple(b.shape)
    assert a.device == b.device
    assert strata.equal(a, b), (a, b)


def check(fn, *examples):
    g = capture(fn, *examples)
    got = g.run(list(examples))
    ref = flatten(fn(*examples))
    assert len(got) == len(ref)
    for a, b in zip(got, ref):
        same(a, b)
    return g


def test_chain_matches_eager_and_metadata():
    x, w = strata.randn(4, 3), strata.randn(3, 5)
    g = check(lambda x, w: (x @ w).relu().sum(1), x, w)
    assert [n.op for n in g.nodes] == ["matmul", "relu", "sum"]
    assert g.num_ops == 3
    out = g.value(g.outputs[0])
    assert out.kind == "tensor" and out.dtype == strata.float32 and out.shape == (4,) and out.stride == (1,)
    assert g.value(g.inputs[0]).name == "a0"
    assert g.nodes[0].args[0] == g.value(g.inputs[0])


def test_runner_matches_run():
    x = strata.randn(4)
    g = capture(lambda x: ((x + 1) * x).relu(), x)
    r = g.runner()
    out = r(x)
    assert isinstance(out, tuple) and len(out) == 1
    same(out[0], ((x + 1) * x).relu())
    same(r(x)[0], g.run([x])[0])
    with pytest.raises(TypeError, match="takes 1 inputs"):
        r(x, x)


def test_functional_ops():
    x, w, b = strata.randn(2, 5, 8), strata.randn(6, 8), strata.randn(6)
    check(lambda x: F.layer_norm(x, (8,)), x)
    check(lambda x: F.softmax(x, dim=-1), x)
    check(lambda x, w, b: F.linear(x, w, b), x, w, b)
    check(lambda x: F.gelu(x) * F.silu(x), x)


def test_dropout_same_mask_with_seed():
    x = strata.randn(16, 16)
    strata.manual_seed(7)
    expected_next = strata.rand(3)
    strata.manual_seed(7)
    g = capture(lambda x: F.dropout(x, 0.5, training=True), x)
    # Random ops run on Meta while capturing and draw nothing from the generator.
    same(strata.rand(3), expected_next)
    assert any(n.op.startswith("bernoulli") for n in g.nodes)
    strata.manual_seed(123)
    got = g.run([x])[0]
    strata.manual_seed(123)
    ref = F.dropout(x, 0.5, training=True)
    same(got, ref)
    # Random nodes survive dead-code elimination even when unused.
    g.set_outputs([])
    assert g.eliminate_dead_code() == 1  # the final mul
    assert [n.op for n in g.nodes] == ["bernoulli.p", "div"]  # F.dropout draws with bernoulli.p (symbolic sizes)
    assert [n.has_side_effects for n in g.nodes] == [True, True]


def test_view_and_inplace_ssa():
    x = strata.randn(3, 4)

    def fn(x):
        x.view(-1).add_(1)
        return x * 2

    g = capture(fn, x)
    xr, xe = x.clone(), x.clone()
    got = g.run([xr])[0]
    same(got, fn(xe))
    same(xr, xe)  # the input was mutated as in eager code


def test_inplace_rebinds_tensor_to_new_value():
    x = strata.randn(3)
    g = _compile.Graph()
    m = meta_like(x)
    vx = g.add_input("x", m)
    with _compile.record(g):
        y = m * 1
        v0 = g.value_of(y)
        y.add_(1)
        v1 = g.value_of(y)
        z = y * 3
    assert v0 != v1
    assert v1 in g.nodes[1].outputs
    assert g.nodes[2].args[0] == g.value(v1)
    assert g.value_of(m) == vx
    g.set_outputs([g.value_of(z)])
    same(g.run([x])[0], (x * 1 + 1) * 3)


def test_wrapped_numbers_keep_promotion():
    xi = strata.arange(6).reshape(2, 3)  # int64
    g = check(lambda x: (x * 2, 2 ** x, x + 1.5, x / 2, x + True), xi)
    outs = [g.value(v) for v in g.outputs]
    assert [o.dtype for o in outs] == [strata.int64, strata.int64, strata.float32, strata.float32, strata.int64]
    mul = g.nodes[0]
    assert mul.args[1] == 2 and isinstance(mul.args[1], int)
    xh = strata.randn(3).to(strata.float16)
    check(lambda x: (x * 2.5, x + 1), xh)


def test_factory_ops_run_on_cpu():
    x = strata.randn(3)

    def fn(x):
        return x + strata.zeros(3), strata.arange(4), strata.ones(2, 2, dtype=strata.float64)

    g = capture(fn, x)
    assert g.value(g.outputs[1]).device == "cpu"
    outs = g.run([x])
    for o in outs:
        assert o.device.type == "cpu"
    same(outs[0], x)
    same(outs[1], strata.arange(4))
    same(outs[2], strata.ones(2, 2, dtype=strata.float64))


def test_graph_device_from_meta_device_argument():
    x = strata.randn(3)

    def fn(x):
        return x + strata.ones(3, device=x.device)

    g = capture(fn, x)
    node = next(n for n in g.nodes if n.op == "ones")
    assert isinstance(node.args[node.arg_names.index("device")], _compile.GraphDevice)
    assert "device=self.device" in str(g)
    out = g.run([x])[0]
    assert out.device.type == "cpu"
    same(out, x + 1)


def test_unbound_real_tensor_error():
    g = _compile.Graph()
    m = strata.randn(3, device="meta")
    g.add_input("x", m)
    c = strata.randn(3)
    with _compile.record(g):
        with pytest.raises(RuntimeError, match="op 'add.*received a tensor that is not part of the graph"):
            m + c
        n_before = g.num_ops
        # A constant bound with add_constant is fine and runs as that tensor.
        vc = g.add_constant(c, "c")
        y = m + c
    assert n_before == 0
    g.set_outputs([g.value_of(y)])
    x = strata.randn(3)
    same(g.run([x])[0], x + c)
    assert 'c: "f32[3]" = self.c' in str(g)


def test_error_in_op_leaves_graph_unchanged():
    g = _compile.Graph()
    a = strata.randn(3, 4, device="meta")
    b = strata.randn(5, 6, device="meta")
    g.add_input("a", a)
    g.add_input("b", b)
    with _compile.record(g):
        with pytest.raises(RuntimeError):
            a @ b
        assert g.num_ops == 0
        a.relu()
    assert g.num_ops == 1


def test_multi_output_ops():
    x = strata.randn(4, 5)
    g = check(lambda x: x.max(1), x)
    assert g.nodes[0].op == "max.dim" and len(g.nodes[0].outputs) == 2
    g = check(lambda x: x.sort(), x)
    g = check(lambda x: tuple(x.unbind(0)), x)
    assert len(g.nodes[-1].outputs) == 4
    check(lambda x: tuple(x.split(2, dim=1)), x)


def test_real_examples_are_replaced_by_meta_while_recording():
    x = strata.randn(4, 3)
    g = _compile.Graph()
    g.add_input("x", x)
    with _compile.record(g):
        y = x.exp()
        assert y.device.type == "meta"
    g.set_outputs([g.value_of(y)])
    assert g.value(g.outputs[0]).device == "cpu"
    same(g.run([x])[0], x.exp())


def test_print_readable():
    x, w = strata.randn(4, 3), strata.randn(3, 5)
    g = capture(lambda x, w: (x @ w).relu(), x, w, source="t.py:12 in fn: y = (x @ w).relu()")
    s = g.print_readable()
    assert s == str(g)
    assert s.startswith('def forward(self, a0: "f32[4, 3]", a1: "f32[3, 5]"):\n')
    assert "    # t.py:12 in fn: y = (x @ w).relu()\n" in s
    assert '    matmul: "f32[4, 5]" = strata.ops.matmul(a0, a1)\n' in s
    assert '    relu: "f32[4, 5]" = strata.ops.relu(matmul)\n' in s
    assert s.endswith("    return (relu,)\n")
    assert g.nodes[0].source == "t.py:12 in fn: y = (x @ w).relu()"
    g2 = capture(lambda x: (x.sum(1, keepdim=True) * 2, x.max(0)), x)
    s2 = str(g2)
    assert "strata.ops.sum(a0, [1], True)" in s2
    assert "mul(sum, 2)" in s2
    assert "max, max_1 = strata.ops.max.dim(a0, 0)  # f32[3], i64[3]" in s2


def test_eliminate_dead_code():
    x = strata.randn(4)

    def fn(x):
        a = x.exp()
        _unused = x.sin().cos()
        b = x.clone()
        b.add_(1)  # side effect on an unused result: kept
        return a

    g = capture(fn, x)
    n = g.num_ops
    removed = g.eliminate_dead_code()
    assert removed == 2
    assert g.num_ops == n - 2
    assert [nd.op for nd in g.nodes][0] == "exp"
    assert "sin" not in str(g)
    same(g.run([x])[0], x.exp())


def test_requires_grad_and_backward_match_eager():
    x = strata.randn(4, 3, requires_grad=True)
    w = strata.randn(3, 5, requires_grad=True)

    def fn(x, w):
        return F.softmax((x @ w).tanh(), dim=-1).sum(0) * 3

    g = capture(fn, x, w)
    assert g.value(g.outputs[0]).requires_grad
    assert g.value(g.inputs[0]).requires_grad
    out = g.run([x, w])[0]
    assert out.grad_fn is not None
    out.sum().backward()
    gx, gw = x.grad.clone(), w.grad.clone()
    x.grad = None
    w.grad = None
    fn(x, w).sum().backward()
    same(gx, x.grad)
    same(gw, w.grad)


def test_no_grad_inside_record():
    x = strata.randn(4, requires_grad=True)

    def fn(x):
        with strata.no_grad():
            y = x * 2
        return y, x * 3

    g = capture(fn, x)
    assert not g.value(g.outputs[0]).requires_grad
    assert g.value(g.outputs[1]).requires_grad
    assert [n.grad_enabled for n in g.nodes] == [False, True]
    y, z = g.run([x])
    assert y.grad_fn is None and not y.requires_grad
    assert z.grad_fn is not None


def test_scalar_inputs_constants_and_outputs():
    g = _compile.Graph()
    x = strata.randn(3, device="meta")
    vx = g.add_input("x", x)
    vn = g.add_input("n", 3)
    vc = g.add_constant(2.5, "scale")
    assert g.value(vn).kind == "int" and g.value(vc).kind == "float"
    g.set_outputs([vx, vn, vc, vx])
    xr = strata.randn(3)
    out = g.run([xr, 7])
    assert out[0] is out[3] and out[1] == 7 and out[2] == 2.5
    with pytest.raises(TypeError, match="input 1 .'n'. must be a int"):
        g.run([xr, xr])


def test_is_recording_and_nesting():
    assert not _compile.is_recording()
    g1, g2 = _compile.Graph(), _compile.Graph()
    a = strata.randn(2, device="meta")
    g1.add_input("a", a)
    g2.add_input("a", a)
    with _compile.record(g1):
        assert _compile.is_recording()
        a.exp()
        with _compile.record(g2):
            a.sin()
        a.cos()
    assert not _compile.is_recording()
    assert [n.op for n in g1.nodes] == ["exp", "cos"]
    assert [n.op for n in g2.nodes] == ["sin"]
    _compile.begin_record(g2)
    try:
        a.neg()
    finally:
        _compile.end_record()
    assert g2.num_ops == 2
    # Outside recording, meta ops run normally and record nothing.
    a.tan()
    assert g1.num_ops == 2


def test_composites_record_once():
    x = strata.randn(3, 4)
    g = capture(lambda x: F.layer_norm(x, (4,)), x)
    assert g.num_ops == 1 and g.nodes[0].op.startswith("layer_norm")


def test_names_are_identifiers_and_unique():
    g = _compile.Graph()
    a = g.add_input("x.y", strata.randn(2, device="meta"))
    b = g.add_input("x.y", strata.randn(2, device="meta"))
    c = g.add_input("self", strata.randn(2, device="meta"))
    assert [g.value(v).name for v in (a, b, c)] == ["x_y", "x_y_1", "self_"]


def test_indexing_and_setitem_literals_become_constants():
    x, i, y = strata.randn(4, 3), strata.tensor([3, 1]), strata.randn(3)

    def fn(x, i, y):
        c = x.clone()
        c[1] = y
        c[i] += 1
        c[:, [0, 2]] = 0.5
        return x[i], x[:, [0, 2]], c, x[None, ..., 1]

    g = check(fn, x, i, y)
    consts = [g.value(v) for v in g.constants]
    assert consts and all(c.name.startswith("_literal") for c in consts)
    assert consts[0].dtype == strata.int64 and consts[0].shape == (2,)


def test_views_and_shape_ops():
    x = strata.randn(4, 3)
    check(lambda x: (x.T, x.mT, x[0], x[:, 1:3], x.unsqueeze(0), x.reshape(-1), x.t().contiguous()), x)
    check(lambda x: (strata.cat([x, x], 0), strata.stack([x, x]), x.chunk(2, 1)[0], x[:1].expand(4, 3)), x)
    check(lambda x: (x.double(), x.to(strata.float16), -x, abs(x), x ** 2, 1 - x, 1 / x, x > 0), x)
    check(lambda x: (strata.where(x > 0, x, 0.0), x.masked_fill(x > 0, 0.0), x.new_zeros(2), strata.zeros_like(x)), x)


def test_outputs_that_are_inputs_keep_identity():
    x = strata.randn(3)

    def fn(x, y):
        x.add_(1)
        return x, y, x * 2

    g = capture(fn, x, x)
    a, b = x.clone(), x.clone()
    out = g.run([a, b])
    assert out[0] is a and out[1] is b and out[2] is not a
    out = g.runner()(a, b)
    assert out[0] is a and out[1] is b
    same(out[2], a * 2)
