"""strata.accelerator: the device-generic API (torch.accelerator). Strata runs on
the CPU only, and the CPU is not an accelerator: `is_available()` is False,
`current_accelerator()` None, and calls that need one raise RuntimeError."""

__all__ = ["is_available", "current_accelerator", "device_count", "current_device_index", "set_device_index",
           "synchronize", "empty_cache", "memory_allocated", "max_memory_allocated", "device_index"]

_NONE = "Cannot access accelerator device when none is available (strata.accelerator: this build runs on the CPU only)"


def is_available():
    return False


def current_accelerator(check_available=False):
    return None


def device_count():
    return 0


def current_device_index():
    raise RuntimeError(_NONE)


def set_device_index(device):
    raise RuntimeError(_NONE)


def synchronize(device=None):
    raise RuntimeError(_NONE)


def empty_cache():
    raise RuntimeError(_NONE)


def memory_allocated(device_index=None):
    raise RuntimeError(_NONE)


def max_memory_allocated(device_index=None):
    raise RuntimeError(_NONE)


class device_index:
    """Context manager selecting the current accelerator device index: None selects
    nothing (a no-op, as in torch); an index raises RuntimeError, there being no
    accelerator."""

    def __init__(self, device, /):
        self.idx = device
        self.prev_idx = -1

    def __enter__(self):
        if self.idx is not None:
            raise RuntimeError(_NONE)
        return self

    def __exit__(self, *exc):
        return False
