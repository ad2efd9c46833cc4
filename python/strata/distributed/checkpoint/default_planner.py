"""torch.distributed.checkpoint.default_planner's module path: the planners of strata.distributed.checkpoint."""
from . import DefaultLoadPlanner, DefaultSavePlanner

__all__ = ["DefaultLoadPlanner", "DefaultSavePlanner"]
