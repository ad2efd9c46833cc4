"""Lazily initialised modules: LazyLinear infers ``in_features`` from its first input (torch.nn.LazyLinear).

The parameters start as ``UninitializedParameter`` (no shape); a forward pre-hook materialises them on the
first call, runs ``reset_parameters`` and turns the module into a plain ``Linear``."""

import warnings

from ... import _C
from ..._grad_mode import no_grad
from ..parameter import Parameter, _make_subclass
from .linear import Linear

__all__ = ["UninitializedParameter", "LazyModuleMixin", "LazyLinear"]


class UninitializedParameter(Parameter):
    """A parameter whose shape is not known yet; ``materialize(shape)`` gives it storage and makes it a
    ``Parameter``."""

    cls_to_become = Parameter

    def __new__(cls, requires_grad=True, device=None, dtype=None):
        from ... import empty

        return _make_subclass(cls, empty(0, device=device, dtype=dtype), requires_grad)

    def materialize(self, shape, device=None, dtype=None):
        from ... import empty

        self.data = empty(tuple(shape), device=device if device is not None else self.device,
                          dtype=dtype if dtype is not None else self.dtype)
        self.__class__ = self.cls_to_become

    def __repr__(self):
        return "<UninitializedParameter>"

    __str__ = __repr__

    def __deepcopy__(self, memo):
        if id(self) not in memo:
            memo[id(self)] = type(self)(self.requires_grad, self.device, self.dtype)
        return memo[id(self)]


def _is_lazy(p):
    return isinstance(p, UninitializedParameter)


class LazyModuleMixin:
    """Mixed in before a module class: on the first forward, ``initialize_parameters(*inputs)`` materialises
    the uninitialised parameters, then the module becomes ``cls_to_become``."""

    cls_to_become = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._initialize_hook = self.register_forward_pre_hook(self._infer_parameters, with_kwargs=True)
        warnings.warn("Lazy modules are a new feature under heavy development so changes to the API or "
                      "functionality can happen at any moment.", stacklevel=2)

    def has_uninitialized_params(self):
        return any(_is_lazy(p) for p in self._parameters.values()) or \
            any(_is_lazy(b) for b in self._buffers.values())

    def initialize_parameters(self, *args, **kwargs):
        raise NotImplementedError(f"initialize_parameters is not implemented for {self.__class__.__name__}")

    def _infer_parameters(self, module, args, kwargs=None):
        module.initialize_parameters(*args, **(kwargs or {}))
        if module.has_uninitialized_params():
            raise RuntimeError(f"module {self._get_name()} has not been fully initialized")
        module._initialize_hook.remove()
        del module._initialize_hook
        if module.cls_to_become is not None:
            module.__class__ = module.cls_to_become

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        # Loading a saved state gives the uninitialised parameters their shapes first.
        for name, param in list(self._parameters.items()):
            key = prefix + name
            if _is_lazy(param) and key in state_dict and isinstance(state_dict[key], _C.Tensor):
                with no_grad():
                    param.materialize(tuple(state_dict[key].shape))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)


class LazyLinear(LazyModuleMixin, Linear):
    """``Linear`` whose ``in_features`` is the last dimension of the first input it sees."""

    cls_to_become = Linear

    def __init__(self, out_features, bias=True, device=None, dtype=None):
        super().__init__(0, 0, False)
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_features = out_features
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input):
        if self.has_uninitialized_params():
            with no_grad():
                self.in_features = input.shape[-1]
                self.weight.materialize((self.out_features, self.in_features))
                if self.bias is not None:
                    self.bias.materialize((self.out_features,))
                self.reset_parameters()


