"""Backends: what runs a captured graph.

"eager": the graph's own C++ runner (node by node through the dispatcher, no Python per op).
A Python callable `backend(graph_module, example_inputs) -> callable` is accepted as torch
allows. "inductor" (torch's default, often named in scripts) is the eager runner until the fusing
code generator exists; it then becomes the default."""

from .. import _C

_BACKENDS = {}


def register_backend(name, fn=None):
    def deco(f):
        _BACKENDS[name] = f
        return f
    return deco(fn) if fn is not None else deco


def list_backends():
    return sorted(_BACKENDS)


class GraphModule:
    """What a custom backend receives: the captured graph, callable on real inputs."""

    def __init__(self, graph, out):
        self.graph = graph
        self._runner = graph.runner()
        self.input_sources = list(out.input_sources)

    def __call__(self, *inputs):
        return self._runner(*inputs)

    forward = __call__

    def print_readable(self, print_output=True):
        s = self.graph.print_readable()
        if print_output:
            print(s)
        return s

    @property
    def code(self):
        return self.graph.print_readable()


@register_backend("eager")
def _eager(graph, out):
    return graph.runner()


# torch's default backend name, which torch scripts pass explicitly: until Strata's fusing code
# generator (the next piece of the compiled path) exists, it is the eager runner.
register_backend("inductor", _eager)


@register_backend("strata_cpp")
def _strata_cpp(graph, out):
    """Generated C++ kernels for fused groups, the rest node by node (Note [Compiled training steps])."""
    from .aot import aot_compile
    mode = _mode_of(out)
    return aot_compile(graph, compile_fn=lambda g: _compile_cpp(g, mode))


_MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def _mode_of(out):
    opts = getattr(out, "backend_options", None) or {}
    mode = opts.get("mode")
    if mode not in _MODES:
        raise ValueError(f"strata.compile: unknown mode {mode!r}; available: "
                         + ", ".join(repr(m) for m in _MODES[1:]))
    return mode or "default"


def _compile_cpp(graph, mode):
    from .._inductor.fusion import compile_graph
    return compile_graph(graph, None)


@register_backend("aot_eager")
def _aot_eager(graph, out):
    """Forward and backward traced ahead of time, partitioned with a min-cut (aot.py)."""
    from .aot import aot_compile
    return aot_compile(graph)


def lookup_backend(backend):
    if callable(backend):
        user = backend

        def compile_with_user_backend(graph, out):
            gm = GraphModule(graph, out)
            examples = list(out.input_examples)
            fn = user(gm, examples)
            if not callable(fn):
                raise TypeError(f"strata.compile: backend {user!r} returned {type(fn).__name__}, not a callable")

            def run(*inputs):
                r = fn(*inputs)
                return tuple(r) if isinstance(r, (list, tuple)) else (r,)
            return run
        return compile_with_user_backend
    if backend not in _BACKENDS:
        raise ValueError(f"strata.compile: unknown backend {backend!r}; available: {', '.join(list_backends())} "
                         "or a callable (graph_module, example_inputs) -> callable")
    return _BACKENDS[backend]

