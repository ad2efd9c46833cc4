"""torch.distributed.checkpoint.state_dict for plain, DistributedDataParallel and FullyShardedDataParallel modules
(FSDP's state is given whole, gathered from the shards: Strata has no DTensor state dicts).

Keys are the model's fully qualified names without the wrappers' prefixes: DDP's "module." (and torch.compile's
"_orig_mod.") are dropped, so a checkpoint taken with DDP loads into the bare model and back. Optimizer state dicts
are keyed by those names instead of parameter indices: {"state": {fqn: {...}}, "param_groups": [{..., "params":
[fqn, ...]}]}, several optimizers merged into one. An optimizer with no state yet is given its state first (a step
with zero gradients and lr 0, as torch does), so that a checkpoint load has tensors to load into.
"""

from dataclasses import dataclass

import strata

__all__ = ["StateDictOptions", "get_model_state_dict", "set_model_state_dict", "get_optimizer_state_dict",
           "set_optimizer_state_dict", "get_state_dict", "set_state_dict"]

_WRAPPER_NAMES = ("module", "_orig_mod")


@dataclass
class StateDictOptions:
    """full_state_dict: every value whole (plain tensors already are); cpu_offload: values on the CPU, and with
    full_state_dict only rank 0 gets them (the others an empty dict), as torch; ignore_frozen_params: leave out
    parameters that do not require grad; strict: set_model_state_dict's strictness."""
    full_state_dict: bool = False
    cpu_offload: bool = False
    ignore_frozen_params: bool = False
    keep_submodule_prefixes: bool = True
    strict: bool = True
    broadcast_from_rank0: bool = False
    flatten_optimizer_state_dict: bool = False
    dsd_fqn_modifiers: str = "_fqn_modifiers"


def _is_wrapper(m):
    from strata.nn.parallel import DistributedDataParallel

    return isinstance(m, DistributedDataParallel) or type(m).__name__ == "OptimizedModule"


def _fqn(model, name):
    """name (a key of model.state_dict() or named_parameters()) without the wrappers' segments."""
    parts, out, m = name.split("."), [], model
    for p in parts:
        if m is not None and _is_wrapper(m) and p in _WRAPPER_NAMES:
            m = getattr(m, p, None)
            continue
        out.append(p)
        m = getattr(m, p, None) if m is not None else None
    return ".".join(out)


def _fsdp_root(model):
    """The root FSDP unit of ``model`` (FSDP's state dicts speak whole tensors with clean names), or None."""
    from ..fsdp import FullyShardedDataParallel as FSDP

    if isinstance(model, FSDP):
        return model
    if any(isinstance(m, FSDP) for m in model.modules()):
        raise NotImplementedError("distributed.checkpoint.state_dict: FSDP units inside a model that is not itself "
                                  "wrapped by FSDP are not supported; wrap the whole model with FSDP")
    return None


def _full(model):
    """FSDP's FULL_STATE_DICT on every rank for the duration of the block (nothing for other models)."""
    import contextlib
    root = _fsdp_root(model)
    if root is None:
        return contextlib.nullcontext()
    from ..fsdp import FullyShardedDataParallel as FSDP, FullStateDictConfig, FullOptimStateDictConfig, StateDictType
    return FSDP.state_dict_type(root, StateDictType.FULL_STATE_DICT, FullStateDictConfig(rank0_only=False),
                                FullOptimStateDictConfig(rank0_only=False))


def _options(options, what):
    if options is None:
        return StateDictOptions()
    if not isinstance(options, StateDictOptions):
        raise TypeError(f"{what}: options must be a StateDictOptions, got {type(options).__name__}")
    if options.broadcast_from_rank0:
        raise NotImplementedError(f"{what}: broadcast_from_rank0 is not supported by Strata")
    return options


def _finish(sd, opts):
    if not (opts.full_state_dict or opts.cpu_offload):
        return sd
    from .. import get_rank, is_initialized

    if opts.full_state_dict:  # DTensors gathered whole (collective: every rank, same order)
        sd = _map_tensors(sd, lambda v: v.full_tensor() if getattr(v, "_strata_dtensor", False) else v)
    if opts.full_state_dict and opts.cpu_offload and is_initialized() and get_rank() != 0:
        return {}

    def cpu(v):
        if isinstance(v, strata.Tensor):
            return v.detach().to("cpu")
        if isinstance(v, dict):
            return {k: cpu(x) for k, x in v.items()}
        if isinstance(v, list):
            return [cpu(x) for x in v]
        return v

    return cpu(sd) if opts.cpu_offload else sd


