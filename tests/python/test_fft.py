"""strata.fft (torch.fft's functions over the _fft_c2c/_fft_r2c/_fft_c2r primitives) and stft/istft, compared
with torch and NumPy in float64/complex128: sizes (empty batch, size 1, odd/even, prime), layouts, negative
dims, every norm mode, n/s padding and trimming, out=, errors, gradients (gradcheck and torch's gradients), and
an FNO-style spectral convolution forward and backward."""

import numpy as np
import pytest

import strata as st

torch = pytest.importorskip("torch")



def _mkl_missing():
    try:
        st._C._ops._fft_c2c(st.zeros(1, dtype=st.complex64), [0], 0, True)
    except RuntimeError as e:
        if "oneMKL" in str(e):
            return str(e)
    return None


_MISSING = _mkl_missing()
pytestmark = pytest.mark.skipif(_MISSING is not None, reason=f"no FFT library: {_MISSING}")

NORMS = [None, "backward", "ortho", "forward"]


def rng_array(shape, complex_=False, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    if complex_:
        a = a + 1j * rng.standard_normal(shape)
    return a


def both(a):
    return st.tensor(a), torch.tensor(a)


def close(s, t, rtol=1e-10, atol=1e-10):
    s_np = s.detach().numpy() if isinstance(s, st.Tensor) else np.asarray(s)
    t_np = t.detach().resolve_conj().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)
    assert s_np.shape == t_np.shape, (s_np.shape, t_np.shape)
    np.testing.assert_allclose(s_np, t_np, rtol=rtol, atol=atol)


ONE_D = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"]
REAL_IN = {"rfft", "ihfft", "rfft2", "ihfft2", "rfftn", "ihfftn"}


@pytest.mark.parametrize("name", ONE_D)
@pytest.mark.parametrize("norm", NORMS)
def test_one_dim_against_torch(name, norm):
    for shape, n, dim in [((8,), None, -1), ((7,), None, 0), ((3, 9), 12, -1), ((3, 10), 5, 1), ((6, 4), 7, 0),
                          ((2, 5, 3), None, -2), ((1,), None, 0), ((11,), 2, -1)]:
        complex_in = name not in REAL_IN
        s, t = both(rng_array(shape, complex_in, seed=len(shape) + (n or 0)))
        if name in ("irfft", "hfft") and shape == (1,) and n is None:  # 0 output points: both refuse
            with pytest.raises(RuntimeError, match="Invalid number of data points"):
                torch.fft.irfft(t)
            with pytest.raises(RuntimeError, match=f"{name}: Invalid number of data points"):
                getattr(st.fft, name)(s, n=n, dim=dim, norm=norm)
            continue
        close(getattr(st.fft, name)(s, n=n, dim=dim, norm=norm), getattr(torch.fft, name)(t, n=n, dim=dim, norm=norm))
        if name in ("fft", "ifft"):  # real input: the two-sided r2c path
            s, t = both(rng_array(shape, False, seed=3))
            close(getattr(st.fft, name)(s, n=n, dim=dim, norm=norm),
                  getattr(torch.fft, name)(t, n=n, dim=dim, norm=norm))


def test_against_numpy():
    a = rng_array((4, 6, 5), True, seed=1)
    r = rng_array((4, 6, 5), False, seed=2)
    x, xr = st.tensor(a), st.tensor(r)
    close(st.fft.fft(x, dim=1), np.fft.fft(a, axis=1))
    close(st.fft.ifftn(x, norm="ortho"), np.fft.ifftn(a, norm="ortho"))
    close(st.fft.rfftn(xr, s=(4, 8), dim=(0, 2)), np.fft.rfftn(r, s=(4, 8), axes=(0, 2)))
    close(st.fft.irfft2(x, s=(6, 9)), np.fft.irfft2(a, s=(6, 9)))
    close(st.fft.hfft(x, n=9, norm="forward"), np.fft.hfft(a, n=9, norm="forward"))
    close(st.fft.ihfft(xr, dim=0), np.fft.ihfft(r, axis=0))
    close(st.fft.fftfreq(7, 0.3, dtype=st.float64), np.fft.fftfreq(7, 0.3))
    close(st.fft.rfftfreq(8, 2.0, dtype=st.float64), np.fft.rfftfreq(8, 2.0))
    close(st.fft.fftfreq(6), torch.fft.fftfreq(6), rtol=1e-6, atol=1e-7)
    close(st.fft.fftshift(x, dim=(0, 2)), np.fft.fftshift(a, axes=(0, 2)))
    close(st.fft.ifftshift(x), np.fft.ifftshift(a))


