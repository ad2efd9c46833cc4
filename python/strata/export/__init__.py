"""strata.export: a function or module captured ahead of time as one graph (torch.export's API).

export(mod, args) runs strata.compile's capture (strata._dynamo) once, with fullgraph
semantics: anything that would be a graph break raises, naming the reason and the line. The
result is an ExportedProgram (the graph, its signature, the state_dict), callable and
convertible to a module; save/load write it to a self-contained file that runs without the
model's Python source (_serialize.py). strata.onnx.export builds on the same capture."""

import types

from .. import _C
from .._dynamo.convert import frame_arg_names, CompileError
from .._dynamo.variables import TensorVar, ConstVar, ListVar, TupleVar, NamedTupleVar, DictVar
from ._program import (ExportedProgram, ExportGraphSignature, InputSpec, OutputSpec, InputKind, OutputKind,
                       CallSpec)
from ._serialize import save, load
from ._dims import Dim, dims, ValueRanges
from ._capture import capture_dynamic

__all__ = ["export", "save", "load", "ExportedProgram", "ExportGraphSignature", "InputSpec", "OutputSpec",
           "InputKind", "OutputKind", "Dim", "dims", "ValueRanges", "ExportError"]


class ExportError(CompileError):
    """The function cannot be exported as one graph."""


def _module_caller(mod):
    """A function (self, <the parameters of mod.forward>) whose body calls self(...): the root
    frame of the capture for a module whose forward capture cannot start from (strata's own
    modules, which capture calls natively, and modules with hooks)."""
    import inspect
    sig = inspect.signature(mod.forward)
    params, call, ns = ["self"], [], {}
    star = False
    plist = list(sig.parameters.values())
    for i, p in enumerate(plist):
        text = p.name
        if p.default is not inspect.Parameter.empty:
            ns[f"__strata_default_{i}"] = p.default
            text += f"=__strata_default_{i}"
        if p.kind is p.VAR_POSITIONAL:
            text, star = "*" + p.name, True
            call.append("*" + p.name)
        elif p.kind is p.VAR_KEYWORD:
            text = "**" + p.name
            call.append("**" + p.name)
        elif p.kind is p.KEYWORD_ONLY:
            if not star:
                params.append("*")
                star = True
            call.append(f"{p.name}={p.name}")
        else:
            call.append(p.name)
        params.append(text)
        if p.kind is p.POSITIONAL_ONLY and (i + 1 == len(plist) or plist[i + 1].kind is not p.POSITIONAL_ONLY):
            params.append("/")
    src = f"def forward({', '.join(params)}):\n    return self({', '.join(call)})\n"
    exec(compile(src, f"<strata.export: {type(mod).__qualname__}>", "exec"), ns)
    fn = ns["forward"]
    fn.__qualname__ = f"{type(mod).__qualname__}.__call__"
    return fn


def _callable_parts(mod):
    """(function, self object or None, module owning the parameters or None)."""
    from ..nn import Module
    if isinstance(mod, Module):
        from .._dynamo.symbolic import _has_hooks
        f = mod.forward
        user_code = (isinstance(f, types.MethodType) and f.__self__ is mod
                     and isinstance(f.__func__, types.FunctionType)
                     and not (f.__func__.__module__ or "").startswith(("strata.", "torch.")))
        if user_code and not _has_hooks(mod):
            return f.__func__, mod, mod
        return _module_caller(mod), mod, mod
    owner = None
    f = mod
    if isinstance(f, types.MethodType):
        fn, self_obj = f.__func__, f.__self__
        if isinstance(self_obj, Module):
            owner = self_obj
    elif isinstance(f, types.FunctionType):
        fn, self_obj = f, None
    else:
        raise TypeError(f"strata.export: expected an nn.Module, a function or a method, got {type(mod).__name__}")
    if not isinstance(fn, types.FunctionType):
        raise TypeError(f"strata.export: {fn!r} is not a Python function")
    return fn, self_obj, owner


