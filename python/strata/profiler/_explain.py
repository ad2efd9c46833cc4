"""strata.profiler.explain(fn): the path each op call took through the stack.

fn runs once under the profiler in explain mode: the Profiler layer records
each op call's key sets and the table entries between it and the kernel, and
an inner layer (DispatchKey::ProfilerKernel, just above the backends) records
which kernel was reached and when it started and ended. Python entry points
(strata.<op>, Tensor methods and operators) are wrapped for the duration, so
the time from the Python call to the dispatcher is measured too."""

import builtins
import threading
import time

from .. import _C

__all__ = ["explain", "Explanation", "OpCall"]

_PROFILER_KEYS = {"Profiler", "ProfilerKernel"}


def _us(ns):
    return None if ns is None else ns / 1000.0


def _fmt_us(us):
    if us is None:
        return "-"
    return f"{us / 1000.0:.3f}ms" if us >= 1000 else f"{us:.1f}us"


def _fmt_bytes(n):
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


class OpCall:
    """One op call: keys, path, kernel, time per layer, allocations, children."""

    def __init__(self, event, binding_ns=None, return_ns=None):
        x = event.explain or {}
        self.name = event.name
        self.depth = event.depth
        self.input_shapes = event.input_shapes
        self.input_dtypes = event.input_dtypes
        self.tensor_keys = x.get("tensor_keys", [])
        self.tls_included = x.get("tls_included", [])
        self.tls_excluded = x.get("tls_excluded", [])
        self.fallthrough_keys = x.get("fallthrough", [])
        self.dispatch_keys = x.get("dispatch_keys", [])
        self.layers = [{"key": k, "kernel": n} for k, n in x.get("layers", [])]
        self.backend_key = x.get("backend_key", "")
        self.kernel = x.get("kernel_name", "")
        self.kernel_source = x.get("kernel_source", "")
        # The path: the profiler's layer, the functionality layers from the
        # op's table, then the kernel reached.
        self.path = [{"key": "Profiler", "kernel": "profiler", "source": "fallback"}]
        self.path += [{"key": l["key"], "kernel": l["kernel"], "source": "table"} for l in self.layers]
        if self.backend_key:
            self.path.append({"key": self.backend_key, "kernel": self.kernel, "source": self.kernel_source})
        self.keys_passed = [p["key"] for p in self.path]
        self.allocs = x.get("allocs", 0)
        self.alloc_bytes = x.get("alloc_bytes", 0)
        self.children = []
        self.total_us = event.cpu_time_total
        ks, ke = x.get("kernel_start_ns", -1), x.get("kernel_end_ns", -1)
        if ks >= 0 and ke >= 0:
            self.kernel_us = (ke - ks) / 1000.0
            self.dispatcher_us = ((ks - event.start_ns) + (event.end_ns - ke)) / 1000.0
        else:
            self.kernel_us = None
            self.dispatcher_us = None
        self.python_binding_us = _us(binding_ns)
        self.python_return_us = _us(return_ns)
        self.blas = None
        self._event = event

    @property
    def kernel_self_us(self):
        if self.kernel_us is None:
            return None
        return self.kernel_us - builtins.sum(c.total_us for c in self.children)

    def _lines(self, indent):
        pad = "  " * indent
        ins = ", ".join(f"{d}{s}" if d not in ("", "Scalar") else (d or "-") for s, d in
                        zip(self.input_shapes, self.input_dtypes))
        out = [f"{pad}{self.name}({ins})"]
        tls_in = [k for k in self.tls_included if k not in _PROFILER_KEYS]
        # Of the fallthrough keys, only those the call carried matter.
        present = set(self.tensor_keys) | set(self.tls_included)
        skipped = [k for k in self.fallthrough_keys if k in present and k not in _PROFILER_KEYS]
        line = (f"{pad}  keys: tensors {{{', '.join(self.tensor_keys)}}}, thread-local +{{{', '.join(tls_in)}}} "
                f"-{{{', '.join(self.tls_excluded)}}}")
        if skipped:
            line += f", transparent for this op {{{', '.join(skipped)}}}"
        line += f" -> dispatch on {{{', '.join(k for k in self.dispatch_keys if k != 'ProfilerKernel')}}}"
        out.append(line)
        steps = []
        for p in self.path:
            if p["source"] == "fallback":
                steps.append(f"{p['key']} [{p['kernel']} layer]")
            elif p["source"] == "table":
                steps.append(f"{p['key']} [{p['kernel']}]")
            else:
                src = "" if p["source"] == p["key"] else f", the op's {p['source']} kernel"
                steps.append(f"{p['key']} kernel {p['kernel'] or '?'}{src}")
        head = "Python binding -> " if self.python_binding_us is not None else "called from C++ -> "
        out.append(f"{pad}  path: {head}{' -> '.join(steps)}")
        t = []
        if self.python_binding_us is not None:
            t.append(f"Python binding {_fmt_us(self.python_binding_us)}")
        t.append(f"dispatcher+layers {_fmt_us(self.dispatcher_us)}")
        t.append(f"kernel {_fmt_us(self.kernel_us)}" + (f" (self {_fmt_us(self.kernel_self_us)})"
                                                         if self.children else ""))
        if self.python_return_us is not None:
            t.append(f"result to Python {_fmt_us(self.python_return_us)}")
        out.append(f"{pad}  time: {' | '.join(t)}; total {_fmt_us(self.total_us)}")
        out.append(f"{pad}  allocations: {self.allocs} ({_fmt_bytes(self.alloc_bytes)} net)")
        if self.blas:
            b = self.blas
            out.append(f"{pad}  BLAS: {b['blas_library']} for {b['dtype']}; {b['num_threads']} threads; "
                       f"CPU ISA level {b['isa']} ({b['blas_backend']})")
        for c in self.children:
            out += c._lines(indent + 1)
        return out

    def __str__(self):
        return "\n".join(self._lines(0))

    def __repr__(self):
        return f"<OpCall {self.name} kernel={self.kernel} keys={self.keys_passed}>"


