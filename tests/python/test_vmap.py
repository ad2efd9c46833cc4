"""strata.vmap on the Vmap dispatch key: every batching rule against a Python loop
(and the rule path checked by the slow-path counter), the per-entry fallback and
its one warning, randomness modes, errors, autograd inside vmap (per-example
gradients against a loop and torch.func), is_grads_batched."""

import warnings

import numpy as np
import pytest
import torch

import strata
import strata.nn.functional as SF
from strata import _C
from strata.func._vmap import _lift_to_active_levels

RS = np.random.RandomState(0)


def T(*shape, dtype=np.float32):
    return strata.tensor(RS.randn(*shape).astype(dtype))


def close(a, b, atol=1e-5):
    a = a if isinstance(a, np.ndarray) else a.detach().numpy()
    b = b if isinstance(b, np.ndarray) else b.detach().numpy()
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_allclose(a, b, atol=atol, rtol=1e-5)


def loop(fn, args, in_dims):
    n = next(a.shape[d] for a, d in zip(args, in_dims) if d is not None)
    outs = [fn(*[a.select(d, i) if d is not None else a for a, d in zip(args, in_dims)]) for i in range(n)]
    if isinstance(outs[0], tuple):
        return tuple(strata.stack([o[j] for o in outs]) for j in range(len(outs[0])))
    return strata.stack(outs)


def check(fn, *args, in_dims=0, rule=True, atol=1e-5):
    """vmap(fn) against a loop; with rule=True the call must not take the per-entry path."""
    dims = in_dims if isinstance(in_dims, tuple) else (in_dims,) * len(args)
    before = _C._vmap_slow_path_calls()
    got = strata.vmap(fn, in_dims=dims)(*args)
    slow = _C._vmap_slow_path_calls() - before
    want = loop(fn, args, dims)
    if isinstance(want, tuple):
        for g, w in zip(got, want):
            close(g, w, atol)
    else:
        close(got, want, atol)
    if rule:
        assert slow == 0, f"{slow} calls took the per-entry fallback"


# ---- pointwise -----------------------------------------------------------------------------------------------------

UNARY = ["exp", "sin", "relu", "sigmoid", "neg", "abs", "tanh", "sqrt", "log1p"]


@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("in_dim", [0, 1, -1])
def test_unary(name, in_dim):
    x = T(3, 4, 5).abs()
    check(lambda a: getattr(strata, name)(a), x, in_dims=in_dim)


def test_binary_broadcasting_and_scalars():
    x, y, v = T(4, 3, 5), T(5), T(3, 4)
    check(lambda a, b: a + b, x, y, in_dims=(0, None))
    check(lambda a, b: a * b, x, T(5, 4), in_dims=(0, 1))      # both batched, different bdims
    check(lambda a, b: b - a, v, T(4, 5, 3), in_dims=(1, 0))   # [5, 3] - [3] (batched at dim 1)
    check(lambda a: a * 2.5 + 1, x)
    check(lambda a, b: strata.pow(a.abs(), b), x, y, in_dims=(0, None))
    check(lambda a, b: a / b, T(4), x, in_dims=(0, 0))          # logically 0-d times [3, 5]
    check(lambda a, b: strata.maximum(a, b), x, T(3, 5), in_dims=(0, None))
    check(lambda a, b: a < b, x, T(5), in_dims=(0, None))


def test_zero_d_mixed_dtype_promotion():
    # A logically 0-d float64 times a float32 [3]: float32, as without vmap.
    a = strata.tensor(RS.randn(4))  # float64
    b = T(4, 3)
    r = strata.vmap(lambda s, v: s * v)(a, b)
    assert r.dtype == strata.float32
    close(r, loop(lambda s, v: s * v, (a, b), (0, 0)))


def test_where_clamp_masked_fill():
    x, y = T(4, 3, 5), T(3, 5)
    cond = strata.tensor(RS.rand(4, 3, 5) > 0.5)
    check(lambda c, a, b: strata.where(c, a, b), cond, x, y, in_dims=(0, 0, None))
    check(lambda a: a.clamp(-0.5, 0.5), x)
    check(lambda a, lo: strata.clamp(a, min=lo), x, T(5), in_dims=(0, None))
    check(lambda a, m: a.masked_fill(m, 0.0), y, cond, in_dims=(None, 0))  # self not batched, mask batched
    check(lambda a, m: a.masked_fill(m, -1.0), x, cond[0], in_dims=(0, None))


