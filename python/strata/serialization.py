"""``strata.save`` / ``strata.load``: torch's checkpoint formats and safetensors.

``save`` writes torch's zip format by default (``_torch_format``: a pickle naming torch's rebuild functions, plus one
raw record per storage), so ``torch.load`` reads strata's files and ``strata.load`` reads torch's, shared storage
included; ``_use_new_zipfile_serialization=False`` writes torch's legacy format. ``load`` recognises the format from
the first bytes. Torch archives are unpickled by default with the restricted unpickler of ``_weights_only`` (only
data, tensors and the allow-list of :func:`add_safe_globals`); ``weights_only=False`` opts into full pickle.

The safetensors format (``format="safetensors"``, a ``.safetensors`` path, or ``metadata=``) is written and read here
without the ``safetensors`` package:

* 8 bytes: little-endian u64 ``N``, the header length;
* ``N`` bytes: a UTF-8 JSON object
  ``{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}``,
  padded with spaces to a multiple of 8 so the data starts aligned;
* the byte buffer: every tensor's contiguous little-endian bytes, back to back, with no holes.

A ``dict`` of ``str -> Tensor`` (a model ``state_dict``) is stored exactly as the ``safetensors`` library stores it, so
either side can read the other's files. Anything else (a bare tensor, an optimizer ``state_dict`` with int keys, tuples,
floats, ``None``...) is stored the same way for its tensors, plus a JSON description of the surrounding structure under
the ``__metadata__`` key ``"strata.structure"``, which ``load`` uses to rebuild the same object. Reading a safetensors
file never unpickles or evaluates anything, validates every header field before touching data, and never allocates
more than the file actually holds.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import pickle
import struct
import sys
import tempfile
from collections import OrderedDict
from collections.abc import Mapping

import numpy as np

from . import _C
from . import _torch_format
from ._tensor_pickle import Storage, storage_of
from ._weights_only import WeightsUnpickler

__all__ = [
    "save", "load", "load_metadata", "add_safe_globals", "get_safe_globals", "clear_safe_globals", "safe_globals",
]

SAFETENSORS_SUFFIXES = (".safetensors",)

# The reference library refuses headers above 100 MB: a header that big is an attack, not a checkpoint.
MAX_HEADER_SIZE = 100_000_000
STRUCTURE_KEY = "strata.structure"
_STRUCTURE_VERSION = 1
_CHUNK = 1 << 24

# safetensors dtype name -> (strata dtype, item size). The reference library's Dtype enum orders these
# BOOL < U8 < I8 < I16 < F16 < BF16 < I32 < F32 < F64 < I64; the writer lays tensors out by that rank, descending, then
# by name, which is what makes our files byte-identical to the library's.
_DTYPES = {
    "BOOL": (_C.bool, 1, 0),
    "U8": (_C.uint8, 1, 1),
    "I8": (_C.int8, 1, 2),
    "I16": (_C.int16, 2, 3),
    "F16": (_C.float16, 2, 4),
    "BF16": (_C.bfloat16, 2, 5),
    "I32": (_C.int32, 4, 6),
    "F32": (_C.float32, 4, 7),
    "F64": (_C.float64, 8, 8),
    "I64": (_C.int64, 8, 9),
    # The reference orders ... I16 < U16 < F16 ... I32 < U32 < F32 < C64 < F64 < I64 < U64.
    "U16": (_C.uint16, 2, 3.5),
    "U32": (_C.uint32, 4, 6.5),
    "C64": (_C.complex64, 8, 7.5),
    "U64": (_C.uint64, 8, 10),
    # The reference orders U8 < I8 < F8_E5M2 < F8_E4M3 < F8_E8M0 < I16.
    "F8_E5M2": (_C.float8_e5m2, 1, 2.3),
    "F8_E4M3": (_C.float8_e4m3fn, 1, 2.4),
    "F8_E8M0": (_C.float8_e8m0fnu, 1, 2.5),
}
# Formats the reference knows but strata has no dtype for: named in the error instead of "unknown".
# (safetensors has no complex128.)
_FOREIGN_DTYPES = {"F4", "F6_E2M3", "F6_E3M2"}
_NAME_OF = {str(info[0]): name for name, info in _DTYPES.items()}

_INT64_MAX = (1 << 63) - 1
# No real tensor has this many dimensions; the cap stops a 100 MB header of "[0,0,0,...]" from building a tensor with
# tens of millions of dimensions (gigabytes of sizes and strides for zero bytes of data).
MAX_NDIM = 1024


def _st_name(dtype):
    name = _NAME_OF.get(str(dtype))
    if name is None:
        raise TypeError(f"strata.save: tensors of dtype {dtype} cannot be stored in safetensors")
    return name


# --------------------------------------------------------------------------------------------------------------------
# Saving
# --------------------------------------------------------------------------------------------------------------------


def _is_tensor(x):
    return isinstance(x, _C.Tensor)


def _is_plain_state_dict(obj):
    return (
        isinstance(obj, Mapping)
        and all(isinstance(k, str) and _is_tensor(v) for k, v in obj.items())
        and "__metadata__" not in obj
    )


class _Flattener:
    """Turns nested state into tagged JSON, collecting its tensors under dotted names.

    JSON objects appear in the encoding only as one-key tags, so nothing a user stores can be mistaken for one:
    ``{"$tensor": name}``, ``{"$tuple": [...]}``, ``{"$dict": [[key, value], ...]}`` (keys keep their type and order),
    ``{"$odict": [...]}`` (an OrderedDict), ``{"$float": "nan" | "inf" | "-inf"}`` (JSON has no non-finite numbers).
    """

    def __init__(self):
        self.tensors = {}  # name -> tensor, in discovery order
        self._name_of_id = {}  # id(tensor) -> name: the same tensor object stored twice is stored once
        self._active = set()  # ids of containers being encoded, to refuse cycles

    def _name_for(self, path):
        base = ".".join(path) if path else "tensor"
        name, n = base, 0
        while name in self.tensors or name == "__metadata__":
            n += 1
            name = f"{base}#{n}"
        return name

    def encode(self, obj, path):
        if obj is None or isinstance(obj, (bool, str)):
            return obj
        if isinstance(obj, int):
            return int(obj)
        if isinstance(obj, float):
            if math.isfinite(obj):
                return float(obj)
            return {"$float": "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")}
        if _is_tensor(obj):
            name = self._name_of_id.get(id(obj))
            if name is None:
                name = self._name_for(path)
                self.tensors[name] = obj
                self._name_of_id[id(obj)] = name
            return {"$tensor": name}
        if isinstance(obj, (list, tuple, Mapping)):
            if id(obj) in self._active:
                raise ValueError(f"strata.save: the object contains a reference cycle at '{'.'.join(path)}'")
            self._active.add(id(obj))
            try:
                if isinstance(obj, Mapping):
                    items = []
                    for k, v in obj.items():
                        if not (k is None or isinstance(k, (bool, int, float, str))):
                            raise TypeError(
                                f"strata.save: dict key {k!r} at '{'.'.join(path)}' has type {type(k).__name__}; "
                                "only str, int, float, bool and None keys can be stored"
                            )
                        items.append([self.encode(k, path), self.encode(v, path + [str(k)])])
                    return {"$odict" if isinstance(obj, OrderedDict) else "$dict": items}
                enc = [self.encode(v, path + [str(i)]) for i, v in enumerate(obj)]
                return enc if isinstance(obj, list) else {"$tuple": enc}
            finally:
                self._active.discard(id(obj))
        raise TypeError(
            f"strata.save: cannot store a value of type {type(obj).__name__} at '{'.'.join(path) or '<root>'}'; "
            "checkpoints hold tensors, dicts, lists, tuples, str, int, float, bool and None (no pickled objects)"
        )


def _tensor_bytes(t, name):
    """The tensor's values as a flat little-endian uint8 NumPy array (a view when the tensor is already contiguous)."""
    if t.is_meta:
        raise ValueError(f"strata.save: tensor '{name}' is on the meta device and has no data to save")
    if t.device.type != "cpu":
        t = t.cpu()
    if hasattr(t, "detach"):
        t = t.detach()
    if t.numel() == 0:
        return np.empty(0, dtype=np.uint8)
    # Going through uint8 at the strata level moves the raw bits for every dtype, bfloat16 included (NumPy has no
    # bfloat16); flattening first sidesteps NumPy's 64-dimension limit and the 0-d restriction of view(dtype).
    flat = t.contiguous().reshape(-1)
    itemsize = flat.element_size()
    raw = flat.view(_C.uint8).numpy()
    if sys.byteorder != "little" and itemsize > 1:
        raw = raw.view(f"u{itemsize}").byteswap().view(np.uint8)
    return raw


