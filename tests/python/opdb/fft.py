"""OpInfos of the FFT primitives (_fft_c2c, _fft_r2c, _fft_c2r) and of strata.fft's functions, with NumPy's
pocketfft as the reference (tests/python/test_fft.py covers the rest of the surface against torch)."""

import numpy as np

from .core import COMPLEX, FLOAT, ErrorInput, OpInfo, SampleInput, make_array, register

_NORM = {0: "backward", 1: "ortho", 2: "forward"}  # NumPy's names for a forward transform's scaling
_TOL = {"float32": (1e-4, 1e-4), "complex64": (1e-4, 1e-4), "float64": (1e-9, 1e-9), "complex128": (1e-9, 1e-9)}


def _inverse_norm(mode):
    # the inverse transform scaled by mode (0 none, 1 1/sqrt(n), 2 1/n) in NumPy's terms
    return {0: "forward", 1: "ortho", 2: "backward"}[mode]


def _cplx(a, dtype):
    return a.astype(np.complex64 if dtype in ("float32", "complex64") else np.complex128)


def ref_c2c(x, dim, norm, forward):
    r = np.fft.fftn(x, axes=dim, norm=_NORM[norm]) if forward else np.fft.ifftn(x, axes=dim, norm=_inverse_norm(norm))
    return r.astype(x.dtype)


def ref_r2c(x, dim, norm, onesided):
    r = np.fft.rfftn(x, axes=dim, norm=_NORM[norm]) if onesided else np.fft.fftn(x, axes=dim, norm=_NORM[norm])
    return _cplx(r, str(x.dtype))


def ref_c2r(x, dim, norm, n):
    s = [x.shape[d] for d in dim[:-1]] + [n]
    return np.fft.irfftn(x, s=s, axes=dim, norm=_inverse_norm(norm)).astype(
        np.float32 if x.dtype == np.complex64 else np.float64)


def c2c_samples(dtype, rng):
    yield SampleInput((make_array((8,), dtype, rng), [0], 0, True), name="1d")
    yield SampleInput((make_array((3, 7), dtype, rng), [1], 2, False), name="batched-odd-inverse")
    yield SampleInput((make_array((4, 5, 6), dtype, rng), [0, 2], 1, True), name="2d-ortho")
    yield SampleInput((make_array((4, 6), dtype, rng, noncontig=True), [0, 1], 0, False), name="noncontig")
    yield SampleInput((make_array((1,), dtype, rng), [0], 2, True), name="size1")


def r2c_samples(dtype, rng):
    yield SampleInput((make_array((8,), dtype, rng), [0], 0, True), name="1d")
    yield SampleInput((make_array((3, 7), dtype, rng), [1], 2, True), name="odd")
    yield SampleInput((make_array((3, 7), dtype, rng), [1], 1, False), name="twosided")
    yield SampleInput((make_array((4, 5, 6), dtype, rng), [2, 0], 1, True), name="2d")
    yield SampleInput((make_array((4, 5, 6), dtype, rng), [1, 2], 0, False), name="2d-twosided")
    yield SampleInput((make_array((4, 6), dtype, rng, noncontig=True), [0], 0, True), name="noncontig")


def c2r_samples(dtype, rng):
    yield SampleInput((make_array((5,), dtype, rng), [0], 2, 8), name="1d")
    yield SampleInput((make_array((3, 4), dtype, rng), [1], 0, 7), name="odd")
    yield SampleInput((make_array((4, 5, 4), dtype, rng), [0, 2], 1, 6), name="2d")
    yield SampleInput((make_array((4, 6), dtype, rng, noncontig=True), [1], 2, 6), name="noncontig-trim")


def primitive_errors(rng):
    f = np.ones(4, np.float32)
    yield ErrorInput((f, [0], 0, True), match="_fft_c2c expects a complex input tensor")


def c2r_errors(rng):
    yield ErrorInput((np.ones(4, np.float32), [0], 0, 6), match="_fft_c2r expects a complex input tensor")


