"""strata.compile end to end: capture, guards, recompiles, graph breaks and resume functions,
side effects, modules, training, explain(), and the graph-break matrix against
torch._dynamo.explain."""

import math
import warnings

import pytest

import strata
import strata.nn as nn
import strata.nn.functional as F
from strata._dynamo.convert import CompileError

from compile_testutil import same



def entries(fn):
    from strata._dynamo import eval_frame
    f = getattr(fn, "__wrapped__", fn)
    return sum(len(st.entries) for st in eval_frame.states_of(f.__code__))


# -- basics -------------------------------------------------------------------------------------

def test_pointwise_chain_bit_identical_and_cached():
    def f(x, y):
        z = x * y + 1.5
        return (z.relu() - y).sum(1), z

    cf = strata.compile(f)
    x, y = strata.randn(4, 3), strata.randn(4, 3)
    same(cf(x, y), f(x, y))
    same(cf(y, x), f(y, x))
    assert entries(cf) == 1


def test_shape_arithmetic_views_and_python_numbers():
    def f(x):
        b, t = x.shape[0], x.size(-1)
        y = x.view(b, t // 2, -1).transpose(1, 2).reshape(b * 2, -1)
        scale = 1.0 / math.sqrt(t)
        return y * scale, len(x), x.dim()

    cf = strata.compile(f)
    x = strata.randn(3, 8)
    same(cf(x), f(x))


def test_kwargs_defaults_varargs_closure_and_globals():
    k = 3.0

    def helper(a, *rest, alpha=2.0, **kw):
        out = a * alpha
        for r in rest:
            out = out + r
        return out + kw.get("bias", 0.0) + k

    def f(x, y, *, bias=1.0):
        return helper(x, y, y, alpha=0.5, bias=bias) + GLOBAL_SCALE * x

    cf = strata.compile(f)
    x, y = strata.randn(5), strata.randn(5)
    same(cf(x, y), f(x, y))
    same(cf(x, y, bias=2.0), f(x, y, bias=2.0))


GLOBAL_SCALE = 0.25


def test_containers_and_builtins():
    def f(xs, d):
        out = []
        for i, x in enumerate(xs):
            out.append(x * (i + 1))
        total = sum(out)
        m = max(len(xs), 2)
        return {"total": total + d["b"], "n": m, "pair": tuple(zip([1, 2], [3, 4]))}

    cf = strata.compile(f)
    xs = [strata.randn(2), strata.randn(2), strata.randn(2)]
    d = {"b": strata.ones(2)}
    same(cf(xs, d), f(xs, d))


def test_tensor_indexing_and_setitem():
    def f(x):
        y = x[1:, ::2].clone()
        y[0] = 0.0
        z = x[..., None][:, 0]
        return y, z, x[-1]

    cf = strata.compile(f)
    x = strata.randn(4, 6)
    same(cf(x), f(x))


def test_multi_output_ops_and_namedtuple_fields():
    def f(x):
        v, i = x.max(1)
        s = x.sort(dim=0)
        return v + s.values[0], i, s.indices

    cf = strata.compile(f)
    x = strata.randn(4, 4)
    same(cf(x), f(x))


def test_inplace_on_input_reaches_caller():
    def f(x, y):
        x.add_(y)
        x.mul_(2)
        return x.sum()

    cf = strata.compile(f)
    a, b = strata.randn(3), strata.randn(3)
    a2 = a.clone()
    r = cf(a, b)
    r2 = f(a2, b)
    same(r, r2)
    same(a, a2)


def test_factory_ops_inside_the_graph():
    def f(x):
        return x + strata.ones(x.shape[0]) * strata.arange(x.shape[0]), strata.zeros(2, dtype=strata.int64)

    cf = strata.compile(f)
    x = strata.randn(4)
    same(cf(x), f(x))


# -- guards and recompiles -------------------------------------------------------------------------

def test_recompile_on_dtype_shape_requires_grad_and_constants():
    def f(x, n):
        return x * n

    cf = strata.compile(f)
    cf(strata.randn(3), 2)
    assert entries(cf) == 1
    cf(strata.randn(3), 2)
    assert entries(cf) == 1
    cf(strata.randn(3, dtype=strata.float64), 2)
    assert entries(cf) == 2
    cf(strata.randn(4), 2)
    assert entries(cf) == 3
    cf(strata.randn(3, requires_grad=True), 2)
    assert entries(cf) == 4
    same(cf(strata.ones(3), 5), strata.full((3,), 5.0))
    assert entries(cf) == 5


def test_grad_mode_is_guarded():
    def f(x, w):
        return x * w

    cf = strata.compile(f)
    w = strata.randn(3, requires_grad=True)
    x = strata.randn(3)
    assert cf(x, w).requires_grad
    with strata.no_grad():
        assert not cf(x, w).requires_grad
    assert entries(cf) == 2


def test_cache_size_limit_falls_back_to_eager_with_one_warning():
    def f(x):
        return x + 1

    # dynamic=False: with symbolic sizes (the default, automatic dynamic) a new size is not a recompile.
    cf = strata.compile(f, dynamic=False)
    old = strata._dynamo.config.cache_size_limit
    strata._dynamo.config.cache_size_limit = 3
    try:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            for n in range(1, 7):
                same(cf(strata.ones(n)), strata.full((n,), 2.0))
        msgs = [str(x.message) for x in w if "cache_size_limit" in str(x.message)]
        assert len(msgs) == 1 and "L['x']" in msgs[0]
        assert entries(cf) == 3
    finally:
        strata._dynamo.config.cache_size_limit = old


# -- graph breaks ------------------------------------------------------------------------------------

def test_print_splits_into_two_graphs(capsys):
    def f(x):
        y = x.sin() * 2
        print("inside", y.shape)
        return y.cos() + 1

    x = strata.randn(4)
    ex = strata.compiler.explain(f)(x)
    assert ex.graph_count == 2 and ex.graph_break_count == 1
    assert "print" in ex.break_reasons[0].reason
    assert "test_compile.py" in ex.break_reasons[0].location
    cf = strata.compile(f)
    same(cf(x), f(x))
    assert "inside strata.Size([4])" in capsys.readouterr().out


def test_data_dependent_branch_takes_the_right_side():
    def f(x):
        y = x * 2
        if y.sum() > 0:
            z = y + 10
        else:
            z = y - 10
        return z * 3

    cf = strata.compile(f)
    for x in (strata.ones(3), -strata.ones(3), strata.ones(3)):
        same(cf(x), f(x))


def test_item_breaks_and_resumes():
    def f(x):
        s = x.sum().item()
        return x * s, s

    cf = strata.compile(f)
    x = strata.randn(3)
    same(cf(x), f(x))


def test_break_inside_loop_and_inlined_function():
    def inner(x):
        print("step")
        return x + 1

    def f(x):
        for i in range(3):
            x = inner(x) * 2
        return x

    cf = strata.compile(f)
    x = strata.randn(2)
    same(cf(x), f(x))


def test_fullgraph_raises_with_reason_and_line():
    def f(x):
        y = x + 1
        print(y)
        return y

    cf = strata.compile(f, fullgraph=True)
    with pytest.raises(CompileError, match=r"print\(\) is a graph break[\s\S]*test_compile.py:\d+"):
        cf(strata.randn(2))


def test_disable_and_allow_in_graph():
    @strata.compiler.disable
    def eager_only(x):
        return x * 3

    def f(x):
        return eager_only(x + 1) - 1

    ex = strata.compiler.explain(f)(strata.randn(2))
    assert ex.graph_break_count == 1
    cf = strata.compile(f)
    x = strata.randn(2)
    same(cf(x), f(x))


# -- side effects ---------------------------------------------------------------------------------

def test_list_mutation_seen_by_caller():
    def f(x, log):
        log.append(x * 2)
        return x + 1

    cf = strata.compile(f)
    log, log2 = [], []
    x = strata.randn(2)
    same(cf(x, log), f(x, log2))
    assert len(log) == 1
    same(log[0], log2[0])


def test_module_attribute_write_is_replayed():
    class Counter(nn.Module):
        def __init__(self):
            super().__init__()
            self.calls = 0
            self.lin = nn.Linear(3, 3)

        def forward(self, x):
            self.calls = self.calls + 1
            return self.lin(x)

    m = Counter()
    cm = strata.compile(m)
    cm(strata.randn(2, 3))
    cm(strata.randn(2, 3))
    assert m.calls == 2


# -- modules and training --------------------------------------------------------------------------------

class MLP(nn.Module):
    def __init__(self, d=8, depth=3):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(d, d) for _ in range(depth)])
        self.norm = nn.LayerNorm(d)
        self.drop = nn.Dropout(0.25)
        self.head = nn.Sequential(nn.Linear(d, 4), nn.GELU(), nn.Linear(4, 2))

    def forward(self, x):
        for layer in self.layers:
            x = x + F.relu(layer(x))
        x = self.drop(self.norm(x))
        return self.head(x)


