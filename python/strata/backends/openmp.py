"""strata.backends.openmp: the CPU core is always built with OpenMP (CMakeLists.txt)."""


def is_available():
    return True
