"""FSDP's memory between forward and backward, per sharding strategy, from the CPU allocator's counters.

    PYTHONPATH=python python bench/fsdp_memory.py            # launches 2 ranks per strategy

Three FSDP units, each a 4096x4096 Linear (64 MiB of float32 gathered, 32 MiB shard per rank). Printed by rank 0:
bytes allocated after forward (above what was allocated before it), the peak during backward, and the
all-gathers made. Each strategy runs in fresh processes."""

import gc
import os
import subprocess
import sys


def worker(strategy_name):
    import strata
    import strata.distributed as dist
    import strata.nn as nn
    from strata.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy
    from strata.distributed.fsdp.wrap import ModuleWrapPolicy

    dist.init_process_group("gloo")

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4096, 4096)

        def forward(self, x):
            return self.fc(x).tanh()

    def allocated():
        gc.collect()
        return strata._C._cpu_allocator_stats()["allocated_bytes"]

    model = FSDP(nn.Sequential(Layer(), Layer(), Layer()), sharding_strategy=ShardingStrategy[strategy_name],
                 auto_wrap_policy=ModuleWrapPolicy({Layer}))
    x = strata.randn(4, 4096)
    before = allocated()
    y = model(x).sum()
    after_forward = allocated() - before
    strata._C._reset_peak_memory_stats()
    y.backward()
    peak = strata._C._cpu_allocator_stats()["peak_bytes"] - before
    gathers = sum(u._handle.gathers for u in FSDP.fsdp_modules(model) if u._handle is not None)
    if dist.get_rank() == 0:
        print(f"{strategy_name:14s} after forward +{after_forward / 2**20:4.0f} MiB   peak in backward "
              f"+{peak / 2**20:4.0f} MiB   all-gathers {gathers}", flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        worker(sys.argv[1])
    else:
        here = os.path.dirname(os.path.abspath(__file__))
        env = dict(os.environ, OMP_NUM_THREADS="1",
                   PYTHONPATH=os.path.join(here, "..", "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
        for name in ("FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD"):
            subprocess.run([sys.executable, "-m", "strata.distributed.run", "--standalone", "--nproc-per-node", "2",
                            os.path.abspath(__file__), name], env=env, check=True)
