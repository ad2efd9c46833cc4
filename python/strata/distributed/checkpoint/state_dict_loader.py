"""torch.distributed.checkpoint.state_dict_loader's names (see the package)."""

from . import load, load_state_dict  # noqa: F401
