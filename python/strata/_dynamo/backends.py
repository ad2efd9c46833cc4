"""Backends: what runs a captured graph.

"strata_cpp" (also "inductor", torch's default name, and strata.compile's default): groups of
pointwise and row ops become generated C++ kernels (python/strata/_inductor), run with the
remaining nodes in one C++ loop (Note [Kernel plans] in src/compile/executor.cpp) under a memory
plan (Note [Memory plans]); a graph whose inputs need grad goes through AOT autograd and both its
forward and backward graphs are compiled that way (Note [Compiled training steps]).
"eager": the graph's own C++ runner (node by node through the dispatcher, no Python per op).
"aot_eager": AOT autograd with node-by-node runners. A Python callable
`backend(graph_module, example_inputs) -> callable` is accepted as torch allows.

Note [Compiled training steps]
With grad mode on and an input that requires grad, strata_cpp calls aot_compile with a
compile_fn: the joint graph is partitioned as for aot_eager, and the forward graph, the backward
graph and (at its first call without grad) the captured graph are each compiled by
compile_graph with grad mode off (the graphs themselves need no autograd: CompiledFunction is the
autograd node). A training step is then the forward kernel plan, CompiledFunctionBackward running
the backward kernel plan, and the optimizer in eager mode. Whatever cannot be fused or planned
runs node by node (the graph's own runner, or compile_graph's own step runner when a kernel
plan cannot be built); a graph AOT autograd cannot trace replays with eager autograd. Graphs with
symbolic sizes go through AOT autograd with symbolic sizes (Note [Symbolic sizes through AOT autograd]
in aot_dynamic.py), their graphs compiled with dynamic=True (kernels that take any size).

Modes: "default"; "reduce-overhead" keeps the arena of kernel outputs and the tensors over it from
the first call (later calls allocate only graph outputs and what nodes outside kernels allocate,
and run no Python per node); "max-autotune" and "max-autotune-no-cudagraphs" (the same on the CPU)
time each kernel's render variants and each GEMM's route on the captured shapes and keep the fastest,
cached on disk (Note [Autotuning] in python/strata/_inductor/autotune.py)."""

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


@register_backend("strata_cpp")
def _strata_cpp(graph, out):
    """Generated C++ kernels for fused groups, the rest node by node (Note [Compiled training steps])."""
    from .aot import aot_compile
    mode = _mode_of(out)

    dynamic = bool(getattr(out, "dynamic", False) and getattr(out, "symbols", None))

    def compile_fn(g, inputs_die=False, world_shapes=None, inputs_distinct=False):
        return _compile_cpp(g, mode, inputs_die, dynamic=dynamic, world_shapes=world_shapes,
                            inputs_distinct=inputs_distinct)
    compile_fn.takes_world_shapes = True
    if dynamic:
        # Symbolic sizes: AOT autograd traces the joint graph at four sizes and makes its sizes
        # symbolic (Note [Symbolic sizes through AOT autograd] in aot_dynamic.py).
        from .aot_dynamic import SymSizes
        return aot_compile(graph, compile_fn=compile_fn, syms=SymSizes.of(graph, out))
    return aot_compile(graph, compile_fn=compile_fn)


# torch's default backend name, which torch scripts pass explicitly, and strata.compile's default.
register_backend("inductor", _strata_cpp)


_MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def _mode_of(out):
    opts = getattr(out, "backend_options", None) or {}
    mode = opts.get("mode")
    if mode not in _MODES:
        raise ValueError(f"strata.compile: unknown mode {mode!r}; available: "
                         + ", ".join(repr(m) for m in _MODES[1:]))
    return mode or "default"


