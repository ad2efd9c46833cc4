"""strata.autograd.graph.saved_tensors_hooks / save_on_cpu / disable_saved_tensors_hooks (Note [Saved tensor hooks]),
checked against torch's behaviour where torch is installed."""

import pytest

import strata
from strata.autograd.graph import disable_saved_tensors_hooks, save_on_cpu, saved_tensors_hooks


def _count_saved(lib, fn):
    """Number of tensors packed while running fn under lib's hooks, and gradients after backward."""
    packed, unpacked = [], []

    def pack(t):
        packed.append(tuple(t.shape))
        return t.detach()

    def unpack(t):
        unpacked.append(tuple(t.shape))
        return t

    a = lib.arange(1.0, 7.0).reshape(2, 3).requires_grad_()
    b = lib.arange(2.0, 8.0).reshape(2, 3).requires_grad_()
    with lib.autograd.graph.saved_tensors_hooks(pack, unpack):
        y = fn(lib, a, b)
    n_packed = len(packed)
    y.sum().backward()
    return n_packed, len(unpacked), a.grad.flatten().tolist(), b.grad.flatten().tolist()


@pytest.mark.parametrize("fn", [
    lambda lib, a, b: a * b,
    lambda lib, a, b: (a * b).exp(),
    lambda lib, a, b: a.sin() + b.cos(),
    lambda lib, a, b: a.matmul(b.t()),
    lambda lib, a, b: lib.nn.functional.relu(a - b) + a / b,
    lambda lib, a, b: lib.nn.functional.linear(a, b).softmax(-1),
])
def test_counts_and_gradients_match_torch(fn):
    torch = pytest.importorskip("torch")
    ours = _count_saved(strata, fn)
    ref = _count_saved(torch, fn)
    assert ours[0] == ref[0] and ours[1] == ref[1]
    assert ours[2] == pytest.approx(ref[2]) and ours[3] == pytest.approx(ref[3])


def test_pack_sees_inputs_and_outputs_with_history():
    seen = []

    def pack(t):
        seen.append((t.requires_grad, t.grad_fn is not None))
        return t.detach()

    a = strata.ones(5, requires_grad=True)
    b = strata.ones(5, requires_grad=True) * 2
    with saved_tensors_hooks(pack, lambda t: t):
        y = a * b  # saves a (leaf) and b (non-leaf)
        z = y.exp()  # saves its output
    assert sorted(seen) == [(True, False), (True, True), (True, True)]
    z.sum().backward()
    assert a.grad.tolist() == pytest.approx([2 * 2.718281828459045**2] * 5)


def test_offload_and_reload_changes_what_backward_sees():
    # unpack can return any tensor: the gradient uses it, proving the node kept what pack returned.
    a = strata.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with saved_tensors_hooks(lambda t: ("boxed", t.detach().clone()), lambda p: p[1] * 10):
        y = a * a  # d/da = 2a, from the saved a
    y.sum().backward()
    assert a.grad.tolist() == pytest.approx([20.0, 40.0, 60.0])


def test_save_on_cpu_round_trip_and_retain_graph():
    strata.manual_seed(0)
    x = strata.randn(4, 3, requires_grad=True)
    w = strata.randn(3, 2, requires_grad=True)
    with save_on_cpu():
        y = (x @ w).tanh().sum()
    y.backward(retain_graph=True)
    g1 = x.grad.clone()
    x.grad = None
    y.backward()
    ref = (1 - (x @ w).tanh() ** 2) @ w.t()
    # float32: the reference's own rounding differs by a few ulp near zero (atol)
    assert strata.allclose(g1, ref, atol=1e-6) and strata.allclose(x.grad, ref, atol=1e-6)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_hooks_are_fixed_at_save_time_and_innermost_applies():
    log = []
    a = strata.ones(3, requires_grad=True)
    with saved_tensors_hooks(lambda t: log.append("outer") or t, lambda t: log.append("u-outer") or t):
        with saved_tensors_hooks(lambda t: log.append("inner") or t, lambda t: log.append("u-inner") or t):
            y = a.sin()
        y2 = a.cos()
    assert log == ["inner", "outer"]
    (y + y2).sum().backward()  # outside both contexts: each unpacks with its own pair
    assert sorted(log[2:]) == ["u-inner", "u-outer"]


def test_pack_runs_without_grad_and_not_recursively():
    modes, calls = [], []

    def pack(t):
        modes.append(strata.is_grad_enabled())
        calls.append(1)
        return t * 2  # an op inside pack saves nothing (grad mode off)

    a = strata.tensor([0.5, 1.0], requires_grad=True)
    with saved_tensors_hooks(pack, lambda t: t / 2):
        y = a.sin()
    assert modes == [False] and len(calls) == 1
    y.sum().backward()
    assert a.grad.tolist() == pytest.approx([0.8775825618903728, 0.5403023058681398])


