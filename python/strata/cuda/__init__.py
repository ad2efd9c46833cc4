"""strata.cuda: torch.cuda's API on a build without a GPU backend.

Strata has no CUDA backend yet, so this module answers as torch's CPU-only
build does: the queries (`is_available`, `device_count`, memory counters) say
"no device", the seeding calls are no-ops (torch queues them until a device is
initialised, which never happens), and everything that needs a live device
raises AssertionError("Strata not compiled with CUDA enabled ..."), the
exception type torch uses, naming the function that was called. Scripts that
branch on `strata.cuda.is_available()` therefore take their CPU path."""


from .. import _C

__all__ = [
    "is_available", "device_count", "is_initialized", "init", "current_device", "set_device", "get_device_name",
    "get_device_capability", "get_device_properties", "synchronize", "empty_cache", "ipc_collect", "manual_seed",
    "manual_seed_all", "seed", "seed_all", "initial_seed", "get_rng_state", "get_rng_state_all", "set_rng_state",
    "set_rng_state_all", "is_bf16_supported", "memory_allocated", "max_memory_allocated", "memory_reserved",
    "max_memory_reserved", "memory_stats", "memory_summary", "reset_peak_memory_stats",
    "reset_max_memory_allocated", "reset_accumulated_memory_stats", "mem_get_info", "get_arch_list", "Event",
    "Stream", "current_stream", "default_stream", "stream", "device", "device_of", "amp",
]


def _no_cuda(what):
    return AssertionError(f"Strata not compiled with CUDA enabled: strata.cuda.{what}() needs a CUDA device, "
                          "and this build has no CUDA backend (strata.cuda.is_available() is False)")


def is_available():
    return False


def device_count():
    return 0


def is_initialized():
    return False


def init():
    raise _no_cuda("init")


def current_device():
    raise _no_cuda("current_device")


def _device_index(dev, what):
    # torch rejects a non-CUDA device before it looks for the backend.
    if isinstance(dev, str):
        dev = _C.device(dev)
    if isinstance(dev, _C.device) and dev.type != "cuda":
        raise ValueError(f"Expected a cuda device, but got: {dev}")
    raise _no_cuda(what)


def set_device(device):
    _device_index(device, "set_device")


def get_device_name(device=None):
    raise _no_cuda("get_device_name")


def get_device_capability(device=None):
    raise _no_cuda("get_device_capability")


def get_device_properties(device=None):
    raise _no_cuda("get_device_properties")


def synchronize(device=None):
    raise _no_cuda("synchronize")


def ipc_collect():
    raise _no_cuda("ipc_collect")


def empty_cache():
    # torch: a no-op until CUDA is initialised, which it never is here.
    return None


def mem_get_info(device=None):
    raise _no_cuda("mem_get_info")


def get_arch_list():
    return []


# ---- random state: queued until a device exists, as in torch, i.e. no-ops --------------------
def manual_seed(seed):
    int(seed)  # torch converts (and so rejects non-integers) before queueing
    return None


def manual_seed_all(seed):
    int(seed)
    return None


def seed():
    return None


def seed_all():
    return None


def initial_seed():
    raise _no_cuda("initial_seed")


def get_rng_state(device="cuda"):
    raise _no_cuda("get_rng_state")


def get_rng_state_all():
    return []


def set_rng_state(new_state, device="cuda"):
    return None


def set_rng_state_all(new_states):
    return None


def is_bf16_supported(including_emulation=True):
    return False


# ---- memory counters: nothing is allocated on a device that does not exist ---------------------
def memory_allocated(device=None):
    return 0


def max_memory_allocated(device=None):
    return 0


def memory_reserved(device=None):
    return 0


def max_memory_reserved(device=None):
    return 0


def memory_stats(device=None):
    return {}


def memory_summary(device=None, abbreviated=False):
    raise _no_cuda("memory_summary")


def reset_peak_memory_stats(device=None):
    raise _no_cuda("reset_peak_memory_stats")


def reset_max_memory_allocated(device=None):
    raise _no_cuda("reset_max_memory_allocated")


