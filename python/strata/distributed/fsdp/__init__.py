"""torch.distributed.fsdp: FullyShardedDataParallel (FSDP1) and its option classes, and fully_shard (FSDP2),
over strata.distributed.
See docs/DISTRIBUTED.md ("FullyShardedDataParallel")."""

from .api import (BackwardPrefetch, CPUOffload, FullOptimStateDictConfig, FullStateDictConfig,
                  LocalOptimStateDictConfig, LocalStateDictConfig, MixedPrecision, OptimStateDictConfig,
                  ShardedOptimStateDictConfig, ShardedStateDictConfig, ShardingStrategy, StateDictConfig,
                  StateDictSettings, StateDictType)
from .fully_sharded_data_parallel import FullyShardedDataParallel, OptimStateKeyType
from . import wrap  # noqa: F401

__all__ = ["BackwardPrefetch", "CPUOffload", "FullOptimStateDictConfig", "FullStateDictConfig",
           "FullyShardedDataParallel", "LocalOptimStateDictConfig", "LocalStateDictConfig", "MixedPrecision",
           "OptimStateDictConfig", "OptimStateKeyType", "ShardedOptimStateDictConfig", "ShardedStateDictConfig",
           "ShardingStrategy", "StateDictConfig", "StateDictSettings", "StateDictType"]

# fully_shard (FSDP2, parameters as DTensors): _fully_shard.py
from ._fully_shard import (CPUOffloadPolicy, FSDPModule, MixedPrecisionPolicy, OffloadPolicy,  # noqa: E402
                           UnshardHandle, fully_shard, register_fsdp_forward_method)

__all__ += ["fully_shard", "FSDPModule", "MixedPrecisionPolicy", "OffloadPolicy", "CPUOffloadPolicy",
            "UnshardHandle", "register_fsdp_forward_method"]

from strata._missing import module_getattr as _module_getattr  # noqa: E402

__getattr__ = _module_getattr(__name__)
