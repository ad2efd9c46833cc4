"""strata.fx.proxy: Proxy (a value being traced), TracerBase and GraphAppendingTracer.

A Proxy stands for the Node that will compute a value. Python operators on it record call_function nodes
of the ``operator`` functions, attribute reads record ``getattr``, method calls record call_method, and
calls of strata's functions with a Proxy among their arguments are recorded as call_function by the
tracer's patching of strata's namespaces (_symbolic_trace.py). Using a Proxy where Python needs a
concrete value (``if``, ``bool()``, ``len()``, iteration of unknown length) raises TraceError."""

from __future__ import annotations

import dis
import inspect
import operator
from typing import Any, Dict, Optional, Tuple

from .graph import Graph
from .node import Node, map_aggregate

__all__ = ["Proxy", "Attribute", "TraceError", "TracerBase", "GraphAppendingTracer", "ParameterProxy"]


class TraceError(ValueError):
    """Symbolic tracing met Python that needs a concrete value (data-dependent control flow)."""


class TracerBase:
    graph: Graph
    record_stack_traces = False
    check_mutable_operations = False
    trace_asserts = False
    proxy_buttons_enabled = True
    traced_func_name = "forward"

    def create_node(self, kind: str, target, args: Tuple, kwargs: Dict, name: Optional[str] = None,
                    type_expr: Optional[Any] = None) -> Node:
        return self.graph.create_node(kind, target, args, kwargs, name, type_expr)

    def proxy(self, node: Node) -> "Proxy":
        return Proxy(node, self)

    def create_proxy(self, kind: str, target, args: Tuple, kwargs: Dict, name: Optional[str] = None,
                     type_expr: Optional[Any] = None, proxy_factory_fn=None):
        """Records a node (arguments converted by create_arg) and returns a Proxy for it."""
        args_ = self.create_arg(args)
        kwargs_ = self.create_arg(kwargs)
        if not isinstance(args_, tuple) or not isinstance(kwargs_, dict):
            raise TypeError("strata.fx create_proxy: args must be a tuple and kwargs a dict")
        node = self.create_node(kind, target, args_, kwargs_, name, type_expr)
        return self.proxy(node) if proxy_factory_fn is None else proxy_factory_fn(node)

    def create_arg(self, a: Any) -> Any:
        """Turns a value passed to a recorded call into a node argument: Proxies become their Nodes,
        containers are converted element by element, constants stay."""
        if isinstance(a, Proxy):
            if a.tracer is not self and a.tracer.graph is not self.graph:
                raise RuntimeError("strata.fx: a Proxy from another tracer's graph was used in this one")
            return a.node
        if isinstance(a, Node):
            return a
        if isinstance(a, tuple) and hasattr(a, "_fields"):
            return type(a)(*(self.create_arg(e) for e in a))
        if isinstance(a, (tuple, list)):
            return type(a)(self.create_arg(e) for e in a)
        if isinstance(a, dict):
            out = {}
            for k, v in a.items():
                k = self.create_arg(k)
                if isinstance(k, Node):
                    raise RuntimeError("strata.fx: a traced value cannot be a dict key")
                out[k] = self.create_arg(v)
            return out
        if isinstance(a, slice):
            return slice(self.create_arg(a.start), self.create_arg(a.stop), self.create_arg(a.step))
        if isinstance(a, range):
            return range(self.create_arg(a.start), self.create_arg(a.stop), self.create_arg(a.step))
        return a

    def to_bool(self, obj: "Proxy") -> bool:
        raise TraceError("symbolically traced variables cannot be used as inputs to control flow "
                         f"(the value of node {obj.node.name!r}, {obj.node.format_node()!s})")

    def iter(self, obj: "Proxy"):
        raise TraceError("Proxy object cannot be iterated. This can be attempted when the Proxy is used in a loop "
                         "or as a *args or **kwargs function argument. See the strata.fx docs (docs/FX.md) for a "
                         f"list of the limitations of symbolic tracing (node {obj.node.name!r})")

    def keys(self, obj: "Proxy"):
        return Attribute(obj, "keys")()


class GraphAppendingTracer(TracerBase):
    """A tracer that appends to an existing graph: ``Proxy(node, GraphAppendingTracer(graph))`` lets
    ordinary code build nodes with operators and method calls."""

    def __init__(self, graph: Graph):
        super().__init__()
        self.graph = graph


