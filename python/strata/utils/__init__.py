"""strata.utils: training utilities (torch.utils)."""

from . import data  # noqa: F401
from . import checkpoint  # noqa: F401
from . import model_zoo  # noqa: F401
from ._swap import swap_tensors  # noqa: F401
from . import file_baton  # noqa: F401
