"""strata.fx.graph: the Graph (a doubly linked list of Nodes) and its Python code generation.

Graph.python_code() turns the nodes into the source of a ``forward`` function: one statement per node,
``x = None`` after a value's last use, operators written as operators (``add = x + y``), strata
functions by their public path (``strata.nn.functional.relu``), anything else through a global of the
generated code. GraphModule execs that source (graph_module.py)."""

from __future__ import annotations

import builtins
import copy
import inspect
import keyword
import math
import operator
import re
from typing import Any, Callable, Dict, List, Optional

from .node import Node, map_arg, _format_arg

__all__ = ["Graph", "PythonCode", "CodeGen"]

# operator functions written as Python operators in the generated code
_BINARY = {
    operator.add: "+", operator.sub: "-", operator.mul: "*", operator.truediv: "/", operator.floordiv: "//",
    operator.mod: "%", operator.pow: "**", operator.matmul: "@", operator.lshift: "<<", operator.rshift: ">>",
    operator.and_: "&", operator.or_: "|", operator.xor: "^", operator.eq: "==", operator.ne: "!=",
    operator.lt: "<", operator.le: "<=", operator.gt: ">", operator.ge: ">=",
}
_UNARY = {operator.neg: "-", operator.pos: "+", operator.invert: "~"}

# ---- public paths of strata's callables -------------------------------------------------------------------
_NAMESPACES = ("strata", "strata.nn.functional", "strata.linalg", "strata.special", "strata.fft")
_paths: Optional[Dict[int, tuple]] = None


def _public_paths() -> Dict[int, tuple]:
    """id(obj) -> (obj, "strata.path") for the public callables and dtypes of strata's namespaces. Built once,
    before any tracing patches those namespaces (symbolic_trace calls it first)."""
    global _paths
    if _paths is None:
        import importlib
        paths: Dict[int, tuple] = {}
        for ns in _NAMESPACES:
            try:
                mod = importlib.import_module(ns)
            except ImportError:
                continue
            for k, v in list(vars(mod).items()):
                if k.startswith("_") or isinstance(v, (type(math), int, float, str, bool)) or v is None:
                    continue
                if not callable(v) and type(v).__name__ not in ("dtype",):
                    continue
                own = (getattr(v, "__module__", None) or "") == ns
                if id(v) not in paths or (own and not paths[id(v)][2]):
                    paths[id(v)] = (v, f"{ns}.{k}", own)
        _paths = paths
    return _paths


def _target_path(obj) -> Optional[str]:
    """``strata.relu``/``strata.nn.functional.relu``/``operator.add`` for a known callable, else None."""
    if getattr(operator, getattr(obj, "__name__", ""), None) is obj:
        return f"operator.{obj.__name__}"
    hit = _public_paths().get(id(obj))
    if hit is not None and hit[0] is obj:
        return hit[1]
    return None


