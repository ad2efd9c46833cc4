"""nn.RNN / LSTM / GRU, the cells and nn.utils.rnn against torch: outputs, final states and every gradient (input,
initial states, each weight), with weights copied from torch's modules."""

import math

import numpy as np
import pytest

import strata as st
from strata.nn.utils import rnn as srnn

torch = pytest.importorskip("torch")
trnn = torch.nn.utils.rnn

TOL = {"float32": dict(rtol=1e-4, atol=1e-5), "float64": dict(rtol=1e-10, atol=1e-11)}


def S(t, grad=False):
    """A strata copy of a torch tensor (a leaf that requires grad when asked)."""
    s = st.tensor(t.detach().cpu().numpy())
    return s.requires_grad_() if grad else s


def close(s, t, dtype, what=""):
    assert s is not None and t is not None, what
    np.testing.assert_allclose(s.detach().numpy(), t.detach().numpy(), err_msg=what, **TOL[dtype])


def make_pair(cls_name, dtype, *args, **kwargs):
    torch.manual_seed(0)
    tm = getattr(torch.nn, cls_name)(*args, **kwargs).to(getattr(torch, dtype))
    sm = getattr(st.nn, cls_name)(*args, **kwargs).to(getattr(st, dtype))
    names_t = [n for n, _ in tm.named_parameters()]
    names_s = [n for n, _ in sm.named_parameters()]
    assert names_t == names_s
    for (n, pt), (_, ps) in zip(tm.named_parameters(), sm.named_parameters()):
        assert tuple(pt.shape) == tuple(ps.shape), n
        with st.no_grad():
            ps.copy_(S(pt))
    return tm, sm


def compare_grads(tm, sm, dtype):
    for (n, pt), (_, ps) in zip(tm.named_parameters(), sm.named_parameters()):
        close(ps.grad, pt.grad, dtype, f"grad of {n}")


