"""Nested tensors in the jagged layout (docs/NESTED.md) against torch: construction, shape with its ragged size,
accessors, padding, pointwise ops with nested / scalar / dense operands, linear, softmax, layer norm, reductions,
transpose, attention per entry, split/chunk, conversions, autograd into the values and into the entries, the
errors torch raises (and the clear one for ops without a nested implementation), and a transformer encoder
block on a jagged batch matching torch's outputs and gradients."""

import numpy as np
import pytest

import strata
import strata.nn as snn
import strata.nn.functional as SF

torch = pytest.importorskip("torch")
import torch.nn.functional as TF  # noqa: E402

LENS = [2, 5, 3]
D = 4


def npy(x):
    if isinstance(x, torch.Tensor):
        return x.detach().numpy()
    return x.detach().numpy() if x.requires_grad else x.numpy()


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(npy(a), npy(b), rtol=tol, atol=tol)


def close_nested(s, t, tol=1e-5):
    assert s.is_nested and t.is_nested
    su, tu = s.unbind(), t.unbind()
    assert len(su) == len(tu)
    for a, b in zip(su, tu):
        assert tuple(a.shape) == tuple(b.shape)
        close(a, b, tol)


def entries(lens=LENS, rest=(D,), seed=0):
    rs = np.random.RandomState(seed)
    return [rs.randn(n, *rest).astype(np.float32) for n in lens]


def pair(lens=LENS, rest=(D,), seed=0, requires_grad=False):
    arrs = entries(lens, rest, seed)
    s = strata.nested.nested_tensor([strata.tensor(a) for a in arrs], layout=strata.jagged,
                                    requires_grad=requires_grad)
    t = torch.nested.nested_tensor([torch.tensor(a) for a in arrs], layout=torch.jagged, requires_grad=requires_grad)
    return s, t


def shape_str(shape):
    return [str(x) for x in shape]


# ---- construction and accessors ------------------------------------------------------------------------------
def test_nested_tensor_metadata_and_accessors():
    s, t = pair()
    assert s.is_nested and not strata.ones(2).is_nested
    assert s.layout is strata.jagged and repr(strata.jagged) == "strata.jagged"
    assert strata.ones(2).layout is strata.strided
    assert s.dim() == t.dim() == 3
    assert s.size(0) == 3 and s.size(-1) == D and s.shape[0] == 3
    j = s.shape[1]
    assert str(j).startswith("j") and j == s.size(1) and j != 5
    assert repr(s.shape) == f"strata.Size([3, {j}, {D}])"
    with pytest.raises(RuntimeError, match="ragged dimension"):
        int(j)
    assert s.dtype is strata.float32 and s.device == strata.device("cpu")
    close(s.values(), t.values())
    assert s.offsets().tolist() == t.offsets().tolist() == [0, 2, 7, 10]
    assert s.lengths() is None and t.lengths() is None
    assert s.numel() == t.numel() == 40
    assert [tuple(x.shape) for x in s.unbind()] == [tuple(x.shape) for x in t.unbind()]
    close(s.unbind()[1], t.unbind()[1])
    close(s[2], t[2])
    assert repr(s) == f"NestedTensor(size=(3, {j}, {D}), offsets=tensor([ 0,  2,  7, 10]), contiguous=True)"
    s2 = strata.nested.nested_tensor([strata.ones(2, 3, dtype=strata.float64)], layout=strata.jagged,
                                     dtype=strata.float32)
    assert s2.dtype is strata.float32 and tuple(s2.values().shape) == (2, 3)


def test_ops_keep_the_ragged_size_and_new_offsets_get_a_new_one():
    s, _ = pair()
    assert (s * 2).shape[1] == s.shape[1]
    other, _ = pair(seed=1)
    assert other.shape[1] != s.shape[1]


def test_construction_errors():
    with pytest.raises(RuntimeError, match="only dim 0"):
        strata.nested.nested_tensor([strata.ones(2, 3), strata.ones(2, 4)], layout=strata.jagged)
    with pytest.raises(RuntimeError, match="same number of dims"):
        strata.nested.nested_tensor([strata.ones(2, 3), strata.ones(2)], layout=strata.jagged)
    with pytest.raises(RuntimeError, match="0-d"):
        strata.nested.nested_tensor([strata.tensor(1.0)], layout=strata.jagged)
    with pytest.raises(NotImplementedError, match="strided layout"):
        strata.nested.nested_tensor([strata.ones(2, 3)], layout=strata.strided)
    with pytest.raises(RuntimeError, match="non-decreasing"):
        strata.nested.nested_tensor_from_jagged(strata.ones(5, 2), strata.tensor([0, 3, 2]))


