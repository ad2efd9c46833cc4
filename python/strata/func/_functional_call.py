"""functional_call (a module called with swapped-in parameters and buffers) and
stack_module_state (an ensemble's state stacked along a new leading dim)."""

import contextlib

from .. import _C

__all__ = ["functional_call", "stack_module_state"]


def _owner(module, name):
    """(submodule, attribute) for a dotted name like 'layer.0.weight'."""
    *path, attr = name.split(".")
    mod = module
    for i, p in enumerate(path):
        nxt = getattr(mod, p, None)
        from ..nn.modules.module import Module
        if not isinstance(nxt, Module):
            where = ".".join(path[:i + 1])
            raise TypeError(f"functional_call: '{name}' names submodule `{where}`, which is "
                            f"{'missing' if nxt is None else 'a ' + type(nxt).__name__}, not an nn.Module")
        mod = nxt
    return mod, attr


def _tied_groups(module):
    """name -> tuple of every name holding the same tensor (parameters and buffers)."""
    by_id = {}
    for kind in (module.named_parameters, module.named_buffers):
        for n, t in kind(remove_duplicate=False):
            by_id.setdefault(id(t), []).append(n)
    return {n: tuple(names) for names in by_id.values() for n in names}


def _merge_dicts(parameter_and_buffer_dicts):
    if isinstance(parameter_and_buffer_dicts, dict):
        return dict(parameter_and_buffer_dicts)
    if not isinstance(parameter_and_buffer_dicts, (tuple, list)):
        raise TypeError("functional_call: parameter_and_buffer_dicts must be a dict or a tuple of dicts, got "
                        f"{type(parameter_and_buffer_dicts).__name__}")
    merged, dup = {}, set()
    for d in parameter_and_buffer_dicts:
        if not isinstance(d, dict):
            raise TypeError(f"functional_call: expected dicts of name -> Tensor, got a {type(d).__name__}")
        dup |= merged.keys() & d.keys()
        merged.update(d)
    if dup:
        raise ValueError(f"{sorted(dup)} appeared in multiple dictionaries; behavior of functional call is ambiguous")
    return merged


@contextlib.contextmanager
def _reparametrize_module(module, values, tie_weights=True, strict=False):
    """Swaps values (name -> tensor) into module for the duration of the block, restoring
    the original objects afterwards even when the block raises."""
    for k, v in values.items():
        if not isinstance(v, _C.Tensor):
            raise TypeError(f"functional_call: the value given for '{k}' must be a Tensor, got {type(v).__name__}")
    groups = _tied_groups(module)
    values = dict(values)
    if tie_weights:
        for k in list(values):
            same = [n for n in groups.get(k, ()) if n in values]
            if len({id(values[n]) for n in same}) > 1:
                raise ValueError(f"functional_call got multiple values for keys {sorted(same)}, which are tied. "
                                 "Consider using tie_weights=False")
            for n in groups.get(k, ()):
                values.setdefault(n, values[k])
    if strict:
        unexpected = sorted(k for k in values if k not in groups)
        missing = sorted(k for k in groups if k not in values)
        if unexpected or missing:
            lines = [f"Error(s) in reparametrizing for {type(module).__name__}:"]
            if unexpected:
                lines.append("\tUnexpected key(s): " + ", ".join(f"'{k}'" for k in unexpected) + ".")
            if missing:
                lines.append("\tMissing key(s): " + ", ".join(f"'{k}'" for k in missing) + ".")
            raise RuntimeError("\n".join(lines))
    saved = []  # (store dict or None, owner, attr, had, old)
    try:
        for name, v in values.items():
            mod, attr = _owner(module, name)
            d = mod.__dict__
            store = None
            for s in ("_parameters", "_buffers"):
                if attr in d.get(s, ()):
                    store = d[s]
            if store is not None:
                saved.append((store, mod, attr, True, store[attr]))
                store[attr] = v
            else:  # not a parameter or buffer (strict=False): a plain attribute for the call
                had = attr in d
                saved.append((None, mod, attr, had, d.get(attr)))
                object.__setattr__(mod, attr, v)
        yield
    finally:
        for store, mod, attr, had, old in reversed(saved):
            if store is not None:
                store[attr] = old
            elif had:
                object.__setattr__(mod, attr, old)
            else:
                object.__delattr__(mod, attr)


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *, tie_weights=True,
                    strict=False):
    """module(*args, **kwargs) with the named parameters and buffers replaced by the given
    tensors for this call only (the module is restored afterwards, also on an exception).
    parameter_and_buffer_dicts: a dict of dotted name -> tensor, or a tuple of such dicts
    (a name in two dicts is an error). tie_weights: a value given for one of several names
    sharing a tensor applies to all of them. strict: every parameter and buffer must be
    given, and nothing else."""
    values = _merge_dicts(parameter_and_buffer_dicts)
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    if kwargs is None:
        kwargs = {}
    with _reparametrize_module(module, values, tie_weights=tie_weights, strict=strict):
        return module(*args, **kwargs)


def stack_module_state(models):
    """(params, buffers) of models of one architecture, each a dict of name -> the models'
    tensors stacked along a new dim 0. The stacked parameters are new leaves (they require
    grad when the originals do); they share no memory with the models."""
    models = list(models)
    if not models:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if len({m.training for m in models}) > 1:
        raise RuntimeError("stack_module_state: Expected all models to have the same training/eval mode.")
    if len({type(m) for m in models}) > 1:
        raise RuntimeError("stack_module_state: Expected all models to be of the same class, got "
                           f"{sorted({type(m).__name__ for m in models})}")
    from .. import stack

    def stacked(getter, grad):
        names = [n for n, _ in getter(models[0])]
        out = {}
        for n in names:
            ts = []
            for i, m in enumerate(models):
                d = dict(getter(m))
                if n not in d:
                    raise RuntimeError(f"stack_module_state: model {i} has no '{n}' (model 0 has)")
                ts.append(d[n].detach())
            s = stack(ts)
            if grad and dict(getter(models[0]))[n].requires_grad:
                s.requires_grad_(True)
            out[n] = s
        return out

    params = stacked(lambda m: list(m.named_parameters()), True)
    buffers = stacked(lambda m: list(m.named_buffers()), False)
    return params, buffers
