"""DataLoader with worker processes (num_workers > 0), against torch.utils.data: batch order, WorkerInfo and
worker_init_fn, per-worker seeds, IterableDataset sharding, worker exceptions, persistent workers, timeout,
shared-memory tensors and shutdown (no processes or /dev/shm files left behind)."""

import gc
import math
import multiprocessing
import os
import random
import subprocess
import sys
import time

import numpy as np
import pytest

import strata as st
from strata.utils import data as sd

torch = pytest.importorskip("torch")
from torch.utils import data as td  # noqa: E402


@pytest.fixture(autouse=True)
def no_leftovers():
    yield
    gc.collect()
    # Every test's workers are gone once its iterators are (non-persistent ones at the end of the epoch).
    deadline = time.time() + 10
    while multiprocessing.active_children() and time.time() < deadline:
        time.sleep(0.05)
    assert multiprocessing.active_children() == []
    assert [n for n in os.listdir("/dev/shm") if n.startswith(f"strata_dl_{os.getpid()}_")] == []


def batches(loader):
    out = []
    for b in loader:
        if isinstance(b, (list, tuple)):
            out.append([x.tolist() if hasattr(x, "tolist") else x for x in b])
        else:
            out.append(b.tolist() if hasattr(b, "tolist") else b)
    return out


def test_map_order_equals_in_process():
    ds = sd.TensorDataset(st.arange(46.0).reshape(23, 2), st.arange(23))
    for kw in (dict(batch_size=4), dict(batch_size=5, drop_last=True), dict(batch_size=None),
               dict(batch_size=3, collate_fn=lambda b: sum(int(x[1]) for x in b)),
               dict(batch_size=2, num_workers=2, prefetch_factor=1), dict(batch_size=6, in_order=False)):
        kw = dict(kw)
        workers = kw.pop("num_workers", 2)
        in_order = kw.get("in_order", True)
        st.manual_seed(7)
        ref = batches(sd.DataLoader(ds, shuffle=True, **{k: v for k, v in kw.items()
                                                        if k not in ("prefetch_factor", "in_order")}))
        after_ref = st.rand(3).tolist()
        st.manual_seed(7)
        got = batches(sd.DataLoader(ds, shuffle=True, num_workers=workers, **kw))
        # The main process draws exactly what it draws without workers (base seed, then the sampler's seed).
        assert st.rand(3).tolist() == after_ref
        if in_order:
            assert got == ref
        else:
            assert sorted(map(repr, got)) == sorted(map(repr, ref))


def test_same_batches_as_torch():
    st.manual_seed(3)
    torch.manual_seed(3)
    data = np.arange(30, dtype=np.float32)
    s = batches(sd.DataLoader(sd.TensorDataset(st.tensor(data)), batch_size=4, shuffle=True, num_workers=2))
    t = batches(td.DataLoader(td.TensorDataset(torch.tensor(data)), batch_size=4, shuffle=True, num_workers=2))
    assert s == t
    assert st.rand(4).tolist() == pytest.approx(torch.rand(4).tolist())


class Probe(sd.Dataset):
    """Each sample says which worker loaded it and what that worker's generators give."""

    def __init__(self, mod, n=8):
        self.mod, self.n = mod, n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        info = self.mod.utils.data.get_worker_info()
        return (i, info.id, info.num_workers, info.seed, self.mod.initial_seed(), random.random(),
                float(np.random.rand()), float(self.mod.rand(()).item()), info.dataset is self, _init_mark)


_init_mark = None


def _mark(worker_id):
    global _init_mark
    _init_mark = ("init", worker_id, sd.get_worker_info().id, torch.utils.data.get_worker_info() is None)


def _mark_torch(worker_id):
    global _init_mark
    _init_mark = ("init", worker_id, td.get_worker_info().id, True)