# ---- reductions ----------------------------------------------------------------------------------------------------

REDUCTIONS = [
    ("sum", lambda a: a.sum()), ("sum1", lambda a: a.sum(1)), ("sum01k", lambda a: a.sum((0, 1), keepdim=True)),
    ("mean", lambda a: a.mean(-1)), ("amax", lambda a: a.amax(0)), ("max_dim", lambda a: a.max(1)),
    ("max_all", lambda a: a.max()), ("min_all", lambda a: a.min()), ("argmax", lambda a: a.argmax()),
    ("argmax1", lambda a: a.argmax(1)), ("var", lambda a: a.var(1)), ("std", lambda a: a.std()),
    ("logsumexp", lambda a: strata.logsumexp(a, 1)), ("prod", lambda a: a.prod()), ("prod1", lambda a: a.prod(1)),
    ("cumsum", lambda a: a.cumsum(0)), ("softmax", lambda a: a.softmax(-1)), ("log_softmax", lambda a: a.log_softmax(0)),
    ("norm", lambda a: a.norm()), ("any", lambda a: (a > 1).any(1)), ("all", lambda a: (a > -3).all()),
    ("sort", lambda a: a.sort(1)), ("topk", lambda a: a.topk(2, dim=-1)),
]


@pytest.mark.parametrize("fn", [r[1] for r in REDUCTIONS], ids=[r[0] for r in REDUCTIONS])
@pytest.mark.parametrize("in_dim", [0, 2])
def test_reductions(fn, in_dim):
    check(fn, T(4, 3, 5), in_dims=in_dim, atol=1e-4)


# ---- views ---------------------------------------------------------------------------------------------------------

VIEWS = [
    ("view", lambda a: a.contiguous().view(15)), ("reshape", lambda a: a.reshape(-1, 5)), ("permute", lambda a: a.permute(1, 0)),
    ("transpose", lambda a: a.transpose(0, 1)), ("unsqueeze0", lambda a: a.unsqueeze(0)),
    ("unsqueeze_last", lambda a: a.unsqueeze(-1)), ("squeeze", lambda a: a.unsqueeze(1).squeeze()),
    ("squeeze0", lambda a: a[:1].squeeze(0)), ("expand", lambda a: a.expand(2, 3, 5)),
    ("select", lambda a: a.select(1, 2)), ("slice", lambda a: a[:, 1:4:2]), ("index0", lambda a: a[0]),
    ("flatten", lambda a: a.flatten()), ("t", lambda a: a.t()), ("narrow", lambda a: a.narrow(1, 1, 3)),
    ("unbind", lambda a: a.unbind(1)), ("movedim", lambda a: a.movedim(0, 1)), ("T_contig", lambda a: a.t().contiguous()),
    ("unflatten", lambda a: a.unflatten(1, (5, 1))), ("diagonal", lambda a: a.diagonal()), ("flip", lambda a: a.flip(1)),
]


@pytest.mark.parametrize("fn", [v[1] for v in VIEWS], ids=[v[0] for v in VIEWS])
@pytest.mark.parametrize("in_dim", [0, 1])
def test_views(fn, in_dim):
    check(fn, T(4, 3, 5) if in_dim == 0 else T(3, 4, 5), in_dims=in_dim)


def test_view_shares_storage():
    x = T(4, 6)
    r = strata.vmap(lambda a: a.view(2, 3))(x)
    assert r._storage_ptr() == x._storage_ptr()


# ---- matmul family -------------------------------------------------------------------------------------------------

