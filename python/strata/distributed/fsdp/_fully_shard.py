"""FSDP2: fully_shard (torch.distributed.fsdp.fully_shard) on Strata's DTensor.

fully_shard(module) replaces each parameter it manages (those of `module` not managed by an inner fully_shard) by a
DTensor parameter Shard(0) over a 1-D mesh: the local shard is the rank's torch.chunk piece of dim 0. The module's
class becomes FSDP<Class> (FSDPModule mixed in). The optimizer is built on these sharded parameters and updates the
shards in place.

Forward: a pre-forward hook all-gathers each parameter through an autograd Function (optionally cast to
mp_policy.param_dtype) and registers the gathered tensors in the module while it runs; the Function's backward
reduce-scatters the full gradient (cast to mp_policy.reduce_dtype if given), averaged over the mesh, and autograd
accumulates it into the sharded parameter's .grad (a DTensor Shard(0)). With set_requires_gradient_sync(False) the
backward keeps the unsharded gradient instead and adds it to the next synchronised backward's (gradient
accumulation with one reduce-scatter).

reshard_after_forward=True puts the sharded parameters back into the module after forward (None, the default: True
for inner modules, False for the root, as torch); False leaves the
gathered ones there until backward starts (or the next forward, or reshard(); at once when grad mode is off). In
both cases the gathered tensors stay referenced by the autograd graph until backward has run (Strata cannot free a tensor's storage under autograd), so this
implementation saves memory between steps (parameters, gradients and optimizer state are sharded), not within
one forward/backward; backward does not gather again."""

import strata
from strata.autograd import Function

from ..tensor._api import DTensor, DTensorSpec, _all_gather, _chunk, _reduce_scatter, _replace_param
from ..tensor.placement_types import Partial, Replicate, Shard, _StridedShard

__all__ = ["fully_shard", "FSDPModule", "MixedPrecisionPolicy", "OffloadPolicy", "CPUOffloadPolicy",
           "register_fsdp_forward_method", "UnshardHandle"]

_Tensor = strata.Tensor


def _dist():
    from ... import distributed as dist

    return dist


class MixedPrecisionPolicy:
    """param_dtype: the dtype parameters are gathered in (forward/backward compute); reduce_dtype: the dtype the
    gradient is reduce-scattered in; output_dtype: forward outputs are cast to it; cast_forward_inputs: floating
    inputs are cast to param_dtype."""

    def __init__(self, param_dtype=None, reduce_dtype=None, output_dtype=None, cast_forward_inputs=True):
        self.param_dtype = param_dtype
        self.reduce_dtype = reduce_dtype
        self.output_dtype = output_dtype
        self.cast_forward_inputs = cast_forward_inputs

    def __repr__(self):
        return (f"MixedPrecisionPolicy(param_dtype={self.param_dtype}, reduce_dtype={self.reduce_dtype}, "
                f"output_dtype={self.output_dtype}, cast_forward_inputs={self.cast_forward_inputs})")


class OffloadPolicy:
    """No offloading (the default)."""


class CPUOffloadPolicy(OffloadPolicy):
    def __init__(self, pin_memory=True):
        self.pin_memory = pin_memory


class UnshardHandle:
    def wait(self):
        return None


class _State:
    def __init__(self, module, mesh, params, reshard_after_forward, mp_policy):
        self.module = module
        self.mesh = mesh
        self.params = params  # [(owner module, name, sharded DTensor parameter)]
        self.rows = {}  # parameter index -> dim-0 size of the gathered tensor (a TP parameter's local rows)
        self.tp_groups = {}  # parameter index -> group whose partial gradient sums are all-reduced first
        self.reshard_after_forward = reshard_after_forward
        self.mp = mp_policy
        self.sync = True
        self.is_root = True  # until a fully_shard on an enclosing module
        self.unsharded = False
        self.prefetched = False
        self.tied = {}  # parameter index -> other (module, name) holding the same parameter
        self.pending = {}  # parameter index -> unsharded gradient kept while gradient sync is off


class _Gather(Function):
    @staticmethod
    def forward(ctx, shard, state, idx):
        ctx.state, ctx.idx = state, idx
        ctx.shard_dtype = shard.dtype
        local = _Tensor.detach(shard)
        full = _all_gather(local.contiguous(), 0, state.rows[idx], state.mesh, 0)
        if state.mp.param_dtype is not None and full.is_floating_point():
            full = full.to(state.mp.param_dtype)
        return full

    @staticmethod
    def backward(ctx, g):
        st = ctx.state
        if st.unsharded and not st.prefetched:  # backward has begun: the module shows its sharded parameters again
            st.module.reshard()
        acc_dtype = st.mp.reduce_dtype or ctx.shard_dtype
        g = g.to(acc_dtype)
        if ctx.idx in st.pending:
            g = g + st.pending.pop(ctx.idx)
        if not st.sync:
            st.pending[ctx.idx] = g
            return None, None, None
        group = st.tp_groups.get(ctx.idx)
        if group is not None:
            g = g.clone().contiguous()
            _dist().all_reduce(g, group=group)
        gs = _reduce_scatter(g.contiguous(), 0, st.mesh, 0, "avg")
        return gs.to(ctx.shard_dtype), None, None


