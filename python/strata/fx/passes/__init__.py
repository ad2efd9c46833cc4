"""strata.fx.passes: analyses and rewrites over fx graphs (shape_prop.ShapeProp, split_module.split_module)."""

from . import shape_prop, split_module  # noqa: F401
