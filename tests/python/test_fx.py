"""strata.fx (docs/FX.md): symbolic tracing of the whole-script models and of small modules, compared with
the original module's outputs and with torch.fx's graph of the same model written for torch (ops and
targets by name); the standard graph transforms (add -> mul, inserting nodes, conv-bn fusion,
replace_pattern, ShapeProp, Transformer); the Graph API's checks; TraceError for data-dependent control
flow; GraphModule copies, pickles, state dicts, strata.compile and the torch alias."""

import copy
import operator
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

import strata
import strata.nn as nn
import strata.nn.functional as F
from strata import fx
from strata.fx.passes.shape_prop import ShapeProp
from strata.nn.functional import relu as _imported_relu  # bound in this module's globals

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.join(HERE, "scripts")
PYTHON_DIR = os.path.abspath(os.path.join(HERE, "..", "..", "python"))


def load_script(script, framework):
    """The script's module namespace with ``torch`` bound to strata (or to torch), main() not run."""
    with open(os.path.join(SCRIPTS, script)) as f:
        src = f.read()
    if framework == "strata":
        src = (src.replace("import torch.nn.functional as F", "import strata.nn.functional as F")
               .replace("import torch.nn as nn", "import strata.nn as nn")
               .replace("from torch.utils.data import", "from strata.utils.data import")
               .replace("import torch\n", "import strata as torch\n"))
    ns = {"__name__": f"fx_{framework}_{script[:-3]}"}
    exec(compile(src, os.path.join(SCRIPTS, script), "exec"), ns)
    return ns


def structure(gm):
    """(op, target by name) per node: call_function targets by their __name__, the rest as strings."""
    out = []
    for n in gm.graph.nodes:
        t = n.target
        if n.op == "call_function":
            t = getattr(t, "__name__", str(t))
        out.append((n.op, t))
    return out


def close(a, b, tol=1e-5):
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            close(x, y, tol)
        return
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=tol, atol=tol)


def copy_weights(src_torch, dst_strata):
    sd = {k: strata.tensor(v.detach().numpy()) for k, v in src_torch.state_dict().items()}
    dst_strata.load_state_dict(sd)


SCRIPT_MODELS = [
    ("train_resnet.py", "ResNet", (), lambda t: t.randn(2, 3, 16, 16)),
    ("unet.py", "UNet", (), lambda t: t.randn(1, 1, 16, 16)),
]


@pytest.mark.parametrize("script,cls,args,make_input", SCRIPT_MODELS)
def test_script_models_trace_like_torch(script, cls, args, make_input):
    torch = pytest.importorskip("torch")
    import torch.fx
    ns_s, ns_t = load_script(script, "strata"), load_script(script, "torch")
    ms, mt = ns_s[cls](*args).eval(), ns_t[cls](*args).eval()
    gs, gt = fx.symbolic_trace(ms), torch.fx.symbolic_trace(mt)
    assert structure(gs) == structure(gt)
    assert [n.name for n in gs.graph.nodes] == [n.name for n in gt.graph.nodes]
    copy_weights(mt, ms)
    x = make_input(strata)
    close(gs(x), ms(x))
    close(gs(x), gt(torch.from_numpy(x.numpy())), 1e-4)
    assert set(gs.state_dict()) == set(ms.state_dict())


def test_lstm_script_traces_like_torch():
    torch = pytest.importorskip("torch")
    import torch.fx
    ns_s, ns_t = load_script("lstm_lm.py", "strata"), load_script("lstm_lm.py", "torch")
    ms, mt = ns_s["RNNModel"](40).eval(), ns_t["RNNModel"](40).eval()
    gs, gt = fx.symbolic_trace(ms), torch.fx.symbolic_trace(mt)
    assert structure(gs) == structure(gt)
    inp = strata.randint(0, 40, (5, 2))
    hidden = ms.init_hidden(2)
    close(gs(inp, hidden), ms(inp, hidden))


def test_attention_script_traces():
    # torch.fx cannot trace this block (torch.ones(t, t) with traced sizes fails in torch's argument parser);
    # strata.fx records strata.ones as a call_function and the GraphModule computes the same values.
    ns = load_script("einsum_attention.py", "strata")
    m = ns["Block"](32, 4).eval()
    gm = fx.symbolic_trace(m)
    x = strata.randn(2, 5, 32)
    close(gm(x), m(x))
    s = structure(gm)
    assert s.count(("call_function", "einsum")) == 2
    assert ("call_function", "ones") in s and ("call_method", "masked_fill") in s
    assert [t for op, t in s if op == "call_module"] == ["ln1", "attn.to_qkv", "attn.proj", "ln2", "mlp.0", "mlp.1",
                                                         "mlp.2"]
    x2 = strata.randn(3, 7, 32)  # sizes are read from the input at run time, not baked in
    close(gm(x2), m(x2))


