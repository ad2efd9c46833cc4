"""strata.special against torch.special (and mpmath, torch's own dependency, as the
high-precision reference where torch's float-level approximations are the less accurate
side): values over wide ranges with edge values, dtypes, gradients (gradcheck in float64
where torch differentiates), the non-differentiable ones, and the names."""

import math

import numpy as np
import pytest
import torch

import strata as st
from strata import autograd

S = torch.special
mp = pytest.importorskip("mpmath")


def test_every_torch_special_name_exists():
    names = [n for n in dir(torch.special) if not n.startswith("_") and callable(getattr(torch.special, n))
             and n not in ("Tensor",)]
    missing = [n for n in names if not hasattr(st.special, n)]
    assert not missing
    for n in ("igamma", "igammac", "i0", "xlogy", "lgamma", "polygamma", "mvlgamma", "sinc", "erfinv"):
        assert hasattr(st, n) and hasattr(st.Tensor, n), n


def _edges():
    return np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-300, 1e-10, -1e-10])


def _compare(name, x, rtol, atol, dtypes=(np.float64, np.float32), skip=None):
    for dt in dtypes:
        a = x.astype(dt)
        t = getattr(S, name)(torch.from_numpy(a)).numpy()
        s = getattr(st.special, name)(st.tensor(a)).numpy()
        assert s.dtype == t.dtype
        keep = np.ones(a.shape, bool) if skip is None else ~skip(a.astype(np.float64))
        r, a_ = (rtol, atol) if dt == np.float64 else (max(rtol, 2e-6), max(atol, 2e-6))
        np.testing.assert_allclose(s[keep], t[keep], rtol=r, atol=a_, equal_nan=True, err_msg=f"{name} {dt}")


# (range, rtol, atol in float64, skip): torch's Bessel J/Y and Airy are rational fits good to ~1e-7
# absolute near their zeros; the tight checks below use mpmath.
UNARY = {
    "airy_ai": ((-60, 100), 1e-7, 5e-6, None),
    "bessel_j0": ((-300, 300), 1e-7, 1e-6, None),
    "bessel_j1": ((-300, 300), 1e-7, 1e-6, None),
    "bessel_y0": ((-5, 300), 1e-7, 1e-6, lambda x: (x > 0) & (x < 1e-9)),
    "bessel_y1": ((-5, 300), 1e-7, 1e-6, lambda x: (x > 0) & (x < 1e-9)),
    # torch's i0/i1 overflow a little earlier than the true values (near |x| = 709).
    "modified_bessel_i0": ((-700, 700), 1e-13, 0, lambda x: (np.abs(x) > 85) & (np.abs(x) < 95)),
    "modified_bessel_i1": ((-700, 700), 1e-13, 0, lambda x: (np.abs(x) > 85) & (np.abs(x) < 95)),
    "modified_bessel_k0": ((-2, 720), 1e-12, 1e-14, None),
    "modified_bessel_k1": ((-2, 720), 1e-12, 1e-14, None),
    "scaled_modified_bessel_k0": ((-2, 1e4), 1e-11, 1e-14, None),
    "scaled_modified_bessel_k1": ((-2, 1e4), 1e-11, 1e-14, None),
    "spherical_bessel_j0": ((-100, 100), 1e-14, 1e-15, None),
    "entr": ((-2, 100), 1e-14, 0, None),
    "erfcx": ((-26, 1e5), 1e-14, 0, None),
    "i0e": ((-1e4, 1e4), 1e-14, 0, None),
    "i1e": ((-1e4, 1e4), 1e-14, 0, None),
    # torch's ndtr is 1 + erf: it flushes the far left tail to 0 (ours keeps it).
    "ndtr": ((-40, 40), 1e-14, 1e-16, None),
    "log_ndtr": ((-1e3, 40), 1e-12, 0, None),
}


@pytest.mark.parametrize("name", list(UNARY))
def test_unary_against_torch(name):
    (lo, hi), rtol, atol, skip = UNARY[name]
    x = np.concatenate([np.linspace(lo, hi, 3001), _edges()])
    _compare(name, x, rtol, atol, skip=skip)


