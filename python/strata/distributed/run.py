"""python -m strata.distributed.run: torchrun's launcher for Strata.

    python -m strata.distributed.run --nproc-per-node N [--nnodes M --node-rank K --master-addr A
        --master-port P | --standalone] script.py args...

Starts N processes on this node (`python -u script.py args`, or `python -u -m module` with -m), each with RANK,
LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, NODE_RANK, MASTER_ADDR, MASTER_PORT and TORCHELASTIC_RUN_ID
set, and OMP_NUM_THREADS=1 unless set (as torchrun does). Rank 0 serves the rendezvous store on MASTER_PORT
(--standalone: a free port). SIGINT, SIGTERM and SIGHUP are forwarded to the ranks. When a rank fails, the others
are stopped (SIGTERM, then SIGKILL after a grace period) and the launcher exits 1 after printing which rank failed,
its exit code or signal, and the last lines of its stderr. Elastic restarts (--max-restarts > 0) are not supported.
"""

import argparse
import collections
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid


def _parser(prog="strata.distributed.run"):
    p = argparse.ArgumentParser(prog=prog, description="Start the ranks of a strata.distributed job.")
    p.add_argument("--nproc-per-node", "--nproc_per_node", default="1")
    p.add_argument("--nnodes", default="1")
    p.add_argument("--node-rank", "--node_rank", type=int, default=0)
    p.add_argument("--master-addr", "--master_addr", default="127.0.0.1")
    p.add_argument("--master-port", "--master_port", type=int, default=29500)
    p.add_argument("--standalone", action="store_true")
    p.add_argument("--max-restarts", "--max_restarts", type=int, default=0)
    p.add_argument("--monitor-interval", "--monitor_interval", type=float, default=0.1)
    p.add_argument("--rdzv-backend", "--rdzv_backend", default="static")
    p.add_argument("--rdzv-endpoint", "--rdzv_endpoint", default="")
    p.add_argument("--rdzv-id", "--rdzv_id", default="none")
    p.add_argument("--run-path", "--run_path", action="store_true")
    p.add_argument("--grace-period", type=float, default=5.0,
                   help="seconds between SIGTERM and SIGKILL when stopping the ranks")
    p.add_argument("--mpi-runtime", "--mpi_runtime", action="store_true",
                   help="start this node's ranks under Open MPI's mpirun (one MPI job: shared-memory transport) "
                        "instead of as separate processes joined through ompi-server (TCP)")
    p.add_argument("-m", "--module", action="store_true")
    p.add_argument("--no-python", "--no_python", action="store_true")
    p.add_argument("training_script")
    p.add_argument("training_script_args", nargs=argparse.REMAINDER)
    return p


def _free_port():
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def _nprocs(v):
    if v in ("cpu", "auto"):
        return os.cpu_count() or 1
    return int(v)


class _Rank:
    def __init__(self, rank, local_rank, proc):
        self.rank = rank
        self.local_rank = local_rank
        self.proc = proc
        self.tail = collections.deque(maxlen=30)
        self.thread = threading.Thread(target=self._pump, daemon=True)
        self.thread.start()

    def _pump(self):
        # The rank's stderr goes on to ours as it comes; the last lines are kept for the failure report.
        for line in iter(self.proc.stderr.readline, b""):
            self.tail.append(line.decode(errors="replace"))
            sys.stderr.buffer.write(line)
            sys.stderr.buffer.flush()


def _describe(code):
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


