"""The rest of torch.func's surface: functionalize, replace_all_batch_norm_modules_,
debug_unwrap."""

import functools

from .. import _C
from ._pytree import tree_map

__all__ = ["functionalize", "replace_all_batch_norm_modules_", "debug_unwrap"]


def functionalize(func, *, remove="mutations"):
    """torch.func.functionalize. Its rewriting (in-place and out= ops into out-of-place ones,
    with input mutations copied back at the end) matters to a tracer; run eagerly, the
    functionalized program computes what func computes, so func runs as it is. With
    remove="mutations_and_views" the tensor outputs are fresh copies, never views of the
    inputs."""
    if remove not in ("mutations", "mutations_and_views"):
        raise RuntimeError(
            f"functionalize(f, remove='mutations'): received invalid argument for remove={remove}. Valid options are:\n"
            "     remove='mutations': all inplace and out= operators will be removed from the program, and replaced "
            "with their out-of-place equivalents.\n"
            "     remove='mutations_and_views': In addition to the above, all aliasing operators {view} will be "
            "replaced with their non-aliasing counterparts, {view}_copy.\n")

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        out = func(*args, **kwargs)
        if remove == "mutations_and_views":
            out = tree_map(lambda v: v.clone() if isinstance(v, _C.Tensor) else v, out)
        return out

    return wrapper


def replace_all_batch_norm_modules_(root):
    """In place: every BatchNorm module under root stops tracking running statistics (its
    running_mean/running_var/num_batches_tracked become None), so it always normalizes with
    the batch's own statistics. Returns root."""
    from ..nn.modules.normalization import _BatchNorm
    for m in root.modules():
        if isinstance(m, _BatchNorm):
            m.running_mean = None
            m.running_var = None
            m.num_batches_tracked = None
            m.track_running_stats = False
    return root


def debug_unwrap(tensor, *, recurse=True):
    """The tensor under a transform's wrappers. Strata's transforms do not wrap tensors (a
    level's inputs are recorded aliases, docs/FUNC.md), so this is the tensor itself."""
    return tensor
