"""AOT autograd: the backward of a captured graph as a graph, made ahead of time.

The "eager" backend replays a captured forward graph op by op through the dispatcher, so
autograd records a tape at run time and the backward is whatever that tape does. The
"aot_eager" backend instead traces forward and backward once, at compile time, into one joint
graph, splits it into a forward graph and a backward graph, and runs the pair as one
strata.autograd.Function (CompiledFunction) whose backward is the backward graph.

Note [The joint graph]
make_joint(graph) replays the captured graph on Meta stand-ins of its inputs (requires_grad as
the inputs') while recording into a new graph with record(aot=True), then runs Strata's own
autograd engine on the Meta outputs (strata.autograd.grad, tangents given as grad_outputs,
create_graph=False), still recording. The engine calls each derivative through the
dispatcher, so the Tracer layer records the ops of src/autograd/derivatives_*.cpp; it runs
them with grad mode off, which each recorded node keeps; the ops the engine calls itself
(add to accumulate gradients, sum_to for a broadcast, casts, zeros for an output that got no
gradient) go through the dispatcher too. Two things needed the recorder's AOT mode (Note
[Recording for AOT autograd] in src/compile/recorder.cpp): composite ops without a derivative
are recorded as the ops they are made of (autograd saves the results of those ops, so they
must be graph values), and the alias autograd makes of a saved output stands for that output.
Joint inputs: the primals (the captured graph's inputs) then one tangent per differentiable
forward output. Joint outputs: the forward outputs then the gradient of each primal that
requires grad (None where the engine gave none).

Note [Partitioning a joint graph]
Every joint node is forward (depends on no tangent) or backward (depends on one). The backward
graph must get every forward value a backward node reads, either saved by the forward graph or
recomputed in the backward graph from saved values. Which to save is a minimum cut:
  * network nodes: S, T, and for every primal input or forward node N a node N_in, and for
    every value v it produces a node v_out, with an edge N_in -> v_out of capacity
    bytes(v) (numel * element size; 8 for a number): cutting it means "save v";
  * S -> N_in (infinite) for primal inputs, and for forward nodes that must not run in the
    backward: random ops (the backward must reuse the forward's draw, never redraw),
    in-place / side-effecting ops, and, among the nodes the forward needs anyway (those a
    forward output or a side effect depends on), readers of a value an in-place op writes
    and every op that is not cheap: such a node may be recomputed only if it is pointwise or
    fusible (OpFlags kPointwise / kFusible), a view, or a factory, and never a reduction; so
    matmul, conv, reductions, norms' statistics are saved when the backward needs them.
    A forward node only the backward needs (cos(x) for sin's derivative, a weight's
    transpose) is free to run on either side: it runs once either way;
  * v_out -> M_in (infinite) for every forward node M that reads v (M recomputed needs v);
  * v_out -> T (infinite) for every forward value a backward node reads or that is itself an
    input gradient.
A finite cut separates the primals from every backward use; the cut edges are the saved
values, and forward nodes on the T side are recomputed in the backward graph. The maximum
flow is found with Dinic's algorithm (BFS levels, DFS blocking flows) over integer byte
capacities; the S side is what the residual network reaches from S. The backward graph is
then read off by walking back from the input gradients: tangents are inputs, a value made by
a node on the T side (or by a backward node) is computed, any other value is saved (the walk
asserts it is S-side, which the infinite edges guarantee). The forward graph is every forward
node that a forward output or a saved value needs, plus every forward node with side effects
(BatchNorm's running statistics, random draws), in the joint graph's order, so random ops
draw in eager order.

partition(joint, recompute=False) is the baseline: the forward graph runs only what the
forward outputs and side effects need, every other joint node runs in the backward, and every
forward value a backward node reads is saved, which is what eager autograd keeps; tests and
the report compare the two.

Note [CompiledFunction]
aot_compile(graph) returns a callable with the captured graph's calling convention (inputs
in, a tuple of outputs back). With grad mode on and an input that requires grad it calls
CompiledFunction.apply(plan, *inputs): forward runs the forward graph's runner, saves the
saved tensors (save_for_backward: version-checked like eager saved tensors) and marks the
outputs that got no tangent non-differentiable; backward makes each incoming gradient
contiguous (the joint trace used contiguous tangents, and views decided at trace time rely
on it), runs the backward graph's runner and returns one gradient per input (None for inputs
that do not require grad). Otherwise it runs the captured graph as the eager backend does.
Double backward through a compiled function raises.

Note [Compiled backward frees saved values]
Eager autograd frees a node's saved tensors as soon as that node's backward has run; a compiled
backward is one node whose backward graph reads every saved value. Unless the backward pass keeps
the graph (retain_graph, _compile.backward_keeps_graph()), CompiledFunctionBackward releases
the context's references first and hands the saved values and tangents to the backward runner in
a list it empties (GraphRunner.call_consuming), so the runner holds the only reference and each
saved value dies at its last use in the backward graph, as in eager mode. A graph whose joint trace fails (an op
without a derivative, an in-place write autograd must clone) runs as the eager backend and
says why once (STRATA_LOGS=aot).
"""

