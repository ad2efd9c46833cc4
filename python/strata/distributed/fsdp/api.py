"""torch.distributed.fsdp.api: the option classes of FullyShardedDataParallel (FSDP1)."""

import dataclasses
import enum
from typing import Optional, Sequence

__all__ = ["ShardingStrategy", "BackwardPrefetch", "MixedPrecision", "CPUOffload", "StateDictType",
           "StateDictConfig", "FullStateDictConfig", "LocalStateDictConfig", "ShardedStateDictConfig",
           "OptimStateDictConfig", "FullOptimStateDictConfig", "LocalOptimStateDictConfig",
           "ShardedOptimStateDictConfig", "StateDictSettings"]


class ShardingStrategy(enum.Enum):
    """FULL_SHARD: parameters, gradients and optimizer state sharded. SHARD_GRAD_OP: gradients and optimizer
    state sharded, parameters kept gathered from forward to backward. NO_SHARD: DDP-like (all-reduce).
    HYBRID_SHARD / _HYBRID_SHARD_ZERO2: full shard (or shard-grad-op) within a node, replicated across nodes;
    on one node they are FULL_SHARD / SHARD_GRAD_OP."""
    FULL_SHARD = enum.auto()
    SHARD_GRAD_OP = enum.auto()
    NO_SHARD = enum.auto()
    HYBRID_SHARD = enum.auto()
    _HYBRID_SHARD_ZERO2 = enum.auto()


class BackwardPrefetch(enum.Enum):
    """Accepted for compatibility; Strata needs no prefetch (see docs/DISTRIBUTED.md)."""
    BACKWARD_PRE = enum.auto()
    BACKWARD_POST = enum.auto()


@dataclasses.dataclass
class MixedPrecision:
    param_dtype: Optional[object] = None
    reduce_dtype: Optional[object] = None
    buffer_dtype: Optional[object] = None
    keep_low_precision_grads: bool = False
    cast_forward_inputs: bool = False
    cast_root_forward_inputs: bool = True
    _module_classes_to_ignore: Sequence[type] = ()


@dataclasses.dataclass
class CPUOffload:
    """Accepted; on a CPU-only build parameters already live on the CPU, so it changes nothing."""
    offload_params: bool = False


class StateDictType(enum.Enum):
    FULL_STATE_DICT = enum.auto()
    LOCAL_STATE_DICT = enum.auto()
    SHARDED_STATE_DICT = enum.auto()


@dataclasses.dataclass
class StateDictConfig:
    offload_to_cpu: bool = False


@dataclasses.dataclass
class FullStateDictConfig(StateDictConfig):
    rank0_only: bool = False


@dataclasses.dataclass
class LocalStateDictConfig(StateDictConfig):
    pass


@dataclasses.dataclass
class ShardedStateDictConfig(StateDictConfig):
    _use_dtensor: bool = False


@dataclasses.dataclass
class OptimStateDictConfig:
    offload_to_cpu: bool = True


@dataclasses.dataclass
class FullOptimStateDictConfig(OptimStateDictConfig):
    rank0_only: bool = False


@dataclasses.dataclass
class LocalOptimStateDictConfig(OptimStateDictConfig):
    offload_to_cpu: bool = False


@dataclasses.dataclass
class ShardedOptimStateDictConfig(OptimStateDictConfig):
    _use_dtensor: bool = False


@dataclasses.dataclass
class StateDictSettings:
    state_dict_type: StateDictType
    state_dict_config: StateDictConfig
    optim_state_dict_config: OptimStateDictConfig
