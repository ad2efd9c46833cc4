"""From a frame to a cache entry: run the symbolic interpreter, restart it at a graph break,
and turn what it captured into a guarded entry that runs the graph and rebuilds the frame's
result (or, at a graph break, the frame's state, executes the breaking instruction in Python
and continues in a resume function, itself compiled on its first call).

An entry's run function is generated Python source (one function per entry): it fetches the
graph inputs from the frame's arguments by their sources, calls the backend's compiled
graph, replays side effects and builds the return value. Nothing in it loops over ops."""

import dis
import inspect
import sys
import types

from .. import _C
from . import config, logs
from . import sources as S
from .bytecode import make_resume_function, ResumeUnsupported, parse_exception_table
from .symbolic import OutputGraph, Translator, Unsupported, _NULL, PY312
from .symshape import SymExpr, SymbolicFallback, value_at, contiguous_strides
from .variables import (TensorVar, TupleVar, ConstVar, CellVar, NullVar, ListVar, DictVar, autocast_state,
                        set_autocast_state)

_compile = _C._compile

__all__ = ["CompileError", "capture", "capture_graph", "frame_arg_names", "NULL"]

NULL = object()   # a NULL stack slot in a rebuilt frame state


class CompileError(RuntimeError):
    """fullgraph=True and the function cannot be captured as one graph."""


def frame_arg_names(code):
    n = code.co_argcount + code.co_kwonlyargcount
    n += bool(code.co_flags & inspect.CO_VARARGS) + bool(code.co_flags & inspect.CO_VARKEYWORDS)
    return code.co_varnames[:n]


class _CodeGen:
    """Collects the Python expressions that rebuild variables after the graph ran."""

    def __init__(self, out):
        self.out = out
        self.consts = []
        self.outputs = []       # graph value ids
        self.out_index = {}
        self.cells = []         # the frame's own cells the rebuilt values use (Z[j])
        self.cell_index = {}

    def tensor(self, tv):
        vid = tv.vid
        i = self.out_index.get(vid)
        if i is None:
            i = self.out_index[vid] = len(self.outputs)
            self.outputs.append(vid)
        return f"O[{i}]"

    def const(self, v):
        if v is None or type(v) in (bool, int, str) or (type(v) is float and v == v and v not in (float("inf"),
                                                                                              float("-inf"))):
            return repr(v)
        self.consts.append(v)
        return f"K[{len(self.consts) - 1}]"

    def source(self, src):
        return S.expr(src)

    def cell(self, c):
        """The expression of a closure cell (Note [Closure cells at a graph break])."""
        src = c.source
        if src is not None:
            if len(src) == 1 and src[0][0] == "closure":
                return f"C[{src[0][1]}]"       # the compiled function's own closure
            return S.expr(src)                 # a cell the frame received
        j = self.cell_index.get(id(c))
        if j is None:
            j = self.cell_index[id(c)] = len(self.cells)
            self.cells.append(c)
        return f"Z[{j}]"

    def cell_lines(self):
        """Lines that make the frame's own cells used by the rebuilt values: empty cells first, then their
        contents (which may be functions over those cells)."""
        if not self.cells:
            return []
        fill = []
        j = 0
        while j < len(self.cells):   # rebuilding contents may reach further cells
            c = self.cells[j]
            if c.contents is not None:
                fill.append(f"Z[{j}].cell_contents = {self.rebuild(c.contents)}")
            j += 1
        return [f"Z = [{self.const(types.CellType)}() for _ in range({len(self.cells)})]"] + fill

    def rebuild(self, v):
        if isinstance(v, NullVar):
            return "NULL"
        return v.reconstruct(self)


def _side_effect_lines(cg, out):
    lines = []
    for eff in out.side_effects:
        if eff[0] == "setattr":
            _, obj, name, val = eff
            lines.append(f"setattr({cg.rebuild(obj)}, {name!r}, {cg.rebuild(val)})")
        elif eff[0] == "list":
            lst = eff[1]
            lines.append(f"{S.expr(lst.source)}[:] = [{', '.join(cg.rebuild(v) for v in lst.items)}]")
        elif eff[0] == "dict":
            d = eff[1]
            body = ", ".join(f"{cg.const(k)}: {cg.rebuild(v)}" for k, v in d.items.items())
            lines.append(f"__d = {S.expr(d.source)}; __d.clear(); __d.update({{{body}}})")
    return lines