import functools
from collections import deque

from .. import _C
from . import logs

_compile = _C._compile

__all__ = ["JointGraph", "Partition", "make_joint", "partition", "aot_compile", "CompiledFunction",
           "AOTUnsupported"]

_FLAGS = _C._op_flags()
_RECOMPUTABLE = _FLAGS["pointwise"] | _FLAGS["fusible"] | _FLAGS["view"] | _FLAGS["factory"]
_NEVER = _FLAGS["reduction"] | _FLAGS["random"] | _FLAGS["inplace"]
_INF = 1 << 62


class AOTUnsupported(RuntimeError):
    """The joint graph cannot be made for this graph; the eager backend runs it instead."""


# ---- the joint graph ---------------------------------------------------------------------------

class JointGraph:
    """graph: the joint graph; num_primals, num_tangents: its inputs are the primals then the
    tangents; num_fwd_outputs: its outputs are the forward outputs, then one gradient per
    primal in grad_inputs (positions of the primals that require grad); a gradient the engine
    did not produce is None in grad_values (and not a graph output). diff_outputs: positions of
    the forward outputs that have a tangent."""

    def __init__(self, graph, num_primals, diff_outputs, fwd_values, grad_inputs, grad_values):
        self.graph = graph
        self.num_primals = num_primals
        self.num_tangents = len(diff_outputs)
        self.diff_outputs = diff_outputs
        self.fwd_values = fwd_values
        self.num_fwd_outputs = len(fwd_values)
        self.grad_inputs = grad_inputs
        self.grad_values = grad_values

    @property
    def primals(self):
        return self.graph.inputs[:self.num_primals]

    @property
    def tangents(self):
        return self.graph.inputs[self.num_primals:]


def _meta_of(v, requires_grad):
    import strata
    m = strata.empty_strided(tuple(v.shape), tuple(v.stride), dtype=v.dtype, device="meta")
    if requires_grad:
        m.requires_grad_(True)
    return m


