"""strata.fft against torch.fft in the same process: 1-D batched and 2-D transforms, c2c (fft) and r2c (rfft), at
powers of two and awkward sizes (1000, 1009 prime, 4095), float32 and float64. Prints the median time of each and
the ratio Strata / torch (below 1 = Strata faster; the target is <= 1.0).

    PYTHONPATH=python .venv/bin/python bench/fft.py [--quick] [--threads N]

Both run oneMKL's DFTI: torch's wheel links MKL 2024.2 statically, Strata loads the PyPI wheel's libmkl_rt at run
time (docs/DESIGN.md, "FFT"). Each case checks that both results agree before it is timed.
"""
import sys
import time

import numpy as np
import strata as st
import torch

QUICK = "--quick" in sys.argv
THREADS = int(sys.argv[sys.argv.index("--threads") + 1]) if "--threads" in sys.argv else st.get_num_threads()
BUDGET = 0.1 if QUICK else 0.4  # seconds of timing per case and library

ONE_D = [1024, 1000, 1009, 4095] if QUICK else [256, 1024, 1000, 1009, 4095, 65536]
TWO_D = [256, 1000] if QUICK else [64, 256, 1000, 1009]
POINTS = 1 << 18  # elements per 1-D case: batch = POINTS // n


def median_time(f):
    f()
    ts, total = [], 0.0
    while total < BUDGET or len(ts) < 5:
        t0 = time.perf_counter()
        f()
        dt = time.perf_counter() - t0
        ts.append(dt)
        total += dt
        if len(ts) >= 500:
            break
    return sorted(ts)[len(ts) // 2]


def main():
    st.set_num_threads(THREADS)
    torch.set_num_threads(THREADS)
    rng = np.random.default_rng(0)
    print(f"threads={THREADS}  (median seconds; ratio = strata / torch)")
    print(f"{'case':<34}{'strata':>12}{'torch':>12}{'ratio':>8}")
    ratios = []
    cases = [(kind, dt, (max(1, POINTS // n), n), (-1,)) for n in ONE_D for kind in ("c2c", "r2c")
             for dt in ("float32", "float64")]
    cases += [(kind, dt, (n, n), (-2, -1)) for n in TWO_D for kind in ("c2c", "r2c") for dt in ("float32", "float64")]
    for kind, dt, shape, dims in cases:
        a = rng.standard_normal(shape).astype(dt)
        if kind == "c2c":
            a = (a + 1j * rng.standard_normal(shape)).astype("complex64" if dt == "float32" else "complex128")
        xs, xt = st.from_numpy(a), torch.from_numpy(a)
        if len(dims) == 1:
            fs = (lambda: st.fft.fft(xs)) if kind == "c2c" else (lambda: st.fft.rfft(xs))
            ft = (lambda: torch.fft.fft(xt)) if kind == "c2c" else (lambda: torch.fft.rfft(xt))
        else:
            fs = (lambda: st.fft.fft2(xs)) if kind == "c2c" else (lambda: st.fft.rfft2(xs))
            ft = (lambda: torch.fft.fft2(xt)) if kind == "c2c" else (lambda: torch.fft.rfft2(xt))
        tol = 1e-3 if dt == "float32" else 1e-9
        np.testing.assert_allclose(fs().numpy(), ft().numpy(), rtol=tol, atol=tol * np.sqrt(a.size))
        ts, tt = median_time(fs), median_time(ft)
        ratios.append(ts / tt)
        name = f"{kind} {dt} {'x'.join(map(str, shape))} dim={list(dims)}"
        print(f"{name:<34}{ts:12.2e}{tt:12.2e}{ts / tt:8.2f}", flush=True)
    print(f"geometric mean ratio: {float(np.exp(np.mean(np.log(ratios)))):.2f} over {len(ratios)} cases")


if __name__ == "__main__":
    main()
