"""Anomaly mode: nodes remember the Python stack that created them, and the
engine raises on the first NaN a backward node produces, naming that node and
the forward call."""

import warnings

from .. import _C


def is_anomaly_enabled():
    return _C._is_anomaly_enabled()


class set_detect_anomaly:
    """Turns anomaly mode on or off; usable as a function or a context manager."""

    def __init__(self, mode, check_nan=True):
        self._prev = (_C._is_anomaly_enabled(), _C._is_anomaly_check_nan_enabled())
        _C._set_anomaly_enabled(bool(mode), bool(check_nan))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _C._set_anomaly_enabled(*self._prev)
        return False


class detect_anomaly:
    """Context manager and decorator enabling anomaly mode."""

    def __init__(self, check_nan=True):
        self.check_nan = check_nan
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime and should only be "
                      "enabled for debugging.", stacklevel=2)

    def __enter__(self):
        self._prev = (_C._is_anomaly_enabled(), _C._is_anomaly_check_nan_enabled())
        _C._set_anomaly_enabled(True, self.check_nan)
        return self

    def __exit__(self, *exc):
        _C._set_anomaly_enabled(*self._prev)
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*a, **k):
            with self.__class__(self.check_nan):
                return fn(*a, **k)

        return wrapper
