"""Functionalization of captured graphs (Note [Functionalization] in python/strata/_dynamo/functionalize.py):
after the pass a graph writes only into its inputs, once each at its end; results, written inputs and
gradients equal eager mode for a matrix of mutation patterns under aot_eager and strata_cpp; fusion
is no longer blocked by in-place writes."""

import pytest

import strata
import strata.nn as nn
import strata.nn.functional as F
from strata._C import _compile
from strata._dynamo import config, eval_frame
from strata._dynamo.functionalize import FunctionalizeUnsupported, functionalize, mutating_nodes
from strata._inductor import codecache

try:
    codecache.compiler()
    HAVE_CXX = True
except Exception:  # noqa: BLE001
    HAVE_CXX = False
needs_cxx = pytest.mark.skipif(not HAVE_CXX, reason="no C++ compiler for generated kernels")

BACKENDS = ["aot_eager", pytest.param("strata_cpp", marks=needs_cxx)]


@pytest.fixture(autouse=True)
def _reset():
    strata.compiler.reset()
    yield
    strata.compiler.reset()
    config.functionalize = True


def captured(fn, *args):
    """fn's captured graph (one graph, no break)."""
    got = []

    def backend(gm, examples):
        got.append(gm.graph)
        return gm
    strata.compile(fn, backend=backend, fullgraph=True)(*[a.clone() if isinstance(a, strata.Tensor) else a
                                                          for a in args])
    [g] = got
    return g


def written(n):
    """The value node n writes into (copy_'s self, or the out= argument)."""
    if n.op == "copy_":
        return n.args[0].id
    return n.args[n.arg_names.index("out")].id


def writes_only_into_inputs_at_the_end(g):
    """Every node that writes writes into a graph input (a copy_, or the input's last pointwise op with
    out=input), each input once, and only such writes and views follow the first of them."""
    ins = set(g.inputs)
    muts = mutating_nodes(g)
    targets = [written(n) for n in muts]
    assert all(t in ins for t in targets), g
    assert len(set(targets)) == len(targets), g
    outs = {o for m in muts for o in m.outputs}
    first = next((i for i, n in enumerate(g.nodes) if set(n.outputs) & outs), len(g.nodes))
    for n in g.nodes[first:]:
        if not set(n.outputs) & outs:
            # only views of the written inputs (outputs that alias them) come after the write-back
            assert n.flags & strata._C._op_flags()["view"], (n, g)
    return muts


def clone_args(args):
    out = []
    for a in args:
        if isinstance(a, strata.Tensor):
            c = a.detach().clone()
            c.requires_grad_(a.requires_grad)
            out.append(c)
        else:
            out.append(a)
    return out


def as_tuple(r):
    return r if isinstance(r, tuple) else (r,)


def run_and_grads(fn, args):
    args = clone_args(args)
    out = as_tuple(fn(*args))
    loss = sum((o.float() * (i + 1)).sum() for i, o in enumerate(out) if o.requires_grad)
    grads = None
    if isinstance(loss, strata.Tensor) and loss.requires_grad:
        loss.backward()
        grads = [a.grad for a in args if isinstance(a, strata.Tensor) and a.requires_grad]
    return [o.detach() for o in out], [a.detach() for a in args if isinstance(a, strata.Tensor)], grads


def close(a, b):
    assert a.shape == b.shape and a.dtype == b.dtype, (a, b)
    assert strata.allclose(a, b, rtol=1e-5, atol=1e-6), (a, b)


def check(fn, args, backend, functional=True):
    ref_out, ref_args, ref_grads = run_and_grads(fn, args)
    cf = strata.compile(fn, backend=backend)
    for _ in range(2):  # the first call compiles, the second runs the cached entry
        out, got_args, grads = run_and_grads(cf, args)
        for a, b in zip(out, ref_out):
            close(a, b)
        for a, b in zip(got_args, ref_args):
            close(a, b)
        assert (grads is None) == (ref_grads is None)
        for a, b in zip(grads or (), ref_grads or ()):
            assert (a is None) == (b is None)
            if a is not None:
                close(a, b)
    if not functional:
        return None
    g = functionalize(captured(fn, *args))
    writes_only_into_inputs_at_the_end(g)
    return g


# ---- the matrix of mutation patterns -----------------------------------------------------------

def leaf(*shape, grad=True, seed=0):
    strata.manual_seed(seed)
    return strata.randn(*shape, requires_grad=grad)


def inplace_on_intermediate(x, y):
    a = x * 2
    a.add_(y)
    a.mul_(y)
    a.relu_()
    return a * 3


