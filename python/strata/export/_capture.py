"""strata.export's capture with dynamic dims (Note [Exported symbolic sizes] in _dims.py).

capture_dynamic runs the symbolic interpreter over the frame with the dims dynamic_shapes marks as
symbols, one per Dim name. When symbolic capture fails it decides, as torch.export does, between
trying again and raising:
  * an op that needs a dynamic size equal to a static one (SpecializeSizes): a Dim.AUTO dim is made
    static and the capture runs again; a Dim or Dim.DYNAMIC dim raises, naming it and the reason;
  * any other failure where two dims marked with different symbols have the same example size:
    captured again with those dims as one symbol, to find out whether the program needs them equal
    (then dims of two different Dim names raise "must always be equal", with the fix);
  * otherwise the Dim.AUTO dims are made static, and failing that the error names the dims.
After capture, the relations capture decided on the example sizes (Note [Symbolic shapes]) are
sorted: a bound on one symbol narrows its range (for a named Dim whose range it does not already
hold: an error with the suggested range), an equality with a number specializes it (Dim.AUTO: made
static; else an error), anything else is kept as a check made at every call."""

import math

from .._dynamo import sources as S
from .._dynamo.convert import _attempt, _where, validate_dynamic
from .._dynamo.symbolic import Unsupported
from .._dynamo.symshape import SymExpr, SymbolicFallback, SpecializeSizes
from ._dims import collect, tree_of, tree_eval, tree_symbols, tree_str, _Derived

_GUARD_OPS = {"add": "+", "sub": "-", "mul": "*", "floordiv": "//"}


class _Retry(Exception):
    pass


class Captured:
    """What capture_dynamic gives export: the OutputGraph, the returned variable, the output tree,
    the symbols ({"name", "path", "dim", "min", "max"}), the symbolic shape of every graph value with
    a dynamic dim ({vid: [int | tree]}) and the checks kept for call time ((lhs, op, rhs) trees)."""

    def __init__(self, out, ret, out_spec, names, symbols, sym_shapes, assertions):
        self.out, self.ret, self.out_spec = out, ret, out_spec
        self._names = names
        self.symbols, self.sym_shapes, self.assertions = symbols, sym_shapes, assertions

    def tree(self, e):
        return tree_of(e, self._names)


class _Key:
    """One symbol being captured: the dims it stands for, its example value and range."""

    def __init__(self, name, kind, value, at):
        self.name, self.kind, self.value, self.at = name, kind, value, at  # at: the DimSpec its value is read from
        self.specs = []
        self.at_coeff, self.at_offset = 1, 0   # the dim at `at` is at_coeff * symbol + at_offset
        self.lower, self.upper = 2, math.inf
        self.named = set()