def _flatten_output(var, ids):
    if isinstance(var, TensorVar):
        ids.append(var.vid)
        return {"type": "tensor", "index": len(ids) - 1}
    if isinstance(var, ConstVar):
        v = var.value
        if v is None or type(v) in (bool, int, float, str):
            return {"type": "const", "value": v}
        raise ExportError(f"strata.export: the function returns the constant {v!r} ({type(v).__name__}); an "
                          "exported program returns tensors, numbers, strings, None and tuples/lists/dicts of them")
    if isinstance(var, NamedTupleVar):
        cls = var.cls
        return {"type": "namedtuple", "name": cls.__name__, "fields": list(getattr(cls, "_fields", ())),
                "items": [_flatten_output(v, ids) for v in var.items], "_cls": cls}
    if isinstance(var, TupleVar):
        return {"type": "tuple", "items": [_flatten_output(v, ids) for v in var.items]}
    if isinstance(var, ListVar):
        return {"type": "list", "items": [_flatten_output(v, ids) for v in var.items]}
    if isinstance(var, DictVar):
        keys = list(var.items)
        for k in keys:
            if type(k) not in (str, int):
                raise ExportError(f"strata.export: the function returns a dict with key {k!r}; only str and int "
                                  "keys are supported")
        return {"type": "dict", "keys": keys, "items": [_flatten_output(var.items[k], ids) for k in keys]}
    desc = var.describe() if hasattr(var, "describe") else type(var).__name__
    raise ExportError(f"strata.export: the function returns {desc} ({type(var).__name__}), which an exported "
                      "program cannot return")


def _write_args_by_op():
    """op full name -> indices of the arguments it writes (Tensor(a!))."""
    out = {}
    for s in _C._op_schemas():
        full = s["name"] + ("." + s["overload"] if s["overload"] else "")
        w = [i for i, a in enumerate(s["args"]) if a["is_write"]]
        if w:
            out[full] = w
    return out


# Ops that write arguments their schema does not mark (a!): batch_norm in training mode updates
# its running statistics.
_WRITES_WITHOUT_ANNOTATION = {
    "batch_norm": lambda a: [a[3], a[4]] if a[5] else [],
}


def _module_state(owner):
    params, buffers, nonpersistent = {}, {}, set()
    if owner is None:
        return params, buffers, nonpersistent
    for name, p in owner.named_parameters(remove_duplicate=False):
        params.setdefault(id(p), name)
    for name, b in owner.named_buffers(remove_duplicate=False):
        if b is not None:
            buffers.setdefault(id(b), name)
    for prefix, sub in owner.named_modules(remove_duplicate=False):
        for n in getattr(sub, "_non_persistent_buffers_set", ()):
            nonpersistent.add(f"{prefix}.{n}" if prefix else n)
    return params, buffers, nonpersistent