def test_matmul_family():
    A, Bm, v = T(4, 3, 5), T(5, 2), T(4, 5)
    check(strata.mm, A, Bm, in_dims=(0, None))
    check(strata.mm, T(3, 5), T(4, 5, 2), in_dims=(None, 0))
    check(strata.mm, A, T(4, 5, 2), in_dims=(0, 0))
    check(strata.matmul, T(3, 5, 4), Bm, in_dims=(2, None))
    check(strata.matmul, v, T(5, 2), in_dims=(0, None))          # 1-d @ 2-d
    check(strata.matmul, T(5), T(4, 5, 2), in_dims=(None, 0))
    check(strata.matmul, A, v, in_dims=(0, 0))                   # 2-d @ 1-d
    check(strata.matmul, T(3, 5), v, in_dims=(None, 0))
    check(strata.matmul, v, T(4, 5), in_dims=(0, 0))             # dot
    check(strata.matmul, v, T(5), in_dims=(0, None))
    check(strata.matmul, T(5), v, in_dims=(None, 0))
    check(strata.matmul, A, T(2, 5, 3), in_dims=(0, None))       # unbatched has more batch dims
    check(strata.bmm, T(4, 2, 3, 5), T(2, 5, 3), in_dims=(0, None))
    check(strata.dot, v, T(5), in_dims=(0, None))
    check(strata.mv, A, v, in_dims=(0, 0))
    W, b = T(6, 5), T(6)
    check(lambda x: SF.linear(x, W, b), v)
    check(lambda x: SF.linear(x, W, b), A)
    check(lambda x, w: SF.linear(x, w, b), v, T(4, 6, 5), in_dims=(0, 0))
    check(lambda x, w: SF.linear(x, w), T(5), T(4, 6, 5), in_dims=(None, 0))
    check(lambda c, m: strata.addmm(c, m, Bm, beta=0.5, alpha=2.0), T(4, 3, 2), A, in_dims=(0, 0))
    C = T(3, 2)
    check(lambda m: strata.addmm(C, m, Bm), A)


def test_cat_stack():
    x, y = T(4, 3, 2), T(3, 5)
    check(lambda a, b: strata.cat([a, b], 1), x, y, in_dims=(0, None))
    check(lambda a, b: strata.cat([b, a, b], -1), x, y, in_dims=(0, None))
    check(lambda a, b: strata.stack([a, b]), x, T(4, 3, 2), in_dims=(0, 0))
    check(lambda a, b: strata.stack([a, b], -1), x, T(3, 2), in_dims=(0, None))


def test_losses_norm_embedding():
    logits, tgt = T(4, 3, 6), strata.tensor(RS.randint(0, 6, (4, 3)))
    for red in ("mean", "sum", "none"):
        check(lambda a, t: SF.cross_entropy(a, t, reduction=red), logits, tgt, in_dims=(0, 0), atol=1e-4)
        check(lambda a, t: SF.cross_entropy(a, t, reduction=red), logits[:, 0], tgt[:, 0], in_dims=(0, 0))
        check(lambda a, t: SF.nll_loss(a.log_softmax(-1), t, reduction=red), logits, tgt, in_dims=(0, 0))
        check(lambda a, t: SF.mse_loss(a, t, reduction=red), logits, T(3, 6), in_dims=(0, None))
    tg = tgt.clone()
    tg[0, 1] = -100
    check(lambda a, t: SF.cross_entropy(a, t), logits, tg, in_dims=(0, 0), atol=1e-5)
    check(lambda a, t: SF.cross_entropy(a, t, label_smoothing=0.1), logits, tgt, in_dims=(0, 0), atol=1e-5)
    g, bb = T(6), T(6)
    check(lambda a: SF.layer_norm(a, (6,), g, bb), logits, atol=1e-4)
    E = T(10, 3)
    check(lambda i: SF.embedding(i, E), strata.tensor(RS.randint(0, 10, (4, 5))))


