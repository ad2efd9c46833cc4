"""torch.distributed.fsdp.wrap: auto-wrap policies and the enable_wrap/wrap context.

A policy is called as ``policy(module=m, recurse=..., nonwrapped_numel=n)``: with ``recurse=True`` it says
whether to look inside ``m``'s children, with ``recurse=False`` whether to wrap ``m`` itself (``n`` is the
number of parameters of ``m`` not already inside a wrapped child)."""

import contextlib

from ... import nn as _nn

__all__ = ["always_wrap_policy", "lambda_auto_wrap_policy", "transformer_auto_wrap_policy",
           "size_based_auto_wrap_policy", "enable_wrap", "wrap", "ModuleWrapPolicy", "CustomPolicy",
           "_Policy", "_or_policy", "_module_wrap_policy", "_wrap_module_cls_individually"]


def always_wrap_policy(*args, **kwargs):
    return True


def lambda_auto_wrap_policy(module, recurse, nonwrapped_numel, lambda_fn):
    return True if recurse else bool(lambda_fn(module))


def transformer_auto_wrap_policy(module, recurse, nonwrapped_numel, transformer_layer_cls):
    return True if recurse else isinstance(module, tuple(transformer_layer_cls))


def size_based_auto_wrap_policy(module, recurse, nonwrapped_numel, min_num_params=int(1e8),
                                force_leaf_modules=None, exclude_wrap_modules=None):
    if force_leaf_modules is None:
        force_leaf_modules = size_based_auto_wrap_policy.FORCE_LEAF_MODULES
    if exclude_wrap_modules is None:
        exclude_wrap_modules = size_based_auto_wrap_policy.EXCLUDE_WRAP_MODULES
    large = nonwrapped_numel >= min_num_params
    if recurse:
        return large and not isinstance(module, tuple(force_leaf_modules))
    return large and not isinstance(module, tuple(exclude_wrap_modules))


# torch's defaults, as attributes of the function (scripts read and change them)
size_based_auto_wrap_policy.EXCLUDE_WRAP_MODULES = {_nn.ModuleList, _nn.ModuleDict}
size_based_auto_wrap_policy.FORCE_LEAF_MODULES = {_nn.MultiheadAttention}


def _module_wrap_policy(module, recurse, nonwrapped_numel, module_classes):
    return True if recurse else isinstance(module, tuple(module_classes))


def _wrap_module_cls_individually(module, module_classes, recurse, *args, **kwargs):
    return True if recurse else isinstance(module, tuple(module_classes))


def _or_policy(module, recurse, nonwrapped_numel, policies):
    """True when any of ``policies`` says so."""
    return any(p(module=module, recurse=recurse, nonwrapped_numel=nonwrapped_numel) for p in policies)


class _Policy:
    def __call__(self, module, recurse, *args, **kwargs):
        raise NotImplementedError


class ModuleWrapPolicy(_Policy):
    """Wraps every module that is an instance of one of ``module_classes``."""

    def __init__(self, module_classes):
        self._module_classes = tuple(set(module_classes))

    def __call__(self, module, recurse, *args, **kwargs):
        return True if recurse else isinstance(module, self._module_classes)

    def __repr__(self):
        return f"ModuleWrapPolicy({', '.join(c.__name__ for c in self._module_classes)})"


class CustomPolicy(_Policy):
    """``lambda_fn(module)`` returns False, True or a dict of FSDP keyword arguments for that module."""

    def __init__(self, lambda_fn):
        self._lambda_fn = lambda_fn

    def __call__(self, module, recurse, *args, **kwargs):
        return True if recurse else self._lambda_fn(module)


def _recursive_wrap(module, policy, wrapper_cls, ignored, kwargs, only_children):
    """Post-order: children first, then ``module`` if the policy asks. Returns (module, numel wrapped)."""
    numel = sum(p.numel() for p in module.parameters() if id(p) not in ignored["params"])
    if not policy(module=module, recurse=True, nonwrapped_numel=numel):
        return module, 0
    wrapped = 0
    for name, child in list(module.named_children()):
        if id(child) in ignored["modules"] or isinstance(child, wrapper_cls):
            continue
        new, n = _recursive_wrap(child, policy, wrapper_cls, ignored, kwargs, False)
        if new is not child:
            setattr(module, name, new)
        wrapped += n
    if only_children:
        return module, wrapped
    answer = policy(module=module, recurse=False, nonwrapped_numel=numel - wrapped)
    if answer:
        extra = dict(kwargs)
        if isinstance(answer, dict):
            extra.update(answer)
        return wrapper_cls(module, **extra), numel
    return module, wrapped


class _WrapContext:
    in_context = False
    wrapper_cls = None
    kwargs = {}


@contextlib.contextmanager
def enable_wrap(*, wrapper_cls, **wrapper_kwargs):
    """Inside the block, ``wrap(module)`` wraps with ``wrapper_cls(module, **wrapper_kwargs)``."""
    if _WrapContext.in_context:
        raise NotImplementedError("You are already within a wrapping context and we currently do not support "
                                  "nested wrapping")
    old = (_WrapContext.wrapper_cls, _WrapContext.kwargs)
    _WrapContext.in_context, _WrapContext.wrapper_cls, _WrapContext.kwargs = True, wrapper_cls, wrapper_kwargs
    try:
        yield
    finally:
        _WrapContext.in_context = False
        _WrapContext.wrapper_cls, _WrapContext.kwargs = old


def wrap(module, **wrap_overrides):
    """Wraps ``module`` with the enclosing enable_wrap's class and arguments (overridden by ``wrap_overrides``);
    outside enable_wrap it returns ``module`` unchanged."""
    if not _WrapContext.in_context:
        return module
    kwargs = {**_WrapContext.kwargs, **wrap_overrides}
    return _WrapContext.wrapper_cls(module, **kwargs)


from strata._missing import module_getattr as _module_getattr  # noqa: E402

__getattr__ = _module_getattr(__name__)
