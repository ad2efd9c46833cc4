"""strata.utils.data's samplers and datasets beyond the basics, against
torch.utils.data: WeightedRandomSampler, DistributedSampler, ChainDataset,
StackDataset, get_worker_info, random_split fractions, default_collate and
the DataLoader arguments scripts pass."""

import collections

import numpy as np
import pytest

import strata as st
from strata.utils import data as sd

torch = pytest.importorskip("torch")
from torch.utils import data as td  # noqa: E402


def both_raise(fs, ft, exc):
    with pytest.raises(exc) as es:
        fs()
    with pytest.raises(exc) as et:
        ft()
    return str(es.value), str(et.value)


def test_weighted_random_sampler():
    w = [0.0, 1.0, 3.0, 0.0, 6.0]
    s = sd.WeightedRandomSampler(w, 2000, generator=st.Generator().manual_seed(3))
    idx = list(s)
    assert len(s) == len(td.WeightedRandomSampler(w, 2000)) == 2000 and len(idx) == 2000
    counts = np.bincount(idx, minlength=5) / 2000
    assert counts[0] == counts[3] == 0
    np.testing.assert_allclose(counts[[1, 2, 4]], [0.1, 0.3, 0.6], atol=0.05)
    # Reproducible from the generator; without replacement every index is distinct.
    again = list(sd.WeightedRandomSampler(w, 2000, generator=st.Generator().manual_seed(3)))
    assert idx == again
    nr = list(sd.WeightedRandomSampler(st.tensor([1.0, 2.0, 3.0, 4.0]), 4, replacement=False))
    assert sorted(nr) == [0, 1, 2, 3]
    for args in ((w, 0), (w, 2.5), (w, 3, 1)):
        both_raise(lambda: sd.WeightedRandomSampler(*args), lambda: td.WeightedRandomSampler(*args), ValueError)
    both_raise(lambda: sd.WeightedRandomSampler([[1.0, 2.0]], 2), lambda: td.WeightedRandomSampler([[1.0, 2.0]], 2),
               ValueError)
    loader = sd.DataLoader(sd.TensorDataset(st.arange(5)), batch_size=4, sampler=sd.WeightedRandomSampler(w, 8))
    assert [b[0].shape[0] for b in loader] == [4, 4]


@pytest.mark.parametrize("n,replicas,drop_last", [(10, 3, False), (10, 3, True), (9, 3, False), (2, 4, False),
                                                  (11, 4, True)])
def test_distributed_sampler_matches_torch_unshuffled(n, replicas, drop_last):
    for rank in range(replicas):
        s = sd.DistributedSampler(range(n), num_replicas=replicas, rank=rank, shuffle=False, drop_last=drop_last)
        t = td.DistributedSampler(range(n), num_replicas=replicas, rank=rank, shuffle=False, drop_last=drop_last)
        assert list(s) == list(t) and len(s) == len(t)


def test_distributed_sampler_shuffle():
    n, replicas = 23, 4
    parts = [list(sd.DistributedSampler(range(n), num_replicas=replicas, rank=r, seed=5)) for r in range(replicas)]
    flat = [i for p in parts for i in p]
    assert len(flat) == 24 and set(flat) == set(range(n))  # padded by one repeat
    again = list(sd.DistributedSampler(range(n), num_replicas=replicas, rank=0, seed=5))
    assert again == parts[0]
    s = sd.DistributedSampler(range(n), num_replicas=replicas, rank=0, seed=5)
    s.set_epoch(1)
    assert list(s) != parts[0] and s.epoch == 1
    # Every replica's share, for a drop_last shuffle, is disjoint.
    dl = [set(sd.DistributedSampler(range(n), num_replicas=replicas, rank=r, drop_last=True)) for r in range(4)]
    assert sum(len(p) for p in dl) == 20 and len(set().union(*dl)) == 20
    both_raise(lambda: sd.DistributedSampler(range(4), num_replicas=2, rank=2),
               lambda: td.DistributedSampler(range(4), num_replicas=2, rank=2), ValueError)
    ms, mt = both_raise(lambda: sd.DistributedSampler(range(4)), lambda: td.DistributedSampler(range(4)), ValueError)
    assert "process group has not been initialized" in ms and "process group has not been initialized" in mt
    from strata.utils.data.distributed import DistributedSampler

    assert DistributedSampler is sd.DistributedSampler


class Counting(sd.IterableDataset):
    def __init__(self, lo, hi):
        self.lo, self.hi = lo, hi

    def __iter__(self):
        return iter(range(self.lo, self.hi))

    def __len__(self):
        return self.hi - self.lo


class TCounting(td.IterableDataset):
    def __init__(self, lo, hi):
        self.lo, self.hi = lo, hi

    def __iter__(self):
        return iter(range(self.lo, self.hi))

    def __len__(self):
        return self.hi - self.lo


