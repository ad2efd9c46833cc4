"""Symbolic sizes for strata.compile (Note [Symbolic shapes]).

Note [Symbolic shapes]
A dynamic dimension of a graph input is a Symbol: (the input's source, the dimension). During
capture every tensor variable carries a symbolic shape, a tuple of ints and SymExprs (+ - * // over
symbols and constants). Capture runs ops on Meta tensors whose C++ shape functions take concrete
sizes, so the interpreter runs every op in two worlds: at the hint (the capturing call's sizes; this
call is recorded) and at a probe (each symbol shifted by its own offset; recorded into a scratch
graph that is thrown away). An output dimension equal in both worlds is static; one that differs is
the candidate expression (an input dimension, a symbolic int argument, products of consecutive input
dimensions, sums, small multiples and quotients) that gives both values; none: the op has no
symbolic shape rule here and the frame falls back to static sizes (SymbolicFallback), so a size is
never baked silently.

Sizes read by Python (x.shape, x.size(i), len(x), x.numel()) are SymIntVars; arithmetic on them
builds SymExprs; a comparison is decided on the hint and becomes a guard relation. A SymIntVar
passed to an op is a SymInt (an int subclass carrying a graph value id): the binding notes it while
recording and the recorded node reads that int graph input instead of a constant (Note [Symbolic
ints in recorded nodes], src/compile/graph.h); the entry's run function computes the input from
the frame's arguments (SymExpr.py). After capture the graph is replayed on Meta at a third size and
its output shapes are compared with the symbolic ones (validate); any mismatch falls back to
static sizes for that frame."""

import operator

from . import sources as S
from .variables import Unsupported

__all__ = ["Symbol", "SymExpr", "SymInt", "SymbolicFallback", "sym_const", "infer_shape"]


class SymbolicFallback(Unsupported):
    """Capture with symbolic sizes cannot go on: the frame is captured again with static sizes."""


class SpecializeSizes(SymbolicFallback):
    """An op fails at the probe because a dynamic size must equal a static one (x @ w with a dynamic
    feature dim): capture again with those (source, dim) static."""

    def __init__(self, reason, dims):
        super().__init__(reason)
        self.dims = dims


class Symbol:
    __slots__ = ("source", "dim", "hint", "probe", "check", "index")

    def __init__(self, source, dim, hint, index):
        self.source, self.dim, self.hint, self.index = source, dim, hint, index
        # Distinct offsets per symbol so that two symbols with the same hint differ at the probe; odd
        # offsets, so that every symbol has the other parity at the probe and at the check than at the
        # hint (x.chunk(2) of an even size would otherwise take (n+1)//2 for n//2 in all three worlds).
        self.probe = hint + 7 + 14 * index
        self.check = hint + 3 + 6 * index


_OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv}
_GUARD_OPS = {"+": "add", "-": "sub", "*": "mul", "//": "floordiv"}


class SymExpr:
    """An int expression over symbols. Immutable, hashable (by structure)."""
    __slots__ = ("op", "a", "b", "_key")

    def __init__(self, op, a, b=None):
        self.op, self.a, self.b = op, a, b     # op: "sym" (a: Symbol), "const" (a: int) or + - * //
        if op == "sym":
            self._key = ("sym", a.index)
        elif op == "const":
            self._key = ("const", a)
        else:
            self._key = (op, a._key, b._key)

    def __hash__(self):
        return hash(self._key)

    def __eq__(self, other):
        return isinstance(other, SymExpr) and self._key == other._key

    def is_const(self):
        return self.op == "const"

    def eval(self, which="hint"):
        if self.op == "sym":
            return getattr(self.a, which)
        if self.op == "const":
            return self.a
        return _OPS[self.op](self.a.eval(which), self.b.eval(which))

    def symbols(self):
        if self.op == "sym":
            return {self.a}
        if self.op == "const":
            return set()
        return self.a.symbols() | self.b.symbols()

    def py(self):
        """Python over the run function's arguments (A, G, C): A[0].shape[0]*2."""
        if self.op == "sym":
            return f"{S.expr(self.a.source)}.shape[{self.a.dim}]"
        if self.op == "const":
            return repr(self.a)
        return f"({self.a.py()}{self.op}{self.b.py()})"

    def guard_tree(self):
        """The expression as strata._C._guards.add_dim_relation takes it."""
        if self.op == "sym":
            return ("size", self.a.source, self.a.dim)
        if self.op == "const":
            return self.a
        return (_GUARD_OPS[self.op], self.a.guard_tree(), self.b.guard_tree())

    def __repr__(self):
        if self.op == "sym":
            return f"s{self.a.index}"
        if self.op == "const":
            return repr(self.a)
        return f"({self.a!r}{self.op}{self.b!r})"


