"""torch.nn.parallel.distributed's module path: the same DistributedDataParallel as strata.nn.parallel."""
from ._ddp import DistributedDataParallel

__all__ = ["DistributedDataParallel"]

# Imported on first use, after strata's import gave its modules their miss hook: a torch name Strata lacks
# says "not implemented yet" here too.
from strata._missing import module_getattr as _module_getattr  # noqa: E402

__getattr__ = _module_getattr(__name__)