def _build(obj, metadata):
    if metadata is not None:
        if not isinstance(metadata, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
        ):
            raise TypeError("strata.save: metadata must be a dict of str -> str")
        if STRUCTURE_KEY in metadata:
            raise ValueError(f"strata.save: the metadata key '{STRUCTURE_KEY}' is reserved")
    meta = dict(metadata) if metadata else {}
    if _is_plain_state_dict(obj):
        tensors = dict(obj)
    else:
        flat = _Flattener()
        root = flat.encode(obj, [])
        tensors = flat.tensors
        meta[STRUCTURE_KEY] = json.dumps(
            {"version": _STRUCTURE_VERSION, "root": root}, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )

    entries = []
    for name, t in tensors.items():
        st = _st_name(t.dtype)
        if t.is_meta:  # refused before the destination file is opened (and truncated)
            raise ValueError(f"strata.save: tensor '{name}' is on the meta device and has no data to save")
        entries.append((name, st, [int(s) for s in t.shape], t))
    entries.sort(key=lambda e: (-_DTYPES[e[1]][2], e[0]))

    header = {}
    if meta:
        header["__metadata__"] = {k: meta[k] for k in sorted(meta)}
    layout = []
    offset = 0
    for name, st, shape, t in entries:
        nbytes = math.prod(shape) * _DTYPES[st][1]
        header[name] = {"dtype": st, "shape": shape, "data_offsets": [offset, offset + nbytes]}
        layout.append((name, t, nbytes))
        offset += nbytes
    try:
        text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(
            f"strata.save: tensor names and metadata must be valid Unicode (no lone surrogates): {e}"
        ) from None
    text += b" " * (-len(text) % 8)
    return text, layout