def test_conv_pool_norm_pad():
    w, bias = T(5, 3, 3, 3), T(5)
    x4, x3 = T(2, 4, 3, 8, 8), T(4, 3, 8, 8)  # logical [N, C, H, W] and [C, H, W]
    for x in (x4, x3):
        check(lambda a: SF.conv2d(a, w, bias, padding=1), x, atol=1e-4)
        check(lambda a: SF.max_pool2d(a, 2), x, in_dims=0)
        check(lambda a: SF.avg_pool2d(a, 2), x)
        check(lambda a: SF.adaptive_avg_pool2d(a, (3, 3)), x, atol=1e-5)
    w1, g, bb = T(4, 3, 3), T(3), T(3)
    check(lambda a: SF.conv1d(a, w1), T(2, 3, 10), in_dims=0, atol=1e-4)
    check(lambda a: SF.group_norm(a, 3, g, bb), x4, in_dims=1, atol=1e-4)
    check(lambda a: SF.pad(a, (1, 2, 0, 1), value=0.5), x3)
    # torch agrees
    r = strata.vmap(lambda a: SF.conv2d(a, w, bias, stride=2))(x4)
    tr = torch.vmap(lambda a: torch.nn.functional.conv2d(a, torch.tensor(w.numpy()), torch.tensor(bias.numpy()),
                                                         stride=2))(torch.tensor(x4.numpy()))
    close(r, tr.numpy(), 1e-4)


def test_advanced_indexing():
    a = T(4, 8, 3)
    i, j = strata.tensor(RS.randint(0, 8, (4, 5))), strata.tensor(RS.randint(0, 8, (5,)))
    y = strata.tensor(RS.randint(0, 3, (4,)))
    check(lambda x: x[j], a)                                    # only self batched
    check(lambda x: x[:, strata.tensor([0, 2])], a)
    a0 = a[0]
    check(lambda k: a0[k], i)                                   # only the index batched
    check(lambda x, k: x[k], a, i)                              # both
    check(lambda x, k: x[k, strata.tensor([0, 1, 2, 0, 1])], a, i)
    check(lambda x, t: x[0, t], a, y)                           # a batched 0-d index (logits[target])
    check(lambda x: x[a0[:, 0] > 0], a)                         # an unbatched mask
    check(lambda x, k: x[:, k % 3], a, i, rule=False)           # batched index at dim 1: loops


def test_attention():
    q, k, v = T(3, 2, 5, 4), T(2, 6, 4), T(3, 2, 6, 4)
    mask = strata.tensor(RS.rand(3, 5, 6) > 0.3)
    sdpa = SF.scaled_dot_product_attention
    check(lambda a, b, c: sdpa(a, b, c), q, k, v, in_dims=(0, None, 0), atol=1e-5)
    check(lambda a, b, c: sdpa(a, b, c, is_causal=True), q, k, v, in_dims=(0, None, 0), atol=1e-5)
    check(lambda a, b, c, m: sdpa(a, b, c, attn_mask=m), q, k, v, mask, in_dims=(0, None, 0, 0), atol=1e-5)
    check(lambda a, c: sdpa(a, a, c), T(3, 5, 4), T(5, 4), in_dims=(0, None), atol=1e-5)


def test_index_put_and_diag():
    x, M = T(3, 4), T(3, 4, 4)
    rows = strata.tensor([0, 2])
    check(lambda a: a.clone().index_put_((rows,), strata.tensor(5.0)), x)
    check(lambda v: strata.zeros(4, 4).index_put((rows,), v), T(3, 4), in_dims=0)   # unbatched self, batched values
    check(lambda a, v: a.clone().index_put((rows,), v, accumulate=True), M, T(3, 4), in_dims=(0, 0))

    def setitem(a, v):
        a = a.clone()
        a[:, strata.tensor([1, 3])] = v
        return a
    check(setitem, M, T(3, 2), in_dims=(0, 0))
    check(strata.diag, x)
    check(lambda a: strata.diag_embed(a, 1), M)
    check(strata.diagflat, x)
    zeros = strata.zeros(4)
    with pytest.raises(RuntimeError, match="not batched"):
        strata.vmap(lambda v: zeros.index_put_((rows,), v[:2]))(x)


