"""QConfig and the dynamic-quantization presets of torch.ao.quantization.qconfig."""

from collections import namedtuple

from ... import _C
from .observer import (PlaceholderObserver, default_dynamic_quant_observer, default_per_channel_weight_observer,
                       default_weight_observer)


class QConfig(namedtuple("QConfig", ["activation", "weight"])):
    """How to observe a module's activation and weight: each is an observer class or with_args partial."""

    __slots__ = ()

    def __new__(cls, activation, weight):
        from ...nn.modules.module import Module
        if isinstance(activation, Module) or isinstance(weight, Module):
            raise ValueError("QConfig received observer instance, please pass observer class instead. Use "
                             "MyObserver.with_args(x=1) to override arguments to constructor if needed")
        return super().__new__(cls, activation, weight)


QConfigDynamic = QConfig
default_dynamic_qconfig = QConfig(activation=default_dynamic_quant_observer, weight=default_weight_observer)
per_channel_dynamic_qconfig = QConfig(activation=default_dynamic_quant_observer,
                                      weight=default_per_channel_weight_observer)
float16_dynamic_qconfig = QConfig(activation=PlaceholderObserver.with_args(dtype=_C.float16, is_dynamic=True),
                                  weight=PlaceholderObserver.with_args(dtype=_C.float16))
