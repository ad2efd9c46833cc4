"""Functionalization: a captured graph rewritten so that no node writes into a tensor.

Note [Functionalization]
A captured graph records what eager mode dispatched: in-place ops (`fill_`, `zero_`, `copy_`,
`index_put_`), out= writes (strata records `a.add_(b)` as `add(a, b, out=a)`), views, and ops that
write into their arguments without saying so in their schema (BatchNorm's running statistics).
The eager backend replays that as it is. The code generator and AOT autograd want pure data flow:
a write forbids fusing the value it writes with its readers, and autograd must clone what is
written. functionalize(graph) returns a new graph with the same inputs and outputs in which

  * every tensor value belongs to a base (a graph input or the result of a node that is not a view)
    and is reached from it by a chain of view steps (select, slice, view, transpose, ...);
  * a write into a value becomes the functional op (the same op with out=None, `index_put` for
    `index_put_`, `full` for `fill_`, the source expanded and cast for `copy_`) whose result is the
    new content of that value; a write into a view is then carried back to the base through the
    inverse of each view step (select_scatter, slice_scatter, diagonal_scatter, a reshape or a
    transposition back), so the base gets a new value in the new graph;
  * a view read after its base got a new value is made again from that value (the chain replayed),
    so later readers see the write;
  * BatchNorm in training with running statistics becomes batch_norm without them plus the
    running-statistics update (mean and unbiased variance of the batch, recorded without grad);
  * each graph input that was written gets one `copy_` of its final value at the end (recorded
    without grad unless a write to it was); outputs that are inputs or views of inputs are read
    from the input after that copy, so they alias the caller's tensor as in eager mode.

Writes the pass cannot express functionally keep their op, applied to a clone of the current value
(random fills such as uniform_, the fused optimizer steps, embedding_renorm_): the graph then writes
only into a tensor it made itself, which nothing else reads. A graph the pass cannot rewrite
(FunctionalizeUnsupported: a write into a view with no inverse such as expand or as_strided, into
the result of an op that may or may not alias its input, an out= write that resizes, a write under
grad into an input that requires grad, autocast nodes, non-tensor inputs) is used as captured;
STRATA_LOGS=aot says why. strata._dynamo.config.functionalize = False turns the pass off.
"""

from .. import _C
from . import logs

_compile = _C._compile
_FLAGS = _C._op_flags()
_VIEW = _FLAGS["view"]
_INPLACE = _FLAGS["inplace"]
# The write-back reuses the final value's pointwise op with out=input where it can (write_back);
# False: always a copy_ (for comparison).
REINPLACE = True

__all__ = ["functionalize", "maybe_functionalize", "FunctionalizeUnsupported", "mutating_nodes"]


class FunctionalizeUnsupported(RuntimeError):
    """The graph has a write the pass cannot rewrite; it is used as captured."""


_SCHEMAS = None


def _schemas():
    global _SCHEMAS
    if _SCHEMAS is None:
        _SCHEMAS = {}
        for s in _C._op_schemas():
            full = s["name"] + ("." + s["overload"] if s["overload"] else "")
            _SCHEMAS[full] = s
    return _SCHEMAS


_VIEW_OPS = None


def _view_ops():
    """Ops whose result is (a list of) views of their first argument by their schema (`-> Tensor(a)`),
    whether or not they carry the view flag (composites such as t, narrow, reshape do not)."""
    global _VIEW_OPS
    if _VIEW_OPS is None:
        import re
        _VIEW_OPS = {full for full, s in _schemas().items()
                     if re.search(r"Tensor\(\w( -> \*)?\)", s["schema"].split("->")[-1])}
    return _VIEW_OPS


def _writes(n):
    """Positions of the arguments node n writes into (a non-None write argument)."""
    s = _schemas().get(n.op)
    if s is None:
        return []
    args = n.args
    return [i for i, a in enumerate(s["args"]) if a["is_write"] and args[i] is not None]


def _bn_updates(n):
    """BatchNorm in training with running statistics writes them (not said by its schema)."""
    if n.op != "batch_norm":
        return False
    a = n.args
    return bool(a[5]) and (a[3] is not None or a[4] is not None)


