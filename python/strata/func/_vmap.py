"""strata.func.vmap (also strata.vmap): torch.func.vmap on the Vmap dispatch key.

The mapped inputs become batched tensors of a new vmap level (a physical tensor
plus its batch dim; the function sees the logical shape, without the batch),
the function runs once, and every op it calls meets the Vmap layer: a batching
rule runs the op once on the physical tensors, a composite op decomposes, and
anything else runs once per batch entry with a one-time warning
(docs/VMAP.md, src/vmap/). The outputs are unwrapped at the level and their
batch moved to out_dims.

Autograd inside vmap: strata.autograd.grad with batched outputs or inputs
differentiates the physical tensors (every batch entry only affects its own
output entries) and wraps the gradients again; _lift_to_active_levels turns an
unbatched tensor into a batched one (an expanded view, no copy), so that
gradients with respect to it come out per entry.
"""

import functools
import warnings

from .. import _C

__all__ = ["vmap"]

_RANDOMNESS = {"error": 0, "different": 1, "same": 2}


def _flatten(x):
    """(leaves, rebuild, structure): tensors and other leaves inside tuples/lists/dicts."""
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
        leaves, rb = _flatten([x[k] for k in keys])
        return leaves, lambda vals, keys=keys, rb=rb: dict(zip(keys, rb(vals)))
    return [x], lambda vals: vals[0]


def _structure(x):
    if isinstance(x, (tuple, list)):
        return type(x)(_structure(v) for v in x)
    if isinstance(x, dict):
        return {k: _structure(v) for k, v in x.items()}
    return "*"


def _func_name(func):
    return getattr(func, "__name__", type(func).__name__)


def _broadcast_dims(dims, x, err):
    """One dim per leaf of x: an int/None applies to every leaf under it."""
    if dims is None or isinstance(dims, int):
        return [dims] * len(_flatten(x)[0])
    if isinstance(dims, (tuple, list)) and isinstance(x, (tuple, list)) and len(dims) == len(x):
        return [d for di, xi in zip(dims, x) for d in _broadcast_dims(di, xi, err)]
    if isinstance(dims, dict) and isinstance(x, dict) and set(dims) == set(x):
        return [d for k in x for d in _broadcast_dims(dims[k], x[k], err)]
    raise err()


class _Level:
    """A vmap level for the duration of a with block; its performance warnings
    are shown at exit."""

    def __init__(self, batch_size, randomness):
        self.batch_size, self.randomness = batch_size, randomness

    def __enter__(self):
        self.level = _C._vmap_push_level(self.batch_size, _RANDOMNESS[self.randomness])
        return self.level

    def __exit__(self, *exc):
        _C._vmap_pop_level()
        for msg in _C._vmap_take_warnings():
            warnings.warn(msg, UserWarning, stacklevel=4)  # the caller of the vmapped function
        return False


def _check_in_dims(func, in_dims, args):
    name = _func_name(func)
    if not isinstance(in_dims, (int, tuple)) and in_dims is not None:
        raise ValueError(f"vmap({name}, in_dims={in_dims}, ...): expected `in_dims` to be int or a (potentially "
                         f"nested) tuple matching the structure of inputs, got: {type(in_dims)}.")
    if not args:
        raise ValueError(f"vmap({name})(<inputs>): got no inputs. Maybe you forgot to add inputs, or you are "
                         "trying to vmap over a function with no inputs. The latter is unsupported.")
    dims_nest = in_dims if isinstance(in_dims, tuple) else (in_dims,) * len(args)
    if isinstance(in_dims, tuple) and len(in_dims) != len(args):
        raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): in_dims is not compatible with the "
                         f"structure of `inputs`. in_dims has structure {_structure(in_dims)} but inputs has "
                         f"structure {_structure(tuple(args))}.")

    def mismatch():
        return ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): in_dims is not compatible with the "
                          f"structure of `inputs`. in_dims has structure {_structure(in_dims)} but inputs has "
                          f"structure {_structure(tuple(args))}.")
    return _broadcast_dims(dims_nest, tuple(args), mismatch)


def _batch_size(func, in_dims, leaves, dims):
    name = _func_name(func)
    sizes = []
    for leaf, d in zip(leaves, dims):
        if d is None:
            continue
        if not isinstance(d, int):
            raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): in_dims must be ints or None, "
                             f"got {d!r}")
        if not isinstance(leaf, _C.Tensor):
            raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d} for an input but "
                             f"the input is of type {type(leaf)}. We cannot vmap over non-Tensor arguments, "
                             "please use None as the respective in_dim")
        n = leaf.dim()
        if not -n <= d < n:
            raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d} for some input, "
                             f"but that input is a Tensor of dimensionality {n} so expected in_dim to satisfy "
                             f"-{n} <= in_dim < {n}.")
        sizes.append(leaf.shape[d])
    if not sizes:
        raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dims={in_dims} but none of "
                         "the inputs is a Tensor being mapped over (at least one in_dim must be an int for a "
                         "Tensor input).")
    if len(set(sizes)) > 1:
        raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Expected all tensors to have the same "
                         f"size in the mapped dimension, got sizes {sizes} for the mapped dimension")
    return sizes[0]