class Entry:
    """One compiled version of a frame: guards, the backend's callable and the generated run."""

    def __init__(self):
        self.guards = None
        self.extra = ()
        self.run = None
        self.graph = None
        self.kind = "return"
        self.break_reason = None
        self.break_location = None
        self.num_ops = 0
        self.guard_descriptions = []
        self.resume = None
        self.input_shapes = []      # (source, sizes) of each tensor input at capture (automatic dynamic)
        self.dynamic = False        # sizes of some inputs are symbols


def _build_guards(out, arg_names):
    gs = _C._guards.GuardSet(list(arg_names) + [f"__globals_{j}" for j in range(len(out.extra_roots))])
    for g in out.guards:
        kind, src = g[0], [tuple(step) for step in g[1]]
        if kind == "tensor":
            _, _, dtype, device, rg, sizes, strides, keys = g
            gs.add_tensor(src, dtype, device, rg, list(sizes), list(strides), keys)
        elif kind == "equals":
            gs.add_equals(src, g[2])
        elif kind == "id":
            gs.add_id(src, g[2])
        elif kind == "type":
            gs.add_type(src, g[2])
        elif kind == "len":
            gs.add_len(src, g[2])
        elif kind == "dict_keys":
            gs.add_dict_keys(src, list(g[2]))
        else:
            raise AssertionError(kind)
    for lhs, op, rhs in out.relations:
        gs.add_dim_relation(lhs, op, rhs)
    from .. import get_default_dtype
    enabled, dtype = autocast_state()
    gs.add_global_state(_C._is_grad_enabled(), get_default_dtype(), enabled, dtype)
    return gs


def _break_action(tx, inst):
    """What the run function does for the breaking instruction; returns (kind, info, resume offset,
    number of stack items the instruction consumes, whether it pushes a result)."""
    op = inst.opname
    nxt = tx.instructions[tx.index_of[inst.offset] + 1].offset if tx.index_of[inst.offset] + 1 < len(
        tx.instructions) else None
    if op == "CALL":
        return ("call", (inst.arg, tuple(tx.kw_names or ())), nxt, inst.arg + 2)
    if op == "CALL_FUNCTION_EX":
        n = 2 + (inst.arg & 1)
        if len(tx.stack) > n and isinstance(tx.stack[-n - 1], NullVar):
            n += 1
        return ("call_ex", inst.arg & 1, nxt, n)
    if op.startswith("POP_JUMP") and "NONE" not in op:
        return ("jump", ("TRUE" in op, inst.argval), nxt, 1)
    if op == "BEFORE_WITH":
        return ("with", None, nxt, 1)
    return ("eager", None, inst.offset, 0)


# Note [Breaks inside try and with blocks]
# The breaking instruction runs in the entry's run function, outside the frame, and the frame
# resumes after it in a resume function that keeps the original exception table (bytecode.py), so
# the rest of a try or with block is captured like any other code and its handlers still cover
# what the resume function runs. What the breaking instruction itself raises must reach those
# handlers too (the except clause, the finally, the with block's __exit__): when it raises inside
# an exception-table range, the run function hands the frame over to a second resume function that
# starts at the breaking instruction (at its KW_NAMES/PRECALL, which carry interpreter state) with
# the stack as it was before it ran, and the callable (or context manager) replaced by one that
# raises the same exception; that function runs eagerly: the instruction raises inside the frame,
# the handlers run as in eager mode, and the rest of the frame continues in Python. A with block of
# grad mode or autocast has its exit function on the stack (variables._grad_exit/_autocast_exit),
# which a resume function's capture recognises, so the block goes on in the graph.