class Explanation:
    """explain()'s result: .calls (top-level OpCall trees), .all_calls (flat), .result (fn's return value)."""

    def __init__(self, calls, all_calls, result):
        self.calls = calls
        self.all_calls = all_calls
        self.result = result

    def find(self, name):
        """Calls whose op name (with or without "strata::", with or without overload) is name."""
        out = []
        for c in self.all_calls:
            n = c.name.split("::", 1)[-1]
            if name in (c.name, n, n.split(".", 1)[0]):
                out.append(c)
        return out

    def __str__(self):
        lines = [f"explain: {len(self.all_calls)} op call(s), {len(self.calls)} from Python"]
        for i, c in enumerate(self.calls):
            lines.append(f"[{i}] " + str(c))
        return "\n".join(lines)

    __repr__ = __str__


def _patch_entry_points(log):
    """Wraps the Python entry points of the ops; returns an undo function."""
    import strata

    op_names = {info["name"] for info in _C._op_schemas()}
    get_tid = threading.get_native_id
    now = time.perf_counter_ns  # CLOCK_MONOTONIC, as the C++ side's steady_clock
    undo = []
    wrappers = {}

    def wrap(f):
        w = wrappers.get(id(f))
        if w is None:
            def w(*args, **kwargs):
                t0 = now()
                try:
                    return f(*args, **kwargs)
                finally:
                    log.append((get_tid(), t0, now()))

            wrappers[id(f)] = w
        return w

    ops_mod = _C._ops
    originals = {}
    for name in op_names:
        f = ops_mod.__dict__.get(name)
        if f is not None and callable(f):
            originals[id(f)] = f
            undo.append((ops_mod, name, f))
            setattr(ops_mod, name, wrap(f))
    for name, v in list(vars(strata).items()):
        if id(v) in originals and originals[id(v)] is v:
            undo.append((strata, name, v))
            setattr(strata, name, wrap(v))
    T = _C.Tensor
    from .._tensor import OPERATOR_METHODS  # noqa: PLC0415

    for name in [*op_names, *OPERATOR_METHODS]:
        v = T.__dict__.get(name)
        if v is not None and (type(v).__name__.startswith("nb_") or isinstance(v, _C.op_method)):
            undo.append((T, name, v))
            setattr(T, name, wrap(v))

    def restore():
        for obj, name, v in reversed(undo):
            setattr(obj, name, v)
        _C._install_operator_slots()  # the setattr calls above reset the operator slots

    return restore


def explain(fn, *args, verbose=True, **kwargs):
    """Runs fn(*args, **kwargs) once; prints and returns the path of each op call.

    For every op call: the dispatch keys (from the tensors, the thread-local
    sets and the op's table), the layers passed, the kernel chosen and where
    it came from (the op's own, CompositeImplicit, a fallback), the time in
    the Python binding, the dispatcher/layers and the kernel, the allocations;
    for matmul-family ops the BLAS library, thread count and CPU ISA level.
    """
    from . import profile  # noqa: PLC0415  (package import cycle)
    import strata

    log = []
    prof = profile(record_shapes=True, _explain=True)
    restore = _patch_entry_points(log)
    try:
        with prof:
            result = fn(*args, **kwargs)
    finally:
        restore()
    events = [e for e in prof.events() if e.category == "cpu_op"]
    calls = {}
    for e in events:
        calls[e.id] = OpCall(e)
    top = []
    for e in events:
        c = calls[e.id]
        p = e.cpu_parent
        while p is not None and p.id not in calls:
            p = p.cpu_parent  # skip record_function ranges
        if p is not None:
            calls[p.id].children.append(c)
            continue
        top.append(c)
        # The innermost wrapped Python call around this op is its binding entry.
        best = None
        for tid, t0, t1 in log:
            if tid == e.thread and t0 <= e.start_ns and t1 >= e.end_ns and (best is None or t0 > best[0]):
                best = (t0, t1)
        if best is not None:
            c.python_binding_us = (e.start_ns - best[0]) / 1000.0
            c.python_return_us = (best[1] - e.end_ns) / 1000.0
    for c in calls.values():
        if _C._is_matmul_family(c.name):
            dt = next((d for d in c.input_dtypes if d not in ("", "Scalar", "TensorList")), None)
            if dt is not None and isinstance(getattr(strata, dt, None), _C.dtype):
                c.blas = dict(_C._profiler_facts(getattr(strata, dt)), dtype=dt)
    ex = Explanation(top, list(calls.values()), result)
    if verbose:
        print(ex)
    return ex