def _run(func, args, kwargs, leaves, rebuild, dims, batch_size, out_dims, randomness):
    name = _func_name(func)
    with _Level(batch_size, randomness) as level:
        vals = [_C._vmap_add_batch_dim(leaf, d if d >= 0 else d + leaf.dim(), level) if d is not None else leaf
                for leaf, d in zip(leaves, dims)]
        out = func(*rebuild(vals), **kwargs)
        out_leaves, out_rebuild = _flatten(out)

        def mismatch():
            return ValueError(f"vmap({name}, ..., out_dims={out_dims})(<inputs>): out_dims is not compatible with "
                              f"the structure of `outputs`. out_dims has structure {_structure(out_dims)} but "
                              f"outputs has structure {_structure(out)}.")
        odims = _broadcast_dims(out_dims, out, mismatch)
        results = []
        for leaf, od in zip(out_leaves, odims):
            if not isinstance(leaf, _C.Tensor):
                raise ValueError(f"vmap({name}, ...): `{name}` must only return Tensors, got type {type(leaf)}. "
                                 "Did you mean to set out_dims= to None for output?")
            if od is None:
                if _C._vmap_unwrap(leaf) is not None and _C._vmap_unwrap(leaf)[2] == level:
                    raise ValueError(f"vmap({name}, ...): `{name}` can not return a BatchedTensor when out_dim "
                                     "is None")
                results.append(leaf)
                continue
            if not isinstance(od, int):
                raise ValueError(f"vmap({name}, ..., out_dims={out_dims}): out_dims must be ints or None")
            n = leaf.dim() + 1
            if not -n <= od < n:
                raise IndexError(f"vmap({name}, ..., out_dims={out_dims}): Dimension out of range (expected to "
                                 f"be in range of [{-n}, {n - 1}], but got {od})")
            results.append(_C._vmap_remove_batch_dim(leaf, level, batch_size, od % n))
    return out_rebuild(results)


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """func mapped over dimension in_dims of its inputs (an int, None for an input
    not mapped, or a nest matching the arguments); the results are stacked at
    out_dims. randomness: "error" (a random op inside raises), "different"
    (independent draws per entry) or "same" (one draw shared by the batch)."""
    if randomness not in _RANDOMNESS:
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or 'same'. "
                           f"Got {randomness}")
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size <= 0):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})")

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        dims = _check_in_dims(func, in_dims, args)
        leaves, rebuild = _flatten(tuple(args))
        n = _batch_size(func, in_dims, leaves, dims)
        if chunk_size is None or chunk_size >= n:
            return _run(func, args, kwargs, leaves, rebuild, dims, n, out_dims, randomness)
        chunks = []
        for start in range(0, n, chunk_size):
            size = min(chunk_size, n - start)
            part = [leaf.narrow(d, start, size) if d is not None else leaf for leaf, d in zip(leaves, dims)]
            chunks.append(_run(func, args, kwargs, part, rebuild, dims, size, out_dims, randomness))
        first, out_rebuild = _flatten(chunks[0])
        cols = [_flatten(c)[0] for c in chunks]
        odims = _broadcast_dims(out_dims, chunks[0], lambda: ValueError("vmap: out_dims does not match outputs"))
        from .._functions import cat
        merged = [c0 if od is None else cat([c[j] for c in cols], od)
                  for j, (c0, od) in enumerate(zip(first, odims))]
        return out_rebuild(merged)

    return wrapped


# ---- autograd inside vmap ------------------------------------------------------------------------------------------

def _chain(t):
    """t's wrappers from the outermost in: [(bdim, level)], and the physical tensor."""
    chain = []
    while True:
        u = _C._vmap_unwrap(t)
        if u is None:
            return chain, t
        t, bdim, level = u
        chain.append((bdim, level))


def _rewrap(chain, t):
    for bdim, level in reversed(chain):
        t = _C._vmap_add_batch_dim(t, bdim, level)
    return t


def _canonical(t, levels):
    """t as a plain tensor with one leading dim per active level (outermost level
    first), expanded at levels where t is not batched."""
    for level, size in reversed(levels):
        t = _C._vmap_remove_batch_dim(t, level, size, 0)
    return t