def test_worker_info_init_fn_and_seeds_match_torch():
    assert sd.get_worker_info() is None
    ident = lambda b: b  # noqa: E731
    st.manual_seed(1234)
    s = list(sd.DataLoader(Probe(st), batch_size=None, num_workers=2, worker_init_fn=_mark, collate_fn=ident))
    torch.manual_seed(1234)
    t = list(td.DataLoader(Probe(torch), batch_size=None, num_workers=2, worker_init_fn=_mark_torch,
                           collate_fn=ident))
    assert [x[0] for x in s] == list(range(8))
    for a, b in zip(s, t):
        i, wid, nw, seed, init_seed, py, npy, rnd, same_ds, mark = a
        assert (wid, nw) == (i % 2, 2) and same_ds == b[8]
        assert mark == ("init", wid, wid, True)
        assert seed == init_seed
        # Same base seed, same per-worker seed, same Python / NumPy / strata streams as torch's workers.
        assert a[1:7] == b[1:7]
        assert rnd == pytest.approx(b[7])
    # Seeds differ between workers and between epochs (a new base seed per iterator).
    assert s[0][3] != s[1][3]
    again = list(sd.DataLoader(Probe(st), batch_size=None, num_workers=2, collate_fn=ident))
    assert again[0][3] != s[0][3]
    # The loader's generator, not the global one, gives the base seed when there is one.
    g = [list(sd.DataLoader(Probe(st), batch_size=None, num_workers=2, collate_fn=ident,
                            generator=st.Generator().manual_seed(5)))[0][3] for _ in range(2)]
    assert g[0] == g[1]


class Shard(sd.IterableDataset):
    """The documented way to split an iterable dataset between workers."""

    def __init__(self, start, end):
        self.start, self.end = start, end

    def __iter__(self):
        info = sd.get_worker_info()
        if info is None:
            return iter(range(self.start, self.end))
        per = int(math.ceil((self.end - self.start) / info.num_workers))
        lo = self.start + info.id * per
        return iter(range(lo, min(lo + per, self.end)))


class TorchShard(td.IterableDataset):
    def __init__(self, start, end):
        self.start, self.end = start, end

    def __iter__(self):
        info = td.get_worker_info()
        per = int(math.ceil((self.end - self.start) / info.num_workers))
        lo = self.start + info.id * per
        return iter(range(lo, min(lo + per, self.end)))


def test_iterable_dataset_sharding_matches_torch():
    for kw in (dict(batch_size=None), dict(batch_size=2), dict(batch_size=3, drop_last=True),
               dict(batch_size=4, persistent_workers=True)):
        s = sd.DataLoader(Shard(3, 20), num_workers=2, **kw)
        t = td.DataLoader(TorchShard(3, 20), num_workers=2, **kw)
        for _ in range(2 if kw.get("persistent_workers") else 1):
            assert batches(s) == batches(t)
        del s
    # Without sharding each worker yields the whole dataset.
    assert sorted(sd.DataLoader(sd.ChainDataset([Plain()]), batch_size=None, num_workers=2)) == [0, 0, 1, 1, 2, 2]


class Plain(sd.IterableDataset):
    def __iter__(self):
        return iter(range(3))


class Failing(sd.Dataset):
    def __init__(self, exc, at):
        self.exc, self.at = exc, at

    def __len__(self):
        return 6

    def __getitem__(self, i):
        if i == self.at:
            raise self.exc(f"bad sample {i}")
        return i


def test_worker_exception_reraised_with_worker_id_and_traceback():
    for exc in (ValueError, KeyError, IndexError):
        loader = sd.DataLoader(Failing(exc, 3), batch_size=2, num_workers=2)
        it = iter(loader)
        assert next(it).tolist() == [0, 1]
        with pytest.raises(exc) as e:
            next(it)
        msg = str(e.value)
        assert f"Caught {exc.__name__} in DataLoader worker process 1." in msg
        assert "Original Traceback (most recent call last):" in msg and "bad sample 3" in msg
        assert "__getitem__" in msg
        del it
    with pytest.raises(ZeroDivisionError, match="in DataLoader worker process 0"):
        list(sd.DataLoader(range(4), num_workers=2, worker_init_fn=lambda w: 1 / 0))