# Note [Closure cells at a graph break]
# A frame whose variables an inner function closes over keeps them in cells. At a break the run
# function makes real cells for the frame's cells (Z[j], empty first, then their contents, which may
# be functions over those cells), rebuilds nested functions over them, and hands the cells
# themselves to the resume function (bytecode.make_resume_code(cells_as_objects=True)), so the
# frame's variable and every function that closes over it keep sharing one cell. The resume
# function's capture reads a received cell's contents under guards (Translator.wrap) and installs
# it as the frame's cell (STORE_FAST of a cell in the prologue); assigning to such a variable after
# the break is a graph break of its own. Functions the run function made are followed by their code,
# defaults and cells rather than their identity, which is new on every call.

class _Raiser:
    """Stands in for the callable or the context manager of a breaking instruction that raised
    (Note [Breaks inside try and with blocks]): raises the same exception inside the frame."""

    def __init__(self, exc):
        self.exc = exc

    def __call__(self, *args, **kwargs):
        raise self.exc

    def __enter__(self):
        raise self.exc

    def __exit__(self, *exc):
        return False


def _in_try(tx, inst):
    return any(e.start <= inst.offset < e.end for e in parse_exception_table(tx.code))


def _reraise_offset(tx, inst):
    """Where the frame re-runs the breaking instruction: at it, or at the KW_NAMES/PRECALL before it."""
    i = tx.index_of[inst.offset]
    while i > 0 and tx.instructions[i - 1].opname in ("PRECALL", "KW_NAMES"):
        i -= 1
    return tx.instructions[i].offset


def _make_action(kind, info, resume_call, nconsume, opts, on_error=None):
    """on_error(stack before the instruction, Raiser slot index or None, exception): the frame's
    result when the instruction raised inside a try/with block; None: the exception propagates."""
    def failed(stack, items, slot, exc, loc, closure):
        if on_error is None:
            raise exc
        full = list(stack) + list(items)
        if slot is not None:
            full[len(stack) + slot] = _Raiser(exc)
        return on_error(full, loc, closure)

    if kind == "call":
        n, kw = info

        def act(stack, loc, closure=None):
            items = stack[len(stack) - nconsume:]
            del stack[len(stack) - nconsume:]
            if items[0] is NULL:
                fn, args, slot = items[1], items[2:], 1
            else:
                fn, args, slot = items[0], items[1:], 0
            npos = len(args) - len(kw)
            try:
                res = _call_user(fn, args[:npos], dict(zip(kw, args[npos:])), opts)
            except BaseException as exc:
                return failed(stack, items, slot, exc, loc, closure)
            stack.append(res)
            return resume_call(stack, loc, closure=closure)
    elif kind == "call_ex":
        has_kw = info

        def act(stack, loc, closure=None):
            items = stack[len(stack) - nconsume:]
            del stack[len(stack) - nconsume:]
            slot = 1 if items[0] is NULL else 0
            fn, args = items[slot], items[slot + 1]
            kwargs = items[slot + 2] if has_kw else {}
            try:
                res = _call_user(fn, tuple(args), dict(kwargs), opts)
            except BaseException as exc:
                return failed(stack, items, slot, exc, loc, closure)
            stack.append(res)
            return resume_call(stack, loc, closure=closure)
    elif kind == "jump":
        jump_if_true, _ = info

        def act(stack, loc, closure=None):
            v = stack.pop()
            try:
                cond = bool(v)
            except BaseException as exc:
                return failed(stack, [v], None, exc, loc, closure)   # bool(v) raises again in the frame
            return resume_call(stack, loc, jump=(cond == jump_if_true), closure=closure)
    elif kind == "with":
        def act(stack, loc, closure=None):
            mgr = stack.pop()
            try:
                exit_ = type(mgr).__exit__.__get__(mgr)
                res = type(mgr).__enter__(mgr)
            except BaseException as exc:
                return failed(stack, [mgr], 0, exc, loc, closure)
            stack.append(exit_)
            stack.append(res)
            return resume_call(stack, loc, closure=closure)
    else:
        def act(stack, loc, closure=None):
            return resume_call(stack, loc, closure=closure)
    return act