def run_both(tm, sm, x, states, dtype):
    """Forward both modules, backward a random weighting of every output, compare everything."""
    xt = x.clone().requires_grad_()
    xs = S(x, grad=True)
    st_t = None if states is None else tuple(h.clone().requires_grad_() for h in states)
    st_s = None if states is None else tuple(S(h, grad=True) for h in states)
    lstm = isinstance(tm, (torch.nn.LSTM, torch.nn.LSTMCell))
    cell = isinstance(tm, torch.nn.modules.rnn.RNNCellBase)

    def call(m, x, s):
        if s is None:
            return m(x)
        return m(x, s if lstm else s[0])

    rt, rs = call(tm, xt, st_t), call(sm, xs, st_s)
    if cell:
        outs_t, outs_s = (list(rt) if lstm else [rt]), (list(rs) if lstm else [rs])
    else:
        outs_t = [rt[0]] + (list(rt[1]) if lstm else [rt[1]])
        outs_s = [rs[0]] + (list(rs[1]) if lstm else [rs[1]])
    loss_t, loss_s = 0, 0
    g = torch.Generator().manual_seed(1)
    for k, (ot, os_) in enumerate(zip(outs_t, outs_s)):
        close(os_, ot, dtype, f"output {k}")
        w = torch.randn(ot.shape, generator=g, dtype=ot.dtype)
        loss_t = loss_t + (ot * w).sum()
        loss_s = loss_s + (os_ * S(w)).sum()
    loss_t.backward()
    loss_s.backward()
    close(xs.grad, xt.grad, dtype, "input grad")
    if states is not None:
        for k, (a, b) in enumerate(zip(st_s, st_t)):
            close(a.grad, b.grad, dtype, f"state {k} grad")
    compare_grads(tm, sm, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("mode", ["RNN_TANH", "RNN_RELU", "LSTM", "GRU"])
@pytest.mark.parametrize("layers,bidir,batch_first,bias,with_state", [
    (1, False, False, True, True),
    (1, False, False, True, False),
    (2, False, True, True, True),
    (1, True, False, False, True),
    (2, True, True, True, True),
    (2, True, False, True, False),
])
def test_layers_match_torch(dtype, mode, layers, bidir, batch_first, bias, with_state):
    cls = {"RNN_TANH": "RNN", "RNN_RELU": "RNN"}.get(mode, mode)
    kw = dict(num_layers=layers, bidirectional=bidir, batch_first=batch_first, bias=bias)
    if cls == "RNN":
        kw["nonlinearity"] = "tanh" if mode == "RNN_TANH" else "relu"
    tm, sm = make_pair(cls, dtype, 5, 7, **kw)
    T, B = 6, 3
    torch.manual_seed(2)
    tdt = getattr(torch, dtype)
    x = torch.randn((B, T, 5) if batch_first else (T, B, 5), dtype=tdt)
    dirs = 2 if bidir else 1
    states = None
    if with_state:
        states = (torch.randn(layers * dirs, B, 7, dtype=tdt),)
        if mode == "LSTM":
            states = states + (torch.randn(layers * dirs, B, 7, dtype=tdt),)
    run_both(tm, sm, x, states, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("layers,bidir", [(1, False), (2, True)])
def test_lstm_proj_size(dtype, layers, bidir):
    tm, sm = make_pair("LSTM", dtype, 4, 8, num_layers=layers, bidirectional=bidir, proj_size=3)
    tdt = getattr(torch, dtype)
    torch.manual_seed(3)
    dirs = 2 if bidir else 1
    x = torch.randn(5, 2, 4, dtype=tdt)
    states = (torch.randn(layers * dirs, 2, 3, dtype=tdt), torch.randn(layers * dirs, 2, 8, dtype=tdt))
    run_both(tm, sm, x, states, dtype)
    run_both(tm, sm, x, None, dtype)
    assert tuple(sm.weight_hr_l0.shape) == (3, 8)


@pytest.mark.parametrize("mode", ["RNN", "LSTM", "GRU"])
def test_unbatched_input(mode):
    tm, sm = make_pair(mode, "float64", 3, 4, num_layers=2, bidirectional=True)
    torch.manual_seed(4)
    x = torch.randn(5, 3, dtype=torch.float64)
    states = (torch.randn(4, 4, dtype=torch.float64),)
    if mode == "LSTM":
        states = states + (torch.randn(4, 4, dtype=torch.float64),)
    run_both(tm, sm, x, states, "float64")
    run_both(tm, sm, x, None, "float64")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("mode", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("bidir", [False, True])
def test_packed_unsorted(dtype, mode, bidir):
    kw = dict(num_layers=2, bidirectional=bidir)
    if mode == "LSTM":
        kw["proj_size"] = 3
    tm, sm = make_pair(mode, dtype, 4, 6, **kw)
    tdt = getattr(torch, dtype)
    torch.manual_seed(5)
    lengths = [3, 6, 1, 4, 5]  # distinct: with ties the two libraries may order equal lengths differently
    T, B = max(lengths), len(lengths)
    x = torch.randn(B, T, 4, dtype=tdt)
    dirs = 2 if bidir else 1
    out = 3 if mode == "LSTM" else 6
    h0 = torch.randn(2 * dirs, B, out, dtype=tdt)
    c0 = torch.randn(2 * dirs, B, 6, dtype=tdt)
    xt, h0t, c0t = x.clone().requires_grad_(), h0.clone().requires_grad_(), c0.clone().requires_grad_()
    xs, h0s, c0s = S(x, True), S(h0, True), S(c0, True)
    pt = trnn.pack_padded_sequence(xt, lengths, batch_first=True, enforce_sorted=False)
    ps = srnn.pack_padded_sequence(xs, lengths, batch_first=True, enforce_sorted=False)
    assert ps.batch_sizes.tolist() == pt.batch_sizes.tolist()
    assert ps.sorted_indices.tolist() == pt.sorted_indices.tolist()
    assert ps.unsorted_indices.tolist() == pt.unsorted_indices.tolist()
    close(ps.data, pt.data, dtype, "packed data")
    if mode == "LSTM":
        ot, (ht, ct) = tm(pt, (h0t, c0t))
        os_, (hs, cs) = sm(ps, (h0s, c0s))
        outs_t, outs_s = [ot.data, ht, ct], [os_.data, hs, cs]
    else:
        ot, ht = tm(pt, h0t)
        os_, hs = sm(ps, h0s)
        outs_t, outs_s = [ot.data, ht], [os_.data, hs]
    assert isinstance(os_, srnn.PackedSequence)
    pad_t, len_t = trnn.pad_packed_sequence(ot, batch_first=True, padding_value=-2.0)
    pad_s, len_s = srnn.pad_packed_sequence(os_, batch_first=True, padding_value=-2.0)
    assert len_s.tolist() == len_t.tolist() == lengths
    outs_t.append(pad_t)
    outs_s.append(pad_s)
    loss_t, loss_s = 0, 0
    g = torch.Generator().manual_seed(1)
    for k, (a, b) in enumerate(zip(outs_s, outs_t)):
        close(a, b, dtype, f"output {k}")
        w = torch.randn(b.shape, generator=g, dtype=tdt)
        loss_t = loss_t + (b * w).sum()
        loss_s = loss_s + (a * S(w)).sum()
    loss_t.backward()
    loss_s.backward()
    close(xs.grad, xt.grad, dtype, "input grad")
    close(h0s.grad, h0t.grad, dtype, "h0 grad")
    if mode == "LSTM":
        close(c0s.grad, c0t.grad, dtype, "c0 grad")
    compare_grads(tm, sm, dtype)


def test_packed_sorted_without_state():
    tm, sm = make_pair("GRU", "float64", 2, 3)
    seqs = [torch.randn(n, 2, dtype=torch.float64) for n in (4, 4, 2)]
    pt = trnn.pack_sequence(seqs)
    ps = srnn.pack_sequence([S(s) for s in seqs])
    assert ps.sorted_indices is None and ps.unsorted_indices is None
    (ot, ht), (os_, hs) = tm(pt), sm(ps)
    close(os_.data, ot.data, "float64")
    close(hs, ht, "float64")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("cls,kw", [("RNNCell", {}), ("RNNCell", {"nonlinearity": "relu"}), ("LSTMCell", {}),
                                    ("GRUCell", {}), ("GRUCell", {"bias": False})])
@pytest.mark.parametrize("batched", [True, False])
def test_cells(dtype, cls, kw, batched):
    tm, sm = make_pair(cls, dtype, 5, 4, **kw)
    tdt = getattr(torch, dtype)
    torch.manual_seed(6)
    shape = (3,) if batched else ()
    x = torch.randn(shape + (5,), dtype=tdt)
    states = (torch.randn(shape + (4,), dtype=tdt),)
    if cls == "LSTMCell":
        states = states + (torch.randn(shape + (4,), dtype=tdt),)
    run_both(tm, sm, x, states, dtype)
    run_both(tm, sm, x, None, dtype)


def test_dropout_between_layers():
    # p=1 zeroes the second layer's input in training mode, deterministically: both libraries must agree.
    tm, sm = make_pair("LSTM", "float64", 3, 4, num_layers=2, dropout=1.0)
    x = torch.randn(5, 2, 3, dtype=torch.float64)
    tm.train()
    sm.train()
    close(sm(S(x))[0], tm(x)[0], "float64")
    # Evaluation mode applies no dropout.
    tm.eval()
    sm.eval()
    close(sm(S(x))[0], tm(x)[0], "float64")
    # 0 < p < 1 in training mode: random, different from evaluation.
    sm2 = st.nn.GRU(3, 8, num_layers=2, dropout=0.5).double()
    xs = S(x)
    sm2.eval()
    ref = sm2(xs)[0]
    sm2.train()
    assert not np.allclose(sm2(xs)[0].detach().numpy(), ref.detach().numpy())


def test_default_init_and_api():
    m = st.nn.LSTM(10, 16, num_layers=2, bidirectional=True, proj_size=4)
    bound = 1 / math.sqrt(16)
    for n, p in m.named_parameters():
        a = p.detach().numpy()
        assert a.min() >= -bound and a.max() <= bound, n
        assert a.std() > bound / 4, n
    t = torch.nn.LSTM(10, 16, num_layers=2, bidirectional=True, proj_size=4)
    assert [n for n, _ in m.named_parameters()] == [n for n, _ in t.named_parameters()]
    assert m._flat_weights_names == t._flat_weights_names
    assert [[tuple(w.shape) for w in ws] for ws in m.all_weights] == \
        [[tuple(w.shape) for w in ws] for ws in t.all_weights]
    m.flatten_parameters()  # a no-op
    assert repr(m) == repr(t)
    assert repr(st.nn.RNN(3, 4, 2, nonlinearity="relu", batch_first=True)) == \
        repr(torch.nn.RNN(3, 4, 2, nonlinearity="relu", batch_first=True))
    assert repr(st.nn.GRUCell(3, 4, bias=False)) == repr(torch.nn.GRUCell(3, 4, bias=False))


def test_gradcheck_layer_ops():
    rng = np.random.default_rng(0)

    def leaf(*shape):
        return st.tensor(rng.standard_normal(shape)).requires_grad_()

    x, h, c = leaf(3, 2, 2), leaf(2, 3), leaf(2, 3)
    lstm = (leaf(12, 2), leaf(12, 3), leaf(12), leaf(12))
    assert st.autograd.gradcheck(lambda *a: st._C._ops._lstm_layer(*a)[:3], (x, h, c) + lstm)
    hp = leaf(2, 2)
    proj = (leaf(12, 2), leaf(12, 2), leaf(12), leaf(12), leaf(2, 3))
    bs = st.tensor([2, 2, 1])
    xp = leaf(5, 2)
    assert st.autograd.gradcheck(lambda *a: st._C._ops._lstm_layer(*a, bs, True)[:3], (xp, hp, c) + proj)
    gru = (leaf(9, 2), leaf(9, 3), leaf(9), leaf(9))
    assert st.autograd.gradcheck(lambda *a: st._C._ops._gru_layer(*a, None, True)[:2], (x, h) + gru)
    rnn = (leaf(3, 2), leaf(3, 3), leaf(3), leaf(3))
    assert st.autograd.gradcheck(lambda *a: st._C._ops._rnn_tanh_layer(*a)[:2], (x, h) + rnn)
    assert st.autograd.gradcheck(lambda *a: st._C._ops._rnn_relu_layer(*a, bs)[:2], (xp, h) + rnn)


def _errors(fn_t, fn_s):
    with pytest.raises(Exception) as et:
        fn_t()
    with pytest.raises(type(et.value)) as es:
        fn_s()
    return str(et.value), str(es.value)


@pytest.mark.parametrize("mode", ["RNN", "LSTM", "GRU"])
def test_errors_match_torch(mode):
    tm, sm = make_pair(mode, "float32", 4, 5, num_layers=2)
    x = torch.randn(3, 2, 4)
    bad_x = torch.randn(3, 2, 6)
    et, es = _errors(lambda: tm(bad_x), lambda: sm(S(bad_x)))
    assert et == es
    h = torch.randn(1, 2, 5)  # needs (2, 2, 5)
    hx = (h, torch.randn(2, 2, 5)) if mode == "LSTM" else h
    hs = (S(h), S(torch.randn(2, 2, 5))) if mode == "LSTM" else S(h)
    et, es = _errors(lambda: tm(x, hx), lambda: sm(S(x), hs))
    assert et.replace("torch.Size", "") == es.replace("strata.Size", "")
    if mode == "LSTM":
        hx = (torch.randn(2, 2, 5), torch.randn(2, 3, 5))
        et, es = _errors(lambda: tm(x, hx), lambda: sm(S(x), tuple(S(t) for t in hx)))
        assert et == es
    x4 = torch.randn(1, 3, 2, 4)
    et, es = _errors(lambda: tm(x4), lambda: sm(S(x4)))
    assert et == es
    h2 = torch.randn(2, 5)
    hx = (h2, h2) if mode == "LSTM" else h2
    et, es = _errors(lambda: tm(x, hx), lambda: sm(S(x), (S(h2), S(h2)) if mode == "LSTM" else S(h2)))
    assert et == es
    with pytest.raises(ValueError, match="input must have the type"):
        sm(S(x).double())
    x0 = torch.randn(0, 2, 4)
    et, es = _errors(lambda: tm(x0), lambda: sm(S(x0)))
    assert et == es


def test_constructor_errors():
    with pytest.raises(ValueError, match="proj_size has to be smaller than hidden_size"):
        st.nn.LSTM(3, 4, proj_size=4)
    with pytest.raises(ValueError, match="only supported for LSTM"):
        st.nn.GRU(3, 4, proj_size=2)
    with pytest.raises(ValueError, match="dropout should be a number"):
        st.nn.LSTM(3, 4, dropout=1.5)
    with pytest.raises(ValueError, match="hidden_size must be greater than zero"):
        st.nn.RNN(3, 0)
    with pytest.raises(ValueError, match="Unknown nonlinearity"):
        st.nn.RNN(3, 4, nonlinearity="gelu")
    with pytest.warns(UserWarning, match="dropout option adds dropout"):
        st.nn.GRU(3, 4, dropout=0.2)


def test_cell_errors_match_torch():
    tm, sm = make_pair("LSTMCell", "float32", 4, 5)
    x = torch.randn(2, 6)
    et, es = _errors(lambda: tm(x), lambda: sm(S(x)))
    assert et == es
    x = torch.randn(2, 4)
    h = (torch.randn(3, 5), torch.randn(3, 5))
    et, es = _errors(lambda: tm(x, h), lambda: sm(S(x), tuple(S(t) for t in h)))
    assert et == es
    x3 = torch.randn(1, 2, 4)
    et, es = _errors(lambda: tm(x3), lambda: sm(S(x3)))
    assert et == es


def test_op_errors():
    x, h = st.randn(3, 2, 4), st.randn(2, 5)
    w_ih, w_hh = st.randn(5, 4), st.randn(5, 5)
    with pytest.raises(RuntimeError, match=r"_rnn_tanh_layer: input.size\(-1\) must be equal to input_size"):
        st._C._ops._rnn_tanh_layer(st.randn(3, 2, 3), h, w_ih, w_hh)
    with pytest.raises(RuntimeError, match=r"_rnn_tanh_layer: expected hx of shape \[2, 5\]"):
        st._C._ops._rnn_tanh_layer(x, st.randn(3, 5), w_ih, w_hh)
    with pytest.raises(RuntimeError, match="_lstm_layer: expected w_ih of shape"):
        st._C._ops._lstm_layer(x, h, h, w_ih, w_hh)
    with pytest.raises(RuntimeError, match="same dtype"):
        st._C._ops._gru_layer(x, h, st.randn(15, 4, dtype=st.float64), st.randn(15, 5))
    with pytest.raises(RuntimeError, match="non-increasing"):
        st._C._ops._rnn_tanh_layer(st.randn(5, 4), h, w_ih, w_hh, None, None, st.tensor([2, 3]))
    with pytest.raises(RuntimeError, match="sum to 4 but the packed input has 5 rows"):
        st._C._ops._rnn_tanh_layer(st.randn(5, 4), h, w_ih, w_hh, None, None, st.tensor([2, 2]))


def test_meta_shapes():
    x, h, c = (st.empty(s, device="meta") for s in [(6, 2, 4), (2, 3), (2, 5)])
    r = st._C._ops._lstm_layer(x, h, c, st.empty(20, 4, device="meta"), st.empty(20, 3, device="meta"),
                               None, None, st.empty(3, 5, device="meta"))
    assert [tuple(t.shape) for t in r] == [(6, 2, 3), (2, 3), (2, 5), (12, 30)]
    assert all(t.device.type == "meta" for t in r)


def test_half_precision_runs_in_float32():
    tm, sm = make_pair("LSTM", "float32", 3, 4)
    x = torch.randn(4, 2, 3)
    ref = tm(x)[0]
    out = sm.to(st.bfloat16)(S(x).to(st.bfloat16))[0]
    assert out.dtype is st.bfloat16
    np.testing.assert_allclose(out.float().detach().numpy(), ref.detach().numpy(), atol=3e-2)


# ---- nn.utils.rnn ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("side", ["right", "left"])
def test_pad_sequence(batch_first, side):
    seqs = [torch.randn(n, 2, 3) for n in (2, 5, 1)]
    rt = trnn.pad_sequence(seqs, batch_first=batch_first, padding_value=-1.5, padding_side=side)
    rs = srnn.pad_sequence([S(s) for s in seqs], batch_first=batch_first, padding_value=-1.5, padding_side=side)
    close(rs, rt, "float32")
    with pytest.raises(ValueError, match="padding_side"):
        srnn.pad_sequence([S(s) for s in seqs], padding_side="middle")


def test_pad_sequence_gradient():
    a, b = st.randn(3, 2, requires_grad=True), st.randn(1, 2, requires_grad=True)
    srnn.pad_sequence([a, b], batch_first=True).sum().backward()
    assert a.grad.tolist() == [[1.0, 1.0]] * 3 and b.grad.tolist() == [[1.0, 1.0]]


def test_pack_unpack_roundtrip():
    seqs = [torch.randn(n, 3) for n in (2, 5, 1, 5)]
    ps = srnn.pack_sequence([S(s) for s in seqs], enforce_sorted=False)
    pt = trnn.pack_sequence(seqs, enforce_sorted=False)
    assert ps.batch_sizes.tolist() == pt.batch_sizes.tolist()
    back = srnn.unpack_sequence(ps)
    for a, b in zip(back, seqs):
        close(a, b, "float32")
    padded, lengths = srnn.pad_packed_sequence(ps, total_length=7)
    assert tuple(padded.shape) == (7, 4, 3) and lengths.tolist() == [2, 5, 1, 5]
    for a, b in zip(srnn.unpad_sequence(padded, lengths), seqs):
        close(a, b, "float32")
    with pytest.raises(ValueError, match="Expected total_length to be at least"):
        srnn.pad_packed_sequence(ps, total_length=3)


def test_pack_padded_errors():
    x = st.randn(4, 3, 2)
    with pytest.raises(RuntimeError, match="must be sorted in decreasing order"):
        srnn.pack_padded_sequence(x, [2, 4, 1])
    with pytest.raises(RuntimeError, match="Expected `len\\(lengths\\)` to be equal to batch_size"):
        srnn.pack_padded_sequence(x, [4, 2])
    with pytest.raises(RuntimeError, match="Length of all samples has to be greater than 0"):
        srnn.pack_padded_sequence(x, [4, 2, 0])


def test_packed_sequence_tuple_and_to():
    ps = srnn.pack_sequence([st.randn(3, 2), st.randn(1, 2)], enforce_sorted=False)
    data, batch_sizes, si, ui = ps
    assert ps._fields == ("data", "batch_sizes", "sorted_indices", "unsorted_indices")
    assert data is ps.data and batch_sizes.tolist() == [2, 1, 1]
    pd = ps.to(st.float64)
    assert pd.data.dtype is st.float64 and pd.batch_sizes.dtype is st.int64 and isinstance(pd, srnn.PackedSequence)
    assert ps.to(st.float32) is ps
    assert pd.float().data.dtype is st.float32
    assert srnn.invert_permutation(st.tensor([2, 0, 1])).tolist() == [1, 2, 0]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("mode", ["RNN", "LSTM", "LSTM_PROJ", "GRU"])
def test_threaded_time_loop(mode, dtype):
    # Big enough for the forward to split the hidden units across a team of threads (when there are threads),
    # packed with unsorted lengths so that rows drop out between steps, bidirectional, and for LSTM projected.
    kw = dict(num_layers=2, bidirectional=True)
    if mode == "LSTM_PROJ":
        mode, kw["proj_size"] = "LSTM", 64
    tm, sm = make_pair(mode, dtype, 24, 128, **kw)
    torch.manual_seed(9)
    lengths = [5, 9, 2, 9, 7, 1, 3, 8, 9, 4, 6, 5, 2, 8, 9, 9, 3, 7]
    tdt = getattr(torch, dtype)
    x = torch.randn(len(lengths), max(lengths), 24, dtype=tdt)
    xt, xs = x.clone().requires_grad_(), S(x, True)
    ot, ht = tm(trnn.pack_padded_sequence(xt, lengths, batch_first=True, enforce_sorted=False))
    os_, hs = sm(srnn.pack_padded_sequence(xs, lengths, batch_first=True, enforce_sorted=False))
    # Equal lengths may be packed in a different order: compare in the original batch order.
    pt = trnn.pad_packed_sequence(ot, batch_first=True)[0]
    ps = srnn.pad_packed_sequence(os_, batch_first=True)[0]
    close(ps, pt, dtype, "output")
    ht, hs = (ht[0], hs[0]) if mode == "LSTM" else (ht, hs)
    close(hs, ht, dtype, "h_n")
    w, wh = torch.randn(pt.shape, dtype=tdt), torch.randn(ht.shape, dtype=tdt)
    ((pt * w).sum() + (ht * wh).sum()).backward()
    ((ps * S(w)).sum() + (hs * S(wh)).sum()).backward()
    close(xs.grad, xt.grad, dtype, "input grad")
    compare_grads(tm, sm, dtype)
    y = torch.randn(11, 20, 24, dtype=tdt)
    close(sm(S(y))[0], tm(y)[0], dtype, "padded output")


def test_backward_ops_called_directly():
    # The fused backward ops return placeholders (shape [0]) for the gradients of absent arguments.
    x, h, c = st.randn(3, 2, 4), st.randn(2, 5), st.randn(2, 5)
    wi, wh = st.randn(5, 4), st.randn(5, 5)
    o, hy = st._C._ops._rnn_tanh_layer(x, h, wi, wh)
    r = st._C._ops._rnn_layer_backward(st.ones_like(o), st.zeros_like(hy), x, h, wi, wh, None, o, False, False)
    assert [tuple(t.shape) for t in r] == [(3, 2, 4), (2, 5), (5, 4), (5, 5), (0,), (0,)]
    wi, wh = st.randn(20, 4), st.randn(20, 5)
    o, hy, cy, ws = st._C._ops._lstm_layer(x, h, c, wi, wh)
    r = st._C._ops._lstm_layer_backward(st.ones_like(o), st.zeros_like(hy), st.zeros_like(cy), x, h, c, wi, wh, None,
                                        None, o, ws)
    assert [tuple(t.shape) for t in r] == [(3, 2, 4), (2, 5), (2, 5), (20, 4), (20, 5), (20,), (20,), (0,)]
    with pytest.raises(RuntimeError, match="_lstm_layer_backward: expected workspace of shape"):
        st._C._ops._lstm_layer_backward(st.ones_like(o), hy, cy, x, h, c, wi, wh, None, None, o, ws[:2])
