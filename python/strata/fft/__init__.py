"""strata.fft: torch.fft's discrete Fourier transforms.

Every transform is one or two of the three primitive ops (``_fft_c2c``, ``_fft_r2c``, ``_fft_c2r`` in
src/ops/decl/fft.def, over oneMKL's DFTI), so autograd, the Meta device and ``out=`` come from them. The
argument handling follows torch: real inputs of ``fft``/``ifft``/``fftn`` are transformed through ``_fft_r2c``
with the conjugate-symmetric half filled in, integer and bool inputs are promoted to the default float dtype,
float16/bfloat16 are refused (torch's CPU has no half-precision FFT), ``n``/``s`` zero-pad or trim the input
before the transform, and ``norm`` is "backward" (the default: the inverse scales by 1/n), "ortho" (both by
1/sqrt(n)) or "forward" (the forward transform scales by 1/n).
"""

import builtins as _builtins
import math as _math
import os as _os
import sys as _sys

from .. import _C

_ops = _C._ops


def _strata():
    return _sys.modules["strata"]

__all__ = [
    "fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2", "hfft2", "ihfft2",
    "fftn", "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn", "fftfreq", "rfftfreq", "fftshift", "ifftshift",
]


def _point_at_mkl():
    """libmkl_rt from `pip install mkl` lands in <prefix>/lib, which the dynamic loader does not search: name it
    for backends/cpu/mkl_dft.cpp (STRATA_MKL_RT) unless the user already did."""
    if _os.environ.get("STRATA_MKL_RT"):
        return
    for prefix in dict.fromkeys((_sys.prefix, _sys.base_prefix, _sys.exec_prefix)):
        for name in ("libmkl_rt.so.3", "libmkl_rt.so.2", "libmkl_rt.so"):
            path = _os.path.join(prefix, "lib", name)
            if _os.path.exists(path):
                _os.environ["STRATA_MKL_RT"] = path
                return


_point_at_mkl()

_NORMS = ("backward", "ortho", "forward")


def _norm_mode(norm, forward):
    """torch's fft_norm_mode: 0 none, 1 by 1/sqrt(n), 2 by 1/n."""
    if norm is None or norm == "backward":
        return 0 if forward else 2
    if norm == "ortho":
        return 1
    if norm == "forward":
        return 2 if forward else 0
    raise RuntimeError(f'Invalid normalization mode: "{norm}"')


def _wrap(fname, d, ndim):
    if not isinstance(d, int) or isinstance(d, _builtins.bool):
        raise TypeError(f"{fname}: dim must be an int, got {type(d).__name__}")
    if ndim == 0:
        raise IndexError(f"{fname}: Dimension specified as {d} but tensor has no dimensions")
    lo, hi = -ndim, ndim - 1
    if d < lo or d > hi:
        raise IndexError(f"{fname}: Dimension out of range (expected to be in range of [{lo}, {hi}], but got {d})")
    return d % ndim


def _check_n(fname, n):
    if n < 1:
        raise RuntimeError(f"{fname}: Invalid number of data points ({n}) specified")


def _check_input(fname, x):
    if not isinstance(x, _C.Tensor):
        raise TypeError(f"{fname}(): argument 'input' must be Tensor, not {type(x).__name__}")
    if x.dtype in (_C.float16, _C.bfloat16):
        raise RuntimeError(f"{fname}: Unsupported dtype {'Half' if x.dtype == _C.float16 else 'BFloat16'} "
                           "(half-precision FFTs need a GPU in torch; convert to float32)")


def _promote(fname, x, require_complex=False):
    """torch's promote_tensor_fft: integers and bool to the default float dtype, then complex if asked."""
    _check_input(fname, x)
    if not (x.is_floating_point() or x.is_complex()):
        x = x.to(_C.get_default_dtype())
    if require_complex and not x.is_complex():
        x = x.to(_C.complex128 if x.dtype == _C.float64 else _C.complex64)
    return x


def _resize(x, dims, sizes):
    """Zero-pads or trims x along each of dims to the given sizes (-1: keep)."""
    shape = x.shape
    for d, n in zip(dims, sizes):
        cur = shape[d]
        if n is None or n == -1 or n == cur:
            continue
        if n < cur:
            x = x.narrow(d, 0, n)
        else:
            zshape = list(x.shape)
            zshape[d] = n - cur
            x = _ops.cat([x, _ops.zeros(zshape, dtype=x.dtype, device=x.device)], d)
    return x


