"""View ops: results share memory and the version counter with their base,
geometry matches torch, and bad arguments raise torch's exception types."""

import numpy as np
import pytest

import strata as st


def arange(*shape, dtype=st.float32):
    n = int(np.prod(shape)) if shape else 1
    return st.tensor(np.arange(n, dtype=np.float64).reshape(shape), dtype=dtype)


VIEWS = [
    ("view", lambda x: x.view(4, 6)),
    ("view -1", lambda x: x.view(-1, 2)),
    ("reshape", lambda x: x.reshape(6, 4)),
    ("flatten", lambda x: x.flatten(1)),
    ("unflatten", lambda x: x.unflatten(2, (2, 2))),
    ("transpose", lambda x: x.transpose(0, 2)),
    ("swapaxes", lambda x: x.swapaxes(0, 1)),
    ("swapdims", lambda x: x.swapdims(1, 2)),
    ("permute", lambda x: x.permute(2, 0, 1)),
    ("movedim", lambda x: x.movedim(0, -1)),
    ("moveaxis", lambda x: st.moveaxis(x, (0, 1), (1, 0))),
    ("select", lambda x: x.select(1, -1)),
    ("narrow", lambda x: x.narrow(2, 1, 2)),
    ("slice", lambda x: x.slice(2, 1, None, 2)),
    ("expand", lambda x: x[:, :1].expand(2, 5, 4)),
    ("broadcast_to", lambda x: st.broadcast_to(x, (3, 2, 3, 4))),
    ("squeeze", lambda x: x[:, :1].squeeze(1)),
    ("unsqueeze", lambda x: x.unsqueeze(1)),
    ("as_strided", lambda x: x.as_strided((3, 3), (4, 1), 2)),
    ("diagonal", lambda x: x.diagonal(0, 1, 2)),
    ("unfold", lambda x: x.unfold(2, 2, 2)),
    ("alias", lambda x: st.alias(x)),
    ("view_as", lambda x: x.view_as(arange(24))),
    ("T", lambda x: x.T),
    ("mT", lambda x: x.mT),
    ("t", lambda x: x[0].t()),
    ("unbind", lambda x: x.unbind(1)[2]),
    ("getitem basic", lambda x: x[1, ::2, None, 1:]),
]


@pytest.mark.parametrize("name,fn", VIEWS, ids=[v[0] for v in VIEWS])
def test_views_share_storage_and_version(name, fn):
    x = arange(2, 3, 4)
    v = fn(x)
    assert v._storage_ptr() == x._storage_ptr(), name
    assert not v._is_same(x)
    # Writes through the view are visible in the base and bump the shared version
    # (not for views whose elements overlap: torch refuses to write those).
    if name in ("expand", "broadcast_to"):
        x.fill_(3.0)
        assert (v.numpy() == 3.0).all()
        return
    v0 = x._version
    before = x.numpy().copy()
    v.fill_(-7.0)
    assert x._version > v0
    assert v._version == x._version
    changed = x.numpy() != before
    assert changed.any()
    assert (x.numpy()[changed] == -7.0).all()
    # And the other way round: writes to the base show in the view.
    x.fill_(3.0)
    assert (v.numpy() == 3.0).all()


def test_reshape_copies_when_needed():
    x = arange(3, 4)
    y = x.t().reshape(12)
    assert y._storage_ptr() != x._storage_ptr()
    np.testing.assert_array_equal(y.numpy(), np.arange(12.0).reshape(3, 4).T.reshape(12))
    z = x.reshape(2, 6)
    assert z._storage_ptr() == x._storage_ptr()


def test_view_error_message_and_reshape_hint():
    x = arange(3, 4).t()
    with pytest.raises(RuntimeError, match=r"view size is not compatible.*Use \.reshape\(\.\.\.\) instead"):
        x.view(12)
    with pytest.raises(RuntimeError, match="invalid for input of size 12"):
        arange(3, 4).view(5, -1)


