"""strata.backends.mkl: Intel MKL. The CPU core's BLAS is OpenBLAS or oneDNN
(src/backends/cpu/blas.cpp), never MKL."""


def is_available():
    return False