def reset_accumulated_memory_stats(device=None):
    raise _no_cuda("reset_accumulated_memory_stats")


# ---- streams and events ---------------------------------------------------------------------
class Stream:
    """A CUDA stream. Needs a CUDA device: constructing one raises."""

    def __new__(cls, *args, **kwargs):
        raise RuntimeError("strata.cuda.Stream requires CUDA support, and this build has no CUDA backend")


class Event:
    """A CUDA event. Needs a CUDA device: constructing one raises."""

    def __new__(cls, *args, **kwargs):
        raise RuntimeError("strata.cuda.Event requires CUDA support, and this build has no CUDA backend")


def current_stream(device=None):
    raise _no_cuda("current_stream")


def default_stream(device=None):
    raise _no_cuda("default_stream")


class stream:
    """Context manager selecting a stream; `stream(None)` is a no-op, as in torch."""

    def __init__(self, stream):
        if stream is not None:
            raise _no_cuda("stream")
        self.stream = None

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


class device:
    """Context manager selecting a CUDA device. Entering it with a device index
    raises, as torch's build without CUDA does; `device(-1)` or `device(None)`
    selects nothing and is a no-op."""

    def __init__(self, device):
        if isinstance(device, (str, _C.device)):
            d = _C.device(device) if isinstance(device, str) else device
            self.idx = -1 if d.type != "cuda" else (0 if d.index is None else d.index)
        else:
            self.idx = -1 if device is None else int(device)

    def __enter__(self):
        if self.idx != -1:
            raise RuntimeError("Strata was compiled without CUDA support: strata.cuda.device() cannot select "
                               f"device {self.idx}")
        return self

    def __exit__(self, *exc):
        return False


class device_of(device):
    """Context manager selecting the device of a tensor (CPU tensors select nothing)."""

    def __init__(self, obj):
        super().__init__(obj.device if hasattr(obj, "device") else None)


from . import amp  # noqa: E402,F401
from .._legacy_types import CUDA_TYPES as _CUDA_TYPES  # noqa: E402

# strata.cuda.FloatTensor, ...: they exist so that code naming them imports;
# constructing one raises (see strata/_legacy_types.py).
globals().update(_CUDA_TYPES)
__all__ += list(_CUDA_TYPES)

# torch.cuda.OutOfMemoryError is torch.OutOfMemoryError: a RuntimeError (and here also a MemoryError), raised by
# Strata's allocator when an allocation fails.
OutOfMemoryError = _C._OutOfMemoryError
# One generator per CUDA device: none without a device, as torch.
default_generators = ()
__all__ += ["OutOfMemoryError", "default_generators", "nccl"]


class _Nccl:
    """strata.cuda.nccl: the NCCL bindings. There is no NCCL without CUDA: version() raises AttributeError (the
    error torch's build without NCCL gives) and is_available() is False."""

    SUM = 0

    @staticmethod
    def is_available(tensors=None):
        return False

    @staticmethod
    def version():
        raise AttributeError("strata.cuda.nccl.version: this build has no NCCL (and no CUDA backend)")

    def _unavailable(name):  # noqa: N805
        def f(*args, **kwargs):
            raise RuntimeError(f"strata.cuda.nccl.{name}: this build has no NCCL (and no CUDA backend)")
        f.__name__ = name
        return staticmethod(f)

    unique_id = _unavailable("unique_id")
    init_rank = _unavailable("init_rank")
    all_reduce = _unavailable("all_reduce")
    reduce = _unavailable("reduce")
    broadcast = _unavailable("broadcast")
    all_gather = _unavailable("all_gather")
    reduce_scatter = _unavailable("reduce_scatter")
    del _unavailable


import sys as _sys  # noqa: E402
import types as _types  # noqa: E402

nccl = _types.ModuleType(__name__ + ".nccl", _Nccl.__doc__)
for _k in ("SUM", "is_available", "version", "unique_id", "init_rank", "all_reduce", "reduce", "broadcast",
           "all_gather", "reduce_scatter"):
    setattr(nccl, _k, getattr(_Nccl, _k))
_sys.modules[nccl.__name__] = nccl
del _k
