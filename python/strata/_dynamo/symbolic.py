"""The symbolic bytecode interpreter: runs a Python function's bytecode on variables
(variables.py) instead of values, records every strata op into a graph (strata._C._compile)
and collects the guards under which the graph is valid.

One Translator runs one frame. The root translator runs the compiled function; calls of
user functions and of user modules' forward are inlined by child translators that share
the root's OutputGraph. Whatever the interpreter cannot follow raises Unsupported; the
capture then restarts and stops just before the root instruction that led there (a graph
break, see convert.py).

CPython 3.11 and 3.12 are supported; their differences are listed in _VERSION below."""

import builtins
import dis
import inspect
import linecache
import math
import operator
import sys
import types

from .. import _C
from . import sources as S
from .variables import (Unsupported, VT, TensorVar, ConstVar, ListVar, TupleVar, NamedTupleVar, DictVar,
                        ModuleVar, ObjVar, FuncVar, BoundMethodVar, NestedFuncVar, IterVar, NullVar, GradModeVar,
                        GradExitVar, AutocastVar, AutocastExitVar, ResumeIter, autocast_state, set_autocast_state,
                        CellVar, SuperVar, SymIntVar, SliceVar, is_constant_value)
from . import symshape as Y
from .symshape import SymExpr, SymbolicFallback

_compile = _C._compile
PY312 = sys.version_info >= (3, 12)

# The differences between the bytecode of 3.11 and 3.12 that the interpreter cares about.
_VERSION = {
    # LOAD_GLOBAL's low bit pushes a NULL (both); LOAD_ATTR's low bit is a method load (3.12 only).
    "load_attr_method_bit": PY312,
    # COMPARE_OP's argval is the operator string in both; FOR_ITER on exhaustion jumps to argval (3.11)
    # or past the END_FOR at argval (3.12).
    "for_iter_skips_end_for": PY312,
}

MAX_INLINE_DEPTH = 32

_NULL = NullVar()

# Tensor methods whose result depends on the data: the graph cannot contain them.
_DATA_DEPENDENT = {"item", "tolist", "numpy", "__bool__", "__int__", "__float__", "__index__", "__complex__",
                   "nonzero", "unique", "unique_consecutive", "masked_select", "argwhere", "data_ptr",
                   "untyped_storage", "storage", "__array__", "backward", "register_hook", "retain_grad",
                   "numel_nonzero", "equal", "allclose", "__format__", "__repr__", "__str__"}
_TENSOR_NO_RECORD_ATTRS = {"shape", "dtype", "ndim", "requires_grad", "is_leaf", "layout"}

_BINARY_OPS = {}
for _i, (_name, _sym) in enumerate(dis._nb_ops):
    _inplace = _name.startswith("NB_INPLACE_")
    _base = _name[len("NB_INPLACE_"):] if _inplace else _name[3:]
    _fn = {"ADD": operator.add, "AND": operator.and_, "FLOOR_DIVIDE": operator.floordiv, "LSHIFT": operator.lshift,
           "MATRIX_MULTIPLY": operator.matmul, "MULTIPLY": operator.mul, "REMAINDER": operator.mod,
           "OR": operator.or_, "POWER": operator.pow, "RSHIFT": operator.rshift, "SUBTRACT": operator.sub,
           "TRUE_DIVIDE": operator.truediv, "XOR": operator.xor}[_base]
    _ifn = {operator.add: operator.iadd, operator.and_: operator.iand, operator.floordiv: operator.ifloordiv,
            operator.lshift: operator.ilshift, operator.matmul: operator.imatmul, operator.mul: operator.imul,
            operator.mod: operator.imod, operator.or_: operator.ior, operator.pow: operator.ipow,
            operator.rshift: operator.irshift, operator.sub: operator.isub, operator.truediv: operator.itruediv,
            operator.xor: operator.ixor}[_fn]
    _BINARY_OPS[_i] = (_ifn if _inplace else _fn, _sym)

_COMPARE = {"<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne, ">": operator.gt,
            ">=": operator.ge}

# Builtins whose result on constant arguments is a constant.
_FOLDABLE_BUILTINS = {abs, min, max, len, int, float, bool, str, round, divmod, pow, sum, any, all, hash, repr,
                      ord, chr, isinstance, issubclass, callable, getattr, hasattr, tuple, sorted, id, type, format}
_FOLDABLE_MODULES = {"math", "operator", "_operator"}


def _is_tensor(v):
    return isinstance(v, _C.Tensor)


def _is_strata_function(v):
    """A strata op or a function of strata's own Python layer: called for real on Meta tensors."""
    tn = type(v).__name__
    if tn in ("op_function", "op_method"):
        return True
    if tn in ("nb_func", "nb_method", "nb_bound_method"):
        return (getattr(v, "__module__", None) or "").startswith("strata")
    mod = getattr(v, "__module__", None) or ""
    if isinstance(v, (types.FunctionType, types.BuiltinFunctionType)) and (mod == "strata" or mod.startswith("strata.")):
        return not mod.startswith("strata._dynamo")
    return False


def _module_classes():
    from ..nn.modules.module import Module
    from ..nn.modules.container import Sequential, ModuleList, ModuleDict
    return Module, Sequential, ModuleList, ModuleDict


def _has_hooks(m):
    d = m.__dict__
    return bool(d.get("_forward_pre_hooks") or d.get("_forward_hooks"))


