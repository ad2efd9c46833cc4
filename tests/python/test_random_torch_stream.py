"""CPU random ops give torch's numbers: the same seed (or state) gives the same values as torch's
CPU generator for every sampling function, dtype, size and layout, whatever the thread count,
and generator states move between the two libraries."""

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


def _np(t):
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def assert_same(expected, actual):
    e, a = _np(expected), _np(actual)
    assert e.shape == a.shape and e.dtype == a.dtype, (e.shape, e.dtype, a.shape, a.dtype)
    np.testing.assert_array_equal(a, e)


def both(seed, fn, repeat=2):
    """fn(lib) under the same seed in torch and strata, `repeat` calls in a row (the second one
    continues the stream); also compares the generator states afterwards."""
    torch.manual_seed(seed)
    st.manual_seed(seed)
    for _ in range(repeat):
        assert_same(fn(torch), fn(st))
    assert_same(torch.get_rng_state(), st.get_rng_state())


def dt(lib, name):
    return getattr(lib, name)


# ---- factories ----------------------------------------------------------------------------------

SHAPES = [(), (1,), (5,), (15,), (16,), (17,), (3, 7), (64, 65), (100_003,)]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("fn", ["rand", "randn"])
def test_rand_randn(seed, shape, dtype, fn):
    both(seed, lambda m: getattr(m, fn)(shape, dtype=dt(m, dtype)))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("n", [5, 16, 20, 4097])
def test_rand_randn_16_bit(dtype, n):
    # Compared as float32 (numpy has no bfloat16); the conversion is exact.
    both(3, lambda m: m.rand(n, dtype=dt(m, dtype)).float())
    both(3, lambda m: m.randn(n, dtype=dt(m, dtype)).float())
    both(3, lambda m: m.empty(n, dtype=dt(m, dtype)).uniform_(-2, 3).float())


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_other_samplers_16_bit(dtype):
    w = np.random.RandomState(0).rand(3, 20)
    for fn in [lambda m, d: m.empty(40, dtype=d).exponential_(2.0),
               lambda m, d: m.bernoulli(m.tensor(w, dtype=d)),
               lambda m, d: m.multinomial(m.tensor(w, dtype=d), 30, True),
               lambda m, d: m.multinomial(m.tensor(w, dtype=d), 7, False),
               lambda m, d: m.empty(40, 3, dtype=d).t().normal_(),
               lambda m, d: m.randint(0, 100, (30,), dtype=d)]:
        both(0, lambda m: fn(m, dt(m, dtype)).float())


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dtype", ["int64", "int32", "int16", "int8", "uint8", "float64"])
def test_randint(seed, dtype):
    ranges = [(0, 2), (0, 10), (-5, 100)]
    if dtype in ("int64", "int32", "float64"):
        ranges += [(0, (1 << 28) - 1), (0, 1 << 28), (-(1 << 30), 1 << 30)]
    if dtype == "int64":
        ranges += [(-(1 << 40), 1 << 40), (0, 1 << 62)]
    for lo, hi in ranges:
        if dtype == "uint8" and lo < 0:
            continue
        both(seed, lambda m: m.randint(lo, hi, (7, 5), dtype=dt(m, dtype)))
    both(seed, lambda m: m.randint(3, (4,), dtype=dt(m, dtype)))


@pytest.mark.parametrize("dtype", ["int64", "int32", "int16", "uint8", "bool", "float32", "float64"])
def test_random_(dtype):
    both(1, lambda m: m.empty(33, dtype=dt(m, dtype)).random_())
    both(1, lambda m: m.empty(9, dtype=dt(m, dtype)).random_(2))
    if dtype != "bool":
        both(1, lambda m: m.empty(9, dtype=dt(m, dtype)).random_(3, 100))


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("n", [0, 1, 2, 10, 1000, 100_000])
def test_randperm(seed, n):
    both(seed, lambda m: m.randperm(n))
    both(seed, lambda m: m.randperm(n, dtype=m.int32))
    if n <= 1000:
        both(seed, lambda m: m.randperm(n, dtype=m.float32))


# ---- in-place fills, layouts --------------------------------------------------------------------