class _RestoreOnError:
    """The action of a break inside a grad-mode or autocast block: an exception that leaves the rest of
    the frame (raised by a graph op of a resume function, which runs outside the frame's handlers)
    leaves the grad mode and autocast state as the frame found them, as the block's exit would."""

    def __init__(self, act, grad, autocast):
        self.act, self.grad, self.autocast = act, grad, autocast

    def __call__(self, stack, loc, closure=None):
        try:
            return self.act(stack, loc, closure)
        except BaseException:
            _C._set_grad_enabled(self.grad)
            set_autocast_state(self.autocast)
            raise


class _ReraiseResume:
    """on_error of a break inside a try/with block: made on first use (an exception is rare)."""

    def __init__(self, fn, offset, stack_kinds, live, opts, cells_as_objects):
        self.args = (fn, offset, stack_kinds, live)
        self.cells_as_objects = cells_as_objects
        self.opts = opts
        self.call = None

    def __call__(self, stack, loc, closure=None):
        from .eval_frame import mark_eager
        if self.call is None:
            f = make_resume_function(*self.args, cells_as_objects=self.cells_as_objects)
            mark_eager(f.__code__, self.opts)
            self.call = _ResumeCall((f, None), self.opts)
        return self.call(stack, loc, closure=closure)


def _call_user(fn, args, kwargs, opts):
    """The breaking call, run in Python. The frame hook compiles the user functions it reaches;
    without the hook (another Python version) a user function or module called directly is
    compiled here."""
    from .eval_frame import compiled_callee, region, _EF
    with region(opts):
        if _EF.supported:
            return fn(*args, **kwargs)
        return compiled_callee(fn)(*args, **kwargs)


def _attempt(fn, args, options, break_at, dyn=None):
    """One run of the interpreter over fn's frame (stopping at break_at): (OutputGraph, translator,
    "return" | "break", the returned variable or the breaking instruction). Grad mode and the
    autocast state are restored whatever happens; Unsupported propagates."""
    from . import eval_frame
    grad = _C._is_grad_enabled()
    autocast = autocast_state()
    out = OutputGraph(fn, frame_arg_names(fn.__code__), len(args))
    out.backend_options = options
    if dyn is not None:
        out.enable_dynamic(dyn)
    eval_frame._tls.capturing = getattr(eval_frame._tls, "capturing", 0) + 1
    try:
        tx = _root_translator(out, fn, args, break_at)
        kind, r = tx.run()
        return out, tx, kind, r
    finally:
        _C._set_grad_enabled(grad)
        set_autocast_state(autocast)
        eval_frame._tls.capturing -= 1


def _where(e, code):
    """The line a capture error names: the root frame's, with the inlined line it came from."""
    loc = getattr(e, "location", None) or f"{code.co_filename}:{code.co_firstlineno} in {code.co_name}"
    inner = getattr(e, "inner_location", None)
    return f"{inner}\n  called from {loc}" if inner and inner != loc else loc


def capture(fn, args, options, callee=False):
    """Captures one call of fn (args: the frame's arguments as a tuple). Returns an Entry, or
    None when the frame must run eagerly (also when callee is set, for a frame reached through the
    hook, and nothing in it is a strata op)."""
    code = fn.__code__
    break_at = None
    reason = None
    dyn = options.get("_dynamic_spec")
    for _ in range(64):
        try:
            out, tx, kind, r = _attempt(fn, args, options, break_at, dyn)
        except SymbolicFallback as e:
            dyn, break_at, reason = _static_again(code, options, e, dyn), None, None
            continue
        except Unsupported as e:
            loc = _where(e, code)
            if options.get("fullgraph"):
                raise CompileError(f"strata.compile(fullgraph=True): {e.reason}\n  at {loc}") from None
            point = getattr(e, "root_point", None)
            if point is None or point == break_at:
                logs.graph_break(code, e.reason, loc, eager_frame=True)
                return None
            break_at, reason = point, (e.reason, loc)
            continue
        if callee and kind == "return" and out.graph.num_ops == 0 and not out.side_effects:
            return None
        try:
            return _finish(out, tx, kind, r, reason, fn, args, options)
        except SymbolicFallback as e:
            dyn, break_at, reason = _static_again(code, options, e, dyn), None, None
            continue
        except Unsupported as e:  # a value the entry would have to rebuild cannot be rebuilt
            where = reason[1] if reason else f"{code.co_filename}:{code.co_firstlineno} in {code.co_name}"
            if options.get("fullgraph"):
                raise CompileError(f"strata.compile(fullgraph=True): {e.reason}\n  at {where}") from None
            logs.graph_break(code, e.reason if reason is None else f"{reason[0]} (and the frame cannot resume: "
                             f"{e.reason})", where, eager_frame=True)
            return None
    return None


