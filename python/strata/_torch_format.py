"""torch's checkpoint format: a zip archive holding a pickle whose tensors point at raw storage records.

Layout (what torch.save writes; every record is stored uncompressed and its data starts on a 64-byte boundary):

* ``<prefix>/data.pkl``: the pickled object tree (protocol 2 by default). A tensor is
  ``torch._utils._rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks)`` and a
  storage is a persistent id ``('storage', torch.<Type>Storage, key, location, numel)``;
* ``<prefix>/data/<key>``: that storage's bytes, in the order ``byteorder`` names;
* ``<prefix>/byteorder`` (``little``), ``<prefix>/version`` (``3``), ``.format_version``, ``.storage_alignment``,
  ``.data/serialization_id``.

The writer pickles with torch's global names so ``torch.load`` (weights_only=True included) reads strata's files; the
readers map those names to strata's rebuilders. Nothing here imports torch.
"""

import _compat_pickle
import io
import os
import pickle
import struct
import sys
import zipfile
from collections import Counter, OrderedDict

import numpy as np

from . import _C
from ._size import Size
from ._creation import layout as _layout
from . import _quantized as _Q
from ._tensor_pickle import Storage, storage_of, rebuild_tensor
from .nn.parameter import Parameter, _make_subclass

Tensor = _C.Tensor

ALIGNMENT = 64
DEFAULT_PROTOCOL = 2
# Protocol-level cap on data.pkl: a pickle bigger than this is not a checkpoint's object tree (the tensor data lives in
# the storage records).
MAX_PICKLE_BYTES = 1 << 31
# A deflated record can expand at most ~1032x; a declared size beyond that is a lie (or a zip bomb).
_MAX_DEFLATE_RATIO = 1100

# torch's names for the dtypes strata has, and its legacy typed-storage classes.
_DTYPE_NAMES = {
    _C.float32: "float32", _C.float64: "float64", _C.float16: "float16", _C.bfloat16: "bfloat16",
    _C.int64: "int64", _C.int32: "int32", _C.int16: "int16", _C.int8: "int8", _C.uint8: "uint8", _C.bool: "bool",
    _C.complex64: "complex64", _C.complex128: "complex128", _C.uint16: "uint16", _C.uint32: "uint32",
    _C.uint64: "uint64", _C.float8_e4m3fn: "float8_e4m3fn", _C.float8_e5m2: "float8_e5m2",
    _C.float8_e4m3fnuz: "float8_e4m3fnuz", _C.float8_e5m2fnuz: "float8_e5m2fnuz", _C.float8_e8m0fnu: "float8_e8m0fnu",
}
# torch's aliases of those dtypes, as a checkpoint may name them.
_DTYPE_ALIASES = {"cfloat": _C.complex64, "cdouble": _C.complex128}
_STORAGE_NAMES = {
    _C.float32: "FloatStorage", _C.float64: "DoubleStorage", _C.float16: "HalfStorage",
    _C.bfloat16: "BFloat16Storage", _C.int64: "LongStorage", _C.int32: "IntStorage", _C.int16: "ShortStorage",
    _C.int8: "CharStorage", _C.uint8: "ByteStorage", _C.bool: "BoolStorage",
    _C.complex64: "ComplexFloatStorage", _C.complex128: "ComplexDoubleStorage",
}
# Dtypes with no legacy typed storage (torch writes them as an UntypedStorage of bytes plus
# _rebuild_tensor_v3's dtype argument).
_UNTYPED_DTYPES = (_C.uint16, _C.uint32, _C.uint64, _C.float8_e4m3fn, _C.float8_e5m2, _C.float8_e4m3fnuz,
                   _C.float8_e5m2fnuz, _C.float8_e8m0fnu)
# torch dtypes strata cannot hold: named in errors.
_FOREIGN_STORAGES = {"QUInt4x2Storage": "quint4x2", "QUInt2x4Storage": "quint2x4"}
# Quantized dtypes (python/strata/_quantized.py) and their typed storages.
_Q_STORAGE_NAMES = {_Q.qint8: "QInt8Storage", _Q.quint8: "QUInt8Storage", _Q.qint32: "QInt32Storage"}
_FOREIGN_DTYPES = {
    "complex32", "float4_e2m1fn_x2", "quint4x2", "quint2x4", "bits8", "bits16", "bits1x8", "bits2x4", "bits4x2",
}


class _Global:
    """A global written into the pickle by name: the writer's way to reference torch's functions without torch."""

    __slots__ = ("module", "name")
    _interned = {}

    def __new__(cls, module, name):
        key = (module, name)
        g = cls._interned.get(key)
        if g is None:
            g = object.__new__(cls)
            g.module, g.name = module, name
            cls._interned[key] = g
        return g

    def __call__(self, *args, **kwargs):
        # pickle's save_reduce insists on a callable; this one only ever stands for a name in the stream.
        raise TypeError(f"{self.module}.{self.name} is a name written into a checkpoint, not a function")