def make_joint(graph, metas=None):
    """Traces graph's forward and backward into a joint graph (Note [The joint graph]). metas: the Meta
    inputs to trace with (default: the recorded geometry of graph's inputs; Note [Symbolic sizes through
    AOT autograd] traces at other sizes)."""
    import strata
    j = _compile.Graph()
    given = metas
    metas = []
    for k, vid in enumerate(graph.inputs):
        v = graph.value(vid)
        if v.kind != "tensor":
            raise AOTUnsupported(f"input {v.name!r} is a {v.kind}; AOT autograd takes tensor inputs only")
        m = _meta_of(v, v.requires_grad) if given is None else given[k]
        j.add_input(v.name, m, device=v.device)
        metas.append(m)
    for vid in graph.constants:
        c = graph.value(vid)
        if c.kind == "tensor":
            j.add_constant(c.constant, c.name)
    try:
        with strata.enable_grad():
            with _compile.record(j, aot=True):
                outs = graph.run(metas)
            for o in outs:
                if not isinstance(o, strata.Tensor):
                    raise AOTUnsupported(f"the graph returns a {type(o).__name__}; AOT autograd needs tensors")
            fwd_values = [j.value_of(o) for o in outs]
            diff = [i for i, o in enumerate(outs) if o.requires_grad and o.dtype.is_floating_point]
            grad_inputs = [i for i, m in enumerate(metas) if m.requires_grad]
            tangents = []
            for i in diff:
                o = outs[i]
                t = strata.empty(tuple(o.shape), dtype=o.dtype, device="meta")
                j.add_input(f"tangent_{i}", t, device=j.value(fwd_values[i]).device)
                tangents.append(t)
            grads = [None] * len(grad_inputs)
            if diff and grad_inputs:
                with _compile.record(j, aot=True):
                    grads = strata.autograd.grad([outs[i] for i in diff], [metas[i] for i in grad_inputs],
                                                 tangents, allow_unused=True)
    except AOTUnsupported:
        raise
    except Exception as e:  # an op without a derivative, a tensor autograd made outside the dispatcher
        hint = ""
        if "not part of the graph" in str(e):
            hint = (" (autograd made that tensor outside the dispatcher: the old value of a tensor that "
                    "requires grad written in place, which a derivative reads)")
        raise AOTUnsupported(f"tracing the backward failed: {e}{hint}") from e
    grad_values = []
    for gr in grads:
        if gr is None:
            grad_values.append(None)
            continue
        vid = j.value_of(gr)
        if vid is None:
            raise AOTUnsupported("a gradient is not a value of the joint graph")
        grad_values.append(vid)
    j.set_outputs(fwd_values + [v for v in grad_values if v is not None])
    return JointGraph(j, len(metas), diff, fwd_values, grad_inputs, grad_values)


# ---- max flow ----------------------------------------------------------------------------------

class _FlowNetwork:
    """Dinic's maximum flow over integer capacities."""

    def __init__(self):
        self.adj = []     # node -> list of edge ids
        self.to = []
        self.cap = []

    def node(self):
        self.adj.append([])
        return len(self.adj) - 1

    def edge(self, a, b, c):
        self.adj[a].append(len(self.to))
        self.to.append(b)
        self.cap.append(c)
        self.adj[b].append(len(self.to))
        self.to.append(a)
        self.cap.append(0)

    def _levels(self, s, t):
        level = [-1] * len(self.adj)
        level[s] = 0
        q = deque([s])
        while q:
            u = q.popleft()
            for e in self.adj[u]:
                if self.cap[e] > 0 and level[self.to[e]] < 0:
                    level[self.to[e]] = level[u] + 1
                    q.append(self.to[e])
        return level if level[t] >= 0 else None

    def max_flow(self, s, t):
        total = 0
        while True:
            level = self._levels(s, t)
            if level is None:
                return total
            it = [0] * len(self.adj)
            while True:
                pushed = self._push(s, t, _INF, level, it)
                if not pushed:
                    break
                total += pushed
                if total >= _INF:
                    raise AssertionError("aot: infinite cut (a backward use no finite cut separates)")

    def _push(self, s, t, limit, level, it):
        # Iterative DFS along level-increasing edges with positive residual capacity.
        path = []
        u = s
        while True:
            if u == t:
                f = min(self.cap[e] for e in path)
                f = min(f, limit)
                for e in path:
                    self.cap[e] -= f
                    self.cap[e ^ 1] += f
                return f
            adv = False
            while it[u] < len(self.adj[u]):
                e = self.adj[u][it[u]]
                v = self.to[e]
                if self.cap[e] > 0 and level[v] == level[u] + 1:
                    path.append(e)
                    u = v
                    adv = True
                    break
                it[u] += 1
            if not adv:
                if not path:
                    return 0
                level[u] = -1  # dead end
                e = path.pop()
                u = self.to[e ^ 1]
                it[u] += 1

    def reaches(self, t):
        """Per node: whether it reaches t in the residual network."""
        seen = [False] * len(self.adj)
        seen[t] = True
        q = deque([t])
        while q:
            w = q.popleft()
            for e in self.adj[w]:
                u = self.to[e]
                if self.cap[e ^ 1] > 0 and not seen[u]:
                    seen[u] = True
                    q.append(u)
        return seen

    def reachable(self, s):
        seen = [False] * len(self.adj)
        seen[s] = True
        q = deque([s])
        while q:
            u = q.popleft()
            for e in self.adj[u]:
                if self.cap[e] > 0 and not seen[self.to[e]]:
                    seen[self.to[e]] = True
                    q.append(self.to[e])
        return seen


