"""The autograd core: recording, the engine, modes, hooks, saved-tensor checks,
custom Functions, checkpointing, anomaly mode. Per-op derivatives are tested
in test_autograd_<family>.py."""

import gc
import math

import numpy as np
import pytest

import strata
from strata import autograd


def t(data, **kw):
    return strata.tensor(data, **kw)


def close(a, b, tol=1e-6):
    a = a.detach().numpy() if isinstance(a, strata.Tensor) else np.asarray(a)
    return np.allclose(a, np.asarray(b), rtol=tol, atol=tol)


# ---- recording ----------------------------------------------------------------
def test_leaf_flags_and_grad_fn_names():
    x = t([1.0, 2.0], requires_grad=True)
    assert x.requires_grad and x.is_leaf and x.grad_fn is None and x.grad is None
    y = x * 2
    z = y + 1
    s = z.sum()
    assert not y.is_leaf and y.requires_grad
    assert y.grad_fn.name() == "MulBackward0"
    assert z.grad_fn.name() == "AddBackward0"
    assert s.grad_fn.name() == "SumBackward0"
    (fn, nr), = s.grad_fn.next_functions
    assert fn.name() == "AddBackward0" and nr == 0
    acc = y.grad_fn.next_functions[0][0]
    assert acc.name() == "AccumulateGrad"
    assert "grad_fn=<SumBackward0>" in repr(s)


def test_no_recording_without_requires_grad_or_under_no_grad():
    x = t([1.0, 2.0])
    assert (x * 2).grad_fn is None
    w = t([1.0, 2.0], requires_grad=True)
    with strata.no_grad():
        y = w * 2
    assert y.grad_fn is None and not y.requires_grad
    with strata.inference_mode():
        assert (w + 1).grad_fn is None
    with strata.set_grad_enabled(False):
        assert not strata.is_grad_enabled()
        with strata.enable_grad():
            assert (w + 1).requires_grad


def test_integer_tensors_cannot_require_grad():
    with pytest.raises(RuntimeError, match="floating point"):
        t([1, 2]).requires_grad_()
    w = t([1.0, 2.0], requires_grad=True)
    assert not w.argmax().requires_grad
    assert not (w > 1).requires_grad


def test_backward_simple_and_accumulation():
    x = t([1.0, 2.0, 3.0], requires_grad=True)
    (x * x).sum().backward()
    assert close(x.grad, [2, 4, 6])
    (x * 3).sum().backward()
    assert close(x.grad, [5, 7, 9])
    x.grad = None
    (x * 3).sum().backward()
    assert close(x.grad, [3, 3, 3])


def test_diamond_graph_sums_both_paths():
    x = t([2.0], requires_grad=True)
    a = x * 3
    b = a * a + a.exp()
    b.sum().backward()
    # d/dx (9x^2 + e^{3x}) = 18x + 3 e^{3x}
    assert close(x.grad, [36 + 3 * math.exp(6)], 1e-5)


def test_broadcast_gradients_are_summed():
    x = strata.randn(3, 1, requires_grad=True)
    y = strata.randn(4, requires_grad=True)
    (x + y).sum().backward()
    assert close(x.grad, np.full((3, 1), 4.0))
    assert close(y.grad, np.full(4, 3.0))


def test_backward_non_scalar_needs_gradient():
    x = t([1.0, 2.0], requires_grad=True)
    y = x * 2
    with pytest.raises(RuntimeError, match="only for scalar outputs"):
        y.backward()
    y.backward(t([1.0, 10.0]))
    assert close(x.grad, [2, 20])
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        (x * 2).backward(t([1.0, 2.0, 3.0]))


def test_backward_on_tensor_without_grad_raises():
    with pytest.raises(RuntimeError, match="does not require grad"):
        t([1.0]).sum().backward()


def test_retain_graph_and_second_backward_error():
    x = t([1.0, 2.0], requires_grad=True)
    y = (x.exp()).sum()
    y.backward(retain_graph=True)
    y.backward()
    assert close(x.grad, 2 * np.exp([1.0, 2.0]), 1e-5)
    z = (x.exp()).sum()
    z.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        z.backward()


def test_autograd_grad_allow_unused_and_no_accumulation():
    x = t([1.0, 2.0], requires_grad=True)
    y = t([3.0], requires_grad=True)
    out = (x * x).sum()
    (gx,) = autograd.grad(out, x, retain_graph=True)
    assert close(gx, [2, 4]) and x.grad is None
    with pytest.raises(RuntimeError, match="allow_unused"):
        autograd.grad(out, [x, y], retain_graph=True)
    gx, gy = autograd.grad(out, [x, y], allow_unused=True)
    assert gy is None and close(gx, [2, 4])


