"""strata.backends: the switches torch.backends exposes, as far as they mean
something for Strata's CPU build.

The float32 matmul precision lives here (strata.set_float32_matmul_precision
and strata.backends.cuda.matmul.allow_tf32 are two views of it, as in torch).
Strata's CPU matmul always computes float32 products in float32, which
satisfies every precision setting ('highest' is the strictest), so the setting
is recorded and reported but changes no result on the CPU. On CUDA tensors
anything but 'highest' lets cuBLAS use TF32 for float32 products (docs/CUDA.md)."""

_PRECISIONS = ("highest", "high", "medium")
_float32_matmul_precision = "highest"


def set_float32_matmul_precision(precision):
    global _float32_matmul_precision
    if not isinstance(precision, str):
        raise RuntimeError(f"set_float32_matmul_precision expects a str, but got {type(precision).__name__}")
    if precision not in _PRECISIONS:
        import warnings

        warnings.warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the current "
                      "set_float32_matmul_precision call has no effect.", UserWarning, stacklevel=2)
        return
    _float32_matmul_precision = precision
    # Strata's CUDA GEMMs (cuBLAS) read it from C++: anything but 'highest' allows TF32, as in torch.
    from .. import _C

    _C._cuda.set_allow_tf32(precision != "highest")


def get_float32_matmul_precision():
    return _float32_matmul_precision


from . import cuda, cudnn, mps, mkldnn, mkl, openmp, opt_einsum  # noqa: E402,F401
from . import quantized  # noqa: E402,F401  (the quantized engine: docs/SPARSE.md)
