"""Reading checkpoints written by torch.distributed.checkpoint.save (torch's FileSystemWriter format).

torch's `.metadata` is a pickle of its Metadata dataclasses. It is read with Strata's restricted unpickler
(strata._weights_only: no code from the file runs), with every global it may name mapped here to a small stand-in:
the metadata classes to plain records, dtypes to Strata's, `torch.Size` to a tuple, layouts, memory formats and paths
to strings and ints. Each item in a `__<rank>_<n>.distcp` file is a torch.save archive (a tensor, or a pickled value
for non-tensors) at the offset and length the metadata gives; they are read with strata.load(weights_only=True).
A tensor saved in several chunks (sharded saves) is assembled from them.

What is refused: items with transform descriptors (torch's compression/extension hooks) and any global not listed
below (UnpicklingError naming it).
"""

import io
import os

import strata
from strata._weights_only import UnpicklingError, WeightsUnpickler

TORCH_FORMAT = "torch-dcp"


class _Record:
    """A stand-in for one of torch's metadata dataclasses: BUILD fills its attributes."""

    def __setstate__(self, state):
        if isinstance(state, tuple) and len(state) == 2 and (state[0] is None or isinstance(state[0], dict)):
            state = {**(state[0] or {}), **(state[1] or {})}  # (dict, slots) form
        if not isinstance(state, dict):
            raise UnpicklingError(f"{type(self).__name__}: state must be a dict, got {type(state).__name__}")
        self.__dict__.update(state)


class TensorProperties(_Record):
    def __setstate__(self, state):
        # torch pickles it as (dtype, layout, requires_grad, memory_format, pin_memory)
        if isinstance(state, tuple):
            if len(state) != 5:
                raise UnpicklingError(f"TensorProperties: expected 5 fields, got {len(state)}")
            state = dict(zip(("dtype", "layout", "requires_grad", "memory_format", "pin_memory"), state))
        super().__setstate__(state)


_CLASSES = {
    ("torch.distributed.checkpoint.metadata", n): type(n, (_Record,), {})
    for n in ("Metadata", "TensorStorageMetadata", "ChunkStorageMetadata", "BytesStorageMetadata", "MetadataIndex",
              "StorageMeta")
}
_CLASSES[("torch.distributed.checkpoint.metadata", "TensorProperties")] = TensorProperties
_CLASSES[("torch.distributed.checkpoint.filesystem", "_StorageInfo")] = type("_StorageInfo", (_Record,), {})
_RECORD_TYPES = tuple(_CLASSES.values())


def _size(*args):
    return tuple(int(x) for x in (args[0] if args else ()))


def _layout(name):
    return str(name)


def _memory_format(code):
    return int(code)


def _path(*parts):
    return os.path.join(*[str(p) for p in parts]) if parts else ""


def _find_global(module, name):
    cls = _CLASSES.get((module, name))
    if cls is not None:
        return cls
    if module == "torch" and name == "Size":
        return _size
    if module == "torch":
        dt = getattr(strata, name, None)
        if isinstance(dt, strata.dtype):
            return dt
    if (module, name) == ("torch.serialization", "_get_layout"):
        return _layout
    if (module, name) == ("torch.distributed.checkpoint.metadata", "_MEM_FORMAT_ENCODING"):
        return _memory_format
    if module == "pathlib" and name in ("PosixPath", "WindowsPath", "PurePosixPath", "PureWindowsPath", "Path"):
        return _path
    if (module, name) == ("collections", "OrderedDict"):
        from collections import OrderedDict
        return OrderedDict
    raise UnpicklingError(f"checkpoint: torch's metadata names {module}.{name}, which is not read "
                          "(only torch.distributed.checkpoint's metadata classes, dtypes, Size, layouts, memory "
                          "formats and paths are)")


def _no_persistent(pid):
    raise UnpicklingError("checkpoint: persistent ids in torch's .metadata are not read")


def is_torch_metadata(head):
    return head[:1] == b"\x80"  # a pickle (protocol 2+); Strata's own metadata is JSON


