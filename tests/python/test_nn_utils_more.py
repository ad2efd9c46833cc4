"""nn.utils.parametrize, parametrizations.weight_norm/spectral_norm, the legacy weight_norm/spectral_norm hooks
and BatchNorm fusion, against torch with copied weights."""

import warnings

import numpy as np
import pytest

import strata as st

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)


def twin_linear(i=4, o=4, bias=True):
    tm = torch.nn.Linear(i, o, bias=bias).double()
    sm = st.nn.Linear(i, o, bias=bias).double()
    sm.load_state_dict({k: st.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    return sm, tm


def load_from(sm, tm):
    sm.load_state_dict({k: st.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})


def forward_and_grads(sm, tm, shape, rtol=1e-11, atol=1e-12):
    x = RNG.standard_normal(shape)
    so, to = sm(st.tensor(x)), tm(torch.tensor(x))
    np.testing.assert_allclose(so.detach().numpy(), to.detach().numpy(), rtol=rtol, atol=atol)
    w = RNG.standard_normal(tuple(to.shape))
    (so * st.tensor(w)).sum().backward()
    (to * torch.tensor(w)).sum().backward()
    tp = dict(tm.named_parameters())
    sp = dict(sm.named_parameters())
    assert list(sp) == list(tp)
    for name, p in sp.items():
        np.testing.assert_allclose(p.grad.numpy(), tp[name].grad.numpy(), rtol=rtol, atol=atol, err_msg=name)


def symmetric(lib):
    class Symmetric(lib.nn.Module):
        def forward(self, x):
            return x.triu() + x.triu(1).transpose(0, 1)

        def right_inverse(self, a):
            return a.triu()

    return Symmetric()


def scale(lib, k):
    class Scale(lib.nn.Module):
        def forward(self, x):
            return x * k

        def right_inverse(self, a):
            return a / k

    return Scale()


def test_register_parametrization_matches_torch():
    sm, tm = twin_linear()
    for lib, m in ((st, sm), (torch, tm)):
        lib.nn.utils.parametrize.register_parametrization(m, "weight", symmetric(lib))
        lib.nn.utils.parametrize.register_parametrization(m, "weight", scale(lib, 3.0))
    assert type(sm).__name__ == type(tm).__name__ == "ParametrizedLinear"
    assert list(sm.state_dict()) == list(tm.state_dict())
    w = sm.weight.detach().numpy()
    np.testing.assert_allclose(w, w.T * 1.0, rtol=0)
    np.testing.assert_allclose(w, tm.weight.detach().numpy(), rtol=1e-12)
    forward_and_grads(sm, tm, (5, 4))
    assert st.nn.utils.parametrize.is_parametrized(sm) and st.nn.utils.parametrize.is_parametrized(sm, "weight")
    assert not st.nn.utils.parametrize.is_parametrized(sm, "bias")
    assert st.nn.utils.parametrize.type_before_parametrizations(sm) is st.nn.Linear
    # Assignment goes through right_inverse.
    a = RNG.standard_normal((4, 4))
    a = a + a.T
    sm.weight = st.tensor(a)
    tm.weight = torch.tensor(a)
    np.testing.assert_allclose(sm.weight.detach().numpy(), a, rtol=1e-12)
    np.testing.assert_allclose(sm.parametrizations.weight.original.numpy(),
                               tm.parametrizations.weight.original.detach().numpy(), rtol=1e-12)


@pytest.mark.parametrize("leave", [True, False])
def test_remove_parametrizations(leave):
    sm, tm = twin_linear()
    for lib, m in ((st, sm), (torch, tm)):
        lib.nn.utils.parametrize.register_parametrization(m, "weight", symmetric(lib))
        lib.nn.utils.parametrize.remove_parametrizations(m, "weight", leave_parametrized=leave)
    assert type(sm) is st.nn.Linear and not hasattr(sm, "parametrizations")
    assert isinstance(sm.weight, st.nn.Parameter)
    np.testing.assert_allclose(sm.weight.detach().numpy(), tm.weight.detach().numpy(), rtol=1e-12)
    assert list(sm.state_dict()) == list(tm.state_dict())
    with pytest.raises(ValueError, match="does not have a parametrization on weight"):
        st.nn.utils.parametrize.remove_parametrizations(sm, "weight")


def test_cached_computes_once():
    calls = []

    class Counting(st.nn.Module):
        def forward(self, x):
            calls.append(1)
            return x * 2

    m = st.nn.Linear(3, 3)
    st.nn.utils.parametrize.register_parametrization(m, "weight", Counting())
    calls.clear()
    with st.nn.utils.parametrize.cached():
        a, b = m.weight, m.weight
    assert len(calls) == 1 and a is b
    m.weight
    assert len(calls) == 2


def test_parametrization_errors():
    m = st.nn.Linear(3, 3)

    class Shrink(st.nn.Module):
        def forward(self, x):
            return x[:2]

    with pytest.raises(ValueError, match="does not have a parameter, a buffer, or a parametrized element"):
        st.nn.utils.parametrize.register_parametrization(m, "nope", Shrink())
    with pytest.raises(ValueError, match="may not change the shape"):
        st.nn.utils.parametrize.register_parametrization(m, "weight", Shrink())
    st.nn.utils.parametrize.register_parametrization(m, "weight", Shrink(), unsafe=True)
    assert tuple(m.weight.shape) == (2, 3)
    with pytest.raises(RuntimeError, match="does not implement right_inverse"):
        m.weight = st.zeros(2, 3)


@pytest.mark.parametrize("dim", [0, 1, None])
def test_parametrizations_weight_norm(dim):
    sm, tm = twin_linear(4, 3)
    st.nn.utils.parametrizations.weight_norm(sm, dim=dim)
    torch.nn.utils.parametrizations.weight_norm(tm, dim=dim)
    assert list(sm.state_dict()) == list(tm.state_dict())
    for k, v in tm.state_dict().items():
        np.testing.assert_allclose(sm.state_dict()[k].numpy(), v.numpy(), rtol=1e-12, err_msg=k)
    forward_and_grads(sm, tm, (5, 4))
    st.nn.utils.parametrize.remove_parametrizations(sm, "weight")
    torch.nn.utils.parametrize.remove_parametrizations(tm, "weight")
    np.testing.assert_allclose(sm.weight.detach().numpy(), tm.weight.detach().numpy(), rtol=1e-12)


def test_parametrizations_weight_norm_conv():
    tm = torch.nn.Conv2d(2, 3, 3).double()
    sm = st.nn.Conv2d(2, 3, 3).double()
    load_from(sm, tm)
    torch.nn.utils.parametrizations.weight_norm(tm)
    st.nn.utils.parametrizations.weight_norm(sm)
    forward_and_grads(sm, tm, (2, 2, 5, 5), rtol=1e-10)


@pytest.mark.parametrize("make", ["linear", "conv", "linear_dim1"])
def test_parametrizations_spectral_norm(make):
    if make == "conv":
        tm, sm = torch.nn.Conv2d(2, 3, 3).double(), st.nn.Conv2d(2, 3, 3).double()
        shape, kw = (2, 2, 5, 5), {}
    else:
        tm, sm = torch.nn.Linear(4, 3).double(), st.nn.Linear(4, 3).double()
        shape, kw = (5, 4), ({"dim": 1} if make == "linear_dim1" else {})
    load_from(sm, tm)
    torch.nn.utils.parametrizations.spectral_norm(tm, n_power_iterations=2, **kw)
    st.nn.utils.parametrizations.spectral_norm(sm, n_power_iterations=2, **kw)
    assert list(sm.state_dict()) == list(tm.state_dict())
    load_from(sm, tm)  # torch's random starting vectors
    for _ in range(3):  # training: the power iteration advances on each access
        sm.zero_grad()
        tm.zero_grad()
        forward_and_grads(sm, tm, shape, rtol=1e-10)
    for k, v in tm.state_dict().items():
        np.testing.assert_allclose(sm.state_dict()[k].numpy(), v.numpy(), rtol=1e-10, err_msg=k)
    sm.eval()
    tm.eval()
    np.testing.assert_allclose(sm.weight.detach().numpy(), tm.weight.detach().numpy(), rtol=1e-10)
    # The normalised weight, as a matrix over dim, has spectral norm ~1 (power iteration has converged).
    w = sm.weight.detach().numpy()
    mat = w.T if make == "linear_dim1" else w.reshape(w.shape[0], -1)
    np.testing.assert_allclose(np.linalg.svd(mat, compute_uv=False)[0], 1.0, rtol=1e-3)


def test_spectral_norm_errors():
    with pytest.raises(ValueError, match="Expected n_power_iterations to be positive"):
        st.nn.utils.parametrizations.spectral_norm(st.nn.Linear(2, 2), n_power_iterations=0)
    with pytest.raises(IndexError, match="Dimension out of range"):
        st.nn.utils.parametrizations.spectral_norm(st.nn.Linear(2, 2), dim=2)


@pytest.mark.parametrize("dim", [0, 1])
def test_legacy_weight_norm(dim):
    sm, tm = twin_linear(4, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.nn.utils.weight_norm(tm, dim=dim)
        with pytest.warns(FutureWarning, match="deprecated"):
            st.nn.utils.weight_norm(sm, dim=dim)
    assert list(sm.state_dict()) == list(tm.state_dict())
    forward_and_grads(sm, tm, (5, 4))
    with pytest.raises(RuntimeError, match="Cannot register two weight_norm hooks"):
        st.nn.utils.weight_norm(sm, dim=dim)
    st.nn.utils.remove_weight_norm(sm)
    torch.nn.utils.remove_weight_norm(tm)
    assert [n for n, _ in sm.named_parameters()] == [n for n, _ in tm.named_parameters()]
    np.testing.assert_allclose(sm.weight.detach().numpy(), tm.weight.detach().numpy(), rtol=1e-12)
    with pytest.raises(ValueError, match="weight_norm of 'weight' not found"):
        st.nn.utils.remove_weight_norm(sm)


def test_legacy_spectral_norm():
    sm, tm = twin_linear(5, 3)
    torch.nn.utils.spectral_norm(tm)
    st.nn.utils.spectral_norm(sm)
    assert list(sm.state_dict()) == list(tm.state_dict())
    load_from(sm, tm)
    for _ in range(3):
        sm.zero_grad()
        tm.zero_grad()
        forward_and_grads(sm, tm, (4, 5), rtol=1e-10)
    sm.eval()
    tm.eval()
    forward_and_grads(sm, tm, (4, 5), rtol=1e-10)
    st.nn.utils.remove_spectral_norm(sm)
    torch.nn.utils.remove_spectral_norm(tm)
    assert list(sm.state_dict()) == list(tm.state_dict())
    np.testing.assert_allclose(sm.weight.detach().numpy(), tm.weight.detach().numpy(), rtol=1e-10)


@pytest.mark.parametrize("bias", [True, False])
def test_fuse_conv_bn_eval(bias):
    tc, sc = torch.nn.Conv2d(2, 3, 3, bias=bias).double(), st.nn.Conv2d(2, 3, 3, bias=bias).double()
    tb, sb = torch.nn.BatchNorm2d(3).double(), st.nn.BatchNorm2d(3).double()
    with torch.no_grad():
        tb.running_mean.copy_(torch.tensor(RNG.standard_normal(3)))
        tb.running_var.copy_(torch.tensor(RNG.random(3) + 0.5))
        tb.weight.copy_(torch.tensor(RNG.standard_normal(3)))
        tb.bias.copy_(torch.tensor(RNG.standard_normal(3)))
    load_from(sc, tc)
    load_from(sb, tb)
    for m in (tc, sc, tb, sb):
        m.eval()
    sf, tf = st.nn.utils.fuse_conv_bn_eval(sc, sb), torch.nn.utils.fuse_conv_bn_eval(tc, tb)
    x = RNG.standard_normal((2, 2, 5, 5))
    np.testing.assert_allclose(sf(st.tensor(x)).detach().numpy(), tf(torch.tensor(x)).detach().numpy(), rtol=1e-10,
                               atol=1e-12)
    np.testing.assert_allclose(sf(st.tensor(x)).detach().numpy(), sb(sc(st.tensor(x))).detach().numpy(), rtol=1e-10,
                               atol=1e-12)
    assert sf is not sc and isinstance(sf.weight, st.nn.Parameter)
    sc.train()
    with pytest.raises(AssertionError, match="Fusion only for eval"):
        st.nn.utils.fuse_conv_bn_eval(sc, sb)


def test_fuse_linear_bn_eval():
    tl, sl = torch.nn.Linear(4, 3).double(), st.nn.Linear(4, 3).double()
    tb, sb = torch.nn.BatchNorm1d(3).double(), st.nn.BatchNorm1d(3).double()
    with torch.no_grad():
        tb.running_mean.copy_(torch.tensor(RNG.standard_normal(3)))
        tb.running_var.copy_(torch.tensor(RNG.random(3) + 0.5))
    load_from(sl, tl)
    load_from(sb, tb)
    for m in (tl, sl, tb, sb):
        m.eval()
    sf, tf = st.nn.utils.fuse_linear_bn_eval(sl, sb), torch.nn.utils.fuse_linear_bn_eval(tl, tb)
    x = RNG.standard_normal((5, 4))
    np.testing.assert_allclose(sf(st.tensor(x)).detach().numpy(), tf(torch.tensor(x)).detach().numpy(), rtol=1e-10,
                               atol=1e-12)