def test_as_nested_tensor_from_leaves_gives_their_gradients():
    arrs = entries()
    sl = [strata.tensor(a, requires_grad=True) for a in arrs]
    tl = [torch.tensor(a, requires_grad=True) for a in arrs]
    s = strata.nested.as_nested_tensor(sl, layout=strata.jagged)
    t = torch.nested.as_nested_tensor(tl, layout=torch.jagged)
    assert s.requires_grad and s.grad_fn is not None
    w = np.random.RandomState(3).randn(D).astype(np.float32)
    (s.sin() * strata.tensor(w)).sum().backward()
    (t.sin() * torch.tensor(w)).values().sum().backward()
    for a, b in zip(sl, tl):
        close(a.grad, b.grad)


def test_as_nested_tensor_of_a_dense_batch():
    x = np.random.RandomState(1).randn(3, 4, 2).astype(np.float32)
    s = strata.nested.as_nested_tensor(strata.tensor(x), layout=strata.jagged)
    t = torch.nested.as_nested_tensor(torch.tensor(x), layout=torch.jagged)
    assert s.offsets().tolist() == t.offsets().tolist()
    close_nested(s, t)


def test_nested_tensor_leaf_gets_a_nested_grad():
    s, t = pair(requires_grad=True)
    assert s.is_leaf and s.requires_grad
    (s.exp() * 3).sum().backward()
    (t.exp() * 3).values().sum().backward()
    assert s.grad.is_nested
    close_nested(s.grad, t.grad)
    s.grad = None
    assert s.grad is None


def test_from_jagged_offsets_lengths_and_jagged_dim():
    v = np.random.RandomState(2).randn(9, 3).astype(np.float32)
    off = [0, 2, 6, 9]
    s = strata.nested.nested_tensor_from_jagged(strata.tensor(v), strata.tensor(off))
    t = torch.nested.nested_tensor_from_jagged(torch.tensor(v), torch.tensor(off))
    close_nested(s, t)
    s = strata.nested.nested_tensor_from_jagged(strata.tensor(v), strata.tensor(off), lengths=strata.tensor([1, 2, 3]))
    t = torch.nested.nested_tensor_from_jagged(torch.tensor(v), torch.tensor(off), lengths=torch.tensor([1, 2, 3]))
    close_nested(s, t)
    assert s.lengths().tolist() == [1, 2, 3]
    # torch refuses to_padded_tensor with holes; Strata pads the entries it reads through lengths
    ref = torch.nn.utils.rnn.pad_sequence(list(t.unbind()), batch_first=True, padding_value=-1.0)
    close(s.to_padded_tensor(-1.0), ref)
    close_nested(s + 1, t + 1)  # with holes: ops run on the whole values, entries read back through lengths
    s = strata.nested.nested_tensor_from_jagged(strata.tensor(v), lengths=strata.tensor([4, 5]))
    assert s.offsets().tolist() == [0, 4, 9] and s.lengths() is None
    # jagged_dim=2: the ragged dim is the logical dim 2, values' dim 1
    v2 = np.random.RandomState(3).randn(2, 7, 3).astype(np.float32)
    s = strata.nested.nested_tensor_from_jagged(strata.tensor(v2), strata.tensor([0, 3, 7]), jagged_dim=2)
    t = torch.nested.nested_tensor_from_jagged(torch.tensor(v2), torch.tensor([0, 3, 7]), jagged_dim=2)
    assert shape_str(s.shape)[:2] == ["2", "2"] and s.dim() == t.dim() == 4
    close_nested(s, t)


