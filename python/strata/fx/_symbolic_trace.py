"""strata.fx._symbolic_trace: Tracer, symbolic_trace and wrap.

How calls are intercepted. Strata's ops are C++ functions that accept only tensors (there is no
``__torch_function__`` protocol in the dispatch path, deliberately: it would cost every eager call a
check). So, for the duration of one ``Tracer.trace``, the tracer patches:
  * every public callable of ``strata``, ``strata.nn.functional``, ``strata.linalg``, ``strata.special`` and
    ``strata.fft`` with a wrapper that records a call_function node (target: the original) when a Proxy
    is among its arguments and otherwise calls the original;
  * the same wrappers into the globals of each traced forward that bound those functions directly
    (``from strata.nn.functional import relu``), plus the functions registered with ``wrap`` and the
    ``autowrap_functions``/``autowrap_modules`` ones;
  * ``nn.Module.__call__`` (leaf modules become call_module nodes, the others are traced through) and
    ``nn.Module.__getattr__`` (parameters become get_attr nodes).
Everything is restored when tracing ends, also on error; eager code outside tracing pays nothing."""

from __future__ import annotations

import builtins
import collections
import traceback
import functools
import inspect
import math
import operator
import sys
import types
from typing import Any, Callable, Dict, List, Optional

from .graph import Graph, _public_paths
from .graph_module import GraphModule
from .node import Node
from .proxy import ParameterProxy, Proxy, TracerBase, _first_proxy

__all__ = ["Tracer", "symbolic_trace", "wrap", "PH", "is_fx_tracing"]

_tracing_depth = 0


def is_fx_tracing() -> bool:
    """Whether a symbolic trace is running (libraries branch on it to skip checks a Proxy cannot pass)."""
    return _tracing_depth > 0


class _PH:
    """A placeholder marker for concrete_args: the argument stays an input."""

    def __repr__(self):
        return "PH"


PH = _PH()

# (globals dict, name) pairs registered by wrap()
_wrapped_fns_to_patch: Dict[tuple, None] = {}


def wrap(fn_or_name):
    """At module scope: calls of this function (of the module's global of that name) are recorded as
    call_function nodes instead of being traced through. ``fn_or_name`` is the function or its name."""
    if not callable(fn_or_name) and not isinstance(fn_or_name, str):
        raise RuntimeError("strata.fx.wrap: expected a function or the name of a global function")
    name = fn_or_name if isinstance(fn_or_name, str) else fn_or_name.__name__
    if callable(fn_or_name) and name == "<lambda>":
        raise RuntimeError("strata.fx.wrap: a lambda cannot be wrapped (it has no global name)")
    frame = inspect.currentframe().f_back
    if frame.f_code.co_name != "<module>":
        raise NotImplementedError("strata.fx.wrap must be called at the top level of a module")
    _wrapped_fns_to_patch[(id(frame.f_globals), name)] = None
    _wrapped_globals[id(frame.f_globals)] = frame.f_globals
    return fn_or_name


_wrapped_globals: Dict[int, dict] = {}


def _recording_wrapper(orig: Callable) -> Callable:
    @functools.wraps(orig)
    def wrapper(*args, **kwargs):
        p = _first_proxy(args, kwargs)
        if p is None:
            return orig(*args, **kwargs)
        return p.tracer.create_proxy("call_function", orig, args, kwargs)
    wrapper.__fx_original__ = orig
    return wrapper


def _tensor_method_wrapper(name: str, orig: Callable) -> Callable:
    """A strata.Tensor method while tracing: called on a real tensor with a Proxy among its arguments
    (``mask.masked_fill(proxy, 0)``, ``pe[:, :x.size(1)]``, ``buf[i] = proxy``) it records a node instead."""
    if name == "__getitem__":
        target, kind = operator.getitem, "call_function"
    elif name == "__setitem__":
        target, kind = operator.setitem, "call_function"
    else:
        target, kind = name, "call_method"

    def wrapper(self, *args, **kwargs):
        p = self if isinstance(self, Proxy) else _first_proxy(args, kwargs)  # also strata.Tensor.add(proxy, 1)
        if p is None:
            return orig(self, *args, **kwargs)
        return p.tracer.create_proxy(kind, target, (self,) + args, kwargs)
    wrapper.__name__ = name
    wrapper.__fx_original__ = orig
    return wrapper


