"""backend="strata_cpp": fuse runs of pointwise nodes of a captured graph into generated kernels.

Note [Pointwise groups]
A node is fusable when its op has a lowering (ir.LOWERINGS) for its arguments, out= is not given,
it runs on the CPU, its result and every tensor operand have one float dtype (float32 or float64;
where's condition is bool), the operands have the result's sizes or are 0-d, and all of them are
contiguous. A group is a maximal run of consecutive fusable nodes with the same result shape and
dtype (program order, so no node outside the group sits between two of its nodes; reordering to
grow groups is later work); a group of at least two nodes becomes one kernel whose outputs are the
values it produces that a later node or the graph's result reads. The rest of the graph runs in
segments extracted from it (Graph.extract) through their own node-by-node runners.

No fusion (the graph's own runner) when an input requires grad under grad mode: generated kernels
have no derivatives yet. At run time a kernel input that is not contiguous, or a size that
differs from the captured one for a static graph, runs the whole graph node by node instead."""

import ctypes
import warnings

import strata

from .. import _C  # noqa: F401
from . import codecache, cpp
from .ir import LOWERINGS, Buffer, Compute, Const, Load, LoopKernel, Store

_DTYPES = {"float32": "float", "float64": "double"}
MIN_GROUP = 2


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


def _plan_node(g, node):
    f = _fusable(node)
    if f is None:
        return None
    vid, lower, args = f
    v = g.value(vid)
    if v.kind != "tensor" or str(v.device) != "cpu":
        return None
    ct = _DTYPES.get(_dtype_name(v.dtype))
    if ct is None or not _contiguous(v.shape, v.stride):
        return None
    r = _lower_operands(lower, args, ct)
    if r is None:
        return None
    functor, operands = r
    # An elementwise group reads each tensor operand at the output's shape, or a 0-d one.
    if any(_is_tensor_value(a) and tuple(a.shape) != tuple(v.shape) and len(a.shape) != 0 for a in operands):
        return None
    return ct, tuple(v.shape), functor, operands


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


def _groups(g, exclude=()):
    """[(positions, ctype, shape, [(functor, operands)])] for fusable runs, in program order."""
    nodes = g.nodes
    runs, cur = [], None
    for i, n in enumerate(nodes):
        p = None if i in exclude else _plan_node(g, n)
        if p is not None and cur is not None and (p[0], p[1]) == cur[1]:
            cur[0].append((i, p))
            continue
        if cur is not None:
            runs.append(cur)
        cur = ([(i, p)], (p[0], p[1])) if p is not None else None
    if cur is not None:
        runs.append(cur)
    return [r for r in runs if len(r[0]) >= MIN_GROUP]


def _lower_group(g, run, live_after):
    """A LoopKernel for one run, with its input value ids and output value ids."""
    members, (ct, shape) = run
    produced = {g.nodes[i].outputs[0] for i, _ in members}
    k = LoopKernel(dtype=ct)
    var_of, in_ids, out_ids = {}, [], []
    last_source = ""
    for i, (_, _, functor, operands) in members:
        node = g.nodes[i]
        names = []
        for o in operands:
            if isinstance(o, float):
                var = f"c{len(k.body)}"
                k.body.append(Const(var, o))
                names.append(var)
                continue
            vid = o.id
            if vid not in var_of:
                b = len(k.inputs)
                dt = "bool" if _dtype_name(o.dtype) == "bool" else ct
                k.inputs.append(Buffer(f"in{b}", dt, scalar=len(o.shape) == 0 and len(shape) != 0))
                in_ids.append(vid)
                var_of[vid] = f"x{b}"
                k.body.append(Load(var_of[vid], b))
            names.append(var_of[vid])
        if node.source:
            last_source = node.source
        out = node.outputs[0]
        var_of[out] = f"t{len(var_of)}"
        k.body.append(Compute(var_of[out], functor, names, f"{node.op} (node {i}: {g.value(out).name})", last_source))
    for vid in sorted(produced):
        if vid in live_after:
            k.outputs.append(Buffer(f"out{len(k.outputs)}", ct))
            out_ids.append(vid)
            k.body.append(Store(len(k.outputs) - 1, var_of[vid]))
    if not any(not b.scalar for b in k.inputs):
        return None  # no full-size operand to take the size from (all inputs 0-d): leave to eager
    return k, in_ids, out_ids


def _address(fn):
    return ctypes.cast(fn, ctypes.c_void_p).value


class _KernelStep:
    __slots__ = ("fn", "in_ids", "out_ids", "ref", "numel", "shape", "dtype", "nbuf", "source", "call")


class _RowStep:
    __slots__ = ("fn", "in_ids", "out_ids", "ref", "cols", "numel", "outs", "nbuf", "source", "call")


class _GraphStep:
    __slots__ = ("runner", "in_ids", "out_ids")


