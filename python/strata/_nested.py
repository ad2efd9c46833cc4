"""Nested tensors in torch's jagged layout (docs/NESTED.md).

A nested tensor is a strata.Tensor whose C++ object is a NestedTensorImpl (src/nested/nested.h): B tensors that
differ in the length of one dimension (the ragged one), packed one after another into a dense ``values``
tensor, with int64 ``offsets`` (B + 1 entries) and optional ``lengths`` (pieces with holes). ``ragged_idx`` is
the ragged dim of the logical shape (B, ..., j, ...); values' dims are the logical dims 1.. with the ragged one
holding all the pieces (values dim ragged_idx - 1). The tensor has no element memory of its own: its key set
carries the Nested key, so any op given one reaches the Nested fallback, which calls ``_handle`` below. The ops
here are written with dense ops on the values (so autograd through them is the dense ops' own); every other op
raises NotImplementedError naming the op and the layout.
"""

import builtins

from . import _C
from ._creation import layout, strided

Tensor = _C.Tensor
_ops = _C._ops

jagged = layout("jagged")
_is_nested = _C._is_nested


def _parts(t):
    """(values, offsets, lengths or None, ragged_idx)."""
    return _C._nested_parts(t)


def _make(values, offsets, lengths, ragged_idx):
    return _C._nested_make(values, offsets, lengths, int(ragged_idx))


def _like(nt, values, ragged_idx=None):
    _, off, lens, r = _parts(nt)
    return _make(values, off, lens, r if ragged_idx is None else ragged_idx)


# ---- the symbolic size of the ragged dim --------------------------------------------------------------------
# torch reports the ragged dim of nt.shape as a SymInt printed j1, j2, ...: one per offsets tensor, equal only to
# itself. Numbers are given per offsets buffer (kept alive here, the oldest dropped past _MAX_IDS, so a number is
# not reused for other offsets while it may still be printed).
_ids = {}
_next_id = [1]
_MAX_IDS = 1024


def _id_of(offsets):
    key = (offsets.data_ptr(), offsets.numel())
    hit = _ids.get(key)
    if hit is not None:
        return hit[1]
    n = _next_id[0]
    _next_id[0] += 1
    if len(_ids) >= _MAX_IDS:
        del _ids[next(iter(_ids))]
    _ids[key] = (offsets, n)
    return n


class NestedInt:
    """The size of a nested tensor's ragged dim (torch's nested SymInt ``j1``): it stands for a different length
    per batch entry, so it equals only the ragged size of tensors with the same offsets and has no int value."""

    __slots__ = ("_n",)

    def __init__(self, n):
        self._n = n

    def __repr__(self):
        return f"j{self._n}"

    __str__ = __repr__

    def __eq__(self, other):
        return isinstance(other, NestedInt) and other._n == self._n

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return hash(("nested_int", self._n))

    def _no_value(self, *_):
        raise RuntimeError(f"the ragged dimension's size {self!r} of a nested tensor has no single value (each "
                           "entry has its own length); use nt.offsets().diff() or nt.lengths()")

    __int__ = __index__ = __float__ = __bool__ = _no_value
    __mul__ = __rmul__ = __add__ = __radd__ = __lt__ = __le__ = __gt__ = __ge__ = _no_value


def _shape_of(t):
    """t.shape of a nested tensor: (B, values' sizes with the packed dim shown as its nested int)."""
    v, off, _, r = _parts(t)
    s = [off.shape[0] - 1] + list(v.shape)
    s[r] = NestedInt(_id_of(off))
    return tuple(s)


def _fmt_shape(t):
    return "(" + ", ".join(str(s) for s in _shape_of(t)) + ")"


# ---- structure ----------------------------------------------------------------------------------------------
def _bounds(nt):
    """Python lists (starts, lengths) of the B pieces along the packed dim."""
    _, off, lens, _ = _parts(nt)
    starts = off.tolist()
    if lens is None:
        return starts[:-1], [starts[i + 1] - starts[i] for i in builtins.range(len(starts) - 1)]
    return starts[:-1], lens.tolist()


def _compact(nt):
    """True when the pieces tile the values' packed dim exactly (no holes, nothing before or after)."""
    v, off, lens, r = _parts(nt)
    if lens is not None:
        return False
    o = off.tolist()
    return o[0] == 0 and o[-1] == v.shape[r - 1]


def _pieces(nt):
    v, _, _, r = _parts(nt)
    starts, lens = _bounds(nt)
    return [v.narrow(r - 1, s, n) for s, n in zip(starts, lens)]


def _from_pieces(pieces, r, device):
    """A compact nested tensor from pieces (each: the logical dims 1.., the ragged one at r - 1), with fresh
    offsets (a new nested int)."""
    from . import tensor, cat, int64
    lens = [p.shape[r - 1] for p in pieces]
    offs = [0]
    for n in lens:
        offs.append(offs[-1] + n)
    return _make(cat(pieces, r - 1), tensor(offs, dtype=int64, device=device), None, r)


