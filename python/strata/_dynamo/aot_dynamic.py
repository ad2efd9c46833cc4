"""AOT autograd for graphs with symbolic sizes (Note [Symbolic sizes through AOT autograd]).

Note [Symbolic sizes through AOT autograd]
A captured graph with symbolic sizes (symshape.py) records its nodes at the capture sizes (the hint);
sizes that depend on a symbol reach the graph's nodes as int graph inputs. AOT autograd's joint trace
cannot see those: the backward's ops are called by the autograd engine from C++ with sizes it reads off
tensors (sum_to's target, expand's size, a view's shape, a mean's element count), so the recorder
writes them as constants. As capture does for each op (two worlds), this module does it for the whole
joint graph, in four worlds (_worlds: the hint, the probe, the check and hint + 2 + 3 * index, which
changes parity where the check does not):

  1. the captured graph is replayed on Meta at each world's sizes, recording four graphs of the same
     nodes (`_rerecord`); each is functionalized (functionalize.py, the same pass as for static graphs)
     and traced into a joint graph (aot.make_joint);
  2. the four joint graphs must have the same structure (ops, value numbering, outputs); an argument
     that differs between them is an int (an int argument, an element of an int list, an integral
     Scalar), which becomes the expression over the symbols that gives all four values
     (symshape.candidates: input dims, products of consecutive dims, sums, small multiples and
     quotients, and the captured graph's own symbolic int inputs), or a float (a mean's 1 / numel, var's
     2 / (n - 1), passed where the schema takes a Tensor, as a wrapped number), which becomes k * e or
     k / e over such an expression (FloatOfSize: a 0-d float64 tensor input); anything else that
     differs refuses;
  3. the joint graph is made again at the hint (`_rebuild`) with one input per expression (after the
     primals, before the tangents); a node with an int argument that is an expression is recorded
     through the Python binding with the int given as a SymInt, so the recorded node reads that input
     (Note [Symbolic ints in recorded nodes]); the other nodes are copied with Graph.add_node.

The partition (aot.partition) then works unchanged: the size inputs are primals, saved for the backward
as numbers (or 0-d tensors) where a backward node reads them, so the forward graph, the backward graph
and the saved tensors all have symbolic sizes. At run time the expressions are computed from the call's
tensor inputs (generated Python: s0 = I[0].size(0); ...) and passed to CompiledFunction.apply after the
tensors. The captured graph's own int inputs are not passed (its ints are recomputed the same way), so
the forward and backward graphs take tensors and these inputs only. strata_cpp compiles both graphs
with the values' shapes in the four worlds (world_shapes: which row groups may fuse, Note [Row kernels
with symbolic sizes] in _inductor/fusion.py).

Anything this cannot express (AOTUnsupported: a structure that changes with the size, a number no
expression gives, a symbol no tensor input carries as a dim, autocast nodes) leaves the graph to the
eager backend's replay with eager autograd, which is correct at every size; STRATA_LOGS=aot says why.
Calls without grad use the same worlds to functionalize the graph (functionalize_dynamic).
"""

from .. import _C
from . import logs
from .aot import (AOTUnsupported, JointGraph, partition, _Plan, CompiledFunction, _meta_of, make_joint,
                  passthrough_outputs, restore_passthrough)
from .functionalize import _schemas
from .symshape import SymExpr, SymInt, candidates, contiguous_strides, _OPS

_compile = _C._compile


def _worlds(symbols):
    """The sizes each world gives the symbols (by index): the hint, the probe, the check and one more
    (hint + 2 + 3 * index, of the other parity than the check where the hint is odd), so that an
    expression is accepted only if it gives four values."""
    out = []
    for which in ("hint", "probe", "check"):
        out.append({y.index: getattr(y, which) for y in symbols})
    out.append({y.index: y.hint + 2 + 3 * y.index for y in symbols})
    return out


def _ev(e, w):
    """An int or SymExpr at the sizes of world w."""
    if not isinstance(e, SymExpr):
        return e
    if e.op == "sym":
        return w[e.a.index]
    if e.op == "const":
        return e.a
    return _OPS[e.op](_ev(e.a, w), _ev(e.b, w))

__all__ = ["SymSizes", "aot_compile_dynamic"]


