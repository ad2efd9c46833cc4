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
