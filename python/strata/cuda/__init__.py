"""strata.cuda: torch.cuda's API over Strata's CUDA backend (src/backends/cuda/).

The driver is loaded at run time (libcuda.so.1; or the fake driver of the tests with STRATA_CUDA_DRIVER=fake).
Where it cannot be loaded, or sees no device, this module answers as torch's CPU-only build does: the queries
(`is_available`, `device_count`, memory counters) say "no device", the seeding calls are no-ops, and everything
that needs a live device raises AssertionError naming the function and `is_available_reason()`. Scripts that
branch on `strata.cuda.is_available()` therefore take their CPU path."""


from .. import _C

__all__ = [
    "is_available", "device_count", "is_initialized", "init", "current_device", "set_device", "get_device_name",
    "get_device_capability", "get_device_properties", "synchronize", "empty_cache", "ipc_collect", "manual_seed",
    "manual_seed_all", "seed", "seed_all", "initial_seed", "get_rng_state", "get_rng_state_all", "set_rng_state",
    "set_rng_state_all", "is_bf16_supported", "memory_allocated", "max_memory_allocated", "memory_reserved",
    "max_memory_reserved", "memory_stats", "memory_summary", "reset_peak_memory_stats",
    "reset_max_memory_allocated", "reset_accumulated_memory_stats", "mem_get_info", "get_arch_list", "Event",
    "Stream", "current_stream", "default_stream", "stream", "device", "device_of", "amp", "is_available_reason",
    "set_stream", "StreamContext", "graph_pool_handle", "set_sync_debug_mode", "get_sync_debug_mode",
]


_cc = _C._cuda


def _cublas_dirs():
    """Where the nvidia-cublas wheel puts libcublas.so.13 (nvidia/cu13/lib; nvidia/cublas/lib in older wheels),
    under each sys.path entry: the places Strata's cuBLAS loader tries after STRATA_CUBLAS_DIR (docs/CUDA.md)."""
    import os
    import sys

    found = []
    for p in sys.path:
        for sub in ("nvidia/cu13/lib", "nvidia/cublas/lib"):
            d = os.path.join(p or ".", sub)
            if d not in found and os.path.isdir(d):
                found.append(d)
    return found


_cc.set_cublas_search_dirs(_cublas_dirs())


def is_available_reason():
    """Why CUDA is not available in this process ("" when it is): e.g. no NVIDIA driver (libcuda.so.1 missing)."""
    return _cc.unavailable_reason()


def _no_cuda(what):
    return AssertionError(f"CUDA unavailable: strata.cuda.{what}() needs a CUDA device, and this process has no "
                          f"CUDA backend ({is_available_reason()})")


def is_available():
    return _cc.is_available()


def device_count():
    return _cc.device_count()


_initialized = False


def _lazy_init(what="init"):
    global _initialized
    if not is_available():
        raise _no_cuda(what)
    _cc.lazy_init()
    _initialized = True


def is_initialized():
    return _initialized


def init():
    _lazy_init("init")


def current_device():
    _lazy_init("current_device")
    return _cc.current_device()


def _device_index(dev, what, optional=False):
    # torch rejects a non-CUDA device before it looks for the backend.
    if isinstance(dev, str):
        dev = _C.device(dev)
    if isinstance(dev, _C.device) and dev.type != "cuda":
        raise ValueError(f"Expected a cuda device, but got: {dev}")
    _lazy_init(what)
    if dev is None:
        return _cc.current_device()
    if isinstance(dev, _C.device):
        return _cc.current_device() if dev.index is None else dev.index
    if isinstance(dev, Stream):
        return dev.device_index
    return int(dev)


def set_device(device):
    d = _device_index(device, "set_device")
    if d >= 0:
        _cc.set_device(d)


def get_device_name(device=None):
    return _cc.get_device_properties(_device_index(device, "get_device_name"))["name"]


def get_device_capability(device=None):
    p = _cc.get_device_properties(_device_index(device, "get_device_capability"))
    return (p["major"], p["minor"])