def test_ndtri_against_torch():
    p = np.concatenate([np.linspace(-0.1, 1.1, 2001), np.logspace(-300, -1, 400), 1 - np.logspace(-15, -1, 100),
                        _edges()])
    _compare("ndtri", p, 1e-13, 1e-15)


@pytest.mark.parametrize("name,ref", [
    ("airy_ai", mp.airyai), ("bessel_j0", lambda x: mp.besselj(0, x)), ("bessel_j1", lambda x: mp.besselj(1, x)),
    ("bessel_y0", lambda x: mp.bessely(0, x)), ("bessel_y1", lambda x: mp.bessely(1, x)),
])
def test_bessel_airy_against_mpmath(name, ref):
    lo = -40.0 if name in ("airy_ai", "bessel_j0", "bessel_j1") else 0.05
    x = np.linspace(lo, 60.0, 701)
    s = getattr(st.special, name)(st.tensor(x)).numpy()
    want = np.array([float(ref(v)) for v in x])
    np.testing.assert_allclose(s, want, rtol=1e-9, atol=1e-11)


def _binary(name, x, y, rtol, atol, keep=None):
    for dt in (np.float64, np.float32):
        a, b = x.astype(dt), y.astype(dt)
        t = getattr(S, name)(torch.from_numpy(a), torch.from_numpy(b)).numpy()
        s = getattr(st.special, name)(st.tensor(a), st.tensor(b)).numpy()
        assert s.dtype == t.dtype
        k = np.ones(a.shape, bool) if keep is None else keep
        r, at = (rtol, atol) if dt == np.float64 else (3e-4, 3e-4)
        np.testing.assert_allclose(s[k], t[k], rtol=r, atol=at, equal_nan=True, err_msg=f"{name} {dt}")


POLY = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
        "legendre_polynomial_p", "hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l"]


@pytest.mark.parametrize("name", POLY + ["shifted_" + n for n in POLY[:4]])
def test_polynomials_against_torch(name):
    rng = np.random.default_rng(1)
    lo, hi = {"hermite_polynomial_h": (-6, 6), "hermite_polynomial_he": (-6, 6),
              "laguerre_polynomial_l": (-5, 30)}.get(name, (-1.5, 1.5))
    x = np.concatenate([rng.uniform(lo, hi, 3000), [1, -1, 0, 0.5, np.inf, -np.inf] * 4])
    if name.startswith("shifted"):
        x = (x + 1) / 2
    top = 30 if "hermite" in name or "laguerre" in name else 60
    n = rng.integers(-2, top, x.size).astype(np.float64)
    n[:6] = [np.nan, 2.7, -0.5, 1e20, np.inf, 0]
    # relative to 1 + |value|: the values span many orders
    for dt in (np.float64, np.float32):
        a, b = x.astype(dt), n.astype(dt)
        t = getattr(S, name)(torch.from_numpy(a), torch.from_numpy(b)).numpy().astype(np.float64)
        s = getattr(st.special, name)(st.tensor(a), st.tensor(b)).numpy().astype(np.float64)
        fin = np.isfinite(t)
        tol = 1e-12 if dt == np.float64 else 2e-3
        assert np.all(np.abs(s[fin] - t[fin]) <= tol * (1 + np.abs(t[fin]))), name
        assert np.array_equal(np.isnan(s), np.isnan(t)) and np.array_equal(s[~fin & ~np.isnan(t)], t[~fin & ~np.isnan(t)])
    # a Python number for either argument
    xt = torch.tensor([0.3, -0.7], dtype=torch.float64)
    np.testing.assert_allclose(getattr(st.special, name)(st.tensor(xt.numpy()), 3).numpy(),
                               getattr(S, name)(xt, 3).numpy(), rtol=1e-12)
    np.testing.assert_allclose(getattr(st.special, name)(0.25, st.tensor([2.0, 5.0])).numpy(),
                               getattr(S, name)(0.25, torch.tensor([2.0, 5.0])).numpy(), rtol=1e-6)


