"""strata.backends.quantized: the quantized engine, as torch.backends.quantized.engine. Dynamic quantized
Linear follows it: "qnnpack" quantizes activations over the full [0, 255] range (that engine ignores
reduce_range), the others ("x86", the default, "fbgemm", "onednn") over [0, 127] as fbgemm does
(docs/SPARSE.md)."""

import sys
import types

supported_engines = ["qnnpack", "onednn", "x86", "fbgemm"]


class _QuantizedModule(types.ModuleType):
    _engine = "x86"

    @property
    def engine(self):
        return type(self)._engine

    @engine.setter
    def engine(self, value):
        if value not in supported_engines:
            raise RuntimeError(f"quantized engine {value} is not supported")
        type(self)._engine = value


sys.modules[__name__].__class__ = _QuantizedModule
