"""Issue 14's DataLoader measurement: a dataset whose __getitem__ costs 1 ms (CPU spin, then sleep), 0 vs 2 workers.

PYTHONPATH=python .venv/bin/python bench/dataloader_workers.py"""
import time, strata
from strata.utils.data import Dataset, DataLoader

class Busy(Dataset):
    """__getitem__ costs 1 ms of CPU work (a spin), as the issue's measurement asks."""
    def __len__(self): return 400
    def __getitem__(self, i):
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 1e-3: pass
        return strata.full((16,), float(i))

class Sleepy(Busy):
    def __getitem__(self, i):
        time.sleep(1e-3)
        return strata.full((16,), float(i))

for ds in (Busy(), Sleepy()):
    res = {}
    for w in (0, 2):
        best = 1e9
        for _ in range(3):
            dl = DataLoader(ds, batch_size=8, num_workers=w)
            t0 = time.perf_counter()
            n = sum(b.shape[0] for b in dl)
            best = min(best, time.perf_counter() - t0)
        assert n == 400
        res[w] = best
    print(f"{type(ds).__name__}: 0 workers {res[0]*1e3:.0f} ms, 2 workers {res[2]*1e3:.0f} ms, speedup {res[0]/res[2]:.2f}x")
