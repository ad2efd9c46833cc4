"""Symbolic sizes in strata.compile (Note [Symbolic shapes] in python/strata/_dynamo/symshape.py):
a size that changes every call costs at most two compilations, results stay those of eager mode."""
import io
import contextlib

import pytest

import strata as st
import strata.nn as nn
import strata.nn.functional as F
from strata._dynamo import eval_frame, logs

SIZES = list(range(8, 129, 8))


@pytest.fixture(autouse=True)
def _fresh():
    st._dynamo.reset()
    yield
    st._dynamo.reset()


def exact(a, b, what):
    assert a.shape == b.shape, (what, a.shape, b.shape)
    assert bool((a == b).all()), what


def entries(fn):
    code = getattr(fn, "__code__", None) or type(fn).forward.__code__
    return [e for s in eval_frame.states_of(code) for e in s.entries]


def sweep(fn, make, sizes=SIZES, **kw):
    cf = st.compile(fn, **kw)
    for n in sizes:
        args = make(n)
        exact(cf(*args), fn(*args), f"size {n}")
    return entries(fn)


def test_mlp_batch_sweep_two_entries_second_dynamic():
    st.manual_seed(0)
    m = nn.Sequential(nn.Linear(12, 24), nn.ReLU(), nn.Linear(24, 4))
    cm = st.compile(m)
    for bs in SIZES:
        x = st.randn(bs, 12)
        exact(cm(x), m(x), bs)
    es = entries(m)
    assert len(es) == 2 and not es[0].dynamic and es[1].dynamic


def test_dynamic_true_compiles_once():
    def f(x, y):
        return (x @ y).relu().sum(-1)
    es = sweep(f, lambda n: (st.randn(n, 6), st.randn(6, n % 5 + 2)), dynamic=True)
    assert len(es) == 1 and es[0].dynamic


def test_dynamic_false_specializes():
    def f(x):
        return x * 2
    es = sweep(f, lambda n: (st.randn(n),), sizes=[4, 5, 6], dynamic=False)
    assert len(es) == 3 and not any(e.dynamic for e in es)


def test_mark_dynamic_first_call():
    def f(x):
        return x.softmax(-1) + 1
    cf = st.compile(f)
    for n in (8, 16, 24):
        x = st.randn(n, 5)
        st._dynamo.mark_dynamic(x, 0)
        exact(cf(x), f(x), n)
    assert len(entries(f)) == 1 and entries(f)[0].dynamic


class Block(nn.Module):
    def __init__(self, d=16, h=4):
        super().__init__()
        self.h = h
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q = q.view(B, T, self.h, C // self.h).transpose(1, 2)
        k = k.view(B, T, self.h, C // self.h).transpose(1, 2)
        v = v.view(B, T, self.h, C // self.h).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / (C // self.h) ** 0.5)
        mask = st.ones(T, T).tril()
        att = att.masked_fill(mask == 0, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.proj(y)
        return x + self.mlp(self.ln2(x))


def test_transformer_block_batch_and_sequence_sweep():
    st.manual_seed(0)
    blk = Block().eval()
    cb = st.compile(blk)
    for i, bs in enumerate(SIZES):
        T = 4 + (i % 5) * 3
        x = st.randn(bs, T, 16)
        exact(cb(x), blk(x), (bs, T))
    es = entries(blk)
    assert len(es) <= 2 and es[-1].dynamic


def test_main_job_char_transformer_batch_sweep():
    from test_compiled_models import load_example
    charlm = load_example("train_charlm")
    st.manual_seed(0)
    m = charlm.build_model(st, 20, 16, d_model=32, n_layers=2, n_heads=4, dropout=0.1).eval()
    cm = st.compile(m)
    for bs in SIZES[:6]:
        x = st.randint(0, 20, (bs, 16))
        exact(cm(x), m(x), bs)
    total = sum(len(s.entries) for s in eval_frame._states.values())
    assert total <= 2 * max(1, sum(1 for s in eval_frame._states.values() if s.entries))


def test_view_slice_arange_zeros():
    def f_view(x):
        return x.view(x.size(0), -1) * 2

    def f_half(x):
        return x[:, : x.shape[1] // 2] + 1

    def f_arange(x):
        return x + st.arange(x.shape[0]).unsqueeze(1)

    def f_zeros(x):
        B, T = x.shape
        return x + st.zeros(B, T)

    for fn, make in ((f_view, lambda n: (st.randn(n, 3, 4),)), (f_half, lambda n: (st.randn(3, n),)),
                     (f_arange, lambda n: (st.randn(n, 3),)), (f_zeros, lambda n: (st.randn(n, 5),))):
        es = sweep(fn, make)
        assert len(es) == 2 and es[1].dynamic, fn.__name__


def test_size_in_control_flow_adds_a_relation_guard():
    def f(x):
        if x.shape[0] > 64:
            return x * 2
        return x - 1
    es = sweep(f, lambda n: (st.randn(n, 5),))
    assert len(es) == 3 and es[1].dynamic and es[2].dynamic
    assert any("> 64" in g or "<= 64" in g for g in es[1].guard_descriptions)


def test_op_without_rule_falls_back_to_static_with_a_log_line():
    def f(x):
        return F.avg_pool1d(x, 5, stride=3)
    buf = io.StringIO()
    logs.set_logs(recompiles=True)
    try:
        with contextlib.redirect_stderr(buf):
            es = sweep(f, lambda n: (st.randn(2, 3, n),), sizes=[16, 24, 32])
    finally:
        logs.set_logs()
    assert not any(e.dynamic for e in es) and len(es) == 3
    assert "fall back to static sizes" in buf.getvalue() and "avg_pool1d" in buf.getvalue()


def test_sizes_0_and_1_stay_specialized():
    def f(x):
        return x + 1
    es = sweep(f, lambda n: (st.randn(n, 3),), sizes=[4, 8, 1, 16, 1])
    dyn = [e for e in es if e.dynamic]
    assert len(dyn) == 1 and any(">= 2" in g for g in dyn[0].guard_descriptions)
    assert len(es) == 3     # 4 (static), 8.. (dynamic), 1 (static: fails >= 2)


def test_explain_shows_symbolic_guards():
    def f(x):
        return x.relu()
    cf = st.compile(f, dynamic=True)
    cf(st.randn(8, 3))
    g = entries(f)[0].guard_descriptions
    assert any("size=[None, None]" in d for d in g) and any(">= 2" in d for d in g)


def test_symbolic_size_returned_and_in_run_function():
    def f(x):
        return x.sum(0), x.shape[0] * 2
    cf = st.compile(f, dynamic=True)
    for n in (4, 9):
        t, k = cf(st.ones(n, 2))
        assert k == 2 * n and t.tolist() == [float(n), float(n)]
    assert len(entries(f)) == 1


def test_dynamic_true_transformer_block_specializes_the_feature_dim_once():
    """dynamic=True makes C symbolic too; LayerNorm needs it equal to its weight's size, so capture
    specializes it and restarts: one entry, dynamic in B and T."""
    st.manual_seed(0)
    blk = Block().eval()
    cb = st.compile(blk, dynamic=True)
    for B, T in ((8, 6), (5, 9), (12, 3), (7, 7)):
        x = st.randn(B, T, 16)
        exact(cb(x), blk(x), (B, T))
    es = entries(blk)
    assert es[0].dynamic and len(es) <= 2