def _static_again(code, options, e, dyn):
    """Symbolic sizes failed for this frame: log why; the capture restarts with static sizes (or,
    for SpecializeSizes, with the sizes it names static)."""
    dims = getattr(e, "dims", None)
    if dims and dyn is not None:
        return dict(dyn, static=set(dyn.get("static", ())) | set(dims))
    logs.dynamic_fallback(code, e.reason)
    fb = options.get("_dynamic_failed")
    if fb is not None:
        fb.append(e.reason)
    return None


def validate_dynamic(out):
    """Replays the graph on Meta at a third size (each symbol at its check value) and compares every
    output's shape with its symbolic shape there (Note [Symbolic shapes] in symshape.py)."""
    ins = []
    for vid, src, ex in zip(out.graph.inputs, out.input_sources, out.input_examples):
        if isinstance(src, SymExpr):
            ins.append(src.eval("check"))
            continue
        shape = out.sym_by_vid.get(vid, tuple(ex.shape))
        sizes = tuple(value_at(d, "check") for d in shape)
        dyn = any(isinstance(d, SymExpr) for d in shape)
        strides = contiguous_strides(sizes) if dyn else tuple(ex.stride())
        t = _C._ops.empty_strided(sizes, strides, dtype=ex.dtype, device="meta")
        if ex.requires_grad:
            t.requires_grad_(True)
        ins.append(t)
    try:
        res = out.graph.run_meta(ins)
    except Exception as e:
        raise SymbolicFallback(f"the graph fails when replayed at another size ({type(e).__name__}: {e})")
    for i, (vid, r) in enumerate(zip(out.graph.outputs, res)):
        if not isinstance(r, _C.Tensor):
            continue
        shape = out.sym_by_vid.get(vid)
        if shape is None:
            shape = tuple(out.graph.value(vid).shape)
        want = tuple(value_at(d, "check") for d in shape)
        if tuple(r.shape) != want:
            raise SymbolicFallback(f"output {i} of the graph has the shape {tuple(r.shape)} at another size where "
                                   f"its symbolic shape {shape} gives {want} (a size was baked into an op)")


def capture_graph(fn, args, options=None):
    """Captures one call of fn as a single graph, with fullgraph semantics and no runtime entry
    (strata.export): returns (OutputGraph, the return value's variable). A graph break raises
    CompileError naming the reason and the line; so does a frame that returns by any other route.
    The graph's outputs are not set: the caller flattens the return value."""
    options = dict(options or {})
    options["fullgraph"] = True
    code = fn.__code__
    what = options.get("what", "strata.compile(fullgraph=True)")
    try:
        out, tx, kind, r = _attempt(fn, args, options, None)
    except Unsupported as e:
        raise CompileError(f"{what}: {e.reason}\n  at {_where(e, code)}") from None
    if kind != "return":
        raise CompileError(f"{what}: the frame of {code.co_qualname} does not return normally\n"
                           f"  at {code.co_filename}:{code.co_firstlineno}")
    return out, r


def _root_translator(out, fn, args, break_at):
    code = fn.__code__
    names = frame_arg_names(code)
    locals_ = {}
    tx = Translator(out, code, fn.__globals__, locals_, {}, parent=None, fn_name=code.co_qualname,
                    break_at=break_at)
    for i, (n, v) in enumerate(zip(names, args)):
        locals_[n] = tx.wrap(v, S.arg(i))
    for name in code.co_cellvars:
        tx.cells[name] = CellVar(None)
    for i, name in enumerate(code.co_freevars):
        c = fn.__closure__[i]
        try:
            contents = c.cell_contents
        except ValueError:
            tx.cells[name] = CellVar(None, source=S.closure(i))
            continue
        tx.cells[name] = CellVar(tx.wrap(contents, S.closure(i)), source=S.closure(i))
    return tx


