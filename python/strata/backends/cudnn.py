"""strata.backends.cudnn: cuDNN switches. Strata has no cuDNN, so
`is_available()` is False and `version()` None; `benchmark`, `deterministic`,
`enabled` and `allow_tf32` are plain module attributes that scripts set and
read (torch's defaults), with no effect on the CPU."""

import contextlib

enabled = True
benchmark = False
benchmark_limit = 10
deterministic = False
allow_tf32 = True


def is_available():
    return False


def version():
    return None


def is_acceptable(tensor):
    return False


@contextlib.contextmanager
def flags(enabled=False, benchmark=False, benchmark_limit=10, deterministic=False, allow_tf32=True):
    g = globals()
    names = ("enabled", "benchmark", "benchmark_limit", "deterministic", "allow_tf32")
    prev = {n: g[n] for n in names}
    g.update(zip(names, (enabled, benchmark, benchmark_limit, deterministic, allow_tf32)))
    try:
        yield
    finally:
        g.update(prev)
