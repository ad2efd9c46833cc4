"""The modules added in nn/modules/{activation_more,dropout_more,instancenorm,container_more}.py and the decoder
half of nn/modules/transformer.py, against torch with copied weights and inputs: forward values and gradients."""

import warnings

import numpy as np
import pytest

import strata as st

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)


def pair(arr, requires_grad=True):
    return st.tensor(arr, requires_grad=requires_grad), torch.tensor(arr, requires_grad=requires_grad)


def copy_weights(smod, tmod):
    sd = {k: st.tensor(v.detach().numpy()) for k, v in tmod.state_dict().items()}
    smod.load_state_dict(sd)


def check(s_out, t_out, s_in, t_in, rtol=1e-10, atol=1e-12, smod=None, tmod=None):
    np.testing.assert_allclose(s_out.detach().numpy(), t_out.detach().numpy(), rtol=rtol, atol=atol)
    w = np.random.default_rng(7).standard_normal(tuple(t_out.shape))
    (s_out * st.tensor(w)).sum().backward()
    (t_out * torch.tensor(w)).sum().backward()
    for s, t in zip(s_in, t_in):
        np.testing.assert_allclose(s.grad.numpy(), t.grad.numpy(), rtol=rtol, atol=atol)
    if smod is not None:
        tparams = dict(tmod.named_parameters())
        for name, p in smod.named_parameters():
            np.testing.assert_allclose(p.grad.numpy(), tparams[name].grad.numpy(), rtol=rtol, atol=atol,
                                       err_msg=name)


X = RNG.standard_normal((4, 3, 5)) * 2
X[0, 0, :3] = [0.5, -0.5, 0.0]  # exactly at the shrink / threshold boundaries

ACTIVATIONS = [
    ("ELU", (), {}), ("ELU", (0.5,), {}), ("SELU", (), {}), ("CELU", (1.5,), {}), ("GLU", (), {"dim": 0}), ("Mish", (), {}), ("Hardswish", (), {}), ("Hardsigmoid", (), {}),
    ("Hardtanh", (-0.7, 1.3), {}), ("ReLU6", (), {}), ("Softplus", (), {"beta": 2.0, "threshold": 3.0}),
    ("Softsign", (), {}), ("Softshrink", (0.5,), {}), ("Hardshrink", (0.5,), {}), ("Tanhshrink", (), {}),
    ("Threshold", (0.1, -3.0), {}), ("LogSigmoid", (), {}), ("Softmin", (), {"dim": 1}), ("Softmax2d", (), {}),
    ("RReLU", (0.1, 0.3), {}),
]


@pytest.mark.parametrize("name,args,kw", ACTIVATIONS, ids=[a[0] + str(i) for i, a in enumerate(ACTIVATIONS)])
def test_activation_modules_match_torch(name, args, kw):
    smod, tmod = getattr(st.nn, name)(*args, **kw), getattr(torch.nn, name)(*args, **kw)
    if name == "RReLU":  # deterministic in eval mode: slope (lower + upper) / 2
        smod.eval()
        tmod.eval()
    assert repr(smod).replace("strata", "torch") == repr(tmod)
    si, ti = pair(X)
    # Hardsigmoid's gradient is the existing core op's, which currently agrees with torch's to ~3e-8 only.
    rtol = 1e-7 if name == "Hardsigmoid" else 1e-10
    check(smod(si), tmod(ti), [si], [ti], rtol=rtol)


@pytest.mark.parametrize("name,args", [("ELU", ()), ("SELU", ()), ("CELU", ()), ("Mish", ()), ("Hardswish", ()),
                                       ("Hardsigmoid", ()), ("Hardtanh", ()), ("ReLU6", ()), ("Threshold", (0., 1.))])
