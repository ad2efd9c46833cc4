"""Writes into memory an input still has to be read from (Note [Overlapping writes] in
src/ops/tensor_iterator.cpp): out= and in-place ops refuse a partial overlap with torch's error, and
allow the full aliasing that is safe. Each case is run through torch as well: both raise, or both
give the same values."""

import pytest
import torch

import strata

PARTIAL = "some elements of the input tensor and the written-to tensor refer to a single memory location"
INTERNAL = "more than one element of the written-to tensor refers to a single memory location"


def _cases(lib):
    def base():
        return lib.arange(12.0)

    return {
        "add out= shifted": lambda: lib.add((x := base())[:5], 1, out=x[1:6]),
        "add_ shifted view": lambda: (x := base())[1:].add_(x[:-1]),
        "mul out= overlapping second input": lambda: lib.mul((x := base())[:5], x[2:7], out=x[:5]),
        "add out= over the other input": lambda: lib.add((x := base())[:5], x[2:7], out=x[2:7]),
        "add_ transposed self": lambda: (y := lib.arange(9.0).reshape(3, 3)).add_(y.t()),
        "neg out= shifted": lambda: lib.neg((x := base())[:5], out=x[1:6]),
        "where out= shifted": lambda: lib.where((x := base())[:5] > 2, x[:5], x[1:6], out=x[1:6]),
        "copy_ shifted": lambda: (x := base())[1:].copy_(x[:-1]),
        "clamp_ expanded": lambda: lib.zeros(1).expand(3).clamp_(0, 1),
        "add_ expanded": lambda: lib.zeros(4).expand(3, 4).add_(1),
        # Allowed: full aliasing, disjoint halves of one storage, no inputs, layouts torch does not judge.
        "add_ self": lambda: (x := base()).add_(x),
        "exp out=self": lambda: lib.exp((x := base()), out=x),
        "mul_ same view": lambda: (x := base())[2:8].mul_(x[2:8]),
        "add out= disjoint halves": lambda: lib.add((x := base())[:6], x[:6], out=x[6:]),
        "fill_ expanded": lambda: lib.zeros(1).expand(3).fill_(2),
        "zero_ expanded": lambda: lib.ones(1).expand(3).zero_(),
        "every other element": lambda: (x := base())[::2].add_(x[1::2]),
        "add_ broadcast scalar view": lambda: (x := base())[1:].add_(x[0]),
    }


@pytest.mark.parametrize("name", list(_cases(strata)))
def test_overlap_like_torch(name):
    case_s, case_t = _cases(strata)[name], _cases(torch)[name]
    try:
        want = case_t()
    except RuntimeError as e:
        msg = PARTIAL if PARTIAL in str(e) else INTERNAL
        assert msg in str(e)
        with pytest.raises(RuntimeError, match=msg) as info:
            case_s()
        assert "Please clone() the tensor before performing the operation." in str(info.value)
        return
    got = case_s()
    assert got.tolist() == pytest.approx(want.tolist(), rel=1e-6)


def test_refused_write_leaves_the_output_untouched():
    x = strata.arange(6.0)
    with pytest.raises(RuntimeError, match=PARTIAL):
        x[1:].add_(x[:-1])
    assert x.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


def test_error_names_the_op():
    x = strata.arange(6.0)
    with pytest.raises(RuntimeError, match="^mul.*" + PARTIAL):
        strata.mul(x[:3], 2, out=x[1:4])


def test_overlap_check_with_autograd_and_out_dtype():
    # A cast into out= still checks the user's out tensor.
    x = strata.arange(6.0)
    with pytest.raises(RuntimeError, match=PARTIAL):
        strata.add(x[:3], strata.tensor([1, 2, 3]), out=x[1:4])
    w = strata.ones(4, requires_grad=True)
    y = w * 2
    with pytest.raises(RuntimeError, match=PARTIAL):
        y[1:].add_(y[:-1])


def _not_elementwise(lib):
    """out= of ops that are not elementwise: torch refuses any overlap with an input, full aliasing
    included (assert_no_overlap); before the check strata read a resized input (cat(out=input) corrupted
    the heap) or read elements it had already written (index_select)."""
    def base():
        return lib.arange(12.0)

    idx = lambda: lib.tensor([1, 0])  # noqa: E731
    return {
        "cat out=input": lambda: lib.cat([(a := lib.ones(2, 3)), a], out=a),
        "cat out=view of input": lambda: lib.cat([(a := lib.ones(2, 3))[:1], a[1:]], out=a),
        "cat out overlapping": lambda: lib.cat([(b := base())[:2], b[2:4]], out=b[2:6]),
        "cat out disjoint": lambda: lib.cat([(b := base())[:2], b[2:4]], out=b[6:10]),
        "stack out=input": lambda: lib.stack([(a := lib.ones(2, 3)), a], out=a),
        "index_select out=input": lambda: lib.index_select((a := base().reshape(3, 4)), 0, idx(), out=a[:2]),
        "gather out=input": lambda: lib.gather((a := lib.ones(2, 2)), 1, lib.tensor([[0, 1], [1, 0]]), out=a),
        "take out=input": lambda: lib.take((a := lib.ones(4)), lib.tensor([0, 1, 2, 3]), out=a),
        "masked_select out=input": lambda: lib.masked_select((a := base()), base() > 3, out=a),
        "kron out=input": lambda: lib.kron((a := lib.ones(2, 2)), a, out=a),
        "cross out=input": lambda: lib.linalg.cross((a := lib.arange(3.0)), lib.ones(3), out=a),
    }