def _mlp_pair():
    torch = pytest.importorskip("torch")

    def build(t):
        class MLP(t.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc1 = t.nn.Linear(8, 16)
                self.fc2 = t.nn.Linear(16, 4)
                self.scale = t.nn.Parameter(t.ones(4))
                self.register_buffer("shift", t.full((4,), 0.5))

            def forward(self, x):
                h = t.nn.functional.gelu(self.fc1(x))
                h = t.nn.functional.dropout(h, 0.0, self.training)
                y = self.fc2(h).tanh() * self.scale + self.shift
                return t.softmax(y.view(y.size(0), -1), dim=-1), h.mean()
        return MLP().eval()
    return build(strata), build(torch), torch


def test_mlp_matches_torch_fx():
    ms, mt, torch = _mlp_pair()
    import torch.fx
    gs, gt = fx.symbolic_trace(ms), torch.fx.symbolic_trace(mt)
    assert structure(gs) == structure(gt)
    # torch.fx's printing, line for line, except where the two frameworks' functions differ (torch's gelu is
    # torch._C._nn.gelu, its F.dropout call is recorded with its defaults spelled out)
    ls, lt = str(gs.graph).splitlines(), str(gt.graph).splitlines()
    assert len(ls) == len(lt)
    for a, b in zip(ls, lt):
        if "call_function" not in a:
            assert a.replace("strata", "torch") == b
    copy_weights(mt, ms)
    x = strata.randn(3, 8)
    close(gs(x), ms(x))
    close(gs(x), gt(torch.from_numpy(x.numpy())), 1e-4)


def test_code_and_printing():
    ms, _, _ = _mlp_pair()
    gm = fx.symbolic_trace(ms)
    code = gm.code
    assert code.startswith("def forward(self, x):")
    assert "fc1 = self.fc1(x);  x = None" in code
    assert "strata.nn.functional.gelu(fc1)" in code
    assert "mul = tanh * scale" in code
    assert "return (softmax, mean)" in code
    table = gm.graph.print_tabular(print_output=False)
    assert table.splitlines()[0].split() == ["opcode", "name", "target", "args", "kwargs"]
    assert "call_module    fc1" in table
    readable = gm.print_readable(print_output=False)
    assert readable.startswith("class MLP(strata.nn.Module):") and "def forward(self, x):" in readable
    assert type(gm).__name__ == "MLP" and isinstance(gm, nn.Module) and isinstance(gm, fx.GraphModule)


def test_state_dict_round_trip_and_copies():
    ms, _, _ = _mlp_pair()
    gm = fx.symbolic_trace(ms)
    assert list(gm.state_dict()) == ["scale", "shift", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert gm.fc1.weight is ms.fc1.weight  # shared, as torch's GraphModule shares with its root
    x = strata.randn(2, 8)
    other = fx.symbolic_trace(_mlp_pair()[0])
    other.load_state_dict(gm.state_dict())
    close(other(x), gm(x))
    dc = copy.deepcopy(gm)
    assert dc.fc1.weight is not gm.fc1.weight and dc.code == gm.code
    close(dc(x), gm(x))
    pk = pickle.loads(pickle.dumps(gm))
    assert pk.code == gm.code and type(pk).__name__ == "MLP"
    close(pk(x), gm(x))
    # recompiling one GraphModule leaves its copies alone
    for n in dc.graph.nodes:
        if n.op == "call_method" and n.target == "tanh":
            n.target = "sigmoid"
    dc.recompile()
    assert "sigmoid" in dc.code and "sigmoid" not in gm.code


def test_swap_add_for_mul():
    class M(nn.Module):
        def forward(self, x, y):
            return strata.add(x, y) + y, x - y

    gm = fx.symbolic_trace(M())
    for n in gm.graph.nodes:
        if n.op == "call_function":
            if n.target is operator.add:
                n.target = operator.mul
            elif n.target is strata.add:
                n.target = strata.mul
    gm.graph.lint()
    gm.recompile()
    x, y = strata.randn(4), strata.randn(4)
    a, b = gm(x, y)
    close(a, x * y * y)
    close(b, x - y)
    assert "add = strata.mul(x, y)" in gm.code and "add_1 = add * y" in gm.code  # names stay, as in torch.fx


def test_insert_and_erase_nodes():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x):
            return self.lin(x).neg()

    gm = fx.symbolic_trace(M())
    g = gm.graph
    lin = next(n for n in g.nodes if n.op == "call_module")
    with g.inserting_after(lin):
        r = g.call_function(strata.relu, (lin,))
    lin.replace_all_uses_with(r, delete_user_cb=lambda u: u is not r)
    assert r.args == (lin,) and list(lin.users) == [r]
    gm.recompile()
    x = strata.randn(3, 4)
    close(gm(x), -strata.relu(gm.lin(x)))
    # an unused node goes with eliminate_dead_code; a used one cannot be erased
    with g.inserting_before(r):
        dead = g.call_method("sum", (lin,))
    assert dead.prev is lin and dead.next is r
    with pytest.raises(RuntimeError, match="still had 2 users"):
        g.erase_node(lin)
    assert g.eliminate_dead_code() and dead not in list(g.nodes)
    assert not g.eliminate_dead_code()
    g.lint()


def test_graph_built_by_hand_and_appending_tracer():
    g = fx.Graph()
    x = g.placeholder("x")
    w = g.placeholder("w", default_value=2.0)
    p = fx.Proxy(x, fx.proxy.GraphAppendingTracer(g))
    q = (p * fx.Proxy(w) + 1).relu().sum(dim=0)
    g.output(q.node)
    gm = fx.GraphModule(nn.Module(), g)
    t = strata.randn(3, 2)
    close(gm(t), (t * 2.0 + 1).relu().sum(dim=0))
    close(gm(t, 3.0), (t * 3.0 + 1).relu().sum(dim=0))
    assert "def forward(self, x, w = 2.0):" in gm.code
    # map_arg / map_aggregate
    a = (x, [w, 3], {"k": x}, slice(None, x))
    assert fx.map_arg(a, lambda n: n.name) == ("x", ["w", 3], {"k": "x"}, slice(None, "x"))
    assert fx.node.map_aggregate([1, (2, 3)], lambda v: v * 10) == [10, (20, 30)]
    assert x.users == {g.find_nodes(op="call_function", target=operator.mul)[0]: None}
    s = g.find_nodes(op="call_method", target="sum")[0]
    with pytest.raises(NotImplementedError, match="does not support mutation"):
        s.kwargs["dim"] = 1
    s.kwargs = {"dim": 1}
    assert s.kwargs == {"dim": 1} and type(s.kwargs).__name__ == "immutable_dict"
    c = g.call_function(strata.cat, ([x, x],))
    with pytest.raises(NotImplementedError, match="does not support mutation"):
        c.args[0].append(x)
    assert type(c.args[0]).__name__ == "immutable_list" and c.args[0] == [x, x]
    g.erase_node(c)
    g.lint()


def test_lint_rejects_broken_graphs():
    g = fx.Graph()
    x = g.placeholder("x")
    y = g.call_function(strata.neg, (x,))
    z = g.call_function(strata.exp, (y,))
    g.output(z)
    g.lint()
    x.prepend(z)  # z now comes before its argument
    with pytest.raises(RuntimeError, match="used before it is defined"):
        g.lint()
    with pytest.raises(ValueError, match="must be callable"):
        g.create_node("call_function", "neg", (x,))
    with pytest.raises(ValueError, match="unknown op"):
        g.create_node("call_thing", "neg")


def test_conv_bn_fusion_pass():
    ns = load_script("train_resnet.py", "strata")
    model = ns["ResNet"]().eval()
    for m in model.modules():  # non-trivial running statistics
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.copy_(strata.randn(m.num_features) * 0.1)
            m.running_var.copy_(strata.rand(m.num_features) + 0.5)
    gm = fx.symbolic_trace(model)
    gm = copy.deepcopy(gm)
    modules = dict(gm.named_modules())

    def fuse(conv, bn):
        fused = copy.deepcopy(conv)
        w, b = conv.weight, conv.bias if conv.bias is not None else strata.zeros(conv.out_channels)
        inv = (bn.running_var + bn.eps).rsqrt()
        fused.weight = nn.Parameter((w * (bn.weight * inv).reshape(-1, 1, 1, 1)).detach())
        fused.bias = nn.Parameter(((b - bn.running_mean) * inv * bn.weight + bn.bias).detach())
        return fused

    fused_count = 0
    for node in list(gm.graph.nodes):
        if node.op != "call_module" or not isinstance(modules[node.target], nn.BatchNorm2d):
            continue
        prev = node.args[0]
        if prev.op != "call_module" or not isinstance(modules[prev.target], nn.Conv2d) or len(prev.users) > 1:
            continue
        parent, _, name = prev.target.rpartition(".")
        setattr(modules[parent] if parent else gm, name, fuse(modules[prev.target], modules[node.target]))
        node.replace_all_uses_with(prev)
        gm.graph.erase_node(node)
        fused_count += 1
    gm.graph.lint()
    gm.delete_all_unused_submodules()
    gm.recompile()
    assert fused_count == 6
    assert not any(isinstance(m, nn.BatchNorm2d) for m in gm.modules())
    x = strata.randn(2, 3, 16, 16)
    close(gm(x), model(x), 1e-4)


def test_replace_pattern():
    class M(nn.Module):
        def forward(self, x, y):
            a = strata.relu(x + y)
            b = strata.relu(a + x)
            d = strata.relu(b + 1.0)  # a literal where the pattern has an input: no match
            c = x + y  # read twice below: its add is shared, so it cannot be part of a match
            return d + strata.relu(c) + c

    def pattern(u, v):
        return strata.relu(u + v)

    def replacement(u, v):
        return strata.clamp(strata.add(u, v), min=0.0).neg()

    gm = fx.symbolic_trace(M())
    x, y = strata.randn(5), strata.randn(5)
    ref = M()(x, y)
    matches = fx.replace_pattern(gm, pattern, replacement)
    assert len(matches) == 2  # relu(x + y), relu(a + x); not relu(b + 1.0), not relu(c)
    assert all(m.anchor.op == "call_function" for m in matches)
    gm.graph.lint()
    s = structure(gm)
    assert s.count(("call_function", "clamp")) == 2 and s.count(("call_function", "relu")) == 2
    a = (x + y).clamp(min=0).neg()
    b = (a + x).clamp(min=0).neg()
    close(gm(x, y), strata.relu(b + 1.0) + strata.relu(x + y) + (x + y))
    assert not np.allclose(gm(x, y).numpy(), ref.numpy())  # the rewrite changed the computation
    assert fx.replace_pattern(gm, pattern, replacement) == []


def test_replace_pattern_like_torch():
    torch = pytest.importorskip("torch")
    import torch.fx

    def build(t):
        class M(t.nn.Module):
            def forward(self, x, w1, w2):
                m1 = t.cat([w1, w2]).sum()
                m2 = t.cat([w1, w2]).sum()
                return x + t.max(m1) + t.max(m2)

        def pattern(w1, w2):
            return t.cat([w1, w2]).sum()

        def replacement(w1, w2):
            return t.stack([w1, w2])
        return M(), pattern, replacement
    gs, gt = fx.symbolic_trace(build(strata)[0]), torch.fx.symbolic_trace(build(torch)[0])
    ms = fx.replace_pattern(gs, *build(strata)[1:])
    mt = torch.fx.replace_pattern(gt, *build(torch)[1:])
    assert len(ms) == len(mt) == 2
    assert sorted(structure(gs)) == sorted(structure(gt))  # the same nodes (placed in another valid order)
    x, w1, w2 = strata.randn(3), strata.randn(3), strata.randn(3)
    tt = [torch.from_numpy(v.numpy()) for v in (x, w1, w2)]
    close(gs(x, w1, w2), gt(*tt))


def test_shape_prop_matches_torch():
    ms, mt, torch = _mlp_pair()
    import torch.fx
    from torch.fx.passes.shape_prop import ShapeProp as TorchShapeProp
    gs, gt = fx.symbolic_trace(ms), torch.fx.symbolic_trace(mt)
    x = strata.randn(3, 8)
    ShapeProp(gs).propagate(x)
    TorchShapeProp(gt).propagate(torch.from_numpy(x.numpy()))
    for ns_, nt in zip(gs.graph.nodes, gt.graph.nodes):
        ms_, mt_ = ns_.meta.get("tensor_meta"), nt.meta.get("tensor_meta")
        assert (ms_ is None) == (mt_ is None), ns_.name
        if ms_ is not None and hasattr(ms_, "shape"):
            assert tuple(ms_.shape) == tuple(mt_.shape) and tuple(ms_.stride) == tuple(mt_.stride), ns_.name
            assert str(ms_.dtype).split(".")[-1] == str(mt_.dtype).split(".")[-1]
            assert ms_.requires_grad == mt_.requires_grad
        assert ns_.meta.get("type").__name__ == nt.meta.get("type").__name__


def test_interpreter_and_transformer():
    ms, _, _ = _mlp_pair()
    gm = fx.symbolic_trace(ms)
    x = strata.randn(2, 8)
    close(fx.Interpreter(gm).run(x), gm(x))

    seen = []

    class Counting(fx.Interpreter):
        def call_module(self, target, args, kwargs):
            seen.append(target)
            return super().call_module(target, args, kwargs)
    Counting(gm).run(x)
    assert seen == ["fc1", "fc2"]

    class TanhToSigmoid(fx.Transformer):
        def call_method(self, target, args, kwargs):
            return super().call_method("sigmoid" if target == "tanh" else target, args, kwargs)
    new = TanhToSigmoid(gm).transform()
    h = F.gelu(ms.fc1(x))
    y = ms.fc2(h).sigmoid() * ms.scale + ms.shift
    close(new(x), (strata.softmax(y.view(2, -1), dim=-1), h.mean()))
    assert "sigmoid" in new.code and "tanh" not in new.code


def test_trace_error_on_data_dependent_control_flow():
    class Branchy(nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                return x
            return -x

    with pytest.raises(fx.TraceError, match="symbolically traced variables cannot be used as inputs to control flow"):
        fx.symbolic_trace(Branchy())

    def loop(x):
        for row in x:
            x = x + row
        return x
    with pytest.raises(fx.TraceError, match="cannot be iterated"):
        fx.symbolic_trace(loop)
    ns = {}
    exec("def h(x):\n    return x * len(x)\n", ns)  # this test module wraps len (below): another module's globals
    with pytest.raises(RuntimeError, match="'len' is not supported"):
        fx.symbolic_trace(ns["h"])
    assert strata.relu is strata._C._ops.relu or type(strata.relu).__name__ == "op_function"  # patches undone
    assert F.relu.__module__ == "strata.nn.functional" and not hasattr(F.relu, "__fx_original__")


def test_trace_error_like_torch():
    torch = pytest.importorskip("torch")
    import torch.fx

    def f(t):
        def g(x):
            return x if x.sum() > 0 else -x
        return g
    with pytest.raises(torch.fx.proxy.TraceError) as et:
        torch.fx.symbolic_trace(f(torch))
    with pytest.raises(fx.TraceError) as es:
        fx.symbolic_trace(f(strata))
    assert str(es.value).startswith(str(et.value)) and issubclass(fx.TraceError, ValueError)


def test_concrete_args_and_signature():
    def f(x, flag=True, *, k=3):
        return x * k if flag else x - k

    gm = fx.symbolic_trace(f, concrete_args={"flag": False})
    x = strata.randn(3)
    close(gm(x), x - 3)
    assert [n.op for n in gm.graph.nodes].count("placeholder") == 3
    gm2 = fx.symbolic_trace(f, concrete_args={"flag": True})
    close(gm2(x, k=5), x * 5)

    seen = []

    def tracing_probe(x):
        seen.append(fx._symbolic_trace.is_fx_tracing())
        return x
    fx.symbolic_trace(tracing_probe)
    assert seen == [True] and not fx._symbolic_trace.is_fx_tracing()

    def g(*args, **kwargs):
        return fx.annotate(args[0] + args[1] * kwargs["s"], strata.Tensor)
    gm3 = fx.symbolic_trace(g)
    assert "def forward(self, *args, **kwargs):" in gm3.code
    assert list(gm3.graph.nodes)[-2].type is strata.Tensor
    close(gm3(x, x, s=2.0), x + x * 2.0)


def _helper_traced_through(x):
    return x * 2 + 1


def _wrapped_helper(x, n):
    return x.repeat(n, 1) if n > 1 else x  # concrete control flow: must not be traced


fx.wrap("_wrapped_helper")
fx.wrap("len")


def test_wrap_and_module_globals():
    def f(x):
        return _wrapped_helper(_helper_traced_through(_imported_relu(x)), len(x))

    gm = fx.symbolic_trace(f)
    s = structure(gm)
    assert ("call_function", "_wrapped_helper") in s and ("call_function", "len") in s
    assert ("call_function", "relu") in s and ("call_function", "mul") in s
    x = strata.randn(3, 2)
    close(gm(x), f(x))
    assert _wrapped_helper.__name__ == "_wrapped_helper" and not hasattr(_wrapped_helper, "__fx_original__")
    with pytest.raises(NotImplementedError, match="top level"):
        fx.wrap("_wrapped_helper")


def test_leaf_modules_and_retracing():
    class Inner(nn.Module):
        def forward(self, x):
            return x.relu() + 1

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Inner()
            self.seq = nn.Sequential(nn.Linear(3, 3), nn.ReLU())

        def forward(self, x):
            return self.seq(self.inner(x))

    gm = fx.symbolic_trace(Outer())
    assert [t for op, t in structure(gm) if op == "call_module"] == ["seq.0", "seq.1"]

    class KeepInner(fx.Tracer):
        def is_leaf_module(self, m, qualname):
            return isinstance(m, Inner) or super().is_leaf_module(m, qualname)
    g = KeepInner().trace(Outer())
    assert [n.target for n in g.nodes if n.op == "call_module"] == ["inner", "seq.0", "seq.1"]
    # a GraphModule traces again into the same graph
    gm2 = fx.symbolic_trace(gm)
    assert structure(gm2) == structure(gm)
    x = strata.randn(2, 3)
    close(gm2(x), gm(x))


def test_parameters_and_constants_become_get_attr():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(strata.randn(3, 3))
            self.const = strata.arange(3.0)  # a plain tensor attribute

        def forward(self, x):
            return strata.matmul(x, self.w.t()) + self.const + strata.tensor([1.0, 2.0, 3.0]).sum()

    m = M()
    gm = fx.symbolic_trace(m)
    targets = [n.target for n in gm.graph.nodes if n.op == "get_attr"]
    assert targets[:2] == ["w", "const"] and targets[2].startswith("_tensor_constant")
    x = strata.randn(2, 3)
    close(gm(x), m(x))


def test_compile_graph_module():
    ms, _, _ = _mlp_pair()
    gm = fx.symbolic_trace(ms)
    x = strata.randn(4, 8)
    compiled = strata.compile(gm)
    close(compiled(x), gm(x))
    explanation = strata._dynamo.explain(gm)(x)
    assert explanation.graph_count == 1 and explanation.graph_break_count == 0


def test_torch_fx_under_the_alias(tmp_path):
    script = tmp_path / "uses_fx.py"
    script.write_text(
        "import torch\n"
        "import torch.fx\n"
        "from torch.fx import symbolic_trace, GraphModule, Graph, Node, Proxy, Tracer, Interpreter\n"
        "from torch.fx.passes.shape_prop import ShapeProp\n"
        "from torch.fx.subgraph_rewriter import replace_pattern\n"
        "m = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())\n"
        "gm = symbolic_trace(m)\n"
        "assert isinstance(gm, torch.fx.GraphModule) and isinstance(gm, torch.nn.Module)\n"
        "x = torch.randn(2, 4)\n"
        "ShapeProp(gm).propagate(x)\n"
        "assert torch.equal(gm(x), m(x))\n"
        "print(torch.fx.__name__, [n.op for n in gm.graph.nodes])\n")
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "strata.torch_alias", str(script)], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "strata.fx ['placeholder', 'call_module', 'call_module', 'output']"


def test_node_meta_module_stack_buffers_and_stack_traces():
    torch = pytest.importorskip("torch")
    import torch.fx

    def build(t):
        class Inner(t.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = t.nn.Linear(3, 3)
                self.register_buffer("offset", t.ones(3))

            def forward(self, x):
                return self.lin(x).relu() - self.offset

        class Outer(t.nn.Module):
            def __init__(self):
                super().__init__()
                self.inner = Inner()

            def forward(self, x):
                return self.inner(x) * 2
        return Outer()

    def stacks(gm):
        return [(n.name, [(k, v[0], v[1].__name__) for k, v in n.meta.get("nn_module_stack", {}).items()])
                for n in gm.graph.nodes]
    gs, gt = fx.symbolic_trace(build(strata)), torch.fx.symbolic_trace(build(torch))
    assert stacks(gs) == stacks(gt)
    assert [n.op for n in gs.graph.nodes] == [n.op for n in gt.graph.nodes]

    class BufferTracer(fx.Tracer):
        proxy_buffer_attributes = True
    m = build(strata)
    g = BufferTracer().trace(m)
    assert [n.target for n in g.nodes if n.op == "get_attr"] == ["inner.offset"]
    gm = fx.GraphModule(m, g)
    m.inner.offset.fill_(3.0)  # read at run time, not baked into the graph
    x = strata.randn(2, 3)
    close(gm(x), m(x))
    assert "offset" in dict(gm.named_buffers()) or "inner.offset" in dict(gm.named_buffers())

    tracer = fx.Tracer()
    tracer.record_stack_traces = True
    g = tracer.trace(build(strata))
    relu = next(n for n in g.nodes if n.target == "relu")
    assert "test_fx.py" in relu.stack_trace and "self.lin(x).relu()" in relu.stack_trace


def _gpt_block(t):
    import math
    nn_, F_ = t.nn, t.nn.functional

    class CausalSelfAttention(nn_.Module):
        def __init__(self, d=16, h=2):
            super().__init__()
            self.c_attn, self.c_proj, self.h = nn_.Linear(d, 3 * d), nn_.Linear(d, d), h
            self.register_buffer("bias", t.tril(t.ones(8, 8)).view(1, 1, 8, 8))

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(C, dim=2)
            k = k.view(B, T, self.h, C // self.h).transpose(1, 2)
            q = q.view(B, T, self.h, C // self.h).transpose(1, 2)
            v = v.view(B, T, self.h, C // self.h).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = F_.softmax(att.masked_fill(self.bias == 0, float("-inf")), dim=-1)
            y = att @ v + F_.scaled_dot_product_attention(q, k, v, is_causal=True)
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.c_proj(y), t.arange(0, T, dtype=t.long, device=x.device)

    class Net(nn_.Module):
        def __init__(self):
            super().__init__()
            self.attn, self.mha = CausalSelfAttention(), nn_.MultiheadAttention(16, 2, batch_first=True)
            self.ln, self.emb = nn_.LayerNorm(16), nn_.Embedding(10, 16)

        def forward(self, idx):
            x = self.emb(idx)
            a, pos = self.attn(self.ln(x))
            out, _ = self.mha(a, a, a, need_weights=False)
            return out + self.emb(pos).unsqueeze(0)
    return Net().eval()


def test_gpt_block_matches_torch_fx():
    # tuple unpacking of sizes and of a leaf module's result, math.sqrt on a traced size (the math module is
    # autowrapped), F.scaled_dot_product_attention, strata.arange with traced sizes, a buffer as a constant
    torch = pytest.importorskip("torch")
    import torch.fx
    ms, mt = _gpt_block(strata), _gpt_block(torch)
    gs, gt = fx.symbolic_trace(ms), torch.fx.symbolic_trace(mt)
    assert structure(gs) == structure(gt)
    assert [n.name for n in gs.graph.nodes] == [n.name for n in gt.graph.nodes]
    copy_weights(mt, ms)
    idx = strata.randint(0, 10, (2, 8))
    close(gs(idx), ms(idx))
    close(gs(idx), gt(torch.from_numpy(idx.numpy())), 1e-4)
    assert pickle.loads(pickle.dumps(gs)).code == gs.code


def test_bad_input_errors():
    with pytest.raises(TypeError, match="expected an nn.Module or a function"):
        fx.symbolic_trace(42)
    with pytest.raises(RuntimeError, match="root must be an nn.Module or a dict"):
        fx.GraphModule(3, fx.Graph())
    g = fx.Graph()
    x = g.placeholder("x")
    g.output(g.call_module("missing", (x,)))
    with pytest.raises(RuntimeError, match="refers to 'missing'"):
        fx.GraphModule(nn.Module(), g)
    with pytest.raises(RuntimeError, match="concrete_args names \\['nope'\\]"):
        fx.symbolic_trace(lambda x: x, concrete_args={"nope": 1})
    gm = fx.symbolic_trace(lambda x: x.relu())
    with pytest.raises(TypeError, match="expected a Graph"):
        gm.graph = "not a graph"
    other = fx.Graph()
    y = other.placeholder("y")
    with pytest.raises(ValueError, match="another graph"):
        gm.graph.inserting_before(y)
    with pytest.raises(RuntimeError, match="belongs to another graph"):
        gm.graph.erase_node(y)


def test_real_tensor_methods_with_traced_arguments():
    # torch.fx records these through __torch_function__ (and fails on a slice holding a traced size);
    # strata.fx patches strata.Tensor's methods while tracing
    class PE(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("pe", strata.randn(1, 16, 4))

        def forward(self, x):
            z = strata.zeros(3)
            z[1:] = x[0, :2, 0]
            return x + self.pe[:, :x.size(1)], z, strata.ones(4).mul(x[0, 0, 0]), strata.Tensor.add(x, 1)

    m = PE()
    gm = fx.symbolic_trace(m)
    s = structure(gm)
    assert ("call_function", "setitem") in s and ("call_method", "mul") in s
    assert "pe[(slice(None, None, None), slice(None, size, None))]" in gm.code
    for t in (7, 3):
        x = strata.randn(5, t, 4)
        close(gm(x), m(x))
    assert not gm.graph.eliminate_dead_code()  # the setitem is kept
    assert type(vars(strata.Tensor)["add"]).__name__ == "op_method"  # the methods are restored
    assert not hasattr(vars(strata.Tensor)["__getitem__"], "__fx_original__")
    t = strata.arange(6.0)
    t[2] = 10.0
    assert t[2].item() == 10.0 and t[1:3].tolist() == [1.0, 10.0]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.fx.experimental imports torch.jit's deprecated names
def test_experimental_fuse_like_torch():
    torch = pytest.importorskip("torch")
    import torch.fx.experimental.optimization as topt
    from strata.fx.experimental import optimization as sopt
    ns_s, ns_t = load_script("train_resnet.py", "strata"), load_script("train_resnet.py", "torch")
    ms, mt = ns_s["ResNet"](), ns_t["ResNet"]()
    for m in mt.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features) + 0.5)
    copy_weights(mt, ms)
    ms.eval(), mt.eval()
    fs, ft = sopt.fuse(ms), topt.fuse(mt)
    assert structure(fs) == structure(ft)
    assert not any(isinstance(m, nn.BatchNorm2d) for m in fs.modules())
    x = strata.randn(2, 3, 16, 16)
    close(fs(x), ms(x), 1e-4)
    close(fs(x), ft(torch.from_numpy(x.numpy())), 1e-4)
    with pytest.raises(AssertionError, match="eval mode"):
        sopt.fuse(ms.train())
    drop = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5), nn.ReLU())
    nd = sopt.remove_dropout(drop)
    assert [t for op, t in structure(nd) if op == "call_module"] == ["0", "2"]


def test_sequential_code_like_torch_and_save_load():
    torch = pytest.importorskip("torch")
    import io
    import torch.fx
    gs = fx.symbolic_trace(nn.Sequential(nn.Linear(3, 3), nn.ReLU()).forward)  # a bound forward traces its module
    gt = torch.fx.symbolic_trace(torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU()))
    assert gs.code.strip() == gt.code.strip()
    buf = io.BytesIO()
    strata.save(gs, buf)
    buf.seek(0)
    loaded = strata.load(buf, weights_only=False)
    x = strata.randn(2, 3)
    assert isinstance(loaded, fx.GraphModule) and loaded.code == gs.code
    close(loaded(x), gs(x))


def test_split_module_like_torch():
    torch = pytest.importorskip("torch")
    import torch.fx
    from torch.fx.passes.split_module import split_module as torch_split
    from strata.fx.passes.split_module import split_module

    def build(t):
        class MyModule(t.nn.Module):
            def __init__(self):
                super().__init__()
                self.param = t.nn.Parameter(t.rand(4, 4))
                self.linear = t.nn.Linear(4, 4)

            def forward(self, x, y):
                z = self.linear(x + self.param).clamp(min=0.0, max=1.0)
                w = self.linear(y).clamp(min=0.0, max=1.0)
                return z + w
        return MyModule()

    def round_robin():
        count = [0]

        def cb(node):
            count[0] += 1
            return (count[0] - 1) % 3
        return cb
    ms, mt = build(strata), build(torch)
    copy_weights(mt, ms)
    ss = split_module(fx.symbolic_trace(ms), ms, round_robin())
    st = torch_split(torch.fx.symbolic_trace(mt), mt, round_robin())

    def summary(gm):
        subs = {name: sorted(structure(sub), key=str) for name, sub in gm.named_children()
                if name.startswith("submod_")}
        return subs, [t for op, t in structure(gm) if op == "call_module"]
    assert summary(ss) == summary(st)
    for name in ("", "submod_0", "submod_1", "submod_2"):  # the generated code is torch's, line for line
        a, b = (ss.get_submodule(name), st.get_submodule(name)) if name else (ss, st)
        assert a.code.strip() == b.code.strip()
    x, y = strata.rand(4, 4), strata.rand(4, 4)
    close(ss(x, y), ms(x, y))
    close(ss(x, y), st(torch.from_numpy(x.numpy()), torch.from_numpy(y.numpy())), 1e-5)

    with pytest.raises(RuntimeError, match="cycle"):  # 0 -> 1 -> 0
        split_module(fx.symbolic_trace(lambda a: (a.neg() + 1).exp().sum()), nn.Module(),
                     lambda n: {"neg": 0, "add": 1, "exp": 0, "sum_1": 1}[n.name])


def test_training_through_a_graph_module_and_constant_param_shapes():
    ms, _, _ = _mlp_pair()
    ms.train()
    gm = fx.symbolic_trace(ms)
    x = strata.randn(4, 8)
    (gm(x)[0].square().sum() + gm(x)[1]).backward()
    got = {k: p.grad.clone() for k, p in gm.named_parameters()}
    for p in ms.parameters():
        p.grad = None  # shared with gm: recompute through the original
    (ms(x)[0].square().sum() + ms(x)[1]).backward()
    for k, p in ms.named_parameters():
        close(got[k], p.grad)

    class ShapeBranch(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(strata.randn(3, 3))

        def forward(self, x):
            return x @ self.w if self.w.shape[0] == 3 else x

    with pytest.raises(fx.TraceError):
        fx.symbolic_trace(ShapeBranch())
    g = fx.Tracer(param_shapes_constant=True).trace(ShapeBranch())
    assert [n.op for n in g.nodes] == ["placeholder", "get_attr", "call_function", "output"]