def _write_all(f, header, layout):
    f.write(struct.pack("<Q", len(header)))
    f.write(header)
    for name, t, nbytes in layout:
        raw = _tensor_bytes(t, name)
        if raw.nbytes != nbytes:  # a tensor resized under us between layout and write
            raise RuntimeError(f"strata.save: tensor '{name}' changed size while being saved")
        if nbytes:
            f.write(memoryview(raw))


def _format_for(f, format, metadata):
    if format is not None:
        if format not in ("torch", "safetensors"):
            raise ValueError(f"strata.save: format must be 'torch' or 'safetensors', got {format!r}")
        if format == "torch" and metadata is not None:
            raise ValueError("strata.save: metadata is written only in the safetensors format (format='safetensors')")
        return format
    if metadata is not None:
        return "safetensors"
    if isinstance(f, (str, os.PathLike)) and os.fspath(f).endswith(SAFETENSORS_SUFFIXES):
        return "safetensors"
    return "torch"


def _atomic_write(path, write):
    """Run ``write(fh)`` on a temporary file beside ``path``, fsync it, then move it over ``path`` and fsync the
    directory: a failed or killed save leaves the old file (or no file) in place, never a truncated one."""
    path = os.fspath(path)
    target = os.path.realpath(path)  # a symlink keeps pointing at the checkpoint, as with a plain open()
    directory = os.path.dirname(target) or "."
    if os.path.isdir(target):
        raise IsADirectoryError(f"strata.save: {path} is a directory")
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(target) + ".", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            mode = os.stat(target).st_mode & 0o7777
        except FileNotFoundError:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    # The rename itself reaches the disk only with the directory's entry: without this a crash right after
    # save() returned could still bring back the previous checkpoint (or none).
    try:
        dfd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


def save(
    obj,
    f,
    pickle_module=None,
    pickle_protocol=None,
    _use_new_zipfile_serialization=True,
    _disable_byteorder_record=False,
    *,
    metadata=None,
    format=None,
):
    """Save ``obj`` to ``f`` (a path or a writable binary file), in torch's zip format by default.

    The default format is torch's own: ``torch.load`` reads the file (with ``weights_only=True`` for tensors,
    containers and state dicts), tensors that share storage are stored once and still share it after loading, and
    any picklable object (a whole Module, NumPy arrays) can be saved. ``pickle_protocol`` defaults to 2, as torch's.

    The safetensors format (no pickle at all) is written for ``format="safetensors"``, for a path ending in
    ``.safetensors``, or when ``metadata`` (str -> str, stored in the header's ``__metadata__``) is given. It holds
    tensors, dicts, lists, tuples, str, int, float, bool and None; views are stored as their values.

    Saving to a path writes a temporary file in the same directory and renames it over ``path`` only once complete.
    """
    fmt = _format_for(f, format, metadata)
    if pickle_module is not None and pickle_module is not pickle:
        raise TypeError("strata.save: only the standard pickle module is supported as pickle_module")
    if fmt == "torch":
        protocol = _torch_format.DEFAULT_PROTOCOL if pickle_protocol is None else pickle_protocol
        if not (isinstance(protocol, int) and 2 <= protocol <= pickle.HIGHEST_PROTOCOL):
            raise ValueError(f"strata.save: pickle_protocol must be an int from 2 to {pickle.HIGHEST_PROTOCOL}, "
                             f"got {pickle_protocol!r}")
        # Pickle first, in memory: an unpicklable object fails before any file is touched.
        legacy = not _use_new_zipfile_serialization
        data = _torch_format.pickle_object(obj, protocol, legacy=legacy)

        def write(fh):
            if legacy:  # torch's pre-1.6 format, which torch.load still reads
                _torch_format.write_legacy(data, fh, protocol)
            else:
                _torch_format.write_archive(data, fh)
    else:
        if pickle_module is not None or pickle_protocol is not None:
            raise TypeError("strata.save: pickle_module and pickle_protocol do not apply to the safetensors format")
        header, layout = _build(obj, metadata)

        def write(fh):
            _write_all(fh, header, layout)

    if isinstance(f, (str, os.PathLike)):
        _atomic_write(f, write)
    elif hasattr(f, "write"):
        if isinstance(f, io.TextIOBase):
            raise TypeError("strata.save: f must be opened in binary mode ('wb')")
        write(f)
    else:
        raise TypeError(f"strata.save: f must be a path or a writable binary file, got {type(f).__name__}")


