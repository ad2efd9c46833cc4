"""strata.fx.node: one instruction of an fx Graph, and the helpers that walk its arguments.

A Node is one of six ops (torch.fx's): ``placeholder`` (a function input), ``get_attr`` (a parameter,
buffer or constant of the owning module), ``call_function`` (a free callable), ``call_method`` (a method
of the first argument), ``call_module`` (a submodule, by qualified name) and ``output`` (the result).
Its ``args``/``kwargs`` hold Nodes nested in tuples, lists, dicts and slices; ``users`` (the nodes that
read it) is kept in step whenever ``args``/``kwargs`` are assigned."""

from __future__ import annotations

import builtins
import operator
import types
from typing import Any, Callable, Dict, Optional, Tuple, Union

__all__ = ["Node", "map_arg", "map_aggregate", "Argument", "Target", "has_side_effect"]

Target = Union[Callable[..., Any], str]
Argument = Any  # a Node, a constant, or a (nested) tuple/list/dict/slice of them

_OPS = ("placeholder", "get_attr", "call_function", "call_method", "call_module", "output", "root")

# Functions whose nodes eliminate_dead_code keeps even when nothing reads their result.
_side_effectful_functions: set = {operator.setitem, operator.delitem}


def has_side_effect(fn):
    """Marks ``fn`` so that call_function nodes of it survive dead code elimination."""
    _side_effectful_functions.add(fn)
    return fn


def map_aggregate(a: Argument, fn: Callable[[Argument], Argument]) -> Argument:
    """Applies ``fn`` to every leaf of ``a``, rebuilding the tuples, lists, dicts and slices around them."""
    if isinstance(a, tuple):
        t = tuple(map_aggregate(e, fn) for e in a)
        # a namedtuple is rebuilt as its own type
        return t if type(a) is tuple or not hasattr(a, "_fields") else type(a)(*t)
    if isinstance(a, list):
        return [map_aggregate(e, fn) for e in a]
    if isinstance(a, dict):
        return {k: map_aggregate(v, fn) for k, v in a.items()}
    if isinstance(a, slice):
        return slice(map_aggregate(a.start, fn), map_aggregate(a.stop, fn), map_aggregate(a.step, fn))
    return fn(a)


def map_arg(a: Argument, fn: Callable[["Node"], Argument]) -> Argument:
    """Applies ``fn`` to every Node in ``a`` (leaves that are not Nodes are kept)."""
    if not callable(fn):
        raise TypeError("strata.fx.map_arg(a, fn): fn must be a callable")
    return map_aggregate(a, lambda x: fn(x) if isinstance(x, Node) else x)


def _type_repr(obj):
    if isinstance(obj, type):
        if obj.__module__ == "builtins":
            return obj.__qualname__
        return f"{obj.__module__}.{obj.__qualname__}"
    if obj is ...:
        return "..."
    if isinstance(obj, types.FunctionType):
        return obj.__name__
    return repr(obj)


def _format_arg(arg, max_list_len=float("inf")) -> str:
    if hasattr(arg, "_custom_fx_repr_fn"):
        return arg._custom_fx_repr_fn()
    if isinstance(arg, list):
        items = ", ".join(_format_arg(a) for idx, a in enumerate(arg) if idx < max_list_len)
        more = "" if len(arg) <= max_list_len else f", ...[total_len={len(arg)}]"
        return f"[{items}{more}]"
    if isinstance(arg, tuple):
        items = ", ".join(_format_arg(a) for idx, a in enumerate(arg) if idx < max_list_len)
        more = "" if len(arg) <= max_list_len else f", ...[total_len={len(arg)}]"
        comma = "," if len(arg) == 1 else ""
        return f"({items}{comma}{more})"
    if isinstance(arg, dict):
        return "{" + ", ".join(f"{k}: {_format_arg(v)}" for k, v in arg.items()) + "}"
    if isinstance(arg, Node):
        return "%" + str(arg)
    return str(arg)


