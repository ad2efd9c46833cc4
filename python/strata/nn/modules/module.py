"""nn.Module: the base class of every layer, with torch.nn.Module's registration, traversal, state_dict, hook and
conversion behaviour."""

import itertools
import warnings
import weakref
from collections import OrderedDict, namedtuple

from ... import _C
from ..._grad_mode import no_grad
from ..parameter import Parameter, is_parameter

Tensor = _C.Tensor

__all__ = ["Module", "RemovableHandle"]


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    __slots__ = ()

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


_IncompatibleKeys.__name__ = "_IncompatibleKeys"


class RemovableHandle:
    """Returned by the register_*_hook methods; ``remove()`` unregisters the hook (also as a context manager)."""

    _next_id = itertools.count()

    def __init__(self, hooks_dict, *, extra_dict=None):
        self.hooks_dict_ref = weakref.ref(hooks_dict)
        self.id = next(RemovableHandle._next_id)
        if extra_dict is None:
            extra_dict = []
        elif isinstance(extra_dict, dict):
            extra_dict = [extra_dict]
        self.extra_dict_ref = tuple(weakref.ref(d) for d in extra_dict)

    def remove(self):
        hooks = self.hooks_dict_ref()
        if hooks is not None and self.id in hooks:
            del hooks[self.id]
        for ref in self.extra_dict_ref:
            d = ref()
            if d is not None and self.id in d:
                del d[self.id]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def _addindent(s, n):
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    pad = " " * n
    return lines[0] + "\n" + "\n".join(pad + line for line in lines[1:])


def _detach(t):
    """A plain tensor sharing t's storage, outside autograd (what state_dict returns without keep_vars)."""
    det = getattr(t, "detach", None)
    return det() if det is not None else t.alias()


def _can_swap_data():
    # Keeping a parameter's identity across a dtype/device change needs the core's `data` setter (set_data).
    desc = getattr(Tensor, "data", None)
    return desc is not None and hasattr(type(desc), "__set__")


