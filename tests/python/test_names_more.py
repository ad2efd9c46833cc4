"""torch names written over existing strata ops, compared with torch: the *_copy
view variants, cov/corrcoef, set_default_tensor_type, strata.hub's cache
lookups, swap_tensors, jit's classes, serialization helpers, nn.utils.prune."""

import io
import os
import warnings

import numpy as np
import pytest

import strata

torch = pytest.importorskip("torch")
import torch.nn.utils.prune  # noqa: E402  (torch does not import it with torch.nn.utils)


def same(a, b, atol=1e-6):
    assert tuple(a.shape) == tuple(b.shape)
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), atol=atol, rtol=1e-5)


X = np.random.RandomState(0).randn(3, 4, 5).astype(np.float32)

COPIES = [
    ("expand_copy", lambda m, x: m.expand_copy(x[:, :1], (3, 6, 5))),
    ("t_copy", lambda m, x: m.t_copy(x[0])),
    ("permute_copy", lambda m, x: m.permute_copy(x, (2, 0, 1))),
    ("view_copy", lambda m, x: m.view_copy(x, (12, 5))),
    ("squeeze_copy", lambda m, x: m.squeeze_copy(x[:, :1], 1)),
    ("squeeze_copy_all", lambda m, x: m.squeeze_copy(x[:1, :1])),
    ("unsqueeze_copy", lambda m, x: m.unsqueeze_copy(x, -1)),
    ("transpose_copy", lambda m, x: m.transpose_copy(x, 0, 2)),
    ("diagonal_copy", lambda m, x: m.diagonal_copy(x, 1, 1, 2)),
    ("select_copy", lambda m, x: m.select_copy(x, 1, 2)),
    ("slice_copy", lambda m, x: m.slice_copy(x, 2, 1, 5, 2)),
    ("narrow_copy", lambda m, x: m.narrow_copy(x, 1, 1, 2)),
    ("alias_copy", lambda m, x: m.alias_copy(x)),
    ("detach_copy", lambda m, x: m.detach_copy(x)),
]


@pytest.mark.parametrize("name,fn", COPIES, ids=[c[0] for c in COPIES])
def test_copy_variants(name, fn):
    s, t = strata.tensor(X), torch.tensor(X)
    rs, rt = fn(strata, s), fn(torch, t)
    same(rs, rt)
    assert rs.stride() == rt.stride() and rs.is_contiguous()
    rs.fill_(7.0)  # a copy: the input is untouched
    np.testing.assert_array_equal(s.numpy(), X)


@pytest.mark.parametrize("name", ["split_copy", "unbind_copy"])
def test_copy_list_variants(name):
    args = (2, 1) if name == "split_copy" else (1,)
    rs = getattr(strata, name)(strata.tensor(X), *args)
    rt = getattr(torch, name)(torch.tensor(X), *args)
    assert len(rs) == len(rt)
    for a, b in zip(rs, rt):
        same(a, b)


def test_copy_grad_and_errors():
    s = strata.tensor(X[0], requires_grad=True)
    strata.t_copy(s).mul(strata.arange(4.0)).sum().backward()
    t = torch.tensor(X[0], requires_grad=True)
    torch.t_copy(t).mul(torch.arange(4.0)).sum().backward()
    same(s.grad, t.grad)
    with pytest.raises(RuntimeError, match="expanded size"):
        strata.expand_copy(strata.ones(2, 3), (4, 3))
    out = strata.empty(0)
    strata.permute_copy(strata.tensor(X), (1, 0, 2), out=out)
    same(out, torch.tensor(X).permute(1, 0, 2))


COV_X = np.random.RandomState(1).randn(3, 6).astype(np.float64)


@pytest.mark.parametrize("kw", [{}, {"correction": 0}, {"correction": 2}, {"fweights": [1, 2, 0, 3, 1, 1]},
                                {"aweights": [0.5, 1, 2, 0.1, 1, 3]},
                                {"fweights": [1, 2, 1, 3, 1, 1], "aweights": [0.5, 1, 2, 0.1, 1, 3]},
                                {"fweights": [1, 2, 1, 3, 1, 1], "aweights": [0.5, 1, 2, 0.1, 1, 3],
                                 "correction": 0}])
