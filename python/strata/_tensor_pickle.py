"""Pickling, copy and deepcopy of Tensors and Parameters, built on an untyped storage handle.

A strata tensor is (storage, offset, sizes, strides, dtype). ``Storage`` is the Python handle of one storage: a flat
uint8 tensor covering it from byte 0, which keeps the memory alive. ``storage_of(t)`` returns the same ``Storage``
object for every tensor on the same storage for as long as that object is alive, so pickle's memo (and deepcopy's)
store a storage once and tensors that shared it still share it after loading. ``strata.save`` uses the same handles
as persistent ids for the records of torch's zip format.
"""

import copy
import weakref

import numpy as np

from . import _C
from .nn.parameter import Parameter, _make_subclass

Tensor = _C.Tensor

__all__ = ["Storage", "storage_of", "rebuild_tensor", "MAX_NDIM"]

# Same bound as the safetensors reader: no real tensor has more dimensions, and sizes/strides lists from a file are
# checked against it before anything is built.
MAX_NDIM = 1024
_INT64_MAX = (1 << 63) - 1

# _storage_ptr() (the core's storage identity) -> Storage. A live Storage holds its storage, so the key cannot be
# reused by another allocation while the entry exists.
_handles = weakref.WeakValueDictionary()


class Storage:
    """An untyped storage: ``nbytes()`` bytes that tensors of any dtype view."""

    __slots__ = ("_bytes", "__weakref__")

    def __init__(self, byte_tensor=0, *, device=None):
        # Storage(n): n zero bytes; Storage([ints]): those bytes (torch.UntypedStorage's constructors); otherwise
        # the 1-D contiguous uint8 tensor at offset 0 of the storage.
        if isinstance(byte_tensor, int) or isinstance(byte_tensor, (list, tuple)):
            if device is not None and _C.device(device).type != "cpu":
                raise RuntimeError(f"UntypedStorage: only CPU storages are supported, got device {device}")
            if isinstance(byte_tensor, int):
                if byte_tensor < 0:
                    raise RuntimeError(f"UntypedStorage: size must be non-negative, got {byte_tensor}")
                byte_tensor = _C._ops.zeros([byte_tensor], dtype=_C.uint8)
            else:
                if not all(isinstance(b, int) and 0 <= b < 256 for b in byte_tensor):
                    raise RuntimeError("UntypedStorage: a list of bytes must hold ints in [0, 255]")
                from . import from_numpy

                byte_tensor = from_numpy(np.array(byte_tensor, dtype=np.uint8))
        self._bytes = byte_tensor

    @classmethod
    def from_numpy(cls, array):
        """A storage over a 1-D uint8 NumPy array's memory (no copy: a memory map stays a memory map)."""
        from . import from_numpy

        s = cls(from_numpy(array) if array.size else _C._ops.empty([0], dtype=_C.uint8))
        _handles[s._bytes._storage_ptr()] = s
        return s

    def nbytes(self):
        return self._bytes.numel()

    # An untyped storage counts bytes: size() is nbytes(), each element is one byte.
    def size(self):
        return self._bytes.numel()

    def __len__(self):
        return self._bytes.numel()

    def element_size(self):
        return 1

    def data_ptr(self):
        return self._bytes.data_ptr()

    @property
    def device(self):
        return self._bytes.device

    def numpy(self):
        """The bytes as a uint8 NumPy array sharing the memory."""
        return self._bytes.numpy() if self.nbytes() else np.empty(0, dtype=np.uint8)

    def clone(self):
        return Storage.from_numpy(self.numpy().copy())

    def cpu(self):
        return self

    def tensor(self, dtype, offset, size, stride):
        """A tensor of ``dtype`` viewing this storage; the geometry is checked against the storage first."""
        itemsize = _itemsize(dtype)
        numel = self.nbytes() // itemsize
        check_geometry(numel, offset, size, stride, dtype)
        base = self._bytes
        if dtype is not _C.uint8:
            if base.numel() != numel * itemsize:
                base = base[: numel * itemsize]
            base = base.view(dtype)
        if base.numel() == 0:
            # A storage with no bytes: the only tensors on it have no elements.
            return _C._ops.empty(list(size), dtype=dtype)
        return base.as_strided(list(size), list(stride), offset)

    def __len__(self):
        return self.nbytes()

    def __repr__(self):
        return f"strata.Storage(nbytes={self.nbytes()}, device={self.device})"

    def __reduce__(self):
        # Plain pickle keeps the bytes in the host's order, like the memory itself (strata.save fixes the order).
        return (_storage_from_bytes, (self.numpy().tobytes(),))


