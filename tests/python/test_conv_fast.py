# conv2d / conv1d forward against torch over the shapes the two CPU paths see: oneDNN's convolution primitive
# (float32 convolutions of a few MFLOP and more, see backends/cpu/dnnl_conv.cpp) and im2col + GEMM (small ones,
# float64, and everything when oneDNN is missing or STRATA_DNNL_CONV=0, which the last test runs in a subprocess).
import os
import subprocess
import sys

import numpy as np
import pytest

import strata

torch = pytest.importorskip("torch")

# (input shape, weight shape, kwargs): big ones take the oneDNN path, small ones ours.
CASES = [
    ((32, 3, 32, 32), (16, 3, 3, 3), dict(padding=1)),  # the suite's small CNN
    ((32, 16, 32, 32), (32, 16, 3, 3), dict(padding=1)),
    ((8, 1, 28, 28), (32, 1, 5, 5), dict()),  # one input channel
    ((1, 16, 40, 40), (32, 16, 3, 3), dict(padding=1)),  # batch 1
    ((4, 32, 33, 31), (64, 8, 3, 3), dict(groups=4, padding=2, dilation=2)),
    ((4, 32, 33, 31), (32, 1, 3, 3), dict(groups=32, padding=1)),  # depthwise
    ((4, 16, 35, 37), (24, 16, 3, 5), dict(stride=(2, 3), padding=(1, 2))),
    ((4, 16, 36, 36), (24, 16, 4, 4), dict(stride=2, padding=1)),  # floor in the output size: oneDNN's right pad
    ((4, 16, 30, 30), (24, 16, 1, 1), dict()),  # 1x1: our path (a plain GEMM)
    ((4, 16, 30, 30), (24, 16, 3, 3), dict(padding="same")),
    ((4, 16, 31, 30), (24, 16, 4, 3), dict(padding="same", dilation=2)),
    ((4, 16, 30, 30), (24, 16, 3, 3), dict(padding="valid", stride=1)),
    ((2, 3, 8, 8), (4, 3, 3, 3), dict(padding=1)),  # tiny: our path
    ((2, 8, 12, 12), (8, 8, 3, 3), dict(padding=1)),  # 0.15 MFLOP: our path
    ((64, 16, 8, 8), (32, 16, 3, 3), dict(padding=1)),  # digits-CNN-like: channels-last path
]


def _run(lib, x, w, b, kw, noncontig=False):
    lx, lw = lib.from_numpy(x), lib.from_numpy(w)
    lb = lib.from_numpy(b) if b is not None else None
    if noncontig:
        # Same values through a transposed view.
        lx = lib.from_numpy(np.ascontiguousarray(x.transpose(0, 1, 3, 2))).transpose(2, 3)
    return lib.nn.functional.conv2d(lx, lw, lb, **kw)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_conv2d_matches_torch(case, bias):
    xs, ws, kw = CASES[case]
    rng = np.random.default_rng(case)
    x = rng.standard_normal(xs, dtype=np.float32)
    w = (rng.standard_normal(ws) / np.sqrt(np.prod(ws[1:]))).astype(np.float32)
    b = rng.standard_normal(ws[0]).astype(np.float32) if bias else None
    got = _run(strata, x, w, b, kw).numpy()
    with torch.no_grad():
        ref = _run(torch, x, w, b, kw).numpy()
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("case", [0, 4, 6])
def test_conv2d_noncontiguous_input(case):
    xs, ws, kw = CASES[case]
    rng = np.random.default_rng(100 + case)
    x = rng.standard_normal(xs, dtype=np.float32)
    w = (rng.standard_normal(ws) / np.sqrt(np.prod(ws[1:]))).astype(np.float32)
    b = rng.standard_normal(ws[0]).astype(np.float32)
    got = _run(strata, x, w, b, kw, noncontig=True)
    with torch.no_grad():
        ref = _run(torch, x, w, b, kw).numpy()
    np.testing.assert_allclose(got.numpy(), ref, rtol=1e-4, atol=2e-5)


def test_conv2d_float64_and_unbatched():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((16, 30, 30))
    w = rng.standard_normal((24, 16, 3, 3)) / 12
    got = strata.nn.functional.conv2d(strata.from_numpy(x), strata.from_numpy(w), padding=1)
    ref = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), padding=1)
    assert got.dtype == strata.float64 and tuple(got.shape) == tuple(ref.shape)
    np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-10, atol=1e-12)
    xf, wf = x.astype(np.float32), w.astype(np.float32)
    got = strata.nn.functional.conv2d(strata.from_numpy(xf), strata.from_numpy(wf), padding=1)
    ref = torch.nn.functional.conv2d(torch.from_numpy(xf), torch.from_numpy(wf), padding=1)
    np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-4, atol=2e-5)