def test_gammainc_against_torch_and_mpmath():
    rng = np.random.default_rng(2)
    a = np.exp(rng.uniform(-5, 7, 5000))
    x = a * np.exp(rng.uniform(-3, 3, 5000))
    edges_a = np.array([0, 0, 1, -1, np.inf, np.inf, 2, np.nan, 0.5, 3])
    edges_x = np.array([0, 1, 0, 1, 1, np.inf, np.inf, 1, -1, np.nan])
    a, x = np.concatenate([a, edges_a]), np.concatenate([x, edges_x])
    # torch switches to an asymptotic form for large a that is good to ~1e-9.
    _binary("gammainc", a, x, 1e-7, 1e-9)
    _binary("gammaincc", a, x, 1e-7, 1e-9)
    pts = [(0.5, 0.2), (3.0, 2.5), (22.42, 15.75), (100.0, 110.0), (7.5, 30.0)]
    s = st.special.gammainc(st.tensor([p[0] for p in pts], dtype=st.float64), st.tensor([p[1] for p in pts], dtype=st.float64))
    want = [float(mp.gammainc(p[0], 0, p[1], regularized=True)) for p in pts]
    np.testing.assert_allclose(s.numpy(), want, rtol=1e-12)
    assert st.igamma is st.special.gammainc
    np.testing.assert_allclose(st.tensor([2.0]).igammac(st.tensor([1.0])).numpy(), [float(mp.gammainc(2, 1, regularized=True))], rtol=1e-6)


def test_zeta_and_xlog1py_against_torch():
    rng = np.random.default_rng(3)
    s_ = np.concatenate([rng.uniform(1, 20, 5000), [1, 0.5, 2, 2, 3, 2.5, np.inf, np.inf, np.nan]])
    q_ = np.concatenate([np.exp(rng.uniform(-5, 8, 5000)), [1, 1, 0, -2, -1.5, -1.5, 1, 0.5, 1]])
    _binary("zeta", s_, q_, 1e-13, 0)
    # where torch gives nan for a defined value: zeta(inf, q > 1) = 0 and zeta(s, inf) = 0
    out = st.special.zeta(st.tensor([np.inf, 2.0]), st.tensor([2.0, np.inf])).numpy()
    assert out.tolist() == [0.0, 0.0]
    x = np.concatenate([rng.uniform(-3, 3, 1000), [0, 0, 0, 1]])
    y = np.concatenate([rng.uniform(-0.99, 10, 1000), [np.nan, -1, -2, -1]])
    _binary("xlog1py", x, y, 1e-14, 0)


GRAD = ["entr", "erfcx", "i0e", "i1e", "log_ndtr", "ndtr", "ndtri"]
GRAD_RANGE = {"entr": (0.1, 4), "ndtri": (0.05, 0.95), "log_ndtr": (-30, 5), "erfcx": (-3, 10)}


@pytest.mark.parametrize("name", GRAD)
def test_gradients_against_torch(name):
    lo, hi = GRAD_RANGE.get(name, (-8, 8))
    x = np.linspace(lo, hi, 37)
    xs = st.tensor(x, requires_grad=True)
    xt = torch.tensor(x, requires_grad=True)
    getattr(st.special, name)(xs).sum().backward()
    getattr(S, name)(xt).sum().backward()
    np.testing.assert_allclose(xs.grad.numpy(), xt.grad.numpy(), rtol=1e-10, atol=1e-12)
    small = st.tensor(x[::6], requires_grad=True)
    assert autograd.gradcheck(getattr(st.special, name), (small,))


