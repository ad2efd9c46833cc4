"""Map-style and iterable datasets, and the ways to combine and split them (torch.utils.data.dataset)."""

import bisect
import math
import warnings
from itertools import accumulate

from ... import _C

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "ConcatDataset", "Subset", "random_split"]


class Dataset:
    """A map-style dataset: subclasses implement ``__getitem__(index)`` and usually ``__len__``."""

    def __getitem__(self, index):
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A dataset that is a stream: subclasses implement ``__iter__``; samplers do not apply."""

    def __iter__(self):
        raise NotImplementedError("Subclasses of IterableDataset should implement __iter__.")

    def __add__(self, other):
        from ._more import ChainDataset

        return ChainDataset([self, other])


class TensorDataset(Dataset):
    """Sample ``i`` is ``tuple(t[i] for t in tensors)``; all tensors share their first dimension."""

    def __init__(self, *tensors):
        if len(tensors) == 0:
            raise ValueError("TensorDataset: expected at least one tensor")
        for t in tensors:
            if not isinstance(t, _C.Tensor):
                raise TypeError(f"TensorDataset: expected Tensors, but got {type(t).__name__}")
            if t.dim() == 0:
                raise ValueError("TensorDataset: tensors must have at least one dimension")
        if any(tensors[0].size(0) != t.size(0) for t in tensors):
            raise ValueError("Size mismatch between tensors: TensorDataset needs every tensor to have the same "
                             f"first dimension, got {[t.size(0) for t in tensors]}")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].size(0)


class ConcatDataset(Dataset):
    """The concatenation of several map-style datasets."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if len(self.datasets) == 0:
            raise ValueError("datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise TypeError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = list(accumulate(len(d) for d in self.datasets))

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx = len(self) + idx
        d = bisect.bisect_right(self.cumulative_sizes, idx)
        if d >= len(self.datasets):
            raise IndexError(f"ConcatDataset index {idx} is out of range for length {len(self)}")
        start = self.cumulative_sizes[d - 1] if d > 0 else 0
        return self.datasets[d][idx - start]


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices):
        return [self.dataset[self.indices[i]] for i in indices]

    def __len__(self):
        return len(self.indices)


def random_split(dataset, lengths, generator=None):
    """Splits ``dataset`` into non-overlapping random Subsets of the given lengths.

    ``lengths`` may be fractions summing to 1: each part gets ``floor(frac * len)`` and the remainder
    is dealt one by one, round-robin from the first part, as torch does. The permutation comes from
    ``generator`` (strata's global generator when None)."""
    from ..._creation import randperm

    lengths = list(lengths)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        n = len(dataset)
        subset_lengths = []
        for i, frac in enumerate(lengths):
            if frac < 0 or frac > 1:
                raise ValueError(f"Fraction at index {i} is not between 0 and 1")
            subset_lengths.append(int(math.floor(n * frac)))
        remainder = n - sum(subset_lengths)
        for i in range(remainder):
            subset_lengths[i % len(subset_lengths)] += 1
        lengths = subset_lengths
        for i, length in enumerate(lengths):
            if length == 0:
                warnings.warn(f"Length of split at index {i} is 0. This might result in an empty dataset.",
                              stacklevel=2)
    if sum(lengths) != len(dataset):
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    indices = randperm(sum(lengths), generator=generator).tolist()
    return [Subset(dataset, indices[offset - length:offset]) for offset, length in zip(accumulate(lengths), lengths)]
