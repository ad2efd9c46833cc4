"""RemoteModule (torch.distributed.nn.api.remote_module.RemoteModule): a module built and run on another worker."""

from .... import nn
from ... import rpc

__all__ = ["RemoteModule"]


def _parse_remote_device(remote_device):
    """'worker1/cpu' or 'rank:1/cpu' -> (worker name or rank, device)."""
    if not isinstance(remote_device, str):
        raise TypeError(f"RemoteModule: remote_device must be a string such as 'worker1/cpu', got "
                        f"{type(remote_device).__name__}")
    parts = remote_device.split("/")
    if len(parts) != 2 or not parts[0] or not parts[1]:
        raise ValueError(f"Could not parse remote_device: {remote_device}. The valid format is "
                         "'<workername>/<device>' or 'rank:<rank>/<device>'")
    worker, device = parts
    if worker.startswith("rank:"):
        try:
            worker = int(worker[5:])
        except ValueError:
            raise ValueError(f"Could not parse remote_device: {remote_device}: the rank is not an integer") from None
    if device.split(":")[0] != "cpu":
        raise ValueError(f"RemoteModule: device {device!r} of {remote_device!r} is not supported; RPC here carries "
                         "CPU tensors only")
    return worker, device


def _create_module(module_cls, args, kwargs):
    m = module_cls(*args, **kwargs)
    if not isinstance(m, nn.Module):
        raise ValueError(f"RemoteModule: expected module_cls(*args, **kwargs) to return an nn.Module, got "
                         f"{type(m).__name__}")
    return m


def _check_created(module_rref):
    module_rref.local_value()


def _forward(module_rref, args, kwargs):
    return module_rref.local_value()(*args, **kwargs)


def _param_rrefs(module_rref, recurse):
    return [rpc.RRef(p) for p in module_rref.local_value().parameters(recurse)]


_UNSUPPORTED = ("register_buffer", "register_parameter", "add_module", "apply", "cuda", "cpu", "type", "float",
                "double", "half", "bfloat16", "to", "register_backward_hook", "register_forward_pre_hook",
                "register_forward_hook", "state_dict", "load_state_dict", "parameters", "named_parameters",
                "buffers", "named_buffers", "children", "named_children", "modules", "named_modules",
                "requires_grad_", "zero_grad", "share_memory")


class RemoteModule(nn.Module):
    """RemoteModule(remote_device, module_cls, args=None, kwargs=None): module_cls(*args, **kwargs) is built on the
    worker of remote_device ('worker1/cpu', 'rank:1/cpu'); forward(*args) runs it there (rpc_sync; tensors that
    require grad are differentiated with distributed autograd), forward_async returns a Future, remote_parameters()
    returns RRefs to its parameters (for DistributedOptimizer) and get_module_rref() the RRef to the module."""

    def __init__(self, remote_device, module_cls, args=None, kwargs=None):
        super().__init__()
        self.on, self.device = _parse_remote_device(remote_device)
        self.module_rref = rpc.remote(self.on, _create_module,
                                      args=(module_cls, tuple(args or ()), dict(kwargs or {})))
        rpc.rpc_sync(self.on, _check_created, args=(self.module_rref,))  # raises module_cls's error here
        self.is_scriptable = False

    def forward(self, *args, **kwargs):
        return rpc.rpc_sync(self.on, _forward, args=(self.module_rref, args, kwargs))

    def forward_async(self, *args, **kwargs):
        return rpc.rpc_async(self.on, _forward, args=(self.module_rref, args, kwargs))

    def remote_parameters(self, recurse=True):
        return rpc.rpc_sync(self.on, _param_rrefs, args=(self.module_rref, recurse))

    def get_module_rref(self):
        return self.module_rref

    def __getattribute__(self, name):
        if name in _UNSUPPORTED:
            raise ValueError(f"Method ``{name}`` not supported for RemoteModule")
        return super().__getattribute__(name)

    def __getstate__(self):
        raise RuntimeError("Cannot pickle RemoteModule in python pickler. RemoteModule can only be pickled when "
                           "using RPC")