class StorageType:
    """What ``torch.<X>Storage`` unpickles to: the dtype of a persistent storage id."""

    __slots__ = ("name", "dtype")

    def __init__(self, name, dtype):
        self.name, self.dtype = name, dtype

    def __repr__(self):
        return f"torch.{self.name}"


class TypedStorage:
    """A storage seen as elements of one dtype (what a persistent id resolves to)."""

    __slots__ = ("storage", "dtype")

    def __init__(self, storage, dtype):
        self.storage, self.dtype = storage, dtype

    def __repr__(self):
        return f"TypedStorage(dtype={self.dtype}, nbytes={self.storage.nbytes()})"


# --------------------------------------------------------------------------------------------------------------------
# Rebuilders: what torch's global names resolve to when strata reads a file
# --------------------------------------------------------------------------------------------------------------------


def _typed(storage, what):
    if not isinstance(storage, TypedStorage):
        raise RuntimeError(f"{what}: expected a storage from the archive, got {type(storage).__name__}")
    return storage


def _rebuild_tensor(storage, storage_offset, size, stride):
    s = _typed(storage, "_rebuild_tensor")
    return rebuild_tensor(s.storage, s.dtype, storage_offset, _tuple(size), _tuple(stride))


def _tuple(x):
    return tuple(x) if isinstance(x, (tuple, list, Size)) else x


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False, backward_hooks=None, metadata=None):
    s = _typed(storage, "_rebuild_tensor_v2")
    return rebuild_tensor(s.storage, s.dtype, storage_offset, _tuple(size), _tuple(stride), bool(requires_grad))


def _rebuild_tensor_v3(storage, storage_offset, size, stride, requires_grad, backward_hooks, dtype, metadata=None):
    s = _typed(storage, "_rebuild_tensor_v3")
    if not isinstance(dtype, _C.dtype):
        raise RuntimeError(f"_rebuild_tensor_v3: expected a dtype, got {type(dtype).__name__}")
    return rebuild_tensor(s.storage, dtype, storage_offset, _tuple(size), _tuple(stride), bool(requires_grad))


def _set_attributes(obj, state, what):
    if not state:
        return
    if not isinstance(state, dict):
        raise RuntimeError(f"{what}: state must be a dict of attributes, got {type(state).__name__}")
    for k, v in state.items():
        if not isinstance(k, str) or (k.startswith("__") and k.endswith("__")):
            raise RuntimeError(f"{what}: refusing to set attribute {k!r:.100}")
        setattr(obj, k, v)


def _rebuild_parameter(data, requires_grad, backward_hooks=None):
    if not isinstance(data, Tensor):
        raise RuntimeError(f"_rebuild_parameter: expected a tensor, got {type(data).__name__}")
    return _make_subclass(Parameter, data, bool(requires_grad))


def _rebuild_parameter_with_state(data, requires_grad, backward_hooks, state):
    p = _rebuild_parameter(data, requires_grad)
    if isinstance(state, tuple) and len(state) == 2:  # (dict state, slot state)
        _set_attributes(p, state[0], "_rebuild_parameter_with_state")
        _set_attributes(p, state[1], "_rebuild_parameter_with_state")
    else:
        _set_attributes(p, state, "_rebuild_parameter_with_state")
    return p


def _rebuild_from_type_v2(func, new_type, args, state):
    if func not in (_rebuild_tensor, _rebuild_tensor_v2, _rebuild_tensor_v3, _rebuild_parameter):
        raise RuntimeError(f"_rebuild_from_type_v2: unexpected rebuild function {func!r:.100}")
    if not isinstance(args, tuple):
        raise RuntimeError("_rebuild_from_type_v2: arguments must be a tuple")
    ret = func(*args)
    if new_type is Parameter and type(ret) is not Parameter:
        ret = _make_subclass(Parameter, ret, ret.requires_grad)
    elif new_type is not Tensor and new_type is not type(ret):
        raise RuntimeError(f"_rebuild_from_type_v2: tensor subclass {new_type!r:.100} is not supported")
    if isinstance(state, tuple) and len(state) == 2:
        _set_attributes(ret, state[0], "_rebuild_from_type_v2")
        _set_attributes(ret, state[1], "_rebuild_from_type_v2")
    else:
        _set_attributes(ret, state, "_rebuild_from_type_v2")
    return ret


def _codecs_encode(obj, encoding="utf-8", errors="strict"):
    # Protocol 2 pickles bytes as _codecs.encode(text, 'latin1'); only text codecs are allowed (no zlib, no base64).
    if not isinstance(obj, str) or encoding not in ("latin1", "latin-1", "iso-8859-1", "utf-8", "utf8", "ascii"):
        raise RuntimeError(f"_codecs.encode: only str with a text encoding is allowed, got {type(obj).__name__} "
                           f"and {encoding!r:.50}")
    return obj.encode(encoding, errors)


