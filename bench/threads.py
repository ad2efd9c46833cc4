"""Two Python threads running large ops at once, against one thread running both workloads in turn.

    .venv/bin/python bench/threads.py [--repeat 5] [--intra 1]

Ops release the GIL while their kernel runs (python/src/op_bind.cpp, Note [Releasing the GIL]), so two
threads should overlap their kernels: with `--intra 1` (one intra-op thread per op, so that a single op
does not already use every core) and at least two cores, the speedup (serial time / threaded time)
should approach 2. torch runs the same workloads in the same process as the reference. Times are the
minimum over `repeat` runs.
"""

import argparse
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))


def workloads(lib, n):
    lib.manual_seed(0)
    a, b = lib.randn(n, n), lib.randn(n, n)
    x, y = lib.randn(1 << 22), lib.randn(1 << 22)
    return {
        f"matmul {n}x{n}": (lambda: a @ b, 4),
        "add 4M floats": (lambda: x + y, 20),
        "exp 4M floats": (lambda: lib.exp(x), 10),
        f"sum {n}x{n} (dim=1)": (lambda: a.sum(1), 40),
    }


def run_serial(fn, iters):
    for _ in range(2 * iters):
        fn()


def run_threads(fn, iters):
    ts = [threading.Thread(target=lambda: [fn() for _ in range(iters)]) for _ in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def best(f, repeat):
    out = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        f()
        out = min(out, time.perf_counter() - t0)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--intra", type=int, default=1, help="intra-op threads per op")
    ap.add_argument("--n", type=int, default=512)
    args = ap.parse_args()
    import strata

    libs = {"strata": strata}
    try:
        import torch

        libs["torch"] = torch
    except ImportError:
        pass
    for lib in libs.values():
        lib.set_num_threads(args.intra)
    print(f"cores: {os.cpu_count()}, intra-op threads: {args.intra}, load: {os.getloadavg()[0]:.1f}")
    print(f"{'case':24s} {'lib':7s} {'1 thread x2':>12s} {'2 threads':>10s} {'speedup':>8s}")
    for name in workloads(strata, args.n):
        for lname, lib in libs.items():
            fn, iters = workloads(lib, args.n)[name]
            fn()
            ser = best(lambda: run_serial(fn, iters), args.repeat)
            par = best(lambda: run_threads(fn, iters), args.repeat)
            print(f"{name:24s} {lname:7s} {ser * 1e3:10.1f}ms {par * 1e3:8.1f}ms {ser / par:8.2f}")


if __name__ == "__main__":
    main()