def capture_dynamic(fn, frame, names, first_user, bound, given, dynamic_shapes, Error):
    from .. import Tensor

    def fail(msg):
        raise Error(f"strata.export: {msg}")

    arg_index = {n: i for i, n in enumerate(names)}
    specs = collect(dynamic_shapes, bound, arg_index, given, fail)
    marked = {(s.source, s.dim) for s in specs}
    from ._dims import DimSpec
    for pname in given:
        t = bound[pname]
        for d in sorted(getattr(t, "_strata_dynamic_dims", None) or ()) if isinstance(t, Tensor) else ():
            src = S.arg(arg_index[pname])
            d %= t.dim()
            if (src, d) not in marked:
                specs.append(DimSpec(src, d, "dynamic", None, f"{pname}.shape[{d}]", t.shape[d], (("arg", pname),)))
                marked.add((src, d))
    specs = _check_examples(specs, fail)
    # Symbolic capture takes dynamic inputs as contiguous (Note [Symbolic shapes]): a strided example
    # (x.t()) is captured from a contiguous copy; the program's ops run on the call's own strides.
    frame = list(frame)
    for i in {s.source[0][1] for s in specs if len(s.source) == 1}:
        t = frame[i]
        if isinstance(t, Tensor) and not t.is_contiguous():
            frame[i] = t.contiguous()
    frame = tuple(frame)
    auto_static = set()
    merge = None     # groups of key names merged into one symbol (None: no merging)
    tried_merge = False
    code = fn.__code__
    for _ in range(32):
        active = [s for s in specs if (s.source, s.dim) not in auto_static]
        keys, by_dim = _keys(active, merge)
        try:
            if not merge:
                return _capture_once(fn, frame, names, first_user, keys, by_dim, code, fail)
            _capture_once(fn, frame, names, first_user, keys, by_dim, code, fail, check_merged=False)
            # Merging made it work: keep only the merges it needs (dims with one example size by chance
            # stay apart), then capture with those, where dims of two names merged raise.
            for gi in range(len(merge)):
                for name in list(merge[gi]):
                    if len(merge[gi]) < 2:
                        break
                    trial = [g if j != gi else [n for n in g if n != name] for j, g in enumerate(merge)]
                    k2, b2 = _keys(active, trial)
                    try:
                        _capture_once(fn, frame, names, first_user, k2, b2, code, fail, check_merged=False)
                        merge = trial
                    except (SymbolicFallback, _Retry, Error):
                        pass
            keys, by_dim = _keys(active, merge)
            return _capture_once(fn, frame, names, first_user, keys, by_dim, code, fail)
        except _Retry as r:
            auto_static |= r.args[0]
            continue
        except SpecializeSizes as e:
            hit = [k for k in keys.values() if (k.at.source, k.at.dim) in e.dims]
            strict = [k for k in hit if k.kind != "auto"]
            if strict:
                k = strict[0]
                fail(f"Constraints violated ({', '.join(k.name for k in strict)})! You marked {_label(k)} as "
                     f"dynamic, but the program needs it to equal a static size (its example size is {k.value}): "
                     f"{e.reason}\n  Suggested fix: make {k.specs[0].where} static (Dim.STATIC or None), or "
                     "Dim.AUTO to let export decide")
            if not hit:
                fail(f"a dynamic dim cannot stay symbolic: {e.reason}")
            for k in hit:
                auto_static |= {(s.source, s.dim) for s in k.specs}
            continue
        except SymbolicFallback as e:
            hints = {}
            for k in keys.values():
                hints.setdefault(k.value, []).append(k)
            same = [[k.name for k in ks] for ks in hints.values() if len(ks) > 1]
            if same and not tried_merge:
                tried_merge, merge = True, same
                continue
            autos = [s for s in active if s.kind == "auto"]
            if autos:
                auto_static |= {(s.source, s.dim) for s in autos}
                merge, tried_merge = None, False
                continue
            labels = ", ".join(sorted({_label(k) for k in keys.values()}))
            fail(f"Constraints violated! The dims marked dynamic ({labels}) cannot stay symbolic: {e.reason}\n"
                 "  Suggested fix: make the dim the program needs fixed static (Dim.STATIC or None), or use "
                 "Dim.AUTO")
        except Unsupported as e:
            raise Error(f"strata.export: {e.reason}\n  at {_where(e, code)}") from None
    fail("capture with dynamic dims did not settle")


def _label(k):
    return f"{k.name} ({_at_str(k)})" if k.kind == "named" else k.at.where


def _at_str(k):
    """Where the symbol is read: x.shape[0], or (x.shape[0] - 1)//2 for a root read from a derived dim."""
    w = k.at.where
    if k.at_offset:
        w = f"{w} {'-' if k.at_offset > 0 else '+'} {abs(k.at_offset)}"
    if k.at_coeff != 1:
        w = f"({w})//{k.at_coeff}" if k.at_offset else f"{w}//{k.at_coeff}"
    return w