def _finish(out, tx, kind, r, reason, fn, args, options):
    code = fn.__code__
    cg = _CodeGen(out)
    e = Entry()
    body = []
    if kind == "return":
        ret = cg.rebuild(r)
        effects = _side_effect_lines(cg, out)
        tail = cg.cell_lines() + effects
        if tx.grad_at_end != tx.grad_enabled:
            # The frame left grad mode changed (a resume function that ends a no_grad block).
            cg.consts.append(_C._set_grad_enabled)
            tail.append(f"K[{len(cg.consts) - 1}]({tx.grad_at_end!r})")
        if tx.autocast_at_end != tx.autocast_at_entry:
            # The frame left the autocast state changed (a resume function that ends an autocast block).
            tail.append(f"{cg.const(set_autocast_state)}({cg.const(tx.autocast_at_end)})")
        tail.append(f"return {ret}")
        e.kind = "return"
    else:
        inst = r
        akind, info, resume_off, nconsume = _break_action(tx, inst)
        stack_exprs = [cg.rebuild(v) for v in tx.stack]
        # The frame's cells go to the resume function as cell objects (Note [Closure cells at a graph
        # break]); other locals by value.
        cellset = set(code.co_cellvars)
        cell_names = [n for n in code.co_cellvars if n in tx.cells]
        live = [n for n in code.co_varnames if n in tx.locals and n not in cellset] + cell_names
        local_exprs = [cg.cell(tx.cells[n]) if n in cellset else cg.rebuild(tx.locals[n]) for n in live]
        effects = _side_effect_lines(cg, out)
        cells = cg.cell_lines()
        # The stack after the breaking instruction, as the resume function receives it.
        after = ["value" if not isinstance(v, NullVar) else "null" for v in tx.stack[:len(tx.stack) - nconsume]]
        if akind in ("call", "call_ex"):
            after.append("value")
        elif akind == "with":
            after += ["value", "value"]
        try:
            resume_fn = _resume(fn, akind, info, resume_off, after, live, tx, options, bool(cell_names))
        except ResumeUnsupported as ex:
            logs.graph_break(code, f"{reason[0]} (and the frame cannot resume: {ex})", reason[1], eager_frame=True)
            return None
        e.kind = "break"
        e.break_reason, e.break_location = reason
        e.resume = resume_fn
        on_error = None
        if akind != "eager" and _in_try(tx, inst):
            kinds = ["value" if not isinstance(v, NullVar) else "null" for v in tx.stack]
            on_error = _ReraiseResume(fn, _reraise_offset(tx, inst), kinds, live, options, bool(cell_names))
        act = _make_action(akind, info, resume_fn, nconsume, options, on_error)
        if tx.grad_at_break != tx.grad_enabled or tx.autocast_at_break != tx.autocast_at_entry:
            act = _RestoreOnError(act, tx.grad_enabled, tx.autocast_at_entry)
        tail = cells + effects + [f"S = [{', '.join(stack_exprs)}]", f"L = [{', '.join(local_exprs)}]"]
        if tx.grad_at_break != tx.grad_enabled:
            # Inside a grad-mode block at the break: the breaking instruction and the resume
            # function run in that mode (the block's exit function restores the caller's).
            cg.consts.append(_C._set_grad_enabled)
            tail.append(f"K[{len(cg.consts) - 1}]({tx.grad_at_break!r})")
        if tx.autocast_at_break != tx.autocast_at_entry:
            # Inside an autocast block at the break: the breaking instruction and the resume function
            # run under its state (the block's exit function restores the caller's).
            tail.append(f"{cg.const(set_autocast_state)}({cg.const(tx.autocast_at_break)})")
        cg.consts.append(act)
        tail.append(f"return K[{len(cg.consts) - 1}](S, L, C)")
        logs.graph_break(code, reason[0], reason[1])
    out.graph.set_outputs(list(cg.outputs))
    if out.symbols:
        validate_dynamic(out)
    inputs = "".join((s.py() if isinstance(s, SymExpr) else S.expr(s)) + ", " for s in out.input_sources)
    backend = options.get("backend", "inductor")
    runner = _backend_compile(out, backend, args)
    src = "\n".join([
        "def __fetch(A, G, C):", f"    return ({inputs})",
        "def __finish(O, A, G, C):"] + ["    " + ln for ln in tail] + [
        "def __run(A, G, C):", f"    return __finish(R({inputs}), A, G, C)"])
    ns = {"R": runner, "K": cg.consts, "NULL": NULL}
    exec(compile(src, f"<strata.compile entry for {code.co_qualname}>", "exec"), ns)
    # What the C++ frame cache runs without Python (Note [The frame cache]): inputs that are
    # arguments by position, and a result that is one graph output or a tuple of them.
    e.runner = runner
    e.fetch = ns["__fetch"]
    e.finish = ns["__finish"]
    e.arg_inputs = [s[0][1] for s in out.input_sources] if all(
        type(s) is tuple and len(s) == 1 and s[0][0] == "arg" for s in out.input_sources) else None
    e.ret_kind, e.ret_idx = 0, []
    if kind == "return" and len(tail) == 1:
        if isinstance(r, TensorVar):
            e.ret_kind, e.ret_idx = 1, [cg.out_index[r.vid]]
        elif type(r) is TupleVar and r.items and all(isinstance(v, TensorVar) for v in r.items):
            e.ret_kind, e.ret_idx = 2, [cg.out_index[v.vid] for v in r.items]
    e.run = ns["__run"]
    e.source = src
    e.graph = out.graph
    e.num_ops = out.graph.num_ops
    e.extra = tuple(out.extra_roots)
    e.guards = _build_guards(out, frame_arg_names(code))
    e.dynamic = bool(out.symbols)
    e.input_shapes = [(s, tuple(t.shape)) for s, t in zip(out.input_sources, out.input_examples)
                      if not isinstance(s, SymExpr)]
    e.guard_descriptions = e.guards.describe()
    logs.new_entry(code, e)
    return e


