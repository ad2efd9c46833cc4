"""Sparse COO tensors (docs/SPARSE.md).

A sparse tensor is a strata.Tensor whose C++ object is a SparseTensorImpl (src/sparse/sparse.h): it holds
an int64 ``indices`` tensor of shape (sparse_dim, nnz) and a ``values`` tensor of shape (nnz, *dense_sizes),
and has no element memory of its own. Its key set carries the Sparse key, so any op given one reaches the
Sparse fallback, which calls ``_handle`` below; the ops listed in ``_HANDLERS`` are implemented here with
dense ops on indices and values (so autograd through values and dense operands is the dense ops' own), and
every other op raises NotImplementedError naming the op and the layout.
"""

import builtins
import math

from . import _C
from ._creation import layout

Tensor = _C.Tensor
_ops = _C._ops

sparse_coo = layout("sparse_coo")
_is_sparse = _C._is_sparse


def _parts(t):
    return _C._sparse_parts(t)


def _make(indices, values, size, coalesced):
    return _C._sparse_coo_make(indices, values, [int(s) for s in size], bool(coalesced))


def _check_sparse(t, what):
    if not _is_sparse(t):
        raise RuntimeError(f"{what}: expected a sparse tensor (layout strata.sparse_coo), got a strided tensor")


# ---- construction ----------------------------------------------------------------------------------------
def _as_tensor(x, dtype=None, device=None):
    if isinstance(x, Tensor):
        if dtype is not None and x.dtype is not dtype:
            x = x.to(dtype)
        if device is not None:
            x = x.to(device)
        return x
    from ._functions import tensor
    return tensor(x, dtype=dtype, device=device)


def _check_bounds(indices, size, check_negative):
    sd = indices.shape[0]
    if indices.shape[1] == 0:
        return
    mx = indices.amax(1).tolist()
    mn = indices.amin(1).tolist()
    for d in builtins.range(sd):
        if check_negative and mn[d] < 0:
            raise RuntimeError(f"found negative index {mn[d]} for dim {d}")
        if mx[d] >= size[d]:
            raise RuntimeError(f"size is inconsistent with indices: for dim {d}, size is {size[d]} but found "
                               f"index {mx[d]}")


def sparse_coo_tensor(indices, values, size=None, *, dtype=None, device=None, pin_memory=False,
                      requires_grad=False, check_invariants=None, is_coalesced=None):
    """torch.sparse_coo_tensor: a sparse COO tensor from (sparse_dim, nnz) int64 indices and (nnz, ...)
    values. Without size, each sparse size is one more than the largest index (0 when nnz is 0) and the
    dense sizes are values.shape[1:]. Indices beyond a given size raise, as torch's do; negative indices
    raise only with check_invariants=True (torch's rule)."""
    from ._C import int64
    if isinstance(indices, Tensor) and _is_sparse(indices):
        raise TypeError("sparse_coo_tensor(): indices must be a dense tensor")
    indices = _as_tensor(indices, device=device)
    if indices.dtype is not int64:
        if indices.dtype.is_floating_point or indices.dtype.is_complex:
            raise RuntimeError(f"sparse_coo_tensor(): indices must be an int64 tensor, got {indices.dtype}")
        indices = indices.to(int64)
    values = _as_tensor(values, dtype=dtype, device=device if device is not None else indices.device)
    if indices.dim() != 2:
        raise RuntimeError(f"sparse_coo_tensor(): indices must be sparse_dim x nnz, but got: {list(indices.shape)}")
    if values.dim() == 0 or indices.shape[1] != values.shape[0]:
        nv = values.shape[0] if values.dim() else "a 0-d tensor"
        raise RuntimeError(f"indices and values must have same nnz, but got nnz from indices: {indices.shape[1]}, "
                           f"nnz from values: {nv}")
    sd = indices.shape[0]
    if check_invariants is None:
        from .sparse import check_sparse_tensor_invariants
        check_invariants = check_sparse_tensor_invariants.is_enabled()
    if size is None:
        if indices.shape[1] == 0:
            sparse_sizes = [0] * sd
        else:
            sparse_sizes = [m + 1 for m in indices.amax(1).tolist()]
        size = sparse_sizes + list(values.shape[1:])
        given_size = False
    else:
        given_size = True
        size = [int(s) for s in size]
        if len(size) != sd + values.dim() - 1:
            raise RuntimeError(f"number of dimensions must be sparse_dim ({sd}) + dense_dim ({values.dim() - 1}), "
                               f"but got {len(size)}")
    if check_invariants or given_size:  # indices beyond size always raise; negative ones only when checking
        _check_bounds(indices, size, bool(check_invariants))
    if not values.requires_grad:
        values = values.detach()
    elif values.is_leaf:
        # An alias with history: the sparse tensor (which shares its values' autograd metadata) is then a
        # non-leaf with a grad_fn, as torch's, and the gradient still reaches the leaf values.
        values = values.view_as(values)
    coalesced = bool(is_coalesced) if is_coalesced is not None else indices.shape[1] <= 1
    t = _make(indices, values, size, coalesced)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _sparse_coo_tensor_unsafe(indices, values, size, dtype=None, device=None, requires_grad=False):
    return sparse_coo_tensor(indices, values, size, dtype=dtype, device=device, requires_grad=requires_grad)


