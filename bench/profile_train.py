"""Where a training step's time goes, Strata against PyTorch: the ops where Strata is slower.

    .venv/bin/python bench/profile_train.py                      # both models of the main job, 3 profiled steps each
    .venv/bin/python bench/profile_train.py --example train_charlm --steps 5 --top 10

For each examples/<name>.py with bench_step(lib) (the hook of bench/suite.py's train.* cases), each framework runs in
its own subprocess (same thread count and OMP_WAIT_POLICY=PASSIVE as the suite): two warm-up steps, then --steps
steps under its own profiler (strata.profiler.profile() / torch.profiler.profile()). Self CPU time per op is summed
by name with the namespace dropped (strata::mul and aten::mul are both "mul"), divided by the number of steps, and the
ops are listed by how much more time Strata spends in them than PyTorch. The two libraries do not decompose every op
alike (PyTorch's linear is addmm, its backward nodes have their own names), so a row whose other side is 0 may be
the same work under another name: read the whole table, not only the top rows.
"""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def worker(example, framework, threads, steps):
    sys.path.insert(0, str(ROOT / "examples"))
    if framework == "strata":
        sys.path.insert(0, str(ROOT / "python"))
        import strata as lib
        import strata.profiler as profiler
    else:
        import torch as lib
        import torch.profiler as profiler
    lib.set_num_threads(threads)
    _annotate_optimizer(lib, profiler.record_function)
    mod = __import__(example)
    step = mod.bench_step(lib)
    step()
    step()
    with profiler.profile() as prof:
        for _ in range(steps):
            step()
    ops = {}
    total = 0.0
    for e in prof.key_averages():
        name = e.key.split("::")[-1]
        row = ops.setdefault(name, {"self_us": 0.0, "calls": 0})
        row["self_us"] += e.self_cpu_time_total / steps
        row["calls"] += e.count / steps
        total += e.self_cpu_time_total / steps
    # Inclusive time of the outermost events: the ops the model code calls, each backward node (with the ops it
    # runs) and, where the library annotates it, the optimizer step; names normalised across the two libraries.
    units = {}
    for e in prof.events():
        if e.cpu_parent is not None:
            continue
        name = e.name.replace("autograd::engine::evaluate_function: ", "").split("::")[-1]
        name = UNIT_ALIASES.get(name, name)
        row = units.setdefault(name, {"total_us": 0.0, "calls": 0, "inside": {}})
        row["total_us"] += e.cpu_time_total / steps
        row["calls"] += 1 / steps
        todo = list(e.cpu_children)
        while todo:  # where the unit's time went: self time of everything it ran, by op name
            c = todo.pop()
            todo.extend(c.cpu_children)
            k = c.name.split("::")[-1]
            row["inside"][k] = row["inside"].get(k, 0.0) + c.self_cpu_time_total / steps
    return {"framework": framework, "steps": steps, "self_us_total_per_step": total, "ops": ops, "units": units}


# PyTorch's names for the same units of work -> Strata's (a linear's backward is AddmmBackward0 and TBackward0 there;
# its flash-attention kernel names its backward node; cross-entropy is log_softmax + nll_loss).
UNIT_ALIASES = {
    "AddmmBackward0": "LinearBackward0", "TBackward0": "LinearBackward0",
    "ScaledDotProductFlashAttentionForCpuBackward0": "ScaledDotProductAttentionBackward0",
    "NativeLayerNormBackward0": "LayerNormBackward0",
    "LogSoftmaxBackward0": "CrossEntropyLossBackward0", "NllLossBackward0": "CrossEntropyLossBackward0",
    "ConvolutionBackward0": "Conv2dBackward0",
    "Optimizer.step#AdamW.step": "[optimizer.step]", "Optimizer.zero_grad#AdamW.zero_grad": "[optimizer.zero_grad]",
}


def _annotate_optimizer(lib, record_function):
    """Wraps the optimizer step, zero_grad and clip_grad_norm_ in named ranges, so that their ops are counted as one
    unit on both sides (PyTorch annotates its optimizer's step and zero_grad itself, Strata does not; the ops inside
    differ: PyTorch uses foreach ops)."""
    import functools

    def wrap(owner, attr, label):
        fn = getattr(owner, attr)

        @functools.wraps(fn)
        def wrapped(*a, **k):
            with record_function(label):
                return fn(*a, **k)

        setattr(owner, attr, wrapped)

    if not lib.__name__.startswith("torch"):  # torch's own ranges (aliased below) already enclose these
        wrap(lib.optim.AdamW, "step", "[optimizer.step]")
        wrap(lib.optim.Optimizer, "zero_grad", "[optimizer.zero_grad]")
    wrap(lib.nn.utils, "clip_grad_norm_", "[clip_grad_norm_]")


