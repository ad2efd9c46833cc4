"""einsum against torch.einsum in the same run, float32, 2 threads (default): typical equations (attention scores and
values, batched matmul, a bilinear form, a 3-operand chain, a trace and a transpose-sum). Prints the median time
of each and the ratio Strata / torch (below 1 = Strata faster).

    PYTHONPATH=python .venv/bin/python bench/einsum.py [--quick] [--threads N]

On a loaded machine torch's thread pool can spin (its bmm then takes tens of ms); --threads 1 compares the
single-threaded kernels.
"""
import sys
import time

import numpy as np
import strata as st
import torch

THREADS = int(sys.argv[sys.argv.index("--threads") + 1]) if "--threads" in sys.argv else 2
st.set_num_threads(THREADS)
torch.set_num_threads(THREADS)
REPS = 10 if "--quick" in sys.argv else 40

CASES = [
    ("bhqd,bhkd->bhqk", [(8, 8, 128, 64), (8, 8, 128, 64)]),
    ("bhqk,bhkd->bhqd", [(8, 8, 128, 128), (8, 8, 128, 64)]),
    ("bihd,bjhd->bhij", [(8, 128, 8, 64), (8, 128, 8, 64)]),
    ("bij,bjk->bik", [(32, 64, 64), (32, 64, 64)]),
    ("bn,anm,bm->ba", [(64, 32), (16, 32, 32), (64, 32)]),
    ("ij,jk,kl->il", [(256, 64), (64, 256), (256, 8)]),
    ("ii->", [(1024, 1024)]),
    ("ij->j", [(512, 512)]),
    ("i,j->ij", [(512,), (512,)]),
]


def median_time(f):
    f()
    ts = []
    for _ in range(REPS):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return sorted(ts)[len(ts) // 2]


rng = np.random.default_rng(0)
print(f"{'equation':18s} {'strata ms':>10s} {'torch ms':>10s} {'ratio':>7s}")
for eq, shapes in CASES:
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    so = [st.from_numpy(a) for a in arrays]
    to = [torch.from_numpy(a) for a in arrays]
    np.testing.assert_allclose(st.einsum(eq, *so).numpy(), torch.einsum(eq, *to).numpy(), rtol=2e-3, atol=2e-3)
    ts = median_time(lambda: st.einsum(eq, *so))
    tt = median_time(lambda: torch.einsum(eq, *to))
    print(f"{eq:18s} {ts * 1e3:10.3f} {tt * 1e3:10.3f} {ts / tt:7.2f}")
