"""Random ops: determinism, generators, thread-count independence, moments, bounds."""

import math

import numpy as np
import pytest

import strata as st


@pytest.fixture(autouse=True)
def _restore_rng():
    state = st.get_rng_state()
    yield
    st.set_rng_state(state)


def test_manual_seed_reproduces():
    st.manual_seed(0)
    a = st.rand(100)
    b = st.randn(3, 4)
    st.manual_seed(0)
    np.testing.assert_array_equal(a.numpy(), st.rand(100).numpy())
    np.testing.assert_array_equal(b.numpy(), st.randn(3, 4).numpy())
    st.manual_seed(1)
    assert not np.array_equal(a.numpy(), st.rand(100).numpy())


def test_consecutive_calls_differ():
    st.manual_seed(3)
    assert not np.array_equal(st.rand(50).numpy(), st.rand(50).numpy())


def test_initial_seed_and_seed():
    st.manual_seed(1234)
    assert st.initial_seed() == 1234
    st.manual_seed(-1)  # like torch: negative seeds wrap to uint64
    assert st.initial_seed() == 2**64 - 1
    s = st.seed()
    assert st.initial_seed() == s and 0 <= s < 2**63
    with pytest.raises(RuntimeError):
        st.manual_seed(2**64)
    with pytest.raises(TypeError):
        st.manual_seed(1.5)
    assert st.manual_seed(5) is st.default_generator


def test_rng_state_roundtrip():
    st.manual_seed(7)
    st.rand(10)
    state = st.get_rng_state()
    # torch's CPU layout: initial seed, left, seeded, next, the 624 words, ...
    assert state.dtype is st.uint8 and tuple(state.shape) == (5056,)
    a = st.randn(20)
    st.set_rng_state(state)
    np.testing.assert_array_equal(a.numpy(), st.randn(20).numpy())
    raw = bytes(state.tolist())
    assert int.from_bytes(raw[:8], "little") == 7
    # 10 draws since seeding: next = 10, left = 625 - 10.
    assert int.from_bytes(raw[8:12], "little") == 615 and int.from_bytes(raw[16:24], "little") == 10
    with pytest.raises(TypeError):
        st.set_rng_state(st.zeros(5056))
    with pytest.raises(RuntimeError, match="size"):
        st.set_rng_state(st.zeros(16, dtype=st.uint8))
    bad = st.zeros(5056, dtype=st.uint8)  # left = 0: no valid position in the stream
    with pytest.raises(RuntimeError, match="corrupted"):
        st.set_rng_state(bad)
    # A failed set leaves the generator as it was.
    st.set_rng_state(state)
    with pytest.raises(RuntimeError):
        st.set_rng_state(bad)
    np.testing.assert_array_equal(a.numpy(), st.randn(20).numpy())


def test_generator_objects_are_independent():
    g1 = st.Generator().manual_seed(42)
    g2 = st.Generator().manual_seed(42)
    st.manual_seed(0)
    a = st.rand(10, generator=g1)
    st.rand(100)  # the default generator does not touch g1/g2
    b = st.rand(10, generator=g2)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert g1.initial_seed() == 42
    s = g1.get_state()
    x = st.randn(5, generator=g1)
    g1.set_state(s)
    np.testing.assert_array_equal(x.numpy(), st.randn(5, generator=g1).numpy())
    # A generator seeded like the default one gives the same numbers.
    st.manual_seed(9)
    g3 = st.Generator().manual_seed(9)
    np.testing.assert_array_equal(st.rand(8).numpy(), st.rand(8, generator=g3).numpy())
    with pytest.raises(TypeError):
        st.rand(2, generator=5)


def test_generator_keyword_everywhere():
    def run(g):
        x = st.empty(50)
        return [
            st.rand(5, generator=g), st.randn(5, generator=g), st.randint(0, 9, (5,), generator=g),
            st.randperm(7, generator=g), st.normal(0.0, 1.0, (5,), generator=g),
            st.normal(st.zeros(5), st.ones(5), generator=g), st.bernoulli(st.full((5,), 0.5), generator=g),
            st.multinomial(st.ones(6), 3, generator=g), x.uniform_(generator=g).clone(),
            x.normal_(generator=g).clone(), x.exponential_(generator=g).clone(), x.bernoulli_(0.3, generator=g).clone(),
            x.random_(0, 10, generator=g).clone(), st.rand_like(x, generator=g),
        ]

    a = run(st.Generator().manual_seed(11))
    b = run(st.Generator().manual_seed(11))
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u.numpy(), v.numpy())


