"""DataLoader worker processes: the loop each worker runs, its WorkerInfo, and how its tensors travel back.

A worker receives ``(task_idx, indices)`` on its own index queue and answers ``(task_idx, batch)`` on the shared
result queue. Tensors of at least ``_SHM_MIN_BYTES`` go through a file in /dev/shm (written once by the worker,
memory-mapped without a copy by the main process, which unlinks it at once); smaller ones are pickled."""

import itertools
import mmap
import os
import pickle
import queue
import random
import sys
import traceback

import numpy as np

from ... import _C

# How long shutdown waits for a worker to leave before terminating it.
STATUS_CHECK_INTERVAL = 5.0
# How often a main process waiting for a batch checks that its workers are still alive.
MAIN_POLL_INTERVAL = 1.0
# How often an idle worker checks that the main process is alive and has not asked the workers to stop. Shutdown
# normally reaches a worker as a None task, but an iterator freed by the cycle collector has had its queues' feeder
# threads closed before its __del__ runs, so that None never leaves: the done event is what the worker sees then.
_WORKER_POLL_INTERVAL = 0.2

_worker_info = None


class WorkerInfo:
    """What a loading worker knows about itself (id, num_workers, seed, dataset)."""

    __initialized = False

    def __init__(self, **kwargs):
        for k, v in kwargs.items():
            setattr(self, k, v)
        self.__keys = tuple(kwargs.keys())
        self.__initialized = True

    def __setattr__(self, key, val):
        if self.__initialized:
            raise RuntimeError(f"Cannot assign attributes to {self.__class__.__name__} objects")
        return super().__setattr__(key, val)

    def __repr__(self):
        return f"{self.__class__.__name__}({', '.join(f'{k}={getattr(self, k)}' for k in self.__keys)})"


def get_worker_info():
    """The current worker's WorkerInfo inside a DataLoader worker process; None in the main process."""
    return _worker_info


class _ResumeIteration:
    """Sent to persistent workers at the start of each later epoch: rebuild the fetcher (a fresh dataset iterator)."""


class _IterableDatasetStopIteration:
    """A worker's iterable dataset copy is exhausted: send it no more tasks this epoch."""

    def __init__(self, worker_id):
        self.worker_id = worker_id


class _KeyErrorMessage(str):
    # KeyError's str() is the repr of its argument; keep the traceback text readable.
    def __repr__(self):
        return self


class ExceptionWrapper:
    """An exception raised in a worker, carried to the main process as its type and formatted traceback."""

    def __init__(self, exc_info=None, where="in background"):
        if exc_info is None:
            exc_info = sys.exc_info()
        exc_type = exc_info[0]
        self.exc_name = exc_type.__name__
        try:
            # The type travels by reference: one defined where the main process cannot import it (a local class)
            # would make the result unpicklable and the batch would never arrive.
            pickle.loads(pickle.dumps(exc_type))
        except Exception:
            exc_type = RuntimeError
        self.exc_type = exc_type
        self.exc_msg = "".join(traceback.format_exception(*exc_info))
        self.where = where

    def reraise(self):
        msg = f"Caught {self.exc_name} {self.where}.\nOriginal {self.exc_msg}"
        if self.exc_type is KeyError:
            msg = _KeyErrorMessage(msg)
        try:
            exception = self.exc_type(msg)
        except Exception:
            # An exception type whose constructor does not take one message.
            raise RuntimeError(msg) from None
        raise exception


def _generate_state(base_seed, worker_id):
    """Four 32-bit words seeding NumPy's legacy generator in a worker, derived from (base_seed, worker_id) with the
    same hash-and-mix scheme as torch's workers (NumPy's SeedSequence mixing), so NumPy streams match torch's."""
    mask = 0xFFFFFFFF
    mult_a, mult_b = 0x931E8875, 0x58F38DED
    mix_l, mix_r = 0xCA01F9DD, 0x4973F715
    const_a = [0x43B0D7E5]

    def hashmix(v):
        v = (v ^ const_a[0]) & mask
        const_a[0] = (const_a[0] * mult_a) & mask
        v = (v * const_a[0]) & mask
        return (v ^ (v >> 16)) & mask

    def mix(x, y):
        r = ((mix_l * x) - (mix_r * y)) & mask
        return (r ^ (r >> 16)) & mask

    pool = [hashmix(v) for v in (worker_id, base_seed & mask, base_seed >> 32, 0)]
    for src in range(4):
        for dst in range(4):
            if src != dst:
                pool[dst] = mix(pool[dst], hashmix(pool[src]))
    const_b = 0x8B51F9DD
    state = []
    for v in pool:
        v = (v ^ const_b) & mask
        const_b = (const_b * mult_b) & mask
        v = (v * const_b) & mask
        state.append((v ^ (v >> 16)) & mask)
    return state


# ---- tensors through shared memory ---------------------------------------------------------------------------------

_SHM_DIR = "/dev/shm"
_SHM_MIN_BYTES = 1 << 16
_shm_counter = itertools.count()


