"""Whether this machine has a usable NVIDIA GPU, asked of the driver itself (ctypes: cuInit, cuDeviceGetCount), so
that it answers the same whatever driver strata picked in this process (STRATA_CUDA_DRIVER=fake included). Used by
conftest.py to skip the tests marked `cuda` (pytest.ini) where there is no GPU."""

import ctypes
import functools


@functools.lru_cache(maxsize=None)
def no_gpu_reason():
    """None when a GPU is there, else why not."""
    try:
        cu = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        return f"no NVIDIA driver (libcuda.so.1: {e})"
    rc = cu.cuInit(0)
    if rc != 0:
        return f"the NVIDIA driver's cuInit failed with CUDA error {rc}"
    n = ctypes.c_int(0)
    if cu.cuDeviceGetCount(ctypes.byref(n)) != 0 or n.value == 0:
        return "the NVIDIA driver counts no device"
    return None
