"""Dynamically quantized modules (torch.ao.nn.quantized.dynamic): Linear."""

import numpy as np

from ..... import _C
from ..... import _quantized as Q
from .....nn.modules.module import Module

__all__ = ["Linear"]

_SMALL_SCALE = 6.1e-5


def _f32(x):
    return float(np.float32(x))


def choose_qparams(x_min, x_max, qmin, qmax):
    """fbgemm's ChooseQuantizationParams as torch's dynamic linear calls it (no sparsity preservation, no
    power-of-two scale): the range widened to include 0, the scale in double rounded to float, the zero point
    from whichever end loses less, nudged into [qmin, qmax] with round-half-even."""
    x_min, x_max = _f32(min(x_min, 0.0)), _f32(max(x_max, 0.0))
    scale = (float(x_max) - x_min) / (qmax - qmin)
    if _f32(scale) == 0.0 or np.isinf(np.float32(1.0) / np.float32(scale)):
        scale = 0.1
    if scale < _SMALL_SCALE:
        org = scale
        scale = _SMALL_SCALE
        if x_min == 0:
            x_max = _f32(scale * (qmax - qmin))
        elif x_max == 0:
            x_min = _f32(-scale * (qmax - qmin))
        else:
            amp = _SMALL_SCALE / org
            x_min, x_max = _f32(x_min * amp), _f32(x_max * amp)
    zp_from_min = qmin - x_min / scale
    zp_from_max = qmax - x_max / scale
    err_min = abs(qmin) - abs(x_min / scale)
    err_max = abs(qmax) - abs(x_max / scale)
    initial = zp_from_min if err_min < err_max else zp_from_max
    if initial < qmin:
        zp = qmin
    elif initial > qmax:
        zp = qmax
    else:
        zp = int(np.rint(initial))
    return _f32(scale), zp


