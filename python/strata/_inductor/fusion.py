"""backend="strata_cpp": fuse pointwise nodes and row reductions of a captured graph into generated kernels.

Note [Pointwise groups]
Pointwise nodes with the same result shape form groups (Note [Pointwise groups, general form]
below: broadcasting, strides, eager's per-op dtypes, reordering); a group of at least two nodes
becomes one kernel whose outputs are the values it produces that a later step or the graph's
result reads. Row groups (Note [Row groups]) are runs of consecutive nodes around a reduction over
the last dim. The rest of the graph runs in segments extracted from it (Graph.extract) through
their own node-by-node runners.

No fusion (the graph's own runner) when an input requires grad under grad mode: generated kernels
have no derivatives yet. At run time a kernel input whose sizes or strides differ from the captured
ones (a flat kernel: that is not contiguous, or whose size differs in a static graph) runs the whole
graph node by node instead."""

import ctypes
import warnings

import strata

from .. import _C
from . import autotune as _autotune
from . import codecache, cpp
from .ir import LOWERINGS, Buffer, Compute, Const, Load, Store

_DTYPES = {"float32": "float", "float64": "double"}
MIN_GROUP = 2
MAX_TRIES = 4


def _dtype_name(dt):
    return str(dt).replace("strata.", "")


def _contiguous(sizes, strides):
    expect = 1
    for s, st in zip(reversed(sizes), reversed(strides)):
        if s != 1 and st != expect:
            return False
        expect *= s
    return True


def _is_tensor_value(a):
    return isinstance(a, _C._compile.Value) and a.kind == "tensor"


def _fusable(node):
    """(ctype, shape, functor, operands) or None; operands: Value or a number."""
    lower = LOWERINGS.get(node.op)
    if lower is None or node.has_side_effects or len(node.outputs) != 1 or node.list_return:
        return None
    args = list(node.args)
    if args and node.arg_names[-1] == "out":
        if args[-1] is not None:
            return None
    out = node.outputs[0]
    return out, lower, args


def _lower_operands(lower, args, ct):
    """(functor, operands) for a pointwise node whose tensor operands are contiguous CPU tensors of
    the group's dtype (a bool condition for where) and whose other operands are numbers, else None.
    Operand shapes are left to the caller."""
    r = lower(args, ct)
    if r is None:
        return None
    functor, positions = r
    operands = []
    for k, p in enumerate(positions):
        a = args[p]
        cond = functor.name == "Where" and k == 0
        if _is_tensor_value(a):
            if cond:
                if _dtype_name(a.dtype) != "bool" or str(a.device) != "cpu" or not _contiguous(a.shape, a.stride):
                    return None
            elif not _tensor_ok(a, ct):
                return None
            operands.append(a)
        elif _num(a) and not cond:
            operands.append(float(a))
        else:
            return None
    return functor, operands


def _address(fn):
    return ctypes.cast(fn, ctypes.c_void_p).value


class _KernelStep:
    __slots__ = ("fn", "in_ids", "out_ids", "ref", "numel", "shape", "dtype", "nbuf", "source", "call", "extra",
                 "name", "kernel", "comment")


class _RowStep:
    __slots__ = ("fn", "in_ids", "out_ids", "ref", "cols", "numel", "outs", "nbuf", "source", "call", "name")


# Note [Kernel names in the profiler]
# A generated kernel runs without the dispatcher, so the profiler's op layer never sees it; each
# kernel step records a range of its own instead (category "kernel", src/compile/executor.cpp and
# KernelCall in python/src/codegen_bind.cpp) under a name made, as torch's inductor names its
# kernels, from the ops it fused: "strata_fused_add_mul_relu_3" (up to 6 distinct op names in graph
# order, "..." for more, then a number unique in the process), "strata_gemm_linear_gelu_4" for a GEMM
# epilogue step.
_kernel_count = [0]


def kernel_name(graph, positions, prefix="strata_fused"):
    names = []
    for p in sorted(positions):
        op = graph.nodes[p].op.split(".")[0].lstrip("_")
        if op not in names:
            names.append(op)
    _kernel_count[0] += 1
    body = "_".join(names[:6]) + ("_..." if len(names) > 6 else "")
    return f"{prefix}_{body}_{_kernel_count[0] - 1}"


class _GraphStep:
    __slots__ = ("runner", "in_ids", "out_ids")


def compile_graph(graph, out=None, dynamic=None, world_shapes=None, autotune=False):
    """The strata_cpp backend: a callable(*inputs) -> tuple of outputs. dynamic: the graph has symbolic
    sizes (default: whether it has int inputs); then only kernels that take any size are made.
    world_shapes: for a graph with symbolic sizes, value name -> its shape at each of several sizes of the
    symbols (Note [Row kernels with symbolic sizes]); without it such a graph has no row kernels.
    autotune: time render variants and GEMM routes on the captured shapes (mode="max-autotune", Note
    [Autotuning]); never for a graph with symbolic sizes."""
    runner = graph.runner()
    if strata.is_grad_enabled() and any(graph.value(v).requires_grad for v in graph.inputs):
        return runner
    if dynamic is None:
        dynamic = any(graph.value(v).kind == "int" for v in graph.inputs)
    tune = autotune and not dynamic
    if not dynamic:
        row_groups = _row_groups(graph)
    elif world_shapes:
        row_groups = [r for r in _row_groups(graph) if _dynamic_rows_ok(graph, r, world_shapes)]
    else:
        row_groups = []
    row_pos = {i for r in row_groups for i in r[0]}
    gemms = {} if dynamic else {i: p for i, p in _plan_gemm_epilogues(graph, extra=tune).items()
                                if i not in row_pos and p["epi"] not in row_pos}
    if tune and gemms:
        try:
            codecache.compiler()
            gemms = _tune_gemm_routes(graph, gemms)
        except codecache.CompilerMissing:
            pass
    gemm_pos = {q for i, p in gemms.items() for q in (i, p["epi"]) if q is not None}
    plans = {}
    for i, n in enumerate(graph.nodes):
        if i not in row_pos and i not in gemm_pos:
            p = _plan_pw(graph, n, dynamic)
            if p is not None:
                plans[i] = p
    colreds = {} if dynamic else {i: c for i, n in enumerate(graph.nodes)
                                  if i not in row_pos and (c := _plan_colred(graph, n)) is not None}
    units = _schedule(graph, plans, [r[0] for r in row_groups], colreds, gemms)
    if not row_groups and not any(u.kind in ("pw", "pwred", "gemm") for u in units):
        return runner
    try:
        codecache.compiler()
        codecache.include_dir()
    except codecache.CompilerMissing as e:
        warnings.warn(str(e), RuntimeWarning, stacklevel=2)
        return runner
    nodes = graph.nodes
    order = [p for u in units for p in u.positions]
    rank = {p: k for k, p in enumerate(order)}
    # Values read after each step (by a node or as a graph output), in the scheduled order.
    last_use = {}
    for p in order:
        for vid in nodes[p].input_ids:
            last_use[vid] = max(last_use.get(vid, -1), rank[p])
    for vid in graph.outputs:
        last_use[vid] = len(order)
    row_of = {tuple(r[0]): r for r in row_groups}
    steps, seg = [], []
    from .. import _dynamo
    logs = _dynamo.logs

    def flush():
        if seg:
            steps.append(_segment_step(graph, sorted(seg), last_use, rank))
            seg.clear()

    for u in units:
        end = max(rank[p] for p in u.positions)
        live_after = {v for v, k in last_use.items() if k > end}
        st = None
        if u.kind == "rows":
            st = _row_step(graph, row_of[tuple(u.positions)], live_after, logs, dynamic, tune)
        elif u.kind in ("pw", "pwred"):
            st = _pw_step(graph, u, plans, live_after, dynamic, logs, colreds, tune)
        elif u.kind == "gemm":
            st = _gemm_step(graph, u.positions, gemms[u.positions[0]], logs)
        if st is None:
            seg.extend(u.positions)
            continue
        flush()
        if st is not False:
            steps.append(st)
    flush()
    r = _Runner(graph, runner, steps)
    r.autotuned = tune
    r.order = order   # every node position in the scheduled order (a kernel plan runs them so)
    return r


