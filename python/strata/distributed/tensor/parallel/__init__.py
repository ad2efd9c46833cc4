"""strata.distributed.tensor.parallel: tensor parallelism with explicit parallel styles (see style.py)."""

from .api import parallelize_module
from .loss import loss_parallel
from .style import (ColwiseParallel, ParallelStyle, PrepareModuleInput, PrepareModuleOutput, RowwiseParallel,
                    SequenceParallel)

__all__ = ["parallelize_module", "loss_parallel", "ParallelStyle", "ColwiseParallel", "RowwiseParallel", "SequenceParallel",
           "PrepareModuleInput", "PrepareModuleOutput"]