def _check_model(model, what):
    if not isinstance(model, strata.nn.Module):
        raise TypeError(f"{what}: model must be an nn.Module, got {type(model).__name__}")


def _frozen(model):
    return {_fqn(model, n) for n, p in model.named_parameters() if not p.requires_grad}


def get_model_state_dict(model, *, submodules=None, options=None):
    what = "get_model_state_dict"
    _check_model(model, what)
    opts = _options(options, what)
    if submodules is not None:
        raise NotImplementedError(f"{what}: submodules is not supported (torch deprecates it)")
    with strata.no_grad(), _full(model):
        raw = model.state_dict()
    frozen = _frozen(model) if opts.ignore_frozen_params else set()
    sd = {}
    for k, v in raw.items():
        f = _fqn(model, k)
        if f in frozen:
            continue
        sd[f] = v.detach() if isinstance(v, strata.Tensor) else v
    return _finish(sd, opts)


def set_model_state_dict(model, model_state_dict, *, options=None):
    """Loads fqn-keyed values into the model (DDP's prefix added back); returns load_state_dict's
    (missing_keys, unexpected_keys), whose names keep the wrapper's prefix, as torch's."""
    what = "set_model_state_dict"
    _check_model(model, what)
    opts = _options(options, what)
    with _full(model):
        to_fqn = {k: _fqn(model, k) for k in model.state_dict()}
        from_fqn = {f: k for k, f in to_fqn.items()}
        sd = {from_fqn.get(f, f): v for f, v in model_state_dict.items()}
        # a whole tensor for a DTensor parameter (full_state_dict): this rank's piece of it
        current = model.state_dict(keep_vars=True)
        for k, v in list(sd.items()):
            cur = current.get(k)
            if getattr(cur, "_strata_dtensor", False) and isinstance(v, strata.Tensor) and \
                    not getattr(v, "_strata_dtensor", False) and tuple(v.shape) == tuple(cur._spec.shape):
                from ..tensor._api import _local_piece

                sd[k] = _local_piece(v.detach(), cur._spec)
        # torch returns load_state_dict's own result: its keys keep the wrapper's prefix ("module.")
        return model.load_state_dict(sd, strict=opts.strict)


def _optimizers(optimizers, what):
    if isinstance(optimizers, strata.optim.Optimizer):
        return [optimizers]
    opts = list(optimizers)
    if not opts or not all(isinstance(o, strata.optim.Optimizer) for o in opts):
        raise TypeError(f"{what}: optimizers must be an Optimizer or a non-empty sequence of them")
    return opts


def _map_tensors(v, fn):
    if isinstance(v, strata.Tensor):
        return fn(v)
    if isinstance(v, dict):
        return {k: _map_tensors(x, fn) for k, x in v.items()}
    if isinstance(v, list):
        return [_map_tensors(x, fn) for x in v]
    return v


def _param_fqns(model):
    """id(parameter) -> fqn."""
    return {id(p): _fqn(model, n) for n, p in model.named_parameters(remove_duplicate=False)}


def _init_optim_state(optim):
    if optim.state:
        return
    params = [p for g in optim.param_groups for p in g["params"]]
    if any(p.grad is not None for p in params):
        return
    for p in params:
        if p.requires_grad:
            p.grad = strata.zeros_like(p)
    lrs = []
    for g in optim.param_groups:
        if "lr" in g:
            lrs.append(g["lr"])
            g["lr"] = strata.tensor(0.0) if isinstance(g["lr"], strata.Tensor) else 0.0
    optim.step()
    for g in optim.param_groups:
        if "lr" in g:
            g["lr"] = lrs.pop(0)
    optim.zero_grad(set_to_none=True)


