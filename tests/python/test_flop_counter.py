"""strata.utils.flop_counter.FlopCounterMode against torch's FlopCounterMode on the same models (same weights do not
matter: FLOPs depend on shapes only)."""

import pytest

import strata
from strata.utils.flop_counter import FlopCounterMode, register_flop_formula

torch = pytest.importorskip("torch")
from torch.utils.flop_counter import FlopCounterMode as TorchFlopCounterMode  # noqa: E402
from torch.utils.flop_counter import sdpa_backward_flop_count, sdpa_flop_count  # noqa: E402


def _run(lib, counter_cls, build, backward=True):
    lib.manual_seed(0)
    model, inputs = build(lib)
    fc = counter_cls(display=False, depth=4)
    with fc:
        out = model(*inputs)
        if backward:
            out = out[0] if isinstance(out, tuple) else out
            out.sum().backward()
    per_module = {k: sum(v.values()) for k, v in fc.get_flop_counts().items()}
    return fc.get_total_flops(), per_module


def _both(build, backward=True):
    return _run(strata, FlopCounterMode, build, backward), _run(torch, TorchFlopCounterMode, build, backward)


def _mlp(lib):
    nn = lib.nn

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(8, 16)
            self.act = nn.ReLU()
            self.fc2 = nn.Linear(16, 4)

        def forward(self, x):
            return self.fc2(self.act(self.fc1(x)))

    return MLP(), (lib.randn(3, 8),)


def _cnn(lib):
    nn, F = lib.nn, lib.nn.functional

    class CNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(3, 8, 3, padding=1)
            self.c2 = nn.Conv2d(8, 8, 3, stride=2)
            self.fc = nn.Linear(8 * 3 * 3, 10)

        def forward(self, x):
            return self.fc(F.relu(self.c2(F.relu(self.c1(x)))).flatten(1))

    return CNN(), (lib.randn(2, 3, 8, 8),)


def _seq(lib):
    nn = lib.nn
    return nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Sequential(nn.Linear(16, 6), nn.ReLU()),
                         nn.Linear(6, 2)), (lib.randn(5, 8),)


@pytest.mark.parametrize("build", [_mlp, _cnn, _seq])
@pytest.mark.parametrize("backward", [False, True])
def test_models_total_and_per_module_match_torch(build, backward):
    (ours_total, ours_mod), (ref_total, ref_mod) = _both(build, backward)
    assert ours_total == ref_total > 0
    assert ours_mod == ref_mod


@pytest.mark.parametrize("make", [
    lambda lib: (lib.nn.Conv2d(3, 4, 3, stride=2, padding=1), lib.randn(2, 3, 8, 8, requires_grad=True)),
    lambda lib: (lib.nn.Conv2d(4, 6, 3, groups=2, bias=False), lib.randn(2, 4, 7, 7)),
    lambda lib: (lib.nn.Conv1d(3, 4, 3, dilation=2), lib.randn(2, 3, 11, requires_grad=True)),
    lambda lib: (lib.nn.ConvTranspose2d(3, 4, 3, stride=2), lib.randn(2, 3, 5, 5, requires_grad=True)),
    lambda lib: (lib.nn.Conv3d(2, 3, 3), lib.randn(1, 2, 5, 5, 5, requires_grad=True)),
    lambda lib: (lib.nn.ConvTranspose1d(2, 3, 3, stride=2), lib.randn(2, 2, 6, requires_grad=True)),
])
def test_convolutions_forward_and_backward(make):
    def build(lib):
        m, x = make(lib)
        return m, (x,)

    (ours_total, ours_mod), (ref_total, ref_mod) = _both(build)
    assert ours_total == ref_total > 0 and ours_mod == ref_mod


