"""The runtime of strata.compile: per-code caches of guarded entries, the wrappers that
strata.compile returns, recompiles and the cache-size limit, and explain().

A compiled function is entered through a wrapper with the function's own signature (so
Python binds the arguments exactly as for the original); run_frame then checks each
cached entry's guards in C++ and runs the first that holds, or captures a new one."""

import threading
import types
import warnings
import weakref

from .. import _C
from . import config, logs
from .convert import capture, frame_arg_names, CompileError

__all__ = ["run_frame", "compile_function", "optimized_module", "reset", "mark_eager", "explain", "ExplainOutput",
           "disable", "allow_in_graph", "compiled_callee", "is_compiling"]


class FrameState:
    """A code object's compiled entries: `cache` (C++, Note [The frame cache] in compile_bind.cpp)
    checks and runs them; `entries` keeps the Python side (graphs, guards, explain)."""
    __slots__ = ("entries", "eager", "code", "cache", "opts", "dynamic", "static_only", "__weakref__")

    def __init__(self, code, opts):
        self.code = code
        self.entries = []
        self.eager = False
        self.opts = opts
        self.cache = _C._compile.FrameCache(self.miss)
        self.dynamic = {}           # source -> dims seen changing (automatic dynamic)
        self.static_only = False    # symbolic sizes failed for this frame once

    def miss(self, fn, args):
        return _miss(fn, self, args, self.opts, False)


_states = {}
_tls = threading.local()


def _options():
    stack = getattr(_tls, "options", None)
    return stack[-1] if stack else _DEFAULT_OPTS


def mark_eager(code, opts=None):
    _state(code, opts).eager = True


def reset():
    """Forgets every compiled entry (strata.compiler.reset / strata._dynamo.reset)."""
    for st in _states.values():
        st.entries.clear()
        st.cache.clear()
        st.eager = False
        st.dynamic.clear()
        st.static_only = False
    _binders.clear()
    if _EF.supported:
        _EF.clear_all()


# -- the frame hook -----------------------------------------------------------------------------
# While some thread runs inside a compiled region, the PEP 523 hook (strata._C._eval_frame) is
# installed: every Python frame a compiled region calls in Python (the breaking call at a graph
# break, and everything below it) is offered to _hook_callback; user code gets _hook_entry, which
# serves the frame from its own cache (capturing it on first sight), so a function called at a
# graph break is compiled in turn, however deep. strata's own code, the standard library and
# installed packages are marked SKIP. Outside compiled regions the hook is uninstalled and costs
# nothing.
_EF = _C._eval_frame
_hook_lock = threading.Lock()
_hook_users = 0


def _skip_dirs():
    import os
    import sysconfig
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = sysconfig.get_paths()
    dirs = {here, paths["stdlib"], paths["platstdlib"], paths["purelib"], paths["platlib"]}
    return tuple(sorted(d.rstrip(os.sep) + os.sep for d in dirs if d))


_SKIP_DIRS = _skip_dirs()


def _hook_callback(code, func):
    if not getattr(_tls, "options", None):
        return None  # this thread is outside any compiled region: ask again next time
    f = code.co_filename
    if f.startswith(_SKIP_DIRS) or f.startswith("<") or code.co_flags & 0x3a0:
        return _EF.SKIP
    return _hook_entry


def _hook_entry(args, func):
    stack = getattr(_tls, "options", None)
    if not stack:
        return _EF.RUN_DEFAULT
    return _run(func, _state(func.__code__, stack[-1]), args, stack[-1], hooked=True)


def _install_hook():
    global _hook_users
    with _hook_lock:
        _hook_users += 1
        if _hook_users == 1:
            _EF.set_callback(_hook_callback)


def _uninstall_hook():
    global _hook_users
    with _hook_lock:
        _hook_users -= 1
        if _hook_users == 0:
            _EF.set_callback(None)


def call_eager(fn, args):
    code = fn.__code__
    n, k = code.co_argcount, code.co_kwonlyargcount
    names = code.co_varnames
    pos = list(args[:n])
    kw = dict(zip(names[n:n + k], args[n:n + k]))
    i = n + k
    if code.co_flags & 0x04:
        pos.extend(args[i])
        i += 1
    if code.co_flags & 0x08:
        kw.update(args[i])
    return fn(*pos, **kw)


