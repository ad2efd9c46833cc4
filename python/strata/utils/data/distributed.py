"""strata.utils.data.distributed (torch.utils.data.distributed)."""

from ._more import DistributedSampler

__all__ = ["DistributedSampler"]
