"""torch.distributed.fsdp.FullyShardedDataParallel (FSDP1) over a strata.distributed process group.

Each FSDP unit flattens the parameters of its module (those not inside a nested unit) into one flat
parameter, pads it to a multiple of the group size and keeps this rank's contiguous shard. Forward all-gathers
the shard into the whole flat parameter through an autograd function; the module's parameters become views of
it for the duration of the call. Backward of that function reduce-scatters (averaging) the gradient of the whole
flat parameter into the shard's .grad, so the optimizer works on shards. See docs/DISTRIBUTED.md for what
differs from torch (memory freeing, prefetch, CPU offload)."""

import contextlib
import copy
import math

from ...nn.modules.module import Module
from ._flat_param import FlatParamHandle, ParamInfo, _GatherFlat
from .api import (BackwardPrefetch, CPUOffload, FullOptimStateDictConfig, FullStateDictConfig, MixedPrecision,
                  LocalOptimStateDictConfig, LocalStateDictConfig, ShardedOptimStateDictConfig,
                  ShardedStateDictConfig, ShardingStrategy, StateDictSettings, StateDictType)

__all__ = ["FullyShardedDataParallel", "FLAT_PARAM", "FSDP_PREFIX", "FSDP_WRAPPED_MODULE", "OptimStateKeyType"]

FSDP_WRAPPED_MODULE = "_fsdp_wrapped_module"
FSDP_PREFIX = FSDP_WRAPPED_MODULE + "."
_CHECKPOINT_WRAPPED_MODULE = "_checkpoint_wrapped_module"  # activation checkpointing's wrapper, also dropped
FLAT_PARAM = "_flat_param"


class OptimStateKeyType:
    PARAM_NAME = "param_name"
    PARAM_ID = "param_id"


def _clean(name):
    """A name without FSDP's wrapper components (torch's "clean" fully qualified name)."""
    return ".".join(p for p in name.split(".") if p not in (FSDP_WRAPPED_MODULE, _CHECKPOINT_WRAPPED_MODULE))


def _join(*parts):
    return ".".join(p for p in parts if p)


_STATE_DICT_TYPES = {StateDictType.FULL_STATE_DICT: (FullStateDictConfig, FullOptimStateDictConfig),
                     StateDictType.LOCAL_STATE_DICT: (LocalStateDictConfig, LocalOptimStateDictConfig),
                     StateDictType.SHARDED_STATE_DICT: (ShardedStateDictConfig, ShardedOptimStateDictConfig)}


