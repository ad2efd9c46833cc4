"""STRATA_LOGS: what strata.compile prints as it works, like TORCH_LOGS.

STRATA_LOGS=graph_breaks,recompiles,guards,graph_code,output_code,aot,autotune (a comma list; "all" for
every one; a leading "+" on a name is accepted and ignored). Messages go to stderr and name
the user's file and line. Also settable from Python with strata._logging.set_logs(...)."""

import os
import sys

KINDS = ("graph_breaks", "recompiles", "guards", "graph_code", "output_code", "aot", "autotune")
_enabled = set()


def set_logs(**kinds):
    for k, v in kinds.items():
        if k not in KINDS:
            raise ValueError(f"set_logs: unknown log {k!r}; known: {', '.join(KINDS)}")
        (_enabled.add if v else _enabled.discard)(k)


def _parse(value):
    out = set()
    for part in (value or "").split(","):
        part = part.strip().lstrip("+")
        if not part:
            continue
        if part == "all":
            out.update(KINDS)
        elif part in KINDS:
            out.add(part)
        elif part == "dynamo":
            out.update(("graph_breaks", "recompiles"))
    return out


_enabled.update(_parse(os.environ.get("STRATA_LOGS", "")))


def enabled(kind):
    return kind in _enabled


def _emit(kind, msg):
    sys.stderr.write(f"[strata.compile:{kind}] {msg}\n")


def graph_break(code, reason, location, eager_frame=False):
    from . import eval_frame
    eval_frame._record_break(code, reason, location, eager_frame)
    if "graph_breaks" in _enabled:
        what = "the frame runs eagerly" if eager_frame else "graph break"
        _emit("graph_breaks", f"{what} in {code.co_qualname}: {reason}\n    at {location}")


def recompile(code, failed_guard, n):
    if "recompiles" in _enabled:
        _emit("recompiles", f"recompiling {code.co_qualname} ({code.co_filename}:{code.co_firstlineno}), "
                            f"version {n + 1}: guard failed: {failed_guard}")


def dynamic_fallback(code, reason):
    """Symbolic sizes were given up for a frame: it is captured with static sizes."""
    if "recompiles" in _enabled:
        _emit("recompiles", f"{code.co_qualname} ({code.co_filename}:{code.co_firstlineno}): dynamic shapes "
                            f"fall back to static sizes: {reason}")


def new_entry(code, entry):
    if "guards" in _enabled:
        _emit("guards", f"guards of {code.co_qualname}:\n    " + "\n    ".join(entry.guard_descriptions))
    if "graph_code" in _enabled or "output_code" in _enabled:
        _emit("graph_code", f"graph of {code.co_qualname} ({entry.num_ops} ops):\n{entry.graph.print_readable()}")
    if "output_code" in _enabled:
        _emit("output_code", f"run function of {code.co_qualname}:\n{entry.source}")


def aot(msg):
    """AOT autograd's partition decisions and fallbacks (backend="aot_eager")."""
    if "aot" in _enabled:
        _emit("aot", msg)


def graph_error_rerun(code, exc):
    """A graph op raised inside a frame with try/with blocks: the frame runs again in Python."""
    if "graph_breaks" in _enabled:
        _emit("graph_breaks", f"{code.co_qualname} ({code.co_filename}:{code.co_firstlineno}): a graph op raised "
                              f"{type(exc).__name__}; the frame runs again eagerly so that its handlers see it")
