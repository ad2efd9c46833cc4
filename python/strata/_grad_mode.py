"""Grad-mode switches. Grad mode is the thread-local exclusion of the Autograd
dispatch key (src/dispatch/dispatch_key.h): no_grad and inference_mode add the
key to the thread's exclude set, enable_grad removes it, and the dispatcher
skips the autograd layer while it is excluded. (The autograd layer itself is
the subject of the autograd work; until it records anything, these switches
change only which keys a call passes through.)"""

import functools

from . import _C

is_grad_enabled = _C._is_grad_enabled
# Bound once: `with no_grad():` sits on every inference call's path.
_is_enabled = _C._is_grad_enabled
_set_enabled = _C._set_grad_enabled


class _Mode:
    # Slots where no instance state beyond the saved mode is needed: a cheaper `with no_grad():`.
    __slots__ = ("_prev",)
    enabled = True

    def __enter__(self):
        self._prev = _is_enabled()
        _set_enabled(self.enabled)
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        _set_enabled(self._prev)
        return False

    def __call__(self, fn):
        enabled = self.enabled

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            prev = _C._is_grad_enabled()
            _C._set_grad_enabled(enabled)
            try:
                return fn(*args, **kwargs)
            finally:
                _C._set_grad_enabled(prev)

        return wrapper


class no_grad(_Mode):
    __slots__ = ()
    enabled = False


class enable_grad(_Mode):
    __slots__ = ()
    enabled = True


class inference_mode(_Mode):
    __slots__ = ("enabled", "_mode", "_prev_inference")

    def __new__(cls, mode=True):
        # @inference_mode without parentheses decorates the function directly.
        if mode is None or isinstance(mode, bool):
            return super().__new__(cls)
        return cls()(mode)

    def __init__(self, mode=True):
        self.enabled = not mode
        self._mode = bool(mode)

    # Inference mode is grad mode off plus the core's thread-local flag: tensors created while it is on are
    # inference tensors (Tensor.is_inference(); Note [Inference tensors] in src/core/tensor.h).
    def __enter__(self):
        self._prev_inference = _C._is_inference_mode_enabled()
        _C._set_inference_mode_enabled(self._mode)
        return super().__enter__()

    def __exit__(self, exc_type, exc_value, traceback):
        _C._set_inference_mode_enabled(self._prev_inference)
        return super().__exit__(exc_type, exc_value, traceback)

    def __call__(self, fn):
        mode = self._mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with inference_mode(mode):
                return fn(*args, **kwargs)

        return wrapper


def is_inference_mode_enabled():
    return _C._is_inference_mode_enabled()


class set_grad_enabled(_Mode):
    """Sets grad mode on construction (usable as a function) and restores it on exit."""

    def __init__(self, mode):
        self._prev = _C._is_grad_enabled()
        self.enabled = bool(mode)
        _C._set_grad_enabled(self.enabled)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _C._set_grad_enabled(self._prev)
        return False