def test_from_jagged_values_gradient():
    v = np.random.RandomState(4).randn(6, 2).astype(np.float32)
    sv = strata.tensor(v, requires_grad=True)
    tv = torch.tensor(v, requires_grad=True)
    s = strata.nested.nested_tensor_from_jagged(sv, strata.tensor([0, 1, 6]))
    t = torch.nested.nested_tensor_from_jagged(tv, torch.tensor([0, 1, 6]))
    assert not s.is_leaf
    (s.sin() * 2).sum().backward()
    (t.sin() * 2).values().sum().backward()
    close(sv.grad, tv.grad)


def test_narrow():
    x = np.random.RandomState(5).randn(3, 5, 2).astype(np.float32)
    st, ln = [0, 1, 2], [2, 3, 1]
    s = strata.nested.narrow(strata.tensor(x), 1, strata.tensor(st), strata.tensor(ln), layout=strata.jagged)
    t = torch.nested.narrow(torch.tensor(x), 1, torch.tensor(st), torch.tensor(ln), layout=torch.jagged)
    assert s.offsets().tolist() == t.offsets().tolist()
    assert s.lengths().tolist() == t.lengths().tolist()
    close_nested(s, t)
    s = strata.nested.narrow(strata.tensor(x), 1, 1, 3, layout=strata.jagged)
    t = torch.nested.narrow(torch.tensor(x), 1, 1, 3, layout=torch.jagged)
    close_nested(s, t)
    with pytest.raises(RuntimeError, match="within"):
        strata.nested.narrow(strata.tensor(x), 1, 4, 3, layout=strata.jagged)


def test_to_padded_tensor():
    s, t = pair(requires_grad=True)
    ps, pt = strata.nested.to_padded_tensor(s, 0.5), torch.nested.to_padded_tensor(t, 0.5)
    close(ps, pt)
    # output_size sets the padded ragged length (torch's jagged layout reads only that entry)
    close(s.to_padded_tensor(-2.0, output_size=(3, 6, 4)), t.to_padded_tensor(-2.0, output_size=(3, 6, 4)))
    w = np.random.RandomState(6).randn(*pt.shape).astype(np.float32)
    (ps * strata.tensor(w)).sum().backward()
    (pt * torch.tensor(w)).sum().backward()
    close_nested(s.grad, t.grad)
    with pytest.raises(RuntimeError, match="smaller"):
        s.to_padded_tensor(0.0, output_size=(3, 2, 4))  # shorter than the longest entry


# ---- pointwise ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fn", [
    lambda m, x: x.exp(), lambda m, x: x.sin(), lambda m, x: x.abs().sqrt(), lambda m, x: -x,
    lambda m, x: m.tanh(x), lambda m, x: x.sigmoid(),
])
def test_unary(fn):
    s, t = pair(requires_grad=True)
    close_nested(fn(strata, s), fn(torch, t))
    fn(strata, s).sum().backward()
    fn(torch, t).values().sum().backward()
    close_nested(s.grad, t.grad)


@pytest.mark.parametrize("fn", [
    lambda m, x, y: x + y, lambda m, x, y: x * y - y, lambda m, x, y: x / (y.abs() + 1),
    lambda m, x, y: m.atan2(x, y), lambda m, x, y: m.where(x > y, x, y * 2), lambda m, x, y: x.pow(2) + y,
])
def test_binary_nested_nested(fn):
    s, t = pair(requires_grad=True)
    arrs = entries(seed=9)
    s2 = strata.nested.as_nested_tensor([strata.tensor(a) for a in arrs])
    s2 = strata.nested.nested_tensor_from_jagged(s2.values(), s.offsets())
    t2 = torch.nested.nested_tensor_from_jagged(torch.tensor(np.concatenate(arrs)), t.offsets())
    close_nested(fn(strata, s, s2), fn(torch, t, t2))
    fn(strata, s, s2).sum().backward()
    fn(torch, t, t2).values().sum().backward()
    close_nested(s.grad, t.grad)


def test_binary_with_scalars_and_dense():
    s, t = pair(requires_grad=True)
    close_nested(s * 2.5 + 1, t * 2.5 + 1)
    close_nested(1 - s, 1 - t)
    close_nested(s ** 2, t ** 2)
    rs = np.random.RandomState(7)
    for shape in [(D,), (1, D), (3, 1, D), (1, 1, D)]:
        d = rs.randn(*shape).astype(np.float32)
        sd = strata.tensor(d, requires_grad=True)
        td = torch.tensor(d, requires_grad=True)
        close_nested(s * sd, t * td)
        close_nested(sd - s, td - t)
        (s * sd).sum().backward()
        (t * td).values().sum().backward()
        close(sd.grad, td.grad)
        close_nested(s.grad, t.grad)
        s.grad = None
        t.grad = None


