"""strata.fx.interpreter: Interpreter (runs a GraphModule node by node, each op kind an overridable
method) and Transformer (re-traces the graph through those methods into a new GraphModule)."""

from __future__ import annotations

import inspect
from typing import Any, Dict, Iterator, Optional, Tuple

from .graph import Graph, _fetch_attr
from .graph_module import GraphModule
from .node import Node, map_aggregate, map_arg
from .proxy import Proxy, TracerBase

__all__ = ["Interpreter", "Transformer"]


class Interpreter:
    """Runs ``module.graph`` on concrete values: run(*args) -> the graph's output. Subclasses override
    placeholder/get_attr/call_function/call_method/call_module/output (or run_node) to change what each
    node does; values no later node reads are dropped as the run goes (garbage_collect_values)."""

    def __init__(self, module, garbage_collect_values: bool = True, graph: Optional[Graph] = None):
        self.module = module
        self.submodules = dict(module.named_modules())
        self.graph = graph if graph is not None else module.graph
        self.env: Dict[Node, Any] = {}
        self.name = "Interpreter"
        self.garbage_collect_values = garbage_collect_values
        self.extra_traceback = True
        if garbage_collect_values:
            # the nodes whose values can be dropped after each node
            seen = set()
            self.user_to_last_uses: Dict[Node, list] = {}
            for node in reversed(self.graph.nodes):
                for n in node._input_nodes:
                    if n not in seen:
                        seen.add(n)
                        self.user_to_last_uses.setdefault(node, []).append(n)

    def run(self, *args, initial_env: Optional[Dict[Node, Any]] = None, enable_io_processing: bool = True) -> Any:
        self.env = initial_env if initial_env is not None else {}
        self.args_iter: Iterator[Any] = iter(args)
        for node in self.graph.nodes:
            if node in self.env:
                continue
            try:
                self.env[node] = self.run_node(node)
            except Exception as e:
                if self.extra_traceback and not getattr(e, "_strata_fx_noted", False):
                    msg = f"While executing {node.format_node()}"
                    if hasattr(e, "add_note"):
                        e.add_note(msg)
                    e._strata_fx_noted = True
                raise
            if self.garbage_collect_values:
                for to_delete in self.user_to_last_uses.get(node, []):
                    self.env.pop(to_delete, None)
            if node.op == "output":
                return self.env[node]
        return None

    def boxed_run(self, args_list):
        args_iter = iter(args_list)
        env = {}
        for n in self.graph.nodes:
            if n.op == "placeholder":
                env[n] = next(args_iter)
        args_list.clear()
        return self.run(initial_env=env)

    def run_node(self, n: Node) -> Any:
        args, kwargs = self.fetch_args_kwargs_from_env(n)
        return getattr(self, n.op)(n.target, args, kwargs)

    # ---- the six ops ----------------------------------------------------------------------------------
    def placeholder(self, target: str, args: Tuple, kwargs: Dict) -> Any:
        if target.startswith("**"):
            raise RuntimeError("strata.fx.Interpreter: **kwargs placeholders are not supported")
        if target.startswith("*"):
            return list(self.args_iter)
        try:
            return next(self.args_iter)
        except StopIteration:
            if args:
                return args[0]
            raise RuntimeError(f"strata.fx.Interpreter: expected a positional argument for parameter {target}, "
                               "but one was not passed in!") from None

    def get_attr(self, target: str, args: Tuple, kwargs: Dict) -> Any:
        return self.fetch_attr(target)

    def call_function(self, target, args: Tuple, kwargs: Dict) -> Any:
        return target(*args, **kwargs)

    def call_method(self, target: str, args: Tuple, kwargs: Dict) -> Any:
        self_obj, *rest = args
        return getattr(self_obj, target)(*rest, **kwargs)

    def call_module(self, target: str, args: Tuple, kwargs: Dict) -> Any:
        return self.fetch_attr(target)(*args, **kwargs)

    def output(self, target, args: Tuple, kwargs: Dict) -> Any:
        return args[0]

    # ---- helpers --------------------------------------------------------------------------------------
    def fetch_attr(self, target: str):
        try:
            return _fetch_attr(self.module, target)
        except AttributeError:
            raise RuntimeError(f"strata.fx.Interpreter: node referenced nonexistent target {target}") from None

    def fetch_args_kwargs_from_env(self, n: Node) -> Tuple[Tuple, Dict]:
        return self.map_nodes_to_values(n.args, n), self.map_nodes_to_values(n.kwargs, n)

    def map_nodes_to_values(self, args, n: Node):
        def load(a):
            if a not in self.env:
                raise RuntimeError(f"strata.fx.Interpreter: node {n.name!r} references nonexistent value {a.name!r}; "
                                   "consider graph.lint()")
            return self.env[a]
        return map_arg(args, load)


class Transformer(Interpreter):
    """An Interpreter whose values are Proxies of a new graph: transform() returns the GraphModule that
    the overridden methods build (override call_function etc. to rewrite nodes)."""

    def __init__(self, module):
        super().__init__(module)
        self.new_graph = Graph()
        self.new_graph._codegen = module.graph._codegen

        class TransformerTracer(TracerBase):
            def __init__(self, graph):
                super().__init__()
                self.graph = graph
                self.tensor_attrs: Dict = {}

            def is_leaf_module(self, _, __) -> bool:
                return True

        self.tracer = TransformerTracer(self.new_graph)
        self.tracer.root = module

    def placeholder(self, target: str, args: Tuple, kwargs: Dict) -> Proxy:
        default = next(iter(args)) if args else inspect.Signature.empty
        return Proxy(self.new_graph.placeholder(target, default_value=default), self.tracer)

    def get_attr(self, target: str, args: Tuple, kwargs: Dict) -> Proxy:
        return self.tracer.create_proxy("get_attr", target, args, kwargs)

    def call_module(self, target: str, args: Tuple, kwargs: Dict) -> Any:
        return self.tracer.create_proxy("call_module", target, args, kwargs)

    def call_function(self, target, args: Tuple, kwargs: Dict) -> Any:
        return self.tracer.create_proxy("call_function", target, args, kwargs)

    def call_method(self, target: str, args: Tuple, kwargs: Dict) -> Any:
        return self.tracer.create_proxy("call_method", target, args, kwargs)

    def run_node(self, n: Node) -> Any:
        result = super().run_node(n)
        if isinstance(result, Proxy) and n.op != "output":
            result.node.meta = dict(n.meta) | result.node.meta
        return result

    def transform(self) -> GraphModule:
        result = super().run(enable_io_processing=False)
        if result is not None:
            def strip(a):
                return a.node if isinstance(a, Proxy) else a
            self.new_graph.output(map_aggregate(result, strip))
        return GraphModule(self.module, self.new_graph)
