"""Pooling (1-3 dims, adaptive, unpooling, LP), conv3d / conv_transpose, interpolate, padding layers, pixel and
channel shuffles, fold/unfold: functions and modules against torch (forward and gradients, float32 and float64),
plus torch's errors for bad input."""

import numpy as np
import pytest

import strata as st
import strata.nn as snn
import strata.nn.functional as SF

torch = pytest.importorskip("torch")
TF = torch.nn.functional

TOL = {np.float32: 2e-5, np.float64: 1e-10}
DTYPES = [np.float32, np.float64]


def _run(fs, ft, shapes, dtype, seed=0, grad=True, gtol=None):
    rng = np.random.default_rng(seed)
    arrs = [rng.standard_normal(s).astype(dtype) for s in shapes]
    xs = [st.tensor(a, requires_grad=grad) for a in arrs]
    xt = [torch.tensor(a, requires_grad=grad) for a in arrs]
    ys, yt = fs(*xs), ft(*xt)
    if isinstance(yt, (tuple, list)):
        for a, b in zip(ys[1:], yt[1:]):  # indices
            np.testing.assert_array_equal(a.numpy(), b.numpy())
        ys, yt = ys[0], yt[0]
    assert tuple(ys.shape) == tuple(yt.shape)
    tol = TOL[dtype]
    np.testing.assert_allclose(ys.detach().numpy(), yt.detach().numpy(), rtol=tol, atol=tol)
    if grad and yt.numel():
        gy = rng.standard_normal(tuple(yt.shape)).astype(dtype)
        ys.backward(st.tensor(gy))
        yt.backward(torch.tensor(gy))
        for a, b in zip(xs, xt):
            gt = gtol or tol * 10
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=gt, atol=gt)


