"""Shape and index ops compared with PyTorch on the tricky cases: negative
dims, non-contiguous inputs, empty tensors, duplicate indices, sort stability
and NaN order, views returned by split/chunk, in-place variants."""

import numpy as np
import pytest

import strata as st

torch = pytest.importorskip("torch")


def S(t):
    """strata tensor from a torch tensor (same values, dtype, shape)."""
    return st.from_numpy(t.numpy().copy()) if t.dtype != torch.bfloat16 else st.tensor(t.float().numpy(), dtype=st.bfloat16)


def T(s):
    return torch.from_numpy(np.array(s.float().numpy() if s.dtype is st.bfloat16 else s.numpy()))


def same(s, t):
    assert tuple(s.shape) == tuple(t.shape), (s.shape, t.shape)
    assert str(s.dtype).split(".")[1] == str(t.dtype).split(".")[1], (s.dtype, t.dtype)
    np.testing.assert_array_equal(T(s).numpy(), t.float().numpy() if t.dtype == torch.bfloat16 else t.numpy())


def test_cat_negative_dim_noncontig_and_promotion():
    a = torch.randn(3, 4).t()  # non-contiguous (4, 3)
    b = torch.arange(8, dtype=torch.int32).reshape(4, 2)
    same(st.cat([st.from_numpy(a.numpy()), S(b)], dim=-1), torch.cat([a, b], dim=-1))
    e = torch.empty(0, dtype=torch.float64)
    same(st.cat([S(e), S(a)], 0), torch.cat([e, a], 0))  # legacy skip, but takes part in promotion


def test_cat_out_and_half():
    a, b = torch.randn(2, 3).half(), torch.randn(1, 3).half()
    same(st.cat((S(a), S(b))), torch.cat((a, b)))
    out = st.from_numpy(np.zeros(0, np.float16))
    r = st.cat([S(a), S(b)], out=out)
    assert r._is_same(out) and out.shape == (3, 3)
    same(out, torch.cat((a, b)))


def test_stack_dims():
    xs = [torch.randn(2, 3) for _ in range(3)]
    for d in (0, 1, 2, -1, -3):
        same(st.stack([S(x) for x in xs], d), torch.stack(xs, d))


def test_split_and_chunk_are_views():
    x = st.from_numpy(np.arange(12, dtype=np.float32).reshape(3, 4))
    parts = st.split(x, 2, dim=1)
    assert isinstance(parts, tuple) and len(parts) == 2
    assert all(p._storage_ptr() == x._storage_ptr() for p in parts)
    t = torch.arange(12.0).reshape(3, 4)
    for p, q in zip(x.split([1, 3], -1), t.split([1, 3], -1)):
        same(p, q)
    for p, q in zip(x.chunk(3, 1), t.chunk(3, 1)):
        same(p, q)
    assert len(st.chunk(st.from_numpy(np.zeros(5, np.float32)), 4)) == len(torch.chunk(torch.zeros(5), 4))


def test_flip_roll_noncontig():
    t = torch.randn(4, 5, 6).permute(2, 0, 1)
    s = st.from_numpy(t.numpy())
    same(st.flip(s, [0, -1]), torch.flip(t, [0, -1]))
    same(st.roll(s, 3), torch.roll(t, 3))
    same(st.roll(s, (1, -7), (0, 2)), torch.roll(t, (1, -7), (0, 2)))
    same(s.roll(2, -1), t.roll(2, -1))


def test_repeat_tile():
    t = torch.randn(2, 3)[:, ::2]
    s = st.from_numpy(t.numpy())
    same(s.repeat(2, 1, 3), t.repeat(2, 1, 3))
    same(st.tile(s, (3,)), torch.tile(t, (3,)))
    same(s.repeat(0, 2), t.repeat(0, 2))


def test_tril_triu_inplace():
    t = torch.randn(2, 4, 5)
    s = S(t)
    same(st.tril(s, -1), torch.tril(t, -1))
    same(s.triu(2), t.triu(2))
    r = s.tril_(1)
    assert r is s
    same(s, t.tril(1))


