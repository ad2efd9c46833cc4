"""torch.distributed.fsdp: FullyShardedDataParallel (FSDP1) and its option classes, over strata.distributed.
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

# fully_shard (FSDP2) lives in its own module; its names join this namespace when it is present.
import importlib.util as _importlib_util  # noqa: E402

if _importlib_util.find_spec(__name__ + "._fully_shard") is not None:
    from . import _fully_shard as _fsdp2
    _names = getattr(_fsdp2, "__all__", [n for n in vars(_fsdp2) if not n.startswith("_")])
    globals().update({n: getattr(_fsdp2, n) for n in _names})
    __all__ += [n for n in _names if n not in __all__]
    del _fsdp2, _names

from strata._missing import module_getattr as _module_getattr  # noqa: E402

__getattr__ = _module_getattr(__name__)
