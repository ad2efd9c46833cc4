"""strata.nn: neural-network building blocks (torch.nn)."""

from . import functional  # noqa: F401