def test_gather_scatter_repeat_tril_one_hot_batch_norm():
    x, idx = T(4, 3, 5), strata.tensor(RS.randint(0, 5, (4, 3, 2)))
    src = T(4, 3, 2)
    check(lambda a, i: a.gather(1, i), x, idx)
    check(lambda a, i: a.gather(-1, i), x[0], idx, in_dims=(None, 0))
    check(lambda a, i: a.gather(1, i), x, idx[0], in_dims=(0, None))
    check(lambda a, i, s: a.scatter(1, i, s), x, idx, src)
    check(lambda a, i, s: a.scatter_add(1, i, s), x[0], idx, src, in_dims=(None, 0, 0))
    check(lambda a, i: a.scatter(1, i, 2.0), x, idx)
    check(lambda a, i, s: a.clone().scatter_add_(1, i, s), x, idx, src)
    check(lambda a: a.repeat(2, 1, 3), x[:, 0])
    check(lambda a: strata.tril(a, -1), x)
    check(lambda a: strata.triu(a), x, in_dims=2)
    check(lambda i: SF.one_hot(i, 5), idx[..., 0])
    rm, rv, w, b = T(3), T(3).abs() + 0.5, T(3), T(3)
    check(lambda a: SF.batch_norm(a, rm, rv, w, b, training=False), T(4, 2, 3, 5), atol=1e-5)
    check(lambda a: SF.batch_norm(a, None, None, training=True), T(4, 2, 3, 5), rule=False, atol=1e-5)


def test_clone_cast_fill_copy():
    x = T(3, 4, 5)
    check(lambda a: a.clone(), x, in_dims=1)
    check(lambda a: a.double(), x, in_dims=2)
    check(lambda a: a.clone().fill_(2.0), x)
    check(lambda a: a.clone().zero_(), x)
    check(lambda a, b: a.clone().copy_(b), x, T(5), in_dims=(0, None))
    check(lambda a, b: a.clone().copy_(b), x, T(3, 5), in_dims=(0, 0))


# ---- nesting, in-place, structures ---------------------------------------------------------------------------------

def test_nested_matches_torch():
    x, y = RS.randn(3, 5).astype(np.float32), RS.randn(4, 5).astype(np.float32)
    outs = []
    for m in (strata, torch):
        f = m.vmap(m.vmap(lambda a, b: (a * b).sum() + a.max(), in_dims=(None, 0)), in_dims=(0, None))
        outs.append(f(m.tensor(x), m.tensor(y)))
    close(outs[0], outs[1].numpy())
    assert tuple(outs[0].shape) == (3, 4)
    # An outer batched tensor captured by the inner function.
    a = T(3, 4)
    r = strata.vmap(lambda u: strata.vmap(lambda v: u @ v)(T(2, 4)))(a)
    assert r.shape == (3, 2)


def test_inplace():
    x = T(3, 4)
    x0 = x.clone()
    r = strata.vmap(lambda a: a.add_(1))(x)
    close(x, x0 + 1)
    close(r, x0 + 1)
    buf = strata.zeros(4)
    with pytest.raises(RuntimeError, match="not batched"):
        strata.vmap(lambda a: buf.add_(a))(x)
    with pytest.raises(RuntimeError):
        torch.vmap(lambda a: torch.zeros(4).add_(a))(torch.ones(3, 4))


def test_structures_and_out_dims():
    x, y = T(3, 4), T(4, 3)
    r = strata.vmap(lambda d: {"s": d["a"] + d["b"], "p": (d["a"] * 2, d["b"].sum())},
                    in_dims=({"a": 0, "b": 1},))({"a": x, "b": y})
    close(r["s"], x + y.t())
    close(r["p"][1], y.sum(0))
    r = strata.vmap(lambda a: (a, a.sum()), out_dims=(1, 0))(x)
    close(r[0], x.t())
    r = strata.vmap(lambda a, b: a * b, in_dims=(0, None), out_dims=-1)(x, T(4))
    assert r.shape == (4, 3)
    unb = T(4)
    r = strata.vmap(lambda a: unb)(x)  # an unbatched result is expanded
    close(r, unb.expand(3, 4))


def test_chunk_size():
    x = T(10, 4)
    f = lambda a: (a.exp() @ a, a.sum())  # noqa: E731
    full, chunked = strata.vmap(f)(x), strata.vmap(f, chunk_size=3)(x)
    for a, b in zip(full, chunked):
        close(a, b)


# ---- fallback ------------------------------------------------------------------------------------------------------