class Linear(Module):
    """y = x W^T + b with W stored quantized (qint8, per tensor or per channel) or as float16. For qint8 the
    input is quantized on the fly to quint8 with parameters chosen from this batch's min and max over the
    reduced range [0, 127] (reduce_range=True, torch's default for the x86/fbgemm engines; [0, 255] under
    strata.backends.quantized.engine = "qnnpack", which ignores reduce_range); the product is an exact
    integer accumulation, scaled back to float32 as fbgemm does ((acc * x_scale) * w_scale + b)."""

    _version = 4

    def __init__(self, in_features, out_features, bias_=True, dtype=Q.qint8):
        super().__init__()
        from ..... import zeros
        self.in_features, self.out_features = in_features, out_features
        if dtype is Q.qint8:
            w = Q.quantize_per_tensor(zeros(out_features, in_features), 1.0, 0, Q.qint8)
        elif dtype is _C.float16:
            w = zeros(out_features, in_features, dtype=_C.float16)
        else:
            raise RuntimeError(f"Unsupported dtype specified for dynamic quantized Linear: {dtype!r}")
        self._dtype = dtype
        self._w = w
        self._b = zeros(out_features) if bias_ else None
        self.reduce_range = True

    def _get_name(self):
        return "DynamicQuantizedLinear"

    def extra_repr(self):
        s = f"in_features={self.in_features}, out_features={self.out_features}, dtype={self._dtype!r}"
        if self._dtype is Q.qint8:
            s += f", qscheme={self._w.qscheme()!r}"
        return s

    def weight(self):
        return self._w

    def bias(self):
        return self._b

    def set_weight_bias(self, w, b):
        self._w, self._b = w, b

    # torch's state_dict keys: scale, zero_point, _packed_params.dtype, _packed_params._packed_params (weight, bias).
    def _save_to_state_dict(self, destination, prefix, keep_vars):
        from ..... import tensor
        destination[prefix + "scale"] = tensor(1.0)
        destination[prefix + "zero_point"] = tensor(0)
        destination[prefix + "_packed_params.dtype"] = self._dtype
        destination[prefix + "_packed_params._packed_params"] = (self._w, self._b)
        # torch's loader reads this layout only when the versions say so (Linear 4, LinearPackedParams 3).
        md = getattr(destination, "_metadata", None)
        if md is None:
            from collections import OrderedDict
            md = OrderedDict()
            try:
                destination._metadata = md
            except AttributeError:
                md = None
        if md is not None:
            md[prefix[:-1]] = {"version": self._version}
            md[prefix + "_packed_params"] = {"version": 3}

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        keys = [prefix + k for k in ("scale", "zero_point", "_packed_params.dtype", "_packed_params._packed_params")]
        for k in keys:
            if k not in state_dict:
                if strict:
                    missing_keys.append(k)
        if keys[3] in state_dict:
            w, b = state_dict[keys[3]]
            want = self._dtype
            got = w.dtype
            if got is not want:
                error_msgs.append(f"{keys[3]}: expected a {want!r} weight, got {got!r}")
                return
            if tuple(w.shape) != (self.out_features, self.in_features):
                error_msgs.append(f"size mismatch for {keys[3]}: copying a weight of shape {list(w.shape)}, the "
                                  f"module expects {[self.out_features, self.in_features]}")
                return
            self.set_weight_bias(w, b)
        if strict:
            for k in state_dict:
                if k.startswith(prefix) and k not in keys and "." not in k[len(prefix):]:
                    unexpected_keys.append(k)

    def forward(self, x):
        from ..... import nn
        if self._dtype is _C.float16:
            return nn.functional.linear(x, self._w.float(), self._b)
        if x.dtype is not _C.float32:
            raise RuntimeError(f"DynamicQuantizedLinear: expected a float32 input, got {x.dtype}")
        if x.shape[-1] != self.in_features:
            raise RuntimeError(f"DynamicQuantizedLinear: input has {x.shape[-1]} features, expected "
                               f"{self.in_features} (input shape {list(x.shape)})")
        xd = x.detach()
        lead = tuple(x.shape[:-1])
        x2 = xd.reshape(-1, self.in_features)
        if x2.numel():
            x_min, x_max = x2.min().item(), x2.max().item()
        else:
            x_min = x_max = 0.0
        from .....backends import quantized as _engine
        qmax = 127 if self.reduce_range and _engine.engine != "qnnpack" else 255
        x_scale, x_zp = choose_qparams(x_min, x_max, 0, qmax)
        inv = _f32(np.float32(1.0) / np.float32(x_scale))
        xq = (x2.float() * inv + x_zp).round().double().clamp(0, 255)
        wq, _, w_scale, w_zp, scales, zps, axis = _C._quant_parts(self._w)
        wd = wq.double()
        if scales is None:
            wd = wd - w_zp
            w_scale_t = _f32(w_scale)
        else:
            wd = wd - zps.double().reshape(-1, 1)
            w_scale_t = scales.float()
        # Exact: |acc| < 2^53 for any realistic in_features (|terms| <= 255 * 255).
        acc = (xq - x_zp) @ wd.t()
        out = acc.float() * x_scale * w_scale_t
        if self._b is not None:
            out = out + self._b
        return out.reshape(lead + (self.out_features,))

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        from .....nn import Linear as FloatLinear
        if type(mod) is not FloatLinear and type(mod) is not cls:
            raise TypeError(f"nnqd.Linear.from_float only works for nn.Linear, got {type(mod).__name__}")
        qconfig = getattr(mod, "qconfig", None)
        if qconfig is None:
            raise AssertionError("Input float module must have qconfig defined")
        observer = qconfig.weight()
        dtype = observer.dtype
        if dtype not in (Q.qint8, _C.float16):
            raise RuntimeError(f"The only supported dtypes for dynamic quantized linear are qint8 and float16, got: "
                               f"{dtype!r}")
        w = mod.weight.detach().float()
        observer(w)
        q = cls(mod.in_features, mod.out_features, mod.bias is not None, dtype=dtype)
        if dtype is Q.qint8:
            scale, zp = observer.calculate_qparams()
            if observer.qscheme in (Q.per_channel_affine, Q.per_channel_symmetric):
                wq = Q.quantize_per_channel(w, scale.double(), zp.long(), observer.ch_axis, Q.qint8)
            else:
                wq = Q.quantize_per_tensor(w, float(scale.item()), int(zp.item()), Q.qint8)
        else:
            wq = w.to(_C.float16)
        q.set_weight_bias(wq, None if mod.bias is None else mod.bias.detach().float().clone())
        return q
