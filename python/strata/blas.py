"""BLAS routines as named ops, for float32 and float64 tensors on the CPU.

``strata.blas`` mirrors the reference BLAS interface in a Pythonic way: the
BLAS flags become keyword arguments (``trans``, ``upper``, ``left``,
``unit_diagonal``), scalars default as in BLAS (``alpha=1``, ``beta=0``), and
matrices may have any strides (column-major or transposed views are passed to
the library as transposes, not copied). Level 2 and 3 routines return new
tensors and leave their inputs untouched; ``axpy`` updates ``y`` in place as
in BLAS. Every routine is also an op (``strata.blas_gemm`` ...), so it works on
the meta device (shapes and dtypes only).

The library serving each call is chosen at run time: fp32 GEMM goes to
oneDNN's sgemm, everything else to OpenBLAS, with a built-in fallback (see
``backend()`` and src/backends/cpu/blas.cpp).
"""

import ctypes as _ctypes
import os as _os

from . import _C

_ops = _C._ops

__all__ = ["axpy", "dot", "nrm2", "gemv", "trsv", "gemm", "syrk", "trsm", "backend"]


def axpy(x, y, alpha=1.0):
    """Level 1: ``y += alpha * x`` in place; returns ``y``.

    ``x`` and ``y`` are 1-D tensors of the same length and dtype.
    """
    return _ops.blas_axpy(x, y, alpha=alpha)


def dot(x, y):
    """Level 1: the inner product ``sum(x * y)`` of two 1-D tensors, as a 0-d tensor."""
    return _ops.blas_dot(x, y)


def nrm2(x):
    """Level 1: the Euclidean norm ``sqrt(sum(x ** 2))`` of a 1-D tensor (no
    overflow for large entries), as a 0-d tensor."""
    return _ops.blas_nrm2(x)


def gemv(a, x, y=None, alpha=1.0, beta=0.0, trans=False):
    """Level 2: ``alpha * op(a) @ x + beta * y`` as a new 1-D tensor.

    ``op(a)`` is ``a`` or, with ``trans=True``, ``a.T``. ``y`` is optional
    (ignored when ``beta == 0``, so NaNs in it do not propagate, as in BLAS).
    """
    return _ops.blas_gemv(a, x, y, alpha=alpha, beta=beta, trans=trans)


def trsv(a, b, upper=True, trans=False, unit_diagonal=False):
    """Level 2: solves the triangular system ``op(a) @ x = b`` for x.

    Only the ``upper`` (or lower) triangle of the square matrix ``a`` is read;
    with ``unit_diagonal=True`` its diagonal is taken to be ones and not read.
    No check for singularity is made (a zero pivot gives inf/nan, as in BLAS).
    """
    return _ops.blas_trsv(a, b, upper=upper, trans=trans, unit_diagonal=unit_diagonal)


def gemm(a, b, c=None, alpha=1.0, beta=0.0, trans_a=False, trans_b=False):
    """Level 3: ``alpha * op(a) @ op(b) + beta * c`` as a new matrix.

    ``op(a)`` is ``a.T`` when ``trans_a`` (likewise for b). ``c`` is optional and
    ignored when ``beta == 0``.
    """
    return _ops.blas_gemm(a, b, c, alpha=alpha, beta=beta, trans_a=trans_a, trans_b=trans_b)


def syrk(a, c=None, alpha=1.0, beta=0.0, upper=True, trans=False):
    """Level 3: symmetric rank-k update ``alpha * op(a) @ op(a).T + beta * c``.

    ``op(a)`` is ``a`` (n x k) or, with ``trans=True``, ``a.T``. Only the
    ``upper`` (or lower) triangle of the n x n result is computed, as in BLAS;
    the other strict triangle holds ``c``'s values (zeros when ``c`` is None).
    """
    return _ops.blas_syrk(a, c, alpha=alpha, beta=beta, upper=upper, trans=trans)


def trsm(a, b, alpha=1.0, left=True, upper=True, trans=False, unit_diagonal=False):
    """Level 3: solves ``op(a) @ X = alpha * b`` (``left=True``) or
    ``X @ op(a) = alpha * b`` (``left=False``) for X, with ``a`` triangular.

    ``upper``/``unit_diagonal`` describe ``a`` as in :func:`trsv`.
    """
    return _ops.blas_trsm(a, b, alpha=alpha, left=left, upper=upper, trans=trans, unit_diagonal=unit_diagonal)


def backend():
    """One line naming the BLAS libraries and kernels in use (loads them)."""
    here = _os.path.dirname(__file__)
    for name in ("libstrata.so",):
        path = _os.path.join(here, name)
        if _os.path.exists(path):
            lib = _ctypes.CDLL(path)
            break
    else:  # an installed layout: libstrata is already loaded by _C
        lib = _ctypes.CDLL(None)
    fn = lib.strata_blas_backend_name
    fn.restype = _ctypes.c_char_p
    return fn().decode()
