"""strata.distributed.rpc against torch.distributed.rpc (TensorPipe), 2 worker processes on this machine.

    PYTHONPATH=python python bench/rpc.py [--no-torch] [--calls 300]

For each library: the median time of one rpc_sync round trip with a small tensor (add of two 16-float tensors),
the time of 64 rpc_async calls in flight at once (per call), and the time to send a tensor of 1 / 16 MiB and get
it back (echo; MiB/s counts both directions). Worker 1 only serves; worker 0 measures and prints one JSON line.
Nothing is asserted."""

import argparse
import importlib
import json
import os
import socket
import statistics
import subprocess
import sys
import time


def echo(x):
    return x


def worker(lib, rank, calls):
    T = importlib.import_module(lib)
    rpc = importlib.import_module(lib + ".distributed.rpc")
    rpc.init_rpc(f"w{rank}", rank=rank, world_size=2,
                 rpc_backend_options=rpc.TensorPipeRpcBackendOptions(num_worker_threads=8))
    out = {}
    if rank == 0:
        a, b = T.ones(16), T.ones(16)
        for _ in range(20):
            rpc.rpc_sync("w1", T.add, args=(a, b))
        ts = []
        for _ in range(calls):
            t0 = time.perf_counter()
            rpc.rpc_sync("w1", T.add, args=(a, b))
            ts.append(time.perf_counter() - t0)
        out["sync_us"] = statistics.median(ts) * 1e6
        t0 = time.perf_counter()
        for _ in range(5):
            futs = [rpc.rpc_async("w1", T.add, args=(a, b)) for _ in range(64)]
            for f in futs:
                f.wait()
        out["async64_us_per_call"] = (time.perf_counter() - t0) / (5 * 64) * 1e6
        for mib in (1, 16):
            x = T.ones(mib * 262144)
            rpc.rpc_sync("w1", echo, args=(x,))
            ts = []
            for _ in range(5):
                t0 = time.perf_counter()
                rpc.rpc_sync("w1", echo, args=(x,))
                ts.append(time.perf_counter() - t0)
            out[f"echo_{mib}MiB_ms"] = min(ts) * 1e3
            out[f"echo_{mib}MiB_MiBps"] = 2 * mib / min(ts)
        print(json.dumps({"lib": lib, **{k: round(v, 1) for k, v in out.items()}}), flush=True)
    rpc.shutdown()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--worker", nargs=2)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker[0], int(args.worker[1]), args.calls)
        return
    for lib in ["strata"] + ([] if args.no_torch else ["torch"]):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1")
        ps = [subprocess.Popen([sys.executable, __file__, "--calls", str(args.calls), "--worker", lib, str(r)],
                               env=env) for r in (1, 0)]
        for p in ps:
            p.wait(timeout=600)
    print("load average:", os.getloadavg())


if __name__ == "__main__":
    main()
