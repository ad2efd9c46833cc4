"""Issue 14's DataLoader measurement: a dataset whose __getitem__ costs 1 ms (CPU spin, or sleep), batches of 8,
400 items, 0 vs 2 workers (best of 5 epochs each, a fresh iterator and fresh worker processes per epoch), and
torch's DataLoader on the same datasets in the same run when torch is installed.

PYTHONPATH=python .venv/bin/python bench/dataloader_workers.py [--reps 5]

The spin dataset needs two idle cores to reach 2x; the sleep one measures the loader's own overhead."""
import argparse
import os
import time

import strata
from strata.utils.data import Dataset, DataLoader

try:
    import torch
    from torch.utils.data import Dataset as TorchDataset, DataLoader as TorchDataLoader
except ImportError:
    torch = None


def make(lib, base, kind):
    class OneMs(base):
        def __len__(self):
            return 400

        def __getitem__(self, i):
            if kind == "spin":
                t0 = time.perf_counter()
                while time.perf_counter() - t0 < 1e-3:
                    pass
            else:
                time.sleep(1e-3)
            return lib.full((16,), float(i))
    return OneMs()


def epoch_time(loader_cls, ds, workers, reps):
    best = float("inf")
    for _ in range(reps):
        dl = loader_cls(ds, batch_size=8, num_workers=workers)
        t0 = time.perf_counter()
        n = sum(b.shape[0] for b in dl)
        best = min(best, time.perf_counter() - t0)
        assert n == 400
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    libs = [("strata", strata, Dataset, DataLoader)]
    if torch is not None:
        libs.append(("torch", torch, TorchDataset, TorchDataLoader))
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for kind in ("spin", "sleep"):
        for name, lib, base, loader_cls in libs:
            ds = make(lib, base, kind)
            t0, t2 = (epoch_time(loader_cls, ds, w, args.reps) for w in (0, 2))
            print(f"{kind:5s} {name:6s}: 0 workers {t0 * 1e3:4.0f} ms, 2 workers {t2 * 1e3:4.0f} ms, "
                  f"speedup {t0 / t2:.2f}x", flush=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