_tensor_wrappers: Dict[str, Callable] = {}
_wrappers_cache: Dict[int, Callable] = {}


def _namespace_wrappers() -> Dict[int, Callable]:
    """id(original) -> its recording wrapper, for strata's public callables (the wrappers hold no tracer
    state, so they are made once and reused by every trace)."""
    for oid, (obj, path, _own) in list(_public_paths().items()):
        if oid in _wrappers_cache or isinstance(obj, type) or not callable(obj):
            continue
        _wrappers_cache[oid] = _recording_wrapper(obj)
    return _wrappers_cache


class _Patcher:
    """Sets attributes/dict entries and puts the originals back on exit (last set, first restored)."""

    def __init__(self):
        self._undo: List[Callable[[], None]] = []
        self._seen = set()

    def setattr(self, obj, name, value):
        key = ("a", id(obj), name)
        if key in self._seen:
            return
        self._seen.add(key)
        had = name in vars(obj) if isinstance(obj, type) else hasattr(obj, name)
        old = vars(obj).get(name) if isinstance(obj, type) else getattr(obj, name, None)
        setattr(obj, name, value)
        if had:
            self._undo.append(lambda: setattr(obj, name, old))
        else:
            self._undo.append(lambda: delattr(obj, name))

    def setitem(self, d, name, value):
        key = ("i", id(d), name)
        if key in self._seen:
            return
        self._seen.add(key)
        old = d[name]
        d[name] = value
        self._undo.append(lambda: d.__setitem__(name, old))

    def restore(self):
        while self._undo:
            self._undo.pop()()
        self._seen.clear()


