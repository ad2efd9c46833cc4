"""backend="strata_cpp": general pointwise groups (Note [Pointwise groups, general form] in
python/strata/_inductor/fusion.py): broadcasting, strided operands, eager's per-op dtypes (integers,
bool, float16, bfloat16, casts), comparisons, where / masked_fill, and the scheduler that moves
independent nodes out of a group's way.

Results are compared with eager Strata bit for bit, except the ops whose math goes through the
vector math library (exp, tanh, sigmoid, silu, the GELUs, ...): eager and a generated loop may take
libmvec or libm for a given element (a loop's scalar tail, a strided loop GCC does not vectorise),
an ulp apart. Their tolerance is named in TOL."""


import pytest

import strata
import strata.nn.functional as F
from strata._C import _compile
from strata._inductor import codecache, fusion

from compile_testutil import cache_dir, needs_gxx, record_graph as _record  # noqa: F401  (cache_dir: a fixture)

pytestmark = [needs_gxx, pytest.mark.usefixtures("cache_dir")]

# Relative tolerance of the results that pass through libm/libmvec functions, per dtype.
TOL = {strata.float32: 4e-6, strata.float64: 1e-14, strata.float16: 1e-3, strata.bfloat16: 8e-3}


def _kernels():
    s = codecache.stats
    return s["compiles"] + s["disk_hits"] + s["memory_hits"]


def _check(got, ref, inexact=()):
    assert len(got) == len(ref)
    for k, (a, r) in enumerate(zip(got, ref)):
        assert a.dtype == r.dtype and tuple(a.shape) == tuple(r.shape), (k, a.dtype, r.dtype, a.shape, r.shape)
        assert tuple(a.stride()) == tuple(r.stride()), (k, a.stride(), r.stride())
        if k in inexact:
            tol = TOL[r.dtype]
            assert strata.allclose(a.double(), r.double(), rtol=tol, atol=tol, equal_nan=True), \
                (k, float((a.double() - r.double()).abs().max()))
        else:
            assert strata.equal(a, r) or strata.allclose(a.double(), r.double(), rtol=0, atol=0, equal_nan=True), \
                (k, float((a.double() - r.double()).abs().max()))


def _mixed(x, b, xt, i, h, m):
    y = x * b + 1.5                                  # a [C] operand broadcast over rows
    z = strata.logical_and(y > 0.3, xt < 1.0)        # comparisons; a transposed operand
    w = strata.where(z, y, 0.0)                      # where with a number
    k = x + i                                        # int64 promoted to float32
    c = (x * 3).to(strata.int32)                     # a cast to an integer type
    hh = (h * 1.5 + 0.25).sigmoid()                  # float16, computed in float, rounded per op
    hb = (h.to(strata.bfloat16) * 3 - 1).relu()      # bfloat16
    mf = x.masked_fill(m, -1e9).exp()                # a [R, 1] mask
    g = F.gelu(xt * 2) + F.silu(xt) + F.gelu(xt, approximate="tanh")
    return w, k, c, hh, hb, mf, g, z


def test_broadcast_strided_mixed_dtypes_one_kernel():
    strata.manual_seed(0)
    x, b, xt = strata.randn(64, 33), strata.randn(33), strata.randn(33, 64).t()
    i, h, m = strata.arange(33), strata.randn(64, 33).half(), strata.randn(64, 1) > 0
    before = _kernels()
    got = strata.compile(_mixed, backend="strata_cpp")(x, b, xt, i, h, m)
    assert _kernels() == before + 1  # the whole graph is one kernel
    _check(got, _mixed(x, b, xt, i, h, m), inexact={3, 5, 6})


def _ints(a, b, c, f):
    s = a + b * 3                                    # int32 + int64 -> int64
    t = (a - 7).abs().neg().relu() + a.square()      # integer unary ops
    u = c * c + c                                    # bool arithmetic stays bool
    v = (a > b) | (b == 2) if False else strata.logical_or(a > b, b == 2)
    w = (a * 2.5).to(strata.float16) + 1             # int * float number -> float32, cast to float16
    q = a / 3                                        # true division of ints -> float32
    r = strata.where(c, a, b)                        # where over int32/int64 -> int64
    e = f.to(strata.int64) * 2 - b                   # float -> int truncation
    return s, t, u, v, w, q, r, e