def test_module_matches_eager_and_state_dict_prefix():
    strata.manual_seed(0)
    m = MLP().eval()
    cm = strata.compile(m)
    x = strata.randn(5, 8)
    same(cm(x), m(x))
    assert all(k.startswith("_orig_mod.") for k in cm.state_dict())
    assert cm.layers is m.layers


def test_training_flag_guard_and_dropout_rng_matches_eager():
    strata.manual_seed(0)
    m = MLP().train()
    cm = strata.compile(m)
    x = strata.randn(5, 8)
    strata.manual_seed(123)
    a = cm(x)
    strata.manual_seed(123)
    b = m(x)
    same(a, b)
    m.eval()
    same(cm(x), m(x))


def test_backward_through_compiled_module_gives_eager_grads():
    strata.manual_seed(0)
    m = MLP().eval()
    x = strata.randn(6, 8)
    target = strata.randint(0, 2, (6,))
    F.cross_entropy(m(x), target).backward()
    ref = {n: p.grad.clone() for n, p in m.named_parameters()}
    m.zero_grad()
    cm = strata.compile(m)
    F.cross_entropy(cm(x), target).backward()
    for n, p in m.named_parameters():
        same(p.grad, ref[n])


def test_module_compile_in_place_and_parameter_replacement():
    lin = nn.Linear(3, 2)
    lin.compile()
    x = strata.randn(4, 3)
    same(lin(x), F.linear(x, lin.weight, lin.bias))
    with strata.no_grad():
        lin.weight.mul_(2)
    same(lin(x), F.linear(x, lin.weight, lin.bias))


