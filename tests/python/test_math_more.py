"""The ops of src/ops/decl/math_more.def and torch's aliases, against torch on
edge cases (nan, inf, signed zeros, integer inputs, broadcasting, out=,
in-place, gradients), and the special functions' accuracy against SciPy."""

import itertools
import math

import numpy as np
import pytest

import strata as st

torch = pytest.importorskip("torch")

inf, nan = math.inf, math.nan
EDGES = [inf, -inf, nan, 0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 1e-30, 1e30, -1e30, 100.0]
DTYPES = [(st.float32, torch.float32), (st.float64, torch.float64)]


def tname(dt):
    return str(dt).split(".")[-1]


def check(a, b, rtol=2e-6, atol=1e-6, zero_sign=True):
    """a (strata) equals b (torch): shape, dtype, values with nan in the same places, signs of zeros."""
    if isinstance(b, tuple):
        for x, y in zip(a, b):
            check(x, y, rtol, atol, zero_sign)
        return
    assert tname(a.dtype) == tname(b.dtype), (a.dtype, b.dtype)
    an = a.detach().double().numpy() if a.dtype.is_floating_point else a.numpy()
    bn = b.detach().double().numpy() if b.dtype.is_floating_point else b.numpy()
    assert an.shape == bn.shape
    if an.dtype.kind == "f":
        np.testing.assert_allclose(an, bn, rtol=rtol, atol=atol, equal_nan=True)
        if zero_sign:
            z = (an == 0) & (bn == 0)
            assert (np.signbit(an[z]) == np.signbit(bn[z])).all(), (an, bn)
    else:
        np.testing.assert_array_equal(an, bn)


UNARY = ["acosh", "asinh", "atanh", "deg2rad", "rad2deg", "frac", "sinc", "signbit", "lgamma", "digamma", "erfinv",
         "i0", "logit", "sgn", "fix", "positive", "arccos", "arcsin", "arctan", "arccosh", "arcsinh", "arctanh",
         "negative", "absolute"]


@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("dts", DTYPES, ids=["float32", "float64"])
def test_unary_edges_match_torch(name, dts):
    sdt, tdt = dts
    s = getattr(st, name)(st.tensor(EDGES, dtype=sdt))
    t = getattr(torch, name)(torch.tensor(EDGES, dtype=tdt))
    # sign(nan) is nan here (strata's sign functor), 0 in torch: compare elsewhere.
    keep = slice(None) if name != "sgn" else [i for i, v in enumerate(EDGES) if not math.isnan(v)]
    check(s[keep] if name == "sgn" else s, t[keep] if name == "sgn" else t)


@pytest.mark.parametrize("name", ["acosh", "asinh", "atanh", "deg2rad", "rad2deg", "sinc", "lgamma", "digamma",
                                  "erfinv", "i0", "logit", "signbit", "frac"])
def test_unary_integer_inputs_like_torch(name):
    x = [1, 2, -3, 0]
    try:
        t = getattr(torch, name)(torch.tensor(x))
    except (RuntimeError, NotImplementedError) as e:
        with pytest.raises(type(e)):
            getattr(st, name)(st.tensor(x))
        return
    check(getattr(st, name)(st.tensor(x)), t)


def test_special_i1_polygamma_mvlgamma_logit_eps():
    check(st.special.i1(st.tensor(EDGES)), torch.special.i1(torch.tensor(EDGES)))
    x64 = [v for v in EDGES if v not in (-1e30,) and not (v < 0 and v == int(v) if math.isfinite(v) else False)]
    for n in range(4):
        check(st.polygamma(n, st.tensor(x64, dtype=st.float64)), torch.polygamma(n, torch.tensor(x64, dtype=torch.float64)),
              rtol=1e-8)
    check(st.logit(st.tensor(EDGES), 0.1), torch.logit(torch.tensor(EDGES), 0.1))
    check(st.mvlgamma(st.tensor([1.5, 2.0, 3.3]), 2), torch.mvlgamma(torch.tensor([1.5, 2.0, 3.3]), 2))
    check(st.mvlgamma(st.tensor([3, 4]), 3), torch.mvlgamma(torch.tensor([3, 4]), 3))
    check(st.tensor([0.5, 2.0]).polygamma(1), torch.tensor([0.5, 2.0]).polygamma(1))
    for dt in (st.float32, st.float64, st.bfloat16):
        assert st.lgamma(st.tensor([1.0, 2.0], dtype=dt)).tolist() == [0.0, 0.0]  # exact, as torch
    with pytest.raises(RuntimeError, match="greater than"):
        st.mvlgamma(st.tensor([0.6, 3.0]), 3)
    with pytest.raises(RuntimeError, match="negative n"):
        st.polygamma(-1, st.tensor([1.0]))