def _write_out(fname, out, r):
    if out is None:
        return r
    if r.is_complex() and not out.is_complex():
        raise RuntimeError(f"{fname} expects a complex output tensor, but got {_dtype_name(out.dtype)}")
    if not r.is_complex() and out.is_complex():
        raise RuntimeError(f"{fname} expects a real output tensor, but got {_dtype_name(out.dtype)}")
    if tuple(out.shape) != tuple(r.shape):
        out.resize_(r.shape)
    out.copy_(r)
    return out


def _dtype_name(dt):
    return {"float32": "Float", "float64": "Double", "complex64": "ComplexFloat",
            "complex128": "ComplexDouble"}.get(str(dt).replace("strata.", ""), str(dt))


# ---- one dimension ----------------------------------------------------------------------------------------------

def _fft_1d(fname, x, n, dim, norm, forward):
    x = _promote(fname, x)
    d = _wrap(fname, dim, x.dim())
    if n is None:
        _check_n(fname, x.size(d))
    else:
        _check_n(fname, n)
        x = _resize(x, [d], [n])
    if x.is_complex():
        return _ops._fft_c2c(x, [d], _norm_mode(norm, forward), forward)
    r = _ops._fft_r2c(x, [d], _norm_mode(norm, forward), False)
    return r if forward else _ops.conj_physical(r)


def fft(input, n=None, dim=-1, norm=None, *, out=None):
    """One-dimensional discrete Fourier transform."""
    return _write_out("fft", out, _fft_1d("fft", input, n, dim, norm, True))


def ifft(input, n=None, dim=-1, norm=None, *, out=None):
    """One-dimensional inverse discrete Fourier transform."""
    return _write_out("ifft", out, _fft_1d("ifft", input, n, dim, norm, False))


def _real_signal_1d(name, input, n, dim):
    """rfft's and ihfft's input: a real signal along `dim`, padded or trimmed to n points; (signal, dim)."""
    x = _promote(name, input)
    if x.is_complex():
        raise RuntimeError(f"{name} expects a real input tensor, but got {_dtype_name(x.dtype)}")
    d = _wrap(name, dim, x.dim())
    if n is None:
        _check_n(name, x.size(d))
    else:
        _check_n(name, n)
        x = _resize(x, [d], [n])
    return x, d