@pytest.mark.parametrize("make", [
    lambda: st.rand(200_003),
    lambda: st.randn(200_003, dtype=st.float64),
    lambda: st.randint(-100, 100, (200_003,)),
    lambda: st.empty(200_003).uniform_(-2, 3),
    lambda: st.empty(200_003, dtype=st.float16).normal_(1, 2),
    lambda: st.empty(200_003).exponential_(2.0),
    lambda: st.empty(200_003).bernoulli_(0.25),
    lambda: st.bernoulli(st.full((200_003,), 0.7)),
    lambda: st.randperm(100_000),
])
def test_independent_of_thread_count(make):
    saved = st.get_num_threads()
    try:
        st.set_num_threads(1)
        st.manual_seed(2024)
        one = make().numpy()
        st.set_num_threads(2)
        st.manual_seed(2024)
        two = make().numpy()
    finally:
        st.set_num_threads(saved)
    np.testing.assert_array_equal(one, two)


def test_noncontiguous_inplace_fill_follows_memory_order():
    # As torch: elements are drawn in the order of the output's strides.
    base = np.zeros((6, 4), np.float32)
    view = st.from_numpy(base.T)  # shares memory, transposed strides
    assert not view.is_contiguous()
    st.manual_seed(5)
    view.uniform_()
    st.manual_seed(5)
    np.testing.assert_array_equal(base, st.rand(6, 4).numpy())
    # A strided slice keeps the logical order.
    big = st.zeros(4, 10)
    st.manual_seed(5)
    big[:, ::2].uniform_()
    st.manual_seed(5)
    np.testing.assert_array_equal(big[:, ::2].numpy(), st.rand(4, 5).numpy())


N = 400_000


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_uniform_moments(dtype):
    st.manual_seed(0)
    x = st.rand(N, dtype=getattr(st, dtype)).float().numpy().astype(np.float64)
    assert x.min() >= 0 and x.max() < 1
    assert abs(x.mean() - 0.5) < 0.005
    assert abs(x.var() - 1 / 12) < 0.005
    y = st.empty(N, dtype=getattr(st, dtype)).uniform_(-3, 5).float().numpy()
    assert y.min() >= -3 and y.max() <= 5 and abs(y.mean() - 1) < 0.05


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_normal_moments(dtype):
    st.manual_seed(1)
    x = st.randn(N, dtype=getattr(st, dtype)).float().numpy().astype(np.float64)
    assert abs(x.mean()) < 0.01
    assert abs(x.std() - 1) < 0.01
    assert abs(np.mean(x ** 3)) < 0.03  # skewness
    assert abs(np.mean(x ** 4) - 3) < 0.1  # kurtosis
    assert np.abs(x).max() > 4  # tails are there
    y = st.normal(2.0, 3.0, (N,), dtype=getattr(st, dtype)).float().numpy()
    assert abs(y.mean() - 2) < 0.05 and abs(y.std() - 3) < 0.05


def test_normal_overloads():
    st.manual_seed(0)
    mean = st.tensor([0.0, 10.0, -10.0])
    std = st.tensor([1.0, 0.0, 2.0])
    r = st.normal(mean, std)
    assert r.dtype is st.float32 and tuple(r.shape) == (3,) and r.numpy()[1] == 10.0
    assert st.normal(mean, 0.0).numpy().tolist() == [0.0, 10.0, -10.0]
    r = st.normal(5.0, st.zeros(2, 3, dtype=st.float64))
    assert r.dtype is st.float64 and r.numpy().tolist() == [[5.0] * 3] * 2
    big = st.normal(st.full((N,), 3.0), st.full((N,), 0.5)).numpy()
    assert abs(big.mean() - 3) < 0.01 and abs(big.std() - 0.5) < 0.01
    with pytest.raises(RuntimeError, match="std >= 0"):
        st.normal(mean, st.tensor([1.0, -1.0, 1.0]))
    with pytest.raises(RuntimeError, match="std >= 0"):
        st.randn(3).normal_(0, -1)
    with pytest.raises(TypeError):
        st.normal(0.0, 1.0)


