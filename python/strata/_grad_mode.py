"""Grad-mode switches. They set the thread-local dispatch-key exclusions that
the autograd layer reads; until that layer records anything they change no
results, only the flag that is_grad_enabled() reports."""

import functools
import threading

_state = threading.local()


def is_grad_enabled():
    return getattr(_state, "enabled", True)


def _set(enabled):
    _state.enabled = enabled


class _Mode:
    enabled = True

    def __enter__(self):
        self._prev = is_grad_enabled()
        _set(self.enabled)
        return self

    def __exit__(self, *exc):
        _set(self._prev)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__():
                return fn(*args, **kwargs)

        return wrapper


class no_grad(_Mode):
    enabled = False


class enable_grad(_Mode):
    enabled = True


class inference_mode(_Mode):
    def __init__(self, mode=True):
        self.enabled = not mode

    def __enter__(self):
        self._prev = is_grad_enabled()
        _set(self.enabled)
        return self

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with inference_mode(not self.enabled):
                return fn(*args, **kwargs)

        return wrapper


class set_grad_enabled(_Mode):
    def __init__(self, mode):
        self._prev = is_grad_enabled()
        self.enabled = mode
        _set(mode)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _set(self._prev)
        return False