class SymSizes:
    """What capture knows about a graph's sizes: per graph input its symbolic shape (a tensor: a tuple
    of ints and SymExprs) or its SymExpr (an int input), and the symbols."""

    def __init__(self, shapes, symbols):
        self.shapes = list(shapes)
        self.symbols = list(symbols)

    @classmethod
    def of(cls, graph, out):
        shapes = []
        for vid, src, ex in zip(graph.inputs, out.input_sources, out.input_examples):
            if isinstance(src, SymExpr):
                shapes.append(src)
            else:
                shapes.append(tuple(out.sym_by_vid.get(vid, tuple(ex.shape))))
        return cls(shapes, out.symbols)


class _Sym:
    """An argument that is a symbolic int in the joint graph."""
    __slots__ = ("expr",)

    def __init__(self, expr):
        self.expr = expr


class FloatOfSize:
    """A number a composite or a derivative computes from a size (a mean's 1 / numel, var's 2 / (n - 1)):
    k * expr or k / expr, passed to the graph as a 0-d float64 tensor input (its argument is a Tensor
    that was a wrapped number; eager converts both to the op's compute dtype alike)."""
    __slots__ = ("op", "k", "expr", "_key")

    def __init__(self, op, k, expr):
        self.op, self.k, self.expr = op, k, expr
        self._key = (op, k, expr)

    def __hash__(self):
        return hash(self._key)

    def __eq__(self, other):
        return isinstance(other, FloatOfSize) and self._key == other._key

    def eval(self, which="hint"):
        e = float(self.expr.eval(which) if isinstance(which, str) else _ev(self.expr, which))
        return self.k * e if self.op == "*" else self.k / e

    def py(self, ints):
        return f"T({self.k!r}{self.op}{ints(self.expr)})"

    def __repr__(self):
        return f"{self.k!r}{self.op}{self.expr!r}"


class _SymF:
    __slots__ = ("spec",)

    def __init__(self, spec):
        self.spec = spec


def _nice(k):
    for d in (1, 2, 3, 4):
        r = round(k * d)
        if abs(k * d - r) <= 1e-6 * max(1.0, abs(k * d)):
            return r / d
    return k


def _rerecord(graph, syms, world):
    """graph replayed on Meta at the sizes world gives the symbols, recorded into a new graph whose
    inputs are graph's tensor inputs (ints are constants of its nodes); (graph, Meta inputs)."""
    import strata
    g = _compile.Graph()
    ins, metas = [], []
    for i, vid in enumerate(graph.inputs):
        v = graph.value(vid)
        shape = syms.shapes[i]
        if v.kind != "tensor":
            if v.kind != "int":
                raise AOTUnsupported(f"input {v.name!r} is a {v.kind}")
            ins.append(_ev(shape, world))
            continue
        sizes = tuple(_ev(d, world) for d in shape)
        dyn = any(isinstance(d, SymExpr) for d in shape)
        strides = contiguous_strides(sizes) if dyn else tuple(v.stride)
        m = strata.empty_strided(sizes, strides, dtype=v.dtype, device="meta")
        if v.requires_grad:
            m.requires_grad_(True)
        g.add_input(v.name, m, device=v.device)
        ins.append(m)
        metas.append(m)
    for vid in graph.constants:
        c = graph.value(vid)
        if c.kind == "tensor":
            g.add_constant(c.constant, c.name)
    try:
        with strata.enable_grad():
            with _compile.record(g):
                outs = graph.run(ins)
    except Exception as e:  # an op that fails at these sizes (a size capture's checks did not try)
        raise AOTUnsupported(f"the graph fails when replayed at other sizes ({type(e).__name__}: {e})") from e
    ids = []
    for o in outs:
        vid = g.value_of(o) if isinstance(o, strata.Tensor) else None
        if vid is None:
            raise AOTUnsupported("a graph output is not a tensor of the graph")
        ids.append(vid)
    g.set_outputs(ids)
    return g, metas


def _fresh_metas(metas):
    import strata
    out = []
    for m in metas:
        t = strata.empty_strided(tuple(m.shape), tuple(m.stride()), dtype=m.dtype, device="meta")
        if m.requires_grad:
            t.requires_grad_(True)
        out.append(t)
    return out


