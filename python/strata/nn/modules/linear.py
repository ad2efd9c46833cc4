"""Identity, Linear, Bilinear."""

import math

from .. import functional as F
from .. import init
from ._util import as_int, new_param
from .module import Module

__all__ = ["Identity", "Linear", "Bilinear", "NonDynamicallyQuantizableLinear"]

_plain_classes = {}


def _plain_class(cls):
    """True when cls defines neither `weight` nor `bias` as a class attribute (a property from
    nn.utils.parametrize, say), so that instance attribute lookup of them falls through to _parameters."""
    r = _plain_classes.get(cls)
    if r is None:
        r = _plain_classes[cls] = not (hasattr(cls, "weight") or hasattr(cls, "bias"))
    return r


class Identity(Module):
    """Returns its input; accepts and ignores any constructor arguments."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """y = x W^T + b, with W of shape (out_features, in_features)."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features = as_int(in_features, "Linear: in_features")
        self.out_features = as_int(out_features, "Linear: out_features")
        if self.in_features < 0 or self.out_features < 0:
            raise RuntimeError(f"Linear: in_features ({in_features}) and out_features ({out_features}) must be >= 0")
        self.weight = new_param((self.out_features, self.in_features), device, dtype)
        if bias:
            self.bias = new_param((self.out_features,), device, dtype)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        # kaiming_uniform_ with a=sqrt(5) is U(-1/sqrt(fan_in), 1/sqrt(fan_in)), as is the bias.
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        # self.weight goes through Module.__getattr__ only after a failed normal lookup, which costs about as much
        # as a small linear layer itself; read _parameters directly whenever normal lookup would end up there.
        p = self._parameters
        if "weight" in p and "bias" in p:
            plain = _plain_classes.get(type(self))
            if plain is None:
                plain = _plain_class(type(self))
            if plain:
                d = self.__dict__
                if "weight" not in d and "bias" not in d:
                    return F.linear(input, p["weight"], p["bias"])
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class NonDynamicallyQuantizableLinear(Linear):
    """The Linear MultiheadAttention uses for out_proj (its own class in torch, so reprs match)."""


class Bilinear(Module):
    """y = x1^T A x2 + b, with A of shape (out_features, in1_features, in2_features)."""

    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in1_features = as_int(in1_features, "Bilinear: in1_features")
        self.in2_features = as_int(in2_features, "Bilinear: in2_features")
        self.out_features = as_int(out_features, "Bilinear: out_features")
        self.weight = new_param((self.out_features, self.in1_features, self.in2_features), device, dtype)
        if bias:
            self.bias = new_param((self.out_features,), device, dtype)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1 / math.sqrt(self.weight.shape[1]) if self.weight.shape[1] > 0 else 0
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")
