"""strata.storage: torch.storage's UntypedStorage and TypedStorage, and the legacy typed storages (FloatStorage, ...).

An UntypedStorage is the byte handle of a tensor's memory (strata._tensor_pickle.Storage: one object per storage,
shared by every tensor on it). A TypedStorage is that handle read as elements of one dtype: `tensor.storage()`,
`torch.FloatStorage([1, 2])`, `TypedStorage(3, dtype=...)`, `TypedStorage(wrap_storage=untyped, dtype=...)`. Writes
through any of them are seen by the tensors on the same memory. As in torch, the legacy classes (FloatStorage, ...)
build TypedStorage objects, and isinstance(s, FloatStorage) tests the dtype.
"""

import builtins

import numpy as np

from . import _C
from ._tensor_pickle import Storage as UntypedStorage
from ._tensor_pickle import storage_of

__all__ = ["TypedStorage", "UntypedStorage", "Storage"]


def _values_tensor(storage, dtype):
    """The whole storage as a 1-D tensor of dtype (sharing the memory)."""
    n = storage.nbytes() // dtype.itemsize
    return storage.tensor(dtype, 0, [n], [1])


# ---- UntypedStorage: element access on the byte handle ---------------------------------------------------------
def _u_tolist(self):
    return self._bytes.tolist()


def _u_getitem(self, idx):
    if isinstance(idx, slice):
        start, stop, step = idx.indices(self.nbytes())
        if step != 1:
            raise RuntimeError("UntypedStorage: slices must have step 1")
        return UntypedStorage(self._bytes[start:stop].clone())
    return int(self._bytes[idx].item())


def _u_setitem(self, idx, value):
    self._bytes[idx] = value


def _u_fill_(self, value):
    self._bytes.fill_(value)
    return self


def _u_copy_(self, src, non_blocking=None):
    src = src.untyped() if isinstance(src, TypedStorage) else src
    if src.nbytes() != self.nbytes():
        raise RuntimeError(f"copy_: sizes do not match: {self.nbytes()} bytes and {src.nbytes()} bytes")
    self._bytes.copy_(src._bytes)
    return self


for _name, _fn in {
    "tolist": _u_tolist, "__getitem__": _u_getitem, "__setitem__": _u_setitem, "fill_": _u_fill_,
    "copy_": _u_copy_, "__iter__": lambda self: iter(self.tolist()), "is_shared": lambda self: False,
    "is_pinned": lambda self, device="cuda": False, "type": lambda self, dtype=None, non_blocking=False:
        "torch.UntypedStorage", "untyped": lambda self: self, "element_size": lambda self: 1,
}.items():
    setattr(UntypedStorage, _name, _fn)
UntypedStorage.__name__ = UntypedStorage.__qualname__ = "UntypedStorage"
UntypedStorage.__module__ = __name__


# ---- TypedStorage ----------------------------------------------------------------------------------------------
def _legacy_name(dtype):
    return _LEGACY_NAMES.get(dtype)