def test_gather_scatter_negative_dim():
    t = torch.randn(3, 4)
    idx = torch.tensor([[0, 3], [2, 2], [1, 0]])
    same(st.gather(S(t), -1, S(idx)), torch.gather(t, -1, idx))
    src = torch.randn(3, 2)
    same(S(t).scatter(-1, S(idx[:, :1]), S(src[:, :1])), t.scatter(-1, idx[:, :1], src[:, :1]))
    same(S(t).scatter(1, S(idx[:, :1]), 2.5), t.scatter(1, idx[:, :1], 2.5))


def test_scatter_add_duplicates_and_inplace():
    t = torch.zeros(3, 4, dtype=torch.float64)
    idx = torch.tensor([[0, 0, 0, 0], [0, 0, 0, 0], [2, 2, 1, 0]])
    src = torch.arange(12, dtype=torch.float64).reshape(3, 4)
    same(st.scatter_add(S(t), 0, S(idx), S(src)), torch.scatter_add(t, 0, idx, src))
    s = S(t)
    s.scatter_add_(0, S(idx), S(src))
    same(s, t.scatter_add(0, idx, src))


def test_index_select_index_add():
    t = torch.randn(4, 5).t()
    s = st.from_numpy(t.numpy())
    idx = torch.tensor([3, 0, 3])
    same(st.index_select(s, 1, S(idx)), torch.index_select(t, 1, idx))
    src = torch.randn(5, 3)
    same(s.index_add(1, S(idx), S(src), alpha=2.0), t.index_add(1, idx, src, alpha=2.0))
    ti = torch.zeros(4, dtype=torch.int64)
    same(S(ti).index_add(0, S(torch.tensor([1, 1])), S(torch.tensor([5, 6]))), ti.index_add(0, torch.tensor([1, 1]),
                                                                                             torch.tensor([5, 6])))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.int32, torch.int8, torch.bool,
                                   torch.float16])
def test_index_select_rows_like_torch(dtype):
    # Rows of 32+ bytes take the block-copy path (Note [Gather by rows]); narrow ones the element loop.
    g = torch.Generator().manual_seed(0)
    base = torch.randint(-100, 100, (50, 3, 40), generator=g).to(dtype)
    for idx_dtype in (torch.int64, torch.int32):
        idx = torch.randint(0, 50, (70,), generator=g).to(idx_dtype)
        # views taken on both sides, so strata's self is non-contiguous too
        for view in (lambda x: x, lambda x: x[:, 1], lambda x: x[::2, :, ::3], lambda x: x.transpose(0, 2),
                     lambda x: x.permute(1, 0, 2)):
            t, s = view(base), view(S(base))
            for dim in range(t.dim()):
                i = idx.remainder(t.size(dim)).to(idx_dtype)
                same(st.index_select(s, dim, S(i)), torch.index_select(t, dim, i))
                same(st.index_select(s, dim, S(i)[::2]), torch.index_select(t, dim, i[::2]))
    # empty index, empty rows, a 0-d index, a scalar self
    same(st.index_select(S(base), 0, S(torch.tensor([], dtype=torch.int64))),
         torch.index_select(base, 0, torch.tensor([], dtype=torch.int64)))
    same(st.index_select(S(base[:, :0]), 0, S(idx[:3].long())), torch.index_select(base[:, :0], 0, idx[:3].long()))
    same(st.index_select(S(base), 1, S(torch.tensor(2))), torch.index_select(base, 1, torch.tensor(2)))
    same(st.index_select(S(base[0, 0, 0]), 0, S(torch.tensor([0]))), torch.index_select(base[0, 0, 0], 0,
                                                                                          torch.tensor([0])))
    # out=, and bad indices on the row path
    out = st.empty(4, 3, 40, dtype=S(base).dtype)
    st.index_select(S(base), 0, S(torch.tensor([1, 0, 49, 1])), out=out)
    same(out, torch.index_select(base, 0, torch.tensor([1, 0, 49, 1])))
    for bad in (50, -1):
        with pytest.raises(IndexError, match="out of bounds"):
            st.index_select(S(base), 0, S(torch.tensor([0, bad])))


def test_take_along_dim():
    t = torch.randn(3, 4)
    idx = torch.argsort(t, dim=1)
    same(st.take_along_dim(S(t), S(idx), 1), torch.take_along_dim(t, idx, 1))
    same(st.take_along_dim(S(t), S(torch.tensor([0, 11]))), torch.take_along_dim(t, torch.tensor([0, 11])))