ED2 = [inf, -inf, nan, 0.0, -0.0, 1.0, -2.5]
GRID_A = [a for a, _ in itertools.product(ED2, ED2)]
GRID_B = [b for _, b in itertools.product(ED2, ED2)]
BINARY = ["hypot", "logaddexp", "logaddexp2", "xlogy", "copysign", "heaviside", "float_power", "clamp_min",
          "clamp_max", "true_divide", "arctan2", "multiply", "subtract", "divide", "greater", "greater_equal", "less",
          "less_equal", "not_equal"]


@pytest.mark.parametrize("name", BINARY)
def test_binary_edges_and_promotion_match_torch(name):
    sf, tf = getattr(st, name), getattr(torch, name)
    check(sf(st.tensor(GRID_A), st.tensor(GRID_B)), tf(torch.tensor(GRID_A), torch.tensor(GRID_B)))
    # broadcasting, a Python number on either side, mixed dtypes, integers
    cases = [
        (([[1.5], [-2.0]], None), ([1.0, -3.0, 0.5], None)),
        (([1.5, -2.0], None), 2),
        (([1, -2], None), 2.5),
        (([1.0, 2.0], None), ([2, 3], None)),
        (([1.0, 2.0], "float64"), ([2.0, 3.0], None)),
        (([1, -2, 3], None), ([2, 0, -5], None)),
    ]
    for (ad, adt), b in cases:
        sa = st.tensor(ad, dtype=getattr(st, adt) if adt else None)
        ta = torch.tensor(ad, dtype=getattr(torch, adt) if adt else None)
        sb, tb = (st.tensor(b[0]), torch.tensor(b[0])) if isinstance(b, tuple) else (b, b)
        try:
            t = tf(ta, tb)
        except TypeError:
            continue  # torch has no Python-number overload here; strata takes one (a superset)
        except (RuntimeError, NotImplementedError) as e:
            with pytest.raises(type(e)):
                sf(sa, sb)
            continue
        check(sf(sa, sb), t)


@pytest.mark.parametrize("value", [1, 2, -0.5])
def test_addcmul_addcdiv(value):
    a, b, c = [1.0, 2.0], [[1.0], [3.0]], [3.0, 0.0]
    check(st.addcmul(st.tensor(a), st.tensor(b), st.tensor(c), value=value),
          torch.addcmul(torch.tensor(a), torch.tensor(b), torch.tensor(c), value=value))
    check(st.addcdiv(st.tensor(a), st.tensor(b), st.tensor(c), value=value),
          torch.addcdiv(torch.tensor(a), torch.tensor(b), torch.tensor(c), value=value))
    ints = ([1, 2], [1, 2], [3, 4])
    check(st.addcmul(*map(st.tensor, ints), value=2), torch.addcmul(*map(torch.tensor, ints), value=2))
    check(st.addcmul(st.tensor([1.0, 2.0]), st.tensor([1, 2]), st.tensor([3, 4])),
          torch.addcmul(torch.tensor([1.0, 2.0]), torch.tensor([1, 2]), torch.tensor([3, 4])))
    with pytest.raises(RuntimeError, match="Integer division"):
        st.addcdiv(st.tensor([1.0]), st.tensor([1]), st.tensor([2]))