def test_fallback_warns_once_and_is_correct():
    x = T(5, 3, 3)
    before = _C._vmap_slow_path_calls()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        r1 = strata.vmap(strata.linalg.det)(x)
        r2 = strata.vmap(strata.linalg.det)(x)
    assert _C._vmap_slow_path_calls() > before
    ours = [x for x in w if "no batching rule" in str(x.message)]
    assert len(ours) <= 1  # once per op per process (an earlier test may already have seen it)
    want = strata.stack([strata.linalg.det(x[i]) for i in range(5)])
    close(r1, want, 1e-4)
    close(r2, want, 1e-4)


def test_fallback_warning_text_once():
    x = T(4, 3, 3)
    f = lambda a: strata.histc(a, bins=4).sum() + strata.linalg.slogdet(a)[1]  # noqa: E731
    _C._vmap_forget_warnings()  # other tests may have run these ops already
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for _ in range(3):
            r = strata.vmap(f)(x)
    msgs = [str(x.message) for x in w if "no batching rule" in str(x.message)]
    assert len(msgs) == 2 and "histc" in msgs[0] and "slogdet" in msgs[1], msgs
    close(r, loop(f, (x,), (0,)), 1e-4)


def test_fallback_with_nested_and_inplace():
    x = T(2, 3, 4, 4)
    r = strata.vmap(strata.vmap(strata.linalg.inv))(x)
    close(r, strata.linalg.inv(x), 1e-4)
    y = T(3, 4)
    y0 = y.clone()
    strata.vmap(lambda a: a.sub_(strata.linalg.det(a.outer(a)).mul(0)))(y)  # in place, next to a loop
    close(y, y0)


# ---- randomness ----------------------------------------------------------------------------------------------------

def test_randomness_modes():
    x = strata.ones(4, 3)
    for m, xx in ((strata, x), (torch, torch.ones(4, 3))):
        with pytest.raises(RuntimeError, match="randomness error mode"):
            m.vmap(lambda a: a * m.rand(3))(xx)
    r = strata.vmap(lambda a: a * strata.rand(3), randomness="different")(x)
    assert r.shape == (4, 3) and len({tuple(row) for row in r.tolist()}) == 4
    r = strata.vmap(lambda a: a * strata.rand(3), randomness="same")(x)
    assert len({tuple(row) for row in r.tolist()}) == 1
    # Random op on a batched input: "same" gives every entry the same mask.
    y = strata.ones(4, 50)
    r = strata.vmap(lambda a: SF.dropout(a, 0.5), randomness="same")(y)
    assert len({tuple(row) for row in r.tolist()}) == 1
    r = strata.vmap(lambda a: SF.dropout(a, 0.5), randomness="different")(y)
    assert len({tuple(row) for row in r.tolist()}) == 4
    with pytest.raises(RuntimeError, match="Only allowed values"):
        strata.vmap(lambda a: a, randomness="sometimes")


def test_nested_randomness():
    x = strata.ones(3, 4, 2)

    def distinct(t):
        return len({tuple(v) for v in t.reshape(-1, 2).tolist()})
    inner = lambda a: a * strata.rand(2)  # noqa: E731
    r = strata.vmap(strata.vmap(inner, randomness="different"), randomness="different")(x)
    assert distinct(r) == 12
    r = strata.vmap(strata.vmap(inner, randomness="same"), randomness="different")(x)
    assert distinct(r) == 3 and all(distinct(r[i]) == 1 for i in range(3))
    r = strata.vmap(strata.vmap(inner, randomness="different"), randomness="same")(x)
    assert distinct(r) == 4 and all(distinct(r[:, j]) == 1 for j in range(4))
    with pytest.raises(RuntimeError, match="randomness error mode"):
        strata.vmap(strata.vmap(inner, randomness="different"))(x)


# ---- errors --------------------------------------------------------------------------------------------------------