def _safe_bytearray(*args):
    # bytearray(n) would allocate n bytes that the file does not hold.
    if args and not isinstance(args[0], (bytes, str, bytearray)):
        raise RuntimeError(f"bytearray: only bytes or str arguments are allowed, got {type(args[0]).__name__}")
    return bytearray(*args)


def _safe_set(*args):
    return set(*args)


def _safe_frozenset(*args):
    return frozenset(*args)


def _torch_layout(name):
    if name == "torch.sparse_coo":
        from ._sparse import sparse_coo
        return sparse_coo
    if name != "torch.strided":
        raise RuntimeError(f"tensor layout {name!r:.50} is not supported (strata tensors are strided or sparse_coo)")
    return name


def _rebuild_qtensor(storage, storage_offset, size, stride, quantizer_params, requires_grad=False,
                     backward_hooks=None):
    """torch._utils._rebuild_qtensor: the integer values from a QInt8/QUInt8/QInt32 storage and the quantizer's
    parameters ((per_tensor_affine, scale, zero_point) or (per_channel_affine, scales, zero_points, axis))."""
    s = _typed(storage, "_rebuild_qtensor")
    if not isinstance(s.dtype, _Q.dtype):
        raise RuntimeError(f"_rebuild_qtensor: expected a quantized storage, got one of {s.dtype}")
    if not isinstance(quantizer_params, tuple) or not quantizer_params:
        raise RuntimeError("_rebuild_qtensor: bad quantizer parameters")
    size, stride = _tuple(size), _tuple(stride)
    q = rebuild_tensor(s.storage, s.dtype._repr_dtype, storage_offset, size, stride)
    scheme = quantizer_params[0]
    if scheme is _Q.per_tensor_affine and len(quantizer_params) == 3:
        _, scale, zp = quantizer_params
        return _C._quant_make(q, s.dtype._code, float(scale), int(zp), None, None, 0)
    if scheme is _Q.per_channel_affine and len(quantizer_params) == 4:
        _, scales, zps, axis = quantizer_params
        from ._functions import tensor
        if not isinstance(axis, int) or not 0 <= axis < len(size):
            raise ValueError(f"_rebuild_qtensor: per_channel axis {axis!r:.20} out of range for size {size}")
        scales = scales.to(_C.float64) if isinstance(scales, Tensor) else tensor(list(scales), dtype=_C.float64)
        zps = zps.to(_C.int64) if isinstance(zps, Tensor) else tensor(list(zps), dtype=_C.int64)
        return _C._quant_make(q, s.dtype._code, 1.0, 0, scales, zps, axis)
    raise RuntimeError(f"Can't deserialize quantized tensor with qscheme {scheme!r:.50}")


def _rebuild_sparse_tensor(layout, data):
    """torch._utils._rebuild_sparse_tensor for the COO layout: data is (indices, values, size[, is_coalesced])."""
    from ._sparse import sparse_coo, sparse_coo_tensor
    if layout is not sparse_coo:
        raise RuntimeError(f"_rebuild_sparse_tensor: layout {layout!r:.50} is not supported (only sparse_coo)")
    if not isinstance(data, tuple) or len(data) not in (3, 4):
        raise RuntimeError("_rebuild_sparse_tensor: expected (indices, values, size[, is_coalesced])")
    indices, values, size = data[:3]
    coalesced = data[3] if len(data) == 4 else None
    if not isinstance(indices, Tensor) or not isinstance(values, Tensor):
        raise RuntimeError("_rebuild_sparse_tensor: indices and values must be tensors")
    # Indices beyond size raise here (torch validates them after loading).
    return sparse_coo_tensor(indices, values, tuple(size), is_coalesced=coalesced, check_invariants=True)


def _torch_globals():
    g = {
        "torch._utils._rebuild_tensor": _rebuild_tensor,
        "torch._utils._rebuild_tensor_v2": _rebuild_tensor_v2,
        "torch._utils._rebuild_tensor_v3": _rebuild_tensor_v3,
        "torch._utils._rebuild_parameter": _rebuild_parameter,
        "torch._utils._rebuild_parameter_with_state": _rebuild_parameter_with_state,
        "torch._tensor._rebuild_from_type_v2": _rebuild_from_type_v2,
        "torch._utils._rebuild_sparse_tensor": _rebuild_sparse_tensor,
        "torch._utils._rebuild_qtensor": _rebuild_qtensor,
        "torch.per_tensor_affine": _Q.per_tensor_affine,
        "torch.per_channel_affine": _Q.per_channel_affine,
        "torch.serialization._get_layout": _torch_layout,
        "torch.nn.parameter.Parameter": Parameter,
        "torch.Tensor": Tensor,
        "torch._tensor.Tensor": Tensor,
        "torch.Size": Size,
        "torch.device": _C.device,
        "collections.OrderedDict": OrderedDict,
        "collections.Counter": Counter,
        "builtins.set": _safe_set,
        "builtins.frozenset": _safe_frozenset,
        "builtins.bytearray": _safe_bytearray,
        "builtins.complex": complex,
        "_codecs.encode": _codecs_encode,
        # strata's own pickles of its types
        "strata._size.Size": Size,
        "strata._C.device": _C.device,
    }
    for dt, name in _DTYPE_NAMES.items():
        g[f"torch.{name}"] = dt
        g[f"strata._C.{name}"] = dt
    for name, dt in _DTYPE_ALIASES.items():
        g[f"torch.{name}"] = dt
    for dt, name in _STORAGE_NAMES.items():
        g[f"torch.{name}"] = StorageType(name, dt)
    for dt, name in _Q_STORAGE_NAMES.items():
        g[f"torch.{name}"] = StorageType(name, dt)
        g[f"torch.{dt._name}"] = dt
    g["torch.UntypedStorage"] = StorageType("UntypedStorage", _C.uint8)
    g["torch.storage.UntypedStorage"] = g["torch.UntypedStorage"]
    return g


