"""The rest of torch's Tensor surface that has no op of its own: element-wise
Python callbacks (apply_, map_), size and type queries, the conj/neg family
(conj/real/imag are ops in ops/complex.cpp), legacy constructors, resize_,
storage handles, and methods of the functions in _surface_more.py."""

import builtins
import operator

from . import _C
from . import _surface_more as _sm

Tensor = _C.Tensor
_ops = _C._ops


def _sizes(args, op):
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        args = tuple(args[0])
    try:
        return [operator.index(a) for a in args]
    except TypeError:
        raise TypeError(f"{op}(): argument 'size' must be tuple of ints, but found element of type "
                        f"{type(next(a for a in args if not hasattr(a, '__index__'))).__name__}") from None


# ---- element-wise Python callbacks (CPU only, as in torch) ------------------------------------
def _require_cpu(t, op):
    if t.device.type != "cpu":
        raise TypeError(f"{op} is only implemented on CPU tensors")


def _apply_(self, callable):
    _require_cpu(self, "apply_")
    vals = [callable(v) for v in self.reshape(-1).tolist()]
    return self.copy_(_C._tensor(vals, self.dtype, self.device).reshape(self.shape))


def _map_(self, tensor, callable):
    _require_cpu(self, "map_")
    other = tensor.expand(self.shape)
    vals = [callable(a, b) for a, b in zip(self.reshape(-1).tolist(), other.reshape(-1).tolist())]
    return self.copy_(_C._tensor(vals, self.dtype, self.device).reshape(self.shape))


def _map2_(self, x, y, callable):
    _require_cpu(self, "map2_")
    xs, ys = x.expand(self.shape).reshape(-1).tolist(), y.expand(self.shape).reshape(-1).tolist()
    vals = [callable(a, b, c) for a, b, c in zip(self.reshape(-1).tolist(), xs, ys)]
    return self.copy_(_C._tensor(vals, self.dtype, self.device).reshape(self.shape))


Tensor.apply_ = _apply_
Tensor.map_ = _map_
Tensor.map2_ = _map2_


def _as_subclass(self, cls):
    if not (isinstance(cls, type) and issubclass(cls, Tensor)):
        raise TypeError(f"as_subclass(): expected a subclass of Tensor, got {cls!r}")
    # An alias of self (a view: same memory, and self's autograd history).
    return _C._wrap_as_subclass(cls, self.view_as(self))


Tensor.as_subclass = _as_subclass

# ---- size and type queries --------------------------------------------------------------------
Tensor.nbytes = property(lambda self: self.numel() * self.element_size())
Tensor.itemsize = property(lambda self: self.element_size())
Tensor.is_signed = lambda self: self.dtype.is_signed
# Conjugation is physical (no lazy conjugate bit): is_conj() is always False and
# conj() of a complex tensor is a copy (ops/complex.cpp).
Tensor.is_conj = lambda self: False
Tensor.is_neg = lambda self: False
Tensor.resolve_neg = lambda self: self


def _set_part(part):
    def setter(self, value):
        part(self).copy_(value)
    return setter


def _real(self):
    # A real tensor is its own real part (the same tensor, as in torch).
    return _ops.real(self) if self.dtype.is_complex else self


def _imag(self):
    return _ops.imag(self)


Tensor.real = property(_real, _set_part(_real))
Tensor.imag = property(_imag, _set_part(_imag))
Tensor.get_device = lambda self: -1 if self.device.type == "cpu" else (self.device.index or 0)
Tensor.layout = property(lambda self: _sm.strided)
for _flag in ("is_sparse", "is_sparse_csr", "is_quantized", "is_mkldnn", "is_mps", "is_xpu", "is_nested",
              "is_vulkan", "is_ipu", "is_mtia"):
    if not hasattr(Tensor, _flag):
        setattr(Tensor, _flag, False)
Tensor.to_dense = lambda self, dtype=None, *, masked_grad=None: self if dtype is None else self.to(dtype)


# share_memory_ moves the storage into a shared mapping in place (every view of it follows; src/core/
# shared_memory.h); strata.multiprocessing passes such tensors between processes without copying.
Tensor.is_shared = lambda self: _C._is_shared(self)


def _share_memory_(self):
    _C._share_memory_(self)
    return self


Tensor.share_memory_ = _share_memory_

# ---- matrix views -------------------------------------------------------------------------------
def _H(self):
    if self.dim() != 2:
        raise RuntimeError(f"tensor.H is only supported on matrices (2-D tensors). Got {self.dim()}-D tensor.")
    return _ops.conj(self.transpose(0, 1))  # conj is the identity on real tensors


def _mH(self):
    if self.dim() < 2:
        raise RuntimeError(f"tensor.mH is only supported on matrices or batches of matrices. Got {self.dim()}-D "
                           "tensor.")
    return _ops.conj(self.transpose(-2, -1))