def mutating_nodes(graph):
    """The nodes of graph that write into a tensor (in-place ops, out= writes, BatchNorm's running
    statistics in training)."""
    return [n for n in graph.nodes if _writes(n) or _bn_updates(n)]


# View ops whose write-back is a reshape to the parent's shape (they keep the element order).
_RESHAPES = {"view", "reshape", "_unsafe_view", "flatten.using_ints", "unflatten.int", "squeeze", "squeeze.dim",
             "squeeze.dims", "unsqueeze", "view_as", "reshape_as", "alias", "contiguous", "detach", "conj",
             "resolve_conj"}
# Ops that return their input or a view of it depending on the input's layout (or dtype).
_MAY_VIEW = {"reshape", "flatten.using_ints", "unflatten.int", "contiguous", "reshape_as", "conj", "resolve_conj"}
# Ops that always return a view of their (first) input.
_SPLITS = {"split.Tensor", "split.sizes", "split_with_sizes", "chunk", "unbind.int"}


def _contiguous(v):
    expect, st = 1, []
    for s in reversed(v.shape):
        st.append(expect)
        expect *= max(s, 1)
    st.reverse()
    return all(s == 1 or a == b for s, a, b in zip(v.shape, v.stride, st))


class _Base:
    __slots__ = ("cur", "version", "is_input", "vid", "written", "grad_write", "unknown_alias", "lost_grad",
                 "grad_out")

    def __init__(self, vid, cur, is_input):
        self.vid, self.cur, self.is_input = vid, cur, is_input
        self.version = 0
        self.written = False
        self.grad_write = False
        self.unknown_alias = False
        # Written without grad over a value that requires grad: eager mode keeps that tensor's history
        # (autograd sees the old graph), the new value has none, so a later read under grad cannot use it.
        self.lost_grad = False
        # An input written under grad with a value that requires grad (grad_writes mode): its final value
        # is an extra graph output that the caller copies into it (Note [Writes with grad into inputs]).
        self.grad_out = False