def test_out_and_inplace():
    x = st.tensor([0.2, 0.7, 1.5])
    out = st.empty(3)
    r = st.hypot(x, x, out=out)
    assert r is out or r.data_ptr() == out.data_ptr()
    check(out, torch.hypot(torch.tensor([0.2, 0.7, 1.5]), torch.tensor([0.2, 0.7, 1.5])))
    for name, args in [("logit", ()), ("lgamma", ()), ("digamma", ()), ("erfinv", ()), ("i0", ()), ("sinc", ()),
                       ("frac", ()), ("deg2rad", ()), ("xlogy", (2.0,)), ("copysign", (-1.0,)), ("hypot", (1.0,)),
                       ("clamp_min", (0.5,)), ("clamp_max", (0.5,)), ("arccos", ()), ("fix", ()), ("clip", (0.3, 0.6)),
                       ("addcmul", (x, x)), ("addcdiv", (x, x)), ("heaviside", (st.tensor(0.5),)),
                       ("polygamma", (1,)), ("mvlgamma", (1,)), ("float_power", (2.0,))]:
        s = st.tensor([0.2, 0.7, 0.9], dtype=st.float64 if name == "float_power" else None)
        t = torch.tensor([0.2, 0.7, 0.9], dtype=torch.float64 if name == "float_power" else None)
        # torch's in-place binary methods take tensors only
        targs = tuple(torch.tensor(a.tolist()) if isinstance(a, st.Tensor) else
                      torch.tensor(a, dtype=t.dtype) if isinstance(a, float) and name != "clip" else a for a in args)
        v = s._version
        ret = getattr(s, name + "_")(*args)
        assert ret is s and s._version > v, name
        check(s, getattr(t, name + "_")(*targs))
    # an integer tensor cannot hold a float result in place
    with pytest.raises(RuntimeError):
        st.tensor([1, 2]).lgamma_()
    with pytest.raises(RuntimeError, match="float_power_"):
        st.tensor([1.0, 2.0]).float_power_(2)
    with pytest.raises(RuntimeError, match="Double"):
        st.float_power(st.tensor([1.0]), 2, out=st.empty(1))


def grads(fn_s, fn_t, *vals):
    s_in = [st.tensor(v, dtype=st.float64, requires_grad=True) for v in vals]
    t_in = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in vals]
    ys, yt = fn_s(*s_in), fn_t(*t_in)
    ys, yt = (ys[0], yt[0]) if isinstance(ys, tuple) else (ys, yt)
    w = np.linspace(0.5, 1.5, yt.numel()).reshape(tuple(yt.shape))
    (ys * st.tensor(w)).sum().backward()
    (yt * torch.tensor(w)).sum().backward()
    for a, b in zip(s_in, t_in):
        tg = torch.zeros_like(b) + b.grad  # a dense copy (torch may hand back a ZeroTensor)
        np.testing.assert_allclose(a.grad.numpy(), tg.detach().numpy(), rtol=1e-9, atol=1e-12, equal_nan=True)


GRAD_CASES = [
    ("acosh", [1.5, 3.0]), ("asinh", [-1.0, 0.0, 2.0]), ("atanh", [-0.5, 0.0, 0.9]), ("deg2rad", [1.0, -30.0]),
    ("rad2deg", [1.0, -3.0]), ("frac", [1.5, -2.25]), ("sinc", [0.0, 0.5, -1.25]), ("logit", [0.2, 0.5, 1.5]),
    ("lgamma", [0.5, 3.0, -1.5]), ("digamma", [0.5, 3.0, -1.5]), ("erfinv", [-0.9, 0.0, 0.5]), ("i0", [-2.0, 0.0, 3.0]),
    ("sgn", [-2.0, 0.0, 3.0]), ("square", [-2.0, 0.5]),
]