def _storage_from_bytes(data):
    if not isinstance(data, (bytes, bytearray)):
        raise TypeError(f"storage bytes must be bytes, got {type(data).__name__}")
    return Storage.from_numpy(np.frombuffer(bytearray(data), dtype=np.uint8))


def _itemsize(dtype):
    return dtype.itemsize


def check_geometry(numel, offset, size, stride, dtype):
    """Refuse a (storage_offset, size, stride) that reaches outside a storage of ``numel`` elements."""
    if not (isinstance(offset, int) and not isinstance(offset, bool)) or offset < 0:
        raise RuntimeError(f"rebuilding a tensor: storage offset must be a non-negative int, got {offset!r:.100}")
    if not isinstance(size, (tuple, list)) or not isinstance(stride, (tuple, list)):
        raise RuntimeError(
            f"rebuilding a tensor: size and stride must be tuples, got {type(size).__name__} and {type(stride).__name__}"
        )
    if len(size) > MAX_NDIM:
        raise RuntimeError(f"rebuilding a tensor: {len(size)} dimensions, more than the limit of {MAX_NDIM}")
    if len(size) != len(stride):
        raise RuntimeError(f"rebuilding a tensor: size {tuple(size)!r:.200} and stride {tuple(stride)!r:.200} differ in length")
    for v in (*size, *stride):
        if not (isinstance(v, int) and not isinstance(v, bool)) or v < 0:
            raise RuntimeError(
                f"rebuilding a tensor: sizes and strides must be non-negative ints, got size {tuple(size)!r:.200} "
                f"stride {tuple(stride)!r:.200}"
            )
    count = 1
    for s in size:
        count *= max(s, 1)
        if count > _INT64_MAX:
            raise RuntimeError(f"rebuilding a tensor: size {tuple(size)!r:.200} overflows 64-bit sizes")
    if 0 in size:
        if offset > numel:
            raise RuntimeError(
                f"rebuilding a tensor: storage offset {offset} is past the end of a storage of {numel} {dtype} elements"
            )
        return
    last = offset + sum((s - 1) * st for s, st in zip(size, stride))
    if last >= numel:
        raise RuntimeError(
            f"rebuilding a tensor: size {tuple(size)!r:.200} with stride {tuple(stride)!r:.200} at storage offset "
            f"{offset} reaches element {last}, out of bounds for a storage of {numel} {dtype} elements"
        )


def storage_of(t):
    """The Storage handle of ``t``'s storage (the same object for every tensor on that storage while it lives)."""
    if t.is_meta:
        raise RuntimeError("cannot access the storage of a tensor on the meta device (it has no data)")
    key = t._storage_ptr()
    s = _handles.get(key)
    if s is None:
        itemsize = t.element_size()
        nbytes = t._storage_nbytes()
        flat = t.detach()
        if flat.device.type != "cpu":
            raise RuntimeError(f"storage of a tensor on {flat.device} is not supported; move it to the CPU first")
        n = nbytes // itemsize
        if n:
            flat = flat.as_strided([n], [1], 0)
            byte = flat.view(_C.uint8) if flat.dtype is not _C.uint8 else flat
        else:
            byte = _C._ops.empty([0], dtype=_C.uint8)
        s = Storage(byte)
        _handles[key] = s
    return s


def rebuild_tensor(storage, dtype, offset, size, stride, requires_grad=False):
    t = storage.tensor(dtype, offset, size, stride)
    if requires_grad:
        t.requires_grad_(True)
    return t


# ---- pickle ------------------------------------------------------------------------------------------------------


def _rebuild_tensor(storage, dtype, offset, size, stride, requires_grad):
    if not isinstance(storage, Storage):
        raise TypeError(f"rebuilding a tensor: expected a strata Storage, got {type(storage).__name__}")
    if not isinstance(dtype, _C.dtype):
        raise TypeError(f"rebuilding a tensor: expected a dtype, got {type(dtype).__name__}")
    return rebuild_tensor(storage, dtype, offset, tuple(size), tuple(stride), bool(requires_grad))


def _rebuild_parameter(data, requires_grad):
    return _make_subclass(Parameter, data, bool(requires_grad))


def _rebuild_sparse(indices, values, size, coalesced, requires_grad):
    from ._sparse import sparse_coo_tensor
    return sparse_coo_tensor(indices, values, size, is_coalesced=coalesced, requires_grad=requires_grad)


def _rebuild_quantized(int_repr, code, scale, zero_point, scales, zero_points, axis):
    from . import _quantized  # noqa: F401  (registers the quantized dtypes and handler)
    return _C._quant_make(int_repr, code, scale, zero_point, scales, zero_points, axis)


