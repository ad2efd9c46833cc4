"""strata.utils: training utilities (torch.utils)."""

from . import data  # noqa: F401
from . import checkpoint  # noqa: F401

# A torch name missing here raises "not implemented yet" (strata/_missing.py).
from .._missing import module_getattr as _module_getattr  # noqa: E402

__getattr__ = _module_getattr(__name__)