class TypedStorage:
    """A storage read as elements of `dtype`. TypedStorage(size | sequence, dtype=, device=) makes a new one (zeros
    for a size); TypedStorage(wrap_storage=untyped, dtype=) views an existing one."""

    is_sparse = False

    def __init__(self, *args, dtype=None, device=None, wrap_storage=None, _internal=False):
        from . import get_default_dtype

        dtype = get_default_dtype() if dtype is None else dtype
        if device is not None and _C.device(device).type != "cpu":
            raise RuntimeError(f"TypedStorage: only CPU storages are supported, got device {device}")
        if wrap_storage is not None:
            if args:
                raise RuntimeError("TypedStorage: no positional arguments are allowed with wrap_storage")
            if not isinstance(wrap_storage, UntypedStorage):
                raise TypeError("TypedStorage: wrap_storage must be an UntypedStorage, got "
                                f"{type(wrap_storage).__name__}")
            self._untyped_storage = wrap_storage
        elif len(args) > 1:
            raise TypeError(f"TypedStorage: expected at most one positional argument, got {len(args)}")
        else:
            arg = args[0] if args else 0
            if isinstance(arg, builtins.int) and not isinstance(arg, builtins.bool):
                if arg < 0:
                    raise RuntimeError(f"TypedStorage: size must be non-negative, got {arg}")
                t = _C._ops.zeros([arg], dtype=dtype)
            else:
                from . import tensor as _tensor

                try:
                    values = list(arg)
                except TypeError:
                    raise TypeError(f"TypedStorage: expected a size or a sequence, got {type(arg).__name__}") from None
                t = _tensor(values, dtype=dtype) if values else _C._ops.zeros([0], dtype=dtype)
            self._untyped_storage = storage_of(t)
        self.dtype = dtype

    # The bytes and the view of them.
    def untyped(self):
        return self._untyped_storage

    def _tensor(self):
        return _values_tensor(self._untyped_storage, self.dtype)

    def size(self):
        return self._untyped_storage.nbytes() // self.dtype.itemsize

    def __len__(self):
        return self.size()

    def element_size(self):
        return self.dtype.itemsize

    def nbytes(self):
        return self._untyped_storage.nbytes()

    def data_ptr(self):
        return self._untyped_storage.data_ptr()

    @property
    def device(self):
        return self._untyped_storage.device

    @property
    def is_cuda(self):
        return False

    def is_shared(self):
        return False

    def is_pinned(self, device="cuda"):
        return False

    def tolist(self):
        return self._tensor().tolist()

    def __iter__(self):
        return iter(self.tolist())

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            raise RuntimeError("slices are only supported in UntypedStorage.__getitem__")
        n = self.size()
        if not isinstance(idx, builtins.int) or not -n <= idx < n:
            raise IndexError(f"index {idx} out of range for storage of size {n}")
        return self._tensor()[idx].item()

    def __setitem__(self, idx, value):
        self._tensor()[idx] = value

    def fill_(self, value):
        self._tensor().fill_(value)
        return self

    def copy_(self, source, non_blocking=None):
        src = source._tensor() if isinstance(source, TypedStorage) else \
            _values_tensor(source, _C.uint8) if isinstance(source, UntypedStorage) else None
        if src is None:
            raise TypeError(f"copy_: expected a storage, got {type(source).__name__}")
        if src.numel() != self.size():
            raise RuntimeError(f"copy_: sizes do not match: {self.size()} and {src.numel()} elements")
        self._tensor().copy_(src)
        return self

    def clone(self):
        return TypedStorage(wrap_storage=storage_of(self._tensor().clone()), dtype=self.dtype)

    def cpu(self):
        return self

    def tensor_view(self):
        return self._tensor()

    def type(self, dtype=None, non_blocking=False):
        if dtype is None:
            name = _legacy_name(self.dtype)
            return f"torch.{name}" if name else "torch.storage.TypedStorage"
        raise NotImplementedError("TypedStorage.type(dtype): use .to(dtype) on a tensor of the storage")

    def _to(self, dtype):
        return TypedStorage(wrap_storage=storage_of(self._tensor().to(dtype)), dtype=dtype)

    def double(self):
        return self._to(_C.float64)

    def float(self):
        return self._to(_C.float32)

    def half(self):
        return self._to(_C.float16)

    def bfloat16(self):
        return self._to(_C.bfloat16)

    def long(self):
        return self._to(_C.int64)

    def int(self):
        return self._to(_C.int32)

    def short(self):
        return self._to(_C.int16)

    def char(self):
        return self._to(_C.int8)

    def byte(self):
        return self._to(_C.uint8)

    def bool(self):
        return self._to(_C.bool)

    def pickle_storage_type(self):
        return _legacy_name(self.dtype) or "TypedStorage"

    def __reduce__(self):
        return (_rebuild_typed, (self._untyped_storage, self.dtype._name))

    def __repr__(self):
        body = "\n".join(f" {v}" for v in self.tolist())
        head = body + "\n" if body else ""
        return f"{head}[strata.storage.TypedStorage(dtype={self.dtype}, device={self.device}) of size {self.size()}]"

    @classmethod
    def from_buffer(cls, buffer, byte_order="native", count=-1, offset=0, dtype=None):
        dtype = getattr(cls, "_legacy_dtype", None) or dtype
        if dtype is None:
            raise RuntimeError("from_buffer: a dtype is needed (or call it on a legacy class such as ByteStorage)")
        np_dtype = np.dtype(_C._ops.empty([0], dtype=dtype).numpy().dtype)
        if byte_order in ("big", "little"):
            np_dtype = np_dtype.newbyteorder(">" if byte_order == "big" else "<")
        arr = np.frombuffer(bytes(buffer), dtype=np_dtype, count=count, offset=offset).astype(np_dtype.newbyteorder("="))
        from . import from_numpy

        return TypedStorage(wrap_storage=storage_of(from_numpy(arr.copy())), dtype=dtype)