class OutputGraph:
    """What one capture produces: the graph, its inputs (with their sources), guards, side effects."""

    def __init__(self, fn, arg_names, nargs):
        if not _IS_COMPILING:
            _init_special_functions()
        self.fn = fn
        self.graph = _compile.Graph()
        self.arg_names = list(arg_names)
        self.nargs = nargs
        self.input_sources = []        # source of each graph input, in order
        self.input_examples = []       # the real tensors of the capturing call, in the same order
        self.tensor_vars = {}          # id(real tensor) -> TensorVar (one input per tensor, even if reached twice)
        self.keepalive = []            # real objects whose ids key tensor_vars
        self.guards = []               # (kind, source, *payload)
        self.guarded = set()
        self.extra_roots = []          # globals dicts of other modules: sources ("arg", nargs + j)
        self.side_effects = []         # ("setattr", obj VT, name, value VT) / ("list", ListVar) / ("dict", DictVar)
        self.source_loc = None
        self.graph_breaks = []
        self.grad_at_entry = _C._is_grad_enabled()    # guarded (global state)
        self.num_inlined = 0
        # Symbolic sizes (Note [Symbolic shapes] in symshape.py); all empty while sizes are static.
        self.dyn = None                # {"all": bool, "dims": {source: set of dims}}
        self.probe_graph = None        # the probe world's scratch graph
        self.symbols = []
        self.sym_shapes = {}           # id(meta tensor) -> (meta tensor, probe tensor, symbolic shape)
        self.sym_by_vid = {}           # graph value -> symbolic shape
        self.sym_inputs = {}           # SymExpr -> int graph input
        self.relations = []            # (lhs, op, rhs) guard trees for add_dim_relation
        self.named_symbols = {}        # strata.export: Dim key -> Symbol (_named_dim)

    # -- symbolic sizes ----------------------------------------------------------------------------
    def enable_dynamic(self, spec):
        self.dyn = spec
        self.probe_graph = _compile.Graph()

    @property
    def dynamic(self):
        return self.probe_graph is not None

    def _dynamic_dims(self, t, source):
        """Dims of a graph input that get a symbol: marked (dynamic=True, automatic dynamic, mark_dynamic)
        and of size >= 2 (0 and 1 stay specialized)."""
        if source is None:
            return []
        marked = set(self.dyn["dims"].get(source, ()))
        marked |= set(getattr(t, "_strata_dynamic_dims", None) or ())
        if self.dyn["all"] and all(k in ("arg", "item", "dict_item") for k, _ in source) and source[0][1] < self.nargs:
            marked |= set(range(t.dim()))
        static = self.dyn.get("static", ())
        return sorted(d % t.dim() for d in marked if t.dim() and -t.dim() <= d < t.dim() and t.shape[d % t.dim()] >= 2
                      and (source, d % t.dim()) not in static)

    def _named_dim(self, source, d, size, spec):
        """strata.export's dims (dyn["named"]: (source, dim) -> (key, coeff, offset, (root source, root dim))):
        dims with one key share its symbol, a derived dim is coeff * symbol + offset, and there is no duck
        sizing between keys. The symbol's (source, dim) is where export reads it: the root's own dim, or
        a derived one when no input dim is the root itself (Note [Exported symbolic sizes])."""
        key, coeff, offset, (rsrc, rdim) = spec
        sym = self.named_symbols.get(key)
        if sym is None:
            sym = self.named_symbols[key] = Y.Symbol(rsrc, rdim, (size - offset) // coeff, len(self.symbols))
            self.symbols.append(sym)
        return Y.binop("+", Y.binop("*", SymExpr("sym", sym), coeff), offset)

    def relation(self, lhs, op, rhs):
        rel = (Y.sym_const(lhs).guard_tree(), op, Y.sym_const(rhs).guard_tree())
        if rel not in self.relations:
            self.relations.append(rel)

    def sym_shape(self, var):
        e = self.sym_shapes.get(id(var.fake))
        return e[2] if e is not None else tuple(var.fake.shape)

    def register_sym(self, fake, probe, shape):
        self.sym_shapes[id(fake)] = (fake, probe, shape)
        vid = self.graph.value_of(fake)
        if vid is not None:
            self.sym_by_vid[vid] = shape

    def sym_input(self, expr):
        """The int graph input that carries expr's value (computed by the run function)."""
        vid = self.sym_inputs.get(expr)
        if vid is None:
            vid = self.sym_inputs[expr] = self.graph.add_input(f"sym{len(self.sym_inputs)}", expr.eval("hint"))
            self.input_sources.append(expr)
            self.input_examples.append(expr.eval("hint"))
        return vid

    # -- guards ------------------------------------------------------------------------------
    def guard(self, kind, source, *payload):
        if source is None:
            return
        key = (kind, source)
        if key in self.guarded:
            return
        self.guarded.add(key)
        self.guards.append((kind, source) + payload)

    def root_for_globals(self, gdict):
        """A source root for the globals dict of a function from another module."""
        if gdict is self.fn.__globals__:
            return None
        for j, d in enumerate(self.extra_roots):
            if d is gdict:
                return S.arg(self.nargs + j)
        self.extra_roots.append(gdict)
        return S.arg(self.nargs + len(self.extra_roots) - 1)

    # -- graph inputs -------------------------------------------------------------------------
    def tensor_input(self, t, source):
        key = id(t)
        var = self.tensor_vars.get(key)
        if var is not None:
            return var
        dims = self._dynamic_dims(t, source) if self.dynamic else []
        shape = tuple(t.shape)
        if dims:
            if tuple(t.stride()) != Y.contiguous_strides(shape):
                raise SymbolicFallback(f"the dynamic input {S.name(source, self.arg_names)} is not contiguous")
            shape = list(shape)
            named = self.dyn.get("named")
            for d in dims:
                if named is not None and (source, d) in named:
                    shape[d] = self._named_dim(source, d, shape[d], named[(source, d)])
                    continue
                same = next((y for y in self.symbols if y.hint == shape[d]), None)
                if same is not None:
                    # Equal sizes share a symbol (duck sizing), under an equality guard.
                    self.relations.append((("size", source, d), "==", SymExpr("sym", same).guard_tree()))
                    shape[d] = SymExpr("sym", same)
                    continue
                sym = Y.Symbol(source, d, shape[d], len(self.symbols))
                self.symbols.append(sym)
                shape[d] = SymExpr("sym", sym)
                self.relation(shape[d], ">=", 2)
            shape = tuple(shape)
        if source is None:
            vid = self.graph.add_constant(t)
        else:
            name = S.ident(source, self.arg_names)
            vid = self.graph.add_input(name, t)
            self.input_sources.append(source)
            self.input_examples.append(t)
            sizes = tuple(None if d in dims else n for d, n in enumerate(t.shape))
            strides = list(t.stride())
            for d in range(t.dim()):
                if any(k > d for k in dims):
                    # Contiguity instead of the stride itself: stride[d] == size[d+1] * stride[d+1].
                    strides[d] = None
                    self.relations.append((("stride", source, d), "==",
                                           ("mul", ("size", source, d + 1), ("stride", source, d + 1))))
            self.guard("tensor", source, t.dtype, str(t.device), t.requires_grad, sizes, tuple(strides),
                       _C._guards.dispatch_key_bits(t))
        fake = _C._ops.empty_strided(tuple(t.shape), tuple(t.stride()), dtype=t.dtype, device="meta")
        if t.requires_grad:
            fake.requires_grad_(True)
        self.graph.bind(fake, vid)
        if self.dynamic:
            psizes = tuple(Y.value_at(d, "probe") for d in shape)
            pstrides = Y.contiguous_strides(psizes) if dims else tuple(t.stride())
            pf = _C._ops.empty_strided(psizes, pstrides, dtype=t.dtype, device="meta")
            if t.requires_grad:
                pf.requires_grad_(True)
            pvid = self.probe_graph.add_constant(t) if source is None else self.probe_graph.add_input(
                S.ident(source, self.arg_names), t)
            self.probe_graph.bind(pf, pvid)
            self.register_sym(fake, pf, shape)
        var = TensorVar(fake, self.graph, source)
        var_real_device[id(fake)] = t.device
        self.tensor_vars[key] = var
        self.keepalive.append(t)
        return var


# Real device of each fake tensor made for a graph input; ops' results take the device of their
# first tensor argument (capture runs on one device).
var_real_device = {}


class Translator:
    def __init__(self, out, code, f_globals, locals_, cells, parent=None, fn_name="", globals_root=None,
                 break_at=None, counts=None):
        self.out = out
        self.code = code
        self.f_globals = f_globals
        self.f_builtins = f_globals.get("__builtins__", builtins)
        if isinstance(self.f_builtins, types.ModuleType):
            self.f_builtins = self.f_builtins.__dict__
        self.globals_root = globals_root     # None: the root frame's own globals (("global", name) sources)
        self.locals = locals_                # name -> VT
        self.cells = cells                   # name -> CellVar (cellvars and freevars)
        self.parent = parent
        self.depth = 0 if parent is None else parent.depth + 1
        self.fn_name = fn_name or code.co_name
        self.stack = []
        self.kw_names = None
        self.instructions, self.index_of = _decoded(code)
        self.ip = 0
        self.current = None
        self.break_at = break_at            # (offset, arrival) at which the root frame breaks
        self.counts = counts if counts is not None else {}
        self.line = None
        self.grad_enabled = _C._is_grad_enabled()
        self.autocast_at_entry = autocast_state()
        self.yields = None                  # the items of a generator expression being run (inline)

    # -- helpers ------------------------------------------------------------------------------
    def push(self, v):
        self.stack.append(v)

    def pop(self):
        return self.stack.pop()

    def popn(self, n):
        if n == 0:
            return []
        items = self.stack[-n:]
        del self.stack[-n:]
        return items

    def jump_to(self, offset):
        self.ip = self.index_of[offset]

    def location(self):
        inst = self.current
        line = inst.positions.lineno if inst.positions and inst.positions.lineno else self.line
        text = linecache.getline(self.code.co_filename, line).strip() if line else ""
        return f"{self.code.co_filename}:{line} in {self.fn_name}: {text}"

    def user_location(self):
        """file:line of the root frame's current instruction (what a graph-break message names)."""
        tx = self
        while tx.parent is not None:
            tx = tx.parent
        return tx.location()

    # -- the loop ------------------------------------------------------------------------------
    def run(self):
        """Runs to RETURN_VALUE; returns the returned variable."""
        while True:
            inst = self.instructions[self.ip]
            self.current = inst
            self.ip += 1
            if inst.positions is not None and inst.positions.lineno is not None and inst.positions.lineno != self.line:
                self.line = inst.positions.lineno
                self.out.source_loc = None
            if self.parent is None:
                n = self.counts.get(inst.offset, 0) + 1
                self.counts[inst.offset] = n
                if self.break_at == (inst.offset, n):
                    self.grad_at_break = _C._is_grad_enabled()
                    self.autocast_at_break = autocast_state()
                    return ("break", inst)
            handler = getattr(self, inst.opname, None)
            try:
                if handler is None:
                    raise Unsupported(f"bytecode {inst.opname} is not supported by capture")
                r = handler(inst)
            except Unsupported as e:
                if not hasattr(e, "inner_location"):  # where it happened, inside inlined calls too
                    e.inner_location = self.location()
                if self.parent is None and not hasattr(e, "root_point"):
                    e.root_point = (inst.offset, self.counts[inst.offset])
                    e.location = self.location()
                raise
            if r is not None:
                if self.parent is None:
                    self.grad_at_end = _C._is_grad_enabled()
                    self.autocast_at_end = autocast_state()
                return ("return", r)

    # -- wrapping real values --------------------------------------------------------------------
    def wrap(self, value, source, guard=True):
        out = self.out
        Module, Sequential, ModuleList, ModuleDict = _module_classes()
        if _is_tensor(value):
            return out.tensor_input(value, source)
        if is_constant_value(value):
            if guard:
                out.guard("equals", source, value)
            return ConstVar(value, source)
        if isinstance(value, Module):
            if guard:
                out.guard("id", source, value)
            return ModuleVar(value, source)
        tp = type(value)
        if tp is list:
            out.guard("type", source, list)
            out.guard("len", source, len(value))
            return ListVar([self.wrap(v, S.item(source, i)) for i, v in enumerate(value)], source)
        if tp is tuple:
            out.guard("type", source, tuple)
            out.guard("len", source, len(value))
            return TupleVar([self.wrap(v, S.item(source, i)) for i, v in enumerate(value)], source)
        if isinstance(value, tuple) and hasattr(tp, "_fields"):
            out.guard("type", source, tp)
            return NamedTupleVar(tp, [self.wrap(v, S.item(source, i)) for i, v in enumerate(value)], source)
        if isinstance(value, dict) and all(is_constant_value(k) for k in value):
            out.guard("type", source, tp)
            out.guard("dict_keys", source, list(value))
            return DictVar({k: self.wrap(v, S.dict_item(source, k)) for k, v in value.items()}, source, cls=tp)
        if isinstance(value, types.FunctionType) and hasattr(value, "_strata_grad_prev"):
            # The exit of a grad-mode block entered before a graph break (variables._grad_exit).
            out.guard("equals", S.attr(source, "_strata_grad_prev"), value._strata_grad_prev)
            return GradExitVar(value._strata_grad_prev)
        if tp is types.CellType:
            # A cell a resume function received (Note [Closure cells at a graph break] in convert.py).
            try:
                contents = value.cell_contents
            except ValueError:
                return CellVar(None, source=source)
            return CellVar(self.wrap(contents, S.attr(source, "cell_contents")), source=source)
        if isinstance(value, types.FunctionType) and getattr(value, "_strata_rebuilt", False) and source is not None:
            # A function the run function of a graph break made again (variables._make_function): made
            # anew on every call, so it is followed by its code, defaults and cells, not its identity.
            out.guard("id", S.attr(source, "__code__"), value.__code__)
            out.guard("id", S.attr(source, "__globals__"), value.__globals__)
            defaults = None
            if value.__defaults__ is not None:
                dv = self.wrap(value.__defaults__, S.attr(source, "__defaults__"))
                defaults = tuple(ConstVar(d) for d in dv.value) if isinstance(dv, ConstVar) else tuple(dv.items)
            else:
                out.guard("equals", S.attr(source, "__defaults__"), None)
            kwd = value.__kwdefaults__
            if kwd is None or all(is_constant_value(v) for v in kwd.values()):
                out.guard("equals", S.attr(source, "__kwdefaults__"), kwd)
                closure = None
                if value.__closure__:
                    closure = [self.wrap(c, S.item(S.attr(source, "__closure__"), i))
                               for i, c in enumerate(value.__closure__)]
                return NestedFuncVar(value.__code__, value.__globals__, defaults, kwd, closure, value.__qualname__)
        if tp is ResumeIter:
            # A loop's iterator rebuilt at a graph break (variables.ResumeIter): its remaining items.
            out.guard("type", source, tp)
            out.guard("equals", S.attr(source, "index"), value.index)
            items = self.wrap(value.items, S.attr(source, "items"))
            return IterVar(items.items[value.index:])
        if isinstance(value, types.FunctionType) and hasattr(value, "_strata_autocast_prev"):
            # The exit of an autocast block entered before a graph break (variables._autocast_exit).
            out.guard("equals", S.attr(source, "_strata_autocast_prev"), value._strata_autocast_prev)
            return AutocastExitVar(value._strata_autocast_prev)
        if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, type)) or _is_strata_function(value):
            if guard:
                out.guard("id", source, value)
            return FuncVar(value, source)
        if isinstance(value, types.ModuleType):
            if guard:
                out.guard("id", source, value)
            return ObjVar(value, source)
        if isinstance(value, (int, float, complex, str, bytes)):
            # A subclass of a constant type (numpy scalar, IntEnum): folded by value, guarded by identity.
            if guard:
                out.guard("id", source, value)
            return ObjVar(value, source)
        if isinstance(value, types.MethodType):
            if guard:
                out.guard("id", S.attr(source, "__func__"), value.__func__)
            selfv = self.wrap(value.__self__, S.attr(source, "__self__"), guard)
            return BoundMethodVar(selfv, value.__func__.__name__, value.__func__)
        if guard:
            out.guard("type", source, tp)
        return ObjVar(value, source)

    def wrap_result(self, res):
        """Wraps what a strata call returned during capture."""
        if _is_tensor(res):
            vid = self.out.graph.value_of(res)
            if vid is None:
                if res.device.type == "meta":
                    raise Unsupported("a strata call returned a tensor that was not recorded")
                return self.out.tensor_input(res, None)
            return TensorVar(res, self.out.graph)
        if is_constant_value(res):
            return ConstVar(res)
        if type(res) is tuple:
            return TupleVar([self.wrap_result(r) for r in res])
        if isinstance(res, tuple) and hasattr(type(res), "_fields"):
            return NamedTupleVar(type(res), [self.wrap_result(r) for r in res])
        if type(res) is list:
            return ListVar([self.wrap_result(r) for r in res])
        if type(res) is dict:
            return DictVar({k: self.wrap_result(v) for k, v in res.items()})
        Module = _module_classes()[0]
        if isinstance(res, Module):
            return ModuleVar(res)
        raise Unsupported(f"a strata call returned a {type(res).__name__}, which capture does not follow")

    def to_real(self, v, probe=False):
        """A variable as the value a strata call receives during capture (Meta tensors for tensors;
        probe: the probe world's, Note [Symbolic shapes])."""
        if isinstance(v, TensorVar):
            if probe:
                e = self.out.sym_shapes.get(id(v.fake))
                if e is None:
                    raise SymbolicFallback("internal: a tensor has no stand-in at the probe size")
                return e[1]
            return v.fake
        if isinstance(v, ConstVar):
            return v.value
        if isinstance(v, SymIntVar):
            return v.expr.eval("probe") if probe else Y.SymInt(v.hint, self.out.sym_input(v.expr))
        if isinstance(v, SliceVar):
            return slice(*[self.const_value(p, "slice bound") for p in v.parts])
        if isinstance(v, ListVar):
            return [self.to_real(e, probe) for e in v.items]
        if isinstance(v, TupleVar):
            return tuple(self.to_real(e, probe) for e in v.items)
        if isinstance(v, NamedTupleVar):
            items = [self.to_real(e, probe) for e in v.items]
            return v.cls._make(items) if hasattr(v.cls, "_make") else v.cls(items)
        if isinstance(v, DictVar):
            return v.cls((k, self.to_real(e, probe)) for k, e in v.items.items())
        if isinstance(v, (ModuleVar, ObjVar, FuncVar)):
            return v.value
        raise Unsupported(f"cannot pass {v.describe()} to a strata function during capture")

    def const_value(self, v, what="value"):
        if isinstance(v, ConstVar):
            return v.value
        if isinstance(v, SymIntVar):
            # A dynamic size used as a plain number (a range bound, a fold): specialized, under a guard.
            h = v.hint
            self.out.relation(v.expr, "==", h)
            return h
        if isinstance(v, SliceVar):
            return slice(*[self.const_value(p, what) for p in v.parts])
        if isinstance(v, TupleVar):
            return tuple(self.const_value(e, what) for e in v.items)
        if isinstance(v, ListVar):
            return [self.const_value(e, what) for e in v.items]
        if isinstance(v, (FuncVar, ObjVar, ModuleVar)):
            return v.value
        if isinstance(v, TensorVar):
            raise Unsupported(f"the {what} depends on a tensor's data (data-dependent control flow)")
        raise Unsupported(f"the {what} is a {v.describe()}, which capture does not fold")

    # -- calling strata for real ------------------------------------------------------------------
    def call_strata(self, fn, args, kwargs, name=None):
        a = [self.to_real(v) for v in args]
        k = {n: self.to_real(v) for n, v in kwargs.items()}
        name = name or getattr(fn, "__name__", repr(fn))
        out = self.out
        if out.source_loc is None:
            out.source_loc = self.location()
            _compile.set_source(out.source_loc)
        dyn = out.dynamic
        prev = _compile.set_note_symints(True) if dyn else None
        try:
            with _compile.record(out.graph):
                res = fn(*a, **k)
        except Unsupported:
            raise
        except Exception as e:  # the eager call (after the break) raises it again, with the real values
            if dyn and "symbolic" in str(e):
                raise SymbolicFallback(f"{name}: {e}")
            raise Unsupported(f"{name} raised during capture ({type(e).__name__}: {e})")
        finally:
            if dyn:
                _compile.set_note_symints(prev)
        if dyn:
            self.probe_call(fn, args, kwargs, res, name)
        return self.wrap_result(res)

    def specialize_for(self, args, kwargs, reason):
        """An op failed at the probe: the dynamic input sizes among its arguments that equal a static size
        there are made static (SpecializeSizes), else the frame falls back to static sizes."""
        shapes = []

        def collect(v):
            if isinstance(v, TensorVar):
                shapes.append(self.out.sym_shape(v))
            elif isinstance(v, (ListVar, TupleVar, NamedTupleVar)):
                for e in v.items:
                    collect(e)
        for v in list(args) + list(kwargs.values()):
            collect(v)
        statics = {d for sh in shapes for d in sh if not isinstance(d, SymExpr)}
        if any(isinstance(v, ModuleVar) for v in args) or not statics:
            # A module's parameters are graph inputs already: their sizes are the static ones it may need.
            statics |= {d for sh in self.out.sym_by_vid.values() for d in sh if not isinstance(d, SymExpr)}
        dims = set()
        for sh in shapes:
            for d in sh:
                if isinstance(d, SymExpr) and d.op == "sym" and d.a.hint in statics:
                    dims.add((d.a.source, d.a.dim))
        if dims:
            raise Y.SpecializeSizes(reason, dims)
        raise SymbolicFallback(reason)

    def probe_call(self, fn, args, kwargs, res, name):
        """Runs the call again in the probe world and gives its tensor results symbolic shapes."""
        out = self.out
        a = [self.to_real(v, True) for v in args]
        k = {n: self.to_real(v, True) for n, v in kwargs.items()}
        try:
            with _compile.record(out.probe_graph):
                res_p = fn(*a, **k)
        except Exception as e:
            self.specialize_for(args, kwargs, f"{name} fails at another size ({type(e).__name__}: {e})")
        cache = []

        def cands():
            if not cache:
                shapes, ints = [], []

                def collect(v):
                    if isinstance(v, TensorVar):
                        shapes.append(out.sym_shape(v))
                    elif isinstance(v, SymIntVar):
                        ints.append(v.expr)
                    elif isinstance(v, SliceVar):
                        for p in v.parts:
                            collect(p)
                    elif isinstance(v, (ListVar, TupleVar, NamedTupleVar)):
                        for e in v.items:
                            collect(e)
                    elif isinstance(v, DictVar):
                        for e in v.items.values():
                            collect(e)
                for v in list(args) + list(kwargs.values()):
                    collect(v)
                cache.append(Y.candidates(shapes, ints))
            return cache[0]

        def pair(r, p):
            if _is_tensor(r):
                if not _is_tensor(p):
                    raise SymbolicFallback(f"{name} returns a tensor at one size and not at another")
                out.register_sym(r, p, Y.infer_shape(tuple(r.shape), tuple(p.shape), cands, name))
            elif isinstance(r, (tuple, list)):
                if not isinstance(p, (tuple, list)) or len(r) != len(p):
                    raise SymbolicFallback(f"{name} returns a different number of results at another size")
                for x, y in zip(r, p):
                    pair(x, y)
            elif isinstance(r, (int, bool)) and r != p:
                raise SymbolicFallback(f"{name} returns a number that depends on a dynamic size")
        pair(res, res_p)

    # -- calls -----------------------------------------------------------------------------------
    def call(self, fn, args, kwargs):
        Module, Sequential, ModuleList, ModuleDict = _module_classes()
        if isinstance(fn, BoundMethodVar):
            return self.call_method(fn.obj, fn.name, fn.func, args, kwargs)
        if isinstance(fn, NestedFuncVar):
            return self.inline(fn.code, fn.globals, fn.defaults, fn.kwdefaults, fn.closure, args, kwargs,
                               fn.qualname, None)
        if isinstance(fn, GradExitVar):
            # Leaving a grad-mode block: ops recorded from here on carry the restored mode.
            _C._set_grad_enabled(fn.prev)
            return ConstVar(False)
        if isinstance(fn, AutocastExitVar):
            # Leaving an autocast block: ops recorded from here on carry the restored state.
            set_autocast_state(fn.prev)
            return ConstVar(False)
        if isinstance(fn, ModuleVar):
            return self.call_module(fn, args, kwargs)
        if isinstance(fn, AutocastVar) and len(args) == 1 and not kwargs:
            # autocast(...)(f) inside the region (the decorator form): its wrapper, inlined when called.
            return self.call_value(FuncVar(_autocast_wrap), _autocast_wrap, [fn, args[0]], {})
        if isinstance(fn, (FuncVar, ObjVar, ConstVar)):
            return self.call_value(fn, fn.value, args, kwargs)
        if isinstance(fn, TensorVar):
            raise Unsupported("calling a tensor")
        raise Unsupported(f"calling a {fn.describe()}")

    def call_value(self, fnvar, f, args, kwargs):
        from .. import _grad_mode
        from . import eval_frame
        if getattr(f, "_strata_disable", False) is True:
            raise Unsupported(f"{getattr(f, '__qualname__', f)} is marked strata.compiler.disable")
        if f is _C._is_grad_enabled:   # the grad mode is guarded: a constant of the graph
            return ConstVar(_C._is_grad_enabled())
        hashable = _hashable(f)
        if hashable and f in _IS_COMPILING:
            return ConstVar(True)
        if hashable and f in eval_frame._allowed_in_graph:
            return self.call_strata(f, args, kwargs)
        if _is_strata_function(f):
            if getattr(f, "__name__", None) == "detach" and getattr(f, "__module__", "").startswith("strata") \
                    and len(args) == 1 and not kwargs and isinstance(args[0], TensorVar):
                return self.call_strata(_detached_alias, args, {}, name="strata.detach")
            if f in _GRAPH_BREAK_FUNCS:
                raise Unsupported(f"{f.__module__}.{f.__name__} is a graph break")
            return self.call_strata(f, args, kwargs)
        handler = _BUILTIN_HANDLERS.get(f) if hashable else None
        if handler is not None:
            return handler(self, args, kwargs)
        if f is print:
            raise Unsupported("print() is a graph break")
        if isinstance(f, type):
            if f in (_grad_mode.no_grad, _grad_mode.enable_grad):
                return GradModeVar(f is _grad_mode.enable_grad, f)
            if f is _grad_mode.set_grad_enabled:
                return GradModeVar(bool(self.const_value(args[0])), f)
            if issubclass(f, _autocast_class()):
                a = [self.const_value(v, "argument of autocast") for v in args]
                k = {n: self.const_value(v, "argument of autocast") for n, v in kwargs.items()}
                try:
                    return AutocastVar(f(*a, **k))
                except Exception as e:  # eager mode raises it again
                    raise Unsupported(f"autocast(...) raised during capture ({type(e).__name__}: {e})")
            if issubclass(f, tuple) and hasattr(f, "_fields"):
                if all(isinstance(a, ConstVar) for a in args) and not kwargs:
                    return ConstVar(f(*[a.value for a in args]))
                return NamedTupleVar(f, args)
            if f.__module__ in ("strata._size",) or f.__module__ == "builtins":
                return self.fold(f, args, kwargs)
            raise Unsupported(f"creating a {f.__qualname__} object inside the compiled region")
        if isinstance(f, types.FunctionType):
            if f.__code__.co_flags & (inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR):
                raise Unsupported(f"calling the generator function {f.__qualname__}")
            mod = f.__module__ or ""
            if mod.split(".")[0] in _SKIP_MODULES:
                raise Unsupported(f"calling {mod}.{f.__qualname__} (a library capture does not inline)")
            closure = None
            if f.__closure__:
                closure = [CellVar(self.wrap(c.cell_contents, S.attr(S.item(S.attr(fnvar.source, "__closure__"), i),
                                                                          "cell_contents")))
                           if _cell_filled(c) else CellVar(None) for i, c in enumerate(f.__closure__)]
            return self.inline(f.__code__, f.__globals__, f.__defaults__, f.__kwdefaults__, closure, args, kwargs,
                               f.__qualname__, fnvar.source)
        if isinstance(f, types.BuiltinFunctionType) or type(f).__name__ in ("builtin_function_or_method",
                                                                           "method-wrapper"):
            mod = getattr(f, "__module__", None) or ""
            if f in _FOLDABLE_BUILTINS or mod in _FOLDABLE_MODULES:
                return self.fold(f, args, kwargs)
            raise Unsupported(f"calling the builtin {getattr(f, '__qualname__', f)}")
        if isinstance(f, types.MethodType):
            selfv = self.wrap(f.__self__, None, guard=False)
            return self.call_method(selfv, f.__func__.__name__, f.__func__, args, kwargs)
        call = getattr(type(f), "__call__", None)
        if isinstance(call, types.FunctionType):
            return self.call_value(FuncVar(call), call, [fnvar] + list(args), kwargs)
        raise Unsupported(f"calling a {type(f).__name__} object")

    def fold(self, f, args, kwargs):
        a = [self.const_value(v, f"argument of {getattr(f, '__name__', f)}") for v in args]
        k = {n: self.const_value(v) for n, v in kwargs.items()}
        try:
            res = f(*a, **k)
        except Exception as e:
            raise Unsupported(f"{getattr(f, '__name__', f)} raised during capture ({type(e).__name__}: {e})")
        if is_constant_value(res):
            return ConstVar(res)
        if type(res) is list:
            return ListVar([ConstVar(r) if is_constant_value(r) else self.wrap(r, None, False) for r in res])
        return self.wrap(res, None, guard=False)

    def call_method(self, obj, name, func, args, kwargs):
        Module, Sequential, ModuleList, ModuleDict = _module_classes()
        if isinstance(obj, TensorVar):
            return self.call_tensor_method(obj, name, args, kwargs)
        if isinstance(obj, ModuleVar):
            m = obj.value
            if name == "forward" and func is not None and (type(m).__module__ or "").startswith("strata.nn") \
                    and func is not Module.forward:
                # module.forward(x) of strata's own module (Sequential calls its children so): as call_module,
                # its parameters and buffers become graph inputs (without the hooks a module call runs).
                self.guard_training(obj)
                self.lift_module_state(m, obj.source)
                return self.call_strata(func, [obj] + list(args), kwargs, name=f"{type(m).__name__}.forward")
            if func is not None:
                if _is_strata_function(func):  # e.g. super().forward of a subclass of a strata module
                    self.guard_training(obj)
                    self.lift_module_state(obj.value, obj.source)
                return self.call_value(FuncVar(func), func, [obj] + list(args), kwargs)
            raise Unsupported(f"module method {name}")
        if isinstance(obj, ListVar):
            return _list_method(self, obj, name, args, kwargs)
        if isinstance(obj, DictVar):
            return _dict_method(self, obj, name, args, kwargs)
        if isinstance(obj, (TupleVar, NamedTupleVar)) and name in ("index", "count"):
            return self.fold(getattr(tuple(self.const_value(obj)), name), args, kwargs)
        if isinstance(obj, ConstVar):
            return self.fold(getattr(obj.value, name), args, kwargs)
        if isinstance(obj, GradModeVar) and name in ("__enter__",):
            return ConstVar(None)
        if isinstance(obj, ObjVar) and func is not None and _is_strata_function(func):
            # A method of one of strata's own objects (optimizer.zero_grad(), scheduler.step()) would run on
            # the real object during capture only, and not on the calls that reuse the graph.
            raise Unsupported(f"{type(obj.value).__name__}.{name}() changes the object outside the graph")
        if func is not None and isinstance(func, types.FunctionType):
            return self.call_value(FuncVar(func), func, [obj] + list(args), kwargs)
        if isinstance(obj, (ObjVar, FuncVar)):
            attr = getattr(obj.value, name)
            return self.call_value(self.wrap(attr, S.attr(obj.source, name)), attr, args, kwargs)
        raise Unsupported(f"method {name} of {obj.describe()}")

    def call_tensor_method(self, t, name, args, kwargs):
        if name in _DATA_DEPENDENT:
            raise Unsupported(f"Tensor.{name}() needs the tensor's data (a graph break)")
        if name in ("cpu",):
            if self.device_of(t).type == "cpu":
                return t
            raise Unsupported("moving a tensor between devices inside the compiled region")
        if name == "to":
            dev, rest_args, rest_kwargs = _split_device(self, args, kwargs)
            if dev is not None and dev != self.device_of(t):
                raise Unsupported("moving a tensor between devices inside the compiled region")
            if dev is not None:
                if not rest_args and not rest_kwargs:
                    return t
                args, kwargs = rest_args, rest_kwargs
        if name == "detach" and not args and not kwargs:
            return self.call_strata(_detached_alias, [t], {}, name="Tensor.detach")
        if name in ("get_device",):
            d = self.device_of(t)
            return ConstVar(-1 if d.type == "cpu" else d.index)
        if self.out.dynamic:
            r = self.sym_size_method(t, name, args, kwargs)
            if r is not None:
                return r
        fn = getattr(t.fake, name, None)
        if fn is None:
            raise Unsupported(f"Tensor has no attribute {name}")
        if self.out.dynamic:   # the probe world calls the method on its own tensor
            return self.call_strata(_method_caller(name), [t] + list(args), kwargs, name=f"Tensor.{name}")
        return self.call_strata(fn, args, kwargs, name=f"Tensor.{name}")

    # -- symbolic sizes (Note [Symbolic shapes] in symshape.py) ------------------------------------
    def size_var(self, t):
        shape = self.out.sym_shape(t)
        if not any(isinstance(d, SymExpr) for d in shape):
            return ConstVar(t.fake.shape)
        return TupleVar([_sym_or_const(d) for d in shape])

    def sym_size_method(self, t, name, args, kwargs):
        shape = self.out.sym_shape(t)
        if not any(isinstance(d, SymExpr) for d in shape):
            return None
        if name == "size":
            if not args and not kwargs:
                return self.size_var(t)
            d = self.const_value(args[0] if args else kwargs["dim"], "dimension")
            return _sym_or_const(shape[d])
        if name == "numel" and not args and not kwargs:
            acc = 1
            for d in shape:
                acc = Y.binop("*", acc, d)
            return _sym_or_const(acc)
        return None

    def sym_int_of(self, v):
        """An int or SymExpr for a variable in int arithmetic, or None."""
        if isinstance(v, SymIntVar):
            return v.expr
        if isinstance(v, ConstVar) and type(v.value) in (int, bool):
            return int(v.value)
        return None

    def sym_compare(self, op, a, b):
        """A comparison of sizes, decided at the hint; the decision becomes a guard relation."""
        x, y = Y.value_at(a, "hint"), Y.value_at(b, "hint")
        r = _COMPARE[op](x, y)
        if isinstance(a, SymExpr) or isinstance(b, SymExpr):
            self.out.relation(a, op if r else _NEGATED[op], b)
        return r

    def subscr_symbolic(self, obj, key):
        """x[...] with a symbolic index or slice bound: slice/select ops whose bounds are graph values."""
        items = key.items if isinstance(key, TupleVar) else [key]
        simple = all(isinstance(i, (SliceVar, SymIntVar)) or (isinstance(i, ConstVar) and (
            type(i.value) is int or isinstance(i.value, slice))) for i in items)
        if not simple:
            return self.call_strata(operator.getitem, [obj, ConstVar(self.const_value(key, "index"))], {},
                                    name="Tensor.__getitem__")
        cur, dim = obj, 0
        for it in items:
            if isinstance(it, SymIntVar) or (isinstance(it, ConstVar) and type(it.value) is int):
                cur = self.call_strata(_C._ops.select, [cur, ConstVar(dim), it], {}, name="Tensor.__getitem__")
                continue
            parts = it.parts if isinstance(it, SliceVar) else [ConstVar(it.value.start), ConstVar(it.value.stop),
                                                               ConstVar(it.value.step)]
            parts = list(parts) + [ConstVar(None)] * (3 - len(parts))
            start, stop, step = parts
            if isinstance(step, ConstVar) and step.value is None:
                step = ConstVar(1)
            if not all(isinstance(p, ConstVar) and p.value is None for p in (start, stop)) or \
                    self.const_value(step) != 1:
                cur = self.call_strata(_C._ops.slice, [cur, ConstVar(dim), start, stop, step], {},
                                       name="Tensor.__getitem__")
            dim += 1
        return cur

    def device_of(self, t):
        from .. import device
        vid = t.vid
        return device(self.out.graph.value(vid).device)

    def call_module(self, mv, args, kwargs):
        Module, Sequential, ModuleList, ModuleDict = _module_classes()
        m = mv.value
        if _has_hooks(m):
            raise Unsupported(f"calling {type(m).__name__} with forward hooks")
        self.guard_training(mv)
        if type(m) is Sequential:
            if kwargs or len(args) != 1:
                raise Unsupported("Sequential called with more than one input")
            x = args[0]
            for name, sub in m._modules.items():
                x = self.call(self.module_attr(mv, name), [x], {})
            return x
        cls_mod = type(m).__module__ or ""
        if cls_mod.startswith("strata.nn") and type(m).forward is not Module.forward:
            return self.call_strata_module(mv, args, kwargs)
        fwd = type(m).forward
        return self.call_value(FuncVar(fwd), fwd, [mv] + list(args), kwargs)

    def guard_training(self, mv):
        self.out.guard("equals", S.attr(mv.source, "training"), mv.value.training)

    def call_strata_module(self, mv, args, kwargs):
        """A module of strata's own library runs whole on Meta tensors, with its parameters and
        buffers as graph inputs (their sources under the module's)."""
        m = mv.value
        self.lift_module_state(m, mv.source)
        return self.call_strata(m, args, kwargs, name=f"{type(m).__name__}.forward")

    def lift_module_state(self, m, src):
        for kind in ("_parameters", "_buffers"):
            for n, p in m.__dict__[kind].items():
                if p is not None:
                    self.out.tensor_input(p, S.dict_item(S.attr(src, kind), n))
        for n, sub in m._modules.items():
            if sub is None:
                continue
            ssrc = S.dict_item(S.attr(src, "_modules"), n)
            self.out.guard("id", ssrc, sub)
            self.out.guard("equals", S.attr(ssrc, "training"), sub.training)
            if _has_hooks(sub):
                raise Unsupported(f"a submodule of {type(m).__name__} has forward hooks")
            self.lift_module_state(sub, ssrc)

    def module_attr(self, mv, name):
        m = mv.value
        d = m.__dict__
        src = mv.source
        if name in d:
            return self.wrap(d[name], S.attr(src, name))
        for store in ("_parameters", "_buffers", "_modules"):
            sd = d.get(store)
            if sd is not None and name in sd:
                v = sd[name]
                vs = S.dict_item(S.attr(src, store), name)
                if v is None:
                    self.out.guard("equals", vs, None)
                    return ConstVar(None)
                return self.wrap(v, vs)
        cls_attr = inspect.getattr_static(type(m), name, _MISSING)
        if cls_attr is _MISSING:
            raise Unsupported(f"'{type(m).__name__}' object has no attribute '{name}'")
        if isinstance(cls_attr, types.FunctionType):
            return BoundMethodVar(mv, name, cls_attr)
        if isinstance(cls_attr, property):
            return self.call_value(FuncVar(cls_attr.fget), cls_attr.fget, [mv], {})
        if isinstance(cls_attr, staticmethod):
            return self.wrap(cls_attr.__func__, None, guard=False)
        if isinstance(cls_attr, classmethod):
            return BoundMethodVar(self.wrap(type(m), None, False), name, cls_attr.__func__)
        return self.wrap(getattr(m, name), S.attr(src, name))

    # -- inlining ------------------------------------------------------------------------------
    def inline(self, code, f_globals, defaults, kwdefaults, closure, args, kwargs, qualname, fsource):
        if self.depth >= MAX_INLINE_DEPTH:
            raise Unsupported(f"calls nested deeper than {MAX_INLINE_DEPTH} levels")
        # A generator expression runs to its end when it is created (its items are recorded then); other
        # generators are not followed.
        genexpr = code.co_name == "<genexpr>" and code.co_flags == code.co_flags & ~(
            inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR) | inspect.CO_GENERATOR
        if code.co_flags & (inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR) and not genexpr:
            raise Unsupported(f"calling the generator {qualname}")
        locals_ = _bind_arguments(code, defaults, kwdefaults, args, kwargs, qualname)
        cells = {}
        for name in code.co_cellvars:
            cells[name] = CellVar(None)
        for i, name in enumerate(code.co_freevars):
            cells[name] = closure[i] if closure else CellVar(None)
        groot = None if f_globals is self.out.fn.__globals__ else self.out.root_for_globals(f_globals)
        tx = Translator(self.out, code, f_globals, locals_, cells, parent=self, fn_name=qualname,
                        globals_root=groot)
        self.out.num_inlined += 1
        if genexpr:
            tx.yields = []
        kind, r = tx.run()
        return IterVar(tx.yields) if genexpr else r

    # -- bytecodes -------------------------------------------------------------------------------
    def NOP(self, inst):
        pass

    RESUME = NOP
    PRECALL = NOP
    EXTENDED_ARG = NOP
    CACHE = NOP

    def COPY_FREE_VARS(self, inst):
        pass

    def MAKE_CELL(self, inst):
        name = inst.argval
        cell = self.cells.setdefault(name, CellVar(None))
        if name in self.locals:
            cell.contents = self.locals[name]

    def RETURN_GENERATOR(self, inst):
        if self.yields is None:
            raise Unsupported("a generator frame")
        self.push(ConstVar(None))

    def YIELD_VALUE(self, inst):
        if self.yields is None:
            raise Unsupported("yield")
        self.yields.append(self.pop())
        self.push(ConstVar(None))    # what the consumer sends back: next() sends None

    def POP_TOP(self, inst):
        self.pop()

    def PUSH_NULL(self, inst):
        self.push(_NULL)

    def COPY(self, inst):
        self.push(self.stack[-inst.arg])

    def SWAP(self, inst):
        i = inst.arg
        self.stack[-1], self.stack[-i] = self.stack[-i], self.stack[-1]

    def LOAD_CONST(self, inst):
        self.push(ConstVar(inst.argval) if not isinstance(inst.argval, types.CodeType) else ConstVar(inst.argval))

    def RETURN_CONST(self, inst):
        return ConstVar(inst.argval)

    def RETURN_VALUE(self, inst):
        return self.pop()

    def LOAD_FAST(self, inst):
        name = inst.argval
        if name not in self.locals:
            raise Unsupported(f"local variable '{name}' referenced before assignment")
        self.push(self.locals[name])

    LOAD_FAST_CHECK = LOAD_FAST

    def LOAD_FAST_AND_CLEAR(self, inst):
        self.push(self.locals.pop(inst.argval, _NULL))

    def STORE_FAST(self, inst):
        v = self.pop()
        if isinstance(v, CellVar) and inst.argval in self.code.co_cellvars:
            # A resume function's prologue installs a cell it received (bytecode.py, cells_as_objects).
            self.cells[inst.argval] = v
            return
        if v is _NULL:
            self.locals.pop(inst.argval, None)
        else:
            self.locals[inst.argval] = v

    def DELETE_FAST(self, inst):
        self.locals.pop(inst.argval, None)

    def LOAD_CLOSURE(self, inst):
        self.push(self.cells.setdefault(inst.argval, CellVar(None)))

    def LOAD_DEREF(self, inst):
        cell = self.cells.get(inst.argval)
        if cell is None or cell.contents is None:
            raise Unsupported(f"free variable '{inst.argval}' referenced before assignment")
        self.push(cell.contents)

    def STORE_DEREF(self, inst):
        cell = self.cells.setdefault(inst.argval, CellVar(None))
        if cell.source is not None or self.parent is None and inst.argval in self.code.co_freevars:
            raise Unsupported(f"assigning to the closure variable '{inst.argval}'")
        cell.contents = self.pop()

    def LOAD_GLOBAL(self, inst):
        if inst.arg & 1:
            self.push(_NULL)
        name = inst.argval
        if name in self.f_globals:
            if self.globals_root is None:
                src = S.glob(name)
            else:
                src = S.dict_item(self.globals_root, name)
            self.push(self.wrap(self.f_globals[name], src))
        elif name in self.f_builtins:
            self.push(self.wrap(self.f_builtins[name], None, guard=False))
        else:
            raise Unsupported(f"name '{name}' is not defined")

    def LOAD_ATTR(self, inst):
        obj = self.pop()
        if _VERSION["load_attr_method_bit"] and inst.arg & 1:
            self.push(_NULL)
        self.push(self.getattr(obj, inst.argval))

    def LOAD_SUPER_ATTR(self, inst):
        # 3.12: super().name with the stack [super, class, self]; the low bit is a method load, as in
        # LOAD_ATTR (3.11 calls super() and then loads the attribute).
        obj = self.pop()
        cls = self.pop()
        sup = self.pop()
        if not (isinstance(sup, FuncVar) and sup.value is super):
            raise Unsupported("super is not the builtin super")
        if inst.arg & 1:
            self.push(_NULL)
        self.push(self.getattr(self.make_super(self.const_value(cls, "class"), obj), inst.argval))

    def make_super(self, cls, obj):
        if not isinstance(cls, type):
            raise Unsupported("super() with a first argument that is not a class")
        if not isinstance(obj, (ModuleVar, ObjVar)) or not isinstance(obj.value, cls):
            raise Unsupported(f"super() of {obj.describe()}")
        return SuperVar(cls, obj)

    def super_attr(self, sv, name):
        mro = type(sv.obj.value).__mro__
        for klass in mro[mro.index(sv.cls) + 1:]:
            if name in klass.__dict__:
                attr = klass.__dict__[name]
                break
        else:
            raise Unsupported(f"super() has no attribute {name}")
        if isinstance(attr, types.FunctionType):
            return BoundMethodVar(sv.obj, name, attr)
        if isinstance(attr, staticmethod):
            return self.wrap(attr.__func__, None, guard=False)
        if isinstance(attr, classmethod):
            return BoundMethodVar(self.wrap(type(sv.obj.value), None, False), name, attr.__func__)
        raise Unsupported(f"super().{name} is a {type(attr).__name__}")

    def LOAD_METHOD(self, inst):
        obj = self.pop()
        self.push(_NULL)
        self.push(self.getattr(obj, inst.argval))

    def getattr(self, obj, name):
        Module = _module_classes()[0]
        if isinstance(obj, TensorVar):
            if name == "device":
                return ConstVar(self.device_of(obj))
            if name in ("is_cpu", "is_cuda", "is_meta"):
                return ConstVar(getattr(self.device_of(obj), "type") == name[3:])
            if name == "data":
                return self.call_strata(_detached_alias, [obj], {}, name="Tensor.data")
            if name in ("grad", "_version", "grad_fn", "_base"):
                raise Unsupported(f"Tensor.{name} inside the compiled region")
            if name == "shape" and self.out.dynamic:
                return self.size_var(obj)
            if name in _TENSOR_NO_RECORD_ATTRS:
                return ConstVar(getattr(obj.fake, name))
            cls_attr = inspect.getattr_static(type(obj.fake), name, _MISSING)
            if callable(cls_attr) and not isinstance(cls_attr, property) or type(cls_attr).__name__ == "op_method":
                return BoundMethodVar(obj, name)
            return self.call_strata(lambda t: getattr(t, name), [obj], {}, name=f"Tensor.{name}")
        if isinstance(obj, ModuleVar):
            return self.module_attr(obj, name)
        if isinstance(obj, NamedTupleVar) and name in getattr(obj.cls, "_fields", ()):
            return obj.items[obj.cls._fields.index(name)]
        if isinstance(obj, (ListVar, DictVar, TupleVar, NamedTupleVar, GradModeVar, AutocastVar)):
            return BoundMethodVar(obj, name)
        if isinstance(obj, ConstVar):
            try:
                v = getattr(obj.value, name)
            except AttributeError as e:
                raise Unsupported(str(e))
            if is_constant_value(v):
                return ConstVar(v)
            return BoundMethodVar(obj, name)
        if isinstance(obj, (ObjVar, FuncVar)):
            try:
                v = getattr(obj.value, name)
            except AttributeError as e:
                raise Unsupported(str(e))
            guard = not isinstance(obj.value, types.ModuleType)
            if isinstance(v, types.MethodType) and v.__self__ is obj.value:
                return BoundMethodVar(obj, name, v.__func__)
            return self.wrap(v, S.attr(obj.source, name), guard=guard)
        if isinstance(obj, SuperVar):
            return self.super_attr(obj, name)
        if isinstance(obj, BoundMethodVar) and name == "__self__":
            return obj.obj
        raise Unsupported(f"attribute {name} of {obj.describe()}")

    def STORE_ATTR(self, inst):
        obj = self.pop()
        val = self.pop()
        if isinstance(obj, ModuleVar) and obj.source is not None:
            Module = _module_classes()[0]
            if _is_tensor(getattr(obj.value, inst.argval, None)) or isinstance(val, (TensorVar, ModuleVar)):
                raise Unsupported(f"assigning a tensor or module attribute ({inst.argval}) of a module")
            self.out.side_effects.append(("setattr", obj, inst.argval, val))
            return
        raise Unsupported(f"assigning attribute {inst.argval} of {obj.describe()}")

    def BINARY_OP(self, inst):
        b = self.pop()
        a = self.pop()
        fn, sym = _BINARY_OPS[inst.arg]
        self.push(self.binary(fn, a, b, sym))

    def binary(self, fn, a, b, sym):
        if isinstance(a, SymIntVar) or isinstance(b, SymIntVar):
            x, y = self.sym_int_of(a), self.sym_int_of(b)
            op = _SYM_BINARY.get(fn)
            if x is not None and y is not None and op is not None:
                return _sym_or_const(Y.binop(op, x, y))
        if isinstance(a, TensorVar) or isinstance(b, TensorVar):
            return self.call_strata(fn, [a, b], {}, name=f"operator {sym}")
        if isinstance(a, ConstVar) and isinstance(b, ConstVar):
            return self.fold(fn, [a, b], {})
        if isinstance(a, (ListVar, TupleVar)) and isinstance(b, (ListVar, TupleVar)) and fn in (operator.add,
                                                                                              operator.iadd):
            if type(a) is not type(b):
                raise Unsupported("adding a list and a tuple")
            if fn is operator.iadd and isinstance(a, ListVar):
                a.items.extend(b.items)
                self.mark_mutated(a)
                return a
            return type(a)(a.items + b.items)
        if isinstance(a, (ListVar, TupleVar)) and isinstance(b, ConstVar) and fn is operator.mul:
            return type(a)(a.items * b.value)
        if isinstance(a, (ListVar, TupleVar, DictVar)) or isinstance(b, (ListVar, TupleVar, DictVar)):
            va, vb = self.const_value(a), self.const_value(b)
            return self.fold(fn, [ConstVar(va) if is_constant_value(va) else a, ConstVar(vb)], {})
        raise Unsupported(f"operator {sym} on {a.describe()} and {b.describe()}")

    def mark_mutated(self, v):
        if isinstance(v, (ListVar, DictVar)) and v.source is not None and not v.mutated:
            v.mutated = True
            self.out.side_effects.append(("list" if isinstance(v, ListVar) else "dict", v))

    def COMPARE_OP(self, inst):
        b = self.pop()
        a = self.pop()
        fn = _COMPARE[inst.argval]
        if self.out.dynamic and not isinstance(a, TensorVar) and not isinstance(b, TensorVar):
            r = self.compare_sizes(inst.argval, a, b)
            if r is not None:
                self.push(ConstVar(r))
                return
        if isinstance(a, TensorVar) or isinstance(b, TensorVar):
            self.push(self.call_strata(fn, [a, b], {}, name=f"operator {inst.argval}"))
        else:
            self.push(self.fold(fn, [ConstVar(self.const_value(a)), ConstVar(self.const_value(b))], {}))

    def compare_sizes(self, op, a, b):
        x, y = self.sym_int_of(a), self.sym_int_of(b)
        if x is not None and y is not None:
            if isinstance(a, SymIntVar) or isinstance(b, SymIntVar):
                return self.sym_compare(op, x, y)
            return None
        if op in ("==", "!=") and isinstance(a, (TupleVar, ConstVar)) and isinstance(b, (TupleVar, ConstVar)):
            ia = a.items if isinstance(a, TupleVar) else a.value
            ib = b.items if isinstance(b, TupleVar) else b.value
            if not any(isinstance(i, SymIntVar) for i in (list(ia) if isinstance(a, TupleVar) else []) +
                       (list(ib) if isinstance(b, TupleVar) else [])):
                return None
            if not isinstance(ia, (tuple, list)) or not isinstance(ib, (tuple, list)):
                return None
            ia = [self.sym_int_of(i) if isinstance(i, VT) else i for i in ia]
            ib = [self.sym_int_of(i) if isinstance(i, VT) else i for i in ib]
            if any(i is None for i in ia + ib):
                return None
            eq = len(ia) == len(ib)
            if eq:
                for x, y in zip(ia, ib):
                    if not self.sym_compare("==", x, y):
                        eq = False
                        break
            return eq if op == "==" else not eq
        return None

    def IS_OP(self, inst):
        b = self.pop()
        a = self.pop()
        r = self.identical(a, b)
        self.push(ConstVar(r != bool(inst.arg)))

    def identical(self, a, b):
        if a is b:
            return True
        if isinstance(a, ConstVar) and isinstance(b, ConstVar):
            return a.value is b.value
        if isinstance(a, TensorVar) and isinstance(b, TensorVar):
            return a.fake is b.fake
        for x, y in ((a, b), (b, a)):
            if isinstance(x, ConstVar) and x.value is None:
                return isinstance(y, ConstVar) and y.value is None
        if isinstance(a, (ModuleVar, ObjVar, FuncVar)) and isinstance(b, (ModuleVar, ObjVar, FuncVar)):
            return a.value is b.value
        if isinstance(a, (ModuleVar, ObjVar, FuncVar, TensorVar, ListVar, DictVar)) and isinstance(b, ConstVar):
            return False
        raise Unsupported(f"'is' between {a.describe()} and {b.describe()}")

    def CONTAINS_OP(self, inst):
        container = self.pop()
        item = self.pop()
        if isinstance(container, DictVar):
            r = self.const_value(item) in container.items
        elif isinstance(container, ModuleVar):
            r = self.const_value(item) in container.value._modules
        elif isinstance(container, (ListVar, TupleVar)) and all(isinstance(e, ConstVar) for e in container.items):
            r = self.const_value(item) in [e.value for e in container.items]
        else:
            r = self.const_value(item) in self.const_value(container)
        self.push(ConstVar(r != bool(inst.arg)))

    def UNARY_NOT(self, inst):
        self.push(ConstVar(not self.truth(self.pop())))

    def _unary(self, fn, name):
        v = self.pop()
        if isinstance(v, SymIntVar) and fn in (operator.neg, operator.pos):
            self.push(_sym_or_const(Y.binop("-", 0, v.expr)) if fn is operator.neg else v)
            return
        if isinstance(v, TensorVar):
            self.push(self.call_strata(fn, [v], {}, name=name))
        else:
            self.push(self.fold(fn, [ConstVar(self.const_value(v))], {}))

    def UNARY_NEGATIVE(self, inst):
        self._unary(operator.neg, "operator -")

    def UNARY_INVERT(self, inst):
        self._unary(operator.invert, "operator ~")

    def UNARY_POSITIVE(self, inst):
        self._unary(operator.pos, "operator +")

    def CALL_INTRINSIC_1(self, inst):
        if inst.argrepr == "INTRINSIC_LIST_TO_TUPLE":
            lst = self.pop()
            self.push(TupleVar(lst.items))
        elif inst.argrepr == "INTRINSIC_UNARY_POSITIVE":
            self._unary(operator.pos, "operator +")
        else:
            raise Unsupported(f"bytecode CALL_INTRINSIC_1 {inst.argrepr}")

    def truth(self, v):
        if isinstance(v, ConstVar):
            return bool(v.value)
        if isinstance(v, SymIntVar):
            return self.sym_compare("!=", v.expr, 0)
        if isinstance(v, TensorVar):
            raise Unsupported("the truth value of a tensor (data-dependent control flow)")
        if isinstance(v, (ListVar, TupleVar, NamedTupleVar)):
            return bool(v.items)
        if isinstance(v, DictVar):
            return bool(v.items)
        if isinstance(v, ModuleVar):
            m = v.value
            if hasattr(type(m), "__len__"):
                return len(m) > 0
            return True
        if isinstance(v, (FuncVar, BoundMethodVar, NestedFuncVar)):
            return True
        if isinstance(v, ObjVar):
            tp = type(v.value)
            if tp.__bool__ is object.__bool__ if hasattr(tp, "__bool__") else not hasattr(tp, "__len__"):
                return True
            raise Unsupported(f"the truth value of a {tp.__name__} object")
        raise Unsupported(f"the truth value of {v.describe()}")

    def _pop_jump(self, inst, jump_if):
        v = self.pop()
        if jump_if == "none":
            cond = isinstance(v, ConstVar) and v.value is None
        elif jump_if == "not_none":
            cond = not (isinstance(v, ConstVar) and v.value is None)
        else:
            t = self.truth(v) if not isinstance(v, TensorVar) else None
            if t is None:
                self.push(v)   # state as before the instruction: the break evaluates it on the real tensor
                raise Unsupported("the truth value of a tensor decides a branch (data-dependent control flow)")
            cond = t if jump_if else not t
        if cond:
            self.jump_to(inst.argval)

    def POP_JUMP_FORWARD_IF_TRUE(self, inst):
        self._pop_jump(inst, True)

    POP_JUMP_BACKWARD_IF_TRUE = POP_JUMP_IF_TRUE = POP_JUMP_FORWARD_IF_TRUE

    def POP_JUMP_FORWARD_IF_FALSE(self, inst):
        self._pop_jump(inst, False)

    POP_JUMP_BACKWARD_IF_FALSE = POP_JUMP_IF_FALSE = POP_JUMP_FORWARD_IF_FALSE

    def POP_JUMP_FORWARD_IF_NONE(self, inst):
        self._pop_jump(inst, "none")

    POP_JUMP_BACKWARD_IF_NONE = POP_JUMP_IF_NONE = POP_JUMP_FORWARD_IF_NONE

    def POP_JUMP_FORWARD_IF_NOT_NONE(self, inst):
        self._pop_jump(inst, "not_none")

    POP_JUMP_BACKWARD_IF_NOT_NONE = POP_JUMP_IF_NOT_NONE = POP_JUMP_FORWARD_IF_NOT_NONE

    def JUMP_IF_FALSE_OR_POP(self, inst):
        v = self.stack[-1]
        if isinstance(v, TensorVar):
            raise Unsupported("the truth value of a tensor decides a branch (data-dependent control flow)")
        if not self.truth(v):
            self.jump_to(inst.argval)
        else:
            self.pop()

    def JUMP_IF_TRUE_OR_POP(self, inst):
        v = self.stack[-1]
        if isinstance(v, TensorVar):
            raise Unsupported("the truth value of a tensor decides a branch (data-dependent control flow)")
        if self.truth(v):
            self.jump_to(inst.argval)
        else:
            self.pop()

    def JUMP_FORWARD(self, inst):
        self.jump_to(inst.argval)

    JUMP_BACKWARD = JUMP_BACKWARD_NO_INTERRUPT = JUMP = JUMP_FORWARD

    def GET_ITER(self, inst):
        v = self.pop()
        self.push(self.iterate(v))

    def iterate(self, v):
        Module, Sequential, ModuleList, ModuleDict = _module_classes()
        if isinstance(v, IterVar):
            return v
        if isinstance(v, (ListVar, TupleVar, NamedTupleVar)):
            return IterVar(v.items)
        if isinstance(v, DictVar):
            return IterVar([ConstVar(k) for k in v.items])
        if isinstance(v, ConstVar):
            try:
                return IterVar([ConstVar(e) for e in v.value])
            except TypeError:
                raise Unsupported(f"iterating over {v.describe()}")
        if isinstance(v, ModuleVar) and isinstance(v.value, (Sequential, ModuleList)):
            return IterVar([self.module_attr(v, n) for n in v.value._modules])
        if isinstance(v, ModuleVar) and isinstance(v.value, ModuleDict):
            return IterVar([ConstVar(n) for n in v.value._modules])
        if isinstance(v, TensorVar):
            if not v.fake.dim():
                raise Unsupported("iterating over a 0-d tensor")
            n = self.const_value(_sym_or_const(self.out.sym_shape(v)[0]), "length")
            return IterVar([self.call_strata(operator.getitem, [v, ConstVar(i)], {}, name="Tensor.__getitem__")
                            for i in range(n)])
        raise Unsupported(f"iterating over {v.describe()}")

    def FOR_ITER(self, inst):
        it = self.stack[-1]
        if not isinstance(it, IterVar):
            raise Unsupported(f"iterating over {it.describe()}")
        if it.index < len(it.items):
            self.push(it.items[it.index])
            it.index += 1
            return
        self.pop()
        if _VERSION["for_iter_skips_end_for"]:
            self.ip = self.index_of[inst.argval] + 1
        else:
            self.jump_to(inst.argval)

    def END_FOR(self, inst):
        self.pop()
        self.pop()

    def BUILD_TUPLE(self, inst):
        self.push(TupleVar(self.popn(inst.arg)))

    def BUILD_LIST(self, inst):
        self.push(ListVar(self.popn(inst.arg)))

    def BUILD_SET(self, inst):
        items = self.popn(inst.arg)
        self.push(ConstVar(frozenset(self.const_value(i) for i in items)))

    def BUILD_MAP(self, inst):
        items = self.popn(2 * inst.arg)
        self.push(DictVar({self.const_value(items[2 * i], "dict key"): items[2 * i + 1] for i in range(inst.arg)}))

    def BUILD_CONST_KEY_MAP(self, inst):
        keys = self.const_value(self.pop(), "dict keys")
        vals = self.popn(inst.arg)
        self.push(DictVar(dict(zip(keys, vals))))

    def BUILD_SLICE(self, inst):
        items = self.popn(inst.arg)
        if any(isinstance(v, SymIntVar) for v in items):
            self.push(SliceVar(items))
            return
        parts = [self.const_value(v, "slice bound") for v in items]
        self.push(ConstVar(slice(*parts)))

    def BUILD_STRING(self, inst):
        parts = [self.const_value(v) for v in self.popn(inst.arg)]
        self.push(ConstVar("".join(parts)))

    def FORMAT_VALUE(self, inst):
        spec = self.const_value(self.pop()) if (inst.arg & 0x04) == 0x04 else ""
        v = self.pop()
        if isinstance(v, TensorVar):
            raise Unsupported("formatting a tensor as text needs its data")
        val = self.const_value(v)
        conv = inst.arg & 0x03
        if conv == 1:
            val = str(val)
        elif conv == 2:
            val = repr(val)
        elif conv == 3:
            val = ascii(val)
        self.push(ConstVar(format(val, spec)))

    def LIST_APPEND(self, inst):
        v = self.pop()
        lst = self.stack[-inst.arg]
        lst.items.append(v)
        self.mark_mutated(lst)

    def LIST_EXTEND(self, inst):
        v = self.pop()
        lst = self.stack[-inst.arg]
        lst.items.extend(self.iterate(v).items)
        self.mark_mutated(lst)

    def LIST_TO_TUPLE(self, inst):
        self.push(TupleVar(self.pop().items))

    def SET_ADD(self, inst):
        raise Unsupported("set comprehension")

    def MAP_ADD(self, inst):
        v = self.pop()
        k = self.pop()
        self.stack[-inst.arg].items[self.const_value(k, "dict key")] = v

    def DICT_UPDATE(self, inst):
        v = self.pop()
        d = self.stack[-inst.arg]
        if not isinstance(v, DictVar):
            raise Unsupported(f"dict.update with {v.describe()}")
        d.items.update(v.items)

    DICT_MERGE = DICT_UPDATE

    def UNPACK_SEQUENCE(self, inst):
        v = self.pop()
        items = self.iterate(v).items
        if len(items) != inst.arg:
            raise Unsupported(f"unpacking {len(items)} values into {inst.arg}")
        for e in reversed(items):
            self.push(e)

    def UNPACK_EX(self, inst):
        v = self.pop()
        items = self.iterate(v).items
        before, after = inst.arg & 0xFF, inst.arg >> 8
        if len(items) < before + after:
            raise Unsupported("not enough values to unpack")
        mid = ListVar(items[before:len(items) - after])
        out = items[:before] + [mid] + items[len(items) - after:]
        for e in reversed(out):
            self.push(e)

    def BINARY_SUBSCR(self, inst):
        key = self.pop()
        obj = self.pop()
        self.push(self.subscr(obj, key))

    def BINARY_SLICE(self, inst):
        end = self.pop()
        start = self.pop()
        obj = self.pop()
        if isinstance(obj, TensorVar) and (isinstance(start, SymIntVar) or isinstance(end, SymIntVar)):
            self.push(self.subscr(obj, SliceVar([start, end])))
            return
        sl = ConstVar(slice(self.const_value(start), self.const_value(end)))
        self.push(self.subscr(obj, sl))

    def subscr(self, obj, key):
        Module, Sequential, ModuleList, ModuleDict = _module_classes()
        if isinstance(obj, TensorVar):
            if isinstance(key, (SliceVar, SymIntVar)) or isinstance(key, TupleVar) and any(
                    isinstance(i, (SliceVar, SymIntVar)) for i in key.items):
                return self.subscr_symbolic(obj, key)
            return self.call_strata(operator.getitem, [obj, key], {}, name="Tensor.__getitem__")
        if isinstance(obj, (ListVar, TupleVar, NamedTupleVar)):
            k = self.const_value(key, "index")
            if isinstance(k, slice):
                return type(obj)(obj.items[k]) if not isinstance(obj, NamedTupleVar) else TupleVar(obj.items[k])
            try:
                return obj.items[k]
            except (IndexError, TypeError) as e:
                raise Unsupported(str(e))
        if isinstance(obj, DictVar):
            k = self.const_value(key, "key")
            if k not in obj.items:
                raise Unsupported(f"KeyError: {k!r}")
            return obj.items[k]
        if isinstance(obj, ConstVar):
            return self.fold(operator.getitem, [obj, ConstVar(self.const_value(key))], {})
        if isinstance(obj, ModuleVar) and isinstance(obj.value, (Sequential, ModuleList, ModuleDict)):
            k = self.const_value(key, "index")
            names = list(obj.value._modules)
            if isinstance(obj.value, ModuleDict):
                return self.module_attr(obj, k)
            if isinstance(k, slice):
                raise Unsupported("slicing a module list")
            if k < 0:
                k += len(names)
            return self.module_attr(obj, names[k])
        raise Unsupported(f"indexing {obj.describe()}")

    def STORE_SUBSCR(self, inst):
        key = self.pop()
        obj = self.pop()
        val = self.pop()
        self.setitem(obj, key, val)

    def STORE_SLICE(self, inst):
        end = self.pop()
        start = self.pop()
        obj = self.pop()
        val = self.pop()
        self.setitem(obj, ConstVar(slice(self.const_value(start, "slice bound"), self.const_value(end, "slice bound"))),
                     val)

    def setitem(self, obj, key, val):
        if isinstance(obj, TensorVar):
            if isinstance(key, (SliceVar, SymIntVar, TupleVar)):
                key = ConstVar(self.const_value(key, "index"))
            self.call_strata(operator.setitem, [obj, key, val], {}, name="Tensor.__setitem__")
        elif isinstance(obj, ListVar):
            k = self.const_value(key, "index")
            try:
                obj.items[k] = self.iterate(val).items if isinstance(k, slice) else val
            except (IndexError, TypeError, ValueError) as e:
                raise Unsupported(f"list item assignment raised during capture ({type(e).__name__}: {e})")
            self.mark_mutated(obj)
        elif isinstance(obj, DictVar):
            obj.items[self.const_value(key, "key")] = val
            self.mark_mutated(obj)
        else:
            raise Unsupported(f"item assignment on {obj.describe()}")

    def DELETE_SUBSCR(self, inst):
        raise Unsupported("del on an item")

    def KW_NAMES(self, inst):
        self.kw_names = self.code.co_consts[inst.arg]

    def CALL(self, inst):
        n = inst.arg
        kw = self.kw_names or ()
        self.kw_names = None
        args = self.popn(n)
        a = self.pop()
        b = self.pop()
        if b is _NULL:
            fn = a
        else:
            fn, args = b, [a] + args
        npos = len(args) - len(kw)
        kwargs = dict(zip(kw, args[npos:]))
        self.push(self.call(fn, args[:npos], kwargs))

    def CALL_FUNCTION_EX(self, inst):
        kwargs = self.pop() if inst.arg & 1 else DictVar({})
        args = self.pop()
        fn = self.pop()
        if self.stack and self.stack[-1] is _NULL:
            self.pop()
        pos = self.iterate(args).items
        if not isinstance(kwargs, DictVar):
            raise Unsupported(f"**{kwargs.describe()} in a call")
        self.push(self.call(fn, pos, dict(kwargs.items)))

    def MAKE_FUNCTION(self, inst):
        code = self.pop().value
        if sys.version_info < (3, 11):
            self.pop()
        closure = self.pop().items if inst.arg & 0x08 else None
        if inst.arg & 0x04:
            self.pop()  # annotations
        kwdefaults = self.const_value(self.pop()) if inst.arg & 0x02 else None
        defaults = tuple(self.pop().items) if inst.arg & 0x01 else None
        if defaults is not None:
            defaults = tuple(defaults)
        self.push(NestedFuncVar(code, self.f_globals, defaults, kwdefaults, closure, code.co_qualname))

    def BEFORE_WITH(self, inst):
        mgr = self.stack[-1]
        if isinstance(mgr, AutocastVar):
            # As grad mode: each node keeps the autocast state it was recorded under and the casts are
            # nodes (Note [Autocast in captured graphs] in src/compile/recorder.cpp); a break inside
            # the block resumes under the block's state (convert._finish).
            prev = autocast_state() if mgr.state() is not None else None
            self.pop()
            set_autocast_state(mgr.state())
            self.push(AutocastExitVar(prev))
            self.push(mgr)
            return
        if not isinstance(mgr, GradModeVar):
            raise Unsupported(f"entering a with block of {mgr.describe()}")
        # Each recorded node runs in the grad mode it was recorded in (executor.cpp), so the block
        # stays in the graph; a break inside it resumes under the block's mode (convert._finish).
        prev = _C._is_grad_enabled()
        self.pop()
        _C._set_grad_enabled(mgr.enabled)
        self.push(GradExitVar(prev))
        self.push(ConstVar(None))

    def RAISE_VARARGS(self, inst):
        raise Unsupported("raise statement")

    def LOAD_ASSERTION_ERROR(self, inst):
        raise Unsupported("a failing assert")

    def IMPORT_NAME(self, inst):
        raise Unsupported("import inside the compiled region")

    def GET_LEN(self, inst):
        v = self.stack[-1]
        self.push(_builtin_len(self, [v], {}))


