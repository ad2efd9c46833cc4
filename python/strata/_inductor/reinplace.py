"""Reinplacing: results of a functionalized graph written into buffers whose old value is dead.

Note [Reinplacing]
Functionalization (Note [Functionalization] in _dynamo/functionalize.py) turns every in-place write
into a functional op that makes a new tensor, and writes each written input once at the end. That
frees fusion but costs memory traffic where eager mode worked in place: a fresh result per op and a
copy back into the input. This pass gives results the storage of a value that dies where they are
made, in three places of the strata_cpp backend (_compile_cpp and kernel_runner in backends.py):

  * before fusion, on the graph (reinplace_graph): a node that no kernel will hold (an op without a
    lowering, such as addcmul / addcdiv / lerp) gets out= a donor, and slice_scatter /
    select_scatter / diagonal_scatter into a base whose old value is dead become a view of the
    base and a copy_ of the source into it (the base is then the result); when the source is made
    only for the scatter by a pointwise node no kernel would take with its producers, that node
    writes the view itself (out= the view, made before it; no copy). A pointwise node's donor
    is an argument with the result's dtype, sizes and strides or, when its result is the final
    value of a written input, that input (whose copy_ at the end then copies a tensor onto itself,
    which copy_ skips). Lowered ops are left alone here: out= would keep them out of kernels.
  * after fusion, lone nodes (lone_nodes): lowered pointwise nodes the schedule left out of every
    kernel, with results of LONE_MIN_BYTES or more, get out= the same way, checked against the
    kernel plan's order; the rewrite keeps every node and value id, so the fusion steps still hold.
  * after fusion, on the kernel plan (plan_kernel_donations): an output of a flat pointwise kernel
    is written into one of the kernel's full-size inputs of the same dtype and sizes whose value
    dies there. The kernel is rendered again storing that output through the input's pointer
    (cpp.render_pointwise(into=): one restrict pointer per storage, every element loaded before it
    is stored in the same iteration), and the plan's spec says so (KernelSpec::out_into): at run
    time the output is the input tensor itself, its version bumped as an in-place op bumps it; when
    the input's dtype or sizes differ, or another input of the kernel shares its storage, the
    kernel's nodes run instead.

When a donation is allowed (_Storage.can_donate). Values are grouped by storage: views, ops that
may return their input, out= results and in-place results belong to the storage of their source;
every other result starts a storage of its own. A storage is owned by the graph when it is such a
fresh result (not a constant), or when it is a graph input that the graph itself overwrites whole
later (a functionalized graph's write-back of a written input) and the caller runs the graph only on
inputs that share no storage (inputs_distinct: aot_compile sends other calls to the captured graph);
an input nobody writes is the caller's and never reinplaced. Putting result o into storage R at step d is allowed when

  1. nothing reads R's current value after d, except past a later full overwrite of R: the maker
     at d reads only the donor itself (elementwise, same geometry), and no other value of R (an
     overlapping view, as in x[1:] = x[:-1] * 2) at d or later; graph outputs count as reads at
     the end, so an input that another output aliases, or a value autograd saves (a forward
     graph's output), is never overwritten early;
  2. when R is overwritten again later (the write-back at the end), o is not read after that
     write, except by that write itself reading o elementwise (copy_(X, o), or out=X with o of the
     same geometry as an argument): then the write is in place too.

Steps are the node order before fusion (the fusion schedule keeps readers of a written storage on
their side of the write, and never sinks a node past one) and the kernel plan's steps after it
(each kernel at its last node in the schedule's order). A graph with in-place ops other than copy_
and out= writes (one as captured), writes its schemas do not declare (BatchNorm's running
statistics), symbolic sizes or autocast nodes is left as it is. Kernel outputs and
donors involved in a donation leave the arena (Note [Memory plans] in _dynamo/backends.py), whose
liveness counts a donated output as its donor's storage held longer.
strata._dynamo.config.reinplace = False turns the pass off (for comparison)."""

import strata

from .. import _C

_compile = _C._compile
_FLAGS = _C._op_flags()
_VIEW, _INPLACE, _POINTWISE = _FLAGS["view"], _FLAGS["inplace"], _FLAGS["pointwise"]
_END = 1 << 60