ND = ["fft2", "ifft2", "rfft2", "irfft2", "hfft2", "ihfft2", "fftn", "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn"]


@pytest.mark.parametrize("name", ND)
def test_n_dim_against_torch(name):
    complex_in = name not in REAL_IN
    cases = [((4, 6), {}), ((3, 5, 7), {"dim": (0, 2)}), ((3, 5, 7), {"s": (4, 6)}), ((2, 3, 4), {"s": (5, -1)}),
             ((5, 4, 6), {"dim": (-1, -3), "s": (8, 3)}), ((2, 3, 4), {"dim": [1]})]
    if name.endswith("n"):
        cases.append(((3, 4, 5), {}))
    for i, (shape, kw) in enumerate(cases):
        for norm in NORMS:
            s, t = both(rng_array(shape, complex_in, seed=i))
            close(getattr(st.fft, name)(s, norm=norm, **kw), getattr(torch.fft, name)(t, norm=norm, **kw))


@pytest.mark.parametrize("name", ["fft", "rfft", "irfft", "fft2", "rfftn", "ihfftn", "hfft2"])
def test_layouts(name):
    """Transposed, stepped, offset and expanded inputs read the same values as their contiguous copies."""
    complex_in = name not in REAL_IN
    base = st.tensor(rng_array((6, 10, 8), complex_in, seed=5))
    fn = getattr(st.fft, name)
    views = [base.transpose(0, 2), base[:, ::2, 1:], base[2:, 3], base[:, :1, :].expand(6, 4, 8),
             base.permute(1, 2, 0)[::3]]
    for v in views:
        close(fn(v), fn(v.contiguous()), rtol=1e-12, atol=1e-12)
        close(fn(v, dim=0) if name in ONE_D else fn(v, dim=(0, -1)),
              fn(v.contiguous(), dim=0) if name in ONE_D else fn(v.contiguous(), dim=(0, -1)), rtol=1e-12, atol=1e-12)


def test_dtypes_and_promotion():
    for dt in ["float32", "float64", "complex64", "complex128", "int64", "int32", "bool"]:
        a = (np.arange(12).reshape(3, 4) % 3).astype(dt)
        s, t = both(a)
        for name in ["fft", "ifft", "fftn", "hfft", "irfft"]:
            rs, rt = getattr(st.fft, name)(s), getattr(torch.fft, name)(t)
            assert str(rs.dtype).split(".")[-1] == str(rt.dtype).split(".")[-1], (name, dt)
            tol = 1e-5 if "32" in dt or "64" == dt[-2:] and "complex" in dt or dt in ("int64", "int32", "bool") else 1e-10
            close(rs, rt, rtol=tol, atol=tol)
        if dt not in ("complex64", "complex128"):
            for name in ["rfft", "ihfft", "rfftn"]:
                rs, rt = getattr(st.fft, name)(s), getattr(torch.fft, name)(t)
                assert str(rs.dtype).split(".")[-1] == str(rt.dtype).split(".")[-1], (name, dt)
    for dt in [st.float16, st.bfloat16]:
        with pytest.raises(RuntimeError, match="fft: Unsupported dtype"):
            st.fft.fft(st.ones(8, dtype=dt))
    assert st.fft.fftfreq(4, dtype=st.float64).dtype == st.float64


def test_sizes_edge_cases():
    close(st.fft.fft(st.zeros(0, 5, dtype=st.complex128)), np.zeros((0, 5), complex))
    close(st.fft.rfft(st.zeros(3, 0, 4), dim=-1), np.zeros((3, 0, 3), complex))
    close(st.fft.fft(st.tensor([2.5])), np.array([2.5 + 0j]))
    close(st.fft.irfft(st.tensor([1 + 0j, 2 + 0j]), n=1), np.fft.irfft(np.array([1, 2 + 0j]), n=1))
    close(st.fft.fftn(st.ones(2, 3), dim=()), torch.fft.fftn(torch.ones(2, 3, dtype=torch.float32), dim=()))
    # primes and sizes MKL factors awkwardly
    for n in (1009, 1000, 4095):
        a = rng_array((2, n), True, seed=n)
        close(st.fft.fft(st.tensor(a)), np.fft.fft(a), rtol=1e-9, atol=1e-9)
        close(st.fft.irfft(st.tensor(a), n=n), np.fft.irfft(a, n=n), rtol=1e-9, atol=1e-9)


