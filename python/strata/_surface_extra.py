"""strata.svd_lowrank / pca_lowrank (randomized low-rank SVD and PCA), strata.TensorType, strata.classes and
strata.symeig (removed in torch: raises as torch does)."""

import ctypes
import os
import sys
import types

from . import _C

__all__ = ["svd_lowrank", "pca_lowrank", "TensorType", "classes", "symeig"]


# ---- randomized low-rank SVD (Halko, Martinsson & Tropp 2011, algorithms 4.4 and 5.1) -----------------------------
def _approximate_basis(a, q, niter, m=None):
    """An orthonormal Q (..., rows, q) whose range approximates that of a - m, by subspace iteration from a Gaussian
    test matrix."""
    from . import linalg, randn

    r = randn(*a.shape[:-2], a.shape[-1], q, dtype=a.dtype, device=a.device)
    x = a @ r if m is None else a @ r - m @ r
    basis = linalg.qr(x).Q
    ah = a.mH
    mh = None if m is None else m.mH
    for _ in range(niter):
        x = ah @ basis if mh is None else ah @ basis - mh @ basis
        basis = linalg.qr(x).Q
        x = a @ basis if m is None else a @ basis - m @ basis
        basis = linalg.qr(x).Q
    return basis


def _svd_lowrank(a, q, niter, m):
    from . import linalg

    rows, cols = a.shape[-2:]
    if rows < cols:  # work on the transpose, the taller side
        u, s, v = _svd_lowrank(a.mH, q, niter, None if m is None else m.mH)
        return v, s, u
    basis = _approximate_basis(a, q, niter, m)
    b = basis.mH @ a if m is None else basis.mH @ a - basis.mH @ m
    u_b, s, vh = linalg.svd(b, full_matrices=False)
    return basis @ u_b, s, vh.mH


def svd_lowrank(A, q=6, niter=2, M=None):
    """Approximate SVD of A (or of A - M) of rank q: (U, S, V) with A ~ U diag(S) V^H, U (.., m, q), V (.., n, q).
    Randomized (subspace iteration with `niter` passes), from strata's generator; exact when rank(A) <= q."""
    if not isinstance(A, _C.Tensor):
        raise TypeError(f"svd_lowrank: A must be a Tensor, got {type(A).__name__}")
    if A.dim() < 2:
        raise RuntimeError(f"svd_lowrank: A must have at least 2 dimensions, got shape {tuple(A.shape)}")
    q = 6 if q is None else int(q)
    niter = 2 if niter is None else int(niter)
    rows, cols = A.shape[-2:]
    if not 0 < q <= min(rows, cols):
        raise ValueError(f"svd_lowrank: q={q} must be in [1, min(m, n)] = [1, {min(rows, cols)}] for A of shape "
                         f"{tuple(A.shape)}")
    if niter < 0:
        raise ValueError(f"svd_lowrank: niter must be non-negative, got {niter}")
    if M is not None:
        M = M.broadcast_to(A.shape) if tuple(M.shape) != tuple(A.shape) else M
    return _svd_lowrank(A, q, niter, M)


def pca_lowrank(A, q=None, center=True, niter=2):
    """PCA of the rows of A (.., m, n): (U, S, V) of the centered A by svd_lowrank, q defaults to min(6, m, n).
    The principal directions are V's columns; A projected on them is A @ V[:, :k]."""
    if not isinstance(A, _C.Tensor):
        raise TypeError(f"pca_lowrank: A must be a Tensor, got {type(A).__name__}")
    if A.dim() < 2:
        raise RuntimeError(f"pca_lowrank: A must have at least 2 dimensions, got shape {tuple(A.shape)}")
    rows, cols = A.shape[-2:]
    q = min(6, rows, cols) if q is None else int(q)
    if not 0 <= q <= min(rows, cols):
        raise ValueError(f"pca_lowrank: q={q} must be in [0, min(m, n)] = [0, {min(rows, cols)}]")
    if niter < 0:
        raise ValueError(f"pca_lowrank: niter must be non-negative, got {niter}")
    if not center:
        return svd_lowrank(A, q, niter=niter)
    mean = A.mean(dim=-2, keepdim=True)
    return svd_lowrank(A - mean, q, niter=niter)