def run(args, extra_launch_args=()):
    if args.max_restarts:
        raise SystemExit("strata.distributed.run: --max-restarts > 0 (elastic restarts) is not supported")
    nproc = _nprocs(args.nproc_per_node)
    nnodes = int(str(args.nnodes).split(":")[-1])
    addr, port = args.master_addr, args.master_port
    if args.rdzv_endpoint:
        host, _, p = args.rdzv_endpoint.rpartition(":")
        addr, port = host or addr, int(p) if p else port
    if args.standalone:
        nnodes, addr, port = 1, "127.0.0.1", _free_port()
    world = nproc * nnodes
    if args.no_python:
        cmd = [args.training_script]
    elif args.module:
        cmd = [sys.executable, "-u", "-m", args.training_script]
    else:
        cmd = [sys.executable, "-u", args.training_script]
    cmd += list(extra_launch_args) + list(args.training_script_args)
    run_id = str(uuid.uuid4()) if args.rdzv_id == "none" else args.rdzv_id
    ranks = []
    if args.mpi_runtime:
        if nnodes != 1:
            raise SystemExit("strata.distributed.run: --mpi-runtime starts the ranks of one node only (--nnodes 1)")
        if args.no_python:
            raise SystemExit("strata.distributed.run: --mpi-runtime runs Python scripts or modules (no --no-python)")
        if shutil.which("mpirun") is None:
            raise SystemExit("strata.distributed.run: --mpi-runtime needs Open MPI's mpirun (install openmpi-bin)")
        env = dict(os.environ, MASTER_ADDR=addr, MASTER_PORT=str(port), GROUP_RANK="0", NODE_RANK="0",
                   TORCHELASTIC_RUN_ID=run_id, TORCHELASTIC_RESTART_COUNT="0", TORCHELASTIC_MAX_RESTARTS="0")
        if nproc > 1:
            env.setdefault("OMP_NUM_THREADS", "1")
        root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
        mpi_cmd = ["mpirun", *root, "--oversubscribe", "-np", str(nproc)]
        for k in ("MASTER_ADDR", "MASTER_PORT", "GROUP_RANK", "NODE_RANK", "TORCHELASTIC_RUN_ID",
                  "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "OMP_NUM_THREADS", "PYTHONPATH"):
            if k in env:
                mpi_cmd += ["-x", k]
        mpi_cmd += [sys.executable, "-u", "-m", "strata.distributed._mpi_rank"] + cmd[2:]
        ranks.append(_Rank(None, None, subprocess.Popen(mpi_cmd, env=env, stderr=subprocess.PIPE)))
    for local in range(0 if args.mpi_runtime else nproc):
        rank = args.node_rank * nproc + local
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(local), WORLD_SIZE=str(world),
                   LOCAL_WORLD_SIZE=str(nproc), GROUP_RANK=str(args.node_rank), NODE_RANK=str(args.node_rank),
                   ROLE_RANK=str(rank), ROLE_WORLD_SIZE=str(world), MASTER_ADDR=addr, MASTER_PORT=str(port),
                   TORCHELASTIC_RUN_ID=run_id, TORCHELASTIC_RESTART_COUNT="0", TORCHELASTIC_MAX_RESTARTS="0")
        if nproc > 1:
            env.setdefault("OMP_NUM_THREADS", "1")
        ranks.append(_Rank(rank, local, subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE)))

    received = []

    def forward(signum, frame):
        received.append(signum)
        for r in ranks:
            if r.proc.poll() is None:
                r.proc.send_signal(signum)

    old = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}

    def stop_all():
        for r in ranks:
            if r.proc.poll() is None:
                r.proc.terminate()
        deadline = time.monotonic() + args.grace_period
        for r in ranks:
            left = deadline - time.monotonic()
            try:
                r.proc.wait(max(0.0, left))
            except subprocess.TimeoutExpired:
                r.proc.kill()
                r.proc.wait()

    failed = None
    try:
        while True:
            if received:  # forwarded to the ranks; their exit is ours, not a failure of theirs
                break
            codes = [r.proc.poll() for r in ranks]
            bad = [r for r, c in zip(ranks, codes) if c not in (None, 0)]
            if bad:
                failed = bad[0]
                break
            if all(c == 0 for c in codes):
                break
            time.sleep(args.monitor_interval)
        if failed is not None or received:
            stop_all()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        for r in ranks:
            r.thread.join(2)
    if received and failed is None:
        sys.stderr.write(f"strata.distributed.run: stopped by {signal.Signals(received[0]).name}\n")
        return 128 + received[0]
    if failed is not None:
        code = failed.proc.returncode
        if failed.rank is None:  # --mpi-runtime: mpirun's own report (above) names the failing rank
            sys.stderr.write(f"\nstrata.distributed.run: mpirun (ranks 0..{nproc - 1}, pid {failed.proc.pid}) failed "
                             f"with {_describe(code)}; mpirun stopped the other ranks.\n---- last lines of its stderr "
                             f"----\n{''.join(failed.tail)}---------------------------------------------\n")
            sys.stderr.flush()
            return 1
        sys.stderr.write(
            f"\nstrata.distributed.run: rank {failed.rank} (local_rank {failed.local_rank}, pid {failed.proc.pid}) "
            f"failed with {_describe(code)}; the other ranks were stopped.\n"
            f"---- last lines of rank {failed.rank}'s stderr ----\n{''.join(failed.tail)}"
            "---------------------------------------------\n")
        sys.stderr.flush()
        return 1
    return 0


def main(argv=None):
    args = _parser().parse_args(argv)
    sys.exit(run(args))


if __name__ == "__main__":
    main()
