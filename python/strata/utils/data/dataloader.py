"""strata.utils.data.DataLoader (torch.utils.data.DataLoader)."""

from .dataset import IterableDataset
from .sampler import Sampler, SequentialSampler, RandomSampler, BatchSampler, _draw_seed
from ._collate import default_collate, default_convert

__all__ = ["DataLoader"]


class DataLoader:
    """Iterates over ``dataset`` in batches.

    Map-style datasets are indexed through a sampler (sequential, or ``RandomSampler(dataset,
    generator=generator)`` when ``shuffle``; a shuffle without a generator draws from strata's global
    generator), grouped by a BatchSampler and merged by ``collate_fn`` (default_collate). With
    ``batch_size=None`` samples are yielded one at a time through default_convert. Iterable datasets
    are batched in the order they yield.

    ``num_workers > 0`` is accepted but loading always runs in the calling process: Strata has no
    worker processes yet, so ``worker_init_fn``, ``prefetch_factor``, ``persistent_workers`` and
    ``pin_memory`` only have their argument checks applied."""

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor=None, persistent_workers=False,
                 pin_memory_device="", in_order=True):
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable "
                             "multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing.let num_workers > 0 "
                             "to enable multiprocessing, otherwise set prefetch_factor to None.")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.persistent_workers = persistent_workers
        self.in_order = in_order

        self._is_iterable = isinstance(dataset, IterableDataset)
        if self._is_iterable:
            if shuffle not in (False, None):
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified shuffle option, but got "
                                 f"shuffle={shuffle}")
            if sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified sampler option, but got "
                                 f"sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified batch_sampler option, but "
                                 f"got batch_sampler={batch_sampler}")
        shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and "
                                 "drop_last")
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with drop_last")

        if sampler is None:
            if self._is_iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None

    def __iter__(self):
        # As torch: every iterator draws a base seed (for workers) from the loader's generator,
        # so the global stream after an epoch is the one torch leaves.
        self._base_seed = _draw_seed(self.generator)
        if self._is_iterable:
            return self._iter_iterable()
        return self._iter_map()

    def _fetch(self, indices):
        getitems = getattr(self.dataset, "__getitems__", None)
        if getitems is not None:
            return getitems(indices)
        return [self.dataset[i] for i in indices]

    def _iter_map(self):
        if self._auto_collation:
            for indices in self.batch_sampler:
                yield self.collate_fn(self._fetch(indices))
        else:
            for index in self.sampler:
                yield self.collate_fn(self.dataset[index])

    def _iter_iterable(self):
        if not self._auto_collation:
            for sample in self.dataset:
                yield self.collate_fn(sample)
            return
        batch = []
        for sample in self.dataset:
            batch.append(sample)
            if len(batch) == self.batch_size:
                yield self.collate_fn(batch)
                batch = []
        if batch and not self.drop_last:
            yield self.collate_fn(batch)

    def __len__(self):
        if self._is_iterable:
            length = len(self.dataset)
            if self.batch_size is not None:
                if self.drop_last:
                    return length // self.batch_size
                return -(-length // self.batch_size)
            return length
        if self._auto_collation:
            return len(self.batch_sampler)
        return len(self.sampler)


class _InfiniteConstantSampler(Sampler):
    """Placeholder sampler for iterable datasets (yields None forever, never indexed)."""

    def __iter__(self):
        while True:
            yield None
