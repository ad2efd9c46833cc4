"""Names torch has and Strata does not yet: a clear error instead of a bare
AttributeError.

`strata.nn.<name>`, `strata.cuda.<name>`, ... end here on a miss: install_module_hooks gives every strata
module a module-level `__getattr__` (PEP 562) except `strata` and `strata.nn.functional`, whose attribute
reads are on the per-op path (Note [No miss hook on hot modules]: an uncaught miss there is annotated by
install_excepthook instead); tensors get a placeholder attribute per
missing torch name instead (see install_tensor_placeholders). A name torch has raises
NotImplementedAttributeError, "strata.X is not implemented yet (torch.X)"; any other name the usual
AttributeError. The list of torch's names (_torch_names.json, written by bench/api_usage/extract.py) is read
once: at import for the Tensor placeholders (0.3 ms).

NotImplementedAttributeError derives from both NotImplementedError and
AttributeError: feature probes such as `hasattr(torch, "compile")` or
`getattr(F, "scaled_dot_product_attention", None)` keep answering False/None
rather than raising."""

import json
import os

__all__ = ["NotImplementedAttributeError", "missing_attribute", "module_getattr", "install_tensor_placeholders",
           "install_module_hooks", "install_excepthook"]


class NotImplementedAttributeError(NotImplementedError, AttributeError):
    """A torch name that Strata does not implement yet."""


_names = None


def _torch_names():
    global _names
    if _names is None:
        with open(os.path.join(os.path.dirname(__file__), "_torch_names.json")) as fh:
            _names = {ns: frozenset(v) for ns, v in json.load(fh)["names"].items()}
    return _names


def missing_attribute(namespace, name):
    """The exception for `<namespace>.<name>` missing (namespace: "strata.nn", ...)."""
    if not name.startswith("_"):
        torch_ns = "torch" + namespace[len("strata"):]
        if name in _torch_names().get(torch_ns, ()):
            return NotImplementedAttributeError(f"{namespace}.{name} is not implemented yet ({torch_ns}.{name})")
    return AttributeError(f"module '{namespace}' has no attribute '{name}'")


def module_getattr(namespace):
    """A module-level `__getattr__` for `namespace`: `__getattr__ = module_getattr(__name__)`."""

    def __getattr__(name):
        raise missing_attribute(namespace, name)

    return __getattr__


# Note [No miss hook on hot modules]
# CPython 3.11 and 3.12 do not specialise attribute loads from a module whose dict holds __getattr__: every
# `strata.add`, `F.relu`, `strata.float32` then takes the generic lookup, measured +10 ns per attribute read and
# +25 to +40 ns per `strata.add(a, b)` / `F.relu(a)` call (a 4-float add costs about 240 ns). The two modules
# that per-op code reads on every call keep the specialised path; a torch name missing from them raises
# Python's plain AttributeError, which install_excepthook annotates if the script dies of it.
HOT_MODULES = frozenset({"strata", "strata.nn.functional"})


def _explain_hot_miss(exc):
    """The "not implemented yet" note for a plain AttributeError from a hot module (None if it is not one)."""
    import sys

    obj, name = getattr(exc, "obj", None), getattr(exc, "name", None)
    namespace = getattr(obj, "__name__", None)
    if namespace in HOT_MODULES and sys.modules.get(namespace) is obj and isinstance(name, str):
        err = missing_attribute(namespace, name)
        if isinstance(err, NotImplementedAttributeError):
            return str(err)
    return None


def install_excepthook():
    """An uncaught AttributeError for a torch name missing from a hot module gets the not-implemented note
    when Python prints it, so a script that dies there still says what is missing, at no cost per lookup."""
    import sys

    previous = sys.excepthook

    def hook(exc_type, exc, tb):
        if isinstance(exc, AttributeError):
            note = _explain_hot_miss(exc)
            if note and note not in getattr(exc, "__notes__", ()):
                exc.add_note(note)
        previous(exc_type, exc, tb)

    sys.excepthook = hook


def install_module_hooks(package="strata"):
    """Gives every module of `package` imported so far a module-level
    `__getattr__` (PEP 562 reads it from the module's dict on a miss, so it can
    be set from here: no module has to carry its own). Modules that define one
    themselves (strata.ops) keep theirs."""
    import sys

    for name, mod in list(sys.modules.items()):
        private = name.rsplit(".", 1)[-1].startswith("_")  # strata._C, strata._tensor: not torch's API
        if (name == package or name.startswith(package + ".")) and mod is not None and not private and \
                name not in HOT_MODULES and "__getattr__" not in vars(mod):
            mod.__getattr__ = module_getattr(name)


class _MissingTensorAttribute:
    """Placeholder for a torch.Tensor attribute Strata lacks. Reading it (from a
    tensor or from the class) raises NotImplementedAttributeError, so hasattr()
    answers False, and assigning the real method over it replaces it."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __get__(self, obj, owner=None):
        raise NotImplementedAttributeError(f"strata.Tensor.{self.name} is not implemented yet "
                                           f"(torch.Tensor.{self.name})")


def install_tensor_placeholders(tensor_type):
    """Puts a placeholder on `tensor_type` for every public torch.Tensor name it
    lacks. Run once, after every module that attaches Tensor methods.

    Why not Tensor.__getattr__: a type with __getattr__ loses CPython's
    specialised attribute and method lookups, which measured +5 to +30 ns on
    every `t.shape`, `t.size()`, `t.add(u)`;
    placeholders cost nothing per access and about 0.3 ms at import."""
    have = set()
    for klass in tensor_type.__mro__:
        have.update(klass.__dict__)
    for name in _torch_names().get("torch.Tensor", ()):
        if name not in have:
            setattr(tensor_type, name, _MissingTensorAttribute(name))