def test_inplace_activation_modules(name, args):
    s = st.tensor(X.copy())
    t = torch.tensor(X.copy())
    sm, tm = getattr(st.nn, name)(*args, inplace=True), getattr(torch.nn, name)(*args, inplace=True)
    out = sm(s)
    tm(t)
    assert out is s
    np.testing.assert_allclose(s.numpy(), t.numpy(), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("num_parameters,shape", [(1, (4, 3, 5)), (3, (4, 3, 5)), (3, (4, 3)), (1, (5,))])
def test_prelu(num_parameters, shape):
    sm, tm = st.nn.PReLU(num_parameters, init=0.1).double(), torch.nn.PReLU(num_parameters, init=0.1).double()
    with torch.no_grad():
        tm.weight.copy_(torch.tensor(RNG.standard_normal(num_parameters)))
    copy_weights(sm, tm)
    si, ti = pair(RNG.standard_normal(shape))
    check(sm(si), tm(ti), [si], [ti], smod=sm, tmod=tm)
    for lib in (st, torch):
        with pytest.raises(RuntimeError, match="Mismatch of parameter numbers and input channel size"):
            lib.nn.functional.prelu(lib.zeros(2, 4), lib.ones(3))
        with pytest.raises(RuntimeError, match="Mismatch of parameter numbers and input channel size"):
            lib.nn.functional.prelu(lib.zeros(5), lib.ones(5))


def test_rrelu_training_draws_slopes_in_range():
    x = st.tensor(-np.abs(RNG.standard_normal(20000)) - 0.1)
    st.manual_seed(0)
    out = st.nn.functional.rrelu(x, 0.1, 0.3, training=True)
    slope = (out / x).numpy()
    assert slope.min() >= 0.1 and slope.max() <= 0.3
    assert abs(slope.mean() - 0.2) < 0.005 and slope.std() > 0.05
    pos = st.tensor(np.abs(RNG.standard_normal(10)))
    np.testing.assert_array_equal(st.nn.RReLU()(pos).numpy(), pos.numpy())


def test_functional_activation_errors_like_torch():
    for lib in (st, torch):
        with pytest.raises(RuntimeError, match="Halving dimension must be even"):
            lib.nn.functional.glu(lib.zeros(3, 5))
    with pytest.raises(RuntimeError, match="lambda must be"):
        st.nn.functional.softshrink(st.zeros(3), -1.0)
    with pytest.raises(ValueError, match="3D or 4D"):
        st.nn.Softmax2d()(st.zeros(2, 3))
    with pytest.raises(AssertionError, match="must be greater than min_val"):
        st.nn.Hardtanh(1.0, 0.5)


@pytest.mark.parametrize("kw", [dict(), dict(p=1, dim=0), dict(p=3.0, dim=-1, eps=0.5)])
def test_normalize(kw):
    si, ti = pair(X)
    check(st.nn.functional.normalize(si, **kw), torch.nn.functional.normalize(ti, **kw), [si], [ti])


@pytest.mark.parametrize("shapes,dim", [(((4, 3, 5), (4, 3, 5)), 1), (((4, 3, 5), (1, 3, 5)), -1),
                                        (((5,), (5,)), 0)])
def test_cosine_similarity_and_module(shapes, dim):
    (s1, t1), (s2, t2) = pair(RNG.standard_normal(shapes[0])), pair(RNG.standard_normal(shapes[1]))
    check(st.nn.CosineSimilarity(dim)(s1, s2), torch.nn.CosineSimilarity(dim)(t1, t2), [s1, s2], [t1, t2])


@pytest.mark.parametrize("kw", [dict(), dict(p=1.0, keepdim=True), dict(p=3.0, eps=0.1)])
@pytest.mark.parametrize("shapes", [((4, 5), (4, 5)), ((5,), (5,)), ((4, 5), (5,))])
def test_pairwise_distance(kw, shapes):
    (s1, t1), (s2, t2) = pair(RNG.standard_normal(shapes[0])), pair(RNG.standard_normal(shapes[1]))
    check(st.nn.PairwiseDistance(**kw)(s1, s2), torch.nn.PairwiseDistance(**kw)(t1, t2), [s1, s2], [t1, t2])


@pytest.mark.parametrize("hard", [False, True])
def test_gumbel_softmax(hard):
    logits = st.tensor(RNG.standard_normal((2000, 4)), requires_grad=True)
    y = st.nn.functional.gumbel_softmax(logits, tau=0.5, hard=hard)
    v = y.detach().numpy()
    np.testing.assert_allclose(v.sum(1), 1.0, rtol=1e-12)
    if hard:
        assert set(np.unique(v)) <= {0.0, 1.0}
    # Samples follow softmax(logits): the argmax frequencies of a row repeated many times.
    row = st.tensor(np.tile([[0.0, 1.0, 2.0, -1.0]], (20000, 1)))
    freq = np.bincount(st.nn.functional.gumbel_softmax(row, hard=True).argmax(1).numpy(), minlength=4) / 20000
    p = np.exp([0.0, 1.0, 2.0, -1.0])
    np.testing.assert_allclose(freq, p / p.sum(), atol=0.015)
    (y * st.tensor(RNG.standard_normal((2000, 4)))).sum().backward()
    assert logits.grad is not None and np.isfinite(logits.grad.numpy()).all() and np.abs(logits.grad.numpy()).sum() > 0


# ---- dropout variants ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,shape", [("Dropout1d", (8, 16, 5)), ("Dropout1d", (16, 5)), ("Dropout2d", (8, 16, 3, 4)),
                                        ("Dropout3d", (8, 16, 2, 3, 2)), ("Dropout3d", (16, 2, 3, 2))])