# Ops that may return (a view of) an input although their schema or flags do not say so.
_MAY_ALIAS = {"contiguous", "reshape", "to", "to.dtype", "to.device", "type_as", "flatten.using_ints", "unflatten.int",
              "view_as", "reshape_as", "expand_as", "alias", "detach", "squeeze", "unsqueeze", "t", "numpy_T", "real",
              "imag", "conj", "resolve_conj", "resolve_neg", "split.Tensor", "split.sizes", "split_with_sizes", "chunk",
              "unbind.int", "narrow", "select.int", "slice.Tensor", "view_as_real", "view_as_complex"}
_SCATTER_VIEW = {"slice_scatter": "slice.Tensor", "select_scatter": "select.int", "diagonal_scatter": "diagonal"}


def enabled():
    from .._dynamo import config
    return getattr(config, "reinplace", True)


def _schemas():
    from .._dynamo.functionalize import _schemas as s
    return s()


def _writes(n):
    from .._dynamo.functionalize import _writes as w
    return w(n)


def _is_tensor(a):
    return isinstance(a, _compile.Value) and a.kind == "tensor"


def _geometry(v):
    return (v.dtype, tuple(v.shape), tuple(v.stride), str(v.device))


def _contiguous(v):
    expect = 1
    for s, st in zip(reversed(v.shape), reversed(v.stride)):
        if s != 1 and st != expect:
            return False
        expect *= s
    return True


def _aliases(n):
    """Whether node n's outputs may share storage with its first tensor argument (views, ops that may
    return their input) or with the tensor it writes (out=, in-place)."""
    from .._dynamo.functionalize import _view_ops
    return bool(n.flags & (_VIEW | _INPLACE)) or n.op in _view_ops() or n.op in _MAY_ALIAS or bool(_writes(n))


def rewritable(graph):
    """True when the only writes of graph are copy_ and out= writes (a functionalized graph's write-backs,
    and what this pass makes) and it has no symbolic sizes nor autocast nodes: the graphs this pass
    understands. In-place ops (a graph as captured) and writes a schema does not declare (BatchNorm's
    running statistics) are left alone."""
    for v in graph.inputs:
        if graph.value(v).kind != "tensor":
            return False
    for n in graph.nodes:
        if n.autocast is not None:
            return False
        w = _writes(n)
        if not w:
            if n.op == "batch_norm" and n.args[5] and (n.args[3] is not None or n.args[4] is not None):
                return False
            continue
        names = [a["name"] for a in _schemas()[n.op]["args"]]
        for i in w:
            if not (n.op == "copy_" or names[i] == "out") or not _is_tensor(n.args[i]):
                return False
    return True


