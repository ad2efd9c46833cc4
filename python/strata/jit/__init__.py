"""strata.jit: TorchScript's decorators and entry points, as pass-throughs.

Strata has no TorchScript compiler. Code that scripts or traces a model only
to run it keeps working: `script` returns its argument unchanged, `trace` runs
the function once on the example inputs (so a shape error shows up where
torch's would) and returns it, and the decorators (`ignore`, `unused`,
`export`) return the function. What a pass-through cannot honour raises
NotImplementedError: saving or loading a TorchScript archive (`strata.jit.save`,
`strata.jit.load`, and `.save` on a module returned by `script` or `trace`)."""

import typing
import warnings

from . import annotations  # noqa: F401  (strata.jit.annotations: List, Tuple, ... from typing)
from ..nn.modules.module import Module

__all__ = ["script", "trace", "trace_module", "ignore", "unused", "export", "is_scripting", "is_tracing", "annotate",
           "Final", "script_if_tracing", "TracerWarning", "ScriptModule", "ScriptFunction", "save", "load", "freeze", "optimize_for_inference"]

Final = typing.Final


def _no_archive(what):
    return NotImplementedError(
        f"strata.jit.{what}: TorchScript archives are not supported (Strata has no TorchScript compiler; "
        "strata.jit.script and strata.jit.trace return the model unchanged). Save the weights with "
        "strata.save(model.state_dict(), path) instead.")


def _mark(obj):
    # A scripted/traced nn.Module is the module itself; give it a `.save` that
    # explains instead of the AttributeError a plain module would raise.
    # Written into the instance dict directly: Module.__setattr__ would file a
    # callable under the module's attributes the same way, but this is cheaper.

    if isinstance(obj, Module) and "save" not in obj.__dict__ and not hasattr(type(obj), "save"):
        obj.__dict__["save"] = _module_save
    return obj


def _module_save(*args, **kwargs):
    raise _no_archive("script(...).save")


def script(obj, optimize=None, _frames_up=0, _rcb=None, example_inputs=None):
    """Returns `obj` (a function or module) unchanged: Strata runs it eagerly.
    No TorchScript is compiled, so nothing is type-checked here; calling `.save`
    on the result raises NotImplementedError."""
    return _mark(obj)


def trace(func, example_inputs=None, optimize=None, check_trace=True, check_inputs=None, check_tolerance=1e-5,
          strict=True, _force_outplace=False, _module_class=None, _compilation_unit=None, example_kwarg_inputs=None,
          _store_inputs=True):
    """Runs `func` once on `example_inputs` (a tensor or a tuple of arguments)
    and returns `func` unchanged: Strata runs it eagerly, no graph is recorded.
    Calling `.save` on the result raises NotImplementedError."""
    if example_kwarg_inputs is not None:
        func(**example_kwarg_inputs)
    elif example_inputs is not None:
        func(*example_inputs) if isinstance(example_inputs, tuple) else func(example_inputs)
    return _mark(func)


def trace_module(mod, inputs, *args, **kwargs):
    """Runs each named method of `mod` once on its inputs ({name: args}) and returns `mod`."""
    for name, example in inputs.items():
        getattr(mod, name)(*example) if isinstance(example, tuple) else getattr(mod, name)(example)
    return _mark(mod)


def _decorator(fn=None, **kwargs):
    # Usable bare (@ignore) and with arguments (@ignore(drop=True)).
    if fn is None or not callable(fn):
        return lambda f: f
    return fn


def ignore(drop=False, **kwargs):
    """Marks a function TorchScript should leave to Python: returned unchanged."""
    return _decorator(drop if callable(drop) else None)


def unused(fn):
    """Marks a function TorchScript should not compile: returned unchanged."""
    return fn


def export(fn):
    """Marks a method TorchScript should compile as an entry point: returned unchanged."""
    return fn


def script_if_tracing(fn):
    return fn


def is_scripting():
    """False: nothing runs under TorchScript in Strata."""
    return False


def is_tracing():
    """False: strata.jit.trace runs functions eagerly, recording nothing."""
    return False


def annotate(the_type, the_value):
    return the_value


def save(m, f, _extra_files=None):
    raise _no_archive("save")


def load(f, map_location=None, _extra_files=None):
    raise _no_archive("load")


def freeze(mod, preserved_attrs=None, optimize_numerics=True):
    """Returns `mod` unchanged (there is no TorchScript graph to freeze)."""
    return mod


def optimize_for_inference(mod, other_methods=None):
    """Returns `mod` unchanged (there is no TorchScript graph to optimise)."""
    return mod


class TracerWarning(Warning):
    """The warning category torch's tracer uses; Strata's trace records nothing and
    never emits it, but scripts filter on it."""

    @staticmethod
    def ignore_lib_warnings():
        warnings.filterwarnings("ignore", category=TracerWarning, module="torch.(?!jit)")
        warnings.filterwarnings("ignore", category=TracerWarning, module="strata.(?!jit)")


class ScriptModule(Module):
    """torch.jit.ScriptModule, which scripts subclass: here a plain nn.Module (Strata
    runs modules eagerly; nothing is compiled). `.save` raises NotImplementedError,
    as for any module returned by strata.jit.script."""

    def save(self, f, _extra_files=None):
        raise _no_archive("ScriptModule.save")


class ScriptFunction:
    """torch.jit.ScriptFunction, for isinstance checks: strata.jit.script returns
    functions unchanged, so no object is ever of this type."""

    def __init__(self, *args, **kwargs):
        raise RuntimeError("strata.jit.ScriptFunction cannot be constructed: strata.jit.script returns the "
                           "function itself")
