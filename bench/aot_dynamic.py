"""Training steps compiled with symbolic sizes (Note [Symbolic sizes through AOT autograd] in
python/strata/_dynamo/aot_dynamic.py): a batch size that changes every call.

For each model, the step (forward, loss, backward; SGD in eager) runs at every batch size in turn:
  eager      strata eager
  symbolic   strata.compile(backend=strata_cpp): static first entry, then one symbolic entry whose forward
             and backward graphs are AOT-compiled with symbolic sizes
  replay     the same, with the symbolic AOT step refused (what the symbolic entry did before: the
             captured graph replayed with eager autograd)
  static     strata.compile(dynamic=False): one entry per size
Printed: compile count (entries) and first-pass wall time (compiles included), then per size the
thread CPU time of one step (minimum over --repeat rounds; rows interleaved per size).

  PYTHONPATH=python .venv/bin/python bench/aot_dynamic.py [--repeat 7] [--model mlp|transformer|both]
"""

import argparse
import os
import sys
import time
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "python", "compile"))

import strata  # noqa: E402
import strata.nn as nn  # noqa: E402
import strata.nn.functional as F  # noqa: E402
from strata._dynamo import eval_frame, aot_dynamic  # noqa: E402
from strata._dynamo.aot import AOTUnsupported  # noqa: E402


def mlp_case():
    from test_compile import MLP
    m = MLP(d=256, depth=3).train()

    def step(model, x, t):
        return F.cross_entropy(model(x), t)

    def make(n):
        return strata.randn(n, 256), strata.randint(0, 2, (n,))
    return m, step, make, list(range(32, 513, 32))


def transformer_case():
    from test_aot import Transformer
    m = Transformer(d=64)

    def step(model, x, t):
        return F.cross_entropy(model(x).reshape(-1, 7), t.reshape(-1))

    def make(n):
        return strata.randn(n, 32, 64), strata.randint(0, 7, (n, 32))
    return m, step, make, list(range(2, 33, 2))


def cpu():
    return time.thread_time()


def one_step(model, fn, args, opt):
    opt.zero_grad()
    loss = fn(model, *args)
    loss.backward()
    opt.step()


def entries(fn):
    return [e for s in eval_frame.states_of(fn.__code__) for e in s.entries]


def run(case, repeat):
    model, step, make, sizes = case()
    opt = strata.optim.SGD(model.parameters(), lr=1e-4)
    strata.manual_seed(0)
    data = {n: make(n) for n in sizes}

    def refuse(*a, **k):
        raise AOTUnsupported("refused (bench baseline)")

    variants = {}
    first = {}
    strata.compiler.reset()
    for name in ("symbolic", "replay", "static"):
        # A code object of its own per variant: each has its own frame cache.
        fn = types.FunctionType(step.__code__.replace(co_name=f"step_{name}"), step.__globals__, f"step_{name}")
        orig = aot_dynamic._symbolize
        if name == "replay":
            aot_dynamic._symbolize = refuse
        try:
            f = strata.compile(fn, backend="strata_cpp", dynamic=False if name == "static" else None)
            t0 = time.perf_counter()
            for n in sizes:
                one_step(model, f, data[n], opt)
            first[name] = (time.perf_counter() - t0, len(entries(fn)))
            variants[name] = f
        finally:
            aot_dynamic._symbolize = orig
    best = {name: {n: float("inf") for n in sizes} for name in ("eager",) + tuple(variants)}
    for _ in range(repeat):
        for n in sizes:
            for name in best:
                fn = step if name == "eager" else variants[name]
                t0 = cpu()
                one_step(model, fn, data[n], opt)
                best[name][n] = min(best[name][n], cpu() - t0)
    return sizes, first, best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--model", default="both")
    a = ap.parse_args()
    strata.set_num_threads(1)
    print(f"load average {os.getloadavg()[0]:.1f}; strata threads 1; thread CPU time, min of {a.repeat}")
    cases = {"mlp": mlp_case, "transformer": transformer_case}
    for name, case in cases.items():
        if a.model not in ("both", name):
            continue
        sizes, first, best = run(case, a.repeat)
        print(f"\n== {name}: batch sizes {sizes[0]}..{sizes[-1]} step {sizes[1] - sizes[0]} ==")
        for v, (wall, k) in first.items():
            print(f"  {v:9s} entries {k:3d}   first pass over all sizes (compiles included) {wall * 1e3:8.1f} ms")
        cols = list(best)
        print("  batch " + "".join(f"{c:>11s}" for c in cols) + "   symbolic/eager  replay/eager")
        for n in sizes:
            row = "".join(f"{best[c][n] * 1e3:9.3f}ms" for c in cols)
            print(f"  {n:5d} {row}   {best['symbolic'][n] / best['eager'][n]:13.2f}x {best['replay'][n] / best['eager'][n]:12.2f}x")
        tot = {c: sum(best[c].values()) for c in cols}
        print("  total " + "".join(f"{tot[c] * 1e3:9.2f}ms" for c in cols)
              + f"   {tot['symbolic'] / tot['eager']:13.2f}x {tot['replay'] / tot['eager']:12.2f}x")


if __name__ == "__main__":
    main()
