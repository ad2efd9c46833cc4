"""Training steps compiled ahead of time (AOT autograd), and backend "strata_cpp" on them.

Section "partition" (the default set runs every section): one training step (forward +
backward) of the MLP and of the 2-block transformer of tests/python/compile/test_aot.py under
eager vs strata.compile(backend="eager" / "strata_cpp" / "aot_eager"), and the AOT partition's
saved-tensor decisions (min-cut vs what eager autograd keeps vs every forward intermediate).

Section "main": full training steps (zero_grad, forward, loss, backward, clip, AdamW) of the two
main-job models (examples/train_digits.py, examples/train_charlm.py at bench/train_step.py's
sizes) under eager strata, strata.compile(model, backend="strata_cpp"), torch eager and
torch.compile(model) (Inductor), in the same run, with ratios; and the peak CPU memory of one
step, strata eager vs strata_cpp.

Section "strata": the char transformer's full training step under strata eager, aot_eager and
strata_cpp only, interleaved (one step of each in turn, --steps rounds), timed in thread CPU time
(time.thread_time: with 1 thread a step's own work, far less sensitive to other jobs on a shared
machine than wall time), with the ratios and each backend's allocator peak of one step.

Section "latency": compile latency of a training step of one transformer block (d=128): strata_cpp
cold (fresh STRATA_CACHE_DIR, new process) and warm (the same cache, new process) against
torch.compile cold (fresh TORCHINDUCTOR_CACHE_DIR, new process).

    PYTHONPATH=python python bench/aot_train_step.py [--reps N] [--section partition|main|latency]
        [--threads 1] [--steps 20]; --section strata is not part of "all"."""

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


def partition_section(args):
    for name, m, x, t, loss in models():
        def step_fn(model, x, t, _loss=loss):
            return _loss(model, x, t)

        def run(f):
            m.zero_grad()
            f(m, x, t).backward()

        # The compile cache is per code object (as torch's): reset between backends.
        res = {"eager": timed(lambda: run(step_fn), args.reps)}
        for backend in ("eager", "strata_cpp", "aot_eager"):
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


# ---- main-job training steps -------------------------------------------------------------------

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))


def main_job_steps(fw, compiled):
    """{name: (step callable, model)} for the two main-job models under framework module fw."""
    import numpy as np
    import train_charlm
    import train_digits
    fw.manual_seed(0)
    out = {}
    xtr, ytr, _, _ = train_digits.load_data(0)
    x, y = fw.from_numpy(xtr[:64]), fw.from_numpy(ytr[:64])
    model = train_digits.build_model(fw).train()
    run_model = fw.compile(model, **compiled) if compiled is not None else model
    opt = fw.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-2)
    loss_fn = fw.nn.CrossEntropyLoss()
    out["digits CNN (batch 64)"] = lambda: train_digits.train_step(fw, run_model, opt, None, loss_fn, x, y, 1.0)
    rng = np.random.RandomState(0)
    vocab, block, batch = 70, 64, 32
    model2 = train_charlm.build_model(fw, vocab_size=vocab, block=block, d_model=128, n_layers=2, n_heads=4,
                                      dropout=0.0).train()
    run_model2 = fw.compile(model2, **compiled) if compiled is not None else model2
    opt2 = fw.optim.AdamW(model2.parameters(), lr=1e-3, weight_decay=1e-2, betas=(0.9, 0.98))
    xc = fw.from_numpy(rng.randint(0, vocab, size=(batch, block)).astype(np.int64))
    yc = fw.from_numpy(rng.randint(0, vocab, size=(batch, block)).astype(np.int64))
    out["char transformer (2 layers, d=128, 32x64)"] = lambda: train_charlm.train_step(fw, run_model2, opt2, None, xc,
                                                                                       yc, 1.0)
    return out


def step_ms(step, n):
    import statistics
    for _ in range(3):
        step()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        step()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), min(times)


def strata_peak(step):
    from strata import _C
    step()
    _C._reset_peak_memory_stats()
    base = _C._cpu_allocator_stats()["allocated_bytes"]
    step()
    return _C._cpu_allocator_stats()["peak_bytes"] - base