POOL_CASES = [
    ("max_pool1d", (2, 3, 11), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ("max_pool1d", (3, 10), dict(kernel_size=4, dilation=2)),
    ("max_pool2d", (2, 3, 9, 8), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ("max_pool3d", (2, 2, 7, 9, 8), dict(kernel_size=3, stride=2, padding=1, dilation=(1, 2, 1))),
    ("max_pool3d", (2, 5, 6, 7), dict(kernel_size=(2, 3, 2), ceil_mode=True)),
    ("avg_pool1d", (2, 3, 11), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)),
    ("avg_pool1d", (3, 10), dict(kernel_size=4, stride=3)),
    ("avg_pool3d", (2, 2, 7, 9, 8), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ("avg_pool3d", (2, 2, 7, 9, 8), dict(kernel_size=3, stride=2, padding=1, count_include_pad=False)),
    ("avg_pool3d", (2, 5, 6, 7), dict(kernel_size=(2, 3, 2), divisor_override=3)),
    ("adaptive_avg_pool1d", (2, 3, 10), dict(output_size=4)),
    ("adaptive_avg_pool3d", (2, 3, 7, 9, 8), dict(output_size=(3, 4, 5))),
    ("adaptive_avg_pool3d", (3, 5, 6, 7), dict(output_size=(7, None, 2))),
    ("adaptive_max_pool1d", (2, 3, 10), dict(output_size=4, return_indices=True)),
    ("adaptive_max_pool2d", (2, 3, 7, 9), dict(output_size=(3, 4), return_indices=True)),
    ("adaptive_max_pool2d", (3, 5, 6), dict(output_size=(8, 2))),
    ("adaptive_max_pool3d", (2, 3, 7, 9, 8), dict(output_size=(3, 4, 5), return_indices=True)),
    ("max_pool1d", (2, 3, 11), dict(kernel_size=3, return_indices=True)),
    ("max_pool3d", (1, 2, 5, 6, 7), dict(kernel_size=2, return_indices=True)),
    ("lp_pool1d", (2, 3, 10), dict(norm_type=2, kernel_size=3, stride=2)),
    ("lp_pool2d", (2, 3, 7, 8), dict(norm_type=3, kernel_size=(2, 3))),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,shape,kw", POOL_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(POOL_CASES)])
def test_pooling_matches_torch(name, shape, kw, dtype):
    if name.startswith("lp_pool"):
        # |x| keeps the p-th root real, as in the LP pooling of nonnegative activations.
        def f(mod):
            return lambda x: getattr(mod, name)(x.abs() + 0.1, **kw)
        # The gradient goes through the existing pow/abs/avg_pool2d ops (a composite), which agree with torch's
        # to about 1e-7 relative in float64.
        _run(f(SF), f(TF), [shape], dtype, gtol=1e-6 if dtype == np.float64 else None)
        return
    _run(lambda x: getattr(SF, name)(x, **kw), lambda x: getattr(TF, name)(x, **kw), [shape], dtype)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_max_unpool_matches_torch(k):
    shape = {1: (2, 3, 9), 2: (2, 3, 8, 9), 3: (1, 2, 5, 6, 7)}[k]
    x = np.random.default_rng(1).standard_normal(shape)
    pool = getattr(TF, f"max_pool{k}d")
    _, it = pool(torch.tensor(x), 2, return_indices=True)
    _, i_s = getattr(SF, f"max_pool{k}d")(st.tensor(x), 2, return_indices=True)
    np.testing.assert_array_equal(i_s.numpy(), it.numpy())
    out = list(shape[2:])
    _run(lambda v: getattr(SF, f"max_unpool{k}d")(v, i_s, 2, output_size=out),
         lambda v: getattr(TF, f"max_unpool{k}d")(v, it, 2, output_size=out), [tuple(it.shape)], np.float64)


CONV_CASES = [
    ("conv_transpose1d", (2, 4, 7), (4, 3, 3), dict(stride=2, padding=1, output_padding=1)),
    ("conv_transpose1d", (4, 7), (4, 2, 2), dict(dilation=2, groups=2)),
    ("conv_transpose2d", (2, 4, 5, 6), (4, 3, 3, 3), dict(stride=2, padding=1, output_padding=1, groups=2)),
    ("conv_transpose2d", (2, 3, 5, 4), (3, 2, 2, 3), dict(stride=(1, 2), dilation=(2, 1), padding=(0, 1))),
    ("conv_transpose2d", (3, 5, 6), (3, 4, 1, 1), dict()),
    ("conv_transpose3d", (2, 4, 3, 5, 4), (4, 3, 3, 3, 2), dict(stride=2, padding=1, output_padding=1, groups=2)),
    ("conv_transpose3d", (2, 3, 4, 3), (2, 2, 2, 2, 2), dict(dilation=(2, 1, 1))),
    ("conv_transpose3d", (2, 4, 3, 4, 3), (4, 1, 2, 2, 2), dict(stride=2, padding=(1, 0, 1), groups=2)),
    ("conv_transpose3d", (1, 2, 3, 4, 3), (2, 2, 3, 2, 2), dict(stride=(3, 2, 2), output_padding=(1, 0, 0))),
    ("conv3d", (2, 4, 5, 6, 7), (6, 2, 3, 2, 3), dict(stride=(2, 1, 1), padding=(1, 0, 1), dilation=(1, 1, 2),
                                                      groups=2)),
    ("conv3d", (3, 5, 6, 7), (4, 3, 2, 3, 3), dict(padding="same")),
    ("conv3d", (1, 2, 4, 4, 4), (3, 2, 2, 2, 2), dict(padding="valid")),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("name,xs,ws,kw", CONV_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CONV_CASES)])
def test_conv_matches_torch(name, xs, ws, kw, bias, dtype):
    if name == "conv3d":
        nb = ws[0]
    else:
        nb = ws[1] * kw.get("groups", 1)
    shapes = [xs, ws] + ([(nb,)] if bias else [])
    _run(lambda *a: getattr(SF, name)(*a, **kw), lambda *a: getattr(TF, name)(*a, **kw), shapes, dtype)


INTERP = [
    ("nearest", (2, 3, 5, 7), None), ("nearest", (2, 3, 5), None), ("nearest", (1, 2, 3, 4, 5), None),
    ("nearest-exact", (2, 3, 5, 7), None), ("nearest-exact", (2, 3, 4, 3, 5), None),
    ("linear", (2, 3, 5), False), ("linear", (2, 3, 5), True),
    ("bilinear", (2, 3, 5, 7), False), ("bilinear", (2, 3, 5, 7), True),
    ("bicubic", (2, 3, 5, 7), False), ("bicubic", (2, 3, 5, 7), True),
    ("trilinear", (1, 2, 4, 5, 3), False), ("trilinear", (1, 2, 4, 5, 3), True),
    ("area", (2, 3, 9, 7), None), ("area", (2, 3, 9), None), ("area", (1, 2, 5, 6, 7), None),
]
SIZES = [
    lambda s: dict(size=tuple(int(v * 1.7) + 1 for v in s)),
    lambda s: dict(size=tuple(max(1, v - 2) for v in s)),
    lambda s: dict(scale_factor=2),
    lambda s: dict(scale_factor=0.6),
    lambda s: dict(scale_factor=1.3, recompute_scale_factor=True),
    lambda s: dict(scale_factor=tuple(2.5 - 0.5 * i for i in range(len(s)))),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("size", range(len(SIZES)))
@pytest.mark.parametrize("mode,shape,align", INTERP, ids=[f"{m}-{len(s)}d-{a}" for m, s, a in INTERP])
def test_interpolate_matches_torch(mode, shape, align, size, dtype):
    kw = SIZES[size](shape[2:])
    _run(lambda x: SF.interpolate(x, mode=mode, align_corners=align, **kw),
         lambda x: TF.interpolate(x, mode=mode, align_corners=align, **kw), [shape], dtype)


def test_interpolate_float32_bit_close():
    # Source coordinates and weights are computed in float with torch's fused multiply-adds, so results agree
    # to a few ulps (torch's own float32 results differ from its float64 ones by ~5e-6).
    x = np.random.default_rng(3).standard_normal((2, 3, 17, 23)).astype(np.float32)
    for mode, kw in [("bilinear", dict(scale_factor=2.3)), ("nearest", dict(size=(40, 31))),
                     ("bicubic", dict(size=(13, 50), align_corners=True))]:
        a = SF.interpolate(st.tensor(x), mode=mode, **kw).numpy()
        b = TF.interpolate(torch.tensor(x), mode=mode, **kw).numpy()
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", DTYPES)
def test_unfold_fold_shuffles_match_torch(dtype):
    _run(lambda x: SF.unfold(x, (2, 3), dilation=(1, 2), padding=1, stride=2),
         lambda x: TF.unfold(x, (2, 3), dilation=(1, 2), padding=1, stride=2), [(2, 3, 6, 7)], dtype)
    _run(lambda x: SF.unfold(x, 2), lambda x: TF.unfold(x, 2), [(3, 4, 5)], dtype)
    _run(lambda x: SF.fold(x, (5, 6), (2, 3), padding=1, stride=(1, 2)),
         lambda x: TF.fold(x, (5, 6), (2, 3), padding=1, stride=(1, 2)), [(2, 12, 18)], dtype)
    _run(lambda x: SF.fold(x, (4, 5), 2), lambda x: TF.fold(x, (4, 5), 2), [(8, 12)], dtype)
    _run(lambda x: SF.pixel_shuffle(x, 2), lambda x: TF.pixel_shuffle(x, 2), [(2, 8, 3, 4)], dtype)
    _run(lambda x: SF.pixel_shuffle(x, 3), lambda x: TF.pixel_shuffle(x, 3), [(9, 2, 3)], dtype)
    _run(lambda x: SF.pixel_unshuffle(x, 2), lambda x: TF.pixel_unshuffle(x, 2), [(2, 3, 4, 6)], dtype)
    _run(lambda x: SF.channel_shuffle(x, 3), lambda x: TF.channel_shuffle(x, 3), [(2, 6, 3, 4)], dtype)


def _copy_params(sm, tm):
    for (n1, p1), (n2, p2) in zip(sm.named_parameters(), tm.named_parameters()):
        assert n1 == n2 and tuple(p1.shape) == tuple(p2.shape)
        with st.no_grad():
            p1.copy_(st.tensor(p2.detach().numpy()))


MODULES = [
    ("MaxPool1d", (3,), dict(stride=2, ceil_mode=True), (2, 3, 10)),
    ("MaxPool2d", (2,), dict(), (2, 3, 8, 9)),
    ("MaxPool3d", (2,), dict(padding=1), (1, 2, 5, 6, 7)),
    ("AvgPool1d", (3,), dict(padding=1), (2, 3, 10)),
    ("AvgPool2d", (3,), dict(stride=2, count_include_pad=False), (2, 3, 8, 9)),
    ("AvgPool3d", (2,), dict(), (1, 2, 5, 6, 7)),
    ("AdaptiveAvgPool1d", (3,), dict(), (2, 3, 10)),
    ("AdaptiveAvgPool2d", ((3, None),), dict(), (2, 3, 8, 9)),
    ("AdaptiveAvgPool3d", (2,), dict(), (1, 2, 5, 6, 7)),
    ("AdaptiveMaxPool1d", (3,), dict(), (2, 3, 10)),
    ("AdaptiveMaxPool2d", (3,), dict(), (2, 3, 8, 9)),
    ("AdaptiveMaxPool3d", (2,), dict(), (1, 2, 5, 6, 7)),
    ("LPPool2d", (2, 2), dict(), None),
    ("Conv3d", (4, 6, 3), dict(stride=2, padding=1, groups=2), (2, 4, 5, 6, 7)),
    ("Conv3d", (2, 3, 2), dict(padding_mode="circular", padding=1), (1, 2, 4, 5, 6)),
    ("ConvTranspose1d", (4, 6, 3), dict(stride=2, padding=1, output_padding=1), (2, 4, 7)),
    ("ConvTranspose2d", (4, 6, 3), dict(stride=2, padding=1, groups=2), (2, 4, 5, 6)),
    ("ConvTranspose3d", (2, 3, 2), dict(stride=2, bias=False), (1, 2, 3, 4, 3)),
    ("Upsample", (), dict(scale_factor=2, mode="nearest"), (2, 3, 5, 6)),
    ("Upsample", (), dict(size=(7, 9), mode="bilinear", align_corners=False), (2, 3, 5, 6)),
    ("UpsamplingNearest2d", (), dict(scale_factor=3), (2, 3, 5, 6)),
    ("UpsamplingBilinear2d", (), dict(size=(9, 4)), (2, 3, 5, 6)),
    ("ZeroPad2d", ((1, 2, 0, 3),), dict(), (2, 3, 5, 6)),
    ("ConstantPad1d", (2, 1.5), dict(), (2, 3, 5)),
    ("ConstantPad3d", (1, -0.5), dict(), (1, 2, 3, 4, 5)),
    ("ReflectionPad1d", ((2, 1),), dict(), (2, 3, 5)),
    ("ReflectionPad2d", (2,), dict(), (2, 3, 5, 6)),
    ("ReflectionPad3d", (1,), dict(), (1, 2, 3, 4, 5)),
    ("ReplicationPad1d", (3,), dict(), (2, 3, 5)),
    ("ReplicationPad2d", ((1, 0, 2, 3),), dict(), (2, 3, 5, 6)),
    ("ReplicationPad3d", (2,), dict(), (1, 2, 3, 4, 5)),
    ("CircularPad1d", (2,), dict(), (2, 3, 5)),
    ("CircularPad2d", ((1, 2, 2, 1),), dict(), (2, 3, 5, 6)),
    ("CircularPad3d", (1,), dict(), (1, 2, 3, 4, 5)),
    ("PixelShuffle", (2,), dict(), (2, 8, 3, 4)),
    ("PixelUnshuffle", (2,), dict(), (2, 2, 4, 6)),
    ("ChannelShuffle", (2,), dict(), (2, 4, 3, 3)),
    ("Unfold", ((2, 3),), dict(padding=1), (2, 3, 5, 6)),
    ("Fold", ((4, 5), 2), dict(), (2, 8, 12)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,args,kw,shape", MODULES, ids=[f"{m[0]}-{i}" for i, m in enumerate(MODULES)])
def test_module_matches_torch(name, args, kw, shape, dtype):
    torch.manual_seed(0)
    tm = getattr(torch.nn, name)(*args, **kw).to(torch.float64 if dtype == np.float64 else torch.float32)
    sm = getattr(snn, name)(*args, **kw).to(st.float64 if dtype == np.float64 else st.float32)
    assert repr(sm) == repr(tm)
    _copy_params(sm, tm)
    if shape is None:  # LP pooling of positive values
        _run(lambda x: sm(x.abs() + 0.1), lambda x: tm(x.abs() + 0.1), [(2, 3, 6, 7)], dtype,
             gtol=1e-6 if dtype == np.float64 else None)
    else:
        _run(sm, tm, [shape], dtype)
    for p1, p2 in zip(sm.parameters(), tm.parameters()):
        np.testing.assert_allclose(p1.grad.numpy(), p2.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_conv_transpose_output_size_and_init():
    torch.manual_seed(0)
    tm = torch.nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1)
    sm = snn.ConvTranspose2d(3, 4, 3, stride=2, padding=1)
    assert tuple(sm.weight.shape) == tuple(tm.weight.shape) == (3, 4, 3, 3)
    # torch's init bound: 1 / sqrt(fan_in) with fan_in = weight.size(1) * kernel taps.
    bound = 1 / np.sqrt(4 * 9)
    assert float(sm.weight.abs().max()) <= bound + 1e-6 and float(sm.bias.abs().max()) <= bound + 1e-6
    _copy_params(sm, tm)
    x = np.random.default_rng(0).standard_normal((1, 3, 5, 5)).astype(np.float32)
    for size in [(9, 9), (10, 10), (1, 4, 10, 9)]:
        a = sm(st.tensor(x), output_size=size)
        b = tm(torch.tensor(x), output_size=size)
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="valid sizes range from"):
        sm(st.tensor(x), output_size=(12, 12))
    with pytest.raises(ValueError, match="zeros"):
        snn.ConvTranspose2d(3, 4, 3, padding_mode="reflect")


def test_double_backward():
    x = st.tensor(np.random.default_rng(0).standard_normal((1, 2, 5, 6)), requires_grad=True)
    for f in [lambda v: SF.interpolate(v, scale_factor=2, mode="bilinear"), lambda v: SF.avg_pool3d(v, 2),
              lambda v: SF.adaptive_avg_pool1d(v.reshape(1, 2, 30), 7), lambda v: SF.unfold(v, 2),
              lambda v: SF.max_pool1d(v.reshape(1, 2, 30), 3)]:
        assert st.autograd.gradgradcheck(f, (x,), eps=1e-6, atol=1e-5, rtol=1e-3)


def test_pooling_handles_nan_and_empty_batch():
    x = np.arange(12, dtype=np.float32).reshape(1, 1, 12)
    x[0, 0, 4] = np.nan
    a = SF.max_pool1d(st.tensor(x), 3).numpy()
    b = TF.max_pool1d(torch.tensor(x), 3).numpy()
    np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
    np.testing.assert_array_equal(a[~np.isnan(a)], b[~np.isnan(b)])
    assert tuple(SF.max_pool3d(st.zeros(0, 2, 4, 4, 4), 2).shape) == (0, 2, 2, 2, 2)
    assert tuple(SF.interpolate(st.zeros(0, 2, 4, 4), scale_factor=2, mode="bilinear").shape) == (0, 2, 8, 8)


def test_meta_shapes():
    m = st.empty(2, 3, 9, 8, 7, device="meta")
    assert tuple(SF.max_pool3d(m, 2, ceil_mode=True).shape) == (2, 3, 5, 4, 4)
    assert tuple(SF.avg_pool3d(m, 3, 2, 1).shape) == (2, 3, 5, 4, 4)
    assert tuple(SF.adaptive_max_pool3d(m, 2).shape) == (2, 3, 2, 2, 2)
    assert tuple(SF.interpolate(m, scale_factor=2, mode="trilinear").shape) == (2, 3, 18, 16, 14)
    w = st.empty(3, 4, 2, 2, 2, device="meta")
    assert tuple(SF.conv_transpose3d(m, w, stride=2).shape) == (2, 4, 18, 16, 14)
    assert tuple(SF.conv3d(m, st.empty(5, 3, 2, 2, 2, device="meta")).shape) == (2, 5, 8, 7, 6)


def _err(fs, ft, exc=RuntimeError):
    with pytest.raises(exc) as e_t:
        ft()
    with pytest.raises(exc) as e_s:
        fs()
    return str(e_s.value), str(e_t.value)


ERRORS = [
    ("max_pool1d kernel too large", lambda F, x: F.max_pool1d(x(2, 3, 5), 7), "Output size is too small|output size",
     RuntimeError),
    ("max_pool1d pad > half kernel", lambda F, x: F.max_pool1d(x(2, 3, 5), 3, padding=2), "at most half",
     RuntimeError),
    ("max_pool1d negative padding", lambda F, x: F.max_pool1d(x(2, 3, 5), 3, padding=-1), "non-negative",
     RuntimeError),
    ("max_pool1d wrong rank", lambda F, x: F.max_pool1d(x(5), 3), "2D or 3D", RuntimeError),
    ("max_pool3d wrong rank", lambda F, x: F.max_pool3d(x(2, 3, 5), 2), "4D or 5D", RuntimeError),
    ("max_pool3d too small", lambda F, x: F.max_pool3d(x(1, 2, 3, 4, 5), 4), "Output size is too small",
     RuntimeError),
    ("avg_pool3d pad", lambda F, x: F.avg_pool3d(x(1, 2, 3, 4, 5), 2, padding=2), "at most half", RuntimeError),
    ("avg_pool1d wrong rank", lambda F, x: F.avg_pool1d(x(5), 3), "", RuntimeError),
    ("adaptive_avg_pool3d rank", lambda F, x: F.adaptive_avg_pool3d(x(2, 3, 5), 3), "4D or 5D", RuntimeError),
    ("adaptive_max_pool2d rank", lambda F, x: F.adaptive_max_pool2d(x(5), 3), "3D or 4D", RuntimeError),
    ("conv_transpose2d output_padding",
     lambda F, x: F.conv_transpose2d(x(2, 3, 4, 5), x(3, 2, 3, 3), output_padding=1), "output padding must be smaller",
     RuntimeError),
    ("conv_transpose2d channels", lambda F, x: F.conv_transpose2d(x(2, 3, 4, 5), x(4, 2, 3, 3)),
     "expected input\\[2, 3, 4, 5\\] to have 4 channels, but got 3 channels instead", RuntimeError),
    ("conv3d channels", lambda F, x: F.conv3d(x(1, 2, 3, 4, 5), x(4, 3, 3, 3, 3)),
     "to have 3 channels, but got 2 channels instead", RuntimeError),
    ("conv3d kernel too large", lambda F, x: F.conv3d(x(1, 2, 3, 4, 5), x(4, 2, 4, 4, 4)),
     "Kernel size can't be greater than actual input size", RuntimeError),
    ("interpolate size rank", lambda F, x: F.interpolate(x(2, 3, 4, 5), size=(3,), mode="bilinear"),
     "same number of spatial dimensions", ValueError),
    ("interpolate bilinear 3d", lambda F, x: F.interpolate(x(2, 3, 5), size=3, mode="bilinear"),
     "Got 3D input, but bilinear mode needs 4D input", NotImplementedError),
    ("interpolate no size", lambda F, x: F.interpolate(x(2, 3, 4, 5)), "either size or scale_factor", ValueError),
    ("interpolate both", lambda F, x: F.interpolate(x(2, 3, 4, 5), size=3, scale_factor=2), "only one of",
     ValueError),
    ("interpolate align nearest", lambda F, x: F.interpolate(x(2, 3, 4, 5), size=3, align_corners=True),
     "align_corners option can only be set", ValueError),
    ("interpolate zero size", lambda F, x: F.interpolate(x(2, 3, 4, 5), size=0),
     "Input and output sizes should be greater than 0", RuntimeError),
    ("unfold too large", lambda F, x: F.unfold(x(2, 3, 4, 5), 7), "must be at least one", RuntimeError),
    ("fold wrong blocks", lambda F, x: F.fold(x(2, 12, 5), (4, 5), 2), "calculated number of sliding blocks",
     RuntimeError),
    ("pixel_shuffle channels", lambda F, x: F.pixel_shuffle(x(2, 3, 4, 5), 2), "divisible by the square",
     RuntimeError),
    ("pixel_unshuffle height", lambda F, x: F.pixel_unshuffle(x(2, 3, 4, 6), 3), "height to be divisible",
     RuntimeError),
]


@pytest.mark.parametrize("name,call,match,exc", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_like_torch(name, call, match, exc):
    rng = np.random.default_rng(0)

    def maker(lib):
        def x(*shape):
            a = rng.standard_normal(shape).astype(np.float32)
            return st.tensor(a) if lib is st else torch.tensor(a)
        return x

    with pytest.raises(exc, match=match):
        call(TF, maker(torch))
    with pytest.raises(exc, match=match):
        call(SF, maker(st))


def test_max_unpool_rejects_bad_indices():
    with pytest.raises(RuntimeError, match="invalid max index"):
        SF.max_unpool1d(st.randn(2, 3, 5), st.full((2, 3, 5), 100, dtype=st.int64), 2)
    with pytest.raises(ValueError, match="invalid output_size"):
        x, i = SF.max_pool2d(st.randn(2, 3, 4, 5), 2, return_indices=True)
        SF.max_unpool2d(x, i, 2, output_size=(9, 9))


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k", [2, 3])
def test_grid_sample_matches_torch(mode, padding_mode, align, dtype, k):
    if mode == "bicubic" and k == 3:
        with pytest.raises(RuntimeError, match="bicubic interpolation only supports 4D input"):
            SF.grid_sample(st.zeros(1, 1, 2, 2, 2), st.zeros(1, 1, 1, 1, 3), mode="bicubic", align_corners=False)
        return
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 5, 6) if k == 2 else (2, 3, 4, 5, 6)).astype(dtype)
    g = rng.uniform(-1.4, 1.4, (2, 4, 7, 2) if k == 2 else (2, 3, 4, 5, 3)).astype(dtype)
    xs, gs = st.tensor(x, requires_grad=True), st.tensor(g, requires_grad=True)
    xt, gt = torch.tensor(x, requires_grad=True), torch.tensor(g, requires_grad=True)
    ys = SF.grid_sample(xs, gs, mode, padding_mode, align)
    yt = TF.grid_sample(xt, gt, mode, padding_mode, align)
    tol = TOL[dtype] * 10
    np.testing.assert_allclose(ys.detach().numpy(), yt.detach().numpy(), rtol=tol, atol=tol)
    w = rng.standard_normal(tuple(yt.shape)).astype(dtype)
    ys.backward(st.tensor(w))
    yt.backward(torch.tensor(w))
    np.testing.assert_allclose(xs.grad.numpy(), xt.grad.numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(gs.grad.numpy(), gt.grad.numpy(), rtol=tol * 10, atol=tol * 10)


@pytest.mark.parametrize("align", [False, True])
def test_affine_grid_matches_torch(align):
    rng = np.random.default_rng(1)
    for theta, size in [(rng.standard_normal((2, 2, 3)), (2, 3, 4, 5)),
                        (rng.standard_normal((2, 3, 4)), (2, 3, 4, 5, 3)),
                        (rng.standard_normal((1, 2, 3)), (1, 1, 1, 6))]:
        ts = st.tensor(theta, requires_grad=True)
        tt = torch.tensor(theta, requires_grad=True)
        a, b = SF.affine_grid(ts, size, align), TF.affine_grid(tt, size, align)
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-12, atol=1e-12)
        a.sum().backward()
        b.sum().backward()
        np.testing.assert_allclose(ts.grad.numpy(), tt.grad.numpy(), rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="Nx2x3"):
        SF.affine_grid(st.zeros(2, 3, 3), (2, 3, 4, 5))


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 2])
@pytest.mark.parametrize("last", [False, True])
@pytest.mark.parametrize("freq", [False, True])
def test_embedding_bag_matches_torch(mode, padding_idx, last, freq):
    rng = np.random.default_rng(2)
    w = rng.standard_normal((10, 4))
    idx = np.array([1, 2, 4, 5, 4, 3, 2, 9, 0, 2])
    off = np.array([0, 3, 3, 7, 10]) if last else np.array([0, 3, 3, 7])
    psw = rng.standard_normal(10) if mode == "sum" else None
    ws, wt = st.tensor(w, requires_grad=True), torch.tensor(w, requires_grad=True)
    kw = dict(mode=mode, padding_idx=padding_idx, include_last_offset=last)
    if freq and mode == "max":
        with pytest.raises(ValueError, match="max mode does not support"):
            SF.embedding_bag(st.tensor(idx), ws, st.tensor(off), mode="max", scale_grad_by_freq=True)
        return
    a = SF.embedding_bag(st.tensor(idx), ws, st.tensor(off), per_sample_weights=None if psw is None else st.tensor(psw),
                         scale_grad_by_freq=freq, **kw)
    b = TF.embedding_bag(torch.tensor(idx), wt, torch.tensor(off),
                         per_sample_weights=None if psw is None else torch.tensor(psw), **kw)
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-12, atol=1e-12)
    g = rng.standard_normal(tuple(b.shape))
    a.backward(st.tensor(g))
    b.backward(torch.tensor(g))
    expected = wt.grad.numpy()
    if freq:
        # The documented rule: each row's gradient divided by its index's count in the batch. (torch 2.x's CPU
        # kernel miscounts repeated indices, so its scale_grad_by_freq result is not the reference.)
        expected = expected / np.maximum(np.bincount(idx, minlength=10), 1)[:, None]
    np.testing.assert_allclose(ws.grad.numpy(), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_bit_identical_to_torch(dtype, mode):
    # The per-bag kernel adds rows in index order like torch's, so values (and gradients) are identical, for
    # uneven and empty bags, padding, 2-D input and per_sample_weights; max keeps torch's first maximum.
    rng = np.random.default_rng(7)
    w = rng.standard_normal((50, 33)).astype(dtype)
    w[3, :4] = w[5, :4]  # ties for max
    idx = rng.integers(0, 50, 400)
    idx[:30] = np.resize([3, 5], 30)
    off = np.sort(rng.choice(np.arange(1, 400), 60, replace=False))
    off = np.concatenate([[0, 0], off, [off[-1]]])  # an empty first and last-but-one bag
    psw = rng.standard_normal(400).astype(dtype) if mode == "sum" else None
    for padding_idx, i2d in [(None, False), (7, False), (None, True)]:
        ws, wt = st.tensor(w, requires_grad=True), torch.tensor(w, requires_grad=True)
        ps = None if psw is None else st.tensor(psw, requires_grad=True)
        pt = None if psw is None else torch.tensor(psw, requires_grad=True)
        if i2d:
            args_s, args_t = (st.tensor(idx.reshape(40, 10)), ws, None), (torch.tensor(idx.reshape(40, 10)), wt, None)
            if ps is not None:
                ps = st.tensor(psw.reshape(40, 10), requires_grad=True)
                pt = torch.tensor(psw.reshape(40, 10), requires_grad=True)
        else:
            args_s, args_t = (st.tensor(idx), ws, st.tensor(off)), (torch.tensor(idx), wt, torch.tensor(off))
        a = SF.embedding_bag(*args_s, mode=mode, padding_idx=padding_idx, per_sample_weights=ps)
        b = TF.embedding_bag(*args_t, mode=mode, padding_idx=padding_idx, per_sample_weights=pt)
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
        g = rng.standard_normal(tuple(b.shape)).astype(dtype)
        a.backward(st.tensor(g))
        b.backward(torch.tensor(g))
        np.testing.assert_allclose(ws.grad.numpy(), wt.grad.numpy(), rtol=1e-6 if dtype == "float32" else 1e-13,
                                   atol=1e-6 if dtype == "float32" else 1e-13)
        if ps is not None:
            np.testing.assert_allclose(ps.grad.numpy(), pt.grad.numpy(), rtol=1e-5 if dtype == "float32" else 1e-12,
                                       atol=1e-5 if dtype == "float32" else 1e-12)


def test_embedding_bag_double_backward_and_no_grad():
    # create_graph=True records the composite formula: the second derivative through per_sample_weights.
    rng = np.random.default_rng(8)
    w, idx, off, psw = rng.standard_normal((6, 3)), np.array([0, 2, 2, 5, 1]), np.array([0, 2]), rng.standard_normal(5)
    ws, wt = st.tensor(w, requires_grad=True), torch.tensor(w, requires_grad=True)
    ps, pt = st.tensor(psw, requires_grad=True), torch.tensor(psw, requires_grad=True)
    a = SF.embedding_bag(st.tensor(idx), ws, st.tensor(off), mode="sum", per_sample_weights=ps)
    # torch's embedding_bag has no double backward: the reference is its formula from differentiable ops.
    bag = torch.tensor([0, 0, 1, 1, 1])
    b = torch.zeros(2, 3, dtype=torch.float64).index_add(0, bag, pt[:, None] * wt[torch.tensor(idx)])
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-15, atol=1e-15)
    (ga,) = st.autograd.grad((a * a).sum(), [ps], create_graph=True)
    (gb,) = torch.autograd.grad((b * b).sum(), [pt], create_graph=True)
    np.testing.assert_allclose(ga.detach().numpy(), gb.detach().numpy(), rtol=1e-12, atol=1e-12)
    ga.sum().backward()
    gb.sum().backward()
    np.testing.assert_allclose(ws.grad.numpy(), wt.grad.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ps.grad.numpy(), pt.grad.numpy(), rtol=1e-12, atol=1e-12)
    with st.no_grad():
        out = SF.embedding_bag(st.tensor(idx), ws, st.tensor(off), mode="mean")
    assert not out.requires_grad


