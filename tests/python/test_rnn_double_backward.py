"""Double backward (create_graph) through nn.LSTM / GRU / RNN and the cells: second derivatives against torch
(gradient penalties, strata.func.hessian / jvp / jacfwd) and autograd.gradgradcheck on small float64 layers in every
mode the fused layer ops cover (multi-layer, bidirectional, proj_size, batch_first, packed sequences, no bias)."""

import numpy as np
import pytest

import strata as st
from strata.nn.utils import rnn as srnn

torch = pytest.importorskip("torch")
trnn = torch.nn.utils.rnn

TOL = dict(rtol=1e-9, atol=1e-11)


def make_pair(cls_name, *args, **kwargs):
    torch.manual_seed(0)
    tm = getattr(torch.nn, cls_name)(*args, **kwargs).double()
    sm = getattr(st.nn, cls_name)(*args, **kwargs).double()
    with st.no_grad():
        for (n, pt), (_, ps) in zip(tm.named_parameters(), sm.named_parameters()):
            assert tuple(pt.shape) == tuple(ps.shape), n
            ps.copy_(st.tensor(pt.detach().numpy()))
    return tm, sm


def close(s, t, what=""):
    np.testing.assert_allclose(s.detach().numpy(), t.detach().numpy(), err_msg=what, **TOL)


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


# (class, constructor args, kwargs, input shape)
MODULES = [
    ("LSTM", (3, 4, 2), dict(bidirectional=True), (4, 2, 3)),
    ("LSTM", (3, 4, 1), dict(proj_size=2, batch_first=True), (2, 4, 3)),
    ("LSTM", (3, 4, 1), dict(bias=False), (3, 2, 3)),
    ("GRU", (3, 4, 2), dict(bidirectional=True, batch_first=True), (2, 4, 3)),
    ("GRU", (3, 4, 1), dict(bias=False), (3, 2, 3)),
    ("RNN", (3, 4, 2), dict(bidirectional=True), (4, 2, 3)),
    ("RNN", (3, 4, 1), dict(nonlinearity="relu"), (4, 2, 3)),
]


def _penalty(lib, m, x, h0=None):
    """A WGAN-GP style gradient penalty: the norm of d(score)/d(input) per row, differentiated again."""
    out = m(x) if h0 is None else m(x, h0)
    y = out[0]
    score = (y.pow(2) * lib.arange(1, y.shape[-1] + 1, dtype=y.dtype)).sum() + out[1][0].sum() * 0.5
    g, = lib.autograd.grad(score, x, create_graph=True)
    return g, ((g.norm(2, dim=-1) - 1) ** 2).mean()


@pytest.mark.parametrize("cls,args,kwargs,shape", MODULES, ids=lambda v: str(v))
def test_gradient_penalty_matches_torch(cls, args, kwargs, shape):
    tm, sm = make_pair(cls, *args, **kwargs)
    xn = rand(*shape)
    xt = torch.tensor(xn, requires_grad=True)
    xs = st.tensor(xn, requires_grad=True)
    gt, pt = _penalty(torch, tm, xt)
    gs, ps = _penalty(st, sm, xs)
    close(gs, gt, "first derivative")
    close(ps, pt, "penalty")
    pt.backward()
    ps.backward()
    close(xs.grad, xt.grad, "d penalty / d input")
    for (n, a), (_, b) in zip(tm.named_parameters(), sm.named_parameters()):
        close(b.grad, a.grad, f"d penalty / d {n}")


def test_gradient_penalty_gru_with_initial_state():
    """The penalty of a GRU critic with respect to its input and its initial state (WGAN-GP on sequences)."""
    tm, sm = make_pair("GRU", 3, 4, 2)
    xn, hn = rand(5, 2, 3), rand(2, 2, 4, seed=1)
    res = []
    for lib, m in ((torch, tm), (st, sm)):
        x = lib.tensor(xn, requires_grad=True)
        h = lib.tensor(hn, requires_grad=True)
        y, hy = m(x, h)
        gx, gh = lib.autograd.grad(y.sum() + hy.pow(2).sum(), (x, h), create_graph=True)
        pen = (gx.pow(2).sum() - 1) ** 2 + gh.pow(3).sum()
        pen.backward()
        res.append((gx, gh, x.grad, h.grad, [p.grad for p in m.parameters()]))
    (a, b) = res
    for u, v in zip(a[:4], b[:4]):
        close(v, u)
    for u, v in zip(a[4], b[4]):
        close(v, u)


def test_packed_sequence_double_backward():
    tm, sm = make_pair("LSTM", 2, 3, 1, bidirectional=True)
    xn = rand(4, 3, 2)
    lengths = [4, 3, 1]
    out = []
    for lib, m, mod in ((torch, tm, trnn), (st, sm, srnn)):
        x = lib.tensor(xn, requires_grad=True)
        packed = mod.pack_padded_sequence(x, lengths)
        y, (hy, cy) = m(packed)
        g, = lib.autograd.grad(y.data.pow(2).sum() + cy.sum(), x, create_graph=True)
        (g.pow(2).sum()).backward()
        out.append((g, x.grad, [p.grad for p in m.parameters()]))
    close(out[1][0], out[0][0])
    close(out[1][1], out[0][1])
    for u, v in zip(out[0][2], out[1][2]):
        close(v, u)