def test_channel_dropout_zeroes_whole_channels(name, shape):
    x = st.ones(*shape, dtype=st.float64)
    m = getattr(st.nn, name)(p=0.4)
    out = m(x).numpy()
    unbatched = len(shape) in (2, 4) and name != "Dropout2d"
    chans = out.reshape((1,) + shape[:1] + (-1,) if unbatched else shape[:2] + (-1,))
    # Every channel is either all zero or all 1/(1-p).
    per = chans.reshape(-1, chans.shape[-1])
    assert np.all((per == 0).all(1) | np.isclose(per, 1 / 0.6).all(1))
    frac = (per[:, 0] == 0).mean()
    assert 0.1 < frac < 0.7
    m.eval()
    assert m(x) is x
    g = st.ones(*shape, dtype=st.float64, requires_grad=True)
    m.train()
    y = m(g)
    y.sum().backward()
    np.testing.assert_array_equal(g.grad.numpy(), y.detach().numpy())


def test_channel_dropout_errors_and_warnings_like_torch():
    for lib in (st, torch):
        with pytest.raises(RuntimeError, match="dropout1d: Expected 2D or 3D input"):
            lib.nn.functional.dropout1d(lib.zeros(2, 3, 4, 5))
        with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
            lib.nn.Dropout2d(1.5)
        with pytest.warns(UserWarning, match="Received a 3D input to dropout2d"):
            lib.nn.functional.dropout2d(lib.zeros(2, 3, 4))
        with pytest.warns(UserWarning, match="Received a 2-D input to dropout3d"):
            lib.nn.functional.dropout3d(lib.zeros(2, 3))


@pytest.mark.parametrize("feature", [False, True])
def test_alpha_dropout_values(feature):
    p = 0.3
    x = st.tensor(RNG.standard_normal((50, 40, 6)))
    m = st.nn.FeatureAlphaDropout(p) if feature else st.nn.AlphaDropout(p)
    out = m(x).numpy()
    sat = 1.7580993408473766
    a = 1.0 / np.sqrt((sat * sat * p + 1) * (1 - p))
    kept = np.isclose(out, a * x.numpy() + sat * a * p)
    dropped = np.isclose(out, -sat * a * (1 - p))
    assert np.all(kept | dropped)
    if feature:
        assert np.all(kept.all(2) | dropped.all(2))
    assert 0.25 < dropped.mean() < 0.35
    # Self-normalising: zero-mean unit-variance input keeps (about) zero mean and unit variance.
    big = st.tensor(RNG.standard_normal(200000))
    y = st.nn.functional.alpha_dropout(big, 0.2, training=True).numpy()
    assert abs(y.mean()) < 0.02 and abs(y.std() - 1) < 0.02
    m.eval()
    assert m(x) is x


# ---- normalisation ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("nd,shape", [(1, (3, 4, 7)), (1, (4, 7)), (2, (3, 4, 5, 6)), (2, (4, 5, 6)),
                                      (3, (2, 4, 3, 2, 4))])
