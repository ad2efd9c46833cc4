"""strata.utils.data.DataLoader (torch.utils.data.DataLoader)."""

import atexit
import itertools
import multiprocessing
import os
import queue
import weakref

from . import _worker
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

    With ``num_workers > 0`` batches are loaded by that many worker processes (multiprocessing's default
    start method, or ``multiprocessing_context``), ``prefetch_factor`` batches in flight per worker, and
    returned in sampler order (``in_order=True``). Each worker seeds strata, ``random`` and NumPy from
    ``base_seed + worker_id`` as torch does; ``get_worker_info()`` describes it and ``worker_init_fn``
    runs in it. ``pin_memory`` is accepted and does nothing (there is no accelerator to pin for)."""

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
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        elif prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self._multiprocessing_context = None
        self.multiprocessing_context = multiprocessing_context
        self._iterator = None
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
    def multiprocessing_context(self):
        return self._multiprocessing_context

    @multiprocessing_context.setter
    def multiprocessing_context(self, ctx):
        if ctx is not None:
            if self.num_workers <= 0:
                raise ValueError(f"multiprocessing_context can only be used with multi-process loading "
                                 f"(num_workers > 0), but got num_workers={self.num_workers}")
            if isinstance(ctx, str):
                valid = multiprocessing.get_all_start_methods()
                if ctx not in valid:
                    raise ValueError(f"multiprocessing_context option should specify a valid start method in "
                                     f"{valid!r}, but got multiprocessing_context={ctx!r}")
                ctx = multiprocessing.get_context(ctx)
            elif not isinstance(ctx, multiprocessing.context.BaseContext):
                raise TypeError(f"multiprocessing_context option should be a valid context object or a string "
                                f"specifying the start method, but got multiprocessing_context={ctx}")
        self._multiprocessing_context = ctx

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def __iter__(self):
        if self.num_workers > 0:
            if not self.persistent_workers:
                return _MultiProcessingIter(self)
            # Persistent workers: one iterator (and its processes) serves every epoch; later epochs draw no
            # new base seed, as torch's.
            if self._iterator is None or self._iterator._shutdown:
                # (A shut-down one, after a worker died, is replaced.)
                self._iterator = _MultiProcessingIter(self)
            else:
                self._iterator._reset(self)
            return self._iterator
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


class _MultiProcessingIter:
    """Batches from worker processes: task ``i`` (the i-th batch of indices) goes to a worker's index queue, results
    come back tagged with ``i`` on one result queue and are handed out in task order."""

    _tokens = itertools.count()

    def __init__(self, loader):
        self._shutdown = True  # until the workers exist, there is nothing to shut down
        # A forked worker holds a copy of this object: only the process that started the workers may stop them.
        self._owner_pid = os.getpid()
        self._dataset = loader.dataset
        self._is_iterable = loader._is_iterable
        self._index_sampler = loader._index_sampler
        self._num_workers = loader.num_workers
        self._prefetch_factor = loader.prefetch_factor
        self._in_order = loader.in_order
        self._timeout = loader.timeout
        self._persistent_workers = loader.persistent_workers
        # The same draws as torch's iterator, in the same order: the base seed now, the sampler's own seed when
        # the first batch of indices is taken below.
        self._base_seed = _draw_seed(loader.generator)
        ctx = loader.multiprocessing_context or multiprocessing.get_context()
        if ctx.get_start_method() == "fork":
            # Every worker seeds NumPy's global generator, and the first use of np.random imports numpy.random
            # (~30 ms). Imported here once, forked workers inherit it instead of each importing it again on the
            # way to its first batch, every epoch.
            import numpy.random  # noqa: F401
        self._shm_prefix = _worker.shm_prefix(next(self._tokens))
        self._result_queue = ctx.Queue()
        self._done_event = ctx.Event()
        self._index_queues = []
        self._workers = []
        self._workers_status = [True] * self._num_workers
        self._stop_sent = False
        self._shutdown = False
        _live_iterators.add(self)
        for i in range(self._num_workers):
            index_queue = ctx.Queue()
            # The main process must never wait at exit for index batches nobody will read.
            index_queue.cancel_join_thread()
            w = ctx.Process(target=_worker.worker_loop,
                            args=(self._is_iterable, self._dataset, index_queue, self._result_queue,
                                  self._done_event, loader._auto_collation, loader.collate_fn, loader.drop_last,
                                  self._base_seed, loader.worker_init_fn, i, self._num_workers, self._shm_prefix,
                                  self._owner_pid),
                            daemon=True)
            w.start()
            self._index_queues.append(index_queue)
            self._workers.append(w)
        self._reset(loader, first_iter=True)

    def __iter__(self):
        return self

    def __len__(self):
        return len(self._index_sampler)

    def _reset(self, loader, first_iter=False):
        self._sampler_iter = iter(self._index_sampler)
        self._send_idx = 0  # next task to send
        self._rcvd_idx = 0  # next task to return
        # task idx -> (worker_id,) while outstanding, (worker_id, data) once received out of order
        self._task_info = {}
        self._tasks_outstanding = 0
        self._workers_status = [True] * self._num_workers
        self._workers_num_tasks = [0] * self._num_workers
        self._worker_queue_idx_cycle = itertools.cycle(range(self._num_workers))
        if not first_iter:
            for q in self._index_queues:
                q.put(_worker._ResumeIteration())
            pending = self._num_workers
            while pending > 0:
                idx, _ = self._get_data()
                if isinstance(idx, _worker._ResumeIteration):
                    pending -= 1
        for _ in range(self._prefetch_factor * self._num_workers):
            self._try_put_index()

    def _try_get_data(self, timeout=_worker.MAIN_POLL_INTERVAL):
        try:
            return True, self._result_queue.get(timeout=timeout)
        except Exception as e:
            # (A worker told to stop after its last task has left normally: its batches are all in the queue.)
            failed = [w for wid, w in enumerate(self._workers) if self._workers_status[wid] and not w.is_alive()
                      and not (self._stop_sent and w.exitcode == 0)]
            if failed:
                for wid, w in enumerate(self._workers):
                    if w in failed:
                        self._mark_worker_as_unavailable(wid)
                pids = ", ".join(str(w.pid) for w in failed)
                self._shutdown_workers()
                raise RuntimeError(f"DataLoader worker (pid(s) {pids}) exited unexpectedly") from e
            if isinstance(e, queue.Empty):
                return False, None
            raise

    def _get_data(self):
        if self._timeout > 0:
            ok, data = self._try_get_data(self._timeout)
            if ok:
                return data
            raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds")
        while True:
            ok, data = self._try_get_data()
            if ok:
                return data

    def __next__(self):
        while True:
            while self._rcvd_idx < self._send_idx:
                info = self._task_info.get(self._rcvd_idx)
                if info:
                    if len(info) == 2 or self._workers_status[info[0]]:
                        break
                    del self._task_info[self._rcvd_idx]  # its worker's iterable ended: that task never comes
                self._rcvd_idx += 1
            else:
                if not self._persistent_workers:
                    self._shutdown_workers()
                raise StopIteration
            if len(self._task_info[self._rcvd_idx]) == 2:
                worker_id, data = self._task_info.pop(self._rcvd_idx)
                self._rcvd_idx += 1
                return self._process_data(data, worker_id)
            if self._shutdown:
                raise StopIteration
            idx, data = self._get_data()
            self._tasks_outstanding -= 1
            if isinstance(data, _worker._IterableDatasetStopIteration):
                if self._persistent_workers:
                    self._workers_status[data.worker_id] = False
                else:
                    self._mark_worker_as_unavailable(data.worker_id)
                self._try_put_index()
                continue
            if idx != self._rcvd_idx:
                if not self._in_order:
                    worker_id = self._task_info.pop(idx)[0]
                    return self._process_data(data, worker_id)
                self._task_info[idx] += (data,)
            else:
                worker_id = self._task_info.pop(idx)[0]
                self._rcvd_idx += 1
                return self._process_data(data, worker_id)

    def _try_put_index(self):
        max_tasks = self._prefetch_factor * self._num_workers
        try:
            index = next(self._sampler_iter)
        except StopIteration:
            self._stop_after_last_tasks()
            return
        for _ in range(self._num_workers):  # the next worker still loading this epoch, if any
            wid = next(self._worker_queue_idx_cycle)
            if self._workers_status[wid]:
                if self._in_order or self._workers_num_tasks[wid] < max_tasks // sum(self._workers_status):
                    break
        else:
            return
        self._index_queues[wid].put((self._send_idx, index))
        self._task_info[self._send_idx] = (wid,)
        self._workers_num_tasks[wid] += 1
        self._tasks_outstanding += 1
        self._send_idx += 1

    def _stop_after_last_tasks(self):
        # Map-style dataset, workers not kept: the sampler is exhausted, so each worker holds every task it gets
        # this epoch. A None queued behind them lets it leave (and its process exit) while the last batches are
        # still being consumed, instead of being woken and joined at the end of the epoch (a few ms each).
        if self._stop_sent or self._persistent_workers or self._is_iterable:
            return
        self._stop_sent = True
        for wid in range(self._num_workers):
            if self._workers_status[wid]:
                self._index_queues[wid].put(None)

    def _process_data(self, data, worker_id):
        self._workers_num_tasks[worker_id] -= 1
        self._try_put_index()
        if isinstance(data, _worker.ExceptionWrapper):
            data.reraise()
        return data

    def _mark_worker_as_unavailable(self, worker_id):
        # None tells the worker to leave its loop (after its iterable dataset ended, or at shutdown).
        self._index_queues[worker_id].put(None)
        self._workers_status[worker_id] = False

    def _shutdown_workers(self):
        if self._shutdown or os.getpid() != self._owner_pid:
            return
        self._shutdown = True
        try:
            self._done_event.set()
            for wid in range(len(self._workers)):
                if self._persistent_workers or self._workers_status[wid]:
                    self._index_queues[wid].put(None)
                    self._workers_status[wid] = False
            for w in self._workers:
                w.join(timeout=_worker.STATUS_CHECK_INTERVAL)
                if w.is_alive():
                    w.terminate()
                    w.join()
            for q in self._index_queues:
                q.cancel_join_thread()
                q.close()
            self._result_queue.cancel_join_thread()
            self._result_queue.close()
        finally:
            # Batches still in flight are never read: their /dev/shm files go now.
            _worker.remove_shm_files(self._shm_prefix)

    def __del__(self):
        try:
            self._shutdown_workers()
        except Exception:
            pass

    def __getstate__(self):
        raise NotImplementedError(f"{type(self).__name__} cannot be pickled")


_live_iterators = weakref.WeakSet()


@atexit.register
def _shutdown_live_iterators():
    # Registered after multiprocessing's own exit hook, so it runs first: workers (persistent ones above all) are
    # told to stop and joined, and their unread /dev/shm files removed, before multiprocessing kills daemons.
    for it in list(_live_iterators):
        try:
            it._shutdown_workers()
        except Exception:
            pass


class _InfiniteConstantSampler(Sampler):
    """Placeholder sampler for iterable datasets (yields None forever, never indexed)."""

    def __iter__(self):
        while True:
            yield None