def test_embedding_bag_meta_shapes():
    w = st.randn(10, 4, device="meta")
    idx, off = st.zeros(6, dtype=st.int64, device="meta"), st.zeros(3, dtype=st.int64, device="meta")
    assert tuple(SF.embedding_bag(idx, w, off, mode="sum").shape) == (3, 4)
    assert tuple(SF.embedding_bag(idx, w, off, mode="mean", include_last_offset=True).shape) == (2, 4)
    out = SF.embedding_bag(st.zeros(3, 2, dtype=st.int64, device="meta"), w, mode="max")
    assert tuple(out.shape) == (3, 4) and out.device.type == "meta"


def test_embedding_bag_module_and_errors():
    torch.manual_seed(0)
    tm = torch.nn.EmbeddingBag(10, 3, mode="max", padding_idx=1)
    sm = snn.EmbeddingBag(10, 3, mode="max", padding_idx=1)
    assert repr(sm) == repr(tm)
    assert float(sm.weight[1].abs().sum()) == 0.0
    _copy_params(sm, tm)
    i2 = np.random.default_rng(0).integers(0, 10, (3, 4))
    np.testing.assert_allclose(sm(st.tensor(i2)).detach().numpy(), tm(torch.tensor(i2)).detach().numpy(), rtol=1e-6)
    with pytest.raises(ValueError, match="offsets has to be None"):
        SF.embedding_bag(st.tensor(i2), sm.weight, st.tensor([0, 1]))
    with pytest.raises(ValueError, match="mode has to be one of"):
        SF.embedding_bag(st.tensor(i2), sm.weight, mode="min")
    with pytest.raises(NotImplementedError, match="per_sample_weights"):
        SF.embedding_bag(st.tensor(i2), sm.weight, mode="mean", per_sample_weights=st.ones(3, 4))
    with pytest.raises(IndexError, match="out of range"):
        SF.embedding_bag(st.tensor([11]), sm.weight, st.tensor([0]))