class _Matcher:
    """Finds the expression over the symbols a number has in the worlds."""

    def __init__(self, syms, worlds):
        self.worlds = worlds
        tensor_shapes = [s for s in syms.shapes if isinstance(s, tuple)]
        ints = [s for s in syms.shapes if isinstance(s, SymExpr)]
        self._cands = lambda: candidates(tensor_shapes, ints)
        self._table = None

    def find(self, vals, what):
        self.find_table()
        e = self._table.get(tuple(vals))
        if e is None:
            raise AOTUnsupported(f"{what} is {vals[0]} at the capture size and {list(vals[1:])} at other "
                                 "sizes, which no expression over the symbolic sizes gives")
        return e

    def find_float(self, vals, what):
        """k * e or k / e over an int expression e that gives the floats of every world (to float32
        rounding)."""
        self.find_table()

        def close(a, b):
            return abs(a - b) <= 2e-7 * max(abs(a), abs(b)) + 1e-30
        from .symshape import binop
        # Unbiased statistics divide by n - 1: e - 1 for every candidate e too.
        pairs = list(self._table.items())
        pairs += [(tuple(v - 1 for v in key), binop("-", e, 1)) for key, e in pairs]
        for key, e in pairs:
            if not isinstance(e, SymExpr) or any(v == 0 for v in key):
                continue
            for op in ("*", "/"):
                k = _nice(vals[0] / key[0] if op == "*" else vals[0] * key[0])
                spec = FloatOfSize(op, k, e)
                if all(close(spec.eval(w), v) for w, v in zip(self.worlds, vals)):
                    return spec
        raise AOTUnsupported(f"{what} takes a number that depends on a symbolic size ({vals[0]} / {vals[1]}) "
                             "in a way not expressed here")

    def find_table(self):
        if self._table is None:
            self._table = {}
            for e in self._cands():
                key = tuple(_ev(e, w) for w in self.worlds)
                self._table.setdefault(key, e)


def _same(xs):
    return all(x == xs[0] for x in xs[1:])


def _merge(xs, matcher, what):
    """One argument of corresponding joint nodes in every world: the hint's, or _Sym / _SymF where a
    number differs."""
    x = xs[0]
    if isinstance(x, _compile.Value):
        if not all(isinstance(y, _compile.Value) and y.id == x.id for y in xs[1:]):
            raise AOTUnsupported(f"{what} reads other values at another size")
        return x
    if isinstance(x, (list, tuple)):
        if not all(isinstance(y, (list, tuple)) and len(y) == len(x) for y in xs[1:]):
            raise AOTUnsupported(f"{what} has a list of another length at another size")
        return [_merge(list(col), matcher, what) for col in zip(*xs)]
    if any(type(y) is not type(x) for y in xs[1:]):
        raise AOTUnsupported(f"{what} has arguments of other types at another size")
    if type(x) is int:
        return x if _same(xs) else _Sym(matcher.find(tuple(xs), what))
    if isinstance(x, _compile.GraphDevice):
        return x
    if isinstance(x, float):
        if all(y != y for y in xs) or _same(xs):
            return x
        return _SymF(matcher.find_float(tuple(xs), what))
    if not _same(xs):
        raise AOTUnsupported(f"{what} takes an argument that differs at another size ({x!r} / {xs[1]!r})")
    return x


def _has_sym(a):
    if isinstance(a, _Sym):
        return True
    return isinstance(a, list) and any(_has_sym(e) for e in a)


def _exprs_in(a, out):
    if isinstance(a, (_Sym, _SymF)):
        e = a.expr if isinstance(a, _Sym) else a.spec
        if e not in out:
            out.append(e)
    elif isinstance(a, list):
        for e in a:
            _exprs_in(e, out)


