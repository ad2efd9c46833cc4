"""Folding an eval-mode BatchNorm into the preceding convolution or linear layer (torch.nn.utils.fusion)."""

import copy

from ..parameter import Parameter

__all__ = ["fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval", "fuse_linear_bn_weights"]


def fuse_conv_bn_eval(conv, bn, transpose=False):
    """A copy of ``conv`` whose weight and bias include ``bn``'s normalisation (both must be in eval mode)."""
    if conv.training or bn.training:
        raise AssertionError("Fusion only for eval!")
    fused = copy.deepcopy(conv)
    if bn.running_mean is None or bn.running_var is None:
        raise AssertionError("BatchNorm must track running statistics to be fused")
    fused.weight, fused.bias = fuse_conv_bn_weights(fused.weight, fused.bias, bn.running_mean, bn.running_var,
                                                    bn.eps, bn.weight, bn.bias, transpose)
    return fused


def fuse_conv_bn_weights(conv_w, conv_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b, transpose=False):
    """``w * gamma / sqrt(var + eps)`` (per output channel) and ``(b - mean) * gamma / sqrt(var + eps) + beta``."""
    from ... import zeros_like, ones_like

    w_dtype = conv_w.dtype
    b_dtype = conv_b.dtype if conv_b is not None else w_dtype
    if conv_b is None:
        conv_b = zeros_like(bn_rm)
    if bn_w is None:
        bn_w = ones_like(bn_rm)
    if bn_b is None:
        bn_b = zeros_like(bn_rm)
    rsqrt = (bn_rv + bn_eps).rsqrt()
    shape = ([1, -1] if transpose else [-1, 1]) + [1] * (conv_w.dim() - 2)
    fused_w = (conv_w * (bn_w * rsqrt).reshape(shape)).to(w_dtype)
    fused_b = ((conv_b - bn_rm) * rsqrt * bn_w + bn_b).to(b_dtype)
    return (Parameter(fused_w.detach(), conv_w.requires_grad),
            Parameter(fused_b.detach(), conv_b.requires_grad))


def fuse_linear_bn_eval(linear, bn):
    """A copy of ``linear`` whose weight and bias include ``bn``'s normalisation (both must be in eval mode)."""
    if linear.training or bn.training:
        raise AssertionError("Fusion only for eval!")
    if not (linear.out_features == bn.num_features or bn.num_features == 1):
        raise AssertionError("To fuse, linear.out_features == bn.num_features or bn.num_features == 1")
    if bn.running_mean is None or bn.running_var is None:
        raise AssertionError("BatchNorm must track running statistics to be fused")
    fused = copy.deepcopy(linear)
    fused.weight, fused.bias = fuse_linear_bn_weights(fused.weight, fused.bias, bn.running_mean, bn.running_var,
                                                      bn.eps, bn.weight, bn.bias)
    return fused


def fuse_linear_bn_weights(linear_w, linear_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b):
    from ... import zeros_like

    if linear_b is None:
        linear_b = zeros_like(bn_rm)
    bn_scale = bn_w * (bn_rv + bn_eps).rsqrt()
    fused_w = linear_w * bn_scale.unsqueeze(-1)
    fused_b = (linear_b - bn_rm) * bn_scale + bn_b
    return (Parameter(fused_w.detach(), linear_w.requires_grad),
            Parameter(fused_b.detach(), linear_b.requires_grad))