def fft_samples(dtype, rng):
    yield SampleInput((make_array((8,), dtype, rng),), name="1d")
    yield SampleInput((make_array((3, 7), dtype, rng),), {"n": 10, "dim": 0, "norm": "ortho"}, name="pad")
    yield SampleInput((make_array((3, 7), dtype, rng, noncontig=True),), {"n": 4, "norm": "forward"}, name="trim")


def fft_errors(rng):
    yield ErrorInput((np.ones(4, np.float32),), {"n": 0}, match="Invalid number of data points")
    yield ErrorInput((np.ones(4, np.float32),), {"dim": 1}, error=IndexError, match="Dimension out of range")
    yield ErrorInput((np.ones(4, np.float32),), {"norm": "bad"}, match="Invalid normalization mode")


def rfft_errors(rng):
    yield ErrorInput((np.ones(4, np.complex64),), match="rfft expects a real input tensor")


def nd_samples(dtype, rng):
    yield SampleInput((make_array((4, 6), dtype, rng),), name="2d")
    yield SampleInput((make_array((2, 5, 6), dtype, rng),), {"s": (3, 8), "norm": "ortho"}, name="s")
    yield SampleInput((make_array((3, 4, 5), dtype, rng, noncontig=True),), {"dim": (0, 2)}, name="dims")


def _np_like(fn, real_out=False):
    """NumPy's function with torch's result dtype (the input's precision)."""
    def ref(x, **kw):
        if "dim" in kw:
            d = kw.pop("dim")
            kw["axis" if np.isscalar(d) else "axes"] = d
        r = fn(x, **kw)
        single = x.dtype in (np.float32, np.complex64)
        if real_out:
            return r.astype(np.float32 if single else np.float64)
        return r.astype(np.complex64 if single else np.complex128)
    return ref


FC = FLOAT + COMPLEX
register(
    OpInfo("_fft_c2c", ref=ref_c2c, dtypes=COMPLEX, samples=c2c_samples, errors=primitive_errors, tol=_TOL),
    OpInfo("_fft_r2c", ref=ref_r2c, dtypes=FLOAT, samples=r2c_samples, tol=_TOL),
    OpInfo("_fft_c2r", ref=ref_c2r, dtypes=COMPLEX, samples=c2r_samples, errors=c2r_errors, tol=_TOL),
    OpInfo("fft.fft", ref=_np_like(np.fft.fft), dtypes=FC, samples=fft_samples, errors=fft_errors, tol=_TOL),
    OpInfo("fft.ifft", ref=_np_like(np.fft.ifft), dtypes=FC, samples=fft_samples, tol=_TOL),
    OpInfo("fft.rfft", ref=_np_like(np.fft.rfft), dtypes=FLOAT, samples=fft_samples, errors=rfft_errors, tol=_TOL),
    OpInfo("fft.irfft", ref=_np_like(np.fft.irfft, True), dtypes=COMPLEX, samples=fft_samples, tol=_TOL),
    OpInfo("fft.hfft", ref=_np_like(np.fft.hfft, True), dtypes=COMPLEX, samples=fft_samples, tol=_TOL),
    OpInfo("fft.ihfft", ref=_np_like(np.fft.ihfft), dtypes=FLOAT, samples=fft_samples, tol=_TOL),
    OpInfo("fft.fft2", ref=_np_like(np.fft.fft2), dtypes=FC, samples=nd_samples, tol=_TOL),
    OpInfo("fft.fftn", ref=_np_like(np.fft.fftn), dtypes=FC, samples=nd_samples, tol=_TOL),
    OpInfo("fft.rfftn", ref=_np_like(np.fft.rfftn), dtypes=FLOAT, samples=nd_samples, tol=_TOL),
    OpInfo("fft.irfftn", ref=_np_like(np.fft.irfftn, True), dtypes=COMPLEX, samples=nd_samples, tol=_TOL),
)
