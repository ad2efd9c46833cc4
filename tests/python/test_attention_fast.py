"""scaled_dot_product_attention's fused CPU kernels: forward and backward against torch for transposed-heads
(strided) and contiguous q/k/v, causal or not, bool and float masks, scale=, size-1 batch/head dims, T=1, S != T,
float32/float64; the result layouts (transposed heads give a transposed output and gradients, as in torch); the
fused backward op (_scaled_dot_product_attention_backward) against the composite (create_graph=True) path, its
limits, and gradcheck in float64."""
import numpy as np
import pytest

import strata
from strata.autograd import gradcheck

torch = pytest.importorskip("torch")

TOL = {"float32": (2e-5, 2e-6), "float64": (1e-10, 1e-12)}


def _close(got, want, dtype):
    rtol, atol = TOL[dtype]
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol * max(1.0, float(np.abs(want).max(initial=0))))


def _np(t):
    return t.detach().numpy()


def _heads(lib, base, B, T, H, D, transposed):
    """(B, H, T, D) heads: a view(B, T, H, D).transpose(1, 2) of a (B, T, H * D) tensor, or a contiguous tensor."""
    if transposed:
        return base.view(B, T, H, D).transpose(1, 2)
    return base.view(B, H, T, D)


def _run(lib, arrays, dtype, kw, transposed, mask=None, create_graph=False):
    (qa, qshape), (ka, kshape), (va, vshape) = arrays
    dt = getattr(lib, dtype)
    leaves = [lib.tensor(a, dtype=dt).requires_grad_() for a in (qa, ka, va)]
    q, k, v = (_heads(lib, t, *s, transposed) for t, s in zip(leaves, (qshape, kshape, vshape)))
    m = None
    if mask is not None:
        m = lib.tensor(mask) if mask.dtype == np.bool_ else lib.tensor(mask, dtype=dt)
    out = lib.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=m, **kw)
    g = lib.tensor(np.random.default_rng(7).standard_normal(tuple(out.shape)), dtype=dt)
    grads = lib.autograd.grad(out, leaves, g, create_graph=create_graph)
    return out, [_np(out)] + [_np(x) for x in grads]


def _arrays(B, L, S, H, E, Ev, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((B, n, H * d)).astype(dtype), (B, n, H, d)) for n, d in ((L, E), (S, E), (S, Ev))]


CASES = [
    # B, L, S, H, E, Ev
    (4, 64, 64, 4, 32, 32),  # the char-transformer's heads
    (2, 5, 5, 3, 4, 4),
    (1, 7, 7, 1, 8, 8),      # size-1 batch and head dims
    (2, 1, 1, 2, 4, 4),      # T = 1
    (2, 5, 9, 2, 4, 6),      # cross attention: S != L, Ev != E
    (3, 19, 19, 2, 5, 3),    # row lengths that are not whole vectors
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("transposed", [True, False])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("case", CASES)
def test_forward_and_backward_match_torch(case, causal, transposed, dtype):
    B, L, S, H, E, Ev = case
    arrays = _arrays(B, L, S, H, E, Ev, dtype)
    kw = {"is_causal": causal}
    out, got = _run(strata, arrays, dtype, kw, transposed)
    tout, want = _run(torch, arrays, dtype, kw, transposed)
    for a, b in zip(got, want):
        _close(a, b, dtype)
    # The same layout (strides of size-1 dims do not matter). torch's math path (used when E != Ev) gives a
    # contiguous result where its flash path follows the query's layout; Strata always follows the query's.
    if E == Ev:
        assert [st for st, n in zip(out.stride(), out.shape) if n > 1] == [
            st for st, n in zip(tout.stride(), tout.shape) if n > 1]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kind", ["bool", "float", "bool_rows_masked", "bool_broadcast", "float_row"])
def test_masks_match_torch(kind, dtype):
    B, L, S, H, E, Ev = 2, 6, 10, 3, 4, 5
    rng = np.random.default_rng(3)
    if kind == "bool":
        mask = rng.random((B, H, L, S)) > 0.4
        mask[..., 0] = True
    elif kind == "bool_rows_masked":  # rows with nothing to attend to come out as zeros
        mask = rng.random((L, S)) > 0.4
        mask[2] = False
    elif kind == "bool_broadcast":
        mask = rng.random((B, 1, 1, S)) > 0.3
        mask[..., 0] = True
    elif kind == "float":
        mask = rng.standard_normal((H, L, S)).astype(dtype)
    else:
        mask = rng.standard_normal((1, S)).astype(dtype)
    arrays = _arrays(B, L, S, H, E, Ev, dtype, seed=1)
    for transposed in (True, False):
        _, got = _run(strata, arrays, dtype, {"scale": 0.37}, transposed, mask)
        _, want = _run(torch, arrays, dtype, {"scale": 0.37}, transposed, mask)
        if kind == "bool_rows_masked":
            # torch >= 2.5 also gives zeros for fully masked rows; older versions give NaN there.
            want = [np.nan_to_num(w) for w in want]
        for a, b in zip(got, want):
            _close(a, b, dtype)


def test_scale_and_unbatched():
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((7, 4)) for _ in range(3))
    for kw in ({}, {"scale": 2.5}, {"is_causal": True}):
        outs = []
        for lib in (strata, torch):
            ts = [lib.tensor(a).requires_grad_() for a in (q, k, v)]
            o = lib.nn.functional.scaled_dot_product_attention(*ts, **kw)
            outs.append([_np(o)] + [_np(g) for g in lib.autograd.grad(o.sum(), ts)])
        for a, b in zip(*outs):
            _close(a, b, "float64")