def test_custom_backend_receives_graph_and_examples():
    seen = {}

    def backend(gm, example_inputs):
        seen["n"] = len(example_inputs)
        seen["code"] = gm.print_readable(print_output=False)
        return gm

    def f(x, y):
        return (x @ y).relu()

    cf = strata.compile(f, backend=backend)
    x, y = strata.randn(2, 3), strata.randn(3, 4)
    same(cf(x, y), f(x, y))
    assert seen["n"] == 2 and "matmul" in seen["code"]


def test_unknown_backend_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown backend 'nope'"):
        strata.compile(lambda x: x, backend="nope")


def test_torch_names():
    assert strata._dynamo.config.cache_size_limit == 8
    strata._dynamo.reset()
    assert strata.compiler.is_compiling() is False

    def f(x):
        return x * 2 if strata.compiler.is_compiling() else x * 3

    same(strata.compile(f)(strata.ones(1)), strata.full((1,), 2.0))


def test_function_called_at_a_break_is_compiled_in_turn_by_the_frame_hook(capsys):
    def inner(x):
        return x.sin() * 2

    def helper(x):
        y = x + 1
        print("hi")
        return inner(y) + 1

    def f(x):
        z = x * 3
        return helper(z) - 1

    x = strata.randn(4)
    ex = strata.compiler.explain(f)(x)
    # f up to the call, helper up to print, the rest of helper (inner inlined), the rest of f.
    assert ex.graph_count == 4 and ex.graph_break_count == 2
    assert ex.ops_per_graph == [["mul"], ["add"], ["sin", "mul", "add"], ["sub"]]
    same(strata.compile(f)(x), f(x))
    assert not strata._C._eval_frame.get_callback()  # the hook is installed only inside compiled regions