class _Storage:
    """Which values share storage, who reads and writes each storage at which step (Note [Reinplacing]).
    step_of: node position -> step; kernels: [(step, in_vids, out_vids)] of kernel steps (their nodes map
    to their step and are not readers themselves)."""

    def __init__(self, graph, step_of, kernels=(), kernel_of=None, inputs_distinct=False):
        self.g = graph
        self.step_of = step_of
        self.inputs_distinct = inputs_distinct
        kernel_of = kernel_of or {}
        self.parent = {}
        self.inputs = set(graph.inputs)
        self.reads = []      # (step, reader, vid); reader: ("n", pos) / ("k", k) / "out"
        self.writes = []     # (step, pos, target vid, full)
        self.producer = {}   # vid -> ("n", pos) / ("k", k)
        self.nodes = nodes = graph.nodes
        for pos, n in enumerate(nodes):
            k = kernel_of.get(pos)
            if k is not None:
                continue
            w = _writes(n)
            names = [a["name"] for a in _schemas()[n.op]["args"]] if w else []
            for o in n.outputs:
                self.producer[o] = ("n", pos)
            src = None
            if w:
                src = n.args[w[0]]
            elif _aliases(n):
                src = next((a for a in n.args if _is_tensor(a)), None)
            if src is not None:
                for o in n.outputs:
                    self.parent[o] = src.id
            st = step_of[pos]
            for i, a in enumerate(n.args):
                elems = a if isinstance(a, (list, tuple)) else (a,)
                for e in elems:
                    if not _is_tensor(e):
                        continue
                    pure_write = i in w and (names[i] == "out" or n.op == "copy_")
                    if not pure_write:
                        self.reads.append((st, ("n", pos), e.id))
                    if i in w:
                        # full: the target is a whole storage (an input or a fresh result), not a view of one
                        self.writes.append((st, pos, e.id, self.find(e.id) == e.id))
        for k, (st, ins, outs) in enumerate(kernels):
            for v in ins:
                self.reads.append((st, ("k", k), v))
            for o in outs:
                self.producer[o] = ("k", k)
        for o in graph.outputs:
            self.reads.append((_END, "out", o))
        self.reads_of = {}
        for s, reader, v in self.reads:
            self.reads_of.setdefault(v, []).append((s, reader))
        self.members = {}    # storage root -> the values in it
        for v in set(self.inputs) | set(self.producer) | set(self.parent):
            self.members.setdefault(self.find(v), set()).add(v)

    def find(self, v):
        while v in self.parent:
            v = self.parent[v]
        return v

    def family(self, root):
        return self.members.get(root, {root})

    def owned(self, root, d):
        """Whether the graph may overwrite storage root's elements at step d."""
        v = self.g.value(root)
        if v.is_constant:
            return False
        if root in self.inputs:
            if not self.inputs_distinct:
                return False  # another input may share its storage and still be read
            later = sorted((w for w in self.writes if self.find(w[2]) == root and w[0] > d), key=lambda w: w[0])
            return bool(later) and later[-1][3]
        return root in self.producer

    def next_write(self, root, d):
        later = [w for w in self.writes if self.find(w[2]) == root and w[0] > d]
        return min(later, key=lambda w: w[0]) if later else None

    def can_donate(self, d, maker, donor, o, elementwise=True):
        """Whether o, made at step d by maker (("n", pos) or ("k", k)), may take donor's storage. elementwise:
        maker reads donor only at the element it writes (donor an argument of o's geometry), or
        donor=None-like use for a donor the maker does not read."""
        R = self.find(donor)
        if not self.owned(R, d) or o in self.inputs or self.find(o) == R:
            return False
        W = self.next_write(R, d)
        for v in self.family(R):
            for s, reader in self.reads_of.get(v, ()):
                if s < d:
                    continue
                if s == d and reader == maker and v == donor and elementwise:
                    continue
                if W is not None and W[3] and s > W[0]:
                    continue
                return False
        if W is None:
            return True
        for v in self.family(self.find(o)):
            for s, reader in self.reads_of.get(v, ()):
                if s < W[0]:
                    continue
                if s == W[0] and v == o and self._in_place_write(W, o):
                    continue
                return False
        return True

    def _in_place_write(self, W, o):
        """Whether write W reads o only at the elements it writes (copy_ of o onto a full target of o's
        geometry, or out= a full target with o as an argument of the same geometry)."""
        g = self.g
        if W[1] < 0:
            return False
        n = self.nodes[W[1]]
        target = g.value(W[2])
        if not W[3] or _geometry(target) != _geometry(g.value(o)):
            return False
        if n.op == "copy_":
            return n.args[1].id == o
        return bool(n.flags & _POINTWISE) and any(_is_tensor(a) and a.id == o for a in n.args)

    def donate(self, d, maker, donor, o, full):
        """Record that o now lives in donor's storage (written at step d)."""
        R, old = self.find(donor), self.find(o)
        self.members.setdefault(R, {R}).update(self.members.pop(old, {old}))
        self.parent[o] = donor
        self.writes.append((d, maker[1] if maker[0] == "n" else -1, o, full))


# ---- before fusion: the graph -------------------------------------------------------------------

def _fusable_op(n):
    from .ir import GENERAL_LOWERINGS, LOWERINGS
    return n.op in GENERAL_LOWERINGS or n.op in LOWERINGS or n.op == "embedding"


def _final_writes(graph):
    """{value: input} for each write-back copy_(input, value) of a functionalized graph."""
    inputs = set(graph.inputs)
    out = {}
    for n in graph.nodes:
        if n.op == "copy_" and _is_tensor(n.args[0]) and n.args[0].id in inputs and _is_tensor(n.args[1]):
            out.setdefault(n.args[1].id, n.args[0].id)
    return out


def _candidate(graph, pos, n, lone):
    """Whether node n at pos is one plan_graph may rewrite (before the storage analysis)."""
    if len(n.outputs) != 1 or n.list_return or n.has_side_effects:
        return False
    if n.op in _SCATTER_VIEW:
        return True
    if not n.flags & _POINTWISE or (_fusable_op(n) and pos not in lone):
        return False
    names = n.arg_names
    return "out" in names and n.args[names.index("out")] is None


