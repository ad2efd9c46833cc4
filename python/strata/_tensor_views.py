"""View-related Tensor properties and in-place view methods.

The view ops themselves (view, transpose, select, ...) are generated from the
op table, and indexing (__getitem__/__setitem__) is attached in C++
(python/src/indexing_bind.cpp). What is here has no op of its own."""

import sys

from . import _C

Tensor = _C.Tensor
_ops = _C._ops


def _T(self):
    # PyTorch: reverses all dims (deprecated for ndim not in (0, 2), still works).
    return _ops.permute(self, tuple(range(self.ndim - 1, -1, -1)))


def _mT(self):
    if self.ndim < 2:
        raise RuntimeError(f"tensor.mT is only supported on matrices or batches of matrices. Got {self.ndim}-D tensor.")
    return _ops.transpose(self, -2, -1)


Tensor.T = property(_T)
Tensor.mT = property(_mT)


# ---- in-place view ops: re-point self at the geometry of the view ----------
def _inplace_view(name, op):
    def method(self, *args, **kwargs):
        _C._set_geometry_from(self, op(self, *args, **kwargs))
        return self

    method.__name__ = name
    return method


Tensor.transpose_ = _inplace_view("transpose_", _ops.transpose)
Tensor.swapaxes_ = _inplace_view("swapaxes_", _ops.transpose)
Tensor.swapdims_ = _inplace_view("swapdims_", _ops.transpose)
Tensor.t_ = _inplace_view("t_", _ops.t)
Tensor.squeeze_ = _inplace_view("squeeze_", _ops.squeeze)
Tensor.unsqueeze_ = _inplace_view("unsqueeze_", _ops.unsqueeze)
Tensor.as_strided_ = _inplace_view("as_strided_", _ops.as_strided)


# torch returns a tuple from unbind; the generic binding returns lists for Tensor[].
def unbind(input, dim=0):
    return tuple(_ops.unbind(input, dim))


Tensor.unbind = lambda self, dim=0: unbind(self, dim)


# `slice` is an op (aten::slice) but must not shadow the builtin for
# `from strata import *`; torch exposes it only under torch.ops.
_pkg = sys.modules[__name__.rsplit(".", 1)[0]]
_pkg.unbind = unbind
for _name in ("slice",):
    if _pkg.__dict__.get(_name) is getattr(_ops, _name, None):
        delattr(_pkg, _name)
    _fns = sys.modules.get(_pkg.__name__ + "._functions")
    if _fns is not None and _name in _fns.__all__:
        _fns.__all__.remove(_name)
        _fns.__dict__.pop(_name, None)