def _compile_cpp(graph, mode, inputs_die=False, dynamic=False, world_shapes=None, tune=True, inputs_distinct=False):
    """compile_graph's fused groups as one kernel plan (Note [Kernel plans] in src/compile/executor.cpp)
    with a memory plan; what compile_graph returns when it fused nothing or the plan cannot be made.
    inputs_die: the caller hands over its inputs (a backward graph), so they count in the plan.
    dynamic: the graph has symbolic sizes (kernels that take any size only); world_shapes: its values'
    shapes at several sizes (row kernels, Note [Row kernels with symbolic sizes] in _inductor/fusion.py).
    inputs_distinct: the caller runs the graph only on inputs that share no storage (a functionalized
    graph behind aot_compile's check), so inputs it overwrites may be written early (Note [Reinplacing])."""
    from .._inductor.fusion import compile_graph
    from .._inductor import reinplace

    def fuse(g):
        return compile_graph(g, None, dynamic=dynamic or None, world_shapes=world_shapes,
                             autotune=tune and not dynamic and mode.startswith("max-autotune"))
    graph = reinplace.reinplace_graph(graph, inputs_distinct=inputs_distinct)  # Note [Reinplacing]
    fused = fuse(graph)
    steps = getattr(fused, "steps", None)
    if reinplace.enabled():
        # Lowered pointwise nodes that no kernel took may write in place too (out= would have kept them
        # out of kernels, so they are only known now). Checked against the order the kernel plan runs
        # in, the rewrite keeps every node and value, so the kernel steps still hold; otherwise (nothing
        # fused) the graph is fused again.
        schedule, positions = None, set()
        if steps is not None:
            try:
                specs = _kernel_specs(graph, steps)
            except _NoPlan:
                specs = None
            if specs is not None:
                order = getattr(fused, "order", None)
                lv = _Liveness(graph, specs, order if order is not None and sorted(order) == list(
                    range(len(graph.nodes))) else None)
                positions = set(lv.kernel_of)
                schedule = (lv.step_of, [(lv.k_step[k], list(sp[6]), list(sp[7])) for k, sp in enumerate(specs)],
                            lv.kernel_of)
        lone = reinplace.lone_nodes(graph, positions) if (schedule is not None or steps is None) else []
        if lone:
            g2 = reinplace.reinplace_graph(graph, lone, inputs_distinct, schedule)
            if g2 is not graph and schedule is not None and reinplace.same_values(graph, g2):
                graph = g2  # the same nodes and values, some with out=: the kernel steps still hold
            elif g2 is not graph and steps is None:
                graph, fused = g2, fuse(g2)
                steps = getattr(fused, "steps", None)
    if steps is None:
        return fused
    try:
        return kernel_runner(graph, steps, keep_arena=mode == "reduce-overhead", inputs_die=inputs_die,
                             inputs_distinct=inputs_distinct,
                             order=getattr(fused, "order", None))
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
    # Live nodes: those a graph output or a side effect needs. A dead node that reads a value a
    # kernel keeps inside is dropped with the kernel's nodes (compile_graph's runner skips it too).
    live, stack = set(), list(graph.outputs)
    for i, n in enumerate(nodes):
        if n.has_side_effects:
            live.add(i)
            stack.extend(n.input_ids)
    while stack:
        i = producer.get(stack.pop())
        if i is not None and i not in live:
            live.add(i)
            stack.extend(nodes[i].input_ids)
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
        outs = set(st.out_ids)
        changed = True
        while changed:
            changed = False
            inside = {o for p in pos for o in nodes[p].outputs} - outs
            for j, n in enumerate(nodes):
                if j not in pos and any(v in inside for v in n.input_ids):
                    if j in live:
                        raise _NoPlan(f"node {j} ({n.op}) reads a value kernel nodes keep inside")
                    pos.add(j)
                    changed = True
        if rows:
            out_shapes = [list(sh) for sh, _ in st.outs]
            numel, cols, dtype = st.numel, st.cols, graph.value(st.out_ids[0]).dtype
        else:
            out_shapes = [[] for _ in st.out_ids]
            numel = -1 if st.numel is None else st.numel
            cols, dtype = 1, st.dtype
        # (output dtypes, strided geometry or None, status word): KernelCall's fields the plan needs too.
        extra = ([], None, False) if rows else getattr(st, "extra", None)
        if extra is None:
            raise _NoPlan("a kernel step without its call geometry")
        specs.append([ctypes_address(st.fn), rows, st.ref, numel, cols, dtype, list(st.in_ids), list(st.out_ids),
                      out_shapes, sorted(pos), extra, getattr(st, "name", "") or "", st])
    return specs


