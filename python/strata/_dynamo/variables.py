"""What the symbolic interpreter keeps on its stack and in its locals.

Each value the user's code computes during capture is one of these. Tensors are Meta
tensors bound to a graph value; Python constants are themselves; lists, tuples and
dicts hold other variables; modules, functions and other objects are the real objects
with the source they were read from (so a guard can check them on the next call). At a
graph break or a return every variable can write the Python expression that rebuilds
its real value after the graph has run (reconstruct)."""

import types

from . import sources as S

__all__ = ["Unsupported", "VT", "TensorVar", "ConstVar", "ListVar", "TupleVar", "NamedTupleVar", "DictVar",
           "ModuleVar", "ObjVar", "FuncVar", "BoundMethodVar", "NestedFuncVar", "IterVar", "NullVar",
           "GradModeVar", "GradExitVar", "AutocastVar", "AutocastExitVar", "ResumeIter", "CellVar", "SymIntVar",
           "SliceVar", "is_constant_value"]


class Unsupported(Exception):
    """Capture cannot follow this instruction: a graph break (or, with fullgraph=True, an error)."""

    def __init__(self, reason):
        super().__init__(reason)
        self.reason = reason


_CONST_TYPES = (type(None), bool, int, float, complex, str, bytes, type(...), type(NotImplemented), range)


def is_constant_value(v):
    """Immutable Python values the interpreter may fold and guard by equality."""
    from .. import _C
    from .._size import Size
    # Exact types only, as the equality guard compares them: a subclass (a numpy scalar is a float,
    # an IntEnum an int) is guarded by identity instead (Translator.wrap).
    if type(v) in _CONST_TYPES or type(v) in (_C.dtype, _C.device, Size):
        return True
    if type(v) in (tuple, frozenset):
        return all(is_constant_value(e) for e in v)
    if type(v) is slice:
        return all(is_constant_value(e) for e in (v.start, v.stop, v.step))
    return False


class VT:
    __slots__ = ("source",)

    def __init__(self, source=None):
        self.source = source

    def python_type(self):
        raise NotImplementedError

    def describe(self):
        return type(self).__name__


class NullVar(VT):
    """The NULL CPython pushes below a callable."""
    __slots__ = ()

    def reconstruct(self, cg):
        raise Unsupported("internal: NULL reconstructed as a value")


class TensorVar(VT):
    __slots__ = ("fake", "graph")

    def __init__(self, fake, graph, source=None):
        super().__init__(source)
        self.fake = fake
        self.graph = graph

    @property
    def vid(self):
        v = self.graph.value_of(self.fake)
        if v is None:
            raise Unsupported("internal: a tensor lost its graph value")
        return v

    def python_type(self):
        return type(self.fake)

    def reconstruct(self, cg):
        return cg.tensor(self)

    def describe(self):
        return f"Tensor{tuple(self.fake.shape)}"


class ConstVar(VT):
    __slots__ = ("value",)

    def __init__(self, value, source=None):
        super().__init__(source)
        self.value = value

    def python_type(self):
        return type(self.value)

    def reconstruct(self, cg):
        return cg.const(self.value)

    def describe(self):
        return repr(self.value)


class SymIntVar(VT):
    """An int that depends on a dynamic size (Note [Symbolic shapes] in symshape.py): its value at
    capture (hint) and its expression over the frame's input sizes."""
    __slots__ = ("expr",)

    def __init__(self, expr, source=None):
        super().__init__(source)
        self.expr = expr

    @property
    def hint(self):
        return self.expr.eval("hint")

    def python_type(self):
        return int

    def reconstruct(self, cg):
        return self.expr.py()

    def describe(self):
        return f"SymInt({self.expr!r}={self.hint})"


class SliceVar(VT):
    """A slice with a symbolic bound (x[:, :n] with n a SymIntVar)."""
    __slots__ = ("parts",)

    def __init__(self, parts):
        super().__init__(None)
        self.parts = list(parts)    # start, stop[, step]: variables

    def python_type(self):
        return slice

    def reconstruct(self, cg):
        return "slice(" + ", ".join(cg.rebuild(p) for p in self.parts) + ")"


class _SeqVar(VT):
    __slots__ = ("items",)

    def __init__(self, items, source=None):
        super().__init__(source)
        self.items = list(items)


class ListVar(_SeqVar):
    """A list. One that came from outside the frame (it has a source) is the caller's object:
    mutations are replayed on it after the graph runs."""
    __slots__ = ("mutated",)

    def __init__(self, items, source=None):
        super().__init__(items, source)
        self.mutated = False

    def python_type(self):
        return list

    def reconstruct(self, cg):
        if self.source is not None:
            return cg.source(self.source)
        return "[" + ", ".join(cg.rebuild(v) for v in self.items) + "]"