def test_transposed_heads_give_views_not_copies():
    # The model's y.transpose(1, 2).reshape(B, T, C) is a view of the attention output, and the heads' gradients
    # come back in the (B, T, H, D) layout of the projection outputs.
    B, T, H, D = 2, 8, 4, 16
    x = strata.randn(B, T, 3 * H * D).requires_grad_()
    q, k, v = (t.view(B, T, H, D).transpose(1, 2) for t in x.split(H * D, -1))
    y = strata.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert y.stride() == (T * H * D, D, H * D, 1)
    r = y.transpose(1, 2).reshape(B, T, H * D)
    assert r.data_ptr() == y.data_ptr()
    leaves = [strata.randn(B, T, H, D).transpose(1, 2).requires_grad_() for _ in range(3)]
    o = strata.nn.functional.scaled_dot_product_attention(*leaves)
    for g, leaf in zip(strata.autograd.grad(o.sum(), leaves), leaves):
        assert g.stride() == leaf.stride()


def test_zero_sizes():
    for shapes in [((0, 2, 5, 4), (0, 2, 6, 4), (0, 2, 6, 3)), ((2, 2, 0, 4), (2, 2, 6, 4), (2, 2, 6, 3)),
                   ((2, 2, 5, 4), (2, 2, 0, 4), (2, 2, 0, 3)), ((2, 2, 5, 0), (2, 2, 6, 0), (2, 2, 6, 3)),
                   ((2, 2, 5, 4), (2, 2, 6, 4), (2, 2, 6, 0))]:
        outs = []
        for lib in (strata, torch):
            ts = [lib.ones(s, dtype=lib.float64).requires_grad_() for s in shapes]
            o = lib.nn.functional.scaled_dot_product_attention(*ts)
            outs.append([_np(o)] + [_np(g) for g in lib.autograd.grad(o.sum(), ts, allow_unused=True)])
        for a, b in zip(*outs):
            assert a.shape == b.shape
            np.testing.assert_allclose(a, b)


def test_fused_backward_matches_composite():
    # create_graph=True takes the derivative's composite formula; plain backward the fused op.
    arrays = _arrays(2, 9, 7, 3, 4, 5, "float64", seed=2)
    for kw, mask in (({"is_causal": True}, None), ({}, np.random.default_rng(0).random((9, 7)) > 0.3),
                     ({"scale": 0.2}, np.random.default_rng(1).standard_normal((3, 1, 7)))):
        _, fused = _run(strata, arrays, "float64", kw, True, mask)
        _, composite = _run(strata, arrays, "float64", kw, True, mask, create_graph=True)
        for a, b in zip(fused, composite):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_plain_backward_uses_the_fused_op():
    q = strata.randn(2, 3, 5, 4).requires_grad_()
    y = strata.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
    with strata.profiler.profile() as prof:
        y.sum().backward()
    assert any("_scaled_dot_product_attention_backward" in e.key for e in prof.key_averages())


