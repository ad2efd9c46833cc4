"""The fused backward kernels (_conv2d_backward, _layer_norm_backward) that conv1d/conv2d and layer_norm use when
no graph of the backward is recorded: gradients against torch at the main job's shapes and at awkward ones, the
composite path (create_graph=True) agreeing with the fused one, and the fused ops' own limits."""
import numpy as np
import pytest

import strata
from strata.autograd import gradcheck

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore:Using padding=.same.:UserWarning")

TOL = {"float32": (1e-4, 1e-5), "float64": (1e-10, 1e-12)}


def _close(got, want, dtype):
    # Sums of thousands of float32 products: the absolute error scales with the largest entry.
    rtol, atol = TOL[dtype]
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol * max(1.0, float(np.abs(want).max(initial=0))))


def _grads(lib, fn, arrays, dtype, create_graph=False):
    ts = [lib.tensor(a, dtype=getattr(lib, dtype)).requires_grad_() for a in arrays]
    out = fn(lib, *ts)
    g = lib.tensor(np.random.default_rng(1).standard_normal(tuple(out.shape)), dtype=getattr(lib, dtype))
    grads = lib.autograd.grad(out, ts, g, create_graph=create_graph)
    return [x.detach().numpy() for x in (out, *grads)]  # the forward result too


def _rand(*shape, seed=0):
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape)


F = lambda lib: lib.nn.functional  # noqa: E731