def read_metadata(data, path):
    """Strata's metadata dict ({"format": TORCH_FORMAT, "entries": {key: entry}}) for torch's pickled `data`."""
    md = WeightsUnpickler(data, _find_global, _no_persistent, lambda obj: isinstance(obj, _RECORD_TYPES)).load()
    if type(md).__name__ != "Metadata" or not isinstance(md, _Record):
        raise RuntimeError(f"checkpoint: {path} is a pickle but not torch's checkpoint Metadata")
    storage = {}
    for idx, info in getattr(md, "storage_data", {}).items():
        if getattr(info, "transform_descriptors", None):
            raise NotImplementedError(f"checkpoint: {path}: item {idx.fqn!r} has transform descriptors "
                                      f"{info.transform_descriptors!r} (compression or extensions), which are not read")
        off = getattr(idx, "offset", None)  # fields at their default may be left out of the pickle
        off = None if off is None else tuple(off)
        storage[(idx.fqn, off)] = dict(file=str(info.relative_path), offset=int(info.offset), nbytes=int(info.length))
    entries = {}
    for fqn, m in md.state_dict_metadata.items():
        kind = type(m).__name__
        if kind == "TensorStorageMetadata":
            chunks = []
            for c in m.chunks:
                where = storage.get((fqn, tuple(c.offsets)))
                if where is None:
                    raise RuntimeError(f"checkpoint: {path}: no storage for chunk {tuple(c.offsets)} of {fqn!r}")
                chunks.append(dict(where, offsets=list(c.offsets), sizes=list(c.sizes)))
            dt = m.properties.dtype
            if not isinstance(dt, strata.dtype):
                raise RuntimeError(f"checkpoint: {path}: {fqn!r} has dtype {dt!r}, which Strata lacks")
            entries[fqn] = dict(kind="torch-tensor", dtype=str(dt).replace("strata.", ""), shape=list(m.size),
                                chunks=chunks)
        elif kind == "BytesStorageMetadata":
            where = storage.get((fqn, None))
            if where is None:
                raise RuntimeError(f"checkpoint: {path}: no storage for {fqn!r}")
            entries[fqn] = dict(where, kind="torch-bytes")
        else:
            raise RuntimeError(f"checkpoint: {path}: {fqn!r} has metadata of kind {kind}, which is not read")
    return dict(format=TORCH_FORMAT, version=str(getattr(md, "version", "")), entries=entries)


def _item(directory, where):
    with open(os.path.join(directory, where["file"]), "rb") as f:
        f.seek(where["offset"])
        b = f.read(where["nbytes"])
    if len(b) != where["nbytes"]:
        raise RuntimeError(f"checkpoint: {where['file']} in {directory!r} is truncated")
    return strata.load(io.BytesIO(b), weights_only=True)


def read_entry(directory, entry):
    if entry["kind"] == "torch-bytes":
        return _item(directory, entry)
    shape = tuple(entry["shape"])
    chunks = entry["chunks"]
    if len(chunks) == 1 and tuple(chunks[0]["sizes"]) == shape:
        t = _item(directory, chunks[0])
        return t.reshape(shape)
    from .filesystem import _dtype
    full = strata.empty(shape, dtype=_dtype(entry["dtype"]))
    for c in chunks:
        t = _item(directory, c)
        view = full
        for d, (o, n) in enumerate(zip(c["offsets"], c["sizes"])):
            view = view.narrow(d, o, n)
        view.copy_(t.reshape(tuple(c["sizes"])))
    return full


# ---- writing torch's format -------------------------------------------------------------------------------------
# The metadata pickle is written opcode by opcode (torch need not be installed to write it): the classes are named by
# module and name, as torch's own pickle of its Metadata names them, and torch reads it with pickle.load.

_MD = "torch.distributed.checkpoint.metadata"


class _Global:
    def __init__(self, module, name):
        self.module, self.name = module, name


class _Obj:
    """NEWOBJ of a global with no arguments, then BUILD with `state` (None: no BUILD)."""

    def __init__(self, cls, state=None):
        self.cls, self.state = cls, state


class _Call:
    """REDUCE: global(*args)."""

    def __init__(self, func, *args):
        self.func, self.args = func, args


def _size_obj(dims):
    return _Call(_Global("torch", "Size"), tuple(int(d) for d in dims))