def get_optimizer_state_dict(model, optimizers, *, submodules=None, options=None):
    what = "get_optimizer_state_dict"
    _check_model(model, what)
    opts = _options(options, what)
    root = _fsdp_root(model)
    if root is not None:  # whole state tensors keyed by the original names, gathered from the shards
        from ..fsdp import FullyShardedDataParallel as FSDP
        state, groups = {}, []
        with _full(model):
            for optim in _optimizers(optimizers, what):
                _init_optim_state(optim)
                osd = FSDP.optim_state_dict(root, optim)
                state.update(osd["state"])
                groups.extend(osd["param_groups"])
        return _finish({"state": state, "param_groups": groups}, opts)
    names = _param_fqns(model)
    state, groups = {}, []
    for optim in _optimizers(optimizers, what):
        _init_optim_state(optim)
        osd = optim.state_dict()
        # state_dict() numbers parameters in param_groups order
        idx_to_fqn, idx_to_param = {}, {}
        i = 0
        for g in optim.param_groups:
            for p in g["params"]:
                if id(p) not in names:
                    raise ValueError(f"{what}: the optimizer holds a parameter that is not one of the model's")
                idx_to_fqn[i], idx_to_param[i] = names[id(p)], p
                i += 1
        for idx, s in osd["state"].items():
            state[idx_to_fqn[idx]] = {k: _state_value(v, idx_to_param[idx]) for k, v in s.items()}
        for g in osd["param_groups"]:
            g = dict(g)
            g["params"] = [idx_to_fqn[idx] for idx in g["params"]]
            groups.append(g)
    return _finish({"state": state, "param_groups": groups}, opts)


def _state_value(v, p):
    """An optimizer state value; for a DTensor parameter, a state tensor shaped like its local shard is returned as
    a DTensor with the parameter's placements (sharing storage), as torch's optimizer state of DTensors is."""
    if not isinstance(v, strata.Tensor):
        return v
    if getattr(p, "_strata_dtensor", False) and not getattr(v, "_strata_dtensor", False) and \
            tuple(v.shape) == tuple(p.shape) and v.dim() > 0:
        from ..tensor._api import _wrap

        return _wrap(strata.Tensor.detach(v), p._spec)
    return v.detach()


def set_optimizer_state_dict(model, optimizers, optim_state_dict, *, options=None):
    what = "set_optimizer_state_dict"
    _check_model(model, what)
    _options(options, what)
    root = _fsdp_root(model)
    if root is not None:
        from ..fsdp import FullyShardedDataParallel as FSDP
        for optim in _optimizers(optimizers, what):
            _init_optim_state(optim)
            mine = {id(p) for g in optim.param_groups for p in g["params"]}
            owners = root._param_owners()
            fqns = set()
            for pid, (h, members) in owners.items():
                if pid in mine:
                    fqns.update(f for _, f in members)
            part = {"state": {k: v for k, v in optim_state_dict["state"].items() if k in fqns},
                    "param_groups": [g for g in optim_state_dict["param_groups"] if set(g["params"]) & fqns]}
            FSDP.optim_state_dict_to_load(root, optim, part, load_directly=True)
        return
    names = _param_fqns(model)
    st, groups = optim_state_dict["state"], optim_state_dict["param_groups"]
    for optim in _optimizers(optimizers, what):
        my_groups, my_state = [], {}
        i = 0
        for g in optim.param_groups:
            fqns = [names[id(p)] for p in g["params"]]
            match = [sg for sg in groups if set(fqns) <= set(sg["params"])]
            if not match:
                raise ValueError(f"{what}: no param group of the state dict holds the parameters {fqns}")
            ng = {k: v for k, v in match[0].items() if k != "params"}
            ng["params"] = list(range(i, i + len(fqns)))
            for j, f in enumerate(fqns):
                if f in st:
                    my_state[i + j] = st[f]
            i += len(fqns)
            my_groups.append(ng)
        optim.load_state_dict({"state": my_state, "param_groups": my_groups})


def get_state_dict(model, optimizers, *, submodules=None, options=None):
    """(model state dict, optimizer state dict)."""
    return (get_model_state_dict(model, submodules=submodules, options=options),
            get_optimizer_state_dict(model, optimizers, submodules=submodules, options=options))


def set_state_dict(model, optimizers, *, model_state_dict, optim_state_dict, options=None):
    """Loads both; returns set_model_state_dict's (missing_keys, unexpected_keys)."""
    res = set_model_state_dict(model, model_state_dict, options=options)
    if optim_state_dict:
        set_optimizer_state_dict(model, optimizers, optim_state_dict, options=options)
    return res

# Imported on first use, after strata's import gave its modules their miss hook: a torch name Strata lacks
# says "not implemented yet" here too.
from strata._missing import module_getattr as _module_getattr  # noqa: E402

__getattr__ = _module_getattr(__name__)