class _Functionalizer:
    def __init__(self, graph, ng, grad_writes=False, clone_inputs=()):
        self.g = graph
        self.ng = ng
        self.grad_writes = grad_writes
        self.clone_inputs = clone_inputs   # positions of inputs read through a clone made first
        self.grad_outputs = []      # positions of the inputs whose final value is an extra output
        self.output_inputs = {}     # output index -> position of the grad-written input it is
        self.info = {}      # old tensor value id -> (_Base, chain of (node, output index))
        self.cache = {}     # old view value id -> (new value id, base version)
        self.consts = {}
        self.kept_writes = 0
        self.grad_read = False
        self.read_ids = set()   # new values read by a node so far

    # ---- values ------------------------------------------------------------------------------

    def new_value(self, vid):
        return self.ng.value(vid)

    def read(self, old):
        """The new graph's value for old value id old, as of now."""
        if old in self.consts:
            return self.consts[old]
        v = self.g.value(old)
        if v.is_constant:
            c = v.constant
            if v.kind == "tensor":
                nv = self.ng.value(self.ng.add_constant(c, v.name))
            else:
                nv = c
            self.consts[old] = nv
            return nv
        base, chain = self.info[old]
        if base.lost_grad and self.grad_read:
            raise FunctionalizeUnsupported(f"{self.g.value(old).name!r} was written without grad and is read "
                                           "with grad: the functional value would have no autograd history")
        if not chain:
            self.read_ids.add(base.cur)
            return self.ng.value(base.cur)
        hit = self.cache.get(old)
        if hit is not None and hit[1] == base.version:
            return self.ng.value(hit[0])
        vid = self.replay(base.cur, chain)
        self.cache[old] = (vid, base.version)
        return self.ng.value(vid)

    def replay(self, vid, chain):
        self.read_ids.add(vid)
        for step in chain:
            vid = self.replay_step(vid, step)
        return vid

    def replay_step(self, vid, step):
        n, k = step
        args = list(n.args)
        args[0] = self.ng.value(vid)
        for i in range(1, len(args)):
            args[i] = self.arg(args[i])
        outs = self.ng.add_node(n.op, args, source=n.source, grad_enabled=n.grad_enabled)
        return outs[k]

    def arg(self, a):
        if isinstance(a, _compile.Value):
            return self.read(a.id)
        if isinstance(a, (list, tuple)):
            return [self.arg(e) for e in a]
        return a

    def add(self, op, args, n, grad_enabled=None):
        ge = n.grad_enabled if grad_enabled is None else grad_enabled
        return self.ng.add_node(op, args, source=n.source, grad_enabled=ge)

    # ---- writes ------------------------------------------------------------------------------

    def write(self, old, new_vid, n):
        """old (a value of the captured graph) now holds new_vid's content."""
        base, chain = self.info[old]
        if base.unknown_alias:
            raise FunctionalizeUnsupported(f"{n.op} writes into a tensor related to the result of an op that may "
                                           "or may not return a view of its input")
        ov = self.g.value(old)
        nv = self.ng.value(new_vid)
        if nv.dtype != ov.dtype:
            new_vid = self.add("_to_copy", [nv, ov.dtype, None], n)[0]
            nv = self.ng.value(new_vid)
        if list(nv.shape) != list(ov.shape):
            new_vid = self.add("expand", [nv, list(ov.shape), False], n)[0]
        if chain:
            parents = [base.cur]
            for step in chain[:-1]:
                parents.append(self.replay_step(parents[-1], step))
            x = new_vid
            for step, parent in zip(reversed(chain), reversed(parents)):
                x = self.unview(step, parent, x, n)
            new_vid = x
        elif list(self.ng.value(new_vid).stride) and not _dense(self.ng.value(new_vid)):
            # An expanded source (copy_ of a broadcast value) is made a tensor of its own.
            new_vid = self.add("clone", [self.ng.value(new_vid)], n)[0]
        base.cur = new_vid
        base.version += 1
        base.written = True
        if not n.grad_enabled and (ov.requires_grad or self.g.value(base.vid).requires_grad):
            base.lost_grad = True
        if n.grad_enabled:
            base.grad_write = True
            if base.is_input and (self.g.value(base.vid).requires_grad or
                                  any(self.g.value(o).requires_grad for o in getattr(n, "outputs", ()))):
                # eager mode gives the input an autograd history of its own (a copy inside the graph
                # cannot): with grad_writes the caller copies the final value in, under grad
                if self.grad_writes:
                    base.grad_out = True
                    return
                raise FunctionalizeUnsupported(f"{n.op} writes under grad mode into input "
                                               f"{self.g.value(base.vid).name!r} a value that requires grad")

    def unview(self, step, parent, x, n):
        """The parent's new value after writing x into step's view of it."""
        vn, k = step
        op, a = vn.op, vn.args
        P = self.ng.value(parent)
        X = self.ng.value(x)
        if op == "select.int":
            return self.add("select_scatter", [P, X, a[1], a[2]], n)[0]
        if op == "slice.Tensor":
            return self.add("slice_scatter", [P, X, a[1], a[2], a[3], a[4]], n)[0]
        if op == "narrow":
            return self.add("slice_scatter", [P, X, a[1], a[2], a[2] + a[3], 1], n)[0]
        if op == "diagonal":
            return self.add("diagonal_scatter", [P, X, a[1], a[2], a[3]], n)[0]
        if op == "unbind.int":
            return self.add("select_scatter", [P, X, a[1], k], n)[0]
        if op in _SPLITS:
            dim = a[2] if op != "chunk" else a[2]
            dim = dim % len(P.shape)
            outs = vn.outputs
            start = sum(self.g.value(o).shape[dim] for o in outs[:k])
            end = start + self.g.value(outs[k]).shape[dim]
            return self.add("slice_scatter", [P, X, dim, start, end, 1], n)[0]
        if op in _RESHAPES:
            if list(X.shape) == list(P.shape):
                return x
            return self.add("reshape", [X, list(P.shape)], n)[0]
        if op in ("transpose.int", "swapaxes", "swapdims"):
            return self.add("transpose.int", [X, a[1], a[2]], n)[0]
        if op == "t":
            return self.add("t", [X], n)[0] if len(P.shape) == 2 else x
        if op == "permute":
            dims = [d % len(P.shape) for d in a[1]]
            inv = [0] * len(dims)
            for i, d in enumerate(dims):
                inv[d] = i
            return self.add("permute", [X, inv], n)[0]
        raise FunctionalizeUnsupported(f"{n.op} writes into a view made by {op}, which has no functional inverse here")

    # ---- nodes -------------------------------------------------------------------------------

    def run(self):
        g, ng = self.g, self.ng
        for vid in g.inputs:
            v = g.value(vid)
            if v.kind != "tensor":
                raise FunctionalizeUnsupported(f"input {v.name!r} is a {v.kind}")
            nid = ng.add_input(v.name, _meta_of(v), device=v.device)
            self.info[vid] = (_Base(vid, nid, True), ())
        for pos in self.clone_inputs:
            base = self.info[g.inputs[pos]][0]
            base.cur = self.add("clone", [ng.value(base.cur)], _Src(""), grad_enabled=True)[0]
        for n in g.nodes:
            if n.autocast is not None:
                raise FunctionalizeUnsupported("a node runs under autocast")
            self.grad_read = n.grad_enabled
            self.node(n)
        self.write_back()
        outs = []
        for k, o in enumerate(g.outputs):
            self.grad_read = g.value(o).requires_grad
            base, chain = self.info.get(o, (None, ()))
            if base is not None and base.grad_out:
                if chain:
                    raise FunctionalizeUnsupported(f"output {g.value(o).name!r} is a view of input "
                                                   f"{g.value(base.vid).name!r}, written under grad")
                # The input itself, written under grad: the caller returns its tensor after the copy.
                self.output_inputs[k] = g.inputs.index(base.vid)
                outs.append(base.cur)
                continue
            v = self.read(o) if o in self.info or g.value(o).is_constant else None
            if v is None:
                raise FunctionalizeUnsupported(f"output {g.value(o).name!r} is not a tensor of the graph")
            if isinstance(v, _compile.Value):
                # An output that is an input (untouched, or written and copied back) is the input itself.
                base, chain = self.info.get(o, (None, ()))
                if base is not None and base.is_input and not chain:
                    v = ng.value(ng.inputs[g.inputs.index(base.vid)])
                outs.append(v.id)
            else:
                raise FunctionalizeUnsupported(f"output {g.value(o).name!r} is not a tensor value")
        for pos in self.grad_outputs:
            outs.append(self.info[g.inputs[pos]][0].cur)
        ng.set_outputs(outs)
        ng.eliminate_dead_code()
        return ng

    def write_back(self):
        """The end of the graph: each written input gets its final value, once (Note [Functionalization]).
        When that value's node is a pointwise op with an out= argument whose result nothing else reads,
        the node is made again writing into the input (out=input; the first one becomes dead) instead of
        a copy_, which would be one more pass over the tensor: a write the caller's tensor needs anyway,
        at the end of the graph, so it blocks no fusion."""
        g, ng = self.g, self.ng
        nodes = ng.nodes
        producer = {o: n for n in nodes for o in n.outputs}
        readers = {}
        for n in nodes:
            for v in n.input_ids:
                readers[v] = readers.get(v, 0) + 1
        alias_of = {v: v for v in ng.inputs}    # new value -> the input it is (a view of)
        views = _view_ops()
        for n in nodes:
            ids = n.input_ids
            if (n.flags & _VIEW or n.op in views) and ids and ids[0] in alias_of:
                for o in n.outputs:
                    alias_of[o] = alias_of[ids[0]]
        out_reads = set()
        for o in g.outputs:
            if o in self.info and not self.info[o][0].is_input:
                out_reads.add(self.info[o][0].cur)
        self.written_inputs = []
        bases = []
        for pos, vid in enumerate(g.inputs):
            base = self.info[vid][0]
            if base.written:
                self.written_inputs.append(pos)
                if base.grad_out:
                    self.grad_outputs.append(pos)
                else:
                    bases.append((pos, base))
        self.grad_read = False
        # A final value that is (a view of) an input is copied first: the writes below change inputs.
        for pos, base in bases:
            if base.cur in alias_of:
                base.cur = self.add("clone", [ng.value(base.cur)], _Src(""), grad_enabled=base.grad_write)[0]
        for pos in self.grad_outputs:
            base = self.info[g.inputs[pos]][0]
            if base.cur in alias_of:
                base.cur = self.add("clone", [ng.value(base.cur)], _Src(""), grad_enabled=True)[0]
        done = set()
        for pos, base in bases:
            inp = ng.inputs[pos]
            v = base.cur
            n = producer.get(v)
            out = None
            if REINPLACE and n is not None and readers.get(v, 0) == 0 and v not in out_reads and len(n.outputs) == 1 \
                    and n.flags & _FLAGS["pointwise"]:
                names = [a["name"] for a in _schemas()[n.op]["args"]]
                args = n.args
                vv, iv = ng.value(v), ng.value(inp)
                ok = ("out" in names and args[names.index("out")] is None and vv.dtype == iv.dtype
                      and list(vv.shape) == list(iv.shape) and list(vv.stride) == list(iv.stride))
                for a in (args if ok else ()):
                    for e in (a if isinstance(a, (list, tuple)) else (a,)):
                        if isinstance(e, _compile.Value) and e.id in alias_of and (
                                alias_of[e.id] in done or (alias_of[e.id] == inp and e.id != inp)):
                            ok = False  # it reads an input already written, or a view of its target
                if ok:
                    args = list(args)
                    args[names.index("out")] = ng.value(inp)
                    out = self.add(n.op, args, _Src(n.source), grad_enabled=base.grad_write)[0]
            if out is None:
                out = self.add("copy_", [ng.value(inp), ng.value(v), False], _Src(""), grad_enabled=base.grad_write)[0]
            done.add(inp)
            base.cur, base.version = out, base.version + 1

    def fresh(self, n, outs):
        for o in outs:
            if self.g.value(o).kind == "tensor":
                self.info[o] = (_Base(o, None, False), ())
        return outs

    def node(self, n):
        w = _writes(n)
        if _bn_updates(n):
            return self.batch_norm(n)
        if not w:
            if n.flags & _VIEW or n.op in _view_ops():
                return self.view(n)
            args = [self.arg(a) for a in n.args]
            new = self.add(n.op, args, n)
            for o, nid in zip(n.outputs, new):
                if self.g.value(o).kind == "tensor":
                    self.info[o] = (_Base(o, nid, False), ())
            return
        names = self.names(n)
        if names[w[0]] == "out" and len(w) == 1:
            return self.out_write(n, w[0])
        op = n.op
        if op in ("copy_", "fill_", "zero_", "index_put_") and len(n.outputs) == 1:
            return self.inplace(n)
        return self.kept(n, w)

    def names(self, n):
        return [a["name"] for a in _schemas()[n.op]["args"]]

    def view(self, n):
        src = n.args[0]
        if not isinstance(src, _compile.Value):
            raise FunctionalizeUnsupported(f"{n.op} without a tensor argument")
        if self.g.value(src.id).is_constant:
            args = [self.arg(a) for a in n.args]
            new = self.add(n.op, args, n)
            for o, nid in zip(n.outputs, new):
                self.info[o] = (_Base(o, nid, False), ())
            return
        base, chain = self.info[src.id]
        args = [self.arg(a) for a in n.args]
        new = self.add(n.op, args, n)
        sv = self.g.value(src.id)
        aliases = True
        if n.op == "contiguous" and not _contiguous(sv):
            # a copy, a tensor of its own
            for o, nid in zip(n.outputs, new):
                self.info[o] = (_Base(o, nid, False), ())
            return
        if n.op in ("conj", "resolve_conj"):
            aliases = not sv.dtype.is_complex
        elif n.op in _MAY_VIEW:
            aliases = _contiguous(sv)
        for k, (o, nid) in enumerate(zip(n.outputs, new)):
            if not aliases:
                # reshape of a non-contiguous tensor: a copy or a view, which the graph cannot tell.
                base.unknown_alias = True
                b = _Base(o, nid, False)
                b.unknown_alias = True
                self.info[o] = (b, ())
                continue
            self.info[o] = (base, tuple(chain) + ((n, k),))
            self.cache[o] = (nid, base.version)

    def out_write(self, n, i):
        out = n.args[i]
        ov, rv = self.g.value(out.id), self.g.value(n.outputs[0])
        if list(ov.shape) != list(rv.shape):
            raise FunctionalizeUnsupported(f"{n.op} resizes its out= tensor from {list(ov.shape)} to {list(rv.shape)}")
        args = [self.arg(a) for a in n.args]
        args[i] = None
        new = self.add(n.op, args, n)[0]
        self.write(out.id, new, n)
        self.alias_result(n, out.id)

    def alias_result(self, n, target):
        base, chain = self.info[target]
        self.info[n.outputs[0]] = (base, chain)
        for o in n.outputs[1:]:
            self.fresh(n, [o])

    def inplace(self, n):
        op = n.op
        self_v = n.args[0]
        ov = self.g.value(self_v.id)
        if op == "copy_":
            new = self.read(n.args[1].id).id
        elif op == "index_put_":
            args = [self.arg(a) for a in n.args]
            new = self.add("index_put", args, n)[0]
        else:
            if str(ov.device) != "cpu":
                return self.kept(n, [0])
            value = 0 if op == "zero_" else n.args[1]
            new = self.add("full", [list(ov.shape), value, ov.dtype, None, None], n)[0]
        self.write(self_v.id, new, n)
        self.alias_result(n, self_v.id)

    def kept(self, n, w):
        """A write with no functional form here: the op runs on clones of what it writes."""
        args = list(n.args)
        clones = {}
        for i in range(len(args)):
            if i in w:
                base, chain = self.info[args[i].id]
                if not base.is_input and not chain and base.cur not in self.read_ids:
                    # a tensor the graph made and nothing has read (empty(...).uniform_()): no clone
                    clones[i] = base.cur
                    args[i] = self.read(args[i].id)
                    continue
                cur = self.read(args[i].id)
                clones[i] = self.add("clone", [cur], n)[0]
                args[i] = self.ng.value(clones[i])
            else:
                args[i] = self.arg(args[i])
        new = self.add(n.op, args, n)
        self.kept_writes += 1
        for i in w:
            # The op's result is its first written argument; the others hold their clone.
            val = new[0] if i == w[0] and len(new) >= 1 else clones[i]
            self.write(n.args[i].id, val, n)
        if new:
            self.alias_result(n, n.args[w[0]].id)

    def batch_norm(self, n):
        """batch_norm(training, running stats) = batch_norm without them + the running-statistics update."""
        a = n.args
        x = self.arg(a[0])
        args = [self.arg(e) for e in a]
        args[3] = args[4] = None
        out = self.add("batch_norm", args, n)[0]
        self.fresh(n, n.outputs)
        self.info[n.outputs[0]][0].cur = out
        xv = self.g.value(a[0].id)
        dims = [d for d in range(len(xv.shape)) if d != 1]
        count = 1
        for d in dims:
            count *= xv.shape[d]
        momentum = a[6]
        if count == 0:
            raise FunctionalizeUnsupported("batch_norm on an empty batch")
        # As the kernel does: batch statistics in float64, the update in the statistics' dtype.
        import strata
        stats = self.ng.value(self.add("_to_copy", [x, strata.float64, None], n, False)[0])
        if a[3] is not None:
            mean = self.ng.value(self.add("mean", [stats, dims, False, None], n, False)[0])
            self.write(a[3].id, self.blend(self.read(a[3].id), mean, momentum, n), _NoGrad(n))
        if a[4] is not None:
            var = self.ng.value(self.add("var.dim", [stats, dims, True, False], n, False)[0])
            self.write(a[4].id, self.blend(self.read(a[4].id), var, momentum, n), _NoGrad(n))

    def blend(self, old, new, momentum, n):
        """(1 - momentum) * old + momentum * new (new cast to old's dtype first), recorded without grad."""
        new = self.ng.value(self.add("_to_copy", [new, old.dtype, None], n, False)[0])
        keep = self.ng.value(self.add("mul", [old, 1.0 - momentum, None], n, False)[0])
        part = self.ng.value(self.add("mul", [new, momentum, None], n, False)[0])
        return self.add("add", [keep, part, 1, None], n, False)[0]