# --------------------------------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------------------------------


class _Source:
    """A readable byte stream of known remaining length, with every read checked for truncation."""

    def __init__(self, f, label, size):
        self.f, self.label, self.size, self.pos = f, label, size, 0

    def fail(self, msg):
        raise ValueError(f"strata.load: {self.label}: {msg}")

    def read(self, n, what):
        parts, got = [], 0
        while got < n:
            chunk = self.f.read(min(n - got, _CHUNK))
            if not chunk:
                self.fail(f"file truncated: expected {n} bytes of {what} at offset {self.pos}, got {got}")
            if not isinstance(chunk, (bytes, bytearray)):
                raise TypeError(f"strata.load: {self.label}: f must be opened in binary mode ('rb')")
            parts.append(chunk)
            got += len(chunk)
        self.pos += n
        return b"".join(parts)

    def readinto(self, buf, what):
        view = memoryview(buf).cast("B")
        got = 0
        readinto = getattr(self.f, "readinto", None)
        while got < len(view):
            if readinto is not None:
                k = readinto(view[got : got + _CHUNK])
            else:
                chunk = self.f.read(min(len(view) - got, _CHUNK))
                k = len(chunk) if chunk else 0
                view[got : got + k] = chunk
            if not k:
                self.fail(f"file truncated: expected {len(view)} bytes of {what} at offset {self.pos}, got {got}")
            got += k
        self.pos += len(view)


def _remaining_size(f):
    try:
        pos = f.tell()
        end = f.seek(0, io.SEEK_END)
        f.seek(pos)
        return end - pos
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return None


def _reject_constant(token):
    raise ValueError(f"non-standard JSON constant {token}")


def _unique_object(pairs):
    obj = {}
    for k, v in pairs:
        if k in obj:
            raise ValueError(f"duplicate key {k!r}")
        obj[k] = v
    return obj


def _parse_json(data, label, what):
    try:
        return json.loads(data, object_pairs_hook=_unique_object, parse_constant=_reject_constant)
    except RecursionError:
        raise ValueError(f"strata.load: {label}: {what} is nested too deeply") from None
    except ValueError as e:  # JSONDecodeError, duplicate keys, NaN/Infinity, int digit limits
        raise ValueError(f"strata.load: {label}: {what} is not valid JSON: {e}") from None


def _is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def _parse_header(src, header_bytes):
    label = src.label
    try:
        text = header_bytes.decode("utf-8")
    except UnicodeDecodeError as e:
        src.fail(f"header is not valid UTF-8: {e}")
    header = _parse_json(text, label, "header")
    if not isinstance(header, dict):
        src.fail(f"header must be a JSON object, got {type(header).__name__}")

    metadata = header.pop("__metadata__", None)
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        src.fail("__metadata__ must be an object mapping str to str")

    entries = []
    for name, info in header.items():
        if not isinstance(info, dict):
            src.fail(f"entry '{name}' must be an object, got {type(info).__name__}")
        for field in ("dtype", "shape", "data_offsets"):
            if field not in info:
                src.fail(f"entry '{name}' is missing the field '{field}'")
        st, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
        if not isinstance(st, str):
            src.fail(f"entry '{name}': dtype must be a string, got {st!r}")
        if st not in _DTYPES:
            if st in _FOREIGN_DTYPES:
                src.fail(f"entry '{name}': dtype {st} is valid safetensors but has no strata dtype")
            src.fail(f"entry '{name}': unknown dtype {st!r}")
        if not isinstance(shape, list) or not all(_is_int(d) for d in shape):
            src.fail(f"entry '{name}': shape must be a list of integers, got {shape!r:.200}")
        if len(shape) > MAX_NDIM:
            src.fail(f"entry '{name}': shape has {len(shape)} dimensions, more than the limit of {MAX_NDIM}")
        if any(d < 0 for d in shape):
            src.fail(f"entry '{name}': shape {shape} has a negative dimension")
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_int(o) for o in offsets)):
            src.fail(f"entry '{name}': data_offsets must be a list of two integers, got {offsets!r:.200}")
        begin, end = offsets
        if begin < 0 or end < 0:
            src.fail(f"entry '{name}': negative data_offsets {offsets}")
        if end < begin:
            src.fail(f"entry '{name}': data_offsets {offsets} end before they begin")
        itemsize = _DTYPES[st][1]
        # Bound the extent ignoring zero dims too: a [0, 2**62] tensor holds no bytes but its strides still overflow.
        extent = itemsize
        for d in shape:
            extent *= max(d, 1)
            if extent > _INT64_MAX:
                src.fail(f"entry '{name}': shape {shape} with dtype {st} overflows 64-bit sizes")
        nbytes = math.prod(shape) * itemsize
        if nbytes != end - begin:
            src.fail(
                f"entry '{name}': shape {shape} with dtype {st} needs {nbytes} bytes but data_offsets {offsets} "
                f"span {end - begin}"
            )
        entries.append((begin, end, name, st, shape))

    # The reference library accepts exactly one layout: entries tiling the buffer with no gap and no overlap.
    entries.sort(key=lambda e: (e[0], e[1]))
    buffer_size = src.size - 8 - len(header_bytes)
    expected = 0
    for begin, end, name, _, _ in entries:
        if begin < expected:
            src.fail(
                f"entry '{name}': data_offsets [{begin}, {end}] overlap the previous entry (which ends at {expected})"
            )
        if begin > expected:
            src.fail(f"entry '{name}': hole in the data buffer between bytes {expected} and {begin}")
        if end > buffer_size:
            src.fail(f"entry '{name}': data_offsets [{begin}, {end}] run past the data buffer of {buffer_size} bytes")
        expected = end
    if expected != buffer_size:
        src.fail(f"the tensors cover {expected} bytes but the data buffer holds {buffer_size}")
    return entries, metadata