def sym_const(v):
    return v if isinstance(v, SymExpr) else SymExpr("const", int(v))


def binop(op, a, b):
    """a op b for ints and SymExprs, folded where both are constants; an int when the result is one."""
    if not isinstance(a, SymExpr) and not isinstance(b, SymExpr):
        return _OPS[op](a, b)
    a, b = sym_const(a), sym_const(b)
    if a.is_const() and b.is_const():
        return _OPS[op](a.a, b.a)
    if op == "*":
        if a.is_const() and a.a == 1:
            return b
        if b.is_const() and b.a == 1:
            return a
        if (a.is_const() and a.a == 0) or (b.is_const() and b.a == 0):
            return 0
    if op in ("+", "-") and b.is_const() and b.a == 0:
        return a
    if op == "+" and a.is_const() and a.a == 0:
        return b
    if op == "//" and b.is_const() and b.a == 1:
        return a
    if op == "//" and a.op == "*" and (a.a == b or a.b == b):
        return a.b if a.a == b else a.a       # (x*y)//x: sizes are positive
    if op == "//" and a == b:
        return 1
    if op == "-" and a == b:
        return 0
    return SymExpr(op, a, b)


def value_at(v, which):
    return v.eval(which) if isinstance(v, SymExpr) else v


class SymInt(int):
    """What an op receives for a symbolic int during capture: the hint, plus the id of the int graph
    input that computes it (read by the binding while recording)."""

    def __new__(cls, value, vid):
        obj = super().__new__(cls, value)
        obj._strata_vid = vid
        return obj


def _products(shape):
    """Products of consecutive dimensions of a symbolic shape (flatten, view merges)."""
    out = []
    n = len(shape)
    for i in range(n):
        acc = 1
        for j in range(i, n):
            acc = binop("*", acc, shape[j])
            if j > i and isinstance(acc, SymExpr):
                out.append(acc)
    return out


def candidates(shapes, ints):
    """Expressions an output dimension may be, from the symbolic input shapes and int arguments."""
    base = []
    seen = set()

    def add(e, into):
        if isinstance(e, SymExpr) and e not in seen:
            seen.add(e)
            into.append(e)

    consts = set()
    for sh in shapes:
        for d in sh:
            add(d, base)
            if not isinstance(d, SymExpr):
                consts.add(d)
    for i in ints:
        add(i, base)
    more = []
    for sh in shapes:
        for e in _products(sh):
            add(e, more)
    small = sorted(c for c in consts | {2, 3, 4} if 2 <= c <= 64)
    for e in base:
        for k in small:
            add(binop("*", e, k), more)
            add(binop("//", e, k), more)
            add(binop("//", binop("+", e, k - 1), k), more)
        for c in sorted(consts | {1}):
            add(binop("+", e, c), more)
            add(binop("-", e, c), more)
    for i, e in enumerate(base):
        for f in base[i:]:
            add(binop("+", e, f), more)
            add(binop("*", e, f), more)
        for f in base:
            if f is not e:
                add(binop("-", e, f), more)
                add(binop("//", e, f), more)   # reshape(b, -1) of a (b*t) dim
    return base + more


def infer_shape(hint_shape, probe_shape, cands, what):
    """The symbolic shape of an op result from its sizes at the hint and at the probe."""
    if len(hint_shape) != len(probe_shape):
        raise SymbolicFallback(f"no symbolic shape rule for {what}: its result has {len(hint_shape)} dimensions "
                               f"at the capture size and {len(probe_shape)} at another size")
    out = []
    for d, (h, p) in enumerate(zip(hint_shape, probe_shape)):
        if h == p:
            out.append(h)
            continue
        for e in cands():
            if e.eval("hint") == h and e.eval("probe") == p:
                out.append(e)
                break
        else:
            raise SymbolicFallback(f"no symbolic shape rule for {what}: dimension {d} of its result ({h}) depends "
                                   "on a dynamic size in a way capture does not express")
    return tuple(out)


def contiguous_strides(sizes):
    st = []
    acc = 1
    for s in reversed(sizes):
        st.append(acc)
        acc = acc * max(s, 1)
    return tuple(reversed(st))


def is_contiguous(sizes, strides):
    exp = contiguous_strides(sizes)
    return all(s == e or n == 1 for s, e, n in zip(strides, exp, sizes))
