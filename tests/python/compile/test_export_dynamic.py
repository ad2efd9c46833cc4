"""strata.export with dynamic_shapes: symbolic dims in the exported graph, range constraints, the
checks made at each call, errors for dims the program specializes, and save/load of all of it
(a loaded program runs at new sizes without the model's source). Compared with torch.export
where the behaviour is cheap to check."""

import io
import os
import subprocess
import sys

import numpy as np
import pytest

import strata
import strata.nn as nn
import strata.nn.functional as F
from strata.export import export, Dim, ExportError, ValueRanges


def same(a, b, atol=1e-5):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), atol=atol, rtol=1e-5)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.l2 = nn.Linear(4, 16), nn.Linear(16, 3)

    def forward(self, x):
        return self.l2(F.relu(self.l1(x)))


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 8, 3, stride=2, padding=1)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        x = F.relu(self.bn(self.c1(x)))
        x = F.relu(self.c2(x))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


class Block(nn.Module):
    """Pre-norm attention + MLP with view(b, t, h, d) reshapes."""

    def __init__(self, d=16, h=4):
        super().__init__()
        self.h = h
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q = q.view(b, t, self.h, d // self.h).transpose(1, 2)
        k = k.view(b, t, self.h, d // self.h).transpose(1, 2)
        v = v.view(b, t, self.h, d // self.h).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).contiguous().view(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def test_mlp_dynamic_batch_runs_at_other_sizes_and_checks_ranges():
    strata.manual_seed(0)
    m = MLP().eval()
    batch = Dim("batch", min=2, max=1024)
    ep = export(m, (strata.randn(4, 4),), dynamic_shapes={"x": {0: batch}})
    assert ep.range_constraints == {"batch": ValueRanges(2, 1024)}
    assert 'x: "f32[batch, 4]"' in str(ep) and '"f32[batch, 3]"' in str(ep)
    with strata.no_grad():
        for b in (2, 3, 17, 1024):
            x = strata.randn(b, 4)
            same(ep(x), m(x))
            same(ep.module()(x), m(x))
    with pytest.raises(ValueError, match=r"x.shape\[0\] is 1025, outside the range \[2, 1024\] of the dynamic dim "
                                         "batch"):
        ep.module()(strata.randn(1025, 4))
    with pytest.raises(ValueError, match=r"x.shape\[0\] is 1, outside the range.*sizes 0 and 1"):
        ep.module()(strata.randn(1, 4))
    with pytest.raises(ValueError, match=r"x.shape\[1\] is 5, but the program was exported with the static size 4 "
                                         r"\(shape \[batch, 4\]"):
        ep.module()(strata.randn(3, 5))
    with pytest.raises(ValueError, match="has 3 dims"):
        ep.module()(strata.randn(3, 4, 1))
    with pytest.raises(ValueError, match="float64"):
        ep.module()(strata.randn(3, 4, dtype=strata.float64))


def test_tuple_form_and_positional_dims_and_unbounded_range():
    m = MLP().eval()
    ep = export(m, (strata.randn(3, 4),), dynamic_shapes=((Dim("n"), None),))
    assert ep.range_constraints == {"n": ValueRanges(2, float("inf"))}
    assert repr(ep.range_constraints["n"]) == "VR[2, int_oo]"
    with strata.no_grad():
        x = strata.randn(300, 4)
        same(ep(x), m(x))


def test_conv_net_dynamic_batch_and_spatial_dims():
    strata.manual_seed(1)
    m = ConvNet().eval()
    ep = export(m, (strata.randn(2, 3, 16, 16),),
                dynamic_shapes={"x": {0: Dim("b"), 2: Dim("h", min=4), 3: Dim("w", min=4)}})
    assert set(ep.range_constraints) == {"b", "h", "w"}
    assert ep.range_constraints["h"] == ValueRanges(4, float("inf"))
    with strata.no_grad():
        for shape in ((2, 3, 16, 16), (5, 3, 16, 16), (3, 3, 9, 12), (2, 3, 32, 7)):
            x = strata.randn(*shape)
            same(ep.module()(x), m(x))


def test_transformer_block_dynamic_batch_and_sequence():
    strata.manual_seed(2)
    m = Block().eval()
    ep = export(m, (strata.randn(3, 5, 16),), dynamic_shapes={"x": {0: Dim("batch"), 1: Dim("seq", max=64)}})
    text = str(ep)
    # the view sizes are graph inputs computed from the dims, not the example's 3 and 5
    assert "view(split, [sym0, sym1, 4, 4])" in text and '"f32[batch, 4, seq, 4]"' in text
    kinds = [s.kind for s in ep.graph_signature.input_specs]
    assert kinds.count("sym_size") == 2
    with strata.no_grad():
        for b, t in ((3, 5), (2, 9), (7, 2), (2, 64)):
            x = strata.randn(b, t, 16)
            same(ep.module()(x), m(x), atol=1e-4)
    with pytest.raises(ValueError, match=r"x.shape\[1\] is 65, outside the range \[2, 64\] of the dynamic dim seq"):
        ep.module()(strata.randn(2, 65, 16))


def test_save_load_keeps_symbols_and_runs_at_new_sizes(tmp_path):
    strata.manual_seed(3)
    m = Block().eval()
    ep = export(m, (strata.randn(3, 5, 16),), dynamic_shapes={"x": {0: Dim("batch", max=32), 1: Dim("seq")}})
    path = tmp_path / "block.strata"
    strata.export.save(ep, path)
    ep2 = strata.export.load(path)
    assert ep2.range_constraints == ep.range_constraints
    assert '"f32[batch, seq, 16]"' in str(ep2)
    with strata.no_grad():
        for b, t in ((4, 11), (2, 2)):
            x = strata.randn(b, t, 16)
            same(ep2.module()(x), m(x), atol=1e-4)
    with pytest.raises(ValueError, match="outside the range"):
        ep2(strata.randn(33, 5, 16))
    # another process, without this file's classes: the archive alone runs at a new size
    x = strata.randn(6, 13, 16)
    with strata.no_grad():
        want = m(x)
    np.save(tmp_path / "x.npy", x.numpy())
    code = ("import numpy as np, strata, sys\n"
            "ep = strata.export.load(sys.argv[1])\n"
            "x = strata.from_numpy(np.load(sys.argv[2]))\n"
            "with strata.no_grad():\n"
            "    np.save(sys.argv[3], ep.module()(x).numpy())\n"
            "try:\n"
            "    ep(strata.randn(6, 13, 8))\n"
            "except ValueError as e:\n"
            "    print('refused:', e)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([sys.executable, "-c", code, str(path), str(tmp_path / "x.npy"), str(tmp_path / "y.npy")],
                       capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=300)
    assert r.returncode == 0, r.stderr
    assert "refused: strata.export: input x.shape[2] is 8" in r.stdout
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), want.numpy(), atol=1e-4, rtol=1e-5)


def test_save_load_round_trip_of_derived_dims_and_assertions():
    def f(x, y, z):
        if x.shape[0] > 8:            # one symbol: the range of b must hold it
            x = x * 2
        if z.shape[0] >= y.shape[0]:   # two symbols: kept as a check made at each call
            z = z + 1
        return x[1:] + y, z

    b = Dim("b", max=7)
    ep = export(f, (strata.randn(5, 3), strata.randn(4, 3), strata.randn(6)),
                dynamic_shapes=({0: b + 1}, {0: b}, {0: Dim("n")}))
    assert ep.assertions == [(["sym", "n"], ">=", ["sym", "b"])]
    buf = io.BytesIO()
    strata.export.save(ep, buf)
    buf.seek(0)
    ep2 = strata.export.load(buf)
    assert ep2.assertions == ep.assertions
    for p in (ep, ep2):
        assert p.range_constraints == {"b": ValueRanges(2, 7), "n": ValueRanges(2, float("inf")),
                                       "b + 1": ValueRanges(3, 8)}
        x, y, z = strata.randn(8, 3), strata.randn(7, 3), strata.randn(9)
        for got, want in zip(p(x, y, z), f(x, y, z)):
            same(got, want)
        with pytest.raises(ValueError, match=r"x.shape\[0\] is 7, but the program needs it to be b \+ 1 = 8"):
            p(strata.randn(7, 3), y, z)
        with pytest.raises(ValueError, match=r"break the condition n >= b .*b = 7 \(y.shape\[0\]\), n = 3"):
            p(x, y, strata.randn(3))


def test_one_dim_name_is_one_size_and_mismatch_is_named():
    def f(x, y):
        return x.sum(-1) + y

    batch = Dim("batch")
    ep = export(f, (strata.randn(4, 3), strata.randn(4)), dynamic_shapes={"x": {0: batch}, "y": {0: batch}})
    x, y = strata.randn(9, 3), strata.randn(9)
    same(ep(x, y), f(x, y))
    with pytest.raises(ValueError, match=r"y.shape\[0\] is 5, but the program needs it to be batch = 9 "
                                         r"\(batch = x.shape\[0\]\)"):
        ep(x, strata.randn(5))


def test_two_dims_the_program_needs_equal_raise_with_the_fix():
    def f(x, y):
        return x.sum(-1) + y

    with pytest.raises(ExportError, match=r"(?s)values of c = y.shape\[0\] and a = x.shape\[0\] must always be "
                                          r"equal.*c = a"):
        export(f, (strata.randn(4, 3), strata.randn(4)), dynamic_shapes={"x": {0: Dim("a")}, "y": {0: Dim("c")}})
    # Dim.AUTO lets export make them one symbol
    ep = export(f, (strata.randn(4, 3), strata.randn(4)), dynamic_shapes={"x": {0: Dim.AUTO}, "y": {0: Dim.AUTO}})
    assert len(ep.range_constraints) == 1
    x, y = strata.randn(6, 3), strata.randn(6)
    same(ep(x, y), f(x, y))


def test_dim_the_program_specializes_raises_naming_it():
    m = MLP().eval()
    x = strata.randn(3, 4)
    # the feature dim meets the weight: it cannot vary
    for spec in ({1: Dim("feat")}, {1: Dim.DYNAMIC}):
        with pytest.raises(ExportError, match=r"(?s)Constraints violated.*x.shape\[1\].*linear"):
            export(m, (x,), dynamic_shapes={"x": spec})
    # Dim.AUTO: static where the program needs it, dynamic elsewhere
    ep = export(m, (x,), dynamic_shapes={"x": {0: Dim.AUTO, 1: Dim.AUTO}})
    assert list(ep.range_constraints.values()) == [ValueRanges(2, float("inf"))]
    x7 = strata.randn(7, 4)
    with strata.no_grad():
        same(ep(x7), m(x7))

    def loop(x):
        out = x[0]
        for i in range(1, x.shape[0]):   # the size is used as a plain number: specialized
            out = out + x[i]
        return out
    with pytest.raises(ExportError, match=r"(?s)You marked b \(x.shape\[0\]\) as dynamic but the program "
                                          r"specialized it to be a constant \(4\)"):
        export(loop, (strata.randn(4, 3),), dynamic_shapes=({0: Dim("b")},))
    ep = export(loop, (strata.randn(4, 3),), dynamic_shapes=({0: Dim.AUTO},))
    assert ep.range_constraints == {}


def test_branch_on_a_size_narrows_the_range_or_asks_for_it():
    def f(x):
        if x.shape[0] > 64:
            return x * 2
        return x + 1

    with pytest.raises(ExportError, match=r"(?s)Not all values of b = x.shape\[0\] in the specified range \[2, inf\] "
                                          r"satisfy the condition b <= 64.*b = Dim\('b', max=64\)"):
        export(f, (strata.randn(4, 3),), dynamic_shapes=({0: Dim("b")},))
    ep = export(f, (strata.randn(4, 3),), dynamic_shapes=({0: Dim("b", max=64)},))
    assert ep.range_constraints == {"b": ValueRanges(2, 64)}
    ep = export(f, (strata.randn(4, 3),), dynamic_shapes=({0: Dim.AUTO},))
    assert list(ep.range_constraints.values()) == [ValueRanges(2, 64)]
    x = strata.randn(64, 3)
    same(ep(x), f(x))
    with pytest.raises(ValueError, match="outside the range"):
        ep(strata.randn(65, 3))


def test_sizes_read_in_python_become_graph_inputs():
    def f(x):
        b, t = x.shape
        pos = strata.arange(t)
        z = strata.zeros(b, t) + strata.ones(t)
        return ((x + pos).view(b * t), x[:, 1:t - 1], x[:, t - 1], x.chunk(2, dim=1), z,
                x.narrow(1, 0, t // 2), x[:, None, :].expand(b, 3, t))

    ep = export(f, (strata.randn(3, 6),), dynamic_shapes=({0: Dim("b"), 1: Dim("t")},))
    buf = io.BytesIO()
    strata.export.save(ep, buf)
    buf.seek(0)
    loaded = strata.export.load(buf)
    for shape in ((3, 6), (5, 8), (2, 5), (4, 3)):
        x = strata.randn(*shape)
        for p in (ep, loaded):
            got, want = p(x), f(x)
            for g, w in zip(got[:3] + got[3] + got[4:], want[:3] + want[3] + want[4:]):
                same(g, w)
    # an odd size splits unevenly: the symbolic shapes say so
    assert [["sym", "b"], ["//", ["+", ["sym", "t"], 1], 2]] in ep.sym_shapes.values()
    assert [["sym", "b"], ["//", ["sym", "t"], 2]] in ep.sym_shapes.values()

    def halves(x):   # only valid for an even size: t must not be dynamic
        return x.view(x.size(0) * 2, x.size(1) // 2)
    with pytest.raises(ExportError, match=r"(?s)t \(x.shape\[1\]\).*view"):
        export(halves, (strata.randn(3, 6),), dynamic_shapes=({0: Dim("b"), 1: Dim("t")},))
    ep = export(halves, (strata.randn(3, 6),), dynamic_shapes=({0: Dim("b")},))
    same(ep(strata.arange(24.).view(4, 6)), halves(strata.arange(24.).view(4, 6)))
    # torch's fix: the size as a derived dim 2*h, whose root h is read from it
    h = Dim("h")
    ep = export(halves, (strata.randn(3, 6),), dynamic_shapes=({0: Dim("b"), 1: 2 * h},))
    assert ep.range_constraints == {"b": ValueRanges(2, float("inf")), "h": ValueRanges(2, float("inf")),
                                    "2*h": ValueRanges(4, float("inf"))}
    x = strata.randn(5, 14)
    same(ep(x), halves(x))
    with pytest.raises(ValueError, match=r"x.shape\[1\] is 9, but the program needs it to be 2\*h for an integer h"):
        ep(strata.randn(5, 9))
    buf = io.BytesIO()
    strata.export.save(ep, buf)
    buf.seek(0)
    x = strata.randn(3, 22)
    same(strata.export.load(buf)(x), halves(x))

    def odd(x):
        if x.shape[0] > 9:
            return x * 2
        return x + 1
    with pytest.raises(ExportError, match=r"(?s)Not all values of h = \(x.shape\[0\] - 1\)//2 .* 2\*h \+ 1 <= 9"
                                          r".*h = Dim\('h', max=4\)"):
        export(odd, (strata.randn(5, 3),), dynamic_shapes=({0: 2 * h + 1},))


def test_nested_inputs_mark_dynamic_and_bad_specs():
    def f(xs):
        return xs[0] * xs[1]

    b = Dim("b")
    ep = export(f, ([strata.randn(4, 2), strata.randn(4, 2)],), dynamic_shapes=([{0: b}, {0: b}],))
    xs = [strata.randn(9, 2), strata.randn(9, 2)]
    same(ep(xs), f(xs))
    x = strata.randn(4, 3)
    strata._dynamo.mark_dynamic(x, 0)
    ep = export(lambda x: x * 2, (x,))
    assert list(ep.range_constraints) == ["s0"]
    x6 = strata.randn(6, 3)
    same(ep(x6), x6 * 2)
    g = lambda x, y: x + y  # noqa: E731
    with pytest.raises(ExportError, match="names 'z', which is not an argument"):
        export(g, (strata.randn(2), strata.randn(2)), dynamic_shapes={"z": {0: b}})
    with pytest.raises(ExportError, match="2 entries but the call has 1"):
        export(lambda x: x, (strata.randn(2),), dynamic_shapes=({0: b}, None))
    with pytest.raises(ExportError, match=r"example size is 1: sizes 0 and 1 are specialized"):
        export(lambda x: x * 2, (strata.randn(1, 3),), dynamic_shapes=({0: b},))
    with pytest.raises(ExportError, match=r"outside its range \[5, 9\]"):
        export(lambda x: x * 2, (strata.randn(4, 3),), dynamic_shapes=({0: Dim("r", min=5, max=9)},))
    with pytest.raises(ExportError, match=r"example x.shape\[0\] = 2 gives b = 1, outside its range"):
        export(lambda x: x * 2, (strata.randn(2, 3),), dynamic_shapes=({0: 2 * b},))
    with pytest.raises(ValueError, match="max=1 is below 2"):
        Dim("tiny", max=1)


def test_torch_export_agrees_on_which_specs_it_accepts():
    torch = pytest.importorskip("torch")
    from torch.export import Dim as TDim, export as texport

    def f(x):
        if x.shape[0] > 64:
            return x * 2
        return x + 1

    class TF(torch.nn.Module):
        def forward(self, x):
            return f(x)

    def outcome(fn):
        try:
            return fn().range_constraints
        except Exception as e:  # noqa: BLE001
            return type(e).__name__

    # named, unbounded: both refuse (suggesting max=64); bounded: both accept with [2, 64]
    t = outcome(lambda: texport(TF(), (torch.randn(4, 3),), dynamic_shapes=({0: TDim("b")},)))
    s = outcome(lambda: export(f, (strata.randn(4, 3),), dynamic_shapes=({0: Dim("b")},)))
    assert isinstance(t, str) and s == "ExportError"
    t = outcome(lambda: texport(TF(), (torch.randn(4, 3),), dynamic_shapes=({0: TDim("b", max=64)},)))
    s = outcome(lambda: export(f, (strata.randn(4, 3),), dynamic_shapes=({0: Dim("b", max=64)},)))
    # the upper bound agrees; torch 2.13 is size-oblivious (lower 0), strata keeps 0 and 1 static (lower 2)
    assert [r.upper for r in t.values()] == [64] == [r.upper for r in s.values()]
    # the feature dim of a linear layer: both refuse Dim.DYNAMIC and make Dim.AUTO static
    lin_t, lin_s = torch.nn.Linear(4, 2), nn.Linear(4, 2)
    t = outcome(lambda: texport(lin_t, (torch.randn(3, 4),), dynamic_shapes=({1: TDim.DYNAMIC},)))
    s = outcome(lambda: export(lin_s, (strata.randn(3, 4),), dynamic_shapes=({1: Dim.DYNAMIC},)))
    assert isinstance(t, str) and s == "ExportError"
    t = outcome(lambda: texport(lin_t, (torch.randn(3, 4),), dynamic_shapes=({0: TDim.AUTO, 1: TDim.AUTO},)))
    s = outcome(lambda: export(lin_s, (strata.randn(3, 4),), dynamic_shapes=({0: Dim.AUTO, 1: Dim.AUTO},)))
    assert len(t) == len(s) == 1


def test_equal_example_sizes_are_merged_only_where_the_program_needs_it():
    def f(x, y, z):
        return x.sum(-1) + y, z * 2

    # x and y must agree (AUTO: one symbol); z's size equals theirs by chance and stays its own
    ep = export(f, (strata.randn(4, 3), strata.randn(4), strata.randn(4, 4)),
                dynamic_shapes=({0: Dim.AUTO}, {0: Dim.AUTO}, {0: Dim("n"), 1: Dim("m")}))
    assert set(ep.range_constraints) == {"s0", "n", "m"}
    x, y, z = strata.randn(6, 3), strata.randn(6), strata.randn(9, 2)
    for got, want in zip(ep(x, y, z), f(x, y, z)):
        same(got, want)


def test_strided_example_and_strided_calls():
    x = strata.randn(5, 4).t()           # (4, 5), not contiguous

    def f(x):
        return (x * 2).sum(0)
    ep = export(f, (x,), dynamic_shapes=({0: Dim("b")},))
    assert ep.range_constraints == {"b": ValueRanges(2, float("inf"))}
    for y in (strata.randn(5, 9).t(), strata.randn(9, 5)):
        same(ep(y), f(y))
