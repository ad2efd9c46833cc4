"""strata.xpu: torch.xpu's API on a build without an XPU (Intel GPU) backend.

As strata.cuda, it answers as torch's build without XPU does: the queries say "no device" (is_available() False,
device_count() 0, memory counters 0, empty memory_stats), the cache and seeding calls are no-ops, and what needs a
live device (init, set_device, current_device, device properties, RNG state, streams) raises
AssertionError("Strata not compiled with XPU enabled ..."), the exception type torch uses."""

import collections

__all__ = [
    "is_available", "device_count", "is_initialized", "init", "current_device", "set_device", "get_device_name",
    "get_device_capability", "get_device_properties", "synchronize", "empty_cache", "manual_seed",
    "manual_seed_all", "seed", "seed_all", "initial_seed", "get_rng_state", "get_rng_state_all", "set_rng_state",
    "set_rng_state_all", "is_bf16_supported", "is_tf32_supported", "memory_allocated", "max_memory_allocated",
    "memory_reserved", "max_memory_reserved", "memory_stats", "reset_peak_memory_stats",
    "reset_accumulated_memory_stats", "mem_get_info", "get_arch_list", "Event", "Stream", "current_stream",
    "stream", "StreamContext", "device", "device_of", "default_generators",
]


def _no_xpu(what):
    return AssertionError(f"Strata not compiled with XPU enabled: strata.xpu.{what}() needs an XPU device, and this "
                          "build has no XPU backend (strata.xpu.is_available() is False)")


def is_available():
    return False


def device_count():
    return 0


def is_initialized():
    return False


def init():
    raise _no_xpu("init")


def current_device():
    raise _no_xpu("current_device")


def set_device(device):
    raise _no_xpu("set_device")


def get_device_name(device=None):
    raise _no_xpu("get_device_name")


def get_device_capability(device=None):
    raise _no_xpu("get_device_capability")


def get_device_properties(device=None):
    raise _no_xpu("get_device_properties")


def synchronize(device=None):
    raise _no_xpu("synchronize")


def empty_cache():
    """Frees cached XPU memory: there is none."""


def mem_get_info(device=None):
    raise _no_xpu("mem_get_info")


def get_arch_list():
    return []


def is_bf16_supported(including_emulation=True):
    return False


def is_tf32_supported():
    return False


# Seeding is queued by torch until a device is initialised, which never happens: no-ops.
def manual_seed(seed):
    int(seed)


def manual_seed_all(seed):
    int(seed)


def seed():
    pass


def seed_all():
    pass


def initial_seed():
    raise _no_xpu("initial_seed")


def get_rng_state(device="xpu"):
    raise _no_xpu("get_rng_state")


def get_rng_state_all():
    return []


def set_rng_state(new_state, device="xpu"):
    raise _no_xpu("set_rng_state")


def set_rng_state_all(new_states):
    for s in new_states:
        set_rng_state(s)


default_generators = ()


# Memory counters of a device that does not exist: zero.
def memory_allocated(device=None):
    return 0


def max_memory_allocated(device=None):
    return 0


def memory_reserved(device=None):
    return 0


def max_memory_reserved(device=None):
    return 0


def memory_stats(device=None):
    return collections.OrderedDict()


def reset_peak_memory_stats(device=None):
    raise _no_xpu("reset_peak_memory_stats")


def reset_accumulated_memory_stats(device=None):
    raise _no_xpu("reset_accumulated_memory_stats")


class Stream:
    """An XPU stream: needs a device, constructing one raises."""

    def __new__(cls, *args, **kwargs):
        raise RuntimeError("strata.xpu.Stream requires XPU support, and this build has no XPU backend")


class Event:
    """An XPU event: needs a device, constructing one raises."""

    def __new__(cls, *args, **kwargs):
        raise RuntimeError("strata.xpu.Event requires XPU support, and this build has no XPU backend")


def current_stream(device=None):
    raise _no_xpu("current_stream")


class StreamContext:
    """Selects a stream for a block; StreamContext(None) selects nothing, as in torch."""

    def __init__(self, stream):
        if stream is not None:
            raise _no_xpu("stream")
        self.stream = None

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def stream(stream):
    return StreamContext(stream)


class device:
    """Selects an XPU device for a block: entering with an index raises; device(-1) / device(None) is a no-op."""

    def __init__(self, device):
        from . import _C

        if isinstance(device, (str, _C.device)):
            d = _C.device(device) if isinstance(device, str) else device
            self.idx = -1 if d.type != "xpu" else (0 if d.index is None else d.index)
        else:
            self.idx = -1 if device is None else int(device)

    def __enter__(self):
        if self.idx != -1:
            raise _no_xpu("device")
        return self

    def __exit__(self, *exc):
        return False


class device_of(device):
    """Selects the device of a tensor (CPU tensors select nothing)."""

    def __init__(self, obj):
        super().__init__(obj.device if hasattr(obj, "device") else None)


def _tensor_xpu(self, device=None, non_blocking=False, memory_format=None):
    raise AssertionError("Strata not compiled with XPU enabled: Tensor.xpu() needs an XPU device, and this build has "
                         "no XPU backend (strata.xpu.is_available() is False)")


def _install():
    from . import _C

    _C.Tensor.xpu = _tensor_xpu


_install()
