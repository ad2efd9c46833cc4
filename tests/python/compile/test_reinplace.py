"""Reinplacing after functionalization and fusion (Note [Reinplacing] in python/strata/_inductor/reinplace.py):
results, written inputs, their versions and gradients equal eager mode under strata_cpp for the mutation
matrix of test_functionalize.py; the plans really write in place (out= an input, scatters as copies into
views, kernel outputs in their inputs' storage, fewer planned bytes); and no donation where the old value
is read later, where outputs alias the storage, or where a write overlaps what it reads."""

import pytest

import strata
from strata._dynamo import config, eval_frame
from strata._inductor import codecache, reinplace

import test_functionalize as tf

try:
    codecache.compiler()
    HAVE_CXX = True
except Exception:  # noqa: BLE001
    HAVE_CXX = False
pytestmark = pytest.mark.skipif(not HAVE_CXX, reason="no C++ compiler for generated kernels")


@pytest.fixture(autouse=True)
def _reset():
    strata.compiler.reset()
    yield
    strata.compiler.reset()
    config.functionalize = True
    config.reinplace = True


def runner_of(fn):
    [st] = [st for st in eval_frame.states_of(fn.__code__) if st.entries]
    [entry] = st.entries
    r = entry.run.__globals__["R"]
    return getattr(r, "functional", r)


def compiled_runner(fn, args, flag=True):
    """(fn's strata_cpp kernel runner with reinplacing on or off, fn's outputs of one call)."""
    config.reinplace = flag
    strata.compiler.reset()
    out = strata.compile(fn)(*tf.clone_args(args))
    return runner_of(fn), out


def check_versions(fn, args):
    """Each input that eager mode writes gets a higher version under strata_cpp too; the others keep theirs."""
    ref = tf.clone_args(args)
    before = [a._version for a in ref]
    fn(*ref)
    eager_bumped = [a._version > b for a, b in zip(ref, before)]
    cf = strata.compile(fn)
    for _ in range(2):
        got = tf.clone_args(args)
        before = [a._version for a in got]
        cf(*got)
        assert [a._version > b for a, b in zip(got, before)] == eager_bumped


# ---- the mutation matrix -----------------------------------------------------------------------

INPUT_CASES = [
    (tf.inplace_on_inputs, lambda: (tf.leaf(3, 4, grad=False), tf.leaf(3, 4, grad=False, seed=1))),
    (tf.view_of_input, lambda: (tf.leaf(3, 3, grad=False), tf.leaf(3, 3, grad=False, seed=1))),
    (tf.out_into_input, lambda: (tf.leaf(3, 4, grad=False), tf.leaf(3, 4, grad=False, seed=1), strata.zeros(3, 4))),
    (tf.aliasing_outputs, lambda: (tf.leaf(2, 3, grad=False),)),
    (tf.index_put_input, lambda: (tf.leaf(5, 2, grad=False), tf.leaf(2, 2, grad=False, seed=1))),
    (tf.adam_like, lambda: (strata.randn(256), strata.randn(256), strata.randn(256), strata.rand(256))),
]


@pytest.mark.parametrize("fn,make", tf.INTERMEDIATE_CASES, ids=[c[0].__name__ for c in tf.INTERMEDIATE_CASES])
def test_intermediates_match_eager(fn, make):
    tf.check(fn, make(), "strata_cpp", functional=False)


@pytest.mark.parametrize("fn,make", INPUT_CASES, ids=[c[0].__name__ for c in INPUT_CASES])
def test_written_inputs_match_eager_and_their_versions_grow(fn, make):
    args = make()
    tf.check(fn, args, "strata_cpp", functional=False)
    strata.compiler.reset()
    check_versions(fn, args)


def test_outputs_still_alias_the_written_input():
    x = strata.randn(2, 3)
    cf = strata.compile(tf.aliasing_outputs)
    for _ in range(2):
        xc = x.clone()
        a, v, w = cf(xc)
        assert a is xc
        assert v._storage_ptr() == xc._storage_ptr() and w._storage_ptr() == xc._storage_ptr()
        assert strata.equal(v, xc[0]) and strata.equal(w, xc.view(-1))


def test_optimizer_like_update_under_no_grad_with_a_gradient_after():
    p = tf.leaf(16)
    g, m = strata.randn(16), strata.randn(16)

    def update(p, g, m):
        with strata.no_grad():
            m.mul_(0.9).add_(g)
            p.add_(m, alpha=-0.1)
        return m * 1
    tf.check(update, (p, g, m), "strata_cpp", functional=False)


def train_with_inplace(x, w):
    h = x @ w
    h += x
    h *= 0.5
    h.relu_()
    return (h * h.sigmoid()).sum()