def _cast(x, dtype):
    if isinstance(x, _Tensor) and x.is_floating_point() and x.dtype != dtype:
        return x.to(dtype)
    if isinstance(x, (list, tuple)):
        return type(x)(_cast(v, dtype) for v in x)
    if isinstance(x, dict):
        return {k: _cast(v, dtype) for k, v in x.items()}
    return x


class FSDPModule:
    """Mixed into a fully_shard-ed module's class."""

    def __new__(cls, *args, **kwargs):
        # FSDP<Class>(...) (e.g. Sequential slicing builds type(self)(...)) makes a plain <Class>, as torch's does;
        # sharded modules are only made by fully_shard, which changes an existing module's class
        orig = next(c for c in cls.__mro__[1:] if c is not FSDPModule and not issubclass(c, FSDPModule))
        if orig is object:
            raise TypeError("FSDPModule: use fully_shard(module) to make one")
        self = orig.__new__(orig)
        self.__init__(*args, **kwargs)
        return self

    def _fsdp_unshard(self):
        st = self._fsdp_state
        for i, (owner, name, p) in enumerate(st.params):
            full = _Gather.apply(p, st, i)
            owner._parameters[name] = full
            for o, n in st.tied.get(i, ()):
                o._parameters[n] = full
        st.unsharded = True

    def unshard(self, async_op=False):
        """All-gathers the parameters now (the next forward uses them instead of gathering again)."""
        self._fsdp_unshard()
        self._fsdp_state.prefetched = True
        return UnshardHandle() if async_op else None

    def reshard(self):
        """Puts the sharded parameters back into the module."""
        st = self._fsdp_state
        for i, (owner, name, p) in enumerate(st.params):
            owner._parameters[name] = p
            for o, n in st.tied.get(i, ()):
                o._parameters[n] = p
        st.unsharded = False
        st.prefetched = False

    def _fsdp_modules(self, recurse):
        mods = [m for m in self.modules() if isinstance(m, FSDPModule)] if recurse else [self]
        return mods

    def set_requires_gradient_sync(self, requires_gradient_sync, *, recurse=True):
        """False: backward keeps unsharded gradients (no communication) until a backward with sync on."""
        for m in self._fsdp_modules(recurse):
            m._fsdp_state.sync = bool(requires_gradient_sync)

    def set_reshard_after_forward(self, reshard_after_forward, recurse=True):
        for m in self._fsdp_modules(recurse):
            m._fsdp_state.reshard_after_forward = _check_reshard(reshard_after_forward)

    def set_is_last_backward(self, is_last_backward):
        pass

    def set_requires_all_reduce(self, requires_all_reduce, *, recurse=True):
        pass


def _check_reshard(v):
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, int):
        raise NotImplementedError("fully_shard: reshard_after_forward as an int (resharding to a smaller world) is "
                                  "not supported")
    raise TypeError(f"fully_shard: reshard_after_forward must be a bool, got {v!r}")


_classes = {}


def _pre_forward(module, args, kwargs):
    st = module._fsdp_state
    if not st.prefetched:
        module._fsdp_unshard()
    st.prefetched = False
    if st.mp.param_dtype is not None and st.mp.cast_forward_inputs:
        args, kwargs = _cast(args, st.mp.param_dtype), _cast(kwargs, st.mp.param_dtype)
    return args, kwargs


def _post_forward(module, args, kwargs, out):
    st = module._fsdp_state
    raf = st.reshard_after_forward
    if raf is None:  # torch's default: inner modules reshard, the root (outermost) keeps its parameters
        raf = not st.is_root
    if raf or not strata.is_grad_enabled():
        module.reshard()
    if st.mp.output_dtype is not None:
        out = _cast(out, st.mp.output_dtype)
    return out


