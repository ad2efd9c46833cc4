"""strata.linalg: the torch.linalg functions Strata implements."""

from . import _C

_ops = _C._ops

# cross(input, other, *, dim=-1, out=None): the op linalg_cross (decl/misc_more.def).
cross = _ops.linalg_cross

__all__ = ["cross"]