def _read_tensor(src, name, st, shape, nbytes, mapped=None):
    """One tensor's data: read from ``src`` in order, or (``mapped``: a uint8 memory map slice) viewed in place."""
    dtype, itemsize, _ = _DTYPES[st]
    if nbytes == 0:
        from . import empty

        return empty(shape, dtype=dtype)
    swap = sys.byteorder != "little" and itemsize > 1
    if mapped is not None and not swap and mapped.ctypes.data % itemsize == 0:
        raw = mapped
    else:
        raw = np.empty(nbytes, dtype=np.uint8)
        if mapped is not None:
            raw[:] = mapped
        else:
            src.readinto(raw, f"tensor '{name}'")
    if st == "BOOL" and raw.max() > 1:
        src.fail(f"tensor '{name}': BOOL data holds bytes other than 0 and 1")
    if swap:
        raw = raw.view(f"u{itemsize}").byteswap().view(np.uint8)
    return Storage.from_numpy(raw).tensor(dtype, 0, tuple(shape), tuple(_contiguous_strides(shape)))


def _contiguous_strides(shape):
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= max(d, 1)
    return strides[::-1]


def _as_cpu_location(loc, what):
    """Validate a target location; strata tensors live on the CPU (or the meta device, which has no data to load)."""
    try:
        dev = loc if isinstance(loc, _C.device) else _C.device(loc)
    except Exception as e:
        raise ValueError(f"strata.load: invalid {what} {loc!r:.100}: {e}") from None
    if dev.type != "cpu":
        raise ValueError(f"strata.load: {what}={dev} is not supported; strata loads tensors onto the CPU only")
    return dev


def _location_restorer(map_location):
    """torch's map_location: None, a device or str, a dict {saved location: new location}, or a callable
    ``f(storage, location)`` returning a storage (or None for the default). Returns ``restore(storage, location)``."""

    def default(storage, location):
        try:
            dev = _C.device(location)
        except Exception:
            raise ValueError(f"strata.load: the checkpoint puts a storage on an unknown location {location!r:.100}")
        if dev.type != "cpu":
            raise RuntimeError(
                f"Attempting to deserialize object on a {dev.type.upper()} device but strata only has the CPU. "
                "Use strata.load with map_location='cpu' (or strata.device('cpu')) to map the storages to the CPU."
            )
        return storage

    if map_location is None:
        return default
    if isinstance(map_location, (str, _C.device)):
        _as_cpu_location(map_location, "map_location")
        return lambda storage, location: storage
    if isinstance(map_location, Mapping):
        for k, v in map_location.items():
            if not isinstance(k, str):
                raise TypeError(f"strata.load: map_location dict keys must be location strings, got {k!r:.100}")
            _as_cpu_location(v, f"map_location[{k!r}]")
        return lambda storage, location: storage if location in map_location else default(storage, location)
    if callable(map_location):

        def call(storage, location):
            out = map_location(storage, location)
            if out is None:
                return default(storage, location)
            if not isinstance(out, Storage):
                raise TypeError(
                    f"strata.load: map_location returned a {type(out).__name__}; it must return the storage it was "
                    "given (strata storages live on the CPU) or None"
                )
            return out

        return call
    raise TypeError(
        "strata.load: map_location must be None, a str, a strata.device, a dict or a callable, got "
        f"{type(map_location).__name__}"
    )