def test_grid_sample_errors():
    x = st.zeros(2, 3, 4, 5)
    with pytest.raises(RuntimeError, match="same batch size"):
        SF.grid_sample(x, st.zeros(1, 2, 2, 2), align_corners=False)
    with pytest.raises(RuntimeError, match="size 2 in last dimension"):
        SF.grid_sample(x, st.zeros(2, 2, 2, 3), align_corners=False)
    with pytest.raises(ValueError, match="expected mode"):
        SF.grid_sample(x, st.zeros(2, 2, 2, 2), mode="cubic", align_corners=False)
    with pytest.raises(RuntimeError, match="same dtype"):
        SF.grid_sample(x, st.zeros(2, 2, 2, 2, dtype=st.float64), align_corners=False)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_conv_transpose_double_backward(k):
    rng = np.random.default_rng(4)
    xs = {1: (1, 4, 3), 2: (1, 4, 3, 2), 3: (1, 4, 2, 2, 2)}[k]
    ws = (4, 1) + (2,) * k
    x = st.tensor(rng.standard_normal(xs), requires_grad=True)
    w = st.tensor(rng.standard_normal(ws), requires_grad=True)
    b = st.tensor(rng.standard_normal(2), requires_grad=True)
    fn = getattr(SF, f"conv_transpose{k}d")

    def f(x, w, b):
        return fn(x, w, b, stride=2, padding=1, output_padding=1, groups=2)

    assert st.autograd.gradcheck(f, (x, w, b), eps=1e-6, atol=1e-5, rtol=1e-3)
    assert st.autograd.gradgradcheck(f, (x, w, b), eps=1e-6, atol=1e-5, rtol=1e-3)


