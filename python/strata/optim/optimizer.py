"""strata.optim.Optimizer: the base class of every optimizer (torch.optim.Optimizer).

Parameters live in ``param_groups`` (a list of dicts, each holding ``params`` plus
its hyper-parameters); per-parameter state lives in ``state``, a dict keyed by the
parameter tensor itself (tensors hash by identity). ``state_dict()`` uses torch's
layout -- state keyed by the parameter's integer position across all groups, and
``params`` in each group replaced by those positions -- so a saved dict does not
hold the parameters and can be loaded into a fresh optimizer built over new ones.
"""

import copy
import functools
import warnings
from collections import OrderedDict, defaultdict
from itertools import chain

from .. import _C
from .._grad_mode import no_grad, enable_grad

Tensor = _C.Tensor

__all__ = ["Optimizer", "required"]


class _RequiredParameter:
    """Marks a hyper-parameter that has no default and must be given per group or to the constructor."""

    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


def _grad_of(p):
    # Before autograd lands, tensors carry `grad` only when a caller set it as a plain attribute.
    return getattr(p, "grad", None)


def _wrap_step(step):
    if getattr(step, "_strata_hooked", False):
        return step

    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        for hook in list(self._step_pre_hooks.values()):
            res = hook(self, args, kwargs)
            if res is not None:
                if not (isinstance(res, tuple) and len(res) == 2):
                    raise RuntimeError(f"{hook} must return None or a tuple of (new_args, new_kwargs), but got {res}.")
                args, kwargs = res
        out = step(self, *args, **kwargs)
        # LR schedulers read this flag to warn when they are stepped before the optimizer.
        self._opt_called = True
        for hook in list(self._step_post_hooks.values()):
            hook(self, args, kwargs)
        return out

    wrapper._strata_hooked = True
    return wrapper


