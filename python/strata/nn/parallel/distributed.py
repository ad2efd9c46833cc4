"""torch.nn.parallel.distributed's module path: the same DistributedDataParallel as strata.nn.parallel."""
from ._ddp import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
