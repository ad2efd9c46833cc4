"""Dynamic dimensions of strata.export: Dim, dynamic_shapes, symbols, ranges and size expressions.

Note [Exported symbolic sizes]
export(dynamic_shapes=...) names the dims of the user's tensor inputs that may vary: a Dim (by name:
dims with one name share one symbol; Dim("b", min=2, max=1024)), a derived dim (2*b, b+1: an
affine expression of its root, whose root must itself mark some input dim), Dim.AUTO (dynamic if
the program allows, static otherwise, silently), Dim.DYNAMIC (dynamic, or an error naming why not)
and Dim.STATIC / None / an int (static). The capture is strata.compile's symbolic one (Note
[Symbolic shapes] in _dynamo/symshape.py) with one symbol per Dim and no duck sizing between
different names (dyn["named"], OutputGraph._named_dim).

What the program keeps is plain data, so that save/load carry it: the root symbols (name, the
user input path and dim their value is read from, the range), the size of every dim of every
graph value as an int or an expression tree, the int graph inputs (sizes the graph reads, such as
the b of x.view(b, -1)) as expression trees, and the relations capture decided on the capture's
sizes that the ranges do not already say (kept as checks made at each call). An expression tree
is an int, ["sym", name] or [op, a, b] with op one of + - * //."""

import math

from .._dynamo import sources as S
from .._dynamo.symshape import SymExpr

__all__ = ["Dim", "dims", "ValueRanges", "tree_of", "tree_eval", "tree_str", "tree_symbols", "DimSpec"]


class Dim:
    """torch.export.Dim: a named dynamic dimension, with an optional range [min, max] (inclusive).
    Dims with the same name are one symbol. 2*d, d+1, d-1 (and combinations) are derived dims."""

    AUTO = None  # set below
    DYNAMIC = None
    STATIC = None

    def __init__(self, name, *, min=None, max=None):
        if not isinstance(name, str) or not name:
            raise TypeError(f"Dim: the name must be a non-empty str, got {name!r}")
        if min is not None and max is not None and min > max:
            raise ValueError(f"Dim {name!r}: min={min} is larger than max={max}")
        if max is not None and max < 2:
            raise ValueError(f"Dim {name!r}: max={max} is below 2; sizes 0 and 1 are never dynamic in strata.export "
                             "(use a static dim)")
        self.__name__ = name
        self.min, self.max = min, max

    @property
    def lower(self):
        return max(2, self.min if self.min is not None else 0)

    @property
    def upper(self):
        return math.inf if self.max is None else self.max

    def __repr__(self):
        parts = [repr(self.__name__)]
        if self.min is not None:
            parts.append(f"min={self.min}")
        if self.max is not None:
            parts.append(f"max={self.max}")
        return f"Dim({', '.join(parts)})"

    # derived dims: coeff * root + offset
    def __mul__(self, k):
        return _Derived(self, 1, 0)._affine(k, 0)

    __rmul__ = __mul__

    def __add__(self, k):
        return _Derived(self, 1, 0)._affine(1, k)

    __radd__ = __add__

    def __sub__(self, k):
        return _Derived(self, 1, 0)._affine(1, -k if isinstance(k, int) else k)


class _DimHint(Dim):
    def __init__(self, name):
        self.__name__ = name
        self.min = self.max = None

    def __repr__(self):
        return f"Dim.{self.__name__}"

    def __mul__(self, k):
        raise TypeError(f"Dim.{self.__name__} cannot be used in an expression (only named Dims derive dims)")

    __rmul__ = __add__ = __radd__ = __sub__ = __mul__


Dim.AUTO = _DimHint("AUTO")
Dim.DYNAMIC = _DimHint("DYNAMIC")
Dim.STATIC = _DimHint("STATIC")


class _Derived:
    """coeff * root + offset (a torch derived Dim)."""

    def __init__(self, root, coeff, offset):
        self.root, self.coeff, self.offset = root, coeff, offset

    def _affine(self, k, c):
        if type(k) is not int or type(c) is not int:
            raise TypeError(f"derived dims take int coefficients and offsets, got {k!r} and {c!r}")
        if k < 1:
            raise ValueError(f"a derived dim must grow with its root (coefficient {k})")
        return _Derived(self.root, self.coeff * k, self.offset * k + c)

    def __mul__(self, k):
        return self._affine(k, 0)

    __rmul__ = __mul__

    def __add__(self, k):
        return self._affine(1, k)

    __radd__ = __add__

    def __sub__(self, k):
        return self._affine(1, -k if isinstance(k, int) else k)

    @property
    def __name__(self):
        return _affine_str(self.root.__name__, self.coeff, self.offset)

    def __repr__(self):
        return self.__name__