TORCH_GLOBALS = _torch_globals()
_GLOBAL_IDS = {id(v) for v in TORCH_GLOBALS.values()}


def unsupported_torch_global(module, name):
    """A message for a torch global that strata knows but cannot represent, or None."""
    if module == "torch" and name in _FOREIGN_STORAGES:
        return f"torch.{name} holds {_FOREIGN_STORAGES[name]} data, a dtype strata does not have"
    if module == "torch" and name in _FOREIGN_DTYPES:
        return f"torch.{name} is a dtype strata does not have"
    return None


def map_compat(module, name):
    """Python 2 names (protocol < 3 pickles) to Python 3's, as pickle's fix_imports does."""
    if (module, name) in _compat_pickle.NAME_MAPPING:
        return _compat_pickle.NAME_MAPPING[(module, name)]
    if module in _compat_pickle.IMPORT_MAPPING:
        return _compat_pickle.IMPORT_MAPPING[module], name
    return module, name


# --------------------------------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------------------------------


class _TorchPickler(pickle._Pickler):
    """The pure-Python pickler, so tensors, dtypes, devices and Size can be written under torch's global names."""

    dispatch = dict(pickle._Pickler.dispatch)

    def __init__(self, file, protocol, legacy=False):
        super().__init__(file, protocol)
        self.legacy = legacy
        self.storages = {}  # id(Storage) -> [key, Storage, dtype]; holds the handles so their ids stay unique

    def persistent_id(self, obj):
        if type(obj) is not Storage:
            return None
        if id(obj) not in self.storages:  # a storage saved for itself, not through a tensor: bytes
            self.storages[id(obj)] = [str(len(self.storages)), obj, _C.uint8]
        key, st, dtype = self.storages[id(obj)]
        if dtype in _UNTYPED_DTYPES:
            pid = ("storage", _Global("torch.storage", "UntypedStorage"), key, "cpu", st.nbytes())
        else:
            name = _STORAGE_NAMES[dtype] if dtype in _STORAGE_NAMES else _Q_STORAGE_NAMES[dtype]
            pid = ("storage", _Global("torch", name), key, "cpu", st.nbytes() // dtype.itemsize)
        # The legacy format adds a view_metadata slot (None: a whole storage).
        return pid + (None,) if self.legacy else pid

    def _storage_for(self, t):
        if t.dtype not in _STORAGE_NAMES and t.dtype not in _UNTYPED_DTYPES:
            raise TypeError(f"strata.save: tensors of dtype {t.dtype} cannot be saved")
        if t.is_meta:
            raise ValueError("strata.save: cannot save a tensor on the meta device (it has no data)")
        st = storage_of(t)
        entry = self.storages.get(id(st))
        if entry is None:
            self.storages[id(st)] = [str(len(self.storages)), st, t.dtype]
        elif entry[2] is not t.dtype:
            # The record says one dtype per storage, as torch's does.
            raise RuntimeError(
                "strata.save: cannot save multiple tensors or storages that view the same data as different types "
                f"({entry[2]} and {t.dtype})"
            )
        return st

    def reducer_override(self, obj):
        if isinstance(obj, Tensor) and _C._is_nested(obj):
            raise RuntimeError("strata.save: nested tensors (layout strata.jagged) cannot be saved in torch's "
                               "format; save nt.values(), nt.offsets() (and nt.lengths()) and rebuild with "
                               "strata.nested.nested_tensor_from_jagged (pickle.dumps keeps them whole)")
        if isinstance(obj, Tensor) and _C._is_sparse(obj):  # torch's form: indices and values (docs/SPARSE.md)
            if obj.requires_grad and not obj.is_leaf:
                raise RuntimeError("strata.save: cannot save a sparse tensor that is not a leaf; detach() it first")
            return (
                _Global("torch._utils", "_rebuild_sparse_tensor"),
                (obj.layout, (obj._indices(), obj._values().detach(), Size(obj.shape), obj.is_coalesced())),
            )
        if isinstance(obj, Tensor) and _C._is_quantized(obj):  # torch's _rebuild_qtensor
            q, code, scale, zp, scales, zps, axis = _C._quant_parts(obj)
            qd = _Q._BY_CODE[code]
            st = storage_of(q)
            entry = self.storages.get(id(st))
            if entry is None:
                self.storages[id(st)] = [str(len(self.storages)), st, qd]
            elif entry[2] is not qd:
                raise RuntimeError("strata.save: cannot save tensors that view the same data as different types "
                                   f"({entry[2]} and {qd})")
            params = ((_Q.per_tensor_affine, scale, zp) if scales is None else
                      (_Q.per_channel_affine, scales, zps, axis))
            return (
                _Global("torch._utils", "_rebuild_qtensor"),
                (st, q.storage_offset(), Size(q.shape), tuple(q.stride()), params, False, OrderedDict()),
            )
        if type(obj) is _layout:  # written as torch.serialization._get_layout("torch.<name>")
            return (_Global("torch.serialization", "_get_layout"), ("torch." + obj._name,))
        if isinstance(obj, Tensor):
            if isinstance(obj, Parameter):
                return (
                    _Global("torch._utils", "_rebuild_parameter"),
                    (obj.detach(), obj.requires_grad, OrderedDict()),
                )
            st = self._storage_for(obj)
            if obj.dtype in _UNTYPED_DTYPES:
                return (
                    _Global("torch._utils", "_rebuild_tensor_v3"),
                    (st, obj.storage_offset(), tuple(obj.shape), tuple(obj.stride()), obj.requires_grad,
                     OrderedDict(), obj.dtype),
                )
            return (
                _Global("torch._utils", "_rebuild_tensor_v2"),
                (st, obj.storage_offset(), tuple(obj.shape), tuple(obj.stride()), obj.requires_grad, OrderedDict()),
            )
        t = type(obj)
        if t is _C.device:
            return (_Global("torch", "device"), (str(obj),))
        if t is Size:
            return (_Global("torch", "Size"), (tuple(obj),))
        return NotImplemented

    def _save_marker(self, obj):
        if self.proto >= 4:
            self.save(obj.module)
            self.save(obj.name)
            self.write(pickle.STACK_GLOBAL)
        else:
            enc = "utf-8" if self.proto >= 3 else "ascii"
            self.write(pickle.GLOBAL + obj.module.encode(enc) + b"\n" + obj.name.encode(enc) + b"\n")
        self.memoize(obj)

    def _save_dtype(self, obj):
        self._save_marker(_Global("torch", _DTYPE_NAMES[obj]))

    def _save_qglobal(self, obj):  # strata.qint8 / strata.per_tensor_affine ... as torch.<name>
        g = _Global("torch", obj._name)
        if id(g) in self.memo:  # written before: a reference to it
            self.write(self.get(self.memo[id(g)][0]))
            return
        self._save_marker(g)

    dispatch[_Global] = _save_marker
    dispatch[_C.dtype] = _save_dtype
    dispatch[_Q.dtype] = _save_qglobal
    dispatch[_Q.qscheme] = _save_qglobal


def _serialization_id():
    return str(int.from_bytes(os.urandom(16), "little")).rjust(40, "0")[:40]


class _ZipWriter:
    def __init__(self, fh, prefix):
        self.zf = zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_STORED, allowZip64=True)
        self.prefix = prefix

    def write(self, name, data):
        """One stored record whose data starts on an ALIGNMENT boundary (the padding is a local-header extra field)."""
        data = memoryview(data).cast("B")
        info = zipfile.ZipInfo(f"{self.prefix}/{name}", date_time=(1980, 1, 1, 0, 0, 0))
        info.compress_type = zipfile.ZIP_STORED
        info.file_size = len(data)
        zip64 = len(data) * 1.05 > zipfile.ZIP64_LIMIT
        start = self.zf.fp.tell()
        header = 30 + len(info.filename.encode("utf-8")) + (20 if zip64 else 0)
        pad = -(start + header + 4) % ALIGNMENT
        # Extra-field id "FB", as torch's writer uses, followed by `pad` filler bytes.
        info.extra = b"FB" + struct.pack("<H", pad) + b"Z" * pad
        with self.zf.open(info, "w", force_zip64=zip64) as w:
            if len(data):
                w.write(data)

    def close(self):
        self.zf.close()


