"""Affine-quantized tensors and dynamic quantization (docs/SPARSE.md, "Quantized tensors") against torch:
quantize_per_tensor / per_channel bit for bit (rounding half to even, clamping), dequantize, the accessors,
repr, view-like ops, errors, and quantize_dynamic(nn.Linear) whose outputs match torch's fbgemm dynamic
quantized Linear to float32 rounding (rtol 1e-5 on outputs of order 1)."""

import warnings

import numpy as np
import pytest

import strata

torch = pytest.importorskip("torch")
warnings.filterwarnings("ignore", message=".*quantiz.*")

RS = np.random.RandomState(0)
QD = [(strata.qint8, torch.qint8), (strata.quint8, torch.quint8), (strata.qint32, torch.qint32)]


def _r(s):
    return s.replace("torch.", "strata.")


@pytest.mark.parametrize("sd,td", QD)
def test_quantize_per_tensor_bitwise(sd, td):
    x = RS.randn(64).astype(np.float32) * 3
    # exact ties to check round-half-even, and values beyond the range to check the clamp
    x[:6] = [0.25, 0.75, -0.25, -1.25, 1000.0, -1000.0]
    zp = 3 if sd is not strata.quint8 else 128
    qs = strata.quantize_per_tensor(strata.tensor(x), 0.5, zp, sd)
    qt = torch.quantize_per_tensor(torch.tensor(x), 0.5, zp, td)
    assert qs.dtype is sd and repr(qs.dtype) == _r(repr(qt.dtype))
    assert qs.is_quantized and not strata.ones(1).is_quantized
    assert isinstance(qs, strata.Tensor)
    np.testing.assert_array_equal(qs.int_repr().numpy(), qt.int_repr().numpy())
    assert qs.int_repr().dtype.itemsize == qt.int_repr().dtype.itemsize == qs.element_size()
    np.testing.assert_array_equal(qs.dequantize().numpy(), qt.dequantize().numpy())
    assert qs.q_scale() == qt.q_scale() and qs.q_zero_point() == qt.q_zero_point()
    assert repr(qs.qscheme()) == _r(repr(qt.qscheme()))
    assert tuple(qs.shape) == tuple(qt.shape)


def test_quantize_odd_scale_and_tensor_params():
    x = RS.randn(5, 7).astype(np.float32)
    for scale in (0.0123, 1 / 3, 7.5):
        qs = strata.quantize_per_tensor(strata.tensor(x), scale, 2, strata.qint8)
        qt = torch.quantize_per_tensor(torch.tensor(x), scale, 2, torch.qint8)
        np.testing.assert_array_equal(qs.int_repr().numpy(), qt.int_repr().numpy())
        np.testing.assert_array_equal(qs.dequantize().numpy(), qt.dequantize().numpy())
    qs = strata.quantize_per_tensor(strata.tensor(x), strata.tensor(0.1), strata.tensor(3), strata.qint8)
    qt = torch.quantize_per_tensor(torch.tensor(x), torch.tensor(0.1), torch.tensor(3), torch.qint8)
    np.testing.assert_array_equal(qs.int_repr().numpy(), qt.int_repr().numpy())
    assert qs.q_scale() == pytest.approx(qt.q_scale(), rel=1e-7)
    lst = strata.quantize_per_tensor([strata.tensor(x), strata.tensor(x * 2)], 0.1, 0, strata.qint8)
    assert len(lst) == 2 and all(t.is_quantized for t in lst)


def test_quantize_per_channel_bitwise():
    x = RS.randn(3, 4, 5).astype(np.float32)
    for axis in (0, 1, 2):
        c = x.shape[axis]
        scales = RS.uniform(0.01, 0.2, size=c)
        zps = RS.randint(-5, 5, size=c)
        qs = strata.quantize_per_channel(strata.tensor(x), strata.tensor(scales), strata.tensor(zps), axis,
                                         strata.qint8)
        qt = torch.quantize_per_channel(torch.tensor(x), torch.tensor(scales), torch.tensor(zps), axis, torch.qint8)
        np.testing.assert_array_equal(qs.int_repr().numpy(), qt.int_repr().numpy())
        np.testing.assert_array_equal(qs.dequantize().numpy(), qt.dequantize().numpy())
        np.testing.assert_array_equal(qs.q_per_channel_scales().numpy(), qt.q_per_channel_scales().numpy())
        np.testing.assert_array_equal(qs.q_per_channel_zero_points().numpy(), qt.q_per_channel_zero_points().numpy())
        assert qs.q_per_channel_axis() == qt.q_per_channel_axis()
        assert repr(qs.qscheme()) == _r(repr(qt.qscheme()))


