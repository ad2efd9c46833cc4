"""Names old and new torch scripts use that have no op behind them: torch.autograd.Variable, the deprecated
nn.init spellings and dirac_, BatchNorm3d/SyncBatchNorm (and the torch.nn.modules.batchnorm path),
torch.autograd.profiler, torch.multiprocessing.spawn, the constants and OutOfMemoryError; against torch."""

import math
import os
import warnings

import numpy as np
import pytest

import strata

torch = pytest.importorskip("torch")


def test_variable_is_a_detached_alias():
    for lib in (strata, torch):
        t = lib.ones(2)
        v = lib.autograd.Variable(t, requires_grad=True)
        assert v is not t and v.requires_grad and v.is_leaf and not t.requires_grad
        assert isinstance(t, lib.autograd.Variable) and isinstance(v, lib.Tensor)
        v.data[0] = 5  # shares t's data
        assert t[0].item() == 5
        b = lib.autograd.Variable(v * 2)
        assert b.grad_fn is None and not b.requires_grad
        with pytest.raises(TypeError, match="Variable data has to be a tensor, but got int"):
            lib.autograd.Variable(3)


def test_constants_and_oom_error():
    assert (strata.pi, strata.e) == (torch.pi, torch.e) == (math.pi, math.e)
    assert strata.inf == torch.inf and math.isnan(strata.nan)
    with pytest.raises(strata.OutOfMemoryError):
        strata.empty(1 << 62, dtype=strata.uint8)


@pytest.mark.parametrize("shape,groups", [((4, 2, 3), 1), ((6, 3, 3, 3), 1), ((4, 2, 3, 3, 3), 2), ((2, 4, 5), 1)])
def test_dirac(shape, groups):
    a, b = strata.empty(*shape), torch.empty(*shape)
    strata.nn.init.dirac_(a, groups)
    torch.nn.init.dirac_(b, groups)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    with pytest.raises(ValueError, match="Only tensors with 3, 4, or 5 dimensions"):
        strata.nn.init.dirac_(strata.empty(3, 3))


@pytest.mark.parametrize("name", ["uniform", "normal", "constant", "xavier_uniform", "xavier_normal",
                                  "kaiming_uniform", "kaiming_normal"])
def test_deprecated_init_names_warn_and_match(name):
    args = (0.5,) if name == "constant" else ()
    strata.manual_seed(3)
    torch.manual_seed(3)
    a, b = strata.empty(5, 4), torch.empty(5, 4)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        getattr(strata.nn.init, name)(a, *args)
        getattr(torch.nn.init, name)(b, *args)
    assert sum(issubclass(x.category, FutureWarning) for x in w) == 2
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)