def test_broadcast_gqa_and_mask_grad_take_the_composite_path():
    rng = np.random.default_rng(4)
    q = rng.standard_normal((2, 4, 5, 3))
    kv = rng.standard_normal((2, 2, 6, 3))
    k4 = rng.standard_normal((2, 4, 6, 3))
    mask = rng.standard_normal((5, 6))
    outs = []
    for lib in (strata, torch):
        res = []
        ts = [lib.tensor(a).requires_grad_() for a in (q, kv, kv * 0.5)]
        o = lib.nn.functional.scaled_dot_product_attention(*ts, enable_gqa=True)
        res += [_np(o)] + [_np(g) for g in lib.autograd.grad((o * o).sum(), ts)]
        # k and v broadcast over the batch and head dims
        ts = [lib.tensor(a).requires_grad_() for a in (q, kv[:1, :1], kv[:1, :1] * 2)]
        o = lib.nn.functional.scaled_dot_product_attention(*ts)
        res += [_np(o)] + [_np(g) for g in lib.autograd.grad((o * o).sum(), ts)]
        # a float mask that requires grad
        ts = [lib.tensor(a).requires_grad_() for a in (q, k4, k4 * 0.3, mask)]
        o = lib.nn.functional.scaled_dot_product_attention(ts[0], ts[1], ts[2], attn_mask=ts[3])
        res += [_np(o)] + [_np(g) for g in lib.autograd.grad((o * o).sum(), ts)]
        outs.append(res)
    for a, b in zip(*outs):
        _close(a, b, "float64")


def test_fused_op_limits():
    op = strata._C._ops._scaled_dot_product_attention_backward
    q, k = strata.randn(2, 3, 5, 4), strata.randn(1, 3, 6, 4)
    with pytest.raises(RuntimeError, match="equal batch dimensions"):
        op(strata.randn(2, 3, 5, 4), q, k, k)
    with pytest.raises(RuntimeError, match="grad_out"):
        op(strata.randn(2, 3, 5, 3), q, q, q)
    with pytest.raises(RuntimeError, match="same dtype"):
        op(strata.randn(2, 3, 5, 4), q, q.double(), q)
    outs = op(strata.randn(2, 3, 5, 4, requires_grad=True), q.requires_grad_(), q, q)
    assert not any(t.requires_grad for t in outs)
    assert not strata._C._op_autograd_info("_scaled_dot_product_attention_backward")["differentiable"]
    meta = op(strata.empty(2, 3, 5, 4, device="meta"), *(strata.empty(2, 3, 5, 4, device="meta"),) * 3)
    assert [tuple(t.shape) for t in meta] == [(2, 3, 5, 4)] * 3


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_runs_in_float32(dtype):
    dt = getattr(strata, dtype)
    q = strata.randn(2, 3, 5, 4).to(dt).requires_grad_()
    o = strata.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
    assert o.dtype == dt
    (g,) = strata.autograd.grad(o.float().sum(), [q])
    assert g.dtype == dt
    qf = q.detach().float().requires_grad_()
    of = strata.nn.functional.scaled_dot_product_attention(qf, qf, qf, is_causal=True)
    (gf,) = strata.autograd.grad(of.sum(), [qf])
    np.testing.assert_allclose(_np(o.float()), _np(of), rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(_np(g.float()), _np(gf), rtol=5e-2, atol=5e-2)


@pytest.mark.parametrize("causal", [False, True])
def test_gradcheck_float64(causal):
    rng = np.random.default_rng(6)
    B, T, H, D = 2, 4, 2, 3
    base = [strata.tensor(rng.standard_normal((B, T, H * D))).requires_grad_() for _ in range(3)]

    def f(a, b, c):
        q, k, v = (t.view(B, T, H, D).transpose(1, 2) for t in (a, b, c))
        return strata.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)

    assert gradcheck(f, tuple(base), eps=1e-6, atol=1e-6, rtol=1e-4)
    mask = strata.tensor(rng.random((T, T)) > 0.3)

    def fm(a, b, c):
        q, k, v = (t.view(B, T, H, D).transpose(1, 2) for t in (a, b, c))
        return strata.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.7)

    assert gradcheck(fm, tuple(base), eps=1e-6, atol=1e-6, rtol=1e-4)