def test_a_training_step_keeps_eager_gradients():
    # the forward graph's saved values are its outputs: never overwritten; the backward's kernels may
    # reuse the storage of the values they consume
    tf.check(train_with_inplace, (tf.leaf(16, 16), tf.leaf(16, 16, seed=1)), "strata_cpp", functional=False)


# ---- the plans write in place ------------------------------------------------------------------

def graph_of(r):
    return r.graph


def test_adam_like_update_is_written_in_place():
    args = (strata.randn(4096), strata.randn(4096), strata.randn(4096), strata.rand(4096))
    r_off, _ = compiled_runner(tf.adam_like, args, False)
    r_on, _ = compiled_runner(tf.adam_like, args, True)
    g = graph_of(r_on)
    ins = {g.value(v).name: v for v in g.inputs}
    # addcmul (no lowering) writes v's storage itself; its write-back copy_ then copies v onto itself
    [ac] = [n for n in g.nodes if n.op == "addcmul"]
    assert ac.args[ac.arg_names.index("out")].id == ins["v"]
    # the kernel writes m's new value into m (and v * 0.999 into v): no arena, fewer planned bytes
    mp_on, mp_off = r_on.memory_plan, r_off.memory_plan
    assert mp_on.reinplaced >= 1 and mp_off.reinplaced == 0
    assert mp_on.peak_bytes < mp_off.peak_bytes, (mp_on.describe(), mp_off.describe())
    # the inputs hold eager's values, and each written one has a new version
    ref = tf.clone_args(args)
    tf.adam_like(*ref)
    got = tf.clone_args(args)
    vers = [a._version for a in got]
    strata.compile(tf.adam_like)(*got)
    for a, b in zip(got, ref):
        tf.close(a, b)
    assert [a._version > b for a, b in zip(got, vers)] == [True, False, True, True]


def slice_writes(x, y):
    out = strata.empty(x.shape)
    k = x.shape[1] // 2
    out[:, :k] = (x[:, :k] * y[:, :k]).tanh()
    out[:, k:] = x[:, k:] + y[:, k:]
    out.mul_(2)
    return out


def test_slice_writes_become_copies_into_views():
    args = (strata.randn(8, 16), strata.randn(8, 16))
    r, out = compiled_runner(slice_writes, args)
    g = graph_of(r)
    assert not any(n.op == "slice_scatter" for n in g.nodes)
    producer = {o: n for n in g.nodes for o in n.outputs}
    # the tanh kernel's result is copied into its view of out; x[:, k:] + y[:, k:] (its operands made by
    # no lowered op) is written straight into the view
    [c] = [n for n in g.nodes if n.op == "copy_"]
    [add] = [n for n in g.nodes if n.op == "add"]
    for target in (c.args[0], add.args[add.arg_names.index("out")]):
        assert producer[target.id].op == "slice.Tensor"
        assert producer[producer[target.id].args[0].id].op == "empty"
    tf.close(out, slice_writes(*args))


def test_input_slice_write_goes_into_the_input():
    def fn(x, y):
        x[:, 1:3] = y.exp()
        return x.sum()
    args = (strata.randn(4, 5), strata.randn(4, 2))
    r, _ = compiled_runner(fn, args)
    g = graph_of(r)
    assert not any(n.op == "slice_scatter" for n in g.nodes)
    tf.check(fn, args, "strata_cpp", functional=False)
    strata.compiler.reset()
    check_versions(fn, args)


def residual(x, w):
    h = x @ w
    h += x
    h *= 0.5
    h.relu_()
    return h.mul_(h.sigmoid())


def test_kernel_output_reuses_a_dying_intermediate():
    args = (strata.randn(64, 32), strata.randn(32, 32))
    r_off, _ = compiled_runner(residual, args, False)
    r_on, out = compiled_runner(residual, args, True)
    assert r_on.num_kernels == r_off.num_kernels == 1
    assert r_on.memory_plan.reinplaced == 1
    # the kernel's output lives in the matmul's result: one 64x32 tensor less
    assert r_off.memory_plan.peak_bytes - r_on.memory_plan.peak_bytes == 64 * 32 * 4
    tf.close(out, residual(*args))


def test_in_place_kernel_source_stores_through_the_input():
    args = (strata.randn(4096), strata.randn(4096), strata.randn(4096), strata.rand(4096))
    r, _ = compiled_runner(tf.adam_like, args)
    assert r.reinplaced_kernels and len(r.reinplaced_sources) == len(r.reinplaced_kernels)
    for src in r.reinplaced_sources:
        # one restrict pointer per storage: the written input is not const and the output it replaces
        # has no pointer of its own; every load of an iteration comes before its stores
        assert "outputs written into inputs: out0 -> in" in src
        i = src.split("out0 -> in")[1].split()[0].rstrip(",")
        assert f"float* __restrict in{i} = static_cast<float*>" in src
        assert "float* __restrict out0" not in src
        body = src[src.index("for (int64_t i = begin"):]
        assert body.rindex(f"= in{i}[i];") < body.index(f"in{i}[i] = ")