class TupleVar(_SeqVar):
    __slots__ = ()

    def python_type(self):
        return tuple

    def reconstruct(self, cg):
        parts = [cg.rebuild(v) for v in self.items]
        return "(" + "".join(p + ", " for p in parts) + ")"


class NamedTupleVar(_SeqVar):
    __slots__ = ("cls",)

    def __init__(self, cls, items, source=None):
        super().__init__(items, source)
        self.cls = cls

    def python_type(self):
        return self.cls

    def reconstruct(self, cg):
        parts = ", ".join(cg.rebuild(v) for v in self.items)
        if hasattr(self.cls, "_make"):
            return f"{cg.const(self.cls)}._make(({parts},))"
        return f"{cg.const(self.cls)}(({parts},))"


class DictVar(VT):
    __slots__ = ("items", "mutated", "cls")

    def __init__(self, items, source=None, cls=dict):
        super().__init__(source)
        self.items = dict(items)
        self.mutated = False
        self.cls = cls

    def python_type(self):
        return self.cls

    def reconstruct(self, cg):
        if self.source is not None:
            return cg.source(self.source)
        body = "{" + ", ".join(f"{cg.const(k)}: {cg.rebuild(v)}" for k, v in self.items.items()) + "}"
        return body if self.cls is dict else f"{cg.const(self.cls)}({body})"


class _ObjLike(VT):
    __slots__ = ("value",)

    def __init__(self, value, source=None):
        super().__init__(source)
        self.value = value

    def python_type(self):
        return type(self.value)

    def reconstruct(self, cg):
        return cg.source(self.source) if self.source is not None else cg.const(self.value)

    def describe(self):
        return f"{type(self).__name__}({type(self.value).__name__})"


class ModuleVar(_ObjLike):
    """An nn.Module instance (inlined, or called whole for strata's own modules)."""
    __slots__ = ()


class ObjVar(_ObjLike):
    """Any other Python object known by identity (a config object, a Python module, a class)."""
    __slots__ = ()


class FuncVar(_ObjLike):
    """A callable: a user function (inlined), a strata op or function (recorded), a builtin."""
    __slots__ = ()


class BoundMethodVar(VT):
    __slots__ = ("obj", "name", "func")

    def __init__(self, obj, name, func=None):
        super().__init__(None)
        self.obj = obj
        self.name = name
        self.func = func  # the plain function for methods of user classes/modules

    def python_type(self):
        return types.MethodType

    def reconstruct(self, cg):
        if self.func is not None:  # the function capture called (also one found through super())
            return f"{cg.const(types.MethodType)}({cg.const(self.func)}, {cg.rebuild(self.obj)})"
        return f"getattr({cg.rebuild(self.obj)}, {self.name!r})"


class SuperVar(VT):
    """super(cls, obj): attributes are looked up in type(obj)'s MRO after cls."""
    __slots__ = ("cls", "obj")

    def __init__(self, cls, obj):
        super().__init__(None)
        self.cls = cls
        self.obj = obj

    def python_type(self):
        return super

    def reconstruct(self, cg):
        return f"super({cg.const(self.cls)}, {cg.rebuild(self.obj)})"


class NestedFuncVar(VT):
    """A function created inside the captured frame (def/lambda/comprehension)."""
    __slots__ = ("code", "globals", "defaults", "kwdefaults", "closure", "qualname")

    def __init__(self, code, globals_, defaults, kwdefaults, closure, qualname):
        super().__init__(None)
        self.code, self.globals, self.defaults = code, globals_, defaults
        self.kwdefaults, self.closure, self.qualname = kwdefaults, closure, qualname

    def python_type(self):
        return types.FunctionType

    def reconstruct(self, cg):
        # A function made inside the frame (a lambda, a nested def, and on 3.11 a comprehension, which is
        # a function of its own) is made again from its code. Its closure holds the compiled function's
        # own closure cells (C[i]), cells the frame received (a resume function's), or cells of the frame
        # itself, made by the run function (Note [Closure cells at a graph break] in convert.py).
        closure = "None"
        if self.closure:
            cells = []
            for c in self.closure:
                if not isinstance(c, CellVar):
                    raise Unsupported("a closure that is not made of cells is live across a graph break")
                cells.append(cg.cell(c) + ", ")
            closure = "(" + "".join(cells) + ")"
        defaults = "None" if self.defaults is None else "(" + "".join(cg.rebuild(v) + ", " for v in self.defaults) + ")"
        return (f"{cg.const(_make_function)}({cg.const(self.code)}, {cg.const(self.globals)}, {defaults}, "
                f"{cg.const(self.kwdefaults)}, {cg.const(self.qualname)}, {closure})")


