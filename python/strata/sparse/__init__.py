"""strata.sparse: torch.sparse's functions over sparse COO tensors (docs/SPARSE.md, python/strata/_sparse.py)."""

from .. import _sparse
from .._sparse import mm, addmm, sum, softmax, log_softmax  # noqa: F401,A004
from .._C import Tensor as _Tensor

__all__ = ["mm", "addmm", "sum", "softmax", "log_softmax", "spmm", "FloatTensor", "DoubleTensor", "LongTensor", "IntTensor", "ByteTensor",
           "BoolTensor", "check_sparse_tensor_invariants"]


def spmm(mat1, mat2):
    return mm(mat1, mat2)


class check_sparse_tensor_invariants:
    """torch.sparse.check_sparse_tensor_invariants: a context manager (and decorator) that makes
    sparse_coo_tensor check its invariants by default; enable()/disable()/is_enabled() set it for good."""
    _enabled = False

    def __init__(self, enable=True):
        self.state = enable
        self.saved = None

    @staticmethod
    def is_enabled():
        return check_sparse_tensor_invariants._enabled

    @staticmethod
    def enable():
        check_sparse_tensor_invariants._enabled = True

    @staticmethod
    def disable():
        check_sparse_tensor_invariants._enabled = False

    def __enter__(self):
        self.saved = check_sparse_tensor_invariants._enabled
        check_sparse_tensor_invariants._enabled = self.state

    def __exit__(self, *exc):
        check_sparse_tensor_invariants._enabled = self.saved

    def __call__(self, fn):
        def wrapped(*args, **kwargs):
            with check_sparse_tensor_invariants(self.state):
                return fn(*args, **kwargs)
        return wrapped


def _legacy(name, dtype_name):
    """torch.sparse.FloatTensor & co: (indices, values, size), (indices, values) or (*size) for an empty
    one. isinstance(t, torch.sparse.FloatTensor) holds for sparse tensors of that dtype."""

    class _Meta(type):
        def __instancecheck__(cls, obj):
            from .. import _C
            return isinstance(obj, _Tensor) and _sparse._is_sparse(obj) and obj.dtype is getattr(_C, dtype_name)

    def __new__(cls, *args, device=None):
        from .. import _C
        dtype = getattr(_C, dtype_name)
        if args and isinstance(args[0], _Tensor):
            indices, values = args[0], args[1]
            size = args[2] if len(args) > 2 else None
            if values.dtype is not dtype:
                raise TypeError(f"expected values of dtype {dtype} for torch.sparse.{name}, got {values.dtype}")
            return _sparse.sparse_coo_tensor(indices, values, size, device=device)
        size = args[0] if len(args) == 1 and isinstance(args[0], (tuple, list)) else args
        return _sparse._empty(size, dtype=dtype, device=device)

    return _Meta(name, (), {"__new__": __new__, "__module__": "strata.sparse"})


FloatTensor = _legacy("FloatTensor", "float32")
DoubleTensor = _legacy("DoubleTensor", "float64")
HalfTensor = _legacy("HalfTensor", "float16")
LongTensor = _legacy("LongTensor", "int64")
IntTensor = _legacy("IntTensor", "int32")
ShortTensor = _legacy("ShortTensor", "int16")
ByteTensor = _legacy("ByteTensor", "uint8")
CharTensor = _legacy("CharTensor", "int8")
BoolTensor = _legacy("BoolTensor", "bool")