def plan_graph(graph, lone=(), inputs_distinct=False, schedule=None):
    """{position: ("out", donor vid) or ("scatter", base vid)}: the nodes reinplace_graph rewrites. lone:
    positions of lowered pointwise nodes that fusion left out of every kernel (they may take out= too).
    schedule: (step of each position, [(step, input ids, output ids)] of the kernels, position -> kernel)
    when the graph runs in a kernel plan already made (default: graph order, no kernels)."""
    nodes = graph.nodes
    cands = [pos for pos, n in enumerate(nodes) if _candidate(graph, pos, n, lone)]
    if not cands:
        return {}
    if schedule is None:
        S = _Storage(graph, {p: p for p in range(len(nodes))}, inputs_distinct=inputs_distinct)
    else:
        step_of, kernels, kernel_of = schedule
        S = _Storage(graph, step_of, kernels, kernel_of, inputs_distinct)
        cands = [p for p in cands if p not in kernel_of]
    finals = _final_writes(graph)
    plan = {}
    for pos in cands:
        n = nodes[pos]
        o = n.outputs[0]
        ov = graph.value(o)
        if ov.kind != "tensor" or not _contiguous(ov):
            continue
        maker = ("n", pos)
        d = S.step_of[pos]
        if n.op in _SCATTER_VIEW:
            base = n.args[0]
            if _is_tensor(base) and _geometry(graph.value(base.id)) == _geometry(ov) and \
                    S.can_donate(d, maker, base.id, o):
                plan[pos] = ("scatter", base.id)
                S.donate(d, maker, base.id, o, False)
                if schedule is None:
                    q = _producer_into_view(graph, nodes, pos, n, S, plan)
                    if q is not None:
                        plan[q] = ("view", pos)
                        plan[pos] = ("scatter_made", base.id)
            continue
        cands_o = []
        if o in finals and _geometry(graph.value(finals[o])) == _geometry(ov):
            X = finals[o]
            # The input is read by n only as an argument of o's geometry, if at all.
            cands_o.append(X)
        for a in n.args:
            if _is_tensor(a) and _geometry(a) == _geometry(ov) and a.id not in cands_o:
                cands_o.append(a.id)
        for donor in cands_o:
            if S.can_donate(d, maker, donor, o, elementwise=True):
                plan[pos] = ("out", donor)
                S.donate(d, maker, donor, o, S.find(donor) == donor)
                break
    return plan


def _producer_into_view(graph, nodes, pos, n, S, plan):
    """The position of the node that makes scatter n's source when it can write straight into the view of
    the base instead (out= that view; the scatter then writes nothing), else None. The source's only use
    is the scatter (through a no-op expand at most); its maker is pointwise with an out= argument and no
    kernel would take it with its own producers (no lowering, or no operand made by a lowered op); the base
    exists already and nothing reads or writes its storage between the maker and the scatter."""
    if not hasattr(S, "readers"):
        S.readers = {}
        for p, m in enumerate(nodes):
            for v in m.input_ids:
                S.readers.setdefault(v, set()).add(p)
        for v in graph.outputs:
            S.readers.setdefault(v, set()).add(-1)
    src = n.args[1]
    if not _is_tensor(src):
        return None
    o, use = src.id, pos
    p = S.producer.get(o)
    if p is None or p[0] != "n":
        return None
    p = p[1]
    if nodes[p].op == "expand" and tuple(graph.value(nodes[p].args[0].id).shape) == tuple(graph.value(o).shape):
        if S.readers.get(o) != {pos}:
            return None
        o, use = nodes[p].args[0].id, p
        p = S.producer.get(o)
        if p is None or p[0] != "n":
            return None
        p = p[1]
    m = nodes[p]
    if S.readers.get(o) != {use} or p in plan or len(m.outputs) != 1 or m.has_side_effects or \
            not m.flags & _POINTWISE or "out" not in m.arg_names or m.args[m.arg_names.index("out")] is not None:
        return None
    ov, bv = graph.value(o), graph.value(n.args[0].id)
    if ov.dtype != bv.dtype or str(ov.device) != str(bv.device) or not _contiguous(ov):
        return None
    if _fusable_op(m):
        for a in m.args:
            if _is_tensor(a):
                ap = S.producer.get(a.id)
                if ap is not None and ap[0] == "n" and _fusable_op(nodes[ap[1]]):
                    return None
    R = S.find(n.args[0].id)
    for b in (R, n.args[0].id):  # the base (and its storage) must exist where the view is made
        bp = S.producer.get(b)
        if bp is not None and (bp[0] != "n" or bp[1] >= p):
            return None
    dp, d = S.step_of[p], S.step_of[pos]
    for v in S.family(R):
        if v == n.outputs[0]:
            continue
        if any(dp <= s < d for s, _ in S.reads_of.get(v, ())):
            return None
    if any(dp <= w[0] < d for w in S.writes if S.find(w[2]) == R and w[1] != pos):
        return None
    S.parent[o] = R
    S.members.setdefault(R, {R}).add(o)
    S.writes.append((dp, p, o, False))
    return p


