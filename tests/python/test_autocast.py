"""CPU autocast: which ops run in which dtype, casts visible to autograd."""

import pytest

import strata


def test_policies_and_output_dtypes():
    a = strata.randn(4, 8)
    b = strata.randn(8, 3)
    with strata.autocast("cpu"):
        assert strata.is_autocast_enabled()
        assert strata.get_autocast_dtype("cpu") == strata.bfloat16
        assert (a @ b).dtype == strata.bfloat16
        assert strata.mm(a, b).dtype == strata.bfloat16
        # float32 policy: softmax/sum/layer_norm of a bfloat16 input run in float32
        lo = (a @ b)
        assert lo.softmax(-1).dtype == strata.float32
        assert lo.sum().dtype == strata.float32
        assert strata.nn.functional.layer_norm(lo, [3]).dtype == strata.float32
        # promote: cat of mixed inputs runs in the widest
        assert strata.cat([lo, b[:4]]).dtype == strata.float32
        # no policy: pointwise ops follow normal type promotion
        assert (lo + 1).dtype == strata.bfloat16
        # float64 is never cast
        assert (a.double() @ b.double()).dtype == strata.float64
    assert not strata.is_autocast_enabled()
    assert (a @ b).dtype == strata.float32


def test_float16_and_disabled_and_nesting():
    a = strata.randn(2, 2)
    with strata.autocast("cpu", dtype=strata.float16):
        assert (a @ a).dtype == strata.float16
        with strata.autocast("cpu", enabled=False):
            assert (a @ a).dtype == strata.float32
        assert (a @ a).dtype == strata.float16
    with pytest.raises(RuntimeError, match="bfloat16, torch.float16"):
        strata.autocast("cpu", dtype=strata.int32)
    with pytest.raises(RuntimeError, match="not supported"):
        strata.autocast("mps")


def test_gradients_flow_back_in_parameter_dtype():
    x = strata.randn(4, 8)
    w = strata.randn(8, 3, requires_grad=True)
    with strata.autocast("cpu"):
        y = x @ w
        assert y.grad_fn.name() == "MatmulBackward0"
        # the cast of w is recorded
        names = [f.name() for f, _ in y.grad_fn.next_functions if f is not None]
        assert "ToCopyBackward0" in names
    y.float().sum().backward()
    assert w.grad.dtype == strata.float32
    # d/dw sum(x @ w) = x^T @ ones, up to bfloat16 rounding of x
    ref = x.bfloat16().float().t() @ strata.ones(4, 3)
    assert strata.allclose(w.grad, ref, rtol=1e-2, atol=1e-2)


def test_decorator_and_matches_torch_policy():
    torch = pytest.importorskip("torch")

    @strata.autocast("cpu")
    def f(a, b):
        return a @ b

    a = strata.randn(3, 3)
    assert f(a, a).dtype == strata.bfloat16
    ta = torch.randn(3, 3)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert (ta @ ta).dtype == torch.bfloat16
