"""strata.autograd.graph: the Node type of the recorded graph and the saved-tensor hooks.

`saved_tensors_hooks(pack, unpack)` sets a pair of hooks on this thread: every tensor a graph node saves for backward
(built-in ops and `ctx.save_for_backward` alike) is passed to `pack` and the node keeps what `pack` returned; backward
gets the tensor back from `unpack`. Only the innermost pair applies; the hooks a tensor was packed with are the ones
that unpack it. The engine side is Note [Saved tensor hooks] in src/autograd/derivative.h.
"""

import contextlib

from .. import _C

Node = _C._Node

__all__ = ["Node", "saved_tensors_hooks", "save_on_cpu", "disable_saved_tensors_hooks"]


class saved_tensors_hooks:
    """Context manager: `pack_hook(tensor) -> Any` runs when a tensor is saved for backward, `unpack_hook(packed) ->
    Tensor` when backward needs it. Both run with grad mode off."""

    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self):
        _C._push_saved_tensors_default_hooks(self.pack_hook, self.unpack_hook)

    def __exit__(self, *args):
        _C._pop_saved_tensors_default_hooks()


class save_on_cpu(saved_tensors_hooks):
    """Saved tensors are kept on the CPU and moved back to their device for backward (a copy only for tensors that
    were not on the CPU already)."""

    def __init__(self, pin_memory=False, device_type="cuda"):
        def pack_to_cpu(tensor):
            return (tensor.device, tensor.cpu())

        def unpack_from_cpu(packed):
            device, tensor = packed
            return tensor.to(device)

        super().__init__(pack_to_cpu, unpack_from_cpu)


@contextlib.contextmanager
def disable_saved_tensors_hooks(error_message):
    """Within the block, setting saved-tensor hooks raises RuntimeError(error_message) (and so does entering the block
    while hooks are set)."""
    prev = _C._saved_tensors_hooks_get_disabled_error_message()
    try:
        _C._saved_tensors_hooks_disable(error_message)
        yield
    finally:
        if prev is None:
            _C._saved_tensors_hooks_enable()
        else:
            _C._saved_tensors_hooks_disable(prev)