class Module:
    """Base class for all neural-network modules; subclasses define ``forward``."""

    dump_patches = False
    _version = 1
    training: bool
    call_super_init = False

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise TypeError(
                f"{type(self).__name__}.__init__() got an unexpected argument; Module.__init__() takes no arguments")
        sa = object.__setattr__
        sa(self, "training", True)
        sa(self, "_parameters", {})
        sa(self, "_buffers", {})
        sa(self, "_non_persistent_buffers_set", set())
        sa(self, "_modules", {})
        sa(self, "_forward_pre_hooks", OrderedDict())
        sa(self, "_forward_pre_hooks_with_kwargs", OrderedDict())
        sa(self, "_forward_hooks", OrderedDict())
        sa(self, "_forward_hooks_with_kwargs", OrderedDict())
        sa(self, "_forward_hooks_always_called", OrderedDict())

    def forward(self, *input):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    # ---- registration -----------------------------------------------------------------------

    def _check_name(self, kind, name):
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string. Got {type(name).__name__}")
        if name == "":
            raise KeyError(f'{kind} name can\'t be empty string ""')
        if "." in name:
            raise KeyError(f'{kind} name can\'t contain "."')

    def register_buffer(self, name, tensor, persistent=True):
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        self._check_name("buffer", name)
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                            "(torch Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def register_parameter(self, name, param):
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        self._check_name("parameter", name)
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is None:
            self._parameters[name] = None
            return
        if not is_parameter(param):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                            "(torch.nn.Parameter or None required)")
        if getattr(param, "grad_fn", None) is not None:
            raise ValueError(
                f"Cannot assign non-leaf Tensor to parameter '{name}'. Model parameters must be created explicitly. "
                f"To express '{name}' as a function of another Tensor, compute the value in the forward() method.")
        self._parameters[name] = param

    def add_module(self, name, module):
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        if not isinstance(name, str):
            raise TypeError(f"module name should be a string. Got {type(name).__name__}")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        if "." in name:
            raise KeyError(f'module name can\'t contain ".", got: {name}')
        if name == "":
            raise KeyError('module name can\'t be empty string ""')
        self._modules[name] = module

    def register_module(self, name, module):
        self.add_module(name, module)

    def get_submodule(self, target):
        if target == "":
            return self
        mod = self
        for item in target.split("."):
            if not hasattr(mod, item):
                raise AttributeError(f"{mod._get_name()} has no attribute `{item}`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError(f"`{item}` is not an nn.Module")
        return mod

    def get_parameter(self, target):
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if not hasattr(mod, name):
            raise AttributeError(f"{mod._get_name()} has no attribute `{name}`")
        param = getattr(mod, name)
        if not is_parameter(param):
            raise AttributeError(f"`{name}` is not an nn.Parameter")
        return param

    def get_buffer(self, target):
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if not hasattr(mod, name):
            raise AttributeError(f"{mod._get_name()} has no attribute `{name}`")
        if name not in mod._buffers:
            raise AttributeError(f"`{name}` is not a buffer")
        return getattr(mod, name)

    # ---- attribute protocol -----------------------------------------------------------------

    def __getattr__(self, name):
        # Only called when normal lookup fails: parameters, buffers and submodules live in their dicts.
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            if store in d and name in d[store]:
                return d[store][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name, value):
        def remove_from(*dicts_or_sets):
            for d in dicts_or_sets:
                if name in d:
                    if isinstance(d, dict):
                        del d[name]
                    else:
                        d.discard(name)

        params = self.__dict__.get("_parameters")
        if is_parameter(value):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            remove_from(self.__dict__, self._buffers, self._modules, self._non_persistent_buffers_set)
            self.register_parameter(name, value)
            return
        if params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                                "(torch.nn.Parameter or None expected)")
            self.register_parameter(name, value)
            return
        modules = self.__dict__.get("_modules")
        if isinstance(value, Module):
            if modules is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            remove_from(self.__dict__, self._parameters, self._buffers, self._non_persistent_buffers_set)
            modules[name] = value
            return
        if modules is not None and name in modules:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module '{name}' "
                                "(torch.nn.Module or None expected)")
            modules[name] = value
            return
        buffers = self.__dict__.get("_buffers")
        if buffers is not None and name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                                "(torch.Tensor or None expected)")
            buffers[name] = value
            return
        object.__setattr__(self, name, value)

    def __delattr__(self, name):
        for store in ("_parameters", "_buffers", "_modules"):
            d = self.__dict__.get(store)
            if d is not None and name in d:
                del d[name]
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        attrs = set(dir(type(self))) | set(self.__dict__)
        attrs |= set(self._parameters) | set(self._modules) | set(self._buffers)
        return sorted(k for k in attrs if not k[0].isdigit())

    def __setstate__(self, state):
        self.__dict__.update(state)

    # ---- traversal --------------------------------------------------------------------------

    def _named_members(self, get_members_fn, prefix="", recurse=True, remove_duplicate=True):
        memo = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse \
            else [(prefix, self)]
        for module_prefix, module in modules:
            for k, v in get_members_fn(module):
                if v is None or (remove_duplicate and id(v) in memo):
                    continue
                if remove_duplicate:
                    memo.add(id(v))
                yield (module_prefix + ("." if module_prefix else "") + k, v)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        return self._named_members(lambda m: m._parameters.items(), prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        return self._named_members(lambda m: m._buffers.items(), prefix, recurse, remove_duplicate)

    def children(self):
        for _, m in self.named_children():
            yield m

    def named_children(self):
        memo = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in memo:
                memo.add(id(m))
                yield name, m

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        if memo is None:
            memo = set()
        if remove_duplicate:
            if self in memo:
                return
            memo.add(self)
        yield prefix, self
        for name, m in self._modules.items():
            if m is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from m.named_modules(memo, sub, remove_duplicate)

    # ---- modes ------------------------------------------------------------------------------

    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for m in self.children():
            m.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def compile(self, *args, **kwargs):
        """Compiles this module's forward in place (strata.compile's arguments): later calls of the
        module run the captured graphs."""
        import types as _types
        from ... import compile as _compile
        compiled = _compile(type(self).forward, *args, **kwargs)
        object.__setattr__(self, "forward", _types.MethodType(compiled, self))

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            g = getattr(p, "grad", None)
            if g is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                if getattr(g, "grad_fn", None) is not None:
                    g = g.detach()
                    p.grad = g
                elif hasattr(g, "requires_grad_"):
                    g.requires_grad_(False)
                g.zero_()

    # ---- conversion -------------------------------------------------------------------------

    def share_memory(self):
        """Moves every parameter, gradient and buffer into shared memory in place (Tensor.share_memory_)."""
        for t in list(self.parameters()) + list(self.buffers()):
            t.share_memory_()
            if t.grad is not None:
                t.grad.share_memory_()
        return self

    def _apply(self, fn, recurse=True):
        """Applies fn to every parameter, gradient and buffer, keeping Parameter objects where the core allows."""
        if recurse:
            for m in self.children():
                m._apply(fn)
        swap = _can_swap_data()
        for key, param in self._parameters.items():
            if param is None:
                continue
            with no_grad():
                new = fn(param)
            if new is param:
                continue
            # Like torch, set_data keeps the Parameter object only within a device.
            if swap and new.device == param.device:
                param.data = new
                out = param
            else:
                # Without set_data a tensor cannot change dtype in place: a new Parameter replaces the old one
                # (torch's behaviour under overwrite_module_params_on_conversion).
                out = Parameter(new, getattr(param, "requires_grad", True))
                self._parameters[key] = out
            grad = getattr(param, "grad", None)
            if grad is not None:
                with no_grad():
                    new_grad = fn(grad)
                if new_grad is not grad:
                    if out is param:
                        grad.data = new_grad
                    else:
                        out.grad = new_grad
        for key, buf in self._buffers.items():
            if buf is not None:
                self._buffers[key] = fn(buf)
        return self

    def apply(self, fn):
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def to(self, *args, **kwargs):
        dtype = kwargs.pop("dtype", None)
        device = kwargs.pop("device", None)
        kwargs.pop("non_blocking", None)
        memory_format = kwargs.pop("memory_format", None)
        if kwargs:
            raise TypeError(f"to() got an unexpected keyword argument '{next(iter(kwargs))}'")
        for a in args:
            if isinstance(a, _C.dtype):
                dtype = a
            elif isinstance(a, (str, _C.device)):
                device = a
            elif isinstance(a, Tensor):
                dtype, device = a.dtype, a.device
            elif isinstance(a, bool):  # non_blocking given positionally
                continue
            else:
                raise TypeError(f"to() received an invalid combination of arguments: {type(a).__name__}")
        if dtype is not None and not dtype.is_floating_point:
            raise TypeError(f"nn.Module.to only accepts floating point or complex dtypes, but got desired "
                            f"dtype={dtype}")

        def convert(t):
            # Only floating-point tensors change dtype; integer buffers (num_batches_tracked) keep theirs.
            # memory_format= lays out the 4-d and 5-d ones (conv weights), as torch's Module.to does.
            if memory_format is not None and t.dim() in (4, 5):
                return t.to(device=device, dtype=dtype if t.is_floating_point() else None,
                            memory_format=memory_format)
            return t.to(device=device, dtype=dtype if t.is_floating_point() else None)

        return self._apply(convert)

    def _cast_float(self, dtype):
        return self._apply(lambda t: t.to(dtype) if t.is_floating_point() else t)

    def float(self):
        return self._cast_float(_C.float32)

    def double(self):
        return self._cast_float(_C.float64)

    def half(self):
        return self._cast_float(_C.float16)

    def bfloat16(self):
        return self._cast_float(_C.bfloat16)

    def cpu(self):
        return self._apply(lambda t: t.to(device="cpu"))

    def type(self, dst_type):
        return self._apply(lambda t: t.to(dst_type))

    # ---- hooks and call ---------------------------------------------------------------------

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        handle = RemovableHandle(self._forward_pre_hooks, extra_dict=self._forward_pre_hooks_with_kwargs)
        self._forward_pre_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs[handle.id] = True
        if prepend:
            self._forward_pre_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False, always_call=False):
        handle = RemovableHandle(self._forward_hooks,
                                 extra_dict=[self._forward_hooks_with_kwargs, self._forward_hooks_always_called])
        self._forward_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_hooks_with_kwargs[handle.id] = True
        if always_call:
            self._forward_hooks_always_called[handle.id] = True
        if prepend:
            self._forward_hooks.move_to_end(handle.id, last=False)
        return handle

    def _call_impl(self, *args, **kwargs):
        # The hook-free fast path (Sequential.forward inlines the same test). Passing an empty **kwargs on would
        # cost a dict unpacking per call.
        if not (self._forward_pre_hooks or self._forward_hooks):
            if kwargs:
                return self.forward(*args, **kwargs)
            return self.forward(*args)
        for hook_id, hook in list(self._forward_pre_hooks.items()):
            if hook_id in self._forward_pre_hooks_with_kwargs:
                res = hook(self, args, kwargs)
                if res is not None:
                    if not (isinstance(res, tuple) and len(res) == 2):
                        raise RuntimeError("forward pre-hook must return None or a tuple of (new_args, new_kwargs), "
                                           f"but got {res}.")
                    args, kwargs = res
            else:
                res = hook(self, args)
                if res is not None:
                    args = res if isinstance(res, tuple) else (res,)
        called = set()
        try:
            result = self.forward(*args, **kwargs)
            for hook_id, hook in list(self._forward_hooks.items()):
                called.add(hook_id)
                if hook_id in self._forward_hooks_with_kwargs:
                    res = hook(self, args, kwargs, result)
                else:
                    res = hook(self, args, result)
                if res is not None:
                    result = res
        except Exception:
            # always_call hooks run even when forward raised; their errors are only warned about.
            for hook_id, hook in list(self._forward_hooks.items()):
                if hook_id in self._forward_hooks_always_called and hook_id not in called:
                    try:
                        if hook_id in self._forward_hooks_with_kwargs:
                            hook(self, args, kwargs, None)
                        else:
                            hook(self, args, None)
                    except Exception as e:
                        warnings.warn(f"forward hook with ``always_call=True`` raised an exception that was "
                                      f"silenced as another error was raised in forward: {e}")
            raise
        return result

    __call__ = _call_impl

    # ---- state_dict -------------------------------------------------------------------------

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else _detach(p)
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else _detach(b)

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        if args:
            # torch's deprecated positional form: (destination, prefix, keep_vars).
            warnings.warn("Positional args are being deprecated, use kwargs instead.", FutureWarning)
            if len(args) > 0 and destination is None:
                destination = args[0]
            if len(args) > 1 and prefix == "":
                prefix = args[1]
            if len(args) > 2 and keep_vars is False:
                keep_vars = args[2]
        if destination is None:
            destination = OrderedDict()
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        return destination

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        persistent_buffers = {k: v for k, v in self._buffers.items() if k not in self._non_persistent_buffers_set}
        local_state = {k: v for k, v in itertools.chain(self._parameters.items(), persistent_buffers.items())
                       if v is not None}
        for name, param in local_state.items():
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            input_param = state_dict[key]
            if not isinstance(input_param, Tensor):
                error_msgs.append(f'While copying the parameter named "{key}", expected torch.Tensor or Tensor-like '
                                  f"object from checkpoint but received {type(input_param)}")
                continue
            if param.dim() == 0 and input_param.dim() == 1 and input_param.numel() == 1:
                input_param = input_param[0]  # checkpoints from before 0-d tensors existed
            if tuple(input_param.shape) != tuple(param.shape):
                error_msgs.append(f"size mismatch for {key}: copying a param with shape {input_param.shape} from "
                                  f"checkpoint, the shape in current model is {param.shape}.")
                continue
            try:
                with no_grad():
                    param.copy_(input_param)
            except Exception as ex:
                error_msgs.append(f'While copying the parameter named "{key}", whose dimensions in the model are '
                                  f"{param.shape} and whose dimensions in the checkpoint are {input_param.shape}, "
                                  f"an exception occurred : {ex.args}.")
        if strict:
            for key in state_dict.keys():
                if key.startswith(prefix):
                    input_name = key[len(prefix):].split(".", 1)
                    # Keys of submodules are checked by the submodules themselves.
                    if input_name[0] not in self._modules and input_name[0] not in local_state:
                        unexpected_keys.append(key)

    def load_state_dict(self, state_dict, strict=True, assign=False):
        if not hasattr(state_dict, "keys") or not hasattr(state_dict, "__getitem__"):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        if assign:
            raise NotImplementedError("load_state_dict(assign=True) is not supported by strata yet")
        missing_keys, unexpected_keys, error_msgs = [], [], []
        state_dict = OrderedDict(state_dict)

        def load(module, prefix=""):
            module._load_from_state_dict(state_dict, prefix, {}, True, missing_keys, unexpected_keys, error_msgs)
            for name, child in module._modules.items():
                if child is not None:
                    load(child, prefix + name + ".")

        load(self)
        if strict:
            if unexpected_keys:
                error_msgs.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in unexpected_keys)))
            if missing_keys:
                error_msgs.insert(0, "Missing key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in missing_keys)))
        if error_msgs:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
                type(self).__name__, "\n\t".join(error_msgs)))
        return _IncompatibleKeys(missing_keys, unexpected_keys)

    # ---- repr -------------------------------------------------------------------------------

    def _get_name(self):
        return type(self).__name__

    def extra_repr(self):
        return ""

    def __repr__(self):
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({key}): " + _addindent(repr(m), 2) for key, m in self._modules.items()]
        lines = extra_lines + child_lines
        s = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                s += extra_lines[0]
            else:
                s += "\n  " + "\n  ".join(lines) + "\n"
        return s + ")"