def test_out_argument():
    s, t = both(rng_array((3, 8), True, seed=7))
    out = st.empty(0, dtype=st.complex128)
    r = st.fft.fft(s, out=out)
    assert r is out
    close(out, torch.fft.fft(t))
    out = st.empty(3, 8)
    with pytest.raises(RuntimeError, match="fft expects a complex output tensor"):
        st.fft.fft(s, out=out)
    rout = st.empty(3, 14, dtype=st.float64)
    st.fft.irfft(s, out=rout)
    close(rout, torch.fft.irfft(t))


def test_errors_name_the_op():
    x = st.ones(8)
    with pytest.raises(RuntimeError, match=r"fft: Invalid number of data points \(0\)"):
        st.fft.fft(x, n=0)
    with pytest.raises(IndexError, match="ifft: Dimension out of range"):
        st.fft.ifft(x, dim=1)
    with pytest.raises(RuntimeError, match='Invalid normalization mode: "bad"'):
        st.fft.fft(x, norm="bad")
    with pytest.raises(RuntimeError, match="rfft expects a real input tensor, but got ComplexFloat"):
        st.fft.rfft(st.ones(4, dtype=st.complex64))
    with pytest.raises(RuntimeError, match="fftn: When given, dim and shape"):
        st.fft.fftn(x, s=(4, 4), dim=(0,))
    with pytest.raises(RuntimeError, match="fftn: FFT dims must be unique"):
        st.fft.fftn(st.ones(2, 2), dim=(0, -2))
    with pytest.raises(RuntimeError, match=r"irfft: Invalid number of data points \(0\)"):
        st.fft.irfft(st.ones(1, dtype=st.complex64))
    with pytest.raises(RuntimeError, match=r"fft: Invalid number of data points \(0\)"):
        st.fft.fft(st.ones(0))
    with pytest.raises(RuntimeError, match="fftfreq requires a floating point or complex dtype"):
        st.fft.fftfreq(4, dtype=st.int64)
    with pytest.raises(TypeError, match="fft"):
        st.fft.fft([1.0, 2.0])
    with pytest.raises(IndexError, match="fft: Dimension specified as -1 but tensor has no dimensions"):
        st.fft.fft(st.tensor(2.0))
    with pytest.raises(RuntimeError, match="fftn: Got shape with 3 values"):
        st.fft.fftn(st.ones(3, 4), s=(2, 3, 4))
    ops = st._C._ops
    with pytest.raises(RuntimeError, match="_fft_c2c expects a complex input tensor, but got Float"):
        ops._fft_c2c(x, [0], 0, True)
    with pytest.raises(RuntimeError, match="_fft_r2c expects a float32 or float64 input tensor"):
        ops._fft_r2c(st.ones(4, dtype=st.int32), [0], 0, True)
    with pytest.raises(RuntimeError, match="_fft_c2r: an output of 10 points"):
        ops._fft_c2r(st.ones(4, dtype=st.complex64), [0], 0, 10)
    with pytest.raises(RuntimeError, match="_fft_c2c: normalization must be"):
        ops._fft_c2c(st.ones(4, dtype=st.complex64), [0], 3, True)
    with pytest.raises(IndexError):
        ops._fft_r2c(x, [1], 0, True)


def test_meta_shapes():
    m = st.empty(3, 8, 5, device="meta")
    assert tuple(st.fft.rfft2(m).shape) == (3, 8, 3) and st.fft.rfft2(m).dtype == st.complex64
    assert tuple(st.fft.irfftn(m.to(st.complex128), s=(4, 6), dim=(0, 2)).shape) == (4, 8, 6)
    assert tuple(st.fft.fft(m, n=11, dim=1).shape) == (3, 11, 5)


