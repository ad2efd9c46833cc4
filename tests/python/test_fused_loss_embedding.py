"""The fused backward kernels of cross_entropy (_cross_entropy_loss_backward) and embedding
(_embedding_dense_backward), used when no graph of the backward is recorded: gradients against torch for every
option, the composite path (create_graph=True) agreeing with them, gradcheck/gradgradcheck in float64, and the
ops' own argument checks."""
import itertools

import numpy as np
import pytest

import strata
from strata.autograd import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")

F = lambda lib: lib.nn.functional  # noqa: E731
TOL = {"float32": (2e-5, 2e-6), "float64": (1e-10, 1e-12)}


def _close(got, want, dtype):
    rtol, atol = TOL[dtype]
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol * max(1.0, float(np.abs(want).max(initial=0))))


def _ce_inputs(shape, probs, weighted, ignore, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * 3
    c = shape[1] if len(shape) > 1 else shape[0]
    if probs:
        t = rng.random(shape)
        t /= t.sum(axis=1 if len(shape) > 1 else 0, keepdims=True)
    else:
        t = rng.integers(0, c, (shape[0],) + shape[2:] if len(shape) > 1 else ())
        if ignore and t.size > 1:
            t.flat[:: 3] = ignore  # every third position ignored
    w = rng.random(c) + 0.5 if weighted else None
    return x, t, w


def _ce_grads(lib, x, t, w, dtype, create_graph=False, transpose=False, **kw):
    dt = getattr(lib, dtype)
    X = lib.tensor(x.T.copy(), dtype=dt).t() if transpose else lib.tensor(x, dtype=dt)  # non-contiguous input
    X.requires_grad_()
    T = lib.tensor(t, dtype=dt) if t.dtype.kind == "f" else lib.tensor(t)
    W = None if w is None else lib.tensor(w, dtype=dt)
    loss = F(lib).cross_entropy(X, T, weight=W, **kw)
    g = lib.tensor(np.random.default_rng(1).standard_normal(tuple(loss.shape)), dtype=dt)
    (gx,) = lib.autograd.grad(loss, [X], g, create_graph=create_graph)
    return loss.detach().numpy(), gx.detach().numpy()


CE_SHAPES = [(64, 65), (5, 7, 3), (2, 4, 3, 2), (6,), (1, 1), (3, 1, 4)]


@pytest.mark.parametrize("shape", CE_SHAPES, ids=str)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cross_entropy_class_indices(shape, reduction, dtype):
    for weighted, smoothing, ignore in itertools.product([False, True], [0.0, 0.3], [None, 2]):
        x, t, w = _ce_inputs(shape, False, weighted, ignore)
        kw = dict(reduction=reduction, label_smoothing=smoothing, ignore_index=-100 if ignore is None else ignore)
        want = _ce_grads(torch, x, t, w, dtype, **kw)
        got = _ce_grads(strata, x, t, w, dtype, **kw)
        composite = _ce_grads(strata, x, t, w, dtype, create_graph=True, **kw)
        for a, b, c in zip(got, want, composite):
            _close(a, b, dtype)
            _close(c, b, dtype)


@pytest.mark.parametrize("shape", CE_SHAPES, ids=str)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cross_entropy_probabilities(shape, reduction, dtype):
    for weighted, smoothing in itertools.product([False, True], [0.0, 0.25]):
        x, t, w = _ce_inputs(shape, True, weighted, None)
        kw = dict(reduction=reduction, label_smoothing=smoothing)
        want = _ce_grads(torch, x, t, w, dtype, **kw)
        got = _ce_grads(strata, x, t, w, dtype, **kw)
        for a, b in zip(got, want):
            _close(a, b, dtype)


def test_cross_entropy_non_contiguous_and_all_ignored():
    x, t, w = _ce_inputs((9, 5), False, True, 1)
    for kw in [dict(), dict(label_smoothing=0.1, ignore_index=1)]:
        for a, b in zip(_ce_grads(strata, x, t, w, "float32", transpose=True, **kw),
                        _ce_grads(torch, x, t, w, "float32", transpose=True, **kw)):
            _close(a, b, "float32")
    # Every target ignored: 'mean' divides by nothing; torch gives a nan loss and a zero gradient.
    t = np.full(9, 3)
    for red in ["mean", "sum", "none"]:
        lg, gg = _ce_grads(strata, x, t, None, "float32", ignore_index=3, reduction=red)
        lt, gt = _ce_grads(torch, x, t, None, "float32", ignore_index=3, reduction=red)
        np.testing.assert_allclose(lg, lt, equal_nan=True)
        np.testing.assert_array_equal(gg, gt)


def test_cross_entropy_probability_target_and_weight_gradients_still_flow():
    # The fused op only gives input's gradient; the target's comes from the composite beside it.
    x, t, _ = _ce_inputs((4, 6), True, False, None)
    res = []
    for lib in (strata, torch):
        X = lib.tensor(x, requires_grad=True)
        T = lib.tensor(t, requires_grad=True)
        F(lib).cross_entropy(X, T, label_smoothing=0.2).backward()
        res.append((X.grad.numpy(), T.grad.numpy()))
    for a, b in zip(*res):
        _close(a, b, "float64")


def test_cross_entropy_empty_batch_and_half():
    for lib in (strata, torch):
        X = lib.zeros(0, 4, requires_grad=True)
        F(lib).cross_entropy(X, lib.zeros(0, dtype=lib.int64), reduction="sum").backward()
        assert tuple(X.grad.shape) == (0, 4)
    x, t, _ = _ce_inputs((8, 5), False, False, None)
    got = []
    for lib in (strata, torch):
        X = lib.tensor(x, dtype=lib.bfloat16, requires_grad=True)
        F(lib).cross_entropy(X, lib.tensor(t)).backward()
        assert X.grad.dtype == lib.bfloat16
        got.append(X.grad.float().numpy())
    np.testing.assert_allclose(got[0], got[1], rtol=2e-2, atol=2e-3)


@pytest.mark.parametrize("kw", [dict(), dict(label_smoothing=0.2), dict(reduction="none"), dict(reduction="sum"),
                                dict(ignore_index=1)], ids=str)
def test_cross_entropy_gradcheck_gradgradcheck(kw):
    x, t, w = _ce_inputs((4, 3, 2), False, True, None)
    t.flat[0] = 1
    X = strata.tensor(x, requires_grad=True)
    T, W = strata.tensor(t), strata.tensor(w)
    fn = lambda a: F(strata).cross_entropy(a, T, weight=W, **kw)  # noqa: E731
    assert gradcheck(fn, (X,))
    assert gradgradcheck(fn, (X,))
    xp, tp, _ = _ce_inputs((3, 4), True, False, None)
    Tp = strata.tensor(tp, requires_grad=True)
    fn = lambda a, b: F(strata).cross_entropy(a, b, **kw) if "ignore_index" not in kw else F(strata).cross_entropy(a, b)  # noqa: E731,E501
    assert gradcheck(fn, (strata.tensor(xp, requires_grad=True), Tp))
    assert gradgradcheck(fn, (strata.tensor(xp, requires_grad=True), Tp))


def test_cross_entropy_weight_still_not_differentiable():
    x, t, w = _ce_inputs((4, 3), False, True, None)
    W = strata.tensor(w, requires_grad=True)
    loss = F(strata).cross_entropy(strata.tensor(x, requires_grad=True), strata.tensor(t), weight=W)
    with pytest.raises(NotImplementedError, match="weight"):
        loss.backward()


# ---- embedding ----------------------------------------------------------------------------------------------

def _emb_grads(lib, w, idx, dtype, create_graph=False, non_contig_grad=False, **kw):
    dt = getattr(lib, dtype)
    W = lib.tensor(w, dtype=dt, requires_grad=True)
    out = F(lib).embedding(lib.tensor(idx), W, **kw)
    g = np.random.default_rng(2).standard_normal(tuple(out.shape))
    G = lib.tensor(g, dtype=dt)
    if non_contig_grad and g.ndim >= 2:
        G = lib.tensor(np.swapaxes(g, 0, -1).copy(), dtype=dt).transpose(0, -1)
    (gw,) = lib.autograd.grad(out, [W], G, create_graph=create_graph)
    return out.detach().numpy(), gw.detach().numpy()


EMB_CASES = [((70, 128), (16, 128)), ((10, 3), (4, 5)), ((5, 40), (7,)), ((3, 17), ()), ((6, 4), (0,)),
             ((0, 4), (0, 3)), ((4, 0), (5,))]


@pytest.mark.parametrize("wshape,ishape", EMB_CASES, ids=str)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_embedding_backward(wshape, ishape, dtype):
    rng = np.random.default_rng(3)
    w = rng.standard_normal(wshape)
    idx = rng.integers(0, max(wshape[0], 1), ishape) if wshape[0] else np.zeros(ishape, dtype=np.int64)
    pads = [None] + ([0, wshape[0] - 1, -1] if wshape[0] else [])
    for padding_idx, scale, nc in itertools.product(pads, [False, True], [False, True]):
        kw = dict(padding_idx=padding_idx, scale_grad_by_freq=scale)
        want = _emb_grads(torch, w, idx, dtype, non_contig_grad=nc, **kw)
        got = _emb_grads(strata, w, idx, dtype, non_contig_grad=nc, **kw)
        composite = _emb_grads(strata, w, idx, dtype, create_graph=True, non_contig_grad=nc, **kw)
        for a, b, c in zip(got, want, composite):
            _close(a, b, dtype)
            _close(c, b, dtype)


def test_embedding_backward_large_parallel_and_int32_indices():
    # Large enough for the column-split threads; int32 indices; repeated indices summed in order.
    rng = np.random.default_rng(4)
    w = rng.standard_normal((300, 100))
    idx = rng.integers(0, 300, (64, 512))
    got = _emb_grads(strata, w, idx.astype(np.int32), "float32", scale_grad_by_freq=True)
    want = _emb_grads(torch, w, idx, "float32", scale_grad_by_freq=True)
    for a, b in zip(got, want):
        _close(a, b, "float32")


def test_embedding_gradcheck_gradgradcheck():
    idx = strata.tensor([[0, 2, 2], [3, 0, 1]])
    w = strata.tensor(np.random.default_rng(5).standard_normal((4, 3)), requires_grad=True)
    assert gradcheck(lambda a: F(strata).embedding(idx, a), (w,))
    # padding_idx and scale_grad_by_freq change the gradient on purpose (torch's fail gradcheck too), but the
    # backward is still differentiable with respect to grad_output.
    for kw in [dict(), dict(padding_idx=2), dict(scale_grad_by_freq=True)]:
        assert gradgradcheck(lambda a: F(strata).embedding(idx, a, **kw), (w,))  # noqa: B023


# ---- the fused ops themselves --------------------------------------------------------------------------------

def _profiled_ops(fn):
    with strata.profiler.profile() as prof:
        fn()
    return {e.key for e in prof.key_averages()}


def test_plain_backward_uses_the_fused_kernels():
    W = strata.randn(10, 6).requires_grad_()
    idx = strata.tensor([[1, 2, 3], [4, 5, 9]])

    def loss():
        logits = F(strata).embedding(idx, W)
        return F(strata).cross_entropy(logits.reshape(-1, 6), strata.tensor([0, 1, 2, 3, 4, 5]))

    keys = _profiled_ops(lambda: loss().backward())
    assert any("_cross_entropy_loss_backward" in k for k in keys), keys
    assert any("_embedding_dense_backward" in k for k in keys), keys
    keys = _profiled_ops(lambda: strata.autograd.grad(loss(), [W], create_graph=True))
    assert not any("_cross_entropy_loss_backward" in k or "_embedding_dense_backward" in k for k in keys), keys


def test_fused_ops_checks_meta_and_no_history():
    ops = strata._C._ops
    x = strata.randn(3, 4).requires_grad_()
    gx = ops._cross_entropy_loss_backward(strata.tensor(1.0), x, strata.tensor([0, 1, 3]))
    assert not gx.requires_grad and tuple(gx.shape) == (3, 4)
    assert not strata._C._op_autograd_info("_cross_entropy_loss_backward")["differentiable"]
    assert not strata._C._op_autograd_info("_embedding_dense_backward")["differentiable"]
    with pytest.raises(IndexError, match="out of bounds"):
        ops._cross_entropy_loss_backward(strata.tensor(1.0), x, strata.tensor([0, 1, 4]))
    with pytest.raises(RuntimeError, match="grad_output"):
        ops._cross_entropy_loss_backward(strata.ones(3), x, strata.tensor([0, 1, 2]))
    with pytest.raises(RuntimeError, match="target size"):
        ops._cross_entropy_loss_backward(strata.tensor(1.0), x, strata.tensor([0, 1]))
    with pytest.raises(ValueError, match="reduction"):
        ops._cross_entropy_loss_backward(strata.tensor(1.0), x, strata.tensor([0, 1, 2]), None, "avg")
    with pytest.raises(RuntimeError, match="weight"):
        ops._cross_entropy_loss_backward(strata.tensor(1.0), x, strata.tensor([0, 1, 2]), strata.ones(3))
    m = ops._cross_entropy_loss_backward(strata.ones(3, device="meta"), strata.empty(3, 4, device="meta"),
                                         strata.zeros(3, dtype=strata.int64, device="meta"), None, "none")
    assert m.device.type == "meta" and tuple(m.shape) == (3, 4)

    g = strata.randn(2, 3, 5)
    out = ops._embedding_dense_backward(g, strata.tensor([[0, 1, 1], [6, 0, 2]]), 7, -1, False)
    assert tuple(out.shape) == (7, 5) and not out.requires_grad
    with pytest.raises(IndexError, match="out of range"):
        ops._embedding_dense_backward(g, strata.tensor([[0, 1, 1], [7, 0, 2]]), 7, -1, False)
    with pytest.raises(IndexError, match="out of range"):
        ops._embedding_dense_backward(g, strata.tensor([[0, 1, 1], [-1, 0, 2]]), 7, -1, False)
    with pytest.raises(RuntimeError, match="indices"):
        ops._embedding_dense_backward(g, strata.tensor([0, 1]), 7, -1, False)
    with pytest.raises(RuntimeError, match="Long, Int"):
        ops._embedding_dense_backward(g, strata.zeros(2, 3), 7, -1, False)
    m = ops._embedding_dense_backward(strata.empty(4, 5, device="meta"),
                                      strata.zeros(4, dtype=strata.int64, device="meta"), 9, -1, False)
    assert m.device.type == "meta" and tuple(m.shape) == (9, 5)