def _adjoint(self):
    if self.dim() < 2:
        raise RuntimeError(f"tensor.adjoint() is only supported on matrices or batches of matrices. Got "
                           f"{self.dim()}-D tensor.")
    return _ops.conj(self.transpose(-2, -1))


Tensor.H = property(_H)
Tensor.mH = property(_mH)
Tensor.adjoint = _adjoint
Tensor.ravel = lambda self: self.reshape(-1)


def _sum_to_size(self, *size):
    size = _sizes(size, "sum_to_size")
    shape = list(self.shape)
    lead = len(shape) - len(size)
    ok = lead >= 0 and builtins.all(s == t or s == 1 for s, t in zip(size, shape[lead:]))
    if not ok:
        raise RuntimeError(f"size {{{list(size)}}} is not expandable to size {{{shape}}}.")
    dims = list(range(lead)) + [lead + i for i, s in enumerate(size) if s == 1 and shape[lead + i] != 1]
    r = _ops.sum(self, dims, True) if dims else self
    return r.reshape(size) if lead else r


Tensor.sum_to_size = _sum_to_size


def _fill_diagonal_(self, fill_value, wrap=False):
    n = self.dim()
    if n < 2:
        raise RuntimeError("dimensions must larger than 1")
    shape = list(self.shape)
    if n > 2 and builtins.any(s != shape[0] for s in shape):
        raise RuntimeError("all dimensions of input must be of equal length")
    work = self if self.is_contiguous() else self.contiguous()
    flat = work.reshape(-1)
    if n == 2:
        rows, cols = shape
        step = cols + 1
        end = self.numel() if (wrap and rows > cols + 1) else builtins.min(rows, cols) * cols
    else:
        step = builtins.sum(self.shape[0] ** k for k in range(n))
        end = self.numel()
    if end > 0:
        _ops.slice(flat, 0, 0, end, step).fill_(fill_value)
    if work is not self:
        self.copy_(work)
    return self


Tensor.fill_diagonal_ = _fill_diagonal_
Tensor.cumsum_ = lambda self, dim, *, dtype=None: self.copy_(_ops.cumsum(self, dim, dtype=dtype))
Tensor.cumprod_ = lambda self, dim, *, dtype=None: self.copy_(_ops.cumprod(self, dim, dtype=dtype))
# sgn_: sign_ for real tensors, z / |z| written back for complex ones (there is no in-place kernel).
def _sgn_(self):
    if not self.is_complex():
        return self.sign_()
    self.copy_(_ops.sgn(self))
    return self


Tensor.sgn_ = _sgn_

# ---- resize_, set_ ----------------------------------------------------------------------------
def _resize_(self, *sizes, memory_format=None):
    """torch's resize_: contiguous strides of the new shape over the same
    storage, grown (keeping its elements) when it is too small; elements past
    the old ones are uninitialized."""
    _sm._check_memory_format(memory_format, "resize_")
    sizes = _sizes(sizes, "resize_")
    if builtins.any(s < 0 for s in sizes):
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(sizes)}: {sizes}")
    numel = 1
    for s in sizes:
        numel *= s
    strides, acc = [0] * len(sizes), 1
    for i in range(len(sizes) - 1, -1, -1):
        strides[i] = acc
        acc *= builtins.max(sizes[i], 1)
    if self.requires_grad:
        raise RuntimeError("cannot resize variables that require grad")
    offset = self.storage_offset()
    itemsize = self.element_size()
    have = self._storage_nbytes() // itemsize
    if offset + numel <= have:
        _C._set_geometry_from(self, self.as_strided(sizes, strides, offset))
        return self
    # Growing: a larger storage that starts with the old one's elements.
    grown = _ops.empty([offset + numel], dtype=self.dtype, device=self.device)
    if have:
        _ops.slice(grown, 0, 0, have, 1).copy_(self.detach().as_strided([have], [1], 0))
    _C._set_storage_from(self, grown.as_strided(sizes, strides, offset))
    return self


Tensor.resize_ = _resize_


def _set_(self, source=None, storage_offset=0, size=None, stride=None):
    """self views source's memory: a tensor, a storage (with an optional
    offset, size and stride), or nothing (an empty storage)."""
    from ._tensor_pickle import Storage

    if source is None:
        src = _ops.empty([0], dtype=self.dtype, device=self.device)
    elif isinstance(source, Tensor):
        src = source
    elif isinstance(source, Storage):
        n = source.nbytes() // self.element_size()
        size = [n - storage_offset] if size is None else list(size)
        if stride is None:
            stride, acc = [0] * len(size), 1
            for i in range(len(size) - 1, -1, -1):
                stride[i] = acc
                acc *= builtins.max(size[i], 1)
        src = source.tensor(self.dtype, storage_offset, size, list(stride))
    else:
        raise TypeError(f"set_(): argument 'source' must be Tensor or Storage, not {type(source).__name__}")
    _C._set_storage_from(self, src)
    return self


Tensor.set_ = _set_
Tensor.resize_as_ = lambda self, other, memory_format=None: _resize_(self, list(other.shape),
                                                                      memory_format=memory_format)


