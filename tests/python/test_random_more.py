"""log_normal_, cauchy_, geometric_, poisson and binomial give torch's CPU numbers for the same seed:
same values for every dtype, shape and layout, and the generator left in the same state."""

import numpy as np
import pytest

import strata as st

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _restore_rng():
    ts, ss = torch.get_rng_state(), st.get_rng_state()
    yield
    torch.set_rng_state(ts)
    st.set_rng_state(ss)


SEEDS = [0, 7, 2**40 + 3]
SHAPES = [(), (1,), (15,), (16,), (17,), (3, 7), (64, 65)]


def _np(t):
    return t.detach().numpy()


def assert_same(expected, actual):
    e, a = _np(expected), _np(actual)
    assert e.shape == a.shape and e.dtype == a.dtype, (e.shape, e.dtype, a.shape, a.dtype)
    np.testing.assert_array_equal(a, e)


def both(seed, fn, repeat=2):
    """fn(lib) under the same seed in both libraries, `repeat` calls in a row (the later ones continue
    the stream), then the generator states compared."""
    torch.manual_seed(seed)
    st.manual_seed(seed)
    for _ in range(repeat):
        assert_same(fn(torch), fn(st))
    assert_same(torch.get_rng_state(), st.get_rng_state())


def dt(lib, name):
    return getattr(lib, name)


# ---- in-place samplers ----------------------------------------------------------------------------

INPLACE = {
    "log_normal_": [(), (0.5, 0.25), (-1.0, 3.0)],
    "cauchy_": [(), (1.5, 0.5), (-2.0, 10.0)],
    "geometric_": [(0.5,), (0.01,), (0.97,)],
}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(INPLACE))
def test_inplace_samplers(seed, shape, dtype, name):
    for args in INPLACE[name]:
        both(seed, lambda m: getattr(m.empty(shape, dtype=dt(m, dtype)), name)(*args))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", sorted(INPLACE))
def test_inplace_samplers_16_bit(dtype, name):
    # Compared as float32 (numpy has no bfloat16); the conversion is exact.
    for args in INPLACE[name]:
        both(1, lambda m: getattr(m.empty(40, dtype=dt(m, dtype)), name)(*args).float())


@pytest.mark.parametrize("dtype", ["int64", "int32", "int16", "int8", "uint8"])
def test_geometric_integer_dtypes(dtype):
    both(2, lambda m: m.empty(50, dtype=dt(m, dtype)).geometric_(0.2))
    # Samples beyond the type's range wrap as in torch.
    both(2, lambda m: m.empty(500, dtype=dt(m, dtype)).geometric_(0.004))


@pytest.mark.parametrize("name", sorted(INPLACE))
def test_inplace_samplers_non_contiguous(name):
    # Drawn in torch's visiting order (by stride), whatever the layout.
    args = INPLACE[name][1]
    both(3, lambda m: getattr(m.empty(6, 20).t(), name)(*args))
    both(3, lambda m: getattr(m.empty(8, 9)[:, ::2], name)(*args))
    both(3, lambda m: getattr(m.empty(4, 5, 6).permute(2, 0, 1), name)(*args))


def test_log_normal_shares_the_cached_normal():
    # The scalar Box-Muller caches its second sample in the generator, as normal_ on a short tensor.
    both(5, lambda m: m.cat([m.empty(3).normal_(), m.empty(3).log_normal_(), m.empty(1).normal_()]), repeat=3)


def test_generator_argument():
    tg, sg = torch.Generator().manual_seed(11), st.Generator().manual_seed(11)
    for name, args in [("log_normal_", (0.0, 1.0)), ("cauchy_", (0.0, 2.0)), ("geometric_", (0.4,))]:
        a = getattr(torch.empty(33), name)(*args, generator=tg)
        b = getattr(st.empty(33), name)(*args, generator=sg)
        assert_same(a, b)
    assert_same(torch.poisson(torch.full((9,), 20.0), generator=tg), st.poisson(st.full((9,), 20.0), generator=sg))
    assert_same(torch.binomial(torch.full((9,), 30.0), torch.full((9,), 0.4), generator=tg),
                st.binomial(st.full((9,), 30.0), st.full((9,), 0.4), generator=sg))
    assert_same(tg.get_state(), sg.get_state())


# ---- poisson --------------------------------------------------------------------------------------

# Both regimes (the product of uniforms below 10, transformed rejection from 10 on) and their edge.
RATES = [0.0, 1e-3, 0.5, 3.0, 9.999, 10.0, 12.5, 40.0, 1e3, 1e6]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_poisson(seed, dtype):
    rates = np.tile(np.array(RATES), 20)
    both(seed, lambda m: m.poisson(m.tensor(rates, dtype=dt(m, dtype))))
    both(seed, lambda m: m.poisson(m.tensor(rates, dtype=dt(m, dtype)).reshape(10, 20).t()))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_poisson_16_bit(dtype):
    both(4, lambda m: m.poisson(m.tensor([0.5, 3.0, 15.0, 200.0] * 5, dtype=dt(m, dtype))).float())


def test_poisson_many_large_rates():
    # Enough rejection-path draws that the rarely taken branches of the acceptance test run.
    rng = np.random.RandomState(0)
    rates = np.concatenate([rng.uniform(10, 30, 3000), rng.uniform(0, 10, 1000)])
    both(8, lambda m: m.poisson(m.tensor(rates)), repeat=1)