_MISSING = object()
_DECODED = {}
_NEGATED = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}
_SYM_BINARY = {operator.add: "+", operator.iadd: "+", operator.sub: "-", operator.isub: "-", operator.mul: "*",
               operator.imul: "*", operator.floordiv: "//", operator.ifloordiv: "//"}


def _sym_or_const(d):
    return SymIntVar(d) if isinstance(d, SymExpr) else ConstVar(d)


def _detached_alias(t):
    """Tensor.detach() / .data as graph nodes: detach is not an op of the dispatcher, so capture records
    an alias (same storage and version counter) made under no_grad, which the runner replays under
    no_grad: the result shares memory with t and does not require grad, as detach's does."""
    prev = _C._is_grad_enabled()
    _C._set_grad_enabled(False)
    try:
        return _C._ops.alias(t)
    finally:
        _C._set_grad_enabled(prev)


def _autocast_class():
    from ..amp import autocast
    return autocast


def _autocast_wrap(ac, fn):
    def wrapper(*a, **k):
        with ac:
            return fn(*a, **k)
    return wrapper


def _method_caller(name):
    def call(self_, *args, **kwargs):
        return getattr(self_, name)(*args, **kwargs)
    call.__name__ = name
    return call


def _decoded(code):
    """The instructions of a code object and their index by offset (decoded once per code)."""
    d = _DECODED.get(code)
    if d is None:
        insts = list(dis.get_instructions(code))
        d = _DECODED[code] = (insts, {inst.offset: i for i, inst in enumerate(insts)})
    return d