class FullyShardedDataParallel(Module):
    def __init__(self, module, process_group=None, sharding_strategy=None, cpu_offload=None, auto_wrap_policy=None,
                 backward_prefetch=BackwardPrefetch.BACKWARD_PRE, mixed_precision=None, ignored_modules=None,
                 param_init_fn=None, device_id=None, sync_module_states=False, forward_prefetch=False,
                 limit_all_gathers=True, use_orig_params=False, ignored_states=None, device_mesh=None):
        super().__init__()
        from ... import distributed as dist

        if not isinstance(module, Module):
            raise TypeError(f"FullyShardedDataParallel: module must be an nn.Module, got {type(module).__name__}")
        if isinstance(module, FullyShardedDataParallel):
            raise ValueError("FullyShardedDataParallel: the module is already wrapped by FSDP")
        if not dist.is_initialized():
            raise ValueError("FullyShardedDataParallel: the default process group has not been initialized; "
                             "call init_process_group first")
        sharding_strategy = ShardingStrategy.FULL_SHARD if sharding_strategy is None else sharding_strategy
        if not isinstance(sharding_strategy, ShardingStrategy):
            raise TypeError(f"FullyShardedDataParallel: sharding_strategy must be a ShardingStrategy, got "
                            f"{sharding_strategy!r}")
        if mixed_precision is not None and not isinstance(mixed_precision, MixedPrecision):
            raise TypeError(f"FullyShardedDataParallel: mixed_precision must be a MixedPrecision, got "
                            f"{type(mixed_precision).__name__}")
        if cpu_offload is not None and not isinstance(cpu_offload, CPUOffload):
            raise TypeError(f"FullyShardedDataParallel: cpu_offload must be a CPUOffload, got "
                            f"{type(cpu_offload).__name__}")
        if backward_prefetch is not None and not isinstance(backward_prefetch, BackwardPrefetch):
            raise TypeError(f"FullyShardedDataParallel: backward_prefetch must be a BackwardPrefetch or None, got "
                            f"{backward_prefetch!r}")
        _check_device(device_id)
        if param_init_fn is not None:
            raise NotImplementedError("FullyShardedDataParallel: param_init_fn (deferred initialization of meta-"
                                      "device modules) is not supported by Strata; build the module normally")
        if device_mesh is not None and process_group is not None:
            raise ValueError("FullyShardedDataParallel: give either process_group or device_mesh, not both")
        if ignored_modules is not None and ignored_states is not None:
            raise ValueError("FullyShardedDataParallel: give either ignored_modules or ignored_states, not both")

        self.sharding_strategy = sharding_strategy
        self.cpu_offload = cpu_offload or CPUOffload()
        self.backward_prefetch = backward_prefetch
        self.forward_prefetch = forward_prefetch
        self.limit_all_gathers = limit_all_gathers
        self.mixed_precision = mixed_precision
        self._use_orig_params = use_orig_params
        self._is_root = True
        self._state_dict_type = StateDictType.FULL_STATE_DICT
        self._state_dict_config = FullStateDictConfig()
        self._optim_state_dict_config = FullOptimStateDictConfig()
        self._summoned = False
        self._shard_group, self._replicate_group = self._groups(process_group, device_mesh, sharding_strategy)
        self.process_group = self._shard_group

        ignored_mods, ignored_params = _ignored(module, ignored_modules, ignored_states)
        if auto_wrap_policy is not None:
            from .wrap import _recursive_wrap
            kwargs = dict(process_group=process_group, sharding_strategy=sharding_strategy, cpu_offload=cpu_offload,
                          backward_prefetch=backward_prefetch, mixed_precision=mixed_precision,
                          ignored_modules=None, device_id=device_id, sync_module_states=sync_module_states,
                          forward_prefetch=forward_prefetch, limit_all_gathers=limit_all_gathers,
                          use_orig_params=use_orig_params, device_mesh=device_mesh)
            if process_group is None and sharding_strategy in _HYBRID:  # children share the root's groups
                kwargs["process_group"] = (self._shard_group, self._replicate_group)
            _recursive_wrap(module, auto_wrap_policy, FullyShardedDataParallel,
                            {"modules": {id(m) for m in ignored_mods}, "params": {id(p) for p in ignored_params}},
                            kwargs, only_children=True)
        self._fsdp_wrapped_module = module
        for m in module.modules():
            if isinstance(m, FullyShardedDataParallel):
                m._is_root = False

        infos, params = self._collect(module, ignored_mods, ignored_params)
        if sync_module_states:
            self._broadcast(params + self._own_buffers(module, ignored_mods))
        self._cast_buffers(module, ignored_mods)
        import strata
        with strata.no_grad():
            flat = (strata.cat([p.detach().reshape(-1) for p in params]) if params
                    else strata.zeros(0, dtype=strata.get_default_dtype()))
        mp = mixed_precision
        self._handle = FlatParamHandle(
            infos, flat, self._shard_group, self._replicate_group,
            sharded=sharding_strategy != ShardingStrategy.NO_SHARD, use_orig_params=use_orig_params,
            compute_dtype=mp.param_dtype if mp else None,
            reduce_dtype=(mp.reduce_dtype or mp.param_dtype) if mp else None, pad_to=1) if params else None
        if self._handle is not None and not use_orig_params:
            module.register_parameter(FLAT_PARAM, self._handle.flat_param)
        # where the flat parameter is registered (the wrapped module may later be wrapped again, e.g. by
        # apply_activation_checkpointing)
        object.__setattr__(self, "_flat_param_owner", module)  # not a child module

    # ---- set-up --------------------------------------------------------------------------------------------
    @staticmethod
    def _groups(process_group, device_mesh, strategy):
        """(the group parameters are sharded over, the group gradients are also averaged over or None)."""
        from ... import distributed as dist

        if device_mesh is not None:
            if device_mesh.ndim != 1:
                raise NotImplementedError("FullyShardedDataParallel: only one-dimensional device meshes are "
                                          "supported by Strata")
            process_group = device_mesh.get_group()
        if strategy in _HYBRID:
            if isinstance(process_group, tuple):
                if len(process_group) != 2:
                    raise ValueError("FullyShardedDataParallel: a hybrid strategy's process_group tuple is "
                                     "(intra-node group, inter-node group)")
                return process_group
            if process_group is not None:
                raise ValueError("FullyShardedDataParallel: HYBRID_SHARD takes process_group=None (nodes found "
                                 "from LOCAL_WORLD_SIZE) or a tuple (intra-node group, inter-node group)")
            return _node_groups()
        if isinstance(process_group, tuple):
            raise ValueError(f"FullyShardedDataParallel: a tuple of process groups is for the hybrid strategies "
                             f"only, not {strategy}")
        return (process_group if process_group is not None else dist.group.WORLD), None

    def _collect(self, module, ignored_mods, ignored_params):
        """This unit's parameters: those of ``module`` not inside a nested FSDP unit nor ignored."""
        infos, params, seen, offset = [], [], {}, 0
        dtypes, grads = set(), set()

        def visit(m, path):
            nonlocal offset
            if id(m) in ignored_mods:
                return
            for name, p in list(m._parameters.items()):
                if p is None or id(p) in ignored_params:
                    continue
                if id(p) in seen:
                    seen[id(p)].aliases.append((m, name))
                    continue
                info = ParamInfo(m, name, _join(path, name), p, offset)
                seen[id(p)] = info
                infos.append(info)
                params.append(p)
                dtypes.add(p.dtype)
                grads.add(p.requires_grad)
                offset += p.numel()
            for cname, child in m._modules.items():
                if child is not None and not isinstance(child, FullyShardedDataParallel):
                    visit(child, _join(path, cname))

        visit(module, "")
        if len(dtypes) > 1:
            raise ValueError(f"FullyShardedDataParallel: all parameters of one FSDP unit must have one dtype, got "
                             f"{sorted(str(d) for d in dtypes)}; wrap the modules of other dtypes separately")
        if len(grads) > 1 and not self._use_orig_params:
            frozen = [i.path for i in infos if not i.requires_grad]
            raise ValueError(f"FullyShardedDataParallel: with use_orig_params=False all parameters of one FSDP "
                             f"unit must agree on requires_grad; frozen: {frozen[:5]}. Use use_orig_params=True "
                             f"or wrap the frozen modules separately")
        for p in params:
            if not p.is_floating_point():
                raise ValueError(f"FullyShardedDataParallel: parameters must be floating point, got {p.dtype}")
        return infos, params

    def _own_buffers(self, module, ignored_mods):
        out = []
        for m in module.modules():
            if id(m) not in ignored_mods:
                out.extend(b for b in m._buffers.values() if b is not None)
        return out

    def _broadcast(self, tensors):
        import strata
        from ... import distributed as dist

        src = dist.get_global_rank(self._shard_group, 0)
        with strata.no_grad():
            for t in tensors:
                if t.numel():
                    buf = t.detach().contiguous()
                    dist.broadcast(buf, src=src, group=self._shard_group)
                    if not buf._is_same(t):
                        t.copy_(buf)
            if self._replicate_group is not None:
                rsrc = dist.get_global_rank(self._replicate_group, 0)
                for t in tensors:
                    if t.numel():
                        buf = t.detach().contiguous()
                        dist.broadcast(buf, src=rsrc, group=self._replicate_group)
                        if not buf._is_same(t):
                            t.copy_(buf)

    def _cast_buffers(self, module, ignored_mods):
        """MixedPrecision.buffer_dtype: floating-point buffers are kept in that dtype (the state dict gives them
        back in their original dtype)."""
        self._buffer_dtypes = {}
        mp = self.mixed_precision
        if mp is None or mp.buffer_dtype is None:
            return
        for m in module.modules():
            if id(m) in ignored_mods or isinstance(m, FullyShardedDataParallel) and m is not self:
                continue
            if isinstance(m, tuple(mp._module_classes_to_ignore)):
                continue
            for name, b in list(m._buffers.items()):
                if b is not None and b.is_floating_point() and b.dtype != mp.buffer_dtype:
                    self._buffer_dtypes[(id(m), name)] = b.dtype
                    m._buffers[name] = b.to(mp.buffer_dtype)

    # ---- torch's attributes ---------------------------------------------------------------------------------
    @property
    def module(self):
        return self._fsdp_wrapped_module

    @property
    def _flat_param(self):
        return None if self._handle is None else self._handle.flat_param

    @property
    def rank(self):
        from ... import distributed as dist
        return dist.get_rank(self._shard_group)

    @property
    def world_size(self):
        from ... import distributed as dist
        return dist.get_world_size(self._shard_group)

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name == FSDP_WRAPPED_MODULE:
                raise
            return getattr(self._fsdp_wrapped_module, name)

    def __getitem__(self, key):
        return self._fsdp_wrapped_module.__getitem__(key)

    @staticmethod
    def fsdp_modules(module, root_only=False):
        """The FSDP units in ``module`` (itself included), or only the root ones."""
        units = [m for m in module.modules() if isinstance(m, FullyShardedDataParallel)]
        return [m for m in units if m._is_root] if root_only else units

    def _units(self):
        return FullyShardedDataParallel.fsdp_modules(self)

    def named_parameters(self, *args, **kwargs):
        clean = self._summoned
        for name, p in super().named_parameters(*args, **kwargs):
            yield (name.replace(FSDP_PREFIX, "") if clean else name), p

    def named_buffers(self, *args, **kwargs):
        clean = self._summoned
        for name, b in super().named_buffers(*args, **kwargs):
            yield (name.replace(FSDP_PREFIX, "") if clean else name), b

    # ---- forward --------------------------------------------------------------------------------------------
    def forward(self, *args, **kwargs):
        import strata

        mp = self.mixed_precision
        if mp is not None and mp.param_dtype is not None and (
                (self._is_root and mp.cast_root_forward_inputs) or mp.cast_forward_inputs):
            args, kwargs = _cast_floats((args, kwargs), mp.param_dtype)
        h = self._handle
        if h is None:
            return self._fsdp_wrapped_module(*args, **kwargs)
        if self._summoned:
            raise RuntimeError("FullyShardedDataParallel: forward inside summon_full_params is not supported")
        hooks = contextlib.nullcontext()
        grad = strata.is_grad_enabled() and h.requires_grad
        reshard = self.sharding_strategy in _RESHARD_AFTER_FORWARD
        if grad:
            views = _GatherFlat.get().apply(h.flat_param, h)
            if reshard:
                from ...autograd.graph import saved_tensors_hooks
                hooks = saved_tensors_hooks(*h.saved_tensor_hooks(views[0]))
        else:
            views = h.views(h.gather(h.flat_param, h.compute_dtype))
        h.use_full_views(None, views=views)
        try:
            with hooks:
                out = self._fsdp_wrapped_module(*args, **kwargs)
        finally:
            h.use_sharded_views()
        if grad:
            # the whole gathered tensor (views[0] starts at its beginning), kept unless FULL_SHARD frees it
            kept = None if reshard else views[0].detach().as_strided((h.padded_numel,), (1,), 0)
            self._register_pre_backward(out, kept)
        return out

    def _register_pre_backward(self, out, kept):
        """Before backward enters this unit (a hook on its outputs' gradients), the module's parameters are
        installed again as views of the flat parameter (gathered again for FULL_SHARD, the forward's gathered
        tensor otherwise), made by the gather function so that gradients of code re-run in backward (activation
        checkpointing) are reduced too. They are removed when the unit's gradient has been reduced."""
        h = self._handle
        state = {"done": False, "kept": kept}

        def hook(grad):
            if state["done"]:
                return None
            state["done"] = True
            full, state["kept"] = state["kept"], None  # the hook keeps nothing alive once it has run
            import strata
            with strata.enable_grad():
                if full is None:
                    if h.regathered is None:
                        with strata.no_grad():
                            h.regathered = h.gather(h.flat_param, h.compute_dtype)
                    full = h.regathered
                views = _GatherFlat.get().apply(h.flat_param, h, full)
            h.use_full_views(None, views=views)
            h.backward_views = True
            return None

        for t in _tensors(out):
            if t.requires_grad:
                t.register_hook(hook)

    @contextlib.contextmanager
    def no_sync(self):
        """Gradients are accumulated unsharded on each rank, without communication; the first backward after the
        block reduces the sum. Call on the root unit."""
        if not self._is_root:
            raise RuntimeError("FullyShardedDataParallel.no_sync() must be called on the root FSDP instance")
        handles = [u._handle for u in self._units() if u._handle is not None]
        old = [h.sync_grads for h in handles]
        for h in handles:
            h.sync_grads = False
        try:
            yield
        finally:
            for h, o in zip(handles, old):
                h.sync_grads = o

    # ---- gradient clipping --------------------------------------------------------------------------------
    def clip_grad_norm_(self, max_norm, norm_type=2.0):
        """Clips the gradients of all units so that their global norm (over every rank's shards) is at most
        ``max_norm``; returns that norm (before clipping). Call on the root unit."""
        import strata
        from ... import distributed as dist

        if not self._is_root:
            raise RuntimeError("FullyShardedDataParallel.clip_grad_norm_ should only be called on the root FSDP "
                               "instance")
        norm_type = float(norm_type)
        max_norm = float(max_norm)
        sharded, replicated = [], []
        for u in self._units():
            if u._handle is not None:
                (sharded if u._handle.sharded else replicated).extend(u._handle.shard_grads())
        managed = {id(u._handle.flat_param) for u in self._units() if u._handle is not None}
        managed |= {id(i.orig) for u in self._units() if u._handle is not None for i in u._handle.infos}
        replicated += [p.grad for p in self.parameters() if id(p) not in managed and p.grad is not None]
        dtype = strata.float32

        def local(grads):
            if not grads:
                return strata.zeros((), dtype=dtype)
            if norm_type == math.inf:
                return strata.stack([g.detach().abs().max().to(dtype) if g.numel() else strata.zeros((), dtype=dtype)
                                     for g in grads]).max()
            return sum(g.detach().to(dtype).abs().pow(norm_type).sum() for g in grads)

        s = local(sharded).reshape(1).clone()
        op = dist.ReduceOp.MAX if norm_type == math.inf else dist.ReduceOp.SUM
        dist.all_reduce(s, op=op, group=self._shard_group)
        r = local(replicated).reshape(1)
        if norm_type == math.inf:
            total = strata.maximum(s, r)[0]
        else:
            total = (s + r)[0].pow(1.0 / norm_type)
        coef = max_norm / (float(total) + 1e-6)
        if coef < 1.0:
            with strata.no_grad():
                for g in sharded + replicated:
                    g.mul_(coef)
        return total

    # ---- full parameters ------------------------------------------------------------------------------------
    @staticmethod
    @contextlib.contextmanager
    def summon_full_params(module, recurse=True, writeback=True, rank0_only=False, offload_to_cpu=False,
                           with_grads=False):
        """Inside the block the FSDP units of ``module`` show their whole parameters (original names, shapes and
        full precision) as nn.Parameters; with ``writeback`` changes are copied back into the shards."""
        import strata
        from ... import distributed as dist

        if rank0_only and writeback:
            raise ValueError("summon_full_params: writeback=True and rank0_only=True cannot be combined")
        units = FullyShardedDataParallel.fsdp_modules(module) if recurse else (
            [module] if isinstance(module, FullyShardedDataParallel) else [])
        if any(u._summoned for u in units):
            raise RuntimeError("summon_full_params: the FSDP module's parameters are already summoned")
        done = []
        try:
            for u in units:
                u._summoned = True
                done.append((u, None))
                h = u._handle
                if h is None:
                    continue
                with strata.no_grad():
                    full = h.gather(h.flat_param, h.dtype)
                if not u._use_orig_params:
                    u._flat_param_owner._parameters.pop(FLAT_PARAM, None)
                views = h.use_full_views(full, as_params=True)
                if with_grads:
                    g = h.shard_grad()
                    if g is not None:
                        gf = h.gather(g, h.dtype) if h.sharded else g
                        for info, v in zip(h.infos, views):
                            v.grad = gf[info.offset:info.offset + info.numel].view(info.shape).clone()
                done[-1] = (u, (full, views))
            if rank0_only and dist.get_rank() != 0:
                # other ranks see their shards, as torch's rank0_only does
                for u, state in done:
                    if state is not None:
                        _restore(u)
                done = [(u, None) for u, _ in done]
            yield
        finally:
            for u, state in done:
                u._summoned = False
                if state is None:
                    continue
                h = u._handle
                full, views = state
                if writeback:  # the summoned Parameters share ``full``'s storage
                    with strata.no_grad():
                        h.flat_param.detach().copy_(full[h.shard_start:h.shard_start + h.shard_numel])
                _restore(u)

    # ---- state dicts ---------------------------------------------------------------------------------------
    @staticmethod
    def set_state_dict_type(module, state_dict_type, state_dict_config=None, optim_state_dict_config=None):
        """Sets the state dict type of every FSDP unit in ``module``; returns the previous StateDictSettings."""
        if not isinstance(state_dict_type, StateDictType):
            raise TypeError(f"set_state_dict_type: expected a StateDictType, got {state_dict_type!r}")
        cfg_cls, optim_cls = _STATE_DICT_TYPES[state_dict_type]
        state_dict_config = cfg_cls() if state_dict_config is None else state_dict_config
        optim_state_dict_config = optim_cls() if optim_state_dict_config is None else optim_state_dict_config
        if not isinstance(state_dict_config, cfg_cls):
            raise ValueError(f"set_state_dict_type: {state_dict_type} takes a {cfg_cls.__name__}, got "
                             f"{type(state_dict_config).__name__}")
        if not isinstance(optim_state_dict_config, optim_cls):
            raise ValueError(f"set_state_dict_type: {state_dict_type} takes a {optim_cls.__name__}, got "
                             f"{type(optim_state_dict_config).__name__}")
        units = FullyShardedDataParallel.fsdp_modules(module)
        if not units:
            raise ValueError("set_state_dict_type: the module has no FSDP unit")
        prev = FullyShardedDataParallel.get_state_dict_type(module)
        for u in units:
            u._state_dict_type = state_dict_type
            u._state_dict_config = state_dict_config
            u._optim_state_dict_config = optim_state_dict_config
        return prev

    @staticmethod
    def get_state_dict_type(module):
        units = FullyShardedDataParallel.fsdp_modules(module)
        if not units:
            raise ValueError("get_state_dict_type: the module has no FSDP unit")
        u = units[0]
        for v in units[1:]:
            if v._state_dict_type != u._state_dict_type:
                raise AssertionError("get_state_dict_type: the FSDP units of the module have different state "
                                     "dict types")
        return StateDictSettings(u._state_dict_type, u._state_dict_config, u._optim_state_dict_config)

    @staticmethod
    @contextlib.contextmanager
    def state_dict_type(module, state_dict_type, state_dict_config=None, optim_state_dict_config=None):
        prev = FullyShardedDataParallel.set_state_dict_type(module, state_dict_type, state_dict_config,
                                                            optim_state_dict_config)
        try:
            yield
        finally:
            FullyShardedDataParallel.set_state_dict_type(module, prev.state_dict_type, prev.state_dict_config,
                                                         prev.optim_state_dict_config)

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        if _StateDictPass.active:  # an outer unit's pass: plain traversal
            return super().state_dict(*args, destination=destination, prefix=prefix, keep_vars=keep_vars)
        import strata
        from ... import distributed as dist

        kind, cfg = self._state_dict_type, self._state_dict_config
        out = {} if destination is None else destination
        if kind == StateDictType.LOCAL_STATE_DICT:
            with _StateDictPass():
                sd = super().state_dict(prefix=prefix, keep_vars=keep_vars)
            for k, v in sd.items():
                out[_clean(k)] = v
            return self._restore_buffer_dtypes(out, prefix)
        with FullyShardedDataParallel.summon_full_params(self, writeback=False), _StateDictPass():
            sd = super().state_dict(prefix=prefix, keep_vars=False)
            params = {_clean(prefix + n) for n, _ in Module.named_parameters(self)}
        rank = dist.get_rank(self._shard_group)
        for k, v in sd.items():
            ck = _clean(k)
            if kind == StateDictType.SHARDED_STATE_DICT and ck in params:
                chunks = v.chunk(self.world_size) if v.dim() else [v]
                v = chunks[rank].clone() if rank < len(chunks) else v.new_empty((0,) + tuple(v.shape[1:]))
            else:
                v = v.clone()
            out[ck] = v
        self._restore_buffer_dtypes(out, prefix)
        if kind == StateDictType.FULL_STATE_DICT and cfg.rank0_only and dist.get_rank() != 0:
            for k in list(out):
                del out[k]
        return out

    def _restore_buffer_dtypes(self, sd, prefix):
        for u in self._units():
            if not u._buffer_dtypes:
                continue
            for name, m in Module.named_modules(self, prefix=prefix.rstrip(".")):
                for bname, b in m._buffers.items():
                    key = _clean(_join(name, bname))
                    dt = u._buffer_dtypes.get((id(m), bname))
                    if dt is not None and key in sd:
                        sd[key] = sd[key].to(dt)
        return sd

    def load_state_dict(self, state_dict, strict=True, assign=False):
        from ... import distributed as dist
        import strata

        if not hasattr(state_dict, "keys"):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        kind = self._state_dict_type
        if kind == StateDictType.LOCAL_STATE_DICT:
            with _StateDictPass():
                actual = list(super().state_dict(keep_vars=True))
                return self._load_mapped(state_dict, actual, strict, assign)
        with FullyShardedDataParallel.summon_full_params(self, writeback=True), _StateDictPass():
            actual = list(super().state_dict(keep_vars=True))
            sd = dict(state_dict)
            if kind == StateDictType.SHARDED_STATE_DICT:
                params = {_clean(n): p for n, p in Module.named_parameters(self)}
                n = self.world_size
                for key in [_clean(k) for k in actual]:  # the same order on every rank
                    if key not in params or key not in sd:
                        continue
                    full = params[key]
                    local = sd[key].detach().reshape((-1,) + tuple(full.shape[1:])) if full.dim() else sd[key]
                    if not full.dim():
                        continue
                    rows = math.ceil(full.shape[0] / n)
                    pad = strata.zeros((rows,) + tuple(full.shape[1:]), dtype=full.dtype)
                    pad[:local.shape[0]] = local
                    parts = [strata.empty_like(pad) for _ in range(n)]
                    dist.all_gather(parts, pad, group=self._shard_group)
                    sd[key] = strata.cat(parts)[:full.shape[0]]
            return self._load_mapped(sd, actual, strict, assign)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        # Reached from a parent that is not FSDP (Module.load_state_dict's recursion) with a full state dict:
        # turn this unit's clean keys into the names the plain recursion expects, the flat parameter's shard
        # computed from the whole tensors given (every rank has them), before the children are visited.
        if not _StateDictPass.active and self._state_dict_type == StateDictType.FULL_STATE_DICT:
            self._translate_full(state_dict, prefix)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)

    def _translate_full(self, sd, prefix):
        import strata

        inner = prefix + FSDP_PREFIX
        for k in [k for k in sd if k.startswith(prefix) and not k.startswith(inner)]:
            sd[inner + k[len(prefix):]] = sd.pop(k)
        h = self._handle
        if h is None or any(inner + i.path not in sd for i in h.infos):
            return  # nothing to shard, or keys missing: the usual missing-key report follows
        with strata.no_grad():
            flat = strata.cat([sd.pop(inner + i.path).detach().reshape(-1).to(h.dtype) for i in h.infos])
            if h.padded_numel > flat.numel():
                flat = strata.cat([flat, strata.zeros(h.padded_numel - flat.numel(), dtype=h.dtype)])
            shard = flat[h.shard_start:h.shard_start + h.shard_numel]
        paths = {id(m): n for n, m in Module.named_modules(self)}
        if not h.use_orig_params:
            sd[prefix + _join(paths[id(self._flat_param_owner)], FLAT_PARAM)] = shard
            return
        for info in h.infos:
            _, s, n = h.shard_range(info)
            for module, name in [(info.module, info.name)] + info.aliases:
                sd[prefix + _join(paths[id(module)], name)] = shard[s:s + n]

    def _load_mapped(self, state_dict, actual, strict, assign):
        """Loads a state dict with clean names into the module, whose names (``actual``) carry FSDP's wrapper
        components; the result and errors speak of clean names."""
        mapping = {_clean(k): k for k in actual}
        mapped, unexpected = {}, []
        for k, v in state_dict.items():
            if k in mapping:
                mapped[mapping[k]] = v
            else:
                unexpected.append(k)
        try:
            res = super().load_state_dict(mapped, strict=False, assign=assign)
        except RuntimeError as e:
            raise RuntimeError(str(e).replace(FSDP_PREFIX, "")) from None
        missing = [_clean(k) for k in res.missing_keys]
        missing += [k for k in mapping if mapping[k] not in mapped]
        missing = list(dict.fromkeys(missing))
        if strict and (missing or unexpected):
            msgs = []
            if unexpected:
                msgs.append("Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ". ")
            if missing:
                msgs.insert(0, "Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ". ")
            raise RuntimeError("Error(s) in loading state_dict for FullyShardedDataParallel:\n\t" + "\n\t".join(msgs))
        from ...nn.modules.module import _IncompatibleKeys
        return _IncompatibleKeys(missing, unexpected)

    # ---- optimizer state dicts ------------------------------------------------------------------------------
    def _param_owners(self):
        """{id(optimizer-visible parameter): (handle, list of (info, fqn))} for every unit."""
        owners = {}
        for name, u in Module.named_modules(self):
            h = u._handle if isinstance(u, FullyShardedDataParallel) else None
            if h is None:
                continue
            base = _clean(_join(name, FSDP_WRAPPED_MODULE))
            if h.use_orig_params:
                for info in h.infos:
                    owners[id(info.orig)] = (h, [(info, _join(base, info.path))])
            else:
                owners[id(h.flat_param)] = (h, [(info, _join(base, info.path)) for info in h.infos])
        return owners

    @staticmethod
    def optim_state_dict(model, optim, optim_state_dict=None, group=None):
        """The optimizer's state keyed by the original parameters' names, each state tensor whole (gathered
        from the shards): {"state": {fqn: {...}}, "param_groups": [{..., "params": [fqn, ...]}]}. With
        FullOptimStateDictConfig(rank0_only=True) ranks other than 0 get an empty dict."""
        import strata
        from ... import distributed as dist

        root = _root_of(model, "optim_state_dict")
        osd = optim.state_dict() if optim_state_dict is None else optim_state_dict
        owners = root._param_owners()
        params = [p for g in optim.param_groups for p in g["params"]]
        names = {}
        for p in params:
            if id(p) in owners:
                names[id(p)] = [fqn for _, fqn in owners[id(p)][1]]
            else:
                fqn = _name_of(root, p)
                names[id(p)] = [fqn]
        state = {}
        # Parameters of one unit with use_orig_params=True are gathered together.
        by_handle = {}
        for idx, p in enumerate(params):
            st = osd["state"].get(idx)
            owner = owners.get(id(p))
            if owner is None:
                if st is not None:
                    state[names[id(p)][0]] = {k: (v.clone() if isinstance(v, strata.Tensor) else v)
                                              for k, v in st.items()}
                continue
            h, members = owner
            if h.use_orig_params:
                by_handle.setdefault(id(h), (h, {}))[1][id(members[0][0])] = (members[0], st)
                continue
            state.update(_unflatten_state(h, [(info, fqn, st) for info, fqn in members], st))
        for h, entries in by_handle.values():
            # a state tensor of the whole shard, zeros where a parameter has no state
            st_any = next((st for _, st in entries.values() if st), None)
            if st_any is None:
                continue
            flat_state = {}
            for key, v in st_any.items():
                if isinstance(v, strata.Tensor) and v.dim() == 1 and _is_shard_state(h, entries, key):
                    buf = strata.zeros(h.shard_numel, dtype=v.dtype)
                    for (info, _), st in entries.values():
                        if st is not None and key in st:
                            _, s, n = h.shard_range(info)
                            buf[s:s + n] = st[key].reshape(-1)
                    flat_state[key] = buf
                else:
                    flat_state[key] = v
            members = [(info, fqn, st) for (info, fqn), st in entries.values() if st is not None]
            state.update(_unflatten_state(h, members, flat_state))
        groups = []
        for g, og in zip(optim.param_groups, osd["param_groups"]):
            ng = {k: v for k, v in og.items() if k != "params"}
            ng["params"] = [fqn for p in g["params"] for fqn in names[id(p)]]
            groups.append(ng)
        cfg = root._optim_state_dict_config
        if isinstance(cfg, FullOptimStateDictConfig) and cfg.rank0_only and dist.get_rank() != 0:
            return {}
        return {"state": state, "param_groups": groups}

    @staticmethod
    def full_optim_state_dict(model, optim, optim_input=None, rank0_only=True, group=None):
        with FullyShardedDataParallel.state_dict_type(model, StateDictType.FULL_STATE_DICT,
                                                      optim_state_dict_config=FullOptimStateDictConfig(
                                                          rank0_only=rank0_only)):
            return FullyShardedDataParallel.optim_state_dict(model, optim)

    @staticmethod
    def optim_state_dict_to_load(model, optim, optim_state_dict, is_named_optimizer=False, load_directly=False,
                                 group=None):
        """Turns a state dict from optim_state_dict (whole tensors keyed by names) into what this rank's
        ``optim.load_state_dict`` takes (this rank's shards keyed by index); with load_directly it is loaded."""
        import strata

        if is_named_optimizer:
            raise NotImplementedError("optim_state_dict_to_load: is_named_optimizer=True is not supported")
        if not isinstance(optim_state_dict, dict) or "state" not in optim_state_dict or \
                "param_groups" not in optim_state_dict:
            raise ValueError("optim_state_dict_to_load: expected a dict with 'state' and 'param_groups' as "
                             "returned by FSDP.optim_state_dict")
        root = _root_of(model, "optim_state_dict_to_load")
        owners = root._param_owners()
        full_state = optim_state_dict["state"]
        params = [p for g in optim.param_groups for p in g["params"]]
        state = {}
        for idx, p in enumerate(params):
            owner = owners.get(id(p))
            if owner is None:
                fqn = _name_of(root, p)
                if fqn in full_state:
                    state[idx] = dict(full_state[fqn])
                continue
            h, members = owner
            present = [(info, fqn) for info, fqn in members if fqn in full_state]
            if not present:
                continue
            if len(present) != len(members):
                raise ValueError(f"optim_state_dict_to_load: state for {[f for _, f in present]} but not for "
                                 f"{[f for i, f in members if (i, f) not in present]}, which share one flat "
                                 f"parameter")
            first = full_state[present[0][1]]
            st = {}
            for key, v in first.items():
                if isinstance(v, strata.Tensor) and v.dim() > 0 and tuple(v.shape) == present[0][0].shape:
                    flat = strata.zeros(h.padded_numel, dtype=v.dtype)
                    for info, fqn in members:
                        flat[info.offset:info.offset + info.numel] = full_state[fqn][key].reshape(-1)
                    shard = flat[h.shard_start:h.shard_start + h.shard_numel]
                    if h.use_orig_params:
                        _, s, n = h.shard_range(members[0][0])
                        shard = shard[s:s + n]
                    st[key] = shard.clone()
                else:
                    st[key] = v.clone() if isinstance(v, strata.Tensor) else copy.deepcopy(v)
            state[idx] = st
        groups = []
        cur = optim.state_dict()["param_groups"]
        if len(cur) != len(optim_state_dict["param_groups"]):
            raise ValueError(f"optim_state_dict_to_load: the state dict has {len(optim_state_dict['param_groups'])} "
                             f"param groups, the optimizer {len(cur)}")
        for og, ng in zip(cur, optim_state_dict["param_groups"]):
            g = {k: v for k, v in ng.items() if k != "params"}
            g["params"] = og["params"]
            groups.append(g)
        out = {"state": state, "param_groups": groups}
        if load_directly:
            optim.load_state_dict(out)
        return out

    @staticmethod
    def shard_full_optim_state_dict(full_optim_state_dict, model, optim_input=None, optim=None):
        """The older name of optim_state_dict_to_load (every rank holds the full state dict)."""
        if optim is None:
            raise NotImplementedError("FSDP.shard_full_optim_state_dict: pass optim= (optim_input is not supported)")
        return FullyShardedDataParallel.optim_state_dict_to_load(model, optim, full_optim_state_dict)

    @staticmethod
    def scatter_full_optim_state_dict(full_optim_state_dict, model, optim_input=None, optim=None, group=None):
        """As shard_full_optim_state_dict, with the full state dict on rank 0 only (others pass None)."""
        from ... import distributed as dist

        box = [full_optim_state_dict if dist.get_rank() == 0 else None]
        dist.broadcast_object_list(box, src=0)
        return FullyShardedDataParallel.shard_full_optim_state_dict(box[0], model, optim_input, optim)

    def apply(self, fn):
        """Module.apply with the whole parameters in place (summon_full_params, written back), so that
        initialisation functions see and change the original parameters."""
        if not self._is_root or self._summoned:
            return super().apply(fn)
        with FullyShardedDataParallel.summon_full_params(self, writeback=True):
            return super().apply(fn)

    def register_comm_hook(self, state, hook):
        raise NotImplementedError("FullyShardedDataParallel.register_comm_hook is not implemented in Strata")

    def extra_repr(self):
        return ""


_HYBRID = (ShardingStrategy.HYBRID_SHARD, ShardingStrategy._HYBRID_SHARD_ZERO2)
_RESHARD_AFTER_FORWARD = (ShardingStrategy.FULL_SHARD, ShardingStrategy.HYBRID_SHARD)


class _StateDictPass:
    """While set, nested units' state_dict() is the plain traversal (the root does the FSDP work)."""
    active = False

    def __enter__(self):
        self.old = _StateDictPass.active
        _StateDictPass.active = True
        return self

    def __exit__(self, *exc):
        _StateDictPass.active = self.old


def _restore(u):
    h = u._handle
    if h is None:
        return
    h.use_sharded_views()
    if not u._use_orig_params:
        u._flat_param_owner._parameters[FLAT_PARAM] = h.flat_param


def _is_shard_state(h, entries, key):
    for (info, _), st in entries.values():
        if st is not None and key in st:
            v = st[key]
            _, _, n = h.shard_range(info)
            if v.dim() != 1 or v.numel() != n:
                return False
    return True


def _unflatten_state(h, members, st):
    """Per-parameter whole state from one flat parameter's shard-shaped state ``st``."""
    import strata

    if st is None:
        return {}
    gathered = {}
    for key, v in st.items():
        if isinstance(v, strata.Tensor) and v.dim() == 1 and v.numel() == h.shard_numel:
            gathered[key] = h.gather(v, v.dtype) if h.sharded else v
    out = {}
    for info, fqn, _ in members:
        ps = {}
        for key, v in st.items():
            if key in gathered:
                ps[key] = gathered[key][info.offset:info.offset + info.numel].view(info.shape).clone()
            else:
                ps[key] = v.clone() if isinstance(v, strata.Tensor) else copy.deepcopy(v)
        out[fqn] = ps
    return out


def _root_of(model, what):
    if isinstance(model, FullyShardedDataParallel):
        return model
    roots = FullyShardedDataParallel.fsdp_modules(model, root_only=True)
    if len(roots) != 1:
        raise ValueError(f"{what}: expected a model with one root FSDP unit, found {len(roots)}")
    return roots[0]


def _name_of(root, p):
    for n, q in Module.named_parameters(root):
        if q is p:
            return _clean(n)
    raise ValueError(f"FSDP optimizer state: a parameter of shape {tuple(p.shape)} in the optimizer is not a "
                     f"parameter of the model")


def _tensors(obj):
    from ... import Tensor
    if isinstance(obj, Tensor):
        yield obj
    elif isinstance(obj, (tuple, list)):
        for o in obj:
            yield from _tensors(o)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from _tensors(o)


def _cast_floats(obj, dtype):
    from ... import Tensor
    if isinstance(obj, Tensor):
        return obj.to(dtype) if obj.is_floating_point() and obj.dtype != dtype else obj
    if isinstance(obj, tuple):
        return tuple(_cast_floats(o, dtype) for o in obj)
    if isinstance(obj, list):
        return [_cast_floats(o, dtype) for o in obj]
    if isinstance(obj, dict):
        return {k: _cast_floats(v, dtype) for k, v in obj.items()}
    return obj


def _check_device(device_id):
    if device_id is None:
        return
    import strata
    dev = device_id if isinstance(device_id, strata.device) else (
        strata.device(device_id) if isinstance(device_id, str) else None)
    if dev is None or dev.type != "cpu":
        raise ValueError(f"FullyShardedDataParallel: device_id={device_id!r}: this Strata build has CPU tensors "
                         f"only (give None or torch.device('cpu'))")


def _ignored(module, ignored_modules, ignored_states):
    from ...nn import Parameter
    mods, params = [], []
    items = list(ignored_modules or []) + list(ignored_states or [])
    for x in items:
        if isinstance(x, FullyShardedDataParallel):
            raise ValueError("FullyShardedDataParallel: ignored_modules must not contain FSDP modules")
        if isinstance(x, Module):
            for m in x.modules():
                mods.append(m)
                params.extend(m.parameters(recurse=False))
        elif isinstance(x, Parameter):
            params.append(x)
        else:
            raise TypeError(f"FullyShardedDataParallel: ignored_modules/ignored_states take modules and "
                            f"parameters, got {type(x).__name__}")
    return {id(m) for m in mods}, {id(p) for p in params}


def _node_groups():
    """HYBRID_SHARD's groups from LOCAL_WORLD_SIZE: the ranks of this node, and the ranks with this local rank
    on every node (None on one node)."""
    import os
    from ... import distributed as dist

    world, rank = dist.get_world_size(), dist.get_rank()
    local = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    if local <= 0 or world % local:
        raise ValueError(f"FullyShardedDataParallel: HYBRID_SHARD needs the world size ({world}) to be a multiple "
                         f"of LOCAL_WORLD_SIZE ({local})")
    if local == world:
        return dist.group.WORLD, None
    shard = replicate = None
    for node in range(world // local):
        g = dist.new_group(list(range(node * local, (node + 1) * local)))
        if rank // local == node:
            shard = g
    for lr in range(local):
        g = dist.new_group(list(range(lr, world, local)))
        if rank % local == lr:
            replicate = g
    return shard, replicate


FSDP = FullyShardedDataParallel

from strata._missing import module_getattr as _module_getattr  # noqa: E402

__getattr__ = _module_getattr(__name__)
