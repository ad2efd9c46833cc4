"""Python forms of the ops of src/ops/decl/misc_more.def whose torch signature
the schema cannot state: variadic tensors (einsum, block_diag, meshgrid, ...),
tuples of optional results (unique), and argument conversions (tensordot's
dims, histogram's range). Each one converts its arguments and makes one op call."""

import builtins as _builtins

from . import _C

Tensor = _C.Tensor
_ops = _C._ops


def _tensors(args, name):
    """Varargs or one list/tuple of tensors, as torch accepts both."""
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        args = args[0]
    return list(args)


def _sublist_equation(args):
    # einsum(op0, [0, 1], op1, [1, 2], [0, 2]): integer subscripts 0-51 -> letters.
    def letters(sub):
        s = ""
        for v in sub:
            if v is Ellipsis:
                s += "..."
            elif isinstance(v, int) and 0 <= v < 52:
                s += chr(ord("A") + v) if v < 26 else chr(ord("a") + v - 26)
            else:
                raise ValueError(f"einsum(): subscript in subscript list is not within the valid range [0, 52): {v}")
        return s

    operands, terms = [], []
    i = 0
    while i + 1 < len(args) and isinstance(args[i], Tensor):
        operands.append(args[i])
        terms.append(letters(args[i + 1]))
        i += 2
    eq = ",".join(terms)
    if i < len(args):
        eq += "->" + letters(args[i])
    return eq, operands


def einsum(*args):
    """einsum(equation, *operands), einsum(equation, [operands]) or the sublist form
    einsum(op0, sublist0, op1, sublist1, ..., [sublist_out])."""
    if not args:
        raise TypeError("einsum(): must specify the equation string and at least one operand, or at least one "
                        "operand and its subscripts list")
    if isinstance(args[0], Tensor):
        equation, operands = _sublist_equation(args)
    else:
        equation, operands = args[0], _tensors(args[1:], "einsum")
    return _ops.einsum(equation, operands)


def tensordot(a, b, dims=2, out=None):
    """Sums the products over dims: an int n (a's last n with b's first n), a pair of
    lists, or a (2, k) tensor."""
    if isinstance(dims, Tensor):
        dims = dims.tolist() if dims.ndim > 0 else int(dims.item())
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        if dims > min(a.ndim, b.ndim):
            raise RuntimeError(f"tensordot expects dims < ndim_a or ndim_b, but got dims={dims}")
        ds, do = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        if len(dims) != 2:
            raise RuntimeError("tensordot expects dims to be a pair of lists of dims")
        ds, do = dims
        ds = [ds] if isinstance(ds, int) else list(ds)
        do = [do] if isinstance(do, int) else list(do)
    if out is not None:
        return _ops.tensordot(a, b, ds, do, out=out)
    return _ops.tensordot(a, b, ds, do)


def block_diag(*tensors):
    return _ops.block_diag(list(tensors))


def cartesian_prod(*tensors):
    return _ops.cartesian_prod(list(tensors))


def meshgrid(*tensors, indexing=None):
    """Coordinate grids; indexing 'ij' (the default, as torch's) or 'xy'."""
    return tuple(_ops.meshgrid(_tensors(tensors, "meshgrid"), indexing="ij" if indexing is None else indexing))


def broadcast_tensors(*tensors):
    return tuple(_ops.broadcast_tensors(_tensors(tensors, "broadcast_tensors")))


def broadcast_shapes(*shapes):
    """The shape that tensors of the given shapes broadcast to (no tensors involved)."""
    from ._size import Size

    result = []
    for shape in shapes:
        if isinstance(shape, int):
            shape = (shape,)
        shape = tuple(shape)
        for s in shape:
            if not isinstance(s, int) or s < 0:
                raise RuntimeError(f"Trying to create tensor with negative dimension {s}: {list(shape)}")
        if len(shape) > len(result):
            result = [1] * (len(shape) - len(result)) + result
        for i in range(1, len(shape) + 1):
            a, b = result[-i], shape[-i]
            if a == 1:
                result[-i] = b
            elif b != 1 and a != b:
                raise RuntimeError(f"shape mismatch: objects cannot be broadcast to a single shape.  Mismatch is "
                                   f"between {a} and {b} at dimension {len(result) - i}")
    return Size(result)


def _atleast(op):
    def f(*tensors):
        if len(tensors) == 1 and isinstance(tensors[0], Tensor):
            return op(tensors[0])
        return tuple(op(t) for t in _tensors(tensors, op.__name__))

    return f


atleast_1d = _atleast(_ops.atleast_1d)
atleast_2d = _atleast(_ops.atleast_2d)
atleast_3d = _atleast(_ops.atleast_3d)


def histogram(input, bins=100, *, range=None, weight=None, density=False, out=None):
    """(hist, bin_edges) of input: bins an int (equal bins over range, or the data's
    range) or a 1-d tensor of edges."""
    if isinstance(bins, Tensor):
        r = _ops.histogram(input, bins, weight=weight, density=density)
    else:
        lo, hi = (None, None) if range is None else (float(range[0]), float(range[1]))
        r = _ops.histogram(input, int(bins), min=lo, max=hi, weight=weight, density=density)
    if out is not None:
        for o, v in zip(out, r):
            if tuple(o.shape) != tuple(v.shape):
                raise RuntimeError(f"histogram: out tensor has shape {list(o.shape)}, expected {list(v.shape)}")
            o.copy_(v)
        return tuple(out)
    return tuple(r)


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """Unique elements (sorted), with the inverse indices and counts on request."""
    if dim is None:
        u, inv, cnt = _ops._unique2(input, sorted, return_inverse, return_counts)
    else:
        u, inv, cnt = _ops._unique_dim(input, dim, sorted, return_inverse, return_counts)
    return _pick(u, inv, cnt, return_inverse, return_counts)


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """Drops all but the first element of every run of equal consecutive elements."""
    u, inv, cnt = _ops._unique_consecutive(input, return_inverse, return_counts, dim)
    return _pick(u, inv, cnt, return_inverse, return_counts)


def _pick(u, inv, cnt, return_inverse, return_counts):
    if return_inverse and return_counts:
        return u, inv, cnt
    if return_inverse:
        return u, inv
    if return_counts:
        return u, cnt
    return u


def _install():
    Tensor.unique = lambda self, sorted=True, return_inverse=False, return_counts=False, dim=None: unique(
        self, sorted, return_inverse, return_counts, dim)
    Tensor.unique_consecutive = lambda self, return_inverse=False, return_counts=False, dim=None: unique_consecutive(
        self, return_inverse, return_counts, dim)
    Tensor.histogram = lambda self, bins=100, *, range=None, weight=None, density=False: histogram(
        self, bins, range=range, weight=weight, density=density)
    # The generic binding gives every op with out= an in-place method and every
    # op whose first argument is self a method; torch has neither for these.
    for name in ("tensordot", "tensordot_", "kron_", "cross_", "diff_", "diag_", "histc_", "bucketize_", "take_",
                 "linalg_cross", "linalg_cross_", "cdist", "pdist", "vander", "combinations_"):
        if name in Tensor.__dict__:
            try:
                delattr(Tensor, name)
            except AttributeError:
                pass


_install()

__all__ = ["einsum", "tensordot", "block_diag", "cartesian_prod", "meshgrid", "broadcast_tensors",
           "broadcast_shapes", "atleast_1d", "atleast_2d", "atleast_3d", "histogram", "unique", "unique_consecutive"]
