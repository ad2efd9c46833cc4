"""One training step (forward + backward) of the MLP and of the 2-block transformer of
tests/python/compile/test_aot.py: eager vs strata.compile(backend="eager") vs
backend="aot_eager", and the AOT partition's saved-tensor decisions (min-cut vs what eager
autograd keeps vs every forward intermediate).

    PYTHONPATH=python python bench/aot_train_step.py [--reps N]"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "python", "compile"))

import strata  # noqa: E402
import strata.nn.functional as F  # noqa: E402
from strata._dynamo import aot  # noqa: E402
from test_compile import MLP  # noqa: E402
from test_aot import Transformer, ConvNet  # noqa: E402


def models():
    strata.manual_seed(0)
    out = []
    for d, n in ((8, 6), (256, 64)):
        m = MLP(d=d).train()
        x, t = strata.randn(n, d), strata.randint(0, 2, (n,))
        out.append((f"MLP d={d} batch={n} (train, dropout)", m, x, t, lambda m, x, t: F.cross_entropy(m(x), t)))
    for d, b, s in ((16, 2, 5), (128, 8, 64)):
        m = Transformer(d=d)
        x, t = strata.randn(b, s, d), strata.randint(0, 7, (b * s,))
        out.append((f"transformer 2 blocks d={d} b={b} t={s}", m, x, t,
                    lambda m, x, t: F.cross_entropy(m(x).reshape(-1, 7), t)))
    m = ConvNet().train()
    x, t = strata.randn(2, 3, 8, 8), strata.randint(0, 5, (2,))
    out.append(("conv net (BatchNorm2d train)", m, x, t, lambda m, x, t: F.cross_entropy(m(x), t)))
    return out


def timed(fn, reps):
    for _ in range(3):
        fn()
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        best = min(best, (time.perf_counter() - t0) / reps)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    for name, m, x, t, loss in models():
        def step_fn(model, x, t, _loss=loss):
            return _loss(model, x, t)

        def run(f):
            m.zero_grad()
            f(m, x, t).backward()

        # The compile cache is per code object (as torch's): reset between backends.
        res = {"eager": timed(lambda: run(step_fn), args.reps)}
        for backend in ("eager", "aot_eager"):
            strata.compiler.reset()
            f = strata.compile(step_fn, backend=backend)
            res[f"compile({backend})"] = timed(lambda f=f: run(f), args.reps)
        from strata._dynamo import eval_frame
        [entry] = next(st for st in eval_frame.states_of(step_fn.__code__) if st.entries).entries
        p = entry.run.__globals__["R"].plan.partition
        strata.compiler.reset()
        base = aot.partition(p.joint, recompute=False)
        g = p.forward
        every = [g.value(v) for v in g.inputs] + [g.value(o) for n in g.nodes for o in n.outputs]
        every_bytes = sum(aot._value_bytes(v) for v in every)
        print(f"{name}")
        print(f"  joint {p.joint.graph.num_ops} ops -> forward {p.forward.num_ops}, backward {p.backward.num_ops} "
              f"(recomputed: {len(p.recomputed)})")
        print(f"  saved: min-cut {len(p.saved)} values / {p.saved_bytes} B; eager-like {len(base.saved)} / "
              f"{base.saved_bytes} B; every forward value {len(every)} / {every_bytes} B")
        print("  step (forward+backward), best of 5 x %d: " % args.reps
              + ", ".join(f"{k} {v * 1e6:.0f} us" for k, v in res.items()))


if __name__ == "__main__":
    main()
