"""strata.fx.graph_module: GraphModule, an nn.Module whose forward is generated from a Graph.

Each GraphModule gets its own subclass (so that ``recompile()`` can set ``forward`` on the class without
touching other instances). The constructor copies from ``root`` exactly the submodules, parameters and
buffers the graph's get_attr/call_module nodes name, at the same qualified paths (so the state_dict keys
match the root's); the objects are shared, as in torch, not cloned."""

from __future__ import annotations

import copy
import importlib
import linecache
from typing import Any, Dict, Union

from ..nn.modules.module import Module
from .graph import Graph, _target_path

__all__ = ["GraphModule"]

_next_id = [0]


def _exec_with_source(src: str, globals_: Dict[str, Any]):
    """Execs generated source under a fake file name registered with linecache, so tracebacks and
    inspect.getsource show the generated code."""
    _next_id[0] += 1
    key = f"<eval_with_key>.{_next_id[0]}"
    linecache.cache[key] = (len(src), None, src.splitlines(True), key)
    exec(compile(src, key, "exec"), globals_)


def _copy_attr(from_module: Module, to_module: Module, target: str):
    *prefix, field = target.split(".")
    for item in prefix:
        f = getattr(from_module, item)
        t = getattr(to_module, item, None)
        if f is t:
            return  # the whole subtree is already shared
        if t is None:
            t = Module()
            setattr(to_module, item, t)
        from_module, to_module = f, t
    orig = getattr(from_module, field)
    from .. import Tensor
    from ..nn.parameter import Parameter
    if isinstance(orig, Tensor) and not isinstance(orig, Parameter) and field in getattr(from_module, "_buffers", {}):
        to_module.register_buffer(field, orig)
    else:
        setattr(to_module, field, orig)


def _assign_attr(from_obj: Any, to_module: Module, target: str):
    *prefix, field = target.split(".")
    for item in prefix:
        t = getattr(to_module, item, None)
        if t is None:
            t = Module()
            setattr(to_module, item, t)
        to_module = t
    from .. import Tensor
    from ..nn.parameter import Parameter
    if isinstance(from_obj, Tensor) and not isinstance(from_obj, Parameter):
        to_module.register_buffer(field, from_obj)
    else:
        setattr(to_module, field, from_obj)


