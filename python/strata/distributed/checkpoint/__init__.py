"""strata.distributed.checkpoint: torch.distributed.checkpoint (DCP) for state dicts of plain (unsharded) tensors.

`save` writes a directory (see filesystem.py for the format): the nested state dict is flattened into dotted keys;
with a process group, each key is written once, by the lowest rank that has it (tensors that are not sharded are
replicas, as torch's default planner dedups them), each rank into its own data file, and rank 0 writes the
metadata after gathering every rank's entries. `load` reads, on each rank, the keys of the given state dict and
loads them in place: tensors are copied into (shape must match; dtype is converted, as copy_), other values are
replaced in their dict or list. Without a process group (or with no_dist=True) one process does it all.
`load` also reads a checkpoint written by torch.distributed.checkpoint.save (_torch_format.py).
"""


import strata

from .filesystem import FileSystemReader, FileSystemWriter  # noqa: F401
from . import state_dict  # noqa: F401
from .metadata import Metadata

__all__ = ["save", "load", "save_state_dict", "load_state_dict", "FileSystemWriter", "FileSystemReader",
           "DefaultSavePlanner", "DefaultLoadPlanner", "Metadata", "state_dict"]




class DefaultSavePlanner:
    def __init__(self, flatten_state_dict=True, flatten_sharded_tensors=True, dedup_replicated_tensors=None,
                 dedup_save_to_lowest_rank=False, enable_plan_caching=False):
        if not flatten_state_dict:
            raise NotImplementedError("DefaultSavePlanner(flatten_state_dict=False) is not supported by Strata's "
                                      "checkpoint (nested state dicts are always flattened)")


class DefaultLoadPlanner:
    def __init__(self, flatten_state_dict=True, flatten_sharded_tensors=True, allow_partial_load=False):
        self.allow_partial_load = allow_partial_load


def _flatten(obj, prefix, out):
    """[(key, container, index)] of obj's leaves; dicts and lists are walked (empty ones are leaves)."""
    items = obj.items() if isinstance(obj, dict) else enumerate(obj)
    for k, v in items:
        key = f"{prefix}{k}"
        if isinstance(v, (dict, list)) and len(v) > 0:
            _flatten(v, key + ".", out)
        else:
            out.append((key, obj, k))
    return out


def _flatten_like_torch(obj, prefix, out):
    """_flatten with torch's rule (torch.distributed.checkpoint's traversal), for checkpoints in torch's format:
    dicts are always walked (an empty one has no leaves), a list only when it holds a tensor, a dict or such a list,
    a tuple never."""
    def terminal(v):
        if isinstance(v, dict):
            return False
        if not isinstance(v, list):
            return True
        return not any(isinstance(x, strata.Tensor) or (isinstance(x, (dict, list)) and not terminal(x)) for x in v)

    items = obj.items() if isinstance(obj, dict) else enumerate(obj)
    for k, v in items:
        key = f"{prefix}{k}"
        if isinstance(v, dict) or not terminal(v):
            _flatten_like_torch(v, key + ".", out)
        else:
            out.append((key, obj, k))
    return out


def _leaves(state_dict, what, torch_rule=False):
    if not isinstance(state_dict, dict):
        raise TypeError(f"{what}: state_dict must be a dict, got {type(state_dict).__name__}")
    leaves = (_flatten_like_torch if torch_rule else _flatten)(state_dict, "", [])
    keys = [k for k, _, _ in leaves]
    if len(set(keys)) != len(keys):
        dup = sorted({k for k in keys if keys.count(k) > 1})
        raise ValueError(f"{what}: the state dict's flattened keys collide: {dup}")
    return leaves


def _process_group(process_group, no_dist):
    from .. import _group, is_initialized

    if no_dist or not is_initialized():
        return None
    g = _group(process_group)
    return g if g.size() > 1 else None


def _writer(storage_writer, checkpoint_id, what):
    if storage_writer is None:
        if checkpoint_id is None:
            raise RuntimeError(f"{what}: `checkpoint_id` must be specified if storage_writer is None.")
        return FileSystemWriter(checkpoint_id)
    if not isinstance(storage_writer, FileSystemWriter):
        raise NotImplementedError(f"{what}: only FileSystemWriter is supported, got {type(storage_writer).__name__}")
    if checkpoint_id is not None:
        storage_writer.path = str(checkpoint_id)
    return storage_writer


def _reader(storage_reader, checkpoint_id, what):
    if storage_reader is None:
        if checkpoint_id is None:
            raise RuntimeError(f"{what}: `checkpoint_id` must be specified if storage_reader is None.")
        return FileSystemReader(checkpoint_id)
    if not isinstance(storage_reader, FileSystemReader):
        raise NotImplementedError(f"{what}: only FileSystemReader is supported, got {type(storage_reader).__name__}")
    if checkpoint_id is not None:
        storage_reader.path = str(checkpoint_id)
        storage_reader._meta = None
    return storage_reader