def test_repr_matches_torch():
    x = [-1.0, 0.0, 1.0, 2.0, 0.26]
    qs = strata.quantize_per_tensor(strata.tensor(x), 0.5, 8, strata.quint8)
    qt = torch.quantize_per_tensor(torch.tensor(x), 0.5, 8, torch.quint8)
    assert repr(qs) == _r(repr(qt))
    y = [[0.4, 0.02, 0.93], [-0.2, -0.4, 0.4]]
    qs = strata.quantize_per_channel(strata.tensor(y), strata.tensor([0.1, 0.2], dtype=strata.float64),
                                     strata.tensor([0, 1]), 0, strata.qint8)
    qt = torch.quantize_per_channel(torch.tensor(y), torch.tensor([0.1, 0.2], dtype=torch.float64),
                                    torch.tensor([0, 1]), 0, torch.qint8)
    assert repr(qs) == _r(repr(qt))


def test_view_like_ops_and_clone_detach():
    x = RS.randn(4, 6).astype(np.float32)
    qs = strata.quantize_per_tensor(strata.tensor(x), 0.05, 1, strata.qint8)
    qt = torch.quantize_per_tensor(torch.tensor(x), 0.05, 1, torch.qint8)
    for f in (lambda q: q.reshape(6, 4), lambda q: q.t(), lambda q: q[1:3], lambda q: q[2], lambda q: q.clone(),
              lambda q: q.detach(), lambda q: q.view(24), lambda q: q.transpose(0, 1), lambda q: q.unsqueeze(0)):
        a, b = f(qs), f(qt)
        assert a.is_quantized and a.dtype is strata.qint8
        assert a.q_scale() == b.q_scale() and a.q_zero_point() == b.q_zero_point()
        np.testing.assert_array_equal(a.int_repr().numpy(), b.int_repr().numpy())
    assert strata.ones(2).dequantize().dtype is strata.float32  # a float tensor dequantizes to itself


def test_errors():
    x = strata.randn(3)
    q = strata.quantize_per_tensor(x, 0.1, 0, strata.qint8)
    with pytest.raises(NotImplementedError, match="Could not run 'exp' with a quantized tensor"):
        strata.exp(q)
    with pytest.raises(NotImplementedError, match="quantized"):
        q + q
    for name in ("tolist", "numpy", "item"):
        with pytest.raises(RuntimeError, match="not supported for quantized tensors"):
            getattr(q, name)()
    with pytest.raises(RuntimeError, match="quantized dtype"):
        strata.quantize_per_tensor(x, 0.1, 0, strata.int8)
    with pytest.raises(RuntimeError, match="floating point input"):
        strata.quantize_per_tensor(strata.ones(3, dtype=strata.int64), 0.1, 0, strata.qint8)
    with pytest.raises(RuntimeError, match="scale must be a positive"):
        strata.quantize_per_tensor(x, 0.0, 0, strata.qint8)
    with pytest.raises(RuntimeError, match="zero_point 300 is out of range"):
        strata.quantize_per_tensor(x, 0.1, 300, strata.quint8)
    with pytest.raises(RuntimeError, match="expected 3 scales"):
        strata.quantize_per_channel(x, strata.ones(2, dtype=strata.float64), strata.zeros(2, dtype=strata.int64), 0,
                                    strata.qint8)
    with pytest.raises(RuntimeError, match="per-tensor"):
        strata.quantize_per_channel(x, strata.ones(3, dtype=strata.float64), strata.zeros(3, dtype=strata.int64),
                                    0, strata.qint8).q_scale()
    with pytest.raises(RuntimeError, match="expected a quantized tensor"):
        x.int_repr()


