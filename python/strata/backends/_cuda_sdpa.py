"""The attention-backend probes of torch.backends.cuda (its SDPBackend is
strata.nn.attention.SDPBackend, attached by that module). Without a CUDA backend no
fused kernel can run, so every probe answers False (what torch answers on a
machine without CUDA)."""

import warnings

__all__ = ["SDPAParams", "can_use_flash_attention", "can_use_efficient_attention",
           "can_use_cudnn_attention"]


class SDPAParams:
    """The arguments of one scaled_dot_product_attention call, for the can_use_* probes."""

    __slots__ = ("query", "key", "value", "attn_mask", "dropout", "is_causal", "enable_gqa")

    def __init__(self, query, key, value, attn_mask, dropout, is_causal, enable_gqa=False):
        self.query, self.key, self.value = query, key, value
        self.attn_mask, self.dropout, self.is_causal, self.enable_gqa = attn_mask, dropout, is_causal, enable_gqa


def _cannot(name, params, debug):
    if not isinstance(params, SDPAParams):
        raise TypeError(f"{name}(): argument 'params' must be SDPAParams, not {type(params).__name__}")
    if debug:
        warnings.warn(f"{name}: no CUDA backend (Strata runs on the CPU only), so this kernel cannot be used",
                      UserWarning, stacklevel=3)
    return False


def can_use_flash_attention(params, debug=False):
    """False: the flash-attention kernel needs CUDA."""
    return _cannot("can_use_flash_attention", params, debug)


def can_use_efficient_attention(params, debug=False):
    """False: the memory-efficient attention kernel needs CUDA."""
    return _cannot("can_use_efficient_attention", params, debug)


def can_use_cudnn_attention(params, debug=False):
    """False: the cuDNN attention kernel needs CUDA."""
    return _cannot("can_use_cudnn_attention", params, debug)