def test_grad_of_intermediate():
    x = t([1.0, 2.0], requires_grad=True)
    h = x * 3
    out = (h * h).sum()
    (gh,) = autograd.grad(out, h)
    assert close(gh, [6, 12])


def test_create_graph_double_backward():
    x = t([1.5, -2.0], requires_grad=True)
    y = (x * x * x).sum()
    (g,) = autograd.grad(y, x, create_graph=True)
    assert g.requires_grad
    assert close(g, 3 * np.array([1.5, -2.0]) ** 2)
    (g2,) = autograd.grad(g.sum(), x)
    assert close(g2, 6 * np.array([1.5, -2.0]))


def test_backward_inputs_argument_limits_accumulation():
    a = t([1.0], requires_grad=True)
    b = t([2.0], requires_grad=True)
    (a * b).sum().backward(inputs=[a])
    assert close(a.grad, [2.0]) and b.grad is None


# ---- detach, requires_grad_, retain_grad, hooks ----------------------------------------
def test_detach_shares_storage_and_drops_history():
    x = t([1.0, 2.0], requires_grad=True)
    y = x * 2
    d = y.detach()
    assert d.grad_fn is None and not d.requires_grad and d.is_leaf
    d[0] = 10.0
    assert y[0].item() == 10.0
    with pytest.raises(RuntimeError, match="leaf variables"):
        y.requires_grad_(False)


def test_retain_grad():
    x = t([1.0, 2.0], requires_grad=True)
    h = x * 2
    h.retain_grad()
    assert h.retains_grad
    (h * h).sum().backward()
    assert close(h.grad, [4, 8]) and close(x.grad, [8, 16])


def test_tensor_hooks_modify_and_remove():
    x = t([1.0, 2.0], requires_grad=True)
    seen = []
    h = x * 1
    handle = h.register_hook(lambda g: g * 10)
    x.register_hook(lambda g: seen.append(g.tolist()))
    h.sum().backward()
    assert close(x.grad, [10, 10]) and seen == [[10.0, 10.0]]
    handle.remove()
    x.grad = None
    h2 = x * 1
    h2.sum().backward()
    assert close(x.grad, [1, 1])


def test_node_post_hook():
    x = t([1.0, 2.0], requires_grad=True)
    y = x * 2
    calls = []
    y.grad_fn.register_hook(lambda gin, gout: calls.append(len(gin)))
    y.sum().backward()
    assert calls == [2]


# ---- saved tensors and in-place -------------------------------------------------------
def test_inplace_modification_of_saved_tensor_raises_version_error():
    x = t([1.0, 2.0], requires_grad=True)
    y = x.exp()
    z = y * 1
    y.add_(1)  # exp saved its output
    with pytest.raises(RuntimeError, match=r"modified by an inplace operation.*is at version 1; expected version 0"):
        (y.sum() + z.sum()).backward()