def test_nonzero_where_masked_select():
    t = torch.tensor([[0.0, 1.5, -0.0], [float("nan"), 0.0, 2.0]])
    same(st.nonzero(S(t)), torch.nonzero(t))
    for a, b in zip(st.nonzero(S(t), as_tuple=True), torch.nonzero(t, as_tuple=True)):
        same(a, b)
    for a, b in zip(st.where(S(t)), torch.where(t)):
        same(a, b)
    for a, b in zip(S(torch.tensor(3.0)).nonzero(as_tuple=True), torch.tensor(3.0).nonzero(as_tuple=True)):
        same(a, b)
    m = torch.tensor([True, False, True])
    same(st.masked_select(S(t), S(m)), torch.masked_select(t, m))
    same(st.nonzero(S(torch.zeros(0, 3))), torch.nonzero(torch.zeros(0, 3)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.int16, torch.uint8, torch.bool,
                                   torch.float16, torch.bfloat16])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_stability(dtype, descending):
    g = torch.Generator().manual_seed(0)
    t = torch.randint(0, 4, (5, 50), generator=g).to(dtype)
    v, i = st.sort(S(t), dim=-1, descending=descending, stable=True)
    tv, ti = torch.sort(t, dim=-1, descending=descending, stable=True)
    same(v, tv)
    same(i, ti)
    same(st.argsort(S(t), 0, descending, stable=True), torch.argsort(t, dim=0, descending=descending, stable=True))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_long_integer_lines_match_torch_stable(dtype, descending):
    # Lines of 256+ integers take the radix sort (Note [Radix sort of integer keys]).
    g = torch.Generator().manual_seed(1)
    if dtype == torch.bool:
        t = torch.randint(0, 2, (3, 700), generator=g).bool()
    else:
        info = torch.iinfo(dtype)
        wide = torch.randint(info.min, info.max, (3, 700), generator=g, dtype=torch.int64).to(dtype)
        few = torch.randint(max(info.min, -3), 4, (3, 700), generator=g, dtype=torch.int64).to(dtype)
        t = torch.cat([wide, few, torch.full((1, 700), info.max, dtype=dtype)], 0)
        t[0, :2] = info.min
    s = S(t)
    for sv, tv in [(s, t), (s.t(), t.t()), (s[:, ::3], t[:, ::3])]:
        for dim in (-1, 0):
            v, i = st.sort(sv, dim=dim, descending=descending, stable=True)
            rv, ri = torch.sort(tv, dim=dim, descending=descending, stable=True)
            same(v, rv)
            same(i, ri)
    flat = t.reshape(-1)
    for ri in (False, True):
        for rc in (False, True):
            a = st.unique(S(flat), return_inverse=ri, return_counts=rc)
            b = torch.unique(flat, return_inverse=ri, return_counts=rc)
            for x, y in zip(a, b) if isinstance(b, tuple) else [(a, b)]:
                same(x, y)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_long_float_lines_match_torch_stable(dtype, descending):
    # Lines of 256+ floats take the radix sort (Note [Radix sort of integer keys]): NaNs are the greatest and
    # keep their index order, -0.0 and 0.0 are equal and keep theirs, as in torch's stable sort.
    g = torch.Generator().manual_seed(3)
    t = torch.randn(4, 900, generator=g, dtype=torch.float64)
    t[1] = torch.randint(-3, 4, (900,), generator=g).double()  # many ties
    special = torch.tensor([float("nan"), -0.0, 0.0, float("inf"), -float("inf"), 1e-300, -1e-300, 5e-324, -5e-324])
    pick = torch.randint(0, len(special), (2, 900), generator=g)
    t[2:] = torch.where(torch.rand(2, 900, generator=g) < 0.5, special[pick], t[2:])
    t = t.to(dtype)
    s = S(t)
    for sv, tv in [(s, t), (s.t(), t.t()), (s[:, ::3], t[:, ::3])]:
        for dim in (-1, 0):
            v, i = st.sort(sv, dim=dim, descending=descending, stable=True)
            rv, ri = torch.sort(tv, dim=dim, descending=descending, stable=True)
            same(v, rv)
            same(i, ri)
            zero = rv.float().numpy() == 0  # -0.0 and 0.0 keep their index order
            np.testing.assert_array_equal(np.signbit(T(v).numpy()[zero]), np.signbit(rv.float().numpy()[zero]))
            same(st.argsort(sv, dim, descending, stable=True), torch.argsort(tv, dim=dim, descending=descending,
                                                                            stable=True))
    flat = t[2:].reshape(-1)
    same(st.unique(S(flat)), torch.unique(flat))
    # Which NaN's group each NaN's inverse names depends on torch's internal (unstable) sort: compared without NaNs.
    flat = flat[~flat.isnan()]
    for ri in (False, True):
        for rc in (False, True):
            a = st.unique(S(flat), return_inverse=ri, return_counts=rc)
            b = torch.unique(flat, return_inverse=ri, return_counts=rc)
            for x, y in zip(a, b) if isinstance(b, tuple) else [(a, b)]:
                same(x, y)


