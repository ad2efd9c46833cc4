"""backend="strata_cpp": row kernels for log_softmax, rms_norm, var/std over the last dim, and
LayerNorm + residual + dropout in one pass per row (Note [Row groups] in
python/strata/_inductor/fusion.py). Each is written in eager's accumulation order, so the fused
results are eager's bits."""


import pytest

import strata
import strata.nn.functional as F
from strata._inductor import codecache

from compile_testutil import cache_dir, needs_gxx  # noqa: F401  (cache_dir: a fixture)

pytestmark = [needs_gxx, pytest.mark.usefixtures("cache_dir")]


def _kernels():
    s = codecache.stats
    return s["compiles"] + s["disk_hits"] + s["memory_hits"]


def _norms(x, w):
    a = F.log_softmax(x * 2, -1)
    b = F.rms_norm(x + 1, (x.shape[-1],), w)
    c = F.rms_norm(x, (x.shape[-1],), eps=1e-5)
    d = x.var(-1, keepdim=True)
    e = (x * 3).std(-1)
    f = strata.var(x, -1, correction=0)
    g = F.log_softmax(x, -1).exp() * w
    return a, b, c, d, e, f, g


@pytest.mark.parametrize("dtype", [strata.float32, strata.float64])
def test_log_softmax_rms_norm_var_std_bit_exact(dtype):
    # 4103 columns: vector iterations, scalar tails, and sums split in 4096-element blocks; 5 rows
    # start at every alignment.
    strata.manual_seed(0)
    x = strata.randn(5, 4103, dtype=dtype) * 3
    w = strata.randn(4103, dtype=dtype)
    before = _kernels()
    got = strata.compile(_norms, backend="strata_cpp")(x, w)
    assert _kernels() == before + 1  # one row kernel for all of it
    ref = _norms(x, w)
    for k, (a, r) in enumerate(zip(got, ref)):
        assert a.dtype == r.dtype and tuple(a.shape) == tuple(r.shape), k
        if k == 6:  # exp after log_softmax: libmvec vs libm in a loop's tail (an ulp)
            assert strata.allclose(a, r, rtol=1e-6, atol=1e-6), k
        else:
            assert strata.equal(a, r), (k, float((a - r).abs().max()))


def test_layer_norm_residual_dropout_one_pass(capsys):
    # The mask comes from eager's bernoulli_ (same random stream, same seed -> same mask); the mask's
    # scaling (div, written in place, functional after the graph is functionalized), the mask multiply,
    # the residual add and layer_norm are one row kernel.
    def fn(x, h, w, b):
        return F.layer_norm(x + F.dropout(h, 0.1, training=True), (x.shape[-1],), w, b)

    strata.manual_seed(1)
    x, h = strata.randn(64, 300), strata.randn(64, 300)
    w, b = strata.randn(300), strata.randn(300)
    from strata._dynamo import logs
    cf = strata.compile(fn, backend="strata_cpp")
    logs.set_logs(output_code=True)
    try:
        strata.manual_seed(5)
        got = cf(x, h, w, b)
    finally:
        logs.set_logs(output_code=False)
    err = capsys.readouterr().err
    assert err.count("generated row kernel (4 nodes)") == 1 and "generated kernel" not in err
    assert "div (node" in err and "mul (node" in err and "add (node" in err and "layer_norm (node" in err
    strata.manual_seed(5)
    ref = fn(x, h, w, b)
    assert strata.equal(got, ref)
    assert not strata.equal(cf(x, h, w, b), cf(x, h, w, b))  # a fresh mask per call, as eager


def test_var_over_other_dims_is_left_to_eager():
    fn = lambda x: (x.var(0) + 1, x.std(-1, keepdim=True) * 2)  # noqa: E731
    x = strata.randn(7, 9)
    got, ref = strata.compile(fn, backend="strata_cpp")(x), fn(x)
    assert strata.equal(got[0], ref[0]) and strata.equal(got[1], ref[1])


def _cols(x, y):
    h = x * y + 1
    return h.sum(0), (x.relu() * 2).mean(1, keepdim=True), (x - y).amax(0), (x * 3).amin(-2), h


@pytest.mark.parametrize("dtype", [strata.float32, strata.float64])
def test_column_reductions_with_their_producers_bit_exact(dtype):
    # Note [Column reductions]: 300 rows (a 256-row regroup of the sums), 37 x 260 columns (full and
    # partial column tiles), the middle dim reduced too.
    strata.manual_seed(0)
    x, y = strata.randn(300, 37, 260, dtype=dtype), strata.randn(300, 37, 260, dtype=dtype)
    before = _kernels()
    got = strata.compile(_cols, backend="strata_cpp")(x, y)
    assert _kernels() == before + 4  # one kernel per reduction, its producers inside
    ref = _cols(x, y)
    for k, (a, r) in enumerate(zip(got, ref)):
        assert a.dtype == r.dtype and tuple(a.shape) == tuple(r.shape) and a.stride() == r.stride(), k
        assert strata.equal(a, r), (k, float((a - r).abs().max()))
    # 70000 rows: the second regrouping level (256 x 256 rows).
    z = strata.randn(70000, 3, dtype=dtype)
    f2 = lambda z: (z * 2).sum(0)  # noqa: E731
    assert strata.equal(strata.compile(f2, backend="strata_cpp")(z), f2(z))


def test_column_reduction_of_a_broadcast_group_is_left_to_eager():
    fn = lambda x, y: (x * y + 1).sum(0)  # noqa: E731  (y broadcast: not the flat form)
    x, y = strata.randn(50, 40), strata.randn(40)
    assert strata.equal(strata.compile(fn, backend="strata_cpp")(x, y), fn(x, y))


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_after_a_row_kernel_compiles(approximate):
    # The row-kernel renderer emitted the float32 erf-GELU functor without the #define that
    # selects it (only the pointwise renderer had it): gelu(layer_norm(x)) failed to compile.
    w, b = strata.randn(64), strata.randn(64)

    def f(x):
        return F.gelu(F.layer_norm(x, (64,), w, b), approximate=approximate)
    x = strata.randn(32, 64)
    got = strata.compile(f)(x)
    assert strata.allclose(got, f(x), rtol=1e-6, atol=1e-6)
