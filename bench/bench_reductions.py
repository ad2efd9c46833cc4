"""Strata vs PyTorch on reductions and softmax of a 4096x4096 float32 tensor.

Prints, per case, the median time of each library over several repeats and
the ratio Strata/PyTorch (below 1: Strata is faster). Both use the same number
of threads. Timings on a shared machine are indicative only.

    PYTHONPATH=python python bench/bench_reductions.py [--repeats N] [--size N]
"""

import argparse
import statistics
import time

import numpy as np
import torch

import strata as st


def bench(fn, repeats):
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--threads", type=int, default=0, help="0: each library's default")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
        st.set_num_threads(args.threads)
    n = args.size
    a = np.random.default_rng(0).standard_normal((n, n)).astype(np.float32)
    t = torch.from_numpy(a)
    s = st.from_numpy(a)
    cases = [
        ("sum rows (dim=1)", lambda m, x: m.sum(x, 1)),
        ("sum cols (dim=0)", lambda m, x: m.sum(x, 0)),
        ("sum all", lambda m, x: m.sum(x)),
        ("mean rows (dim=1)", lambda m, x: m.mean(x, 1)),
        ("mean cols (dim=0)", lambda m, x: m.mean(x, 0)),
        ("amax rows (dim=1)", lambda m, x: m.amax(x, 1)),
        ("amax cols (dim=0)", lambda m, x: m.amax(x, 0)),
        ("max.dim rows (values+indices)", lambda m, x: m.max(x, 1)),
        ("max.dim cols (values+indices)", lambda m, x: m.max(x, 0)),
        ("softmax (dim=-1)", lambda m, x: m.softmax(x, -1)),
        ("log_softmax (dim=-1)", lambda m, x: m.log_softmax(x, -1)),
        ("softmax (dim=0)", lambda m, x: m.softmax(x, 0)),
    ]
    print(f"{n}x{n} float32, threads: torch={torch.get_num_threads()} strata={st.get_num_threads()}, "
          f"median of {args.repeats}")
    print(f"{'case':34s} {'torch ms':>10s} {'strata ms':>10s} {'ratio':>7s}")
    for name, f in cases:
        tt = bench(lambda: f(torch, t), args.repeats)
        ts = bench(lambda: f(st, s), args.repeats)
        print(f"{name:34s} {tt * 1e3:10.3f} {ts * 1e3:10.3f} {ts / tt:7.2f}")


if __name__ == "__main__":
    main()
