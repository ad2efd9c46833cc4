"""strata.accelerator: the device-generic API (torch.accelerator). The accelerator is CUDA when
strata.cuda.is_available(); otherwise there is none (the CPU is not an accelerator): `is_available()` is
False, `current_accelerator()` None, and calls that need one raise RuntimeError."""

__all__ = ["is_available", "current_accelerator", "device_count", "current_device_index", "set_device_index",
           "synchronize", "empty_cache", "memory_allocated", "max_memory_allocated", "device_index"]

_NONE = "Cannot access accelerator device when none is available (strata.accelerator: this build runs on the CPU only)"


def _cuda():
    from . import cuda

    return cuda if cuda.is_available() else None


def _need():
    c = _cuda()
    if c is None:
        raise RuntimeError(_NONE)
    return c


def is_available():
    return _cuda() is not None


def current_accelerator(check_available=False):
    from . import _C

    return _C.device("cuda") if _cuda() is not None else None


def device_count():
    c = _cuda()
    return 0 if c is None else c.device_count()


def current_device_index():
    return _need().current_device()


def set_device_index(device):
    _need().set_device(device)


def synchronize(device=None):
    _need().synchronize(device)


def empty_cache():
    _need().empty_cache()


def memory_allocated(device_index=None):
    return _need().memory_allocated(device_index)


def max_memory_allocated(device_index=None):
    return _need().max_memory_allocated(device_index)


class device_index:
    """Context manager selecting the current accelerator device index: None selects
    nothing (a no-op, as in torch); an index raises RuntimeError, there being no
    accelerator."""

    def __init__(self, device, /):
        self.idx = device
        self.prev_idx = -1

    def __enter__(self):
        if self.idx is not None:
            c = _need()
            self.prev_idx = c.current_device()
            c.set_device(self.idx)
        return self

    def __exit__(self, *exc):
        if self.idx is not None:
            _need().set_device(self.prev_idx)
        return False