@pytest.mark.parametrize("name", list(_not_elementwise(strata)))
def test_not_elementwise_out_overlap_like_torch(name):
    case_s, case_t = _not_elementwise(strata)[name], _not_elementwise(torch)[name]
    try:
        want = case_t()
    except RuntimeError as e:
        assert PARTIAL in str(e)
        with pytest.raises(RuntimeError, match=PARTIAL):
            case_s()
        return
    got = case_s()
    assert got.tolist() == pytest.approx(want.tolist(), rel=1e-6)


def test_matmul_out_aliasing_an_input_is_computed_right():
    """torch 2.13 lets mm/matmul/bmm/mv/addmm write into an input and returns wrong values; strata computes
    into a temporary and copies (OutSlot, src/ops/linalg.cpp): the result is the product of the inputs."""
    import numpy as np
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 3)).astype(np.float32), rng.standard_normal((3, 3)).astype(np.float32)
    x, y = strata.from_numpy(a.copy()), strata.from_numpy(b.copy())
    strata.matmul(x, y, out=y)
    np.testing.assert_allclose(y.numpy(), a @ b, rtol=1e-5)
    x, y = strata.from_numpy(a.copy()), strata.from_numpy(b.copy())
    strata.mm(x, y, out=x.t())
    np.testing.assert_allclose(x.numpy(), (a @ b).T, rtol=1e-5)
    x = strata.from_numpy(a.copy())
    strata.mm(x, x, out=x)
    np.testing.assert_allclose(x.numpy(), a @ a, rtol=1e-5)
    x3 = strata.from_numpy(np.stack([a, b]))
    strata.bmm(x3, x3, out=x3)
    np.testing.assert_allclose(x3.numpy(), np.stack([a @ a, b @ b]), rtol=1e-5)
    x, v = strata.from_numpy(a.copy()), strata.from_numpy(b[0].copy())
    strata.mv(x, v, out=v)
    np.testing.assert_allclose(v.numpy(), a @ b[0], rtol=1e-5)
    x, y = strata.from_numpy(a.copy()), strata.from_numpy(b.copy())
    strata.addmm(x, x, y, out=x)
    np.testing.assert_allclose(x.numpy(), a + a @ b, rtol=1e-5)


@pytest.mark.parametrize("fn", ["tril", "triu"])
@pytest.mark.parametrize("diagonal", [-1, 0, 2])
def test_tril_triu_out_overlapping_the_input(fn, diagonal):
    """tril/triu with out= sharing memory with the input in another layout (torch 2.13 returns wrong values:
    it zeroes elements it has yet to read) are computed into a temporary and copied; the full aliasing
    (out=a, a.tril_(), out=a[:]) stays in place. Each result is the op of an untouched copy."""
    import numpy as np
    ref = getattr(np, fn)
    a0 = np.arange(1.0, 17.0, dtype=np.float32).reshape(4, 4)
    op = getattr(strata, fn)

    a = strata.from_numpy(a0.copy())
    r = op(a.t(), diagonal, out=a)
    assert r.data_ptr() == a.data_ptr()
    np.testing.assert_array_equal(a.numpy(), ref(a0.T, diagonal))

    a = strata.from_numpy(a0.copy())
    op(a.flip(0), diagonal, out=a)
    np.testing.assert_array_equal(a.numpy(), ref(a0[::-1], diagonal))

    a = strata.from_numpy(a0.copy())  # shifted by one row: out overlaps the input partially
    op(a[:3], diagonal, out=a[1:])
    want = a0.copy()
    want[1:] = ref(a0[:3], diagonal)
    np.testing.assert_array_equal(a.numpy(), want)

    for alias in (lambda a: op(a, diagonal, out=a), lambda a: getattr(a, fn + "_")(diagonal),
                  lambda a: op(a, diagonal, out=a[:])):
        a = strata.from_numpy(a0.copy())
        alias(a)
        np.testing.assert_array_equal(a.numpy(), ref(a0, diagonal))

    b = strata.from_numpy(np.arange(24.0, dtype=np.float32).reshape(2, 3, 4))  # batched, non-square
    want = ref(b.numpy().transpose(0, 2, 1)[:, :3, :3].copy(), diagonal)
    op(b.transpose(1, 2)[:, :3, :3], diagonal, out=b[:, :3, :3])
    np.testing.assert_array_equal(b.numpy()[:, :3, :3], want)
