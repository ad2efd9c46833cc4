"""strata.utils: training utilities (torch.utils)."""

from . import data  # noqa: F401
