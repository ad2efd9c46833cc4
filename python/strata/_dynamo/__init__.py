"""strata._dynamo: the capture half of strata.compile (torch._dynamo's names).

symbolic.py interprets bytecode on Meta tensors and records a graph (strata._C._compile);
convert.py turns a capture into a guarded cache entry and splits frames at graph breaks
into resume functions (bytecode.py); eval_frame.py is the runtime (caches, recompiles,
explain). See docs/COMPILE.md."""

from . import config  # noqa: F401
from .eval_frame import reset, explain, disable, allow_in_graph, is_compiling  # noqa: F401
from .backends import register_backend, list_backends  # noqa: F401


def mark_dynamic(t, index, *, min=None, max=None):
    """Marks dimension(s) of t as dynamic: strata.compile captures them as symbolic sizes from the
    first call (sizes 0 and 1 stay specialized). min/max are accepted and not used."""
    dims = getattr(t, "_strata_dynamic_dims", None)
    if dims is None:
        dims = set()
    dims.update(index if isinstance(index, (list, tuple)) else [index])
    try:
        t._strata_dynamic_dims = dims
    except AttributeError:
        pass


def mark_static(t, index=None):
    return None


def maybe_mark_dynamic(t, index):
    return mark_dynamic(t, index)


def optimize(backend="eager", *, nopython=False, dynamic=None, disable=False):
    """torch._dynamo.optimize(backend)(fn): the older spelling of compile."""
    from .. import compile as _compile
    return lambda fn: _compile(fn, backend=backend, fullgraph=nopython, dynamic=dynamic, disable=disable)