# ---- partition ---------------------------------------------------------------------------------

def _value_bytes(v):
    if v.kind != "tensor":
        return 8
    if v.dtype is None:
        return 0
    n = 1
    for s in v.shape:
        n *= s
    return n * v.dtype.itemsize


class Partition:
    """The forward and backward graphs and what the forward saves for the backward.

    forward: inputs = primals; outputs = forward outputs, then the saved values.
    backward: inputs = saved values, then tangents; outputs = the gradients that exist.
    saved: [(name, kind, shape, dtype, bytes)] in order; recomputed: names of forward ops the
    backward graph computes again."""

    def __init__(self, joint, forward, backward, saved, recomputed):
        self.joint = joint
        self.forward = forward
        self.backward = backward
        self.saved = saved
        self.recomputed = recomputed

    @property
    def saved_bytes(self):
        return sum(s[4] for s in self.saved)

    def describe(self):
        lines = [f"saved {len(self.saved)} values, {self.saved_bytes} bytes:"]
        for name, kind, shape, dtype, nbytes in self.saved:
            lines.append(f"  {name}: {kind} {dtype} {list(shape)} ({nbytes} bytes)")
        if self.recomputed:
            lines.append("recomputed in backward: " + ", ".join(self.recomputed))
        return "\n".join(lines)