def test_cov(kw):
    def conv(m, d):
        out = {}
        for k, v in d.items():
            out[k] = m.tensor(v) if k != "aweights" else m.tensor(v, dtype=m.float64)
        return out
    same(strata.cov(strata.tensor(COV_X), **conv(strata, kw)), torch.cov(torch.tensor(COV_X), **conv(torch, kw)))
    same(strata.cov(strata.tensor(COV_X[0]), **conv(strata, kw)), torch.cov(torch.tensor(COV_X[0]), **conv(torch, kw)))


def test_corrcoef_and_int_input():
    same(strata.corrcoef(strata.tensor(COV_X)), torch.corrcoef(torch.tensor(COV_X)))
    same(strata.corrcoef(strata.tensor([1.0, 2.0])), torch.corrcoef(torch.tensor([1.0, 2.0])))
    ri = strata.cov(strata.tensor([[1, 2, 3], [2, 5, 1]]))
    ti = torch.cov(torch.tensor([[1, 2, 3], [2, 5, 1]]))
    assert str(ri.dtype).split(".")[1] == str(ti.dtype).split(".")[1]
    same(ri, ti)
    with pytest.warns(UserWarning, match="degrees of freedom"):
        r = strata.cov(strata.ones(1, 1))
    assert np.isnan(r.item())


@pytest.mark.parametrize("call,match", [
    (lambda m: m.cov(m.ones(2, 2, 2)), "two or fewer dimensions"),
    (lambda m: m.cov(m.ones(2, 3), fweights=m.ones(3)), "integral dtype"),
    (lambda m: m.cov(m.ones(2, 3), fweights=m.tensor([1, -1, 1])), "fweights cannot be negative"),
    (lambda m: m.cov(m.ones(2, 3), aweights=m.tensor([1, 2, 1])), "floating point dtype"),
    (lambda m: m.cov(m.ones(2, 3), aweights=m.tensor([1.0, -2, 1])), "aweights cannot be negative"),
    (lambda m: m.cov(m.ones(2, 3), fweights=m.ones(2, 3, dtype=m.int64)), "one or fewer dimensions"),
    (lambda m: m.cov(m.ones(2, 3), fweights=m.ones(4, dtype=m.int64)), "same numel"),
    (lambda m: m.corrcoef(m.ones(2, 2, 2)), "two or fewer dimensions"),
])
def test_cov_errors(call, match):
    with pytest.raises(RuntimeError, match=match):
        call(torch)
    with pytest.raises(RuntimeError, match=match):
        call(strata)


def test_set_default_tensor_type():
    try:
        for m in (strata, torch):
            with pytest.warns(UserWarning, match="deprecated"):
                m.set_default_tensor_type(m.DoubleTensor)
            assert m.get_default_dtype() == m.float64 and m.ones(1).dtype == m.float64
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                m.set_default_tensor_type("torch.FloatTensor")
                assert m.get_default_dtype() == m.float32
                with pytest.raises(TypeError, match="only floating-point"):
                    m.set_default_tensor_type(m.LongTensor)
                with pytest.raises(TypeError, match="not available"):
                    m.set_default_tensor_type(m.cuda.FloatTensor)
    finally:
        strata.set_default_dtype(strata.float32)
        torch.set_default_dtype(torch.float32)


def test_get_autocast_gpu_dtype():
    with pytest.warns(DeprecationWarning):
        assert str(strata.get_autocast_gpu_dtype()) == "strata.float16"
    with pytest.warns(DeprecationWarning):
        assert torch.get_autocast_gpu_dtype() == torch.float16


# ---- hub ------------------------------------------------------------------------------------------------------------

def test_hub_dirs(monkeypatch, tmp_path):
    monkeypatch.setattr(strata.hub, "_hub_dir", None)
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "th"))
    assert strata.hub.get_dir() == str(tmp_path / "th" / "hub")
    strata.hub.set_dir(str(tmp_path / "x"))
    assert strata.hub.get_dir() == str(tmp_path / "x")
    assert strata.hub.HASH_REGEX.search("resnet18-f37072fd.pth").group(1) == "f37072fd"
    assert strata.hub.urlparse("https://a/b/c.pth").path == "/b/c.pth"