@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(5,), (40,), (3, 7), (128, 65)])
def test_uniform_normal_exponential_inplace(seed, dtype, shape):
    both(seed, lambda m: m.empty(*shape, dtype=dt(m, dtype)).uniform_(-0.3, 1.7))
    both(seed, lambda m: m.empty(*shape, dtype=dt(m, dtype)).normal_(0.5, 2.5))
    both(seed, lambda m: m.empty(*shape, dtype=dt(m, dtype)).exponential_(1.5))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("make", [
    lambda m, d: m.empty(7, 9, dtype=d).t(),                   # transposed: drawn in memory order
    lambda m, d: m.empty(4, 40, dtype=d)[:, ::3],              # strided slice: logical order
    lambda m, d: m.empty(2, 3, 8, 5, dtype=d).permute(0, 2, 3, 1),  # channels-last-like
    lambda m, d: m.empty(5, 1, 6, dtype=d).transpose(0, 2),
])
def test_noncontiguous_outputs(dtype, make):
    for seed in SEEDS:
        both(seed, lambda m: make(m, dt(m, dtype)).uniform_(-1, 1))
        both(seed, lambda m: make(m, dt(m, dtype)).normal_(1, 3))
        both(seed, lambda m: make(m, dt(m, dtype)).random_(0, 1000))
        both(seed, lambda m: make(m, dt(m, dtype)).bernoulli_(m.full((), 0.4, dtype=m.float32)))


@pytest.mark.parametrize("fill", [lambda t: t.uniform_(), lambda t: t.normal_(), lambda t: t.bernoulli_(0.5),
                                  lambda t: t.bernoulli_(t.new_full((5,), 0.5)), lambda t: t.random_(0, 3)])
def test_expanded_output_is_refused(fill):
    for m in (torch, st):
        with pytest.raises(RuntimeError, match="single memory location"):
            fill(m.zeros(1).expand(5))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(5,), (40,), (3, 7)])
def test_normal_overloads(dtype, shape):
    both(2, lambda m: m.normal(m.ones(*shape, dtype=dt(m, dtype)), 0.7))
    both(2, lambda m: m.normal(m.ones(*shape, dtype=dt(m, dtype)), m.full(shape, 0.7, dtype=dt(m, dtype))))
    both(2, lambda m: m.normal(-1.0, m.full(shape, 0.7, dtype=dt(m, dtype))))
    both(2, lambda m: m.normal(0.2, 0.7, shape, dtype=dt(m, dtype)))
    both(2, lambda m: m.randn_like(m.empty(*shape, dtype=dt(m, dtype))))
    both(2, lambda m: m.rand_like(m.empty(*shape[::-1], dtype=dt(m, dtype)).t()))
    both(2, lambda m: m.randint_like(m.empty(*shape, dtype=dt(m, dtype)), 3, 9))


# ---- bernoulli, multinomial, dropout ------------------------------------------------------------

@pytest.mark.parametrize("pdtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(5,), (40,), (33, 17)])
def test_bernoulli_tensor_p(pdtype, shape):
    probs = np.random.RandomState(0).rand(*shape)
    for seed in SEEDS:
        both(seed, lambda m: m.bernoulli(m.tensor(probs, dtype=dt(m, pdtype))))
        both(seed, lambda m: m.zeros(*shape, dtype=m.float64).bernoulli_(m.tensor(probs, dtype=dt(m, pdtype))))
        both(seed, lambda m: m.zeros(*shape, dtype=m.int64).bernoulli_(m.tensor(probs, dtype=dt(m, pdtype))))
    # Broadcast probability, non-contiguous probabilities.
    both(1, lambda m: m.zeros(6, 4).bernoulli_(m.tensor([0.1, 0.5, 0.9, 1.0], dtype=dt(m, pdtype))))
    both(1, lambda m: m.bernoulli(m.tensor(probs, dtype=dt(m, pdtype)).t()))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "bool", "uint8"])
@pytest.mark.parametrize("shape", [(5,), (40,), (33, 17)])
def test_bernoulli_scalar_p(dtype, shape):
    for seed in SEEDS:
        both(seed, lambda m: m.empty(*shape, dtype=dt(m, dtype)).bernoulli_(0.3))
        both(seed, lambda m: m.bernoulli(m.zeros(*shape), 0.75))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("k,replacement", [(1, False), (5, False), (30, False), (1, True), (7, True), (50, True)])
