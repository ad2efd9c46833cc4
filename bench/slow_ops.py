"""Timing of the eager CPU ops that measured far slower than torch (sort and unique, index_select, nansum,
erfinv, embedding_bag, cummax, bincount, topk), each at 2-3 sizes, strata against torch in the same run.
Prints min-of-N wall times and the ratio strata / torch (above 1: strata is slower). No assertions.

    PYTHONPATH=python python bench/slow_ops.py            # 2 threads for both libraries
    PYTHONPATH=python python bench/slow_ops.py --threads 1
    PYTHONPATH=python python bench/slow_ops.py sort nansum  # only cases whose name contains a word
"""

import sys
import time

import numpy as np
import torch

import strata as st
import strata.nn.functional as SF
import torch.nn.functional as TF


def bench(f, min_time=0.2, max_n=200):
    f()
    ts = []
    start = time.perf_counter()
    while len(ts) < max_n and (len(ts) < 5 or time.perf_counter() - start < min_time):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return min(ts)


def both(a):
    """The same data as a strata and a torch tensor (numpy array in)."""
    return st.tensor(a), torch.tensor(a)


def cases():
    rng = np.random.default_rng(0)
    out = []

    def add(name, fs, ft, args):
        out.append((name, fs, ft, args))

    for n in (10_000, 1_000_000):
        f = rng.standard_normal(n).astype(np.float32)
        add(f"sort float32 n={n}", lambda x: st.sort(x), lambda x: torch.sort(x), both(f))
        add(f"sort stable float32 n={n}", lambda x: st.sort(x, stable=True), lambda x: torch.sort(x, stable=True),
            both(f))
        i = rng.integers(0, 1000, n).astype(np.int64)
        add(f"sort int64 (0..1000) n={n}", lambda x: st.sort(x), lambda x: torch.sort(x), both(i))
        add(f"argsort float64 n={n}", lambda x: st.argsort(x), lambda x: torch.argsort(x),
            both(rng.standard_normal(n)))
        add(f"unique int64 (0..1000) n={n}", lambda x: st.unique(x), lambda x: torch.unique(x), both(i))
        add(f"unique inverse+counts int64 n={n}", lambda x: st.unique(x, return_inverse=True, return_counts=True),
            lambda x: torch.unique(x, return_inverse=True, return_counts=True), both(i))
        add(f"unique float32 n={n}", lambda x: st.unique(x), lambda x: torch.unique(x), both(np.round(f, 2)))
    m = rng.standard_normal((256, 1024)).astype(np.float32)
    add("sort float32 (256,1024) dim=-1", lambda x: st.sort(x, dim=-1), lambda x: torch.sort(x, dim=-1), both(m))
    add("topk k=10 float32 (256,1024)", lambda x: st.topk(x, 10), lambda x: torch.topk(x, 10), both(m))
    add("topk k=10 smallest float32 (256,1024)", lambda x: st.topk(x, 10, largest=False),
        lambda x: torch.topk(x, 10, largest=False), both(m))
    big = rng.standard_normal(1_000_000).astype(np.float32)
    add("topk k=100 float32 n=1000000", lambda x: st.topk(x, 100), lambda x: torch.topk(x, 100), both(big))

    for rows, cols, k in ((10_000, 64, 5_000), (100_000, 128, 50_000), (1_000, 1024, 4_096)):
        src = rng.standard_normal((rows, cols)).astype(np.float32)
        idx = rng.integers(0, rows, k).astype(np.int64)
        xs, xt = both(src)
        js, jt = both(idx)
        add(f"index_select dim0 ({rows},{cols}) k={k}", lambda x, j: st.index_select(x, 0, j),
            lambda x, j: torch.index_select(x, 0, j), (xs, js, xt, jt))
    src = rng.standard_normal((1000, 1000)).astype(np.float32)
    idx = rng.integers(0, 1000, 500).astype(np.int64)
    xs, xt = both(src)
    js, jt = both(idx)
    add("index_select dim1 (1000,1000) k=500", lambda x, j: st.index_select(x, 1, j),
        lambda x, j: torch.index_select(x, 1, j), (xs, js, xt, jt))
    idx = rng.integers(0, 1000, 4000).astype(np.int64)
    js, jt = both(idx)
    add("index_select dim1 (1000,1000) k=4000", lambda x, j: st.index_select(x, 1, j),
        lambda x, j: torch.index_select(x, 1, j), (xs, js, xt, jt))

    for shape in ((100_000,), (1000, 1000), (4_000_000,)):
        a = rng.standard_normal(shape).astype(np.float32)
        a[rng.random(shape) < 0.1] = np.nan
        add(f"nansum float32 {shape}", lambda x: st.nansum(x), lambda x: torch.nansum(x), both(a))
    a = rng.standard_normal((1000, 1000)).astype(np.float32)
    a[rng.random(a.shape) < 0.1] = np.nan
    add("nansum float32 (1000,1000) dim=1", lambda x: st.nansum(x, 1), lambda x: torch.nansum(x, 1), both(a))
    add("nansum float32 (1000,1000) dim=0", lambda x: st.nansum(x, 0), lambda x: torch.nansum(x, 0), both(a))
    a64 = rng.standard_normal(1_000_000)
    a64[rng.random(a64.shape) < 0.1] = np.nan
    add("nansum float64 (1000000,)", lambda x: st.nansum(x), lambda x: torch.nansum(x), both(a64))

    for n in (10_000, 1_000_000):
        u = rng.uniform(-0.999, 0.999, n).astype(np.float32)
        add(f"erfinv float32 n={n}", lambda x: st.erfinv(x), lambda x: torch.erfinv(x), both(u))
        add(f"erfinv float64 n={n}", lambda x: st.erfinv(x), lambda x: torch.erfinv(x),
            both(u.astype(np.float64)))

    for num, dim, bags, per in ((10_000, 64, 1_000, 20), (100_000, 128, 4_096, 50)):
        w = rng.standard_normal((num, dim)).astype(np.float32)
        inp = rng.integers(0, num, bags * per).astype(np.int64)
        off = (np.arange(bags) * per).astype(np.int64)
        ws, wt = both(w)
        is_, it = both(inp)
        os_, ot = both(off)
        for mode in ("sum", "mean", "max"):
            add(f"embedding_bag {mode} ({num},{dim}) bags={bags}x{per}",
                lambda i, o, w, mode=mode: SF.embedding_bag(i, w, o, mode=mode),
                lambda i, o, w, mode=mode: TF.embedding_bag(i, w, o, mode=mode), (is_, os_, ws, it, ot, wt))

    for shape, d in (((100_000,), 0), ((1000, 1000), 1), ((1000, 1000), 0)):
        a = rng.standard_normal(shape).astype(np.float32)
        add(f"cummax float32 {shape} dim={d}", lambda x, d=d: st.cummax(x, d), lambda x, d=d: torch.cummax(x, d),
            both(a))

    for n, hi in ((100_000, 100), (1_000_000, 10_000)):
        b = rng.integers(0, hi, n).astype(np.int64)
        add(f"bincount n={n} bins={hi}", lambda x: st.bincount(x), lambda x: torch.bincount(x), both(b))
        wgt = rng.standard_normal(n)
        bs, bt = both(b)
        ws, wt = both(wgt)
        add(f"bincount weighted n={n} bins={hi}", lambda x, w: st.bincount(x, w), lambda x, w: torch.bincount(x, w),
            (bs, ws, bt, wt))
    return out


def main():
    argv = sys.argv[1:]
    threads = 2
    if "--threads" in argv:
        threads = int(argv[argv.index("--threads") + 1])
        del argv[argv.index("--threads"):argv.index("--threads") + 2]
    torch.set_num_threads(threads)
    st.set_num_threads(threads)
    print(f"threads={threads} torch {torch.__version__}")
    for name, fs, ft, args in cases():
        if argv and not any(w in name for w in argv):
            continue
        h = len(args) // 2
        sa, ta = args[:h], args[h:]
        a = bench(lambda: fs(*sa))
        b = bench(lambda: ft(*ta))
        print(f"{name:48s} strata {a * 1e3:9.3f} ms  torch {b * 1e3:9.3f} ms  ratio {a / b:6.2f}", flush=True)


if __name__ == "__main__":
    main()