# ---- where reinplacing must not happen ----------------------------------------------------------

def old_value_is_an_output(x, w):
    a = x @ w
    b = (a * 2).relu()
    return b, a


def old_value_read_later(x, w):
    a = x @ w
    b = (a * 2).relu()
    c = a @ w
    return b @ c


def overlapping_input(x):
    # the kernel (x[:-1] * 2).sin() reads a view of x: its output must not go into that view's elements
    x[1:] = (x[:-1] * 2).sin()
    return x


def overlapping_intermediate(x):
    a = x @ x.t()
    a[1:] = (a[:-1] * 2).sin()
    return a.cos()


def reads_only_inputs(x, y):
    # x and y are the caller's and not written: a kernel never writes into them
    return (x * 2 + y).relu(), y.exp() * x


def sibling_reads_old_input(x, w):
    x2 = x * 2
    x.add_(1)
    return (x2 @ w) + x


@pytest.mark.parametrize("fn,make", [
    (old_value_is_an_output, lambda: (strata.randn(8, 8), strata.randn(8, 8))),
    (old_value_read_later, lambda: (strata.randn(8, 8), strata.randn(8, 8))),
    (overlapping_input, lambda: (strata.randn(6, 3),)),
    (overlapping_intermediate, lambda: (strata.randn(6, 3),)),
    (sibling_reads_old_input, lambda: (strata.randn(8, 8), strata.randn(8, 8))),
    (reads_only_inputs, lambda: (strata.randn(8, 8), strata.randn(8, 8))),
], ids=["old_value_is_an_output", "old_value_read_later", "overlapping_input", "overlapping_intermediate",
        "sibling_reads_old_input", "reads_only_inputs"])
def test_hazards_keep_eager_results(fn, make):
    args = make()
    tf.check(fn, args, "strata_cpp", functional=False)


def test_no_donation_into_a_value_that_is_an_output():
    args = (strata.randn(8, 8), strata.randn(8, 8))
    r, (b, a) = compiled_runner(old_value_is_an_output, args)
    assert r.memory_plan.reinplaced == 0
    assert a._storage_ptr() != b._storage_ptr()


def test_no_donation_into_a_value_read_later():
    # the kernel (a * 2).relu() reads the matmul's result a, which the second matmul reads after it
    # unless the schedule runs that matmul first: the kernel's output takes a's storage only then
    args = (strata.randn(8, 8), strata.randn(8, 8))
    r, out = compiled_runner(old_value_read_later, args)
    tf.close(out, old_value_read_later(*args))
    tf.close(strata.compile(old_value_read_later)(*args), old_value_read_later(*args))


def test_overlapping_write_is_not_a_donation_into_the_source():
    x = strata.arange(6.0)
    r, out = compiled_runner(overlapping_input, (x,))
    assert r.num_kernels == 1 and r.memory_plan.reinplaced == 0
    torch = pytest.importorskip("torch")
    t = torch.arange(6.0)
    overlapping_input(t)
    assert strata.allclose(out, strata.tensor(t.tolist()))


def test_config_off_keeps_fresh_results():
    args = (strata.randn(4096), strata.randn(4096), strata.randn(4096), strata.rand(4096))
    r, _ = compiled_runner(tf.adam_like, args, False)
    g = graph_of(r)
    [ac] = [n for n in g.nodes if n.op == "addcmul"]
    assert ac.args[ac.arg_names.index("out")] is None
    assert r.memory_plan.reinplaced == 0


def test_graph_pass_refuses_a_graph_with_in_place_ops():
    # a captured graph (not functionalized) with an in-place op: left as it is
    def fn(x):
        a = x * 2
        a[1:].zero_()
        return a
    g = tf.captured(fn, strata.randn(4))
    assert not reinplace.rewritable(g)
    assert reinplace.reinplace_graph(g) is g


def lerp_then_copy(x, y, buf):
    f = strata.lerp(x, y, 0.5)
    t = x.exp()
    buf.copy_(f)
    return t


def test_no_early_write_into_an_input_that_may_alias_another():
    # as captured (functionalization off) nothing checks that buf and x are distinct tensors: buf is not
    # written before the end even though lerp's result is its final value
    config.functionalize = False
    cf = strata.compile(lerp_then_copy)
    x, y = strata.randn(16), strata.randn(16)
    ref_x = x.clone()
    ref = lerp_then_copy(ref_x, y, ref_x)
    got_x = x.clone()
    tf.close(cf(got_x, y, got_x), ref)
    tf.close(got_x, ref_x)
    # functionalized, distinct inputs: lerp writes buf itself; buf aliasing x runs the captured graph
    config.functionalize = True
    strata.compiler.reset()
    args = (x, y, strata.zeros(16))
    r, _ = compiled_runner(lerp_then_copy, args)
    g = graph_of(r)
    [lp] = [n for n in g.nodes if n.op == "lerp"]
    assert lp.args[lp.arg_names.index("out")].id == g.inputs[2]
    cf = strata.compile(lerp_then_copy)
    got_x = x.clone()
    tf.close(cf(got_x, y, got_x), ref)
    tf.close(got_x, ref_x)