_DEFAULT_OPTS = {"backend": "inductor", "fullgraph": False}


def states_of(code):
    """Every cache of a code object (one per set of options it was compiled with)."""
    return [st for (c, _), st in _states.items() if c == code]


def _opts_key(opts):
    b = opts.get("backend", "inductor")
    return (b if isinstance(b, str) else id(b), bool(opts.get("fullgraph")), opts.get("dynamic"), opts.get("mode"))


def _state(code, opts=None):
    """The cache of one code object under one set of options (backend, fullgraph, dynamic, mode): the
    same function compiled twice with different options keeps two caches."""
    opts = opts or _DEFAULT_OPTS
    key = (code, _opts_key(opts))
    st = _states.get(key)
    if st is None:
        st = _states[key] = FrameState(code, opts)
    return st


def run_frame(fn, args, opts=None, hooked=False):
    """Runs one call of fn (args: its frame's arguments) from fn's cache. hooked: the frame hook
    asked, and fn's own frame runs when the answer is RUN_DEFAULT."""
    opts = opts or _options()
    return _run(fn, _state(fn.__code__, opts), args, opts, hooked)


def _run(fn, st, args, opts, hooked=False):
    r = st.cache.lookup(fn, args)
    if r is _CACHE_MISS:
        return _miss(fn, st, args, opts, hooked)
    return r


_CACHE_MISS = _C._compile.CACHE_MISS


def _transformed(args):
    """Whether an argument is a tensor of a transform capture does not follow (a vmap-batched
    tensor): guards keep such tensors off every entry (their dispatch keys differ), and the call runs
    eagerly without marking the frame eager."""
    for a in args:
        for t in (a if isinstance(a, (list, tuple)) else (a,)):
            if isinstance(t, _C.Tensor) and _C._guards.dispatch_key_bits(t) & _C._guards.TRANSFORM_KEYS:
                return True
    return False


def _miss(fn, st, args, opts, hooked):
    if st.eager or _transformed(args):
        return _EF.RUN_DEFAULT if hooked else call_eager(fn, args)
    code = fn.__code__
    g = fn.__globals__
    c = fn.__closure__
    if st.entries:
        last = st.entries[-1]
        failed = last.guards.check_verbose(args + last.extra if last.extra else args, g, c)
        limit = min(config.cache_size_limit, config.recompile_limit)
        if len(st.entries) >= limit:
            warnings.warn(f"strata.compile: {code.co_qualname} ({code.co_filename}:{code.co_firstlineno}) was "
                          f"recompiled {limit} times (cache_size_limit); it runs eagerly from now on. "
                          f"Last guard that failed: {failed}", stacklevel=4)
            st.eager = True
            return _EF.RUN_DEFAULT if hooked else call_eager(fn, args)
        logs.recompile(code, failed, len(st.entries))
        _record("recompiles", (code.co_qualname, failed))
    spec = _dynamic_spec(fn, st, args, opts)
    if spec is not None:
        opts = dict(opts, _dynamic_spec=spec, _dynamic_failed=[])
    hook_was = _EF.set_enabled(False) if _EF.supported else False
    try:
        e = capture(fn, args, opts, callee=hooked)
        if spec is not None and opts["_dynamic_failed"]:
            st.static_only = True
    except CompileError:
        raise
    except Exception as ex:
        if not config.suppress_errors:
            raise
        warnings.warn(f"strata.compile: capture of {code.co_qualname} failed ({type(ex).__name__}: {ex}); "
                      "running it eagerly")
        e = None
    finally:
        if _EF.supported:
            _EF.set_enabled(hook_was)
    if e is None:
        st.eager = True
        return _EF.RUN_DEFAULT if hooked else call_eager(fn, args)
    st.entries.append(e)
    on_error = _run_again_eagerly if e.num_ops and _has_handlers(code) else None
    st.cache.add(e.guards, e.extra, e.arg_inputs, e.fetch, e.runner, e.ret_kind, e.ret_idx, e.finish, on_error)
    _record("entries", e)
    a = args + e.extra if e.extra else args
    if on_error is None:
        return e.run(a, g, c)
    _C._compile.clear_failure_before_effects()
    try:
        outs = e.runner(*e.fetch(a, g, c))
    except Exception as exc:
        if not _C._compile.last_failure_before_effects():
            raise
        return on_error(fn, args, exc)
    return e.finish(outs, a, g, c)