def _rebuild_typed(untyped, dtype_name):
    return TypedStorage(wrap_storage=untyped, dtype=getattr(_C, dtype_name))


class _LegacyStorageMeta(type):
    """isinstance(s, FloatStorage): s is a TypedStorage of float32."""

    def __instancecheck__(cls, instance):
        return isinstance(instance, TypedStorage) and instance.dtype == cls._legacy_dtype


class _LegacyStorage(TypedStorage, metaclass=_LegacyStorageMeta):
    _legacy_dtype = None

    def __new__(cls, *args, wrap_storage=None, device=None):
        # Builds a TypedStorage of the class's dtype, as torch's legacy constructors do.
        return TypedStorage(*args, dtype=cls._legacy_dtype, wrap_storage=wrap_storage, device=device)

    @classmethod
    def from_buffer(cls, *args, **kwargs):
        return TypedStorage.from_buffer.__func__(cls, *args, **kwargs)


_LEGACY = {
    "ByteStorage": "uint8", "CharStorage": "int8", "ShortStorage": "int16", "IntStorage": "int32",
    "LongStorage": "int64", "HalfStorage": "float16", "FloatStorage": "float32", "DoubleStorage": "float64",
    "BoolStorage": "bool", "BFloat16Storage": "bfloat16", "ComplexFloatStorage": "complex64",
    "ComplexDoubleStorage": "complex128",
}
_LEGACY_NAMES = {}
for _cls_name, _dt in _LEGACY.items():
    _dtype = getattr(_C, _dt)
    globals()[_cls_name] = _LegacyStorageMeta(_cls_name, (_LegacyStorage,), {"_legacy_dtype": _dtype,
                                                                           "__module__": "strata"})
    _LEGACY_NAMES[_dtype] = _cls_name
LEGACY_STORAGES = {n: globals()[n] for n in _LEGACY}

# torch.storage.Storage is a typing alias of the storage types.
Storage = TypedStorage


def _install():
    """Tensor.storage() / untyped_storage(), and set_ accepting a TypedStorage."""
    Tensor = _C.Tensor
    Tensor.storage = lambda self: TypedStorage(wrap_storage=storage_of(self), dtype=self.dtype)
    Tensor.untyped_storage = lambda self: storage_of(self)
    prev_set = Tensor.set_

    def set_(self, source=None, storage_offset=0, size=None, stride=None):
        if isinstance(source, TypedStorage):
            if source.dtype != self.dtype:
                raise RuntimeError(f"set_: expected a storage of dtype {self.dtype}, got {source.dtype}")
            source = source.untyped()
        if source is None:
            return prev_set(self)
        return prev_set(self, source, storage_offset, size, stride)

    Tensor.set_ = set_
    from . import _tensor_surface

    _tensor_surface.TypedStorage = TypedStorage  # what strata.is_storage checks


_install()