def test_primitives_leave_input_alone():
    ops = st._C._ops
    c = st.tensor(rng_array((4, 6, 5), True, seed=9))
    c0 = c.clone()
    ops._fft_c2r(c, [0, 1, 2], 0, 8)
    ops._fft_c2c(c, [1], 1, False)
    assert bool((c == c0).all())


# ---- gradients ----------------------------------------------------------------------------------------------------

def test_gradcheck_primitives():
    ops = st._C._ops
    gc = st.autograd.gradcheck
    c = st.tensor(rng_array((3, 4), True, seed=1)).requires_grad_()
    r = st.tensor(rng_array((3, 5), False, seed=2)).requires_grad_()
    for norm in (0, 1, 2):
        assert gc(lambda x: ops._fft_c2c(x, [0, 1], norm, True), (c,))
        assert gc(lambda x: ops._fft_c2c(x, [1], norm, False), (c,))
        for onesided in (True, False):
            assert gc(lambda x: ops._fft_r2c(x, [1], norm, onesided), (r,))
            assert gc(lambda x: ops._fft_r2c(x, [0, 1], norm, onesided), (r,))
        # c2r reads only the Hermitian half of a (conjugate-symmetric) spectrum: check it on such spectra,
        # built from real signals, where its gradient is the one torch defines.
        for last, dims in ((6, [1]), (7, [1]), (6, [0, 1])):
            h = st.tensor(np.fft.rfftn(rng_array((3, last), False, seed=last), axes=dims)).requires_grad_()
            assert gc(lambda x: ops._fft_c2r(x, dims, norm, last), (h,))
    # the derivatives are ops with derivatives: second order too
    ggc = st.autograd.gradgradcheck
    assert ggc(lambda x: ops._fft_c2c(x, [1], 1, True), (c,))
    assert ggc(lambda x: ops._fft_r2c(x, [0, 1], 0, True), (r,))
    h = st.tensor(np.fft.rfftn(rng_array((3, 6), False, seed=3))).requires_grad_()
    assert ggc(lambda x: ops._fft_c2r(x, [0, 1], 2, 6), (h,))


@pytest.mark.parametrize("name,kw", [("fft", {"n": 7}), ("ifft", {"norm": "ortho"}), ("rfft", {"n": 9}),
                                     ("irfft", {"n": 9}), ("hfft", {"n": 6}), ("ihfft", {}),
                                     ("fft2", {"s": (3, 5)}), ("rfftn", {"norm": "forward"}),
                                     ("irfft2", {"s": (4, 6)}), ("hfftn", {"s": (3, 5)}), ("ihfft2", {})])
def test_gradients_match_torch(name, kw):
    complex_in = name not in REAL_IN
    a = rng_array((3, 4), complex_in, seed=11)
    s, t = st.tensor(a).requires_grad_(), torch.tensor(a).requires_grad_()
    ys, yt = getattr(st.fft, name)(s, **kw), getattr(torch.fft, name)(t, **kw)
    ws = rng_array(tuple(ys.shape), ys.is_complex(), seed=12)
    (ys * st.tensor(ws)).real.sum().backward() if ys.is_complex() else (ys * st.tensor(ws)).sum().backward()
    (yt * torch.tensor(ws)).real.sum().backward() if yt.is_complex() else (yt * torch.tensor(ws)).sum().backward()
    close(s.grad, t.grad, rtol=1e-9, atol=1e-9)