def _empty(size, dtype=None, device=None, sparse_dim=None):
    from ._C import int64
    from . import zeros, empty
    size = [int(s) for s in size]
    sd = len(size) if sparse_dim is None else sparse_dim
    return _make(empty((sd, 0), dtype=int64, device=device), zeros([0] + size[sd:], dtype=dtype, device=device),
                 size, True)


# ---- coalescing ---------------------------------------------------------------------------------------------
def _linear_index(indices, sizes):
    """Row-major position of each column of indices within the sparse sizes."""
    lin = None
    for d in builtins.range(indices.shape[0]):
        row = indices[d]
        lin = row.clone() if lin is None else lin * sizes[d] + row
    return lin


def _unravel(lin, sizes):
    rows = []
    for d in builtins.range(len(sizes) - 1, -1, -1):
        rows.append(lin % sizes[d] if sizes[d] > 0 else lin)
        lin = lin // sizes[d] if sizes[d] > 0 else lin
    from . import stack
    return stack(rows[::-1]) if rows else lin.reshape(0, lin.shape[0])


def coalesce(self):
    _check_sparse(self, "coalesce()")
    indices, values, coalesced = _parts(self)
    if coalesced:
        return self
    sd = indices.shape[0]
    sizes = list(self.shape[:sd])
    if indices.shape[1] == 0:
        return _make(indices, values, self.shape, True)
    lin = _linear_index(indices, sizes)
    uniq, inverse, _ = _ops._unique2(lin, True, True, False)
    from . import zeros
    summed = zeros((uniq.shape[0],) + tuple(values.shape[1:]), dtype=values.dtype, device=values.device)
    summed = summed.index_put((inverse,), values, True)
    return _make(_unravel(uniq, sizes), summed, self.shape, True)


# ---- conversion ------------------------------------------------------------------------------------------
def to_dense(self, dtype=None, *, masked_grad=None):
    if not _is_sparse(self):
        return self if dtype is None else self.to(dtype)
    indices, values, _ = _parts(self)
    from . import zeros
    out = zeros(tuple(self.shape), dtype=values.dtype, device=values.device)
    if indices.shape[1]:
        out = out.index_put(tuple(indices.unbind(0)), values, True)
    return out if dtype is None else out.to(dtype)