class GraphModule(Module):
    """An nn.Module generated from an fx Graph: ``gm.graph``, ``gm.code``, ``gm.recompile()``."""

    def __new__(cls, *args, **kwargs):
        # a class of its own per instance, so that forward can be set on it
        if not getattr(cls, "_strata_fx_per_instance", False):
            cls = type(cls.__name__, (cls,), {"_strata_fx_per_instance": True, "__module__": cls.__module__})
        return super().__new__(cls)

    def __init__(self, root: Union[Module, Dict[str, Any]], graph: Graph, class_name: str = "GraphModule"):
        super().__init__()
        self.__class__.__name__ = class_name
        self.__class__.__qualname__ = class_name
        if isinstance(root, Module):
            if hasattr(root, "training"):
                self.training = root.training
            for node in graph.nodes:
                if node.op in ("get_attr", "call_module"):
                    if not isinstance(node.target, str):
                        raise TypeError(f"strata.fx.GraphModule: node {node.name!r} has a non-str target")
                    try:
                        _copy_attr(root, self, node.target)
                    except AttributeError:
                        raise RuntimeError(f"strata.fx.GraphModule: node {node.name!r} refers to {node.target!r}, "
                                           f"which {type(root).__name__} does not have") from None
        elif isinstance(root, dict):
            for node in graph.nodes:
                if node.op in ("get_attr", "call_module"):
                    if node.target not in root:
                        raise RuntimeError(f"strata.fx.GraphModule: node {node.name!r} refers to {node.target!r}, "
                                           "which the dict root does not have")
                    _assign_attr(root[node.target], self, node.target)
        else:
            raise RuntimeError(f"strata.fx.GraphModule: root must be an nn.Module or a dict, got {type(root).__name__}")
        self.meta: Dict[str, Any] = {}
        self.graph = graph

    # ---- the graph and its code -----------------------------------------------------------------------
    @property
    def graph(self) -> Graph:
        return self._graph

    @graph.setter
    def graph(self, g: Graph):
        if not isinstance(g, Graph):
            raise TypeError(f"strata.fx.GraphModule.graph: expected a Graph, got {type(g).__name__}")
        self.__dict__["_graph"] = g
        g.owning_module = self
        self.recompile()

    @property
    def code(self) -> str:
        """The source of the generated forward."""
        if "_code" not in self.__dict__:
            raise RuntimeError("strata.fx.GraphModule.code: the code has not been generated; call recompile()")
        return self._code

    def recompile(self):
        """Regenerates forward from self.graph (call it after editing the graph)."""
        python_code = self._graph.python_code(root_module="self")
        self.__dict__["_code"] = python_code.src
        g = dict(python_code.globals)
        _exec_with_source(python_code.src, g)
        cls = type(self)
        cls.forward = g["forward"]
        return python_code

    def print_readable(self, print_output: bool = True, include_stride=False, include_device=False, colored=False):
        """The generated code as a class definition."""
        name = type(self).__name__
        body = "\n".join("    " + line if line else "" for line in self.code.splitlines())
        s = f"class {name}(strata.nn.Module):\n{body}\n"
        if print_output:
            print(s)
        return s

    def __str__(self) -> str:
        return Module.__str__(self) + "\n\n\n\n" + self.code

    # ---- submodules -----------------------------------------------------------------------------------
    def add_submodule(self, target: str, m: Module) -> bool:
        """Installs ``m`` at the dotted path ``target``, creating empty parents; False if a parent is not a module."""
        *prefix, field = target.split(".")
        mod = self
        for item in prefix:
            sub = getattr(mod, item, None)
            if sub is None:
                sub = Module()
                mod.add_module(item, sub)
            if not isinstance(sub, Module):
                return False
            mod = sub
        mod.add_module(field, m)
        return True

    def delete_submodule(self, target: str) -> bool:
        """Removes the submodule at ``target``; False if there is none."""
        *prefix, field = target.split(".")
        mod = self
        for item in prefix:
            if not hasattr(mod, item):
                return False
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                return False
        if not isinstance(getattr(mod, field, None), Module):
            return False
        delattr(mod, field)
        return True

    def delete_all_unused_submodules(self) -> None:
        """Removes the submodules no call_module/get_attr node (or a parent path of one) refers to."""
        used = set()
        for node in self.graph.nodes:
            if node.op in ("call_module", "get_attr"):
                atoms = node.target.split(".")
                for i in range(1, len(atoms) + 1):
                    used.add(".".join(atoms[:i]))
                if node.op == "call_module":
                    try:
                        sub = self.get_submodule(node.target)
                    except AttributeError:
                        continue
                    for name, _ in sub.named_modules():
                        if name:
                            used.add(node.target + "." + name)
        for name, _ in list(self.named_modules()):
            if name and name not in used:
                self.delete_submodule(name)

    # ---- copies ---------------------------------------------------------------------------------------
    def __deepcopy__(self, memo):
        res = Module.__new__(Module)
        memo[id(self)] = res
        fake = Module()
        fake.__dict__ = copy.deepcopy(self.__dict__ | {"_graph": None, "_code": None}, memo)
        fake.__dict__.pop("_graph", None)
        fake.__dict__.pop("_code", None)
        gm = GraphModule(fake, copy.deepcopy(self.graph, memo), type(self).__name__)
        for k, v in fake.__dict__.items():
            if k not in gm.__dict__ or k in ("meta", "training"):
                gm.__dict__[k] = v
        memo[id(self)] = gm
        return gm

    def __copy__(self):
        gm = GraphModule(self, self.graph, type(self).__name__)
        gm.meta = copy.copy(self.meta)
        return gm

    def __reduce__(self):
        d = {k: v for k, v in self.__dict__.items() if k not in ("_graph", "_code")}
        return (_rebuild_graph_module, (d, self._graph, type(self).__name__))


def _rebuild_graph_module(d, graph, class_name):
    root = Module()
    root.__dict__.update(d)
    gm = GraphModule(root, graph, class_name)
    for k, v in d.items():
        if k not in gm.__dict__ or k in ("meta", "training"):
            gm.__dict__[k] = v
    return gm


# ---- targets in pickles: strata's functions (not picklable themselves) travel by their public path --------
class _TargetByPath:
    def __init__(self, path):
        self.path = path


def _pickle_target(t):
    if isinstance(t, str):
        return t
    path = _target_path(t)
    if path is not None:
        return _TargetByPath(path)
    return t


def _unpickle_target(t):
    if isinstance(t, _TargetByPath):
        mod, _, name = t.path.rpartition(".")
        return getattr(importlib.import_module(mod), name)
    return t
