"""strata.nn.attention: choosing the scaled-dot-product-attention implementation.

On the CPU Strata has two: its fused kernel (FLASH_ATTENTION, used when there
is no dropout) and the composite math path (MATH: matmul, softmax, matmul;
also the one that does dropout). `sdpa_kernel` restricts the choice inside
its block, as torch's does: MATH alone forces the composite path;
FLASH_ATTENTION alone keeps the fused one (dropout still takes the math path,
the only one with dropout); a set with neither (EFFICIENT_ATTENTION or
CUDNN_ATTENTION, GPU-only kernels) leaves no CPU implementation, and
scaled_dot_product_attention raises RuntimeError."""

import contextlib
import enum

from ...backends import cuda as _cuda

__all__ = ["SDPBackend", "sdpa_kernel", "WARN_FOR_UNFUSED_KERNELS"]

WARN_FOR_UNFUSED_KERNELS = False


class SDPBackend(enum.IntEnum):
    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4


_cuda.SDPBackend = SDPBackend  # torch.backends.cuda.SDPBackend is this enum (set here: backends loads first)

_FLAG = {SDPBackend.MATH: "math", SDPBackend.FLASH_ATTENTION: "flash",
         SDPBackend.EFFICIENT_ATTENTION: "mem_efficient", SDPBackend.CUDNN_ATTENTION: "cudnn"}


@contextlib.contextmanager
def sdpa_kernel(backends, set_priority=False):
    """Inside the block only the listed backends (one SDPBackend or a list) may
    run scaled_dot_product_attention."""
    if isinstance(backends, SDPBackend):
        backends = [backends]
    backends = list(backends)
    for b in backends:
        if not isinstance(b, SDPBackend):
            raise AssertionError("Backend must be an instance of SDPBackend")
    prev = dict(_cuda._sdp_enabled)
    _cuda._set_sdp({flag: b in backends for b, flag in _FLAG.items()})
    try:
        yield
    finally:
        _cuda._set_sdp(prev)