def reinplace_graph(graph, lone=(), inputs_distinct=False, schedule=None):
    """graph with the rewrites of plan_graph (Note [Reinplacing]), or graph itself when there are none or
    the graph is not one this pass understands. inputs_distinct: the caller never passes inputs that share
    storage (only then may an input the graph overwrites be written early). schedule: see plan_graph."""
    if not enabled() or not rewritable(graph):
        return graph
    plan = plan_graph(graph, lone, inputs_distinct, schedule)
    if lone:
        plan = {p: d for p, d in plan.items() if p in lone}
    if not plan:
        return graph
    # Made in the graph's own base grad mode (nodes recorded in it follow the caller's mode), filled
    # without grad.
    with strata.set_grad_enabled(graph.base_grad_enabled):
        ng = _compile.Graph()
    with strata.no_grad():
        return _rebuild(graph, plan, ng)


def _rebuild(graph, plan, ng):
    # The strata_cpp backend compiles and runs its graphs with grad mode off (Note [Compiled training
    # steps] in _dynamo/backends.py): the inputs are recorded without requires_grad, and the writes this
    # pass adds run without grad whatever the caller's mode, so that they are never refused as writes
    # into tensors autograd tracks.
    vmap = {}
    for vid in graph.inputs:
        v = graph.value(vid)
        meta = strata.empty_strided(tuple(v.shape), tuple(v.stride), dtype=v.dtype, device="meta")
        vmap[vid] = ng.add_input(v.name, meta, device=v.device)
    # Constants are added where their ids fall among the nodes' outputs, so that a rebuild that maps nodes
    # one to one gives every value its old id (same_values).
    pending = sorted(graph.constants)

    def constants_before(limit):
        while pending and pending[0] < limit:
            vid = pending.pop(0)
            v = graph.value(vid)
            vmap[vid] = ng.add_constant(v.constant, v.name)

    def arg(a):
        if isinstance(a, _compile.Value):
            return ng.value(vmap[a.id]) if a.id in vmap else a
        if isinstance(a, (list, tuple)):
            return [arg(e) for e in a]
        return a

    nodes = graph.nodes

    def scatter_view(n, args):
        base = args[0]
        if n.op == "slice_scatter":
            vargs = [base] + args[2:6]
        elif n.op == "select_scatter":
            vargs = [base] + args[2:4]
        else:
            vargs = [base] + args[2:5]
        return ng.add_node(_SCATTER_VIEW[n.op], vargs, source=n.source, grad_enabled=False)[0]

    for pos, n in enumerate(nodes):
        constants_before(min(n.outputs, default=1 << 62))
        args = [arg(a) for a in n.args]
        p = plan.get(pos)
        if p is not None and p[0] == "view":
            # the scatter at p[1] made here: this node writes the view of its base
            sc = nodes[p[1]]
            view = scatter_view(sc, [arg(a) for a in sc.args[:1]] + [None] + list(sc.args[2:]))
            args[n.arg_names.index("out")] = ng.value(view)
            outs = ng.add_node(n.op, args, source=n.source, grad_enabled=False)
            vmap[n.outputs[0]] = outs[0]
            continue
        if p is not None and p[0] == "scatter_made":
            vmap[n.outputs[0]] = args[0].id
            continue
        if p is not None and p[0] == "scatter":
            view = scatter_view(n, args)
            ng.add_node("copy_", [ng.value(view), args[1], False], source=n.source, grad_enabled=False)
            vmap[n.outputs[0]] = args[0].id
            continue
        grad = n.grad_enabled
        if p is not None:
            names = [a["name"] for a in _schemas()[n.op]["args"]]
            args[names.index("out")] = ng.value(vmap[p[1]])
            grad = False
        outs = ng.add_node(n.op, args, source=n.source, grad_enabled=grad)
        for o, no in zip(n.outputs, outs):
            vmap[o] = no
    constants_before(1 << 62)
    ng.set_outputs([vmap[o] for o in graph.outputs])
    return ng