def partition(joint, recompute=True):
    """Splits a joint graph (Note [Partitioning a joint graph])."""
    g = joint.graph
    nodes = g.nodes
    values = g.values
    producer = {}                      # value id -> node position
    for i, n in enumerate(nodes):
        for o in n.outputs:
            producer[o] = i
    reads = [n.input_ids for n in nodes]
    tangent = set(joint.tangents)
    is_bwd = [False] * len(nodes)
    tangent_values = set(tangent)
    for i, n in enumerate(nodes):
        if any(v in tangent_values for v in reads[i]):
            is_bwd[i] = True
            tangent_values.update(n.outputs)
    _check_backward_writes(nodes, is_bwd, tangent_values)
    primals = list(joint.primals)
    grads = [v for v in joint.grad_values if v is not None]
    # Forward nodes the forward outputs and side effects need; the other forward nodes
    # (cos(x) for sin's derivative, transposes of weights) exist only for the backward.
    needed = [False] * len(nodes)
    stack = list(joint.fwd_values)
    for i, n in enumerate(nodes):
        if not is_bwd[i] and n.has_side_effects:
            needed[i] = True
            stack.extend(reads[i])
    while stack:
        i = producer.get(stack.pop())
        if i is not None and not needed[i]:
            needed[i] = True
            stack.extend(reads[i])
    if not recompute:
        # What eager autograd keeps: backward-only work runs in the backward, and every
        # forward value it reads is saved.
        is_bwd = [b or not needed[i] for i, b in enumerate(is_bwd)]

    # Values the in-place / random ops of the forward read: their other readers are never
    # recomputed (the backward would read them after the write).
    written = set()
    for i, n in enumerate(nodes):
        if not is_bwd[i] and n.has_side_effects:
            written.update(reads[i])

    def movable(i):
        """Whether forward node i may run in the backward graph: a node the forward needs
        only if it is cheap (recomputing it), one only the backward needs whatever it is
        (it runs once either way), never a random or side-effecting one."""
        n = nodes[i]
        if not recompute or n.has_side_effects or (n.flags & _FLAGS["random"]):
            return False
        if not needed[i]:
            return True
        if (n.flags & _NEVER) or not (n.flags & _RECOMPUTABLE):
            return False
        return not any(v in written for v in reads[i])

    net = _FlowNetwork()
    S, T = net.node(), net.node()
    n_in = {}                          # node position (or ("p", vid) for a primal) -> network node
    v_out = {}                         # value id -> network node

    def add_value(vid, src, view=False):
        # A view costs one byte more than its bytes: it keeps its base alive anyway, so between a
        # value and a view of it (a weight and its transpose) the cut saves the value.
        v_out[vid] = net.node()
        net.edge(src, v_out[vid], _value_bytes(values[vid]) + (1 if view else 0))

    for p in primals:
        k = net.node()
        n_in[("p", p)] = k
        net.edge(S, k, _INF)
        add_value(p, k)
    for i, n in enumerate(nodes):
        if is_bwd[i]:
            continue
        k = net.node()
        n_in[i] = k
        if not movable(i):
            net.edge(S, k, _INF)
        for o in n.outputs:
            add_value(o, k, bool(n.flags & _FLAGS["view"]))
        for v in reads[i]:
            if v in v_out:
                net.edge(v_out[v], k, _INF)
    for i, n in enumerate(nodes):
        if is_bwd[i]:
            for v in reads[i]:
                if v in v_out:
                    net.edge(v_out[v], T, _INF)
    for v in grads:
        if v in v_out:
            net.edge(v_out[v], T, _INF)
    net.max_flow(S, T)
    # Of the minimum cuts, the one nearest T: where several cuts save the same bytes (a conv's
    # output or the relu after it), save the later value, so the earlier one dies in the forward
    # and the backward recomputes less.
    s_side = [not r for r in net.reaches(T)]

    # The backward graph: walk back from the gradients.
    bwd_nodes, saved, seen = set(), [], set()
    stack = list(grads)
    primal_set = set(primals)
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        if v in tangent or values[v].is_constant:
            continue
        if v in primal_set:
            saved.append(v)
            continue
        i = producer[v]
        if is_bwd[i] or not s_side[n_in[i]]:
            if i not in bwd_nodes:
                bwd_nodes.add(i)
                stack.extend(reads[i])
        else:
            saved.append(v)
    order = {v: k for k, v in enumerate(g.inputs)}
    saved.sort(key=lambda v: (producer.get(v, -1), order.get(v, 0), v))
    recomputed = [nodes[i].op for i in sorted(bwd_nodes) if not is_bwd[i] and needed[i]]

    # The forward graph: what outputs and saved values need, and every side effect.
    fwd_nodes = set()
    stack = list(joint.fwd_values) + saved
    for i, n in enumerate(nodes):
        if not is_bwd[i] and n.has_side_effects:
            fwd_nodes.add(i)
            stack.extend(reads[i])
    seen = set()
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        i = producer.get(v)
        if i is None:
            continue
        assert not is_bwd[i], "aot: a forward output depends on a tangent"
        fwd_nodes.add(i)
        stack.extend(reads[i])

    forward = g.extract(primals, sorted(fwd_nodes), list(joint.fwd_values) + saved)
    backward = g.extract(saved + list(joint.tangents), _sink_recomputed(nodes, bwd_nodes, is_bwd, producer, reads),
                         grads, grad_enabled=False)
    info = []
    for v in saved:
        val = values[v]
        info.append((val.name, val.kind, val.shape, val.dtype, _value_bytes(val)))
    return Partition(joint, forward, backward, info, recomputed)


def _check_backward_writes(nodes, is_bwd, bwd_values):
    """A backward node that writes into a tensor the forward side made (a derivative filling a zero
    buffer through a view, as an in-place op's derivative may do) is a dependence the partition does not
    follow: readers of that buffer look like forward nodes. Such a joint graph is refused (the graph then
    runs as the eager backend) rather than partitioned into a wrong backward."""
    from .functionalize import _writes, _view_ops
    views = _view_ops()
    root = {}
    for i, n in enumerate(nodes):
        ids = n.input_ids
        if ids and (n.flags & _FLAGS["view"] or n.op in views):
            for o in n.outputs:
                root[o] = root.get(ids[0], ids[0])
        if not is_bwd[i]:
            continue
        args = n.args
        for k in _writes(n):
            a = args[k]
            if isinstance(a, _compile.Value) and root.get(a.id, a.id) not in bwd_values:
                raise AOTUnsupported(f"a backward node ({n.op}) writes into a tensor the forward side made")


