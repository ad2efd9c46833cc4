"""Per-call cost of tiny eager ops from Python, next to torch and NumPy on the
same run (docs/BINDING.md, "Optimisations: prediction vs result").

    PYTHONPATH=python OMP_NUM_THREADS=1 python bench/eager_overhead.py [--calls N] [--repeat R]

Cases: `a + b` on two 4-element float32 tensors, the same with a.requires_grad,
`x.sum()` and `x[1]` on a 4-element tensor. Minimum over repeats, ns per call.
"""

import argparse
import time

import numpy as np

import strata


def per_call_ns(stmt, calls, repeat):
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            stmt()
        best = min(best, (time.perf_counter_ns() - t0) / calls)
    return best


def cases(lib, grad):
    a = lib.tensor([1.0, 2.0, 3.0, 4.0]) if lib is not np else np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    b = lib.tensor([0.5, 0.25, 0.125, 0.0625]) if lib is not np else np.array([0.5, 0.25, 0.125, 0.0625], np.float32)
    out = {"a + b": lambda: a + b, "x.sum()": lambda: a.sum(), "x[1]": lambda: a[1]}
    if grad:
        g = lib.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
        out["a + b (requires_grad)"] = lambda: g + b
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--calls", type=int, default=20000)
    p.add_argument("--repeat", type=int, default=7)
    args = p.parse_args()
    strata.set_num_threads(1)
    libs = {"strata": (strata, True), "numpy": (np, False)}
    try:
        import torch

        torch.set_num_threads(1)
        libs["torch"] = (torch, True)
    except ImportError:
        pass
    res = {}
    for name, (lib, grad) in libs.items():
        for case, fn in cases(lib, grad).items():
            per_call_ns(fn, max(args.calls // 10, 100), 1)
            res[(case, name)] = per_call_ns(fn, args.calls, args.repeat)
    names = list(libs)
    print(f"{'case':24s}" + "".join(f"{n:>10s}" for n in names))
    for case in ["a + b", "a + b (requires_grad)", "x.sum()", "x[1]"]:
        row = "".join(f"{res[(case, n)]:10.0f}" if (case, n) in res else f"{'-':>10s}" for n in names)
        print(f"{case:24s}{row}")


if __name__ == "__main__":
    main()