def test_integer_and_bool_semantics():
    strata.manual_seed(1)
    a = strata.randint(-50, 50, (40, 17), dtype=strata.int32)
    b = strata.randint(-5, 5, (17,))
    c = strata.randn(40, 17) > 0
    f = strata.randn(40, 17) * 100
    got = strata.compile(_ints, backend="strata_cpp")(a, b, c, f)
    _check(got, _ints(a, b, c, f))


@pytest.mark.parametrize("dtype", [strata.float16, strata.bfloat16, strata.float64])
def test_reduced_and_double_precision_chains(dtype):
    def fn(x, y):
        a = x * y + 0.1
        b = (a - y).clamp(-1.0, 1.0) * 3
        c = strata.maximum(b, x) / (y.abs() + 1)
        d = F.relu(c) - F.hardtanh(x, -0.5, 0.5)
        e = F.leaky_relu(d, 0.2) + F.hardswish(x)
        return a, b, c, d, e, F.gelu(x), x.exp(), (x * 4).tanh(), x.abs() ** y

    strata.manual_seed(2)
    x = (strata.randn(8, 129) * 2).to(dtype)
    y = strata.randn(129).to(dtype)
    got = strata.compile(fn, backend="strata_cpp")(x, y)
    inexact = {6, 7, 8} | ({5} if dtype == strata.float64 else set())
    _check(got, fn(x, y), inexact=inexact)


def test_zero_d_operand_of_a_strided_kernel_is_loaded_before_the_loops():
    # A kernel over a broadcast (non-flat) space whose 0-d operand feeds values computed once, before
    # the loops (the backward of `(... ).sum()` has this shape: the 0-d incoming gradient).
    def fn(g, h, b):
        t = (g.neg() * 0.1)          # only the 0-d operand: hoisted
        return t * (h + b).exp(), g * h, (g * 2 + 1) * b

    g, h, b = strata.tensor(0.75), strata.randn(32, 48), strata.randn(48)
    got = strata.compile(fn, backend="strata_cpp")(g, h, b)
    _check(got, fn(g, h, b), inexact={0})


def test_zero_d_tensors_zero_size_and_permuted_outputs():
    def fn(x, s, p):
        a = x * s + s               # a 0-d tensor operand
        q = (p * 2).sigmoid() + 1   # a permuted input: eager's output keeps its layout
        return a, (x + 1) * 2, q

    x, s = strata.randn(5, 6), strata.tensor(1.25)
    p = strata.randn(4, 3, 5).permute(2, 0, 1)
    got = strata.compile(fn, backend="strata_cpp")(x, s, p)
    _check(got, fn(x, s, p), inexact={2})
    z = strata.randn(0, 6)
    got = strata.compile(fn, backend="strata_cpp")(z, s, p)
    _check(got, fn(z, s, p), inexact={2})


def test_independent_nodes_move_and_siblings_share_a_kernel():
    def fn(x, w):
        a = x * 2                 # group 1 ...
        h = x @ w                 # ... a matmul that depends on nothing in it
        b = a.relu() + 1          # ... joins group 1 across the matmul
        s1 = h.sigmoid()          # siblings: two consumers of h, one kernel
        s2 = h * 3 - 1
        return b, s1 + s2, h.sum(0)

    g = _record(fn, (16, 8), (8, 4))
    run = fusion.compile_graph(g)
    assert isinstance(run, fusion._Runner)
    assert len(run.kernel_sources) == 2
    assert "relu (node" in run.kernel_sources[0] and "mul (node 0" in run.kernel_sources[0]
    assert "sigmoid" in run.kernel_sources[1] and "sub (node" in run.kernel_sources[1]
    x, w = strata.randn(16, 8), strata.randn(8, 4)
    got, ref = run(x, w), fn(x, w)
    _check(got, ref, inexact={1})
    # With h of x's shape, one kernel holds both groups, run after the matmul.
    run = fusion.compile_graph(_record(fn, (16, 8), (8, 8)))
    assert len(run.kernel_sources) == 1
    x, w = strata.randn(16, 8), strata.randn(8, 8)
    got, ref = run(x, w), fn(x, w)
    _check(got, ref, inexact={1})


