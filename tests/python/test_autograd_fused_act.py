"""The fused activation backwards (src/ops/decl/activation_backward.def) and the derivatives of
relu/gelu/silu/sigmoid/tanh that use them: values and dtypes against torch.ops.aten, gradients against torch,
gradcheck/gradgradcheck of the fused ops themselves (their own derivatives give double backward), and
double backward through the activations against torch.
"""
import numpy as np
import pytest

import strata
from strata.autograd import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")
aten = torch.ops.aten


def _pair(lib, arr, dtype, rg=False):
    t = lib.tensor(arr, dtype=getattr(lib, dtype))
    return t.requires_grad_() if rg else t


def _np(t):
    return t.detach().to(dtype=t.dtype if t.dtype != torch.bfloat16 else torch.float32).numpy() \
        if isinstance(t, torch.Tensor) else t.detach().float().numpy() if t.dtype == strata.bfloat16 \
        else t.detach().numpy()


RNG = np.random.default_rng(7)
X = RNG.uniform(-4, 4, size=(5, 7))
G = RNG.standard_normal((5, 7))
Y_SIG = 1 / (1 + np.exp(-X))
Y_TANH = np.tanh(X)

# (name, strata fn, torch fn, second argument)
OPS = [
    ("threshold_backward", lambda g, x: strata.threshold_backward(g, x, 0),
     lambda g, x: aten.threshold_backward(g, x, 0), X),
    ("threshold_backward_0.5", lambda g, x: strata.threshold_backward(g, x, 0.5),
     lambda g, x: aten.threshold_backward(g, x, 0.5), X),
    ("gelu_backward", lambda g, x: strata.gelu_backward(g, x), lambda g, x: aten.gelu_backward(g, x), X),
    ("gelu_backward_tanh", lambda g, x: strata.gelu_backward(g, x, approximate="tanh"),
     lambda g, x: aten.gelu_backward(g, x, approximate="tanh"), X),
    ("silu_backward", strata.silu_backward, aten.silu_backward, X),
    ("sigmoid_backward", strata.sigmoid_backward, aten.sigmoid_backward, Y_SIG),
    ("tanh_backward", strata.tanh_backward, aten.tanh_backward, Y_TANH),
]
IDS = [o[0] for o in OPS]


@pytest.mark.parametrize("dtype,tol", [("float32", 2e-6), ("float64", 1e-12), ("bfloat16", 1e-2),
                                       ("float16", 2e-3)])
@pytest.mark.parametrize("op", OPS, ids=IDS)
def test_fused_op_matches_torch(op, dtype, tol):
    _, sfn, tfn, x = op
    s = sfn(_pair(strata, G, dtype), _pair(strata, x, dtype))
    t = tfn(_pair(torch, G, dtype), _pair(torch, x, dtype))
    assert str(s.dtype).split(".")[1] == str(t.dtype).split(".")[1]
    np.testing.assert_allclose(_np(s), _np(t), rtol=tol, atol=tol)


@pytest.mark.parametrize("op", OPS, ids=IDS)
def test_fused_op_promotes_and_broadcasts_like_torch(op):
    _, sfn, tfn, x = op
    g16, x32 = G[:, :1], x[:1]  # (5, 1) half grad against a (1, 7) float self
    s = sfn(_pair(strata, g16, "float16"), _pair(strata, x32, "float32"))
    # torch's gelu_backward fails to broadcast (a oneDNN reorder error), so its side gets full-size inputs
    t = tfn(_pair(torch, g16, "float16").expand(5, 7).contiguous(), _pair(torch, x32, "float32").expand(5, 7).contiguous())
    assert tuple(s.shape) == tuple(t.shape) == (5, 7) and s.dtype is strata.float32
    np.testing.assert_allclose(s.numpy(), t.numpy(), rtol=2e-6, atol=2e-6)
    m = sfn(_pair(strata, g16, "float16").to("meta"), _pair(strata, x32, "float32").to("meta"))
    assert m.device.type == "meta" and tuple(m.shape) == (5, 7) and m.dtype is strata.float32


def test_threshold_backward_integers_and_nan_like_torch():
    i = np.array([3, -2, 0, 5])
    s = strata.threshold_backward(strata.tensor(i), strata.tensor(i), 0)
    assert s.dtype is strata.int64 and s.tolist() == aten.threshold_backward(torch.tensor(i), torch.tensor(i), 0).tolist()
    x = np.array([np.nan, 0.0, -1.0, 2.0], np.float32)
    g = np.full(4, 2.0, np.float32)
    s = strata.threshold_backward(strata.tensor(g), strata.tensor(x), 0)
    t = aten.threshold_backward(torch.tensor(g), torch.tensor(x), 0)
    assert s.tolist() == t.tolist() == [2.0, 0.0, 0.0, 2.0]


def test_fused_op_errors():
    i = strata.tensor([1, 2])
    for f in [strata.gelu_backward, strata.silu_backward, strata.sigmoid_backward, strata.tanh_backward]:
        with pytest.raises(NotImplementedError, match="not implemented for 'int64'"):
            f(i, i)
        with pytest.raises(NotImplementedError, match="not implemented"):
            f(i.to("meta"), i.to("meta"))
    b = strata.tensor([True])
    with pytest.raises(NotImplementedError, match="threshold_backward"):
        strata.threshold_backward(b, b, 0)
    x = strata.ones(3)
    with pytest.raises(RuntimeError, match="approximate argument must be either none or tanh"):
        strata.gelu_backward(x, x, approximate="erf")
    with pytest.raises(RuntimeError, match="must match the size"):
        strata.silu_backward(strata.ones(2, 3), strata.ones(4))