def main_section(args):
    import torch
    torch.set_num_threads(args.threads)
    strata.set_num_threads(args.threads)
    configs = [("strata eager", strata, None), ("strata.compile(strata_cpp)", strata, {"backend": "strata_cpp"}),
               ("torch eager", torch, None), ("torch.compile(inductor)", torch, {})]
    res = {}
    for label, fw, compiled in configs:
        t0 = time.perf_counter()
        steps = main_job_steps(fw, compiled)
        for name, step in steps.items():
            t1 = time.perf_counter()
            step()
            first = time.perf_counter() - t1
            med, best = step_ms(step, args.steps)
            res[(label, name)] = (med, best, first)
        del t0
    mem = {}
    for label, compiled in (("strata eager", None), ("strata.compile(strata_cpp)", {"backend": "strata_cpp"})):
        strata.compiler.reset()
        for name, step in main_job_steps(strata, compiled).items():
            mem[(label, name)] = strata_peak(step)
    names = list(main_job_steps(strata, None))
    print(f"main-job training steps, threads={args.threads}, median (min) ms of {args.steps} steps after 3 warm-up "
          f"(first call incl. compile in brackets):")
    for name in names:
        print(f"  {name}")
        for label, _, _ in configs:
            med, best, first = res[(label, name)]
            print(f"    {label:28s} {med:8.2f} ({best:.2f}) ms   [first {first:.2f} s]")
        se, sc = res[("strata eager", name)][0], res[("strata.compile(strata_cpp)", name)][0]
        te, tc = res[("torch eager", name)][0], res[("torch.compile(inductor)", name)][0]
        print(f"    strata_cpp vs strata eager {se / sc:.2f}x, vs torch.compile {tc / sc:.2f}x, vs torch eager "
              f"{te / sc:.2f}x (higher: strata_cpp faster)")
        pe, pc = mem[("strata eager", name)], mem[("strata.compile(strata_cpp)", name)]
        print(f"    peak CPU memory of one step: strata eager {pe / 1e6:.2f} MB, strata_cpp {pc / 1e6:.2f} MB "
              f"({pc / max(pe, 1):.2f}x)")


def strata_section(args):
    strata.set_num_threads(args.threads)
    name = "char transformer (2 layers, d=128, 32x64)"
    labels = ("strata eager", "aot_eager", "strata_cpp") + (("max-autotune",) if args.autotune else ())
    steps, mem = {}, {}
    for label in labels:
        strata.compiler.reset()
        opts = None if label == "strata eager" else \
            {"backend": "strata_cpp", "mode": label} if label == "max-autotune" else {"backend": label}
        step = main_job_steps(strata, opts)[name]
        mem[label] = strata_peak(step)
        for _ in range(3):
            step()
        steps[label] = step
    times = {label: [] for label in labels}
    # Thread CPU time ignores other jobs' load but not the work of OpenMP's other threads: --wall with threads > 1.
    clock = time.perf_counter if args.wall else time.thread_time
    for _ in range(args.steps):
        for label in labels:
            t0 = clock()
            steps[label]()
            times[label].append((clock() - t0) * 1e3)
    print(f"{name}: full training step, {'wall' if args.wall else 'thread CPU'} ms over {args.steps} interleaved "
          f"steps, threads={args.threads}")
    base = sorted(times["strata eager"])
    for label in labels:
        t = sorted(times[label])
        print(f"  {label:14s} min {t[0]:7.2f}  median {t[len(t) // 2]:7.2f}  (eager/this: min {base[0] / t[0]:.3f}, "
              f"median {base[len(base) // 2] / t[len(t) // 2]:.3f})   peak {mem[label] / 1e6:.2f} MB")


# ---- compile latency ---------------------------------------------------------------------------

