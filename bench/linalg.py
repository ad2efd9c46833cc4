"""torch.linalg over LAPACK against torch in the same run: solve, cholesky, qr, svd and eigh on n x n matrices
(n = 64 .. 1024) and on batches of small matrices, on one thread and on the default thread count. Prints the
median time of each and the ratio Strata / torch (below 1 = Strata faster; the issue's target is <= 1.0).

    PYTHONPATH=python .venv/bin/python bench/linalg.py [--quick] [--dtype float32|float64] [--threads N]

Strata's LAPACK is the OpenBLAS it already uses for BLAS (Debian's libopenblas 0.3.21); torch's wheel
carries MKL's LAPACK. Each case checks that both libraries agree before it is timed.
"""
import sys
import time

import numpy as np
import strata as st
import torch

QUICK = "--quick" in sys.argv
DTYPE = sys.argv[sys.argv.index("--dtype") + 1] if "--dtype" in sys.argv else "float64"
DEFAULT_THREADS = int(sys.argv[sys.argv.index("--threads") + 1]) if "--threads" in sys.argv else st.get_num_threads()
BUDGET = 0.15 if QUICK else 0.6  # seconds of timing per case and library

SIZES = [64, 128, 256, 512] if QUICK else [64, 128, 256, 512, 1024]
BATCHED = [(1024, 8), (256, 32)] if QUICK else [(1024, 8), (4096, 4), (256, 32), (64, 64)]


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


def inputs(kind, shape, rng):
    n = shape[-1]
    a = rng.standard_normal(shape)
    if kind in ("cholesky",):
        a = a @ np.swapaxes(a, -1, -2) + n * np.eye(n)
    elif kind == "eigh":
        a = a + np.swapaxes(a, -1, -2)
    elif kind == "solve":
        a = a + np.sqrt(n) * np.eye(n)
    return a.astype(DTYPE)


def cases(mod):
    la = mod.linalg
    return {
        "solve": lambda a, b: la.solve(a, b),
        "cholesky": lambda a, b: la.cholesky(a),
        "qr": lambda a, b: la.qr(a),
        "svd": lambda a, b: la.svd(a, full_matrices=False),
        "eigh": lambda a, b: la.eigh(a),
    }


def check(kind, rs, rt):
    rs = rs if isinstance(rs, tuple) else (rs,)
    rt = rt if isinstance(rt, tuple) else (rt,)
    tol = 1e-3 if DTYPE == "float32" else 1e-7
    for x, y in zip(rs, rt):
        x, y = x.numpy(), y.numpy()
        if kind in ("qr", "svd", "eigh"):  # vectors are defined up to sign
            x, y = np.abs(x), np.abs(y)
        np.testing.assert_allclose(x, y, rtol=tol, atol=tol * max(1.0, float(np.abs(y).max())), err_msg=kind)


def run(threads):
    st.set_num_threads(threads)
    torch.set_num_threads(threads)
    rng = np.random.default_rng(0)
    sc, tc = cases(st), cases(torch)
    rows = []
    shapes = [(n, n) for n in SIZES] + [(b, n, n) for b, n in BATCHED]
    for kind in sc:
        for shape in shapes:
            if kind in ("svd", "eigh") and shape[-1] >= 1024 and QUICK:
                continue
            a = inputs(kind, shape, rng)
            b = rng.standard_normal(shape[:-1] + (1,)).astype(DTYPE)
            sa, sb = st.from_numpy(a), st.from_numpy(b)
            ta, tb = torch.from_numpy(a), torch.from_numpy(b)
            if shape[-1] <= 256 or kind in ("solve", "cholesky"):
                check(kind, sc[kind](sa, sb), tc[kind](ta, tb))
            ts = median_time(lambda: sc[kind](sa, sb))
            tt = median_time(lambda: tc[kind](ta, tb))
            name = f"{kind} {'x'.join(map(str, shape))}"
            rows.append((name, ts, tt))
            print(f"{threads:>2d}T {name:22s} {ts * 1e3:10.3f} {tt * 1e3:10.3f} {ts / tt:7.2f}", flush=True)
    return rows


if __name__ == "__main__":
    print(f"dtype {DTYPE}; strata LAPACK: OpenBLAS ({st.blas.backend_name() if hasattr(st.blas, 'backend_name') else ''})"
          f"; torch {torch.__version__} (MKL: {torch.backends.mkl.is_available()})")
    print(f"{'':3s} {'case':22s} {'strata ms':>10s} {'torch ms':>10s} {'ratio':>7s}")
    summary = {}
    for threads in sorted({1, DEFAULT_THREADS}):
        rows = run(threads)
        ratios = [ts / tt for _, ts, tt in rows]
        summary[threads] = float(np.exp(np.mean(np.log(ratios))))
    for threads, g in summary.items():
        print(f"geometric mean ratio, {threads} thread(s): {g:.2f}")