def _affine_str(name, coeff, offset):
    s = name if coeff == 1 else f"{coeff}*{name}"
    if offset > 0:
        s += f" + {offset}"
    elif offset < 0:
        s += f" - {-offset}"
    return s


def dims(*names, min=None, max=None):
    """torch.export.dims: several Dims with one range."""
    return tuple(Dim(n, min=min, max=max) for n in names)


class ValueRanges:
    """A symbol's range [lower, upper] (inclusive; upper may be math.inf), as torch prints it."""

    __slots__ = ("lower", "upper")

    def __init__(self, lower, upper):
        self.lower, self.upper = lower, upper

    def __contains__(self, v):
        return self.lower <= v <= self.upper

    def __eq__(self, other):
        return isinstance(other, ValueRanges) and (self.lower, self.upper) == (other.lower, other.upper)

    def __hash__(self):
        return hash((self.lower, self.upper))

    def __repr__(self):
        up = "int_oo" if self.upper == math.inf else self.upper
        return f"VR[{self.lower}, {up}]"


# -- the user's dynamic_shapes, per (source, dim) ----------------------------------------------------

class DimSpec:
    """One dim of a user tensor input that dynamic_shapes marks: kind "named" (dim: Dim or _Derived),
    "auto" or "dynamic"; where: the printable x.shape[0]; size: its example size."""

    __slots__ = ("source", "dim", "kind", "spec", "where", "size", "path")

    def __init__(self, source, dim, kind, spec, where, size, path):
        self.source, self.dim, self.kind, self.spec, self.where, self.size, self.path = \
            source, dim, kind, spec, where, size, path

    @property
    def label(self):
        if self.kind == "named":
            return self.spec.__name__
        return self.where

    def __repr__(self):
        return f"DimSpec({self.where}, {self.kind}, {self.spec!r})"


def _path_where(path):
    from ._program import path_str
    return path_str(path)


def collect(dynamic_shapes, bound, arg_index, arg_order, fail):
    """The DimSpecs of dynamic_shapes (torch's forms) over the bound call arguments. bound: {param name:
    value}; arg_index: param name -> frame argument index; arg_order: the names a tuple/list form
    follows. fail(msg) raises."""
    from .. import Tensor
    out = []
    if dynamic_shapes is None:
        return out
    if isinstance(dynamic_shapes, dict):
        for k in dynamic_shapes:
            if k not in bound:
                fail(f"dynamic_shapes names {k!r}, which is not an argument of the call "
                     f"(arguments: {', '.join(bound)})")
        items = list(dynamic_shapes.items())
    elif isinstance(dynamic_shapes, (tuple, list)):
        if len(dynamic_shapes) != len(arg_order):
            fail(f"dynamic_shapes has {len(dynamic_shapes)} entries but the call has {len(arg_order)} arguments "
                 f"({', '.join(arg_order)}); give one entry per argument (None for a static one)")
        items = list(zip(arg_order, dynamic_shapes))
    else:
        fail(f"dynamic_shapes must be a dict (by argument name) or a tuple (by position), got "
             f"{type(dynamic_shapes).__name__}")

    def walk(spec, value, source, path):
        where = _path_where(path)
        if spec is None:
            return
        if isinstance(value, Tensor):
            rank = value.dim()
            if isinstance(spec, dict):
                entries = list(spec.items())
            elif isinstance(spec, (tuple, list)):
                if len(spec) != rank:
                    fail(f"dynamic_shapes for {where} has {len(spec)} entries but the tensor has {rank} dims")
                entries = list(enumerate(spec))
            else:
                fail(f"dynamic_shapes for the tensor {where} must be a dict {{dim: Dim}} or a tuple of one entry "
                     f"per dim, got {spec!r}")
            for d, s in entries:
                if type(d) is not int or not -rank <= d < rank:
                    fail(f"dynamic_shapes for {where} names dim {d!r}, but the tensor has {rank} dims")
                d %= rank
                w = f"{where}.shape[{d}]"
                size = value.shape[d]
                if s is None or s is Dim.STATIC:
                    continue
                if type(s) is int:
                    if s != size:
                        fail(f"dynamic_shapes gives {w} the static size {s}, but the example has {size}")
                    continue
                if s is Dim.AUTO:
                    out.append(DimSpec(source, d, "auto", s, w, size, path))
                elif s is Dim.DYNAMIC:
                    out.append(DimSpec(source, d, "dynamic", s, w, size, path))
                elif isinstance(s, (Dim, _Derived)):
                    out.append(DimSpec(source, d, "named", s, w, size, path))
                else:
                    fail(f"dynamic_shapes for {w} is {s!r}; expected a Dim, Dim.AUTO/DYNAMIC/STATIC, an int or None")
            return
        if isinstance(value, (list, tuple)):
            if not isinstance(spec, (list, tuple)) or len(spec) != len(value):
                fail(f"dynamic_shapes for {where} must be a list/tuple of {len(value)} entries (one per item), "
                     f"got {spec!r}")
            for i, (s, v) in enumerate(zip(spec, value)):
                walk(s, v, S.item(source, i), path + (("item", i),))
            return
        if isinstance(value, dict):
            if not isinstance(spec, dict):
                fail(f"dynamic_shapes for the dict {where} must be a dict with its keys, got {spec!r}")
            for k, s in spec.items():
                if k not in value:
                    fail(f"dynamic_shapes for {where} names the key {k!r}, which the argument does not have")
                walk(s, value[k], S.dict_item(source, k), path + (("dict_item", k),))
            return
        fail(f"dynamic_shapes gives {spec!r} for {where}, which is a {type(value).__name__}, not a tensor")

    for name, spec in items:
        walk(spec, bound[name], S.arg(arg_index[name]), (("arg", name),))
    return out