def test_fno_spectral_convolution():
    """One Fourier layer of a Fourier neural operator: rfft2, a complex weight on the low modes, irfft2."""
    rng = np.random.default_rng(0)
    b, cin, cout, h, w, m1, m2 = 2, 3, 4, 12, 10, 4, 3
    x = rng.standard_normal((b, cin, h, w))
    w1 = (rng.standard_normal((cin, cout, m1, m2)) + 1j * rng.standard_normal((cin, cout, m1, m2))) / (cin * cout)
    w2 = (rng.standard_normal((cin, cout, m1, m2)) + 1j * rng.standard_normal((cin, cout, m1, m2))) / (cin * cout)

    def layer(lib, x, w1, w2):
        xf = lib.fft.rfft2(x)
        out = lib.zeros(b, cout, h, w // 2 + 1, dtype=xf.dtype)
        out[:, :, :m1, :m2] = lib.einsum("bixy,ioxy->boxy", xf[:, :, :m1, :m2], w1)
        out[:, :, -m1:, :m2] = lib.einsum("bixy,ioxy->boxy", xf[:, :, -m1:, :m2], w2)
        return lib.fft.irfft2(out, s=(h, w))

    args_s = [st.tensor(v).requires_grad_() for v in (x, w1, w2)]
    args_t = [torch.tensor(v).requires_grad_() for v in (x, w1, w2)]
    ys, yt = layer(st, *args_s), layer(torch, *args_t)
    close(ys, yt)
    g = rng.standard_normal(tuple(ys.shape))
    (ys * st.tensor(g)).sum().backward()
    (yt * torch.tensor(g)).sum().backward()
    for a, b_ in zip(args_s, args_t):
        close(a.grad, b_.grad, rtol=1e-9, atol=1e-9)


# ---- stft / istft -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kw", [dict(n_fft=16), dict(n_fft=16, hop_length=5, win_length=12, window="hann"),
                                dict(n_fft=15, center=False, normalized=True, window="hann"),
                                dict(n_fft=16, onesided=False, pad_mode="constant"),
                                dict(n_fft=8, hop_length=2, pad_mode="replicate")])
def test_stft_against_torch(kw):
    kw = dict(kw)
    win = kw.pop("window", None)
    a = rng_array((2, 70), False, seed=3)
    for x_s, x_t in [(st.tensor(a), torch.tensor(a)), (st.tensor(a[0]), torch.tensor(a[0]))]:
        ws = st.hann_window(kw.get("win_length", kw["n_fft"]), dtype=st.float64) if win else None
        wt = torch.hann_window(kw.get("win_length", kw["n_fft"]), dtype=torch.float64) if win else None
        ys = st.stft(x_s, window=ws, return_complex=True, **kw)
        yt = torch.stft(x_t, window=wt, return_complex=True, **kw)
        close(ys, yt)
        close(x_s.stft(window=ws, return_complex=True, **kw), yt)
        ikw = {k: v for k, v in kw.items() if k != "pad_mode"}
        if kw.get("center", True):  # a Hann window without centring has a zero overlap-add envelope
            close(st.istft(ys, window=ws, length=70, **ikw), torch.istft(yt, window=wt, length=70, **ikw))


def test_stft_real_pairs_output():
    a = rng_array((40,), False, seed=8)
    with pytest.warns(UserWarning, match="return_complex=False is deprecated"):
        ys = st.stft(st.tensor(a), 8, return_complex=False)
    close(ys, torch.stft(torch.tensor(a), 8, return_complex=False))


def test_stft_complex_input_and_errors():
    a = rng_array((50,), True, seed=4)
    ys, yt = st.stft(st.tensor(a), 10, return_complex=True), torch.stft(torch.tensor(a), 10, return_complex=True)
    close(ys, yt)
    close(st.istft(ys, 10, return_complex=True, length=50), torch.istft(yt, 10, return_complex=True, length=50))
    with pytest.raises(RuntimeError, match="stft requires the return_complex parameter"):
        st.stft(st.ones(40), 8)
    with pytest.raises(RuntimeError, match="stft: expected 0 < n_fft"):
        st.stft(st.ones(10), 64, center=False, return_complex=True)
    with pytest.raises(RuntimeError, match="stft: expected a 1D or 2D tensor"):
        st.stft(st.ones(2, 2, 40), 8, return_complex=True)
    with pytest.raises(RuntimeError, match="istft requires a complex-valued input tensor"):
        st.istft(st.ones(5, 4), 8)
    with pytest.raises(RuntimeError, match="istft: expected the frequency dimension"):
        st.istft(st.ones(6, 4, dtype=st.complex64), 8)
    with pytest.raises(RuntimeError, match="window overlap add min"):
        st.istft(st.ones(5, 4, dtype=st.complex64), 8, window=st.zeros(8))