def test_chain_dataset():
    s = sd.ChainDataset([Counting(0, 3), Counting(10, 12)])
    t = td.ChainDataset([TCounting(0, 3), TCounting(10, 12)])
    assert list(s) == list(t) and len(s) == len(t)
    assert [b.tolist() for b in sd.DataLoader(s, batch_size=2)] == [b.tolist() for b in td.DataLoader(t, batch_size=2)]
    with pytest.raises(AssertionError):
        list(sd.ChainDataset([Counting(0, 2), [1, 2]]))
    with pytest.raises(AssertionError):
        list(td.ChainDataset([TCounting(0, 2), [1, 2]]))
    assert isinstance(Counting(0, 1) + Counting(1, 2), sd.ChainDataset)


def test_stack_dataset():
    a, b = list(range(4)), [x * 10 for x in range(4)]
    s, t = sd.StackDataset(a, b), td.StackDataset(a, b)
    assert len(s) == len(t) and [s[i] for i in range(4)] == [t[i] for i in range(4)]
    s, t = sd.StackDataset(x=a, y=b), td.StackDataset(x=a, y=b)
    assert [s[i] for i in range(4)] == [t[i] for i in range(4)]
    assert s.__getitems__([1, 3]) == t.__getitems__([1, 3])
    batch = next(iter(sd.DataLoader(s, batch_size=4)))
    assert batch["x"].tolist() == a and batch["y"].tolist() == b
    for args, kw in (((a, b[:3]), {}), ((), dict(x=a, y=b[:2])), ((a,), dict(y=b))):
        both_raise(lambda: sd.StackDataset(*args, **kw), lambda: td.StackDataset(*args, **kw), ValueError)


def test_get_worker_info_and_loader_options():
    assert sd.get_worker_info() is None and td.get_worker_info() is None
    ds = sd.TensorDataset(st.arange(6.0))
    seen = []
    loader = sd.DataLoader(ds, batch_size=2, pin_memory=True, num_workers=2, persistent_workers=True,
                           prefetch_factor=2, worker_init_fn=seen.append, generator=st.Generator().manual_seed(0),
                           shuffle=True)
    got = sorted(x for b in loader for x in b[0].tolist())
    assert got == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    first = [b[0].tolist() for b in sd.DataLoader(ds, batch_size=2, shuffle=True,
                                                  generator=st.Generator().manual_seed(1))]
    second = [b[0].tolist() for b in sd.DataLoader(ds, batch_size=2, shuffle=True,
                                                   generator=st.Generator().manual_seed(1))]
    assert first == second
    for kw in (dict(prefetch_factor=2), dict(persistent_workers=True)):
        both_raise(lambda: sd.DataLoader(ds, **kw), lambda: td.DataLoader(td.TensorDataset(torch.arange(6.0)), **kw),
                   ValueError)


def test_random_split_subset_concat():
    parts = sd.random_split(range(10), [0.5, 0.3, 0.2], generator=st.Generator().manual_seed(0))
    tparts = td.random_split(range(10), [0.5, 0.3, 0.2], generator=torch.Generator().manual_seed(0))
    assert [len(p) for p in parts] == [len(p) for p in tparts]
    assert sorted(i for p in parts for i in p) == list(range(10))
    parts = sd.random_split(range(7), [0.34, 0.33, 0.33])
    tparts = td.random_split(range(7), [0.34, 0.33, 0.33])
    assert [len(p) for p in parts] == [len(p) for p in tparts]
    both_raise(lambda: sd.random_split(range(5), [2, 2]), lambda: td.random_split(range(5), [2, 2]), ValueError)
    sub, tsub = sd.Subset(list("abcdef"), [4, 0, 2]), td.Subset(list("abcdef"), [4, 0, 2])
    assert [sub[i] for i in range(3)] == [tsub[i] for i in range(3)] and len(sub) == len(tsub)
    cat, tcat = sd.ConcatDataset([[1, 2], [3], [4, 5, 6]]), td.ConcatDataset([[1, 2], [3], [4, 5, 6]])
    assert len(cat) == len(tcat) and [cat[i] for i in range(-6, 6)] == [tcat[i] for i in range(-6, 6)]


Point = collections.namedtuple("Point", ["x", "y"])


def test_default_collate_structures():
    batch = [{"a": np.ones((2,), np.float32) * i, "n": Point(i, float(i)), "s": "w", "t": st.tensor([i, i])}
             for i in range(3)]
    tbatch = [{"a": np.ones((2,), np.float32) * i, "n": Point(i, float(i)), "s": "w", "t": torch.tensor([i, i])}
              for i in range(3)]
    s, t = sd.default_collate(batch), td.default_collate(tbatch)
    assert s["a"].tolist() == t["a"].tolist() and str(s["a"].dtype).split(".")[-1] == str(t["a"].dtype).split(".")[-1]
    assert isinstance(s["n"], Point) and s["n"].x.tolist() == t["n"].x.tolist()
    assert str(s["n"].x.dtype).split(".")[-1] == str(t["n"].x.dtype).split(".")[-1]
    assert str(s["n"].y.dtype).split(".")[-1] == str(t["n"].y.dtype).split(".")[-1]
    assert s["s"] == t["s"] and s["t"].tolist() == t["t"].tolist()
    for items in ([1, 2, 3], [1.5, 2.5], [True, False], [np.float64(1.0), np.float64(2.0)]):
        a, b = sd.default_collate(items), td.default_collate(items)
        assert a.tolist() == b.tolist() and str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