def _segment_step(graph, seg, last_use, rank):
    nodes = graph.nodes
    produced = {v for p in seg for v in nodes[p].outputs}
    reads = []
    for p in seg:
        for v in nodes[p].input_ids:
            if v not in produced and v not in reads and not graph.value(v).is_constant:
                reads.append(v)
    end = max(rank[p] for p in seg)
    outs = [v for p in seg for v in nodes[p].outputs if last_use.get(v, -1) > end]
    st = _GraphStep()
    st.runner = graph.extract(reads, seg, outs).runner()
    st.in_ids, st.out_ids = reads, outs
    return st


"""Note [Row kernels with symbolic sizes]
A row group fuses in a graph with symbolic sizes when its row length is static and its outer dims are
the same symbolic dims for every value of the group's shape: compile_graph's caller gives each value's
shape at several sizes of the symbols (world_shapes, from AOT autograd's worlds in aot_dynamic.py), and
_dynamic_rows_ok checks every value the group's nodes read or make: the group's shape with the same
shapes in every world, [..., 1] with the same outer dims, [cols] and 0-d static. The kernel is the same
row kernel behind a flat entry point, `strata_kernel(bufs, n)` calling it with rows = n / cols (cols
baked in), so a kernel plan runs it as a flat step: the outputs are allocated like the reference input
(the call's size), which is why every output of such a kernel must have the group's full shape (a
reduction's [..., 1] output leaves the group to its nodes)."""


def _dynamic_rows_ok(graph, run, world_shapes):
    positions, _, S, _ = run
    S = tuple(S)
    sig = None
    vals = []
    for p in positions:
        n = graph.nodes[p]
        vals.extend(n.input_ids)
        vals.extend(n.outputs)
    for vid in vals:
        v = graph.value(vid)
        if v.kind != "tensor" or v.is_constant:
            continue
        shape = tuple(v.shape)
        ws = world_shapes.get(v.name)
        if ws is None:
            return False
        if shape == S:
            if ws[0] != S or any(w[-1] != S[-1] for w in ws):
                return False
            if sig is None:
                sig = ws
            elif ws != sig:
                return False
        elif shape == S[:-1] + (1,):
            if sig is not None and any(w[:-1] != g[:-1] or w[-1] != 1 for w, g in zip(ws, sig)):
                return False
        elif len(shape) <= 1:
            if any(w != shape for w in ws):
                return False
        else:
            return False
    return sig is not None