def _make_function(code, globals_, defaults, kwdefaults, qualname, closure):
    f = types.FunctionType(code, globals_, code.co_name, defaults, closure)
    f.__kwdefaults__ = kwdefaults
    f.__qualname__ = qualname
    f._strata_rebuilt = True   # a resume function's capture follows it by its code (Translator.wrap)
    return f


class CellVar(VT):
    """A cell of the captured frame (a local captured by an inner function)."""
    __slots__ = ("contents",)

    def __init__(self, contents=None, source=None):
        super().__init__(source)
        self.contents = contents

    def reconstruct(self, cg):
        return cg.cell(self)


class IterVar(VT):
    """An iterator over known items (range, list, tuple, enumerate, zip, dict views, module lists)."""
    __slots__ = ("items", "index")

    def __init__(self, items):
        super().__init__(None)
        self.items = list(items)
        self.index = 0

    def python_type(self):
        return type(iter([]))

    def reconstruct(self, cg):
        from . import config
        rest = self.items[self.index:]
        items = "[" + ", ".join(cg.rebuild(v) for v in rest) + "]"
        if len(rest) > config.max_resumed_loop_items:
            return f"iter({items})"   # the resume function breaks at the loop and runs it in Python
        return f"{cg.const(ResumeIter)}({items})"


class ResumeIter:
    """The iterator of a loop a graph break interrupted (an IterVar rebuilt): the items still to come.
    A resume function's capture reads them back (Translator.wrap), so the loop goes on in its graph
    instead of breaking again at FOR_ITER over an iterator it cannot see into."""
    __slots__ = ("items", "index")

    def __init__(self, items):
        self.items = items
        self.index = 0

    def __iter__(self):
        return self

    def __next__(self):
        i = self.index
        if i >= len(self.items):
            raise StopIteration
        self.index = i + 1
        return self.items[i]

    def __length_hint__(self):
        return len(self.items) - self.index


class GradModeVar(VT):
    """no_grad() / enable_grad() / set_grad_enabled(b) as a context manager."""
    __slots__ = ("enabled", "cls")

    def __init__(self, enabled, cls):
        super().__init__(None)
        self.enabled = enabled
        self.cls = cls

    def python_type(self):
        return self.cls

    def reconstruct(self, cg):
        return f"{cg.const(self.cls)}()" if self.cls.__name__ != "set_grad_enabled" else \
            f"{cg.const(self.cls)}({self.enabled!r})"


class GradExitVar(VT):
    """The __exit__ of a grad-mode block entered during capture: restores `prev`."""
    __slots__ = ("prev",)

    def __init__(self, prev):
        super().__init__(None)
        self.prev = prev

    def reconstruct(self, cg):
        return f"{cg.const(_grad_exit)}({self.prev!r})"


def _grad_exit(prev):
    from .. import _C

    def exit_(*_):
        _C._set_grad_enabled(prev)
        return False
    exit_._strata_grad_prev = prev
    return exit_


class AutocastVar(VT):
    """strata.autocast(...) / strata.amp.autocast / torch.autocast as a context manager: `value` is the
    real object, made during capture with the call's constant arguments (so its checks and warnings
    are eager mode's)."""
    __slots__ = ("value",)

    def __init__(self, value):
        super().__init__(None)
        self.value = value

    def python_type(self):
        return type(self.value)

    def state(self):
        """The (enabled, dtype) entering the block sets; None: the CPU state is left alone (cuda)."""
        v = self.value
        return None if v.device != "cpu" else (v._enabled, v.fast_dtype)

    def reconstruct(self, cg):
        v = self.value
        return f"{cg.const(type(v))}({v.device!r}, {cg.const(v.fast_dtype)}, {v._enabled!r})"


class AutocastExitVar(VT):
    """The __exit__ of an autocast block entered during capture: restores `prev` ((enabled, dtype);
    None: nothing to restore)."""
    __slots__ = ("prev",)

    def __init__(self, prev):
        super().__init__(None)
        self.prev = prev

    def reconstruct(self, cg):
        return f"{cg.const(_autocast_exit)}({cg.const(self.prev)})"


def set_autocast_state(state):
    from .. import _C
    if state is not None:
        _C._set_autocast_dtype(state[1])
        _C._set_autocast_enabled(state[0])


def autocast_state():
    from .. import _C
    return (_C._is_autocast_enabled(), _C._get_autocast_dtype())


def _autocast_exit(prev):
    def exit_(*_):
        set_autocast_state(prev)
        return False
    exit_._strata_autocast_prev = prev
    return exit_