class _Src:
    def __init__(self, source):
        self.source = source
        self.grad_enabled = False


class _NoGrad:
    def __init__(self, n):
        self.source = n.source
        self.op = n.op
        self.grad_enabled = False


def _dense(v):
    return all(s == 1 or st != 0 for s, st in zip(v.shape, v.stride))


def _meta_of(v):
    import strata
    m = strata.empty_strided(tuple(v.shape), tuple(v.stride), dtype=v.dtype, device="meta")
    if v.requires_grad:
        m.requires_grad_(True)
    return m


class GradWrites:
    """Note [Writes with grad into inputs]
    Eager mode gives an input written under grad with a value that requires grad (`buf.add_(w * 2)`, buf
    not requiring grad) an autograd history of its own: buf.grad_fn, and gradients reach w through buf.
    A copy inside the graph cannot do that (the graph runs inside CompiledFunction, with no autograd of its
    own), and the captured graph's write made AOT autograd's joint trace record the in-place derivative's
    write into a zero-filled buffer, which the partition did not follow (w got a zero gradient). With
    grad_writes the pass leaves such an input unwritten: its final value is an extra graph output
    (after the graph's own outputs, in `inputs` order) and the caller copies it into the input under
    grad (`buf.copy_(new)` outside the compiled function), so the input's history is the copy's and
    gradients flow through CompiledFunctionBackward. A graph output that is that input itself
    (`return buf`) is the new value in the graph; `outputs` maps its index to the input's position, and
    the caller returns the input's tensor instead, as eager mode does. A view of such an input as an
    output is not rewritten (FunctionalizeUnsupported)."""

    def __init__(self, inputs, outputs):
        self.inputs = inputs        # positions of the inputs, in the order of the extra outputs
        self.outputs = outputs      # graph output index -> input position

    def finish(self, inputs, outs):
        """After the graph ran: the copies into the inputs, then the graph's own outputs."""
        import strata
        n = len(outs) - len(self.inputs)
        with strata.enable_grad():
            for pos, new in zip(self.inputs, outs[n:]):
                inputs[pos].copy_(new)
        outs = list(outs[:n])
        for k, pos in self.outputs.items():
            outs[k] = inputs[pos]
        return tuple(outs)


