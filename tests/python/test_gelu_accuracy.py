# Accuracy of gelu (forward and backward) against PyTorch and a float64 reference: the float32 forward of the erf
# form has its own vectorised approximation on AVX-512 builds (nn_activation_kernels.cpp, Note [Vectorised float
# gelu]), so it is checked over the whole float range, including the tails where 1 + erf(x / sqrt 2) cancels.
import math

import numpy as np
import pytest

import strata

torch = pytest.importorskip("torch")

SPECIAL = [-math.inf, -3e38, -1e30, -100.0, -20.0, -10.0, -8.0, -6.0, -5.66, -5.65, -5.0, -4.0, -3.0, -2.0, -1.0,
           -0.5, -1e-3, -1e-20, -1e-40, -0.0, 0.0, 1e-40, 1e-20, 1e-3, 0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 5.65, 5.66, 6.0,
           10.0, 100.0, 1e30, 3e38, math.inf, math.nan]


def _inputs(dtype):
    rng = np.random.default_rng(0)
    dense = np.linspace(-12, 12, 200001)
    logs = 10.0 ** rng.uniform(-38, 38, 20000)
    x = np.concatenate([dense, logs, -logs, rng.standard_normal(10007), SPECIAL])
    # An odd length so that vector loops have a remainder.
    return x.astype(dtype)


def _ref_gelu(x64, approximate):
    t = torch.from_numpy(x64)
    return torch.nn.functional.gelu(t, approximate=approximate).numpy()


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_float32_vs_float64_reference(approximate):
    x = _inputs(np.float32)
    got = strata.nn.functional.gelu(strata.from_numpy(x), approximate=approximate).numpy()
    ref = _ref_gelu(x.astype(np.float64), approximate)
    tt = torch.nn.functional.gelu(torch.from_numpy(x), approximate=approximate).numpy()
    finite = np.isfinite(ref)
    # Absolute error scaled by max(1, |x|) bounded by a few float32 ulps, never worse than torch's own float32.
    scale = np.maximum(1.0, np.abs(x[finite].astype(np.float64)))
    err = np.abs(got[finite].astype(np.float64) - ref[finite]) / scale
    terr = np.abs(tt[finite].astype(np.float64) - ref[finite]) / scale
    assert err.max() <= max(4e-7, terr.max() * 1.01), (err.max(), terr.max(), x[finite][err.argmax()])
    # Where the result is not tiny, relative error within a few ulps (x >= 0: no cancellation either way).
    pos = finite & (x > 0) & (np.abs(ref) > 1e-30)
    rel = np.abs(got[pos].astype(np.float64) - ref[pos]) / np.abs(ref[pos])
    assert rel.max() < 4e-7, (rel.max(), x[pos][rel.argmax()])


def test_gelu_erf_negative_tail_is_accurate():
    # 1 + erf(x / sqrt 2) cancels for x << 0; the AVX-512 kernel computes Phi(-|x|) directly. The AVX2 and baseline
    # builds use libmvec's erff (faster there, see gelu_math.h) and share torch's cancellation: not worse than torch.
    x = np.linspace(-5.6, -1.0, 100001).astype(np.float32)
    got = strata.nn.functional.gelu(strata.from_numpy(x)).numpy().astype(np.float64)
    ref = _ref_gelu(x.astype(np.float64), "none")
    rel = np.abs(got - ref) / np.abs(ref)
    if strata._C._cpu_capability() == "avx512":
        # torch's float32 (1 + erf) form is off by up to ~1e-2 relative here.
        assert rel.max() < 2e-5
    else:
        tt = torch.nn.functional.gelu(torch.from_numpy(x)).numpy().astype(np.float64)
        trel = np.abs(tt - ref) / np.abs(ref)
        assert rel.max() <= 2 * trel.max() + 1e-6


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_special_values_match_torch(approximate):
    x = np.array(SPECIAL, dtype=np.float32)
    got = strata.nn.functional.gelu(strata.from_numpy(x), approximate=approximate).numpy()
    ref64 = torch.nn.functional.gelu(torch.from_numpy(x.astype(np.float64)), approximate=approximate).numpy()
    # torch's float32 erf kernel returns nan for +inf; float64 (and the math) give inf, which Strata returns.
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref64))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(ref64))
    fin = np.isfinite(ref64)
    np.testing.assert_allclose(got[fin], ref64[fin], rtol=4e-7, atol=1e-7)
    # Signs, including -0.0 for negative x whose gelu underflows.
    zero = fin & (ref64 == 0)
    np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(x[zero]))


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", ["float64", "float16", "bfloat16"])
def test_gelu_other_dtypes_match_torch(dtype, approximate):
    x = _inputs(np.float32)
    x = x[np.abs(x) < 6e4] if dtype == "float16" else x
    tx = torch.from_numpy(x).to(getattr(torch, dtype))
    sx = strata.from_numpy(x).to(getattr(strata, dtype))
    got = strata.nn.functional.gelu(sx, approximate=approximate).to(strata.float64).numpy()
    ref = torch.nn.functional.gelu(tx, approximate=approximate).to(torch.float64).numpy()
    if dtype == "float64":
        ref64 = torch.nn.functional.gelu(tx, approximate=approximate).numpy()
        fin = np.isfinite(ref64)
        np.testing.assert_allclose(got[fin], ref64[fin], rtol=1e-13, atol=1e-15)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(ref64))
        return
    # 16-bit results are computed in float and rounded once: within one 16-bit ulp of the exact gelu of the
    # (rounded) input, plus torch's own float32 absolute error (on the negative tail torch's 1 + erf form gives
    # -0 where Strata gives the accurate tiny value).
    xin = tx.to(torch.float64)
    exact = torch.nn.functional.gelu(xin, approximate=approximate).numpy()
    fin = np.isfinite(exact)
    rtol = 2.0 ** -10 if dtype == "float16" else 2.0 ** -7
    np.testing.assert_allclose(got[fin], exact[fin], rtol=rtol, atol=3e-7)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref) & ~np.isposinf(xin.numpy()))
    big = (np.abs(ref) > 1e-3) & np.isfinite(ref)
    np.testing.assert_allclose(got[big & fin], ref[big & fin], rtol=2 * rtol)


