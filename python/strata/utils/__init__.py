"""strata.utils: training utilities (torch.utils)."""

from . import data  # noqa: F401
from . import checkpoint  # noqa: F401
from . import model_zoo  # noqa: F401
from ._swap import swap_tensors  # noqa: F401
from . import file_baton  # noqa: F401


def __getattr__(name):
    # Loaded on first use (they import strata.nn).
    if name in ("flop_counter", "module_tracker", "cpp_extension", "mobile_optimizer"):
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