def _symbolize(joints, matcher):
    """The merged node arguments of the joint graphs of every world (the hint's first) and the
    expressions used."""
    j0, g0 = joints[0], joints[0].graph
    for j in joints[1:]:
        g = j.graph
        if not (len(g.values) == len(g0.values) and g.inputs == g0.inputs and g.outputs == g0.outputs
                and j.grad_values == j0.grad_values and j.diff_outputs == j0.diff_outputs):
            raise AOTUnsupported("the joint graph has another structure at another size")
    nodes = [j.graph.nodes for j in joints]
    if not all(len(ns) == len(nodes[0]) for ns in nodes):
        raise AOTUnsupported("the joint graph has another number of nodes at another size")
    merged, exprs = [], []
    for k, ns in enumerate(zip(*nodes)):
        a = ns[0]
        what = f"joint node {k} ({a.op})"
        if not all(n.op == a.op and n.outputs == a.outputs for n in ns[1:]):
            raise AOTUnsupported(f"{what} is another op at another size")
        args = [_merge(list(col), matcher, what) for col in zip(*(n.args for n in ns))]
        if any(isinstance(x, _SymF) for x in args):
            types = [t["type"] for t in _schemas()[a.op]["args"]]
            if any(isinstance(x, _SymF) and t != "Tensor" for x, t in zip(args, types)):
                raise AOTUnsupported(f"{what} takes a number that depends on a symbolic size as a Scalar")
        for x in args:
            _exprs_in(x, exprs)
        merged.append(args)
    return merged, exprs


def _record_with_symints(ng, n, args, sym_vids):
    """Records node n's op into ng through the Python binding, symbolic ints given as SymInts (Note
    [Symbolic ints in recorded nodes]); the new node's outputs."""
    import strata
    metas = []

    def conv(a):
        if isinstance(a, _Sym):
            return SymInt(a.expr.eval("hint"), sym_vids[a.expr])
        if isinstance(a, _compile.Value):
            v = ng.value(a.id)
            m = strata.empty_strided(tuple(v.shape), tuple(v.stride), dtype=v.dtype, device="meta")
            if v.requires_grad:
                m.requires_grad_(True)
            ng.bind(m, a.id)
            metas.append(m)
            return m
        if isinstance(a, list):
            return [conv(e) for e in a]
        if isinstance(a, _compile.GraphDevice):
            return "meta"
        return a
    kw = {name: conv(a) for name, a in zip(n.arg_names, args)}
    fn = getattr(_C._ops, n.op.split(".")[0], None)
    if fn is None:
        raise AOTUnsupported(f"no binding of {n.op} to record it with a symbolic size")
    before = ng.num_ops
    prev = _compile.set_note_symints(True)
    try:
        with strata.set_grad_enabled(n.grad_enabled):
            with _compile.record(ng):
                _compile.set_source(n.source)
                try:
                    fn(**kw)
                finally:
                    _compile.set_source("")
    except AOTUnsupported:
        raise
    except Exception as e:
        raise AOTUnsupported(f"recording {n.op} with a symbolic size failed: {e}") from e
    finally:
        _compile.set_note_symints(prev)
    new = ng.nodes[-1]
    if ng.num_ops != before + 1 or new.op != n.op:
        raise AOTUnsupported(f"recording {n.op} with a symbolic size gave {new.op}")
    return new.outputs


def _rebuild(joint, merged, exprs):
    """The joint graph again at the hint with an int input per expression (Note [Symbolic sizes through
    AOT autograd]); a JointGraph whose primals are the tensor primals then those ints."""
    g = joint.graph
    ng = _compile.Graph()
    vmap = {}
    for vid in joint.primals:
        v = g.value(vid)
        vmap[vid] = ng.add_input(v.name, _meta_of(v, v.requires_grad), device=v.device)
    import strata
    sym_vids = {}
    for k, e in enumerate(exprs):
        if isinstance(e, FloatOfSize):
            sym_vids[e] = ng.add_input(f"symf{k}", strata.empty((), dtype=strata.float64, device="meta"),
                                       device="cpu")
        else:
            sym_vids[e] = ng.add_input(f"sym{k}", e.eval("hint"))
    for vid in joint.tangents:
        v = g.value(vid)
        vmap[vid] = ng.add_input(v.name, _meta_of(v, False), device=v.device)
    for vid in g.constants:
        c = g.value(vid)
        if c.kind == "tensor":
            vmap[vid] = ng.add_constant(c.constant, c.name)

    def remap(a):
        if isinstance(a, _compile.Value):
            if a.id not in vmap:
                c = g.value(a.id)
                if not c.is_constant or c.kind != "tensor":
                    raise AOTUnsupported(f"value {c.name!r} is read before it is made")
                vmap[a.id] = ng.add_constant(c.constant, c.name)
            return ng.value(vmap[a.id])
        if isinstance(a, list):
            return [remap(e) for e in a]
        if isinstance(a, _SymF):
            return ng.value(sym_vids[a.spec])
        return a
    with strata.no_grad():
        for n, args in zip(g.nodes, merged):
            args = [remap(a) for a in args]
            if any(_has_sym(a) for a in args):
                outs = _record_with_symints(ng, n, args, sym_vids)
            else:
                try:
                    outs = ng.add_node(n.op, args, source=n.source, grad_enabled=n.grad_enabled)
                except Exception as e:
                    raise AOTUnsupported(f"copying {n.op} into the symbolic joint graph failed: {e}") from e
            if len(outs) != len(n.outputs):
                raise AOTUnsupported(f"{n.op} made {len(outs)} values where the joint graph has {len(n.outputs)}")
            for o, no in zip(n.outputs, outs):
                vmap[o] = no
    fwd = [vmap[v] for v in joint.fwd_values]
    grads = [None if v is None else vmap[v] for v in joint.grad_values]
    ng.set_outputs(fwd + [v for v in grads if v is not None])
    out = JointGraph(ng, joint.num_primals + len(exprs), list(joint.diff_outputs), fwd, list(joint.grad_inputs),
                     grads)
    out.vmap = vmap
    return out