class Proxy:
    """A value under symbolic tracing: operations on it are recorded in ``tracer.graph``."""

    def __init__(self, node: Node, tracer: Optional[TracerBase] = None):
        if tracer is None:
            tracer = GraphAppendingTracer(node.graph)
        self.tracer = tracer
        self.node = node

    def __repr__(self) -> str:
        return f"Proxy({self.node.name})"

    __hash__ = object.__hash__

    def __getattr__(self, k: str) -> "Attribute":
        if k.startswith("__") and k.endswith("__"):
            raise AttributeError(k)  # copy/pickle/inspect probes are not recorded
        return Attribute(self, k)

    def __call__(self, *args, **kwargs) -> "Proxy":
        return self.tracer.create_proxy("call_method", "__call__", (self,) + args, kwargs)

    def __iter__(self):
        frame = inspect.currentframe().f_back
        inst = _instruction_at(frame.f_code, frame.f_lasti)
        if inst is not None and inst.opname == "UNPACK_SEQUENCE":
            return (self[i] for i in range(inst.argval))
        return self.tracer.iter(self)

    def __bool__(self) -> bool:
        return self.tracer.to_bool(self)

    def __len__(self):
        raise RuntimeError("'len' is not supported in symbolic tracing by default. If you want this call to be "
                           "recorded, please call strata.fx.wrap('len') at module scope")

    def keys(self):
        return self.tracer.keys(self)

    def __index__(self):
        raise TraceError(f"symbolically traced variables cannot be used as an index or size "
                         f"(node {self.node.name!r})")

    def __deepcopy__(self, memo):
        return Proxy(self.node, self.tracer)

    def __reduce__(self):
        raise TypeError("strata.fx.Proxy objects cannot be pickled")


def _instruction_at(code, lasti):
    for inst in dis.get_instructions(code):
        if inst.offset == lasti:
            return inst
    return None


class Attribute(Proxy):
    """``proxy.attr``: a getattr node when used as a value, a call_method node when called."""

    def __init__(self, root: Proxy, attr: str):
        self.root = root
        self.attr = attr
        self.tracer = root.tracer
        self._node = None

    @property
    def node(self) -> Node:
        # made on first use: most attributes are only called as methods
        if self._node is None:
            self._node = self.tracer.create_proxy("call_function", getattr, (self.root, self.attr), {}).node
        return self._node

    def __call__(self, *args, **kwargs) -> Proxy:
        return self.tracer.create_proxy("call_method", self.attr, (self.root,) + args, kwargs)


class ParameterProxy(Proxy):
    """The Proxy of a parameter: shape, size(), dim() and ndim answer from the real parameter."""

    def __init__(self, tracer, node, name, param):
        super().__init__(node, tracer)
        self.param = param
        self.name = name

    def __repr__(self):
        return f"ParameterProxy({self.name})"

    @property
    def shape(self):
        return self.param.shape

    def size(self, dim=None):
        return self.param.size() if dim is None else self.param.size(dim)

    def dim(self):
        return self.param.dim()

    @property
    def ndim(self):
        return self.param.ndim

    def numel(self):
        return self.param.numel()

    def nelement(self):
        return self.param.nelement()


def _binary(op):
    def impl(self, rhs):
        return self.tracer.create_proxy("call_function", op, (self, rhs), {})
    return impl


def _rbinary(op):
    def impl(self, lhs):
        return self.tracer.create_proxy("call_function", op, (lhs, self), {})
    return impl


def _unary(op):
    def impl(self):
        return self.tracer.create_proxy("call_function", op, (self,), {})
    return impl


_REFLECTABLE = ("add", "sub", "mul", "floordiv", "truediv", "mod", "pow", "lshift", "rshift", "and", "or", "xor",
                "matmul")
for _name in _REFLECTABLE:
    _op = getattr(operator, _name + "_" if _name in ("and", "or") else _name)
    setattr(Proxy, f"__{_name}__", _binary(_op))
    setattr(Proxy, f"__r{_name}__", _rbinary(_op))
for _name in ("eq", "ne", "lt", "le", "gt", "ge", "getitem"):
    setattr(Proxy, f"__{_name}__", _binary(getattr(operator, _name)))
for _name in ("neg", "pos", "invert", "abs"):
    setattr(Proxy, f"__{_name}__", _unary(getattr(operator, _name)))
Proxy.__hash__ = object.__hash__


def _contains_proxy(a) -> bool:
    if isinstance(a, Proxy):
        return True
    if isinstance(a, (tuple, list)):
        return any(_contains_proxy(e) for e in a)
    if isinstance(a, dict):
        return any(_contains_proxy(v) for v in a.values())
    if isinstance(a, slice):
        return _contains_proxy(a.start) or _contains_proxy(a.stop) or _contains_proxy(a.step)
    return False


def _first_proxy(args, kwargs) -> Optional[Proxy]:
    found = []

    def look(x):
        if isinstance(x, Proxy) and not found:
            found.append(x)
        return x
    map_aggregate(args, look)
    if not found:
        map_aggregate(kwargs, look)
    return found[0] if found else None


def annotate(val, type):
    """Sets the type of a traced value's node (``x = fx.annotate(x, int)``); a no-op outside tracing."""
    if isinstance(val, Proxy):
        if val.node.type is not None:
            raise RuntimeError(f"strata.fx.annotate: node {val.node.name!r} already has type {val.node.type}")
        val.node.type = type
    return val
