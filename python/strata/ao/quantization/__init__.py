"""torch.ao.quantization (also strata.quantization): dynamic quantization of nn.Linear with torch's default
dynamic qconfig (qint8 weights per tensor, activations quantized per batch at run time) or float16 weights.
Static quantization (prepare/convert with calibration), QAT and quantized RNNs are not implemented."""

import copy
import warnings

from ... import _C
from ... import _quantized as Q
from .observer import (MinMaxObserver, ObserverBase, PerChannelMinMaxObserver, PlaceholderObserver,  # noqa: F401
                       default_dynamic_quant_observer, default_observer, default_per_channel_weight_observer,
                       default_weight_observer)
from .qconfig import (QConfig, QConfigDynamic, default_dynamic_qconfig, float16_dynamic_qconfig,  # noqa: F401
                      per_channel_dynamic_qconfig)

__all__ = ["quantize_dynamic", "QConfig", "QConfigDynamic", "default_dynamic_qconfig", "float16_dynamic_qconfig",
           "per_channel_dynamic_qconfig", "MinMaxObserver", "PerChannelMinMaxObserver", "PlaceholderObserver",
           "default_weight_observer", "default_dynamic_quant_observer", "default_per_channel_weight_observer",
           "get_default_dynamic_quant_module_mappings"]


def get_default_dynamic_quant_module_mappings():
    from ...nn import Linear
    from ..nn.quantized import dynamic
    return {Linear: dynamic.Linear}


def _rnn_types():
    from ... import nn
    return tuple(getattr(nn, n) for n in ("LSTM", "GRU", "LSTMCell", "RNNCell", "GRUCell") if hasattr(nn, n))


def quantize_dynamic(model, qconfig_spec=None, dtype=Q.qint8, mapping=None, inplace=False):
    """torch.ao.quantization.quantize_dynamic: a copy of model (unless inplace) whose nn.Linear submodules
    named by qconfig_spec (a set of module types, or a dict from types or qualified names to QConfigs) are
    replaced by dynamically quantized ones; the result is in eval mode, as torch's. Recurrent layers are not quantized: with the default spec they
    stay float (with a warning); named explicitly they raise."""
    from ... import nn
    if dtype is Q.qint8:
        default = default_dynamic_qconfig
    elif dtype is _C.float16:
        default = float16_dynamic_qconfig
    else:
        raise ValueError(f"Don't know how to quantize with default settings for {dtype!r}. Provide full "
                         "qconfig please")
    rnn = _rnn_types()
    if qconfig_spec is None:
        spec = {nn.Linear: default}
        if any(isinstance(m, rnn) for m in model.modules()):
            warnings.warn("quantize_dynamic: recurrent layers (LSTM, GRU, ...) are not quantized by Strata; they "
                          "stay float", stacklevel=2)
    elif isinstance(qconfig_spec, (set, frozenset, list, tuple)):
        spec = {}
        for k in qconfig_spec:
            if isinstance(k, type) and issubclass(k, rnn):
                raise NotImplementedError(f"quantize_dynamic: dynamic quantization of {k.__name__} is not "
                                          "implemented in Strata (only nn.Linear)")
            spec[k] = default
    elif isinstance(qconfig_spec, dict):
        spec = dict(qconfig_spec)
        for k in spec:
            if isinstance(k, type) and issubclass(k, rnn):
                raise NotImplementedError(f"quantize_dynamic: dynamic quantization of {k.__name__} is not "
                                          "implemented in Strata (only nn.Linear)")
    else:
        raise TypeError(f"quantize_dynamic: qconfig_spec must be a set or dict, got {type(qconfig_spec).__name__}")
    mapping = get_default_dynamic_quant_module_mappings() if mapping is None else mapping
    if not inplace:
        model = copy.deepcopy(model)
    model.eval()  # as torch's quantize_dynamic

    def qconfig_for(name, mod, parent_qconfig):
        qc = parent_qconfig
        if type(mod) in spec:
            qc = spec[type(mod)]
        if name in spec:
            qc = spec[name]
        return qc

    def convert(mod, prefix, parent_qconfig):
        for name, child in list(mod.named_children()):
            full = f"{prefix}.{name}" if prefix else name
            qc = qconfig_for(full, child, parent_qconfig)
            target = mapping.get(type(child))
            if qc is not None and target is not None:
                child.qconfig = qc
                new = target.from_float(child)
                del child.qconfig
                setattr(mod, name, new)
            else:
                convert(child, full, qc)

    convert(model, "", spec.get("", None))
    return model
