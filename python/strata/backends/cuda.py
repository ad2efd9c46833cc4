"""strata.backends.cuda: CUDA switches. Strata has no CUDA backend
(`is_built()` is False); the switches are kept so scripts can set and read
them, and the scaled-dot-product-attention backend flags are the state that
strata.nn.attention.sdpa_kernel saves and restores."""

import contextlib

from .. import backends as _backends

__all__ = ["is_built", "matmul", "flash_sdp_enabled", "enable_flash_sdp", "mem_efficient_sdp_enabled",
           "enable_mem_efficient_sdp", "math_sdp_enabled", "enable_math_sdp", "cudnn_sdp_enabled",
           "enable_cudnn_sdp", "sdp_kernel"]


def is_built():
    return False


class _Matmul:
    """strata.backends.cuda.matmul: `allow_tf32` mirrors the float32 matmul
    precision ('highest' means no TF32), as in torch."""

    allow_fp16_reduced_precision_reduction = True
    allow_bf16_reduced_precision_reduction = True

    @property
    def allow_tf32(self):
        return _backends.get_float32_matmul_precision() != "highest"

    @allow_tf32.setter
    def allow_tf32(self, value):
        _backends.set_float32_matmul_precision("high" if value else "highest")

    def __setattr__(self, name, value):
        if name not in ("allow_tf32", "allow_fp16_reduced_precision_reduction",
                        "allow_bf16_reduced_precision_reduction", "allow_fp16_accumulation"):
            raise AttributeError(f"Unknown attribute {name}")
        object.__setattr__(self, name, value)


matmul = _Matmul()

# Which scaled-dot-product-attention implementations may run (torch.nn.attention.SDPBackend).
_sdp_enabled = {"flash": True, "mem_efficient": True, "math": True, "cudnn": True}


def _set_sdp(flags):
    _sdp_enabled.update(flags)
    # strata.nn.functional.scaled_dot_product_attention reads two module
    # globals rather than this dict, to keep its per-call cost at two lookups.
    from ..nn import functional as F

    F._sdpa_fused_ok = _sdp_enabled["flash"]
    F._sdpa_math_ok = _sdp_enabled["math"]


def flash_sdp_enabled():
    return _sdp_enabled["flash"]


def enable_flash_sdp(enabled):
    _set_sdp({"flash": bool(enabled)})


def mem_efficient_sdp_enabled():
    return _sdp_enabled["mem_efficient"]


def enable_mem_efficient_sdp(enabled):
    _set_sdp({"mem_efficient": bool(enabled)})


def math_sdp_enabled():
    return _sdp_enabled["math"]


def enable_math_sdp(enabled):
    _set_sdp({"math": bool(enabled)})


def cudnn_sdp_enabled():
    return _sdp_enabled["cudnn"]


def enable_cudnn_sdp(enabled):
    _set_sdp({"cudnn": bool(enabled)})


@contextlib.contextmanager
def sdp_kernel(enable_flash=True, enable_math=True, enable_mem_efficient=True, enable_cudnn=True):
    """The older spelling of strata.nn.attention.sdpa_kernel: enables exactly the
    named implementations inside the block."""
    prev = dict(_sdp_enabled)
    _set_sdp(dict(flash=bool(enable_flash), math=bool(enable_math), mem_efficient=bool(enable_mem_efficient),
                  cudnn=bool(enable_cudnn)))
    try:
        yield
    finally:
        _set_sdp(prev)

from ._cuda_sdpa import (  # noqa: E402,F401  (SDPAParams and the can_use_* probes)
    SDPAParams, can_use_flash_attention, can_use_efficient_attention, can_use_cudnn_attention)