def _cell_filled(c):
    try:
        c.cell_contents
        return True
    except ValueError:
        return False


def _hashable(f):
    try:
        hash(f)
        return True
    except TypeError:
        return False


# Top-level package names whose functions are not inlined (their code is not the user's model).
_SKIP_MODULES = {"inspect", "warnings", "logging", "threading", "os", "sys", "re", "copy", "abc", "typing",
                 "numpy", "torch", "collections", "functools", "importlib", "traceback", "random", "time",
                 "contextlib", "weakref", "pickle", "io", "json", "argparse", "unittest", "pytest", "_pytest"}
_GRAPH_BREAK_FUNCS = set()
_IS_COMPILING = set()


def _init_special_functions():
    from .. import compiler, _grad_mode
    from . import eval_frame
    _IS_COMPILING.update({compiler.is_compiling, compiler.is_dynamo_compiling, eval_frame.is_compiling})
    _GRAPH_BREAK_FUNCS.update({compiler.reset, eval_frame.reset})


def _bind_arguments(code, defaults, kwdefaults, args, kwargs, qualname):
    """Python's argument binding for an inlined call: returns the callee's locals."""
    nargs = code.co_argcount
    nkw = code.co_kwonlyargcount
    names = code.co_varnames
    posonly = code.co_posonlyargcount
    has_varargs = bool(code.co_flags & inspect.CO_VARARGS)
    has_varkw = bool(code.co_flags & inspect.CO_VARKEYWORDS)
    locals_ = {}
    if len(args) > nargs and not has_varargs:
        raise Unsupported(f"{qualname}() takes {nargs} positional arguments but {len(args)} were given")
    for i, v in enumerate(args[:nargs]):
        locals_[names[i]] = v
    extra_kw = {}
    for k, v in kwargs.items():
        idx = names.index(k) if k in names[:nargs + nkw] else -1
        if idx >= posonly and idx != -1:
            if k in locals_:
                raise Unsupported(f"{qualname}() got multiple values for argument '{k}'")
            locals_[k] = v
        elif has_varkw:
            extra_kw[k] = v
        else:
            raise Unsupported(f"{qualname}() got an unexpected keyword argument '{k}'")
    ndef = len(defaults) if defaults else 0
    for i in range(nargs):
        n = names[i]
        if n not in locals_:
            j = i - (nargs - ndef)
            if j < 0:
                raise Unsupported(f"{qualname}() missing required argument '{n}'")
            locals_[n] = _as_var(defaults[j])
    for i in range(nargs, nargs + nkw):
        n = names[i]
        if n not in locals_:
            if kwdefaults and n in kwdefaults:
                locals_[n] = _as_var(kwdefaults[n])
            else:
                raise Unsupported(f"{qualname}() missing required keyword-only argument '{n}'")
    pos = nargs + nkw
    if has_varargs:
        locals_[names[pos]] = TupleVar(list(args[nargs:]))
        pos += 1
    if has_varkw:
        locals_[names[pos]] = DictVar(extra_kw)
    return locals_