def test_multinomial(dtype, k, replacement):
    w = np.random.RandomState(0).rand(4, 30) ** 3
    for seed in SEEDS:
        both(seed, lambda m: m.multinomial(m.tensor(w, dtype=dt(m, dtype)), k, replacement))
        both(seed, lambda m: m.multinomial(m.tensor(w[0], dtype=dt(m, dtype)), k, replacement))
    # Zero-probability categories are never drawn while others remain; past that, torch's
    # order among them is its topk's order for ties, so compare those as a set.
    w[1, ::3] = 0
    torch.manual_seed(1)
    st.manual_seed(1)
    a = torch.multinomial(torch.tensor(w, dtype=dt(torch, dtype)), k, replacement).numpy()
    b = st.multinomial(st.tensor(w, dtype=dt(st, dtype)), k, replacement).numpy()
    head = min(k, 20)
    np.testing.assert_array_equal(b[:, :head], a[:, :head])
    assert (np.sort(b, axis=1) == np.sort(a, axis=1)).all()


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dropout(p, dtype):
    x = np.random.RandomState(1).randn(64, 33)
    for seed in SEEDS:
        both(seed, lambda m: m.nn.functional.dropout(m.tensor(x, dtype=dt(m, dtype)), p))
        both(seed, lambda m: m.nn.Dropout(p)(m.tensor(x, dtype=dt(m, dtype)).t()))
        both(seed, lambda m: m.nn.functional.dropout(m.tensor(x[0, :5], dtype=dt(m, dtype)), p, inplace=True))


# ---- nn.init and module construction ------------------------------------------------------------

INITS = {
    "uniform_": lambda i, t: i.uniform_(t, -0.5, 2.0),
    "normal_": lambda i, t: i.normal_(t, 0.3, 1.5),
    "kaiming_uniform_": lambda i, t: i.kaiming_uniform_(t, a=5 ** 0.5),
    "kaiming_normal_": lambda i, t: i.kaiming_normal_(t, mode="fan_out", nonlinearity="relu"),
    "xavier_uniform_": lambda i, t: i.xavier_uniform_(t, gain=2.0),
    "xavier_normal_": lambda i, t: i.xavier_normal_(t),
    "trunc_normal_": lambda i, t: i.trunc_normal_(t, 0.1, 0.5, -0.6, 0.9),
    "trunc_normal_narrow": lambda i, t: i.trunc_normal_(t, 0.0, 1.0, 1.5, 3.0),
    "trunc_normal_vit": lambda i, t: i.trunc_normal_(t, std=0.02),
}


@pytest.mark.parametrize("name", sorted(INITS))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(4, 3), (33, 17), (8, 3, 3, 3)])
def test_nn_init(name, dtype, shape):
    fn = INITS[name]
    for seed in SEEDS[:2]:
        both(seed, lambda m: fn(m.nn.init, m.empty(*shape, dtype=dt(m, dtype))), repeat=1)


def test_module_construction():
    def build(m):
        return [m.nn.Linear(20, 7), m.nn.Conv2d(3, 5, 3), m.nn.Embedding(10, 4), m.nn.Linear(3, 2, bias=False)]

    for seed in SEEDS:
        torch.manual_seed(seed)
        st.manual_seed(seed)
        for a, b in zip(build(torch), build(st)):
            for (na, pa), (nb, pb) in zip(a.named_parameters(), b.named_parameters()):
                assert na == nb
                assert_same(pa, pb)


# ---- data loading ---------------------------------------------------------------------------------

def test_dataloader_shuffle_and_random_split():
    def run(m):
        m.manual_seed(0)
        ds = m.utils.data.TensorDataset(m.arange(10))
        out = [[b[0].tolist() for b in m.utils.data.DataLoader(ds, batch_size=4, shuffle=True)] for _ in range(2)]
        g = m.Generator().manual_seed(3)
        out.append([[b[0].tolist() for b in m.utils.data.DataLoader(ds, batch_size=3, shuffle=True, generator=g)]])
        sampler = m.utils.data.RandomSampler(range(7), replacement=True, num_samples=40)
        out.append(list(sampler))
        out.append(m.utils.data.random_split(range(10), [3, 7], generator=m.Generator().manual_seed(3))[0].indices)
        out.append(m.rand(3).tolist())  # the global stream continues identically
        return out

    assert run(st) == run(torch)


# ---- generator state -----------------------------------------------------------------------------

def test_state_layout_and_round_trip_from_torch():
    torch.manual_seed(11)
    torch.randn(3, dtype=torch.float64)  # leaves a cached second normal sample in the state
    torch.rand(700)  # past one regeneration of the 624 words
    state = torch.get_rng_state()
    st.set_rng_state(st.tensor(state.numpy()))
    assert_same(state, st.get_rng_state())
    for fn in [lambda m: m.randn(5), lambda m: m.rand(3, dtype=m.float64), lambda m: m.randn(40),
               lambda m: m.randint(0, 1000, (9,)), lambda m: m.randperm(20)]:
        assert_same(fn(torch), fn(st))
    assert_same(torch.get_rng_state(), st.get_rng_state())