def latency_child(framework):
    """One cold or warm compile of a transformer block's training step in this (new) process."""
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "python", "compile"))
    t_import = time.perf_counter()
    if framework == "torch":
        import torch as fw
        nnm = fw.nn
    else:
        fw = strata
        nnm = strata.nn
    F_ = fw.nn.functional

    class Block(nnm.Module):
        def __init__(self, d=128, heads=4):
            super().__init__()
            self.heads = heads
            self.ln1, self.ln2 = nnm.LayerNorm(d), nnm.LayerNorm(d)
            self.qkv, self.proj = nnm.Linear(d, 3 * d), nnm.Linear(d, d)
            self.fc1, self.fc2 = nnm.Linear(d, 4 * d), nnm.Linear(4 * d, d)

        def forward(self, x):
            b, t, d = x.shape
            h = self.heads
            q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
            q = q.reshape(b, t, h, d // h).transpose(1, 2)
            k = k.reshape(b, t, h, d // h).transpose(1, 2)
            v = v.reshape(b, t, h, d // h).transpose(1, 2)
            y = F_.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
            x = x + self.proj(y)
            return x + self.fc2(F_.gelu(self.fc1(self.ln2(x))))

    fw.manual_seed(0)
    m = Block()
    x = fw.randn(8, 64, 128)
    m(x).sum().backward()  # eager warm-up: op libraries loaded before the clock starts
    t_import = time.perf_counter() - t_import
    c = fw.compile(m, backend="strata_cpp") if framework != "torch" else fw.compile(m)
    t0 = time.perf_counter()
    c(x).sum().backward()
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    c(x).sum().backward()
    second = time.perf_counter() - t0
    print(f"{first - second:.4f}")


def latency_section(args):
    import subprocess
    import tempfile
    env = dict(os.environ)
    root = os.path.dirname(HERE)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [os.path.join(root, "python"), env.get("PYTHONPATH")] if p)
    env["OMP_NUM_THREADS"] = str(args.threads)
    me = os.path.abspath(__file__)

    def child(framework, extra):
        e = dict(env, **extra)
        r = subprocess.run([sys.executable, me, "--latency-child", framework], env=e, capture_output=True, text=True,
                           timeout=900)
        if r.returncode != 0:
            raise RuntimeError(r.stderr[-3000:])
        return float(r.stdout.strip().splitlines()[-1])

    with tempfile.TemporaryDirectory() as d1, tempfile.TemporaryDirectory() as d2:
        cold = child("strata", {"STRATA_CACHE_DIR": d1})
        warms = sorted(child("strata", {"STRATA_CACHE_DIR": d1}) for _ in range(max(1, args.warm_runs)))
        tcold = None if args.no_torch else child("torch", {"TORCHINDUCTOR_CACHE_DIR": d2})
    print("compile latency, training step (forward+backward) of one transformer block (d=128, b=8, t=64), "
          "first call minus second call, each in a new process:")
    print(f"  strata.compile(strata_cpp): cold {cold * 1e3:.0f} ms, warm (disk cache) min {warms[0] * 1e3:.1f} ms, "
          f"median {warms[len(warms) // 2] * 1e3:.1f} ms of {len(warms)} processes")
    if tcold is not None:
        print(f"  torch.compile(inductor): cold {tcold * 1e3:.0f} ms")
        print(f"  strata cold / torch cold = {cold / tcold:.3f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--section", choices=["partition", "main", "strata", "latency", "all"], default="all")
    ap.add_argument("--latency-child", choices=["strata", "torch"])
    ap.add_argument("--autotune", action="store_true", help="strata: also strata_cpp with mode='max-autotune'")
    ap.add_argument("--wall", action="store_true", help="strata: wall-clock time instead of the thread's CPU time")
    ap.add_argument("--warm-runs", type=int, default=5, help="latency: warm compiles (new processes), min and median")
    ap.add_argument("--no-torch", action="store_true", help="latency: skip torch.compile's cold compile")
    args = ap.parse_args()
    if args.latency_child:
        latency_child(args.latency_child)
        return
    if args.section in ("partition", "all"):
        partition_section(args)
    if args.section in ("main", "all"):
        main_section(args)
    if args.section == "strata":
        strata_section(args)
    if args.section in ("latency", "all"):
        latency_section(args)


if __name__ == "__main__":
    main()
