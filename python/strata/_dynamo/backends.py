"""Backends: what runs a captured graph.

"eager": the graph's own C++ runner (node by node through the dispatcher, no Python per op).
A Python callable `backend(graph_module, example_inputs) -> callable` is accepted as torch
allows. "inductor" (torch's default, often named in scripts) is the eager runner until the fusing
code generator exists; it then becomes the default."""

from .. import _C
from . import logs

_BACKENDS = {}


def register_backend(name, fn=None):
    def deco(f):
        _BACKENDS[name] = f
        return f
    return deco(fn) if fn is not None else deco


def list_backends():
    return sorted(_BACKENDS)


class GraphModule:
    """What a custom backend receives: the captured graph, callable on real inputs."""

    def __init__(self, graph, out):
        self.graph = graph
        self._runner = graph.runner()
        self.input_sources = list(out.input_sources)

    def __call__(self, *inputs):
        return self._runner(*inputs)

    forward = __call__

    def print_readable(self, print_output=True):
        s = self.graph.print_readable()
        if print_output:
            print(s)
        return s

    @property
    def code(self):
        return self.graph.print_readable()


@register_backend("eager")
def _eager(graph, out):
    return graph.runner()


# torch's default backend name, which torch scripts pass explicitly: until Strata's fusing code
# generator (the next piece of the compiled path) exists, it is the eager runner.
register_backend("inductor", _eager)


@register_backend("strata_cpp")
def _strata_cpp(graph, out):
    """Generated C++ kernels for fused groups, the rest node by node (Note [Compiled training steps])."""
    from .aot import aot_compile
    mode = _mode_of(out)
    return aot_compile(graph, compile_fn=lambda g: _compile_cpp(g, mode))


_MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def _mode_of(out):
    opts = getattr(out, "backend_options", None) or {}
    mode = opts.get("mode")
    if mode not in _MODES:
        raise ValueError(f"strata.compile: unknown mode {mode!r}; available: "
                         + ", ".join(repr(m) for m in _MODES[1:]))
    return mode or "default"


def _compile_cpp(graph, mode):
    """compile_graph's fused groups as one kernel plan (Note [Kernel plans] in src/compile/executor.cpp)
    with a memory plan; what compile_graph returns when it fused nothing or the plan cannot be made."""
    from .._inductor.fusion import compile_graph
    fused = compile_graph(graph, None)
    steps = getattr(fused, "steps", None)
    if steps is None:
        return fused
    try:
        return kernel_runner(graph, steps, keep_arena=mode == "reduce-overhead")
    except _NoPlan as e:
        logs.aot(f"strata_cpp: the fused graph runs step by step from Python: {e}")
        return fused


class _NoPlan(Exception):
    pass


def _kernel_specs(graph, steps):
    """[(spec fields without arena offsets)] for the kernel steps compile_graph made."""
    nodes = graph.nodes
    producer = {}
    for i, n in enumerate(nodes):
        for o in n.outputs:
            producer[o] = i
    specs = []
    for st in steps:
        kind = type(st).__name__
        if kind == "_GraphStep":
            continue
        if kind not in ("_KernelStep", "_RowStep"):
            raise _NoPlan(f"a step of kind {kind} has no kernel plan form")
        rows = kind == "_RowStep"
        # The nodes a kernel replaces: everything between its outputs and its inputs.
        stop, seen, pos, stack = set(st.in_ids), set(), set(), list(st.out_ids)
        while stack:
            v = stack.pop()
            if v in seen or v in stop:
                continue
            seen.add(v)
            i = producer.get(v)
            if i is None:
                continue
            pos.add(i)
            stack.extend(nodes[i].input_ids)
        if rows:
            out_shapes = [list(sh) for sh, _ in st.outs]
            numel, cols, dtype = st.numel, st.cols, graph.value(st.out_ids[0]).dtype
        else:
            out_shapes = [[] for _ in st.out_ids]
            numel = -1 if st.numel is None else st.numel
            cols, dtype = 1, st.dtype
        specs.append([ctypes_address(st.fn), rows, st.ref, numel, cols, dtype, list(st.in_ids), list(st.out_ids),
                      out_shapes, sorted(pos)])
    return specs


def ctypes_address(fn):
    import ctypes
    return ctypes.cast(fn, ctypes.c_void_p).value


# Ops that may return (a view of) their input although they are not flagged as views.
_MAY_ALIAS = {"contiguous", "reshape", "to", "type_as", "flatten", "unflatten", "view_as", "reshape_as", "expand_as",
              "alias", "detach", "_to_copy", "clone", "squeeze", "unsqueeze", "t", "numpy_T", "real", "conj",
              "resolve_conj", "resolve_neg", "split", "chunk", "unbind", "narrow", "select", "slice"}
_ALIAS_FLAGS = None