def fully_shard(module, *, mesh=None, reshard_after_forward=None, shard_placement_fn=None,
                mp_policy=MixedPrecisionPolicy(), offload_policy=OffloadPolicy(), ignored_params=None):
    """Shards `module`'s parameters (those not already managed by an inner fully_shard) over the 1-D `mesh`
    (default: the world) and returns the module, whose class now also derives from FSDPModule."""
    from ..tensor._api import _default_mesh

    if isinstance(module, (list, tuple)):
        raise NotImplementedError("fully_shard: a list of modules sharing one group is not supported; call it on "
                                  "each module")
    import strata.nn as nn

    if not isinstance(module, nn.Module):
        raise TypeError(f"fully_shard: expected an nn.Module, got {type(module).__name__}")
    if isinstance(module, FSDPModule):
        raise ValueError(f"fully_shard: {type(module).__name__} is already sharded")
    mesh = mesh if mesh is not None else _default_mesh()
    if mesh.ndim != 1:
        raise NotImplementedError(f"fully_shard: only a 1-D mesh is supported (HSDP on a {mesh.ndim}-D mesh is not); "
                                  "pass a sub-mesh such as mesh['dp']")
    if shard_placement_fn is not None:
        raise NotImplementedError("fully_shard: shard_placement_fn is not supported (parameters are Shard(0))")
    if type(offload_policy) is not OffloadPolicy:
        raise NotImplementedError("fully_shard: CPU offloading is not supported (parameters already live in CPU "
                                  "memory)")
    if not isinstance(mp_policy, MixedPrecisionPolicy):
        raise TypeError(f"fully_shard: mp_policy must be a MixedPrecisionPolicy, got {mp_policy!r}")
    reshard_after_forward = _check_reshard(reshard_after_forward)
    ignored = {id(p) for p in (ignored_params or ())}

    # the parameters of this module's subtree that no inner fully_shard manages
    managed, seen, tied_to = [], {}, {}

    def walk(m):
        for name, p in m._parameters.items():
            if p is None or id(p) in ignored:
                continue
            if id(p) in seen:  # a parameter shared by several modules (tied weights): one shard for all
                tied_to.setdefault(seen[id(p)], []).append((m, name))
                continue
            seen[id(p)] = len(managed)
            managed.append((m, name, p))
        for child in m._modules.values():
            if child is not None and not isinstance(child, FSDPModule):
                walk(child)

    walk(module)
    for m in module.modules():
        if m is not module and isinstance(m, FSDPModule):
            m._fsdp_state.is_root = False
    params, rows, tp_groups = [], {}, {}
    for owner, name, p in managed:
        if p.dim() == 0:
            raise NotImplementedError(f"fully_shard: parameter {name!r} of {type(owner).__name__} is a 0-d tensor, "
                                      "which cannot be sharded on dim 0")
        if isinstance(p, DTensor):
            spec = _over_tp(owner, name, p, mesh)
            if getattr(p, "_tp_grad_allreduce_group", None) is not None:
                tp_groups[len(params)] = p._tp_grad_allreduce_group
        else:
            spec = DTensorSpec(mesh, (Shard(0),), tuple(p.shape))
        whole = _Tensor.detach(p).contiguous()
        rows[len(params)] = whole.shape[0]
        d = DTensor._leaf(_chunk(whole, 0, mesh, 0).clone(), spec, p.requires_grad)
        _replace_param(owner, name, d)
        for o, n in tied_to.get(len(params), ()):
            o._parameters[n] = d
        params.append((owner, name, d))
    cls = type(module)
    if cls not in _classes:
        _classes[cls] = type(f"FSDP{cls.__name__}", (FSDPModule, cls), {"__module__": cls.__module__})
    module.__class__ = _classes[cls]
    state = _State(module, mesh, params, reshard_after_forward, mp_policy)
    state.rows, state.tp_groups, state.tied = rows, tp_groups, tied_to
    module._fsdp_state = state
    module.register_forward_pre_hook(_pre_forward, prepend=True, with_kwargs=True)
    module.register_forward_hook(_post_forward, with_kwargs=True)
    return module


def _over_tp(owner, name, p, mesh):
    """The spec of a tensor-parallel parameter (a DTensor on mesh["tp"]) sharded again on dim 0 over `mesh`
    (mesh["dp"] of the same parent mesh, dp before tp): placements on the parent mesh, dp's being _StridedShard(0)
    when tp already shards dim 0 (the dp piece is a chunk of the tp piece), else Shard(0)."""
    tp_mesh = p._spec.mesh
    (root, dp_dims), (root2, tp_dims) = mesh._root, tp_mesh._root
    if root is not root2 or tp_mesh.ndim != 1 or len(dp_dims) != 1 or dp_dims[0] >= tp_dims[0]:
        raise NotImplementedError(f"fully_shard: parameter {name!r} of {type(owner).__name__} is a DTensor on "
                                  f"{tp_mesh}; FSDP over tensor parallelism needs mesh=parent['dp'] and the "
                                  "parameter on parent['tp'] of the same 2-D mesh (dp first)")
    tp_p = p._spec.placements[0]
    if isinstance(tp_p, Partial):
        raise NotImplementedError(f"fully_shard: parameter {name!r} has a Partial placement")
    dp_p = _StridedShard(0, tp_mesh.size(0)) if isinstance(tp_p, Shard) and tp_p.dim == 0 else Shard(0)
    placements = [Replicate()] * root.ndim
    placements[dp_dims[0]], placements[tp_dims[0]] = dp_p, tp_p
    return DTensorSpec(root, placements, tuple(p._spec.shape))


def register_fsdp_forward_method(module, method_name):
    """Makes module.<method_name>() gather and reshard the parameters as forward does."""
    if not isinstance(module, FSDPModule):
        return
    orig = getattr(module, method_name)

    def wrapped(*args, **kwargs):
        args, kwargs = _pre_forward(module, args, kwargs)
        out = orig(*args, **kwargs)
        return _post_forward(module, args, kwargs, out)

    object.__setattr__(module, method_name, wrapped)
