"""InstanceNorm1d/2d/3d, LocalResponseNorm and CrossMapLRN2d."""

import warnings

from .. import functional as F
from .module import Module
from .normalization import _NormBase

__all__ = ["InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "LocalResponseNorm", "CrossMapLRN2d"]


class _InstanceNorm(_NormBase):
    """Per-sample, per-channel normalisation over the spatial dims. Unlike BatchNorm the defaults are
    ``affine=False`` and ``track_running_stats=False``; with running stats, eval mode uses them."""

    _no_batch_dim = None

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False, track_running_stats=False, device=None,
                 dtype=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)

    def _check_input_dim(self, input):
        d = self._no_batch_dim
        if input.dim() not in (d, d + 1):
            raise ValueError(f"expected {d}D or {d + 1}D input (got {input.dim()}D input)")

    def forward(self, input):
        self._check_input_dim(input)
        feature_dim = input.dim() - self._no_batch_dim
        if input.shape[feature_dim] != self.num_features:
            if self.affine:
                raise ValueError(f"expected input's size at dim={feature_dim} to match num_features "
                                 f"({self.num_features}), but got: {input.shape[feature_dim]}.")
            warnings.warn(f"input's size at dim={feature_dim} does not match num_features. You can silence this "
                          "warning by not passing in num_features, which is not used because affine=False")
        unbatched = input.dim() == self._no_batch_dim
        x = input.unsqueeze(0) if unbatched else input
        out = F.instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                              self.training or not self.track_running_stats,
                              self.momentum if self.momentum is not None else 0.0, self.eps)
        return out.squeeze(0) if unbatched else out


class InstanceNorm1d(_InstanceNorm):
    _no_batch_dim = 2


class InstanceNorm2d(_InstanceNorm):
    _no_batch_dim = 3


class InstanceNorm3d(_InstanceNorm):
    _no_batch_dim = 4


class LocalResponseNorm(Module):
    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input):
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return "{size}, alpha={alpha}, beta={beta}, k={k}".format(**self.__dict__)


def _lrn_fn():
    global _LRN_FN
    if _LRN_FN is None:
        from ...autograd import Function

        class CrossMapLRN2dFunction(Function):
            @staticmethod
            def forward(ctx, input, size, alpha, beta, k):
                output, scale = _cross_map_forward(input, size, alpha, beta, k)
                ctx.save_for_backward(input, output)
                ctx.scale, ctx.size, ctx.alpha, ctx.beta = scale, size, alpha, beta
                return output

            @staticmethod
            def backward(ctx, grad_output):
                input, output = ctx.saved_tensors
                return _cross_map_backward(input, output, ctx.scale, grad_output, ctx.size, ctx.alpha,
                                           ctx.beta), None, None, None, None

        _LRN_FN = CrossMapLRN2dFunction
    return _LRN_FN


_LRN_FN = None


def _st():
    from .. import _functional_more as more

    return more._st()


def _cross_map_forward(input, size, alpha, beta, k):
    # The legacy layer's running window: channels 0..pre_pad-1 for channel 0, then one channel enters at
    # c + pre_pad - 1 and one leaves at c - pre_pad for c > pre_pad -- so channel 0 never leaves (kept as is).
    st = _st()
    c = input.shape[1]
    pre_pad = int((size - 1) / 2 + 1)
    sq = input * input
    csum = sq.cumsum(1)
    hi = [min(ch + pre_pad - 1, c - 1) for ch in range(c)]
    top = csum.index_select(1, st.tensor(hi, dtype=st.int64))
    lo_idx = [ch - pre_pad if ch > pre_pad else 0 for ch in range(c)]
    lo = csum.index_select(1, st.tensor(lo_idx, dtype=st.int64)) - sq.narrow(1, 0, 1)
    has_lo = st.tensor([ch > pre_pad for ch in range(c)]).reshape(1, c, 1, 1)
    window = top - st.where(has_lo, lo, st.zeros_like(lo))
    scale = window * (alpha / size) + k
    return input * (scale.log() * -beta).exp(), scale


def _cross_map_backward(input, output, scale, grad_output, size, alpha, beta):
    # The legacy layer's own backward formula (a symmetric-window gradient, not the exact derivative of the
    # forward's window above), reproduced as torch runs it.
    st = _st()
    n, c = input.shape[0], input.shape[1]
    inverse_pre_pad = int(size - (size - 1) / 2)
    if inverse_pre_pad + c > c + size - 1:
        raise RuntimeError(f"start ({inverse_pre_pad}) + length ({c}) exceeds dimension size ({c + size - 1}).")
    grad_input = (scale.log() * -beta).exp() * grad_output
    ratio = grad_output * output / scale
    rest = tuple(input.shape[2:])
    before = st.zeros((n, inverse_pre_pad) + rest, dtype=input.dtype)
    after = st.zeros((n, size - 1 - inverse_pre_pad) + rest, dtype=input.dtype)
    padded = st.cat([before, ratio, after], 1)
    accum = padded.narrow(1, 0, c)
    for i in range(1, size):
        accum = accum + padded.narrow(1, i, c)
    return grad_input - input * accum * (2 * alpha * beta / size)


class CrossMapLRN2d(Module):
    """The legacy (Lua torch) cross-channel LRN on 4-D input: ``x * (k + alpha/size * window sum of x^2)^-beta``,
    with that layer's window and hand-written backward, so values and gradients are torch's."""

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input):
        if input.dim() != 4:
            raise ValueError(f"CrossMapLRN2d: Expected input to be 4D, got {input.dim()}D instead.")
        return _lrn_fn().apply(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return "{size}, alpha={alpha}, beta={beta}, k={k}".format(**self.__dict__)