def _as_var(v):
    if isinstance(v, VT):
        return v
    if is_constant_value(v):
        return ConstVar(v)
    if _is_tensor(v):
        raise Unsupported("a tensor as a default argument value")
    return ObjVar(v)


def _split_device(tx, args, kwargs):
    """Separates a device argument of Tensor.to from the rest."""
    from .. import device
    dev = None
    rest = []
    for a in args:
        if isinstance(a, ConstVar) and isinstance(a.value, (str, device)) and dev is None:
            dev = device(a.value)
        else:
            rest.append(a)
    kw = dict(kwargs)
    if "device" in kw:
        dev = device(tx.const_value(kw.pop("device")))
    return dev, rest, kw


# -- builtins ------------------------------------------------------------------------------------

def _builtin_len(tx, args, kwargs):
    v = args[0]
    Module, Sequential, ModuleList, ModuleDict = _module_classes()
    if isinstance(v, (ListVar, TupleVar, NamedTupleVar, DictVar)):
        return ConstVar(len(v.items))
    if isinstance(v, TensorVar):
        if v.fake.dim() == 0:
            raise Unsupported("len() of a 0-d tensor")
        return _sym_or_const(tx.out.sym_shape(v)[0])
    if isinstance(v, ModuleVar) and isinstance(v.value, (Sequential, ModuleList, ModuleDict)):
        return ConstVar(len(v.value._modules))
    return ConstVar(len(tx.const_value(v)))