@pytest.mark.parametrize("cls", ["LSTMCell", "GRUCell", "RNNCell"])
def test_cells_double_backward(cls):
    tm, sm = make_pair(cls, 3, 4)
    xn, hn = rand(2, 3), rand(2, 4, seed=1)
    res = []
    for lib, m in ((torch, tm), (st, sm)):
        x = lib.tensor(xn, requires_grad=True)
        h = lib.tensor(hn, requires_grad=True)
        state = (h, h * 0.5) if cls == "LSTMCell" else h
        r = m(x, state)
        y = r[0] + r[1] if cls == "LSTMCell" else r
        gx, gh = lib.autograd.grad(y.pow(2).sum(), (x, h), create_graph=True)
        (gx.sin().sum() + gh.pow(2).sum()).backward()
        res.append((gx, gh, x.grad, h.grad, [p.grad for p in m.parameters()]))
    for u, v in zip(res[0][:4], res[1][:4]):
        close(v, u)
    for u, v in zip(res[0][4], res[1][4]):
        close(v, u)


# gradgradcheck: small layers, float64, through the module (input and initial states) and through the weights.
GRADGRAD = [
    ("LSTM", (2, 2, 2), dict(bidirectional=True)),
    ("LSTM", (2, 3, 1), dict(proj_size=2, batch_first=True)),
    ("GRU", (2, 2, 2), dict(bidirectional=True, batch_first=True)),
    ("RNN", (2, 2, 1), dict(bias=False)),
    ("RNN", (2, 2, 1), dict(nonlinearity="relu")),
]


@pytest.mark.parametrize("cls,args,kwargs", GRADGRAD, ids=lambda v: str(v))
def test_gradgradcheck_modules(cls, args, kwargs):
    _, sm = make_pair(cls, *args, **kwargs)
    dirs = 2 if kwargs.get("bidirectional") else 1
    layers = args[2]
    out_size = kwargs.get("proj_size") or args[1]
    shape = (2, 3, args[0]) if kwargs.get("batch_first") else (3, 2, args[0])
    x = st.tensor(rand(*shape), requires_grad=True)
    h = st.tensor(rand(layers * dirs, 2, out_size, seed=1), requires_grad=True)
    if cls == "LSTM":
        c = st.tensor(rand(layers * dirs, 2, args[1], seed=2), requires_grad=True)

        def f(x, h, c):
            y, (hy, cy) = sm(x, (h, c))
            return y, hy, cy
        inputs = (x, h, c)
    else:
        def f(x, h):
            return sm(x, h)
        inputs = (x, h)
    assert st.autograd.gradgradcheck(f, inputs)
    # With respect to the weights (functional_call) as well.
    names = [n for n, _ in sm.named_parameters()]
    params = tuple(p.detach().clone().requires_grad_() for p in sm.parameters())

    def g(*ps):
        return st.func.functional_call(sm, dict(zip(names, ps)), (x.detach(),))[0]
    assert st.autograd.gradgradcheck(g, params)


def test_gradgradcheck_packed():
    _, sm = make_pair("GRU", 2, 2, 1, bidirectional=True)
    x = st.tensor(rand(3, 2, 2), requires_grad=True)

    def f(x):
        y, _ = sm(srnn.pack_padded_sequence(x, [3, 2]))
        return y.data
    assert st.autograd.gradgradcheck(f, (x,))


def _func_pair(cls, **kwargs):
    tm, sm = make_pair(cls, 2, 3, 1, **kwargs)
    xn = rand(3, 1, 2)

    def make(lib, m):
        def f(x):
            return m(x)[0].tanh().sum()
        return f
    return make(torch, tm), make(st, sm), xn


def test_func_hessian_lstm():
    ft, fs, xn = _func_pair("LSTM")
    ht = torch.func.hessian(ft)(torch.tensor(xn))
    hs = st.func.hessian(fs)(st.tensor(xn))
    assert tuple(hs.shape) == tuple(ht.shape)
    close(hs, ht)


def test_func_jvp_jacfwd_lstm():
    tm, sm = make_pair("LSTM", 2, 3, 1, proj_size=2)
    xn, vn = rand(3, 2, 2), rand(3, 2, 2, seed=3)
    ft = lambda x: tm(x)[0]  # noqa: E731
    fs = lambda x: sm(x)[0]  # noqa: E731
    ot, jt = torch.func.jvp(ft, (torch.tensor(xn),), (torch.tensor(vn),))
    os_, js = st.func.jvp(fs, (st.tensor(xn),), (st.tensor(vn),))
    close(os_, ot)
    close(js, jt)
    close(st.func.jacfwd(fs)(st.tensor(xn)), torch.func.jacfwd(ft)(torch.tensor(xn)))


def test_func_hessian_gru_weights():
    """The Hessian of a loss with respect to a GRU weight (second derivatives through the recurrence)."""
    tm, sm = make_pair("GRU", 2, 2, 1)
    xn = rand(3, 1, 2)

    def make(lib, m):
        def f(w):
            return (lib.func.functional_call(m, {"weight_hh_l0": w}, (lib.tensor(xn),))[0] ** 2).sum()
        return f
    ht = torch.func.hessian(make(torch, tm))(tm.weight_hh_l0.detach())
    hs = st.func.hessian(make(st, sm))(sm.weight_hh_l0.detach())
    close(hs, ht)


def test_first_order_backward_unchanged():
    """Without create_graph the fused backward runs: its gradients carry no graph."""
    _, sm = make_pair("LSTM", 2, 3, 1)
    x = st.tensor(rand(3, 2, 2), requires_grad=True)
    g, = st.autograd.grad(sm(x)[0].sum(), x)
    assert g.grad_fn is None and not g.requires_grad
    g2, = st.autograd.grad(sm(x)[0].sum(), x, create_graph=True)
    assert g2.requires_grad
    close(g2, g)
