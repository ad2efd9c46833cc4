"""strata.fx: torch.fx's program capture and transformation toolkit, over Strata (docs/FX.md).

``symbolic_trace(module_or_fn)`` runs the code on Proxies and records a Graph of Nodes (placeholder,
get_attr, call_function, call_method, call_module, output); ``GraphModule`` turns a Graph back into an
nn.Module with generated Python code; ``Interpreter``/``Transformer`` run or rewrite a graph node by
node; ``subgraph_rewriter.replace_pattern`` rewrites matches of a pattern; ``passes.shape_prop.ShapeProp``
annotates shapes. Pure Python over Strata's public API; nothing here runs unless called."""

from .node import Node, map_arg, map_aggregate, has_side_effect  # noqa: F401
from .graph import Graph, PythonCode, CodeGen  # noqa: F401
from .graph_module import GraphModule  # noqa: F401
from .proxy import Proxy, Attribute, TraceError, TracerBase, GraphAppendingTracer, annotate  # noqa: F401
from ._symbolic_trace import Tracer, symbolic_trace, wrap, PH  # noqa: F401
from .interpreter import Interpreter, Transformer  # noqa: F401
from . import node, graph, graph_module, proxy, interpreter, subgraph_rewriter, passes, experimental  # noqa: F401
from . import immutable_collections  # noqa: F401
from .subgraph_rewriter import replace_pattern  # noqa: F401

__all__ = ["symbolic_trace", "Tracer", "wrap", "Graph", "GraphModule", "Interpreter", "Transformer", "Node",
           "Proxy", "replace_pattern", "has_side_effect", "map_arg", "map_aggregate", "TraceError", "PH", "annotate"]