def test_state_round_trip_to_torch():
    st.manual_seed(5)
    st.randn(3)
    st.rand(2000)
    torch.set_rng_state(torch.from_numpy(st.get_rng_state().numpy().copy()))
    for fn in [lambda m: m.randn(1), lambda m: m.randn(17, dtype=m.float64), lambda m: m.rand(4)]:
        assert_same(fn(torch), fn(st))


def test_fresh_process_default_state():
    # A new default generator starts from torch's default seed.
    assert st.Generator().initial_seed() == torch.Generator().initial_seed() == 67280421310721
    assert_same(torch.Generator().get_state(), st.Generator().get_state())


def test_state_errors():
    with pytest.raises(RuntimeError, match="5056"):
        st.set_rng_state(st.zeros(16, dtype=st.uint8))
    with pytest.raises(TypeError):
        st.set_rng_state(st.zeros(5056))
    state = st.get_rng_state()
    raw = state.numpy().copy()
    raw[16:24] = np.frombuffer(np.uint64(10_000).tobytes(), np.uint8)  # `next` past the 624 words
    with pytest.raises(RuntimeError, match="corrupted"):
        st.set_rng_state(st.tensor(raw))
    assert_same(state, st.get_rng_state())


def test_seed_values():
    for seed in [0, 1, 2**32 + 5, 2**63 - 1, -1]:
        assert st.manual_seed(seed).initial_seed() == torch.manual_seed(seed).initial_seed()
        assert_same(torch.rand(3), st.rand(3))


# ---- Generator objects ---------------------------------------------------------------------------

def test_generator_objects():
    tg, sg = torch.Generator(), st.Generator()
    assert tg.manual_seed(123) is tg and sg.manual_seed(123) is sg
    assert sg.initial_seed() == 123
    for fn in [lambda m, g: m.rand(5, generator=g), lambda m, g: m.randn(30, generator=g),
               lambda m, g: m.randint(0, 50, (6,), generator=g), lambda m, g: m.randperm(12, generator=g),
               lambda m, g: m.empty(8).normal_(2, 3, generator=g),
               lambda m, g: m.multinomial(m.tensor([0.2, 0.3, 0.5]), 2, generator=g),
               lambda m, g: m.bernoulli(m.full((9,), 0.5), generator=g)]:
        torch.manual_seed(0)
        st.manual_seed(0)
        assert_same(fn(torch, tg), fn(st, sg))
        # The default generator did not move.
        assert_same(torch.get_rng_state(), st.get_rng_state())
    state = tg.get_state()
    assert_same(state, sg.get_state())
    a = st.randn(7, generator=sg)
    sg.set_state(st.tensor(state.numpy()))
    assert_same(a, st.randn(7, generator=sg))
    sg.set_state(st.tensor(state.numpy()))
    assert_same(torch.randn(7, generator=tg), st.randn(7, generator=sg))


def test_generator_seed_and_offset():
    g = st.Generator()
    s = g.seed()
    assert g.initial_seed() == s
    t = torch.Generator().manual_seed(s)
    assert_same(torch.rand(4, generator=t), st.rand(4, generator=g))
    with pytest.raises(RuntimeError, match="offset"):
        g.get_offset()


def test_fork_rng_restores():
    st.manual_seed(3)
    torch.manual_seed(3)
    with st.random.fork_rng():
        st.rand(100)
    assert_same(torch.rand(5), st.rand(5))


# ---- thread count --------------------------------------------------------------------------------

@pytest.mark.parametrize("make", [
    lambda m: m.rand(300_001),
    lambda m: m.randn(300_001),
    lambda m: m.randn(300_001, dtype=m.float64),
    lambda m: m.randint(-5, 1000, (300_001,)),
    lambda m: m.bernoulli(m.full((200_003,), 0.3)),
    lambda m: m.empty(200_003, dtype=m.float64).exponential_(2.0),
    lambda m: m.empty(1001, 301).t().normal_(),
])
def test_independent_of_thread_count(make):
    saved = st.get_num_threads()
    try:
        results = []
        for threads in (1, 2, 4):
            st.set_num_threads(threads)
            st.manual_seed(9)
            results.append(make(st).numpy())
    finally:
        st.set_num_threads(saved)
    torch.manual_seed(9)
    expected = make(torch).numpy()
    for r in results:
        np.testing.assert_array_equal(r, expected)