@pytest.mark.parametrize("fn", [
    lambda lib, a, b: lib.mm(a, b),
    lambda lib, a, b: lib.addmm(lib.ones(3, 5), a, b),
    lambda lib, a, b: a.unsqueeze(0).expand(2, 3, 4) @ b,  # matmul, broadcast batch
    lambda lib, a, b: lib.bmm(a.expand(2, 3, 4), b.expand(2, 4, 5)),
    lambda lib, a, b: lib.baddbmm(lib.ones(2, 3, 5), a.expand(2, 3, 4), b.expand(2, 4, 5)),
    lambda lib, a, b: lib.nn.functional.linear(a, b.t()),
    lambda lib, a, b: lib.einsum("ij,jk->ik", a, b),
    lambda lib, a, b: a[0] @ b,  # vector @ matrix: one mm
    lambda lib, a, b: (a @ b).sum(),
])
def test_matrix_products_forward_and_backward(fn):
    def count(lib, counter):
        a = lib.arange(12.0).reshape(3, 4).requires_grad_()
        b = lib.arange(20.0).reshape(4, 5).requires_grad_()
        fc = counter(display=False)
        with fc:
            fn(lib, a, b).sum().backward()
        return fc.get_total_flops()

    assert count(strata, FlopCounterMode) == count(torch, TorchFlopCounterMode) > 0


def test_transformer_layer_is_torch_plus_attention():
    # torch's CPU attention kernel has no flop formula (it counts 0 there); we count scaled_dot_product_attention
    # with torch's own attention formulas, so the totals differ by exactly those.
    def build(lib):
        layer = lib.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
        return layer, (lib.randn(2, 5, 16),)

    (ours_total, ours_mod), (ref_total, ref_mod) = _both(build)
    q = (2, 2, 5, 8)
    attn = sdpa_flop_count(q, q, q) + sdpa_backward_flop_count(q, q, q, q)
    assert ours_total == ref_total + attn
    assert ours_mod["TransformerEncoderLayer.linear1"] == ref_mod["TransformerEncoderLayer.linear1"]
    assert ours_mod["TransformerEncoderLayer.linear2"] == ref_mod["TransformerEncoderLayer.linear2"]
    assert ours_mod["TransformerEncoderLayer.self_attn"] == ref_mod["TransformerEncoderLayer.self_attn"] + attn


def test_sdpa_counts_torch_formulas():
    q = strata.randn(2, 3, 5, 8, requires_grad=True)
    k = strata.randn(2, 3, 7, 8, requires_grad=True)
    v = strata.randn(2, 3, 7, 4, requires_grad=True)
    with FlopCounterMode(display=False) as fc:
        out = strata.nn.functional.scaled_dot_product_attention(q, k, v)
    assert fc.get_total_flops() == sdpa_flop_count(q.shape, k.shape, v.shape)
    with FlopCounterMode(display=False) as fc:
        out.sum().backward()
    assert fc.get_total_flops() == sdpa_backward_flop_count(out.shape, q.shape, k.shape, v.shape)


def test_table_display_and_ops():
    model, (x,) = _mlp(strata)
    fc = FlopCounterMode(display=False, depth=1)
    with fc:
        model(x)
    counts = fc.get_flop_counts()
    assert set(counts) == {"Global", "MLP", "MLP.fc1", "MLP.fc2"}
    assert counts["MLP.fc1"] == {"linear": 2 * 3 * 8 * 16}
    table = fc.get_table()
    assert "Global" in table and "MLP" in table and "MLP.fc1" not in table
    assert "MLP.fc1" in fc.get_table(2)


def test_display_prints(capsys):
    with FlopCounterMode(depth=2):
        strata.mm(strata.ones(2, 3), strata.ones(3, 4))
    out = capsys.readouterr().out
    assert "Global" in out and "48" in out


def test_custom_mapping_and_register_formula():
    with FlopCounterMode(display=False, custom_mapping={"mm": lambda a, b, out_shape=None: 7}) as fc:
        strata.mm(strata.ones(2, 3), strata.ones(3, 4))
    assert fc.get_total_flops() == 7

    @register_flop_formula("dot")
    def _dot(a_shape, b_shape, out_shape=None):
        assert out_shape == []
        return 2 * a_shape[0]

    try:
        with FlopCounterMode(display=False) as fc:
            strata.dot(strata.ones(6), strata.ones(6))
        assert fc.get_total_flops() == 12
    finally:
        from strata.utils import flop_counter
        flop_counter.flop_registry.pop("dot", None)


def test_inside_profiler_raises_clearly():
    with strata.profiler.profile():
        with pytest.raises(RuntimeError, match="FlopCounterMode"):
            FlopCounterMode(display=False).__enter__()


def test_global_module_hooks_are_removed_after():
    from strata.nn.modules import module as module_mod

    with FlopCounterMode(display=False):
        pass
    assert strata.nn.Module.__call__ is module_mod._call_impl_plain
    assert not module_mod._global_forward_pre_hooks and not module_mod._global_forward_hooks
