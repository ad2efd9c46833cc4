"""memory_format=channels_last / channels_last_3d against torch: the strides (NHWC order) of contiguous, to, clone,
empty, *_like and Module.to; is_contiguous(memory_format=); which ops keep the layout (pointwise ops through
TensorIterator, conv2d, batch_norm, the 2-d poolings, relu, cat) with the values of the contiguous path."""

import numpy as np
import pytest

import strata as st

torch = pytest.importorskip("torch")

X = np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype(np.float32)
X5 = np.random.default_rng(1).standard_normal((2, 3, 2, 3, 4)).astype(np.float32)


def cl_pair(x=X, fmt="channels_last"):
    return (st.tensor(x).contiguous(memory_format=getattr(st, fmt)),
            torch.tensor(x).contiguous(memory_format=getattr(torch, fmt)))


def same(s, t, tol=0.0):
    assert tuple(s.shape) == tuple(t.shape)
    assert s.stride() == t.stride(), f"strides {s.stride()} != torch {t.stride()}"
    np.testing.assert_allclose(s.detach().numpy(), t.detach().numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("fmt,x", [("channels_last", X), ("channels_last_3d", X5)])
def test_contiguous_to_clone_strides(fmt, x):
    s, t = cl_pair(x, fmt)
    same(s, t)
    sm, tm = getattr(st, fmt), getattr(torch, fmt)
    assert s.is_contiguous(memory_format=sm) and not s.is_contiguous()
    assert s.contiguous(memory_format=sm) is s
    same(s.contiguous(), t.contiguous())
    same(s.clone(), t.clone())  # preserve_format keeps the layout
    same(s.clone(memory_format=st.contiguous_format), t.clone(memory_format=torch.contiguous_format))
    same(st.tensor(x).clone(memory_format=sm), torch.tensor(x).clone(memory_format=tm))
    same(st.tensor(x).to(memory_format=sm), torch.tensor(x).to(memory_format=tm))
    same(s.to(st.float64), t.to(torch.float64))  # a copy keeps the layout
    same(s.to(memory_format=st.contiguous_format), t.to(memory_format=torch.contiguous_format))
    # A transposed tensor laid out again.
    nc_s, nc_t = st.tensor(x).transpose(1, 3), torch.tensor(x).transpose(1, 3)
    same(nc_s.contiguous(memory_format=sm), nc_t.contiguous(memory_format=tm))


def test_is_contiguous_memory_format():
    s, t = cl_pair()
    for a, b in ((s, t), (s[:, :, :2], t[:, :, :2]), (s.contiguous(), t.contiguous()),
                 (st.ones(2, 1, 3, 3), torch.ones(2, 1, 3, 3)), (st.ones(2, 3, 1, 1), torch.ones(2, 3, 1, 1))):
        for fs, ft in ((st.channels_last, torch.channels_last), (st.contiguous_format, torch.contiguous_format)):
            assert a.is_contiguous(memory_format=fs) == b.is_contiguous(memory_format=ft)
    assert s.is_contiguous(memory_format=st.channels_last_3d) == t.is_contiguous(memory_format=torch.channels_last_3d)


def test_factories_and_like():
    same(st.empty(2, 3, 4, 5, memory_format=st.channels_last).zero_(),
         torch.empty(2, 3, 4, 5, memory_format=torch.channels_last).zero_())
    same(st.empty((1, 2, 3, 4, 5), memory_format=st.channels_last_3d).zero_(),
         torch.empty((1, 2, 3, 4, 5), memory_format=torch.channels_last_3d).zero_())
    s, t = cl_pair()
    cs, ct = st.tensor(X), torch.tensor(X)
    for name in ("zeros_like", "ones_like"):
        same(getattr(st, name)(s), getattr(torch, name)(t))
        same(getattr(st, name)(cs, memory_format=st.channels_last),
             getattr(torch, name)(ct, memory_format=torch.channels_last))
        same(getattr(st, name)(s, memory_format=st.contiguous_format),
             getattr(torch, name)(t, memory_format=torch.contiguous_format))
    same(st.full_like(s, 2.5), torch.full_like(t, 2.5))
    assert st.empty_like(s).stride() == torch.empty_like(t).stride()
    assert st.empty_like(cs, memory_format=st.channels_last).stride() == torch.empty_like(
        ct, memory_format=torch.channels_last).stride()
    assert st.randn_like(s).stride() == torch.randn_like(t).stride()


def test_wrong_rank_raises():
    for lib in (st, torch):
        with pytest.raises(RuntimeError, match="required rank 4 tensor to use channels_last format"):
            lib.ones(2, 3, 4).contiguous(memory_format=lib.channels_last)
        with pytest.raises(RuntimeError, match="required rank 5 tensor to use channels_last_3d format"):
            lib.ones(2, 3, 4, 5).to(memory_format=lib.channels_last_3d)
    with pytest.raises(TypeError, match="memory_format"):
        st.ones(2, 3, 4, 5).contiguous(memory_format="channels_last")


POINTWISE = {
    "relu": lambda L, a: a.relu(),
    "neg": lambda L, a: -a,
    "exp": lambda L, a: a.exp(),
    "sigmoid": lambda L, a: L.sigmoid(a),
    "add scalar": lambda L, a: a + 1,
    "mul self": lambda L, a: a * a,
    "cl + contiguous": lambda L, a: a + a.contiguous(),
    "contiguous + cl": lambda L, a: a.contiguous() + a,
    "bias broadcast": lambda L, a: a + L.arange(3.0).reshape(3, 1, 1),
    "compare": lambda L, a: a > 0,
    "int cast mul": lambda L, a: a.to(L.int32) * 2,
    "where": lambda L, a: L.where(a > 0, a, 0.0),
    "in place": lambda L, a: a.clone().mul_(3).add_(1),
    "gelu": lambda L, a: L.nn.functional.gelu(a),
    "silu": lambda L, a: L.nn.functional.silu(a),
    "leaky_relu": lambda L, a: L.nn.functional.leaky_relu(a, 0.1),
    "hardtanh": lambda L, a: L.nn.functional.hardtanh(a),
}


@pytest.mark.parametrize("name", list(POINTWISE))
def test_pointwise_keeps_layout(name):
    s, t = cl_pair()
    same(POINTWISE[name](st, s), POINTWISE[name](torch, t), tol=1e-6)


NN = {
    "conv2d": lambda L, a: L.nn.functional.conv2d(a, L.arange(54.0).reshape(2, 3, 3, 3) / 50, L.ones(2), padding=1),
    "conv2d strided": lambda L, a: L.nn.functional.conv2d(a, L.arange(24.0).reshape(4, 3, 1, 2) / 20, stride=2),
    "batch_norm train": lambda L, a: L.nn.functional.batch_norm(a, None, None, training=True),
    "batch_norm eval": lambda L, a: L.nn.functional.batch_norm(a, L.zeros(3), L.ones(3) * 2, L.ones(3), L.zeros(3)),
    "max_pool2d": lambda L, a: L.nn.functional.max_pool2d(a, 2),
    "max_pool2d indices": lambda L, a: L.nn.functional.max_pool2d(a, 2, return_indices=True)[1],
    "avg_pool2d": lambda L, a: L.nn.functional.avg_pool2d(a, 2),
    "adaptive_avg_pool2d": lambda L, a: L.nn.functional.adaptive_avg_pool2d(a, (2, 3)),
    "mean keepdim": lambda L, a: a.mean((2, 3), keepdim=True),
    "cat channels": lambda L, a: L.cat([a, a[:, :1]], 1),
    "cat width": lambda L, a: L.cat([a, a], 3),
    "cat with a contiguous input": lambda L, a: L.cat([a, a.contiguous()], 0),
}


@pytest.mark.parametrize("name", list(NN))
def test_nn_ops_keep_layout(name):
    s, t = cl_pair()
    rs, rt = NN[name](st, s), NN[name](torch, t)
    same(rs, rt, tol=1e-5)
    # The same values as the contiguous path.
    np.testing.assert_allclose(rs.numpy(), NN[name](st, st.tensor(X)).numpy(), rtol=1e-6, atol=1e-6)


def _net(lib):
    lib.manual_seed(0)
    return lib.nn.Sequential(lib.nn.Conv2d(3, 4, 3, padding=1), lib.nn.BatchNorm2d(4), lib.nn.ReLU(),
                             lib.nn.MaxPool2d(2), lib.nn.Conv2d(4, 2, 1))


def test_module_to_channels_last_trains_like_contiguous():
    ms, mt = _net(st), _net(torch)
    with st.no_grad():
        for ps, pt in zip(ms.parameters(), mt.parameters()):
            ps.copy_(st.tensor(pt.detach().numpy()))
    ms_ref = _net(st)
    ms_ref.load_state_dict(ms.state_dict())
    assert ms.to(memory_format=st.channels_last) is ms
    mt.to(memory_format=torch.channels_last)
    for (n, ps), (_, pt) in zip(ms.named_parameters(), mt.named_parameters()):
        assert ps.stride() == pt.stride(), n
        assert isinstance(ps, st.nn.Parameter)
    xs, xt = cl_pair()
    xs.requires_grad_()
    xt.requires_grad_()
    ys, yt = ms(xs), mt(xt)
    same(ys, yt, tol=1e-5)
    (ys * ys).sum().backward()
    (yt * yt).sum().backward()
    xr = st.tensor(X, requires_grad=True)
    yr = ms_ref(xr)
    (yr * yr).sum().backward()
    np.testing.assert_allclose(ys.detach().numpy(), yr.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(xs.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(xs.grad.numpy(), xr.grad.numpy(), rtol=1e-5, atol=1e-6)
    for (n, ps), (_, pt), pr in zip(ms.named_parameters(), mt.named_parameters(), ms_ref.parameters()):
        np.testing.assert_allclose(ps.grad.numpy(), pt.grad.numpy(), rtol=1e-4, atol=1e-4, err_msg=n)
        np.testing.assert_allclose(ps.grad.numpy(), pr.grad.numpy(), rtol=1e-5, atol=1e-5, err_msg=n)


def test_gradients_through_layout_changes():
    x = st.tensor(X, requires_grad=True)
    y = x.contiguous(memory_format=st.channels_last)
    z = (y.exp() * 2 + y).clone()
    z.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.exp(X) * 2 + 1, rtol=1e-6)