def _sink_recomputed(nodes, bwd_nodes, is_bwd, producer, reads):
    """The backward graph's node order: the backward nodes in joint order, each recomputed forward
    node placed just before the first node that reads it (its own inputs first), so a recomputed
    value lives from just before its first use rather than from the start of the backward (and
    lands beside the pointwise nodes that use it, where fusion can take it). Joint order when a
    backward node writes in place or has side effects."""
    order = sorted(bwd_nodes)
    if any(is_bwd[i] and (nodes[i].has_side_effects or nodes[i].flags & _FLAGS["inplace"]) for i in order):
        return order
    recomputed = {i for i in order if not is_bwd[i]}
    out, done = [], set()

    def emit(i):
        stack = [(i, False)]
        while stack:
            j, ready = stack.pop()
            if j in done:
                continue
            if ready:
                done.add(j)
                out.append(j)
                continue
            stack.append((j, True))
            for v in reversed(reads[j]):
                k = producer.get(v)
                if k is not None and k in recomputed and k not in done:
                    stack.append((k, False))

    for i in order:
        if i not in recomputed:
            emit(i)
    for i in order:
        emit(i)
    return out


# ---- runtime -----------------------------------------------------------------------------------

from ..autograd.function import Function  # noqa: E402


class _Plan:
    """What a CompiledFunction call runs."""

    def __init__(self, graph, joint, part, compile_fn=None):
        self.graph = graph
        self.joint = joint
        self.partition = part
        if compile_fn is None:
            self.fwd = part.forward.runner()
            self.bwd = part.backward.runner()
        else:
            self.fwd = compile_fn(part.forward)
            self.bwd = compile_fn(part.backward, inputs_die=True)
        self.num_inputs = joint.num_primals
        self.num_outputs = joint.num_fwd_outputs
        self.diff_outputs = joint.diff_outputs
        self.nondiff_outputs = [i for i in range(self.num_outputs) if i not in set(joint.diff_outputs)]
        self.grad_slots = []           # per input: index into the backward outputs, or None
        k = 0
        has = {p: gv is not None for p, gv in zip(joint.grad_inputs, joint.grad_values)}
        for i in range(self.num_inputs):
            if has.get(i):
                self.grad_slots.append(k)
                k += 1
            else:
                self.grad_slots.append(None)
        self.saved_kinds = [s[1] for s in part.saved]
        self.dynamic = False           # symbolic sizes (aot_dynamic.py): output shapes are per call


class CompiledFunction(Function):
    """A compiled forward/backward pair (Note [CompiledFunction]); apply(plan, *inputs)."""

    @staticmethod
    def forward(ctx, plan, *inputs):
        outs = plan.fwd(*inputs)
        n = plan.num_outputs
        fwd, saved = outs[:n], outs[n:]
        tensors, others = [], []
        for s, kind in zip(saved, plan.saved_kinds):
            (tensors if kind == "tensor" else others).append(s)
        ctx.save_for_backward(*tensors)
        ctx.saved_numbers = others
        ctx.plan = plan
        if plan.dynamic:
            ctx.out_shapes = [tuple(o.shape) for o in fwd]
        if plan.nondiff_outputs:
            ctx.mark_non_differentiable(*[fwd[i] for i in plan.nondiff_outputs])
        return tuple(fwd)

    @staticmethod
    def backward(ctx, *grads):
        from .. import _C as C
        plan = ctx.plan
        if C._is_grad_enabled():
            raise RuntimeError("strata.compile(backend='aot_eager'): double backward (create_graph=True) "
                               "through a compiled function is not supported; compile with backend='eager' "
                               "to differentiate the backward")
        if getattr(ctx, "_released", False) and plan.saved_kinds:
            raise RuntimeError(
                "Trying to backward through the graph a second time (or directly access saved tensors after they "
                "have already been freed). Specify retain_graph=True if you need to backward through the graph a "
                "second time or if you need to access saved tensors after calling backward.")
        tensors = iter(ctx.saved_tensors)
        numbers = iter(ctx.saved_numbers)
        args = [next(tensors) if k == "tensor" else next(numbers) for k in plan.saved_kinds]
        del tensors, numbers
        consume = not _compile.backward_keeps_graph() and hasattr(plan.bwd, "call_consuming")
        if consume:
            ctx._release()  # Note [Compiled backward frees saved values]
        gr = None
        for i in plan.diff_outputs:
            gr = grads[i]
            if gr is None:
                import strata
                v = plan.joint.graph.value(plan.joint.fwd_values[i])
                gr = strata.zeros(ctx.out_shapes[i] if plan.dynamic else v.shape, dtype=v.dtype, device=v.device)
            elif not gr.is_contiguous():
                gr = gr.contiguous()
            args.append(gr)
        del grads, gr
        res = plan.bwd.call_consuming(args) if consume else plan.bwd(*args)
        return (None,) + tuple(None if k is None else res[k] for k in plan.grad_slots)