def test_load_state_dict_from_url_cache(monkeypatch, tmp_path):
    monkeypatch.setattr(strata.hub, "_hub_dir", str(tmp_path))
    url = "https://download.example.org/models/net-0123abcd.pth"
    with pytest.raises(RuntimeError, match="does not download.*checkpoints/net-0123abcd.pth"):
        strata.hub.load_state_dict_from_url(url)
    sd = {"w": torch.arange(6.0).view(2, 3)}
    torch.save(sd, tmp_path / "checkpoints" / "net-0123abcd.pth")
    got = strata.hub.load_state_dict_from_url(url)
    same(got["w"], sd["w"])
    got = strata.utils.model_zoo.load_url(url, map_location="cpu")
    same(got["w"], sd["w"])
    with pytest.raises(RuntimeError, match="invalid hash value"):
        strata.hub.load_state_dict_from_url(url, check_hash=True)
    other = tmp_path / "elsewhere"
    other.mkdir()
    torch.save(sd, other / "weights.pt")
    got = strata.hub.load_state_dict_from_url(url, model_dir=str(other), file_name="weights.pt")
    same(got["w"], sd["w"])
    with pytest.raises(RuntimeError, match="does not download"):
        strata.hub.download_url_to_file(url, str(tmp_path / "f"))


def test_hub_load_local_and_cached(monkeypatch, tmp_path):
    repo = tmp_path / "owner_repo_main"
    repo.mkdir()
    (repo / "hubconf.py").write_text("dependencies = []\n\ndef tiny(n=2):\n    '''a tiny model'''\n"
                                     "    import strata\n    return strata.nn.Linear(n, 1)\n\n_private = 1\n")
    m = strata.hub.load(str(repo), "tiny", 3, source="local")
    assert isinstance(m, strata.nn.Linear) and m.in_features == 3
    monkeypatch.setattr(strata.hub, "_hub_dir", str(tmp_path))
    assert strata.hub.list("owner/repo") == ["tiny"]
    assert strata.hub.help("owner/repo", "tiny") == "a tiny model"
    assert strata.hub.load("owner/repo", "tiny", n=4).in_features == 4
    with pytest.raises(RuntimeError, match="Cannot find callable nope"):
        strata.hub.load("owner/repo", "nope")
    with pytest.raises(RuntimeError, match="not in the local cache"):
        strata.hub.load("owner/other", "tiny")
    with pytest.raises(ValueError, match="Unknown source"):
        strata.hub.load("owner/repo", "tiny", source="gitlab")


class Unsafe:
    pass


# ---- utils, jit, accelerator, serialization ----------------------------------------------------------------------

def test_swap_tensors():
    for m in (strata, torch):
        a = m.ones(2, requires_grad=True)
        b = m.zeros(3, dtype=m.int64)
        a.tag = "a"
        ida, idb = id(a), id(b)
        m.utils.swap_tensors(a, b)
        assert id(a) == ida and id(b) == idb
        assert a.tolist() == [0, 0, 0] and not a.requires_grad and a.__dict__ == {}
        assert b.tolist() == [1.0, 1.0] and b.requires_grad and b.tag == "a"
    with pytest.raises(TypeError, match="Expected"):
        strata.utils.swap_tensors(strata.ones(1), 1)
    x = strata.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="not a leaf"):
        strata.utils.swap_tensors(x * 2, strata.ones(2))


def test_checkpoint_device_states_and_accelerator():
    from strata.utils import checkpoint as sc
    from torch.utils import checkpoint as tc
    assert sc.get_device_states(strata.ones(2), 3) == tc.get_device_states(torch.ones(2), 3) == ([], [])
    assert sc.set_device_states([], []) is None
    with strata.accelerator.device_index(None):
        pass
    with pytest.raises(RuntimeError, match="accelerator"):
        with strata.accelerator.device_index(0):
            pass


def test_jit_names():
    from strata.jit.annotations import Dict, List, Optional, Tuple  # noqa: F401
    import typing
    assert List is typing.List and strata.jit.annotations.Tuple is typing.Tuple
    assert issubclass(strata.jit.TracerWarning, Warning)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", category=strata.jit.TracerWarning)
        warnings.warn("x", strata.jit.TracerWarning)
    assert not w

    class M(strata.jit.ScriptModule):
        def __init__(self):
            super().__init__()
            self.lin = strata.nn.Linear(2, 2)

        def forward(self, x):
            return self.lin(x)

    m = M()
    assert isinstance(m, strata.nn.Module) and len(list(m.parameters())) == 2
    assert m(strata.ones(1, 2)).shape == (1, 2)
    with pytest.raises(NotImplementedError):
        m.save("x.pt")