def residual_iadd(x, w):
    h = x @ w
    h += x
    h *= 0.5
    return h.tanh()


def view_of_intermediate(x, y):
    a = x * 1
    a[:, :2] = y[:, :2] * 3
    a[0].mul_(2)
    a.t()[1].add_(1)
    return a.sin()


def chained_views(x):
    a = x + 1
    a.view(4, 6)[1:3].transpose(0, 1)[2].mul_(5)
    a.view(-1).narrow(0, 3, 4).unsqueeze(0).zero_()
    return a * a


def diagonal_and_unbind(x):
    a = x.clone()
    a.diagonal().add_(10)
    rows = a.unbind(1)
    rows[1].mul_(-1)
    c0, c1 = a.chunk(2, dim=0)
    c1.sub_(0.5)
    return a.exp()


def index_and_masks(x, y):
    a = x * 2
    idx = strata.tensor([0, 2])
    a[idx] = y[:2]
    a.masked_fill_(a > 1.0, 1.0)
    a[1] = 7.0
    a.copy_(a * 0.5 + 1)
    return a


def out_write(x, y):
    buf = strata.empty(3, 4)
    strata.add(x, y, out=buf)
    strata.mul(buf, y, out=buf)
    return buf + 1


INTERMEDIATE_CASES = [
    (inplace_on_intermediate, lambda: (leaf(3, 4), leaf(3, 4, seed=1))),
    (residual_iadd, lambda: (leaf(4, 4), leaf(4, 4, seed=1))),
    (view_of_intermediate, lambda: (leaf(3, 4), leaf(3, 4, seed=1))),
    (chained_views, lambda: (leaf(2, 12),)),
    (diagonal_and_unbind, lambda: (leaf(4, 4),)),
    (index_and_masks, lambda: (leaf(4, 3), leaf(4, 3, seed=1))),
    (out_write, lambda: (leaf(3, 4, grad=False), leaf(3, 4, grad=False, seed=1))),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn,make", INTERMEDIATE_CASES, ids=[c[0].__name__ for c in INTERMEDIATE_CASES])
def test_writes_into_intermediates_and_their_views(fn, make, backend):
    g = check(fn, make(), backend)
    assert not mutating_nodes(g)  # nothing written: no input is
    assert not any(n.op in ("copy_", "fill_", "zero_", "index_put_") for n in g.nodes)


def inplace_on_inputs(x, y):
    x.add_(y)
    y.mul_(2)
    return x + y


def view_of_input(x, y):
    x[:, 1].fill_(0)
    x.t()[0] += y[:, 0]
    x[1:].mul_(y[1:])
    return x.sum(1)


def out_into_input(x, y, buf):
    strata.add(x, y, out=buf)
    return buf * 2


def aliasing_outputs(x):
    v = x[0]
    x.add_(1)
    w = x.view(-1)
    return x, v, w


def index_put_input(x, v):
    x[strata.tensor([1, 3])] = v
    x.masked_fill_(x < 0, 0.0)
    return x


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn,make", [
    (inplace_on_inputs, lambda: (leaf(3, 4, grad=False), leaf(3, 4, grad=False, seed=1))),
    (view_of_input, lambda: (leaf(3, 3, grad=False), leaf(3, 3, grad=False, seed=1))),
    (out_into_input, lambda: (leaf(3, 4, grad=False), leaf(3, 4, grad=False, seed=1), strata.zeros(3, 4))),
    (aliasing_outputs, lambda: (leaf(2, 3, grad=False),)),
    (index_put_input, lambda: (leaf(5, 2, grad=False), leaf(2, 2, grad=False, seed=1))),
], ids=["inplace_on_inputs", "view_of_input", "out_into_input", "aliasing_outputs", "index_put_input"])
def test_writes_into_inputs_are_copied_back_once(fn, make, backend):
    args = make()
    g = check(fn, args, backend)
    muts = writes_only_into_inputs_at_the_end(g)
    assert muts  # each written input is written exactly once, at the end


@pytest.mark.parametrize("backend", BACKENDS)
def test_outputs_alias_the_written_input_as_in_eager(backend):
    x = strata.randn(2, 3)
    cf = strata.compile(aliasing_outputs, backend=backend)
    for _ in range(2):
        xc = x.clone()
        a, v, w = cf(xc)
        assert a is xc
        assert v._storage_ptr() == xc._storage_ptr() and w._storage_ptr() == xc._storage_ptr()
        xc.mul_(0)  # a later write shows through every output, as in eager mode
        assert float(v.abs().sum()) == 0 and float(w.abs().sum()) == 0


