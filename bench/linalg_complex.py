"""Complex linear algebra against torch in the same run: matmul (one cgemm/zgemm per product) next to the
four-real-GEMM formulation Strata used before (timed here as the same four real products on the real and
imaginary views plus the recombination, which is what that path did), then eig (real and complex input),
solve, inv and det on complex matrices. Prints median times and the ratio Strata / torch (below 1 = Strata
faster).

    PYTHONPATH=python .venv/bin/python bench/linalg_complex.py [--quick] [--threads N]
"""
import sys
import time

import numpy as np
import strata as st
import torch

QUICK = "--quick" in sys.argv
THREADS = int(sys.argv[sys.argv.index("--threads") + 1]) if "--threads" in sys.argv else 1
BUDGET = 0.15 if QUICK else 0.5
MM_SIZES = [64, 256, 1024] if QUICK else [64, 128, 256, 512, 1024]
LA_SIZES = [64, 256] if QUICK else [64, 128, 256, 512]


def median_time(f):
    f()
    ts, total = [], 0.0
    while total < BUDGET or len(ts) < 3:
        t0 = time.perf_counter()
        f()
        dt = time.perf_counter() - t0
        ts.append(dt)
        total += dt
        if len(ts) >= 200:
            break
    return sorted(ts)[len(ts) // 2]


def crand(rng, shape, dtype):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def four_gemm(a, b):
    ar, ai, br, bi = a.real, a.imag, b.real, b.imag
    return st.complex(ar @ br - ai @ bi, ar @ bi + ai @ br)


def row(name, ts, tt, extra=""):
    print(f"{name:28s} {ts * 1e3:10.3f} {tt * 1e3:10.3f} {ts / tt:7.2f} {extra}", flush=True)
    return ts / tt


def main():
    st.set_num_threads(THREADS)
    torch.set_num_threads(THREADS)
    rng = np.random.default_rng(0)
    print(f"threads {THREADS}; torch {torch.__version__}")
    print(f"{'case':28s} {'strata ms':>10s} {'torch ms':>10s} {'ratio':>7s} four-GEMM ms (ratio to torch)")
    ratios = []
    for dt in ("complex64", "complex128"):
        for n in MM_SIZES:
            a, b = crand(rng, (n, n), dt), crand(rng, (n, n), dt)
            sa, sb, ta, tb = st.from_numpy(a), st.from_numpy(b), torch.from_numpy(a), torch.from_numpy(b)
            tol = 1e-3 if dt == "complex64" else 1e-9
            np.testing.assert_allclose((sa @ sb).numpy(), (ta @ tb).numpy(), rtol=tol, atol=tol * n)
            ts, tt = median_time(lambda: sa @ sb), median_time(lambda: ta @ tb)
            t4 = median_time(lambda: four_gemm(sa, sb))
            ratios.append(row(f"matmul {dt} {n}", ts, tt, f"{t4 * 1e3:10.3f} ({t4 / tt:.2f})"))
    la = [
        ("eig float64", lambda m: m.linalg.eig, "float64"),
        ("eig complex128", lambda m: m.linalg.eig, "complex128"),
        ("eigvals complex128", lambda m: m.linalg.eigvals, "complex128"),
        ("solve complex128", lambda m: (lambda x: m.linalg.solve(x, x[..., :1])), "complex128"),
        ("inv complex128", lambda m: m.linalg.inv, "complex128"),
        ("det complex128", lambda m: m.linalg.det, "complex128"),
    ]
    for name, fn, dt in la:
        for n in LA_SIZES:
            if name.startswith("eig") and n > 256 and QUICK:
                continue
            a = crand(rng, (n, n), dt) if dt.startswith("complex") else rng.standard_normal((n, n))
            sa, ta = st.from_numpy(a), torch.from_numpy(a)
            fs, ft = fn(st), fn(torch)
            ts, tt = median_time(lambda: fs(sa)), median_time(lambda: ft(ta))
            ratios.append(row(f"{name} {n}", ts, tt))
    print(f"geometric mean ratio: {float(np.exp(np.mean(np.log(ratios)))):.2f}")


if __name__ == "__main__":
    main()