def test_no_pack_without_a_graph():
    calls = []
    a = strata.ones(3, requires_grad=True)
    with saved_tensors_hooks(lambda t: calls.append(1) or t, lambda t: t):
        with strata.no_grad():
            a.exp()
        strata.ones(3).exp()
    assert calls == []


def test_unpack_returning_a_non_tensor_raises():
    a = strata.ones(3, requires_grad=True)
    with saved_tensors_hooks(lambda t: t, lambda t: 3):
        y = a.exp()
    with pytest.raises(TypeError, match="unpack_hook expected to be a Tensor but got result of type int"):
        y.sum().backward()


def test_pack_modifying_its_input_raises():
    a = strata.ones(3, requires_grad=True)
    b = strata.ones(3)
    with saved_tensors_hooks(lambda t: t.mul_(2) if not t.requires_grad else t, lambda t: t):
        with pytest.raises(RuntimeError, match="pack hook is modifying its input in place"):
            a * b


def test_exception_in_pack_or_unpack_propagates():
    a = strata.ones(3, requires_grad=True)

    def bad(t):
        raise ValueError("pack failed")

    with saved_tensors_hooks(bad, lambda t: t):
        with pytest.raises(ValueError, match="pack failed"):
            a.exp()
    with saved_tensors_hooks(lambda t: t, bad):
        y = a.exp()
    with pytest.raises(ValueError, match="pack failed"):
        y.sum().backward()


def test_versions_are_not_checked_through_hooks():
    x = strata.ones(3, requires_grad=True).clone()
    with saved_tensors_hooks(lambda t: t, lambda t: t):
        y = x.sin()
    x.add_(1)
    y.sum().backward()  # as in torch: no in-place error through hooks
    x2 = strata.ones(3, requires_grad=True).clone()
    y2 = x2.sin()
    x2.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y2.sum().backward()


def test_custom_function_save_for_backward_uses_hooks():
    class Square(strata.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * g * x

    log = []
    a = strata.tensor([1.0, 3.0], requires_grad=True)
    with saved_tensors_hooks(lambda t: log.append("p") or t.detach(), lambda t: log.append("u") or t):
        y = Square.apply(a)
    y.sum().backward()
    assert log == ["p", "u"] and a.grad.tolist() == [2.0, 6.0]
    with saved_tensors_hooks(lambda t: t, lambda t: "x"):
        y = Square.apply(a)
    with pytest.raises(TypeError, match="unpack_hook expected to be a Tensor"):
        y.sum().backward()


def test_double_backward_through_unpacked_tensors():
    x = strata.tensor([0.5, 1.5], requires_grad=True)
    with save_on_cpu():
        y = (x * x * x).sum()
    (g,) = strata.autograd.grad(y, x, create_graph=True)
    assert g.tolist() == pytest.approx([0.75, 6.75])
    (gg,) = strata.autograd.grad(g.sum(), x)
    assert gg.tolist() == pytest.approx([3.0, 9.0])
    x2 = strata.tensor([0.5, 1.5], requires_grad=True)
    with save_on_cpu():
        z = x2.exp().sum()  # saves its output
    (g2,) = strata.autograd.grad(z, x2, create_graph=True)
    (gg2,) = strata.autograd.grad(g2.sum(), x2)
    assert gg2.tolist() == pytest.approx(x2.exp().tolist())


def test_disable_saved_tensors_hooks():
    with disable_saved_tensors_hooks("hooks are off here"):
        with pytest.raises(RuntimeError, match="hooks are off here"):
            with save_on_cpu():
                pass
        with disable_saved_tensors_hooks("inner message"):
            with pytest.raises(RuntimeError, match="inner message"):
                saved_tensors_hooks(lambda t: t, lambda t: t).__enter__()
        with pytest.raises(RuntimeError, match="hooks are off here"):
            save_on_cpu().__enter__()
    with save_on_cpu():  # enabled again
        with pytest.raises(RuntimeError, match="not while set"):
            with disable_saved_tensors_hooks("not while set"):
                pass
    assert strata._C._saved_tensors_hooks_get_disabled_error_message() is None


def test_hooks_are_per_thread():
    import threading

    calls = []
    a = strata.ones(3, requires_grad=True)
    with saved_tensors_hooks(lambda t: calls.append(1) or t, lambda t: t):
        th = threading.Thread(target=lambda: a.exp())
        th.start()
        th.join()
    assert calls == []