@pytest.mark.parametrize("affine,track", [(False, False), (True, False), (True, True), (False, True)])
def test_instance_norm(nd, shape, affine, track):
    name = f"InstanceNorm{nd}d"
    tm = getattr(torch.nn, name)(4, affine=affine, track_running_stats=track, momentum=0.3).double()
    sm = getattr(st.nn, name)(4, affine=affine, track_running_stats=track, momentum=0.3).double()
    if affine:
        with torch.no_grad():
            tm.weight.copy_(torch.tensor(RNG.standard_normal(4)))
            tm.bias.copy_(torch.tensor(RNG.standard_normal(4)))
    copy_weights(sm, tm)
    for _ in range(2):
        si, ti = pair(RNG.standard_normal(shape) * 3 + 1)
        check(sm(si), tm(ti), [si], [ti], smod=sm if affine else None, tmod=tm, rtol=1e-9)
        sm.zero_grad()
        tm.zero_grad()
    for k, v in tm.state_dict().items():
        np.testing.assert_allclose(sm.state_dict()[k].numpy(), v.numpy(), rtol=1e-10, err_msg=k)
    sm.eval()
    tm.eval()
    si, ti = pair(RNG.standard_normal(shape))
    check(sm(si), tm(ti), [si], [ti], rtol=1e-9)


def test_instance_norm_errors_like_torch():
    for lib in (st, torch):
        with pytest.raises(ValueError, match="expected 2D or 3D input"):
            lib.nn.InstanceNorm1d(3)(lib.zeros(2, 3, 4, 5))
        with pytest.raises(ValueError, match="to match num_features"):
            lib.nn.InstanceNorm2d(3, affine=True)(lib.zeros(2, 4, 3, 3))
        with pytest.warns(UserWarning, match="does not match num_features"):
            lib.nn.InstanceNorm2d(3)(lib.zeros(2, 4, 3, 3))


@pytest.mark.parametrize("size,shape", [(3, (2, 6, 4)), (2, (2, 5, 3, 3)), (5, (1, 7, 2, 2, 2)), (1, (2, 3, 4))])
def test_local_response_norm(size, shape):
    si, ti = pair(RNG.standard_normal(shape))
    check(st.nn.LocalResponseNorm(size, alpha=0.1, beta=0.6, k=2.0)(si),
          torch.nn.LocalResponseNorm(size, alpha=0.1, beta=0.6, k=2.0)(ti), [si], [ti])
    for lib in (st, torch):
        with pytest.raises(ValueError, match="Expected 3D or higher dimensionality"):
            lib.nn.functional.local_response_norm(lib.zeros(3, 5), 2)


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5, 9])
def test_cross_map_lrn2d(size):
    si, ti = pair(RNG.standard_normal((2, 6, 3, 3)))
    if size == 1:  # torch's backward cannot run for size 1; the forward still compares
        np.testing.assert_allclose(st.nn.CrossMapLRN2d(1, alpha=0.1)(si).detach().numpy(),
                                   torch.nn.CrossMapLRN2d(1, alpha=0.1)(ti).detach().numpy(), rtol=1e-12)
        return
    check(st.nn.CrossMapLRN2d(size, alpha=0.1, beta=0.6, k=2)(si),
          torch.nn.CrossMapLRN2d(size, alpha=0.1, beta=0.6, k=2)(ti), [si], [ti])


@pytest.mark.parametrize("groups,shape", [(2, (2, 6, 3)), (3, (1, 6, 2, 2)), (1, (2, 4, 3))])
def test_channel_shuffle(groups, shape):
    x = RNG.standard_normal(shape)
    np.testing.assert_array_equal(st.nn.ChannelShuffle(groups)(st.tensor(x)).numpy(),
                                  torch.nn.ChannelShuffle(groups)(torch.tensor(x)).numpy())
    with pytest.raises(RuntimeError, match="Number of channels must be divisible by groups"):
        st.nn.ChannelShuffle(4)(st.zeros(2, 6, 3))


# ---- containers -------------------------------------------------------------------------------------------