def ctypes_address(fn):
    import ctypes
    return ctypes.cast(fn, ctypes.c_void_p).value


# Ops that may return (a view of) their input although they are not flagged as views.
_MAY_ALIAS = {"contiguous", "reshape", "to", "type_as", "flatten", "unflatten", "view_as", "reshape_as", "expand_as",
              "alias", "detach", "_to_copy", "clone", "squeeze", "unsqueeze", "t", "numpy_T", "real", "conj",
              "resolve_conj", "resolve_neg", "split", "chunk", "unbind", "narrow", "select", "slice"}
_ALIAS_FLAGS = None


class _Liveness:
    """Steps of a kernel plan (node steps in the schedule's order, graph order without one; each kernel
    at its last node in that order) and the last step that reads each value."""

    def __init__(self, graph, specs, order=None, donated=None):
        global _ALIAS_FLAGS
        if _ALIAS_FLAGS is None:
            f = _C._op_flags()
            _ALIAS_FLAGS = f["view"] | f["inplace"]
        nodes = graph.nodes
        self.graph, self.specs = graph, specs
        # Kernel outputs written into a dying input (Note [Reinplacing]): each lives in its donor's storage,
        # so the storage's first value is held until the last of them dies and they take no bytes.
        self.donated = donated or {}
        self.held = {}
        for o in self.donated:
            r = o
            while r in self.donated:
                r = self.donated[r]
            self.held.setdefault(r, []).append(o)
        self.kernel_of = kernel_of = {}
        for k, sp in enumerate(specs):
            for p in sp[9]:
                kernel_of[p] = k
        order = list(range(len(nodes))) if order is None else order
        rank = {p: r for r, p in enumerate(order)}
        last = {k: max(rank[p] for p in sp[9]) for k, sp in enumerate(specs)}
        self.step_of, steps, self.k_step = {}, 0, {}
        for i in order:
            k = kernel_of.get(i)
            if k is None:
                self.step_of[i] = steps
                steps += 1
            elif rank[i] == last[k]:
                self.k_step[k] = steps
                steps += 1
        for i, k in kernel_of.items():
            self.step_of[i] = self.k_step[k]
        self.steps = steps
        self.outputs = set(graph.outputs)
        self.last, self.unsafe = {}, set()
        for i, n in enumerate(nodes):
            st = self.step_of[i]
            ids = n.input_ids
            # copy_(dst, src) only reads src (a functionalized graph's write-back of a kernel output).
            dst_only = n.op == "copy_" and ids and ids[0] != ids[-1]
            if i not in kernel_of and n.has_side_effects:
                # a tensor an out= or in-place node outside the kernels writes (as in a reinplaced graph) is
                # the node's to write: never arena memory
                args = n.args
                for w in _writes(n):
                    if isinstance(args[w], _C._compile.Value):
                        self.unsafe.add(args[w].id)
            for k, v in enumerate(ids):
                self.last[v] = max(self.last.get(v, -1), st)
                if i not in kernel_of and ((n.flags & _ALIAS_FLAGS) or n.op in _MAY_ALIAS or n.list_return):
                    if not (dst_only and k > 0):
                        self.unsafe.add(v)

    def intervals(self, in_arena=(), inputs_die=False):
        """[(value id, bytes, first step, last step)] of what the plan holds: node results (views
        count 0; values inside a kernel are never materialized, values in in_arena are the arena's)
        from their step to their last use (graph outputs to the end), and with inputs_die the
        graph's inputs until their last use."""
        graph, specs, kernel_of, steps = self.graph, self.specs, self.kernel_of, self.steps
        view = _C._op_flags()["view"]
        out = []

        def live(v, d):
            val = graph.value(v)
            if val.kind != "tensor" or v in self.donated:
                return
            u = steps if v in self.outputs else max(self.last.get(v, d), d)
            for m in self.held.get(v, ()):
                u = max(u, steps if m in self.outputs else self.last.get(m, d))
            out.append((v, _nbytes(val), d, min(u, steps)))
        if inputs_die:
            for v in graph.inputs:
                live(v, 0)
        for i, n in enumerate(graph.nodes):
            if n.flags & view:
                continue
            for v in n.outputs:
                if v in in_arena or (i in kernel_of and v not in specs[kernel_of[i]][7]):
                    continue
                live(v, self.step_of[i])
        return out

    def timeline(self, in_arena=(), inputs_die=False):
        """Bytes held during each step (the intervals' sum)."""
        delta = [0] * (self.steps + 2)
        for _, size, d, u in self.intervals(in_arena, inputs_die):
            delta[d] += size
            delta[u + 1] -= size
        cur, line = 0, []
        for x in delta[:self.steps + 1]:
            cur += x
            line.append(cur)
        return line

    def peak(self, in_arena=(), inputs_die=False):
        """The most bytes live at once (timeline's maximum)."""
        return max(self.timeline(in_arena, inputs_die), default=0)


