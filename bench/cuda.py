"""The CUDA runtime against torch's in the same run (scripts/test_gpu.sh; docs/CUDA.md, "GPU test suite"):
copy bandwidth host->device, device->host (pageable and pinned host memory) and device->device; the caching
allocator's allocate+free (`empty` then drop) from Python; stream and event overhead. Prints, per row, Strata's
and torch's figure and the ratio Strata / torch (for times: below 1 = Strata faster; for bandwidth: above 1 =
Strata faster). Every copy's result is checked once before it is timed.

    PYTHONPATH=python python3 bench/cuda.py [--quick] [--out FILE]

Without a GPU it says so and exits 0. With STRATA_CUDA_DRIVER=fake it runs Strata's side on the fake driver (torch's
side is then n/a): that only checks that the script runs; the figures mean nothing there.
"""
import gc
import os
import statistics
import sys
import time

import strata as st

QUICK = "--quick" in sys.argv
OUT = sys.argv[sys.argv.index("--out") + 1] if "--out" in sys.argv else None
FAKE = os.environ.get("STRATA_CUDA_DRIVER") == "fake"
COPY_BYTES = (4 << 20) if QUICK else (256 << 20)
COPY_REPS = 3 if QUICK else 10
SMALL_REPS = 2000 if QUICK else 50000

try:
    import torch

    HAVE_TORCH = torch.cuda.is_available() and not FAKE
except Exception:  # pragma: no cover - torch is the image's own
    torch = None
    HAVE_TORCH = False

ROWS = []  # (name, unit, strata value, torch value or None)


def say(line):
    print(line, flush=True)


def median_s(fn, sync, reps):
    """Median wall time of fn() with the device synchronized before and after (both inside the timing)."""
    fn()
    sync()
    ts = []
    for _ in range(reps):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def per_call_ns(fn, reps):
    """Best of 5 runs of `reps` calls, in ns per call (host time; the queue is not waited on inside)."""
    for _ in range(min(reps, 1000)):
        fn()
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter_ns()
        for _ in range(reps):
            fn()
        best = min(best, (time.perf_counter_ns() - t0) / reps)
    return best


class Side:
    """One framework's version of the calls the benchmark makes."""

    def __init__(self, mod):
        self.m = mod
        self.cuda = mod.cuda

    def sync(self):
        self.cuda.synchronize()

    def host(self, n, pinned):
        h = self.m.empty(n, dtype=self.m.uint8)
        h.fill_(7)
        return h.pin_memory() if pinned else h

    def dev(self, n):
        return self.m.empty(n, dtype=self.m.uint8, device="cuda")


def copy_rows(s, name):
    n = COPY_BYTES
    out = {}
    for pinned in (False, True):
        kind = "pinned" if pinned else "pageable"
        h, d = s.host(n, pinned), s.dev(n)
        d.copy_(h, non_blocking=pinned)
        s.sync()
        back = s.host(n, pinned)
        back.fill_(0)
        back.copy_(d, non_blocking=pinned)
        s.sync()
        assert int(back[n - 1].item()) == 7 and int(back[0].item()) == 7, f"{name}: {kind} round trip wrong"
        t = median_s(lambda: d.copy_(h, non_blocking=pinned), s.sync, COPY_REPS)
        out[f"H2D {kind}"] = n / t / 1e9
        t = median_s(lambda: back.copy_(d, non_blocking=pinned), s.sync, COPY_REPS)
        out[f"D2H {kind}"] = n / t / 1e9
        del h, back
    d2 = s.dev(n)
    d2.copy_(d)
    t = median_s(lambda: d2.copy_(d), s.sync, COPY_REPS)
    out["D2D (read+write)"] = 2 * n / t / 1e9
    del d, d2
    gc.collect()
    s.cuda.empty_cache()
    return out


def small_rows(s):
    m, cuda = s.m, s.cuda
    out = {}
    s.sync()
    out["empty(1000) cuda, alloc+free"] = per_call_ns(lambda: m.empty(1000, device="cuda"), SMALL_REPS)
    out["empty(1<<20) cuda, alloc+free"] = per_call_ns(lambda: m.empty(1 << 20, device="cuda"), SMALL_REPS)
    out["empty(1000) cpu (host reference)"] = per_call_ns(lambda: m.empty(1000), SMALL_REPS)
    stream = cuda.Stream()
    ev = cuda.Event()
    out["Event.record"] = per_call_ns(lambda: ev.record(stream), SMALL_REPS)
    s.sync()
    out["Event.query (completed)"] = per_call_ns(ev.query, SMALL_REPS)
    out["Stream.query (idle)"] = per_call_ns(stream.query, SMALL_REPS)

    def ctx():
        with cuda.stream(stream):
            pass

    out["with stream(s): (enter+exit)"] = per_call_ns(ctx, SMALL_REPS // 5)
    out["Stream() (from the pool)"] = per_call_ns(cuda.Stream, SMALL_REPS // 5)

    def rec_sync():
        ev.record(stream)
        ev.synchronize()

    out["Event.record+synchronize"] = per_call_ns(rec_sync, SMALL_REPS // 5)
    t0, t1 = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)

    def timed():
        t0.record(stream)
        t1.record(stream)
        t1.synchronize()
        return t0.elapsed_time(t1)

    out["timing events, record x2+sync+elapsed"] = per_call_ns(timed, SMALL_REPS // 10)
    s.sync()
    return out


def main():
    if not FAKE and not st.cuda.is_available():
        say(f"no GPU: {st.cuda.is_available_reason()} (bench/cuda.py needs one; STRATA_CUDA_DRIVER=fake runs it "
            "on the fake driver)")
        return 0
    sides = [("strata", Side(st))] + ([("torch", Side(torch))] if HAVE_TORCH else [])
    name = st.cuda.get_device_name(0)
    say(f"device: {name}; copies of {COPY_BYTES >> 20} MiB, median of {COPY_REPS}; small calls: best of 5 x "
        f"{SMALL_REPS}; torch {torch.__version__ if torch else 'absent'}{'' if HAVE_TORCH else ' (its side n/a)'}")
    res = {}
    for label, s in sides:
        res[label] = {}
        res[label].update({(k, "GB/s"): v for k, v in copy_rows(s, label).items()})
        res[label].update({(k, "ns"): v for k, v in small_rows(s).items()})
    lines = [f"{'':44s} {'strata':>12s} {'torch':>12s} {'strata/torch':>13s}"]
    for key, v in res["strata"].items():
        what, unit = key
        tv = res.get("torch", {}).get(key)
        ratio = f"{v / tv:13.2f}" if tv else f"{'n/a':>13s}"
        tvs = f"{tv:12.1f}" if tv else f"{'n/a':>12s}"
        lines.append(f"{what + ' [' + unit + ']':44s} {v:12.1f} {tvs} {ratio}")
    table = "\n".join(lines)
    say(table)
    if OUT:
        with open(OUT, "w") as f:
            f.write(f"bench/cuda.py on {name}{' (FAKE driver: figures meaningless)' if FAKE else ''}\n{table}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