def _lift_to_active_levels(t):
    """t as a batched tensor at every active vmap level (an expanded view of t, no
    copy); t itself when no vmap is active. Gradients with respect to the
    result are per batch entry: each physical slice only reaches its own
    entry's outputs."""
    levels = _C._vmap_levels()
    have = {lvl for _, lvl in _chain(t)[0]}
    top = max(have) if have else 0
    for level, size in levels:  # outermost first: wrappers nest by increasing level
        if level in have:
            continue
        if level < top:
            raise RuntimeError("vmap: cannot lift a tensor to an outer vmap level it is not batched at while it "
                               "is batched at an inner one")
        t = _C._vmap_add_batch_dim(t.unsqueeze(0).expand(size, *t.shape), 0, level)
    return t


def _empty_batched_like(t):
    """An uninitialised tensor batched like t (same levels and batch dims)."""
    chain, p = _chain(t)
    return _rewrap(chain, p.new_empty(p.shape))


def _any_batched(ts):
    return any(t is not None and _C._vmap_is_batched(t) for t in ts)


def _batched_autograd_grad(outs, ins, grads, retain_graph, create_graph, allow_unused):
    """autograd.grad inside vmap with batched outputs or inputs: the engine runs on
    the physical tensors, and the gradients are wrapped like their inputs."""
    levels = _C._vmap_levels()
    out_levels = set()
    for o in outs:
        out_levels |= {lvl for _, lvl in _chain(o)[0]}
    # grad_outputs batched at inner levels where no output is (vmap(jacrev(f)): the cotangent rows at a
    # level of their own): those levels stay wrapped around the physical grad_outputs, so the engine runs
    # once with batched gradients (as it does outside vmap), and they end up outermost in the results.
    extra = set()
    for o, g in zip(outs, grads):
        if g is not None:
            extra |= {lvl for _, lvl in _chain(g)[0]} - {lvl for _, lvl in _chain(o)[0]}
    if extra:
        seen = set(out_levels)
        for x in ins:
            seen |= {lvl for _, lvl in _chain(x)[0]}
        if any(o_lvl in extra for o_lvl in out_levels) or (seen and max(seen) > min(extra)):
            raise RuntimeError("autograd.grad inside vmap: a grad_output is batched at a vmap level where its "
                               "output is not; pass is_grads_batched=True or batch the output too")
        extra_levels = [(lvl, size) for lvl, size in levels if lvl in extra]
        levels = [(lvl, size) for lvl, size in levels if lvl not in extra]
    chains, phys_ins = [], []
    for i, x in enumerate(ins):
        chain, p = _chain(x)
        missing = out_levels - {lvl for _, lvl in chain}
        if missing:
            raise RuntimeError(
                f"autograd.grad inside vmap: input {i} is not batched at vmap level(s) {sorted(missing)} while the "
                "outputs are, so its gradient would mix the batch entries. Differentiate with respect to a "
                "per-entry copy (strata.func.grad does this; by hand: strata.func._vmap._lift_to_active_levels).")
        chains.append(chain)
        phys_ins.append(p)
    canon_outs, canon_grads = [], []
    for o, g in zip(outs, grads):
        if g is None:
            if o.numel() != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            co = _canonical(o, levels)
            g = co.new_ones(co.shape)
        else:
            co, g = _canonical(o, levels), _canonical(g, levels)
        canon_outs.append(co)
        canon_grads.append(g)
    res = _C._run_backward(canon_outs, canon_grads, bool(retain_graph), bool(create_graph), phys_ins,
                           bool(allow_unused), False)
    if not extra:
        return [None if r is None else _rewrap(c, r) for r, c in zip(res, chains)]
    out = []
    for r, c in zip(res, chains):
        if r is None:
            out.append(None)
            continue
        # r: batched at the extra levels around the physical input gradient. Those levels' dims go in
        # front, the input's own levels are wrapped (their dims shifted past them), then the extra levels
        # outermost, lowest first.
        t = _canonical(r, extra_levels)
        ne = len(extra_levels)
        for bdim, level in reversed(c):
            t = _C._vmap_add_batch_dim(t, bdim + ne, level)
        for level, _ in extra_levels:
            t = _C._vmap_add_batch_dim(t, 0, level)
        out.append(t)
    return out


def _grads_batched(grad_fn, outs, ins, grads, kwargs):
    """autograd.grad(..., is_grads_batched=True): the backward pass vmapped over
    the leading dim of every grad_output."""
    if any(g is None for g in grads):
        raise RuntimeError("autograd.grad: is_grads_batched=True needs a grad_output for every output")

    def one(*gs):
        return tuple(grad_fn(outs, ins, list(gs), **kwargs))
    return vmap(one, in_dims=0, out_dims=0)(*grads)