def _snake_case(s: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", s).lower()


_ILLEGAL = set(keyword.kwlist) | set(dir(builtins)) | {"strata", "torch", "operator", "self", "inf", "nan", "math"}


class _Namespace:
    """Unique Python identifiers for nodes (add, add_1, ...) and for the globals of generated code."""

    def __init__(self):
        self._used: Dict[str, int] = {}
        self._names = set()
        self._obj_name: Dict[int, str] = {}

    def create_name(self, candidate: str, obj: Any = None) -> str:
        if obj is not None and id(obj) in self._obj_name:
            return self._obj_name[id(obj)]
        candidate = re.sub(r"[^0-9a-zA-Z_]+", "_", candidate) or "_unnamed"
        if candidate[0].isdigit():
            candidate = f"_{candidate}"
        m = re.match(r"(.*)_(\d+)$", candidate)
        base, num = (m.group(1), int(m.group(2))) if m else (candidate, None)
        name = base if num is None else f"{base}_{num}"
        if not num:
            num = self._used.get(base, 0)
        while name in self._names or name in _ILLEGAL:
            num += 1
            name = f"{base}_{num}"
        self._used[base] = num
        self._names.add(name)
        if obj is not None:
            self._obj_name[id(obj)] = name
        return name

    def associate_name_with_obj(self, name: str, obj: Any):
        self._obj_name[id(obj)] = name

    def _rename_free(self, old, new):
        self._names.discard(old)


class PythonCode:
    """What python_code returns: ``src`` (the function's source) and ``globals`` (what it reads)."""

    def __init__(self, src: str, globals: Dict[str, Any]):
        self.src = src
        self.globals = globals


def _is_identifier(s: str) -> bool:
    return s.isidentifier() and not keyword.iskeyword(s)


def _format_target(base: str, target: str) -> str:
    out = base
    for atom in target.split("."):
        out = f"{out}.{atom}" if _is_identifier(atom) else f'getattr({out}, "{atom}")'
    return out


class CodeGen:
    """Writes the body of ``forward`` from a Graph."""

    def gen(self, graph: "Graph", root_module: str = "self", fn_name: str = "forward") -> PythonCode:
        import strata
        globals_: Dict[str, Any] = {"strata": strata, "operator": operator, "inf": math.inf, "nan": math.nan,
                                    "NoneType": type(None)}
        gnames = _Namespace()
        for k in globals_:
            gnames.create_name(k)
        for n in graph.nodes:  # globals must not be shadowed by the locals of the generated function
            gnames._names.add(n.name)
            if n.op == "placeholder":
                gnames._names.add(n.target.lstrip("*"))

        def add_global(hint: str, obj: Any) -> str:
            for k, v in globals_.items():
                if v is obj:
                    return k
            name = gnames.create_name(hint)
            globals_[name] = obj
            return name

        def fmt(a) -> str:
            if isinstance(a, Node):
                return a.name
            if a is None or a is Ellipsis or isinstance(a, (bool, int, str, bytes)):
                return "..." if a is Ellipsis else repr(a)
            if isinstance(a, float):
                return repr(a) if math.isfinite(a) else ("nan" if math.isnan(a) else ("inf" if a > 0 else "-inf"))
            if isinstance(a, complex):
                return f"complex({fmt(a.real)}, {fmt(a.imag)})"
            if isinstance(a, tuple):
                if hasattr(a, "_fields"):
                    return f"{add_global(type(a).__name__, type(a))}({', '.join(fmt(e) for e in a)})"
                return "(" + ", ".join(fmt(e) for e in a) + ("," if len(a) == 1 else "") + ")"
            if isinstance(a, list):
                return "[" + ", ".join(fmt(e) for e in a) + "]"
            if isinstance(a, dict):
                return "{" + ", ".join(f"{fmt(k)}: {fmt(v)}" for k, v in a.items()) + "}"
            if isinstance(a, slice):
                return f"slice({fmt(a.start)}, {fmt(a.stop)}, {fmt(a.step)})"
            path = _target_path(a)
            if path is not None and path.startswith("strata."):
                return path
            if isinstance(a, type) and getattr(builtins, a.__name__, None) is a:
                return a.__name__
            hint = _snake_case(getattr(a, "__name__", None) or type(a).__name__)
            return add_global(hint, a)

        def fmt_call(args, kwargs) -> str:
            parts = [fmt(a) for a in args] + [f"{k} = {fmt(v)}" for k, v in kwargs.items()]
            return ", ".join(parts)

        nodes = list(graph.nodes)
        # the last user of each value, for the `x = None` that frees it
        last_use: Dict[Node, Node] = {}
        for n in nodes:
            def note(a, n=n):
                last_use[a] = n
            map_arg(n.args, note)
            map_arg(n.kwargs, note)
        to_free: Dict[Node, List[Node]] = {}
        for v, user in last_use.items():
            to_free.setdefault(user, []).append(v)

        params: List[str] = []
        body: List[str] = []
        ret_type = ""
        for n in nodes:
            if n.op == "placeholder":
                target = n.target
                ann = f" : {fmt(n.type)}" if isinstance(n.type, type) else ""
                default = f" = {fmt(n.args[0])}" if n.args else ""
                params.append(f"{target}{ann}{default}")
                bare = target.lstrip("*")
                if bare != n.name:
                    body.append(f"{n.name} = {bare}")
                continue
            if n.op == "output":
                if isinstance(n.type, type):
                    ret_type = f" -> {add_global(_snake_case(n.type.__name__), n.type)}"
                body.append(f"return {fmt(n.args[0])}")
                continue
            if n.op == "get_attr":
                line = f"{n.name} = {_format_target(root_module, n.target)}"
            elif n.op == "call_module":
                line = f"{n.name} = {_format_target(root_module, n.target)}({fmt_call(n.args, n.kwargs)})"
            elif n.op == "call_method":
                if not n.args:
                    raise RuntimeError(f"strata.fx codegen: call_method node {n.name!r} has no self argument")
                line = f"{n.name} = {fmt(n.args[0])}.{n.target}({fmt_call(n.args[1:], n.kwargs)})"
            else:  # call_function
                t = n.target
                if t in _BINARY and len(n.args) == 2 and not n.kwargs:
                    line = f"{n.name} = {fmt(n.args[0])} {_BINARY[t]} {fmt(n.args[1])}"
                elif t in _UNARY and len(n.args) == 1 and not n.kwargs:
                    line = f"{n.name} = {_UNARY[t]}{fmt(n.args[0])}"
                elif t is operator.getitem and len(n.args) == 2 and not n.kwargs:
                    line = f"{n.name} = {fmt(n.args[0])}[{fmt(n.args[1])}]"
                elif (t is builtins.getattr and len(n.args) == 2 and isinstance(n.args[1], str)
                      and _is_identifier(n.args[1]) and not n.kwargs):
                    line = f"{n.name} = {fmt(n.args[0])}.{n.args[1]}"
                else:
                    path = _target_path(t)
                    if path is not None and path.startswith(("strata.", "operator.")):
                        fn = path
                    elif getattr(builtins, getattr(t, "__name__", ""), None) is t:
                        fn = t.__name__
                    else:
                        fn = add_global(_snake_case(getattr(t, "__name__", "fn")), t)
                    line = f"{n.name} = {fn}({fmt_call(n.args, n.kwargs)})"
            free = [v.name for v in to_free.get(n, ()) if v is not n]
            if not n.users:
                free.append(n.name)
            if free:
                line += ";  " + " = ".join(free) + " = None"
            body.append(line)
        if not nodes or nodes[-1].op != "output":
            body.append("return None")
        head = f"def {fn_name}({', '.join([root_module] + params)}){ret_type}:"
        src = head + "\n" + "\n".join("    " + b for b in body) + "\n"
        return PythonCode(src, globals_)


class _NodeList:
    """The nodes of a graph in order (or reversed); safe to iterate while erasing the current node."""

    def __init__(self, graph: "Graph", direction: str = "_next"):
        self.graph, self.direction = graph, direction

    def __len__(self):
        return self.graph._len

    def __iter__(self):
        root = self.graph._root
        cur = getattr(root, self.direction)
        while cur is not root:
            nxt = getattr(cur, self.direction)
            if not cur._erased:
                yield cur
            cur = nxt

    def __reversed__(self):
        return iter(_NodeList(self.graph, "_prev" if self.direction == "_next" else "_next"))

    def __repr__(self):
        return repr(list(self))


class _InsertPoint:
    def __init__(self, graph: "Graph", new_insert):
        self.graph = graph
        self.orig_insert, graph._insert = graph._insert, new_insert

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        self.graph._insert = self.orig_insert


class Graph:
    """An fx program: Nodes in a doubly linked list, built with placeholder/get_attr/call_*/output and
    rewritten with inserting_before/after, erase_node and Node.replace_all_uses_with."""

    def __init__(self, owning_module=None, tracer_cls=None, tracer_extras=None):
        self._root = Node(self, "", "root", "", (), {})
        self._len = 0
        self._graph_namespace = _Namespace()
        self._owning_module = owning_module
        self._tracer_cls = tracer_cls
        self._tracer_extras = tracer_extras
        self._codegen = CodeGen()
        self._insert = self._root.prepend

    @property
    def owning_module(self):
        return self._owning_module

    @owning_module.setter
    def owning_module(self, mod):
        self._owning_module = mod

    @property
    def nodes(self) -> _NodeList:
        return _NodeList(self)

    def find_nodes(self, *, op: str, target=None, sort: bool = True):
        """The nodes with this op (and target, when given), in graph order."""
        return [n for n in self.nodes if n.op == op and (target is None or n.target == target)]

    # ---- building -------------------------------------------------------------------------------------
    def create_node(self, op: str, target, args=None, kwargs=None, name: Optional[str] = None,
                    type_expr: Optional[Any] = None) -> Node:
        args = () if args is None else tuple(args)
        kwargs = {} if kwargs is None else dict(kwargs)
        candidate = name if name is not None else self._target_to_str(target)
        name = self._graph_namespace.create_name(candidate, None)
        n = Node(self, name, op, target, args, kwargs, type_expr)
        self._graph_namespace.associate_name_with_obj(name, n)
        self._insert(n)
        self._len += 1
        return n

    @staticmethod
    def _target_to_str(target) -> str:
        if callable(target) and not isinstance(target, str):
            op = getattr(target, "__name__", None) or type(target).__name__
            return _snake_case(op)
        return _snake_case(str(target).replace("*", ""))

    def placeholder(self, name: str, type_expr=None, default_value=inspect.Signature.empty) -> Node:
        args = () if default_value is inspect.Signature.empty else (default_value,)
        return self.create_node("placeholder", name, args=args, type_expr=type_expr)

    def get_attr(self, qualified_name: str, type_expr=None) -> Node:
        mod = self.owning_module
        if mod is not None:
            try:
                _fetch_attr(mod, qualified_name)
            except AttributeError:
                import warnings
                warnings.warn(f"strata.fx.Graph.get_attr: {qualified_name!r} is not an attribute of the owning "
                              "module; the generated code will fail unless it is added")
        return self.create_node("get_attr", qualified_name, type_expr=type_expr)

    def call_module(self, module_name: str, args=None, kwargs=None, type_expr=None) -> Node:
        return self.create_node("call_module", module_name, args, kwargs, type_expr=type_expr)

    def call_method(self, method_name: str, args=None, kwargs=None, type_expr=None) -> Node:
        return self.create_node("call_method", method_name, args, kwargs, type_expr=type_expr)

    def call_function(self, the_function: Callable, args=None, kwargs=None, type_expr=None) -> Node:
        return self.create_node("call_function", the_function, args, kwargs, type_expr=type_expr)

    def output(self, result, type_expr=None) -> Node:
        return self.create_node("output", "output", (result,), type_expr=type_expr)

    def node_copy(self, node: Node, arg_transform: Callable[[Node], Any] = lambda x: x) -> Node:
        """A copy of ``node`` (from any graph) in this one, its Node arguments mapped by ``arg_transform``."""
        args = map_arg(node.args, arg_transform)
        kwargs = map_arg(node.kwargs, arg_transform)
        new = self.create_node(node.op, node.target, args, kwargs, node.name, node.type)
        new.meta = copy.copy(node.meta)
        return new

    def graph_copy(self, g: "Graph", val_map: Dict[Node, Node], return_output_node: bool = False):
        """Copies every node of ``g`` but its output into this graph (val_map: g's nodes -> the copies,
        filled in). Returns what g's output returns, mapped (or the output node, if asked)."""
        for n in g.nodes:
            if n in val_map:
                continue
            if n.op == "output":
                rv = map_arg(n.args[0], lambda x: val_map[x])
                return (rv, n) if return_output_node else rv
            val_map[n] = self.node_copy(n, lambda x: val_map[x])
        return None

    def inserting_before(self, n: Optional[Node] = None) -> _InsertPoint:
        """``with graph.inserting_before(n):`` new nodes go just before n (before everything: n=None)."""
        if n is None:
            return self.inserting_after(self._root)
        if n.graph is not self:
            raise ValueError("strata.fx.Graph.inserting_before: the node belongs to another graph")
        return _InsertPoint(self, n.prepend)

    def inserting_after(self, n: Optional[Node] = None) -> _InsertPoint:
        """``with graph.inserting_after(n):`` new nodes go just after n (after everything: n=None)."""
        if n is None:
            return self.inserting_before(self._root)
        if n.graph is not self:
            raise ValueError("strata.fx.Graph.inserting_after: the node belongs to another graph")
        return _InsertPoint(self, n.append)

    # ---- rewriting ------------------------------------------------------------------------------------
    def erase_node(self, to_erase: Node) -> None:
        """Removes a node nothing reads."""
        if to_erase.graph is not self:
            raise RuntimeError(f"strata.fx.Graph.erase_node: node {to_erase.name!r} belongs to another graph")
        if to_erase._erased:
            raise RuntimeError(f"strata.fx.Graph.erase_node: node {to_erase.name!r} is already erased")
        if to_erase.users:
            raise RuntimeError(f"strata.fx.Graph.erase_node: tried to erase node {to_erase.name} but it still had "
                               f"{len(to_erase.users)} users in the graph: {to_erase.users}!")
        to_erase._remove_from_list()
        to_erase._erased = True
        self._len -= 1
        to_erase._update_args_kwargs((), {})
        self._graph_namespace._rename_free(to_erase.name, None)

    def eliminate_dead_code(self, is_impure_node: Optional[Callable[[Node], bool]] = None) -> bool:
        """Erases, last to first, the nodes with no users that are not impure; returns whether any went."""
        self.lint()
        changed = False
        for node in reversed(self.nodes):
            impure = is_impure_node(node) if is_impure_node is not None else node.is_impure()
            if not impure and not node.users:
                self.erase_node(node)
                changed = True
        return changed

    def lint(self) -> None:
        """Checks the graph's invariants: nodes belong here, arguments come before their users, users and
        arguments agree, names are unique, targets exist on the owning module."""
        seen, names = set(), set()
        for node in self.nodes:
            if node.graph is not self:
                raise RuntimeError(f"strata.fx lint: node {node.name!r} does not belong to this graph")
            if node.name in names:
                raise RuntimeError(f"strata.fx lint: node name {node.name!r} is not unique")
            names.add(node.name)
            for arg in node._input_nodes:
                if arg.graph is not self:
                    raise RuntimeError(f"strata.fx lint: argument {arg.name!r} of {node.name!r} is in another graph")
                if arg not in seen:
                    raise RuntimeError(f"strata.fx lint: argument {arg.name!r} of node {node.name!r} is used before "
                                       "it is defined (or was erased)")
                if node not in arg.users:
                    raise RuntimeError(f"strata.fx lint: {node.name!r} reads {arg.name!r} but is not among its users")
            for user in node.users:
                if user._erased or node not in user._input_nodes:
                    raise RuntimeError(f"strata.fx lint: {user.name!r} is a user of {node.name!r} but does not read it")
            seen.add(node)
        mod = self.owning_module
        if mod is not None:
            for node in self.nodes:
                if node.op in ("get_attr", "call_module"):
                    try:
                        _fetch_attr(mod, node.target)
                    except AttributeError:
                        raise RuntimeError(f"strata.fx lint: node {node.name!r} refers to {node.target!r}, which the "
                                           "owning module does not have") from None

    # ---- code and printing ----------------------------------------------------------------------------
    def python_code(self, root_module: str = "self", *, verbose: bool = False) -> PythonCode:
        return self._codegen.gen(self, root_module)

    def __str__(self) -> str:
        ret = [""]
        lines = [n.format_node(None, ret) for n in self.nodes]
        return "graph()" + ret[0] + ":\n" + "\n".join("    " + s for s in lines)

    __repr__ = object.__repr__

    def print_tabular(self, print_output: bool = True) -> str:
        """The nodes as a table of opcode, name, target, args and kwargs."""
        head = ["opcode", "name", "target", "args", "kwargs"]
        rows = [[n.op, n.name, str(n._pretty_target()), _format_arg(n.args), _format_arg(n.kwargs)] for n in self.nodes]
        widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(head)]

        def line(cells):
            return "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()
        out = "\n".join([line(head), line(["-" * w for w in widths])] + [line(r) for r in rows])
        if print_output:
            print(out)
        return out

    def __deepcopy__(self, memo):
        g = Graph(tracer_cls=self._tracer_cls)
        memo[id(self)] = g
        out = g.graph_copy(self, {}, return_output_node=True)
        if out is not None:
            rv, old_out = out
            new_out = g.output(rv, type_expr=old_out.type)
            new_out.meta = copy.copy(old_out.meta)
        return g

    # pickling: the nodes as plain tuples, targets by reference (graph_module.py resolves them)
    def __getstate__(self):
        from .graph_module import _pickle_target
        idx = {}
        rows = []
        for i, n in enumerate(self.nodes):
            idx[n] = i
            enc = lambda x: _NodeRef(idx[x])  # noqa: E731
            rows.append((n.op, _pickle_target(n.target), map_arg(n.args, enc), map_arg(n.kwargs, enc), n.name,
                         n.type if isinstance(n.type, type) else None, _picklable_meta(n.meta)))
        return {"rows": rows, "tracer_cls": self._tracer_cls}

    def __setstate__(self, state):
        from .graph_module import _unpickle_target
        self.__init__(tracer_cls=state.get("tracer_cls"))
        made: List[Node] = []
        for op, target, args, kwargs, name, ty, meta in state["rows"]:
            dec = lambda x: made[x.i] if isinstance(x, _NodeRef) else x  # noqa: E731
            n = self.create_node(op, _unpickle_target(target), map_aggregate_ref(args, dec),
                                 map_aggregate_ref(kwargs, dec), name, ty)
            n.meta = meta
            made.append(n)


class _NodeRef:
    __slots__ = ("i",)

    def __init__(self, i):
        self.i = i

    def __getstate__(self):
        return self.i

    def __setstate__(self, i):
        self.i = i


def map_aggregate_ref(a, fn):
    from .node import map_aggregate
    return map_aggregate(a, fn)


def _picklable_meta(meta):
    import pickle
    out = {}
    for k, v in meta.items():
        try:
            pickle.dumps(v)
        except Exception:
            continue
        out[k] = v
    return out


def _fetch_attr(mod, target: str):
    obj = mod
    for atom in target.split("."):
        if not hasattr(obj, atom):
            raise AttributeError(f"{type(mod).__name__} has no attribute {target!r}")
        obj = getattr(obj, atom)
    return obj