def to_sparse(self, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
    if layout is not None and layout is not sparse_coo:
        raise NotImplementedError(f"to_sparse(): layout {layout!r} is not supported (only strata.sparse_coo)")
    if blocksize is not None:
        raise NotImplementedError("to_sparse(): blocksize is only for block layouts, which Strata lacks")
    if _is_sparse(self):
        if sparse_dim is not None and sparse_dim != self.sparse_dim():
            raise RuntimeError("to_sparse(): conversion to a different sparse_dim is not supported; "
                               "to_dense() first")
        return self
    n = self.dim()
    sd = n if sparse_dim is None else int(sparse_dim)
    if dense_dim is not None:
        sd = n - int(dense_dim)
    if not 0 <= sd <= n:
        raise RuntimeError(f"to_sparse(): sparse_dim {sd} is out of range for a {n}-d tensor")
    x = self
    if sd == 0:
        from ._C import int64
        from . import empty
        return _make(empty((0, 1), dtype=int64, device=x.device), x.unsqueeze(0), x.shape, True)
    mask = x != 0
    if sd < n:
        mask = mask.reshape(tuple(x.shape[:sd]) + (-1,)).any(-1)
    indices = mask.nonzero().t().contiguous()
    values = x[tuple(indices.unbind(0))]
    return _make(indices, values, x.shape, True)


# ---- accessors ------------------------------------------------------------------------------------------
def _indices(self):
    _check_sparse(self, "_indices()")
    return _parts(self)[0]


def _values(self):
    _check_sparse(self, "_values()")
    return _parts(self)[1]


def indices(self):
    _check_sparse(self, "indices()")
    ind, _, coalesced = _parts(self)
    if not coalesced:
        raise RuntimeError("Cannot get indices on an uncoalesced tensor, please call .coalesce() first")
    return ind


def values(self):
    _check_sparse(self, "values()")
    _, val, coalesced = _parts(self)
    if not coalesced:
        raise RuntimeError("Cannot get values on an uncoalesced tensor, please call .coalesce() first")
    return val


def _nnz(self):
    _check_sparse(self, "_nnz()")
    return _parts(self)[1].shape[0]


def sparse_dim(self):
    return _parts(self)[0].shape[0] if _is_sparse(self) else 0


def dense_dim(self):
    return _parts(self)[1].dim() - 1 if _is_sparse(self) else self.dim()


def is_coalesced(self):
    _check_sparse(self, "is_coalesced()")
    return _parts(self)[2]


def _coalesced_(self, coalesced):
    _C._sparse_set_coalesced(self, bool(coalesced))
    return self


def sparse_mask(self, mask):
    """self (dense) at mask's (sparse) positions, as a sparse tensor with mask's indices."""
    if not _is_sparse(mask):
        raise RuntimeError("sparse_mask(): expected mask to be a sparse COO tensor")
    if _is_sparse(self):
        self = to_dense(self)
    if tuple(self.shape) != tuple(mask.shape):
        raise RuntimeError(f"sparse_mask(): operands have incompatible sizes; self has size {list(self.shape)} "
                           f"but mask has size {list(mask.shape)}")
    ind, _, coalesced = _parts(mask)
    vals = self[tuple(ind.unbind(0))] if ind.shape[1] else self.reshape((0,) + tuple(self.shape[ind.shape[0]:]))
    return _make(ind, vals, self.shape, coalesced)


# ---- products ---------------------------------------------------------------------------------------------
def _leaf_values(s):
    """The values to compute with: the sparse tensor's own values when they carry history (the graph then
    reaches them), else, for a sparse leaf that requires grad, a leaf copy whose gradient is turned into
    s.grad by a hook (a sparse gradient with s's pattern, as torch.sparse.mm gives)."""
    ind, val, coalesced = _parts(s)
    if val.requires_grad or not s.requires_grad:
        return ind, val, None
    proxy = val.detach().requires_grad_(True)
    return ind, proxy, proxy


def _masked_coalesced(ind, entry_vals, size):
    """A coalesced sparse tensor whose value at each distinct position of ind is entry_vals at (any) entry
    there: the entries of one position carry equal values (a gradient read at that position)."""
    sd = ind.shape[0]
    sizes = list(size[:sd])
    if ind.shape[1] == 0:
        return _make(ind, entry_vals, size, True)
    uniq, inverse, _ = _ops._unique2(_linear_index(ind, sizes), True, True, False)
    from . import zeros
    vals = zeros((uniq.shape[0],) + tuple(entry_vals.shape[1:]), dtype=entry_vals.dtype, device=entry_vals.device)
    vals = vals.index_put((inverse,), entry_vals)
    return _make(_unravel(uniq, sizes), vals, size, True)


def _set_grad(s, new):
    old = s.grad
    s.grad = new if old is None else (_add(old, new, 1) if _is_sparse(old) or _is_sparse(new) else old + new)


def _spmm(s, d, name="mm", dense_grad=False):
    """s (2-D sparse) @ d (1-D or 2-D dense) with dense ops: rows of d gathered at the column indices,
    scaled by the values, summed into the rows (index_put with accumulate). Autograd flows through these ops to d and to
    values that carry history. A sparse leaf that requires grad gets torch's gradient: for torch.sparse.mm
    a sparse one with s's (coalesced) pattern, (grad @ d^T) read there; for torch.mm/matmul/addmm the
    dense grad @ d^T."""
    if not _is_sparse(s):
        raise RuntimeError(f"{name}: expected the first argument to be sparse")
    if _is_sparse(d):
        return to_sparse(_spmm(s, to_dense(d), name))
    if s.dim() != 2 or sparse_dim(s) != 2:
        raise RuntimeError(f"{name}: expected a 2-D sparse matrix (sparse_dim 2, dense_dim 0), got size "
                           f"{list(s.shape)} with sparse_dim {sparse_dim(s)}")
    vec = d.dim() == 1
    if d.dim() not in (1, 2):
        raise RuntimeError(f"{name}: expected a 1-D or 2-D dense operand, got {d.dim()}-D")
    if d.shape[0] != s.shape[1]:
        raise RuntimeError(f"{name}: sparse matrix of size {list(s.shape)} and dense of size {list(d.shape)} "
                           f"cannot be multiplied ({s.shape[1]} != {d.shape[0]})")
    if s.dtype is not d.dtype:
        raise RuntimeError(f"{name}: expected sparse and dense operands to have the same dtype, got {s.dtype} "
                           f"and {d.dtype}")
    ind, val, proxy = _leaf_values(s)
    dm = d.unsqueeze(1) if vec else d
    from . import zeros
    out = zeros((s.shape[0], dm.shape[1]), dtype=dm.dtype, device=dm.device)
    if ind.shape[1]:
        contrib = dm[ind[1]] * val.unsqueeze(1)  # (its backward accumulates with index_put too)
        # index_put(accumulate=True) rather than index_add: the same sums, ~10x faster on one thread today
        out = out.index_put((ind[0],), contrib, True)
    if proxy is not None:
        if dense_grad:
            dd = dm.detach()
            out.register_hook(lambda g: _set_grad(s, g @ dd.t()))
        else:
            size = tuple(s.shape)
            # torch's gradient has the coalesced pattern but is not flagged coalesced.
            proxy.register_hook(lambda g: _set_grad(s, _coalesced_(_masked_coalesced(ind, g, size), False)))
    return out.squeeze(1) if vec else out


def mm(mat1, mat2):
    """torch.sparse.mm: sparse @ dense (dense result; the sparse operand's gradient is sparse with its
    pattern) or sparse @ sparse (sparse result)."""
    return _spmm(mat1, mat2, "sparse.mm")


def addmm(input, mat1, mat2, *, beta=1, alpha=1, _dense_grad=False):
    """torch.sparse.addmm: beta * input + alpha * (mat1 @ mat2); a sparse leaf mat1 gets a sparse gradient
    (strata.addmm, through the handler, gives the dense one, as torch's)."""
    prod = _spmm(mat1, mat2, "addmm", dense_grad=_dense_grad)
    if _is_sparse(input):
        input = to_dense(input)
    out = prod if alpha == 1 else prod * alpha
    if beta == 0:
        return out
    return out + (input if beta == 1 else input * beta)


# ---- arithmetic -------------------------------------------------------------------------------------------
def _add(a, b, alpha):
    sa, sb = _is_sparse(a), _is_sparse(b)
    if sa and sb:
        if tuple(a.shape) != tuple(b.shape):
            raise RuntimeError(f"add: expected sizes of self and other to match, but {list(a.shape)} != "
                               f"{list(b.shape)}")
        ia, va, ca = _parts(a)
        ib, vb, cb = _parts(b)
        if ia.shape[0] != ib.shape[0]:
            raise RuntimeError("add: expected self and other to have the same sparse_dim")
        from . import cat, promote_types
        dt = promote_types(va.dtype, vb.dtype)
        if alpha != 1:
            vb = vb * alpha
        s = _make(cat([ia, ib], 1), cat([va.to(dt), vb.to(dt)], 0), a.shape, False)
        return coalesce(s) if ca and cb else s
    if sa:  # sparse + dense: a dense result
        return to_dense(a).add(b, alpha=alpha)
    ind, val, _ = _parts(b)  # dense + sparse
    v = val if alpha == 1 else val * alpha
    if ind.shape[1] == 0:
        return a.clone()
    return a.index_put(tuple(ind.unbind(0)), v.to(a.dtype), True)


def _is_scalar_like(x):
    return not isinstance(x, Tensor) or (x.dim() == 0 and not _is_sparse(x))


def _mul(a, b, name="mul"):
    if _is_sparse(a) and _is_scalar_like(b):
        ind, val, c = _parts(a)
        return _make(ind, getattr(val, name)(b), a.shape, c)
    if _is_sparse(b) and _is_scalar_like(a) and name == "mul":
        return _mul(b, a)
    if _is_sparse(a) and not _is_sparse(b) and name == "mul":
        if tuple(a.shape) != tuple(b.shape):
            raise RuntimeError(f"mul: sparse * dense needs equal sizes, got {list(a.shape)} and {list(b.shape)}")
        ac = coalesce(a)
        ind, val, _ = _parts(ac)
        return _make(ind, val * b[tuple(ind.unbind(0))], a.shape, True)
    if _is_sparse(b) and not _is_sparse(a) and name == "mul":
        return _mul(b, a)
    if _is_sparse(a) and _is_sparse(b) and name == "mul":
        return to_sparse(to_dense(a) * to_dense(b), sparse_dim(a))
    return NotImplemented


def _transpose(s, d0, d1):
    n = s.dim()
    d0, d1 = d0 % n if n else d0, d1 % n if n else d1
    ind, val, _ = _parts(s)
    sd = ind.shape[0]
    if d0 >= sd or d1 >= sd:
        raise RuntimeError("transpose(): of a sparse tensor is only supported between sparse dims")
    perm = list(builtins.range(sd))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    size = list(s.shape)
    size[d0], size[d1] = size[d1], size[d0]
    return _make(ind[perm], val, size, sd <= 1 or d0 == d1 and _parts(s)[2])


def _sum(s, dim=None, keepdim=False, dtype=None):
    ind, val, _ = _parts(s)
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        out = val.sum()
        return out if dtype is None else out.to(dtype)
    if keepdim:
        raise NotImplementedError("sum of a sparse tensor with keepdim=True is not supported")
    dims = [dim] if isinstance(dim, int) else list(dim)
    n = s.dim()
    dims = sorted({d % n for d in dims})
    sd = ind.shape[0]
    sdims = [d for d in dims if d < sd]
    ddims = [d - sd + 1 for d in dims if d >= sd]
    if ddims:
        val = val.sum(ddims)
    if dtype is not None:
        val = val.to(dtype)
    keep = [d for d in builtins.range(sd) if d not in sdims]
    new_size = [s.shape[d] for d in keep] + [s.shape[d] for d in builtins.range(sd, n) if d not in dims]
    if not keep:
        return val.sum(0)
    out = _make(ind[keep], val, new_size, False)
    return coalesce(out)


def sum(input, dim=None, dtype=None):  # noqa: A001  (torch.sparse.sum)
    _check_sparse(input, "sparse.sum()")
    return _sum(input, dim, False, dtype)


def _softmax(input, dim, dtype=None, log=False):
    """torch.sparse.softmax / log_softmax: over the specified entries that share every index but dim's (the
    unspecified ones count as -inf, i.e. are left out), with dense ops so the values' gradient is autograd's."""
    what = "sparse.log_softmax" if log else "sparse.softmax"
    _check_sparse(input, what + "()")
    c = coalesce(input)
    ind, val, _ = _parts(c)
    n = input.dim()
    dim = dim % n if n else dim
    sd = ind.shape[0]
    if val.dim() != 1 or dim >= sd:
        raise NotImplementedError(f"{what}: only sparse tensors without dense dims, over a sparse dim, are "
                                  "supported")
    if dtype is not None:
        val = val.to(dtype)
    if ind.shape[1] == 0:
        return _make(ind, val, input.shape, True)
    keep = [d for d in builtins.range(sd) if d != dim]
    if keep:
        lin = _linear_index(ind[keep], [input.shape[d] for d in keep])
        _, group, _ = _ops._unique2(lin, True, True, False)
    else:
        from . import zeros
        group = zeros(ind.shape[1], dtype=_C.int64)
    from . import full
    ng = int(group.max().item()) + 1
    mx = full((ng,), float("-inf"), dtype=val.dtype).scatter_reduce(0, group, val.detach(), "amax")
    shifted = val - mx.index_select(0, group)
    e = shifted.exp()
    from . import zeros
    denom = zeros(ng, dtype=val.dtype).index_add(0, group, e)
    out = shifted - denom.log().index_select(0, group) if log else e / denom.index_select(0, group)
    return _make(ind, out, input.shape, True)


def softmax(input, dim, *, dtype=None):
    return _softmax(input, dim, dtype)


def log_softmax(input, dim, *, dtype=None):
    return _softmax(input, dim, dtype, log=True)


def _index_select(s, dim, index):
    """Slices of a sparse tensor along dim, in index's order (repeats repeat), as torch's: a sparse result whose
    entries are those of s with the index in dim renumbered; differentiable in the values (a gather)."""
    if index.dim() > 1 or index.dtype not in (_C.int64, _C.int32):
        raise RuntimeError("index_select(): index must be a 1-D int64 or int32 tensor")
    ind, val, _ = _parts(s)
    n = s.dim()
    dim = dim % n if n else dim
    sd = ind.shape[0]
    index = index.reshape(-1).to(_C.int64)
    size = list(s.shape)
    if index.numel() and (int(index.min().item()) < 0 or int(index.max().item()) >= size[dim]):
        raise IndexError(f"index_select(): index out of range for dimension {dim} with size {size[dim]}")
    new_size = size[:dim] + [index.shape[0]] + size[dim + 1:]
    if dim >= sd:  # a dense dim: select in the values
        return _make(ind, val.index_select(dim - sd + 1, index), new_size, _parts(s)[2])
    # pairs (entry e, position k) with ind[dim, e] == index[k], found through index sorted by value
    order = index.argsort(stable=True)
    sorted_idx = index[order]
    key = ind[dim]
    lo = _ops.searchsorted(sorted_idx, key)
    hi = _ops.searchsorted(sorted_idx, key, right=True)
    counts = hi - lo
    entries = _ops.arange(0, key.shape[0]).repeat_interleave(counts)
    starts = lo.repeat_interleave(counts)
    offsets = _ops.arange(0, entries.shape[0]) - (counts.cumsum(0) - counts).repeat_interleave(counts)
    k = order[starts + offsets]
    by_k = k.argsort(stable=True)  # torch's order: by output position, then by entry
    k, entries = k[by_k], entries[by_k]
    new_ind = ind[:, entries].clone()
    new_ind[dim] = k
    return _make(new_ind, val[entries], new_size, entries.shape[0] <= 1)


def _clone(s):
    ind, val, c = _parts(s)
    return _make(ind.clone(), val.clone(), s.shape, c)


def _to(s, dtype=None, device=None):
    ind, val, c = _parts(s)
    if dtype is not None:
        val = val.to(dtype)
    if device is not None:
        ind, val = ind.to(device), val.to(device)
    return _make(ind, val, s.shape, c)


def _unary_values(name):
    def f(s, *args):
        ind, val, c = _parts(s)
        return _make(ind, getattr(val, name)(*args), s.shape, c)
    return f


def _arg(args, names, name, default=None):
    return args[names.index(name)] if name in names else default


def _h_add(args, names, sub=False):
    a, b = args[0], args[1]
    alpha = _arg(args, names, "alpha", 1)
    if _arg(args, names, "out") is not None:
        return NotImplemented
    if not isinstance(b, Tensor):
        return NotImplemented
    return _add(a, b, -alpha if sub else alpha)


def _h_matmul(args, names):
    a, b = args[0], args[1]
    if _is_sparse(a):
        return _spmm(a, b, "matmul", dense_grad=True)
    if _is_sparse(b):  # dense @ sparse = (sparse^T @ dense^T)^T
        if a.dim() != 2:
            return NotImplemented
        return _spmm(_transpose(b, 0, 1), a.t(), "matmul", dense_grad=True).t()
    return NotImplemented


def _h_sum(args, names):
    return _sum(args[0], _arg(args, names, "dim"), bool(_arg(args, names, "keepdim", False)),
                _arg(args, names, "dtype"))


def _h_to(args, names):
    s = args[0]
    dtype = _arg(args, names, "dtype")
    device = _arg(args, names, "device")
    return _to(s, dtype, device)


_HANDLERS = {
    "mm": lambda a, n: _spmm(a[0], a[1], "mm", dense_grad=True) if _is_sparse(a[0]) else NotImplemented,
    "matmul": _h_matmul,
    "mv": lambda a, n: _spmm(a[0], a[1], "mv", dense_grad=True) if _is_sparse(a[0]) else NotImplemented,
    "addmm": lambda a, n: (addmm(a[0], a[1], a[2], beta=_arg(a, n, "beta", 1), alpha=_arg(a, n, "alpha", 1),
                                 _dense_grad=True)
                           if _is_sparse(a[1]) and not _is_sparse(a[2]) else NotImplemented),
    "add": lambda a, n: _h_add(a, n),
    "sub": lambda a, n: _h_add(a, n, sub=True),
    "mul": lambda a, n: _mul(a[0], a[1]),
    "div": lambda a, n: _mul(a[0], a[1], "div") if _is_sparse(a[0]) and _is_scalar_like(a[1])
    and _arg(a, n, "rounding_mode") is None else NotImplemented,
    "neg": lambda a, n: _unary_values("neg")(a[0]),
    "t": lambda a, n: _transpose(a[0], 0, 1) if a[0].dim() == 2 else a[0],
    "transpose": lambda a, n: _transpose(a[0], a[1], a[2]),
    "sum": _h_sum,
    "clone": lambda a, n: _clone(a[0]),
    "_to_copy": _h_to,
    "to": _h_to,
    "sparse_mask": lambda a, n: sparse_mask(a[0], a[1]),
    "index_select": lambda a, n: _index_select(a[0], a[1], a[2]) if _is_sparse(a[0]) and not _is_sparse(a[2])
    else NotImplemented,
}
for _name in ("abs", "sqrt", "sin", "tanh", "relu", "sign", "floor", "ceil", "round", "trunc", "expm1", "log1p",
              "asin", "atan", "sinh", "asinh", "atanh", "tan", "square", "frac", "sgn", "deg2rad", "rad2deg"):
    _HANDLERS[_name] = (lambda nm: lambda a, n: _unary_values(nm)(a[0]))(_name)


_VALUEWISE = {"neg", "mul", "div"} | {n for n in _HANDLERS if n not in (
    "mm", "matmul", "mv", "addmm", "add", "sub", "t", "transpose", "sum", "clone", "_to_copy", "to", "sparse_mask",
    "index_select")}


def _handle(name, args, names):
    """Called by the Sparse key's fallback with the op's name and its arguments (schema order)."""
    h = _HANDLERS.get(name)
    if h is None:
        return NotImplemented
    out = args[names.index("out")] if "out" in names else None
    if out is not None:
        # In place (x.mul_(2), x.relu_()): a sparse self whose values the op maps one by one gets its values
        # written in place; anything else (an out= tensor, or an op that changes the pattern) is refused.
        self = args[0]
        if name not in _VALUEWISE or not _is_sparse(self) or not self._is_same(out):
            return NotImplemented
        r = h(args[:names.index("out")] + (None,) + args[names.index("out") + 1:], names)
        if r is NotImplemented or not _is_sparse(r):
            return NotImplemented
        _parts(self)[1].copy_(_parts(r)[1])
        return self
    return h(args, names)


_C._sparse_set_handler(_handle)


# ---- repr -------------------------------------------------------------------------------------------------
def sparse_repr(t, prefix="tensor("):
    from ._repr import tensor_repr, _add_suffixes
    from . import no_grad
    ind, val, _ = _parts(t)
    with no_grad():
        val = val.detach()
    indent = len(prefix)
    ind_s = tensor_repr(ind, prefix + "indices=tensor(").replace(", dtype=strata.int64", "")
    val_prefix = " " * indent + "values=tensor("
    val_s = tensor_repr(val, val_prefix).replace(f", dtype={val.dtype!r}", "")
    if val.numel() == 0 and val.dim() == 1:
        val_s = val_s[:-1] + ", size=(0,))"
    body = ind_s[len(prefix):] + ",\n" + val_s
    suffixes = ["size=" + str(tuple(t.shape)), f"nnz={val.shape[0]}"]
    default = _C.get_default_dtype()
    if t.dtype not in (default, default.to_complex(), _C.int64, _C.bool):  # the dense rule
        suffixes.append(f"dtype={t.dtype!r}")
    suffixes.append("layout=strata.sparse_coo")
    gf = t.grad_fn
    if gf is not None:
        suffixes.append(f"grad_fn=<{gf.name() if hasattr(gf, 'name') else type(gf).__name__}>")
    elif t.requires_grad:
        suffixes.append("requires_grad=True")
    head = prefix + body + ",\n" + " " * indent + suffixes[0]
    return _add_suffixes(head, suffixes[1:], indent)


# ---- Tensor surface ---------------------------------------------------------------------------------------
def _layout(self):
    return sparse_coo if _is_sparse(self) else _strided


from ._creation import strided as _strided  # noqa: E402

Tensor.layout = property(_layout)
Tensor.is_sparse = property(_is_sparse)
Tensor.to_dense = to_dense
Tensor.to_sparse = to_sparse
Tensor.to_sparse_coo = lambda self: to_sparse(self)
Tensor.coalesce = coalesce
Tensor.is_coalesced = is_coalesced
Tensor._coalesced_ = _coalesced_
Tensor.indices = indices
Tensor.values = values
Tensor._indices = _indices
Tensor._values = _values
Tensor._nnz = _nnz
Tensor.sparse_dim = sparse_dim
Tensor.dense_dim = dense_dim
Tensor.sparse_mask = sparse_mask
Tensor.smm = lambda self, mat: to_sparse(mm(self, mat))  # torch.smm: sparse result
