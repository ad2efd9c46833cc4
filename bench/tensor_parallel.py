"""Tensor parallelism and fully_shard against torch's (gloo), on 2 ranks of this machine.

    PYTHONPATH=python python bench/tensor_parallel.py [--steps 20] [--nproc 2]

One training step (forward, backward, Adam) of an MLP Linear(1024, 4096) -> ReLU -> Linear(4096, 1024), batch
64 x 1024 per rank: (a) Colwise + Rowwise tensor parallelism (one all-reduce of 64 x 1024 floats forward, one
backward), (b) fully_shard on the model (all-gather of 32 MiB of parameters, reduce-scatter of their gradients),
(c) the same step in one process without parallelism (per rank, the reference for the local work). Each of Strata
and torch runs in its own launch; the median step time over --steps steps after 3 warm-up steps is printed by
rank 0. Nothing is asserted."""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

WORKER = r'''
import importlib, json, os, statistics, time
LIB = os.environ["LIB"]
torch = importlib.import_module(LIB)
dist = importlib.import_module(LIB + ".distributed")
dm = importlib.import_module(LIB + ".distributed.device_mesh")
tpar = importlib.import_module(LIB + ".distributed.tensor.parallel")
fsdp = importlib.import_module(LIB + ".distributed.fsdp")
nn = torch.nn
dist.init_process_group("gloo")
r, n = dist.get_rank(), dist.get_world_size()
mesh = dm.init_device_mesh("cpu", (n,))
STEPS = int(os.environ["STEPS"])

def make():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 1024))

x = torch.randn(64, 1024)
def timed(model):
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    times = []
    for i in range(STEPS + 3):
        dist.barrier()
        t0 = time.perf_counter()
        model(x).pow(2).mean().backward()
        opt.step(); opt.zero_grad()
        times.append(time.perf_counter() - t0)
    return statistics.median(times[3:]) * 1e3

res = {}
m = make(); tpar.parallelize_module(m, mesh, {"0": tpar.ColwiseParallel(), "2": tpar.RowwiseParallel()})
res["tp"] = timed(m)
m = make(); fsdp.fully_shard(m[0]); fsdp.fully_shard(m[2]); fsdp.fully_shard(m)
res["fsdp"] = timed(m)
res["local"] = timed(make())
if r == 0:
    json.dump(res, open(os.environ["OUT"], "w"))
dist.barrier()
os._exit(0)
'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--nproc", type=int, default=2)
    a = ap.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    python_dir = os.path.join(here, "..", "python")
    with tempfile.TemporaryDirectory() as d:
        script = os.path.join(d, "w.py")
        open(script, "w").write(WORKER)
        out = {}
        for lib in ("strata", "torch"):
            f = os.path.join(d, lib + ".json")
            env = dict(os.environ, PYTHONPATH=python_dir, LIB=lib, OUT=f, STEPS=str(a.steps),
                       OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
            p = subprocess.run([sys.executable, "-m", "strata.distributed.run", "--standalone", "--nproc-per-node",
                                str(a.nproc), script], env=env, capture_output=True, text=True)
            if p.returncode != 0:
                print(lib, "failed:", p.stderr[-3000:])
                continue
            out[lib] = json.load(open(f))
    print(f"load average {os.getloadavg()[0]:.1f}; median step ms over {a.steps} steps, {a.nproc} ranks")
    print(f"{'':8}{'strata':>10}{'torch':>10}{'torch/strata':>14}")
    for k in ("tp", "fsdp", "local"):
        s, t = out.get("strata", {}).get(k), out.get("torch", {}).get(k)
        ratio = f"{t / s:.2f}x" if s and t else "-"
        print(f"{k:8}{s if s is not None else float('nan'):10.2f}{t if t is not None else float('nan'):10.2f}"
              f"{ratio:>14}")


if __name__ == "__main__":
    main()
