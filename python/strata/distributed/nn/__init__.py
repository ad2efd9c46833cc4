"""strata.distributed.nn: collectives that autograd differentiates (torch.distributed.nn)."""

from .functional import (  # noqa: F401
    all_gather, all_reduce, all_to_all, all_to_all_single, broadcast, gather, reduce, reduce_scatter, scatter)
from .api.remote_module import RemoteModule  # noqa: F401

# Imported on first use, after strata's import gave its modules their miss hook: a torch name Strata lacks
# says "not implemented yet" here too.
from strata._missing import module_getattr as _module_getattr  # noqa: E402

__getattr__ = _module_getattr(__name__)