class _Opened:
    """Context manager giving a _Source for a path or a binary file object."""

    def __init__(self, f):
        self.f, self.close = f, None

    def __enter__(self):
        f = self.f
        if isinstance(f, (bytes, bytearray, memoryview)):
            raise TypeError("strata.load: f must be a path or a binary file; wrap raw bytes in io.BytesIO")
        if isinstance(f, (str, os.PathLike)):
            label = os.fspath(f)
            fh = open(f, "rb")
            self.close = fh
            return _Source(fh, label, os.fstat(fh.fileno()).st_size)
        if not hasattr(f, "read"):
            raise TypeError(f"strata.load: f must be a path or a readable binary file, got {type(f).__name__}")
        if isinstance(f, io.TextIOBase):
            raise TypeError("strata.load: f must be opened in binary mode ('rb')")
        label = str(getattr(f, "name", None) or f"<{type(f).__name__}>")
        size = _remaining_size(f)
        if size is None:
            # A pipe or socket: its length is only known by reading it, in chunks, so a lying header can never make us
            # allocate more than the stream really delivered.
            chunks = []
            while True:
                chunk = f.read(_CHUNK)
                if not chunk:
                    break
                if not isinstance(chunk, (bytes, bytearray)):
                    raise TypeError(f"strata.load: {label}: f must be opened in binary mode ('rb')")
                chunks.append(chunk)
            data = b"".join(chunks)
            return _Source(io.BytesIO(data), label, len(data))
        return _Source(f, label, size)

    def __exit__(self, *exc):
        if self.close is not None:
            self.close.close()
        return False


_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")


def _peek(src, n):
    pos = src.f.tell()
    head = src.f.read(n)
    src.f.seek(pos)
    if not isinstance(head, (bytes, bytearray)):
        raise TypeError(f"strata.load: {src.label}: f must be opened in binary mode ('rb')")
    return bytes(head)


def _read_safetensors(src, want_tensors=True, mapped=None):
    if src.size < 8:
        src.fail(f"file is {src.size} bytes, too short for the 8-byte header length")
    first = src.read(8, "header length")
    (n,) = struct.unpack("<Q", first)
    if n > MAX_HEADER_SIZE or n > src.size - 8:
        if first.startswith(_ZIP_MAGIC) or first.startswith(b"\x80"):
            src.fail("this is a torch checkpoint (zip archive or pickle), not a safetensors file")
        if n > MAX_HEADER_SIZE:
            src.fail(f"header length {n} exceeds the {MAX_HEADER_SIZE}-byte limit")
        src.fail(f"header length {n} is larger than the {src.size - 8} bytes that follow it")
    header_bytes = src.read(n, "header")
    entries, metadata = _parse_header(src, header_bytes)
    if not want_tensors:
        return None, metadata, src.label
    tensors = {}
    base = 8 + n
    for begin, end, name, st, shape in entries:  # sorted by offset and tiling the buffer: a sequential read
        view = mapped[base + begin : base + end] if mapped is not None else None
        tensors[name] = _read_tensor(src, name, st, shape, end - begin, view)
    return tensors, metadata, src.label


def _read_file(f, want_tensors=True):
    with _Opened(f) as src:
        return _read_safetensors(src, want_tensors)


class _Rebuilder:
    def __init__(self, label, tensors):
        self.label, self.tensors = label, tensors

    def fail(self, msg):
        raise ValueError(f"strata.load: {self.label}: malformed '{STRUCTURE_KEY}' metadata: {msg}")

    def decode(self, x):
        if x is None or isinstance(x, (bool, int, float, str)):
            return x
        if isinstance(x, list):
            return [self.decode(v) for v in x]
        if not isinstance(x, dict) or len(x) != 1:
            self.fail(f"unexpected value {x!r:.200}")
        ((tag, v),) = x.items()
        if tag == "$tensor":
            if not isinstance(v, str) or v not in self.tensors:
                self.fail(f"reference to a tensor {v!r:.200} that is not in the file")
            return self.tensors[v]
        if tag == "$tuple":
            if not isinstance(v, list):
                self.fail("$tuple must hold a list")
            return tuple(self.decode(e) for e in v)
        if tag in ("$dict", "$odict"):
            if not isinstance(v, list):
                self.fail(f"{tag} must hold a list of [key, value] pairs")
            out = OrderedDict() if tag == "$odict" else {}
            for pair in v:
                if not (isinstance(pair, list) and len(pair) == 2):
                    self.fail(f"{tag} item {pair!r:.200} is not a [key, value] pair")
                key = self.decode(pair[0])
                if not (key is None or isinstance(key, (bool, int, float, str))):
                    self.fail(f"dict key {key!r:.200} is not a scalar")
                if key in out:
                    self.fail(f"duplicate dict key {key!r:.200}")
                out[key] = self.decode(pair[1])
            return out
        if tag == "$float":
            if v not in ("nan", "inf", "-inf"):
                self.fail(f"$float holds {v!r:.200}")
            return float(v)
        self.fail(f"unknown tag {tag!r:.200}")