class Tracer(TracerBase):
    """Symbolic tracer: runs forward on Proxies and records what it does into a Graph.

    Override is_leaf_module(m, qualified_name) to choose which submodules are recorded as call_module
    (by default those defined in strata.nn / torch.nn, except Sequential, ModuleList and ModuleDict)."""

    def __init__(self, autowrap_modules=(math,), autowrap_functions=(), param_shapes_constant: bool = False):
        super().__init__()
        self._autowrap_function_ids = {id(v) for m in autowrap_modules for k, v in vars(m).items()
                                       if not k.startswith("_") and callable(v)}
        self._autowrap_function_ids.update(id(f) for f in autowrap_functions)
        self._autowrap_search = list(autowrap_modules)
        self.param_shapes_constant = param_shapes_constant
        self.submodule_paths: Optional[Dict[int, str]] = None
        self.root = None
        self.module_stack: "collections.OrderedDict[str, tuple]" = collections.OrderedDict()

    # buffers read in a traced forward become get_attr nodes too (torch's default: False, they are constants)
    proxy_buffer_attributes = False

    # ---- leaves and paths -----------------------------------------------------------------------------
    def is_leaf_module(self, m, module_qualified_name: str) -> bool:
        from ..nn.modules.container import Sequential, ModuleList, ModuleDict
        mod = type(m).__module__ or ""
        return (mod.startswith(("strata.nn", "torch.nn")) and not isinstance(m, (Sequential, ModuleList, ModuleDict))
                and not isinstance(m, GraphModule))

    def path_of_module(self, mod) -> str:
        if self.submodule_paths is not None:
            path = self.submodule_paths.get(id(mod))
            if path is not None:
                return path
        for name, m in self.root.named_modules():
            if m is mod:
                return name
        raise NameError(f"strata.fx: module {type(mod).__name__} is not installed as a submodule of the traced root")

    def call_module(self, m, forward: Callable, args, kwargs):
        """A submodule call: a call_module node for a leaf, its forward traced through otherwise."""
        module_qualified_name = self.path_of_module(m)
        key = module_qualified_name
        pushed = key not in self.module_stack
        if pushed:
            self.module_stack[key] = (module_qualified_name, type(m))
        try:
            if not self.is_leaf_module(m, module_qualified_name):
                fwd = getattr(type(m), "forward", None)
                if fwd is not None and hasattr(fwd, "__globals__") and self._patcher is not None:
                    self._patch_globals(fwd.__globals__)
                return forward(*args, **kwargs)
            return self.create_proxy("call_module", module_qualified_name, args, kwargs)
        finally:
            if pushed:
                self.module_stack.pop(key, None)

    def create_node(self, kind, target, args, kwargs, name=None, type_expr=None) -> Node:
        """TracerBase.create_node, and the node's meta: ``nn_module_stack`` (the submodule calls it is
        inside: qualified name -> (qualified name, class)) and, with record_stack_traces, ``stack_trace``."""
        node = super().create_node(kind, target, args, kwargs, name, type_expr)
        if self.module_stack:
            node.meta["nn_module_stack"] = collections.OrderedDict(self.module_stack)
        if self.record_stack_traces and kind not in ("placeholder", "output"):
            frames = [f for f in traceback.extract_stack()[:-1] if "/strata/fx/" not in f.filename.replace("\\", "/")]
            node.meta["stack_trace"] = "".join(traceback.format_list(frames[-1:]))
        return node

    def getattr(self, attr: str, attr_val: Any, parameter_proxy_cache: Dict[str, Any]):
        """A module attribute read during tracing: parameters become get_attr proxies."""
        from ..nn.parameter import Parameter
        from .. import Tensor
        if self.proxy_buffer_attributes and isinstance(attr_val, Tensor) and not isinstance(attr_val, Parameter):
            for n, b in self.root.named_buffers():
                if attr_val is b:
                    if n not in parameter_proxy_cache:
                        parameter_proxy_cache[n] = self.create_proxy("get_attr", n, (), {})
                    return parameter_proxy_cache[n]
        if isinstance(attr_val, Parameter):
            for n, p in self.root.named_parameters():
                if attr_val is p:
                    if n not in parameter_proxy_cache:
                        if self.param_shapes_constant:
                            node = self.create_node("get_attr", n, (), {})
                            parameter_proxy_cache[n] = ParameterProxy(self, node, n, attr_val)
                        else:
                            parameter_proxy_cache[n] = self.create_proxy("get_attr", n, (), {})
                    return parameter_proxy_cache[n]
        return attr_val

    # ---- arguments ------------------------------------------------------------------------------------
    def create_arg(self, a: Any):
        """Also: parameters, buffers and submodules of the root become get_attr nodes; any other tensor is
        stored on the root as ``_tensor_constant<N>`` and read with get_attr."""
        from .. import Tensor
        from ..nn.modules.module import Module
        from ..nn.parameter import Parameter
        if isinstance(a, Parameter):
            for n, p in self.root.named_parameters():
                if a is p:
                    return self.create_node("get_attr", n, (), {})
            raise NameError("strata.fx: a parameter that is not a parameter of the traced module was used")
        if isinstance(a, Module):
            for n, m in self.root.named_modules():
                if a is m:
                    return self.create_node("get_attr", n, (), {})
            raise NameError("strata.fx: a module that is not a submodule of the traced module was used as a value")
        if isinstance(a, Tensor):
            qualname = self.tensor_attrs.get(id(a))
            if qualname is None:
                i = 0
                while hasattr(self.root, f"_tensor_constant{i}"):
                    i += 1
                qualname = f"_tensor_constant{i}"
                setattr(self.root, qualname, a)
                self.tensor_attrs[id(a)] = qualname
                self._constants_keepalive.append(a)
            return self.create_node("get_attr", qualname, (), {})
        return super().create_arg(a)

    def create_args_for_root(self, root_fn, is_module: bool, concrete_args=None):
        """Placeholders for root_fn's parameters (concrete_args: fixed values, kept in the signature as
        defaults). Returns (fn, values): *args/**kwargs become plain parameters of fn (a copy of root_fn's
        code), so that each is one Proxy."""
        sig = inspect.signature(root_fn)
        params = list(sig.parameters.values())
        if is_module:
            params = params[1:]
        concrete_args = concrete_args or {}
        if not isinstance(concrete_args, dict):
            concrete_args = dict(zip([p.name for p in params], concrete_args))
        unknown = set(concrete_args) - {p.name for p in params}
        if unknown:
            raise RuntimeError(f"strata.fx.symbolic_trace: concrete_args names {sorted(unknown)} are not "
                               f"parameters of {getattr(root_fn, '__qualname__', root_fn)}")
        values = {}
        for p in params:
            if p.name in concrete_args and concrete_args[p.name] is not PH:
                value = concrete_args[p.name]
                self.create_proxy("placeholder", p.name, (value,), {})
                values[p.name] = value
                continue
            prefix = {p.VAR_POSITIONAL: "*", p.VAR_KEYWORD: "**"}.get(p.kind, "")
            default = () if p.default is inspect.Parameter.empty else (p.default,)
            ann = p.annotation if p.annotation is not inspect.Parameter.empty else None
            values[p.name] = self.create_proxy("placeholder", prefix + p.name, default, {},
                                               type_expr=ann if isinstance(ann, type) else None)
        code = root_fn.__code__
        if code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS) or code.co_kwonlyargcount:
            n = code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & inspect.CO_VARARGS) \
                + bool(code.co_flags & inspect.CO_VARKEYWORDS)
            code = code.replace(co_argcount=n, co_posonlyargcount=0, co_kwonlyargcount=0,
                                co_flags=code.co_flags & ~(inspect.CO_VARARGS | inspect.CO_VARKEYWORDS))
            root_fn = types.FunctionType(code, root_fn.__globals__, root_fn.__name__, None, root_fn.__closure__)
        names = code.co_varnames[int(is_module):code.co_argcount]
        return root_fn, [values[nm] for nm in names]

    # ---- patching -------------------------------------------------------------------------------------
    def _patch_globals(self, g: dict):
        wrappers = self._wrappers
        for k, v in list(g.items()):
            if type(v).__name__ == "module" or isinstance(v, type):
                continue
            w = wrappers.get(id(v))
            if w is not None and w.__fx_original__ is v:
                self._patcher.setitem(g, k, w)
            elif id(v) in self._autowrap_function_ids:
                self._patcher.setitem(g, k, _recording_wrapper(v))

    def _install_patches(self, fn_globals):
        from ..nn.modules.module import Module
        p = self._patcher
        tracer = self
        orig_call = Module.__call__
        orig_getattr = Module.__getattr__
        parameter_proxy_cache: Dict[str, Any] = {}

        def module_call_wrapper(mod, *args, **kwargs):
            def forward(*a, **k):
                return orig_call(mod, *a, **k)
            return tracer.call_module(mod, forward, args, kwargs)

        def module_getattr_wrapper(mod, attr):
            v = orig_getattr(mod, attr)
            return tracer.getattr(attr, v, parameter_proxy_cache)

        p.setattr(Module, "__call__", module_call_wrapper)
        p.setattr(Module, "__getattr__", module_getattr_wrapper)
        # strata.Tensor's methods (binary operators need nothing: they return NotImplemented for a Proxy).
        # Restoring __getitem__/__setitem__ puts the type's slots back as they were (measured: indexing is
        # as fast after a trace as before).
        from .. import Tensor
        for k, v in list(vars(Tensor).items()):
            if k.startswith("__") and k not in ("__getitem__", "__setitem__"):
                continue
            if type(v).__name__ in ("op_method", "nb_method", "function"):
                w = _tensor_wrappers.get(k)
                if w is None or w.__fx_original__ is not v:
                    w = _tensor_wrappers[k] = _tensor_method_wrapper(k, v)
                p.setattr(Tensor, k, w)
        # strata's namespaces
        self._wrappers = _namespace_wrappers()
        for ns in ("strata", "strata.nn.functional", "strata.linalg", "strata.special", "strata.fft"):
            mod = sys.modules.get(ns)
            if mod is not None:
                for k, v in list(vars(mod).items()):
                    w = self._wrappers.get(id(v))
                    if w is not None and w.__fx_original__ is v and not k.startswith("_"):
                        p.setattr(mod, k, w)
        # wrap() registrations
        for (gid, name) in list(_wrapped_fns_to_patch):
            g = _wrapped_globals.get(gid)
            if g is None:
                continue
            if name not in g and getattr(builtins, name, None) is not None:
                # wrap("len"): the builtin, shadowed by a module global while tracing
                self._patcher._undo.append(lambda g=g, name=name: g.pop(name, None))
                self._patcher._seen.add(("i", id(g), name))
                g[name] = _recording_wrapper(getattr(builtins, name))
                continue
            if name not in g:
                continue
            p.setitem(g, name, _recording_wrapper(g[name]))
        self._patch_globals(fn_globals)
        for m in self._autowrap_search:  # math.sqrt(proxy) through the module, too
            self._patch_globals(vars(m))

    # ---- the trace ------------------------------------------------------------------------------------
    def trace(self, root, concrete_args: Optional[Dict[str, Any]] = None) -> Graph:
        """Traces ``root`` (an nn.Module or a function) into a Graph."""
        from ..nn.modules.module import Module
        from .. import Tensor
        _public_paths()  # the table of strata's functions is made before anything is patched
        if isinstance(root, types.MethodType) and isinstance(root.__self__, Module):
            root, fn, is_module = root.__self__, root.__func__, True  # model.forward: the module, that function
            self.root = root
        elif isinstance(root, Module):
            self.root = root
            fn = getattr(type(root), self.traced_func_name)
            is_module = True
        elif callable(root):
            self.root = Module()
            fn = root
            is_module = False
        else:
            raise TypeError(f"strata.fx.symbolic_trace: expected an nn.Module or a function, got {type(root).__name__}")
        while hasattr(fn, "__wrapped__") and not hasattr(fn, "__code__"):
            fn = fn.__wrapped__
        self.graph = Graph(tracer_cls=type(self))
        self.module_stack = collections.OrderedDict()
        self.submodule_paths = {id(m): name for name, m in self.root.named_modules()}
        self.tensor_attrs: Dict[int, str] = {}
        self._constants_keepalive = []
        for mname, m in self.root.named_modules():
            for k, v in vars(m).items():
                if isinstance(v, Tensor):
                    self.tensor_attrs.setdefault(id(v), f"{mname}.{k}" if mname else k)
        for bname, b in self.root.named_buffers():
            self.tensor_attrs.setdefault(id(b), bname)
        fn_to_call, values = self.create_args_for_root(fn, is_module, concrete_args)
        global _tracing_depth
        self._patcher = _Patcher()
        _tracing_depth += 1
        try:
            self._install_patches(getattr(fn, "__globals__", {}))
            result = fn_to_call(root, *values) if is_module else fn_to_call(*values)
        finally:
            _tracing_depth -= 1
            self._patcher.restore()
            self._patcher = None
        ret = getattr(fn, "__annotations__", {}).get("return")
        self.create_node("output", "output", (self.create_arg(result),), {},
                         type_expr=ret if isinstance(ret, type) else None)
        return self.graph

    _patcher = None



def symbolic_trace(root, concrete_args: Optional[Dict[str, Any]] = None) -> GraphModule:
    """Traces an nn.Module or a function into a GraphModule (the same computation, as a Graph)."""
    tracer = Tracer()
    graph = tracer.trace(root, concrete_args)
    from ..nn.modules.module import Module
    name = type(root).__name__ if isinstance(root, Module) else root.__name__
    return GraphModule(tracer.root, graph, name)
