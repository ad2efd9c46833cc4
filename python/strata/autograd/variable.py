"""torch.autograd.Variable: the pre-0.4 wrapper, kept because old scripts still call it. A Variable is a
Tensor: ``Variable(t, requires_grad=...)`` returns a new tensor sharing ``t``'s data without its history
(``t.detach()``), and every tensor is an instance of Variable."""

from .. import _C


class _VariableMeta(type):
    def __instancecheck__(cls, other):
        return isinstance(other, _C.Tensor)


class Variable(metaclass=_VariableMeta):
    def __new__(cls, data=None, requires_grad=False, volatile=False):
        if data is None:
            data = _C._ops.empty([0])
        if not isinstance(data, _C.Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        out = data.detach()
        if requires_grad:
            out.requires_grad_(True)
        return out
