"""Per-call cost of a small strata.distributed.all_reduce from Python, split by layer (docs/DISTRIBUTED.md, "The C
entry of all_reduce"). Run under mpirun (1 rank: the engine's bookkeeping only; 2 ranks: with the exchange):

    PYTHONPATH=python STRATA_DISTRIBUTED_FAST_PATH=1 OMP_NUM_THREADS=1 mpirun [--allow-run-as-root] --oversubscribe \
        -np 2 -x PYTHONPATH -x STRATA_DISTRIBUTED_FAST_PATH -x OMP_NUM_THREADS python bench/distributed_call.py [BYTES]

Rows, best and median of 11 interleaved rounds of 2000 calls, wall time per call: dist.all_reduce (the C entry),
the Python function behind it, bench_engine_allreduce(iters=1) called from a Python loop, the same in a C++ loop,
MPI_Allreduce in a C++ loop. Rank 0 prints; nothing is asserted."""
import sys
import time

import strata
import strata.distributed as dist

dist.init_process_group("gloo")
C = strata._C._distributed
nbytes = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
n, N = nbytes // 4, 2000
x = strata.ones(n)
comm, ptr = dist.group.WORLD._comm, x.data_ptr()
entry, general = dist.all_reduce, dist._collectives._all_reduce_general


def loop(f):
    def run():
        for _ in range(N):
            f(x)
    return run


def engine_py():
    b = C.bench_engine_allreduce
    for _ in range(N):
        b(comm, ptr, n, 5, 1, 600.0)


fns = {"dist.all_reduce (C entry)": loop(entry), "Python function behind it": loop(general),
       "bench_engine_allreduce(iters=1) from Python": engine_py,
       "engine, C++ loop": lambda: C.bench_engine_allreduce(comm, ptr, n, 5, N, 600.0),
       "MPI_Allreduce, C++ loop": lambda: C.bench_raw_allreduce(comm, ptr, n, 5, N, 600.0)}
res = {k: [] for k in fns}
c0 = C.all_reduce_entry_calls()
for _ in range(11):
    for k, fn in fns.items():
        dist.barrier()
        t0 = time.perf_counter()
        fn()
        res[k].append((time.perf_counter() - t0) / N * 1e6)
if dist.get_rank() == 0:
    print(f"{nbytes} bytes, {dist.get_world_size()} rank(s); C entry ran {C.all_reduce_entry_calls() - c0} calls")
    for k, v in res.items():
        v.sort()
        print(f"  {k:45s} {v[0]:7.3f} us (median {v[len(v) // 2]:.3f})")