class _ResumeCall:
    """Calls the resume function with the rebuilt stack and locals (NULL slots dropped)."""

    def __init__(self, targets, opts):
        from .eval_frame import _state
        self.targets = targets
        self.states = tuple(_state(t.__code__, opts) if t is not None else None for t in targets)
        self.opts = opts

    def __call__(self, stack, loc, jump=None, closure=None):
        from .eval_frame import _run
        i = 1 if jump else 0
        args = tuple(s for s in stack if s is not NULL) + tuple(loc)
        t = self.targets[i]
        if closure is not None and t.__closure__ is not closure and not _same_cells(t.__closure__, closure):
            # The frame's function is another closure over the same code (a nested function made on
            # each call): the resume function must read and write this call's cells.
            t = types.FunctionType(t.__code__, t.__globals__, t.__name__, None, closure)
        return _run(t, self.states[i], args, self.opts)


def _same_cells(a, b):
    return a is not None and b is not None and len(a) == len(b) and all(x is y for x, y in zip(a, b))


def _resume(fn, akind, info, resume_off, after, live, tx, options, cells_as_objects=False):
    from .eval_frame import mark_eager
    if akind == "jump":
        _, target = info
        not_taken = make_resume_function(fn, resume_off, after, live, cells_as_objects=cells_as_objects)
        taken = make_resume_function(fn, target, after, live, cells_as_objects=cells_as_objects)
        return _ResumeCall((not_taken, taken), options)
    f = make_resume_function(fn, resume_off, after, live, cells_as_objects=cells_as_objects)
    if akind == "eager":
        mark_eager(f.__code__, options)
    return _ResumeCall((f, None), options)


def _backend_compile(out, backend, example_args):
    from .backends import lookup_backend
    return lookup_backend(backend)(out.graph, out)
