"""torch.distributed.algorithms._checkpoint.checkpoint_wrapper: wrap modules so that their forward is recomputed in
backward (strata.utils.checkpoint), as FSDP training scripts do with apply_activation_checkpointing.

The wrapper's child is `_checkpoint_wrapped_module`; state dicts and named_parameters leave that component out,
so a wrapped model saves and loads the unwrapped model's keys (as torch's). Strata's checkpoint recomputes the
same way for both CheckpointImpl values. offload_wrapper changes nothing on this CPU-only build (activations are
already in CPU memory)."""

import enum

from ....nn.modules.module import Module

__all__ = ["CheckpointImpl", "ActivationWrapper", "CheckpointWrapper", "OffloadWrapper", "checkpoint_wrapper",
           "offload_wrapper", "apply_activation_checkpointing"]

_CHECKPOINT_WRAPPED_MODULE = "_checkpoint_wrapped_module"
_CHECKPOINT_PREFIX = _CHECKPOINT_WRAPPED_MODULE + "."


class CheckpointImpl(enum.Enum):
    REENTRANT = enum.auto()
    NO_REENTRANT = enum.auto()


class ActivationWrapper(Module):
    def __init__(self, mod):
        super().__init__()
        self._checkpoint_wrapped_module = mod

    def forward(self, *args, **kwargs):
        raise ValueError("Subclasses should implement forward().")

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name == _CHECKPOINT_WRAPPED_MODULE:
                raise
            return getattr(self._checkpoint_wrapped_module, name)

    def __getitem__(self, key):
        return self._checkpoint_wrapped_module.__getitem__(key)

    def named_parameters(self, *args, **kwargs):
        for name, p in super().named_parameters(*args, **kwargs):
            yield name.replace(_CHECKPOINT_PREFIX, ""), p

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        from collections import OrderedDict
        destination = OrderedDict() if destination is None else destination
        self._save_to_state_dict(destination, prefix, keep_vars)
        return self._checkpoint_wrapped_module.state_dict(destination=destination, prefix=prefix, keep_vars=keep_vars)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        # the keys come without the wrapper's component: give them to the child under its name
        for key in [k for k in state_dict if k.startswith(prefix) and not k.startswith(prefix + _CHECKPOINT_PREFIX)]:
            state_dict[prefix + _CHECKPOINT_PREFIX + key[len(prefix):]] = state_dict.pop(key)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)


class CheckpointWrapper(ActivationWrapper):
    def __init__(self, mod, checkpoint_impl=CheckpointImpl.NO_REENTRANT, checkpoint_fn=None, **checkpoint_fn_kwargs):
        super().__init__(mod)
        if not isinstance(checkpoint_impl, CheckpointImpl):
            raise TypeError(f"CheckpointWrapper: checkpoint_impl must be a CheckpointImpl, got {checkpoint_impl!r}")
        self.checkpoint_impl = checkpoint_impl
        if checkpoint_fn is None:
            from ....utils.checkpoint import checkpoint
            reentrant = checkpoint_impl == CheckpointImpl.REENTRANT
            kwargs = dict(checkpoint_fn_kwargs)
            kwargs.setdefault("use_reentrant", reentrant)

            def checkpoint_fn(fn, *args, **kw):
                return checkpoint(fn, *args, **kwargs, **kw)
        self.checkpoint_fn = checkpoint_fn

    def forward(self, *args, **kwargs):
        return self.checkpoint_fn(self._checkpoint_wrapped_module, *args, **kwargs)


class OffloadWrapper(ActivationWrapper):
    def forward(self, *args, **kwargs):
        return self._checkpoint_wrapped_module(*args, **kwargs)


def checkpoint_wrapper(module, checkpoint_impl=CheckpointImpl.NO_REENTRANT, checkpoint_fn=None,
                       **checkpoint_fn_kwargs):
    return CheckpointWrapper(module, checkpoint_impl, checkpoint_fn, **checkpoint_fn_kwargs)


def offload_wrapper(module):
    return OffloadWrapper(module)


def apply_activation_checkpointing(model, checkpoint_wrapper_fn=checkpoint_wrapper, check_fn=lambda _: True,
                                   auto_wrap_policy=None):
    """Wraps (in place) every submodule of ``model`` for which ``check_fn`` is true (or that ``auto_wrap_policy``
    would wrap) with ``checkpoint_wrapper_fn``, children before parents; ``model`` itself is not wrapped."""
    from ...fsdp.wrap import lambda_auto_wrap_policy, _recursive_wrap
    import functools

    policy = auto_wrap_policy if auto_wrap_policy is not None else functools.partial(
        lambda_auto_wrap_policy, lambda_fn=check_fn)

    def wrap_fn(module, **kwargs):
        return checkpoint_wrapper_fn(module)

    _recursive_wrap(model, policy, _AnyWrapper(wrap_fn), {"modules": set(), "params": set()}, {},
                    only_children=True)
    return model


class _AnyWrapper:
    """Adapts a wrapping function to _recursive_wrap's wrapper class argument (called, and used in isinstance
    checks to skip what is already wrapped)."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, module, **kwargs):
        return self.fn(module)

    def __instancecheck__(self, obj):
        return isinstance(obj, ActivationWrapper)


from strata._missing import module_getattr as _module_getattr  # noqa: E402

__getattr__ = _module_getattr(__name__)