def test_a_lone_lowered_node_writes_in_place_when_large():
    # out.mul_(2) is a lowered op that no kernel took: out= its dying input once its result is large
    # (LONE_MIN_BYTES); a small one keeps its fresh result (not worth fusing the graph again)
    for n, in_place in ((8, False), (256, True)):
        args = (strata.randn(n, 256), strata.randn(n, 256))
        r, out = compiled_runner(slice_writes, args)
        g = graph_of(r)
        [m] = [x for x in g.nodes if x.op == "mul" and x.args[1] == 2]
        target = m.args[m.arg_names.index("out")]
        assert (target is not None) == in_place
        tf.close(out, slice_writes(*args))


def saved_value(x, w, w2):
    a = x @ w               # the product a * w2 saves a for w2's gradient: a forward output
    c = (a * w2).sin() * 3  # a kernel reading a, where a dies in the forward graph
    return c.sum()


def test_a_value_autograd_saves_is_not_overwritten():
    tf.check(saved_value, (tf.leaf(8, 8), tf.leaf(8, 8, seed=1), tf.leaf(8, 8, seed=2)), "strata_cpp",
             functional=False)


def second_write_computed_first(x, y):
    a = x * 1
    b = x.lerp(y, 0.25)  # made before the first write, written after it over the same elements
    a[:, :2] = y[:, :2].lerp(x[:, :2], 0.5)
    a[:, :2] = b[:, :2]
    a[:, 1:3] = a[:, 0:2].lerp(y[:, 1:3], 0.5)  # reads the base it writes, at other elements
    return a.exp()


def test_producer_into_a_view_keeps_write_order_and_overlaps():
    tf.check(second_write_computed_first, (strata.randn(4, 5), strata.randn(4, 5)), "strata_cpp",
             functional=False)


# ---- random mutation programs ------------------------------------------------------------------

_STMTS = [
    "{a}.add_({b})", "{a}.mul_(0.5)", "{a}.addcmul_({b}, {b}, value=0.1)", "{a}.lerp_({b}, 0.3)",
    "{a}[:, :3] = ({b}[:, :3] * 2).tanh()", "{a}[:, 3:] = {b}[:, 3:] + 1", "{a}[1:] = {a}[:-1] * 2",
    "{a}[1:] = ({a}[:-1] + {b}[1:]).sin()", "{a}.t()[0].add_(1)", "{a}.relu_()",
    "{a}.addcdiv_({b}, {b}.abs() + 1, value=0.2)", "{n} = {a} * 3", "{n} = ({a} + {b}).exp()",
    "{n} = {a} @ {b}.t() @ {a}", "{a}[0] = {b}[1]", "{a}.copy_({b} * 2)", "{a}.masked_fill_({a} > 1, 0.0)",
    "{a}.mul_({b}.sigmoid())",
]


def _program(rng):
    names, lines = ["x", "y", "z"], []
    for i in range(rng.randint(3, 8)):
        s = rng.choice(_STMTS)
        lines.append(s.format(a=rng.choice(names), b=rng.choice(names), n=f"t{i}"))
        if "{n}" in s:
            names.append(f"t{i}")
    ret = ", ".join(rng.sample(names, 2))
    return "def f(x, y, z):\n" + "".join(f"    {line}\n" for line in lines) + f"    return {ret}\n"


@pytest.mark.parametrize("seed", range(24))
def test_random_mutation_programs_match_eager(seed):
    # in-place ops, slice writes (overlapping ones too), unlowered ops and matmuls on inputs and
    # intermediates; the large shape lets lone nodes write in place (LONE_MIN_BYTES)
    import random
    rng = random.Random(seed)
    ns = {"strata": strata}
    exec(_program(rng), ns)
    f = ns["f"]
    strata.manual_seed(seed)
    shape = rng.choice([(6, 6), (64, 640)])
    args = [strata.randn(*shape) for _ in range(3)]
    ref_args = [a.clone() for a in args]
    ref = f(*ref_args)
    cf = strata.compile(f)
    for _ in range(2):
        got_args = [a.clone() for a in args]
        got = cf(*got_args)
        for p, q in list(zip(got, ref)) + list(zip(got_args, ref_args)):
            assert strata.allclose(p, q, rtol=1e-4, atol=1e-4, equal_nan=True), _program(random.Random(seed))
