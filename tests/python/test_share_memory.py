"""Tensor.share_memory_ / is_shared / nn.Module.share_memory and tensors crossing processes through
strata.multiprocessing without a copy (a Queue both ways, spawned processes, Hogwild-style training)."""

import pickle

import numpy as np
import pytest

import strata as st
import strata.multiprocessing as smp

torch = pytest.importorskip("torch")


def test_share_memory_in_place_keeps_views_and_values():
    base = st.arange(12.0).reshape(3, 4)
    view = base[1:, ::2]
    t = torch.arange(12.0).reshape(3, 4)
    assert base.is_shared() == t.is_shared() is False
    assert base.share_memory_() is base
    t.share_memory_()
    assert base.is_shared() and view.is_shared() and t.is_shared()
    np.testing.assert_array_equal(base.numpy(), t.numpy())
    # The view follows the storage's move: writes through either are seen by the other.
    view.fill_(-1.0)
    assert base[1, 0].item() == -1.0 and base[2, 2].item() == -1.0
    base[0, 0] = 7.0
    assert base.numpy()[0, 0] == 7.0
    assert base.share_memory_() is base  # already shared: nothing changes
    assert base.data_ptr() == base.share_memory_().data_ptr()


def test_share_memory_dtypes_and_empty():
    for dt in (st.float64, st.int32, st.bool, st.bfloat16, st.complex64):
        x = st.ones(5, dtype=dt)
        x.share_memory_()
        assert x.is_shared() and x.dtype is dt
        assert bool((x == st.ones(5, dtype=dt)).all())
    e = st.empty(0)
    e.share_memory_()
    assert e.is_shared() and e.numel() == 0


def test_shared_tensor_keeps_autograd():
    w = st.randn(3, requires_grad=True)
    w.share_memory_()
    (w * 2).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), np.full(3, 2.0))
    assert w.requires_grad and w.is_leaf


def test_module_share_memory():
    m = st.nn.Sequential(st.nn.Linear(3, 4), st.nn.BatchNorm1d(4))
    m(st.randn(5, 3)).sum().backward()
    assert m.share_memory() is m
    for t in list(m.parameters()) + list(m.buffers()):
        assert t.is_shared()
    for p in m.parameters():
        assert p.grad.is_shared()
    assert isinstance(m[0].weight, st.nn.Parameter)
    tm = torch.nn.Linear(3, 4).share_memory()
    assert all(p.is_shared() for p in tm.parameters())


def test_plain_pickle_still_copies():
    x = st.arange(4.0).share_memory_()
    y = pickle.loads(pickle.dumps(x))
    y.add_(1)
    assert x.tolist() == [0.0, 1.0, 2.0, 3.0]


def _child_writes(q_in, q_out, arg):
    arg.add_(1)  # a tensor passed as a Process argument is shared too (spawn pickles it)
    t = q_in.get()
    t.mul_(10)  # in place: the parent sees it
    q_out.put((t.is_shared(), t[1:].clone()))
    p = q_in.get()
    q_out.put((type(p).__name__, p.requires_grad))


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_queue_shares_memory(method):
    ctx = smp.get_context(method)
    q_in, q_out = ctx.Queue(), ctx.Queue()
    arg = st.zeros(3)
    if method == "fork":
        arg.share_memory_()  # a forked child inherits the memory as it is: private memory would be copied on write
    proc = ctx.Process(target=_child_writes, args=(q_in, q_out, arg))
    proc.start()
    x = st.arange(6.0).reshape(2, 3)
    q_in.put(x[1])  # a view: its whole storage moves to shared memory
    shared, tail = q_out.get(timeout=60)
    assert shared and x.is_shared()
    assert x.tolist() == [[0.0, 1.0, 2.0], [30.0, 40.0, 50.0]]
    assert tail.tolist() == [40.0, 50.0]
    q_in.put(st.nn.Parameter(st.ones(2)))
    assert q_out.get(timeout=60) == ("Parameter", True)
    proc.join(60)
    assert proc.exitcode == 0
    assert arg.tolist() == [1.0, 1.0, 1.0]


def test_non_leaf_requiring_grad_is_refused():
    x = st.ones(2, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="Cowardly refusing to serialize non-leaf tensor"):
        smp.reduction.ForkingPickler.dumps(x)


def _hogwild_worker(rank, model, data, target, steps):
    st.manual_seed(rank)
    st.set_num_threads(1)
    opt = st.optim.SGD(model.parameters(), lr=0.05)
    for _ in range(steps):
        opt.zero_grad()
        loss = ((model(data) - target) ** 2).mean()
        loss.backward()
        opt.step()


def test_hogwild_training_updates_the_shared_model():
    st.manual_seed(0)
    model = st.nn.Linear(4, 1)
    model.share_memory()
    data = st.randn(32, 4)
    target = data @ st.tensor([[1.0], [-2.0], [0.5], [3.0]]) + 0.25
    before = ((model(data) - target) ** 2).mean().item()
    w0 = model.weight.detach().clone()
    smp.spawn(_hogwild_worker, args=(model, data, target, 40), nprocs=2, start_method="fork")
    after = ((model(data) - target) ** 2).mean().item()
    # Every worker's SGD steps landed in the parent's parameters (shared memory, no copy back).
    assert not bool((model.weight == w0).all())
    assert after < 0.5 * before