def _writes(n):
    from .functionalize import _writes as w
    return w(n)


def _choose_kernels(graph, specs, inputs_die, order=None):
    """The kernels to use and the order to run the nodes in: all the kernels, unless together they
    raise the planned peak above running every node by node in graph order (a kernel holds all its
    inputs until it ends and makes all its outputs at once, and the schedule ran a group at its
    earliest position); then kernels are left out, in order, while leaving one out lowers the peak,
    until the peak is no higher than node by node. A kernel left out keeps its nodes where the schedule
    put them or sinks each to just before its first reader (_sink), whichever plans the lower peak:
    a node the schedule moved early for the kernel's sake is then made where it is needed again. Returns (kernels, left out, node-by-node
    peak, order)."""
    # The baseline is the graph run node by node in its own order (what aot_eager runs), not in the
    # schedule's order: a schedule that moves a node early raises both peaks alike and would hide it.
    base = _Liveness(graph, []).peak(inputs_die=inputs_die)
    chosen = list(specs)
    cur = _Liveness(graph, chosen, order).peak(inputs_die=inputs_die)
    dropped = []
    for sp in specs:
        if cur <= base:
            break
        trial = [x for x in chosen if x is not sp]
        orders = [order] if order is None else [order, _sink(graph, order, sp[9])]
        p, trial_order = min(((_Liveness(graph, trial, o).peak(inputs_die=inputs_die), k) for k, o in enumerate(orders)))
        if p < cur:
            chosen, cur, order = trial, p, orders[trial_order]
            dropped.append(sp)
    return chosen, dropped, base, order


def _sink(graph, order, positions):
    """order with each node in positions moved later, to just before the first node that reads one of
    its outputs (the end when none does), never past a node with side effects (in-place writes, random
    draws keep their place relative to the nodes that read their operands)."""
    nodes = graph.nodes
    order = list(order)
    for q in sorted(positions, key=order.index, reverse=True):
        if nodes[q].has_side_effects:
            continue
        outs = set(nodes[q].outputs)
        r = order.index(q)
        stop = len(order)
        for k in range(r + 1, len(order)):
            n = nodes[order[k]]
            if n.has_side_effects or outs.intersection(n.input_ids):
                stop = k
                break
        order.insert(stop - 1, order.pop(r))
    return order