# -- expression trees ----------------------------------------------------------------------------------

_GUARD_OPS = {"add": "+", "sub": "-", "mul": "*", "floordiv": "//"}
_EVAL = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "//": lambda a, b: a // b}


def tree_of(e, names):
    """A SymExpr (or int) as a tree; names: Symbol index -> symbol name. An affine expression of one
    symbol is written as coeff*s + offset ((b + 1) - 1 is b)."""
    return simplify(_tree(e, names))


def _tree(e, names):
    if not isinstance(e, SymExpr):
        return int(e)
    if e.op == "sym":
        return ["sym", names[e.a.index]]
    if e.op == "const":
        return e.a
    return [e.op, _tree(e.a, names), _tree(e.b, names)]


def simplify(t):
    syms = tree_symbols(t)
    if len(syms) != 1 or not isinstance(t, list) or t[0] == "sym":
        return t
    (name,) = syms
    q = tree_eval(t, {name: 0})
    p = tree_eval(t, {name: 1}) - q
    if p < 1 or any(tree_eval(t, {name: v}) != p * v + q for v in (2, 3, 5, 7, 64, 1000, 1001)):
        return t
    out = ["sym", name] if p == 1 else ["*", ["sym", name], p]
    if q:
        out = ["+", out, q] if q > 0 else ["-", out, -q]
    return out


def tree_eval(t, env):
    if isinstance(t, int):
        return t
    if t[0] == "sym":
        return env[t[1]]
    return _EVAL[t[0]](tree_eval(t[1], env), tree_eval(t[2], env))


def tree_symbols(t, into=None):
    into = set() if into is None else into
    if isinstance(t, list):
        if t[0] == "sym":
            into.add(t[1])
        else:
            tree_symbols(t[1], into)
            tree_symbols(t[2], into)
    return into


_PREC = {"+": 1, "-": 1, "*": 2, "//": 2}


def tree_str(t, prec=0):
    """2*batch, batch + 1, (seq - 1)//2."""
    if isinstance(t, int):
        return str(t)
    if t[0] == "sym":
        return t[1]
    op, a, b = t
    if op == "*" and isinstance(b, int) and not isinstance(a, int):
        a, b = b, a
    p = _PREC[op]
    sa = tree_str(a, p)
    sb = tree_str(b, p + (1 if op in ("-", "//") else 0))
    s = f"{sa}{op}{sb}" if op in ("*", "//") else f"{sa} {op} {sb}"
    return f"({s})" if p < prec else s


def is_tree(d):
    return isinstance(d, list)