def test_a_node_that_depends_on_the_group_through_another_node_splits_it():
    def fn(x, w):
        a = x * 2 + 1
        h = a @ w                 # depends on the group
        return (a.relu() * h).exp()  # joining the first group would need h before it: second group

    g = _record(fn, (8, 8), (8, 8))
    run = fusion.compile_graph(g)
    assert len(run.kernel_sources) == 2
    x, w = strata.randn(8, 8), strata.randn(8, 8)
    _check(run(x, w), (fn(x, w),), inexact={0})


def test_dropout_keeps_eagers_random_stream():
    # dropout's mask comes from eager's bernoulli_ node (run as it is, in its order among the random
    # nodes); the scale and the pointwise work around it fuse. The same seed gives eager's bits.
    def fn(x, r):
        y = F.dropout(x * 2 + r, 0.3, training=True)
        return (y + 1).relu(), F.dropout(x, 0.5, training=True) * 3

    x, r = strata.randn(32, 40), strata.randn(40)
    cf = strata.compile(fn, backend="strata_cpp")
    strata.manual_seed(7)
    got = cf(x, r)
    strata.manual_seed(7)
    ref = fn(x, r)
    _check(got, ref)


def test_in_place_writes_keep_reads_on_their_side():
    def fn(x):
        y = x * 2
        a = y + 1          # reads y before the in-place write
        y.mul_(10)
        b = y - 1          # reads y after it
        return a, b, y

    x = strata.randn(6, 7)
    _check(strata.compile(fn, backend="strata_cpp")(x), fn(x))


def test_strided_kernel_falls_back_on_other_strides():
    g = _compile.Graph()
    m = strata.empty_strided((8, 6), (1, 8), device="meta")
    g.add_input("x", m, device=strata.device("cpu"))
    with _compile.record(g):
        out = ((m * 2 + 1).relu() - 3).abs()
    g.set_outputs([g.value_of(out)])
    run = fusion.compile_graph(g)
    assert len(run.kernel_sources) == 1 and "(n (flat))" not in run.kernel_sources[0]
    xt = strata.randn(6, 8).t()
    assert strata.equal(run(xt)[0], ((xt * 2 + 1).relu() - 3).abs())
    xc = strata.randn(8, 6)  # contiguous: not the captured strides, runs node by node
    assert strata.equal(run(xc)[0], ((xc * 2 + 1).relu() - 3).abs())


def test_symbolic_sizes_use_the_flat_form():
    fn = lambda x, y: ((x * y + 1).relu() > 0.5).float() * x  # noqa: E731
    cf = strata.compile(fn, backend="strata_cpp", dynamic=True)
    for n in (5, 37, 1000):
        x, y = strata.randn(n, 3), strata.randn(n, 3)
        _check((cf(x, y),), (fn(x, y),))


def test_embedding_gather_fused_into_its_consumer(capsys):
    def fn(idx, table, pos):
        return F.embedding(idx, table) * 22.627416997969522 + pos

    from strata._dynamo import logs
    table, pos = strata.randn(100, 16), strata.randn(7, 16)
    idx = strata.randint(0, 100, (4, 7))
    cf = strata.compile(fn, backend="strata_cpp")
    logs.set_logs(output_code=True)
    try:
        got = cf(idx, table, pos)
    finally:
        logs.set_logs(output_code=False)
    err = capsys.readouterr().err
    assert "gather(in" in err and err.count("generated kernel (3 nodes)") == 1
    _check((got,), (fn(idx, table, pos),))
    # int32 indices and a transposed table (its columns strided)
    t2 = strata.randn(16, 100).t()
    i32 = idx.to(strata.int32)
    _check((strata.compile(fn, backend="strata_cpp")(i32, t2, pos),), (fn(i32, t2, pos),))
    # An index out of range: the kernel writes nothing and eager raises its own error.
    for v in (100, -1):
        bad = idx.clone()
        bad[1, 2] = v
        with pytest.raises(IndexError, match="index out of range"):
            cf(bad, table, pos)


def test_transposed_operands_run_in_tiles():
    # An operand read across its rows: the kernel runs 64 x 64 tiles of the two innermost dims
    # (partial tiles at both edges here), a batch dim outside them.
    def fn(a, b, c):
        return (a * 2 + b).relu() - c, a.sigmoid() * 3

    a = strata.randn(3, 300, 200).transpose(1, 2)
    b = strata.randn(200, 300)
    c = strata.randn(3, 200, 1)
    cf = strata.compile(fn, backend="strata_cpp")
    _check(cf(a, b, c), fn(a, b, c), inexact={1})
    from strata._dynamo import logs
    import io
    import contextlib
    err = io.StringIO()
    logs.set_logs(output_code=True)
    try:
        with contextlib.redirect_stderr(err):
            strata.compile(lambda a, b: (a * 2 + b).relu() - 1, backend="strata_cpp")(a, b)
    finally:
        logs.set_logs(output_code=False)
    assert "for (int64_t r = rb * 64; r < row_hi; ++r)" in err.getvalue()


