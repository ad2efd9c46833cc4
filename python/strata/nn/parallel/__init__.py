"""strata.nn.parallel: data-parallel wrappers.

Strata runs on the CPU only. torch's DataParallel on a machine without GPUs
simply runs the wrapped module; so does this one. DistributedDataParallel
(_ddp.py) runs one replica per process over a strata.distributed process group."""

from ..modules.module import Module

__all__ = ["DataParallel", "DistributedDataParallel", "data_parallel"]


def _check_no_devices(what, device_ids):
    if device_ids:
        raise AssertionError(f"Strata not compiled with CUDA enabled: {what} was given device_ids={list(device_ids)}, "
                             "but this build has no GPU devices (leave device_ids unset to run on the CPU)")


class DataParallel(Module):
    """Wraps `module` and runs it as it is: with no GPU devices there is nothing
    to replicate or scatter to (torch does the same without GPUs). The wrapped
    module is `self.module`, so state_dict keys gain the "module." prefix, as in torch."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        _check_no_devices("DataParallel", device_ids)
        self.module = module
        self.device_ids = []
        self.dim = dim
        self.output_device = None

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)


def data_parallel(module, inputs, device_ids=None, output_device=None, dim=0, module_kwargs=None):
    """Functional DataParallel: evaluates `module(*inputs, **module_kwargs)` on the CPU."""
    _check_no_devices("data_parallel", device_ids)
    if not isinstance(inputs, tuple):
        inputs = (inputs,)
    return module(*inputs, **(module_kwargs or {}))


from ._ddp import DistributedDataParallel  # noqa: E402
