"""torch.serialization's helper names over strata's loader: location_tag,
default_restore_location, normalize_storage_type, get_unsafe_globals_in_checkpoint."""

import os
import pickle

from . import _C

__all__ = ["location_tag", "default_restore_location", "normalize_storage_type", "get_unsafe_globals_in_checkpoint"]


def location_tag(storage):
    """The location string a checkpoint records for a storage or tensor: its device ('cpu')."""
    dev = getattr(storage, "device", None)
    if isinstance(dev, _C.device):
        return "cpu" if dev.type == "cpu" else str(dev)
    raise RuntimeError(f"don't know how to determine data location of {type(storage).__module__}."
                       f"{type(storage).__qualname__}")


def default_restore_location(storage, location):
    """Restores `storage` to the location a checkpoint names: 'cpu' returns it as is;
    an accelerator location raises RuntimeError (strata has only the CPU)."""
    from .serialization import _location_restorer
    return _location_restorer(None)(storage, location)


def normalize_storage_type(storage_type):
    """The top-level class of the same name as `storage_type` (torch maps
    torch.cuda.X to torch.X this way)."""
    import strata
    return getattr(strata, storage_type.__name__)


def _globals_in_pickle(data):
    # Static disassembly: pickletools only decodes opcodes, it never runs them.
    # STACK_GLOBAL takes its module and name from the two strings pushed before it.
    import pickletools
    found, strings = set(), []
    for op, arg, _ in pickletools.genops(data):
        if op.name == "GLOBAL":
            module, name = arg.split(" ", 1)
            found.add((module, name))
        elif op.name == "STACK_GLOBAL" and len(strings) >= 2:
            found.add((strings[-2], strings[-1]))
        if isinstance(arg, str) and op.name in ("SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE"):
            strings.append(arg)
        elif op.name in ("BINGET", "LONG_BINGET", "GET"):
            pass  # a memo fetch of an earlier string keeps `strings` as is: approximate, as torch's scan
    return found


def get_unsafe_globals_in_checkpoint(f):
    """The "module.name" strings of the functions and classes a torch zip checkpoint's
    pickle names that a weights_only load would refuse (not allowed by default nor
    through add_safe_globals/safe_globals). Found by disassembling the pickle, so
    anything the pickle builds dynamically is not listed."""
    import zipfile

    from .serialization import _find_safe_global

    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as fh:
            return get_unsafe_globals_in_checkpoint(fh)
    if not zipfile.is_zipfile(f):
        raise ValueError("Expected input to be a checkpoint returned by torch.save")
    f.seek(0)
    with zipfile.ZipFile(f) as z:
        names = z.namelist()
        if any(n.endswith("/constants.pkl") for n in names):
            raise ValueError("Expected input to be a checkpoint returned by torch.save but got a torchscript "
                             "checkpoint")
        pkl = [n for n in names if n == "data.pkl" or n.endswith("/data.pkl")]
        if not pkl:
            raise ValueError("Expected input to be a checkpoint returned by torch.save (no data.pkl record)")
        data = z.read(pkl[0])
    unsafe = []
    for module, name in _globals_in_pickle(data):
        try:
            _find_safe_global(module, name)
        except pickle.UnpicklingError:
            unsafe.append(f"{module}.{name}")
    return unsafe