def test_select_and_slice_errors():
    x = arange(3, 4)
    with pytest.raises(IndexError, match="out of range"):
        x.select(0, 3)
    with pytest.raises(IndexError):
        x.select(2, 0)
    with pytest.raises(ValueError, match="step must be greater than zero"):
        x.slice(0, 0, 3, -1)
    with pytest.raises(ValueError):
        x.slice(0, 0, 3, 0)


def test_as_strided_bounds():
    x = arange(12)
    with pytest.raises(RuntimeError, match="out of bounds for storage"):
        x.as_strided((4, 4), (4, 1))
    with pytest.raises(RuntimeError, match="Negative strides"):
        x.as_strided((2,), (-1,), 4)
    # A view at offset 8 cannot reach past the end either.
    tail = x[8:]
    with pytest.raises(RuntimeError, match="out of bounds"):
        tail.as_strided((5,), (1,))
    np.testing.assert_array_equal(tail.as_strided((2, 2), (1, 1)).numpy(), [[8, 9], [9, 10]])


def test_expand_has_zero_strides_and_rejects_writes_by_index_put():
    x = arange(3, 1)
    e = x.expand(3, 4)
    assert e.stride() == (1, 0)
    with pytest.raises(RuntimeError, match="single memory location"):
        e.index_put_([st.tensor([0])], st.tensor(1.0))


def test_T_and_mT():
    x = arange(2, 3, 4)
    assert x.T.shape == (4, 3, 2)
    assert x.mT.shape == (2, 4, 3)
    np.testing.assert_array_equal(x.T.numpy(), x.numpy().T)
    with pytest.raises(RuntimeError, match="mT"):
        arange(3).mT
    assert arange(3).T.shape == (3,)


def test_inplace_view_methods():
    x = arange(2, 3)
    ptr = x._storage_ptr()
    assert x.transpose_(0, 1) is x
    assert x.shape == (3, 2) and x.stride() == (1, 3) and x._storage_ptr() == ptr
    x.t_()
    assert x.shape == (2, 3)
    x.unsqueeze_(0)
    assert x.shape == (1, 2, 3)
    x.squeeze_()
    assert x.shape == (2, 3)
    np.testing.assert_array_equal(x.numpy(), np.arange(6.0).reshape(2, 3))


def test_meta_views():
    x = arange(2, 3, 4).to("meta")
    assert x.view(6, 4).shape == (6, 4)
    assert x.transpose(0, 2).stride() == (1, 4, 12)
    assert x[0, :, None].shape == (3, 1, 4)
    assert x.expand(5, 2, 3, 4).device.type == "meta"
    with pytest.raises(RuntimeError):
        x.as_strided((100,), (1,))


def test_view_dtype():
    x = st.tensor([1.0, 2.0], dtype=st.float32)
    y = x.view(st.int32)
    assert y.dtype is st.int32 and y._storage_ptr() == x._storage_ptr()
    assert y.tolist() == list(np.array([1.0, 2.0], np.float32).view(np.int32))
    b = x.view(st.uint8)
    assert b.shape == (8,)
    assert x.view(st.float64).shape == (1,)
    with pytest.raises(RuntimeError, match="divisible"):
        st.tensor([1.0, 2.0, 3.0]).view(st.float64)


def test_flatten_returns_self_for_single_dim():
    x = arange(4)
    assert x.flatten()._is_same(x)


def test_slice_not_exported_over_builtin():
    ns = {}
    exec("from strata import *", ns)
    assert ns.get("slice", slice) is slice


