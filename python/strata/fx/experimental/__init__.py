"""strata.fx.experimental: of torch.fx.experimental, only ``optimization`` (fuse, remove_dropout)."""

from . import optimization  # noqa: F401
