"""Per-call time of tiny eager ops, Strata next to torch and NumPy, as the minimum over many short runs.

    .venv/bin/python bench/eager_overhead.py [--repeat 40] [--calls 3000] [--threads 2]

The suite (bench/suite.py) reports medians over interleaved samples; this harness takes, for each case and side, the
minimum over `repeat` runs of `calls` back-to-back calls. On a shared, noisy machine the minimum of many short runs
moves by about +-10 ns where a median moves by 50-100 ns, which is what comparing two builds of one small change
needs (docs/BINDING.md, "Optimisations"; its first round used `--repeat 7 --calls 20000 --threads 1`). Ratios are
Strata / torch and Strata / NumPy from the same process.
"""

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))


def cases(lib):
    a, b = lib.tensor([1.0, 2.0, 3.0, 4.0]), lib.tensor([0.5, 0.25, 0.125, 0.0625])
    ag = lib.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    bg = lib.tensor([0.5, 0.25, 0.125, 0.0625], requires_grad=True)
    x8, x, w = lib.ones(8, 8), lib.ones(1, 64), lib.ones(64, 64)
    return {
        "a + b": lambda: a + b,
        "a + b, requires_grad": lambda: ag + bg,
        "a * b": lambda: a * b,
        "a + 1": lambda: a + 1,
        "x.sum()": a.sum,
        "relu(a)": lambda: lib.relu(a),
        "x[1]": lambda: x8[1],
        "1x64 @ 64x64": lambda: x @ w,
    }


def tmin(fn, repeat, calls):
    for _ in range(calls):
        fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - t0) / calls)
    return best * 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=40)
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    import numpy as np
    import strata

    strata.set_num_threads(args.threads)
    sides = {"strata": cases(strata)}
    try:
        import torch

        torch.set_num_threads(args.threads)
        sides["torch"] = cases(torch)
    except ImportError:
        pass
    na, nb = np.array([1.0, 2.0, 3.0, 4.0], np.float32), np.array([0.5, 0.25, 0.125, 0.0625], np.float32)
    numpy_cases = {"a + b": lambda: na + nb, "x.sum()": na.sum, "a * b": lambda: na * nb}
    print(f"{'case':24s} {'strata':>9s} {'torch':>9s} {'ratio':>6s} {'numpy':>9s} {'ratio':>6s}")
    for name in sides["strata"]:
        s = tmin(sides["strata"][name], args.repeat, args.calls)
        row = f"{name:24s} {s:7.0f}ns"
        if "torch" in sides:
            t = tmin(sides["torch"][name], args.repeat, args.calls)
            row += f" {t:7.0f}ns {s / t:6.2f}"
        else:
            row += f" {'-':>9s} {'-':>6s}"
        if name in numpy_cases:
            n = tmin(numpy_cases[name], args.repeat, args.calls)
            row += f" {n:7.0f}ns {s / n:6.2f}"
        print(row)


if __name__ == "__main__":
    main()