class Optimizer:
    """Base class: subclasses pass their hyper-parameter defaults and implement ``step``.

    ``params`` is an iterable of tensors, or of dicts that each define a parameter
    group (``{"params": [...], "lr": 0.1}``); keys a group leaves out take the
    value from ``defaults``."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # Wrap each subclass's step once so step hooks run and schedulers can tell it was called.
        if "step" in cls.__dict__:
            cls.step = _wrap_step(cls.__dict__["step"])

    def __init__(self, params, defaults):
        self.defaults = defaults
        self._step_pre_hooks = OrderedDict()
        self._step_post_hooks = OrderedDict()
        self._hook_id = 0
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, "
                            f"but got {type(params).__module__}.{type(params).__name__}")
        self.state = defaultdict(dict)
        self.param_groups = []
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for group in param_groups:
            self.add_param_group(group)

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    # Param-group options an older pickle may lack, filled in on unpickling (each optimizer lists its own).
    _group_defaults = {}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.__dict__.setdefault("_step_pre_hooks", OrderedDict())
        self.__dict__.setdefault("_step_post_hooks", OrderedDict())
        self.__dict__.setdefault("_hook_id", 0)
        self._setdefault_groups(**self._group_defaults)

    def _setdefault_groups(self, **defaults):
        """Fills options an older pickle or state dict lacks in every param group (__setstate__ passes
        the class's _group_defaults)."""
        for group in self.param_groups:
            for key, value in defaults.items():
                group.setdefault(key, value)

    def __repr__(self):
        lines = [self.__class__.__name__ + " ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for key in sorted(group):
                if key != "params":
                    lines.append(f"    {key}: {group[key]}")
        lines.append(")")
        return "\n".join(lines)

    def add_param_group(self, param_group):
        """Adds a group of parameters (with optional per-group hyper-parameters) to ``param_groups``."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            param_group["params"] = [params]
        elif isinstance(params, (set, frozenset)):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the ordering "
                            "of tensors in sets will change between runs. Please use a list instead.")
        else:
            param_group["params"] = list(params)
        for p in param_group["params"]:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but one of the params is "
                                f"{type(p).__module__}.{type(p).__name__}")
            if not getattr(p, "is_leaf", True):
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(f"parameter group didn't specify a value of required optimization parameter {name}")
            param_group.setdefault(name, default)
        ids = [id(p) for p in param_group["params"]]
        if len(ids) != len(set(ids)):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; in future, this will "
                          "cause an error; see github.com/pytorch/pytorch/issues/40967 for more information",
                          stacklevel=3)
        existing = set()
        for group in self.param_groups:
            existing.update(id(p) for p in group["params"])
        if not existing.isdisjoint(ids):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    def zero_grad(self, set_to_none=True):
        """Resets the gradients of all parameters: to None (the default) or to zeros in place."""
        for group in self.param_groups:
            for p in group["params"]:
                g = _grad_of(p)
                if g is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    if getattr(g, "grad_fn", None) is not None:
                        g.detach_()
                    elif getattr(g, "requires_grad", False):
                        g.requires_grad_(False)
                    g.zero_()

    def step(self, closure=None):
        raise NotImplementedError(f"{self.__class__.__name__}.step is not implemented")

    # ---- hooks ---------------------------------------------------------------------------------------------
    def _add_hook(self, table, hook):
        handle_id = self._hook_id
        self._hook_id += 1
        table[handle_id] = hook
        return _RemovableHandle(table, handle_id)

    def register_step_pre_hook(self, hook):
        """``hook(optimizer, args, kwargs)`` runs before each step; it may return new (args, kwargs)."""
        return self._add_hook(self._step_pre_hooks, hook)

    def register_step_post_hook(self, hook):
        """``hook(optimizer, args, kwargs)`` runs after each step."""
        return self._add_hook(self._step_post_hooks, hook)

    # ---- serialisation -------------------------------------------------------------------------------------
    def state_dict(self):
        """Returns ``{"state": {index: {...}}, "param_groups": [{..., "params": [indices]}]}`` like torch.

        The state tensors are the optimizer's own (not copies), as in torch."""
        index_of = {}
        next_index = 0
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            indices = []
            for p in group["params"]:
                if id(p) not in index_of:
                    index_of[id(p)] = next_index
                    next_index += 1
                indices.append(index_of[id(p)])
            packed["params"] = indices
            groups.append(packed)
        state = {}
        for group in self.param_groups:
            for p in group["params"]:
                if p in self.state:
                    state[index_of[id(p)]] = self.state[p]
        return {"state": state, "param_groups": groups}

    @staticmethod
    def _cast_state(param, value, key):
        if isinstance(value, Tensor):
            if key == "step":
                # torch keeps step counters as they were saved (float32 scalars), only copying them.
                return value.clone()
            if param.is_floating_point():
                return value.to(dtype=param.dtype, device=param.device).clone()
            return value.to(device=param.device).clone()
        if isinstance(value, dict):
            return {k: Optimizer._cast_state(param, v, k) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(Optimizer._cast_state(param, v, key) for v in value)
        return copy.deepcopy(value)

    def load_state_dict(self, state_dict):
        """Restores state and hyper-parameters saved by ``state_dict`` (from this or an equally shaped optimizer)."""
        if not isinstance(state_dict, dict) or "state" not in state_dict or "param_groups" not in state_dict:
            raise ValueError("optimizer state_dict must be a dict with keys 'state' and 'param_groups'")
        groups = self.param_groups
        saved_groups = state_dict["param_groups"]
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        for g, sg in zip(groups, saved_groups):
            if len(g["params"]) != len(sg["params"]):
                raise ValueError("loaded state dict contains a parameter group that doesn't match the size of "
                                 "optimizer's group")
        id_map = dict(zip(chain.from_iterable(g["params"] for g in saved_groups),
                          chain.from_iterable(g["params"] for g in groups)))
        state = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                param = id_map[k]
                state[param] = self._cast_state(param, v, None)
            else:
                state[k] = copy.deepcopy(v)
        new_groups = []
        for group, saved in zip(groups, saved_groups):
            new_group = {k: copy.deepcopy(v) for k, v in saved.items() if k != "params"}
            new_group["params"] = group["params"]
            new_groups.append(new_group)
        self.__setstate__({"state": state, "param_groups": new_groups})


class _RemovableHandle:
    def __init__(self, table, key):
        self._table = table
        self.id = key

    def remove(self):
        self._table.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def _use_grad(step):
    """Runs ``step`` under no_grad (the closure re-enables grad itself); an optimizer built with
    ``differentiable=True`` records its update in the graph instead, as torch's does."""

    @functools.wraps(step)
    def wrapper(self, closure=None):
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        if self.defaults.get("differentiable", False):
            with enable_grad():
                step(self)
        else:
            with no_grad():
                step(self)
        return loss

    return wrapper


def _check_nonneg(name, value, label=None):
    if not 0.0 <= value:
        raise ValueError(f"Invalid {label or name} value: {value}")

# The parameter-argument type of optimizer constructors (torch.optim.optimizer.ParamsT).
from collections.abc import Iterable as _Iterable  # noqa: E402
from typing import Any as _Any, Union as _Union  # noqa: E402

ParamsT = _Union[_Iterable[_C.Tensor], _Iterable[dict[str, _Any]], _Iterable[tuple[str, _C.Tensor]]]