@pytest.mark.parametrize("name,vals", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_unary_gradients_match_torch(name, vals):
    grads(getattr(st, name), getattr(torch, name), vals)


def test_more_gradients_match_torch():
    a, b = [0.5, -1.0, 0.0, 2.0], [1.5, 0.25, 0.0, -2.0]
    for name in ["hypot", "logaddexp", "logaddexp2", "copysign", "clamp_min", "clamp_max", "float_power"]:
        grads(getattr(st, name), getattr(torch, name), [v + 0.1 for v in a], b)
    grads(st.xlogy, torch.xlogy, [0.0, 1.0, 2.0], [0.5, 2.0, 3.0])
    grads(lambda x, y, z: st.addcmul(x, y, z, value=-2), lambda x, y, z: torch.addcmul(x, y, z, value=-2), a, b, a)
    grads(lambda x, y, z: st.addcdiv(x, y, z, value=3), lambda x, y, z: torch.addcdiv(x, y, z, value=3), a, b,
          [1.0, 2.0, -1.0, 4.0])
    grads(lambda x: st.logit(x, 0.3), lambda x: torch.logit(x, 0.3), [0.1, 0.5, 0.9])
    grads(lambda x: st.polygamma(2, x), lambda x: torch.polygamma(2, x), [0.5, 3.0])
    grads(lambda x: st.mvlgamma(x, 3), lambda x: torch.mvlgamma(x, 3), [1.5, 3.0])
    grads(st.special.i1, torch.special.i1, [-2.0, 0.0, 3.0])
    m = [[3.0, 1.0, 2.0, 5.0], [0.5, -1.0, 4.0, 4.0], [2.0, 2.0, 1.0, 3.0]]
    for d in (0, 1):
        grads(lambda x: st.cummax(x, d), lambda x: torch.cummax(x, d), m)
        grads(lambda x: st.cummin(x, d), lambda x: torch.cummin(x, d), m)
        grads(lambda x: st.logcumsumexp(x, d), lambda x: torch.logcumsumexp(x, d), m)
        grads(lambda x: st.median(x, d), lambda x: torch.median(x, d), [[3.0, 1.0, 2.0], [0.5, -1.0, 4.0]])
        grads(lambda x: st.kthvalue(x, 2, d), lambda x: torch.kthvalue(x, 2, d), [[3.0, 1.0, 2.0], [0.5, -1.0, 4.0]])
        grads(lambda x: st.nansum(x, d), lambda x: torch.nansum(x, d), [[3.0, nan], [0.5, -1.0]])
        grads(lambda x: st.nanmean(x, d), lambda x: torch.nanmean(x, d), [[3.0, nan], [0.5, -1.0]])
    grads(st.median, torch.median, [3.0, 1.0, 2.0, 1.0])
    grads(st.nanmedian, torch.nanmedian, [3.0, nan, 2.0, 1.0])
    for interp in ["linear", "lower", "higher", "midpoint", "nearest"]:
        grads(lambda x: st.quantile(x, 0.4, 1, interpolation=interp),
              lambda x: torch.quantile(x, 0.4, 1, interpolation=interp), m)


def test_logcumsumexp_backward_no_overflow():
    # exp(x) and exp(-out) overflow here; the log-space formula does not.
    grads(lambda x: st.logcumsumexp(x, 0), lambda x: torch.logcumsumexp(x, 0), [800.0, -800.0, 799.0, 1.0])


X = [[3.0, nan, 1.0, 2.0], [4.0, 4.0, 1.0, 1.0], [nan, nan, nan, nan], [5.0, -1.0, 0.5, 7.0]]


def valid_indices(values, indices, x, dim):
    """x[indices] along dim gives values (the index among equal values may differ from torch's)."""
    g = st.gather(x, dim, indices.unsqueeze(dim)).squeeze(dim)
    np.testing.assert_array_equal(g.numpy(), values.numpy())


@pytest.mark.parametrize("name", ["median", "nanmedian", "mode"])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_dim_selections_match_torch(name, dim, keepdim):
    s = getattr(st, name)(st.tensor(X), dim, keepdim)
    t = getattr(torch, name)(torch.tensor(X), dim, keepdim)
    check(s.values, t.values)
    v, i = (s.values.squeeze(dim), s.indices.squeeze(dim)) if keepdim else (s.values, s.indices)
    valid_indices(v, i, st.tensor(X), dim)
    # without ties or nans the index is determined
    u = [[3.0, 9.0, 1.0, 2.0, 8.0], [4.0, -4.0, 0.0, 1.0, 6.0]]
    check(getattr(st, name)(st.tensor(u), dim, keepdim), getattr(torch, name)(torch.tensor(u), dim, keepdim))


def test_selections_more():
    for k in (1, 2, 4):
        s, t = st.kthvalue(st.tensor(X), k, 1), torch.kthvalue(torch.tensor(X), k, 1)
        check(s.values, t.values, zero_sign=False)
        valid_indices(s.values, s.indices, st.tensor(X), 1)
    check(st.median(st.tensor(X)), torch.median(torch.tensor(X)))
    check(st.nanmedian(st.tensor(X)), torch.nanmedian(torch.tensor(X)))
    check(st.median(st.tensor([[3, 1], [2, 5]])), torch.median(torch.tensor([[3, 1], [2, 5]])))
    check(st.median(st.tensor(5.0), 0), torch.median(torch.tensor(5.0), 0))
    check(st.median(st.tensor([])), torch.median(torch.tensor([])))
    check(st.mode(st.tensor([3, 1, 1, 2, 3, 0]), 0), torch.mode(torch.tensor([3, 1, 1, 2, 3, 0]), 0))
    check(st.mode(st.tensor([True, False, True]), 0), torch.mode(torch.tensor([True, False, True]), 0))
    assert st.median(st.tensor(X), 1).values.shape == (4,)
    for fn, args, err in [("median", (st.tensor([True]),), NotImplementedError),
                          ("kthvalue", (st.tensor([1.0, 2.0]), 3), RuntimeError),
                          ("median", (st.empty(0, 2), 0), IndexError),
                          ("mode", (st.empty(0), 0), IndexError)]:
        with pytest.raises(err):
            getattr(st, fn)(*args)


def test_cummax_cummin_logcumsumexp_match_torch():
    for name in ["cummax", "cummin"]:
        for d in (0, 1):
            check(getattr(st, name)(st.tensor(X), d), getattr(torch, name)(torch.tensor(X), d))
        check(getattr(st, name)(st.tensor([True, False, True]), 0), getattr(torch, name)(torch.tensor([True, False, True]), 0))
        check(getattr(st, name)(st.tensor([[3, 1, 3], [2, 2, 5]]), 1), getattr(torch, name)(torch.tensor([[3, 1, 3], [2, 2, 5]]), 1))
        check(getattr(st, name)(st.tensor(3.0), 0), getattr(torch, name)(torch.tensor(3.0), 0))
    edge = [[-inf, -inf, 1.0], [inf, inf, -inf], [1.0, nan, 2.0]]
    check(st.logcumsumexp(st.tensor(edge), 1), torch.logcumsumexp(torch.tensor(edge), 1))
    check(st.logcumsumexp(st.tensor(X), 0), torch.logcumsumexp(torch.tensor(X), 0))
    with pytest.raises(NotImplementedError):
        st.logcumsumexp(st.tensor([1, 2]), 0)


@pytest.mark.parametrize("name", ["cummax", "cummin"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_cummax_cummin_long_lines_match_torch(name, dtype):
    # Contiguous lines (dim=-1) and row-blocked scans (other dims, more columns than one block), with ties and NaNs:
    # values and indices must be identical to torch's.
    rng = np.random.default_rng(5)
    a = rng.integers(-20, 20, (3, 70, 300)).astype(dtype)
    if dtype != "int64":
        a[rng.random(a.shape) < 0.02] = nan
        a[0, :, :5] = nan
    for d in (0, 1, 2, -1):
        for x in (a, a[:, ::2, 1:]):
            check(getattr(st, name)(st.tensor(x), d), getattr(torch, name)(torch.tensor(x), d), rtol=0, atol=0)
    g = st.tensor(a[0], requires_grad=True) if dtype != "int64" else None
    if g is not None:
        tg = torch.tensor(a[0], requires_grad=True)
        getattr(st, name)(g, 0).values.sum().backward()
        getattr(torch, name)(tg, 0).values.sum().backward()
        np.testing.assert_array_equal(g.grad.numpy(), tg.grad.numpy())


def test_nan_reductions_and_aminmax_match_torch():
    for name in ["nansum", "nanmean"]:
        check(getattr(st, name)(st.tensor(X)), getattr(torch, name)(torch.tensor(X)))
        check(getattr(st, name)(st.tensor(X), 1, True), getattr(torch, name)(torch.tensor(X), 1, True))
        check(getattr(st, name)(st.tensor(X), dim=(0, 1)), getattr(torch, name)(torch.tensor(X), dim=(0, 1)))
        check(getattr(st.tensor(X), name)(0), getattr(torch.tensor(X), name)(0))
    check(st.nansum(st.tensor([1, 2])), torch.nansum(torch.tensor([1, 2])))
    check(st.nansum(st.tensor([1.0, nan]), dtype=st.float64), torch.nansum(torch.tensor([1.0, nan]), dtype=torch.float64))
    with pytest.raises(RuntimeError, match="floating point"):
        st.nanmean(st.tensor([1, 2]))
    for kd in (False, True):
        for d in (None, 0, 1):
            check(st.aminmax(st.tensor(X), dim=d, keepdim=kd), torch.aminmax(torch.tensor(X), dim=d, keepdim=kd))
    check(st.aminmax(st.tensor([True, False])), torch.aminmax(torch.tensor([True, False])))
    with pytest.raises(RuntimeError, match="empty"):
        st.aminmax(st.tensor([]))


def test_erfinv_float_paths_within_one_ulp():
    # float32 is the fitted start alone (Note [erfinv]); check both polynomial pieces and the tails.
    scipy_special = pytest.importorskip("scipy.special")
    rng = np.random.default_rng(5)
    y = np.concatenate([rng.uniform(-1, 1, 50000), 1 - np.logspace(-7.2, -0.001, 5000),
                        -np.logspace(-40, -0.001, 5000), [0.998, -0.998, 0.99813, 1e-45]]).astype(np.float32)
    y = y[np.abs(y) < 1]
    ref = scipy_special.erfinv(y.astype(np.float64))
    ulp = np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64)
    got = st.erfinv(st.tensor(y)).numpy().astype(np.float64)
    assert np.max(np.abs(got - ref) / ulp) <= 1.0
    # non-contiguous input, float16, and the edges
    m = st.tensor(y[:4000].reshape(40, 100))
    check(st.erfinv(m.t()), torch.erfinv(torch.tensor(y[:4000].reshape(40, 100)).t()), rtol=1.2e-7, atol=0)
    h = np.array([-0.999, -0.5, 0.0, 0.25, 0.9, 0.999], dtype=np.float16)
    check(st.erfinv(st.tensor(h)), torch.erfinv(torch.tensor(h)), rtol=1e-3, atol=0)
    edges = [1.0, -1.0, 0.0, -0.0, 1.5, -2.0, nan]
    for sdt, tdt in DTYPES:
        check(st.erfinv(st.tensor(edges, dtype=sdt)), torch.erfinv(torch.tensor(edges, dtype=tdt)))
    check(st.erfinv(st.tensor([0, 1, -1])), torch.erfinv(torch.tensor([0, 1, -1])))
    check(st.erfinv(st.tensor([], dtype=st.float32)), torch.erfinv(torch.tensor([], dtype=torch.float32)))


def test_nansum_single_pass_matches_torch():
    # Long enough for the vectorized lanes and the pairwise blocks; NaN, inf and -0.0 mixed in.
    rng = np.random.default_rng(3)
    for npdt, sdt, tdt in [(np.float32, None, None), (np.float64, None, None)]:
        a = rng.standard_normal((37, 1001)).astype(npdt)
        a[rng.random(a.shape) < 0.2] = np.nan
        a[0, :5] = [np.inf, np.nan, -0.0, np.nan, 1.0]
        s, t = st.tensor(a), torch.tensor(a)
        for args in [(), (1,), (0,), ((0, 1),), (1, True)]:
            check(st.nansum(s, *args), torch.nansum(t, *args), rtol=1e-5, atol=1e-4)
        # non-contiguous: a transpose (column loop) and a strided slice
        check(st.nansum(s.t(), 1), torch.nansum(t.t(), 1), rtol=1e-5, atol=1e-4)
        check(st.nansum(s[:, ::3]), torch.nansum(t[:, ::3]), rtol=1e-5, atol=1e-4)
        check(st.nansum(s, dtype=st.float64), torch.nansum(t, dtype=torch.float64), rtol=1e-12, atol=1e-10)
    h = np.array([1.5, np.nan, 2.25, -1.0] * 50, dtype=np.float16)
    check(st.nansum(st.tensor(h)), torch.nansum(torch.tensor(h)))
    check(st.nansum(st.tensor([[nan, nan]]), 1), torch.nansum(torch.tensor([[nan, nan]]), 1))
    check(st.nansum(st.tensor([nan, -np.inf, np.inf])), torch.nansum(torch.tensor([nan, -np.inf, np.inf])))
    check(st.nansum(st.zeros(0, 3)), torch.nansum(torch.zeros(0, 3)))
    check(st.nansum(st.zeros(0, 3), 0), torch.nansum(torch.zeros(0, 3), 0))
    check(st.nansum(st.tensor([[1, 2], [3, 4]], dtype=st.int32), 0),
          torch.nansum(torch.tensor([[1, 2], [3, 4]], dtype=torch.int32), 0))
    check(st.nansum(st.tensor([True, True, False])), torch.nansum(torch.tensor([True, True, False])))
    # With a gradient asked for, the decomposed path runs; without, the single pass: same values.
    x = st.tensor(a, requires_grad=True)
    check(st.nansum(x, 1).detach(), st.nansum(st.tensor(a), 1), rtol=0, atol=0)
    with st.no_grad():
        assert st.nansum(x, 1).requires_grad is False


@pytest.mark.parametrize("interp", ["linear", "lower", "higher", "midpoint", "nearest"])
def test_quantile_matches_torch(interp):
    for name in ["quantile", "nanquantile"]:
        for q in [0.5, 0.0, 1.0, 0.37, [0.1, 0.5, 0.63]]:
            for d in (None, 0, 1):
                for kd in (False, True):
                    sq = st.tensor(q) if isinstance(q, list) else q
                    tq = torch.tensor(q) if isinstance(q, list) else q
                    check(getattr(st, name)(st.tensor(X), sq, d, kd, interpolation=interp),
                          getattr(torch, name)(torch.tensor(X), tq, d, kd, interpolation=interp))
    check(st.tensor(X).quantile(0.3, dim=0, interpolation=interp),
          torch.tensor(X).quantile(0.3, dim=0, interpolation=interp))


def test_quantile_errors_like_torch():
    x = st.tensor([1.0, 2.0])
    for args, kwargs in [((st.tensor([1, 2]), 0.5), {}), ((x, 1.5), {}), ((x, st.tensor([[0.5]])), {}),
                         ((x, st.tensor([0.5], dtype=st.float64)), {}), ((st.tensor([]), 0.4), {}),
                         ((x, 0.4), {"interpolation": "bad"})]:
        targs = tuple(torch.tensor(a.tolist(), dtype=getattr(torch, tname(a.dtype))) if isinstance(a, st.Tensor) else a
                      for a in args)
        with pytest.raises(RuntimeError) as te:
            torch.quantile(*targs, **kwargs)
        with pytest.raises(RuntimeError) as se:
            st.quantile(*args, **kwargs)
        # the same complaint (strata adds the values it saw)
        assert str(te.value).split(" but")[0].split(" (")[0][:30] in str(se.value), (te.value, se.value)


def test_msort_and_meta():
    check(st.msort(st.tensor(X)), torch.msort(torch.tensor(X)))
    m = st.empty(3, 4, device="meta")
    assert st.median(m, 1).values.shape == (3,) and st.median(m, 1).indices.dtype is st.int64
    assert st.quantile(m, st.tensor([0.1, 0.2], device="meta"), 1, True).shape == (2, 3, 1)
    assert st.quantile(m, 0.5).shape == ()
    assert st.cummax(m, 0).indices.shape == (3, 4)
    assert st.logaddexp(m, m).device.type == "meta"
    assert st.signbit(m).dtype is st.bool
    assert st.xlogy(st.empty(3, dtype=st.int64, device="meta"), 2).dtype is st.float32


def test_aliases_are_the_same_callables():
    for alias, name in [("clip", "clamp"), ("arccos", "acos"), ("arcsin", "asin"), ("arctan", "atan"),
                        ("arctan2", "atan2"), ("arccosh", "acosh"), ("arcsinh", "asinh"), ("arctanh", "atanh"),
                        ("absolute", "abs"), ("negative", "neg"), ("multiply", "mul"), ("divide", "div"),
                        ("true_divide", "div"), ("subtract", "sub"), ("greater", "gt"), ("greater_equal", "ge"),
                        ("less", "lt"), ("less_equal", "le"), ("not_equal", "ne"), ("fix", "trunc")]:
        assert getattr(st, alias) is getattr(st, name), alias
        assert getattr(st.Tensor, alias) is getattr(st.Tensor, name), alias
        if hasattr(st.Tensor, name + "_"):
            assert getattr(st.Tensor, alias + "_") is getattr(st.Tensor, name + "_"), alias
    # sgn is its own op (z / |z| for complex tensors); on real tensors it is sign.
    np.testing.assert_array_equal(st.sgn(st.tensor([-2.0, 0.0, 3.0])).numpy(), [-1.0, 0.0, 1.0])
    assert st.concat is st.cat and st.concatenate is st.cat
    assert st.special.gammaln is st.lgamma and st.special.psi is st.digamma and st.special.expit is st.sigmoid
    x = st.tensor([1.0, -2.0])
    assert st.positive(x) is x and x.positive() is x
    with pytest.raises(RuntimeError, match="bool"):
        st.positive(st.tensor([True]))
    check(st.rsub(st.tensor([1.0, 2.0]), 5, alpha=2), torch.rsub(torch.tensor([1.0, 2.0]), 5, alpha=2))


ACCURACY = {
    # name: (strata fn, scipy fn, points, max relative error in float64)
    "lgamma": (st.lgamma, "gammaln", np.concatenate([np.linspace(0.01, 50, 2001), np.linspace(-9.97, -0.03, 199),
                                                      [1e-300, 1e10, 1e300]]), 1e-13),
    "digamma": (st.digamma, "psi", np.concatenate([np.linspace(0.01, 100, 2001), np.linspace(-9.95, -0.05, 199)]),
                1e-12),
    "trigamma": (lambda x: st.polygamma(1, x), lambda x: __import__("scipy.special").special.polygamma(1, x),
                 np.concatenate([np.linspace(0.01, 100, 2001), np.linspace(-9.95, -0.05, 199)]), 1e-10),
    "polygamma3": (lambda x: st.polygamma(3, x), lambda x: __import__("scipy.special").special.polygamma(3, x),
                   np.linspace(0.01, 100, 2001), 1e-13),
    "erfinv": (st.erfinv, "erfinv", np.concatenate([np.linspace(-0.999999, 0.999999, 2001), 1 - np.logspace(-15, -1, 50)]),
               1e-14),
    "i0": (st.i0, "i0", np.linspace(-700, 700, 2001), 1e-14),
    "i1": (st.special.i1, "i1", np.linspace(-700, 700, 2001), 1e-14),
}


@pytest.mark.parametrize("name", list(ACCURACY))
def test_special_function_accuracy_against_scipy(name):
    special = pytest.importorskip("scipy.special")
    fn, ref, x, bound = ACCURACY[name]
    ref = getattr(special, ref) if isinstance(ref, str) else ref
    expected = ref(x)
    got = fn(st.tensor(x, dtype=st.float64)).numpy()
    m = np.isfinite(expected) & (expected != 0)
    # relative error; lgamma's is absolute below 1 (near its zeros at 1 and 2)
    scale = np.maximum(np.abs(expected[m]), 1.0 if name == "lgamma" else 0.0)
    assert np.max(np.abs(got[m] - expected[m]) / scale) < bound
    got32 = fn(st.tensor(x.astype(np.float32))).double().numpy()
    e32 = ref(x.astype(np.float32).astype(np.float64))
    m = np.isfinite(e32) & (np.abs(e32) > 1e-6) & (np.abs(e32) < 3e38)
    assert np.max(np.abs(got32[m] - e32[m]) / np.abs(e32[m])) < 1.2e-7  # correctly rounded or one ulp off