def run_side(example, framework, threads, steps):
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", framework, "--example", example,
           "--threads", str(threads), "--steps", str(steps)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        raise RuntimeError(f"{framework} profile of {example} failed: {p.stderr.strip()[-800:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def compare(s, t, top, table="units", key="total_us"):
    names = set(s[table]) | set(t[table])
    rows = []
    zero = {key: 0.0, "calls": 0, "inside": {}}
    for n in names:
        a, b = s[table].get(n, zero), t[table].get(n, zero)
        row = {"op": n, "strata_us": a[key], "strata_calls": a["calls"], "torch_us": b[key], "torch_calls": b["calls"],
               "excess_us": a[key] - b[key]}
        if table == "units":
            row["strata_inside"] = dict(sorted(a["inside"].items(), key=lambda kv: -kv[1])[:4])
            row["torch_inside"] = dict(sorted(b["inside"].items(), key=lambda kv: -kv[1])[:4])
        rows.append(row)
    rows.sort(key=lambda r: -r["excess_us"])
    return rows[:top], rows


def _inside(d):
    return ", ".join(f"{k} {v / 1e3:.2f}" for k, v in d.items() if v >= 10) or "-"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--example", action="append", help="examples/<name>.py to profile (default: every one with "
                    "bench_step)")
    ap.add_argument("--steps", type=int, default=3, help="profiled steps per framework (after 2 warm-up steps)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--top", type=int, default=5, help="rows where Strata is slowest compared with PyTorch")
    ap.add_argument("--json", default=str(ROOT / "bench" / "results" / "profile-train-latest.json"))
    ap.add_argument("--worker", choices=("strata", "torch"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as bench/suite.py: see docs/BENCHMARKS.md
    if args.worker:
        print(json.dumps(worker(args.example[0], args.worker, args.threads, args.steps)))
        return 0

    examples = args.example or sorted(p.stem for p in (ROOT / "examples").glob("*.py")
                                      if "def bench_step(" in p.read_text(errors="replace"))
    out = {}
    for ex in examples:
        s = run_side(ex, "strata", args.threads, args.steps)
        t = run_side(ex, "torch", args.threads, args.steps)
        top, rows = compare(s, t, args.top)
        top_ops, op_rows = compare(s, t, args.top, table="ops", key="self_us")
        out[ex] = {"strata_self_us_per_step": s["self_us_total_per_step"],
                   "torch_self_us_per_step": t["self_us_total_per_step"], "top_units": top, "units": rows,
                   "top_ops": top_ops, "ops": op_rows}
        print(f"\n{ex}: profiled CPU time per step: strata {s['self_us_total_per_step'] / 1e3:.1f} ms, torch "
              f"{t['self_us_total_per_step'] / 1e3:.1f} ms ({args.steps} steps each, {args.threads} threads)")
        print("  units (outermost events: forward ops, backward nodes, optimizer ranges), inclusive time per step, "
              "by Strata's excess; 'inside': self ms of the ops each ran")
        print(f"  {'unit':36} {'strata':>9} {'calls':>5} {'torch':>9} {'calls':>5} {'excess':>9}")
        for r in top:
            print(f"  {r['op']:36} {r['strata_us'] / 1e3:7.2f}ms {r['strata_calls']:5.0f} "
                  f"{r['torch_us'] / 1e3:7.2f}ms {r['torch_calls']:5.0f} {r['excess_us'] / 1e3:7.2f}ms")
            print(f"      strata inside: {_inside(r['strata_inside'])}; torch inside: {_inside(r['torch_inside'])}")
        print("  ops by self time (names differ where the libraries decompose differently)")
        for r in top_ops:
            print(f"  {r['op']:36} {r['strata_us'] / 1e3:7.2f}ms {r['strata_calls']:5.0f} "
                  f"{r['torch_us'] / 1e3:7.2f}ms {r['torch_calls']:5.0f} {r['excess_us'] / 1e3:7.2f}ms")
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1))
    print(f"\nfull per-op table: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
