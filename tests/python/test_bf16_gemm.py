"""bfloat16 matrix products: bfloat16 operands, float32 accumulation (oneDNN's
bf16 GEMM when present), one rounding of the result. Checked against the
float32 product of the same bfloat16 values for the layouts the GEMM layer
passes through (transposed, strided, broadcast batches, beta/alpha)."""

import numpy as np
import pytest

import strata


def ref(x):
    return x.float().numpy().astype(np.float64)


def check(actual, expected):
    # one bfloat16 rounding of a float32 result: relative error <= 2^-8
    e = np.asarray(expected, dtype=np.float64)
    np.testing.assert_allclose(actual.float().numpy(), e, rtol=2 ** -8, atol=1e-6 * (1 + np.abs(e).max()))


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (3, 5, 7), (33, 17, 9), (64, 128, 32), (1, 64, 64), (70, 3, 1),
                                   (16, 16, 16), (33, 17, 20), (40, 300, 48), (257, 64, 130), (20, 1, 30)])
def test_mm_layouts(m, k, n):
    a = strata.randn(m, k).bfloat16()
    b = strata.randn(k, n).bfloat16()
    check(a @ b, ref(a) @ ref(b))
    at = strata.randn(k, m).bfloat16().t()
    bt = strata.randn(n, k).bfloat16().t()
    check(at @ bt, ref(at) @ ref(bt))
    strided = strata.randn(m, 2 * k).bfloat16()[:, ::2]
    check(strided @ b, ref(strided) @ ref(b))


def test_batched_broadcast_and_addmm_family():
    a = strata.randn(2, 1, 6, 5).bfloat16()
    b = strata.randn(3, 5, 4).bfloat16()
    check(a @ b, np.matmul(ref(a), ref(b)))
    c = strata.randn(6, 4).bfloat16()
    m1 = strata.randn(6, 5).bfloat16()
    m2 = strata.randn(5, 4).bfloat16()
    check(strata.addmm(c, m1, m2, beta=0.5, alpha=2.0), 0.5 * ref(c) + 2.0 * (ref(m1) @ ref(m2)))
    bb1 = strata.randn(3, 6, 5).bfloat16()
    bb2 = strata.randn(3, 5, 4).bfloat16()
    check(strata.addbmm(c, bb1, bb2), ref(c) + np.matmul(ref(bb1), ref(bb2)).sum(0))
    check(strata.baddbmm(strata.zeros(3, 6, 4).bfloat16(), bb1, bb2), np.matmul(ref(bb1), ref(bb2)))


def test_empty_and_zero_k():
    a = strata.zeros(4, 0).bfloat16()
    b = strata.zeros(0, 3).bfloat16()
    assert (a @ b).float().abs().sum().item() == 0.0
    assert tuple((strata.zeros(0, 5).bfloat16() @ strata.zeros(5, 2).bfloat16()).shape) == (0, 2)


def test_matches_torch_bfloat16_matmul():
    torch = pytest.importorskip("torch")
    a = strata.randn(31, 47).bfloat16()
    b = strata.randn(47, 13).bfloat16()
    ta = torch.from_numpy(a.float().numpy()).bfloat16()
    tb = torch.from_numpy(b.float().numpy()).bfloat16()
    np.testing.assert_allclose((a @ b).float().numpy(), (ta @ tb).float().numpy(), rtol=2 ** -7, atol=1e-2)


def test_bfloat16_result_written_directly_into_views():
    # m, n >= 16 take oneDNN's matmul primitive with a bfloat16 destination when it is there
    # (Note [oneDNN matmul for bfloat16 results]); out= views with padded or transposed rows.
    a, b = strata.randn(48, 40).bfloat16(), strata.randn(40, 24).bfloat16()
    want = ref(a) @ ref(b)
    big = strata.full((48, 32), float("nan")).bfloat16()
    out = big[:, 4:28]
    strata.mm(a, b, out=out)
    check(out, want)
    assert np.isnan(big[:, :4].float().numpy()).all() and np.isnan(big[:, 28:].float().numpy()).all()
    outt = strata.empty(24, 48).bfloat16().t()
    strata.mm(a, b, out=outt)
    check(outt, want)


def test_bfloat16_direct_path_matches_the_float32_route(tmp_path):
    # The same products with the primitive turned off agree to the last bfloat16 bit or so (both accumulate in
    # float32 and round once; the summation order may differ).
    import subprocess
    import sys

    code = (
        "import strata, numpy as np\n"
        "g = strata.Generator().manual_seed(3)\n"
        "a = strata.randn(70, 33, generator=g).bfloat16(); b = strata.randn(33, 50, generator=g).bfloat16()\n"
        "np.save(__import__('sys').argv[1], (a @ b).float().numpy())\n"
    )
    outs = []
    for flag in ("1", "0"):
        path = tmp_path / f"r{flag}.npy"
        env = dict(__import__("os").environ, STRATA_DNNL_MATMUL=flag)
        subprocess.run([sys.executable, "-c", code, str(path)], check=True, env=env, timeout=120)
        outs.append(np.load(path))
    np.testing.assert_allclose(outs[0], outs[1], rtol=2 ** -7, atol=1e-2)