def test_serialization_helpers(tmp_path):
    ss, ts = strata.serialization, torch.serialization
    assert ss.location_tag(strata.ones(2)) == ts.location_tag(torch.ones(2)) == "cpu"
    st = strata.ones(2).untyped_storage()
    assert ss.default_restore_location(st, "cpu") is st
    with pytest.raises(RuntimeError, match="CUDA"):
        ss.default_restore_location(st, "cuda:0")

    if True:
        for m in (strata, torch):
            p = str(tmp_path / f"{m.__name__}.pt")
            m.save({"w": m.ones(2), "u": Unsafe(), "od": __import__("collections").OrderedDict()}, p)
            assert m.serialization.get_unsafe_globals_in_checkpoint(p) == [f"{__name__}.Unsafe"]
            with m.serialization.safe_globals([Unsafe]):
                assert m.serialization.get_unsafe_globals_in_checkpoint(p) == []
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="Expected input to be a checkpoint"):
        ss.get_unsafe_globals_in_checkpoint(str(bad))


# ---- nn.utils.prune ------------------------------------------------------------------------------------------------

def _pair(ctor, *args):
    torch.manual_seed(0)
    tm = getattr(torch.nn, ctor)(*args)
    sm = getattr(strata.nn, ctor)(*args)
    sm.load_state_dict({k: strata.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    return sm, tm


def _same_pruned(sm, tm, name="weight"):
    same(getattr(sm, name + "_mask"), getattr(tm, name + "_mask"))
    same(getattr(sm, name + "_orig"), getattr(tm, name + "_orig"))
    same(getattr(sm, name), getattr(tm, name))
    assert sorted(n for n, _ in sm.named_parameters()) == sorted(n for n, _ in tm.named_parameters())
    assert sorted(n for n, _ in sm.named_buffers()) == sorted(n for n, _ in tm.named_buffers())


PRUNES = [
    ("identity", lambda p, m: p.identity(m, "weight")),
    ("l1_float", lambda p, m: p.l1_unstructured(m, "weight", amount=0.3)),
    ("l1_int", lambda p, m: p.l1_unstructured(m, "weight", amount=7)),
    ("l1_zero", lambda p, m: p.l1_unstructured(m, "weight", amount=0)),
    ("random_unstructured", lambda p, m: p.random_unstructured(m, "weight", amount=0.4)),
    ("random_structured", lambda p, m: p.random_structured(m, "weight", amount=2, dim=0)),
    ("ln_structured", lambda p, m: p.ln_structured(m, "weight", amount=0.5, n=2, dim=0)),
    ("ln_structured_l1_lastdim", lambda p, m: p.ln_structured(m, "weight", amount=1, n=1, dim=-1)),
    ("stacked", lambda p, m: (p.l1_unstructured(m, "weight", amount=0.25), p.ln_structured(m, "weight", 1, 2, 0),
                              p.random_unstructured(m, "weight", amount=3))),
]


@pytest.mark.parametrize("name,fn", PRUNES, ids=[p[0] for p in PRUNES])
def test_prune_matches_torch(name, fn):
    sm, tm = _pair("Linear", 6, 5)
    torch.manual_seed(3)
    fn(torch.nn.utils.prune, tm)
    strata.manual_seed(3)
    fn(strata.nn.utils.prune, sm)
    _same_pruned(sm, tm)
    assert strata.nn.utils.prune.is_pruned(sm) and not strata.nn.utils.prune.is_pruned(strata.nn.Linear(2, 2))
    x = np.random.RandomState(2).randn(3, 6).astype(np.float32)
    ys, yt = sm(strata.tensor(x)), tm(torch.tensor(x))
    same(ys, yt)
    ys.sum().backward()
    yt.sum().backward()
    same(sm.weight_orig.grad, tm.weight_orig.grad)
    strata.nn.utils.prune.remove(sm, "weight")
    torch.nn.utils.prune.remove(tm, "weight")
    same(sm.weight, tm.weight)
    assert isinstance(sm.weight, strata.nn.Parameter) and not hasattr(sm, "weight_mask")
    assert not strata.nn.utils.prune.is_pruned(sm)


def test_prune_hook_reapplies_mask_and_containers():
    sm, _ = _pair("Linear", 4, 3)
    P = strata.nn.utils.prune
    P.l1_unstructured(sm, "weight", amount=0.5)
    P.random_structured(sm, "weight", amount=1, dim=1)
    hooks = [h for h in sm._forward_pre_hooks.values() if isinstance(h, P.BasePruningMethod)]
    assert len(hooks) == 1 and isinstance(hooks[0], P.PruningContainer) and len(hooks[0]) == 2
    with strata.no_grad():
        sm.weight_orig.fill_(2.0)
    sm(strata.ones(1, 4))
    np.testing.assert_array_equal(sm.weight.numpy(), 2.0 * sm.weight_mask.numpy())
    assert int((sm.weight_mask == 0).sum()) >= 6


def test_global_unstructured_and_custom_mask():
    torch.manual_seed(0)
    tnet = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.Linear(5, 3))
    snet = strata.nn.Sequential(strata.nn.Linear(4, 5), strata.nn.Linear(5, 3))
    snet.load_state_dict({k: strata.tensor(v.numpy()) for k, v in tnet.state_dict().items()})
    for P, net in ((strata.nn.utils.prune, snet), (torch.nn.utils.prune, tnet)):
        P.l1_unstructured(net[0], "weight", amount=2)
        P.global_unstructured([(net[0], "weight"), (net[1], "weight"), (net[1], "bias")],
                              pruning_method=P.L1Unstructured, amount=0.4)
        P.custom_from_mask(net[0], "bias", mask=(net[0].bias.detach() > 0).float() if P is torch.nn.utils.prune
                           else (net[0].bias.detach() > 0).float())
    for i in range(2):
        _same_pruned(snet[i], tnet[i])
        _same_pruned(snet[i], tnet[i], "bias")
    with pytest.raises(TypeError, match="unstructured"):
        strata.nn.utils.prune.global_unstructured([(snet[0], "weight")], strata.nn.utils.prune.RandomStructured,
                                                  amount=1)


def test_prune_errors():
    P, TP = strata.nn.utils.prune, torch.nn.utils.prune
    for p, nn in ((P, strata.nn), (TP, torch.nn)):
        lin = nn.Linear(3, 2)
        with pytest.raises(ValueError, match="should either be a float"):
            p.l1_unstructured(lin, "weight", amount=1.5)
        with pytest.raises(ValueError, match="should either be a float"):
            p.l1_unstructured(lin, "weight", amount=-1)
        with pytest.raises(TypeError, match="Invalid type for amount"):
            p.l1_unstructured(lin, "weight", amount="x")
        with pytest.raises(ValueError, match="should be smaller than"):
            p.l1_unstructured(lin, "weight", amount=7)
        assert "weight" in dict(lin.named_parameters())  # a failed pruning leaves the module as it was
        with pytest.raises(ValueError, match="Structured pruning can only be applied"):
            p.ln_structured(lin, "bias", amount=1, n=2, dim=0)
        with pytest.raises(IndexError, match="Invalid index"):
            p.random_structured(lin, "weight", amount=1, dim=2)
        with pytest.raises(ValueError, match="has to be pruned before"):
            p.remove(lin, "weight")
        with pytest.raises(AssertionError, match="same shape"):
            p.l1_unstructured(lin, "weight", amount=1, importance_scores=lin.bias)


# ---- nn.AdaptiveLogSoftmaxWithLoss ---------------------------------------------------------------------------------

def _asm_pair(**kw):
    torch.manual_seed(0)
    tm = torch.nn.AdaptiveLogSoftmaxWithLoss(64, 20, [4, 9, 15], **kw)
    sm = strata.nn.AdaptiveLogSoftmaxWithLoss(64, 20, [4, 9, 15], **kw)
    assert sorted(sm.state_dict()) == sorted(tm.state_dict())
    for k, v in tm.state_dict().items():
        assert tuple(sm.state_dict()[k].shape) == tuple(v.shape)
    sm.load_state_dict({k: strata.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    return sm, tm


@pytest.mark.parametrize("kw", [{}, {"div_value": 2.0, "head_bias": True}])
def test_adaptive_log_softmax(kw):
    sm, tm = _asm_pair(**kw)
    rs = np.random.RandomState(0)
    x = rs.randn(12, 64).astype(np.float32)
    y = np.array([0, 3, 4, 8, 9, 14, 15, 19, 2, 2, 16, 5])
    xs = strata.tensor(x, requires_grad=True)
    xt = torch.tensor(x, requires_grad=True)
    os_, ot = sm(xs, strata.tensor(y)), tm(xt, torch.tensor(y))
    same(os_.output, ot.output, atol=1e-5)
    same(os_.loss, ot.loss, atol=1e-5)
    os_.loss.backward()
    ot.loss.backward()
    same(xs.grad, xt.grad, atol=1e-5)
    same(sm.tail[1][0].weight.grad, tm.tail[1][0].weight.grad, atol=1e-5)
    same(sm.log_prob(strata.tensor(x)), tm.log_prob(torch.tensor(x)), atol=1e-5)
    assert sm.predict(strata.tensor(x)).tolist() == tm.predict(torch.tensor(x)).tolist()
    o1s, o1t = sm(strata.tensor(x[0]), strata.tensor(7)), tm(torch.tensor(x[0]), torch.tensor(7))
    same(o1s.output, o1t.output, atol=1e-5)
    # predictions landing in tail clusters: scale the head so clusters win
    with strata.no_grad(), torch.no_grad():
        sm.head.weight[4:] *= 50
        tm.head.weight[4:] *= 50
    assert sm.predict(strata.tensor(x)).tolist() == tm.predict(torch.tensor(x)).tolist()


@pytest.mark.parametrize("make,err,match", [
    (lambda nn: nn.AdaptiveLogSoftmaxWithLoss(8, 10, []), ValueError, "length larger than 0"),
    (lambda nn: nn.AdaptiveLogSoftmaxWithLoss(8, 10, [5, 3]), ValueError, "unique, positive integers"),
    (lambda nn: nn.AdaptiveLogSoftmaxWithLoss(8, 10, [3, 10]), ValueError, "unique, positive integers"),
])
def test_adaptive_log_softmax_init_errors(make, err, match):
    for nn in (strata.nn, torch.nn):
        with pytest.raises(err, match=match):
            make(nn)


def test_adaptive_log_softmax_forward_errors():
    sm, tm = _asm_pair()
    for m, mod in ((strata, sm), (torch, tm)):
        with pytest.raises(RuntimeError, match="same size in the batch"):
            mod(m.zeros(3, 64), m.tensor([1, 2]))
        with pytest.raises(RuntimeError, match="Target values should be in"):
            mod(m.zeros(2, 64), m.tensor([1, 20]))
        with pytest.raises(RuntimeError, match="multi-target not supported"):
            mod(m.zeros(2, 64), m.zeros(2, 2, dtype=m.int64))
        with pytest.raises(RuntimeError, match="0D target tensor expects 1D"):
            mod(m.zeros(2, 64), m.tensor(1))


# ---- small names: ParamsT, FileBaton, backends.cuda attention probes ---------------------------------------------

def test_params_t_and_sdpa_probes():
    import typing
    from strata.optim.optimizer import ParamsT
    assert len(typing.get_args(ParamsT)) == 3
    bc = strata.backends.cuda
    assert bc.SDPBackend is strata.nn.attention.SDPBackend and int(bc.SDPBackend.FLASH_ATTENTION) == 1
    q = strata.ones(1, 1, 2, 2)
    p = bc.SDPAParams(q, q, q, None, 0.0, False, False)
    assert p.is_causal is False and p.query is q
    tq = torch.ones(1, 1, 2, 2)
    tp = torch.backends.cuda.SDPAParams(tq, tq, tq, None, 0.0, False, False)
    assert bc.can_use_flash_attention(p) == torch.backends.cuda.can_use_flash_attention(tp) is False
    assert bc.can_use_efficient_attention(p) == torch.backends.cuda.can_use_efficient_attention(tp) is False
    with pytest.warns(UserWarning, match="no CUDA"):
        bc.can_use_flash_attention(p, debug=True)
    with pytest.raises(TypeError, match="SDPAParams"):
        bc.can_use_flash_attention(q)


def test_file_baton(tmp_path):
    from strata.utils.file_baton import FileBaton
    path = str(tmp_path / "lock")
    a, b = FileBaton(path, wait_seconds=0.01), FileBaton(path, wait_seconds=0.01, warn_after_seconds=0.0)
    assert a.try_acquire() and os.path.exists(path)
    assert not b.try_acquire()
    import threading
    threading.Timer(0.05, a.release).start()
    with pytest.warns(UserWarning, match="Waited on lock file"):
        b.wait()
    assert not os.path.exists(path) and b.try_acquire()
    b.release()


# ---- futures -------------------------------------------------------------------------------------------------------

def test_futures_against_torch():
    import threading
    for m in (strata, torch):
        F = m.futures.Future
        f = F()
        assert not f.done()
        f.set_result(3)
        assert f.done() and f.wait() == 3 and f.value() == 3
        with pytest.raises(RuntimeError, match="only be marked completed once"):
            f.set_result(4)
        g = F()
        g.set_exception(ValueError("boom"))
        with pytest.raises(ValueError, match="boom"):
            g.wait()
        with pytest.raises(AssertionError, match="not an Exception"):
            F().set_exception(3)
        h = F()
        seen = []
        h.add_done_callback(lambda fut: seen.append(fut.value()))  # callbacks run in order: this one first
        chained = h.then(lambda fut: fut.wait() + 1)
        bad = h.then(lambda fut: 1 / 0)
        threading.Timer(0.02, h.set_result, (1,)).start()
        assert chained.wait() == 2 and seen == [1]
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            bad.wait()
        a, b = F(), F()
        a.set_result(1)
        b.set_result(2)
        assert m.futures.wait_all([a, b]) == [1, 2]
        assert [x.value() for x in m.futures.collect_all([a, b]).wait()] == [1, 2]
        with pytest.raises(ValueError, match="boom"):
            m.futures.wait_all([a, g])


# ---- vmap ----------------------------------------------------------------------------------------------------------

VM = np.random.RandomState(5).randn(3, 4, 2).astype(np.float32)
VW = np.random.RandomState(6).randn(4).astype(np.float32)

VMAPS = [
    ("dot_none", lambda m: m.vmap(lambda a, b: (a * b).sum(), in_dims=(0, None))(m.tensor(VM[:, :, 0]), m.tensor(VW))),
    ("in_dim1", lambda m: m.vmap(m.dot, in_dims=(1, None))(m.tensor(VM[:, :, 0]).t().contiguous(), m.tensor(VW))),
    ("in_dim_neg_out1", lambda m: m.vmap(lambda a: a.sum(0), in_dims=-1, out_dims=1)(m.tensor(VM))),
    ("nested", lambda m: m.vmap(lambda p, s: p[0] @ p[1] + s, in_dims=((0, None), 0))(
        (m.tensor(VM[:, :, 0]), m.tensor(VW)), m.tensor(VM[:, 0, 1]))),
    ("tuple_out", lambda m: m.vmap(lambda a: (a.exp(), a.sum()))(m.tensor(VM))),
    ("dict_in", lambda m: m.vmap(lambda d: d["x"].mean())({"x": m.tensor(VM)})),
]


@pytest.mark.parametrize("name,fn", VMAPS, ids=[v[0] for v in VMAPS])
def test_vmap_matches_torch(name, fn):
    rs, rt = fn(strata), fn(torch)
    if isinstance(rt, tuple):
        for a, b in zip(rs, rt):
            same(a, b, atol=1e-5)
    else:
        same(rs, rt, atol=1e-5)


def test_vmap_grad_and_errors():
    w = strata.tensor(VW, requires_grad=True)
    strata.vmap(lambda a: (a * w).sum(), in_dims=0)(strata.tensor(VM[:, :, 0])).sum().backward()
    tw = torch.tensor(VW, requires_grad=True)
    torch.vmap(lambda a: (a * tw).sum(), in_dims=0)(torch.tensor(VM[:, :, 0])).sum().backward()
    same(w.grad, tw.grad)
    for m in (strata, torch):
        with pytest.raises(ValueError, match="same size in the mapped dimension"):
            m.vmap(m.add)(m.ones(2, 3), m.ones(3, 3))
        with pytest.raises(ValueError):
            m.vmap(m.add, in_dims=(None, None))(m.ones(2), m.ones(2))


def test_vmap_randomness():
    x = strata.ones(3, 2)
    for m, xx in ((strata, x), (torch, torch.ones(3, 2))):
        with pytest.raises(RuntimeError, match="randomness error mode"):
            m.vmap(lambda a: a * m.rand(2))(xx)
    r = strata.vmap(lambda a: a * strata.rand(2), randomness="different")(x)
    assert r.shape == (3, 2) and len({tuple(row) for row in r.tolist()}) == 3
