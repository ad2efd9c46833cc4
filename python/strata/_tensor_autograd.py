"""Tensor methods of autograd that are thin Python over the C++ engine:
backward() and register_hook() (which returns a handle with remove())."""

from . import _C

Tensor = _C.Tensor


class RemovableHandle:
    def __init__(self, remove):
        self._remove = remove

    def remove(self):
        if self._remove is not None:
            self._remove()
            self._remove = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def _backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
    from .autograd import backward

    backward(self, gradient, retain_graph, create_graph, inputs=inputs)


def _register_hook(self, hook):
    node, index, pos = self._register_hook(hook)
    if node is None:
        return RemovableHandle(lambda t=self, p=pos: t._remove_leaf_hook(p))
    return RemovableHandle(lambda n=node, i=index, p=pos: n._remove_prehook(i, p))


Tensor.backward = _backward
Tensor.register_hook = _register_hook
Tensor._make_subclass = staticmethod(_C._make_subclass)
