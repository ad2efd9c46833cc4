"""Typical torch snippets, run twice: once with `torch` bound to strata and once
to PyTorch itself; the results must agree."""

import numpy as np
import pytest

import strata

torch_ref = pytest.importorskip("torch")


def to_np(x):
    if isinstance(x, (list, tuple)):
        return [to_np(e) for e in x]
    if hasattr(x, "detach"):
        x = x.detach()
    if hasattr(x, "numpy") and not isinstance(x, np.ndarray):
        if str(x.dtype).endswith("bfloat16"):
            x = x.float()
        return x.numpy()
    return x


SNIPPETS = {}


def snippet(fn):
    SNIPPETS[fn.__name__] = fn
    return fn


@snippet
def arithmetic_and_broadcasting(torch):
    a = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    b = torch.tensor([1.0, -2.0, 3.0, 0.5])
    c = (a * b + 1) / (b.abs() + 2) - a.T.T ** 2
    return c, c.dtype


@snippet
def integer_and_bool_math(torch):
    x = torch.tensor([[5, -3, 7], [0, 2, -8]])
    return x // 2, x % 3, x.sign(), (x > 0) & (x < 6), ~(x == 0), x.abs().max(), x.float().mean()


@snippet
def type_promotion_with_scalars(torch):
    i8 = torch.tensor([1, 2, 3], dtype=torch.int8)
    f16 = torch.tensor([1.5, 2.5], dtype=torch.float16)
    return (i8 + 1).dtype, (i8 * 2.5).dtype, (f16 + 1.0).dtype, (i8 + f16[:1]).dtype, torch.tensor(3) / 2


@snippet
def views_and_inplace(torch):
    x = torch.zeros(4, 5)
    v = x[1:3, ::2]
    v += 1
    x[0] = torch.arange(5.0)
    x[:, -1] = -1
    y = x.view(5, 4).t().contiguous()
    return x, y, y.is_contiguous(), x.stride(), v.shape


@snippet
def indexing(torch):
    x = torch.arange(24).reshape(2, 3, 4)
    idx = torch.tensor([0, 2])
    mask = x > 10
    return x[1, :, idx], x[mask], x[..., 1], x[:, None, 0].shape, x[[1, 0]][0, 1]


@snippet
def reductions(torch):
    x = torch.linspace(-2, 2, 20).reshape(4, 5)
    return (x.sum(), x.sum(dim=1), x.mean(0, keepdim=True), x.max(dim=1).values, x.max(dim=1).indices,
            x.argmin(), x.std(dim=0), x.var(), torch.softmax(x, dim=-1), torch.logsumexp(x, dim=1),
            x.cumsum(0), x.prod(dim=1), x.norm(), (x > 0).all(), (x > 0).any(dim=0))


@snippet
def matmul_shapes(torch):
    a = torch.linspace(0, 1, 24).reshape(2, 3, 4)
    b = torch.linspace(1, 2, 20).reshape(4, 5)
    v = torch.linspace(0, 1, 4)
    return a @ b, a @ v, torch.matmul(v, b), torch.bmm(a, a.transpose(1, 2)), torch.outer(v, v), v @ v


@snippet
def shape_ops(torch):
    a = torch.arange(6).reshape(2, 3)
    parts = torch.split(torch.arange(10), 3)
    return (torch.cat([a, a], dim=0), torch.stack([a, a], dim=1), torch.cat(list(parts)), len(parts),
            a.flip(0), a.roll(1, 1), a.repeat(2, 1), torch.tril(torch.ones(3, 3)),
            torch.sort(torch.tensor([3, 1, 2])).values, torch.topk(torch.tensor([1.0, 5.0, 3.0]), 2).indices,
            torch.gather(a, 1, torch.tensor([[0], [2]])), a.unsqueeze(0).squeeze().shape)


