"""torch.multiprocessing: Python's multiprocessing with torch's `spawn` helper.

Tensors cross process boundaries by pickling (strata/_tensor_pickle.py); there is no shared-memory tensor
storage yet, so a tensor sent to another process is a copy."""

import multiprocessing as _mp
from multiprocessing import *  # noqa: F401,F403

__all__ = ["spawn", "start_processes", "ProcessRaisedException", "ProcessExitedException"] + [
    n for n in dir(_mp) if not n.startswith("_")]


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