def _tensor_reduce_ex(self, proto):
    if _C._is_quantized(self):  # the integer values and the quantization parameters (docs/SPARSE.md)
        q, code, scale, zp, scales, zps, axis = _C._quant_parts(self)
        return (_rebuild_quantized, (q.contiguous().clone(), code, scale, zp, scales, zps, axis))
    if _C._is_nested(self):  # values, offsets, lengths, ragged dim (docs/NESTED.md)
        from ._nested import _rebuild
        v, off, lens, r = _C._nested_parts(self)
        return (_rebuild, (v.detach(), off, lens, r, self.requires_grad and self.is_leaf))
    if _C._is_sparse(self):  # indices and values (docs/SPARSE.md)
        return (_rebuild_sparse, (self._indices(), self._values().detach(), tuple(self.shape), self.is_coalesced(),
                                  self.requires_grad and self.is_leaf))
    if self.is_meta:
        raise RuntimeError("cannot pickle a tensor on the meta device (it has no data)")
    return (
        _rebuild_tensor,
        (storage_of(self), self.dtype, self.storage_offset(), tuple(self.shape), tuple(self.stride()),
         self.requires_grad),
    )


def _parameter_reduce_ex(self, proto):
    return (_rebuild_parameter, (self.detach(), self.requires_grad))


def _keep_alive(memo, obj):
    # copy.deepcopy's own convention: objects whose ids are memo keys must outlive the copy.
    memo.setdefault(id(memo), []).append(obj)


def _plain_deepcopy(self, memo):
    """A copy with its own storage; tensors sharing a storage in one deepcopy share the copied storage."""
    if _C._is_quantized(self):
        q, code, scale, zp, scales, zps, axis = _C._quant_parts(self)
        return _C._quant_make(copy.deepcopy(q, memo), code, scale, zp, scales, zps, axis)
    if _C._is_nested(self):  # copies of its parts
        v, off, lens, r = _C._nested_parts(self)
        return _C._nested_make(copy.deepcopy(v.detach(), memo), copy.deepcopy(off, memo),
                               None if lens is None else copy.deepcopy(lens, memo), r)
    if _C._is_sparse(self):  # copies of its indices and values
        from ._sparse import _make
        return _make(copy.deepcopy(self._indices(), memo), copy.deepcopy(self._values().detach(), memo),
                     self.shape, self.is_coalesced())
    st = storage_of(self)
    new_st = memo.get(id(st))
    if new_st is None:
        new_st = st.clone()
        memo[id(st)] = new_st
        _keep_alive(memo, st)
    return new_st.tensor(self.dtype, self.storage_offset(), tuple(self.shape), tuple(self.stride()))


def _check_leaf(self):
    if not self.is_leaf:
        raise RuntimeError(
            "Only Tensors created explicitly by the user (graph leaves) support the deepcopy protocol at the moment.  "
            "If you were attempting to deepcopy a module, this may be because of a torch.nn.utils.weight_norm usage, "
            "see https://github.com/pytorch/pytorch/pull/103001"
        )


def _tensor_deepcopy(self, memo):
    _check_leaf(self)
    if id(self) in memo:
        return memo[id(self)]
    if self.is_meta:
        new = _C._ops.empty_strided(list(self.shape), list(self.stride()), dtype=self.dtype, device=self.device)
    else:
        new = _plain_deepcopy(self, memo)
    if self.requires_grad:
        new.requires_grad_(True)
    memo[id(self)] = new
    if self.grad is not None:
        new.grad = copy.deepcopy(self.grad, memo)
    return new


def _parameter_deepcopy(self, memo):
    if id(self) in memo:
        return memo[id(self)]
    data = _plain_deepcopy(self, memo) if not self.is_meta else self.detach().clone()
    new = _make_subclass(type(self), data, self.requires_grad)
    memo[id(self)] = new
    if self.grad is not None:
        new.grad = copy.deepcopy(self.grad, memo)
    # Python attributes set on the parameter (subclasses, tags) travel too.
    state = getattr(self, "__dict__", None)
    if state:
        for k, v in state.items():
            setattr(new, k, copy.deepcopy(v, memo))
    return new


def _device_reduce(self):
    return (_C.device, (str(self),))


Tensor.__reduce_ex__ = _tensor_reduce_ex
Tensor.__deepcopy__ = _tensor_deepcopy
Parameter.__reduce_ex__ = _parameter_reduce_ex
Parameter.__deepcopy__ = _parameter_deepcopy
_C.device.__reduce__ = _device_reduce