class MemoryPlan:
    """Note [Memory plans]
    The liveness of every value over the kernel plan's steps (node steps in graph order, each
    kernel at its last node), and an arena for kernel outputs. A kernel output gets an arena slot
    when it has a static size, is not a graph output, and every node outside the kernels that reads
    it neither aliases nor writes it (not a view, not in-place, no op that may return its input):
    then nothing outside the call can hold it. Slots are assigned in step order, first fit among
    the slots whose value died before the step (the smallest that is large enough; a new slot at the
    end of the arena otherwise), 64-byte aligned. peak_bytes estimates the most bytes live at once:
    the arena plus every other node result (views count 0) from its step to its last use (graph
    outputs to the end); graph inputs are the caller's and not counted."""

    def __init__(self, graph, specs):
        global _ALIAS_FLAGS
        if _ALIAS_FLAGS is None:
            f = _C._op_flags()
            _ALIAS_FLAGS = f["view"] | f["inplace"]
        nodes = graph.nodes
        kernel_of = {}
        for k, sp in enumerate(specs):
            for p in sp[9]:
                kernel_of[p] = k
        # Step index of each node (a kernel's nodes share the kernel's step).
        step_of, steps, k_step = {}, 0, {}
        for i in range(len(nodes)):
            k = kernel_of.get(i)
            if k is None:
                step_of[i] = steps
                steps += 1
            elif i == specs[k][9][-1]:
                k_step[k] = steps
                steps += 1
        for i, k in kernel_of.items():
            step_of[i] = k_step[k]
        outputs = set(graph.outputs)
        last, unsafe = {}, set()
        for i, n in enumerate(nodes):
            s = step_of[i]
            for v in n.input_ids:
                last[v] = max(last.get(v, -1), s)
                if i not in kernel_of and ((n.flags & _ALIAS_FLAGS) or n.op in _MAY_ALIAS or n.list_return):
                    unsafe.add(v)
        self.num_steps = steps
        self.slots = []            # [offset, size, free_after_step]
        self.offsets = {}          # value id -> arena offset
        intervals = []
        for k, sp in enumerate(specs):
            for v in sp[7]:
                val = graph.value(v)
                if v in outputs or v in unsafe or sp[3] < 0 or val.kind != "tensor":
                    continue
                intervals.append((k_step[k], max(last.get(v, k_step[k]), k_step[k]), _nbytes(val), v))
        intervals.sort()
        end = 0
        for d, u, size, v in intervals:
            best = None
            for slot in self.slots:
                if slot[2] < d and slot[1] >= size and (best is None or slot[1] < best[1]):
                    best = slot
            if best is None:
                best = [end, (size + 63) // 64 * 64, -1]
                end += best[1]
                self.slots.append(best)
            best[2] = u
            self.offsets[v] = best[0]
        self.arena_bytes = end
        self.arena_values = len(self.offsets)
        self.arena_unplanned_bytes = sum((iv[2] + 63) // 64 * 64 for iv in intervals)
        # Live bytes per step outside the arena.
        delta = [0] * (steps + 1)
        view = _C._op_flags()["view"]
        for i, n in enumerate(nodes):
            if n.flags & view:
                continue
            for v in n.outputs:
                if v in self.offsets:
                    continue
                val = graph.value(v)
                if val.kind != "tensor":
                    continue
                if i in kernel_of and v not in specs[kernel_of[i]][7]:
                    continue  # inside a kernel: never materialized
                d = step_of[i]
                u = steps if v in outputs else max(last.get(v, d), d)
                delta[d] += _nbytes(val)
                delta[u + 1 if u < steps else steps] -= _nbytes(val)
        live, peak = 0, 0
        for x in delta:
            live += x
            peak = max(peak, live)
        self.peak_bytes = peak + self.arena_bytes
        self.kernels = len(specs)

    def describe(self):
        return (f"{self.kernels} kernels in {self.num_steps} steps; arena {self.arena_bytes} B in {len(self.slots)} "
                f"slots for {self.arena_values} kernel outputs ({self.arena_unplanned_bytes} B without reuse); "
                f"planned peak {self.peak_bytes} B")


def _nbytes(v):
    if v.dtype is None:
        return 0
    n = 1
    for s in v.shape:
        n *= s
    return n * v.dtype.itemsize


def kernel_runner(graph, steps, keep_arena=False):
    """A GraphRunner of graph with compile_graph's kernel steps in place of their nodes, and its
    MemoryPlan as .memory_plan."""
    specs = _kernel_specs(graph, steps)
    if not specs:
        raise _NoPlan("no kernel")
    plan = MemoryPlan(graph, specs)
    full = [tuple(sp) + ([plan.offsets.get(v, -1) for v in sp[7]],) for sp in specs]
    try:
        r = graph.kernel_runner(full, plan.arena_bytes, keep_arena)
    except Exception as e:
        raise _NoPlan(str(e)) from e
    r.memory_plan = plan
    return r


@register_backend("aot_eager")
def _aot_eager(graph, out):
    """Forward and backward traced ahead of time, partitioned with a min-cut (aot.py)."""
    from .aot import aot_compile
    return aot_compile(graph)


def lookup_backend(backend):
    if callable(backend):
        user = backend

        def compile_with_user_backend(graph, out):
            gm = GraphModule(graph, out)
            examples = list(out.input_examples)
            fn = user(gm, examples)
            if not callable(fn):
                raise TypeError(f"strata.compile: backend {user!r} returned {type(fn).__name__}, not a callable")

            def run(*inputs):
                r = fn(*inputs)
                return tuple(r) if isinstance(r, (list, tuple)) else (r,)
            return run
        return compile_with_user_backend
    if backend not in _BACKENDS:
        raise ValueError(f"strata.compile: unknown backend {backend!r}; available: {', '.join(list_backends())} "
                         "or a callable (graph_module, example_inputs) -> callable")
    return _BACKENDS[backend]