# ---- TensorType ------------------------------------------------------------------------------------------------
class TensorType:
    """torch.TensorType (TorchScript's type of tensors): TensorType.get() is the type of any tensor;
    TensorType.create_from_tensor(t) records t's dtype, sizes and device."""

    def __init__(self, dtype=None, sizes=None, device=None, requires_grad=None):
        self._dtype, self._sizes, self._device, self._requires_grad = dtype, sizes, device, requires_grad

    @classmethod
    def get(cls):
        return cls()

    @classmethod
    def create_from_tensor(cls, t):
        return cls(t.dtype, tuple(t.shape), t.device, t.requires_grad)

    def dtype(self):
        return self._dtype

    def scalarType(self):  # noqa: N802 - torch's name
        return None if self._dtype is None else _SCALAR_NAMES.get(str(self._dtype).split(".")[-1])

    def sizes(self):
        return None if self._sizes is None else list(self._sizes)

    def dim(self):
        return None if self._sizes is None else len(self._sizes)

    def device(self):
        return self._device

    def requires_grad(self):
        return self._requires_grad

    def kind(self):
        return "TensorType"

    def isSubtypeOf(self, other):  # noqa: N802 - torch's name
        return isinstance(other, TensorType) and (other._dtype is None or other._dtype == self._dtype) and \
            (other._sizes is None or other._sizes == self._sizes)

    def __eq__(self, other):
        return isinstance(other, TensorType) and (self._dtype, self._sizes, self._device) == \
            (other._dtype, other._sizes, other._device)

    def __hash__(self):
        return hash((TensorType, str(self._dtype), self._sizes))

    def __str__(self):
        if self._dtype is None:
            return "Tensor"
        return f"{_SCALAR_NAMES.get(str(self._dtype).split('.')[-1], 'Tensor')}({', '.join(map(str, self._sizes))})"

    __repr__ = __str__


_SCALAR_NAMES = {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16", "int64": "Long",
                 "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool",
                 "complex64": "ComplexFloat", "complex128": "ComplexDouble", "float8_e4m3fn": "Float8_e4m3fn",
                 "float8_e5m2": "Float8_e5m2", "float8_e4m3fnuz": "Float8_e4m3fnuz", "float8_e5m2fnuz": "Float8_e5m2fnuz",
                 "float8_e8m0fnu": "Float8_e8m0fnu"}


# ---- strata.classes --------------------------------------------------------------------------------------------
class _Classes(types.ModuleType):
    """torch.classes: custom C++ classes registered by loaded libraries. Strata's extension ABI registers ops, not
    classes, so the namespaces are empty; load_library loads a library (its ops become strata.ops.*)."""

    __file__ = "_classes.py"

    def __init__(self):
        super().__init__("strata.classes")
        self.loaded_libraries = set()

    def load_library(self, path):
        from . import ops

        path = os.path.abspath(os.fspath(path))
        try:
            ops.load_library(path)
        except OSError:
            try:  # not a Strata extension: load it as a plain shared library, as torch does
                ctypes.CDLL(path)
            except OSError:
                raise OSError(f"Could not load this library: {path}") from None
        self.loaded_libraries.add(path)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _ClassNamespace(name)


class _MissingClassError(RuntimeError, AttributeError):
    """torch's RuntimeError for a class that is not registered; also an AttributeError, so that code probing
    modules with getattr (pickle's whichmodule walks sys.modules, strata.classes included) moves on."""


class _ClassNamespace:
    def __init__(self, name):
        self.name = name

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise _MissingClassError(f"Tried to instantiate class '{self.name}.{attr}', but it does not exist! Ensure that it "
                           "is registered via strata.classes.load_library (Strata extensions register ops, not "
                           "classes)")


classes = _Classes()
sys.modules["strata.classes"] = classes  # importable, as torch.classes


# ---- symeig: removed in torch -----------------------------------------------------------------------------------
_SYMEIG_REMOVED = (
    "This function was deprecated since version 1.9 and is now removed. The default behavior has changed from using "
    "the upper triangular portion of the matrix by default to using the lower triangular portion.\n\n"
    "L, _ = strata.symeig(A, upper=upper) should be replaced with:\n"
    "L = strata.linalg.eigvalsh(A, UPLO='U' if upper else 'L')\n\nand\n\n"
    "L, V = strata.symeig(A, eigenvectors=True) should be replaced with:\n"
    "L, V = strata.linalg.eigh(A, UPLO='U' if upper else 'L')")


def symeig(input, eigenvectors=False, upper=True, *, out=None):
    """Removed (as in torch since 1.9): raises, naming strata.linalg.eigh / eigvalsh."""
    raise RuntimeError(_SYMEIG_REMOVED)


def _install():
    _C.Tensor.symeig = lambda self, eigenvectors=False, upper=True: symeig(self, eigenvectors, upper)


_install()
