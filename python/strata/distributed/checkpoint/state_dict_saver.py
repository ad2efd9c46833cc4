"""torch.distributed.checkpoint.state_dict_saver's names (see the package)."""

from . import save, save_state_dict  # noqa: F401