def _has_handlers(code):
    """Whether code has try, with or other blocks with handlers (Python 3.11+: an exception table)."""
    from .bytecode import parse_exception_table
    return bool(parse_exception_table(code))


def _run_again_eagerly(fn, args, exc):
    """A graph op raised before any effect outside the call, in a frame with try/with blocks (Note
    [Graph errors inside try blocks] in src/compile/executor.cpp): the frame runs again from its
    start in Python, so the op raises inside it and its except / finally / __exit__ run as in eager
    mode. The frame hook is off meanwhile (this frame's own entry would serve it again)."""
    if not isinstance(exc, Exception):
        raise exc
    logs.graph_error_rerun(fn.__code__, exc)
    if not _EF.supported:
        return call_eager(fn, args)
    prev = _EF.set_enabled(False)
    try:
        return call_eager(fn, args)
    finally:
        _EF.set_enabled(prev)


def _fetch(src, a, g, c):
    from . import sources as S
    return eval(S.expr(src), {"A": a, "G": g, "C": c})


def _has_marked_dims(v, depth=0):
    if isinstance(v, _C.Tensor):
        return bool(getattr(v, "_strata_dynamic_dims", None))
    if isinstance(v, (list, tuple)) and depth < 2:
        return any(_has_marked_dims(x, depth + 1) for x in v)
    return False


def _dynamic_spec(fn, st, args, opts):
    """Which sizes the next capture of fn makes symbolic (Note [Symbolic shapes] in symshape.py), or
    None for static sizes: dynamic=True makes every dim of every tensor argument symbolic; with
    dynamic=None (the default), a dim that differs from the previous entry's (automatic dynamic) and
    dims marked with mark_dynamic are. dynamic=False, a frame where symbolic sizes failed once, and
    backends other than eager, aot_eager and strata_cpp/inductor keep sizes static."""
    mode = opts.get("dynamic")
    backend = opts.get("backend", "inductor")
    if mode is False or st.static_only or not (backend in ("eager", "aot_eager", "strata_cpp", "inductor") or callable(backend)):
        return None
    if st.entries and config.automatic_dynamic_shapes and mode is None or mode is True and st.entries:
        last = st.entries[-1]
        a = args + last.extra if last.extra else args
        for src, shape in last.input_shapes:
            try:
                v = _fetch(src, a, fn.__globals__, fn.__closure__)
            except Exception:
                continue
            if isinstance(v, _C.Tensor) and v.dim() == len(shape):
                for d, (x, y) in enumerate(zip(v.shape, shape)):
                    if x != y:
                        st.dynamic.setdefault(src, set()).add(d)
    if mode is not True and not st.dynamic and not any(_has_marked_dims(v) for v in args):
        return None
    return {"all": mode is True, "dims": st.dynamic}


class region:
    """Python code run by a compiled region (the breaking call at a graph break): inside, the
    frame hook is installed for this thread and the frames it reaches are compiled with opts."""
    __slots__ = ("opts", "prev")

    def __init__(self, opts):
        self.opts = opts

    def __enter__(self):
        stack = getattr(_tls, "options", None)
        if stack is None:
            stack = _tls.options = []
        stack.append(self.opts)
        if _EF.supported:
            _install_hook()
            self.prev = _EF.set_enabled(True)

    def __exit__(self, *exc):
        _tls.options.pop()
        if _EF.supported:
            _EF.set_enabled(self.prev)
            _uninstall_hook()
        return False