def save(state_dict, *, checkpoint_id=None, storage_writer=None, planner=None, process_group=None, no_dist=False):
    """Writes state_dict into a checkpoint directory; collective over the process group when there is one."""
    from .. import _collectives as C

    what = "distributed.checkpoint.save"
    if planner is not None and not isinstance(planner, DefaultSavePlanner):
        raise NotImplementedError(f"{what}: custom planners are not supported (got {type(planner).__name__})")
    w = _writer(storage_writer, checkpoint_id, what)
    leaves = _leaves(state_dict, what, torch_rule=w.torch_format)
    g = _process_group(process_group, no_dist)
    rank, world = (g.rank(), g.size()) if g is not None else (0, 1)
    # DTensors (sharded parameters, their optimizer state) are written whole: gathered here, collectively, in the
    # state dict's order on every rank of their mesh, then deduplicated like any replica
    with strata.no_grad():
        mine = [(k, c[i].full_tensor() if getattr(c[i], "_strata_dtensor", False) else c[i]) for k, c, i in leaves]
    if g is not None:
        every = [None] * world
        C.all_gather_object(every, [k for k, _ in mine], group=g)
        owner = {}
        for r, keys in enumerate(every):
            for k in keys:
                owner.setdefault(k, r)
        mine = [(k, v) for k, v in mine if owner[k] == rank]
    if rank == 0:
        w._prepare()
    if g is not None:
        C.barrier(group=g)
    else:
        w._prepare()
    entries = w._write_data(rank, mine) if mine or rank == 0 else {}
    if g is not None:
        gathered = [None] * world if rank == 0 else None
        C.gather_object(entries, gathered, dst=g._ranks[0], group=g)
    else:
        gathered = [entries]
    if rank == 0:
        allentries = {}
        for e in gathered:
            allentries.update(e)
        w._write_metadata(world, allentries)
    if g is not None:
        C.barrier(group=g)
    return FileSystemReader(w.path).read_metadata()


def load(state_dict, *, checkpoint_id=None, storage_reader=None, planner=None, process_group=None, no_dist=False):
    """Loads the checkpoint into state_dict in place (tensors copied into, other values replaced). Every key of
    state_dict must be in the checkpoint unless planner=DefaultLoadPlanner(allow_partial_load=True); keys of the
    checkpoint that state_dict lacks are ignored."""
    what = "distributed.checkpoint.load"
    partial = False
    if planner is not None:
        if not isinstance(planner, DefaultLoadPlanner):
            raise NotImplementedError(f"{what}: custom planners are not supported (got {type(planner).__name__})")
        partial = planner.allow_partial_load
    r = _reader(storage_reader, checkpoint_id, what)
    entries = r._raw_metadata()["entries"]
    leaves = _leaves(state_dict, what)
    found = {key: _find_entry(entries, key) for key, _, _ in leaves}
    for key, c, i in leaves:
        if found[key] is None and not partial and not (isinstance(c[i], dict) and not c[i]):
            # (an empty dict has no leaves in torch's format: nothing to load)
            raise RuntimeError(f"{what}: Missing key in checkpoint state_dict: {key}.")
    whole = {}  # values saved whole (torch keeps lists of non-tensors, e.g. param_groups, as one item)
    with strata.no_grad():
        for key, c, i in leaves:
            if found[key] is None:
                continue
            prefix, rest = found[key]
            if not rest:
                v = r._read(entries[prefix])
            else:
                if prefix not in whole:
                    whole[prefix] = r._read(entries[prefix])
                v = _descend(whole[prefix], rest, key, what)
            cur = c[i]
            if getattr(cur, "_strata_dtensor", False) and isinstance(v, strata.Tensor):
                # a sharded tensor: copy this rank's piece of the saved whole tensor (any sharding)
                from ..tensor._api import _local_piece

                if tuple(cur._spec.shape) != tuple(v.shape):
                    raise RuntimeError(f"{what}: Size mismatch between saved {tuple(v.shape)} and current "
                                       f"{tuple(cur._spec.shape)} (global shape of a DTensor) for {key}")
                strata.Tensor.detach(cur).copy_(_local_piece(v, cur._spec))
            elif isinstance(cur, strata.Tensor) and isinstance(v, strata.Tensor):
                if tuple(cur.shape) != tuple(v.shape):
                    raise RuntimeError(f"{what}: Size mismatch between saved {tuple(v.shape)} and current "
                                       f"{tuple(cur.shape)} for {key}")
                cur.copy_(v)
            else:
                c[i] = v


def _find_entry(entries, key):
    """(saved key, remaining path) for the leaf `key`: the key itself, or the longest dotted prefix saved as one
    value (a torch checkpoint keeps a list or dict without tensors as one item), or None."""
    if key in entries:
        return key, []
    parts = key.split(".")
    for n in range(len(parts) - 1, 0, -1):
        prefix = ".".join(parts[:n])
        if prefix in entries and entries[prefix]["kind"] not in ("tensor", "torch-tensor"):
            return prefix, parts[n:]
    return None


def _descend(value, rest, key, what):
    for p in rest:
        try:
            if isinstance(value, (list, tuple)):
                value = value[int(p)]
            elif isinstance(value, dict):
                value = value[p] if p in value else value[int(p)]
            else:
                raise KeyError(p)
        except (KeyError, IndexError, ValueError):
            raise RuntimeError(f"{what}: Missing key in checkpoint state_dict: {key}.") from None
    return value


def save_state_dict(state_dict, storage_writer, process_group=None, coordinator_rank=0, no_dist=False, planner=None):
    """The older name of save (torch deprecates it)."""
    return save(state_dict, storage_writer=storage_writer, process_group=process_group, no_dist=no_dist,
                planner=planner)


def load_state_dict(state_dict, storage_reader, process_group=None, coordinator_rank=0, no_dist=False, planner=None):
    """The older name of load (torch deprecates it)."""
    return load(state_dict, storage_reader=storage_reader, process_group=process_group, no_dist=no_dist,
                planner=planner)

# Imported on first use, after strata's import gave its modules their miss hook: a torch name Strata lacks
# says "not implemented yet" here too.
from strata._missing import module_getattr as _module_getattr  # noqa: E402

__getattr__ = _module_getattr(__name__)
