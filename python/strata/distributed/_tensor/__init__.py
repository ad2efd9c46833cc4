"""torch.distributed._tensor, the older name of strata.distributed.tensor (scripts written for torch < 2.4)."""

from ..tensor import *  # noqa: F401,F403
from ..tensor import __all__  # noqa: F401