class _PickleWriter:
    def __init__(self):
        self.out = bytearray(b"\x80\x02")  # PROTO 2

    def dump(self, obj):
        self.w(obj)
        self.out += b"."
        return bytes(self.out)

    def w(self, o):
        out = self.out
        if o is None:
            out += b"N"
        elif o is True:
            out += b"\x88"
        elif o is False:
            out += b"\x89"
        elif isinstance(o, int):
            n = (o.bit_length() + 8) // 8
            out += b"\x8a" + bytes([n]) + o.to_bytes(n, "little", signed=True)  # LONG1
        elif isinstance(o, float):
            import struct
            out += b"G" + struct.pack(">d", o)
        elif isinstance(o, str):
            b = o.encode("utf-8")
            out += b"X" + len(b).to_bytes(4, "little") + b
        elif isinstance(o, tuple):
            out += b"("
            for x in o:
                self.w(x)
            out += b"t"
        elif isinstance(o, list):
            out += b"]("
            for x in o:
                self.w(x)
            out += b"e"
        elif isinstance(o, dict):
            out += b"}("
            for k, v in o.items():
                self.w(k)
                self.w(v)
            out += b"u"
        elif isinstance(o, _Global):
            out += b"c" + o.module.encode() + b"\n" + o.name.encode() + b"\n"
        elif isinstance(o, _Obj):
            self.w(o.cls)
            out += b")\x81"  # EMPTY_TUPLE NEWOBJ
            if o.state is not None:
                self.w(o.state)
                out += b"b"  # BUILD
        elif isinstance(o, _Call):
            self.w(o.func)
            self.w(tuple(o.args))
            out += b"R"
        else:
            raise TypeError(f"checkpoint: cannot write {type(o).__name__} into torch's metadata")


def item_bytes(value):
    """One item of a torch-format data file: a torch.save archive (strata.save writes torch's format)."""
    buf = io.BytesIO()
    strata.save(value.detach().contiguous() if isinstance(value, strata.Tensor) else value, buf)
    return buf.getvalue()


def entry_for(key, value, file, offset, nbytes):
    if isinstance(value, strata.Tensor):
        shape = list(value.shape)
        return dict(kind="torch-tensor", dtype=str(value.dtype).replace("strata.", ""), shape=shape,
                    chunks=[dict(file=file, offset=offset, nbytes=nbytes, offsets=[0] * len(shape), sizes=shape)])
    return dict(kind="torch-bytes", file=file, offset=offset, nbytes=nbytes)


def metadata_bytes(entries):
    """torch's pickled Metadata for Strata's entries (entry_for)."""
    sdm, planner, storage = {}, {}, {}
    for key, e in entries.items():
        planner[key] = tuple(int(p) if p.isdigit() else p for p in key.split("."))
        if e["kind"] == "torch-tensor":
            props = _Obj(_Global(_MD, "TensorProperties"),
                         (_Global("torch", e["dtype"]), _Call(_Global("torch.serialization", "_get_layout"),
                                                              "torch.strided"),
                          False, _Call(_Global(_MD, "_MEM_FORMAT_ENCODING"), 0), False))
            chunks = [_Obj(_Global(_MD, "ChunkStorageMetadata"),
                           {"offsets": _size_obj(c["offsets"]), "sizes": _size_obj(c["sizes"])}) for c in e["chunks"]]
            sdm[key] = _Obj(_Global(_MD, "TensorStorageMetadata"),
                            {"properties": props, "size": _size_obj(e["shape"]), "chunks": chunks})
            for i, c in enumerate(e["chunks"]):
                idx = _Obj(_Global(_MD, "MetadataIndex"), {"fqn": key, "offset": _size_obj(c["offsets"]), "index": i})
                storage[idx] = c
        else:
            sdm[key] = _Obj(_Global(_MD, "BytesStorageMetadata"))
            storage[_Obj(_Global(_MD, "MetadataIndex"), {"fqn": key, "index": None})] = e
    storage = {idx: _Obj(_Global("torch.distributed.checkpoint.filesystem", "_StorageInfo"),
                         {"relative_path": c["file"], "offset": int(c["offset"]), "length": int(c["nbytes"]),
                          "transform_descriptors": None})
               for idx, c in storage.items()}
    md = _Obj(_Global(_MD, "Metadata"), {"state_dict_metadata": sdm, "planner_data": planner,
                                         "storage_data": storage, "storage_meta": None, "version": "1.0.0"})
    return _PickleWriter().dump(md)
