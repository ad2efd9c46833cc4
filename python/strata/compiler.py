"""strata.compiler: the public face of strata.compile (torch.compiler's names)."""

__all__ = ["compile", "reset", "disable", "allow_in_graph", "explain", "is_compiling", "is_dynamo_compiling",
           "list_backends", "register_backend"]


def compile(*args, **kwargs):
    from . import compile as _compile
    return _compile(*args, **kwargs)


def is_compiling():
    """True while strata.compile is capturing (a call inside a compiled function folds to True)."""
    from ._dynamo.eval_frame import is_compiling as _is
    return _is()


def is_dynamo_compiling():
    return is_compiling()


def reset():
    from ._dynamo import reset as _reset
    _reset()


def disable(fn=None, recursive=True, *, reason=None):
    from ._dynamo import disable as _disable
    return _disable(fn, recursive, reason=reason)


def allow_in_graph(fn):
    from ._dynamo import allow_in_graph as _allow
    return _allow(fn)


def explain(f, *args, **kwargs):
    from ._dynamo import explain as _explain
    return _explain(f, *args, **kwargs)


def list_backends(exclude_tags=None):
    from ._dynamo import list_backends as _lb
    return _lb()


def register_backend(name=None, fn=None):
    from ._dynamo import register_backend as _rb
    return _rb(name, fn)
