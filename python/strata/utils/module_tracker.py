"""strata.utils.module_tracker.ModuleTracker: which modules are running, in the forward and in the backward pass.

As torch's: the forward pre/post hooks of every module (global hooks) add and remove its name in `parents`; in the
backward pass the module is entered when the gradient of one of its outputs is ready and left when those of all
its inputs that need one are (tensor hooks registered during the forward; torch waits for all outputs that take part
in the backward, which we cannot tell). Names are the root module's class name, then dotted child names
("MLP", "MLP.fc1"). `parents` goes back to {"Global"} at the start of each forward of a module after a backward.
"""

import weakref

from .. import _C
from ..nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

__all__ = ["ModuleTracker"]


def _tensors(obj):

    out = []

    def walk(o):
        if isinstance(o, _C.Tensor):
            if o.requires_grad:
                out.append(o)
        elif isinstance(o, (list, tuple)):
            for x in o:
                walk(x)
        elif isinstance(o, dict):
            for x in o.values():
                walk(x)

    walk(obj)
    return out


def _when_all_grads(tensors, fn):
    """Calls fn once the gradients of all `tensors` were computed in a backward pass (again in a later pass)."""
    remaining = [len(tensors)]

    def hook(_grad):
        remaining[0] -= 1
        if remaining[0] == 0:
            remaining[0] = len(tensors)
            fn()

    return [t.register_hook(hook) for t in tensors]


class ModuleTracker:
    def __init__(self):
        self.parents = {"Global"}
        self._known = weakref.WeakKeyDictionary()
        self._seen = weakref.WeakSet()
        self._handles = []
        self._in_bw = False
        # Called on every change with (kind, name): kind in "fw+", "fw-", "bw+", "bw-", "reset".
        self._listener = None

    @property
    def is_bw(self):
        return self._in_bw

    def _name(self, mod):
        if mod not in self._known:
            self._known[mod] = type(mod).__name__
        name = self._known[mod]
        if mod not in self._seen:
            for child_name, child in mod.named_children():
                self._known[child] = f"{name}.{child_name}"
                self._name(child)
            self._seen.add(mod)
        return name

    def _note(self, kind, name):
        if self._listener is not None:
            self._listener(kind, name)

    def _enter(self, name, bw):
        if bw and not self._in_bw:
            self._in_bw = True
        self.parents.add(name)
        self._note("bw+" if bw else "fw+", name)

    def _leave(self, name, bw):
        self.parents.discard(name)
        self._note("bw-" if bw else "fw-", name)

    def _fw_pre_hook(self, mod, args):
        if self._in_bw:  # a forward after a backward: what the backward left entered is over
            self._in_bw = False
            self.parents = {"Global"}
            self._note("reset", "")
        name = self._name(mod)
        self._enter(name, False)
        ts = _tensors(args)
        if ts:
            self._handles += _when_all_grads(ts, lambda: self._leave(name, True))

    def _fw_post_hook(self, mod, args, output):
        name = self._name(mod)
        self._leave(name, False)
        ts = _tensors(output)
        if ts:
            # Entered as soon as any output's gradient is ready (outputs such as attention weights often get
            # none, and entering twice is harmless).
            self._handles += [t.register_hook(lambda _g: self._enter(name, True)) for t in ts]

    def __enter__(self):
        self._pre = register_module_forward_pre_hook(self._fw_pre_hook)
        self._post = register_module_forward_hook(self._fw_post_hook)
        return self

    def __exit__(self, *args):
        self._pre.remove()
        self._post.remove()
        for h in self._handles:
            h.remove()
        self._handles.clear()
