"""strata.ops: operators by namespace, and loading of extension libraries.

Like ``torch.ops``: ``strata.ops.load_library(path)`` loads a shared library
whose static initialisers define ops (``myext::scaled_add(...)``), kernels or a
whole backend with the dispatcher; every op it newly defines is then callable
as ``strata.ops.<namespace>.<name>`` (``strata.ops.myext.scaled_add``). Built-in
ops are reachable as ``strata.ops.aten.<name>`` too. Ops are bound through the
same generic schema-driven binding as the built-in ones, so argument parsing,
defaults, keyword arguments and error messages behave the same.
"""

import os
import threading
import types

from . import _C

__all__ = ["load_library", "loaded_libraries"]

# Paths (as given, made absolute) of the libraries loaded so far.
loaded_libraries = set()

_lock = threading.Lock()
_namespaces = {}


class _OpNamespace(types.ModuleType):
    """``strata.ops.<ns>``: binds ``<ns>::<name>`` on first attribute access."""

    def __init__(self, name):
        super().__init__("strata.ops." + name)
        self._ns = name

    def _qualified(self, op):
        return op if self._ns == "aten" else f"{self._ns}::{op}"

    def __getattr__(self, op):
        if op.startswith("__"):
            raise AttributeError(op)
        qualified = self._qualified(op)
        if self._ns == "aten" and hasattr(_C._ops, op):
            fn = getattr(_C._ops, op)
        else:
            try:
                fn = _C._bind_op(qualified)
            except RuntimeError:
                raise AttributeError(
                    f"'strata.ops.{self._ns}' has no operator '{op}' (no op named '{qualified}' is defined; "
                    "was its library loaded with strata.ops.load_library?)"
                ) from None
        setattr(self, op, fn)
        return fn

    def __dir__(self):
        prefix = "" if self._ns == "aten" else self._ns + "::"
        names = {s["name"][len(prefix):] for s in _C._op_schemas() if s["name"].startswith(prefix)}
        return sorted(n for n in names if "::" not in n)


def _namespace(name):
    ns = _namespaces.get(name)
    if ns is None:
        ns = _namespaces[name] = _OpNamespace(name)
    return ns


def __getattr__(name):  # PEP 562: strata.ops.<namespace>
    if name.startswith("__"):
        raise AttributeError(name)
    return _namespace(name)


def _split(full_name):
    ns, sep, op = full_name.partition("::")
    return (ns, op) if sep else ("aten", full_name)


def _bind(full_name):
    ns, op = _split(full_name)
    fn = _C._bind_op(full_name)  # binds every overload of the name
    setattr(_namespace(ns), op, fn)
    return fn


def load_library(path):
    """Loads a shared library that registers ops/kernels/backends and binds its new ops.

    Raises OSError when the library cannot be loaded. Loading the same library
    twice is harmless (its initialisers run once)."""
    path = os.path.abspath(os.fspath(path))
    with _lock:
        before = {s["name"] for s in _C._op_schemas()}
        try:
            _C._load_library(path)
        except RuntimeError as e:
            raise OSError(str(e)) from None
        loaded_libraries.add(path)
        new = []
        for s in _C._op_schemas():
            name = s["name"]
            if name not in before and name not in new:
                new.append(name)
        for name in new:
            _bind(name)
