"""torch.multiprocessing: Python's multiprocessing with torch's `spawn` helper and shared-memory tensors.

A CPU tensor sent to another process through multiprocessing (a Queue, a Pipe, the arguments of a spawned Process)
is not copied: as in torch, its storage moves into shared memory (Tensor.share_memory_, a memfd mapping; see
src/core/shared_memory.h) and the receiving process maps the same pages, passed as a file descriptor over
multiprocessing's own descriptor passing (multiprocessing.reduction.DupFd). Writes on either side are seen by the
other, which is what Hogwild-style training (workers updating a model made shared with Module.share_memory())
relies on. Ordinary pickling (strata.save, pickle.dumps) still copies. Other devices pickle by value."""

import multiprocessing as _mp
from multiprocessing import *  # noqa: F401,F403
from multiprocessing import reduction as _reduction
from multiprocessing import reduction  # noqa: F401  (ForkingPickler, DupFd)

__all__ = ["spawn", "start_processes", "init_reductions", "ProcessRaisedException", "ProcessExitedException"] + [
    n for n in dir(_mp) if not n.startswith("_")]


# ---- shared-memory reductions (registered with multiprocessing's ForkingPickler on import) --------------------


def _rebuild_shared_tensor(cls, dup_fd, nbytes, dtype, sizes, strides, offset, requires_grad):
    from . import _C
    from .nn.parameter import Parameter

    t = _C._tensor_from_shared_fd(dup_fd.detach(), nbytes, dtype, list(sizes), list(strides), offset)
    if issubclass(cls, Parameter):
        return cls(t, requires_grad=requires_grad)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _reduce_tensor(t):
    from . import _C

    if t.device.type != "cpu":
        return t.__reduce_ex__(2)  # by value
    if t.requires_grad and t.grad_fn is not None:
        raise RuntimeError("Cowardly refusing to serialize non-leaf tensor which requires_grad, since autograd does "
                           "not support crossing process boundaries.  If you just want to transfer the data, call "
                           "detach() on the tensor before serializing (e.g., putting it on the queue).")
    fd, nbytes = _C._shared_storage_fd(t)  # moves the storage to shared memory first, as torch does
    return (_rebuild_shared_tensor, (type(t), _reduction.DupFd(fd), nbytes, t.dtype, tuple(t.shape), t.stride(),
                                     t.storage_offset(), t.requires_grad))


def init_reductions():
    """Registers the shared-memory pickling of tensors and parameters with multiprocessing (done on import)."""
    from ._C import Tensor
    from .nn.parameter import Parameter

    for cls in (Tensor, Parameter):
        _reduction.ForkingPickler.register(cls, _reduce_tensor)


class ProcessRaisedException(Exception):
    """A spawned process raised: the message carries its index and traceback."""

    def __init__(self, msg, error_index, error_pid):
        super().__init__(msg)
        self.error_index, self.pid = error_index, error_pid


class ProcessExitedException(Exception):
    """A spawned process exited with a non-zero code (or a signal)."""

    def __init__(self, msg, error_index, error_pid, exit_code, signal_name=None):
        super().__init__(msg)
        self.error_index, self.pid, self.exit_code, self.signal_name = error_index, error_pid, exit_code, signal_name


def _wrap(fn, i, args, errors):
    try:
        fn(i, *args)
    except KeyboardInterrupt:
        pass
    except Exception:
        import traceback

        errors.put((i, traceback.format_exc()))
        raise SystemExit(1)


class ProcessContext:
    def __init__(self, processes, errors):
        self.processes, self.error_queue = processes, errors

    def pids(self):
        return [p.pid for p in self.processes]

    def join(self, timeout=None):
        """Waits for every process; True when all are done. The first failure raises in the caller, after the
        other processes are terminated."""
        for p in self.processes:
            p.join(timeout)
        failed = [(i, p) for i, p in enumerate(self.processes) if p.exitcode not in (None, 0)]
        if failed:
            for p in self.processes:
                if p.is_alive():
                    p.terminate()
            i, p = failed[0]
            if not self.error_queue.empty():
                idx, tb = self.error_queue.get()
                raise ProcessRaisedException(f"\n\n-- Process {idx} terminated with the following error:\n{tb}", idx,
                                             self.processes[idx].pid)
            raise ProcessExitedException(f"process {i} terminated with exit code {p.exitcode}", i, p.pid,
                                         p.exitcode)
        return all(p.exitcode is not None for p in self.processes)


def start_processes(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    ctx = _mp.get_context(start_method)
    errors = ctx.SimpleQueue()
    processes = []
    for i in range(nprocs):
        p = ctx.Process(target=_wrap, args=(fn, i, args, errors), daemon=daemon)
        p.start()
        processes.append(p)
    context = ProcessContext(processes, errors)
    if not join:
        return context
    while not context.join():
        pass
    return None


def spawn(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """Runs ``fn(i, *args)`` in `nprocs` new processes (i = 0 .. nprocs-1), as torch.multiprocessing.spawn."""
    return start_processes(fn, args, nprocs, join, daemon, start_method)


def get_sharing_strategy():
    return "file_descriptor"


def get_all_sharing_strategies():
    return {"file_descriptor"}


def set_sharing_strategy(new_strategy):
    if new_strategy not in get_all_sharing_strategies():
        raise ValueError(f"set_sharing_strategy: unknown strategy {new_strategy!r}; strata shares CPU tensors "
                         "through file descriptors only ('file_descriptor')")


init_reductions()