def _check_examples(specs, fail):
    """Example sizes against the Dims: consistent roots, sizes >= 2, inside the ranges."""
    out = []
    roots = {}
    for s in specs:
        if s.size < 2:
            if s.kind == "auto":
                continue
            name = s.spec.__name__ if s.kind == "named" else s.where
            fail(f"Constraints violated ({name})! You marked {s.where} as dynamic but its example size is {s.size}: "
                 "sizes 0 and 1 are specialized. Use an example of size >= 2 (or make the dim static)")
        if s.kind == "named":
            d = s.spec
            root, coeff, off = (d.root, d.coeff, d.offset) if isinstance(d, _Derived) else (d, 1, 0)
            if (s.size - off) % coeff:
                fail(f"{s.where} has the example size {s.size}, which is not {d.__name__} for any integer "
                     f"{root.__name__}")
            v = (s.size - off) // coeff
            prev = roots.get(root.__name__)
            if prev is not None:
                pd, pv, pw = prev
                if (pd.min, pd.max) != (root.min, root.max):
                    fail(f"two Dims named {root.__name__!r} have different ranges ({pd!r} and {root!r})")
                if pv != v:
                    fail(f"the example inputs disagree on {root.__name__}: {pw} gives {pv}, {s.where} gives {v}")
            else:
                roots[root.__name__] = (root, v, s.where)
            if not root.lower <= v <= root.upper:
                fail(f"the example {s.where} = {s.size} gives {root.__name__} = {v}, outside its range "
                     f"[{root.lower}, {root.upper}]" + (" (sizes 0 and 1 are never dynamic)" if v < 2 else ""))
        out.append(s)
    return out