def test_zero_size_and_0d():
    for f in [lambda g, x: strata.threshold_backward(g, x, 0), strata.gelu_backward, strata.silu_backward,
              strata.sigmoid_backward, strata.tanh_backward]:
        assert tuple(f(strata.ones(0, 3), strata.ones(0, 3)).shape) == (0, 3)
        r = f(strata.tensor(2.0), strata.tensor(0.5))
        assert r.dim() == 0


# ---- gradcheck / gradgradcheck of the fused ops (float64) ----------------------------------------------------

SMALL_X = np.array([[-1.7, -0.3, 0.4], [0.9, 2.1, -2.6]])  # away from threshold_backward's kink
SMALL_G = np.array([[0.5, -1.2, 0.8], [1.3, -0.4, 0.7]])
FUSED = [
    ("threshold_backward", lambda g, x: strata.threshold_backward(g, x, 0), SMALL_X),
    ("gelu_backward", lambda g, x: strata.gelu_backward(g, x), SMALL_X),
    ("gelu_backward_tanh", lambda g, x: strata.gelu_backward(g, x, approximate="tanh"), SMALL_X),
    ("silu_backward", strata.silu_backward, SMALL_X),
    ("sigmoid_backward", strata.sigmoid_backward, 1 / (1 + np.exp(-SMALL_X))),
    ("tanh_backward", strata.tanh_backward, np.tanh(SMALL_X)),
]


@pytest.mark.parametrize("case", FUSED, ids=[c[0] for c in FUSED])
def test_fused_op_gradcheck_and_gradgradcheck(case):
    _, f, x = case
    g = _pair(strata, SMALL_G, "float64", True)
    xs = _pair(strata, x, "float64", True)
    assert gradcheck(f, (g, xs))
    assert gradgradcheck(f, (g, xs))
    # broadcast grad_output against a non-contiguous self
    gb = _pair(strata, SMALL_G[:1], "float64", True)
    xt = strata.tensor(np.ascontiguousarray(x.T), dtype=strata.float64).t().requires_grad_()
    assert not xt.is_contiguous()
    assert gradcheck(f, (gb, xt))


# ---- the activations' derivatives now use the fused ops --------------------------------------------------------

ACTS = [
    ("relu", lambda lib, x: lib.relu(x), "ThresholdBackward"),
    ("gelu", lambda lib, x: lib.nn.functional.gelu(x), "GeluBackward"),
    ("gelu_tanh", lambda lib, x: lib.nn.functional.gelu(x, approximate="tanh"), "GeluBackward"),
    ("silu", lambda lib, x: lib.nn.functional.silu(x), "SiluBackward"),
    ("sigmoid", lambda lib, x: lib.sigmoid(x), "SigmoidBackward"),
    ("tanh", lambda lib, x: lib.tanh(x), "TanhBackward"),
]


@pytest.mark.parametrize("dtype,tol", [("float32", 1e-6), ("float64", 1e-12)])
@pytest.mark.parametrize("act", ACTS, ids=[a[0] for a in ACTS])
def test_activation_grad_matches_torch(act, dtype, tol):
    _, f, _ = act
    xs, xt = _pair(strata, X, dtype, True), _pair(torch, X, dtype, True)
    f(strata, xs).backward(_pair(strata, G, dtype))
    f(torch, xt).backward(_pair(torch, G, dtype))
    np.testing.assert_allclose(xs.grad.numpy(), xt.grad.numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("act", ACTS, ids=[a[0] for a in ACTS])
def test_activation_double_backward_matches_torch(act):
    _, f, node = act
    out = {}
    for lib in (strata, torch):
        x = _pair(lib, SMALL_X, "float64", True)
        g = _pair(lib, SMALL_G, "float64", True)
        (gx,) = lib.autograd.grad(f(lib, x), x, g, create_graph=True)
        # the first-order gradient is one fused node, named like torch's (torch's silu switches to a composite
        # under create_graph, so its node there is a MulBackward0)
        if lib is strata or node != "SiluBackward":
            assert gx.grad_fn.name() == node + "Backward0"
        gx2, gg = lib.autograd.grad((gx * gx).sum(), (x, g))
        out[lib.__name__] = (gx.detach().numpy(), gx2.numpy(), gg.numpy())
    for a, b in zip(out["strata"], out["torch"]):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("act", ACTS, ids=[a[0] for a in ACTS])
def test_activation_gradgradcheck(act):
    _, f, _ = act
    x = _pair(strata, SMALL_X, "float64", True)
    assert gradcheck(lambda t: f(strata, t), (x,))
    assert gradgradcheck(lambda t: f(strata, t), (x,))


def test_relu_nan_and_inplace_like_torch():
    x = np.array([np.nan, -1.0, 0.0, 2.0])
    grads = []
    for lib in (strata, torch):
        t = lib.tensor(x, requires_grad=True)
        lib.relu(t).sum().backward()
        u = lib.tensor(x, requires_grad=True)
        v = u * 1
        v.relu_().sum().backward()
        s = lib.tensor(x, requires_grad=True)
        s.clone().sigmoid_().sum().backward()
        grads.append((t.grad.numpy(), u.grad.numpy(), s.grad.numpy()))
    for a, b in zip(*grads):
        np.testing.assert_array_equal(a, b)