def _same_structure(a, b):
    va, oa, la, ra = _parts(a)
    vb, ob, lb, rb = _parts(b)
    if ra != rb or va.dim() != vb.dim() or oa.shape != ob.shape:
        return False
    if oa._is_same(ob) or (oa.data_ptr() == ob.data_ptr() and oa.shape == ob.shape):
        same_off = True
    else:
        same_off = bool(_ops.eq(oa, ob).all())
    if not same_off or (la is None) != (lb is None):
        return False
    return la is None or la._is_same(lb) or bool(_ops.eq(la, lb).all())


def _norm_dim(d, n, what):
    if not -n <= d < n:
        raise IndexError(f"{what}: Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {d})")
    return d % n


# ---- construction -------------------------------------------------------------------------------------------
def _check_layout(layout, what):
    if layout is None or layout is jagged:
        return
    if layout is strided:
        raise NotImplementedError(f"{what}: nested tensors in the strided layout are not implemented in Strata; "
                                  "use layout=strata.jagged (the same data, one ragged dim)")
    raise RuntimeError(f"{what}: expected layout=strata.jagged or strata.strided, got {layout!r}")


def _components(tensor_list, what, dtype=None, device=None, copy=False):
    from . import tensor as _tensor
    if isinstance(tensor_list, Tensor) or not hasattr(tensor_list, "__iter__"):
        raise TypeError(f"{what}: expected a list of tensors, got {type(tensor_list).__name__}")
    ts = []
    for x in tensor_list:
        if isinstance(x, Tensor):
            if _is_nested(x):
                raise RuntimeError(f"{what}: the entries must be dense tensors, got a nested tensor")
            t = x.detach() if copy else x
        else:
            t = _tensor(x, dtype=dtype, device=device)
        if dtype is not None and t.dtype is not dtype:
            t = t.to(dtype)
        if device is not None:
            t = t.to(device)
        ts.append(t)
    if not ts:
        raise RuntimeError(f"{what}: cannot build a jagged nested tensor from an empty list (torch refuses too)")
    d0 = ts[0]
    for i, t in enumerate(ts):
        if t.dim() == 0:
            raise RuntimeError(f"{what}: entry {i} is a 0-d tensor; the jagged layout needs entries with at least "
                               "one dim (the ragged one, dim 0 of each entry)")
        if t.dim() != d0.dim():
            raise RuntimeError(f"{what}: all tensors must have the same number of dims, but entry 0 has "
                               f"{d0.dim()} and entry {i} has {t.dim()}")
        if tuple(t.shape[1:]) != tuple(d0.shape[1:]):
            raise RuntimeError(f"{what}: the jagged layout allows only dim 0 of the entries to differ, but entry 0 "
                               f"has shape {tuple(d0.shape)} and entry {i} has {tuple(t.shape)}")
        if t.dtype is not d0.dtype:
            raise RuntimeError(f"{what}: all tensors must have the same dtype, but entry 0 is {d0.dtype} and entry "
                               f"{i} is {t.dtype}")
        if t.device != d0.device:
            raise RuntimeError(f"{what}: all tensors must be on one device, but entry 0 is on {d0.device} and "
                               f"entry {i} on {t.device}")
    return ts


def _offsets_for(ts, device):
    from . import tensor, int64
    offs = [0]
    for t in ts:
        offs.append(offs[-1] + t.shape[0])
    return tensor(offs, dtype=int64, device=device)


