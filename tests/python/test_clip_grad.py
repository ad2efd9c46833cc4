"""strata.nn.utils gradient clipping and parameter/vector conversion against torch.nn.utils."""

import math

import numpy as np
import pytest

import strata as st
import strata.nn.utils as snu

torch = pytest.importorskip("torch")
tnu = torch.nn.utils

SHAPES = [(3, 4), (5,), (), (0, 3)]


def pair(dtype="float32", scale=1.0, seed=0, shapes=SHAPES):
    rng = np.random.default_rng(seed)
    grads = [(rng.standard_normal(s) * scale).astype(dtype) for s in shapes]
    tps, sps = [], []
    for g in grads:
        tp = torch.zeros(g.shape, dtype=getattr(torch, dtype), requires_grad=True)
        tp.grad = torch.tensor(g)
        sp = st.zeros(list(g.shape), dtype=getattr(st, dtype))
        sp.grad = st.tensor(g)
        tps.append(tp)
        sps.append(sp)
    return tps, sps


def check(tps, sps, tol):
    for tp, sp in zip(tps, sps):
        np.testing.assert_allclose(sp.grad.numpy(), tp.grad.numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("norm_type", [2.0, 1, 3.5, math.inf, 0.5])
@pytest.mark.parametrize("max_norm,scale", [(1.0, 1.0), (100.0, 1.0), (0.5, 10.0)])
def test_clip_grad_norm_matches_torch(dtype, norm_type, max_norm, scale):
    # The inf norm of an empty grad has no identity (an error in both libraries): leave that shape out.
    tps, sps = pair(dtype, scale, shapes=SHAPES[:3] if norm_type == math.inf else SHAPES)
    tn = tnu.clip_grad_norm_(tps, max_norm, norm_type=norm_type)
    sn = snu.clip_grad_norm_(sps, max_norm, norm_type=norm_type)
    tol = 1e-5 if dtype == "float32" else 1e-12
    assert isinstance(sn, st.Tensor) and sn.dim() == 0 and str(sn.dtype) == str(tn.dtype).replace("torch", "strata")
    np.testing.assert_allclose(sn.item(), tn.item(), rtol=tol)
    check(tps, sps, tol)


def test_clip_grad_norm_single_tensor_generator_and_missing_grads():
    tps, sps = pair("float64")
    sps.append(st.zeros(2))  # no grad: skipped
    tn = tnu.clip_grad_norm_(iter(tps), 0.1)
    sn = snu.clip_grad_norm_(iter(sps), 0.1)
    np.testing.assert_allclose(sn.item(), tn.item(), rtol=1e-12)
    check(tps, sps, 1e-12)
    t1, s1 = pair("float64", shapes=[(4,)])
    np.testing.assert_allclose(snu.clip_grad_norm_(s1[0], 0.3).item(), tnu.clip_grad_norm_(t1[0], 0.3).item())
    check(t1, s1, 1e-12)


def test_clip_grad_norm_no_grads_returns_zero():
    out = snu.clip_grad_norm_([st.zeros(2)], 1.0)
    assert out.item() == 0.0 and out.dim() == 0
    assert snu.clip_grad_norm_([], 1.0).item() == 0.0


def test_clip_grad_norm_inf_of_empty_grad_raises():
    p = st.zeros(0)
    p.grad = st.zeros(0)
    with pytest.raises(RuntimeError, match="empty"):
        snu.clip_grad_norm_([p], 1.0, norm_type="inf")


def test_clip_grad_norm_nonfinite():
    p = st.zeros(3)
    p.grad = st.tensor([1.0, float("inf"), 2.0])
    with pytest.raises(RuntimeError, match="non-finite"):
        snu.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
    p.grad = st.tensor([1.0, float("nan"), 2.0])
    with pytest.raises(RuntimeError, match="non-finite"):
        snu.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
    total = snu.clip_grad_norm_([p], 1.0)
    assert math.isnan(total.item())


def test_get_total_norm_and_clip_grads_with_norm():
    tps, sps = pair("float64")
    tn = tnu.get_total_norm([p.grad for p in tps], 2.0)
    sn = snu.get_total_norm([p.grad for p in sps], 2.0)
    np.testing.assert_allclose(sn.item(), tn.item(), rtol=1e-12)
    tnu.clip_grads_with_norm_(tps, 0.7, tn)
    snu.clip_grads_with_norm_(sps, 0.7, sn)
    check(tps, sps, 1e-12)


@pytest.mark.parametrize("clip", [0.1, 1.0, 5])
def test_clip_grad_value_matches_torch(clip):
    tps, sps = pair("float32", scale=2.0)
    tnu.clip_grad_value_(tps, clip)
    snu.clip_grad_value_(sps, clip)
    check(tps, sps, 0)


def test_parameters_vector_round_trip():
    params = [st.arange(6, dtype=st.float32).reshape(2, 3), st.tensor([7.0]), st.zeros(0), st.tensor(9.0)]
    vec = snu.parameters_to_vector(params)
    tvec = tnu.parameters_to_vector([torch.tensor(p.numpy()) for p in params])
    np.testing.assert_array_equal(vec.numpy(), tvec.numpy())
    new = st.arange(8, dtype=st.float32) * 10
    snu.vector_to_parameters(new, params)
    assert params[0].tolist() == [[0.0, 10.0, 20.0], [30.0, 40.0, 50.0]]
    assert params[1].tolist() == [60.0] and params[3].item() == 70.0
    with pytest.raises(TypeError, match="expected torch.Tensor"):
        snu.vector_to_parameters([1.0], params)
    with pytest.raises(RuntimeError, match="vector_to_parameters"):
        snu.vector_to_parameters(st.zeros(3), params)


@pytest.mark.skipif(not hasattr(st.Tensor, "grad_fn"), reason="autograd not merged yet")
def test_clip_grad_norm_after_backward():
    w = st.tensor([3.0, 4.0], requires_grad=True)
    (w * w).sum().backward()  # grad = 2w = [6, 8], norm 10
    total = snu.clip_grad_norm_([w], 1.0)
    assert abs(total.item() - 10.0) < 1e-5
    np.testing.assert_allclose(w.grad.numpy(), [0.6, 0.8], rtol=1e-5)


def test_clip_grad_norm_mixed_dtypes_matches_torch():
    specs = [("float32", [1.0, 2.0, 3.0]), ("float64", 4.0), ("float32", 2.0)]
    tps, sps = [], []
    for dt, v in specs:
        tp = torch.zeros(np.shape(v), dtype=getattr(torch, dt), requires_grad=True)
        tp.grad = torch.tensor(v, dtype=getattr(torch, dt))
        sp = st.zeros(list(np.shape(v)), dtype=getattr(st, dt))
        sp.grad = st.tensor(v, dtype=getattr(st, dt))
        tps.append(tp)
        sps.append(sp)
    tn, sn = tnu.clip_grad_norm_(tps, 1.0), snu.clip_grad_norm_(sps, 1.0)
    assert sn.dtype == st.float64 and tn.dtype == torch.float64
    np.testing.assert_allclose(sn.item(), tn.item(), rtol=1e-12)
    for tp, sp in zip(tps, sps):
        assert str(sp.grad.dtype).split(".")[1] == str(tp.grad.dtype).split(".")[1]
    check(tps, sps, 1e-6)