def test_sort_nan_and_named_tuple():
    t = torch.tensor([3.0, float("nan"), -1.0, float("inf"), float("nan"), -float("inf"), 0.0])
    for desc in (False, True):
        r = st.sort(S(t), descending=desc)
        tr = torch.sort(t, descending=desc, stable=True)
        same(r.values, tr.values)
        same(r.indices, tr.indices)


def test_topk():
    t = torch.randperm(60).float().reshape(6, 10) / 7
    for k, d, largest in [(3, -1, True), (2, 0, False), (10, 1, True), (0, 1, True)]:
        r = st.topk(S(t), k, d, largest)
        tr = torch.topk(t, k, d, largest)
        same(r.values, tr.values)
        same(r.indices, tr.indices)
    tn = torch.tensor([1.0, float("nan"), 5.0])
    same(st.topk(S(tn), 2).values, torch.topk(tn, 2).values)


def test_large_inputs_use_threads_consistently():
    g = torch.Generator().manual_seed(1)
    t = torch.randn(300, 1000, generator=g)
    idx = torch.randint(0, 300, (300, 1000), generator=g)
    same(st.gather(S(t), 0, S(idx)), torch.gather(t, 0, idx))
    same(st.scatter_add(S(torch.zeros(300, 1000, dtype=torch.float64)), 0, S(idx), S(t.double())),
         torch.scatter_add(torch.zeros(300, 1000, dtype=torch.float64), 0, idx, t.double()))
    same(st.nonzero(S(t > 0)), torch.nonzero(t > 0))
    same(st.masked_select(S(t), S(t > 1)), torch.masked_select(t, t > 1))
    v, i = st.sort(S(t), 0)
    tv, ti = torch.sort(t, dim=0, stable=True)
    same(v, tv)
    same(i, ti)
    same(st.tril(S(t), 3), torch.tril(t, 3))
    same(st.flip(S(t), [0, 1]), torch.flip(t, [0, 1]))
    same(st.cat([S(t), S(t)], 1), torch.cat([t, t], 1))


def test_meta_shapes():
    m = st.from_numpy(np.zeros((2, 3), np.float32)).to("meta")
    assert st.cat([m, m], 1).shape == (2, 6)
    assert st.sort(m, 0).indices.dtype is st.int64
    assert st.topk(m, 2).values.shape == (2, 2)
    assert st.gather(m, 1, st.from_numpy(np.zeros((2, 5), np.int64)).to("meta")).shape == (2, 5)
    with pytest.raises(NotImplementedError):
        st.nonzero(m)


def test_errors_are_typed():
    x = st.from_numpy(np.zeros((2, 3), np.float32))
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 1 with size 3"):
        st.gather(x, 1, st.from_numpy(np.array([[3]])))
    with pytest.raises(IndexError, match="Dimension out of range"):
        st.flip(x, [2])
    with pytest.raises(RuntimeError, match=r"\[2, 3\].*\[3, 2\]"):
        st.stack([x, st.from_numpy(np.zeros((3, 2), np.float32))])
    # A bad index is reported (after the loop) without writing out of bounds.
    with pytest.raises(IndexError):
        x.scatter_(1, st.from_numpy(np.array([[0, 100]])), 1.0)