def _rebuild_from_shm(path, nbytes, dtype, shape, requires_grad):
    from ..._functions import from_numpy

    fd = os.open(path, os.O_RDWR)
    try:
        mm = mmap.mmap(fd, nbytes)
    finally:
        os.close(fd)
        os.unlink(path)  # the mapping outlives the name: nothing is left in /dev/shm once the tensor dies
    t = from_numpy(np.frombuffer(mm, dtype=np.uint8))
    if dtype is not _C.uint8:
        t = t.view(dtype)
    t = t.reshape(shape)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _make_shm_reducer(prefix):
    from ..._tensor_pickle import _tensor_reduce_ex

    def reduce_tensor(t):
        nbytes = t.numel() * t.element_size()
        if nbytes < _SHM_MIN_BYTES or t.device.type != "cpu" or type(t) is not _C.Tensor:
            return _tensor_reduce_ex(t, 2)
        flat = t.detach().contiguous().reshape(-1)
        if flat.dtype is not _C.uint8:
            flat = flat.view(_C.uint8)
        path = f"{prefix}_{next(_shm_counter)}"
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except OSError:
            return _tensor_reduce_ex(t, 2)
        try:
            view = memoryview(flat.numpy())
            written = 0
            while written < nbytes:
                written += os.write(fd, view[written:])
        except OSError:
            # /dev/shm full: this tensor is pickled instead.
            os.close(fd)
            os.unlink(path)
            return _tensor_reduce_ex(t, 2)
        os.close(fd)
        return (_rebuild_from_shm, (path, nbytes, t.dtype, tuple(t.shape), t.requires_grad))

    return reduce_tensor


def shm_prefix(token):
    """The /dev/shm name prefix of one iterator's tensor files, or None when there is no /dev/shm."""
    if not os.path.isdir(_SHM_DIR) or not os.access(_SHM_DIR, os.W_OK):
        return None
    return f"{_SHM_DIR}/strata_dl_{os.getpid()}_{token}"


def remove_shm_files(prefix):
    """Unlink the tensor files of an iterator that were never received (workers stopped with batches in flight)."""
    if prefix is None:
        return
    directory, stem = os.path.split(prefix)
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        if name.startswith(stem + "_"):
            try:
                os.unlink(os.path.join(directory, name))
            except OSError:
                pass


# ---- fetching ------------------------------------------------------------------------------------------------------


class _MapFetcher:
    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        self.dataset = dataset
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn

    def fetch(self, index):
        if self.auto_collation:
            getitems = getattr(self.dataset, "__getitems__", None)
            if getitems is not None:
                return self.collate_fn(getitems(index))
            return self.collate_fn([self.dataset[i] for i in index])
        return self.collate_fn(self.dataset[index])


class _IterableFetcher:
    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        self.iterator = iter(dataset)
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        self.drop_last = drop_last
        self.ended = False

    def fetch(self, index):
        if self.ended:
            raise StopIteration
        if not self.auto_collation:
            return self.collate_fn(next(self.iterator))
        batch = []
        for _ in index:
            try:
                batch.append(next(self.iterator))
            except StopIteration:
                self.ended = True
                break
        if not batch or (self.drop_last and len(batch) < len(index)):
            raise StopIteration
        return self.collate_fn(batch)


def worker_loop(is_iterable, dataset, index_queue, data_queue, done_event, auto_collation, collate_fn, drop_last,
                base_seed, init_fn, worker_id, num_workers, shm_name_prefix, parent_pid):
    global _worker_info
    try:
        from ... import manual_seed, set_num_threads

        set_num_threads(1)
        seed = base_seed + worker_id
        random.seed(seed)
        manual_seed(seed)
        np.random.seed(_generate_state(base_seed, worker_id))
        if shm_name_prefix is not None:
            from multiprocessing.reduction import ForkingPickler

            # Registered in this worker process only: the queue's pickler then sends big tensors through /dev/shm.
            ForkingPickler.register(_C.Tensor, _make_shm_reducer(f"{shm_name_prefix}_{worker_id}"))
        _worker_info = WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed, dataset=dataset)
        make_fetcher = _IterableFetcher if is_iterable else _MapFetcher
        init_exception = None
        fetcher = None
        try:
            if init_fn is not None:
                init_fn(worker_id)
            fetcher = make_fetcher(dataset, auto_collation, collate_fn, drop_last)
        except Exception:
            init_exception = ExceptionWrapper(where=f"in DataLoader worker process {worker_id}")

        iteration_end = False
        while os.getppid() == parent_pid:
            try:
                r = index_queue.get(timeout=_WORKER_POLL_INTERVAL)
            except queue.Empty:
                if done_event.is_set():
                    break
                continue
            if isinstance(r, _ResumeIteration):
                data_queue.put((r, None))
                iteration_end = False
                try:
                    fetcher = make_fetcher(dataset, auto_collation, collate_fn, drop_last)
                except Exception:
                    init_exception = ExceptionWrapper(where=f"in DataLoader worker process {worker_id}")
                continue
            if r is None:
                break
            if done_event.is_set() or iteration_end:
                continue
            idx, index = r
            if init_exception is not None:
                data, init_exception = init_exception, None
            else:
                try:
                    data = fetcher.fetch(index)
                except Exception as e:
                    if isinstance(e, StopIteration) and is_iterable:
                        data = _IterableDatasetStopIteration(worker_id)
                        iteration_end = True
                    else:
                        data = ExceptionWrapper(where=f"in DataLoader worker process {worker_id}")
            data_queue.put((idx, data))
            del data, idx, index, r
    except KeyboardInterrupt:
        pass
    if done_event.is_set():
        # The main process no longer reads: do not wait for the queue's feeder thread to flush at exit.
        data_queue.cancel_join_thread()
        data_queue.close()
