"""default_collate / default_convert: turning a list of samples into a batch (torch.utils.data._utils.collate)."""

import collections.abc
import re

from ... import _C

__all__ = ["default_collate", "default_convert"]

_ERR = "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"
_NP_STR_OBJ = re.compile(r"[SaUO]")


def _np():
    try:
        import numpy
        return numpy
    except ImportError:  # numpy is optional for the data utilities
        return None


def _is_namedtuple(obj):
    return isinstance(obj, tuple) and hasattr(obj, "_fields")


def _as_tensor(x):
    from ..._functions import as_tensor
    return as_tensor(x)


def default_convert(data):
    """Converts NumPy arrays (not of strings/objects) to tensors, recursing into mappings and sequences;
    used when automatic batching is off (``batch_size=None``)."""
    np = _np()
    if isinstance(data, _C.Tensor):
        return data
    if np is not None and isinstance(data, np.ndarray):
        if _NP_STR_OBJ.search(data.dtype.str) is not None:
            return data
        return _as_tensor(data)
    if np is not None and isinstance(data, np.generic) and not isinstance(data, (np.str_, np.bytes_)):
        return _as_tensor(data)
    if isinstance(data, collections.abc.Mapping):
        converted = {key: default_convert(data[key]) for key in data}
        try:
            return type(data)(converted)
        except TypeError:
            return converted
    if _is_namedtuple(data):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        try:
            return type(data)([default_convert(d) for d in data])
        except TypeError:
            return [default_convert(d) for d in data]
    return data


def default_collate(batch):
    """Stacks a list of samples into a batch the way torch does:

    tensors are stacked along a new first dimension; NumPy arrays become tensors and are stacked; NumPy scalars,
    Python floats (float64) and ints (int64) become 1-d tensors; strings stay a list; mappings are collated per
    key; namedtuples per field; other sequences are transposed and collated per position (tuples come back as
    lists, as in torch). Samples of a sequence must all have the same length."""
    elem = batch[0]
    elem_type = type(elem)
    np = _np()
    if isinstance(elem, _C.Tensor):
        from ..._functions import stack
        return stack(list(batch), 0)
    if np is not None and isinstance(elem, np.ndarray):
        if _NP_STR_OBJ.search(elem.dtype.str) is not None:
            raise TypeError(_ERR.format(elem.dtype))
        return default_collate([_as_tensor(b) for b in batch])
    if np is not None and isinstance(elem, np.generic) and not isinstance(elem, (np.str_, np.bytes_)):
        return _as_tensor(np.asarray(batch))
    if isinstance(elem, float):
        from ..._functions import tensor
        return tensor(batch, dtype=_C.float64)
    if isinstance(elem, int):
        from ..._functions import tensor
        return tensor(batch)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        collated = {key: default_collate([d[key] for d in batch]) for key in elem}
        try:
            return elem_type(collated)
        except TypeError:
            return collated
    if _is_namedtuple(elem):
        return elem_type(*(default_collate(samples) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        it = iter(batch)
        size = len(next(it))
        if not all(len(e) == size for e in it):
            raise RuntimeError("each element in list of batch should be of equal size")
        transposed = list(zip(*batch))
        if isinstance(elem, tuple):
            return [default_collate(samples) for samples in transposed]
        try:
            return elem_type([default_collate(samples) for samples in transposed])
        except TypeError:
            return [default_collate(samples) for samples in transposed]
    raise TypeError(_ERR.format(elem_type))