def _storage_bytes(st, dtype):
    raw = st.numpy()
    if sys.byteorder != "little" and dtype.itemsize > 1:
        raw = raw.view(f"u{dtype.itemsize}").byteswap().view(np.uint8)
    return raw


def pickle_object(obj, protocol=DEFAULT_PROTOCOL, legacy=False):
    """Pickle ``obj`` with torch's names: (data.pkl bytes, [(key, Storage, dtype)])."""
    buf = io.BytesIO()
    pickler = _TorchPickler(buf, protocol, legacy)
    pickler.dump(obj)
    return buf.getvalue(), [tuple(e) for e in pickler.storages.values()]


def write_archive(pickled, fh, prefix="archive"):
    """Write the zip archive for ``pickle_object``'s result to the binary file ``fh``."""
    data, storages = pickled
    w = _ZipWriter(fh, prefix)
    ok = False
    try:
        w.write("data.pkl", data)
        w.write(".format_version", b"1")
        w.write(".storage_alignment", str(ALIGNMENT).encode())
        w.write("byteorder", b"little")
        for key, st, dtype in storages:
            w.write(f"data/{key}", _storage_bytes(st, dtype))
        w.write("version", b"3\n")
        w.write(".data/serialization_id", _serialization_id().encode())
        ok = True
    finally:
        try:
            w.close()
        except Exception:
            if ok:  # closing writes the central directory: its failure is the save's failure
                raise


