"""strata.distributed against the MPI library underneath it and against torch's DDP (gloo), on 2 ranks.

    PYTHONPATH=python python bench/distributed.py [--quick] [--mpirun] [--no-torch] [--nproc 2] [--sustained]
        [--small] [--pin]

(a) all_reduce (sum, float32) of 1 KiB .. 256 MiB: strata.distributed.all_reduce called from Python, against
    MPI_Allreduce called back to back on the same communicator by the communication thread itself (the library's
    own speed, none of ours). Bandwidth = bytes / time per call; ratio = ours / MPI's (1.0: no overhead). Ours runs
    on the calling thread up to 64 KiB under mpirun, 16 KiB for joined ranks (the synchronous fast path,
    docs/DISTRIBUTED.md), on the communication thread above. --small adds our engine called from C++ (no Python), the
    Python function behind all_reduce's C entry (what all_reduce was before it) and how often the fast path backed
    off during each size's rounds. The reference is itself erratic from 16 KiB to 4 MiB on a busy machine (both ranks spin in MPI with no
    pause between calls): compare several runs there.
(b) a DDP training step (forward, backward, all-reduced gradients, SGD) of an MLP (4 Linear 1024x1024, ReLU;
    16 MiB of gradients; batch 64 per rank): strata DDP, strata without DDP (the same per-rank work with no
    communication), torch DDP over gloo, torch without DDP. "hidden" = how much of the step's all-reduce time the
    DDP step does not add to the local step: 1 - (ddp - local) / allreduce(16 MiB).
The ranks are started by strata.distributed.run (ranks join through ompi-server, see docs/DISTRIBUTED.md), or
with --mpirun by mpirun (one MPI job). Rank 0 prints the table; nothing is asserted."""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def pin():
    """--pin: each rank (and the threads it starts later) on core rank % cores."""
    if os.environ.get("BENCH_PIN") == "1":
        rank = int(os.environ.get("RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "0")))
        os.sched_setaffinity(0, {rank % os.cpu_count()})


def worker_allreduce(quick, small=False):
    import strata
    import strata.distributed as dist

    pin()
    dist.init_process_group("gloo")
    C = strata._C._distributed
    g = dist.group.WORLD
    rows = []
    sizes = [1 << k for k in range(10, 29, 2)]  # 1 KiB .. 256 MiB
    if quick:
        sizes = sizes[::3]
    if small:
        sizes = [1 << k for k in range(10, 17)]  # 1 KiB .. 64 KiB, every power of 2
    for nbytes in sizes:
        n = nbytes // 4
        x = strata.ones(n)
        iters = max(3, min(1000, (64 << 20) // nbytes * 4))
        if nbytes >= (64 << 20):
            iters = 4
        ours, raw, engine, general = [], [], [], []
        backoffs = C.fast_path_backoffs()
        for _ in range(9 if small else 5):  # interleaved rounds, the best of each kept: the load changes over seconds
            dist.barrier()
            raw.append(C.bench_raw_allreduce(g._comm, x.data_ptr(), n, 5, iters, 600.0) / iters)
            if small:  # our engine called from C++: all but Python's share
                dist.barrier()
                engine.append(C.bench_engine_allreduce(g._comm, x.data_ptr(), n, 5, iters, 600.0) / iters)
                dist.barrier()  # the Python function behind dist.all_reduce's C entry (what all_reduce was before)
                gen = dist._collectives._all_reduce_general
                t0 = time.perf_counter()
                for _ in range(iters):
                    gen(x)
                general.append((time.perf_counter() - t0) / iters)
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(iters):
                dist.all_reduce(x)
            ours.append((time.perf_counter() - t0) / iters)
        rows.append((nbytes, min(ours), min(raw)) + ((min(engine), min(general), C.fast_path_backoffs() - backoffs) if small else ()))
    if dist.get_rank() == 0:
        print(json.dumps({"allreduce": rows}), flush=True)


def worker_sustained(quick):
    """1 KiB all_reduces back to back, 8 batches of 3000: the time per call in each batch. The best of a few rounds
    (above) favours a process that has just slept; on a machine with more runnable threads than cores, ranks that
    spin in MPI without pause are soon preempted and later batches slow down."""
    import strata
    import strata.distributed as dist

    pin()
    dist.init_process_group("gloo")
    x = strata.ones(256)
    batches = []
    for _ in range(3 if quick else 8):
        t0 = time.perf_counter()
        for _ in range(3000):
            dist.all_reduce(x)
        batches.append((time.perf_counter() - t0) / 3000)
    if dist.get_rank() == 0:
        print(json.dumps({"sustained": batches}), flush=True)


def mlp(nn, width=1024, depth=4):
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*layers)


def step_times(lib, model, opt, x, y, steps):
    F = lib.nn.functional
    out = []
    for i in range(steps):
        t0 = time.perf_counter()
        opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        opt.step()
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def worker_ddp(which, quick):
    """Local steps, DDP steps and a 16 MiB all_reduce, interleaved round by round (the machine's load changes
    over seconds); each figure is the best round's median."""
    rounds = 3 if quick else 6
    if which == "torch":
        import torch as lib
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
    else:
        import strata as lib
        import strata.distributed as dist
        from strata.nn.parallel import DistributedDataParallel as DDP
    lib.set_num_threads(1)
    dist.init_process_group("gloo")
    lib.manual_seed(0)
    x, y = lib.randn(64, 1024), lib.randn(64, 1024)
    local = mlp(lib.nn)
    model = DDP(mlp(lib.nn))
    opt_local = lib.optim.SGD(local.parameters(), lr=1e-3)
    opt_ddp = lib.optim.SGD(model.parameters(), lr=1e-3)
    flat = lib.ones(4 * 1024 * 1024 + 4 * 1024)
    step_times(lib, local, opt_local, x, y, 2)  # warm-up
    step_times(lib, model, opt_ddp, x, y, 2)
    t_local, t_ddp, t_ar = [], [], []
    for _ in range(rounds):
        dist.barrier()
        t_local.append(step_times(lib, local, opt_local, x, y, 3))
        dist.barrier()
        t_ddp.append(step_times(lib, model, opt_ddp, x, y, 3))
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(3):
            dist.all_reduce(flat)
        t_ar.append((time.perf_counter() - t0) / 3)
    if dist.get_rank() == 0:
        print(json.dumps({"ddp": [which, min(t_local), min(t_ddp), min(t_ar)]}), flush=True)
    dist.destroy_process_group()
    if which == "torch":
        # torch's process sometimes aborts at interpreter exit under mpirun ("terminate called without an active
        # exception"), which would make mpirun fail the run: the figures are out, leave at once.
        sys.stdout.flush()
        os._exit(0)


def launch(args, mode):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(HERE, "..", "python"), env.get("PYTHONPATH", "")])
    me = [os.path.abspath(__file__), "--worker", mode] + (["--quick"] if args.quick else []) + \
        (["--small"] if args.small else [])
    if args.pin:
        env["BENCH_PIN"] = "1"
    if args.mpirun:
        root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
        cmd = ["mpirun", *root, "--oversubscribe", "-np", str(args.nproc), "-x", "PYTHONPATH", "-x",
               "OMP_NUM_THREADS", "-x", "BENCH_PIN", "-x", "STRATA_DISTRIBUTED_FAST_PATH", sys.executable] + me
        env.setdefault("STRATA_DISTRIBUTED_FAST_PATH", "1")
        env.setdefault("BENCH_PIN", "0")
        if mode == "ddp-torch":
            env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29517")
            cmd[1:1] = ["-x", "MASTER_ADDR", "-x", "MASTER_PORT"]
    else:
        cmd = [sys.executable, "-m", "strata.distributed.run", "--standalone", "--nproc-per-node", str(args.nproc)] + me
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200)
    if p.returncode != 0:
        sys.stderr.write(p.stdout[-3000:] + p.stderr[-3000:])
        return None
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            return json.loads(line)
    return None


