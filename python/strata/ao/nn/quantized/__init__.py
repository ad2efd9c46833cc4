from . import dynamic  # noqa: F401