def nested_tensor(tensor_list, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """torch.nested.nested_tensor: a nested tensor (jagged layout) holding copies of the entries, which may
    differ in the size of dim 0 only; a leaf (requires_grad=True gives it a nested .grad)."""
    _check_layout(layout, "nested_tensor()")
    from . import cat
    ts = _components(tensor_list, "nested_tensor()", dtype, device, copy=True)
    values = cat(ts, 0)
    values = values.detach()
    if requires_grad:
        values.requires_grad_(True)
    return _make(values, _offsets_for(ts, values.device), None, 1)


def as_nested_tensor(ts, dtype=None, device=None, layout=None):
    """torch.nested.as_nested_tensor: like nested_tensor, but keeping the entries' autograd history (gradients
    reach them); a dense (B, T, ...) tensor becomes B entries of length T over the same data; a nested tensor is
    returned as it is (converted to dtype/device if given)."""
    _check_layout(layout, "as_nested_tensor()")
    from . import arange, int64
    if isinstance(ts, Tensor):
        if _is_nested(ts):
            return ts if dtype is None and device is None else ts.to(dtype=dtype, device=device)
        if ts.dim() < 2:
            raise RuntimeError(f"as_nested_tensor(): a dense tensor must have at least 2 dims (B, T, ...), got shape "
                               f"{tuple(ts.shape)}")
        t = ts
        if dtype is not None:
            t = t.to(dtype)
        if device is not None:
            t = t.to(device)
        B, T = t.shape[0], t.shape[1]
        offsets = arange(B + 1, dtype=int64, device=t.device) * T
        return _make(t.reshape((B * T,) + tuple(t.shape[2:])), offsets, None, 1)
    from . import cat
    parts = _components(ts, "as_nested_tensor()", dtype, device)
    return _make(cat(parts, 0), _offsets_for(parts, parts[0].device), None, 1)


def nested_tensor_from_jagged(values, offsets=None, lengths=None, jagged_dim=None, min_seqlen=None,
                              max_seqlen=None):
    """torch.nested.nested_tensor_from_jagged: a view of values as B pieces along dim jagged_dim - 1
    (jagged_dim defaults to 1): piece i starts at offsets[i] and has offsets[i + 1] - offsets[i] entries, or
    lengths[i] when lengths is given (pieces with holes). With lengths only, the offsets are their running
    sum. Gradients reach values."""
    from . import int64, cat, zeros
    if not isinstance(values, Tensor) or _is_nested(values):
        raise TypeError("nested_tensor_from_jagged(): values must be a dense tensor")
    if offsets is None:
        if lengths is None:
            raise RuntimeError("nested_tensor_from_jagged(): give offsets, lengths or both")
        lengths = lengths.to(int64)
        offsets = cat([zeros(1, dtype=int64, device=lengths.device), lengths.cumsum(0)])
        lengths = None
    else:
        offsets = offsets.to(int64)
        if lengths is not None:
            lengths = lengths.to(int64)
    r = 1 if jagged_dim is None else int(jagged_dim)
    if not 1 <= r <= values.dim():
        raise RuntimeError(f"nested_tensor_from_jagged(): jagged_dim={jagged_dim} is out of range for values of "
                           f"shape {tuple(values.shape)} (expected 1..{values.dim()})")
    o = offsets.tolist()
    n = values.shape[r - 1]
    if any(o[i + 1] < o[i] for i in builtins.range(len(o) - 1)) or (o and (o[0] < 0 or o[-1] > n)):
        raise RuntimeError(f"nested_tensor_from_jagged(): offsets {o} must be non-decreasing and within the "
                           f"{n} entries of values' dim {r - 1}")
    if lengths is not None:
        ls = lengths.tolist()
        if len(ls) == len(o) - 1 and any(x < 0 or o[i] + x > n for i, x in enumerate(ls)):
            raise RuntimeError(f"nested_tensor_from_jagged(): lengths {ls} reach past the {n} entries of values")
    if values.requires_grad and values.is_leaf:
        values = values.view_as(values)  # a view with history: the nested tensor is not the values' leaf
    return _make(values, offsets, lengths, r)


def narrow(tensor, dim, start, length, layout=strided):
    """torch.nested.narrow: entry i of the dense (B, T, ...) tensor narrowed along dim 1 to
    [start[i], start[i] + length[i]) (start/length: ints or B-entry tensors), as a jagged nested tensor over
    tensor's data (layout=strata.jagged; the strided layout is not implemented)."""
    from . import arange, int64, cat, full
    if layout is not jagged:
        raise NotImplementedError("narrow(): Strata implements torch.nested.narrow for layout=strata.jagged only")
    if not isinstance(tensor, Tensor) or _is_nested(tensor) or tensor.dim() < 2:
        raise RuntimeError("narrow(): expected a dense tensor with at least 2 dims (B, T, ...)")
    if _norm_dim(dim, tensor.dim(), "narrow()") != 1:
        raise RuntimeError("narrow(): the jagged layout supports narrowing dim 1 only")
    B, T = tensor.shape[0], tensor.shape[1]
    dev = tensor.device
    start = start.to(int64) if isinstance(start, Tensor) else full((B,), int(start), dtype=int64, device=dev)
    length = length.to(int64) if isinstance(length, Tensor) else full((B,), int(length), dtype=int64, device=dev)
    if start.shape != (B,) or length.shape != (B,):
        raise RuntimeError(f"narrow(): start and length must be ints or tensors of B={B} entries")
    if bool((start < 0).any()) or bool((start + length > T).any()) or bool((length < 0).any()):
        raise RuntimeError(f"narrow(): start {start.tolist()} and length {length.tolist()} must stay within "
                           f"dim 1 of size {T}")
    base = arange(B, dtype=int64, device=dev) * T + start
    offsets = cat([base, (base[-1:] + length[-1:])])
    values = tensor.reshape((B * T,) + tuple(tensor.shape[2:]))
    if values.requires_grad and values.is_leaf:
        values = values.view_as(values)
    return _make(values, offsets, length, 1)


def to_padded_tensor(input, padding, output_size=None):
    """torch.nested.to_padded_tensor: a dense (B, max_len, ...) tensor, each entry padded with `padding` along
    the ragged dim (to output_size when given, which may also pad the other dims). Differentiable."""
    from . import stack
    _check_nested(input, "to_padded_tensor()")
    v, off, _, r = _parts(input)
    pieces = _pieces(input)
    target = list(v.shape)
    target[r - 1] = builtins.max([p.shape[r - 1] for p in pieces], default=0)
    if output_size is not None:
        # As torch's jagged layout: output_size gives the padded length of the ragged dim; the regular dims
        # keep their sizes (torch reads only that entry too).
        output_size = [int(s) for s in output_size]
        if len(output_size) != input.dim():
            raise RuntimeError(f"to_padded_tensor(): output_size {output_size} must have {input.dim()} entries")
        target[r - 1] = output_size[r]
    out = []
    for p in pieces:
        pad = []
        for d in reversed(builtins.range(p.dim())):
            extra = target[d] - p.shape[d]
            if extra < 0:
                raise RuntimeError(f"to_padded_tensor(): output_size {output_size} is smaller than an entry of "
                                   f"shape {tuple(p.shape)}")
            pad += [0, extra]
        out.append(_ops.pad(p, pad, "constant", float(padding)) if any(pad) else p)
    return stack(out, 0)


def _check_nested(t, what):
    if not (isinstance(t, Tensor) and _is_nested(t)):
        raise RuntimeError(f"{what}: expected a nested tensor (layout strata.jagged)")


# ---- op handlers --------------------------------------------------------------------------------------------
def _batch_ids(nt):
    """For each position along the values' packed dim, the batch entry it belongs to (int64)."""
    from . import arange, int64
    v, off, _, r = _parts(nt)
    pos = arange(v.shape[r - 1], dtype=int64, device=v.device)
    ids = _ops.searchsorted(off, pos, right=True) - 1
    return ids.clamp(0, off.shape[0] - 2)


def _dense_operand(nt, d, opname):
    """A dense operand of a pointwise op with nested nt, as a tensor that broadcasts against nt's values."""
    v, _, _, r = _parts(nt)
    n = nt.dim()
    if d.dim() == 0:
        return d
    if d.dim() > n:
        raise RuntimeError(f"{opname}(): a dense operand of shape {tuple(d.shape)} has more dims than the nested "
                           f"tensor of shape {_fmt_shape(nt)}")
    first = n - d.dim()  # the logical dim d's dim 0 lines up with
    if first <= r and d.shape[r - first] != 1:
        raise RuntimeError(f"{opname}(): cannot broadcast a dense operand of shape {tuple(d.shape)} over the ragged "
                           f"dim {r} of a nested tensor of shape {_fmt_shape(nt)} (its size there must be 1)")
    if first >= 1:
        return d
    # d covers the batch dim: size 1 drops it, size B picks each packed position's row.
    B = nt.shape[0]
    if d.shape[0] == 1:
        return d.squeeze(0)
    if d.shape[0] != B:
        raise RuntimeError(f"{opname}(): a dense operand of shape {tuple(d.shape)} does not broadcast over the "
                           f"batch dim of size {B} of a nested tensor of shape {_fmt_shape(nt)}")
    rows = d.index_select(0, _batch_ids(nt))  # (N, d1, ..., 1 at r, ...)
    return rows.squeeze(r).movedim(0, r - 1)


def _pointwise(name, args, names, kwonly):
    ref = next(a for a in args if isinstance(a, Tensor) and _is_nested(a))
    conv = []
    for a, nm in zip(args, names):
        if nm == "out":
            conv.append(None)
        elif isinstance(a, Tensor) and _is_nested(a):
            if a is not ref and not _same_structure(a, ref):
                raise RuntimeError(f"cannot call binary pointwise function {name} with inputs of shapes "
                                   f"{_fmt_shape(ref)} and {_fmt_shape(a)}: nested tensors of different structure "
                                   "(offsets, lengths or ragged dim)")
            conv.append(_parts(a)[0])
        elif isinstance(a, Tensor) and not a._is_wrapped_number:
            conv.append(_dense_operand(ref, a, name))
        else:
            conv.append(a)
    return _like(ref, _call(name, conv, names, kwonly))


def _call(name, args, names, kwonly):
    pos, kw = [], {}
    for a, nm in zip(args, names):
        if nm in kwonly:
            if not (nm == "out" and a is None):
                kw[nm] = a
        else:
            pos.append(a)
    return getattr(_ops, name)(*pos, **kw)


def _arg(args, names, name, default=None):
    return args[names.index(name)] if name in names else default


def _h_linear(args, names):
    x, w, b = args[0], args[1], _arg(args, names, "bias")
    if not _is_nested(x) or _is_nested(w) or (b is not None and _is_nested(b)):
        return NotImplemented
    v, _, _, r = _parts(x)
    if r == x.dim() - 1:
        raise RuntimeError(f"linear(): the input's last dim is its ragged dim (shape {_fmt_shape(x)}); linear needs "
                           "a regular last dim")
    return _like(x, _ops.linear(v, w, b))


def _h_matmul(args, names):
    a, b = args[0], args[1]
    if _is_nested(a) and not _is_nested(b):
        v, _, _, r = _parts(a)
        if b.dim() > 2:
            raise RuntimeError(f"matmul(): a nested tensor of shape {_fmt_shape(a)} times a dense one of shape "
                               f"{tuple(b.shape)}: the dense operand must be 1-D or 2-D")
        if r == a.dim() - 1:
            raise RuntimeError(f"matmul(): the nested operand's last dim is its ragged dim (shape {_fmt_shape(a)})")
        out = _ops.matmul(v, b)
        return _like(a, out)
    return NotImplemented


def _h_softmax(name):
    def f(args, names):
        x = args[0]
        n = x.dim()
        d = _norm_dim(args[1], n, f"{name}()")
        dtype = _arg(args, names, "dtype")
        v, _, _, r = _parts(x)
        if d == 0:
            raise RuntimeError(f"{name}(): not supported when reducing across the batch dimension for a nested "
                               "tensor")
        if d == r:  # over each entry's own length
            if not _compact(x):
                raise NotImplementedError(f"{name}() over the ragged dim of a nested tensor with holes (lengths=) is "
                                          "not implemented")
            from . import cat
            return _like(x, cat([getattr(_ops, name)(p, r - 1, dtype) for p in _pieces(x)], r - 1))
        return _like(x, getattr(_ops, name)(v, d - 1, dtype))
    return f


def _h_layer_norm(args, names):
    x = args[0]
    if not _is_nested(x):
        return NotImplemented
    shape = list(args[1])
    v, _, _, r = _parts(x)
    if len(shape) > x.dim() - 1 - r:
        raise RuntimeError(f"layer_norm(): normalized_shape={shape} would include the ragged dim {r} of a nested "
                           f"tensor of shape {_fmt_shape(x)}; only the regular dims after it can be normalized")
    return _like(x, _ops.layer_norm(v, shape, _arg(args, names, "weight"), _arg(args, names, "bias"),
                                    _arg(args, names, "eps", 1e-5)))


def _h_reduce(name):
    def f(args, names):
        x = args[0]
        dims = _arg(args, names, "dim")
        keepdim = bool(_arg(args, names, "keepdim", False))
        dtype = _arg(args, names, "dtype")
        v, _, _, r = _parts(x)
        n = x.dim()
        if dims is None or (isinstance(dims, (tuple, list)) and len(dims) == 0):
            dims = list(builtins.range(n))
        elif isinstance(dims, builtins.int):
            dims = [dims]
        dims = sorted({_norm_dim(d, n, f"{name}()") for d in dims})
        if 0 in dims and r not in dims:
            raise RuntimeError(f"{name}(): reducing along the batch dimension but not the ragged dimension is not "
                               "supported for nested tensors")
        if r not in dims:  # regular dims only: the result stays nested
            out = getattr(_ops, name)(v, [d - 1 for d in dims], keepdim, dtype=dtype)
            new_r = r if keepdim else r - builtins.sum(1 for d in dims if d < r)
            return _like(x, out, new_r)
        if 0 not in dims and len(dims) > 1:
            raise RuntimeError(f"{name}(): reducing along a ragged and non-batch dimension is not supported for "
                               "nested tensors")
        if keepdim and 0 in dims:
            raise RuntimeError(f"{name}(): keepdim=True over the batch and ragged dims of a nested tensor is not "
                               "supported")
        inner = [d - 1 for d in dims if d != 0]
        if 0 in dims:  # batch and ragged: one reduction over every entry's elements
            if _compact(x):
                return getattr(_ops, name)(v, inner, False, dtype=dtype)
            from . import cat
            return getattr(_ops, name)(cat(_pieces(x), r - 1), inner, False, dtype=dtype)
        from . import stack  # over each entry's ragged dim: a dense (B, ...) result
        return stack([getattr(_ops, name)(p, inner, keepdim, dtype=dtype) for p in _pieces(x)], 0)
    return f


def _h_reduce_regular(name):
    """Other reductions (amax, amin, prod, logsumexp, var, std, norm, max/min over a dim): over regular dims the
    result stays nested (max/min give nested values and indices); with no dim, over every entry's elements."""
    def f(args, names):
        x = args[0]
        if name in ("max", "min") and "other" in names:  # the binary form is pointwise
            return _pointwise(name, args, names, _KWONLY.get(name, ()))
        v, _, _, r = _parts(x)
        if "dim" not in names or args[names.index("dim")] is None:
            if name in ("logsumexp",):
                return NotImplemented
            flat = v if _compact(x) else _cat_pieces(x)
            return _call(name, [flat] + list(args[1:]), names, _KWONLY.get(name, ()))
        i = names.index("dim")
        dd = args[i]
        single = isinstance(dd, builtins.int)
        dims = sorted({_norm_dim(d, x.dim(), f"{name}()") for d in ([dd] if single else dd)})
        if dims == [r]:  # over each entry's own length: a dense (B, ...) result
            from . import stack
            outs = []
            for p in _pieces(x):
                conv = list(args)
                conv[0], conv[i] = p, (r - 1 if single else [r - 1])
                outs.append(_call(name, conv, names, _KWONLY.get(name, ())))
            if isinstance(outs[0], (tuple, list)):
                return tuple(stack([o[k] for o in outs], 0) for k in builtins.range(len(outs[0])))
            return stack(outs, 0)
        if 0 in dims or r in dims:
            raise NotImplementedError(f"{name}() over the batch dim, or over the ragged dim together with others, "
                                      "is not implemented for nested tensors (sum and mean are; or work on "
                                      "nt.unbind())")
        conv = list(args)
        conv[0] = v
        conv[i] = dims[0] - 1 if single else [d - 1 for d in dims]
        out = _call(name, conv, names, _KWONLY.get(name, ()))
        keep = bool(_arg(args, names, "keepdim", False))
        new_r = r if keep else r - builtins.sum(1 for d in dims if d < r)
        if isinstance(out, (tuple, list)):
            return tuple(_like(x, o, new_r) for o in out)
        return _like(x, out, new_r)
    return f


def _cat_pieces(x):
    from . import cat
    return cat(_pieces(x), _parts(x)[3] - 1)


def _h_slice(args, names):
    x = args[0]
    d = _norm_dim(_arg(args, names, "dim", 0), x.dim(), "slice()")
    v, _, _, r = _parts(x)
    if d in (0, r):
        raise RuntimeError(f"slice(): not supported for a nested tensor on the batch or the ragged dim ({d})")
    conv = list(args)
    conv[0], conv[names.index("dim")] = v, d - 1
    return _like(x, _call("slice", conv, names, ()))


def _h_transpose(args, names):
    x = args[0]
    n = x.dim()
    d0, d1 = _norm_dim(args[1], n, "transpose()"), _norm_dim(args[2], n, "transpose()")
    if 0 in (d0, d1):
        if d0 == d1:
            return x
        raise ValueError("Transpose is not supported on the batch dimension for jagged NT")
    v, _, _, r = _parts(x)
    new_r = d1 if r == d0 else d0 if r == d1 else r
    return _like(x, v.transpose(d0 - 1, d1 - 1), new_r)


def _h_split(name):
    def f(args, names):
        x = args[0]
        d = _norm_dim(args[2] if len(args) > 2 else 0, x.dim(), f"{name}()")
        v, _, _, r = _parts(x)
        if d in (0, r):
            raise RuntimeError(f"{name}(): not supported for a nested tensor on the batch or the ragged dim ({d})")
        return [_like(x, p) for p in getattr(_ops, name)(v, args[1], d - 1)]
    return f


def _h_unbind(args, names):
    x = args[0]
    if _norm_dim(_arg(args, names, "dim", 0), x.dim(), "unbind()") != 0:
        raise RuntimeError("unbind(): only supported for a nested tensor on dim=0")
    return _pieces(x)


def _h_select(args, names):
    x, d, i = args[0], args[1], args[2]
    d = _norm_dim(d, x.dim(), "select()")
    if d != 0:  # a regular dim: select on the values; the ragged dim cannot be indexed by position
        v, _, _, r = _parts(x)
        if d == r:
            raise RuntimeError(f"select(): not supported for a nested tensor on the ragged dim ({d})")
        return _like(x, v.select(d - 1, i), r - 1 if d < r else r)
    p = _pieces(x)
    if not -len(p) <= i < len(p):
        raise IndexError(f"index {i} is out of bounds for dimension 0 with size {len(p)}")
    return p[i]


def _h_unflatten(args, names):
    x, d, sizes = args[0], args[1], list(args[2])
    d = _norm_dim(d, x.dim(), "unflatten()")
    v, _, _, r = _parts(x)
    if d in (0, r):
        raise RuntimeError(f"unflatten(): not supported for a nested tensor on the batch or the ragged dim ({d})")
    return _like(x, v.unflatten(d - 1, sizes), r if d > r else r + len(sizes) - 1)


def _h_flatten(args, names):
    x = args[0]
    n = x.dim()
    s = _norm_dim(_arg(args, names, "start_dim", 0), n, "flatten()")
    e = _norm_dim(_arg(args, names, "end_dim", -1), n, "flatten()")
    v, _, _, r = _parts(x)
    if s == e:
        return x
    if s <= 0 or s <= r <= e:
        raise RuntimeError(f"flatten(): cannot flatten dims {s}..{e} of a nested tensor of shape {_fmt_shape(x)}: "
                           "they include the batch or the ragged dim")
    return _like(x, v.flatten(s - 1, e - 1), r if r < s else r - (e - s))


def _h_view(name):
    """view / reshape keeping the batch dim, the regular dims before the ragged one, and the ragged dim (given
    as -1): the regular dims after it are reshaped."""
    def f(args, names):
        x = args[0]
        if names[1] == "dtype":
            return NotImplemented
        sizes = list(args[1])
        v, _, _, r = _parts(x)
        shape = _shape_of(x)
        if len(sizes) <= r or sizes[r] != -1 or [s for s in sizes[:r]] != list(shape[:r]) or -1 in sizes[r + 1:]:
            raise RuntimeError(f"{name}(): a nested tensor of shape {_fmt_shape(x)} can only be viewed as a shape "
                               f"that keeps its dims up to the ragged dim {r} and gives -1 for it, got {sizes}")
        new = sizes[1:]
        new[r - 1] = v.shape[r - 1]
        return _like(x, getattr(v, name)(new))
    return f


def _h_unsqueeze(args, names):
    x = args[0]
    d = _norm_dim(args[1], x.dim() + 1, "unsqueeze()")
    v, _, _, r = _parts(x)
    if d == 0:
        raise RuntimeError("unsqueeze(): not supported for a nested tensor on dim=0")
    return _like(x, v.unsqueeze(d - 1), r + 1 if d <= r else r)


def _h_squeeze(args, names):
    x = args[0]
    v, _, _, r = _parts(x)
    if "dim" not in names:
        dims = [d for d in builtins.range(1, x.dim()) if d != r and v.shape[d - 1] == 1]
    else:
        dd = args[names.index("dim")]
        dims = [dd] if isinstance(dd, builtins.int) else list(dd)
        dims = sorted({_norm_dim(d, x.dim(), "squeeze()") for d in dims})
        if 0 in dims or r in dims:
            raise RuntimeError("squeeze(): not supported for a nested tensor on the batch or the ragged dim")
        dims = [d for d in dims if v.shape[d - 1] == 1]
    if not dims:
        return _like(x, v.view(v.shape))
    return _like(x, v.squeeze([d - 1 for d in dims]), r - builtins.sum(1 for d in dims if d < r))


def _h_permute(args, names):
    x = args[0]
    n = x.dim()
    p = [_norm_dim(d, n, "permute()") for d in args[1]]
    if sorted(p) != list(builtins.range(n)):
        raise RuntimeError(f"permute(): dims {list(args[1])} are not a permutation of the {n} dims")
    if p[0] != 0:
        raise RuntimeError("permute(): not supported on the batch dimension for a nested tensor")
    v, _, _, r = _parts(x)
    return _like(x, v.permute([d - 1 for d in p[1:]]), p.index(r))


def _h_sdpa(args, names):
    q, k, v = args[0], args[1], args[2]
    if not all(isinstance(t, Tensor) and _is_nested(t) for t in (q, k, v)):
        raise RuntimeError("scaled_dot_product_attention(): query, key and value must all be nested tensors (or all "
                           "dense)")
    if _arg(args, names, "attn_mask") is not None:
        raise RuntimeError("scaled_dot_product_attention(): attn_mask is not supported with nested tensors (each "
                           "entry attends over its own length; use is_causal for causal masks)")
    for nm, t in (("query", q), ("key", k), ("value", v)):
        if _parts(t)[3] != t.dim() - 2:
            raise RuntimeError(f"scaled_dot_product_attention(): {nm} of shape {_fmt_shape(t)} must have its ragged "
                               "dim second to last, (B, H, j, D): transpose(1, 2) a (B, j, H, D) tensor")
    if not (q.shape[0] == k.shape[0] == v.shape[0]):
        raise RuntimeError("scaled_dot_product_attention(): query, key and value must have the same batch size")
    if not _same_structure(k, v):
        raise RuntimeError("scaled_dot_product_attention(): key and value must have the same ragged structure")
    from .nn import functional as F
    outs = [F.scaled_dot_product_attention(qi, ki, vi, None, float(_arg(args, names, "dropout_p", 0.0)),
                                           bool(_arg(args, names, "is_causal", False)),
                                           scale=_arg(args, names, "scale"),
                                           enable_gqa=bool(_arg(args, names, "enable_gqa", False)))
            for qi, ki, vi in zip(_pieces(q), _pieces(k), _pieces(v))]
    r = _parts(q)[3]
    if _compact(q):
        from . import cat
        return _like(q, cat(outs, r - 1))
    return _from_pieces(outs, r, q.device)


def _h_cat(args, names):
    """cat of nested tensors of one structure along a regular dim (torch's rule): the values' cat."""
    ts = list(args[0])
    ref = next((t for t in ts if _is_nested(t)), None)
    if ref is None:
        return NotImplemented
    d = _norm_dim(_arg(args, names, "dim", 0), ref.dim(), "cat()")
    r = _parts(ref)[3]
    if d in (0, r):
        raise RuntimeError(f"cat(): not supported for nested tensors on the batch or the ragged dim ({d})")
    for t in ts:
        if not _is_nested(t) or not _same_structure(t, ref):
            raise RuntimeError(f"cat(): all tensors must be nested tensors of one structure, got shapes "
                               f"{_fmt_shape(ref)} and {_fmt_shape(t) if _is_nested(t) else tuple(t.shape)}")
    from . import cat
    return _like(ref, cat([_parts(t)[0] for t in ts], d - 1))


def _h_to(args, names):
    x = args[0]
    dtype, device = _arg(args, names, "dtype"), _arg(args, names, "device")
    v, off, lens, r = _parts(x)
    v2 = _ops._to_copy(v, dtype=dtype, device=device)
    if device is not None and off.device != v2.device:
        off = off.to(v2.device)
        lens = lens.to(v2.device) if lens is not None else None
    return _make(v2, off, lens, r)


def _h_contiguous(args, names):
    x = args[0]
    if _compact(x):
        return _like(x, _parts(x)[0].contiguous())
    return _from_pieces(_pieces(x), _parts(x)[3], x.device)


def _h_values_inplace(name):
    """zero_, fill_, uniform_, normal_, copy_ from a nested tensor of the same structure: on self's values."""
    def f(args, names):
        x = args[0]
        if not _is_nested(x):
            return NotImplemented
        rest = list(args[1:])
        if name == "copy_":
            src = rest[0]
            if not (_is_nested(src) and _same_structure(x, src)):
                raise RuntimeError(f"copy_(): the source must be a nested tensor of the same structure as the "
                                   f"destination {_fmt_shape(x)}")
            rest[0] = _parts(src)[0]
        _call(name, [_parts(x)[0]] + rest, names, _KWONLY.get(name, ()))
        return x
    return f


_HANDLERS = {
    "zero_": _h_values_inplace("zero_"),
    "fill_": _h_values_inplace("fill_"),
    "uniform_": _h_values_inplace("uniform_"),
    "normal_": _h_values_inplace("normal_"),
    "copy_": _h_values_inplace("copy_"),
    "linear": _h_linear,
    "matmul": _h_matmul,
    "softmax": _h_softmax("softmax"),
    "log_softmax": _h_softmax("log_softmax"),
    "layer_norm": _h_layer_norm,
    "sum": _h_reduce("sum"),
    "mean": _h_reduce("mean"),
    "transpose": _h_transpose,
    "split": _h_split("split"),
    "split_with_sizes": _h_split("split_with_sizes"),
    "chunk": _h_split("chunk"),
    "unbind": _h_unbind,
    "select": _h_select,
    "unflatten": _h_unflatten,
    "flatten": _h_flatten,
    "view": _h_view("view"),
    "reshape": _h_view("reshape"),
    "unsqueeze": _h_unsqueeze,
    "squeeze": _h_squeeze,
    "permute": _h_permute,
    "scaled_dot_product_attention": _h_sdpa,
    "slice": _h_slice,
    "cat": _h_cat,
    "clone": lambda a, n: _like(a[0], _parts(a[0])[0].clone()),
    "contiguous": _h_contiguous,
    "_to_copy": _h_to,
    "to": _h_to,
}

for _name in ("amax", "amin", "prod", "logsumexp", "var", "std", "norm", "max", "min"):
    _HANDLERS[_name] = _h_reduce_regular(_name)

_POINTWISE = set()
_KWONLY = {}
for _s in _C._op_schemas():
    _KWONLY.setdefault(_s["name"], {a["name"] for a in _s["args"] if a["kwarg_only"]})
    if _s["flags"] & 1:  # kPointwise
        _POINTWISE.add(_s["name"])


def _handle(name, args, names):
    """Called by the Nested key's fallback with the op's name and its arguments (schema order)."""
    out = _arg(args, names, "out")
    if name in _POINTWISE:
        if out is not None:
            # In place (nt.mul_(2), nt.relu_()): the result's values are written into self's.
            self = args[0]
            if not (_is_nested(out) and _is_nested(self) and self._is_same(out)):
                return NotImplemented
            r = _pointwise(name, args, names, _KWONLY.get(name, ()))
            _parts(self)[0].copy_(_parts(r)[0])
            return self
        return _pointwise(name, args, names, _KWONLY.get(name, ()))
    h = _HANDLERS.get(name)
    if h is None or out is not None:
        return NotImplemented
    return h(args, names)


_C._nested_set_handler(_handle, _shape_of)


def _dropout(input, p, training, inplace):
    """F.dropout of a nested tensor: the values' dropout."""
    from .nn import functional as F
    v = _parts(input)[0]
    if inplace:
        F.dropout(v, p, training, True)
        return input
    return _like(input, F.dropout(v, p, training, False))


def _map_values(input, fn):
    """A nested tensor with input's structure whose values are fn(input's values) (the *_like factories)."""
    return _like(input, fn(_parts(input)[0]))


def _values_of(t):
    """Autograd entry points: a nested tensor stands for its values (they share autograd metadata)."""
    return _parts(t)[0] if isinstance(t, Tensor) and _is_nested(t) else t


def _like_or_none(nt, g):
    """strata.autograd.grad's result for input nt: g (a gradient of nt's values) with nt's structure."""
    if g is None or not _is_nested(nt) or _is_nested(g):
        return g
    return _like(nt, g)


def _rebuild(values, offsets, lengths, ragged_idx, requires_grad):
    """Unpickling: a nested tensor from its parts (a leaf when it was one that required grad)."""
    values = values.detach()
    if requires_grad:
        values.requires_grad_(True)
    return _make(values, offsets, lengths, ragged_idx)


# ---- repr ---------------------------------------------------------------------------------------------------
def nested_repr(t):
    from ._repr import tensor_repr
    _, off, lens, _ = _parts(t)
    s = f"NestedTensor(size={_fmt_shape(t)}, offsets={tensor_repr(off)}"
    if lens is not None:
        s += f", lengths={tensor_repr(lens)}"
    gf = t.grad_fn
    if gf is not None:
        s += f", grad_fn=<{gf.name() if hasattr(gf, 'name') else type(gf).__name__}>"
    elif t.requires_grad:
        s += ", requires_grad=True"
    return s + f", contiguous={_compact(t)})"


# ---- Tensor surface -----------------------------------------------------------------------------------------
_prev_layout = Tensor.layout
_prev_values = Tensor.values


def _layout(self):
    return jagged if _is_nested(self) else _prev_layout.__get__(self)


def _values(self):
    if _is_nested(self):
        return _parts(self)[0]
    return _prev_values(self)


def _offsets(self):
    _check_nested(self, "offsets()")
    return _parts(self)[1]


def _lengths(self):
    _check_nested(self, "lengths()")
    return _parts(self)[2]


Tensor.layout = property(_layout)
Tensor.is_nested = property(_is_nested)
Tensor.values = _values
Tensor.offsets = _offsets
Tensor.lengths = _lengths
Tensor.to_padded_tensor = lambda self, padding, output_size=None: to_padded_tensor(self, padding, output_size)
Tensor._ragged_idx = property(lambda self: _parts(self)[3] if _is_nested(self) else None)
