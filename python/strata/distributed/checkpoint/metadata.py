"""torch.distributed.checkpoint.metadata: the classes describing what a checkpoint holds.

Strata's checkpoints keep their own JSON `.metadata` (see filesystem.py); `FileSystemReader.read_metadata()` and
`save()` describe it with these classes: each tensor key has a TensorStorageMetadata (dtype, size, and one chunk
covering the whole tensor, since Strata writes whole tensors), each other value a BytesStorageMetadata;
`storage_data` maps each key's MetadataIndex to its place in the data files."""

import dataclasses
import enum
import os
from typing import Any, Optional, Union

__all__ = ["ChunkStorageMetadata", "TensorStorageMetadata", "BytesStorageMetadata", "Metadata", "MetadataIndex",
           "TensorProperties", "StorageMeta", "STORAGE_TYPES", "STATE_DICT_TYPE"]


def _size(x):
    import strata
    return x if isinstance(x, strata.Size) else strata.Size(tuple(int(v) for v in x))


@dataclasses.dataclass
class ChunkStorageMetadata:
    """A chunk of a tensor: where it starts (``offsets``) and its extent (``sizes``) in each dimension."""
    offsets: Any
    sizes: Any


class _MEM_FORMAT_ENCODING(enum.Enum):
    TORCH_CONTIGUOUS_FORMAT = 0
    TORCH_CHANNELS_LAST = 1
    TORCH_PRESERVE_FORMAT = 2


def _default_dtype():
    import strata
    return strata.get_default_dtype()


def _strided():
    import strata
    return strata.strided


def _contiguous():
    import strata
    return strata.contiguous_format


@dataclasses.dataclass
class TensorProperties:
    dtype: Any = dataclasses.field(default_factory=_default_dtype)
    layout: Any = dataclasses.field(default_factory=_strided)
    requires_grad: bool = False
    memory_format: Any = dataclasses.field(default_factory=_contiguous)
    pin_memory: bool = False

    @staticmethod
    def create_from_tensor(tensor):
        import strata
        return TensorProperties(dtype=tensor.dtype, layout=tensor.layout, requires_grad=tensor.requires_grad,
                                memory_format=strata.contiguous_format, pin_memory=False)


@dataclasses.dataclass
class TensorStorageMetadata:
    properties: TensorProperties
    size: Any
    chunks: list


@dataclasses.dataclass
class BytesStorageMetadata:
    pass


STORAGE_TYPES = Union[TensorStorageMetadata, BytesStorageMetadata]
STATE_DICT_TYPE = dict


@dataclasses.dataclass
class StorageMeta:
    checkpoint_id: Union[str, os.PathLike, None] = None
    save_id: Optional[str] = None
    load_id: Optional[str] = None
    modules: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Metadata:
    """``state_dict_metadata``: key -> TensorStorageMetadata or BytesStorageMetadata."""
    state_dict_metadata: dict = dataclasses.field(default_factory=dict)
    planner_data: Any = None
    storage_data: Any = None
    storage_meta: Optional[StorageMeta] = None
    version: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class MetadataIndex:
    """Names one item of a checkpoint: a key (``fqn``), the offsets of a tensor's chunk, and an optional hint
    (``index``, ignored by equality and hashing)."""
    fqn: str
    offset: Any = None
    index: Optional[int] = dataclasses.field(hash=False, compare=False, default=None)

    def __init__(self, fqn, offset=None, index=None):
        object.__setattr__(self, "fqn", fqn)
        object.__setattr__(self, "index", index)
        object.__setattr__(self, "offset", None if offset is None else _size(offset))


def from_entries(raw, checkpoint_id=None):
    """A Metadata describing Strata's JSON metadata ``raw`` (filesystem.py)."""
    import strata
    from .filesystem import _dtype

    sdm, storage = {}, {}
    for i, (key, e) in enumerate(raw["entries"].items()):
        if e["kind"] in ("tensor", "torch-tensor"):
            size = _size(e["shape"])
            sdm[key] = TensorStorageMetadata(TensorProperties(dtype=_dtype(e["dtype"])), size,
                                             [ChunkStorageMetadata(_size([0] * len(size)), size)])
            storage[MetadataIndex(key, [0] * len(size), i)] = e
        else:
            sdm[key] = BytesStorageMetadata()
            storage[MetadataIndex(key, None, i)] = e
    return Metadata(sdm, storage_data=storage, storage_meta=StorageMeta(checkpoint_id=checkpoint_id),
                    version=str(raw.get("version")))


from strata._missing import module_getattr as _module_getattr  # noqa: E402

__getattr__ = _module_getattr(__name__)