class Dies(sd.Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        if i == 2:
            os._exit(3)
        return i


def test_worker_killed_is_reported():
    with pytest.raises(RuntimeError, match=r"DataLoader worker \(pid\(s\) \d+\) exited unexpectedly"):
        list(sd.DataLoader(Dies(), num_workers=2, timeout=0))


class Pid(sd.Dataset):
    def __len__(self):
        return 6

    def __getitem__(self, i):
        return (i, os.getpid())


def test_persistent_workers_kept_across_epochs():
    st.manual_seed(0)
    loader = sd.DataLoader(Pid(), batch_size=2, num_workers=2, persistent_workers=True, shuffle=True,
                           collate_fn=lambda b: b)
    epochs = [list(loader) for _ in range(3)]
    pids = [{p for b in e for _, p in b} for e in epochs]
    assert pids[0] == pids[1] == pids[2] and len(pids[0]) == 2 and os.getpid() not in pids[0]
    for e in epochs:
        assert sorted(i for b in e for i, _ in b) == list(range(6))
    # Breaking out of an epoch leaves nothing stale for the next one.
    it = iter(loader)
    next(it)
    assert sorted(i for b in loader for i, _ in b) == list(range(6))
    # Without persistent workers every epoch starts new processes.
    plain = sd.DataLoader(Pid(), batch_size=3, num_workers=2, collate_fn=lambda b: b)
    assert {p for b in plain for _, p in b}.isdisjoint({p for b in plain for _, p in b})
    del loader, it
    # Later epochs of persistent workers draw no new base seed: the global stream advances as torch's does.
    st.manual_seed(11)
    torch.manual_seed(11)
    sl = sd.DataLoader(list(range(10)), batch_size=3, shuffle=True, num_workers=2, persistent_workers=True)
    tl = td.DataLoader(list(range(10)), batch_size=3, shuffle=True, num_workers=2, persistent_workers=True)
    for _ in range(3):
        assert batches(sl) == batches(tl)
    assert st.rand(3).tolist() == pytest.approx(torch.rand(3).tolist())
    del sl, tl


class Slow(sd.Dataset):
    def __len__(self):
        return 2

    def __getitem__(self, i):
        time.sleep(1.5)
        return i


def test_timeout():
    it = iter(sd.DataLoader(Slow(), num_workers=1, timeout=0.5))
    t0 = time.time()
    with pytest.raises(RuntimeError, match=r"DataLoader timed out after 0.5 seconds"):
        next(it)
    assert time.time() - t0 < 1.4
    del it


def test_partial_iteration_shuts_down_on_delete():
    it = iter(sd.DataLoader(range(100), batch_size=2, num_workers=2))
    next(it)
    procs = list(it._workers)
    assert all(p.is_alive() for p in procs)
    del it
    gc.collect()
    assert not any(p.is_alive() for p in procs)


def test_large_batches_through_shared_memory():
    x = st.randn(300, 3, 16, 16)
    y = st.arange(300)
    got = list(sd.DataLoader(sd.TensorDataset(x, y), batch_size=64, num_workers=2))
    assert st.equal(st.cat([b[0] for b in got]), x) and st.equal(st.cat([b[1] for b in got]), y)
    # The batches are ordinary writable tensors.
    got[0][0].add_(1)
    assert st.equal(got[0][0], x[:64] + 1)


def test_shared_memory_dtypes_and_layouts(monkeypatch):
    from strata.utils.data import _worker

    monkeypatch.setattr(_worker, "_SHM_MIN_BYTES", 1)  # every tensor through /dev/shm (forked workers see it)
    for dt in (st.float32, st.float64, st.int64, st.bool, st.bfloat16, st.float16, st.uint8, st.int8):
        x = (st.randn(10, 3) * 5).to(dt)
        c = st.cat([b[0] for b in sd.DataLoader(sd.TensorDataset(x), batch_size=4, num_workers=2)])
        assert c.dtype == dt and st.equal(c, x)
    x = st.randn(6, 4).t()
    w = st.randn(3, requires_grad=True)
    got = list(sd.DataLoader([x, x[1:], x[:, 0], st.zeros(0, 3), w], batch_size=None, num_workers=2))
    assert st.equal(got[0], x) and st.equal(got[1], x[1:]) and st.equal(got[2], x[:, 0])
    assert got[3].shape == (0, 3) and got[4].requires_grad and st.equal(got[4].detach(), w.detach())


def _raise_local(i):
    class Local(Exception):
        pass

    raise Local(f"local failure {i}")


def test_unpicklable_exception_type_still_reported():
    with pytest.raises(RuntimeError, match=r"Caught Local in DataLoader worker process 0(.|\n)*local failure 0"):
        list(sd.DataLoader(range(4), num_workers=2, collate_fn=_raise_local, batch_size=None))


def test_spawn_context_and_context_errors():
    ds = sd.TensorDataset(st.arange(10.0))
    got = batches(sd.DataLoader(ds, batch_size=4, num_workers=2, multiprocessing_context="spawn"))
    assert got == [[[0.0, 1.0, 2.0, 3.0]], [[4.0, 5.0, 6.0, 7.0]], [[8.0, 9.0]]]
    tds = td.TensorDataset(torch.arange(10.0))
    for kw, exc in ((dict(num_workers=2, multiprocessing_context="nope"), ValueError),
                    (dict(multiprocessing_context="fork"), ValueError),
                    (dict(num_workers=2, multiprocessing_context=3), TypeError),
                    (dict(num_workers=2, prefetch_factor=-1), ValueError)):
        with pytest.raises(exc) as es:
            sd.DataLoader(ds, **kw)
        with pytest.raises(exc) as et:
            td.DataLoader(tds, **kw)
        assert str(es.value).split(",")[0] == str(et.value).split(",")[0]


def test_interpreter_exit_with_live_workers():
    script = (
        "import os, strata as st\n"
        "from strata.utils.data import DataLoader, TensorDataset\n"
        "ds = TensorDataset(st.randn(400, 1024))\n"
        "keep = DataLoader(ds, batch_size=64, num_workers=2, persistent_workers=True)\n"
        "list(keep); it = iter(keep); next(it)\n"
        "half = iter(DataLoader(ds, batch_size=64, num_workers=2)); next(half)\n"
        "print(os.getpid(), *[w.pid for w in it._workers + half._workers])\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    t0 = time.time()
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30, env=env)
    assert r.returncode == 0, r.stderr
    assert time.time() - t0 < 20 and "Error" not in r.stderr
    main, *workers = map(int, r.stdout.split())
    for pid in workers:
        assert not os.path.exists(f"/proc/{pid}") or "Z" not in open(f"/proc/{pid}/stat").read().split()[2]
    assert [n for n in os.listdir("/dev/shm") if n.startswith(f"strata_dl_{main}_")] == []


def test_forked_workers_inherit_numpy_random():
    """Each worker seeds NumPy's global generator, and the first np.random use imports numpy.random (tens of
    ms, on the way to the first batch of every epoch). With the fork start method the main process imports it
    once before starting workers, so forked workers inherit it; the seeding itself is unchanged (NumPy draws
    in workers still match torch's, test_worker_info_init_fn_and_seeds_match_torch)."""
    script = (
        "import sys, strata as st\n"
        "from strata.utils.data import DataLoader, TensorDataset\n"
        "assert 'numpy.random' not in sys.modules, 'imported by strata itself'\n"
        "dl = DataLoader(TensorDataset(st.arange(8.0)), batch_size=4, num_workers=1,\n"
        "                multiprocessing_context='fork')\n"
        "assert [b[0].tolist() for b in dl] == [[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0]]\n"
        "print('numpy.random' in sys.modules)\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True"]


class SlowLast(sd.Dataset):
    """The last item takes longer than the main process's poll interval (1 s)."""

    def __len__(self):
        return 6

    def __getitem__(self, i):
        if i == 5:
            time.sleep(1.3)
        return i


def test_workers_leave_after_their_last_task():
    """Once the sampler is exhausted each worker is told to stop behind its last task, so it exits while the last
    batches are consumed (the epoch's end does not wait for it). A worker that has left that way is not a dead
    worker: the main process, polling for the slow last batch, must not report it."""
    it = iter(sd.DataLoader(SlowLast(), batch_size=1, num_workers=2))
    assert [b.item() for b in it] == [0, 1, 2, 3, 4, 5]
    it = iter(sd.DataLoader(SlowLast(), batch_size=1, num_workers=2))
    assert [next(it).item() for _ in range(5)] == [0, 1, 2, 3, 4]
    it._workers[0].join(timeout=10)  # worker 0's tasks were 0, 2, 4: it leaves before the epoch ends
    assert it._workers[0].exitcode == 0 and it._workers[1].is_alive()
    assert next(it).item() == 5
    with pytest.raises(StopIteration):
        next(it)
