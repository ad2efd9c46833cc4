"""Memory behaviour of the CPU allocator and of library loading (Linux: reads /proc/self)."""
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import strata

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self")
PY = str(Path(__file__).resolve().parents[2] / "python")


def run(code):
    out = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {PY!r})\n" + textwrap.dedent(code)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


def test_mid_size_tensors_round_trip():
    # 64 KiB and up come from the allocator's own mappings (Note [CPU block cache]); values and alignment as usual.
    for n in (16 * 1024 - 16, 16 * 1024, 70_000, 300_000):
        a = strata.arange(n, dtype=strata.float32)
        b = a * 2
        assert b[-1].item() == 2 * (n - 1) and b.data_ptr() % 64 == 0
        del a, b
        c = strata.zeros(n)
        assert c.sum().item() == 0  # a reused block is not assumed to be zeroed: zeros() writes it


def test_repeated_step_does_not_grow_rss():
    # A training-step-like pattern: activations of 64 KiB - 1 MiB interleaved with small Python objects. Freed blocks
    # are reused by the next iteration, so the resident memory stops growing after the first iterations.
    grew = run("""
        import strata
        def rss():
            for line in open("/proc/self/status"):
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) / 1024
        w = [strata.randn(256, 256) * 0.05, strata.randn(256, 128) * 0.05]
        keep = []
        def step(i):
            x = strata.randn(64 * (1 + i % 3), 256)
            h = (x @ w[0]).relu()
            h2 = (h @ w[0]).relu() + h
            y = h2 @ w[1]
            keep.append([str(i)] * 20)  # small long-lived objects between the blocks
            del keep[:-50]
            return y.sum().item()
        for i in range(20):
            step(i)
        r0 = rss()
        for i in range(200):
            step(i)
        print(rss() - r0)
    """)
    assert float(grew) < 1.0


def test_fp32_matmul_does_not_load_openblas():
    # Note [OpenBLAS on demand]: with oneDNN doing fp32 GEMM, OpenBLAS loads only when fp64 (or level 1-3) needs it.
    res = run("""
        import strata, numpy as np
        from strata import blas
        maps = lambda: open("/proc/self/maps").read()
        a = np.random.rand(70, 90)
        b = np.random.rand(90, 40)
        f32 = (strata.from_numpy(a.astype(np.float32)) @ strata.from_numpy(b.astype(np.float32))).numpy()
        assert np.allclose(f32, a @ b, rtol=1e-4, atol=1e-4)
        loaded_f32 = "libopenblas" in maps()
        f64 = (strata.from_numpy(a) @ strata.from_numpy(b)).numpy()
        assert np.allclose(f64, a @ b, rtol=1e-12, atol=1e-12)
        print(blas.backend().startswith("fp32 gemm: oneDNN"), loaded_f32, "libopenblas" in maps(),
              "other BLAS: OpenBLAS" in blas.backend())
    """)
    dnnl, loaded_f32, loaded_f64, ob_used = res.split()
    if dnnl != "True":
        pytest.skip("oneDNN is not the fp32 GEMM library here")
    assert loaded_f32 == "False"
    assert loaded_f64 == ob_used


def test_activation_sized_blocks_stay_out_of_glibc_heap():
    # Note [CPU block cache]: blocks of 64 KiB - 1 MiB used to come from glibc's heap, where the holes they left
    # between the interpreter's small allocations made the heap grow step after step. Now they are separate mappings.
    res = run("""
        import ctypes, strata
        class MI2(ctypes.Structure):
            _fields_ = [(n, ctypes.c_size_t) for n in
                        "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = MI2
        before = libc.mallinfo2().uordblks
        held = [strata.empty(n // 4) for n in (64 << 10, 100 << 10, 256 << 10, 700 << 10) for _ in range(8)]
        print((libc.mallinfo2().uordblks - before) / 2**20)
    """)
    assert float(res) < 1.0  # the 8.9 MiB held are not in glibc's heap
