"""Per-step time of the main job's two training steps (digits CNN, char transformer) under strata or torch.

    python bench/train_step.py --framework strata|torch [--threads 1] [--steps 30] [--profile] [--model digits|charlm]

Prints the median and minimum milliseconds per training step (forward, backward, clipping, AdamW step) after a
few warm-up steps, with the same model sizes and batch sizes as examples/main.py (not --quick)."""

import argparse
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))
import train_charlm  # noqa: E402
import train_digits  # noqa: E402
from framework import load_framework, profiler_module  # noqa: E402


def digits_setup(torch):
    xtr, ytr, _, _ = train_digits.load_data(0)
    x, y = torch.from_numpy(xtr[:64]), torch.from_numpy(ytr[:64])
    model = train_digits.build_model(torch)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-2)
    loss_fn = torch.nn.CrossEntropyLoss()
    return lambda: train_digits.train_step(torch, model, opt, None, loss_fn, x, y, 1.0)


def charlm_setup(torch):
    rng = np.random.RandomState(0)
    vocab, block, batch = 70, 64, 32
    model = train_charlm.build_model(torch, vocab_size=vocab, block=block, d_model=128, n_layers=2, n_heads=4,
                                     dropout=0.0)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-2, betas=(0.9, 0.98))
    x = torch.from_numpy(rng.randint(0, vocab, size=(batch, block)).astype(np.int64))
    y = torch.from_numpy(rng.randint(0, vocab, size=(batch, block)).astype(np.int64))
    return lambda: train_charlm.train_step(torch, model, opt, None, x, y, 1.0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--framework", default="strata", choices=["strata", "torch"])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--model", default="both", choices=["digits", "charlm", "both"])
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--rows", type=int, default=25)
    args = ap.parse_args()
    torch = load_framework(args.framework)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    for name, setup in (("digits", digits_setup), ("charlm", charlm_setup)):
        if args.model not in (name, "both"):
            continue
        step = setup(torch)
        for _ in range(5):
            step()
        times = []
        for _ in range(args.steps):
            t0 = time.perf_counter()
            step()
            times.append((time.perf_counter() - t0) * 1e3)
        print(f"{name} {args.framework} threads={args.threads}: median {statistics.median(times):.2f} ms/step, "
              f"min {min(times):.2f} ms")
        if args.profile:
            with profiler_module(torch).profile() as prof:
                for _ in range(5):
                    step()
            print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.rows))


if __name__ == "__main__":
    main()