def _world_shapes(joints, rebuilt):
    """Value name in the rebuilt graph -> (shape in each world) (Note [Row kernels with symbolic sizes] in
    _inductor/fusion.py: which row groups may fuse)."""
    g0 = joints[0].graph
    graphs = [j.graph for j in joints]
    ng = rebuilt.graph
    out = {}
    for old, new in rebuilt.vmap.items():
        v = g0.value(old)
        if v.kind != "tensor":
            continue
        out[ng.value(new).name] = tuple(tuple(g.value(old).shape) for g in graphs)
    return out


def _with_shapes(compile_fn, shapes):
    """compile_fn given the world shapes (strata_cpp's takes them; others are called as they are)."""
    if compile_fn is None or not getattr(compile_fn, "takes_world_shapes", False):
        return compile_fn

    def fn(g, inputs_die=False):
        return compile_fn(g, inputs_die=inputs_die, world_shapes=shapes)
    return fn


def _sym_code(syms, exprs, graph):
    """A function of the captured graph's input tuple I computing each expression: every symbol is read
    off a tensor input that has it as a dim (or an int input that is it)."""
    where = {}
    for i, sh in enumerate(syms.shapes):
        if isinstance(sh, tuple):
            for d, e in enumerate(sh):
                if isinstance(e, SymExpr) and e.op == "sym" and e.a.index not in where:
                    where[e.a.index] = f"I[{i}].size({d})"
    for i, sh in enumerate(syms.shapes):
        if isinstance(sh, SymExpr) and sh.op == "sym" and sh.a.index not in where:
            where[sh.a.index] = f"I[{i}]"

    used = {}   # symbol index -> local name (each symbol read once per call)

    def py(e):
        if isinstance(e, FloatOfSize):
            return e.py(py)
        if e.op == "sym":
            w = where.get(e.a.index)
            if w is None:
                raise AOTUnsupported(f"symbol s{e.a.index} is not a dim of a tensor input")
            return used.setdefault(e.a.index, f"s{e.a.index}")
        if e.op == "const":
            return repr(e.a)
        return f"({py(e.a)}{e.op}{py(e.b)})"
    body = ", ".join(py(e) for e in exprs)
    reads = "".join(f"    {name} = {where[k]}\n" for k, name in used.items())
    src = f"def __syms(I):\n{reads}    return ({body}{',' if exprs else ''})\n"
    import strata
    made = {}

    def T(v):
        # The 0-d float64 input of a number that depends on a size: one tensor per value (graphs only read it).
        t = made.get(v)
        if t is None:
            if len(made) > 64:
                made.clear()
            t = made[v] = strata.tensor(v, dtype=strata.float64)
        return t
    ns = {"T": T}
    exec(compile(src, "<strata.compile symbolic sizes>", "exec"), ns)
    return ns["__syms"], src


