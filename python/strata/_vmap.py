"""strata.vmap: torch.vmap's semantics by running the function once per batch
entry and stacking the results. Same results as torch's batching rules for
functions of their arguments (no in-place writes into captured tensors); the
cost is one call per entry instead of one batched call. With
randomness="different" random ops draw independently per entry; under the
default, randomness="error", a call that consumed the global random stream
raises RuntimeError, as torch does."""

import functools

from . import _C
from . import random as _random
from ._functions import stack as _stack

__all__ = ["vmap"]


def _flatten(x):
    # (leaves, rebuild): tensors and other leaves inside tuples/lists/dicts.
    if isinstance(x, (tuple, list)):
        parts = [_flatten(v) for v in x]
        leaves = [leaf for p in parts for leaf in p[0]]

        def rebuild(vals, parts=parts, kind=type(x)):
            out, i = [], 0
            for p in parts:
                n = len(p[0])
                out.append(p[1](vals[i:i + n]))
                i += n
            return kind(out) if kind in (tuple, list) else kind(*out)
        return leaves, rebuild
    if isinstance(x, dict):
        keys = list(x)
        leaves_rb = _flatten([x[k] for k in keys])
        return leaves_rb[0], lambda vals, keys=keys, rb=leaves_rb[1]: dict(zip(keys, rb(vals)))
    return [x], lambda vals: vals[0]


def _broadcast_dims(dims, x, what):
    # One dim per leaf of x: an int/None applies to every leaf under it.
    if dims is None or isinstance(dims, int):
        return [dims] * len(_flatten(x)[0])
    if isinstance(dims, (tuple, list)) and isinstance(x, (tuple, list)):
        if len(dims) != len(x):
            raise ValueError(f"vmap: {what} has {len(dims)} entries but the corresponding input has {len(x)}")
        return [d for di, xi in zip(dims, x) for d in _broadcast_dims(di, xi, what)]
    if isinstance(dims, dict) and isinstance(x, dict):
        return [d for k in x for d in _broadcast_dims(dims[k], x[k], what)]
    raise ValueError(f"vmap: {what}={dims!r} does not match the structure of the input")


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """func mapped over dimension in_dims of its inputs (an int, None for an input
    not mapped, or a nest matching the arguments); results stacked at out_dims."""
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or 'same'. Got {randomness}")
    if randomness == "same":
        raise NotImplementedError("strata.vmap: randomness='same' is not supported (entries run one at a time)")

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        dims_nest = in_dims if not isinstance(in_dims, int) and in_dims is not None else (in_dims,) * len(args)
        if not isinstance(dims_nest, tuple):
            raise ValueError(f"vmap(in_dims={in_dims!r}): in_dims must be an int, None or a tuple")
        leaves, rebuild = _flatten(tuple(args))
        dims = _broadcast_dims(tuple(dims_nest), tuple(args), "in_dims")
        sizes = set()
        for leaf, d in zip(leaves, dims):
            if d is None:
                continue
            if not isinstance(leaf, _C.Tensor):
                raise ValueError(f"vmap: in_dim={d} given for an input of type {type(leaf).__name__}; only "
                                 "tensors can be mapped over (use None for this input)")
            if not -leaf.dim() <= d < max(leaf.dim(), 1) or leaf.dim() == 0:
                raise ValueError(f"vmap: in_dim={d} is out of range for an input with {leaf.dim()} dimensions")
            sizes.add(leaf.shape[d])
        if not sizes:
            raise ValueError("vmap: at least one input must be a Tensor being mapped over (in_dims all None)")
        if len(sizes) > 1:
            raise ValueError(f"vmap: Expected all tensors to have the same size in the mapped dimension, got sizes "
                             f"{sorted(sizes)} for the mapped dimension")
        n = sizes.pop()
        results = []
        check = randomness == "error"
        for i in range(n):
            vals = [leaf.select(d, i) if d is not None else leaf for leaf, d in zip(leaves, dims)]
            before = _random.get_rng_state() if check else None
            results.append(func(*rebuild(vals), **kwargs))
            if check and not bool((_random.get_rng_state() == before).all()):
                raise RuntimeError("vmap: called random operation while in randomness error mode. Please either use "
                                   "the 'same' or 'different' randomness flags on vmap or perform the randomness "
                                   "operation out of vmap")
        out_leaves0, out_rebuild = _flatten(results[0])
        per_leaf = [_flatten(r)[0] for r in results]
        odims = _broadcast_dims(out_dims, results[0], "out_dims")
        stacked = []
        for j, (leaf, od) in enumerate(zip(out_leaves0, odims)):
            if not isinstance(leaf, _C.Tensor):
                raise ValueError(f"vmap: function returned a {type(leaf).__name__}; it must return tensors")
            col = [p[j] for p in per_leaf]
            if od is None:
                stacked.append(col[0])
            else:
                stacked.append(_stack(col, od))
        return out_rebuild(stacked)

    return wrapped
