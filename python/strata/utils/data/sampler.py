"""Samplers: iterables of dataset indices (or of index batches) for the DataLoader (torch.utils.data.sampler)."""

from ... import _C

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler", "BatchSampler"]


def _draw_seed(generator):
    """One int64 draw (random_() on a 0-d int64 tensor), as torch seeds loaders and samplers."""
    from ..._creation import empty

    return int(empty((), dtype=_C.int64).random_(generator=generator).item())


class Sampler:
    """Base class: subclasses implement ``__iter__`` (and ``__len__`` when the length is known)."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """A random permutation of the indices (or ``num_samples`` draws with replacement).

    Draws come from ``generator`` when given, otherwise from strata's global generator (so
    ``strata.manual_seed`` makes a shuffled DataLoader reproducible)."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got replacement={replacement}")
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={self.num_samples}")

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        from ..._creation import randperm, randint

        n = len(self.data_source)
        generator = self.generator
        if generator is None:
            # As torch: a private generator seeded from one draw of the global one.
            from ...random import Generator
            generator = Generator().manual_seed(_draw_seed(None))
        if self.replacement:
            for _ in range(self.num_samples // 32):
                yield from randint(high=n, size=(32,), dtype=_C.int64, generator=generator).tolist()
            yield from randint(high=n, size=(self.num_samples % 32,), dtype=_C.int64,
                               generator=generator).tolist()
        else:
            for _ in range(self.num_samples // n):
                yield from randperm(n, generator=generator).tolist()
            yield from randperm(n, generator=generator).tolist()[:self.num_samples % n]

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in a random order."""

    def __init__(self, indices, generator=None):
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        from ..._creation import randperm

        for i in randperm(len(self.indices), generator=self.generator).tolist():
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class BatchSampler(Sampler):
    """Groups the indices of ``sampler`` into lists of ``batch_size`` (the last one shorter unless ``drop_last``)."""

    def __init__(self, sampler, batch_size, drop_last):
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self):
        batch = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return (len(self.sampler) + self.batch_size - 1) // self.batch_size