def _row_step(graph, run, live_after, logs, dynamic=False, tune=False):
    positions = run[0]
    lowered = _lower_row_group(graph, run, live_after)
    if lowered is None or not lowered[2]:
        return None
    k, in_ids, out_ids = lowered
    comment = f"strata_cpp row kernel for nodes {positions[0]}..{positions[-1]}:\n{k}"
    if dynamic:
        return _flat_row_step(graph, run, k, in_ids, out_ids, cpp.render_rows(k, comment), positions, logs)
    st = _RowStep()
    st.in_ids, st.out_ids = in_ids, out_ids
    st.ref = next(j for j, b in enumerate(k.inputs) if b.kind == "full")
    st.cols = run[2][-1]
    st.numel = _prod(run[2])
    st.outs = [(tuple(graph.value(v).shape), graph.value(v).dtype) for v in out_ids]
    st.nbuf = len(in_ids) + len(out_ids)
    st.name = kernel_name(graph, positions)

    def make_call(fn):
        return _C._compile.KernelCall(_address(fn), True, len(in_ids), st.ref, st.numel, st.cols,
                                      graph.value(out_ids[0]).dtype, [list(sh) for sh, _ in st.outs], name=st.name)
    if tune:
        source, _ = _autotune.tune_kernel(
            st.name, "rows", lambda p: cpp.render_rows(k, comment, p),
            _autotune.candidates("rows", st.numel, rows=st.numel // max(st.cols, 1)), make_call,
            lambda: _sample_inputs(graph, in_ids), _spec(graph, in_ids, out_ids), nargs=3)
    else:
        source = cpp.render_rows(k, comment)
    if logs.enabled("output_code"):
        logs._emit("output_code", f"generated row kernel ({len(positions)} nodes):\n{source}")
    st.fn = codecache.load(source, nargs=3)
    st.source = source
    st.call = make_call(st.fn)
    return st


def _flat_row_step(graph, run, k, in_ids, out_ids, source, positions, logs):
    """A row kernel behind a flat entry point (Note [Row kernels with symbolic sizes])."""
    S = tuple(run[2])
    if any(tuple(graph.value(v).shape) != S for v in out_ids):
        return None
    sig = 'extern "C" void strata_kernel(void* const* bufs, int64_t rows, int64_t cols)'
    if sig not in source:
        return None
    cols = S[-1]
    source = source.replace(sig, "static void strata_row_kernel(void* const* bufs, int64_t rows, int64_t cols)")
    source += (f'\nextern "C" void strata_kernel(void* const* bufs, int64_t n) {{\n'
               f'  strata_row_kernel(bufs, n / {cols}, {cols});\n}}\n')
    if logs.enabled("output_code"):
        logs._emit("output_code", f"generated row kernel, any number of rows ({len(positions)} nodes):\n{source}")
    st = _KernelStep()
    st.fn = codecache.load(source)
    st.name = kernel_name(graph, positions)
    st.in_ids, st.out_ids = in_ids, out_ids
    st.nbuf = len(in_ids) + len(out_ids)
    st.source = source
    vals = [graph.value(v) for v in out_ids]
    st.dtype = vals[0].dtype
    st.shape = S
    dts = [v.dtype for v in vals]
    st.ref = next(j for j, b in enumerate(k.inputs) if b.kind == "full")
    st.numel = None
    st.call = _C._compile.KernelCall(_address(st.fn), False, len(in_ids), st.ref, -1, 1, st.dtype,
                                     [[] for _ in out_ids], dts, name=st.name)
    st.extra = (dts, None, False)
    return st


def _spec(graph, in_ids, out_ids):
    """The sizes, strides and dtypes of a kernel's inputs and outputs (part of an autotune key)."""
    return [(tuple(graph.value(v).shape), tuple(graph.value(v).stride), graph.value(v).dtype)
            for v in list(in_ids) + list(out_ids)]


def _sample_inputs(graph, in_ids, bounds=None):
    """Fresh random tensors with the sizes, strides and dtypes of in_ids (bounds: input position ->
    exclusive upper bound of the integer values, for gather indices)."""
    bounds = bounds or {}
    return [_autotune.random_input(graph.value(v).shape, graph.value(v).stride, graph.value(v).dtype, bounds.get(j))
            for j, v in enumerate(in_ids)]


def _pw_step(graph, unit, plans, live_after, dynamic, logs, colreds=None, tune=False):
    positions = sorted(unit.positions)
    red = None
    if unit.kind == "pwred":
        red_pos = positions[-1]
        positions = positions[:-1]
        red = colreds[red_pos]
    lowered = _lower_pw_group(graph, positions, plans, live_after, dynamic, red is not None)
    if lowered is None:
        return None
    k, in_ids, out_ids, var_of = lowered
    if red is not None:
        x, op, R, K, outer = red["x"], red["op"], red["R"], red["K"], red["outer"]
        out_vid = graph.nodes[red_pos].outputs[0]
        if x.id not in var_of or not k.flat:
            return None
        v = graph.value(out_vid)
        k.outputs.append(PwBuffer(f"out{len(k.outputs)}", _dtype_name(v.dtype), (1,)))
        out_ids = out_ids + [out_vid]
        k.reduce = (op, var_of[x.id], R, K, outer, len(k.outputs) - 1)
        positions = positions + [red_pos]
    if not out_ids:
        return False  # nothing it computes is read: the nodes are dead
    comment = f"strata_cpp kernel for nodes {', '.join(map(str, positions))}:\n{k}"
    render = (lambda p: cpp.render_columns(k, comment, p)) if red is not None else \
        (lambda p: cpp.render_pointwise(k, comment, p))
    st = _KernelStep()
    # The kernel's IR, for a variant that writes outputs into inputs (reinplace.py); flat kernels only.
    st.kernel, st.comment = (k, comment) if k.flat and red is None else (None, None)
    st.name = kernel_name(graph, positions)
    st.in_ids, st.out_ids = in_ids, out_ids
    st.nbuf = len(in_ids) + len(out_ids)
    vals = [graph.value(v) for v in out_ids]
    st.dtype = vals[0].dtype
    st.shape = tuple(vals[0].shape)
    dts = [v.dtype for v in vals]
    if k.flat and red is None:
        # The input whose sizes the outputs take; with only 0-d inputs the outputs are 0-d too (input 0).
        st.ref = next((j for j, b in enumerate(k.inputs) if any(b.strides)), 0)
        st.numel = None if dynamic else _prod(st.shape)

        def make_call(fn):
            return _C._compile.KernelCall(_address(fn), False, len(in_ids), st.ref,
                                          -1 if st.numel is None else st.numel, 1, st.dtype,
                                          [[] for _ in out_ids], dts, name=st.name)
        st.extra = (dts, None, False)
    else:
        ins = [graph.value(v) for v in in_ids]
        st.ref = 0
        st.numel = _prod(st.shape) if red is None else red["R"] * red["K"] * red["outer"]
        geometry = ([list(v.shape) for v in vals], [list(v.shape) for v in ins], [list(v.stride) for v in ins],
                    [list(v.stride) for v in vals])
        status = any(b.rows for b in k.inputs)

        def make_call(fn):
            return _C._compile.KernelCall(_address(fn), False, len(in_ids), 0, st.numel, 1, st.dtype,
                                          geometry[0], dts, geometry[1], geometry[2], geometry[3], status,
                                          name=st.name)
        st.extra = (dts, geometry, status)
    if tune and st.numel is not None:
        if red is not None:
            kind, info = "columns", {"op": red["op"], "w": 1024 // (8 if k.outputs[-1].dtype == "float64" else 4)}
        elif cpp.is_tiled(k):
            kind, info = "tiled", {}
        else:
            kind, info = "pointwise", {"inner": st.numel if k.flat else k.sizes[-1] if k.sizes else 1}
        # Gather indices: random values inside the table.
        loads = {s.var: s.buf for s in k.body if isinstance(s, PwLoad)}
        bounds = {loads[s.index]: k.inputs[s.buf].rows for s in k.body if isinstance(s, PwGather)}
        source, _ = _autotune.tune_kernel(st.name, kind, render, _autotune.candidates(kind, st.numel, **info),
                                          make_call, lambda: _sample_inputs(graph, in_ids, bounds),
                                          _spec(graph, in_ids, out_ids))
    else:
        source = render(None)
    if logs.enabled("output_code"):
        logs._emit("output_code", f"generated kernel ({len(positions)} nodes):\n{source}")
    st.fn = codecache.load(source)
    st.source = source
    st.call = make_call(st.fn)
    return st


def _prod(shape):
    n = 1
    for s in shape:
        n *= s
    return n


class _Runner:
    """Runs the steps: kernels through their KernelCall (Note [Calling generated kernels] in
    python/src/codegen_bind.cpp), other segments through their runners. A graph that is one kernel
    over its inputs in order is run by that kernel's call alone."""

    def __init__(self, graph, fallback, steps):
        self.order = None
        self.fallback = fallback
        self.steps = steps
        self.inputs = list(graph.inputs)
        self.outputs = list(graph.outputs)
        self.constants = {v: graph.value(v).constant for v in graph.constants}
        self.kernel_sources = [s.source for s in steps if isinstance(s, (_KernelStep, _RowStep))]
        self.single = None
        if (len(steps) == 1 and not isinstance(steps[0], _GraphStep) and steps[0].in_ids == self.inputs
                and steps[0].out_ids == self.outputs):
            self.single = steps[0].call

    def __call__(self, *args):
        if self.single is not None:
            outs = self.single(*args)
            return self.fallback(*args) if outs is None else outs
        env = dict(self.constants)
        env.update(zip(self.inputs, args))
        for st in self.steps:
            if isinstance(st, _GraphStep):
                env.update(zip(st.out_ids, st.runner(*[env[v] for v in st.in_ids])))
            else:
                outs = st.call(*[env[v] for v in st.in_ids])
                if outs is None:
                    return self.fallback(*args)
                env.update(zip(st.out_ids, outs))
        return tuple(env[v] for v in self.outputs)


# ---- row groups (Note [Row kernels] in ir.py) -------------------------------------------------------
"""Note [Row groups]
A row group is a run of consecutive nodes over one contiguous float tensor shape S (last dim C > 1,
rows = numel / C) with at least one row op: sum / mean / amax / amin over the last dim (keepdim or
not), softmax over the last dim, layer_norm over the last dim (weight and bias of shape [C] or none).
Its other members are pointwise nodes (ir.LOWERINGS) whose result has shape S (elem level), reading
operands of shape S, [..., 1] (a row value broadcast along the row) or 0-d, or whose result is a row
value ([..., 1] or the keepdim=False shape) computed from row values. softmax and layer_norm are
lowered to the same primitives (reductions, row values, elem values) in eager's accumulation order."""

from .ir import Cast, Functor, Reduce, RowKernel  # noqa: E402

_ROW_REDUCE = {"sum": "sum", "mean": "mean", "amax": "amax", "amin": "amin"}


def _last_dim(dim, nd):
    if isinstance(dim, (list, tuple)):
        if len(dim) != 1:
            return False
        dim = dim[0]
    return isinstance(dim, int) and not isinstance(dim, bool) and dim in (-1, nd - 1)


def _tensor_ok(a, ct):
    return (_is_tensor_value(a) and str(a.device) == "cpu" and _DTYPES.get(_dtype_name(a.dtype)) == ct
            and _contiguous(a.shape, a.stride))


def _plan_row_node(g, node):
    """(kind, ct, shape S or output shape, info) for a node a row group can hold, else None."""
    if node.has_side_effects or len(node.outputs) != 1 or node.list_return:
        return None
    args = list(node.args)
    v = g.value(node.outputs[0])
    if v.kind != "tensor" or str(v.device) != "cpu":
        return None
    ct = _DTYPES.get(_dtype_name(v.dtype))
    if ct is None:
        return None
    op = node.op
    if op in _ROW_REDUCE:
        x = args[0]
        if not _tensor_ok(x, ct) or len(x.shape) == 0 or not _last_dim(args[1], len(x.shape)):
            return None
        if op in ("sum", "mean") and args[3] is not None:
            return None
        return "reduce", ct, tuple(x.shape), (x, _ROW_REDUCE[op])
    if op == "softmax":
        x = args[0]
        if not _tensor_ok(x, ct) or len(x.shape) == 0 or args[2] is not None or not _last_dim(args[1], len(x.shape)):
            return None
        return "softmax", ct, tuple(x.shape), (x,)
    if op == "log_softmax":
        x = args[0]
        if not _tensor_ok(x, ct) or len(x.shape) == 0 or args[2] is not None or not _last_dim(args[1], len(x.shape)):
            return None
        return "log_softmax", ct, tuple(x.shape), (x,)
    if op in ("layer_norm", "rms_norm"):
        if op == "layer_norm":
            x, ns, wt, bs, eps = args[:5]
        else:
            (x, ns, wt, eps), bs = args[:4], None
            if eps is None:  # nn_norm.cpp finfo_eps
                eps = 2.0 ** -23 if ct == "float" else 2.0 ** -52
        if not _tensor_ok(x, ct) or len(x.shape) == 0 or list(ns) != [x.shape[-1]] or not _num(eps):
            return None
        for t in (wt, bs):
            if t is not None and not (_tensor_ok(t, ct) and tuple(t.shape) == (x.shape[-1],)):
                return None
        return op, ct, tuple(x.shape), (x, wt, bs, float(eps))
    if op.split(".")[0] in ("var", "std"):
        # var_mean_core (ops/reduction.cpp): mean(keepdim), x - mean, its square, sum, / max(0, n - correction),
        # sqrt for std.
        named = dict(zip(node.arg_names, args))
        x = named.get("self")
        if "unbiased" in named:
            corr = 1.0 if named["unbiased"] else 0.0
        else:
            corr = named.get("correction")
            corr = 1.0 if corr is None else corr
        if (not _num(corr) or not _tensor_ok(x, ct) or len(x.shape) == 0 or "dim" not in named
                or not _last_dim(named["dim"], len(x.shape))):
            return None
        return "var", ct, tuple(x.shape), (x, float(corr), op.startswith("std"))
    f = _fusable(node)
    if f is None:
        return None
    _, lower, _ = f
    if not _contiguous(v.shape, v.stride):
        return None
    r = _lower_operands(lower, args, ct)
    if r is None:
        return None
    return "pw", ct, tuple(v.shape), r


def _num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _row_shapes(S):
    return {S[:-1] + (1,), S[:-1]}


def _pw_fits(p, S):
    """A pointwise plan at elem level (result S; operands S, [..., 1] or 0-d) or row level."""
    shape = p[2]
    shapes = [tuple(o.shape) for o in p[3][1] if _is_tensor_value(o)]
    if shape == S:
        return all(s in (S, S[:-1] + (1,), ()) for s in shapes)
    if shape in _row_shapes(S):
        return all(s in (shape, ()) for s in shapes)
    return False


def _row_groups(g):
    """[(positions, ct, S, [plan])] with at least one row op and at least two nodes (or one softmax /
    layer_norm node)."""
    runs, cur = [], None
    for i, n in enumerate(g.nodes):
        p = _plan_row_node(g, n)
        if p is not None:
            kind, ct, shape, _ = p
            if kind == "pw":
                if cur is not None and ct == cur[1] and _pw_fits(p, cur[2]):
                    cur[0].append(i)
                    cur[3].append(p)
                    continue
            elif cur is not None and ct == cur[1] and shape == cur[2]:
                cur[0].append(i)
                cur[3].append(p)
                continue
        if cur is not None:
            runs.append(cur)
        cur = None
        if p is not None and p[2] and p[2][-1] > 1 and (p[0] != "pw" or _pw_fits(p, p[2])):
            cur = ([i], p[1], p[2], [p])
    if cur is not None:
        runs.append(cur)
    out = []
    for r in runs:
        # Trim trailing/leading pointwise nodes that only make sense with a row op; need one row op.
        # softmax and layer_norm alone are kernels too (eager's loops, one fewer dispatch).
        if any(p[0] != "pw" for p in r[3]) and (len(r[0]) >= MIN_GROUP or r[3][0][0] in
                                                  ("softmax", "log_softmax", "layer_norm", "rms_norm", "var")):
            out.append(r)
    return out


def _lower_row_group(g, run, live_after):
    """(RowKernel, input ids, output ids) for one row group."""
    positions, ct, S, plans = run
    k = RowKernel(dtype=ct, cols=S[-1])
    var_of, in_ids = {}, []
    names = iter(range(1 << 30))

    def new(level, ctype=None):
        v = f"v{next(names)}"
        k.level[v] = level
        if ctype and ctype != ct:
            k.ctype[v] = ctype
        return v

    def const(x, ctype=None):
        v = new("row", ctype)
        k.body.append(Const(v, x))
        return v

    def load(a, col=False):
        if a.id in var_of:
            return var_of[a.id]
        shape = tuple(a.shape)
        kind = "col" if col else "full" if shape == S else "scalar" if shape == () and len(S) > 1 else "row"
        dt = "bool" if _dtype_name(a.dtype) == "bool" else ct
        k.inputs.append(Buffer(f"in{len(k.inputs)}", dt, kind=kind))
        in_ids.append(a.id)
        v = new("elem" if kind in ("full", "col") else "row")
        k.body.append(Load(v, len(k.inputs) - 1))
        var_of[a.id] = v
        return v

    def compute(functor, args, node, ctype=None):
        lvl = "elem" if any(k.level[a] == "elem" for a in args) else "row"
        v = new(lvl, ctype)
        k.body.append(Compute(v, functor, list(args), node, g.nodes[pos].source or ""))
        return v

    for pos, p in zip(positions, plans):
        node = g.nodes[pos]
        out = node.outputs[0]
        label = f"{node.op} (node {pos}: {g.value(out).name})"
        kind = p[0]
        if kind == "pw":
            functor, operands = p[3]
            args = [const(o) if isinstance(o, float) else load(o) for o in operands]
            var_of[out] = compute(functor, args, label)
        elif kind == "reduce":
            x, op = p[3]
            v = new("row")
            k.body.append(Reduce(v, op, load(x), ct, label))
            var_of[out] = v
        elif kind == "softmax":
            # softmax_kernels.cpp softmax_rows: max (16 lanes), shift, sum of vexp(x - shift) (omp simd),
            # inv = 1 / sum, y = vexp(x - shift) * inv.
            x = load(p[3][0])
            m = new("row")
            k.body.append(Reduce(m, "softmax_max", x, ct, label))
            shift = compute(Functor("codegen::SoftmaxShift"), [m], label)
            e = compute(Functor("codegen::VExp"), [compute(Functor("Sub"), [x, shift], label)], label)
            s = new("row")
            k.body.append(Reduce(s, "simd_sum", e, ct, label))
            inv = compute(Functor("Div"), [const(1.0), s], label)
            var_of[out] = compute(Functor("Mul"), [e, inv], label)
        elif kind == "log_softmax":
            # softmax_kernels.cpp softmax_rows(log): max, shift, sum of vexp(x - shift) (omp simd), ls = log(sum),
            # y = (x - shift) - ls.
            x = load(p[3][0])
            m = new("row")
            k.body.append(Reduce(m, "softmax_max", x, ct, label))
            shift = compute(Functor("codegen::SoftmaxShift"), [m], label)
            d = compute(Functor("Sub"), [x, shift], label)
            s = new("row")
            k.body.append(Reduce(s, "simd_sum", compute(Functor("codegen::VExp"), [d], label), ct, label))
            var_of[out] = compute(Functor("Sub"), [d, compute(Functor("Log"), [s], label)], label)
        elif kind == "var":
            # var_mean_core: the mean as eager's mean, the squared deviations summed as eager's sum.
            xa, corr, take_sqrt = p[3]
            x = load(xa)
            m = new("row")
            k.body.append(Reduce(m, "mean", x, ct, label))
            dev = compute(Functor("Sub"), [x, m], label)
            s = new("row")
            k.body.append(Reduce(s, "sum", compute(Functor("Mul"), [dev, dev], label), ct, label))
            v = compute(Functor("Div"), [s, const(max(0.0, float(S[-1]) - corr))], label)
            var_of[out] = compute(Functor("Sqrt"), [v], label) if take_sqrt else v
        else:
            # nn_kernels.cpp row_norm: sums in double (omp simd), var from a second pass (FMA-contracted),
            # rstd = T(1 / sqrt(var + eps)), y = (x - T(mean)) * rstd [* w] [+ b], contracted as eager's.
            # rms_norm: the same with mean 0 (no first pass).
            xa, wt, bs, eps = p[3]
            x = load(xa)
            d = const(float(S[-1]), "double")
            if kind == "rms_norm":
                mean = const(0.0, "double")
            else:
                s = new("row", "double")
                k.body.append(Reduce(s, "simd_sum", x, "double", label))
                mean = compute(Functor("Div"), [s, d], label, "double")
            s2 = new("row", "double")
            k.body.append(Reduce(s2, "simd_sqdev", x, "double", label, extra=mean))
            var = compute(Functor("Div"), [s2, d], label, "double")
            r = compute(Functor("Div"), [const(1.0, "double"),
                                         compute(Functor("Sqrt"), [compute(Functor("Add"), [var, const(eps, "double")],
                                                                           label, "double")], label, "double")],
                        label, "double")
            rstd = new("row")
            k.body.append(Cast(rstd, r, ct))
            mt = new("row")
            k.body.append(Cast(mt, mean, ct))
            c = compute(Functor("Sub"), [x, mt], label)
            if wt is not None and bs is not None:
                y = compute(Functor("codegen::Fma"), [compute(Functor("Mul"), [c, rstd], label), load(wt, True),
                                                      load(bs, True)], label)
            elif wt is not None:
                y = compute(Functor("Mul"), [compute(Functor("Mul"), [c, rstd], label), load(wt, True)], label)
            elif bs is not None:
                y = compute(Functor("codegen::Fma"), [c, rstd, load(bs, True)], label)
            else:
                y = compute(Functor("Mul"), [c, rstd], label)
            var_of[out] = y
    out_ids = []
    for pos in positions:
        vid = g.nodes[pos].outputs[0]
        if vid in live_after:
            lvl = k.level[var_of[vid]]
            k.outputs.append(Buffer(f"out{len(k.outputs)}", ct, kind="full" if lvl == "elem" else "row"))
            out_ids.append(vid)
            k.body.append(Store(len(k.outputs) - 1, var_of[vid]))
    if not any(b.kind == "full" for b in k.inputs):
        return None
    return k, in_ids, out_ids


# ---- general pointwise groups (Note [Pointwise groups]) ---------------------------------------------
"""Note [Pointwise groups, general form]
A node is a pointwise candidate when its op has a general lowering (ir.GENERAL_LOWERINGS), out= is
not given, it runs on the CPU, and its result and tensor operands have dtypes the renderer knows
(bool, integers, float16, bfloat16, float32, float64). Operands may have any strides and any shape
that broadcasts to the result's (eager already checked that); numbers are converted to the op's
compute dtype by eager's own cast. The compute dtype follows eager's rule for the op (ir.DTYPE_RULE).
A graph with symbolic sizes takes only the flat form (every operand contiguous with the result's
shape, or 0-d), whose kernel takes the element count at run time.

Scheduling (_schedule): candidates with the same result shape join one group even when other nodes
sit between them, as long as the group stays a single step of a valid order: a node may join group
G unless one of its operands is made by a node (or another group) that itself depends on G. So
independent nodes are moved out of the way and two consumers of one value (siblings) share a
kernel. Order constraints beyond data: nodes with side effects keep their order among themselves,
and a candidate that reads a value in the alias class of a value some side-effecting node touches
(an in-place write, out=, random state) stays on its side of that node. The steps then run in a
topological order that keeps the original order where it can."""

from .ir import (CTYPES, DTYPE_RULE, FLOAT_ONLY, GENERAL_LOWERINGS, PwBuffer, PwCompute,  # noqa: E402
                 PwConst, PwGather, PwKernel, PwLoad, PwStore)


def _eager_convert(x, dtype_name):
    """The Python number x as eager's cast to dtype_name gives it (a wrapped number: bool, int64 or
    float64, converted like TensorIterator converts inputs)."""
    src = strata.bool if isinstance(x, bool) else strata.int64 if isinstance(x, int) else strata.float64
    t = strata.tensor(x, dtype=src).to(getattr(strata, dtype_name))
    return t.item()


def _meta_of(a):
    if _is_tensor_value(a):
        return strata.empty(tuple(a.shape), dtype=a.dtype, device="meta")
    return a


def _broadcast_strides(a, shape):
    """a's element strides over shape (0 along broadcast dims), or None if a does not broadcast."""
    sh, st = tuple(a.shape), tuple(a.stride)
    off = len(shape) - len(sh)
    if off < 0:
        return None
    out = [0] * len(shape)
    for d, (s, t) in enumerate(zip(sh, st)):
        if s == shape[off + d]:
            out[off + d] = t if s != 1 else 0
        elif s != 1:
            return None
    return tuple(out)


def _plan_gather(g, node, dynamic):
    """embedding(weight [V, D], indices) as a gather its consumers read in their own loop: indices
    int64/int32 and contiguous, D > 1, a contiguous result (its last dim is the kernel's innermost)."""
    args = list(node.args)
    weight, idx = args[0], args[1]
    v = g.value(node.outputs[0])
    if dynamic or node.has_side_effects or len(node.outputs) != 1 or v.kind != "tensor" or str(v.device) != "cpu":
        return None
    if not (_is_tensor_value(weight) and _is_tensor_value(idx)) or len(weight.shape) != 2 or weight.shape[1] < 2:
        return None
    wdt, idt = _dtype_name(weight.dtype), _dtype_name(idx.dtype)
    if wdt not in CTYPES or idt not in ("int64", "int32") or str(weight.device) != "cpu" or str(idx.device) != "cpu":
        return None
    shape = tuple(v.shape)
    if not _contiguous(idx.shape, idx.stride) or not _contiguous(shape, v.stride) or shape != tuple(idx.shape) + (weight.shape[1],):
        return None
    return {"dtype": wdt, "shape": shape, "functor": Functor("Gather"), "operands": [idx, weight], "cdtype": wdt,
            "flat": False}


def _plan_pw(g, node, dynamic):
    """{"dtype", "shape", "functor", "operands", "cdtype", "flat"} for a pointwise candidate, else None."""
    if node.op == "embedding":
        return _plan_gather(g, node, dynamic)
    lower = GENERAL_LOWERINGS.get(node.op)
    if lower is None or node.has_side_effects or len(node.outputs) != 1 or node.list_return:
        return None
    args = list(node.args)
    if args and node.arg_names[-1] == "out" and args[-1] is not None:
        return None
    v = g.value(node.outputs[0])
    if v.kind != "tensor" or str(v.device) != "cpu":
        return None
    odt = _dtype_name(v.dtype)
    if odt not in CTYPES:
        return None
    r = lower(args, "double" if odt == "float64" else "float")
    if r is None:
        return None
    functor, positions = r
    operands = [args[p] for p in positions]
    for o in operands:
        if _is_tensor_value(o):
            if str(o.device) != "cpu" or _dtype_name(o.dtype) not in CTYPES:
                return None
        elif not isinstance(o, (bool, int, float)):
            return None
    rule = DTYPE_RULE.get(node.op, "out")
    if rule == "out":
        cdt = odt
    elif rule == "common":
        try:
            cdt = _dtype_name(strata.result_type(*[_meta_of(o) for o in operands]))
        except Exception:
            return None
    else:
        if not _is_tensor_value(operands[0]):
            return None
        cdt = _dtype_name(operands[0].dtype)
    if cdt not in CTYPES:
        return None
    if functor.name in FLOAT_ONLY and cdt not in ("float32", "float64", "float16", "bfloat16"):
        return None
    if functor.name == "Pow" and cdt not in ("float32", "float64", "float16", "bfloat16"):
        return None  # integer pow checks negative exponents in eager
    if functor.name == "Select" and not (_is_tensor_value(operands[0]) and _dtype_name(operands[0].dtype) == "bool"):
        return None
    shape = tuple(v.shape)
    strides = []
    for o in operands:
        if _is_tensor_value(o):
            st = _broadcast_strides(o, shape)
            if st is None:
                return None
            strides.append(st)
    flat = _contiguous(shape, v.stride) and all(
        not _is_tensor_value(o) or len(o.shape) == 0 or (tuple(o.shape) == shape and _contiguous(o.shape, o.stride))
        for o in operands)
    if dynamic and not flat:
        return None
    return {"dtype": odt, "shape": shape, "functor": functor, "operands": operands, "cdtype": cdt, "flat": flat}


class _Unit:
    __slots__ = ("kind", "positions", "shape", "id")

    def __init__(self, kind, positions, shape=None):
        self.kind, self.positions, self.shape = kind, positions, shape


def _alias_classes(g, plans):
    """Union-find over values: the inputs and outputs of every node that is not a pointwise candidate
    share a class (it may return a view or write into an operand). Returns value -> root."""
    parent = {}

    def find(v):
        while parent.get(v, v) != v:
            parent[v] = parent.get(parent[v], parent[v])
            v = parent[v]
        return v

    for i, n in enumerate(g.nodes):
        if i in plans:
            continue
        vals = [v for v in list(n.input_ids) + list(n.outputs) if g.value(v).kind == "tensor"]
        for a, b in zip(vals, vals[1:]):
            ra, rb = find(a), find(b)
            if ra != rb:
                parent[ra] = rb
    return find


def _may_join(nodes, grp, i, touched, blockers):
    """Note [Horizontal joins hold memory]
    A group runs at its earliest position, so a node that joins it is computed there, not where the
    graph has it. When the node reads a value the group makes or reads, that changes little; when it
    shares nothing with the group (a horizontal join), its result is made early and held until its
    readers run: two recomputed GELUs of different blocks in a backward graph became one kernel that
    held the later block's 4 MB activation across the whole first block's backward (+4.2 MB on the
    char transformer's training step). Such a join is allowed only across pointwise candidates and
    views, where the node moves past no step that allocates on its own.
    touched[group id]: the values the group's nodes read or make; blockers[q]: how many nodes before
    position q are neither pointwise candidates nor views (so each test is O(the node's inputs))."""
    seen = touched[grp.id]
    if any(v in seen for v in nodes[i].input_ids):
        return True
    return blockers[i] == blockers[grp.positions[-1] + 1]


def _touch(touched, grp, node):
    touched.setdefault(grp.id, set()).update(node.input_ids, node.outputs)


def _schedule(g, plans, row_runs, colreds=None, gemms=None):
    """Units (pointwise groups, row groups, single nodes) in a valid run order (Note [Pointwise
    groups, general form])."""
    nodes = g.nodes
    producer = {}
    for i, n in enumerate(nodes):
        for v in n.outputs:
            producer[v] = i
    # Extra order edges: side-effecting nodes in sequence; candidates around the side-effecting nodes
    # that touch their operands' alias class.
    extra = {i: set() for i in range(len(nodes))}
    effects = [i for i, n in enumerate(nodes) if n.has_side_effects]
    for a, b in zip(effects, effects[1:]):
        extra[b].add(a)
    if effects:
        find = _alias_classes(g, plans)
        touched = {}
        for i in effects:
            for v in list(nodes[i].input_ids) + list(nodes[i].outputs):
                touched.setdefault(find(v), []).append(i)
        for i in list(plans) + [q for gi, gp in (gemms or {}).items() for q in (gi, gp["epi"]) if q is not None]:
            for v in nodes[i].input_ids:
                for m in touched.get(find(v), ()):
                    if m < i:
                        extra[i].add(m)
                    else:
                        extra[m].add(i)
    unit_of, units = {}, []

    def new_unit(kind, positions, shape=None):
        u = _Unit(kind, list(positions), shape)
        u.id = len(units)
        units.append(u)
        for p in positions:
            unit_of[p] = u
        return u

    def deps_of_pos(p):
        for v in nodes[p].input_ids:
            q = producer.get(v)
            if q is not None:
                yield q
        yield from extra[p]

    def depends_on(u, target):
        """Whether unit u (transitively) depends on unit target."""
        seen, stack = {u.id}, [u]
        while stack:
            w = stack.pop()
            for p in w.positions:
                for q in deps_of_pos(p):
                    x = unit_of.get(q)
                    if x is None or x.id in seen:
                        continue
                    if x is target:
                        return True
                    seen.add(x.id)
                    stack.append(x)
        return False

    view_flag = _C._op_flags()["view"]
    blockers = [0]
    for q, n in enumerate(nodes):
        blockers.append(blockers[-1] + (0 if q in plans or n.flags & view_flag else 1))
    touched = {}
    row_start = {r[0]: r for r in row_runs}
    gemms = gemms or {}
    epilogues = {p["epi"] for p in gemms.values()}
    open_groups = []
    i = 0
    while i < len(nodes):
        if i in row_start:
            new_unit("rows", row_start[i])
            i = row_start[i][-1] + 1
            continue
        if i in gemms:
            new_unit("gemm", [i] if gemms[i]["epi"] is None else [i, gemms[i]["epi"]])
            i += 1
            continue
        if i in epilogues:
            i += 1
            continue
        p = plans.get(i)
        placed = False
        c = (colreds or {}).get(i)
        if c is not None:
            # Note [Column reductions]: closes the flat group of its input's shape that made the input.
            grp = unit_of.get(producer.get(c["x"].id))
            if (grp is not None and grp.kind == "pw" and grp in open_groups and grp.shape == c["shape"]
                    and all(plans[m]["flat"] for m in grp.positions) and not extra[i]):
                grp.positions.append(i)
                grp.kind = "pwred"
                unit_of[i] = grp
                open_groups.remove(grp)
                placed = True
        elif p is not None:
            tried = 0
            for grp in reversed(open_groups):
                if grp.shape != p["shape"]:
                    continue
                # The most recent groups of this shape only: each try walks the units the node's
                # operands depend on, and an old group rarely admits a late node.
                tried += 1
                if tried > MAX_TRIES:
                    break
                ok = _may_join(nodes, grp, i, touched, blockers)
                for q in (deps_of_pos(i) if ok else ()):
                    x = unit_of.get(q)
                    if x is None or x is grp:
                        continue
                    if depends_on(x, grp):
                        ok = False
                        break
                if ok:
                    grp.positions.append(i)
                    unit_of[i] = grp
                    _touch(touched, grp, nodes[i])
                    placed = True
                    break
            if not placed:
                open_groups.append(new_unit("pw", [i], p["shape"]))
                _touch(touched, open_groups[-1], nodes[i])
                placed = True
        if not placed:
            new_unit("node", [i])
        i += 1
    # A group of one node gains nothing: it runs as a plain node.
    for u in units:
        if u.kind in ("pw", "pwred") and len(u.positions) < MIN_GROUP:
            u.kind = "node"
    # Kahn's algorithm over units, the earliest first position first.
    import heapq
    indeg, succ = {u.id: 0 for u in units}, {u.id: set() for u in units}
    for u in units:
        for p in u.positions:
            for q in deps_of_pos(p):
                x = unit_of.get(q)
                if x is not None and x is not u and u.id not in succ[x.id]:
                    succ[x.id].add(u.id)
                    indeg[u.id] += 1
    heap = [(min(u.positions), u.id) for u in units if indeg[u.id] == 0]
    heapq.heapify(heap)
    out = []
    while heap:
        _, uid = heapq.heappop(heap)
        u = units[uid]
        out.append(u)
        for s in succ[uid]:
            indeg[s] -= 1
            if indeg[s] == 0:
                heapq.heappush(heap, (min(units[s].positions), s))
    if len(out) != len(units):  # cannot happen when the merge checks hold; run the graph as captured
        return [_Unit("node", [i]) for i in range(len(nodes))]
    return out


def _geometry(shape, out_strides, buf_strides):
    """(sizes, [strides per buffer]) over the dims ordered by the first output's strides (its
    innermost dim last) with size-1 dims dropped and dims merged where every buffer allows."""
    dims = [d for d in range(len(shape)) if shape[d] != 1]
    dims.sort(key=lambda d: -abs(out_strides[d]))
    sizes = [shape[d] for d in dims]
    sts = [[st[d] for d in dims] for st in buf_strides]
    k = len(sizes) - 1
    while k > 0:
        if all(st[k - 1] == st[k] * sizes[k] for st in sts):
            sizes[k - 1] *= sizes[k]
            for st in sts:
                st[k - 1] = st[k]
            del sizes[k]
            for st in sts:
                del st[k]
        k -= 1
    return tuple(sizes), [tuple(st) for st in sts]


def _lower_pw_group(g, positions, plans, live_after, dynamic, reduced=False):
    """(PwKernel, input ids, output ids, value id -> kernel var) for a pointwise group, or None.
    reduced: a column reduction follows (the kernel may have no output of its own)."""
    shape = plans[positions[0]]["shape"]
    flat = all(plans[p]["flat"] for p in positions)
    k = PwKernel(flat=flat)
    var_of, dtype_of, in_ids, in_vals = {}, {}, [], []
    produced = {g.nodes[p].outputs[0] for p in positions}
    for p in positions:
        plan = plans[p]
        node = g.nodes[p]
        names = []
        if plan["functor"].name == "Gather":
            idx, weight = plan["operands"]
            if idx.id in var_of and not var_of[idx.id].startswith("x"):
                return None  # indices computed in the kernel: the bounds check reads a buffer
            if idx.id not in var_of:
                b = len(k.inputs)
                k.inputs.append(PwBuffer(f"in{b}", _dtype_name(idx.dtype), tuple(idx.stride) + (0,),
                                         count=_prod(idx.shape)))
                in_ids.append(idx.id)
                in_vals.append(idx)
                var_of[idx.id] = f"x{b}"
                dtype_of[f"x{b}"] = _dtype_name(idx.dtype)
                k.body.append(PwLoad(var_of[idx.id], b))
            b = len(k.inputs)
            k.inputs.append(PwBuffer(f"in{b}", _dtype_name(weight.dtype), (0,) * (len(shape) - 1) + (weight.stride[1],),
                                     rows=weight.shape[0], row_stride=weight.stride[0]))
            in_ids.append(weight.id)
            in_vals.append(weight)
            out = node.outputs[0]
            var = f"t{len(var_of)}"
            var_of[out] = var
            dtype_of[var] = plan["dtype"]
            k.body.append(PwGather(var, b, var_of[idx.id], f"{node.op} (node {p}: {g.value(out).name})"))
            continue
        for o in plan["operands"]:
            if not _is_tensor_value(o):
                var = f"c{len(k.body)}"
                # where's condition is never a number (checked); other numbers take the compute dtype.
                try:
                    value = _eager_convert(o, plan["cdtype"])
                except Exception:
                    return None
                k.body.append(PwConst(var, value, plan["cdtype"]))
                dtype_of[var] = plan["cdtype"]
                names.append(var)
                continue
            if o.id not in var_of:
                b = len(k.inputs)
                k.inputs.append(PwBuffer(f"in{b}", _dtype_name(o.dtype), _broadcast_strides(o, shape)))
                in_ids.append(o.id)
                in_vals.append(o)
                var_of[o.id] = f"x{b}"
                dtype_of[f"x{b}"] = _dtype_name(o.dtype)
                k.body.append(PwLoad(var_of[o.id], b))
            names.append(var_of[o.id])
        out = node.outputs[0]
        var = f"t{len(var_of)}"
        var_of[out] = var
        dtype_of[var] = plan["dtype"]
        cdt = dtype_of[names[0]] if plan["functor"].name == "Cast" else plan["cdtype"]
        k.body.append(PwCompute(var, plan["functor"], names, cdt, plan["dtype"],
                                f"{node.op} (node {p}: {g.value(out).name})", node.source or ""))
    out_ids = []
    for p in positions:
        vid = g.nodes[p].outputs[0]
        if vid in live_after:
            v = g.value(vid)
            k.outputs.append(PwBuffer(f"out{len(k.outputs)}", _dtype_name(v.dtype), tuple(v.stride)))
            out_ids.append(vid)
            k.body.append(PwStore(len(k.outputs) - 1, var_of[vid]))
    if not in_ids or all(len(v.shape) == 0 for v in in_vals) and len(shape) != 0:
        return None  # nothing full-size to take the size from: leave to eager
    if flat:
        for b in k.inputs + k.outputs:
            b.strides = (1,) if b in k.outputs or any(b.strides) else (0,)
        k.sizes = (None,)
    elif out_ids or reduced:
        sizes, sts = _geometry(shape, k.outputs[0].strides, [b.strides for b in k.inputs + k.outputs])
        k.sizes = sizes
        for b, st in zip(k.inputs + k.outputs, sts):
            b.strides = st
        # A gather's column must be the innermost loop index (the table's only nonzero stride).
        if any(b.rows and (not b.strides or any(b.strides[:-1]) or not b.strides[-1]) for b in k.inputs):
            return None
    return k, in_ids, out_ids, var_of


"""Note [Column reductions]
sum / mean / amax / amin over one dim d that is not the last, of a contiguous float32/float64
input S with R = S[d] > 1 rows and K = prod(S[d+1:]) > 1 columns, close the flat pointwise group
that produced the input: one kernel computes the producers and reduces them without writing the
input to memory. The loop is the reduction engine's column loop (reduce_kernels.cpp
reduce_by_columns): tiles of W = 1024 / sizeof(T) adjacent columns, rows added in order, sums
regrouped every 256 rows and every 256 groups, max/min folding four rows at a time in full tiles,
so the results are eager's bits (amax/amin: the same values; which of two equal-comparing values
(-0.0, 0.0) wins follows the same order when eager's kept dims merge into the K columns, as they do
for a contiguous input)."""


def _plan_colred(g, node):
    if node.op not in _ROW_REDUCE or node.has_side_effects or len(node.outputs) != 1:
        return None
    args = list(node.args)
    x = args[0]
    v = g.value(node.outputs[0])
    if not _is_tensor_value(x) or v.kind != "tensor" or str(v.device) != "cpu":
        return None
    ct = _DTYPES.get(_dtype_name(x.dtype))
    if ct is None or not _tensor_ok(x, ct) or _dtype_name(v.dtype) != _dtype_name(x.dtype):
        return None
    if node.op in ("sum", "mean") and args[3] is not None:
        return None
    dim = args[1]
    if isinstance(dim, (list, tuple)):
        if len(dim) != 1:
            return None
        dim = dim[0]
    if not isinstance(dim, int) or isinstance(dim, bool):
        return None
    S = tuple(x.shape)
    nd = len(S)
    d = dim + nd if dim < 0 else dim
    if not 0 <= d < nd - 1 or not _contiguous(v.shape, v.stride):
        return None
    R, K, outer = S[d], _prod(S[d + 1:]), _prod(S[:d])
    if R < 2 or K < 2:
        return None
    return {"x": x, "op": _ROW_REDUCE[node.op], "R": R, "K": K, "outer": outer, "shape": S, "ct": ct}


# ---- GEMM epilogue steps ---------------------------------------------------------------------------
"""Note [GEMM epilogue steps]
A float32 GEMM node (linear, matmul or mm with a 2-d second operand, addmm with beta = alpha = 1 and a
[N] bias) whose output only one node reads, that node being relu, gelu (either form) or silu of it, or
mul of it and another float32 tensor of the same shape, becomes one "extern" kernel step: oneDNN's
matmul primitive with the bias as its bias and the pointwise node as a post-op (Note [GEMM epilogues]
in src/compile/gemm_epilogue.cpp), so the product is written once and never read back. The step is a
small generated kernel (the descriptor baked in) calling the runner, whose address the library gets
when it is loaded; it runs as any strided kernel step (exact input sizes and strides, else the nodes).
The GEMM's first operand is [..., K] contiguous (or any 2-d layout), the second any 2-d layout with
positive strides, the result contiguous, and M * N * K at least GEMM_EPILOGUE_MIN_WORK. Only where oneDNN builds an optimized primitive for the
descriptor (checked at compile time); otherwise the nodes run as before. Results match eager to
float tolerance, not bit for bit (the bias is added after the full sum; oneDNN's own erf, tanh and
sigmoid): ir.NOT_BIT_EXACT does not cover this, tests name the tolerance.

Note [Bias GEMM steps]
A float32 linear with a bias whose output has no epilogue to take (several readers: in a training
forward the pre-activation is also saved for the backward) is a GEMM step of one node: the primitive
adds the bias as it writes each block, where eager copies the bias into the output and accumulates the
product onto it. Measured (1 thread, min of 30, /tmp script calling the runner): 2048x128x128 0.267
vs 0.296 ms, 2048x512x128 1.06 vs 1.19, 2048x128x512 1.09 vs 1.13. A GEMM without a bias is left to
eager (matmul 1.0-1.03x, a transposed first operand as in weight gradients 0.92-0.95x)."""

_GEMM_OPS = ("linear", "matmul", "mm", "addmm")
# Smaller products stay eager's: the primitive's call costs more than the pass it saves (64x64x64 linear + GELU:
# 12 us against 5.4 us eager; 64x128x128: 19.7 us against 22.6 us), and they keep eager's bits.
GEMM_EPILOGUE_MIN_WORK = 1 << 20
_EPILOGUE_ACTS = {"relu": 1, "silu": 4}
_GEMM_FIELDS = ("m", "n", "k", "a_rs", "a_cs", "b_rs", "b_cs", "bias", "act", "mul")


def _f32_cpu(a):
    return _is_tensor_value(a) and str(a.device) == "cpu" and _dtype_name(a.dtype) == "float32"


def _gemm_operands(node):
    """(x, w, bias, w_transposed) for a GEMM node this step can run, else None."""
    args = list(node.args)
    named = dict(zip(node.arg_names, args))
    if node.has_side_effects or len(node.outputs) != 1 or named.get("out") is not None:
        return None
    if node.op == "linear":
        return args[0], args[1], named.get("bias"), True
    if node.op in ("matmul", "mm"):
        return args[0], args[1], None, False
    if node.op == "addmm":
        if named.get("beta", 1) != 1 or named.get("alpha", 1) != 1:
            return None
        return args[1], args[2], args[0], False
    return None


def _plan_gemm_epilogues(g, extra=False):
    """{gemm position: {"epi", "desc", "in_ids", "out", "default"}} (Note [GEMM epilogue steps]). extra (mode
    "max-autotune"): also the GEMMs default mode leaves to eager (below GEMM_EPILOGUE_MIN_WORK, or without a bias
    or an epilogue), with "default" False, for _tune_gemm_routes to time."""
    nodes = g.nodes
    if not any(n.op in _GEMM_OPS for n in nodes):
        return {}
    readers = {}
    for j, n in enumerate(nodes):
        for vid in n.input_ids:
            readers.setdefault(vid, []).append(j)
    outs = set(g.outputs)
    plans = {}
    for i, n in enumerate(nodes):
        if n.op not in _GEMM_OPS:
            continue
        ops = _gemm_operands(n)
        if ops is None:
            continue
        x, w, bias, wt = ops
        h = g.value(n.outputs[0])
        if not (_f32_cpu(x) and _f32_cpu(w) and h.kind == "tensor" and _f32_cpu(h)) or len(w.shape) != 2:
            continue
        epi = _epilogue_of(g, nodes, readers, outs, i, h)
        default = True
        if epi is None:
            # Note [Bias GEMM steps]: linear with a bias and no epilogue to take.
            if not _contiguous(h.shape, h.stride):
                continue
            if n.op != "linear" or bias is None:
                if not extra:
                    continue
                default = False
            j, act, other, y = None, 0, None, h
        else:
            j, act, other, y = epi
        xs, hs = tuple(x.shape), tuple(h.shape)
        if len(xs) < 2 or len(hs) != len(xs) or hs[:-1] != xs[:-1] or not _contiguous(hs, h.stride):
            continue
        K, N = xs[-1], hs[-1]
        M = _prod(xs[:-1])
        if len(xs) == 2:
            a_rs, a_cs = x.stride
        elif _contiguous(xs, x.stride):
            a_rs, a_cs = K, 1
        else:
            continue
        if wt:
            if tuple(w.shape) != (N, K):
                continue
            b_rs, b_cs = w.stride[1], w.stride[0]
        else:
            if tuple(w.shape) != (K, N):
                continue
            b_rs, b_cs = w.stride
        if min(a_rs, a_cs, b_rs, b_cs) <= 0 or min(M, N, K) <= 0:
            continue
        if M * N * K < GEMM_EPILOGUE_MIN_WORK:
            if not extra:
                continue
            default = False
        if bias is not None and not (_f32_cpu(bias) and tuple(bias.shape) == (N,) and _contiguous(bias.shape, bias.stride)):
            continue
        desc = [M, N, K, a_rs, a_cs, b_rs, b_cs, int(bias is not None), act, int(other is not None)]
        if not _C._compile.gemm_epilogue_supported(desc):
            continue
        in_ids = [x.id, w.id] + ([bias.id] if bias is not None else []) + ([other.id] if other is not None else [])
        plans[i] = {"epi": j, "desc": desc, "in_ids": in_ids, "out": y.id, "default": default}
    # A node is the epilogue of at most one GEMM (mul of two GEMM outputs: the first claims it).
    seen = set()
    for i in sorted(plans):
        if plans[i]["epi"] is None:
            continue
        if plans[i]["epi"] in seen:
            del plans[i]
        else:
            seen.add(plans[i]["epi"])
    return plans


def _tune_gemm_routes(graph, gemms):
    """The GEMM plans whose oneDNN step beats running their nodes through eager on the captured shapes
    (Note [Autotuning] in autotune.py); ties keep what default mode does."""
    from .. import _dynamo
    nodes = graph.nodes
    kept = {}
    for i, p in gemms.items():
        positions = [i] if p["epi"] is None else [i, p["epi"]]
        in_ids = list(p["in_ids"])
        produced = {v for q in positions for v in nodes[q].outputs}
        reads = []
        for q in positions:
            for v in nodes[q].input_ids:
                if v not in produced and v not in reads and not graph.value(v).is_constant:
                    reads.append(v)
        if not set(reads) <= set(in_ids):
            if p["default"]:
                kept[i] = p
            continue
        st = _gemm_step(graph, positions, p, _dynamo.logs)
        runner = graph.extract(reads, positions, [p["out"]]).runner()
        pick = [in_ids.index(v) for v in reads]

        def eager_call(*xs, runner=runner, pick=pick):
            return runner(*[xs[k] for k in pick])
        ops = "+".join(nodes[q].op for q in positions)
        route = _autotune.gemm_route(st.name, p["desc"], ops, "dnnl" if p["default"] else "eager", st.call,
                                     eager_call, lambda: _sample_inputs(graph, in_ids),
                                     _spec(graph, in_ids, [p["out"]]))
        if route == "dnnl":
            kept[i] = p
    return kept


def _epilogue_of(g, nodes, readers, outs, i, h):
    """(position, act, other factor, result value) of the pointwise node that can be GEMM i's epilogue, or None."""
    if h.id in outs or len(readers.get(h.id, ())) != 1:
        return None
    j = readers[h.id][0]
    c = nodes[j]
    if j <= i or c.has_side_effects or len(c.outputs) != 1 or c.list_return:
        return None
    cargs = list(c.args)
    named = dict(zip(c.arg_names, cargs))
    if named.get("out") is not None:
        return None
    y = g.value(c.outputs[0])
    act, other = 0, None
    if c.op in _EPILOGUE_ACTS and cargs[0] is not None and getattr(cargs[0], "id", None) == h.id:
        act = _EPILOGUE_ACTS[c.op]
    elif c.op == "gelu" and getattr(cargs[0], "id", None) == h.id and named.get("approximate") in ("none", "tanh"):
        act = 2 if named.get("approximate") == "none" else 3
    elif c.op == "mul" and len(cargs) >= 2 and all(_is_tensor_value(a) for a in cargs[:2]):
        a, b = cargs[0], cargs[1]
        other = b if a.id == h.id else a
        if other.id == h.id or not _f32_cpu(other) or tuple(other.shape) != tuple(h.shape) \
                or not _contiguous(other.shape, other.stride):
            return None
    else:
        return None
    if not (_f32_cpu(y) and tuple(y.shape) == tuple(h.shape) and _contiguous(y.shape, y.stride)):
        return None
    return j, act, other, y


def _gemm_step(graph, positions, gemm, logs):
    nodes = graph.nodes
    desc = gemm["desc"]
    nb = len(gemm["in_ids"]) + 1
    fields = ", ".join(f"{v} /* {name} */" for name, v in zip(_GEMM_FIELDS, desc))
    what = " and ".join(f"{p} ({nodes[p].op})" for p in positions)
    lines = [f"// strata_cpp GEMM step for node{'s' if len(positions) > 1 else ''} {what}:",
             "// oneDNN's matmul primitive, the bias and any epilogue as its post-ops (Note [GEMM epilogues] in "
             "src/compile/gemm_epilogue.cpp)"]
    for p in positions:
        if nodes[p].source:
            lines.append(f"//   node {p}: {nodes[p].source.strip()}")
    lines += ["#include <cstdint>",
              "using GemmFn = int (*)(const int64_t*, void* const*);",
              "static GemmFn strata_gemm_epilogue = nullptr;",
              'extern "C" void strata_set_extern(void* f) { strata_gemm_epilogue = reinterpret_cast<GemmFn>(f); }',
              f"static const int64_t desc[] = {{{fields}}};",
              'extern "C" void strata_kernel(void* const* bufs, int64_t) {',
              "  // bufs: a, b, [bias], [factor], out, status word",
              f"  if (!strata_gemm_epilogue || strata_gemm_epilogue(desc, bufs) != 0) *static_cast<int64_t*>(bufs[{nb}]) = 1;",
              "}"]
    source = "\n".join(lines) + "\n"
    if logs.enabled("output_code"):
        logs._emit("output_code", f"generated GEMM step ({len(positions)} nodes):\n{source}")
    fn = codecache.load(source)
    fn._lib.strata_set_extern.argtypes = (ctypes.c_void_p,)
    fn._lib.strata_set_extern(_C._compile.gemm_epilogue_address())
    ins = [graph.value(v) for v in gemm["in_ids"]]
    out = graph.value(gemm["out"])
    st = _KernelStep()
    st.fn = fn
    st.name = kernel_name(graph, positions, "strata_gemm")
    st.in_ids, st.out_ids = list(gemm["in_ids"]), [gemm["out"]]
    st.nbuf = nb
    st.source = source
    st.dtype = out.dtype
    st.shape = tuple(out.shape)
    st.ref = 0
    st.numel = _prod(st.shape)
    dts = [out.dtype]
    geometry = ([list(out.shape)], [list(v.shape) for v in ins], [list(v.stride) for v in ins], [list(out.stride)])
    st.call = _C._compile.KernelCall(_address(fn), False, len(ins), 0, st.numel, 1, st.dtype, geometry[0], dts,
                                     geometry[1], geometry[2], geometry[3], True, name=st.name)
    st.extra = (dts, geometry, True)
    return st
