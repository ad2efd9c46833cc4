"""The nests the function transforms accept: tuples, lists, dicts and namedtuples of
leaves (a leaf is anything else). flatten gives the leaves in order and a spec that
rebuilds the same nest from new leaves; specs compare equal when the structures match."""

__all__ = ["tree_flatten", "tree_unflatten", "tree_map", "spec_str"]


class _Spec:
    __slots__ = ("kind", "keys", "children", "n")

    def __init__(self, kind, keys, children):
        self.kind, self.keys, self.children = kind, keys, children
        self.n = 1 if kind is None else sum(c.n for c in children)

    def __eq__(self, other):
        return (isinstance(other, _Spec) and self.kind is other.kind and self.keys == other.keys
                and self.children == other.children)

    def __repr__(self):
        return spec_str(self)


_LEAF = _Spec(None, None, ())


def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def tree_flatten(x):
    leaves = []

    def go(v):
        if isinstance(v, (tuple, list)):
            return _Spec(type(v), None, [go(e) for e in v])
        if isinstance(v, dict):
            keys = list(v)
            return _Spec(type(v), keys, [go(v[k]) for k in keys])
        leaves.append(v)
        return _LEAF

    spec = go(x)
    return leaves, spec


def tree_unflatten(leaves, spec):
    it = iter(leaves)

    def go(s):
        if s.kind is None:
            return next(it)
        vals = [go(c) for c in s.children]
        if issubclass(s.kind, dict):
            return s.kind(zip(s.keys, vals)) if s.kind is dict else s.kind(list(zip(s.keys, vals)))
        if issubclass(s.kind, tuple) and hasattr(s.kind, "_fields"):
            return s.kind(*vals)
        return s.kind(vals)

    return go(spec)


def tree_map(fn, x):
    leaves, spec = tree_flatten(x)
    return tree_unflatten([fn(v) for v in leaves], spec)


def spec_str(spec):
    """A short picture of a nest: * for a leaf, (...) [...] {k: ...}."""
    if spec.kind is None:
        return "*"
    inner = [spec_str(c) for c in spec.children]
    if issubclass(spec.kind, dict):
        return "{" + ", ".join(f"{k!r}: {v}" for k, v in zip(spec.keys, inner)) + "}"
    if issubclass(spec.kind, list):
        return "[" + ", ".join(inner) + "]"
    return "(" + ", ".join(inner) + ("," if len(inner) == 1 else "") + ")"
