"""Strata's benchmark suite: one table of ratios, full numbers in JSON.

    .venv/bin/python bench/run.py            # default run (about 3 minutes)
    .venv/bin/python bench/run.py --quick    # about 30 seconds

Every figure is measured side by side in the same run, peers interleaved call by call (the machines are shared
and noisy, see /work/shared/PERFORMANCE.md): warm-up, repeats, median with min
and max. Ratios are throughput ratios (Strata / peer): above 1 means Strata is
faster.

Sections
- fp32 GEMM, square n=64..4096 and skinny shapes: Strata (strata.mm) vs PyTorch
  (torch.mm) vs oneDNN's dnnl_sgemm called directly through ctypes, GFLOP/s.
- Large elementwise add and mul on 32M float32 (out= variants, so allocation is
  not timed): Strata vs PyTorch vs NumPy vs a plain C++ OpenMP loop
  (build/bench/c_loop), GB/s counting 12 bytes per element.
"""

import argparse
import ctypes
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))

import strata as st  # noqa: E402

try:
    import torch
except Exception:  # pragma: no cover
    torch = None


def measure(fns, target_s, min_reps=7, max_reps=1000):
    """Median/min/max seconds per call for each of fns (a dict name -> callable).

    The peers' calls are interleaved (a, b, c, a, b, c, ...) so that bursts of
    load from other users of the machine hit all of them alike: the ratios stay
    meaningful even when the absolute numbers do not. One warm-up call each,
    then as many rounds as fill target_s.
    """
    one = 0.0
    for fn in fns.values():
        fn()
        t0 = time.perf_counter()
        fn()
        one += max(time.perf_counter() - t0, 1e-7)
    reps = int(min(max_reps, max(min_reps, target_s / one)))
    times = {name: [] for name in fns}
    for _ in range(reps):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    out = {}
    for name, ts in times.items():
        ts.sort()
        out[name] = {"median": ts[len(ts) // 2], "min": ts[0], "max": ts[-1], "reps": reps}
    return out


def rate(t, work):
    """Seconds -> work per second (median uses the median time; min rate uses the max time)."""
    return {"median": work / t["median"], "min": work / t["max"], "max": work / t["min"], "reps": t["reps"]}


def load_dnnl():
    for name in ("libdnnl.so.2", "libdnnl.so.3", "libdnnl.so"):
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        f = lib.dnnl_sgemm
        i64, fl, p = ctypes.c_int64, ctypes.c_float, ctypes.c_void_p
        f.argtypes = [ctypes.c_char, ctypes.c_char, i64, i64, i64, fl, p, i64, p, i64, fl, p, i64]
        f.restype = ctypes.c_int
        return f
    return None


def bench_gemm(shapes, target_s, threads):
    dnnl = load_dnnl()
    rows = []
    rng = np.random.default_rng(0)
    for m, k, n in shapes:
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = rng.standard_normal((k, n), dtype=np.float32)
        flops = 2.0 * m * n * k / 1e9
        row = {"shape": [m, k, n], "unit": "GFLOP/s"}
        sa, sb = st.from_numpy(a), st.from_numpy(b)
        sout = st.from_numpy(np.empty((m, n), np.float32))
        fns = {"strata": lambda: st.mm(sa, sb, out=sout)}
        if torch is not None:
            ta, tb = torch.from_numpy(a), torch.from_numpy(b)
            tout = torch.empty((m, n))
            fns["torch"] = lambda: torch.mm(ta, tb, out=tout)
        if dnnl is not None:
            c = np.empty((m, n), np.float32)
            pa, pb, pc = a.ctypes.data, b.ctypes.data, c.ctypes.data
            fns["dnnl_direct"] = lambda: dnnl(b"N", b"N", m, n, k, 1.0, pa, k, pb, n, 0.0, pc, n)
        for name, t in measure(fns, target_s).items():
            row[name] = rate(t, flops)
        rows.append(row)
        print(f"  gemm {m}x{k}x{n}: strata {row['strata']['median']:.1f} GFLOP/s", file=sys.stderr)
    return rows


def bench_elementwise(n, target_s, threads, c_loop_reps):
    rows = []
    a = np.random.default_rng(1).standard_normal(n, dtype=np.float32)
    b = np.random.default_rng(2).standard_normal(n, dtype=np.float32)
    c = np.empty_like(a)
    gb = 12.0 * n / 1e9
    c_loop = None
    exe = ROOT / "build" / "bench" / "c_loop"
    if exe.exists():
        out = subprocess.run([str(exe), str(n), str(c_loop_reps), str(threads)], capture_output=True, text=True,
                             timeout=300)
        if out.returncode == 0:
            c_loop = json.loads(out.stdout)
    for op in ("add", "mul"):
        row = {"op": op, "n": n, "unit": "GB/s"}
        sa, sb, sc = st.from_numpy(a), st.from_numpy(b), st.from_numpy(np.empty_like(a))
        sfn = getattr(st, op)
        nfn = np.add if op == "add" else np.multiply
        fns = {"strata": lambda: sfn(sa, sb, out=sc), "numpy": lambda: nfn(a, b, out=c)}
        if torch is not None:
            ta, tb, tc = torch.from_numpy(a), torch.from_numpy(b), torch.empty(n)
            tfn = getattr(torch, op)
            fns["torch"] = lambda: tfn(ta, tb, out=tc)
        for name, t in measure(fns, target_s).items():
            row[name] = rate(t, gb)
        if c_loop is not None:
            row["c_loop"] = c_loop[op]
        rows.append(row)
        print(f"  {op} {n}: strata {row['strata']['median']:.1f} GB/s", file=sys.stderr)
    return rows


def ratio(row, peer):
    if peer not in row:
        return "   n/a"
    return f"{row['strata']['median'] / row[peer]['median']:6.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a 30-second version (fewer sizes and repeats)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "latest.json"))
    args = ap.parse_args()

    st.set_num_threads(args.threads)
    if torch is not None:
        torch.set_num_threads(args.threads)
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))

    if args.quick:
        square = [64, 256, 1024, 2048]
        skinny = [(64, 4096, 4096), (1, 4096, 4096)]
        target, n_elem, c_reps = 1.0, 1 << 25, 5
    else:
        square = [64, 128, 256, 512, 1024, 2048, 4096]
        skinny = [(64, 4096, 4096), (1, 4096, 4096), (4096, 4096, 64), (256, 64, 4096)]
        target, n_elem, c_reps = 4.0, 1 << 25, 15

    t_start = time.time()
    print(f"[bench] BLAS: {st.blas.backend()}", file=sys.stderr)
    gemm = bench_gemm([(s, s, s) for s in square] + skinny, target, args.threads)
    elem = bench_elementwise(n_elem, target, args.threads, c_reps)
    elapsed = time.time() - t_start

    result = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "machine": {"cpu": platform.processor() or platform.machine(), "nproc": os.cpu_count(),
                    "threads": args.threads},
        "strata_blas": st.blas.backend(),
        "torch": getattr(torch, "__version__", None),
        "numpy": np.__version__,
        "quick": args.quick,
        "seconds": elapsed,
        "gemm_fp32": gemm,
        "elementwise": elem,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))

    print(f"Strata benchmark ({'quick' if args.quick else 'default'}, {args.threads} threads, {elapsed:.0f} s)")
    print(f"BLAS: {result['strata_blas']}")
    print("Ratios are Strata throughput / peer throughput (median); >1 means Strata is faster.")
    print()
    print(f"{'fp32 GEMM (MxKxN)':<24}{'strata GFLOP/s':>15}{'vs torch':>10}{'vs dnnl':>10}   [min..max]")
    for r in gemm:
        m, k, n = r["shape"]
        s = r["strata"]
        print(f"{f'{m}x{k}x{n}':<24}{s['median']:>15.1f}{ratio(r, 'torch'):>10}{ratio(r, 'dnnl_direct'):>10}"
              f"   [{s['min']:.0f}..{s['max']:.0f}]")
    print()
    print(f"{'elementwise (32M fp32)':<24}{'strata GB/s':>15}{'vs torch':>10}{'vs numpy':>10}{'vs C loop':>11}")
    for r in elem:
        print(f"{r['op']:<24}{r['strata']['median']:>15.1f}{ratio(r, 'torch'):>10}{ratio(r, 'numpy'):>10}"
              f"{ratio(r, 'c_loop'):>11}")
    print()
    print(f"full numbers: {args.out}")


if __name__ == "__main__":
    main()