def _builtin_isinstance(tx, args, kwargs):
    v, cls = args
    c = tx.const_value(cls, "class")
    if isinstance(v, TensorVar):
        return ConstVar(isinstance(v.fake, c))
    if isinstance(v, (ModuleVar, ObjVar, FuncVar, ConstVar)):
        return ConstVar(isinstance(v.value, c))
    return ConstVar(issubclass(v.python_type(), c))


def _builtin_range(tx, args, kwargs):
    return ConstVar(range(*[tx.const_value(a, "range bound") for a in args]))


def _builtin_enumerate(tx, args, kwargs):
    items = tx.iterate(args[0]).items
    start = tx.const_value(args[1]) if len(args) > 1 else tx.const_value(kwargs.get("start", ConstVar(0)))
    return IterVar([TupleVar([ConstVar(start + i), v]) for i, v in enumerate(items)])


def _builtin_zip(tx, args, kwargs):
    seqs = [tx.iterate(a).items for a in args]
    return IterVar([TupleVar(list(t)) for t in zip(*seqs)])


def _builtin_reversed(tx, args, kwargs):
    return IterVar(list(reversed(tx.iterate(args[0]).items)))


def _builtin_iter(tx, args, kwargs):
    return tx.iterate(args[0])


def _builtin_next(tx, args, kwargs):
    it = args[0]
    if not isinstance(it, IterVar) or it.index >= len(it.items):
        raise Unsupported("next() on an exhausted or unknown iterator")
    it.index += 1
    return it.items[it.index - 1]