def _keys(specs, merge):
    """name -> _Key, and (source, dim) -> (key name, coeff, offset)."""
    keys, by_dim = {}, {}
    # roots first: plain named dims, then auto/dynamic (each its own key)
    auto_n = 0
    for s in specs:
        if s.kind == "named" and not isinstance(s.spec, _Derived):
            k = keys.get(s.spec.__name__)
            if k is None:
                k = keys[s.spec.__name__] = _Key(s.spec.__name__, "named", s.size, s)
                k.lower, k.upper = s.spec.lower, s.spec.upper
                k.named.add(s.spec.__name__)
    for s in specs:
        if s.kind == "named" and isinstance(s.spec, _Derived) and s.spec.root.__name__ not in keys:
            # a derived dim whose root marks no input dim: the root is read from this dim
            r = s.spec.root
            k = keys[r.__name__] = _Key(r.__name__, "named", (s.size - s.spec.offset) // s.spec.coeff, s)
            k.lower, k.upper = r.lower, r.upper
            k.named.add(r.__name__)
            k.at_coeff, k.at_offset = s.spec.coeff, s.spec.offset
    for s in specs:
        if s.kind in ("auto", "dynamic"):
            name = f"s{auto_n}"
            auto_n += 1
            keys[name] = _Key(name, s.kind, s.size, s)
            by_dim[(s.source, s.dim)] = (name, 1, 0)
            keys[name].specs.append(s)
        elif isinstance(s.spec, _Derived):
            by_dim[(s.source, s.dim)] = (s.spec.root.__name__, s.spec.coeff, s.spec.offset)
            keys[s.spec.root.__name__].specs.append(s)
        else:
            by_dim[(s.source, s.dim)] = (s.spec.__name__, 1, 0)
            keys[s.spec.__name__].specs.append(s)
    if merge:
        order = {"named": 0, "dynamic": 1, "auto": 2}
        for names in merge:
            group = sorted((keys[n] for n in names if n in keys), key=lambda k: order[k.kind])
            if len(group) < 2:
                continue
            head = group[0]
            for k in group[1:]:
                head.specs += k.specs
                head.named |= k.named
                head.lower, head.upper = max(head.lower, k.lower), min(head.upper, k.upper)
                if head.kind == "auto" and k.kind == "dynamic":
                    head.kind = "dynamic"
                del keys[k.name]
                for dim, (n, c, o) in list(by_dim.items()):
                    if n == k.name:
                        by_dim[dim] = (head.name, c, o)
    return keys, by_dim


def _capture_once(fn, frame, names, first_user, keys, by_dim, code, fail, check_merged=True):
    from . import _flatten_output
    if keys:
        named = {dim: (n, c, o, (keys[n].at.source, keys[n].at.dim)) for dim, (n, c, o) in by_dim.items()}
        dims = {}
        for src, d in by_dim:
            dims.setdefault(src, set()).add(d)
        dyn = {"all": False, "dims": dims, "named": named}
    else:
        dyn = None
    out, tx, kind, r = _attempt(fn, frame, {"fullgraph": True, "what": "strata.export"}, None, dyn)
    if kind != "return":
        fail(f"the frame of {code.co_qualname} does not return normally\n  at {code.co_filename}:{code.co_firstlineno}")
    out_ids = []
    out_spec = _flatten_output(r, out_ids)
    out.graph.set_outputs(out_ids)
    out.graph.eliminate_dead_code()
    if out.symbols:
        validate_dynamic(out)
    # Symbols by name: the key whose root location the Symbol reads.
    sym_names = {}
    by_at = {(k.at.source, k.at.dim): k for k in keys.values()}
    for y in out.symbols:
        k = by_at.get((y.source, y.dim))
        if k is None:
            fail(f"internal: a symbol at {y.source}[{y.dim}] has no Dim")
        sym_names[y.index] = k.name
    dims_expr = {}   # (source, dim) -> tree
    for vid, src in zip(out.graph.inputs, out.input_sources):
        if isinstance(src, tuple):
            shape = out.sym_by_vid.get(vid)
            if shape is not None:
                for d, e in enumerate(shape):
                    dims_expr[(src, d)] = tree_of(e, sym_names)

    def conv(t):
        # a guard tree from SymExpr.guard_tree: ("size", source, dim) at a symbol's location is the symbol
        if isinstance(t, int):
            return t
        if t[0] == "size":
            k = by_at.get((t[1], t[2]))
            return ["sym", k.name] if k is not None else dims_expr.get((t[1], t[2]), None)
        if t[0] == "stride":
            return None
        a, b = conv(t[1]), conv(t[2])
        if a is None or b is None:
            return None
        return [_GUARD_OPS[t[0]], a, b]

    ranges = {k.name: [k.lower, k.upper] for k in keys.values()}
    declared = {k.name: (k.lower, k.upper) for k in keys.values()}
    assertions = []
    too_narrow = []
    for lhs, op, rhs in out.relations:
        a, b = conv(lhs), conv(rhs)
        if a is None or b is None:
            continue
        syms = tree_symbols(a) | tree_symbols(b)
        if not syms:
            continue
        if op == ">=" and b == 2 and isinstance(a, list) and a[0] == "sym":
            continue          # every symbol is >= 2
        if len(syms) == 1:
            (name,) = syms
            k = keys[name]
            aff = _affine(a, b, name)
            if op == "==" and (aff is not None and aff[0] != 0):
                if k.kind == "auto":
                    raise _Retry({(s.source, s.dim) for s in k.specs})
                fail(f"Constraints violated ({k.name})! You marked {_label(k)} as dynamic but the program "
                     f"specialized it to be a constant ({k.value}): it relies on {tree_str(a)} == {tree_str(b)}\n"
                     f"  Suggested fix: make {k.at.where} static (Dim.STATIC or None), or use Dim.AUTO")
            if aff is not None and op in (">", ">=", "<", "<="):
                lo, hi = _solve(aff, op)
                if lo is None and hi is None:
                    continue
                r = ranges[name]
                nlo, nhi = max(r[0], lo if lo is not None else r[0]), min(r[1], hi if hi is not None else r[1])
                if k.kind == "named" and (nlo, nhi) != tuple(r):
                    too_narrow.append((k, tree_str(a), op, tree_str(b), nlo, nhi))
                r[0], r[1] = nlo, nhi
                continue
        assertions.append((a, op, b))
    if too_narrow:
        lines, fixes = [], {}
        for k, ta, op, tb, nlo, nhi in too_narrow:
            lo, hi = declared[k.name]
            lines.append(f"  - Not all values of {k.name} = {_at_str(k)} in the specified range [{lo}, "
                         f"{_inf(hi)}] satisfy the condition {ta} {op} {tb} the program relies on")
            parts = [repr(k.name)] + ([f"min={ranges[k.name][0]}"] if ranges[k.name][0] > 2 else []) + (
                [f"max={ranges[k.name][1]}"] if ranges[k.name][1] != math.inf else [])
            fixes[k.name] = f"  {k.name} = Dim({', '.join(parts)})"
        fail(f"Constraints violated ({', '.join(fixes)})!\n" + "\n".join(lines) + "\nSuggested fixes:\n" +
             "\n".join(fixes.values()))
    for k in keys.values():
        if check_merged and len(k.named) > 1:
            others = sorted(k.named - {k.name})
            where = {s.spec.__name__ if not isinstance(s.spec, _Derived) else s.spec.root.__name__: s.where
                     for s in k.specs if s.kind == "named"}
            fail("Constraints violated (" + ", ".join([k.name] + others) + ")! " + "; ".join(
                f"The values of {o} = {where[o]} and {k.name} = {where[k.name]} must always be equal" for o in others)
                + "\nSuggested fixes:\n" + "\n".join(f"  {o} = {k.name}" for o in others))
    # Every named or Dim.DYNAMIC dim must still be symbolic (not silently static).
    symbolic_dims = {(src, d) for (src, d), t in dims_expr.items() if isinstance(t, list)}
    for k in keys.values():
        for s in k.specs:
            if (s.source, s.dim) not in symbolic_dims:
                if k.kind == "auto":
                    raise _Retry({(s.source, s.dim)})
                fail(f"Constraints violated ({k.name})! You marked {s.where} as dynamic but the capture "
                     f"specialized it to be a constant ({s.size})")
    symbols = []
    used = set(sym_names.values())
    for k in keys.values():
        if k.name not in used:
            continue
        symbols.append({"name": k.name, "path": list(k.at.path), "dim": k.at.dim, "min": ranges[k.name][0],
                        "max": None if ranges[k.name][1] == math.inf else ranges[k.name][1], "kind": k.kind,
                        "coeff": k.at_coeff, "offset": k.at_offset})
    sym_shapes = {}
    for vid, shape in out.sym_by_vid.items():
        if any(isinstance(d, SymExpr) for d in shape):
            sym_shapes[vid] = [tree_of(d, sym_names) for d in shape]
    return Captured(out, r, out_spec, sym_names, symbols, sym_shapes, assertions)


def _inf(v):
    return "inf" if v == math.inf else v


def _affine(a, b, name):
    """(p, q) with a - b == p * name + q for every value, or None."""
    def f(v):
        return tree_eval(a, {name: v}) - tree_eval(b, {name: v})
    try:
        q = f(0)
        p = f(1) - q
        if all(f(v) == p * v + q for v in (2, 3, 7, 64, 1001)):
            return p, q
    except ZeroDivisionError:
        pass
    return None


def _solve(aff, op):
    """The integer interval [lo, hi] (None: unbounded) of v where p*v + q op 0."""
    p, q = aff
    if p == 0:
        return None, None
    if p < 0:
        p, q = -p, -q
        op = {">": "<", ">=": "<=", "<": ">", "<=": ">="}[op]
    if op == ">":
        return (-q) // p + 1, None
    if op == ">=":
        return -(q // p), None
    if op == "<":
        return None, -(q // p) - 1
    return None, (-q) // p