def test_conv1d_matches_torch():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((16, 32, 500), dtype=np.float32)
    w = (rng.standard_normal((64, 32, 5)) / 12).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)
    for kw in (dict(padding=2), dict(stride=3), dict(dilation=2, padding="same")):
        got = strata.nn.functional.conv1d(strata.from_numpy(x), strata.from_numpy(w), strata.from_numpy(b), **kw)
        ref = torch.nn.functional.conv1d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b), **kw)
        np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-4, atol=2e-5)


def test_conv2d_repeated_calls_and_changing_weights():
    # Cached primitives must read the current buffers on every call.
    rng = np.random.default_rng(9)
    x = rng.standard_normal((8, 16, 32, 32), dtype=np.float32)
    for i in range(3):
        w = (rng.standard_normal((32, 16, 3, 3)) / 12).astype(np.float32)
        b = rng.standard_normal(32).astype(np.float32)
        xi = x * (i + 1)
        got = strata.nn.functional.conv2d(strata.from_numpy(xi), strata.from_numpy(w), strata.from_numpy(b),
                                          padding=1)
        ref = torch.nn.functional.conv2d(torch.from_numpy(xi), torch.from_numpy(w), torch.from_numpy(b), padding=1)
        np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-4, atol=1e-4)


def test_conv2d_special_values_propagate():
    x = np.zeros((2, 16, 20, 20), dtype=np.float32)
    x[0, 3, 5, 5] = np.nan
    x[1, 0, 10, 10] = np.inf
    w = np.ones((8, 16, 3, 3), dtype=np.float32)
    got = strata.nn.functional.conv2d(strata.from_numpy(x), strata.from_numpy(w), padding=1).numpy()
    ref = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), padding=1).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_array_equal(np.isposinf(got), np.isposinf(ref))


def test_conv2d_without_onednn_matches():
    # The im2col fallback (what runs where libdnnl is missing) on the same big shapes.
    code = (
        "import numpy as np, strata, torch\n"
        "rng = np.random.default_rng(3)\n"
        "for xs, ws, kw in [((32, 3, 32, 32), (16, 3, 3, 3), dict(padding=1)),\n"
        "                   ((4, 32, 33, 31), (64, 8, 3, 3), dict(groups=4, padding=2, dilation=2))]:\n"
        "    x = rng.standard_normal(xs, dtype=np.float32)\n"
        "    w = (rng.standard_normal(ws) / 10).astype(np.float32)\n"
        "    g = strata.nn.functional.conv2d(strata.from_numpy(x), strata.from_numpy(w), **kw).numpy()\n"
        "    r = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), **kw).numpy()\n"
        "    np.testing.assert_allclose(g, r, rtol=1e-4, atol=2e-5)\n"
        "print('ok')\n"
    )
    env = dict(os.environ, STRATA_DNNL_CONV="0")
    root = os.path.join(os.path.dirname(__file__), "..", "..", "python")
    env["PYTHONPATH"] = os.path.abspath(root) + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr


def test_conv2d_zero_size_plane_is_an_error_like_torch():
    # torch refuses an empty plane unless the batch or the channels are empty (oneDNN 2.6 would crash on it).
    x = np.zeros((1000, 16, 0, 5), dtype=np.float32)
    w = np.ones((64, 16, 2, 2), dtype=np.float32)
    with pytest.raises(RuntimeError, match="Only zero batch or zero channel"):
        torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), padding=1)
    with pytest.raises(RuntimeError, match="conv2d: Only zero batch or zero channel"):
        strata.nn.functional.conv2d(strata.from_numpy(x), strata.from_numpy(w), padding=1)
    with pytest.raises(RuntimeError, match="conv1d: Only zero batch or zero channel"):
        strata.nn.functional.conv1d(strata.zeros(2, 3, 0), strata.zeros(4, 3, 1), padding=1)
    # An empty batch is fine on both.
    got = strata.nn.functional.conv2d(strata.zeros(0, 16, 8, 8), strata.from_numpy(w), padding=1)
    assert tuple(got.shape) == (0, 64, 9, 9)