def _qualified_name(func) -> str:
    """``module.qualname`` of a callable, the name fx prints for a call_function target."""
    from .graph import _target_path
    path = _target_path(func)
    if path is not None:
        return path
    if getattr(builtins, getattr(func, "__name__", ""), None) is func:
        return f"builtins.{func.__name__}"
    name = getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or repr(func)
    module = getattr(func, "__module__", None) or ""
    if module == "_operator":
        module = "operator"
    return f"{module}.{name}" if module else name


def _freeze(a):
    """Lists and dicts nested in a node's arguments as immutable_list/immutable_dict (as torch.fx stores them)."""
    from .immutable_collections import immutable_dict, immutable_list
    if isinstance(a, tuple):
        if not any(isinstance(e, (list, dict, tuple)) for e in a):
            return a
        t = tuple(_freeze(e) for e in a)
        return t if type(a) is tuple or not hasattr(a, "_fields") else type(a)(*t)
    if isinstance(a, list):
        return a if type(a) is immutable_list else immutable_list(_freeze(e) for e in a)
    if isinstance(a, dict):
        return a if type(a) is immutable_dict else immutable_dict((k, _freeze(v)) for k, v in a.items())
    return a


class Node:
    """One instruction of a Graph (see the module docstring for the six ops)."""

    def __init__(self, graph, name: str, op: str, target: Target, args: Tuple, kwargs: Dict,
                 return_type: Optional[Any] = None):
        if op not in _OPS:
            raise ValueError(f"strata.fx.Node: unknown op {op!r}; expected one of {_OPS[:-1]}")
        if op == "call_function" and not callable(target):
            raise ValueError(f"strata.fx.Node {name!r}: a call_function target must be callable, got {target!r}")
        if op in ("call_method", "call_module", "get_attr") and not isinstance(target, str):
            raise ValueError(f"strata.fx.Node {name!r}: a {op} target must be a str, got {target!r}")
        self.graph = graph
        self.name = name
        self.op = op
        self.target = target
        self._input_nodes: Dict[Node, None] = {}
        self._args: Tuple = ()
        self._kwargs: Dict = {}
        self.users: Dict[Node, None] = {}
        self.type = return_type
        self._prev = self
        self._next = self
        self._erased = False
        self.meta: Dict[str, Any] = {}
        self._update_args_kwargs(map_arg(tuple(args), lambda x: x), dict(kwargs))

    # ---- the linked list ------------------------------------------------------------------------------
    @property
    def next(self) -> "Node":
        return self._next

    @property
    def prev(self) -> "Node":
        return self._prev

    def prepend(self, x: "Node") -> None:
        """Moves ``x`` to just before this node."""
        if self.graph is not x.graph:
            raise ValueError("strata.fx.Node.prepend: the nodes belong to different graphs")
        if self is x:
            return
        x._remove_from_list()
        p = self._prev
        p._next, x._prev = x, p
        x._next, self._prev = self, x

    def append(self, x: "Node") -> None:
        """Moves ``x`` to just after this node."""
        self._next.prepend(x)

    def _remove_from_list(self):
        p, n = self._prev, self._next
        p._next, n._prev = n, p
        self._prev = self._next = self

    # ---- arguments ------------------------------------------------------------------------------------
    @property
    def args(self) -> Tuple:
        return self._args

    @args.setter
    def args(self, a):
        self._update_args_kwargs(map_arg(tuple(a), lambda x: x), self._kwargs)

    @property
    def kwargs(self) -> Dict:
        return self._kwargs

    @kwargs.setter
    def kwargs(self, k):
        self._update_args_kwargs(self._args, map_arg(dict(k), lambda x: x))

    @property
    def all_input_nodes(self):
        """The distinct Nodes among args and kwargs, in order of appearance."""
        return list(self._input_nodes)

    def update_arg(self, idx: int, arg: Argument) -> None:
        args = list(self.args)
        args[idx] = arg
        self.args = tuple(args)

    def insert_arg(self, idx: int, arg: Argument) -> None:
        args = list(self.args)
        args.insert(idx, arg)
        self.args = tuple(args)

    def update_kwarg(self, key: str, arg: Argument) -> None:
        kwargs = dict(self.kwargs)
        kwargs[key] = arg
        self.kwargs = kwargs

    def _update_args_kwargs(self, new_args, new_kwargs):
        from .immutable_collections import immutable_dict
        for old in self._input_nodes:
            old.users.pop(self, None)
        self._input_nodes = {}
        self._args, self._kwargs = _freeze(new_args), immutable_dict(_freeze(new_kwargs))

        def add(n):
            if n.graph is not self.graph and self.graph is not None:
                raise RuntimeError(f"strata.fx.Node {self.name!r}: argument {n.name!r} belongs to another graph")
            self._input_nodes.setdefault(n)
            return n
        map_arg(self._args, add)
        map_arg(self._kwargs, add)
        for n in self._input_nodes:
            n.users.setdefault(self)

    # ---- rewriting ------------------------------------------------------------------------------------
    def replace_all_uses_with(self, replace_with: "Node", delete_user_cb: Callable[["Node"], bool] = lambda u: True,
                              *, propagate_meta: bool = False):
        """Makes every user of this node read ``replace_with`` instead; returns the users changed.
        delete_user_cb(user) -> False keeps that user reading this node."""
        if propagate_meta:
            if replace_with.meta:
                raise ValueError("strata.fx.Node.replace_all_uses_with(propagate_meta=True): the replacement "
                                 "node already has meta")
            replace_with.meta.update(self.meta)
        changed = []
        for user in list(self.users):
            if not delete_user_cb(user):
                continue
            user._replace_input(self, replace_with)
            changed.append(user)
        return changed

    def replace_input_with(self, old_input: "Node", new_input: "Node") -> None:
        """Makes this node read ``new_input`` wherever it read ``old_input``."""
        self._replace_input(old_input, new_input)

    def _replace_input(self, old, new):
        def swap(n):
            return new if n is old else n
        self._update_args_kwargs(map_arg(self._args, swap), map_arg(self._kwargs, swap))

    def is_impure(self) -> bool:
        """Whether dead code elimination must keep this node even when it has no users."""
        if self.op in ("placeholder", "output"):
            return True
        if self.op == "call_function":
            return self.target in _side_effectful_functions
        if self.op == "call_method":
            return isinstance(self.target, str) and self.target.endswith("_") and not self.target.endswith("__")
        if self.op == "call_module" and self.graph is not None and self.graph.owning_module is not None:
            try:
                mod = self.graph.owning_module.get_submodule(self.target)
            except AttributeError:
                return False
            return getattr(mod, "_is_impure", False)
        return False

    @property
    def stack_trace(self) -> Optional[str]:
        """Where the traced code made this node (recorded when the tracer's record_stack_traces is set)."""
        return self.meta.get("stack_trace")

    @stack_trace.setter
    def stack_trace(self, trace: Optional[str]):
        self.meta["stack_trace"] = trace

    # ---- printing -------------------------------------------------------------------------------------
    def __repr__(self) -> str:
        return self.name

    def _pretty_target(self):
        if self.op == "call_function":
            return _qualified_name(self.target)
        return self.target

    def format_node(self, placeholder_names=None, maybe_return_typename=None) -> Optional[str]:
        """The node as one line, as torch.fx prints it:
        ``%name : type [num_users=N] = op[target=...](args = (...), kwargs = {...})``."""
        ty = "" if self.type is None else f"{_type_repr(self.type)} "
        if self.op == "placeholder":
            if placeholder_names is not None:
                placeholder_names.append(self.target)
            default = f"(default={self.args[0]})" if self.args else ""
            return f"%{self.name} : {ty}[num_users={len(self.users)}] = {self.op}[target={self.target}]{default}"
        if self.op == "get_attr":
            return f"%{self.name} : {ty}[num_users={len(self.users)}] = {self.op}[target={self.target}]"
        if self.op == "output":
            if self.type and maybe_return_typename is not None:
                maybe_return_typename[0] = f" -> {_type_repr(self.type)}"
            return f"return {_format_arg(self.args[0]).replace('%', '')}"
        return (f"%{self.name} : {ty}[num_users={len(self.users)}] = {self.op}[target={self._pretty_target()}]"
                f"(args = {_format_arg(self.args)}, kwargs = {_format_arg(self.kwargs)})")