class MemoryPlan:
    """Note [Memory plans]
    Liveness of every value over the kernel plan's steps (_Liveness: node steps in graph order,
    each kernel at its last node) decides two things.
    Which kernels run: a kernel keeps all its inputs until it ends and makes all its outputs at
    once, so a large fused group can raise the peak above running its nodes one by one; kernels
    are left out (their nodes run node by node) while the planned peak with them is above the
    node-by-node peak (_choose_kernels). For a backward graph (inputs_die) the inputs, the saved
    values, count too: they die at their last use (Note [Compiled backward frees saved values]).
    The arena: a kernel output gets an arena slot when it has a static size, is not a graph
    output, and every node outside the kernels that reads it neither aliases nor writes it (not a
    view, not in-place, no op that may return its input): then nothing outside the call can hold
    it. Slots are assigned in step order, first fit among the slots whose value died before the
    step (the smallest that is large enough; a new slot at the end of the arena otherwise), 64-byte
    aligned. Mode "reduce-overhead" keeps the arena across calls. Otherwise an arena is made per
    call and lives for the whole call, so it is kept only where it does not raise the peak; else
    kernel outputs are allocated one by one and released at their last use.
    peak_bytes: the planned peak, arena included; graph inputs are the caller's and not counted
    (except with inputs_die)."""

    def __init__(self, graph, specs, keep_arena=False, inputs_die=False, dropped=(), node_peak=None, order=None,
                 donated=None):
        lv = _Liveness(graph, specs, order, donated)
        donors = set((donated or {}).values())
        self.reinplaced = len(donated or {})
        self.num_steps = lv.steps
        self.kernels = len(specs)
        self.dropped_kernels = len(dropped)
        self.node_by_node_peak = node_peak
        self.slots = []            # [offset, size, free_after_step]
        self.offsets = {}          # value id -> arena offset
        intervals = []
        for k, sp in enumerate(specs):
            d = lv.k_step[k]
            for v in sp[7]:
                val = graph.value(v)
                if v in lv.outputs or v in lv.unsafe or sp[3] < 0 or val.kind != "tensor" or v in lv.donated \
                        or v in donors:
                    continue
                intervals.append((d, max(lv.last.get(v, d), d), _nbytes(val), v))
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
        fresh = lv.peak(inputs_die=inputs_die)
        self.peak_bytes = lv.peak(set(self.offsets), inputs_die) + self.arena_bytes
        self.arena_dropped = False
        if not keep_arena and self.peak_bytes > fresh:
            self.offsets, self.slots, self.arena_bytes, self.arena_values = {}, [], 0, 0
            self.peak_bytes, self.arena_dropped = fresh, True
        self._liveness, self._inputs_die = lv, inputs_die

    def timeline(self):
        """Planned bytes held during each step of the plan (the arena counted whole throughout)."""
        line = self._liveness.timeline(set(self.offsets), self._inputs_die)
        return [b + self.arena_bytes for b in line]

    def live_at(self, step=None):
        """[(bytes, value name, what made it)] the plan holds during step (default: the planned peak's
        step), largest first: the debugging view of where a plan's peak comes from."""
        lv = self._liveness
        if step is None:
            line = self.timeline()
            step = line.index(max(line)) if line else 0
        g, made = lv.graph, {}
        for i, n in enumerate(g.nodes):
            for v in n.outputs:
                made[v] = ("kernel " if i in lv.kernel_of else "") + n.op
        out = [(size, g.value(v).name, made.get(v, "input"))
               for v, size, d, u in lv.intervals(set(self.offsets), self._inputs_die) if d <= step <= u and size]
        return sorted(out, reverse=True)

    def describe(self):
        s = (f"{self.kernels} kernels in {self.num_steps} steps; arena {self.arena_bytes} B in {len(self.slots)} "
             f"slots for {self.arena_values} kernel outputs ({self.arena_unplanned_bytes} B without reuse); "
             f"planned peak {self.peak_bytes} B")
        if self.node_by_node_peak is not None:
            s += f" (node by node: {self.node_by_node_peak} B)"
        if self.arena_dropped:
            s += "; arena per call dropped (it would raise the peak)"
        if self.dropped_kernels:
            s += f"; {self.dropped_kernels} kernels left out (they would raise the peak)"
        if self.reinplaced:
            s += f"; {self.reinplaced} kernel outputs written into their inputs"
        return s