def test_parameter_list():
    pl = st.nn.ParameterList([st.ones(2), st.nn.Parameter(st.zeros(3))])
    pl.append(st.ones(4))
    pl += [st.zeros(1)]
    assert len(pl) == 4 and [tuple(p.shape) for p in pl] == [(2,), (3,), (4,), (1,)]
    assert all(isinstance(p, st.nn.Parameter) for p in pl)
    assert [n for n, _ in pl.named_parameters()] == ["0", "1", "2", "3"]
    assert tuple(pl[-1].shape) == (1,) and len(pl[1:3]) == 2
    pl[0] = st.full((5,), 2.0)
    assert tuple(pl[0].shape) == (5,)
    with pytest.raises(IndexError):
        pl[7]

    class M(st.nn.Module):
        def __init__(self):
            super().__init__()
            self.ps = st.nn.ParameterList([st.ones(2), st.ones(3)])

    assert list(M().state_dict()) == ["ps.0", "ps.1"]
    with pytest.raises(RuntimeError, match="should not be called"):
        pl(1)


def test_parameter_dict():
    pd = st.nn.ParameterDict({"b": st.ones(2), "a": st.zeros(3)})
    assert list(pd.keys()) == ["a", "b"]  # a plain dict is sorted, as torch does
    pd["c"] = st.ones(1)
    assert isinstance(pd["c"], st.nn.Parameter) and "c" in pd and len(pd) == 3
    assert [n for n, _ in pd.named_parameters()] == ["a", "b", "c"]
    popped = pd.pop("a")
    assert tuple(popped.shape) == (3,) and "a" not in pd
    pd.update([("d", st.ones(4))])
    assert list(pd) == ["b", "c", "d"]
    assert pd.get("zz") is None and pd.setdefault("e", st.ones(1)) is pd["e"]
    merged = pd | st.nn.ParameterDict({"f": st.ones(1)})
    assert list(merged) == ["b", "c", "d", "e", "f"]
    del pd["b"]
    assert list(pd.keys()) == ["c", "d", "e"]
    pd.clear()
    assert len(pd) == 0 and list(pd.parameters()) == []
    with pytest.raises(TypeError, match="not a string"):
        pd[3] = st.ones(1)


# ---- transformer decoder / Transformer ----------------------------------------------------------------------

def _pair_modules(make):
    torch.manual_seed(0)
    tm = make(torch.nn).double()
    sm = make(st.nn).double()
    copy_weights(sm, tm)
    assert list(sm.state_dict()) == list(tm.state_dict())
    sm.eval()
    tm.eval()
    return sm, tm


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu", "callable"])
def test_transformer_decoder_layer(norm_first, batch_first, activation):
    def make(nn):
        act = activation if activation != "callable" else (torch.tanh if nn is torch.nn else st.tanh)
        return nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, dropout=0.0, activation=act,
                                          batch_first=batch_first, norm_first=norm_first)

    sm, tm = _pair_modules(make)
    tshape, mshape = ((2, 5, 8), (2, 6, 8)) if batch_first else ((5, 2, 8), (6, 2, 8))
    (st_, tt), (sm_, tmem) = pair(RNG.standard_normal(tshape)), pair(RNG.standard_normal(mshape))
    tgt_mask = torch.nn.Transformer.generate_square_subsequent_mask(5, dtype=torch.float64)
    smask = st.nn.Transformer.generate_square_subsequent_mask(5, dtype=st.float64)
    kpm = np.zeros((2, 6), dtype=bool)
    kpm[1, 4:] = True
    check(sm(st_, sm_, tgt_mask=smask, memory_key_padding_mask=st.tensor(kpm)),
          tm(tt, tmem, tgt_mask=tgt_mask, memory_key_padding_mask=torch.tensor(kpm)),
          [st_, sm_], [tt, tmem], rtol=1e-9, atol=1e-11, smod=sm, tmod=tm)