def test_strata_logs(capsys):
    from strata._dynamo import logs

    def f(x):
        y = x.cos()
        print("mid")
        return y + 1

    logs.set_logs(graph_breaks=True, recompiles=True, guards=True, graph_code=True)
    try:
        cf = strata.compile(f)
        cf(strata.randn(2))
        cf(strata.randn(3))
    finally:
        logs.set_logs(graph_breaks=False, recompiles=False, guards=False, graph_code=False)
    err = capsys.readouterr().err
    assert "[strata.compile:graph_breaks] graph break in test_strata_logs.<locals>.f: print() is a graph break" in err
    assert "test_compile.py:" in err
    assert "[strata.compile:recompiles] recompiling" in err and "L['x'].size()[0] == 2 (got 3)" in err
    assert "[strata.compile:guards]" in err and "check_tensor(L['x']" in err
    assert "cos: \"f32[2]\" = strata.ops.cos" in err


def test_no_grad_block_inside_the_region_with_a_break_in_it(capsys):
    def f(x, w):
        y = x * w
        with strata.no_grad():
            z = y * 2
            print("in block")
            z2 = z + 1
        return y + z2, z2.requires_grad

    x, w = strata.randn(3), strata.randn(3, requires_grad=True)
    ex = strata.compiler.explain(f)(x, w)
    # The print is inside the with block: it runs under the block's grad mode and the rest of the
    # block (and of the frame) is a second graph, whose nodes inside the block run under no_grad.
    assert ex.graph_count == 2 and ex.graph_break_count == 1
    cf = strata.compile(f)
    got, ref = cf(x, w), f(x, w)
    same(got, ref)
    assert got[0].requires_grad and strata.is_grad_enabled()


def test_no_grad_block_without_break_and_inplace_update():
    def g(x, w):
        with strata.no_grad():
            w.mul_(0.5)
        return (x * w).sum()

    x = strata.randn(3)
    w1, w2 = strata.ones(3, requires_grad=True), strata.ones(3, requires_grad=True)
    cg = strata.compile(g)
    a = cg(x, w1)
    a.backward()
    b = g(x, w2)
    b.backward()
    same(a, b)
    same(w1.grad, w2.grad)
    same(w1.detach(), w2.detach())
    assert strata.compiler.explain(g)(x, strata.ones(3, requires_grad=True)).graph_count == 1


def test_allow_in_graph_calls_the_function_on_meta_instead_of_inlining():
    import numpy as np

    def scaled(x):
        return x * float(np.sqrt(x.shape[-1]))

    def f(x):
        return scaled(x).relu()

    x = strata.randn(3, 4)
    # numpy is not followed: f breaks at the call, and scaled (compiled in turn) at np.sqrt.
    assert strata.compiler.explain(f)(x).graph_break_count == 2
    strata.compiler.allow_in_graph(scaled)
    ex = strata.compiler.explain(f)(x)
    assert ex.graph_count == 1 and ex.graph_break_count == 0 and ex.ops_per_graph == [["mul", "relu"]]
    same(strata.compile(f)(x), f(x))


def test_torch_backend_names_run():
    def f(x):
        return x.sin() + 1

    x = strata.randn(3)
    for backend in ("inductor", "eager", "aot_eager"):
        strata.compiler.reset()
        same(strata.compile(f, backend=backend)(x), f(x))
    assert {"eager", "aot_eager", "inductor"} <= set(strata.compiler.list_backends())
