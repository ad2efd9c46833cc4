"""strata.utils.data against torch.utils.data: datasets, samplers, DataLoader batching (drop_last, batch_size=None,
iterable datasets), seeded shuffling, default_collate on every container kind, and argument errors."""

import collections

import numpy as np
import pytest

import strata as st
from strata.utils.data import (DataLoader, Dataset, IterableDataset, TensorDataset, ConcatDataset, Subset,
                               random_split, default_collate, default_convert, Sampler, SequentialSampler,
                               RandomSampler, BatchSampler, SubsetRandomSampler)

torch = pytest.importorskip("torch")
tud = torch.utils.data


def to_py(x):
    """A comparable plain form of a (possibly nested) batch from either library."""
    if isinstance(x, (st.Tensor, torch.Tensor)):
        arr = x.numpy() if isinstance(x, st.Tensor) else x.detach().numpy()
        return ("T", str(arr.dtype), arr.shape, arr.tolist())
    if isinstance(x, dict):
        return ("D", type(x).__name__, {k: to_py(v) for k, v in x.items()})
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return ("N", type(x).__name__, tuple(to_py(v) for v in x))
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [to_py(v) for v in x])
    return x


class Squares(Dataset):
    def __init__(self, n):
        self.n = n

    def __getitem__(self, i):
        if not 0 <= i < self.n:
            raise IndexError(i)
        return {"x": float(i), "y": i * i, "arr": np.full(2, i, dtype=np.float32)}

    def __len__(self):
        return self.n


class TorchSquares(Squares, tud.Dataset):
    pass