def human(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024:
            return f"{n:g} {unit}"
        n /= 1024
    return f"{n:g} TiB"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--mpirun", action="store_true")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--sustained", action="store_true", help="only the batches of 1 KiB all_reduces")
    ap.add_argument("--small", action="store_true", help="only (a), for 1 KiB .. 64 KiB (every power of 2), 9 rounds")
    ap.add_argument("--pin", action="store_true", help="each rank on a core of its own (rank %% cores)")
    args = ap.parse_args()
    if args.worker == "allreduce":
        return worker_allreduce(args.quick, args.small)
    if args.worker == "sustained":
        return worker_sustained(args.quick)
    if args.worker in ("ddp-strata", "ddp-torch"):
        if args.worker == "ddp-torch" and "RANK" not in os.environ:  # under mpirun: torch's env:// needs these
            os.environ["RANK"], os.environ["WORLD_SIZE"] = os.environ["OMPI_COMM_WORLD_RANK"], \
                os.environ["OMPI_COMM_WORLD_SIZE"]
        return worker_ddp(args.worker.split("-")[1], args.quick)

    print(f"strata.distributed, {args.nproc} ranks on {os.cpu_count()} cores, started by "
          f"{'mpirun' if args.mpirun else 'strata.distributed.run'}; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; STRATA_DISTRIBUTED_FAST_PATH="
          f"{os.environ.get('STRATA_DISTRIBUTED_FAST_PATH', '(unset: on)')}{'; pinned' if args.pin else ''}")
    if args.sustained:
        res = launch(args, "sustained")
        if res:
            print("1 KiB all_reduce, 3000 calls per batch, us per call: " +
                  " ".join(f"{t * 1e6:.1f}" for t in res["sustained"]))
        return
    res = launch(args, "allreduce")
    if res:
        print(f"\n(a) all_reduce float32 sum        {'strata':>12} {'MPI_Allreduce':>14} {'ratio':>7}")
        for nbytes, ours, raw, *engine in res["allreduce"]:
            print(f"    {human(nbytes):>10}  time/call    {ours * 1e6:10.1f}us {raw * 1e6:12.1f}us" +
                  (f"   (engine from C++: {engine[0] * 1e6:.1f}us, {raw / engine[0]:.2f}x; Python path: "
                   f"{engine[1] * 1e6:.1f}us, {raw / engine[1]:.2f}x; fast path backed off {engine[2]}x)" if engine else ""))
            print(f"                bandwidth    {nbytes / ours / 1e9:10.3f}GB/s {nbytes / raw / 1e9:10.3f}GB/s "
                  f"{raw / ours:7.2f}x")
    if args.small:
        return
    rows = []
    for which in ["strata"] + ([] if args.no_torch else ["torch"]):
        r = launch(args, f"ddp-{which}")
        if r:
            rows.append(r["ddp"])
    if rows:
        print(f"\n(b) DDP step, MLP 4x Linear(1024,1024), batch 64/rank   local     DDP    all_reduce(16MiB)  hidden")
        for which, t_local, t_ddp, t_ar in rows:
            hidden = 1 - (t_ddp - t_local) / t_ar
            print(f"    {which:8s}                                      {t_local * 1e3:7.1f}ms {t_ddp * 1e3:7.1f}ms "
                  f"{t_ar * 1e3:9.1f}ms      {hidden:6.2f}")
        d = {r[0]: r for r in rows}
        if "torch" in d and "strata" in d:
            print(f"    strata DDP step vs torch DDP (gloo): {d['torch'][2] / d['strata'][2]:.2f}x torch's speed")


if __name__ == "__main__":
    main()
