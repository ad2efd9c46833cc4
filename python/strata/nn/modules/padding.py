"""Padding layers: zero, constant, reflection, replication and circular padding in 1 to 3 dims (F.pad)."""

from .. import functional as F
from ._util import _ntuple
from .module import Module

__all__ = [
    "ZeroPad1d", "ZeroPad2d", "ZeroPad3d", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ReflectionPad1d",
    "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d",
    "CircularPad1d", "CircularPad2d", "CircularPad3d",
]


class _PadNd(Module):
    _mode = "constant"
    _dims = 1

    def __init__(self, padding, value=None):
        super().__init__()
        self.padding = _ntuple(2 * self._dims, "_pad")(padding)
        if value is not None:
            self.value = value

    def forward(self, input):
        return F.pad(input, self.padding, self._mode, getattr(self, "value", None))

    def extra_repr(self):
        if self._mode == "constant" and type(self).__name__.startswith("Constant"):
            return f"padding={self.padding}, value={self.value}"
        return f"{self.padding}"


def _layer(name, mode, dims, const=False, zero=False):
    if zero:
        def init(self, padding):
            _PadNd.__init__(self, padding, 0.0)
    elif const:
        def init(self, padding, value):
            _PadNd.__init__(self, padding, value)
    else:
        def init(self, padding):
            _PadNd.__init__(self, padding)
    cls = type(name, (_PadNd,), {"_mode": mode, "_dims": dims, "__init__": init, "__module__": __name__,
                                 "__qualname__": name})
    return cls


ZeroPad1d = _layer("ZeroPad1d", "constant", 1, zero=True)
ZeroPad2d = _layer("ZeroPad2d", "constant", 2, zero=True)
ZeroPad3d = _layer("ZeroPad3d", "constant", 3, zero=True)
ConstantPad1d = _layer("ConstantPad1d", "constant", 1, const=True)
ConstantPad2d = _layer("ConstantPad2d", "constant", 2, const=True)
ConstantPad3d = _layer("ConstantPad3d", "constant", 3, const=True)
ReflectionPad1d = _layer("ReflectionPad1d", "reflect", 1)
ReflectionPad2d = _layer("ReflectionPad2d", "reflect", 2)
ReflectionPad3d = _layer("ReflectionPad3d", "reflect", 3)
ReplicationPad1d = _layer("ReplicationPad1d", "replicate", 1)
ReplicationPad2d = _layer("ReplicationPad2d", "replicate", 2)
ReplicationPad3d = _layer("ReplicationPad3d", "replicate", 3)
CircularPad1d = _layer("CircularPad1d", "circular", 1)
CircularPad2d = _layer("CircularPad2d", "circular", 2)
CircularPad3d = _layer("CircularPad3d", "circular", 3)