def functionalize(graph, with_written=False, grad_writes=False):
    """A new graph with graph's inputs and outputs and no writes (Note [Functionalization]); raises
    FunctionalizeUnsupported when a write cannot be rewritten. with_written: also the positions of the
    inputs the graph writes into (copied back at its end). grad_writes: an input written under grad with
    a value that requires grad is not written by the graph (Note [Writes with grad into inputs]); returns
    (graph, written positions, GradWrites or None)."""
    import strata
    # Made in the caller's grad mode (as the captured graph was): nodes recorded under another mode
    # switch to it when they run.
    f = _Functionalizer(graph, _compile.Graph(), grad_writes=grad_writes)
    with strata.no_grad():
        ng = f.run()
    if grad_writes and f.grad_outputs:
        # The caller writes those inputs after the graph ran, while a backward may still need their old
        # value: the graph reads them through a clone (which the partition can save).
        f = _Functionalizer(graph, _compile.Graph(), grad_writes=True, clone_inputs=list(f.grad_outputs))
        with strata.no_grad():
            ng = f.run()
    if grad_writes:
        gw = GradWrites(list(f.grad_outputs), dict(f.output_inputs)) if f.grad_outputs else None
        return ng, f.written_inputs, gw
    return (ng, f.written_inputs) if with_written else ng


def maybe_functionalize(graph):
    """(graph functionalized, positions of the inputs it writes, GradWrites or None) when
    strata._dynamo.config.functionalize is on and graph writes into a tensor; (graph, None, None)
    otherwise and when the pass cannot rewrite it (STRATA_LOGS=aot says why)."""
    from . import config
    if not config.functionalize or not mutating_nodes(graph):
        return graph, None, None
    try:
        return functionalize(graph, grad_writes=True)
    except FunctionalizeUnsupported as e:
        logs.aot(f"functionalization skipped, the graph runs as captured: {e}")
        return graph, None, None


def aliased_inputs(inputs, written):
    """True when an input the graph writes shares storage with another tensor input: the functional graph
    treats inputs as distinct tensors, so such a call runs the graph as captured."""
    for i in written:
        p = inputs[i]._storage_ptr()
        for j, t in enumerate(inputs):
            if j != i and t._storage_ptr() == p:
                return True
    return False
