"""Whether a shared library the CPU core loads at run time (oneDNN, a BLAS) can
be loaded here: the core opens these with dlopen at first use, so this asks
the same question of the dynamic loader. Answers are cached."""

import functools


@functools.lru_cache(maxsize=None)
def loadable(*names):
    import ctypes  # only when asked: keeps `import strata` light

    for name in names:
        try:
            ctypes.CDLL(name, mode=ctypes.RTLD_LOCAL)
            return True
        except OSError:
            pass
    return False