def test_gelu_noncontiguous_and_out():
    x = _inputs(np.float32)[:60000].reshape(300, 200)
    sx = strata.from_numpy(x).t()
    got = strata.nn.functional.gelu(sx).numpy()
    ref = torch.nn.functional.gelu(torch.from_numpy(x).t()).numpy()
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
    out = strata.empty(300, 200)
    strata.gelu(strata.from_numpy(x), out=out)
    np.testing.assert_allclose(out.numpy(), torch.nn.functional.gelu(torch.from_numpy(x)).numpy(), rtol=1e-5,
                               atol=1e-6)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gelu_backward_matches_torch(dtype, approximate):
    x = _inputs(getattr(np, dtype))
    x = x[np.isfinite(x) & (np.abs(x) < 1e15)]
    g = np.random.default_rng(1).uniform(-1, 1, x.shape).astype(dtype)
    got = strata.gelu_backward(strata.from_numpy(g), strata.from_numpy(x), approximate=approximate)
    ref = torch.ops.aten.gelu_backward(torch.from_numpy(g), torch.from_numpy(x), approximate=approximate).numpy()
    # Both frameworks are off by ~1e-6 absolute in float32 (torch's own error against float64 is 1.0e-6 for tanh).
    tol = dict(rtol=2e-5, atol=3e-6) if dtype == "float32" else dict(rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(got.numpy(), ref, **tol)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_gelu_backward_16bit_matches_torch(dtype, approximate):
    x = np.linspace(-8, 8, 4001).astype(np.float32)
    g = np.random.default_rng(2).uniform(-1, 1, x.shape).astype(np.float32)
    tdt, sdt = getattr(torch, dtype), getattr(strata, dtype)
    got = strata.gelu_backward(strata.from_numpy(g).to(sdt), strata.from_numpy(x).to(sdt), approximate=approximate)
    ref = torch.ops.aten.gelu_backward(torch.from_numpy(g).to(tdt), torch.from_numpy(x).to(tdt),
                                       approximate=approximate)
    assert got.dtype == sdt
    rtol = 2.0 ** -7 if dtype == "bfloat16" else 2.0 ** -10
    np.testing.assert_allclose(got.to(strata.float32).numpy(), ref.float().numpy(), rtol=2 * rtol, atol=1e-3)


def test_gelu_backward_special_values():
    x = np.array([-np.inf, -20.0, -13.5, -12.9, -6.0, -1e-30, 0.0, 1e-30, 6.0, 12.9, 13.5, 20.0, np.inf, np.nan],
                 dtype=np.float32)
    g = np.ones_like(x)
    got = strata.gelu_backward(strata.from_numpy(g), strata.from_numpy(x)).numpy()
    ref = torch.ops.aten.gelu_backward(torch.from_numpy(g).double(), torch.from_numpy(x).double()).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    fin = ~np.isnan(ref)
    np.testing.assert_allclose(got[fin], ref[fin], rtol=1e-6, atol=1e-7)