@snippet
def functional(torch):
    F = torch.nn.functional
    x = torch.linspace(-3, 3, 24).reshape(2, 3, 4)
    w = torch.linspace(-1, 1, 20).reshape(5, 4)
    logits = torch.linspace(-1, 1, 15).reshape(5, 3)
    target = torch.tensor([0, 2, 1, 1, 0])
    return (F.relu(x), F.gelu(x), F.silu(x), F.linear(x, w), F.layer_norm(x, (4,)), F.softmax(x, dim=-1),
            F.cross_entropy(logits, target), F.mse_loss(logits, torch.zeros(5, 3)))


@snippet
def creation(torch):
    torch.manual_seed(0)
    r = torch.rand(3, 4)
    return (torch.zeros(2, 3), torch.ones(2, dtype=torch.int32), torch.full((2, 2), 7), torch.eye(3),
            torch.arange(0, 1, 0.25), torch.zeros_like(r).shape, r.shape, r.dtype, (r >= 0).all(), (r < 1).all())


@pytest.mark.parametrize("name", list(SNIPPETS))
def test_snippet_matches_torch(name):
    fn = SNIPPETS[name]
    ours = fn(strata)
    ref = fn(torch_ref)
    ours = ours if isinstance(ours, tuple) else (ours,)
    ref = ref if isinstance(ref, tuple) else (ref,)
    assert len(ours) == len(ref)
    for i, (o, r) in enumerate(zip(ours, ref)):
        if isinstance(r, torch_ref.dtype):
            assert str(o).split(".")[1] == str(r).split(".")[1], f"{name}[{i}]: dtype {o} vs {r}"
            continue
        if isinstance(r, (torch_ref.Size, tuple)) and not isinstance(r, torch_ref.Tensor):
            assert tuple(o) == tuple(r), f"{name}[{i}]"
            continue
        o_np, r_np = to_np(o), to_np(r)
        if isinstance(r, torch_ref.Tensor):
            assert str(o.dtype).split(".")[1] == str(r.dtype).split(".")[1], f"{name}[{i}]: dtype {o.dtype} vs {r.dtype}"
        np.testing.assert_allclose(np.asarray(o_np, dtype=np.float64), np.asarray(r_np, dtype=np.float64),
                                   rtol=1e-5, atol=1e-6, err_msg=f"{name}[{i}]")


def test_isclose_allclose_equal_match_torch():
    a = [1.0, float("inf"), float("nan"), 1e-9, 100.0]
    b = [1.0 + 1e-6, float("inf"), float("nan"), 0.0, 100.001]
    for kw in ({}, {"equal_nan": True}, {"rtol": 0.0, "atol": 1e-3}):
        ours = strata.isclose(strata.tensor(a), strata.tensor(b), **kw).tolist()
        ref = torch_ref.isclose(torch_ref.tensor(a), torch_ref.tensor(b), **kw).tolist()
        assert ours == ref, kw
    assert strata.allclose(strata.tensor([1.0, 2.0]), strata.tensor([1.0, 2.0 + 1e-7]))
    assert not strata.allclose(strata.tensor([1.0]), strata.tensor([1.1]))
    assert strata.equal(strata.tensor([1, 2]), strata.tensor([1, 2]))
    assert not strata.equal(strata.tensor([1, 2]), strata.tensor([1, 2, 3]))


def test_result_type_matches_torch():
    cases = [
        (strata.tensor([1], dtype=strata.int8), 1.5),
        (strata.tensor([1], dtype=strata.int32), 2),
        (strata.tensor([1.0], dtype=strata.float16), strata.tensor(1.0, dtype=strata.float64)),
        (strata.tensor([True]), strata.tensor([1], dtype=strata.uint8)),
        (3, 4.0),
    ]
    for a, b in cases:
        ta = torch_ref.from_numpy(a.numpy()) if isinstance(a, strata.Tensor) else a
        tb = torch_ref.from_numpy(b.numpy()) if isinstance(b, strata.Tensor) else b
        assert str(strata.result_type(a, b)).split(".")[1] == str(torch_ref.result_type(ta, tb)).split(".")[1]