def _half_spectrum_1d(name, input, n, dim):
    """irfft's and hfft's input: the n // 2 + 1 first points of a Hermitian signal of n points (default
    2 * (input.size(dim) - 1)); (half spectrum, dim, n)."""
    x = _promote(name, input, require_complex=True)
    d = _wrap(name, dim, x.dim())
    n = 2 * (x.shape[d] - 1) if n is None else n
    _check_n(name, n)
    return _resize(x, [d], [n // 2 + 1]), d, n


def rfft(input, n=None, dim=-1, norm=None, *, out=None):
    """FFT of a real signal: the n // 2 + 1 non-negative frequencies."""
    x, d = _real_signal_1d("rfft", input, n, dim)
    return _write_out("rfft", out, _ops._fft_r2c(x, [d], _norm_mode(norm, True), True))


def irfft(input, n=None, dim=-1, norm=None, *, out=None):
    """Inverse of rfft: a real signal of n points (default 2 * (input.size(dim) - 1))."""
    x, d, n = _half_spectrum_1d("irfft", input, n, dim)
    return _write_out("irfft", out, _ops._fft_c2r(x, [d], _norm_mode(norm, False), n))


def hfft(input, n=None, dim=-1, norm=None, *, out=None):
    """FFT of a Hermitian-symmetric signal given by its first half: a real result of n points."""
    x, d, n = _half_spectrum_1d("hfft", input, n, dim)
    return _write_out("hfft", out, _ops._fft_c2r(_ops.conj_physical(x), [d], _norm_mode(norm, True), n))


def ihfft(input, n=None, dim=-1, norm=None, *, out=None):
    """Inverse of hfft: the n // 2 + 1 first points of the inverse FFT of a real signal."""
    x, d = _real_signal_1d("ihfft", input, n, dim)
    r = _ops._fft_r2c(x, [d], _norm_mode(norm, False), True)
    return _write_out("ihfft", out, _ops.conj_physical(r))


# ---- n dimensions -----------------------------------------------------------------------------------------------

def _nd_args(fname, x, s, dim):
    """torch's canonicalize_fft_shape_and_dim_args: (dims, sizes) with sizes -1 for 'keep'."""
    ndim = x.dim()
    if dim is not None:
        dims = [dim] if isinstance(dim, int) else list(dim)
        dims = [_wrap(fname, d, ndim) for d in dims]
        if len(set(dims)) != len(dims):
            raise RuntimeError(f"{fname}: FFT dims must be unique (got {list(dim)})")
    if s is not None:
        s = [s] if isinstance(s, int) else list(s)
        if dim is not None and len(s) != len(dims):
            raise RuntimeError(f"{fname}: When given, dim and shape arguments must have the same length "
                               f"(got s={s} and dim={list(dims)})")
        if len(s) > ndim:
            raise RuntimeError(f"{fname}: Got shape with {len(s)} values but input tensor only has {ndim} dimensions.")
        if dim is None:
            dims = list(range(ndim - len(s), ndim))
        sizes = []
        for d, n in zip(dims, s):
            if n == -1:
                n = x.shape[d]
            _check_n(fname, n)
            sizes.append(n)
    else:
        if dim is None:
            dims = list(range(ndim))
        shape = x.shape
        sizes = [shape[d] for d in dims]
        for n in sizes:
            _check_n(fname, n)
    return dims, sizes


def _fftn(fname, x, s, dim, norm, forward):
    x = _promote(fname, x)
    dims, sizes = _nd_args(fname, x, s, dim)
    if s is not None:
        x = _resize(x, dims, sizes)
    if not dims:
        return _ops.clone(x if x.is_complex() else _promote(fname, x, True))
    if x.is_complex():
        return _ops._fft_c2c(x, dims, _norm_mode(norm, forward), forward)
    r = _ops._fft_r2c(x, dims, _norm_mode(norm, forward), False)
    return r if forward else _ops.conj_physical(r)


def fftn(input, s=None, dim=None, norm=None, *, out=None):
    """N-dimensional discrete Fourier transform (all dims by default)."""
    return _write_out("fftn", out, _fftn("fftn", input, s, dim, norm, True))


def ifftn(input, s=None, dim=None, norm=None, *, out=None):
    """N-dimensional inverse discrete Fourier transform."""
    return _write_out("ifftn", out, _fftn("ifftn", input, s, dim, norm, False))


def fft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    """Two-dimensional discrete Fourier transform (the last two dims by default)."""
    return _write_out("fft2", out, _fftn("fft2", input, s, dim, norm, True))


def ifft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    """Two-dimensional inverse discrete Fourier transform."""
    return _write_out("ifft2", out, _fftn("ifft2", input, s, dim, norm, False))


def _rfftn(fname, x, s, dim, norm):
    x = _promote(fname, x)
    if x.is_complex():
        raise RuntimeError(f"{fname} expects a real-valued input tensor, but got {_dtype_name(x.dtype)}")
    dims, sizes = _nd_args(fname, x, s, dim)
    if not dims:
        raise RuntimeError(f"{fname} must transform at least one axis")
    if s is not None:
        x = _resize(x, dims, sizes)
    return _ops._fft_r2c(x, dims, _norm_mode(norm, True), True)


def rfftn(input, s=None, dim=None, norm=None, *, out=None):
    """N-dimensional FFT of a real signal (one-sided along the last transformed dim)."""
    return _write_out("rfftn", out, _rfftn("rfftn", input, s, dim, norm))


def rfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    """Two-dimensional FFT of a real signal."""
    return _write_out("rfft2", out, _rfftn("rfft2", input, s, dim, norm))


def _c2r_args(fname, x, s, dim):
    """Dims, the half-spectrum input sizes and the real output's last size (torch's
    canonicalize_fft_c2r_shape_and_dim_args)."""
    dims, sizes = _nd_args(fname, x, s, dim)
    if not dims:
        raise RuntimeError(f"{fname} must transform at least one axis")
    s_last = None if s is None else ([s] if isinstance(s, int) else list(s))[-1]
    last = 2 * (x.shape[dims[-1]] - 1) if s_last is None or s_last == -1 else sizes[-1]
    _check_n(fname, last)
    sizes = list(sizes)
    sizes[-1] = last // 2 + 1
    return dims, sizes, last


def _irfftn(fname, x, s, dim, norm):
    x = _promote(fname, x, require_complex=True)
    dims, sizes, last = _c2r_args(fname, x, s, dim)
    return _ops._fft_c2r(_resize(x, dims, sizes), dims, _norm_mode(norm, False), last)


def irfftn(input, s=None, dim=None, norm=None, *, out=None):
    """Inverse of rfftn."""
    return _write_out("irfftn", out, _irfftn("irfftn", input, s, dim, norm))


def irfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    """Inverse of rfft2."""
    return _write_out("irfft2", out, _irfftn("irfft2", input, s, dim, norm))


def _hfftn(fname, x, s, dim, norm):
    x = _promote(fname, x, require_complex=True)
    dims, sizes, last = _c2r_args(fname, x, s, dim)
    x = _resize(x, dims, sizes)
    mode = _norm_mode(norm, True)
    if len(dims) > 1:
        x = _ops._fft_c2c(x, dims[:-1], mode, True)
    return _ops._fft_c2r(_ops.conj_physical(x), dims[-1:], mode, last)


def hfftn(input, s=None, dim=None, norm=None, *, out=None):
    """N-dimensional FFT of a Hermitian-symmetric signal given by its half along the last dim."""
    return _write_out("hfftn", out, _hfftn("hfftn", input, s, dim, norm))


def hfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    """Two-dimensional hfftn."""
    return _write_out("hfft2", out, _hfftn("hfft2", input, s, dim, norm))


def _ihfftn(fname, x, s, dim, norm):
    x = _promote(fname, x)
    if x.is_complex():
        raise RuntimeError(f"{fname} expects a real-valued input tensor, but got {_dtype_name(x.dtype)}")
    dims, sizes = _nd_args(fname, x, s, dim)
    if not dims:
        raise RuntimeError(f"{fname} must transform at least one axis")
    x = _resize(x, dims, sizes)
    mode = _norm_mode(norm, False)
    r = _ops.conj_physical(_ops._fft_r2c(x, dims[-1:], mode, True))
    if len(dims) > 1:
        r = _ops._fft_c2c(r, dims[:-1], mode, False)
    return r


def ihfftn(input, s=None, dim=None, norm=None, *, out=None):
    """Inverse of hfftn."""
    return _write_out("ihfftn", out, _ihfftn("ihfftn", input, s, dim, norm))


def ihfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    """Two-dimensional ihfftn."""
    return _write_out("ihfft2", out, _ihfftn("ihfft2", input, s, dim, norm))


# ---- frequencies and shifts -------------------------------------------------------------------------------------

def _freq_dtype(fname, dtype):
    dtype = _C.get_default_dtype() if dtype is None else dtype
    if dtype not in (_C.float16, _C.bfloat16, _C.float32, _C.float64, _C.complex64, _C.complex128):
        raise RuntimeError(f"{fname} requires a floating point or complex dtype")
    return dtype


def fftfreq(n, d=1.0, *, out=None, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """Sample frequencies of an n-point FFT with sample spacing d: [0, 1, ..., -(n // 2), ..., -1] / (d n)."""
    dtype = _freq_dtype("fftfreq", dtype)
    r = _strata().arange(n, dtype=dtype, device=device)
    k = (n + 1) // 2
    if n - k > 0:
        r = _ops.cat([r.narrow(0, 0, k), r.narrow(0, k, n - k) - n], 0)
    r = r * (1.0 / (n * d))
    r = _write_out("fftfreq", out, r)
    if requires_grad:
        r.requires_grad_(True)
    return r


def rfftfreq(n, d=1.0, *, out=None, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """Sample frequencies of rfft's n // 2 + 1 outputs: [0, 1, ..., n // 2] / (d n)."""
    dtype = _freq_dtype("rfftfreq", dtype)
    r = _strata().arange(n // 2 + 1, dtype=dtype, device=device) * (1.0 / (n * d))
    r = _write_out("rfftfreq", out, r)
    if requires_grad:
        r.requires_grad_(True)
    return r


def _shift_dims(fname, x, dim):
    if dim is None:
        return list(range(x.dim()))
    dims = [dim] if isinstance(dim, int) else list(dim)
    return [_wrap(fname, d, x.dim()) for d in dims]


def fftshift(input, dim=None):
    """Moves the zero-frequency term to the centre (a roll by n // 2 along each dim)."""
    dims = _shift_dims("fftshift", input, dim)
    if not dims:
        return input.clone()
    return _ops.roll(input, [input.shape[d] // 2 for d in dims], dims)


def ifftshift(input, dim=None):
    """Inverse of fftshift (a roll by (n + 1) // 2 along each dim)."""
    dims = _shift_dims("ifftshift", input, dim)
    if not dims:
        return input.clone()
    return _ops.roll(input, [(input.shape[d] + 1) // 2 for d in dims], dims)