def _builtin_list(tx, args, kwargs):
    return ListVar(tx.iterate(args[0]).items if args else [])


def _builtin_tuple(tx, args, kwargs):
    return TupleVar(tx.iterate(args[0]).items if args else [])


def _builtin_dict(tx, args, kwargs):
    d = {}
    if args:
        src = args[0]
        if isinstance(src, DictVar):
            d.update(src.items)
        else:
            for pair in tx.iterate(src).items:
                k, v = tx.iterate(pair).items
                d[tx.const_value(k, "dict key")] = v
    d.update(kwargs)
    return DictVar(d)


def _builtin_getattr(tx, args, kwargs):
    name = tx.const_value(args[1], "attribute name")
    try:
        return tx.getattr(args[0], name)
    except Unsupported:
        if len(args) > 2:
            return args[2]
        raise


def _builtin_hasattr(tx, args, kwargs):
    name = tx.const_value(args[1], "attribute name")
    try:
        tx.getattr(args[0], name)
        return ConstVar(True)
    except Unsupported:
        return ConstVar(False)


def _builtin_minmax(fn):
    def handler(tx, args, kwargs):
        if any(isinstance(a, TensorVar) for a in args):
            raise Unsupported(f"{fn.__name__}() of tensors compares their data")
        if len(args) == 2 and not kwargs and any(isinstance(a, SymIntVar) for a in args):
            x, y = tx.sym_int_of(args[0]), tx.sym_int_of(args[1])
            if x is not None and y is not None:
                first = tx.sym_compare("<=" if fn is min else ">=", x, y)
                return args[0] if first else args[1]
        if len(args) == 1:
            items = tx.iterate(args[0]).items
            return tx.fold(fn, [ConstVar([tx.const_value(i) for i in items])], kwargs)
        return tx.fold(fn, args, kwargs)
    return handler