def sgd_momentum(p, g, m):
    with strata.no_grad():
        m.mul_(0.9).add_(g)
        p.add_(m, alpha=-0.1)
    return (p * g).sum()


@pytest.mark.parametrize("backend", BACKENDS)
def test_optimizer_like_update_under_no_grad(backend):
    p = leaf(16)
    g, m = strata.randn(16), strata.randn(16)
    # p is written without grad and read afterwards with grad: eager keeps p's history, the functional
    # value has none, so that graph runs as captured; the update alone is functionalized.
    check(sgd_momentum, (p, g, m), backend, functional=False)

    def update(p, g, m):
        with strata.no_grad():
            m.mul_(0.9).add_(g)
            p.add_(m, alpha=-0.1)
        return m * 1
    gr = functionalize(captured(update, p, g, m))
    muts = writes_only_into_inputs_at_the_end(gr)
    assert sorted(gr.value(written(n)).name for n in muts) == ["m", "p"]
    assert not any(n.grad_enabled for n in muts)
    check(update, (p, g, m), backend)


def test_write_read_with_grad_after_a_no_grad_write_is_refused():
    p, g, m = leaf(4), strata.randn(4), strata.randn(4)
    with pytest.raises(FunctionalizeUnsupported, match="without grad"):
        functionalize(captured(sgd_momentum, p, g, m))


class BNNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 4)
        self.bn = nn.BatchNorm1d(4)

    def forward(self, x):
        return self.bn(self.lin(x)).relu().sum()


@pytest.mark.parametrize("backend", BACKENDS)
def test_batchnorm_running_stats_in_a_compiled_module(backend):
    strata.manual_seed(0)
    m = BNNet().train()
    x = strata.randn(8, 6)
    state = {k: v.clone() for k, v in m.state_dict().items()}

    def step():
        m.zero_grad()
        loss = m(x)
        loss.backward()
        return loss.detach(), {n: p.grad.clone() for n, p in m.named_parameters()}, \
            {k: v.clone() for k, v in m.state_dict().items()}
    ref = [step() for _ in range(2)]
    m.load_state_dict(state)
    cm = strata.compile(m, backend=backend)

    def cstep():
        m.zero_grad()
        loss = cm(x)
        loss.backward()
        return loss.detach(), {n: p.grad.clone() for n, p in m.named_parameters()}, \
            {k: v.clone() for k, v in m.state_dict().items()}
    got = [cstep() for _ in range(2)]
    for (l0, g0, s0), (l1, g1, s1) in zip(ref, got):
        close(l1, l0)
        for k in g0:
            close(g1[k], g0[k])
        for k in s0:  # running statistics and the batch count: bit for bit
            assert strata.equal(s1[k], s0[k]), (k, s1[k], s0[k])
    g = functionalize(captured(lambda x: m(x), x))
    muts = writes_only_into_inputs_at_the_end(g)
    assert len(muts) == 3  # running mean, running variance, the batch count
    assert not any(n.op == "batch_norm" and n.args[3] is not None for n in g.nodes)


# ---- what stays as captured --------------------------------------------------------------------

def reshape_of_transposed(x):
    a = x * 1
    b = a.t().reshape(-1)  # a copy: writing it must not touch a
    b.add_(1)
    return a, b


@pytest.mark.parametrize("backend", BACKENDS)
def test_write_into_an_op_that_may_copy_runs_as_captured(backend):
    x = strata.randn(3, 4)
    with pytest.raises(FunctionalizeUnsupported, match="may or may not"):
        functionalize(captured(reshape_of_transposed, x))
    check_plain = strata.compile(reshape_of_transposed, backend=backend)
    for a, b in zip(check_plain(x), reshape_of_transposed(x)):
        assert strata.equal(a, b)


def test_random_fill_keeps_its_op():
    def fn(x):
        a = strata.empty(3, 4)
        a.uniform_()  # a tensor the graph made and nothing read: filled in place, no clone
        b = x * 1
        c = b + 1
        b.normal_()  # b was read: the fill runs on a clone of it, so c keeps reading the old value
        return a + c + b
    g = functionalize(captured(fn, strata.randn(3, 4)))
    producer = {o: m for m in g.nodes for o in m.outputs}
    [u] = [n for n in g.nodes if n.op == "uniform_"]
    [nr] = [n for n in g.nodes if n.op == "normal_"]
    assert producer[u.args[0].id].op == "empty"
    assert producer[nr.args[0].id].op == "clone"
    x = strata.randn(3, 4)
    strata.manual_seed(3)
    ref = fn(x.clone())
    strata.manual_seed(3)
    got = g.runner()(x.clone())[0]
    assert strata.equal(got, ref)