def test_errors_like_torch():
    for m in (strata, torch):
        with pytest.raises(ValueError, match="same size in the mapped dimension"):
            m.vmap(m.add)(m.ones(2, 3), m.ones(3, 3))
        with pytest.raises(ValueError, match="in_dims is not compatible with the structure"):
            m.vmap(m.add, in_dims=(0, 0, 0))(m.ones(2), m.ones(2))
        with pytest.raises(ValueError, match="must only return Tensors"):
            m.vmap(lambda a: 3)(m.ones(2))
        with pytest.raises(ValueError, match="can not return a BatchedTensor when out_dim is None"):
            m.vmap(lambda a: a, out_dims=None)(m.ones(2))
        with pytest.raises(ValueError, match="expected in_dim to satisfy"):
            m.vmap(lambda a: a, in_dims=2)(m.ones(2, 3))
        with pytest.raises(ValueError, match="cannot vmap over non-Tensor"):
            m.vmap(lambda a: a, in_dims=0)(3)
        with pytest.raises(ValueError):
            m.vmap(m.add, in_dims=(None, None))(m.ones(2), m.ones(2))
        with pytest.raises(RuntimeError):
            m.vmap(lambda a: a.sum().item())(m.ones(2, 3))
    with pytest.raises(IndexError):
        strata.vmap(lambda a: a.sum(5))(strata.ones(2, 3))
    with pytest.raises(RuntimeError, match="batched tensor"):
        strata.vmap(lambda a: a if strata.equal(a, a * 0) else -a)(strata.tensor([[0.0], [1.0]]))
    with pytest.raises(RuntimeError, match="batched tensor"):
        strata.vmap(lambda a: strata.ones(3)[strata.tensor(True) & (a > 0)])(strata.tensor([1.0, -1.0]))
    assert _C._vmap_levels() == []  # every level was left, errors included


def test_batched_repr():
    seen = []
    strata.vmap(lambda a: seen.append(repr(a)) or a)(strata.ones(2, 3))
    assert seen[0].startswith("BatchedTensor(lvl=") and "bdim=0" in seen[0]


# ---- autograd ------------------------------------------------------------------------------------------------------

def _mlp_params(din=12, dh=8, dout=5):
    return [strata.tensor(RS.randn(dh, din).astype(np.float32) * 0.3, requires_grad=True),
            strata.tensor(RS.randn(dh).astype(np.float32) * 0.1, requires_grad=True),
            strata.tensor(RS.randn(dout, dh).astype(np.float32) * 0.3, requires_grad=True),
            strata.tensor(RS.randn(dout).astype(np.float32) * 0.1, requires_grad=True)]


def _loss(m, params, x, y):
    W1, b1, W2, b2 = params
    h = m.nn.functional.linear(x, W1, b1).relu()
    return m.nn.functional.cross_entropy(m.nn.functional.linear(h, W2, b2)[None], y[None])


def test_per_example_gradients_mlp():
    params = _mlp_params()
    x, y = T(7, 12), strata.tensor(RS.randint(0, 5, (7,)))

    def per_example(xi, yi):
        lifted = [_lift_to_active_levels(p) for p in params]
        return strata.autograd.grad(_loss(strata, lifted, xi, yi), lifted)

    before = _C._vmap_slow_path_calls()
    got = strata.vmap(per_example)(x, y)
    assert _C._vmap_slow_path_calls() == before, "the MLP's forward and backward should use rules only"
    # Against a loop.
    for i in range(7):
        want = strata.autograd.grad(_loss(strata, params, x[i], y[i]), params)
        for g, w in zip(got, want):
            close(g[i], w, 1e-5)
    # Against torch.func.
    tp = [torch.tensor(p.detach().numpy()) for p in params]
    tg = torch.func.vmap(torch.func.grad(lambda ps, a, b: _loss(torch, ps, a, b)), in_dims=(None, 0, 0))(
        tp, torch.tensor(x.numpy()), torch.tensor(y.numpy()))
    for g, w in zip(got, tg):
        close(g, w.numpy(), 1e-5)


def test_grad_of_unlifted_input_inside_vmap_raises():
    w = strata.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="not batched at vmap level"):
        strata.vmap(lambda a: strata.autograd.grad((a * w).sum(), w))(strata.ones(2, 3))