def _builtin_sum(tx, args, kwargs):
    items = tx.iterate(args[0]).items
    acc = args[1] if len(args) > 1 else ConstVar(0)
    for it in items:
        acc = tx.binary(operator.add, acc, it, "+")
    return acc


def _builtin_type(tx, args, kwargs):
    if len(args) != 1:
        raise Unsupported("type() with 3 arguments")
    v = args[0]
    if isinstance(v, TensorVar):
        return FuncVar(type(v.fake))
    if isinstance(v, (ModuleVar, ObjVar, FuncVar, ConstVar)):
        return FuncVar(type(v.value))
    return FuncVar(v.python_type())


def _builtin_super(tx, args, kwargs):
    if kwargs or len(args) not in (0, 2):
        raise Unsupported("super() with other than zero or two arguments")
    if args:
        return tx.make_super(tx.const_value(args[0], "class"), args[1])
    # The zero-argument form: the method's __class__ cell and its first argument.
    cell = tx.cells.get("__class__")
    code = tx.code
    if cell is None or cell.contents is None or not code.co_argcount:
        raise Unsupported("super() outside a method")
    first = code.co_varnames[0]
    obj = tx.locals.get(first)
    if obj is None and first in tx.cells:
        obj = tx.cells[first].contents
    if obj is None:
        raise Unsupported("super() after the method's first argument was deleted")
    return tx.make_super(tx.const_value(cell.contents, "class"), obj)


def _builtin_int_float(fn):
    def handler(tx, args, kwargs):
        if args and isinstance(args[0], TensorVar):
            raise Unsupported(f"{fn.__name__}() of a tensor needs its data")
        return tx.fold(fn, args, kwargs)
    return handler


def _builtin_bool(tx, args, kwargs):
    if not args:
        return ConstVar(False)
    return ConstVar(tx.truth(args[0]))


def _builtin_all_any(fn):
    def handler(tx, args, kwargs):
        items = tx.iterate(args[0]).items
        return ConstVar(fn(tx.truth(i) for i in items))
    return handler


def _builtin_sorted(tx, args, kwargs):
    items = tx.iterate(args[0]).items
    return ListVar([ConstVar(v) for v in sorted((tx.const_value(i) for i in items),
                                                **{k: tx.const_value(v) for k, v in kwargs.items()})])


_BUILTIN_HANDLERS = {
    len: _builtin_len, isinstance: _builtin_isinstance, range: _builtin_range, enumerate: _builtin_enumerate,
    zip: _builtin_zip, reversed: _builtin_reversed, iter: _builtin_iter, next: _builtin_next,
    list: _builtin_list, tuple: _builtin_tuple, dict: _builtin_dict, getattr: _builtin_getattr,
    hasattr: _builtin_hasattr, min: _builtin_minmax(min), max: _builtin_minmax(max), sum: _builtin_sum,
    type: _builtin_type, super: _builtin_super, int: _builtin_int_float(int), float: _builtin_int_float(float),
    bool: _builtin_bool, all: _builtin_all_any(all), any: _builtin_all_any(any), sorted: _builtin_sorted,
}


def _list_method(tx, lst, name, args, kwargs):
    if name == "append":
        lst.items.append(args[0])
    elif name == "extend":
        lst.items.extend(tx.iterate(args[0]).items)
    elif name == "insert":
        lst.items.insert(tx.const_value(args[0]), args[1])
    elif name == "pop":
        i = tx.const_value(args[0]) if args else -1
        v = lst.items.pop(i)
        tx.mark_mutated(lst)
        return v
    elif name == "clear":
        lst.items.clear()
    elif name == "reverse":
        lst.items.reverse()
    elif name == "copy":
        return ListVar(list(lst.items))
    elif name in ("index", "count"):
        return tx.fold(getattr([tx.const_value(i) for i in lst.items], name), args, kwargs)
    else:
        raise Unsupported(f"list.{name}")
    tx.mark_mutated(lst)
    return ConstVar(None)


def _dict_method(tx, d, name, args, kwargs):
    if name == "items":
        return ListVar([TupleVar([ConstVar(k), v]) for k, v in d.items.items()])
    if name == "keys":
        return ListVar([ConstVar(k) for k in d.items])
    if name == "values":
        return ListVar(list(d.items.values()))
    if name == "get":
        k = tx.const_value(args[0], "key")
        return d.items.get(k, args[1] if len(args) > 1 else ConstVar(None))
    if name == "copy":
        return DictVar(dict(d.items), cls=d.cls)
    if name == "update":
        other = args[0] if args else DictVar({})
        if not isinstance(other, DictVar):
            raise Unsupported("dict.update with a non-dict")
        d.items.update(other.items)
        d.items.update(kwargs)
        tx.mark_mutated(d)
        return ConstVar(None)
    if name == "pop":
        k = tx.const_value(args[0], "key")
        if k in d.items:
            tx.mark_mutated(d)
            return d.items.pop(k)
        if len(args) > 1:
            return args[1]
        raise Unsupported(f"KeyError: {k!r}")
    if name == "setdefault":
        k = tx.const_value(args[0], "key")
        if k not in d.items:
            d.items[k] = args[1] if len(args) > 1 else ConstVar(None)
            tx.mark_mutated(d)
        return d.items[k]
    raise Unsupported(f"dict.{name}")