def test_hostile_arguments_raise_cleanly():
    x = st.randn(1, 2, 5, 6, 7)
    with pytest.raises(RuntimeError, match="below 2\\^40"):
        SF.max_pool3d(x, 3, padding=1, dilation=2 ** 62)
    with pytest.raises(RuntimeError, match="below 2\\^40"):
        SF.conv_transpose3d(x, st.randn(2, 1, 2, 2, 2), stride=2 ** 62)
    with pytest.raises(RuntimeError, match="overflows int64"):
        SF.adaptive_avg_pool3d(x, 2 ** 40)
    with pytest.raises(MemoryError):
        SF.interpolate(x, size=(2 ** 40, 2, 2))
    with pytest.raises(RuntimeError, match="non-zero size for non-batch"):
        SF.adaptive_max_pool2d(st.randn(2, 0, 3, 3), 2)
    with pytest.raises(RuntimeError, match="int64"):
        SF.max_unpool2d(st.randn(1, 2, 3, 3), st.zeros(1, 2, 3, 3), 2)
    with pytest.raises(RuntimeError, match="floating-point"):
        SF.interpolate(st.randn(2, 3, 4, 5).int(), size=3)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("size", [dict(size=(7, 5)), dict(size=(20, 9)), dict(scale_factor=0.3),
                                  dict(scale_factor=(0.5, 2.5)), dict(size=(17, 23))])
@pytest.mark.parametrize("dtype", DTYPES)
def test_interpolate_antialias_matches_torch(mode, align, size, dtype):
    _run(lambda x: SF.interpolate(x, mode=mode, align_corners=align, antialias=True, **size),
         lambda x: TF.interpolate(x, mode=mode, align_corners=align, antialias=True, **size), [(2, 3, 17, 23)], dtype)


def test_interpolate_antialias_errors():
    with pytest.raises(ValueError, match="Anti-alias option is restricted"):
        SF.interpolate(st.randn(2, 3, 4), size=3, mode="linear", antialias=True)
    with pytest.raises(ValueError, match="Anti-alias option is restricted"):
        SF.interpolate(st.randn(2, 3, 4, 5), size=3, mode="nearest", antialias=True)