def test_exponential_bernoulli_moments():
    st.manual_seed(2)
    e = st.empty(N, dtype=st.float64).exponential_(4.0).numpy()
    assert e.min() >= 0 and abs(e.mean() - 0.25) < 0.005
    b = st.empty(N).bernoulli_(0.3).numpy()
    assert set(np.unique(b)) <= {0.0, 1.0} and abs(b.mean() - 0.3) < 0.005
    probs = st.tensor(np.tile([0.0, 1.0, 0.5], N // 3).astype(np.float32))
    d = st.bernoulli(probs).numpy().reshape(-1, 3)
    assert d[:, 0].sum() == 0 and d[:, 1].min() == 1 and abs(d[:, 2].mean() - 0.5) < 0.01
    assert st.bernoulli(st.full((4,), 0.5, dtype=st.float64)).dtype is st.float64
    ib = st.zeros(1000, dtype=st.int32).bernoulli_(0.5)
    assert ib.dtype is st.int32 and set(np.unique(ib.numpy())) == {0, 1}
    with pytest.raises(RuntimeError):
        st.bernoulli(st.tensor([1.5]))
    with pytest.raises(RuntimeError):
        st.empty(3).bernoulli_(2.0)
    with pytest.raises(RuntimeError, match="lambda"):
        st.empty(3).exponential_(0.0)


@pytest.mark.parametrize("dtype", ["int64", "int32", "int16", "int8", "uint8", "float32", "float64"])
def test_randint_bounds(dtype):
    st.manual_seed(4)
    lo, hi = (0, 200) if dtype == "uint8" else (-50, 77)
    x = st.randint(lo, hi, (N // 4,), dtype=getattr(st, dtype)).numpy()
    assert x.min() == lo and x.max() == hi - 1
    counts = np.bincount((x - lo).astype(np.int64), minlength=hi - lo)
    expected = len(x) / (hi - lo)
    assert np.all(np.abs(counts - expected) < 6 * math.sqrt(expected))  # roughly uniform
    assert st.randint(10, (3,)).dtype is st.int64
    y = st.randint(3, 10, size=(2, 2)).numpy()
    assert y.min() >= 3 and y.max() < 10


def test_randint_extreme_ranges():
    x = st.randint(-2**63, 2**63 - 1, (1000,)).numpy()
    assert (x < 0).any() and (x > 0).any()
    big = st.randint(0, 2**40, (1000,)).numpy()
    assert big.max() > 2**32 and big.min() >= 0


def test_random_():
    st.manual_seed(0)
    x = st.empty(10000, dtype=st.int8).random_()
    assert x.numpy().min() >= 0 and x.numpy().max() == 127
    y = st.empty(10000).random_(5)
    assert set(np.unique(y.numpy())) == {0, 1, 2, 3, 4}
    z = st.empty(10000, dtype=st.int64).random_(-3, 3)
    assert set(np.unique(z.numpy())) == set(range(-3, 3))
    f = st.empty(1000).random_()
    assert f.numpy().max() <= 2**24 and f.numpy().min() >= 0 and np.all(f.numpy() == np.round(f.numpy()))
    b = st.empty(1000, dtype=st.bool).random_()
    assert set(np.unique(b.numpy())) == {False, True}


@pytest.mark.parametrize("n", [0, 1, 2, 10, 1000])
def test_randperm_is_permutation(n):
    for dt in (st.int64, st.int32, st.float32):
        p = st.randperm(n, dtype=dt)
        assert p.dtype is dt
        assert sorted(p.numpy().tolist()) == list(range(n))
    if n == 1000:
        assert st.randperm(n).numpy().tolist() != list(range(n))
    with pytest.raises(RuntimeError, match="too large"):
        st.randperm(300, dtype=st.int8)


def test_multinomial():
    st.manual_seed(0)
    probs = st.tensor([0.1, 0.0, 0.6, 0.3])
    s = st.multinomial(probs, 20000, replacement=True).numpy()
    assert s.dtype == np.int64 and (s != 1).all()
    freq = np.bincount(s, minlength=4) / len(s)
    np.testing.assert_allclose(freq, [0.1, 0.0, 0.6, 0.3], atol=0.015)
    w = st.multinomial(probs, 3)
    assert sorted(w.numpy().tolist()) == [0, 2, 3]
    rows = st.multinomial(st.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 5.0]]), 2, True)
    assert rows.numpy().tolist() == [[0, 0], [2, 2]]
    perm = st.multinomial(st.ones(10), 10).numpy()
    assert sorted(perm.tolist()) == list(range(10))
    assert tuple(st.ones(2, 5).multinomial(3).shape) == (2, 3)
    # As torch: without replacement, zero-probability categories fill in last.
    assert sorted(st.multinomial(st.tensor([0.0, 1.0, 0.0]), 3).tolist()[1:]) == [0, 2]
    with pytest.raises(RuntimeError):
        st.multinomial(probs, 5)
    with pytest.raises(RuntimeError):
        st.multinomial(st.tensor([-1.0, 2.0]), 1)
    with pytest.raises(RuntimeError):
        st.multinomial(st.zeros(3), 1)
    with pytest.raises(RuntimeError):
        st.multinomial(st.ones(2, 2, 2), 1)
    m = st.multinomial(st.ones(3, 4, device="meta"), 2)
    assert m.device.type == "meta" and tuple(m.shape) == (3, 2) and m.dtype is st.int64


def test_fork_rng():
    st.manual_seed(0)
    with st.random.fork_rng():
        st.rand(100)
    after = st.rand(5)
    st.manual_seed(0)
    np.testing.assert_array_equal(after.numpy(), st.rand(5).numpy())


def test_random_zero_size_and_0d():
    st.manual_seed(0)
    s0 = st.get_rng_state()
    assert st.rand(0).numel() == 0 and st.randn(3, 0).numel() == 0
    np.testing.assert_array_equal(s0.numpy(), st.get_rng_state().numpy())  # nothing consumed
    x = st.rand(())
    assert x.dim() == 0 and 0 <= x.item() < 1
    assert st.randint(0, 1, ()).item() == 0


# ---- end-to-end known answers against a pure-Python mt19937 -------------------

class _MT:
    """The Mersenne Twister mt19937, seeded like torch (low 32 bits of the seed)."""

    def __init__(self, seed):
        self.s = [seed & 0xFFFFFFFF]
        for i in range(1, 624):
            p = self.s[-1]
            self.s.append((1812433253 * (p ^ (p >> 30)) + i) & 0xFFFFFFFF)
        self.i = 624

    def u32(self):
        if self.i == 624:
            s = self.s
            for k in range(624):
                y = (s[k] & 0x80000000) | (s[(k + 1) % 624] & 0x7FFFFFFF)
                s[k] = s[(k + 397) % 624] ^ (y >> 1) ^ (0x9908B0DF if y & 1 else 0)
            self.i = 0
        y = self.s[self.i]
        self.i += 1
        y ^= y >> 11
        y ^= (y << 7) & 0x9D2C5680
        y ^= (y << 15) & 0xEFC60000
        return y ^ (y >> 18)

    def u64(self):
        hi = self.u32()
        return (hi << 32) | self.u32()


def test_python_reference_mt19937_known_answer():
    # The C++ standard fixes the 10000th output of mt19937 seeded with 5489.
    mt = _MT(5489)
    for _ in range(9999):
        mt.u32()
    assert mt.u32() == 4123659995


def test_rand_and_randint_values_follow_the_documented_mapping():
    seed = 0x1234_5678_9ABC_DEF0
    st.manual_seed(seed)
    mt = _MT(seed)
    st.rand(9)
    for _ in range(9):
        mt.u32()
    # float32: the low 24 bits of one draw.
    x = st.rand(6).numpy()
    np.testing.assert_array_equal(x, np.array([(mt.u32() & 0xFFFFFF) * 2.0**-24 for _ in range(6)], np.float32))
    # float64: the low 53 bits of a 64-bit draw (two draws, the first the high word).
    d = st.rand(3, dtype=st.float64).numpy()
    np.testing.assert_array_equal(d, np.array([(mt.u64() & ((1 << 53) - 1)) * 2.0**-53 for _ in range(3)]))
    # randint: low + draw % range; a 32-bit draw for ranges below 2**28, 64 bits above.
    r = st.randint(-10, 90, (5,)).numpy()
    assert r.tolist() == [-10 + mt.u32() % 100 for _ in range(5)]
    r = st.randint(0, 1 << 30, (3,)).numpy()
    assert r.tolist() == [mt.u64() % (1 << 30) for _ in range(3)]
    # randperm: forward Fisher-Yates, position i swapping with i + draw % (n - i).
    p = st.randperm(7).tolist()
    ref = list(range(7))
    for i in range(6):
        z = i + mt.u32() % (7 - i)
        ref[i], ref[z] = ref[z], ref[i]
    assert p == ref
