"""strata.utils.model_zoo: torch.utils.model_zoo's one name, strata.hub's loader."""

from ..hub import load_state_dict_from_url as load_url  # noqa: F401

__all__ = ["load_url"]