def test_batchnorm3d_and_syncbatchnorm_match_torch():
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 4, 4)).astype(np.float32)
    for cls in ("BatchNorm3d", "SyncBatchNorm"):
        ms, mt = getattr(strata.nn, cls)(3), getattr(torch.nn, cls)(3)
        np.testing.assert_allclose(ms(strata.tensor(x)).detach().numpy(), mt(torch.tensor(x)).detach().numpy(),
                                   rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(ms.running_var.numpy(), mt.running_var.numpy(), rtol=1e-5)
        assert repr(ms) == repr(mt)
    with pytest.raises(ValueError, match="expected 5D input"):
        strata.nn.BatchNorm3d(3)(strata.zeros(2, 3, 4))
    from strata.nn.modules.batchnorm import BatchNorm2d
    assert BatchNorm2d is strata.nn.BatchNorm2d


def test_convert_sync_batchnorm_keeps_parameters():
    for lib in (strata, torch):
        bn = lib.nn.BatchNorm2d(2)
        m = lib.nn.SyncBatchNorm.convert_sync_batchnorm(lib.nn.Sequential(lib.nn.Conv2d(1, 2, 1), bn))
        assert type(m[1]).__name__ == "SyncBatchNorm" and m[1].weight is bn.weight
        assert m[1].running_mean is bn.running_mean
        assert list(dict(m.state_dict())) == ["0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean",
                                              "1.running_var", "1.num_batches_tracked"]


def test_autograd_profiler_legacy_api():
    x = strata.ones(3)
    with strata.autograd.profiler.profile(record_shapes=True) as prof:
        with strata.autograd.profiler.record_function("block"):
            (x + 1).sum()
    names = [e.key for e in prof.key_averages()]
    assert "block" in names and any("add" in n for n in names)
    with strata.autograd.profiler.profile(enabled=False) as off:
        x + 1
    assert off is not None


def _child(i, path):
    with open(os.path.join(path, f"rank{i}"), "w") as f:
        f.write(str(float(strata.ones(2).sum() * i)))


def _fails(i):
    if i == 1:
        raise ValueError("boom in child")


def test_multiprocessing_spawn(tmp_path):
    strata.multiprocessing.spawn(_child, args=(str(tmp_path),), nprocs=2, start_method="fork")
    assert sorted(os.listdir(tmp_path)) == ["rank0", "rank1"]
    assert (tmp_path / "rank1").read_text() == "2.0"
    with pytest.raises(strata.multiprocessing.ProcessRaisedException, match="boom in child"):
        strata.multiprocessing.spawn(_fails, nprocs=2, start_method="fork")


def test_sign_of_nan_is_zero_like_torch():
    x = [float("nan"), -0.0, 0.0, 2.0, -3.0, float("inf")]
    for dt in ("float32", "float64", "float16", "bfloat16"):
        got = strata.sign(strata.tensor(x, dtype=getattr(strata, dt))).float().numpy()
        want = torch.sign(torch.tensor(x, dtype=getattr(torch, dt))).float().numpy()
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(strata.sgn(strata.tensor(x, dtype=getattr(strata, dt))).float().numpy(), want)


@pytest.mark.parametrize("n,k", [(0, 4), (3, 0), (0, 0)])
def test_linear_with_empty_features_backward(n, k):
    x = np.random.default_rng(0).standard_normal((2, 3, k)).astype(np.float32)
    w = np.ones((n, k), np.float32)
    xs, ws = strata.tensor(x, requires_grad=True), strata.tensor(w, requires_grad=True)
    xt, wt = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    strata.nn.functional.linear(xs, ws).sum().backward()
    torch.nn.functional.linear(xt, wt).sum().backward()
    assert xs.grad.shape == tuple(xt.grad.shape) and ws.grad.shape == tuple(wt.grad.shape)
    np.testing.assert_array_equal(xs.grad.numpy(), xt.grad.numpy())
    np.testing.assert_array_equal(ws.grad.numpy(), wt.grad.numpy())


def test_legacy_tensor_constructor_like_torch():
    torch = pytest.importorskip("torch")
    assert strata.Tensor(2, 3).shape == (2, 3) and strata.Tensor(2, 3).dtype == strata.float32
    assert strata.Tensor(strata.Size([4])).shape == (4,)
    assert strata.Tensor().shape == (0,)
    assert strata.Tensor([1, 2]).tolist() == torch.Tensor([1, 2]).tolist()
    assert strata.Tensor([[1, 2], [3, 4]]).dtype == strata.float32
    t = strata.randn(3)
    same = strata.Tensor(t)
    same[0] = 5.0
    assert t[0].item() == 5.0  # the same data, as torch.Tensor(t)
    p = strata.nn.Parameter(strata.Tensor(4, 2))
    assert type(p) is strata.nn.Parameter and p.shape == (4, 2) and p.requires_grad
    strata.set_default_dtype(strata.float64)
    try:
        assert strata.Tensor(2).dtype == strata.float64
    finally:
        strata.set_default_dtype(strata.float32)
    with pytest.raises(RuntimeError, match="negative dimension"):
        strata.Tensor(-1)
    with pytest.raises(TypeError, match="a single number is not a sequence"):
        strata.Tensor(2.5)
