"""Python numbers beside tensors (`x + 1`, `2.5 * x`): a number that needs the tensor's dtype is made a 0-d
tensor of that dtype directly, and a 0-d operand joins the flat elementwise pass with stride 0. Results, dtypes
and wrap-around must be torch's."""

import pytest

import strata

torch = pytest.importorskip("torch")

CASES = [("int8", [1, 2], 300), ("int32", [1, 2], 2.5), ("bool", [True, False], True), ("float16", [1, 2], 1e-4),
         ("bfloat16", [1, 2], 3.3), ("uint8", [250, 3], 10), ("int64", [1, 2], True), ("float32", [1, 2], 2**40 + 1),
         ("float64", [1, 2], 0.1), ("int16", [1, 2], -70000), ("float32", [1.5, -2.0], float("inf"))]
OPS = [("add", lambda x, s: x + s), ("radd", lambda x, s: s + x), ("mul", lambda x, s: s * x),
       ("sub", lambda x, s: x - s), ("rsub", lambda x, s: s - x), ("div", lambda x, s: x / s)]


def _run(f, x, s):
    try:
        r = f(x, s)
        return str(r.dtype).split(".")[-1], r.tolist()
    except Exception as e:  # noqa: BLE001  (the error type is what is compared)
        return "error", type(e).__name__


@pytest.mark.parametrize("dtype,values,number", CASES)
@pytest.mark.parametrize("name,f", OPS, ids=[o[0] for o in OPS])
def test_number_operand_matches_torch(dtype, values, number, name, f):
    ours = _run(f, strata.tensor(values, dtype=getattr(strata, dtype)), number)
    theirs = _run(f, torch.tensor(values, dtype=getattr(torch, dtype)), number)
    if theirs[0] == "error":
        assert ours[0] == "error"
    else:
        assert ours == theirs


def test_zero_dim_operand_layouts():
    # Non-contiguous, broadcast and out= operands next to a 0-d tensor or a number.
    base = strata.arange(12.0).reshape(3, 4)
    tb = torch.arange(12.0).reshape(3, 4)
    for ours, theirs in [
        (base.t() * 2, tb.t() * 2),
        (base[:, ::2] + strata.tensor(1.5), tb[:, ::2] + torch.tensor(1.5)),
        (strata.tensor(2.0) - base.t(), torch.tensor(2.0) - tb.t()),
        (strata.tensor(3) * base, torch.tensor(3) * tb),
        (base + strata.tensor([1.0]), tb + torch.tensor([1.0])),
    ]:
        assert ours.tolist() == theirs.tolist() and tuple(ours.shape) == tuple(theirs.shape)
    out = strata.empty(3, 4)
    strata.mul(base, 0.5, out=out)
    assert out.tolist() == (tb * 0.5).tolist()
    x = base.clone()
    x.add_(strata.tensor(1.0))
    assert x.tolist() == (tb + 1).tolist()
    assert (strata.tensor(2.0) + strata.tensor(3.0)).item() == 5.0
    assert tuple((strata.empty(0, 4) + 1).shape) == (0, 4)


def test_size_and_stride_indexing_errors_match_torch():
    for lib_t, t in ((strata.ones(2, 3), torch.ones(2, 3)), (strata.tensor(1.0), torch.tensor(1.0))):
        for dim in (-3, -2, -1, 0, 1, 2, 5):
            for name in ("size", "stride"):
                outs = []
                for x in (lib_t, t):
                    try:
                        outs.append(getattr(x, name)(dim))
                    except IndexError as e:
                        outs.append(str(e))
                assert outs[0] == outs[1], (name, dim, outs)