def test_binary_structure_mismatch_raises():
    s, t = pair()
    other, tother = pair(lens=[5, 2, 3])
    with pytest.raises(RuntimeError, match="shapes"):
        s + other
    with pytest.raises(RuntimeError):
        t + tother
    with pytest.raises(RuntimeError, match="ragged dim"):
        s + strata.ones(3, 4, D)  # a size other than 1 over the ragged dim
    with pytest.raises(RuntimeError, match="batch dim"):
        s + strata.ones(2, 1, D)


def test_inplace_pointwise():
    s, t = pair()
    s.mul_(3).add_(1)
    t.mul_(3).add_(1)
    close_nested(s, t)
    s.relu_()
    t.relu_()
    close_nested(s, t)


# ---- nn ops ---------------------------------------------------------------------------------------------------
def test_linear_matmul_module():
    s, t = pair(requires_grad=True)
    rs = np.random.RandomState(8)
    w, b = rs.randn(6, D).astype(np.float32), rs.randn(6).astype(np.float32)
    sw, tw = strata.tensor(w, requires_grad=True), torch.tensor(w, requires_grad=True)
    sb, tb = strata.tensor(b, requires_grad=True), torch.tensor(b, requires_grad=True)
    ys, yt = SF.linear(s, sw, sb), TF.linear(t, tw, tb)
    close_nested(ys, yt)
    (ys.relu() * 2).sum().backward()
    (yt.relu() * 2).values().sum().backward()
    close(sw.grad, tw.grad)
    close(sb.grad, tb.grad)
    close_nested(s.grad, t.grad)
    close_nested(s @ strata.tensor(w.T), t @ torch.tensor(w.T))
    lin = snn.Linear(D, 3)
    tlin = torch.nn.Linear(D, 3)
    with torch.no_grad():
        tlin.weight.copy_(torch.tensor(npy(lin.weight)))
        tlin.bias.copy_(torch.tensor(npy(lin.bias)))
    close_nested(lin(s), tlin(t))


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax(name):
    s, t = pair(requires_grad=True)
    for d in (-1, 2):
        close_nested(getattr(SF, name)(s, d), getattr(TF, name)(t, d))
    # gradients against dense per-entry ones (torch 2.13 has no nested log_softmax backward)
    w = np.random.RandomState(10).randn(D).astype(np.float32)
    getattr(SF, name)(s, -1).mul(strata.tensor(w)).sum().backward()
    dense = [torch.tensor(a, requires_grad=True) for a in entries()]
    sum((getattr(TF, name)(x, -1) * torch.tensor(w)).sum() for x in dense).backward()
    for g, x in zip(s.grad.unbind(), dense):
        close(g, x.grad)
    with pytest.raises(RuntimeError, match="batch"):
        getattr(SF, name)(s, 0)


def test_softmax_over_the_ragged_dim():
    # Over each entry's own length. torch 2.13 agrees on softmax's values, refuses log_softmax, and its softmax
    # gradient over the ragged dim differs from the dense per-entry one (whose per-column sums are 0, as a
    # softmax gradient's must be); Strata's is the dense per-entry one.
    s, t = pair(requires_grad=True)
    close_nested(SF.softmax(s, 1), TF.softmax(t, 1))
    with pytest.raises(RuntimeError, match="ragged"):
        TF.log_softmax(t, 1)
    arrs = entries()
    w = entries(seed=11)
    dense = [torch.tensor(a, requires_grad=True) for a in arrs]
    for name in ("softmax", "log_softmax"):
        ys = getattr(SF, name)(s, 1)
        for p, a in zip(ys.unbind(), arrs):
            close(p, getattr(TF, name)(torch.tensor(a), 0))
        wn = strata.nested.nested_tensor_from_jagged(strata.tensor(np.concatenate(w)), s.offsets())
        (ys * wn).sum().backward()
        sum((getattr(TF, name)(x, 0) * torch.tensor(ww)).sum() for x, ww in zip(dense, w)).backward()
        for g, x in zip(s.grad.unbind(), dense):
            close(g, x.grad)
        s.grad = None
        for x in dense:
            x.grad = None