# Random fusions: chains over a contiguous x, a row-broadcast r, a column-broadcast c and a
# transposed t, in each dtype. Exact ops compare bit for bit; a chain with an op that goes through
# the vector math library compares at TOL (an ulp in one op can grow through later ops: x8).
_EXACT_OPS = {
    "add": lambda a, x: a + x, "sub_r": lambda a, x: a - x, "mul": lambda a, x: a * x,
    "max": lambda a, x: strata.maximum(a, x), "min": lambda a, x: strata.minimum(a, x),
    "neg": lambda a, x: -a, "abs": lambda a, x: a.abs(), "relu": lambda a, x: a.relu(),
    "where": lambda a, x: strata.where(a > x, a, x), "clamp": lambda a, x: a.clamp(-3, 3),
    "add_s": lambda a, x: a + 2, "mul_s": lambda a, x: a * 3, "square": lambda a, x: a * a,
}
_FLOAT_OPS = {
    "div": lambda a, x: a / (x.abs() + 1), "half": lambda a, x: a * 0.5, "hardtanh": lambda a, x: F.hardtanh(a),
    "leaky": lambda a, x: F.leaky_relu(a, 0.1), "fill": lambda a, x: a.masked_fill(x > 0.5, -1.0),
}
_MATH_OPS = {
    "sigmoid": lambda a, x: a.sigmoid(), "tanh": lambda a, x: a.tanh(), "silu": lambda a, x: F.silu(a),
    "gelu_t": lambda a, x: F.gelu(a, approximate="tanh"), "exp": lambda a, x: a.clamp(-4, 4).exp(),
}


@pytest.mark.parametrize("dtype", [strata.float32, strata.float64, strata.float16, strata.bfloat16,
                                   strata.int32, strata.int64])
@pytest.mark.parametrize("seed", [11, 12])
def test_random_fusions_match_eager(dtype, seed):
    import random
    strata.compiler.reset()  # one code object for every case: stay under the recompile limit
    rng = random.Random(seed * 31 + sum(map(ord, str(dtype))))
    floating = dtype.is_floating_point
    ops = dict(_EXACT_OPS)
    if floating:
        ops.update(_FLOAT_OPS)
        ops.update(_MATH_OPS)
    names = [rng.choice(sorted(ops)) for _ in range(10)]
    operands = [rng.choice("xrct") for _ in names]
    inexact = any(n in _MATH_OPS or (n == "div" and dtype in (strata.float16, strata.bfloat16)) for n in names)

    def fn(x, r, c, t):
        env = {"x": x, "r": r, "c": c, "t": t}
        a = x
        for n, o in zip(names, operands):
            a = ops[n](a, env[o])
            if n in ("square", "mul") and not floating:
                a = a.clamp(-1000, 1000)  # keep integer products from overflowing
        return a, (a > 0).to(dtype) * x

    strata.manual_seed(seed)
    if floating:
        x, r, c = strata.randn(33, 70), strata.randn(70), strata.randn(33, 1)
        t = strata.randn(70, 33).t()
        x, r, c, t = (v.to(dtype) for v in (x, r, c, t))
    else:
        x, r, c = strata.randint(-9, 9, (33, 70)), strata.randint(-9, 9, (70,)), strata.randint(-9, 9, (33, 1))
        t = strata.randint(-9, 9, (70, 33)).t()
        x, r, c, t = (v.to(dtype) for v in (x, r, c, t))
    before = _kernels()
    got = strata.compile(fn, backend="strata_cpp")(x, r, c, t)
    assert _kernels() > before
    ref = fn(x, r, c, t)
    if inexact:
        tol = TOL[dtype] * 8
        for a, b in zip(got, ref):
            assert a.dtype == b.dtype and a.shape == b.shape
            assert strata.allclose(a.double(), b.double(), rtol=tol, atol=tol, equal_nan=True), \
                (names, operands, float((a.double() - b.double()).abs().max()))
    else:
        _check(got, ref)
