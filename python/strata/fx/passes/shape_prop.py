"""strata.fx.passes.shape_prop: ShapeProp runs a GraphModule on example inputs and records, on each
node whose value is a tensor (or a nest of tensors), ``node.meta['tensor_meta']`` (shape, dtype,
requires_grad, stride, memory_format, is_quantized, qparams) and ``node.meta['type']``."""

from __future__ import annotations

from typing import Any, Dict, NamedTuple, Optional, Tuple

from ..interpreter import Interpreter
from ..node import Node, map_aggregate

__all__ = ["TensorMetadata", "ShapeProp"]


class TensorMetadata(NamedTuple):
    shape: Any
    dtype: Any
    requires_grad: bool
    stride: Tuple[int, ...]
    memory_format: Optional[Any]
    is_quantized: bool
    qparams: Dict[str, Any]


def _extract_tensor_metadata(result) -> TensorMetadata:
    import strata
    memory_format = None
    if result.is_contiguous():
        memory_format = strata.contiguous_format
    return TensorMetadata(result.shape, result.dtype, result.requires_grad, tuple(result.stride()), memory_format,
                          False, {})


class ShapeProp(Interpreter):
    """``ShapeProp(gm).propagate(*example_inputs)`` fills every tensor node's ``meta['tensor_meta']``."""

    def __init__(self, gm, fake_mode=None):
        super().__init__(gm)
        self.fake_mode = fake_mode

    def run_node(self, n: Node) -> Any:
        import strata
        try:
            result = super().run_node(n)
        except Exception as e:
            raise RuntimeError(f"ShapeProp error for: node={n.format_node()} with meta={n.meta}") from e
        found = [False]

        def extract(obj):
            if isinstance(obj, strata.Tensor):
                found[0] = True
                return _extract_tensor_metadata(obj)
            return obj
        meta = map_aggregate(result, extract)
        if found[0]:
            n.meta["tensor_meta"] = meta
        n.meta["type"] = type(result)
        return result

    def propagate(self, *args):
        return super().run(*args)