def _nbytes(v):
    if v.dtype is None:
        return 0
    n = 1
    for s in v.shape:
        n *= s
    return n * v.dtype.itemsize


def memory_plans(fn):
    """[(which graph, MemoryPlan)] of a callable the strata_cpp backend made: "graph" for a graph
    run as it is, "forward" and "backward" for a training graph (and "no_grad" once its graph for
    calls without grad was compiled)."""
    out = []
    if fn is None:
        return out
    mp = getattr(fn, "memory_plan", None)
    if mp is not None:
        out.append(("graph", mp))
    plan = getattr(fn, "plan", None)
    if plan is not None and hasattr(plan, "fwd"):
        for which, r in (("forward", plan.fwd), ("backward", plan.bwd)):
            mp = getattr(r, "memory_plan", None)
            if mp is not None:
                out.append((which, mp))
    lazy = getattr(fn, "no_grad_run", None)
    mp = getattr(getattr(lazy, "fn", None), "memory_plan", None)
    if mp is not None:
        out.append(("no_grad", mp))
    return out


def kernel_runner(graph, steps, keep_arena=False, inputs_die=False, order=None, inputs_distinct=False):
    """A GraphRunner of graph with compile_graph's kernel steps in place of their nodes, and its
    MemoryPlan as .memory_plan."""
    specs = _kernel_specs(graph, steps)
    if not specs:
        raise _NoPlan("no kernel")
    if order is not None and sorted(order) != list(range(len(graph.nodes))):
        order = None
    specs, dropped, node_peak, order = _choose_kernels(graph, specs, inputs_die, order)
    # Note [Reinplacing] in _inductor/reinplace.py: outputs written into inputs that die in their kernel.
    from .._inductor import reinplace
    lv = _Liveness(graph, specs, order)
    into, donated = reinplace.plan_kernel_donations(graph, specs, lv.k_step, lv.step_of, lv.kernel_of,
                                                    inputs_distinct)
    keep, sources = [], []
    for k, m in into.items():
        fn, src = reinplace.render_into(specs[k][12], m)
        keep.append(fn)
        sources.append(src)
        specs[k] = list(specs[k])
        specs[k][0] = ctypes_address(fn)
    plan = MemoryPlan(graph, specs, keep_arena, inputs_die, dropped, node_peak, order, donated)
    full = []
    for k, sp in enumerate(specs):
        ref_sizes = list(graph.value(sp[6][sp[2]]).shape) if sp[3] >= 0 else None
        out_into = [into[k].get(j, -1) for j in range(len(sp[7]))] if k in into else None
        full.append(tuple(sp[:10]) + ([plan.offsets.get(v, -1) for v in sp[7]], ref_sizes, sp[10], sp[11], out_into))
    try:
        r = graph.kernel_runner(full, plan.arena_bytes, keep_arena, list(order or ()))
    except Exception as e:
        raise _NoPlan(str(e)) from e
    r.memory_plan = plan
    if keep:
        r.reinplaced_kernels = keep  # the variants' code stays loaded while the runner lives
        r.reinplaced_sources = sources
    return r


@register_backend("aot_eager")
def _aot_eager(graph, out):
    """Forward and backward traced ahead of time, partitioned with a min-cut (aot.py)."""
    from .aot import aot_compile
    if getattr(out, "dynamic", False) and getattr(out, "symbols", None):
        from .aot_dynamic import SymSizes
        return aot_compile(graph, syms=SymSizes.of(graph, out))
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

