"""Run an unmodified torch script on Strata: ``python -m strata.torch_alias script.py [args...]``.

Inside the script, ``import torch``, ``import torch.nn as nn``, ``from torch.utils.data import DataLoader``
and every other ``torch.X`` import resolve to the matching ``strata.X`` module, so the script's text stays
exactly as written for PyTorch. ``install()`` does the same inside a running process (tests use it); it refuses
when the real torch is already imported, since two modules answering to one name would mix tensors of both
frameworks.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import runpy
import sys

__all__ = ["install", "uninstall", "main"]


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target: str):
        self._target = target

    def create_module(self, spec):
        return importlib.import_module(self._target)

    def exec_module(self, module):  # the strata module is already executed
        pass


class _TorchToStrata(importlib.abc.MetaPathFinder):
    """Maps ``torch`` and ``torch.<sub>`` to ``strata`` and ``strata.<sub>``."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torch" and not fullname.startswith("torch."):
            return None
        target_name = "strata" + fullname[len("torch"):]
        if importlib.util.find_spec(target_name) is None:
            return None  # a torch submodule Strata lacks: the import fails with the usual ModuleNotFoundError
        is_pkg = hasattr(importlib.import_module(target_name), "__path__")
        return importlib.util.spec_from_loader(fullname, _AliasLoader(target_name), is_package=is_pkg)


_finder = _TorchToStrata()


def install() -> None:
    """Makes ``import torch`` (and its submodules) import Strata in this process."""
    loaded = sys.modules.get("torch")
    if loaded is not None and not getattr(loaded, "__name__", "").startswith("strata"):
        raise RuntimeError("strata.torch_alias.install(): the real torch is already imported in this process")
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)


def uninstall() -> None:
    """Removes the alias and forgets the ``torch`` names it made."""
    if _finder in sys.meta_path:
        sys.meta_path.remove(_finder)
    for name in [n for n in sys.modules if n == "torch" or n.startswith("torch.")]:
        if getattr(sys.modules[name], "__name__", "").startswith("strata"):
            del sys.modules[name]


def main(argv=None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        raise SystemExit(0 if argv else 2)
    install()
    sys.argv = argv
    runpy.run_path(argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
