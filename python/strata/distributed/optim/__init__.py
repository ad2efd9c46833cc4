"""strata.distributed.optim: ZeroRedundancyOptimizer and DistributedOptimizer (torch.distributed.optim)."""

from .optimizer import DistributedOptimizer
from .zero_redundancy_optimizer import ZeroRedundancyOptimizer

__all__ = ["ZeroRedundancyOptimizer", "DistributedOptimizer"]

# Imported on first use, after strata's import gave its modules their miss hook: a torch name Strata lacks
# (DistributedOptimizer, ...) says "not implemented yet" here too.
from ..._missing import module_getattr as _module_getattr  # noqa: E402

__getattr__ = _module_getattr(__name__)