def aot_compile_dynamic(graph, syms, compile_fn=None):
    """AOT autograd for a captured graph with symbolic sizes (Note [Symbolic sizes through AOT autograd]):
    a callable with the captured graph's calling convention, or raises AOTUnsupported. compile_fn as for
    aot_compile (it must compile graphs with symbolic sizes)."""
    import strata
    from .functionalize import maybe_functionalize, aliased_inputs
    if any(n.autocast is not None for n in graph.nodes):
        raise AOTUnsupported("a node runs under autocast")
    tensor_pos = [i for i, vid in enumerate(graph.inputs) if graph.value(vid).kind == "tensor"]
    worlds = _worlds(syms.symbols)
    joints, func, hint = [], [], None
    for world in worlds:
        g, metas = _rerecord(graph, syms, world)
        fg, written, gw = maybe_functionalize(g)
        func.append((written, None if gw is None else (gw.inputs, gw.outputs)))
        joints.append(make_joint(fg, _fresh_metas(metas)))
        if hint is None:
            hint = (written, gw)
            passthrough = passthrough_outputs(fg)
    if not _same(func):
        raise AOTUnsupported("functionalization differs at another size")
    written, gw = hint
    merged, exprs = _symbolize(joints, _Matcher(syms, worlds))
    joint = _rebuild(joints[0], merged, exprs)
    if joint.num_tangents == 0 or all(v is None for v in joint.grad_values):
        raise AOTUnsupported("nothing to differentiate")
    compile_fn = _with_shapes(compile_fn, _world_shapes(joints, joint))
    part = partition(joint)
    syms_fn, src = _sym_code(syms, exprs, graph)
    if compile_fn is None:
        plan = _Plan(graph, joint, part)
    else:
        with strata.no_grad():
            plan = _Plan(graph, joint, part, compile_fn)
    plan.dynamic = True
    logs.aot(f"symbolic joint graph of {joint.graph.num_ops} ops ({len(exprs)} symbolic sizes: "
             f"{', '.join(repr(e) for e in exprs) or 'none'}): forward {part.forward.num_ops} ops, backward "
             f"{part.backward.num_ops} ops; " + part.describe())
    apply = CompiledFunction.apply
    pick = ", ".join(f"I[{i}]" for i in tensor_pos)
    ns = {}
    exec(compile(f"def __tensors(I):\n    return ({pick}{',' if tensor_pos else ''})\n",
                 "<strata.compile symbolic sizes>", "exec"), ns)
    tensors_of = ns["__tensors"]
    as_captured = []

    def run_grad(*inputs):
        tensors = tensors_of(inputs)
        if written and aliased_inputs(tensors, written):
            if not as_captured:
                as_captured.append(graph.runner())
            return as_captured[0](*inputs)
        outs = apply(plan, *tensors, *syms_fn(inputs))
        if passthrough:
            outs = restore_passthrough(outs, tensors, passthrough)  # Note [Inputs returned by a compiled function]
        return outs if gw is None else gw.finish(tensors, outs)
    run_grad.plan = plan
    run_grad.sym_source = src
    return run_grad


def _tensor_picker(graph):
    tensor_pos = [i for i, vid in enumerate(graph.inputs) if graph.value(vid).kind == "tensor"]
    pick = ", ".join(f"I[{i}]" for i in tensor_pos)
    ns = {}
    exec(compile(f"def __tensors(I):\n    return ({pick}{',' if tensor_pos else ''})\n",
                 "<strata.compile symbolic sizes>", "exec"), ns)
    return ns["__tensors"]


