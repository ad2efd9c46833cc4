"""Observers that choose quantization parameters (torch.ao.quantization.observer): MinMaxObserver,
PerChannelMinMaxObserver, PlaceholderObserver, with torch's formulas for scale and zero point."""

import functools

from ... import _C
from ... import _quantized as Q
from ...nn.modules.module import Module

_EPS = 1.1920928955078125e-07  # float32 machine epsilon (torch.finfo(torch.float32).eps)


class _PartialWrapper:
    """What Observer.with_args returns: calling it builds the observer; repr like torch's."""

    def __init__(self, p):
        self.p = p

    def __call__(self, *args, **kwargs):
        return self.p(*args, **kwargs)

    def __repr__(self):
        return self.p.__repr__()

    def with_args(self, **kwargs):
        return _PartialWrapper(functools.partial(self.p, **kwargs))


def _range(dtype, reduce_range, quant_min, quant_max):
    if quant_min is not None and quant_max is not None:
        return quant_min, quant_max
    if dtype is Q.qint8:
        return (-64, 63) if reduce_range else (-128, 127)
    if dtype is Q.quint8:
        return (0, 127) if reduce_range else (0, 255)
    if dtype is Q.qint32:
        return -(2 ** 31), 2 ** 31 - 1
    return 0, 255


class ObserverBase(Module):
    def __init__(self, dtype):
        super().__init__()
        self.dtype = dtype

    @classmethod
    def with_args(cls, **kwargs):
        return _PartialWrapper(functools.partial(cls, **kwargs))


class _MinMaxBase(ObserverBase):
    def __init__(self, dtype=Q.quint8, qscheme=Q.per_tensor_affine, reduce_range=False, quant_min=None,
                 quant_max=None, factory_kwargs=None, eps=_EPS, is_dynamic=False, **kwargs):
        super().__init__(dtype)
        if dtype not in (Q.qint8, Q.quint8, Q.qint32):
            raise ValueError(f"{type(self).__name__}: dtype {dtype!r} is not a quantized dtype")
        self.qscheme = qscheme
        self.reduce_range = reduce_range
        self.quant_min, self.quant_max = _range(dtype, reduce_range, quant_min, quant_max)
        self.eps = eps
        self.is_dynamic = is_dynamic

    def _qparams(self, min_val, max_val):
        """torch's _calculate_qparams: min/max widened to include 0; symmetric or affine."""
        from ... import zeros_like, maximum, minimum, full_like
        qmin, qmax = self.quant_min, self.quant_max
        min_neg = minimum(min_val, zeros_like(min_val))
        max_pos = maximum(max_val, zeros_like(max_val))
        zero_point = zeros_like(min_val, dtype=_C.int64)
        if self.qscheme in (Q.per_tensor_symmetric, Q.per_channel_symmetric):
            max_pos = maximum(-min_neg, max_pos)
            scale = max_pos / (float(qmax - qmin) / 2)
            scale = maximum(scale, full_like(scale, self.eps))
            if self.dtype is Q.quint8:
                zero_point = full_like(zero_point, (qmin + qmax) // 2)
        else:
            scale = (max_pos - min_neg) / float(qmax - qmin)
            scale = maximum(scale, full_like(scale, self.eps))
            zero_point = qmin - (min_neg / scale).round().to(_C.int64)
            zero_point = zero_point.clamp(qmin, qmax)
        return scale, zero_point


class MinMaxObserver(_MinMaxBase):
    def __init__(self, dtype=Q.quint8, qscheme=Q.per_tensor_affine, reduce_range=False, quant_min=None,
                 quant_max=None, factory_kwargs=None, eps=_EPS, is_dynamic=False, **kwargs):
        super().__init__(dtype, qscheme, reduce_range, quant_min, quant_max, factory_kwargs, eps, is_dynamic)
        if qscheme not in (Q.per_tensor_affine, Q.per_tensor_symmetric):
            raise NotImplementedError(f"MinMaxObserver: qscheme {qscheme!r} is not per-tensor")
        from ... import tensor
        self.min_val = tensor(float("inf"))
        self.max_val = tensor(float("-inf"))

    def forward(self, x):
        if x.numel() == 0:
            return x
        x_ = x.detach().float()
        from ... import minimum, maximum
        self.min_val = minimum(x_.min(), self.min_val)
        self.max_val = maximum(x_.max(), self.max_val)
        return x

    def calculate_qparams(self):
        return self._qparams(self.min_val, self.max_val)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}"


class PerChannelMinMaxObserver(_MinMaxBase):
    def __init__(self, ch_axis=0, dtype=Q.quint8, qscheme=Q.per_channel_affine, reduce_range=False, quant_min=None,
                 quant_max=None, factory_kwargs=None, eps=_EPS, is_dynamic=False, **kwargs):
        super().__init__(dtype, qscheme, reduce_range, quant_min, quant_max, factory_kwargs, eps, is_dynamic)
        if qscheme not in (Q.per_channel_affine, Q.per_channel_symmetric):
            raise NotImplementedError(f"PerChannelMinMaxObserver: qscheme {qscheme!r} is not per-channel")
        self.ch_axis = ch_axis
        self.min_val = None
        self.max_val = None

    def forward(self, x):
        if x.numel() == 0:
            return x
        y = x.detach().float().movedim(self.ch_axis, 0).reshape(x.shape[self.ch_axis], -1)
        from ... import minimum, maximum
        mn, mx = y.amin(1), y.amax(1)
        self.min_val = mn if self.min_val is None else minimum(mn, self.min_val)
        self.max_val = mx if self.max_val is None else maximum(mx, self.max_val)
        return x

    def calculate_qparams(self):
        if self.min_val is None:
            raise RuntimeError("PerChannelMinMaxObserver: calculate_qparams() before any input was observed")
        return self._qparams(self.min_val, self.max_val)


class PlaceholderObserver(ObserverBase):
    """Records nothing: carries the dtype (and whether quantization is dynamic) for convert."""

    def __init__(self, dtype=_C.float32, custom_op_name="", compute_dtype=None, quant_min=None, quant_max=None,
                 qscheme=None, eps=None, is_dynamic=False):
        super().__init__(dtype)
        self.qscheme = Q.per_tensor_affine if qscheme is None else qscheme
        self.quant_min, self.quant_max = quant_min, quant_max
        self.is_dynamic = is_dynamic

    def forward(self, x):
        return x

    def calculate_qparams(self):
        raise Exception("calculate_qparams should not be called for PlaceholderObserver")  # noqa: TRY002


default_dynamic_quant_observer = PlaceholderObserver.with_args(dtype=Q.quint8, quant_min=0, quant_max=255,
                                                               is_dynamic=True)
default_weight_observer = MinMaxObserver.with_args(dtype=Q.qint8, qscheme=Q.per_tensor_symmetric)
default_per_channel_weight_observer = PerChannelMinMaxObserver.with_args(dtype=Q.qint8,
                                                                         qscheme=Q.per_channel_symmetric)
default_observer = MinMaxObserver.with_args(quant_min=0, quant_max=127)