def _make_binder(fn, opts):
    """A function with fn's signature whose body hands the bound arguments to run_frame."""
    code = fn.__code__
    # A 3.11 comprehension's argument is named ".0": any name that is not an identifier is renamed.
    names = tuple(a if a.isidentifier() else f"__strata_arg{i}" for i, a in enumerate(code.co_varnames))
    n, k, po = code.co_argcount, code.co_kwonlyargcount, code.co_posonlyargcount
    params = list(names[:n])
    if po:
        params.insert(po, "/")
    i = n + k
    star = None
    if code.co_flags & 0x04:
        star = names[i]
        i += 1
    params.append("*" + star if star else ("*" if k else None))
    params = [p for p in params if p is not None]
    params += list(names[n:n + k])
    if code.co_flags & 0x08:
        params.append("**" + names[i])
    frame_args = names[:len(frame_arg_names(code))]
    tup = "(" + "".join(a + ", " for a in frame_args) + ")"
    src = f"def {code.co_name if code.co_name.isidentifier() else 'compiled'}({', '.join(params)}):\n" \
          f"    return __strata_cache(__strata_fn, {tup})\n"
    cache = _state(code, opts).cache
    ns = {"__strata_cache": cache, "__strata_fn": fn}
    exec(compile(src, f"<strata.compile wrapper of {code.co_qualname}>", "exec"), ns)
    w = ns[code.co_name if code.co_name.isidentifier() else "compiled"]
    w.__defaults__ = fn.__defaults__
    w.__kwdefaults__ = fn.__kwdefaults__
    w.__qualname__ = fn.__qualname__
    w.__module__ = fn.__module__
    w.__doc__ = fn.__doc__
    w.__wrapped__ = fn
    w.__dict__.update(getattr(fn, "__dict__", {}))
    w._strata_compiled = True
    # Calls with exactly the positional parameters skip the wrapper's frame (Note [Compiled function
    # objects] in compile_bind.cpp); keyword-only parameters, *args and **kwargs need the wrapper.
    fast_nargs = n if not (k or code.co_flags & 0x0c) else -1
    return cache.compiled_function(fn, w, fast_nargs)


def compile_function(fn, opts):
    if getattr(fn, "_strata_compiled", False):
        return fn
    return _make_binder(fn, opts)


_binders = weakref.WeakKeyDictionary()
_SKIP_PREFIXES = ("strata", "torch", "numpy")


def compiled_callee(fn):
    """A function (or module) called at a graph break, compiled in turn when it is user code."""
    from ..nn.modules.module import Module
    from .symbolic import _has_hooks, _SKIP_MODULES
    target = fn
    bound = None
    if isinstance(fn, Module):
        if _has_hooks(fn) or "forward" in fn.__dict__:
            return fn
        target = type(fn).forward
        bound = fn
    elif isinstance(fn, types.MethodType):
        target, bound = fn.__func__, fn.__self__
    if not isinstance(target, types.FunctionType) or getattr(target, "_strata_disable", False):
        return fn
    mod = (target.__module__ or "").split(".")[0]
    if mod in _SKIP_PREFIXES or mod in _SKIP_MODULES or target.__code__.co_flags & 0x3a0:
        return fn
    w = _binders.get(target)
    if w is None:
        w = _binders[target] = _make_binder(target, None)
    if bound is not None:
        return types.MethodType(w, bound)
    return w


def _make_optimized_module_class():
    from ..nn.modules.module import Module

    class OptimizedModule(Module):
        """What strata.compile(module) returns: a module around the original (`_orig_mod`, as in
        torch, so state_dict keys gain the `_orig_mod.` prefix) whose forward is compiled."""

        def __init__(self, mod, opts):
            super().__init__()
            self._orig_mod = mod
            object.__setattr__(self, "_strata_opts", opts)
            object.__setattr__(self, "_compiled_forward", None)

        def forward(self, *args, **kwargs):
            mod = self._orig_mod
            cf = self.__dict__["_compiled_forward"]
            if cf is None or cf[0] is not type(mod).forward:
                cf = (type(mod).forward, compile_function(type(mod).forward, self.__dict__["_strata_opts"]))
                object.__setattr__(self, "_compiled_forward", cf)
            if mod._forward_pre_hooks or mod._forward_hooks:
                return mod(*args, **kwargs)
            return cf[1](mod, *args, **kwargs)

        def __getattr__(self, name):
            try:
                return super().__getattr__(name)
            except AttributeError:
                return getattr(self.__dict__["_modules"]["_orig_mod"], name)

        def __repr__(self):
            return f"OptimizedModule({self._orig_mod!r})"

    return OptimizedModule


_optimized_module_cls = None


def optimized_module(mod, opts):
    global _optimized_module_cls
    if _optimized_module_cls is None:
        _optimized_module_cls = _make_optimized_module_class()
    return _optimized_module_cls(mod, opts)


# -- disable / allow_in_graph --------------------------------------------------------------------