@pytest.mark.parametrize("backend", BACKENDS)
def test_aliased_inputs_run_the_captured_graph(backend):
    def fn(x, y):
        x.mul_(2)
        return y + 1
    cf = strata.compile(fn, backend=backend)
    a, b = strata.ones(3), strata.ones(3)
    assert strata.equal(cf(a, b), strata.full((3,), 2.0))
    a = strata.ones(3)
    assert strata.equal(cf(a, a), strata.full((3,), 3.0))  # y is x: eager reads the written value
    assert strata.equal(a, strata.full((3,), 2.0))


def test_config_off_keeps_the_captured_graph():
    def fn(x):
        x.add_(1)
        return x * 2
    config.functionalize = False
    cf = strata.compile(fn, backend="aot_eager")
    x = strata.zeros(2)
    assert strata.equal(cf(x), strata.full((2,), 2.0)) and strata.equal(x, strata.ones(2))
    r = entry_runner(fn)
    assert not hasattr(r, "functional")


# ---- fusion ------------------------------------------------------------------------------------

def entry_runner(fn):
    [st] = [st for st in eval_frame.states_of(fn.__code__) if st.entries]
    [entry] = st.entries
    return entry.run.__globals__["R"]


def kernels_of(fn, args, flag):
    config.functionalize = flag
    strata.compiler.reset()
    strata.compile(fn)(*clone_args(args))
    r = entry_runner(fn)
    r = getattr(r, "functional", r)
    return r.num_kernels


def adam_like(p, g, m, v):
    m.mul_(0.9).add_(g, alpha=0.1)
    v.mul_(0.999).addcmul_(g, g, value=0.001)
    p.addcdiv_(m, v.sqrt().add_(1e-8), value=-0.01)
    return p


@needs_cxx
@pytest.mark.parametrize("fn,make", [
    (inplace_on_intermediate, lambda: (strata.randn(32, 32), strata.randn(32, 32))),
    (adam_like, lambda: (strata.randn(256), strata.randn(256), strata.randn(256), strata.rand(256))),
], ids=["inplace_on_intermediate", "adam_like"])
def test_fusion_no_longer_blocked_by_writes(fn, make):
    args = make()
    before = kernels_of(fn, args, False)
    after = kernels_of(fn, args, True)
    assert before == 0 and after >= 1, (before, after)
    ref = fn(*clone_args(args))
    got_args = clone_args(args)
    got = strata.compile(fn)(*got_args)
    close(got, ref)


def test_copy_from_an_overlapping_view_of_the_same_tensor():
    # copy_ from another view of the same storage reads a snapshot and writes it (eager used to skip
    # the write when the snapshot had the destination's geometry); the functional graph agrees.
    torch = pytest.importorskip("torch")

    def fn(T, z):
        z[3:] = z[3:] * 2
        z[:1] = z[3:4]
        z[1].copy_(z[4])
        return z
    ref = fn(torch, torch.arange(10.0).reshape(5, 2)).tolist()
    assert fn(strata, strata.arange(10.0).reshape(5, 2)).tolist() == ref
    cf = strata.compile(lambda z: fn(strata, z), backend="aot_eager")
    assert cf(strata.arange(10.0).reshape(5, 2)).tolist() == ref


def test_graphs_with_symbolic_sizes_run_as_captured():
    # The pass writes sizes into the nodes it makes (full for fill_, reshapes back): a graph with
    # symbolic sizes keeps its writes, and each batch size gets eager's result.
    def fn(x):
        a = x * 2
        a[:, 0].zero_()
        a.add_(1)
        return a
    cf = strata.compile(fn, backend="aot_eager")
    for n in (3, 5, 7, 9):
        x = strata.randn(n, 4)
        assert strata.equal(cf(x), fn(x))


def test_a_write_with_grad_into_an_input_is_left_as_captured():
    # eager mode gives buf an autograd history (buf.grad_fn), which a copy at the end cannot: the pass
    # refuses and the graph runs as captured.
    def fn(buf, w):
        buf.add_(w * 2)
        return buf.sum()
    with pytest.raises(FunctionalizeUnsupported, match="requires grad"):
        functionalize(captured(fn, strata.zeros(3), leaf(3)))