def functionalize_dynamic(graph, syms, compile_fn=None):
    """Functionalization (functionalize.py) of a graph with symbolic sizes for calls without grad: the pass
    runs on the graph recorded in every world and the results are made one graph with the sizes it
    writes into its nodes (expand's size, full's shape, a reshape back) as int inputs, as for the joint
    graph (Note [Symbolic sizes through AOT autograd]). A callable with the captured graph's calling
    convention; None when the graph writes nothing; raises AOTUnsupported / FunctionalizeUnsupported."""
    import strata
    from . import config
    from .functionalize import functionalize, mutating_nodes, aliased_inputs
    if not config.functionalize or not mutating_nodes(graph):
        return None
    if any(n.autocast is not None for n in graph.nodes):
        raise AOTUnsupported("a node runs under autocast")
    worlds = _worlds(syms.symbols)
    joints, writtens = [], []
    for world in worlds:
        g, _ = _rerecord(graph, syms, world)
        fg, written = functionalize(g, with_written=True)
        writtens.append(written)
        joints.append(JointGraph(fg, len(fg.inputs), [], list(fg.outputs), [], []))
    if not _same(writtens):
        raise AOTUnsupported("functionalization differs at another size")
    merged, exprs = _symbolize(joints, _Matcher(syms, worlds))
    rebuilt = _rebuild(joints[0], merged, exprs)
    ng = rebuilt.graph
    compile_fn = _with_shapes(compile_fn, _world_shapes(joints, rebuilt))
    syms_fn, _ = _sym_code(syms, exprs, graph)
    with strata.no_grad():
        fn = ng.runner() if compile_fn is None else compile_fn(ng)
    tensors_of = _tensor_picker(graph)
    written = writtens[0]
    plain = []
    logs.aot(f"functionalized with symbolic sizes ({len(exprs)} symbolic sizes: "
             f"{', '.join(repr(e) for e in exprs) or 'none'}): {ng.num_ops} ops")

    def run(*inputs):
        tensors = tensors_of(inputs)
        if written and aliased_inputs(tensors, written):
            if not plain:
                plain.append(graph.runner())
            return plain[0](*inputs)
        return fn(*tensors, *syms_fn(inputs))
    run.graph = ng
    run.memory_plan = getattr(fn, "memory_plan", None)
    return run


class LazyNoGrad:
    """The callable for calls without grad of a graph with symbolic sizes, made at its first call: the graph
    functionalized with symbolic sizes (functionalize_dynamic) where it writes into tensors and the pass can
    rewrite it, else the graph as captured; compiled with compile_fn when given."""

    def __init__(self, compile_fn, graph, syms):
        self.compile_fn, self.graph, self.syms = compile_fn, graph, syms
        self.fn = None

    def get(self):
        if self.fn is None:
            import strata
            from .functionalize import FunctionalizeUnsupported
            fn = None
            try:
                fn = functionalize_dynamic(self.graph, self.syms, self.compile_fn)
            except (AOTUnsupported, FunctionalizeUnsupported) as e:
                logs.aot(f"functionalization with symbolic sizes skipped, the graph runs as captured: {e}")
            except Exception as e:  # noqa: BLE001 -- the captured graph is always a correct answer
                logs.aot("functionalization with symbolic sizes failed, the graph runs as captured: "
                         f"{type(e).__name__}: {e}")
            if fn is None:
                if self.compile_fn is None:
                    fn = self.graph.runner()
                else:
                    compile_fn = self.compile_fn
                    try:
                        compile_fn = _with_shapes(compile_fn, captured_world_shapes(self.graph, self.syms))
                    except AOTUnsupported as e:
                        logs.aot(f"no row kernels with symbolic sizes: {e}")
                    with strata.no_grad():
                        fn = compile_fn(self.graph)
            self.fn = fn
        return self.fn

    def __call__(self, *inputs):
        return (self.fn or self.get())(*inputs)


def captured_world_shapes(graph, syms):
    """Value name of the captured graph -> (shape in each world): the graph recorded again in every world
    (one node per node, so values correspond by node position and output index)."""
    worlds = _worlds(syms.symbols)
    recs = [_rerecord(graph, syms, w)[0] for w in worlds]
    out = {}
    tin = [vid for vid in graph.inputs if graph.value(vid).kind == "tensor"]
    for k, vid in enumerate(tin):
        out[graph.value(vid).name] = tuple(tuple(r.value(r.inputs[k]).shape) for r in recs)
    nodes = graph.nodes
    rnodes = [r.nodes for r in recs]
    if any(len(rn) != len(nodes) for rn in rnodes):
        raise AOTUnsupported("the graph recorded again has another number of nodes")
    for i, n in enumerate(nodes):
        for j, o in enumerate(n.outputs):
            v = graph.value(o)
            if v.kind != "tensor":
                continue
            shapes = []
            for r, rn in zip(recs, rnodes):
                if rn[i].op != n.op or len(rn[i].outputs) != len(n.outputs):
                    raise AOTUnsupported("the graph recorded again has other nodes")
                shapes.append(tuple(r.value(rn[i].outputs[j]).shape))
            out[v.name] = tuple(shapes)
    return out