def test_layer_norm_dropout_activations():
    s, t = pair(requires_grad=True)
    ln, tln = snn.LayerNorm(D), torch.nn.LayerNorm(D)
    with torch.no_grad():
        w = np.random.RandomState(12).randn(D).astype(np.float32)
        tln.weight.copy_(torch.tensor(w))
    with strata.no_grad():
        ln.weight.copy_(strata.tensor(w))
    ys, yt = ln(s), tln(t)
    close_nested(ys, yt)
    close_nested(SF.layer_norm(s, (D,)), TF.layer_norm(t, (D,)))
    ys.pow(2).sum().backward()
    yt.pow(2).values().sum().backward()
    close_nested(s.grad, t.grad)
    close(ln.weight.grad, tln.weight.grad)
    with pytest.raises(RuntimeError, match="ragged"):
        SF.layer_norm(s, (5, D))
    for f, g in [(SF.gelu, TF.gelu), (SF.relu, TF.relu), (SF.silu, TF.silu)]:
        close_nested(f(s), g(t))
    # dropout: the same mask rule as dense dropout (a multiple of 1/(1-p) or 0 at each element)
    y = SF.dropout(s, 0.5)
    assert y.is_nested and y.shape[1] == s.shape[1]
    v, x = npy(y.values()), npy(s.values())
    assert np.all(np.isclose(v, 0) | np.isclose(v, 2 * x))
    assert SF.dropout(s, 0.5, training=False) is s
    y = snn.Dropout(0.25)(s)
    y.sum().backward()


def test_reductions_match_torch_and_refuse_what_torch_refuses():
    s, t = pair(requires_grad=True)
    for op in ("sum", "mean"):
        for d in (2, -1, 1, (1,), (0, 1), (0, 1, 2)):
            ys, yt = getattr(s, op)(d), getattr(t, op)(d)
            assert ys.is_nested == yt.is_nested, (op, d)
            if ys.is_nested:
                close_nested(ys, yt)
            else:
                close(ys, yt)
        close_nested(getattr(s, op)(-1, keepdim=True), getattr(t, op)(-1, keepdim=True))
        close(getattr(s, op)(1, keepdim=True), getattr(t, op)(1, keepdim=True))
        for d, msg in ((0, "batch dimension"), ((1, 2), "ragged and non-batch")):
            with pytest.raises(RuntimeError, match=msg):
                getattr(s, op)(d)
            with pytest.raises((RuntimeError, AssertionError)):  # torch's mean((1, 2)) asserts
                getattr(t, op)(d)
    close(s.sum(), t.sum())
    close(s.mean(), t.values().mean())
    # over the ragged dim torch 2.13 has no backward: compare with the dense per-entry gradient
    for op in ("sum", "mean"):
        s.grad = None
        (getattr(s, op)(1) ** 2).sum().backward()
        dense = [torch.tensor(a, requires_grad=True) for a in entries()]
        (torch.stack([getattr(x, op)(0) for x in dense]) ** 2).sum().backward()
        for g, x in zip(s.grad.unbind(), dense):
            close(g, x.grad)
    s.grad = None
    (s.mean(-1) ** 2).sum().backward()
    (t.mean(-1) ** 2).values().sum().backward()
    close_nested(s.grad, t.grad)


def test_transpose_and_split_chunk_clone_detach_to():
    s, t = pair(rest=(2, 3), requires_grad=True)
    ss, tt = s.transpose(1, 2), t.transpose(1, 2)
    assert ss.dim() == 4 and shape_str(ss.shape)[1] == "2" and ss._ragged_idx == tt._ragged_idx == 2
    close_nested(ss, tt)
    close_nested(ss.transpose(1, 2), tt.transpose(1, 2))
    close_nested(s.transpose(2, 3), t.transpose(2, 3))
    with pytest.raises(ValueError, match="batch dimension"):
        s.transpose(0, 1)
    for a, b in zip(s.chunk(3, -1), t.chunk(3, -1)):
        close_nested(a, b)
    for a, b in zip(s.split(2, -1), t.split(2, -1)):
        close_nested(a, b)
    for a, b in zip(s.split([1, 2], -1), t.split([1, 2], -1)):
        close_nested(a, b)
    with pytest.raises(RuntimeError, match="ragged"):
        s.chunk(2, 1)
    c = s.clone()
    close_nested(c, t.clone())
    assert c.requires_grad and c.grad_fn is not None
    dd = s.detach()
    assert dd.is_nested and not dd.requires_grad and dd.shape[1] == s.shape[1]
    h = s.to(strata.float64)
    assert h.dtype is strata.float64 and h.is_nested
    close_nested(h, t.to(torch.float64))
    (ss.sin() * 2).sum().backward()
    (tt.sin() * 2).transpose(1, 2).values().sum().backward()
    close_nested(s.grad, t.grad)


