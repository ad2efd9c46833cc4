"""strata.futures: torch.futures' Future, a result that is set once and waited
for, with callbacks, over a threading.Condition (strata has no RPC runtime, so
futures are completed by user code or other threads)."""

import threading

__all__ = ["Future", "collect_all", "wait_all"]


class Future:
    """A value that becomes available later: set_result/set_exception complete it
    once; wait() blocks until then and returns the value (or raises the exception);
    then() chains a callback whose result completes a new Future."""

    def __init__(self, *, devices=None):
        self._cond = threading.Condition()
        self._done = False
        self._result = None
        self._error = None
        self._callbacks = []

    def done(self):
        return self._done

    def wait(self):
        with self._cond:
            while not self._done:
                self._cond.wait()
        if self._error is not None:
            raise self._error
        return self._result

    def value(self):
        """The result without waiting (the future should be done); raises its exception."""
        if self._error is not None:
            raise self._error
        return self._result

    def _complete(self, result, error):
        with self._cond:
            if self._done:
                raise RuntimeError("Attempting to mark a completed Future as complete again. Note that a Future can "
                                   "only be marked completed once.")
            self._result, self._error, self._done = result, error, True
            callbacks, self._callbacks = self._callbacks, []
            self._cond.notify_all()
        for cb in callbacks:
            cb(self)

    def set_result(self, result):
        self._complete(result, None)

    def set_exception(self, result):
        if not isinstance(result, Exception):
            raise AssertionError(f"{result} is of type {type(result)}, not an Exception.")
        self._complete(None, result)

    def add_done_callback(self, callback):
        """Runs callback(self) once the future is done (now, if it already is)."""
        with self._cond:
            if not self._done:
                self._callbacks.append(callback)
                return
        callback(self)

    def then(self, callback):
        """A new Future completed with callback(self) once this one is done (or with
        a RuntimeError naming the callback's error)."""
        out = Future()

        def run(fut):
            try:
                result = callback(fut)
            except Exception as e:
                out.set_exception(RuntimeError(
                    f"Got the following error when running the callback: {type(e).__name__}: {e}"))
                return
            out.set_result(result)

        self.add_done_callback(run)
        return out


def collect_all(futures):
    """A Future completed with the list of `futures` once all are done (or with the
    first error among them, in list order)."""
    futures = list(futures)
    out = Future()
    remaining = [len(futures)]
    lock = threading.Lock()

    def one_done(_):
        with lock:
            remaining[0] -= 1
            last = remaining[0] == 0
        if last:
            err = next((f._error for f in futures if f._error is not None), None)
            out.set_exception(err) if err is not None else out.set_result(futures)

    if not futures:
        out.set_result([])
    for f in futures:
        f.add_done_callback(one_done)
    return out


def wait_all(futures):
    """The values of all `futures`, after waiting for each; raises the first error."""
    return [f.wait() for f in collect_all(futures).wait()]
