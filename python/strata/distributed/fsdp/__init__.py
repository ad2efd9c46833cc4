"""strata.distributed.fsdp: FSDP2's fully_shard (see _fully_shard.py)."""

from ._fully_shard import (CPUOffloadPolicy, FSDPModule, MixedPrecisionPolicy, OffloadPolicy, UnshardHandle,
                           fully_shard, register_fsdp_forward_method)

__all__ = ["fully_shard", "FSDPModule", "MixedPrecisionPolicy", "OffloadPolicy", "CPUOffloadPolicy",
           "UnshardHandle", "register_fsdp_forward_method"]