# ---- binomial -------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_binomial(seed, dtype):
    # Inversion (count * p < 10) and BTRS (>= 10), p on both sides of 1/2, the edge cases 0 and 1.
    counts = np.array([0.0, 1.0, 5.0, 20.0, 100.0, 1000.0, 50.0, 7.0, 3.0, 1e5, 40.0, 25.0])
    probs = np.array([0.3, 0.5, 0.2, 0.7, 0.01, 0.99, 1.0, 0.0, 0.5, 0.37, 0.25, 0.5])
    c, p = np.tile(counts, 15), np.tile(probs, 15)
    both(seed, lambda m: m.binomial(m.tensor(c, dtype=dt(m, dtype)), m.tensor(p, dtype=dt(m, dtype))))


def test_binomial_random_parameters():
    rng = np.random.RandomState(1)
    c = np.floor(rng.uniform(0, 200, 2000))
    p = rng.uniform(0, 1, 2000)
    for dtype in ["float32", "float64"]:
        both(9, lambda m: m.binomial(m.tensor(c, dtype=dt(m, dtype)), m.tensor(p, dtype=dt(m, dtype))), repeat=1)


@pytest.mark.filterwarnings("ignore:An output with one or more elements was resized")
def test_binomial_broadcasts():
    both(6, lambda m: m.binomial(m.tensor([[10.0], [40.0]]), m.tensor([0.2, 0.5, 0.9])))
    both(6, lambda m: m.binomial(m.tensor([15.0, 60.0]), m.tensor(0.5)))


def test_binomial_nan_probability_gives_nan():
    a = st.binomial(st.tensor([5.0, 5.0]), st.tensor([float("nan"), 0.5]))
    assert np.isnan(a[0].item()) and 0 <= a[1].item() <= 5


# ---- meta, empty, errors --------------------------------------------------------------------------

def test_meta_and_empty():
    for name, args in [("log_normal_", ()), ("cauchy_", ()), ("geometric_", (0.5,))]:
        m = getattr(st.empty(3, 4, device="meta"), name)(*args)
        assert m.device.type == "meta" and m.shape == (3, 4)
        assert getattr(st.empty(0), name)(*args).shape == (0,)
    assert st.poisson(st.empty(2, 3, device="meta")).shape == (2, 3)
    assert st.binomial(st.empty(2, 1, device="meta"), st.empty(3, device="meta")).shape == (2, 3)
    state = st.get_rng_state()
    assert st.poisson(st.empty(0)).shape == (0,)
    assert st.equal(state, st.get_rng_state())


@pytest.mark.parametrize("call, exc, match", [
    (lambda m: m.empty(3).log_normal_(1, 0), RuntimeError, "log_normal_ expects std > 0.0"),
    (lambda m: m.empty(3).log_normal_(1, -2), RuntimeError, "log_normal_ expects std > 0.0"),
    (lambda m: m.empty(3, dtype=m.int64).log_normal_(), NotImplementedError, "log_normal_cpu"),
    (lambda m: m.empty(3).cauchy_(0, 0), RuntimeError, "cauchy_ expects sigma > 0.0"),
    (lambda m: m.empty(3, dtype=m.int64).cauchy_(), RuntimeError, "dtype must be a floating point"),
    (lambda m: m.empty(3).geometric_(0), RuntimeError, r"geometric_ expects p to be in \(0, 1\)"),
    (lambda m: m.empty(3).geometric_(1), RuntimeError, r"geometric_ expects p to be in \(0, 1\)"),
    (lambda m: m.empty(3, dtype=m.bool).geometric_(0.5), NotImplementedError, "geometric_cpu"),
    (lambda m: m.empty(3).expand(2, 3).cauchy_(), RuntimeError, "more than one element"),
    (lambda m: m.poisson(m.tensor([1, 2])), NotImplementedError, "poisson_cpu"),
    (lambda m: m.poisson(m.tensor([1.0, -1.0])), RuntimeError, "invalid Poisson rate"),
    (lambda m: m.poisson(m.tensor([float("nan")])), RuntimeError, "invalid Poisson rate"),
    (lambda m: m.binomial(m.tensor([1, 2]), m.tensor([0.5, 0.5])), ValueError, "floating-point dtypes for count"),
    (lambda m: m.binomial(m.tensor([1.0, 2.0]), m.tensor([0.5, 0.5], dtype=m.float64)), RuntimeError,
     "Found dtype (Double|float64) but expected (Float|float32)"),
    (lambda m: m.binomial(m.tensor([1.0, 2.0]), m.tensor([0.5, 0.5, 0.5])), RuntimeError, "size"),
    (lambda m: m.binomial(m.tensor([1.0]).half(), m.tensor([0.5]).half()), NotImplementedError, "binomial_cpu"),
])
def test_errors_as_torch(call, exc, match):
    with pytest.raises(exc, match=match):
        call(torch)
    with pytest.raises(exc, match=match):
        call(st)


def test_binomial_non_finite_count_is_refused():
    # torch never returns here (its waiting-time loop cannot pass an infinite count).
    with pytest.raises(RuntimeError, match="count must be finite"):
        st.binomial(st.tensor([float("inf")]), st.tensor([0.5]))
    with pytest.raises(RuntimeError, match="count must be finite"):
        st.binomial(st.tensor([float("nan")]), st.tensor([0.3]))
    assert st.binomial(st.tensor([float("inf")]), st.tensor([0.0])).item() == 0


def test_poisson_gradient_is_zero():
    # A sample is piecewise constant in its rate: torch gives a zero gradient, not an error.
    for m in (torch, st):
        r = m.tensor([1.0, 20.0, 0.0], dtype=m.float64, requires_grad=True)
        y = m.poisson(r)
        assert y.requires_grad
        (y * 2).sum().backward()
        assert r.grad.tolist() == [0.0, 0.0, 0.0]