def _attn_inputs(H=2, E=3, lens=LENS, seed=20):
    out = []
    for k in range(3):
        s, t = pair(lens=lens, rest=(H, E), seed=seed + k, requires_grad=True)
        out.append((s, t))
    return out


def test_sdpa_per_sequence():
    (qs, qt), (ks, kt), (vs, vt) = _attn_inputs()
    os_ = SF.scaled_dot_product_attention(qs.transpose(1, 2), ks.transpose(1, 2), vs.transpose(1, 2))
    ot = TF.scaled_dot_product_attention(qt.transpose(1, 2), kt.transpose(1, 2), vt.transpose(1, 2))
    close_nested(os_, ot)
    os_.transpose(1, 2).sin().sum().backward()
    ot.transpose(1, 2).sin().values().sum().backward()
    for a, b in ((qs, qt), (ks, kt), (vs, vt)):
        close_nested(a.grad, b.grad, 1e-4)


def test_sdpa_causal_and_cross_attention_match_dense_per_entry():
    # torch 2.13 has no CPU kernel for causal attention on nested tensors: compare with dense attention per entry.
    (qs, _), (ks, _), (vs, _) = _attn_inputs()
    os_ = SF.scaled_dot_product_attention(qs.transpose(1, 2), ks.transpose(1, 2), vs.transpose(1, 2),
                                          is_causal=True)
    (kc, _), (vc, _) = _attn_inputs(lens=[4, 1, 6], seed=40)[:2]  # keys/values of other lengths
    oc = SF.scaled_dot_product_attention(qs.transpose(1, 2), kc.transpose(1, 2), vc.transpose(1, 2))
    assert oc.shape[2] == qs.shape[1]
    for i in range(3):
        q, k, v = (torch.tensor(npy(x.unbind()[i])).transpose(0, 1) for x in (qs, ks, vs))
        close(os_.unbind()[i], TF.scaled_dot_product_attention(q, k, v, is_causal=True))
        k, v = (torch.tensor(npy(x.unbind()[i])).transpose(0, 1) for x in (kc, vc))
        close(oc.unbind()[i], TF.scaled_dot_product_attention(q, k, v))
    oc.sum().backward()
    assert kc.grad.is_nested and qs.grad.is_nested


def test_sdpa_errors():
    (qs, _), (ks, _), (vs, _) = _attn_inputs()
    with pytest.raises(RuntimeError, match="ragged dim second to last"):
        SF.scaled_dot_product_attention(qs, ks, vs)
    with pytest.raises(RuntimeError, match="attn_mask"):
        SF.scaled_dot_product_attention(qs.transpose(1, 2), ks.transpose(1, 2), vs.transpose(1, 2),
                                        attn_mask=strata.ones(1))


def test_unsupported_op_names_the_op_and_layout():
    s, _ = pair()
    with pytest.raises(NotImplementedError, match=r"'cumsum'.*nested tensor \(layout strata.jagged\)"):
        s.cumsum(2)
    with pytest.raises(RuntimeError, match="nested"):
        s.tolist()