def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None, **pickle_load_args):
    """Load a checkpoint written by :func:`save` or by ``torch.save``, or any safetensors file.

    The format is recognised from the file's first bytes: torch's zip archive, torch's legacy pickle format, or
    safetensors.

    ``weights_only`` (default True) unpickles torch archives with a restricted unpickler that builds only tensors,
    Parameters, dicts / OrderedDicts / lists / tuples / sets, numbers, str, bytes, None, ``Size``, dtypes, devices,
    and the globals allowed with :func:`add_safe_globals`; anything else raises ``pickle.UnpicklingError`` naming the
    global. ``weights_only=False`` runs the full pickle machinery: only for files you trust (it can run any code).
    Safetensors files never run code either way.

    ``map_location``: None, ``"cpu"``, a device, a dict mapping saved locations to new ones, or a callable
    ``f(storage, location)``. ``mmap=True`` (``f`` must be a path) maps the tensors' data from the file instead of
    reading it (copy-on-write: writes to the tensors do not reach the file).
    """
    if weights_only is None:
        weights_only = True
    if pickle_module is not None and weights_only:
        raise RuntimeError(
            "strata.load: cannot safely load weights when an explicit pickle_module is given; pass "
            "weights_only=False to use it (only for files you trust)"
        )
    unknown = set(pickle_load_args) - {"encoding", "errors"}
    if unknown:
        raise TypeError(f"strata.load: unexpected keyword argument(s) {sorted(unknown)}")
    restore = _location_restorer(map_location)
    if mmap and not isinstance(f, (str, os.PathLike)):
        raise ValueError("strata.load: f must be a file path in order to use the mmap argument")
    with _Opened(f) as src:
        head = _peek(src, 32)
        if head.startswith(_ZIP_MAGIC):
            return _load_torch_zip(src, f if mmap else None, restore, weights_only, pickle_module, pickle_load_args)
        if head.startswith(_torch_format.LEGACY_MAGICS):
            if mmap:
                raise ValueError("strata.load: mmap can only be used with files in torch's zip format")
            return _load_torch_legacy(src, restore, weights_only, pickle_module, pickle_load_args)
        mapped = np.memmap(f, dtype=np.uint8, mode="c") if mmap and src.size > 0 else None
        tensors, metadata, label = _read_safetensors(src, True, mapped)
    if map_location is not None:
        tensors = {k: _restore_tensor(restore, t) for k, t in tensors.items()}
    structure = metadata.get(STRUCTURE_KEY)
    if structure is None:
        return {k: tensors[k] for k in sorted(tensors)}
    doc = _parse_json(structure, label, f"'{STRUCTURE_KEY}' metadata")
    rb = _Rebuilder(label, tensors)
    if not (isinstance(doc, dict) and set(doc) == {"version", "root"}):
        rb.fail("expected an object with 'version' and 'root'")
    if doc["version"] != _STRUCTURE_VERSION:
        rb.fail(f"unsupported version {doc['version']!r:.50} (this strata reads version {_STRUCTURE_VERSION})")
    try:
        return rb.decode(doc["root"])
    except RecursionError:
        rb.fail("nested too deeply")


def _restore_tensor(restore, t):
    st = storage_of(t)
    new = restore(st, "cpu")
    if new is st:
        return t
    return new.tensor(t.dtype, t.storage_offset(), tuple(t.shape), tuple(t.stride()))


_WEIGHTS_ONLY_HELP = (
    "Weights only load failed. This file can still be loaded, to do so you have two options, do those steps only if "
    "you trust the source of the checkpoint. \n\t(1) Re-running `strata.load` with `weights_only` set to `False` "
    "will likely succeed, but it can result in arbitrary code execution. Do it only if you got the file from a "
    "trusted source.\n\t(2) Alternatively, to load with `weights_only=True` please check the recommended steps in "
    "the following error message.\nWeightsUnpickler error: "
)


def _load_torch_zip(src, mmap_path, restore, weights_only, pickle_module, pickle_load_args):
    end = src.f.seek(0, io.SEEK_END)
    reader = _torch_format.ZipReader(src.f, src.label, end, mmap_path)
    try:
        data = reader.pickle_bytes()
        persistent_load = _torch_format.make_persistent_load(reader, restore)
        if weights_only:
            unpickler = WeightsUnpickler(data, _find_safe_global, persistent_load, _may_build, **pickle_load_args)
            try:
                return unpickler.load()
            except pickle.UnpicklingError as e:
                raise pickle.UnpicklingError(_WEIGHTS_ONLY_HELP + str(e)) from None
        cls = _torch_format.make_full_unpickler((pickle_module or pickle).Unpickler)
        unpickler = cls(io.BytesIO(data), **pickle_load_args)
        unpickler.persistent_load = persistent_load
        return unpickler.load()
    finally:
        reader.close()


def _no_persistent_id(pid):
    raise pickle.UnpicklingError(f"unexpected persistent id {pid!r:.100}")