@pytest.mark.parametrize("with_norm", [False, True])
def test_transformer_decoder_stack(with_norm):
    def make(nn):
        layer = nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, dropout=0.0)
        return nn.TransformerDecoder(layer, 2, norm=nn.LayerNorm(8) if with_norm else None)

    sm, tm = _pair_modules(make)
    (st_, tt), (sm_, tmem) = pair(RNG.standard_normal((4, 3, 8))), pair(RNG.standard_normal((6, 3, 8)))
    mem_mask = np.zeros((4, 6), dtype=bool)
    mem_mask[:, 5] = True
    tpm = np.zeros((3, 4), dtype=bool)
    tpm[2, 3] = True
    check(sm(st_, sm_, memory_mask=st.tensor(mem_mask), tgt_key_padding_mask=st.tensor(tpm)),
          tm(tt, tmem, memory_mask=torch.tensor(mem_mask), tgt_key_padding_mask=torch.tensor(tpm)),
          [st_, sm_], [tt, tmem], rtol=1e-9, atol=1e-11, smod=sm, tmod=tm)


@pytest.mark.parametrize("batch_first,norm_first", [(False, False), (True, True)])
def test_transformer_full_model(batch_first, norm_first):
    def make(nn):
        return nn.Transformer(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=16,
                              dropout=0.0, batch_first=batch_first, norm_first=norm_first)

    sm, tm = _pair_modules(make)
    sshape, tshape = ((3, 7, 8), (3, 5, 8)) if batch_first else ((7, 3, 8), (5, 3, 8))
    (ss, ts), (stg, ttg) = pair(RNG.standard_normal(sshape)), pair(RNG.standard_normal(tshape))
    smask = st.nn.Transformer.generate_square_subsequent_mask(5, dtype=st.float64)
    tmask = torch.nn.Transformer.generate_square_subsequent_mask(5, dtype=torch.float64)
    check(sm(ss, stg, tgt_mask=smask), tm(ts, ttg, tgt_mask=tmask), [ss, stg], [ts, ttg], rtol=1e-9, atol=1e-11,
          smod=sm, tmod=tm)
    with pytest.raises(RuntimeError, match="the batch number of src and tgt must be equal"):
        sm(ss, stg[:2] if batch_first else stg[:, :2])
    with pytest.raises(RuntimeError, match="the feature number of src and tgt must be equal to d_model"):
        sm(ss, stg[..., :4])


def test_transformer_init_and_mask():
    m = st.nn.Transformer(d_model=16, nhead=4, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=32)
    w = m.encoder.layers[0].linear1.weight.numpy()
    bound = np.sqrt(6.0 / (16 + 32))
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.8 * bound  # xavier_uniform_
    mask = st.nn.Transformer.generate_square_subsequent_mask(4).numpy()
    np.testing.assert_array_equal(mask, torch.nn.Transformer.generate_square_subsequent_mask(4).numpy())


# ---- LazyLinear -------------------------------------------------------------------------------------------

def test_lazy_linear_infers_in_features_like_torch():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sm, tm = st.nn.LazyLinear(3), torch.nn.LazyLinear(3)
    assert repr(sm.weight) == repr(tm.weight) == "<UninitializedParameter>"
    assert sm.has_uninitialized_params()
    x = RNG.standard_normal((2, 5)).astype(np.float32)
    y = sm(st.tensor(x))
    tm(torch.tensor(x))
    assert type(sm) is st.nn.Linear and type(tm) is torch.nn.Linear
    assert repr(sm) == repr(tm) and tuple(sm.weight.shape) == tuple(tm.weight.shape) == (3, 5)
    assert isinstance(sm.weight, st.nn.Parameter) and not isinstance(sm.weight, st.nn.UninitializedParameter)
    bound = 1 / np.sqrt(5)
    assert np.abs(sm.weight.detach().numpy()).max() <= bound and np.abs(sm.bias.detach().numpy()).max() <= bound
    np.testing.assert_allclose(y.detach().numpy(), x @ sm.weight.detach().numpy().T
                               + sm.bias.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert not sm._forward_pre_hooks


def test_lazy_linear_loads_a_state_dict_and_warns():
    with pytest.warns(UserWarning, match="Lazy modules are a new feature"):
        m = st.nn.LazyLinear(3, bias=False)
    m.load_state_dict({"weight": st.ones(3, 4)})
    assert tuple(m.weight.shape) == (3, 4)
    np.testing.assert_array_equal(m(st.ones(2, 4)).detach().numpy(), np.full((2, 3), 4.0))