# torch's legacy format (``_use_new_zipfile_serialization=False``): four pickles back to back (the magic number, the
# protocol version 1001, a sys_info dict, the object, whose storage ids carry a 6th view_metadata slot) then the
# sorted list of storage keys, then for each key an int64 element count and the storage's raw bytes.
LEGACY_MAGIC_NUMBER = 0x1950A86A20F9469CFC6C
LEGACY_PROTOCOL_VERSION = 1001
LEGACY_MAGICS = tuple(pickle.dumps(LEGACY_MAGIC_NUMBER, protocol=p) for p in range(2, pickle.HIGHEST_PROTOCOL + 1))


def write_legacy(pickled, fh, protocol):
    data, storages = pickled
    sys_info = {
        "protocol_version": LEGACY_PROTOCOL_VERSION,
        "little_endian": True,
        "type_sizes": {"short": 2, "int": 4, "long": 4},
    }
    for header in (LEGACY_MAGIC_NUMBER, LEGACY_PROTOCOL_VERSION, sys_info):
        fh.write(pickle.dumps(header, protocol=protocol))
    fh.write(data)
    by_key = {key: (st, dtype) for key, st, dtype in storages}
    keys = sorted(by_key)
    fh.write(pickle.dumps(keys, protocol=protocol))
    for key in keys:
        st, dtype = by_key[key]
        fh.write(struct.pack("<q", st.nbytes() // dtype.itemsize))
        raw = _storage_bytes(st, dtype)
        if raw.size:
            fh.write(memoryview(raw))


class LegacyStorages:
    """Storages of a legacy checkpoint: allocated when the pickle names them (never more than the file still holds),
    filled from the records that follow the pickle."""

    def __init__(self, label, size, restore):
        self.label, self.size, self.restore = label, size, restore
        self.pos = 0  # where the pickle being read starts: the storage data can only come after it
        self.entries = {}  # key -> (Storage, numel, itemsize)

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 6 and pid[0] == "storage"):
            raise pickle.UnpicklingError(f"unsupported persistent id {pid!r:.200}")
        _, stype, key, location, numel, view_metadata = pid
        if view_metadata is not None:
            raise pickle.UnpicklingError("legacy storage views (view_metadata) are not supported")
        if not isinstance(stype, StorageType):
            raise pickle.UnpicklingError(f"persistent id names {stype!r:.100}, not a storage type")
        if not isinstance(key, str) or not isinstance(location, str):
            raise pickle.UnpicklingError(f"bad storage key or location {key!r:.100}, {location!r:.100}")
        if not (isinstance(numel, int) and not isinstance(numel, bool)) or numel < 0:
            raise pickle.UnpicklingError(f"bad storage size {numel!r:.100}")
        itemsize = stype.dtype.itemsize
        entry = self.entries.get(key)
        if entry is None:
            nbytes = numel * itemsize
            if nbytes > self.size - self.pos:
                _bad(self.label, f"storage {key!r:.100} claims {nbytes} bytes, more than the whole rest of the file")
            st = self.restore(Storage.from_numpy(np.empty(nbytes, dtype=np.uint8)), location)
            entry = self.entries[key] = (st, numel, itemsize)
        elif entry[0].nbytes() < numel * itemsize:
            raise pickle.UnpicklingError(f"storage {key!r:.100} is referenced with more elements than it holds")
        return TypedStorage(entry[0], stype.dtype)

    def fill(self, data, pos, keys, little_endian):
        if not (isinstance(keys, list) and all(isinstance(k, str) for k in keys)):
            _bad(self.label, "the storage key list after the pickle is not a list of strings")
        if set(keys) != set(self.entries) or len(keys) != len(self.entries):
            _bad(self.label, f"the storage key list {keys!r:.200} does not match the storages the pickle uses")
        for key in keys:
            st, numel, itemsize = self.entries[key]
            if pos + 8 > len(data):
                _bad(self.label, f"file truncated before the data of storage {key!r:.100}")
            (count,) = struct.unpack_from("<q", data, pos)
            if count != numel:
                _bad(self.label, f"storage {key!r:.100} holds {count} elements but the pickle says {numel}")
            pos += 8
            nbytes = numel * itemsize
            if pos + nbytes > len(data):
                _bad(self.label, f"file truncated in the data of storage {key!r:.100}")
            raw = np.frombuffer(data, dtype=np.uint8, count=nbytes, offset=pos)
            if itemsize > 1 and little_endian != (sys.byteorder == "little"):
                raw = raw.view(f"u{itemsize}").byteswap().view(np.uint8)
            st.numpy()[:] = raw
            pos += nbytes
        return pos


# --------------------------------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------------------------------


def _bad(label, msg):
    raise ValueError(f"strata.load: {label}: {msg}")


class ZipReader:
    """The records of a torch zip checkpoint, validated before any is read."""

    def __init__(self, fh, label, size, mmap_path=None):
        self.fh, self.label, self.size = fh, label, size
        try:
            self.zf = zipfile.ZipFile(fh)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError, struct.error) as e:
            _bad(label, f"not a valid zip archive ({type(e).__name__}: {e})")
        infos = self.zf.infolist()
        if not infos:
            _bad(label, "the zip archive holds no records")
        prefix = infos[0].filename.split("/", 1)[0]
        self.records = {}
        for info in infos:
            name = info.filename
            if name == prefix + "/" or (name.endswith("/") and info.file_size == 0 and name.startswith(prefix + "/")):
                name = name[:-1]  # a folder entry (archives re-zipped by other tools have them): checked, no data
                if name == prefix:
                    continue
            parts = name.split("/")
            if (
                name.startswith("/") or "\\" in name or "\x00" in name or len(parts) < 2
                or any(p in ("", ".", "..") for p in parts) or parts[0] != prefix
            ):
                _bad(label, f"bad record name {name!r:.200} (records live under one folder, with no '..')")
            if info.is_dir():
                continue
            rel = name[len(prefix) + 1 :]
            if rel in self.records:
                _bad(label, f"record {name!r:.200} appears twice")
            self.records[rel] = info
        self.prefix = prefix
        if "data.pkl" not in self.records:
            _bad(label, f"no '{prefix}/data.pkl' record: not a torch checkpoint")
        order = self._small("byteorder", 16) if "byteorder" in self.records else b"little"
        if order not in (b"little", b"big"):
            _bad(label, f"byteorder record holds {order!r:.50}; expected 'little' or 'big'")
        self.byteorder = order.decode()
        if "version" in self.records:
            v = self._small("version", 32).strip()
            if not v.isdigit():
                _bad(label, f"version record holds {v!r:.50}; expected an integer")
        self._mmap = None
        if mmap_path is not None:
            self._mmap = np.memmap(mmap_path, dtype=np.uint8, mode="c")

    def _data_offset(self, info):
        if info.flag_bits & 0x1:
            _bad(self.label, f"record {info.filename!r:.200} is encrypted")
        h = info.header_offset
        if h < 0 or h + 30 > self.size:
            _bad(self.label, f"record {info.filename!r:.200}: local header at {h} is outside the file")
        self.fh.seek(h)
        head = self.fh.read(30)
        if len(head) != 30 or head[:4] != b"PK\x03\x04":
            _bad(self.label, f"record {info.filename!r:.200}: bad local header at offset {h}")
        n, e = struct.unpack("<HH", head[26:30])
        name = self.fh.read(n)
        if name.decode("utf-8", "replace") != info.filename and name.decode("cp437", "replace") != info.filename:
            _bad(self.label, f"record {info.filename!r:.200}: local header names {name!r:.200}")
        start = h + 30 + n + e
        if start + info.compress_size > self.size:
            _bad(
                self.label,
                f"record {info.filename!r:.200}: {info.compress_size} bytes at offset {start} run past the end of "
                f"the {self.size}-byte file",
            )
        return start

    def _check_sizes(self, info):
        if info.compress_type == zipfile.ZIP_STORED:
            if info.compress_size != info.file_size:
                _bad(self.label, f"record {info.filename!r:.200}: stored size {info.compress_size} != "
                                 f"size {info.file_size}")
        elif info.compress_type == zipfile.ZIP_DEFLATED:
            if info.file_size > _MAX_DEFLATE_RATIO * info.compress_size + 1024:
                _bad(self.label, f"record {info.filename!r:.200}: claims {info.file_size} bytes from "
                                 f"{info.compress_size} compressed bytes")
        else:
            _bad(self.label, f"record {info.filename!r:.200}: unsupported compression method {info.compress_type}")

    def _read_into(self, info, out):
        """Fill the uint8 array ``out`` (len == file_size) with the record's bytes."""
        self._check_sizes(info)
        start = self._data_offset(info)
        if info.compress_type == zipfile.ZIP_STORED:
            self.fh.seek(start)
            view = memoryview(out).cast("B")
            got = 0
            while got < len(view):
                k = self.fh.readinto(view[got:])
                if not k:
                    _bad(self.label, f"record {info.filename!r:.200} is truncated")
                got += k
            return
        try:
            with self.zf.open(info) as r:
                view = memoryview(out).cast("B")
                got = 0
                while got < len(view):
                    chunk = r.read(min(len(view) - got, 1 << 24))
                    if not chunk:
                        break
                    view[got : got + len(chunk)] = chunk
                    got += len(chunk)
                if got != len(view) or r.read(1):
                    _bad(self.label, f"record {info.filename!r:.200} does not hold the {len(view)} bytes it claims")
        except (zipfile.BadZipFile, EOFError, OSError, ValueError) as e:
            if isinstance(e, ValueError) and str(e).startswith("strata.load"):
                raise
            _bad(self.label, f"record {info.filename!r:.200} is corrupt ({type(e).__name__}: {e})")

    def _small(self, name, limit):
        info = self.records[name]
        if info.file_size > limit:
            _bad(self.label, f"record {name!r} is {info.file_size} bytes, more than the {limit} expected")
        out = np.empty(info.file_size, dtype=np.uint8)
        self._read_into(info, out)
        return out.tobytes()

    def pickle_bytes(self):
        return self._small("data.pkl", min(MAX_PICKLE_BYTES, self.size * _MAX_DEFLATE_RATIO + 1024))

    def storage(self, key, nbytes, itemsize):
        """The storage record ``data/<key>``, which must hold exactly ``nbytes`` bytes."""
        info = self.records.get(f"data/{key}")
        if info is None:
            _bad(self.label, f"the pickle references storage {key!r:.100} but there is no record "
                             f"'{self.prefix}/data/{key}'")
        if info.file_size != nbytes:
            _bad(self.label, f"record 'data/{key}' holds {info.file_size} bytes but the pickle says the storage has "
                             f"{nbytes}")
        swap = itemsize > 1 and self.byteorder != sys.byteorder
        if self._mmap is not None and info.compress_type == zipfile.ZIP_STORED and not swap:
            self._check_sizes(info)
            start = self._data_offset(info)
            if nbytes == 0:
                return Storage.from_numpy(np.empty(0, dtype=np.uint8))
            if start % itemsize == 0:  # torch aligns records; a misaligned one is copied instead
                return Storage.from_numpy(self._mmap[start : start + nbytes])
        arr = np.empty(nbytes, dtype=np.uint8)
        if nbytes:
            self._read_into(info, arr)
        if swap:
            arr = arr.view(f"u{itemsize}").byteswap().view(np.uint8)
        return Storage.from_numpy(arr)

    def close(self):
        self.zf.close()


