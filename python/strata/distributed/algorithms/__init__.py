"""torch.distributed.algorithms: activation checkpointing wrappers (`_checkpoint.checkpoint_wrapper`)."""

from strata._missing import module_getattr as _module_getattr  # noqa: E402

__getattr__ = _module_getattr(__name__)