# ---- global module hooks (torch.nn.modules.module.register_module_forward_*_hook) ---------------------------------
# Only while one is registered does Module.__call__ become the hook-running wrapper below (and Sequential then calls
# its children through it, as its fast path requires Module.__call__ to be _call_impl): no cost otherwise.
_global_forward_pre_hooks = OrderedDict()
_global_forward_hooks = OrderedDict()


def _call_with_global_hooks(self, *args, **kwargs):
    for hook in list(_global_forward_pre_hooks.values()):
        res = hook(self, args)
        if res is not None:
            args = res if isinstance(res, tuple) else (res,)
    result = _call_impl_plain(self, *args, **kwargs)
    for hook in list(_global_forward_hooks.values()):
        res = hook(self, args, result)
        if res is not None:
            result = res
    return result


_call_impl_plain = Module._call_impl


def _sync_global_call():
    Module.__call__ = _call_with_global_hooks if (_global_forward_pre_hooks or _global_forward_hooks) \
        else _call_impl_plain


class _GlobalHookHandle(RemovableHandle):
    def remove(self):
        super().remove()
        _sync_global_call()


def register_module_forward_pre_hook(hook):
    """`hook(module, args)` runs before every module's forward (and before its own pre-hooks); it may return new
    args. Returns a handle whose remove() unregisters it."""
    handle = _GlobalHookHandle(_global_forward_pre_hooks)
    _global_forward_pre_hooks[handle.id] = hook
    _sync_global_call()
    return handle


def register_module_forward_hook(hook):
    """`hook(module, args, output)` runs after every module's forward (after its own hooks); it may return a new
    output. Returns a handle whose remove() unregisters it."""
    handle = _GlobalHookHandle(_global_forward_hooks)
    _global_forward_hooks[handle.id] = hook
    _sync_global_call()
    return handle