def test_backward_inside_vmap_raises():
    w = strata.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="backward\\(\\) called on a batched tensor inside vmap"):
        strata.vmap(lambda a: ((a * w).sum().backward(), a)[1])(strata.ones(2, 3))
    assert w.grad is None


def test_grad_wrt_batched_input_and_create_graph():
    x = T(4, 3)

    def f(a):
        b = _lift_to_active_levels(strata.zeros(3, requires_grad=True)) + a  # batched, part of the graph
        (g,) = strata.autograd.grad((b ** 3).sum(), b, create_graph=True)
        return g
    close(strata.vmap(f)(x), 3 * x ** 2, 1e-4)


def test_nested_per_example_second_order():
    x, w = T(3, 4, 2), T(2).requires_grad_()

    def f(a):
        wl = _lift_to_active_levels(w)
        (g,) = strata.autograd.grad(((a * wl) ** 3).sum(), wl, create_graph=True)
        (h,) = strata.autograd.grad(g.sum(), wl)
        return g, h
    g, h = strata.vmap(strata.vmap(f))(x)
    wd = w.detach()
    close(g, 3 * (x * wd) ** 2 * x, 1e-4)
    close(h, 6 * (x * wd) * x * x, 1e-4)


def test_is_grads_batched_jacobian():
    xs = T(4)
    x = xs.clone().requires_grad_()
    y = x.sin() * 2 + x.sum()
    (jac,) = strata.autograd.grad(y, x, strata.eye(4), is_grads_batched=True)
    tx = torch.tensor(xs.numpy(), requires_grad=True)
    ty = tx.sin() * 2 + tx.sum()
    (tjac,) = torch.autograd.grad(ty, tx, torch.eye(4), is_grads_batched=True)
    close(jac, tjac.numpy())
    # Through a linear layer (mm / t / sum-to-size in the backward).
    W = strata.tensor(RS.randn(3, 4).astype(np.float32), requires_grad=True)
    out = SF.linear(x, W).tanh()
    jx, jw = strata.autograd.grad(out, (x, W), strata.eye(3), is_grads_batched=True)
    tW = torch.tensor(W.detach().numpy(), requires_grad=True)
    tout = torch.nn.functional.linear(tx, tW).tanh()
    tjx, tjw = torch.autograd.grad(tout, (tx, tW), torch.eye(3), is_grads_batched=True)
    close(jx, tjx.numpy(), 1e-5)
    close(jw, tjw.numpy(), 1e-5)


def test_vmap_of_backward_through_outside_graph():
    # Existing behaviour: a vmapped function of a captured tensor that requires grad, then .backward() outside.
    w = strata.tensor(RS.randn(4).astype(np.float32), requires_grad=True)
    x = T(3, 4)
    strata.vmap(lambda a: (a * w).sum())(x).sum().backward()
    close(w.grad, x.sum(0))


def test_func_namespace():
    from strata.func._vmap import vmap
    assert strata.vmap is vmap


def test_detach_data_and_requires_grad_keep_a_tensor_batched():
    # detach()/.data of a batched tensor used to give a plain tensor that still carried the Vmap
    # key (numpy() then refused it outside vmap), and requires_grad_() on a batched tensor set
    # the flag on the wrapper only, so gradients taken inside vmap came back as zeros.
    x = strata.randn(5, 4, dtype=strata.float64)
    cases = [(lambda v: v.sin().detach(), np.sin(x.numpy())), (lambda v: v.sin().data, np.sin(x.numpy())),
             (lambda v: v.detach().requires_grad_(), x.numpy())]
    for f, want in cases:
        out = strata.vmap(f)(x)
        assert tuple(out.shape) == (5, 4)
        np.testing.assert_allclose(out.detach().numpy(), want, rtol=1e-14)

    def per_entry_grad(v):
        h = v.detach().requires_grad_()
        (g,) = strata.autograd.grad((h.sin() * h.sum()).sum(), [h])
        return g
    got = strata.vmap(per_entry_grad)(x).numpy()
    xn = x.numpy()
    want = np.cos(xn) * xn.sum(1, keepdims=True) + (np.sin(xn)).sum(1, keepdims=True)
    np.testing.assert_allclose(got, want, rtol=1e-12)