CONV_CASES = [
    # The digits CNN's three layers (batch 64).
    ("digits_conv1", lambda L, x, w, b: F(L).conv2d(x, w, b, padding=1), [(64, 1, 8, 8), (32, 1, 3, 3), (32,)]),
    ("digits_conv2", lambda L, x, w, b: F(L).conv2d(x, w, b, stride=2, padding=1),
     [(64, 32, 8, 8), (64, 32, 3, 3), (64,)]),
    ("digits_conv3", lambda L, x, w, b: F(L).conv2d(x, w, b, stride=2, padding=1),
     [(64, 64, 4, 4), (64, 64, 3, 3), (64,)]),
    ("groups_dilation", lambda L, x, w: F(L).conv2d(x, w, stride=(1, 2), padding=(2, 1), dilation=(2, 1), groups=3),
     [(3, 6, 9, 7), (9, 2, 3, 3)]),
    ("same_even_kernel", lambda L, x, w, b: F(L).conv2d(x, w, b, padding="same"), [(2, 3, 6, 5), (4, 3, 4, 2), (4,)]),
    ("kernel_larger_than_stride_gaps", lambda L, x, w: F(L).conv2d(x, w, stride=3), [(2, 2, 10, 11), (3, 2, 2, 2)]),
    # Channels-last path (>= 8 channels per group, output narrower than 16) with groups, and the row path.
    ("channels_last_groups", lambda L, x, w, b: F(L).conv2d(x, w, b, stride=(2, 1), padding=(1, 2), dilation=(1, 2),
                                                            groups=2), [(3, 16, 7, 9), (6, 8, 3, 2), (6,)]),
    ("wide_image", lambda L, x, w, b: F(L).conv2d(x, w, b, padding=1), [(2, 8, 20, 21), (4, 8, 3, 3), (4,)]),
    # Column buffers over 4M elements: images in two chunks, on both paths.
    ("chunked_channels_last", lambda L, x, w: F(L).conv2d(x, w, padding=1), [(10, 256, 15, 15), (2, 256, 3, 3)]),
    ("chunked_rows", lambda L, x, w: F(L).conv2d(x, w, padding=1), [(9, 64, 32, 32), (2, 64, 3, 3)]),
    ("unbatched", lambda L, x, w: F(L).conv2d(x, w, padding=1), [(3, 5, 5), (2, 3, 3, 3)]),
    ("conv1d", lambda L, x, w, b: F(L).conv1d(x, w, b, stride=2, padding=2, dilation=2), [(4, 3, 17), (5, 3, 3), (5,)]),
    ("conv1d_same_groups", lambda L, x, w: F(L).conv1d(x, w, padding="same", groups=2), [(2, 4, 9), (6, 2, 4)]),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,fn,shapes", CONV_CASES, ids=[c[0] for c in CONV_CASES])
def test_conv_grads_match_torch(name, fn, shapes, dtype):
    arrays = [_rand(*s, seed=i) for i, s in enumerate(shapes)]
    for got, want in zip(_grads(strata, fn, arrays, dtype), _grads(torch, fn, arrays, dtype)):
        _close(got, want, dtype)


@pytest.mark.parametrize("name,fn,shapes", CONV_CASES[3:6], ids=[c[0] for c in CONV_CASES[3:6]])
def test_conv_fused_matches_composite(name, fn, shapes):
    arrays = [_rand(*s, seed=i) for i, s in enumerate(shapes)]
    fused = _grads(strata, fn, arrays, "float64")
    composite = _grads(strata, fn, arrays, "float64", create_graph=True)
    for a, b in zip(fused, composite):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


LN_CASES = [
    ("charlm", lambda L, x, w, b: F(L).layer_norm(x, (128,), w, b), [(32, 64, 128), (128,), (128,)]),
    ("two_dims", lambda L, x, w, b: F(L).layer_norm(x, (3, 5), w, b, eps=1e-2), [(4, 3, 5), (3, 5), (3, 5)]),
    ("weight_only", lambda L, x, w: F(L).layer_norm(x, (7,), w), [(6, 7), (7,)]),
    ("no_affine", lambda L, x: F(L).layer_norm(x, (9,)), [(5, 9)]),
    ("bias_only", lambda L, x, b: F(L).layer_norm(x, (4,), None, b), [(3, 4), (4,)]),
    ("one_row", lambda L, x, w, b: F(L).layer_norm(x, (33,), w, b), [(33,), (33,), (33,)]),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,fn,shapes", LN_CASES, ids=[c[0] for c in LN_CASES])
def test_layer_norm_grads_match_torch(name, fn, shapes, dtype):
    arrays = [_rand(*s, seed=i) * 2 + 1 for i, s in enumerate(shapes)]
    for got, want in zip(_grads(strata, fn, arrays, dtype), _grads(torch, fn, arrays, dtype)):
        _close(got, want, dtype)


@pytest.mark.parametrize("name,fn,shapes", LN_CASES[1:4], ids=[c[0] for c in LN_CASES[1:4]])
def test_layer_norm_fused_matches_composite_and_gradcheck(name, fn, shapes):
    arrays = [_rand(*s, seed=i) for i, s in enumerate(shapes)]
    fused = _grads(strata, fn, arrays, "float64")
    composite = _grads(strata, fn, arrays, "float64", create_graph=True)
    for a, b in zip(fused, composite):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    ts = [strata.tensor(a).requires_grad_() for a in arrays]
    assert gradcheck(lambda *t: fn(strata, *t), ts)


def test_half_precision_grads():
    x = strata.randn(4, 6, dtype=strata.float16).requires_grad_()
    w = strata.randn(6, dtype=strata.float16).requires_grad_()
    F(strata).layer_norm(x, (6,), w).sum().backward()
    tx = torch.tensor(x.detach().float().numpy()).requires_grad_()
    tw = torch.tensor(w.detach().float().numpy()).requires_grad_()
    F(torch).layer_norm(tx, (6,), tw).sum().backward()
    assert x.grad.dtype is strata.float16 and w.grad.dtype is strata.float16
    np.testing.assert_allclose(x.grad.float().numpy(), tx.grad.numpy(), rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(w.grad.float().numpy(), tw.grad.numpy(), rtol=2e-2, atol=2e-2)
    xc = strata.randn(2, 3, 5, 5, dtype=strata.bfloat16).requires_grad_()
    wc = strata.randn(4, 3, 3, 3, dtype=strata.bfloat16).requires_grad_()
    F(strata).conv2d(xc, wc, padding=1).sum().backward()
    assert xc.grad.dtype is strata.bfloat16 and wc.grad.dtype is strata.bfloat16


def _profiled_ops(fn):
    with strata.profiler.profile() as prof:
        fn()
    return {e.key for e in prof.key_averages()}


def test_plain_backward_uses_the_fused_kernels():
    x = strata.randn(2, 3, 6, 6).requires_grad_()
    w = strata.randn(4, 3, 3, 3).requires_grad_()
    y = F(strata).layer_norm(F(strata).conv2d(x, w, padding=1), (6,))
    keys = _profiled_ops(lambda: y.sum().backward())
    assert any("_conv2d_backward" in k for k in keys), keys
    assert any("_layer_norm_backward" in k for k in keys), keys
    y = F(strata).layer_norm(F(strata).conv2d(x, w, padding=1), (6,))
    keys = _profiled_ops(lambda: strata.autograd.grad(y.sum(), [x, w], create_graph=True))
    assert not any("_conv2d_backward" in k or "_layer_norm_backward" in k for k in keys), keys


def test_fused_ops_are_not_differentiable():
    # Internal ops: the derivatives call them only when no graph is recorded, so their results carry no history.
    g, x = strata.randn(2, 4), strata.randn(2, 4).requires_grad_()
    outs = strata._C._ops._layer_norm_backward(g, x, [4])
    g, x, w = strata.randn(1, 2, 3, 3), strata.randn(1, 1, 3, 3).requires_grad_(), strata.randn(2, 1, 1, 1)
    outs += strata._C._ops._conv2d_backward(g, x, w, [1, 1], [0, 0], [1, 1], 1)
    assert not any(t.requires_grad for t in outs)
    assert not strata._C._op_autograd_info("_conv2d_backward")["differentiable"]
    assert not strata._C._op_autograd_info("_layer_norm_backward")["differentiable"]


def test_double_backward_still_matches_torch():
    def f(lib, x, w):
        y = F(lib).conv2d(x, w, stride=2, padding=1)
        return F(lib).layer_norm(y, (y.shape[-1],))

    arrays = [_rand(2, 3, 6, 6), _rand(4, 3, 3, 3, seed=1)]
    out = []
    for lib in (strata, torch):
        x, w = (lib.tensor(a).requires_grad_() for a in arrays)
        gx, gw = lib.autograd.grad((f(lib, x, w) ** 3).sum(), [x, w], create_graph=True)
        out.append([t.detach().numpy() for t in lib.autograd.grad((gx ** 2).sum() + (gw ** 2).sum(), [x, w])])
    for a, b in zip(*out):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_fused_ops_keep_the_input_dtype(dtype):
    dt = getattr(strata, dtype)
    outs = strata._C._ops._layer_norm_backward(strata.randn(3, 4, dtype=dt), strata.randn(3, 4, dtype=dt), [4],
                                               strata.randn(4, dtype=dt))
    outs += strata._C._ops._conv2d_backward(strata.randn(1, 2, 3, 3, dtype=dt), strata.randn(1, 1, 3, 3, dtype=dt),
                                            strata.randn(2, 1, 1, 1, dtype=dt), [1, 1], [0, 0], [1, 1], 1)
    assert [t.dtype for t in outs] == [dt] * 6
    assert [tuple(t.shape) for t in outs] == [(3, 4), (4,), (4,), (1, 1, 3, 3), (2, 1, 1, 1), (2,)]