def _load_torch_legacy(src, restore, weights_only, pickle_module, pickle_load_args):
    data = src.read(src.size, "checkpoint")

    def safe(pos, persistent_load=_no_persistent_id):
        u = WeightsUnpickler(data, _find_safe_global, persistent_load, _may_build, start=pos, **pickle_load_args)
        try:
            return u.load(), u.end
        except pickle.UnpicklingError as e:
            raise pickle.UnpicklingError(_WEIGHTS_ONLY_HELP + str(e)) from None

    magic, pos = safe(0)
    if magic != _torch_format.LEGACY_MAGIC_NUMBER:
        src.fail("not a torch legacy checkpoint (wrong magic number)")
    version, pos = safe(pos)
    if version != _torch_format.LEGACY_PROTOCOL_VERSION:
        src.fail(f"legacy checkpoint protocol version {version!r:.50} is not supported (only 1001 is)")
    sys_info, pos = safe(pos)
    if not isinstance(sys_info, dict) or not isinstance(sys_info.get("little_endian", True), bool):
        src.fail("legacy checkpoint: sys_info is not a dict with a bool 'little_endian'")
    storages = _torch_format.LegacyStorages(src.label, len(data), restore)
    storages.pos = pos
    if weights_only:
        obj, pos = safe(pos, storages.persistent_load)
    else:
        stream = io.BytesIO(data)
        stream.seek(pos)
        unpickler = _torch_format.make_full_unpickler((pickle_module or pickle).Unpickler)(stream, **pickle_load_args)
        unpickler.persistent_load = storages.persistent_load
        obj = unpickler.load()
        pos = stream.tell()
    keys, pos = safe(pos)
    storages.fill(data, pos, keys, sys_info.get("little_endian", True))
    return obj


# --------------------------------------------------------------------------------------------------------------------
# The weights_only allow-list
# --------------------------------------------------------------------------------------------------------------------

_user_globals = []  # callables/classes, or (callable, "module.name")


def _global_name(entry):
    if isinstance(entry, tuple):
        return entry[1]
    return f"{entry.__module__}.{entry.__qualname__}"


def _user_global_map():
    return {_global_name(e): (e[0] if isinstance(e, tuple) else e) for e in _user_globals}


def _check_entries(entries, what):
    if not isinstance(entries, (list, tuple)):
        raise TypeError(f"{what} expects a list of globals, got {type(entries).__name__}")
    for e in entries:
        if isinstance(e, tuple):
            if len(e) != 2 or not isinstance(e[1], str) or "." not in e[1]:
                raise TypeError(f"{what}: a tuple entry must be (global, 'module.name'), got {e!r:.100}")
        elif not (hasattr(e, "__module__") and hasattr(e, "__qualname__")):
            raise TypeError(f"{what}: {e!r:.100} is neither a class nor a function (it has no module and name)")
    return list(entries)


def add_safe_globals(safe_globals):
    """Allow these classes / functions in ``weights_only`` loads. An entry is the object itself, or
    ``(object, "module.name")`` when the checkpoint names it differently from its ``__module__.__qualname__``."""
    _user_globals.extend(_check_entries(safe_globals, "add_safe_globals"))


def get_safe_globals():
    """The user allow-list of :func:`add_safe_globals` (a copy)."""
    return list(_user_globals)


def clear_safe_globals():
    """Empty the user allow-list."""
    _user_globals.clear()


class safe_globals(contextlib.ContextDecorator):
    """``with strata.serialization.safe_globals([Cls, fn]): ...``: the entries are allowed inside the block only."""

    def __init__(self, safe_globals):
        self.entries = _check_entries(safe_globals, "safe_globals")

    def __enter__(self):
        _user_globals.extend(self.entries)

    def __exit__(self, *exc):
        for e in self.entries:
            for i in range(len(_user_globals) - 1, -1, -1):
                if _user_globals[i] is e:
                    del _user_globals[i]
                    break
        return False


def _find_safe_global(module, name):
    module, name = _torch_format.map_compat(module, name)
    key = f"{module}.{name}"
    obj = _torch_format.TORCH_GLOBALS.get(key)
    if obj is not None:
        return obj
    user = _user_global_map()
    if key in user:
        return user[key]
    if module == "torch" or module.startswith("torch."):
        # A torch class saved by torch, allowed by the user under strata's name (torch.nn.X -> strata.nn.X).
        skey = "strata" + key[len("torch") :]
        if skey in user:
            return user[skey]
    msg = _torch_format.unsupported_torch_global(module, name)
    if msg is not None:
        raise pickle.UnpicklingError(msg)
    raise pickle.UnpicklingError(
        f"Unsupported global: GLOBAL {key} was not an allowed global by default. Please use "
        f"`strata.serialization.add_safe_globals([{name}])` or the `strata.serialization.safe_globals([{name}])` "
        "context manager to allowlist this global if you trust this class/function."
    )


def _may_build(inst):
    classes = tuple(v for v in _user_global_map().values() if isinstance(v, type))
    return bool(classes) and isinstance(inst, classes)


def load_metadata(f):
    """The header's ``__metadata__`` (str -> str) without reading any tensor data; the file is fully validated."""
    _, metadata, _ = _read_file(f, want_tensors=False)
    return dict(metadata)

from ._serialization_more import (  # noqa: E402,F401  (torch.serialization's helper names)
    location_tag, default_restore_location, normalize_storage_type, get_unsafe_globals_in_checkpoint)