def aot_compile(graph, compile_fn=None, functionalize=True, syms=None):
    """The aot_eager backend's callable for a captured graph (Note [CompiledFunction]).

    compile_fn(graph, inputs_die=False) -> callable, when given, compiles the forward graph, the
    backward graph (inputs_die=True: its inputs are released at their last use, Note [Compiled
    backward frees saved values]) and
    the captured graph for calls without grad (backend "strata_cpp": Note [Compiled training
    steps] in backends.py); it is called with grad mode off, and the graph for calls without grad
    is compiled at its first such call. Without it every graph runs through its own runner.
    The graph is functionalized first unless functionalize=False (Note [Functionalization] in
    functionalize.py); a call whose written input shares storage with another input runs the graph as
    captured, so the functional graph's compile_fn is called with inputs_distinct=True (Note
    [Reinplacing] in _inductor/reinplace.py).
    syms: the graph has symbolic sizes (aot_dynamic.SymSizes; Note [Symbolic sizes through AOT
    autograd]); compile_fn then compiles graphs with symbolic sizes."""
    from .functionalize import maybe_functionalize, aliased_inputs
    if syms is not None:
        return _aot_compile_symbolic(graph, compile_fn, syms)
    fgraph, written, gw = maybe_functionalize(graph) if functionalize else (graph, None, None)
    if written and compile_fn is not None:
        # the run below sends calls whose inputs share storage to the captured graph, so the functional
        # graph's inputs are distinct tensors (what reinplacing into written inputs relies on)
        base_fn = compile_fn
        compile_fn = functools.partial(base_fn, inputs_distinct=True)
        compile_fn.takes_world_shapes = getattr(base_fn, "takes_world_shapes", False)
    fn = _aot_compile(fgraph, compile_fn)
    if not written:
        return fn
    as_captured = []
    functional = fn
    if gw is not None:
        # Note [Writes with grad into inputs] in functionalize.py: the copies run here, under grad.
        def functional(*inputs):
            return gw.finish(inputs, fn(*inputs))

    def run(*inputs):
        if aliased_inputs(inputs, written):
            if not as_captured:
                as_captured.append(_aot_compile(graph, getattr(compile_fn, "func", compile_fn)))
            return as_captured[0](*inputs)
        return functional(*inputs)
    for k in ("plan", "no_grad_run", "memory_plan"):
        if hasattr(fn, k):
            setattr(run, k, getattr(fn, k))
    run.functional = fn
    return run


def _aot_compile(graph, compile_fn):
    plain = graph.runner()
    needs_grad = any(graph.value(v).requires_grad for v in graph.inputs)
    if compile_fn is None:
        no_grad_run = plain
    else:
        no_grad_run = _LazyCompiled(compile_fn, graph)
        if not needs_grad:
            return _compiled_now(no_grad_run)
    if graph.num_ops == 0:
        return plain  # nothing to differentiate (the tensors a graph break hands on)
    if not needs_grad or not _C._is_grad_enabled():
        if compile_fn is not None and needs_grad and any(n.grad_enabled for n in graph.nodes):
            return plain  # enable_grad inside a no_grad caller: those nodes must record autograd
        return no_grad_run
    try:
        joint = make_joint(graph)
        if joint.num_tangents == 0 or all(v is None for v in joint.grad_values):
            return plain
        part = partition(joint)
    except AOTUnsupported as e:
        logs.aot(f"the graph runs as the eager backend: {e}")
        return plain
    if compile_fn is None:
        plan = _Plan(graph, joint, part)
    else:
        import strata
        with strata.no_grad():
            plan = _Plan(graph, joint, part, compile_fn)
    logs.aot(f"joint graph of {joint.graph.num_ops} ops: forward {part.forward.num_ops} ops, backward "
             f"{part.backward.num_ops} ops; " + part.describe())
    apply = CompiledFunction.apply
    is_grad = _C._is_grad_enabled
    passthrough = passthrough_outputs(graph)

    def run(*inputs):
        if is_grad():
            outs = apply(plan, *inputs)
            return restore_passthrough(outs, inputs, passthrough) if passthrough else outs
        return no_grad_run(*inputs)

    run.plan = plan
    run.no_grad_run = no_grad_run
    return run