class _CudaDeviceProperties:
    """torch.cuda.get_device_properties's answer: name, major, minor, total_memory, multi_processor_count, ..."""

    def __init__(self, d):
        self.__dict__.update(d)

    def __repr__(self):
        return (f"_CudaDeviceProperties(name='{self.name}', major={self.major}, minor={self.minor}, "
                f"total_memory={self.total_memory // (1 << 20)}MB, multi_processor_count={self.multi_processor_count}, "
                f"L2_cache_size={self.L2_cache_size // (1 << 20)}MB)")


def get_device_properties(device=None):
    return _CudaDeviceProperties(_cc.get_device_properties(_device_index(device, "get_device_properties")))


def synchronize(device=None):
    """Waits for all work queued on the device (every stream)."""
    _cc.synchronize(_device_index(device, "synchronize"))


def ipc_collect():
    raise _no_cuda("ipc_collect")


def empty_cache():
    """Releases the caching allocator's unused cached segments to the driver (a no-op without CUDA, as torch)."""
    if is_available():
        _cc.empty_cache()
    return None


def mem_get_info(device=None):
    """(free, total) bytes of the device, as the driver reports them."""
    return tuple(_cc.mem_get_info(_device_index(device, "mem_get_info")))


def get_arch_list():
    # Strata's CUDA kernels are compiled at run time (NVRTC) for the device at hand, not shipped for a list.
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
    return is_available() and get_device_capability()[0] >= 8


# ---- the caching allocator's figures (src/backends/cuda/caching_allocator.h) -------------------------------
def _stats_index(device):
    """The device index for a memory query, or None without CUDA (every figure is then 0)."""
    if not is_available():
        return None
    return _device_index(device, "memory_stats")


def memory_stats(device=None):
    """The caching allocator's counters under torch's keys ("allocated_bytes.all.current", ...), sorted."""
    d = _stats_index(device)
    if d is None:
        return {}
    return dict(sorted(_cc.memory_stats(d).items()))


def _stat(device, key):
    d = _stats_index(device)
    return 0 if d is None else _cc.memory_stats(d)[key]


def memory_allocated(device=None):
    return _stat(device, "allocated_bytes.all.current")


def max_memory_allocated(device=None):
    return _stat(device, "allocated_bytes.all.peak")


def memory_reserved(device=None):
    return _stat(device, "reserved_bytes.all.current")


def max_memory_reserved(device=None):
    return _stat(device, "reserved_bytes.all.peak")


def memory_summary(device=None, abbreviated=False):
    return _cc.memory_summary(_device_index(device, "memory_summary"))


def reset_peak_memory_stats(device=None):
    _cc.reset_peak_memory_stats(_device_index(device, "reset_peak_memory_stats"))


def reset_max_memory_allocated(device=None):
    _cc.reset_peak_memory_stats(_device_index(device, "reset_max_memory_allocated"))


def reset_accumulated_memory_stats(device=None):
    _cc.reset_accumulated_memory_stats(_device_index(device, "reset_accumulated_memory_stats"))


_SYNC_MODES = {"default": 0, "warn": 1, "error": 2}


def set_sync_debug_mode(debug_mode):
    """Reports each implicit host-device synchronization (a copy to the host: .cpu(), .item(), .tolist(), print,
    bool(); a blocking copy from the host): 0/"default" silent, 1/"warn" a UserWarning, 2/"error" a
    RuntimeError. Explicit waits (synchronize(), Stream/Event.synchronize) are not reported."""
    if isinstance(debug_mode, str):
        if debug_mode not in _SYNC_MODES:
            raise RuntimeError('invalid value of debug_mode, expected one of "default", "warn", "error"')
        debug_mode = _SYNC_MODES[debug_mode]
    _cc.set_sync_debug_mode(int(debug_mode))


def get_sync_debug_mode():
    return _cc.get_sync_debug_mode()


def graph_pool_handle():
    """A new private memory pool id, for allocations that must keep their addresses (CUDA graph capture)."""
    _lazy_init("graph_pool_handle")
    return _cc.new_pool_id()


def _begin_allocate_to_pool(device, pool, stream=None):
    _cc.begin_allocate_to_pool(_device_index(device, "_begin_allocate_to_pool"), pool,
                               None if stream is None else stream.cuda_stream)