def test_stft_gradients_match_torch():
    a = rng_array((60,), False, seed=5)
    w = np.hanning(12)
    s, t = st.tensor(a).requires_grad_(), torch.tensor(a).requires_grad_()
    ws, wt = st.tensor(w).requires_grad_(), torch.tensor(w).requires_grad_()
    ys = st.stft(s, 12, hop_length=4, window=ws, return_complex=True)
    yt = torch.stft(t, 12, hop_length=4, window=wt, return_complex=True)
    rs = st.istft(ys, 12, hop_length=4, window=ws, length=60)
    rt = torch.istft(yt, 12, hop_length=4, window=wt, length=60)
    close(rs, a, rtol=1e-9, atol=1e-9)
    g = rng_array((60,), False, seed=6)
    ((ys.abs() ** 2).sum() + (rs * st.tensor(g)).sum()).backward()
    ((yt.abs() ** 2).sum() + (rt * torch.tensor(g)).sum()).backward()
    close(s.grad, t.grad, rtol=1e-9, atol=1e-9)
    close(ws.grad, wt.grad, rtol=1e-8, atol=1e-8)


def test_torch_alias_reaches_strata_fft():
    import importlib
    import sys
    code = ("import strata.torch_alias as a; a.install(); import torch; import torch.fft as f; "
            "assert f is __import__('strata').fft and torch.fft.rfft is f.rfft; print('ok')")
    import subprocess
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={**__import__("os").environ})
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr
    assert importlib.import_module("strata.fft") is st.fft


def test_threaded_sizes():
    """Batches of 32K points and more run on MKL's threads (smaller ones on one)."""
    a = rng_array((40, 1000), True, seed=13)
    r = rng_array((2, 130, 140), False, seed=14)
    close(st.fft.fft(st.tensor(a), dim=0), np.fft.fft(a, axis=0), rtol=1e-9, atol=1e-9)
    close(st.fft.irfftn(st.fft.rfftn(st.tensor(r), dim=(1, 2)), s=(130, 140), dim=(1, 2)), r, rtol=1e-9, atol=1e-9)


def test_missing_library_is_a_clear_error():
    import os
    import subprocess
    import sys
    code = ("import strata as st\n"
            "try:\n    st.fft.fft(st.ones(4))\nexcept RuntimeError as e:\n    print(e)\n")
    env = {**os.environ, "STRATA_MKL_RT": "/nonexistent/libmkl_rt.so.3", "LD_LIBRARY_PATH": ""}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert "needs oneMKL's FFT library" in r.stdout and "pip install mkl" in r.stdout, r.stdout


def test_batch_dims_merged_and_looped():
    """Batch dims that step as one go to MKL as one count; the others are a loop (any mix of layouts)."""
    a = rng_array((3, 4, 5, 6), True, seed=15)
    r = rng_array((3, 4, 5, 6), False, seed=16)
    x, xr = st.tensor(a), st.tensor(r)
    for perm in [(0, 1, 2, 3), (0, 2, 1, 3), (3, 1, 0, 2), (2, 3, 0, 1)]:
        xp, ap = x.permute(perm), a.transpose(perm)
        rp, rpn = xr.permute(perm), r.transpose(perm)
        close(st.fft.fft(xp), np.fft.fft(ap))
        close(st.fft.ifft2(xp, dim=(1, 2)), np.fft.ifft2(ap, axes=(1, 2)))
        close(st.fft.rfft2(rp, dim=(1, 2)), np.fft.rfft2(rpn, axes=(1, 2)))
        close(st.fft.fftn(rp, dim=(0, 3)), np.fft.fftn(rpn, axes=(0, 3)))
        close(st.fft.irfftn(xp, dim=(0, 2)), np.fft.irfftn(ap, axes=(0, 2)))


def test_vmap_batching_rule():
    """The primitives have a batching rule (the vmapped dim is one more batch dim): no per-entry loop."""
    import warnings
    a = rng_array((5, 4, 6), True, seed=17)
    r = rng_array((4, 3, 8), False, seed=18)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        close(st.vmap(lambda t: st.fft.fftn(t, dim=(0,)), in_dims=1)(st.tensor(a)), np.fft.fft(a.transpose(1, 0, 2), axis=1))
        close(st.vmap(lambda t: st.fft.rfft(t, n=10))(st.tensor(r)), np.fft.rfft(r, n=10))
        close(st.vmap(lambda t: st.fft.irfft2(t, s=(3, 6)), in_dims=2)(st.tensor(a)),
              np.fft.irfft2(a.transpose(2, 0, 1), s=(3, 6)))