_KEY_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")


def make_persistent_load(reader, restore):
    """BINPERSID resolution: ('storage', StorageType, key, location, numel) -> TypedStorage, each key loaded once."""
    loaded = {}

    def persistent_load(pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise pickle.UnpicklingError(f"unsupported persistent id {pid!r:.200}")
        _, stype, key, location, numel = pid
        if not isinstance(stype, StorageType):
            raise pickle.UnpicklingError(f"persistent id names {stype!r:.100}, not a storage type")
        if not (isinstance(key, str) and key and set(key) <= _KEY_CHARS and key not in (".", "..")):
            raise pickle.UnpicklingError(f"bad storage key {key!r:.100}")
        if not isinstance(location, str):
            raise pickle.UnpicklingError(f"bad storage location {location!r:.100}")
        if not (isinstance(numel, int) and not isinstance(numel, bool)) or numel < 0:
            raise pickle.UnpicklingError(f"bad storage size {numel!r:.100}")
        itemsize = stype.dtype.itemsize
        st = loaded.get(key)
        if st is None:
            st = restore(reader.storage(key, numel * itemsize, itemsize), location)
            loaded[key] = st
        elif st.nbytes() < numel * itemsize:
            raise pickle.UnpicklingError(
                f"storage {key!r:.100} is referenced with {numel} {stype.dtype} elements but holds {st.nbytes()} bytes"
            )
        return TypedStorage(st, stype.dtype)

    return persistent_load


def make_full_unpickler(base):
    """A ``pickle.Unpickler`` subclass (weights_only=False) that maps torch's names to strata's."""

    class FullUnpickler(base):
        def find_class(self, module, name):
            key = f"{module}.{name}"
            if key in TORCH_GLOBALS:
                return TORCH_GLOBALS[key]
            msg = unsupported_torch_global(module, name)
            if msg is not None:
                raise pickle.UnpicklingError(msg)
            if module == "torch" or module.startswith("torch."):
                # torch.nn.modules.linear.Linear -> strata.nn.modules.linear.Linear, and so on.
                smodule = "strata" + module[len("torch") :]
                try:
                    return super().find_class(smodule, name)
                except (ImportError, AttributeError):
                    raise pickle.UnpicklingError(
                        f"the checkpoint needs {module}.{name}, which strata does not have (looked for "
                        f"{smodule}.{name})"
                    ) from None
            return super().find_class(module, name)

    return FullUnpickler
