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
    r = lower(args, ct)
    if r is None:
        return None
    functor, positions = r
    operands = []
    for k, p in enumerate(positions):
        a = args[p]
        if _is_tensor_value(a):
            want = "bool" if functor.name == "Where" and k == 0 else ct
            if _DTYPES.get(_dtype_name(a.dtype), "bool" if _dtype_name(a.dtype) == "bool" else None) != want:
                return None
            if str(a.device) != "cpu" or not _contiguous(a.shape, a.stride):
                return None
            if tuple(a.shape) != tuple(v.shape) and len(a.shape) != 0:
                return None
            operands.append(a)
        elif isinstance(a, (int, float)) and not isinstance(a, bool) and not (functor.name == "Where" and k == 0):
            operands.append(float(a))
        else:
            return None
    return ct, tuple(v.shape), functor, operands


def _groups(g):
    """[(positions, ctype, shape, [(functor, operands)])] for fusable runs, in program order."""
    nodes = g.nodes
    runs, cur = [], None
    for i, n in enumerate(nodes):
        p = _plan_node(g, n)
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


class _KernelStep:
    __slots__ = ("fn", "in_ids", "out_ids", "ref", "numel", "shape", "dtype", "nbuf", "source")


class _GraphStep:
    __slots__ = ("runner", "in_ids", "out_ids")


def compile_graph(graph, out=None):
    """The strata_cpp backend: a callable(*inputs) -> tuple of outputs."""
    runner = graph.runner()
    if strata.is_grad_enabled() and any(graph.value(v).requires_grad for v in graph.inputs):
        return runner
    groups = _groups(graph)
    if not groups:
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
    grouped = {}
    for gi, run in enumerate(groups):
        for i, _ in run[0]:
            grouped[i] = gi
    steps, i = [], 0
    from .. import _dynamo
    logs = _dynamo.logs
    dynamic = any(graph.value(v).kind == "int" for v in graph.inputs)
    while i < len(nodes):
        if i in grouped:
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
                if out_ids:
                    steps.append(st)
                i = end + 1
                continue
            seg = positions
            i = end + 1
        else:
            seg = []
            while i < len(nodes) and i not in grouped:
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
    """Runs the steps: kernels on fresh contiguous outputs, other segments through their runners."""

    def __init__(self, graph, fallback, steps):
        self.fallback = fallback
        self.steps = steps
        self.inputs = list(graph.inputs)
        self.outputs = list(graph.outputs)
        self.constants = {v: graph.value(v).constant for v in graph.constants}
        self.kernel_sources = [s.source for s in steps if isinstance(s, _KernelStep)]

    def __call__(self, *args):
        env = dict(self.constants)
        env.update(zip(self.inputs, args))
        for st in self.steps:
            if isinstance(st, _KernelStep):
                ins = [env[v] for v in st.in_ids]
                ref = ins[st.ref]
                n = ref.numel()
                if (st.numel is not None and n != st.numel) or not all(t.is_contiguous() for t in ins):
                    return self.fallback(*args)
                outs = [strata.empty(ref.shape, dtype=st.dtype) for _ in st.out_ids]
                ptrs = (ctypes.c_void_p * st.nbuf)(*[t.data_ptr() for t in ins], *[t.data_ptr() for t in outs])
                st.fn(ptrs, n)
                env.update(zip(st.out_ids, outs))
            else:
                env.update(zip(st.out_ids, st.runner(*[env[v] for v in st.in_ids])))
        return tuple(env[v] for v in self.outputs)