def compile_graph(graph, out=None):
    """The strata_cpp backend: a callable(*inputs) -> tuple of outputs."""
    runner = graph.runner()
    if strata.is_grad_enabled() and any(graph.value(v).requires_grad for v in graph.inputs):
        return runner
    dynamic = any(graph.value(v).kind == "int" for v in graph.inputs)
    row_groups = [] if dynamic else _row_groups(graph)
    row_pos = {i for r in row_groups for i in r[0]}
    groups = _groups(graph, row_pos)
    if not groups and not row_groups:
        return runner
    try:
        codecache.compiler()
        codecache.include_dir()
    except codecache.CompilerMissing as e:
        warnings.warn(str(e), RuntimeWarning, stacklevel=2)
        return runner
    nodes = graph.nodes
    # Values read after each position (by a node or as a graph output).
    outputs = list(graph.outputs)
    last_use = {}
    for i, n in enumerate(nodes):
        for vid in n.input_ids:
            last_use[vid] = i
    for vid in outputs:
        last_use[vid] = len(nodes)
    grouped, row_grouped = {}, {}
    for gi, run in enumerate(groups):
        for i, _ in run[0]:
            grouped[i] = gi
    for gi, run in enumerate(row_groups):
        for i in run[0]:
            row_grouped[i] = gi
    steps, i = [], 0
    from .. import _dynamo
    logs = _dynamo.logs
    while i < len(nodes):
        if i in row_grouped:
            run = row_groups[row_grouped[i]]
            positions = run[0]
            end = positions[-1]
            live_after = {v for v, u in last_use.items() if u > end}
            lowered = _lower_row_group(graph, run, live_after)
            if lowered is not None and lowered[2]:
                k, in_ids, out_ids = lowered
                comment = f"strata_cpp row kernel for nodes {positions[0]}..{end}:\n{k}"
                source = cpp.render_rows(k, comment)
                if logs.enabled("output_code"):
                    logs._emit("output_code", f"generated row kernel ({len(positions)} nodes):\n{source}")
                st = _RowStep()
                st.fn = codecache.load(source, nargs=3)
                st.in_ids, st.out_ids = in_ids, out_ids
                st.ref = next(j for j, b in enumerate(k.inputs) if b.kind == "full")
                st.cols = run[2][-1]
                st.numel = _prod(run[2])
                st.outs = [(tuple(graph.value(v).shape), graph.value(v).dtype) for v in out_ids]
                st.nbuf = len(in_ids) + len(out_ids)
                st.source = source
                st.call = _C._compile.KernelCall(_address(st.fn), True, len(in_ids), st.ref, st.numel, st.cols,
                                                 graph.value(out_ids[0]).dtype, [list(sh) for sh, _ in st.outs])
                steps.append(st)
                i = end + 1
                continue
            seg = positions
            i = end + 1
        elif i in grouped:
            run = groups[grouped[i]]
            positions = [p for p, _ in run[0]]
            end = positions[-1]
            live_after = {v for v, u in last_use.items() if u > end}
            lowered = _lower_group(graph, run, live_after)
            if lowered is not None:
                k, in_ids, out_ids = lowered
                comment = f"strata_cpp kernel for nodes {positions[0]}..{end}:\n{k}"
                source = cpp.render(k, comment)
                if logs.enabled("output_code"):
                    logs._emit("output_code", f"generated kernel ({len(positions)} nodes):\n{source}")
                st = _KernelStep()
                st.fn = codecache.load(source)
                st.in_ids, st.out_ids = in_ids, out_ids
                st.ref = next(j for j, b in enumerate(k.inputs) if not b.scalar)
                st.shape = tuple(graph.value(out_ids[0]).shape) if out_ids else None
                st.numel = None if dynamic else _prod(st.shape or ())
                st.dtype = graph.value(out_ids[0]).dtype if out_ids else None
                st.nbuf = len(in_ids) + len(out_ids)
                st.source = source
                st.call = _C._compile.KernelCall(_address(st.fn), False, len(in_ids), st.ref,
                                                 -1 if st.numel is None else st.numel, 1, st.dtype or strata.float32,
                                                 [[] for _ in out_ids])
                if out_ids:
                    steps.append(st)
                i = end + 1
                continue
            seg = positions
            i = end + 1
        else:
            seg = []
            while i < len(nodes) and i not in grouped and i not in row_grouped:
                seg.append(i)
                i += 1
        produced = {v for p in seg for v in nodes[p].outputs}
        reads = []
        for p in seg:
            for v in nodes[p].input_ids:
                if v not in produced and v not in reads and not graph.value(v).is_constant:
                    reads.append(v)
        live_after = {v for v, u in last_use.items() if u > seg[-1]}
        outs = [v for p in seg for v in nodes[p].outputs if v in live_after]
        st = _GraphStep()
        st.runner = graph.extract(reads, seg, outs).runner()
        st.in_ids, st.out_ids = reads, outs
        steps.append(st)
    return _Runner(graph, runner, steps)


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
    if op == "layer_norm":
        x, ns, wt, bs, eps = args[:5]
        if not _tensor_ok(x, ct) or len(x.shape) == 0 or list(ns) != [x.shape[-1]] or not _num(eps):
            return None
        for t in (wt, bs):
            if t is not None and not (_tensor_ok(t, ct) and tuple(t.shape) == (x.shape[-1],)):
                return None
        return "layer_norm", ct, tuple(x.shape), (x, wt, bs, float(eps))
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
        if any(p[0] != "pw" for p in r[3]) and (len(r[0]) >= MIN_GROUP or r[3][0][0] in ("softmax", "layer_norm")):
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
        else:
            # nn_kernels.cpp row_norm: sums in double (omp simd), var from a second pass (FMA-contracted),
            # rstd = T(1 / sqrt(var + eps)), y = (x - T(mean)) * rstd [* w] [+ b], contracted as eager's.
            xa, wt, bs, eps = p[3]
            x = load(xa)
            s = new("row", "double")
            k.body.append(Reduce(s, "simd_sum", x, "double", label))
            d = const(float(S[-1]), "double")
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