def same_values(a, b):
    """Whether graphs a and b have the same inputs, constants and node outputs by id (a rebuild that
    mapped nodes one to one): then fusion steps made for a hold for b."""
    if list(a.inputs) != list(b.inputs) or sorted(a.constants) != sorted(b.constants):
        return False
    na, nb = a.nodes, b.nodes
    return len(na) == len(nb) and all(list(x.outputs) == list(y.outputs) and x.op == y.op for x, y in zip(na, nb))


# A fresh result this large comes from new pages (glibc's default mmap threshold), whose first touch
# costs more than the op; smaller ones are recycled by the allocator and not worth a second fusion.
LONE_MIN_BYTES = 128 * 1024


def lone_nodes(graph, kernel_positions):
    """Positions of lowered pointwise nodes with an out= argument outside kernel_positions (the nodes the
    kernels replace) whose result has at least LONE_MIN_BYTES: fusion left them alone, so out= costs them
    nothing (the graph is fused again when one of them is rewritten)."""
    out = []
    for pos, n in enumerate(graph.nodes):
        if pos in kernel_positions or not n.flags & _POINTWISE or not _fusable_op(n) or len(n.outputs) != 1:
            continue
        v = graph.value(n.outputs[0])
        if v.kind != "tensor" or v.dtype is None:
            continue
        nbytes = v.dtype.itemsize
        for d in v.shape:
            nbytes *= d
        names = n.arg_names
        if nbytes >= LONE_MIN_BYTES and "out" in names and n.args[names.index("out")] is None:
            out.append(pos)
    return out


# ---- after fusion: the kernel plan --------------------------------------------------------------

def plan_kernel_donations(graph, specs, steps_of_kernels, step_of, kernel_of, inputs_distinct=False):
    """{kernel index: {output index: input index}} for the flat pointwise kernels of a kernel plan
    (specs as backends._kernel_specs makes them, each with its _KernelStep last) whose outputs may be
    written into an input (Note [Reinplacing]); also {donated output vid: donor vid}."""
    if not enabled():
        return {}, {}
    # a kernel output needs a full-size input of its geometry to go into
    if not any(not sp[1] and sp[10][1] is None and getattr(sp[-1], "kernel", None) is not None and
               {_geometry(graph.value(v)) for v in sp[6]} & {_geometry(graph.value(v)) for v in sp[7]}
               for sp in specs) or not rewritable(graph):
        return {}, {}
    kernels = [(steps_of_kernels[k], list(sp[6]), list(sp[7])) for k, sp in enumerate(specs)]
    S = _Storage(graph, step_of, kernels, kernel_of, inputs_distinct)
    order = sorted(range(len(specs)), key=lambda k: kernels[k][0])
    into, donated = {}, {}
    for k in order:
        sp = specs[k]
        st = sp[-1]
        if sp[1] or sp[10][1] is not None or getattr(st, "kernel", None) is None:
            continue
        kir = st.kernel
        d, ins, outs = kernels[k]
        used = set()
        for j, o in enumerate(outs):
            ov = graph.value(o)
            for i, a in enumerate(ins):
                av = graph.value(a)
                if i in used or not any(kir.inputs[i].strides) or _geometry(av) != _geometry(ov) \
                        or not _contiguous(av) or ins.count(a) != 1:
                    continue
                if S.can_donate(d, ("k", k), a, o):
                    into.setdefault(k, {})[j] = i
                    donated[o] = a
                    used.add(i)
                    S.donate(d, ("k", k), a, o, S.find(a) == a)
                    break
    return into, donated


def render_into(st, into):
    """st's kernel rendered with outputs stored into inputs (into: {output index: input index}): the
    loaded function, which the caller keeps alive as long as a plan holds its address, and its source."""
    from . import codecache, cpp
    comment = (st.comment or "") + "\noutputs written into inputs: " + \
        ", ".join(f"out{j} -> in{i}" for j, i in sorted(into.items()))
    source = cpp.render_pointwise(st.kernel, comment, into=into)
    return codecache.load(source), source
