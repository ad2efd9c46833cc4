"""The fusing code generator (backend="strata_cpp") against Strata eager and torch.compile(inductor).

    PYTHONPATH=python python bench/codegen.py [--no-torch]

(a) the tanh form of GELU written out as 8 pointwise ops on 32M floats;
(b) a 7-op pointwise chain on 1M floats;
(c) rows of (4096, 1024) float32: softmax written out, F.softmax, F.layer_norm with weight and bias
    (row kernels, Note [Row kernels] in python/strata/_inductor/ir.py) -- steady-state per call only.
For each: per-call time (minimum over repeats) of Strata eager, strata.compile(backend="strata_cpp"),
torch eager and torch.compile(backend="inductor"), and strata_cpp's first-call time with an empty
kernel cache (capture + g++) and in a fresh process with the kernel on disk (capture + dlopen).
Prints a table; asserts nothing."""

import argparse
import os
import subprocess
import sys
import tempfile
import time

import strata as st


def gelu_chain(x):
    return 0.5 * x * (1 + (0.7978845608 * (x + 0.044715 * x * x * x)).tanh())


def chain7(x, y):
    return ((x * y + 1.0).relu() - y).sigmoid() * x / 2.0


def softmax_written(x):
    e = (x - x.amax(-1, keepdim=True)).exp()
    return e / e.sum(-1, keepdim=True)


def rows_table(no_torch):
    import strata.nn.functional as F
    x = st.randn(4096, 1024)
    w, b = st.randn(1024), st.randn(1024)
    cases = (("softmax written out", softmax_written, (x,), None),
             ("F.softmax", lambda x: F.softmax(x, -1), (x,), None),
             ("F.layer_norm (w, b)", lambda x, w, b: F.layer_norm(x, (1024,), w, b), (x, w, b), None))
    for name, fn, args, _ in cases:
        # 15 repeats of ~0.2 s, minimum: the shared 2-core machine gives outliers of 10-40x.
        eager = per_call(fn, args, repeat=15)
        comp = per_call(st.compile(fn, backend="strata_cpp"), args, repeat=15)
        line = f"{name} (4096, 1024) f32: strata eager {eager * 1e3:.3f} ms, strata_cpp {comp * 1e3:.3f} ms"
        if not no_torch:
            import torch
            import torch.nn.functional as TF
            targs = tuple(torch.from_numpy(a.numpy()) for a in args)
            tfn = {"softmax written out": softmax_written, "F.softmax": lambda x: TF.softmax(x, -1),
                   "F.layer_norm (w, b)": lambda x, w, b: TF.layer_norm(x, (1024,), w, b)}[name]
            te = per_call(tfn, targs, repeat=15)
            try:
                ti = per_call(torch.compile(tfn, backend="inductor"), targs, repeat=15)
                line += f", torch eager {te * 1e3:.3f} ms, torch.compile(inductor) {ti * 1e3:.3f} ms"
            except Exception as e:  # noqa: BLE001
                line += f", torch eager {te * 1e3:.3f} ms, inductor failed: {type(e).__name__}"
        print(line)


def per_call(fn, args, repeat=5, n=None):
    fn(*args)
    t0 = time.perf_counter()
    fn(*args)
    one = time.perf_counter() - t0
    n = n or max(1, int(0.2 / max(one, 1e-6)))
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(n):
            fn(*args)
        best = min(best, (time.perf_counter() - t0) / n)
    return best


_FIRST = """
import sys, time
sys.path.insert(0, {here!r})
import strata as st
from codegen import gelu_chain, chain7
from strata._inductor import codecache
x = st.randn({n})
args = (x,) if {which!r} == "gelu" else (x, st.rand({n}) + 0.5)
fn = gelu_chain if {which!r} == "gelu" else chain7
t0 = time.perf_counter()
st.compile(fn, backend="strata_cpp")(*args)
print(time.perf_counter() - t0, codecache.stats["compiles"])
"""


def first_call(which, n, cache):
    code = _FIRST.format(here=os.path.dirname(os.path.abspath(__file__)), n=n, which=which)
    env = dict(os.environ, STRATA_CACHE_DIR=cache)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    t, compiles = out.split()
    return float(t), int(compiles)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--rows-only", action="store_true")
    a = ap.parse_args()
    if a.rows_only:
        rows_table(a.no_torch)
        return
    rows = []
    for which, n, fn in (("gelu", 32 << 20, gelu_chain), ("chain7", 1 << 20, chain7)):
        x = st.randn(n)
        args = (x,) if which == "gelu" else (x, st.rand(n) + 0.5)
        with tempfile.TemporaryDirectory() as cache:
            cold, c1 = first_call(which, n, cache)
            warm, c2 = first_call(which, n, cache)
            os.environ["STRATA_CACHE_DIR"] = cache
            eager = per_call(fn, args)
            comp = per_call(st.compile(fn, backend="strata_cpp"), args)
        r = {"what": f"{which} ({n / 2**20:.0f}M floats)", "eager": eager, "cpp": comp, "cold": cold, "warm": warm,
             "compiles": (c1, c2)}
        if not a.no_torch:
            import torch
            tx = torch.from_numpy(x.numpy())
            targs = (tx,) if which == "gelu" else (tx, torch.from_numpy(args[1].numpy()))
            r["torch"] = per_call(fn, targs)
            try:
                tc = torch.compile(fn, backend="inductor")
                t0 = time.perf_counter()
                tc(*targs)
                r["ind_first"] = time.perf_counter() - t0
                r["inductor"] = per_call(tc, targs)
            except Exception as e:  # noqa: BLE001
                r["inductor"] = None
                print("inductor failed:", type(e).__name__, e)
        rows.append(r)
    print(f"threads: strata {st.get_num_threads() if hasattr(st, 'get_num_threads') else '?'}")
    for r in rows:
        print(f"{r['what']}: strata eager {r['eager'] * 1e3:.2f} ms, strata_cpp {r['cpp'] * 1e3:.2f} ms "
              f"({r['eager'] / r['cpp']:.2f}x), first call cold {r['cold']:.2f} s / disk cache {r['warm'] * 1e3:.0f} ms "
              f"(compiler calls {r['compiles'][0]} / {r['compiles'][1]})")
        if "torch" in r:
            ind = r.get("inductor")
            print(f"    torch eager {r['torch'] * 1e3:.2f} ms, torch.compile(inductor) "
                  + (f"{ind * 1e3:.2f} ms (first call {r['ind_first']:.1f} s)" if ind else "failed"))
    rows_table(a.no_torch)


if __name__ == "__main__":
    main()
