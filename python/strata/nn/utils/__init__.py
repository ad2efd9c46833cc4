"""strata.nn.utils: gradient clipping and parameter/vector conversion (torch.nn.utils)."""

from .clip_grad import clip_grad_norm_, clip_grad_norm, clip_grad_value_, get_total_norm, clip_grads_with_norm_
from .convert_parameters import parameters_to_vector, vector_to_parameters
from . import rnn  # noqa: F401

__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "get_total_norm", "clip_grads_with_norm_",
           "parameters_to_vector", "vector_to_parameters"]

# Parametrizations, the legacy weight/spectral norm hooks and BatchNorm fusion.
from . import parametrize, parametrizations, fusion, prune  # noqa: E402,F401
from .weight_norm import weight_norm, remove_weight_norm  # noqa: E402,F401
from .spectral_norm import spectral_norm, remove_spectral_norm  # noqa: E402,F401
from .fusion import fuse_conv_bn_eval, fuse_conv_bn_weights, fuse_linear_bn_eval, fuse_linear_bn_weights  # noqa
__all__ += ["parametrize", "parametrizations", "weight_norm", "remove_weight_norm", "spectral_norm",
            "remove_spectral_norm", "fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval",
            "fuse_linear_bn_weights"]