# ---- a transformer encoder block on a jagged batch ---------------------------------------------------------------
class _Block:
    """Pre-norm encoder block written as torch users write it for jagged batches (the same code runs under both
    libraries: m is strata or torch)."""

    def __init__(self, m, E, H, params):
        self.m, self.H, self.E = m, H, E
        nn = m.nn
        self.ln1, self.ln2 = nn.LayerNorm(E), nn.LayerNorm(E)
        self.q, self.k, self.v = nn.Linear(E, E), nn.Linear(E, E), nn.Linear(E, E)
        self.out, self.ff1, self.ff2 = nn.Linear(E, E), nn.Linear(E, 2 * E), nn.Linear(2 * E, E)
        mods = [self.ln1, self.ln2, self.q, self.k, self.v, self.out, self.ff1, self.ff2]
        with m.no_grad():
            for mod, (w, b) in zip(mods, params):
                mod.weight.copy_(m.tensor(w))
                mod.bias.copy_(m.tensor(b))
        self.mods = mods

    def __call__(self, x):
        F = self.m.nn.functional
        h = self.ln1(x)
        q, k, v = (lin(h).unflatten(-1, [self.H, self.E // self.H]).transpose(1, 2)
                   for lin in (self.q, self.k, self.v))
        a = F.scaled_dot_product_attention(q, k, v)
        x = x + self.out(a.transpose(1, 2).flatten(-2))
        return x + self.ff2(F.gelu(self.ff1(self.ln2(x))))


def test_transformer_encoder_block_on_a_jagged_batch():
    E, H = 8, 2
    rs = np.random.RandomState(30)
    params = [(1 + 0.1 * rs.randn(E), 0.1 * rs.randn(E)), (1 + 0.1 * rs.randn(E), 0.1 * rs.randn(E)),
              (rs.randn(E, E) / 3, rs.randn(E) / 5), (rs.randn(E, E) / 3, rs.randn(E) / 5),
              (rs.randn(E, E) / 3, rs.randn(E) / 5), (rs.randn(E, E) / 3, rs.randn(E) / 5),
              (rs.randn(2 * E, E) / 3, rs.randn(2 * E) / 5), (rs.randn(E, 2 * E) / 4, rs.randn(E) / 5)]
    params = [(w.astype(np.float32), b.astype(np.float32)) for w, b in params]
    arrs = entries(lens=[3, 7, 1, 5], rest=(E,), seed=31)
    xs = [strata.tensor(a, requires_grad=True) for a in arrs]
    xt = [torch.tensor(a, requires_grad=True) for a in arrs]
    bs, bt = _Block(strata, E, H, params), _Block(torch, E, H, params)
    ys = bs(strata.nested.as_nested_tensor(xs, layout=strata.jagged))
    yt = bt(torch.nested.as_nested_tensor(xt, layout=torch.jagged))
    close_nested(ys, yt, 1e-4)
    # a loss over the padded batch (padding positions contribute nothing)
    ls = (ys.to_padded_tensor(0.0) ** 2).sum()
    lt = (yt.to_padded_tensor(0.0) ** 2).sum()
    close(ls, lt, 1e-4)
    ls.backward()
    lt.backward()
    for a, b in zip(xs, xt):
        close(a.grad, b.grad, 1e-4)
    for ms, mt in zip(bs.mods, bt.mods):
        close(ms.weight.grad, mt.weight.grad, 1e-4)
        close(ms.bias.grad, mt.bias.grad, 1e-4)


def test_like_factories_inplace_fills_and_copies():
    s, t = pair(requires_grad=True)
    for fs, ft in ((strata.zeros_like, torch.zeros_like), (strata.ones_like, torch.ones_like)):
        close_nested(fs(s), ft(t))
    close_nested(strata.full_like(s, 2.5), torch.full_like(t, 2.5))
    r = strata.randn_like(s)
    assert r.is_nested and r.shape[1] == s.shape[1] and not r.requires_grad
    x, y = s.detach().clone(), t.detach().clone()
    x.zero_()
    y.zero_()
    close_nested(x, y)
    x.fill_(3.0)
    y.fill_(3.0)
    close_nested(x, y)
    x.copy_(s.detach())
    close_nested(x, t)
    with pytest.raises(RuntimeError, match="same structure"):
        x.copy_(pair(lens=[1, 1, 8])[0])


def test_pickle_deepcopy_and_save():
    import copy
    import io
    import pickle
    s, t = pair(requires_grad=True)
    for c in (pickle.loads(pickle.dumps(s)), copy.deepcopy(s)):
        assert c.is_nested and c.requires_grad and c.is_leaf
        close_nested(c, t)
        assert c.offsets().tolist() == s.offsets().tolist()
    with pytest.raises(RuntimeError, match="nested tensors"):
        strata.save({"x": s}, io.BytesIO())


def test_backward_with_a_nested_gradient_and_autograd_grad():
    s, t = pair(requires_grad=True)
    g = np.random.RandomState(50).randn(sum(LENS), D).astype(np.float32)
    gs = strata.nested.nested_tensor_from_jagged(strata.tensor(g), s.offsets())
    gt = torch.nested.nested_tensor_from_jagged(torch.tensor(g), t.offsets())
    s.tanh().backward(gs)
    t.tanh().backward(gt)
    close_nested(s.grad, t.grad)
    (r,) = strata.autograd.grad(s.exp(), s, gs)
    (rt,) = torch.autograd.grad(t.exp(), t, gt)
    assert r.is_nested
    close_nested(r, rt)


def test_view_reshape_unsqueeze_squeeze_permute():
    s, t = pair(rest=(8,), requires_grad=True)
    for f in (lambda x: x.view(3, -1, 2, 4), lambda x: x.reshape(3, -1, 2, 4).reshape(3, -1, 8),
              lambda x: x.unsqueeze(-1), lambda x: x.unsqueeze(1), lambda x: x.unsqueeze(2).squeeze(2),
              lambda x: x.permute(0, 2, 1)):
        ys, yt = f(s), f(t)
        assert ys._ragged_idx == yt._ragged_idx
        close_nested(ys, yt)
    for f in (lambda x: x.unsqueeze(0), lambda x: x.view(3, 4, 8), lambda x: x.permute(1, 0, 2)):
        with pytest.raises(RuntimeError):
            f(s)
        with pytest.raises((RuntimeError, ValueError)):
            f(t)
    s.view(3, -1, 2, 4).permute(0, 2, 1, 3).sin().sum().backward()
    t.view(3, -1, 2, 4).sin().values().sum().backward()
    close_nested(s.grad, t.grad)


def test_slicing_select_and_other_reductions():
    s, t = pair(rest=(8,), requires_grad=True)
    for f in (lambda x: x[..., 1:5], lambda x: x[..., 1:7:2], lambda x: x.amax(-1), lambda x: x.amin(-1, keepdim=True),
              lambda x: x.max(-1).values, lambda x: x.max(-1).indices, lambda x: x.prod(-1),
              lambda x: strata.maximum(x, x * 0) if isinstance(x, strata.Tensor) else torch.maximum(x, x * 0)):
        close_nested(f(s), f(t))
    for f in (lambda x: x[..., 0], lambda x: x.select(2, 3)):
        close_nested(f(s), f(t))
    for f in (lambda x: x.amax(1), lambda x: x.max(1).values, lambda x: x.max()):
        close(f(s), f(t))
    # torch 2.13 has no nested kernel for these: the dense per-entry results
    for name in ("logsumexp", "var", "std"):
        for p, a in zip(getattr(s, name)(-1).unbind(), entries(rest=(8,))):
            close(p, getattr(torch.tensor(a), name)(-1))
    with pytest.raises(RuntimeError, match="ragged"):
        s.select(1, 1)
    with pytest.raises(NotImplementedError, match="batch dim"):
        s.amax(0)
    (s.amax(-1) * 3).sum().backward()
    (t.amax(-1) * 3).values().sum().backward()
    close_nested(s.grad, t.grad)
    s.grad = None  # torch 2.13 has no nested slice backward: the gradient of a slice is the dense one
    s[..., 2:6].sum().backward()
    expect = np.zeros((sum(LENS), 8), np.float32)
    expect[:, 2:6] = 1
    close(s.grad.values(), strata.tensor(expect))


def test_cat_along_a_regular_dim():
    s, t = pair(requires_grad=True)
    close_nested(strata.cat([s, s * 2], -1), torch.cat([t, t * 2], -1))
    with pytest.raises(RuntimeError, match="ragged"):
        strata.cat([s, s], 1)
    with pytest.raises(RuntimeError, match="one structure"):
        strata.cat([s, pair(lens=[1, 1, 8])[0]], -1)
    strata.cat([s, s.sin()], -1).sum().backward()
    torch.cat([t, t.sin()], -1).values().sum().backward()
    close_nested(s.grad, t.grad)