def passthrough_outputs(graph):
    """[(output index, input position)] for the outputs of graph that are its inputs (the live tensors a
    graph break hands to the rest of the frame, an input returned as it is)."""
    pos = {v: i for i, v in enumerate(graph.inputs)}
    return [(k, pos[o]) for k, o in enumerate(graph.outputs) if o in pos]


def restore_passthrough(outs, inputs, passthrough):
    """Note [Inputs returned by a compiled function]
    CompiledFunction.apply returns an input that is also an output as a new alias with its own history
    (autograd.Function's rule), but the caller must get the tensor itself, as eager mode and the eager
    backend give it: at a graph break the rest of the frame writes into that tensor in place (h.mul_(w)
    after the break), and a write into an alias would leave h's autograd history stale, so gradients
    through h were wrong. The identity needs no backward: the caller's tensor carries its own history."""
    outs = list(outs)
    for k, i in passthrough:
        outs[k] = inputs[i]
    return tuple(outs)


def _aot_compile_symbolic(graph, compile_fn, syms):
    """aot_compile for a graph with symbolic sizes: with grad, the symbolic forward/backward pair of
    aot_dynamic.py (the eager backend's replay with eager autograd where it cannot be made); without
    grad, the graph functionalized with symbolic sizes where it writes into tensors (aot_dynamic.LazyNoGrad),
    compiled with compile_fn at its first such call."""
    from .aot_dynamic import aot_compile_dynamic, LazyNoGrad
    plain = graph.runner()
    needs_grad = any(graph.value(v).requires_grad for v in graph.inputs)
    no_grad_run = LazyNoGrad(compile_fn, graph, syms)
    if not needs_grad:
        return _compiled_now(no_grad_run)
    if graph.num_ops == 0:
        return plain
    if not _C._is_grad_enabled():
        if compile_fn is not None and any(n.grad_enabled for n in graph.nodes):
            return plain  # enable_grad inside a no_grad caller: those nodes must record autograd
        return no_grad_run
    try:
        run_grad = aot_compile_dynamic(graph, syms, compile_fn)
    except AOTUnsupported as e:
        logs.aot(f"the graph with symbolic sizes runs as the eager backend: {e}")
        return plain
    except Exception as e:  # noqa: BLE001 -- the replay with eager autograd is correct at every size
        logs.aot(f"the graph with symbolic sizes runs as the eager backend: {type(e).__name__}: {e}")
        return plain
    is_grad = _C._is_grad_enabled

    def run(*inputs):
        if is_grad():
            return run_grad(*inputs)
        return no_grad_run(*inputs)

    run.plan = run_grad.plan
    run.no_grad_run = no_grad_run
    return run


class _LazyCompiled:
    """A graph compiled with compile_fn (grad mode off) at its first call."""

    def __init__(self, compile_fn, graph):
        self.compile_fn = compile_fn
        self.graph = graph
        self.fn = None

    def get(self):
        if self.fn is None:
            import strata
            with strata.no_grad():
                self.fn = self.compile_fn(self.graph)
        return self.fn

    def __call__(self, *inputs):
        return (self.fn or self.get())(*inputs)


def _compiled_now(lazy):
    """A graph without inputs that require grad needs no AOT step: compile it at once."""
    return lazy.get()