class Stream(IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter((i, float(i) / 2) for i in range(self.n))

    def __len__(self):
        return self.n


class TorchStream(tud.IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter((i, float(i) / 2) for i in range(self.n))

    def __len__(self):
        return self.n


@pytest.mark.parametrize("batch_size,drop_last", [(1, False), (3, False), (3, True), (10, False), (10, True),
                                                  (4, True)])
@pytest.mark.parametrize("n", [0, 7, 10])
def test_map_batching_matches_torch(n, batch_size, drop_last):
    sl = DataLoader(Squares(n), batch_size=batch_size, drop_last=drop_last)
    tl = tud.DataLoader(TorchSquares(n), batch_size=batch_size, drop_last=drop_last)
    assert len(sl) == len(tl)
    assert [to_py(b) for b in sl] == [to_py(b) for b in tl]


def test_batch_size_none_converts_single_samples():
    sl = DataLoader(Squares(3), batch_size=None)
    tl = tud.DataLoader(TorchSquares(3), batch_size=None)
    assert len(sl) == 3
    assert [to_py(b) for b in sl] == [to_py(b) for b in tl]


@pytest.mark.parametrize("batch_size,drop_last", [(None, False), (2, False), (2, True), (4, False)])
def test_iterable_dataset_matches_torch(batch_size, drop_last):
    sl = DataLoader(Stream(7), batch_size=batch_size, drop_last=drop_last)
    tl = tud.DataLoader(TorchStream(7), batch_size=batch_size, drop_last=drop_last)
    assert len(sl) == len(tl)
    assert [to_py(b) for b in sl] == [to_py(b) for b in tl]


def test_tensor_dataset_loader():
    x = st.arange(20, dtype=st.float32).reshape(10, 2)
    y = st.arange(10)
    ds = TensorDataset(x, y)
    assert len(ds) == 10
    xi, yi = ds[3]
    assert xi.tolist() == [6.0, 7.0] and yi.item() == 3
    batches = list(DataLoader(ds, batch_size=4))
    assert [type(b) for b in batches] == [list] * 3  # tuples collate to lists, as in torch
    assert [b[0].shape for b in batches] == [st.Size([4, 2]), st.Size([4, 2]), st.Size([2, 2])]
    np.testing.assert_array_equal(np.concatenate([b[1].numpy() for b in batches]), np.arange(10))
    with pytest.raises(ValueError, match="Size mismatch between tensors"):
        TensorDataset(st.zeros(3), st.zeros(4))


def test_shuffle_is_a_permutation_and_deterministic_with_seeded_generator():
    ds = TensorDataset(st.arange(50))

    def order(seed):
        g = st.Generator().manual_seed(seed)
        return [int(v) for b in DataLoader(ds, batch_size=8, shuffle=True, generator=g) for v in b[0].tolist()]

    a, b, c = order(0), order(0), order(1)
    assert a == b
    assert a != c
    assert sorted(a) == list(range(50))
    assert a != list(range(50))
    # As torch: the iterator first draws a base seed (one int64) from the generator, then
    # the sampler draws a randperm from it.
    g = st.Generator().manual_seed(0)
    st.empty((), dtype=st.int64).random_(generator=g)
    assert a == st.randperm(50, generator=g).tolist()


def test_shuffle_epochs_differ_and_global_rng_is_used_without_generator():
    ds = TensorDataset(st.arange(30))
    g = st.Generator().manual_seed(3)
    loader = DataLoader(ds, batch_size=30, shuffle=True, generator=g)
    first, second = next(iter(loader))[0].tolist(), next(iter(loader))[0].tolist()
    assert first != second  # the generator advances between epochs

    st.manual_seed(123)
    one = next(iter(DataLoader(ds, batch_size=30, shuffle=True)))[0].tolist()
    st.manual_seed(123)
    two = next(iter(DataLoader(ds, batch_size=30, shuffle=True)))[0].tolist()
    assert one == two and sorted(one) == list(range(30))


def test_samplers():
    assert list(SequentialSampler(range(4))) == [0, 1, 2, 3]
    g = st.Generator().manual_seed(5)
    rs = RandomSampler(range(6), generator=g)
    assert len(rs) == 6 and sorted(rs) == list(range(6))
    more = list(RandomSampler(range(4), num_samples=10, generator=g))
    assert len(more) == 10 and sorted(more[:4]) == [0, 1, 2, 3] and sorted(more[4:8]) == [0, 1, 2, 3]
    rep = list(RandomSampler(range(3), replacement=True, num_samples=70, generator=g))
    assert len(rep) == 70 and set(rep) <= {0, 1, 2}
    assert sorted(SubsetRandomSampler([5, 9, 11], generator=g)) == [5, 9, 11]
    assert list(BatchSampler(range(7), 3, False)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(BatchSampler(range(7), 3, True)) == [[0, 1, 2], [3, 4, 5]]
    assert len(BatchSampler(range(7), 3, False)) == 3 and len(BatchSampler(range(7), 3, True)) == 2
    with pytest.raises(ValueError, match="batch_size should be a positive integer"):
        BatchSampler(range(3), 0, False)
    with pytest.raises(ValueError, match="num_samples should be a positive integer"):
        RandomSampler(range(3), num_samples=0)


def test_custom_sampler_and_batch_sampler():
    class Reverse(Sampler):
        def __init__(self, n):
            self.n = n

        def __iter__(self):
            return iter(range(self.n - 1, -1, -1))

        def __len__(self):
            return self.n

    ds = TensorDataset(st.arange(5))
    assert [b[0].tolist() for b in DataLoader(ds, batch_size=2, sampler=Reverse(5))] == [[4, 3], [2, 1], [0]]
    bs = [[0, 4], [1, 2, 3]]
    loader = DataLoader(ds, batch_sampler=bs)
    assert len(loader) == 2
    assert [b[0].tolist() for b in loader] == [[0, 4], [1, 2, 3]]


def test_custom_collate_fn_and_num_workers_in_process():
    loader = DataLoader(list(range(5)), batch_size=2, collate_fn=lambda b: sum(b), num_workers=2)
    assert list(loader) == [1, 5, 4]


Point = collections.namedtuple("Point", ["x", "y"])


@pytest.mark.parametrize("batch", [
    [(1, 2.0, "a"), (3, 4.0, "b")],
    [[1, 2], [3, 4]],
    [{"a": 1, "b": [1.5, 2.5]}, {"a": 2, "b": [3.5, 4.5]}],
    [Point(1, 2.0), Point(3, 4.0)],
    [np.array([1, 2], dtype=np.int32), np.array([3, 4], dtype=np.int32)],
    [np.float32(1.5), np.float32(2.5)],
    [np.int64(1), np.int64(7)],
    [True, False],
    [{"nested": (np.zeros((2, 2)), {"k": 3})}, {"nested": (np.ones((2, 2)), {"k": 4})}],
    [collections.OrderedDict(b=1, a=2.0), collections.OrderedDict(b=3, a=4.0)],
    ["s1", "s2"],
])
def test_default_collate_matches_torch(batch):
    assert to_py(default_collate(batch)) == to_py(tud.default_collate(batch))


def test_default_collate_tensors():
    batch = [st.tensor([1.0, 2.0]), st.tensor([3.0, 4.0])]
    out = default_collate(batch)
    assert out.shape == st.Size([2, 2]) and out.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    pairs = [(st.tensor(1), {"m": st.zeros(3)}), (st.tensor(2), {"m": st.ones(3)})]
    out = default_collate(pairs)
    assert out[0].tolist() == [1, 2] and out[1]["m"].shape == st.Size([2, 3])


def test_default_collate_errors():
    with pytest.raises(RuntimeError, match="each element in list of batch should be of equal size"):
        default_collate([[1, 2], [3]])
    with pytest.raises(TypeError, match="default_collate: batch must contain"):
        default_collate([object(), object()])
    with pytest.raises(TypeError, match="default_collate: batch must contain"):
        default_collate([np.array(["a"]), np.array(["b"])])


def test_default_convert():
    assert to_py(default_convert({"a": np.arange(3), "b": (np.float64(1.0), "s")})) == \
        to_py(tud.default_convert({"a": np.arange(3), "b": (np.float64(1.0), "s")}))


def test_subset_concat_and_random_split():
    ds = TensorDataset(st.arange(10))
    sub = Subset(ds, [1, 3, 5])
    assert len(sub) == 3 and sub[1][0].item() == 3
    cat = ConcatDataset([sub, Subset(ds, [0])])
    assert len(cat) == 4 and cat[3][0].item() == 0 and cat[-1][0].item() == 0
    both = sub + sub
    assert len(both) == 6

    parts = random_split(ds, [3, 7], generator=st.Generator().manual_seed(0))
    assert [len(p) for p in parts] == [3, 7]
    got = sorted(parts[0].indices + parts[1].indices)
    assert got == list(range(10))
    again = random_split(ds, [3, 7], generator=st.Generator().manual_seed(0))
    assert again[0].indices == parts[0].indices
    # Fractions: floor each, then deal the remainder round-robin (torch: 11 * [0.5, 0.3, 0.2] -> 6, 3, 2).
    frac = random_split(TensorDataset(st.arange(11)), [0.5, 0.3, 0.2], generator=st.Generator().manual_seed(1))
    tfrac = tud.random_split(range(11), [0.5, 0.3, 0.2], generator=torch.Generator().manual_seed(1))
    assert [len(p) for p in frac] == [len(p) for p in tfrac]
    with pytest.raises(ValueError, match="Sum of input lengths does not equal"):
        random_split(ds, [3, 3])


def test_dataloader_argument_errors():
    ds = TensorDataset(st.arange(4))
    with pytest.raises(ValueError, match="sampler option is mutually exclusive with shuffle"):
        DataLoader(ds, shuffle=True, sampler=SequentialSampler(ds))
    with pytest.raises(ValueError, match="batch_sampler option is mutually exclusive"):
        DataLoader(ds, batch_size=2, batch_sampler=[[0, 1]])
    with pytest.raises(ValueError, match="mutually exclusive with drop_last"):
        DataLoader(ds, batch_size=None, drop_last=True)
    with pytest.raises(ValueError, match="num_workers option should be non-negative"):
        DataLoader(ds, num_workers=-1)
    with pytest.raises(ValueError, match="expected unspecified shuffle option"):
        DataLoader(Stream(3), shuffle=True)
    with pytest.raises(ValueError, match="expected unspecified sampler option"):
        DataLoader(Stream(3), sampler=SequentialSampler(range(3)))
    with pytest.raises(NotImplementedError, match="should implement __getitem__"):
        Dataset()[0]
