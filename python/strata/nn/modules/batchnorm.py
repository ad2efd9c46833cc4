"""torch.nn.modules.batchnorm's names (the classes live in normalization.py)."""

from .normalization import _NormBase, _BatchNorm, BatchNorm1d, BatchNorm2d, BatchNorm3d, SyncBatchNorm  # noqa: F401

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm"]