def _end_allocate_to_pool(device, pool):
    _cc.end_allocate_to_pool(_device_index(device, "_end_allocate_to_pool"), pool)


def _release_pool(device, pool):
    _cc.release_pool(_device_index(device, "_release_pool"), pool)


# ---- streams and events ---------------------------------------------------------------------
from . import streams as _streams  # noqa: E402


class Stream(_streams.Stream):
    """A CUDA stream (strata.cuda.streams.Stream). Needs a CUDA device: without one, constructing it raises."""

    def __new__(cls, *args, **kwargs):
        if not is_available():
            raise RuntimeError(f"strata.cuda.Stream requires CUDA support: {is_available_reason()}")
        return super().__new__(cls)


class Event(_streams.Event):
    """A CUDA event (strata.cuda.streams.Event). Needs a CUDA device: without one, constructing it raises."""

    def __new__(cls, *args, **kwargs):
        if not is_available():
            raise RuntimeError(f"strata.cuda.Event requires CUDA support: {is_available_reason()}")
        return super().__new__(cls)


_streams.Stream = Stream  # so that the runtime's streams are instances of the public class
_streams.Event = Event


def current_stream(device=None):
    return Stream._wrap(_cc.current_stream(_device_index(device, "current_stream")))


def default_stream(device=None):
    return Stream._wrap(_cc.default_stream(_device_index(device, "default_stream")))


def set_stream(stream):
    if stream is not None:
        _lazy_init("set_stream")
        _streams.set_stream(stream)


class StreamContext(_streams.StreamContext):
    """Context manager selecting a stream; `stream(None)` is a no-op, as in torch."""

    def __init__(self, stream):
        if stream is not None:
            _lazy_init("stream")
        super().__init__(stream)


def stream(stream):
    return StreamContext(stream)


def _record_stream(self, stream):
    """Tensor.record_stream: the tensor's memory is used by `stream` too; when the tensor is freed, the caching
    allocator reuses it only after the work queued on `stream` up to then has completed."""
    _cc.record_stream(self, stream.cuda_stream, stream.device_index)


_C.Tensor.record_stream = _record_stream


class device:
    """Context manager selecting a CUDA device. `device(-1)` or `device(None)` selects nothing; without CUDA,
    entering it with a device index raises, as torch's CPU-only build does."""

    def __init__(self, device):
        if isinstance(device, (str, _C.device)):
            d = _C.device(device) if isinstance(device, str) else device
            self.idx = -1 if d.type != "cuda" else (0 if d.index is None else d.index)
        else:
            self.idx = -1 if device is None else int(device)
        self.prev_idx = -1

    def __enter__(self):
        if self.idx != -1:
            if not is_available():
                raise RuntimeError(f"CUDA unavailable: strata.cuda.device() cannot select device {self.idx} "
                                   f"({is_available_reason()})")
            self.prev_idx = _cc.current_device()
            _cc.set_device(self.idx)
        return self

    def __exit__(self, *exc):
        if self.prev_idx != -1:
            _cc.set_device(self.prev_idx)
        return False


class device_of(device):
    """Context manager selecting the device of a tensor (CPU tensors select nothing)."""

    def __init__(self, obj):
        super().__init__(obj.device if hasattr(obj, "device") else None)


class _Fake:
    """Hooks of the fake CUDA driver (STRATA_CUDA_DRIVER=fake), for tests: run a stream's queued work step by
    step, stop queries from running work, change a device's memory size."""

    @staticmethod
    def run_pending(stream=None, max_ops=1 << 62):
        s = current_stream() if stream is None else stream
        return _cc.fake_run_pending(s.cuda_stream, s.device_index, max_ops)

    @staticmethod
    def pending(stream=None):
        s = current_stream() if stream is None else stream
        return _cc.fake_pending(s.cuda_stream, s.device_index)

    set_manual_progress = staticmethod(_cc.fake_set_manual_progress)
    set_total_memory = staticmethod(_cc.fake_set_total_memory)
    used_memory = staticmethod(_cc.fake_used_memory)


_fake = _Fake()


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