def test_binary_gradients():
    x = st.tensor([0.5, 0.0, -1.2, 2.0], dtype=st.float64, requires_grad=True)
    y = st.tensor([0.3, -1.0, 2.0, 0.1], dtype=st.float64, requires_grad=True)
    xt = torch.tensor(x.detach().numpy(), requires_grad=True)
    yt = torch.tensor(y.detach().numpy(), requires_grad=True)
    st.special.xlog1py(x, y).sum().backward()
    S.xlog1py(xt, yt).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(y.grad.numpy(), yt.grad.numpy(), rtol=1e-12)
    a = st.tensor([0.5, 2.0, 7.0], dtype=st.float64)
    v = st.tensor([0.3, 2.5, 4.0], dtype=st.float64, requires_grad=True)
    assert autograd.gradcheck(lambda t: st.special.gammainc(a, t), (v,))
    assert autograd.gradcheck(lambda t: st.special.gammaincc(a, t), (v,))
    vt = torch.tensor(v.detach().numpy(), requires_grad=True)
    S.gammaincc(torch.tensor(a.numpy()), vt).sum().backward()
    st.special.gammaincc(a, v).sum().backward()
    np.testing.assert_allclose(v.grad.numpy(), vt.grad.numpy(), rtol=1e-10)
    with pytest.raises(NotImplementedError, match="igamma"):
        a2 = st.tensor([1.0, 2.0], dtype=st.float64, requires_grad=True)
        st.special.gammainc(a2, st.tensor([1.0, 1.0], dtype=st.float64)).sum().backward()


def test_not_differentiable_like_torch():
    x = st.tensor([0.7], requires_grad=True)
    for name in ("airy_ai", "bessel_j0", "modified_bessel_k0", "spherical_bessel_j0"):
        assert not getattr(st.special, name)(x).requires_grad
        assert not getattr(S, name)(torch.tensor([0.7], requires_grad=True)).requires_grad
    assert not st.special.chebyshev_polynomial_t(x, 3).requires_grad


def test_dtypes_out_meta_and_errors():
    i = st.tensor([1, 2, 3])
    assert st.special.bessel_j0(i).dtype == st.float32
    assert st.special.chebyshev_polynomial_t(st.tensor([0.5]), st.tensor([2], dtype=st.float64)).dtype == st.float64
    out = st.empty(3, dtype=st.float64)
    st.special.erfcx(st.tensor([0.0, 1.0, 2.0], dtype=st.float64), out=out)
    np.testing.assert_allclose(out.numpy(), S.erfcx(torch.tensor([0.0, 1.0, 2.0], dtype=torch.float64)).numpy())
    m = st.special.zeta(st.empty(2, 3, device="meta"), st.empty(3, device="meta"))
    assert m.shape == (2, 3) and m.device.type == "meta"
    with pytest.raises(RuntimeError, match="special_zeta|broadcast|shape"):
        st.special.zeta(st.ones(2, 3), st.ones(4))
    with pytest.raises(RuntimeError, match="special_bessel_j0|out"):
        st.special.bessel_j0(st.ones(3), out=st.empty(3, dtype=st.int64))
    for n in (0, 7):
        np.testing.assert_allclose(st.special.bessel_j0(st.ones(n, 2)).numpy(), S.bessel_j0(torch.ones(n, 2)).numpy())
    nc = st.tensor(np.linspace(0, 9, 20).reshape(4, 5))[:, ::2]
    np.testing.assert_allclose(st.special.i1e(nc).numpy(), S.i1e(torch.tensor(np.linspace(0, 9, 20).reshape(4, 5))[:, ::2]).numpy(), rtol=1e-14)


def test_standard_gamma_grad_against_mpmath_and_torch():
    rng = np.random.default_rng(4)
    a = np.exp(rng.uniform(-4, 6, 400))
    # Seeded: the draws (and so the points checked) are the same in every run.
    x = torch._standard_gamma(torch.from_numpy(a), generator=torch.Generator().manual_seed(0)).numpy()
    ours = st._C._ops._standard_gamma_grad(st.tensor(a), st.tensor(x)).numpy()
    theirs = torch._standard_gamma_grad(torch.from_numpy(a), torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=2e-3)  # torch's is an approximation
    mp.mp.dps = 25
    for ai, xi, g in list(zip(a, x, ours))[:12]:
        P = lambda aa, xx: mp.gammainc(aa, 0, xx, regularized=True)  # noqa: E731
        want = -mp.diff(lambda aa: P(aa, xi), ai) / mp.diff(lambda xx: P(ai, xx), xi)
        assert abs(g - float(want)) <= 1e-9 * abs(float(want)) + 1e-12