def disable(fn=None, recursive=True, *, reason=None):
    """Runs fn eagerly, always: a call to it inside a compiled region is a graph break."""
    if fn is None:
        return lambda f: disable(f, recursive, reason=reason)
    if isinstance(fn, types.FunctionType):
        fn._strata_disable = True
        return fn
    try:
        fn._strata_disable = True
    except (AttributeError, TypeError):
        pass
    return fn


_allowed_in_graph = weakref.WeakSet()


def allow_in_graph(fn):
    """Capture calls fn directly on Meta tensors (recording the ops it runs) instead of inlining it."""
    if isinstance(fn, (list, tuple)):
        for f in fn:
            allow_in_graph(f)
        return fn
    _allowed_in_graph.add(fn)
    return fn


def is_compiling():
    return bool(getattr(_tls, "capturing", 0))


# -- explain -------------------------------------------------------------------------------------

def _record(kind, item):
    col = getattr(_tls, "collector", None)
    if col is not None:
        col.setdefault(kind, []).append(item)


def _record_break(code, reason, location, eager_frame):
    _record("breaks", BreakReason(reason, location, eager_frame))


class BreakReason:
    def __init__(self, reason, location, eager_frame=False):
        self.reason = reason
        self.location = location
        self.user_stack = [location]
        self.eager_frame = eager_frame

    def __repr__(self):
        return f"{self.reason} (at {self.location})"


class ExplainOutput:
    """What strata.compiler.explain returns (torch._dynamo.explain's fields)."""

    def __init__(self, entries, breaks):
        self.graphs = [e.graph for e in entries]
        self.graph_count = len(entries)
        self.break_reasons = breaks
        self.graph_break_count = len(breaks)
        self.ops_per_graph = [[n.op for n in e.graph.nodes] for e in entries]
        self.op_count = sum(e.num_ops for e in entries)
        self.out_guards = [e.guard_descriptions for e in entries]
        self.compile_times = ""
        # Per graph: [(which graph, MemoryPlan)] of the strata_cpp backend (Note [Memory plans] in
        # backends.py): forward and backward of a training graph, or the graph itself.
        from .backends import memory_plans
        self.memory_plans = [memory_plans(getattr(e, "runner", None)) for e in entries]
        self.peak_bytes = [max((mp.peak_bytes for _, mp in plans), default=None) for plans in self.memory_plans]

    def __str__(self):
        lines = [f"Graph Count: {self.graph_count}", f"Graph Break Count: {self.graph_break_count}",
                 f"Op Count: {self.op_count}", "Break Reasons:"]
        for i, b in enumerate(self.break_reasons, 1):
            lines.append(f"  Break Reason {i}:\n    Reason: {b.reason}\n    User Stack:\n      {b.location}")
        lines.append("Ops per Graph:")
        for i, ops in enumerate(self.ops_per_graph, 1):
            lines.append(f"  Ops {i}:")
            lines += [f"    {op}" for op in ops]
        lines.append("Out Guards:")
        for i, gs in enumerate(self.out_guards, 1):
            lines.append(f"  Guards {i}:")
            lines += [f"    {g}" for g in gs]
        if any(self.memory_plans):
            lines.append("Memory Plans:")
            for i, plans in enumerate(self.memory_plans, 1):
                for which, mp in plans:
                    lines.append(f"  Graph {i} ({which}): {mp.describe()}")
        lines.append("Graphs:")
        for i, g in enumerate(self.graphs, 1):
            lines.append(f"  Graph {i}:")
            lines += ["    " + ln for ln in g.print_readable().splitlines()]
        return "\n".join(lines)

    __repr__ = __str__


def explain(f, *extra_args, **extra_kwargs):
    """strata.compiler.explain(fn)(*args) -> ExplainOutput: graphs, graph breaks with their reasons
    and lines, ops per graph and guards, from one compiled call of fn (caches are reset first)."""

    def inner(*args, **kwargs):
        reset()
        col = _tls.collector = {}
        try:
            if isinstance(f, types.FunctionType):
                compiled = compile_function(f, dict(_DEFAULT_OPTS))
            else:
                from .. import compile as _compile_api
                compiled = _compile_api(f)
            compiled(*args, **kwargs)
        finally:
            _tls.collector = None
            reset()
        return ExplainOutput(col.get("entries", []), col.get("breaks", []))

    if extra_args or extra_kwargs:
        return inner(*extra_args, **extra_kwargs)
    return inner