# ---- storage handles ----------------------------------------------------------------------------
# Tensor.storage() / untyped_storage() and the storage classes: strata/storage.py.

# ---- memory formats ------------------------------------------------------------------------------
# contiguous(memory_format=) and clone(memory_format=) are bound in C
# (python/src/surface_bind.cpp); is_contiguous checks a format's strides here.
_is_contiguous = Tensor.is_contiguous


def _is_contiguous_mf(self, memory_format=None):
    if memory_format is None or memory_format is _sm.contiguous_format:
        return _is_contiguous(self)
    _sm._check_memory_format(memory_format, "is_contiguous")
    nd = 4 if memory_format is _sm.channels_last else 5
    if self.dim() != nd:
        return False
    # channels-last order: C fastest, then W, H (, D), N.
    order = [1] + list(range(nd - 1, 1, -1)) + [0]
    expected = 1
    for d in order:
        if self.shape[d] != 1 and self.stride(d) != expected:
            return False
        expected *= self.shape[d]
    return True


Tensor.is_contiguous = _is_contiguous_mf

# ---- methods of functions in _surface_more.py -------------------------------------------------
Tensor.tensor_split = _sm.tensor_split
Tensor.hsplit = _sm.hsplit
Tensor.vsplit = _sm.vsplit
Tensor.dsplit = _sm.dsplit
Tensor.unsafe_split = _sm.unsafe_split
Tensor.unsafe_chunk = _sm.unsafe_chunk
Tensor.is_nonzero = _sm.is_nonzero
Tensor.is_same_size = _sm.is_same_size
Tensor.isposinf = _sm.isposinf
Tensor.isneginf = _sm.isneginf
Tensor.isreal = _sm.isreal
Tensor.argwhere = _sm.argwhere
Tensor.inner = _sm.inner
Tensor.ger = _sm.ger
Tensor.dist = _sm.dist
Tensor.narrow_copy = _sm.narrow_copy
Tensor.nonzero_static = _sm.nonzero_static
Tensor.rsub = _sm.rsub
Tensor.ldexp_ = _sm.ldexp_
Tensor.renorm_ = lambda self, p, dim, maxnorm: self.copy_(_ops.renorm(self, p, dim, maxnorm))


# ---- post-accumulate-grad hooks -----------------------------------------------------------------
# Note [Post-accumulate-grad hooks run when backward returns]
# torch runs these inside the engine, right after a leaf's .grad is written.
# Strata runs them when the backward() call that wrote the .grad returns: a
# leaf's gradient is final by then as well, so the usual uses (an optimizer
# step per parameter, clearing .grad) behave the same; what differs is only
# the order relative to other backward hooks. A leaf counts as accumulated
# when its .grad changed (a new buffer or an in-place add) during the call.
# The registry holds the leaf until every hook of it is removed.
_post_accumulate = {}  # id(leaf) -> (leaf, {key: hook})


def _register_post_accumulate_grad_hook(self, hook):
    if not self.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    if self.grad_fn is not None:
        raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
    from ._tensor_autograd import RemovableHandle

    hooks = _post_accumulate.setdefault(id(self), (self, {}))[1]
    key = object()
    hooks[key] = hook

    def remove(tid=id(self)):
        entry = _post_accumulate.get(tid)
        if entry is not None:
            entry[1].pop(key, None)
            if not entry[1]:
                del _post_accumulate[tid]

    return RemovableHandle(remove)


def _grad_state(t):
    g = t.grad
    return None if g is None else (g._storage_ptr(), g.data_ptr(), g._version)


def _install_post_accumulate_backward():
    from . import autograd

    engine_backward = autograd.backward

    def backward(*args, **kwargs):
        if not _post_accumulate:
            return engine_backward(*args, **kwargs)
        before = {tid: _grad_state(leaf) for tid, (leaf, _) in _post_accumulate.items()}
        result = engine_backward(*args, **kwargs)
        for tid, (leaf, hooks) in list(_post_accumulate.items()):
            if _grad_state(leaf) != before.get(tid):
                for h in list(hooks.values()):
                    h(leaf)
        return result

    backward.__doc__ = engine_backward.__doc__
    autograd.backward = backward


Tensor.register_post_accumulate_grad_hook = _register_post_accumulate_grad_hook
_install_post_accumulate_backward()

# ---- shift operators ----------------------------------------------------------------------------
_lshift, _rshift = _ops.bitwise_left_shift, _ops.bitwise_right_shift
Tensor.__lshift__ = lambda self, other: _lshift(self, other)
Tensor.__rshift__ = lambda self, other: _rshift(self, other)
Tensor.__rlshift__ = lambda self, other: _lshift(_C._tensor(other, None, self.device), self)
Tensor.__rrshift__ = lambda self, other: _rshift(_C._tensor(other, None, self.device), self)
Tensor.__ilshift__ = lambda self, other: _lshift(self, other, out=self)
Tensor.__irshift__ = lambda self, other: _rshift(self, other, out=self)