def test_inplace_on_leaf_requiring_grad_raises():
    x = t([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        x.add_(1)
    with strata.no_grad():
        x.add_(1)  # allowed without recording
    assert close(x, [2, 3])


def test_inplace_on_non_leaf_rebases_history():
    x = t([1.0, 2.0], requires_grad=True)
    y = x * 2
    z = x * x
    y.mul_(z)  # y = 2x^3
    assert y.grad_fn.name() == "MulBackward0"
    y.sum().backward()
    assert close(x.grad, 6 * np.array([1.0, 2.0]) ** 2)
    # Like torch: self is also `other`, saved before the write, so backward refuses.
    w = x * 2
    w.mul_(w)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        w.sum().backward()


def test_inplace_through_view_rebases_base():
    x = t([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 1
    v = y[1:]
    v.mul_(5)
    assert y.grad_fn.name() == "CopySlices"
    y.sum().backward()
    assert close(x.grad, [1, 5, 5])


def test_version_counter_shared_with_views():
    x = t([1.0, 2.0])
    v = x[0:1]
    before = x._version
    v.add_(1)
    assert x._version == before + 1


# ---- custom Function -----------------------------------------------------------------
class Cube(autograd.Function):
    @staticmethod
    def forward(ctx, x, k):
        ctx.save_for_backward(x)
        ctx.k = k
        return x * x * x * k

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        assert ctx.needs_input_grad == (True, False)
        return g * 3 * x * x * ctx.k, None


def test_custom_function_forward_backward():
    x = t([1.0, 2.0], requires_grad=True)
    y = Cube.apply(x, 2.0)
    assert y.grad_fn.name() == "CubeBackward"
    y.sum().backward()
    assert close(x.grad, [6, 24])


def test_custom_function_saved_tensor_version_check():
    x = t([1.0, 2.0], requires_grad=True)
    h = x * 1
    y = Cube.apply(h, 1.0)
    h.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_custom_function_mark_dirty_and_non_differentiable():
    class AddOneInplace(autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.add_(1)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    class ArgMaxish(autograd.Function):
        @staticmethod
        def forward(ctx, x):
            idx = (x * 0).long()
            ctx.mark_non_differentiable(idx)
            return x * 2, idx

        @staticmethod
        def backward(ctx, g, gi):
            return g * 2

    x = t([1.0, 2.0], requires_grad=True)
    h = x * 1
    out = AddOneInplace.apply(h)
    assert out._is_same(h) and h.grad_fn.name() == "AddOneInplaceBackward"
    y, idx = ArgMaxish.apply(out)
    assert not idx.requires_grad
    y.sum().backward()
    assert close(x.grad, [2, 2])


def test_once_differentiable_and_wrong_gradient_count():
    class Bad(autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x + y

        @staticmethod
        @autograd.function.once_differentiable
        def backward(ctx, g):
            return (g,)

    x = t([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="incorrect number of gradients"):
        Bad.apply(x, x).sum().backward()


# ---- checkpointing ----------------------------------------------------------------------
def _block(x, w):
    for _ in range(6):
        x = (x @ w).tanh()
    return x


def test_checkpoint_gives_same_gradients():
    from strata.utils.checkpoint import checkpoint

    strata.manual_seed(0)
    w = (strata.randn(64, 64) * 0.1).requires_grad_()
    x = strata.randn(8, 64, requires_grad=True)
    _block(x, w).sum().backward()
    gx, gw = x.grad.clone(), w.grad.clone()
    x.grad = None
    w.grad = None
    out = checkpoint(_block, x, w, use_reentrant=True)
    assert out.grad_fn.name() == "_CheckpointFunctionBackward"
    out.sum().backward()
    assert close(x.grad, gx.numpy(), 1e-5) and close(w.grad, gw.numpy(), 1e-5)


def test_checkpoint_saves_memory():
    from strata.utils.checkpoint import checkpoint

    n = 512  # 1 MiB activations per step, 6 steps
    w = (strata.randn(n, n) * 0.01).requires_grad_()
    x = strata.randn(n, n, requires_grad=True)

    def live_bytes_held(use_ckpt):
        gc.collect()
        base = strata._C._cpu_allocator_stats()["allocated_bytes"]
        out = checkpoint(_block, x, w, use_reentrant=True) if use_ckpt else _block(x, w)
        held = strata._C._cpu_allocator_stats()["allocated_bytes"] - base
        del out
        gc.collect()
        return held

    plain = live_bytes_held(False)
    ckpt = live_bytes_held(True)
    # Without checkpointing the graph keeps each step's matmul input and tanh
    # output; with it only the final output exists.
    assert plain >= 6 * n * n * 4
    assert ckpt <= 2 * n * n * 4
    assert ckpt < plain / 3


def test_checkpoint_restores_rng_for_dropout():
    from strata.utils.checkpoint import checkpoint

    x = strata.ones(1000, requires_grad=True)

    def f(x):
        return strata.nn.functional.dropout(x, 0.5, training=True) * 2

    strata.manual_seed(3)
    out = checkpoint(f, x, use_reentrant=True)
    mask = (out.detach() != 0).float()
    out.sum().backward()
    # The recomputed dropout mask equals the forward one: grad is 4 where kept.
    assert close(x.grad, (mask * 4).numpy())


# ---- anomaly mode -----------------------------------------------------------------------
def test_anomaly_mode_names_node_and_python_line():
    x = t([0.0, 1.0], requires_grad=True)
    with autograd.set_detect_anomaly(True):
        y = x.sqrt()  # d sqrt at 0 = inf; inf * 0 -> nan below
        z = (y * 0).sum()
        with pytest.raises(RuntimeError) as ei:
            z.backward()
    msg = str(ei.value)
    assert "returned nan values" in msg and "SqrtBackward0" in msg
    assert "test_autograd.py" in msg and "x.sqrt()" in msg
    assert not autograd.is_anomaly_enabled()


def test_anomaly_mode_off_does_not_raise():
    x = t([0.0, 1.0], requires_grad=True)
    (x.sqrt() * 0).sum().backward()
    assert math.isnan(x.grad[0].item())


# ---- gradcheck ---------------------------------------------------------------------------
def test_gradcheck_passes_and_detects_wrong_derivative():
    x = strata.randn(3, dtype=strata.float64, requires_grad=True)
    assert autograd.gradcheck(lambda a: (a * a).exp(), (x,))
    assert autograd.gradgradcheck(lambda a: (a * a * a).sum(), (x,))

    class Wrong(autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return g * 3

    assert not autograd.gradcheck(Wrong.apply, (x,), raise_exception=False)
    with pytest.raises(RuntimeError, match="Jacobian mismatch"):
        autograd.gradcheck(Wrong.apply, (x,))


def test_graph_is_freed_when_outputs_die():
    x = strata.randn(256, 256, requires_grad=True)
    gc.collect()
    base = strata._C._cpu_allocator_stats()["allocated_bytes"]
    y = (x.exp() * 2).sum()
    held = strata._C._cpu_allocator_stats()["allocated_bytes"] - base
    assert held >= 256 * 256 * 4  # exp's saved output
    del y
    gc.collect()
    assert strata._C._cpu_allocator_stats()["allocated_bytes"] - base < 1024


def test_random_inplace_on_non_leaf_cuts_the_gradient_like_torch():
    torch = pytest.importorskip("torch")
    for lib in (strata, torch):
        x = lib.ones(3, requires_grad=True)
        y = x * 2
        y.uniform_()
        assert y.requires_grad
        (y * 3 + x).sum().backward()
        assert x.grad.tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(RuntimeError, match="leaf Variable"):
        strata.ones(2, requires_grad=True).normal_()


def test_bad_arguments_to_backward_and_grad_raise_clearly():
    x = t([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="expected float32"):
        (x * 2).backward(t([1, 2]))
    with pytest.raises(TypeError, match="must be a Tensor"):
        autograd.grad((x * 2).sum(), [1.0])
    with pytest.raises(TypeError, match="must be a Tensor"):
        autograd.backward([3.0])
    h = x * 2
    h.register_hook(lambda g: strata.ones(5))
    with pytest.raises(RuntimeError, match="invalid gradient"):
        h.sum().backward()


def _live_bytes():
    gc.collect()
    return strata._C._cpu_allocator_stats()["allocated_bytes"]


def test_forward_backward_loop_does_not_grow_live_bytes():
    w = strata.randn(64, 64, requires_grad=True)
    b = strata.randn(64, requires_grad=True)
    x = strata.randn(8, 64)

    def step():
        h = (x @ w + b).tanh()  # saves inputs and outputs
        v = h[:, :32]  # a view with history
        y = h * 2
        y.add_(1)  # in-place on a non-leaf
        (y.sum() + v.exp().sum()).backward()

    for _ in range(3):  # .grad buffers and allocator caches settle
        step()
    base = _live_bytes()
    for _ in range(50):
        step()
    assert _live_bytes() - base <= 0


def test_saved_tensors_are_freed_by_backward_while_the_graph_lives():
    x = strata.randn(256, 256, requires_grad=True)
    y = x.exp().sin().sum()  # exp's output, saved by exp and by sin, is held only by the graph
    base = _live_bytes()
    y.backward()
    x.grad = None
    # It is gone although y (and its graph) still exists.
    assert _live_bytes() - base <= -256 * 256 * 4 + 1024
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_graph_outliving_its_leaf_still_runs_the_leafs_hooks_like_torch():
    torch = pytest.importorskip("torch")
    for lib in (strata, torch):
        seen = []

        def make():
            x = lib.ones(3, requires_grad=True)
            x.register_hook(lambda g: seen.append(g.tolist()))
            return x * 2  # the leaf's only reference is now the graph

        y = make()
        gc.collect()
        y.sum().backward()
        assert seen == [[2.0, 2.0, 2.0]], lib


def test_a_leaf_used_by_many_graphs_accumulates_through_one_sink():
    x = t([1.0, 2.0], requires_grad=True)
    ys = [x * float(k) for k in range(1, 4)]
    nodes = [y.grad_fn.next_functions[0][0] for y in ys]
    assert all(n.name() == "AccumulateGrad" for n in nodes)
    for y in ys:
        y.sum().backward()
    assert x.grad.tolist() == [6.0, 6.0]
    del ys, nodes
    gc.collect()
    x.grad = None
    (x * x).sum().backward()
    assert x.grad.tolist() == [2.0, 4.0]