def _models(seed, sizes):
    torch.manual_seed(seed)
    tm = torch.nn.Sequential(*[m for a, b in zip(sizes[:-1], sizes[1:]) for m in (torch.nn.Linear(a, b),
                                                                                   torch.nn.ReLU())][:-1])
    sm = strata.nn.Sequential(*[m for a, b in zip(sizes[:-1], sizes[1:]) for m in (strata.nn.Linear(a, b),
                                                                                   strata.nn.ReLU())][:-1])
    sm.load_state_dict({k: strata.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    return sm, tm


@pytest.mark.parametrize("qconfig", ["set", "dict", "per_channel", "float16", "alias"])
def test_quantize_dynamic_linear_matches_torch(qconfig):
    sm, tm = _models(0, [16, 32, 8])
    if qconfig == "set":
        qs = strata.ao.quantization.quantize_dynamic(sm, {strata.nn.Linear}, dtype=strata.qint8)
        qt = torch.ao.quantization.quantize_dynamic(tm, {torch.nn.Linear}, dtype=torch.qint8)
    elif qconfig == "dict":
        qs = strata.ao.quantization.quantize_dynamic(
            sm, {strata.nn.Linear: strata.ao.quantization.default_dynamic_qconfig})
        qt = torch.ao.quantization.quantize_dynamic(tm, {torch.nn.Linear: torch.ao.quantization.default_dynamic_qconfig})
    elif qconfig == "per_channel":
        qs = strata.ao.quantization.quantize_dynamic(
            sm, {strata.nn.Linear: strata.ao.quantization.per_channel_dynamic_qconfig})
        qt = torch.ao.quantization.quantize_dynamic(
            tm, {torch.nn.Linear: torch.ao.quantization.per_channel_dynamic_qconfig})
    elif qconfig == "float16":
        qs = strata.ao.quantization.quantize_dynamic(sm, {strata.nn.Linear}, dtype=strata.float16)
        qt = torch.ao.quantization.quantize_dynamic(tm, {torch.nn.Linear}, dtype=torch.float16)
    else:
        from strata.quantization import quantize_dynamic
        qs = quantize_dynamic(sm, {strata.nn.Linear}, dtype=strata.qint8)
        qt = torch.quantization.quantize_dynamic(tm, {torch.nn.Linear}, dtype=torch.qint8)
    assert repr(qs) == _r(repr(qt))
    assert type(sm[0]) is strata.nn.Linear  # not in place: the float model is unchanged
    if qconfig != "float16":
        ws, wt = qs[0].weight(), qt[0].weight()
        np.testing.assert_array_equal(ws.int_repr().numpy(), wt.int_repr().numpy())
        if qconfig == "per_channel":
            np.testing.assert_array_equal(ws.q_per_channel_scales().numpy(), wt.q_per_channel_scales().numpy())
        else:
            assert ws.q_scale() == wt.q_scale()
    for shape in ((5, 16), (2, 3, 16), (1, 16)):
        x = (RS.randn(*shape) * RS.uniform(0.1, 4)).astype(np.float32)
        ys = qs(strata.tensor(x)).numpy()
        yt = qt(torch.tensor(x)).detach().numpy()
        assert ys.shape == yt.shape
        np.testing.assert_allclose(ys, yt, rtol=1e-5, atol=1e-5)
        # and the quantized model stays close to the float one (quantization error only)
        yf = tm(torch.tensor(x)).detach().numpy()
        assert np.abs(ys - yf).max() < 0.1 * max(1.0, np.abs(yf).max())


def test_quantize_dynamic_options_and_errors():
    sm, tm = _models(1, [4, 3, 2])
    q = strata.ao.quantization.quantize_dynamic(sm, {"0": strata.ao.quantization.default_dynamic_qconfig})
    assert type(q[0]).__name__ == "Linear" and q[0]._get_name() == "DynamicQuantizedLinear"
    assert type(q[2]) is strata.nn.Linear  # only the named submodule
    assert list(q[0].parameters()) == []
    same = strata.ao.quantization.quantize_dynamic(sm, {strata.nn.Linear}, inplace=True)
    assert same is sm and sm[0]._get_name() == "DynamicQuantizedLinear"
    with pytest.raises(NotImplementedError, match="LSTM"):
        strata.ao.quantization.quantize_dynamic(strata.nn.LSTM(3, 3), {strata.nn.LSTM})
    with pytest.warns(UserWarning, match="recurrent layers"):
        strata.ao.quantization.quantize_dynamic(strata.nn.Sequential(strata.nn.LSTM(3, 3)))
    with pytest.raises(ValueError, match="Don't know how to quantize"):
        strata.ao.quantization.quantize_dynamic(sm, {strata.nn.Linear}, dtype=strata.int8)
    with pytest.raises(RuntimeError, match="expected 4"):
        strata.ao.quantization.quantize_dynamic(_models(1, [4, 3])[0], {strata.nn.Linear})(strata.ones(2, 5))
    with pytest.raises(ValueError, match="observer instance"):
        strata.ao.quantization.QConfig(strata.ao.quantization.MinMaxObserver(), None)


def test_observers_match_torch():
    x = RS.randn(6, 5).astype(np.float32) * 2 + 0.3
    for kw in ({}, {"dtype": "qint8", "qscheme": "per_tensor_symmetric"}, {"reduce_range": True},
               {"dtype": "qint8"}):
        def mk(lib, cls):
            k = {n: (getattr(lib, v) if isinstance(v, str) else v) for n, v in kw.items()}
            return getattr(lib.ao.quantization, cls)(**k)
        os_, ot = mk(strata, "MinMaxObserver"), mk(torch, "MinMaxObserver")
        os_(strata.tensor(x))
        ot(torch.tensor(x))
        (ss, zs), (st, zt) = os_.calculate_qparams(), ot.calculate_qparams()
        np.testing.assert_array_equal(np.asarray(ss.numpy()).ravel(), np.asarray(st.numpy()).ravel())
        np.testing.assert_array_equal(np.asarray(zs.numpy()).ravel(), np.asarray(zt.numpy()).ravel())
    os_ = strata.ao.quantization.PerChannelMinMaxObserver(ch_axis=1, dtype=strata.qint8,
                                                          qscheme=strata.per_channel_symmetric)
    ot = torch.ao.quantization.PerChannelMinMaxObserver(ch_axis=1, dtype=torch.qint8, qscheme=torch.per_channel_symmetric)
    os_(strata.tensor(x))
    ot(torch.tensor(x))
    (ss, zs), (st, zt) = os_.calculate_qparams(), ot.calculate_qparams()
    np.testing.assert_array_equal(ss.numpy(), st.numpy())
    np.testing.assert_array_equal(zs.numpy(), zt.numpy())


def test_pickle_deepcopy_and_torch_checkpoints(tmp_path):
    import copy
    import pickle
    x = RS.randn(3, 4).astype(np.float32)
    qs = strata.quantize_per_tensor(strata.tensor(x), 0.05, 2, strata.qint8)
    qc = strata.quantize_per_channel(strata.tensor(x), strata.tensor([0.1, 0.2, 0.3], dtype=strata.float64),
                                     strata.tensor([0, 1, -1]), 0, strata.qint8)
    for q in (qs, qc):
        for back in (pickle.loads(pickle.dumps(q)), copy.deepcopy(q)):
            assert repr(back) == repr(q)
            np.testing.assert_array_equal(back.int_repr().numpy(), q.int_repr().numpy())
    p = tmp_path / "q.pt"
    strata.save({"q": qs, "c": qc, "d": strata.qint8, "s": strata.per_tensor_affine}, str(p))
    t = torch.load(str(p), weights_only=True)
    assert t["d"] is torch.qint8 and t["s"] is torch.per_tensor_affine
    for k, q in (("q", qs), ("c", qc)):
        assert repr(t[k]).replace("torch.", "strata.") == repr(q)
    p2 = tmp_path / "t.pt"
    torch.save({"q": t["q"], "c": t["c"]}, str(p2))
    mine = strata.load(str(p2), weights_only=True)
    assert repr(mine["q"]) == repr(qs) and repr(mine["c"]) == repr(qc)


def test_dynamic_quantized_state_dict_round_trips_with_torch(tmp_path):
    sm, tm = _models(2, [6, 5, 3])
    qs = strata.quantization.quantize_dynamic(sm, {strata.nn.Linear})
    qt = torch.quantization.quantize_dynamic(tm, {torch.nn.Linear})
    p = tmp_path / "qs.pt"
    strata.save(qs.state_dict(), str(p))
    fresh_t = torch.quantization.quantize_dynamic(_models(3, [6, 5, 3])[1], {torch.nn.Linear})
    fresh_t.load_state_dict(torch.load(str(p), weights_only=True))
    x = RS.randn(4, 6).astype(np.float32)
    np.testing.assert_allclose(fresh_t(torch.tensor(x)).detach().numpy(), qt(torch.tensor(x)).detach().numpy(),
                               rtol=1e-6, atol=1e-6)
    q = tmp_path / "qt.pt"
    torch.save(qt.state_dict(), str(q))
    fresh_s = strata.quantization.quantize_dynamic(_models(4, [6, 5, 3])[0], {strata.nn.Linear})
    fresh_s.load_state_dict(strata.load(str(q), weights_only=True))
    np.testing.assert_allclose(fresh_s(strata.tensor(x)).numpy(), qs(strata.tensor(x)).numpy(), rtol=1e-6, atol=1e-6)


def test_qnnpack_engine_matches_torch():
    sm, tm = _models(5, [16, 8])
    old_t, old_s = torch.backends.quantized.engine, strata.backends.quantized.engine
    try:
        torch.backends.quantized.engine = "qnnpack"
        strata.backends.quantized.engine = "qnnpack"
        assert strata.backends.quantized.engine == "qnnpack"
        qt = torch.ao.quantization.quantize_dynamic(tm, {torch.nn.Linear})
        qs = strata.ao.quantization.quantize_dynamic(sm, {strata.nn.Linear})
        x = (RS.randn(5, 16) * 2).astype(np.float32)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yt = qt(torch.tensor(x)).detach().numpy()
        np.testing.assert_allclose(qs(strata.tensor(x)).numpy(), yt, rtol=1e-5, atol=1e-5)
    finally:
        torch.backends.quantized.engine = old_t
        strata.backends.quantized.engine = old_s
    with pytest.raises(RuntimeError, match="not supported"):
        strata.backends.quantized.engine = "tpu"


@pytest.mark.parametrize("sd,td", QD[:2])
@pytest.mark.parametrize("reduce_range", [False, True])
def test_quantize_per_tensor_dynamic_matches_torch(sd, td, reduce_range):
    for scale in (0.01, 1.0, 30.0):
        x = (RS.randn(7, 5) * scale + 0.2).astype(np.float32)
        qs = strata.quantize_per_tensor_dynamic(strata.tensor(x), sd, reduce_range)
        qt = torch.quantize_per_tensor_dynamic(torch.tensor(x), td, reduce_range)
        assert qs.q_scale() == pytest.approx(qt.q_scale(), rel=1e-7) and qs.q_zero_point() == qt.q_zero_point()
        np.testing.assert_array_equal(qs.int_repr().numpy(), qt.int_repr().numpy())


def test_transformer_layer_quantizes_like_torch():
    """MultiheadAttention's out_proj (NonDynamicallyQuantizableLinear) stays float, the feed-forward Linears
    are quantized. Train mode with dropout 0: torch's eval fast path rejects quantized Linears."""
    torch.manual_seed(0)
    tl = torch.nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0, batch_first=True)
    sl = strata.nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0, batch_first=True)
    sl.load_state_dict({k: strata.tensor(v.detach().numpy()) for k, v in tl.state_dict().items()})
    qt = torch.ao.quantization.quantize_dynamic(tl, {torch.nn.Linear})
    qs = strata.ao.quantization.quantize_dynamic(sl, {strata.nn.Linear})
    assert repr(qs) == _r(repr(qt))
    assert not qs.training and not qt.training  # quantize_dynamic leaves the model in eval mode
    qs.train()
    qt.train()
    x = RS.randn(2, 5, 16).astype(np.float32)
    np.testing.assert_allclose(qs(strata.tensor(x)).numpy(), qt(torch.tensor(x)).detach().numpy(), rtol=1e-5,
                               atol=1e-5)
