"""The on-disk format of strata.distributed.checkpoint (ours, not torch's; see docs/DISTRIBUTED.md).

A checkpoint is a directory holding
* `.metadata`: JSON, {"format": "strata-dcp", "version": 1, "world_size": N, "entries": {key: entry}} where a
  key is the dotted path of a leaf of the (nested) state dict and an entry is
  {"kind": "tensor", "file": F, "offset": O, "nbytes": B, "dtype": "float32", "shape": [..]} or
  {"kind": "object", "file": F, "offset": O, "nbytes": B} (a pickle);
* `__<rank>_0.distcp`: one data file per rank that wrote something, the raw bytes (native byte order, row-major)
  of its tensors and the pickles of its other values, back to back at the entries' offsets.
"""

import json
import os
import pickle

import numpy as np

import strata

FORMAT = "strata-dcp"
VERSION = 1
METADATA = ".metadata"


def _dtype_name(dt):
    return str(dt).replace("strata.", "")


def _dtype(name):
    dt = getattr(strata, name, None)
    if not isinstance(dt, strata.dtype):
        raise RuntimeError(f"checkpoint: unknown dtype {name!r} in the metadata")
    return dt


def tensor_bytes(t):
    t = t.detach().contiguous()
    if t.numel() == 0:
        return b""
    return t.view(-1).view(strata.uint8).numpy().tobytes()


def tensor_from_bytes(buf, dtype, shape):
    dt = _dtype(dtype)
    if len(buf) == 0:
        return strata.empty(shape, dtype=dt)
    u = strata.tensor(np.frombuffer(buf, dtype=np.uint8).copy())
    return u.view(dt).reshape(shape)


class FileSystemWriter:
    """Writes a checkpoint into the directory `path` (created if needed)."""

    def __init__(self, path, single_file_per_rank=True, sync_files=True, thread_count=1,
                 per_thread_copy_ahead=10_000_000,
                 cache_staged_state_dict=False, overwrite=True, torch_format=False, **kwargs):
        self.path = os.fspath(path)
        # torch_format=True: torch's own format (_torch_format.py), which torch.distributed.checkpoint.load reads
        self.torch_format = torch_format
        self.sync_files = sync_files
        self.overwrite = overwrite

    def _prepare(self):
        os.makedirs(self.path, exist_ok=True)
        if not self.overwrite and os.path.exists(os.path.join(self.path, METADATA)):
            raise RuntimeError(f"checkpoint: {self.path} already holds a checkpoint and overwrite=False")

    def _write_data(self, rank, items):
        """items: [(key, tensor-or-object)]; returns {key: entry}."""
        name = f"__{rank}_0.distcp"
        entries = {}
        tmp = os.path.join(self.path, name + ".tmp")
        with open(tmp, "wb") as f:
            for key, v in items:
                off = f.tell()
                if self.torch_format:
                    from . import _torch_format
                    b = _torch_format.item_bytes(v)
                    entries[key] = _torch_format.entry_for(key, v, name, off, len(b))
                elif isinstance(v, strata.Tensor):
                    b = tensor_bytes(v)
                    entries[key] = dict(kind="tensor", file=name, offset=off, nbytes=len(b), dtype=_dtype_name(v.dtype),
                                        shape=list(v.shape))
                else:
                    b = pickle.dumps(v)
                    entries[key] = dict(kind="object", file=name, offset=off, nbytes=len(b))
                f.write(b)
            if self.sync_files:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, os.path.join(self.path, name))
        return entries

    def _write_metadata(self, world_size, entries):
        tmp = os.path.join(self.path, METADATA + ".tmp")
        if self.torch_format:
            from . import _torch_format
            data = _torch_format.metadata_bytes(entries)
        else:
            data = json.dumps(dict(format=FORMAT, version=VERSION, world_size=world_size, entries=entries)).encode()
        with open(tmp, "wb") as f:
            f.write(data)
            if self.sync_files:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, os.path.join(self.path, METADATA))


class FileSystemReader:
    """Reads a checkpoint written by FileSystemWriter from the directory `path`."""

    def __init__(self, path, **kwargs):
        self.path = os.fspath(path)
        self._meta = None

    def read_metadata(self):
        """The checkpoint's contents as torch's metadata classes (checkpoint.metadata.Metadata)."""
        from .metadata import from_entries
        return from_entries(self._raw_metadata(), checkpoint_id=self.path)

    def _raw_metadata(self):
        if self._meta is None:
            p = os.path.join(self.path, METADATA)
            if not os.path.exists(p):
                raise FileNotFoundError(f"checkpoint: no {METADATA} in {self.path!r} (not a checkpoint directory, or "
                                        "its save did not finish)")
            with open(p, "rb") as f:
                data = f.read()
            from . import _torch_format
            if _torch_format.is_torch_metadata(data):  # written by torch.distributed.checkpoint.save
                self._meta = _torch_format.read_metadata(data, p)
                return self._meta
            m = json.loads(data)
            if m.get("format") != FORMAT:
                raise RuntimeError(f"checkpoint: {p} is neither a Strata checkpoint (format {m.get('format')!r}) "
                                   "nor torch's")
            if m.get("version") != VERSION:
                raise RuntimeError(f"checkpoint: {p} has format version {m.get('version')}, this Strata reads "
                                   f"{VERSION}")
            self._meta = m
        return self._meta

    def _read(self, entry):
        if entry["kind"] in ("torch-tensor", "torch-bytes"):
            from . import _torch_format
            return _torch_format.read_entry(self.path, entry)
        with open(os.path.join(self.path, entry["file"]), "rb") as f:
            f.seek(entry["offset"])
            b = f.read(entry["nbytes"])
        if len(b) != entry["nbytes"]:
            raise RuntimeError(f"checkpoint: {entry['file']} in {self.path!r} is truncated")
        if entry["kind"] == "tensor":
            return tensor_from_bytes(b, entry["dtype"], entry["shape"])
        return pickle.loads(b)
