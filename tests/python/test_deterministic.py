"""strata.use_deterministic_algorithms: the switch is reported like torch's, index_put_ with repeated
indices takes a deterministic path (the last write in index order wins, whatever the thread count), and
ops torch lists as having no deterministic implementation raise its error naming the op (or warn with
warn_only=True). Compared with torch in the same mode."""

import warnings

import pytest
import torch

import strata


@pytest.fixture
def deterministic():
    strata.use_deterministic_algorithms(True)
    torch.use_deterministic_algorithms(True)
    threads = strata.get_num_threads()
    yield
    strata.use_deterministic_algorithms(False)
    torch.use_deterministic_algorithms(False)
    strata.set_num_threads(threads)


def test_flags_round_trip():
    assert not strata.are_deterministic_algorithms_enabled()
    strata.use_deterministic_algorithms(True, warn_only=True)
    try:
        assert strata.are_deterministic_algorithms_enabled()
        assert strata.is_deterministic_algorithms_warn_only_enabled()
    finally:
        strata.use_deterministic_algorithms(False)
    assert not strata.is_deterministic_algorithms_warn_only_enabled()
    assert strata.backends.mkldnn.deterministic is torch.backends.mkldnn.deterministic is False
    with pytest.raises(TypeError, match="mode"):
        strata.use_deterministic_algorithms(1)


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_index_put_with_duplicates_matches_torch(deterministic, threads):
    strata.set_num_threads(threads)
    n = 200_000
    idx = torch.randint(0, 50, (n,), generator=torch.Generator().manual_seed(0))
    vals = torch.arange(n, dtype=torch.float32)
    want = torch.zeros(50).index_put_((idx,), vals)
    got = strata.zeros(50).index_put_((strata.from_numpy(idx.numpy()),), strata.from_numpy(vals.numpy()))
    assert got.tolist() == want.tolist()
    # The same through indexing assignment, and over rows (one block per index).
    x = strata.zeros(50)
    x[strata.from_numpy(idx.numpy())] = strata.from_numpy(vals.numpy())
    assert x.tolist() == want.tolist()
    rows_t = torch.zeros(50, 3).index_put_((idx[:5000],), vals[:5000, None].expand(5000, 3).contiguous())
    rows_s = strata.zeros(50, 3).index_put_((strata.from_numpy(idx[:5000].numpy()),),
                                            strata.from_numpy(vals[:5000, None].expand(5000, 3).contiguous().numpy()))
    assert rows_s.tolist() == rows_t.tolist()


def test_accumulating_ops_agree_across_thread_counts(deterministic):
    # index_put_ with accumulate, index_add_, scatter_add_ and embedding's backward add duplicates in index order.
    g = torch.Generator().manual_seed(1)
    idx = torch.randint(0, 30, (50_000,), generator=g)
    src = torch.randn(50_000, 8, generator=g)
    results = []
    for threads in (1, 2, 4):
        strata.set_num_threads(threads)
        i, s = strata.from_numpy(idx.numpy()), strata.from_numpy(src.numpy())
        a = strata.zeros(30, 8).index_put_((i,), s, accumulate=True)
        b = strata.zeros(30, 8).index_add_(0, i, s)
        c = strata.zeros(30, 8).scatter_add_(0, i[:, None].expand(50_000, 8), s)
        w = strata.zeros(30, 8, requires_grad=True)
        strata.nn.functional.embedding(i, w).backward(s)
        results.append([t.tolist() for t in (a, b, c, w.grad)])
    assert results[0] == results[1] == results[2]


def test_put_without_accumulate_raises_like_torch(deterministic):
    for lib in (torch, strata):
        x = lib.zeros(5)
        with pytest.raises(RuntimeError, match="put_ does not have a deterministic implementation"):
            x.put_(lib.tensor([0, 0]), lib.tensor([1.0, 2.0]))
        x.put_(lib.tensor([0, 0]), lib.tensor([1.0, 2.0]), accumulate=True)
        assert x.tolist() == [3.0, 0.0, 0.0, 0.0, 0.0]


@pytest.mark.parametrize("k", [1, 2, 3])
def test_max_unpool_raises_like_torch(deterministic, k):
    shape = (1, 1) + (4,) * k
    errors = []
    for lib in (torch, strata):
        pool = getattr(lib.nn.functional, f"max_pool{k}d")
        unpool = getattr(lib.nn.functional, f"max_unpool{k}d")
        out, ind = pool(lib.ones(shape), 2, return_indices=True)
        with pytest.raises(RuntimeError, match="does not have a deterministic implementation") as info:
            unpool(out, ind, 2)
        errors.append(str(info.value).split(" ")[0])
    assert errors[0] == errors[1]


def test_warn_only_warns_and_runs():
    strata.use_deterministic_algorithms(True, warn_only=True)
    try:
        x = strata.zeros(5)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            x.put_(strata.tensor([1, 1]), strata.tensor([1.0, 2.0]))
        assert any("put_ does not have a deterministic implementation" in str(m.message) for m in w)
        assert x[1].item() in (1.0, 2.0)
    finally:
        strata.use_deterministic_algorithms(False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        strata.zeros(5).put_(strata.tensor([1, 1]), strata.tensor([1.0, 2.0]))  # off: nothing said