def export(mod, args, kwargs=None, *, dynamic_shapes=None, strict=True, preserve_module_call_signature=()):
    """Captures mod(*args, **kwargs) as one graph and returns an ExportedProgram.

    mod: an nn.Module (its forward is captured; parameters and buffers become graph inputs named
    by their fully qualified names), a function or a bound method. args: a tuple of example
    arguments. Any graph break raises ExportError (a CompileError) naming the reason and the
    source line; so does Python-visible mutation (setattr on an object, list or dict writes),
    which a graph cannot replay.

    dynamic_shapes (torch's forms: a dict by argument name or a tuple by position, each a dict
    {dim: Dim} or a tuple with one entry per dim, nested like the argument) marks dims of tensor
    inputs dynamic: Dim("b", min=, max=) (one symbol per name), derived dims (2*b, b+1),
    Dim.AUTO (dynamic where the program allows), Dim.DYNAMIC (dynamic or an error), Dim.STATIC,
    None or an int (static); mark_dynamic on an example input counts as Dim.DYNAMIC. The graph is
    captured with those dims symbolic (Note [Exported symbolic sizes] in _dims.py); a dim marked
    with a Dim or Dim.DYNAMIC that the program specializes raises ExportError naming the dim and
    the reason. range_constraints gives each symbol's range; calls are checked against them.
    strict is accepted: capture is always the bytecode-level (strict) one."""
    if not isinstance(args, tuple):
        raise TypeError(f"strata.export: args must be a tuple, got {type(args).__name__}")
    kwargs = dict(kwargs or {})
    fn, self_obj, owner = _callable_parts(mod)
    call_spec = CallSpec.of(fn, drop_first=self_obj is not None)
    bound = call_spec.bind(args, kwargs)
    given = list(call_spec.signature.bind(*args, **kwargs).arguments)
    names = frame_arg_names(fn.__code__)
    frame = ((self_obj,) if self_obj is not None else ()) + tuple(bound[n] for n in names[self_obj is not None:])
    first_user = 1 if self_obj is not None else 0
    cap = capture_dynamic(fn, frame, names, first_user, bound, given, dynamic_shapes, ExportError)
    out, ret = cap.out, cap.ret
    if out.side_effects:
        kinds = sorted({e[0] for e in out.side_effects})
        raise ExportError(f"strata.export: {fn.__qualname__} mutates Python state ({', '.join(kinds)}), which an "
                          f"exported graph cannot replay\n  at {fn.__code__.co_filename}:{fn.__code__.co_firstlineno}")
    graph = out.graph

    # Inputs: user inputs, parameters, buffers, lifted constants, sizes the graph reads.
    params, buffers, nonpersistent = _module_state(owner)
    values = graph.values
    specs, state_dict, constants = [], {}, {}
    for vid, src, t in zip(graph.inputs, out.input_sources, out.input_examples):
        vname = values[vid].name
        if not isinstance(src, tuple):   # a SymExpr: an int the graph reads, computed from the input sizes
            specs.append(InputSpec(InputKind.SYM_SIZE, vname, cap.tree(src)))
            continue
        root_kind, k = src[0]
        if id(t) in params:
            fqn = params[id(t)]
            specs.append(InputSpec(InputKind.PARAMETER, vname, fqn))
            state_dict[fqn] = t
        elif id(t) in buffers:
            fqn = buffers[id(t)]
            persistent = fqn not in nonpersistent
            specs.append(InputSpec(InputKind.BUFFER, vname, fqn, persistent))
            (state_dict if persistent else constants)[fqn] = t
        elif root_kind == "arg" and first_user <= k < len(names):
            path = (("arg", names[k]),) + tuple(src[1:])
            specs.append(InputSpec(InputKind.USER_INPUT, vname, path))
        else:
            specs.append(InputSpec(InputKind.CONSTANT_TENSOR, vname, vname))
            constants[vname] = t
    # Checks on non-tensor user inputs the capture specialised on.
    checks = []
    for g in out.guards:
        kind, src = g[0], g[1]
        if kind not in ("equals", "len") or src[0][0] != "arg" or not (first_user <= src[0][1] < len(names)):
            continue
        v = g[2]
        if v is None or type(v) in (bool, int, float, str):
            checks.append((kind, (("arg", names[src[0][1]]),) + tuple(src[1:]), v))
    # Buffers written in place by the graph.
    writes = _write_args_by_op()
    by_vid = {vid: s for vid, s in zip(graph.inputs, specs)}
    mutated = {}
    for n in graph.nodes:
        written = [n.args[i] for i in writes.get(n.op, ())]
        extra = _WRITES_WITHOUT_ANNOTATION.get(n.op)
        if extra is not None:
            written += extra(n.args)
        for a in written:
            if isinstance(a, _C._compile.Value) and a.id in by_vid and by_vid[a.id].kind == InputKind.BUFFER:
                mutated[a.name] = by_vid[a.id].target
    out_specs = [OutputSpec(OutputKind.USER_OUTPUT, values[v].name) for v in graph.outputs]
    sig = ExportGraphSignature(specs, out_specs, mutated)
    return ExportedProgram(graph, sig, state_dict, constants, call_spec, cap.out_spec, checks,
                           example_inputs=(args, kwargs), name=fn.__qualname__, symbols=cap.symbols,
                           sym_shapes=cap.sym_shapes, assertions=cap.assertions)
