"""Sources: where a value seen by the symbolic interpreter came from.

A source is a tuple of steps starting at a root: ("arg", i) the frame's i-th argument,
("global", name), ("closure", i) the contents of the function's i-th closure cell; then
("attr", name), ("item", key) (indexing), ("dict_item", key) (a dict read without
__getitem__). The same tuples feed the C++ guard set (strata._C._guards), the Python
expression that fetches the value at run time, and the name printed in explain() and
in guard failures (L['self'].layer1.weight)."""

import keyword

__all__ = ["arg", "glob", "closure", "attr", "item", "dict_item", "name", "expr", "root_kind"]


def arg(i):
    return (("arg", i),)


def glob(n):
    return (("global", n),)


def closure(i):
    return (("closure", i),)


def attr(src, n):
    return src + (("attr", n),) if src is not None else None


def item(src, k):
    return src + (("item", k),) if src is not None else None


def dict_item(src, k):
    return src + (("dict_item", k),) if src is not None else None


def root_kind(src):
    return src[0][0]


def _is_ident(n):
    return isinstance(n, str) and n.isidentifier() and not keyword.iskeyword(n)


def name(src, arg_names=(), freevars=()):
    """Printable name: L['x'], G['F'], L['self'].layer1._parameters['weight']."""
    kind, v = src[0]
    if kind == "arg":
        out = f"L[{(arg_names[v] if v < len(arg_names) else v)!r}]"
    elif kind == "global":
        out = f"G[{v!r}]"
    else:
        out = f"C[{(freevars[v] if v < len(freevars) else v)!r}]"
    for kind, v in src[1:]:
        if kind == "attr":
            out += f".{v}" if _is_ident(v) else f".getattr({v!r})"
        else:
            out += f"[{v!r}]"
    return out


def ident(src, arg_names=()):
    """An identifier for a graph input: self_layers_0_weight, G_scale."""
    kind, v = src[0]
    parts = [str(arg_names[v]) if kind == "arg" and v < len(arg_names) else f"{kind[0].upper()}{v}"]
    if kind == "global":
        parts = [str(v)]
    for kind, v in src[1:]:
        if v in ("_parameters", "_buffers", "_modules", "__dict__", "cell_contents"):
            continue
        parts.append(str(v))
    out = "_".join(parts)
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in out)
    return out if out and not out[0].isdigit() else "v_" + out


def expr(src):
    """Python expression over (A: args tuple, G: globals, C: closure) that fetches the value."""
    kind, v = src[0]
    if kind == "arg":
        out = f"A[{v}]"
    elif kind == "global":
        out = f"G[{v!r}]"
    else:
        out = f"C[{v}].cell_contents"
    for kind, v in src[1:]:
        if kind == "attr":
            out = f"{out}.{v}" if _is_ident(v) and not v.startswith("__") else f"getattr({out}, {v!r})"
        else:
            out = f"{out}[{v!r}]"
    return out