def _igamma_reference(a, x):
    """(P, Q) to ~25 digits: the series for P below x = a, Legendre's continued fraction for Q above, in mpmath."""
    with mp.workdps(40):
        A, X = mp.mpf(a), mp.mpf(x)
        if x < a:
            term = s = mp.mpf(1)
            n = 1
            while term > s * mp.mpf(10) ** -30:
                term *= X / (A + n)
                s += term
                n += 1
            p = mp.exp(A * mp.log(X) - X - mp.loggamma(A + 1)) * s
            return float(p), float(1 - p)
        tiny = mp.mpf(10) ** -300
        b, c = X + 1 - A, 1 / tiny
        d = 1 / b
        f, i = d, 1
        while True:
            an = -i * (i - A)
            b += 2
            d, c = 1 / (an * d + b), b + an / c
            f *= d * c
            i += 1
            if abs(d * c - 1) < mp.mpf(10) ** -30:
                break
        q = mp.exp(A * mp.log(X) - X - mp.loggamma(A)) * f
        return float(1 - q), float(q)


def test_gammainc_for_huge_a():
    """Regression (differential tests): for a >~ 1e9 the series drifted (1e-9 at 1e9, NaN past 1e14).
    Temme's expansion (Note [Incomplete gamma for large a]) is good to ~1e-14 relative, tails included;
    torch's Cephes values are off there (1.5e-25 for 7.5e-24 at a = 1e9, 10 sigma below the mean), so the
    reference is a 40-digit series. For a = 1e16 the reference is the normal limit's neighbourhood."""
    # a 40-digit reference computed here (a = 1e7), and values it gave for a = 1e9 (8 s each)
    cases = [(1e7, s, None) for s in (-10.0, 0.5, 3.0)] + [
        (1e9, -10.0, (7.53995865820698e-24, None)), (1e9, 3.0, (None, 0.0013502717822821229))]
    for a, s, ref in cases:
        x = a + s * np.sqrt(a)
        p, q = _igamma_reference(a, x) if ref is None else ref
        if p is None:
            p = 1 - q
        if q is None:
            q = 1 - p
        at, xt = st.tensor([a], dtype=st.float64), st.tensor([x], dtype=st.float64)
        gp, gq = st.special.gammainc(at, xt).item(), st.special.gammaincc(at, xt).item()
        assert gp == pytest.approx(p, rel=1e-12, abs=1e-300), (a, s)
        assert gq == pytest.approx(q, rel=1e-12, abs=1e-300), (a, s)
    # past 1e14 (NaN before the fix): the central limit, P(a, a + s sqrt(a)) -> Phi(s)
    for a in (1e14, 1e16, 1e20, 1e300):
        at = st.tensor([a] * 3, dtype=st.float64)
        xt = at + st.tensor([-1.0, 0.0, 1.0], dtype=st.float64) * np.sqrt(a)
        p = st.special.gammainc(at, xt).numpy()
        s_ = (xt.numpy() - a) / np.sqrt(a)   # the distance the rounded doubles really have
        np.testing.assert_allclose(p, [0.5 * math.erfc(-v / math.sqrt(2)) for v in s_], rtol=1e-6)
        np.testing.assert_allclose(st.special.gammaincc(at, xt).numpy() + p, 1.0, rtol=1e-14)
    # float32 (computed in double): no NaN and the same central values
    f = st.special.gammainc(st.tensor([1e9, 1e20], dtype=st.float32), st.tensor([1e9 + 3.16e4, 1e20], dtype=st.float32))
    assert np.all(np.isfinite(f.numpy()))