class TestAgainstTorch:
    torch = pytest.importorskip("torch")

    @pytest.mark.parametrize("name,fn", VIEWS, ids=[v[0] for v in VIEWS])
    def test_geometry_matches_torch(self, name, fn):
        torch = self.torch
        if name in ("slice", "alias", "view_as"):
            pytest.skip("not a public torch method")
        x = arange(2, 3, 4)
        tx = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
        if name == "moveaxis":
            t = torch.moveaxis(tx, (0, 1), (1, 0))
        elif name == "broadcast_to":
            t = torch.broadcast_to(tx, (3, 2, 3, 4))
        else:
            t = fn(tx)
        v = fn(x)
        assert tuple(v.shape) == tuple(t.shape)
        assert tuple(v.stride()) == tuple(t.stride())
        assert v.storage_offset() == t.storage_offset()
        np.testing.assert_array_equal(v.numpy(), t.numpy())

    def test_error_types_match(self):
        torch = self.torch
        cases = [
            lambda m, x: x.select(0, 9),
            lambda m, x: x.view(7),
            lambda m, x: x.expand(5),
            lambda m, x: x.permute(0, 0, 1),
            lambda m, x: x.unsqueeze(4),
            lambda m, x: x.narrow(0, 0, 9),
            lambda m, x: x.diagonal(0, 1, 1),
            lambda m, x: x.unfold(0, 9, 1),
            lambda m, x: x.t(),
        ]
        for c in cases:
            with pytest.raises(Exception) as te:
                c(torch, torch.zeros(2, 3, 4))
            with pytest.raises(Exception) as se:
                c(st, st.tensor(np.zeros((2, 3, 4), np.float32)))
            assert issubclass(se.type, te.type) or issubclass(te.type, se.type), (se.value, te.value)


EDGE_CASES = [
    ((), lambda x: x.squeeze(0)), ((), lambda x: x.unsqueeze(-1)), ((), lambda x: x.flatten()), ((), lambda x: x.t()),
    ((3,), lambda x: x.t()), ((), lambda x: x.unfold(0, 1, 1)), ((4, 5), lambda x: x.diagonal(-2)),
    ((4, 5), lambda x: x.diagonal(9)), ((0, 3), lambda x: x.diagonal()),
    ((2, 3, 4), lambda x: x.movedim((-1, 0), (0, -1))), ((2, 3, 4), lambda x: x.flatten(0, 1)),
    ((2, 3, 4), lambda x: x.unflatten(-1, (2, -1))), ((2, 1, 4), lambda x: x.squeeze((0, 1))),
    ((2, 3, 4), lambda x: x.narrow(-1, -2, 2)), ((2, 3), lambda x: x.expand(4, -1, 3)),
    ((2, 1), lambda x: x.expand(2, 0)), ((5,), lambda x: x.unfold(0, 2, 3)),
    ((2, 3, 4), lambda x: x.transpose(0, 2).reshape(4, 6)), ((2, 3, 4), lambda x: x.transpose(0, 1).view(3, 2, 2, 2)),
    ((6,), lambda x: x.as_strided((2, 2), (1, 2), 1)), ((2, 3, 4), lambda x: x.unbind(-1)),
    ((2, 3), lambda x: x[:, None, ..., None, 1:]), ((2, 3, 4), lambda x: x[..., 1, None]),
    ((2, 3, 4), lambda x: x[1:, -1:, ::3]), ((2, 3, 4), lambda x: x.select(-1, -4)), ((3, 4), lambda x: x.mT),
    ((0,), lambda x: x.view(0, 5, 0)), ((4,), lambda x: x.view(2, 2).swapaxes(0, 1)),
    ((2, 3, 4), lambda x: x.diagonal(1, -1, 0)), ((3, 3), lambda x: x.view(-1, 1, 9)),
    ((2, 3, 4), lambda x: x.permute(-1, -2, -3)), ((4, 4), lambda x: x[1:3, 1:3].reshape(4)),
    ((4, 4), lambda x: x[::2].view(8)), ((4, 4), lambda x: x[:, ::2].view(8)), ((2, 3), lambda x: x.view(3, -1, 4)),
]


@pytest.mark.parametrize("case", range(len(EDGE_CASES)))
def test_edge_geometry_matches_torch(case):
    torch = pytest.importorskip("torch")
    shape, f = EDGE_CASES[case]
    a = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)

    def run(mod, x):
        try:
            r = f(x)
        except Exception as e:  # the same exception type is part of the contract
            return type(e).__name__
        rs = r if isinstance(r, (list, tuple)) else [r]
        return [(tuple(t.shape), tuple(t.stride()), t.storage_offset()) for t in rs]

    assert run(st, st.from_numpy(a.copy())) == run(torch, torch.from_numpy(a.copy()))
