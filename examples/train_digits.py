"""Handwritten-digit classifier on scikit-learn's bundled 8x8 digits set.

Runs unchanged under Strata and PyTorch (``--framework strata|torch``): the
chosen module is bound to the name ``torch`` and only PyTorch's mainstream API
is used. A small CNN (stride-2 convolutions, no pooling) trained with AdamW,
OneCycleLR and gradient clipping reaches ~98% test accuracy in a few seconds."""

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Progress, plot_curves, section, smooth  # noqa: E402
from framework import add_framework_argument, load_framework, print_profile  # noqa: E402

TEST_FRACTION = 0.25
ACC_THRESHOLD = 0.97


def load_data(seed):
    """Fixed, seeded split; inputs scaled to [0, 1] then standardised with the training set's statistics."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = digits.images.astype(np.float32) / 16.0  # (N, 8, 8), pixel values 0..16
    y = digits.target.astype(np.int64)
    perm = np.random.RandomState(seed).permutation(len(x))
    n_test = int(round(len(x) * TEST_FRACTION))
    test_idx, train_idx = perm[:n_test], perm[n_test:]
    mean = x[train_idx].mean()
    std = x[train_idx].std()
    x = (x - mean) / std
    x = x[:, None, :, :]  # NCHW with one channel
    return (np.ascontiguousarray(x[train_idx]), y[train_idx],
            np.ascontiguousarray(x[test_idx]), y[test_idx])


def build_model(torch):
    nn = torch.nn

    class DigitNet(nn.Module):
        def __init__(self, channels=32, hidden=128, dropout=0.25, num_classes=10):
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(1, channels, kernel_size=3, padding=1),                      # 8x8
                nn.ReLU(),
                nn.Conv2d(channels, 2 * channels, kernel_size=3, stride=2, padding=1),  # 4x4
                nn.ReLU(),
                nn.Conv2d(2 * channels, 2 * channels, kernel_size=3, stride=2, padding=1),  # 2x2
                nn.ReLU(),
            )
            self.classifier = nn.Sequential(
                nn.Dropout(dropout),
                nn.Linear(2 * channels * 2 * 2, hidden),
                nn.ReLU(),
                nn.Dropout(dropout),
                nn.Linear(hidden, num_classes),
            )

        def forward(self, x):
            h = self.features(x)
            return self.classifier(h.reshape(h.shape[0], -1))

    return DigitNet()


def evaluate(torch, model, x, y, batch_size=512):
    """Returns (accuracy, mean loss, predictions as numpy)."""
    model.eval()
    loss_fn = torch.nn.CrossEntropyLoss(reduction="sum")
    preds, total_loss = [], 0.0
    with torch.no_grad():
        for i in range(0, x.shape[0], batch_size):
            xb, yb = x[i:i + batch_size], y[i:i + batch_size]
            logits = model(xb)
            total_loss += loss_fn(logits, yb).item()
            preds.append(logits.argmax(dim=1).numpy())
    preds = np.concatenate(preds)
    acc = float((preds == y.numpy()).mean())
    return acc, total_loss / x.shape[0], preds


def train_step(torch, model, opt, sched, loss_fn, xb, yb, clip):
    opt.zero_grad()
    loss = loss_fn(model(xb), yb)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    opt.step()
    if sched is not None:
        sched.step()
    return loss


def profile_steps(torch, model, opt, loss_fn, loader, clip, steps):
    # The schedule has run its course: these extra steps keep the last learning rate.
    model.train()
    batches = iter(loader)

    def run():
        for _ in range(steps):
            xb, yb = next(batches)
            train_step(torch, model, opt, None, loss_fn, xb, yb, clip)

    print_profile(torch, run)


def bench_step(torch, quick=False, n_batches=8):
    """One full training step of this job, for bench/suite.py (case ``train.train_digits``).

    Builds the job's model, AdamW optimizer, loss and data exactly as ``main`` does (default arguments, so the real
    batch size), takes the first ``n_batches`` batches of the shuffled loader and returns a callable that runs one
    step on the next of them in turn (zero_grad, forward, loss, backward, clip, optimizer step) and returns the loss
    detached. The learning-rate schedule is left out: OneCycleLR refuses to step past its total, and a benchmark runs
    an open-ended number of steps. ``quick`` is accepted for symmetry with train_charlm (the step is the same)."""
    import itertools

    args = parse_args([])
    torch.manual_seed(args.seed)
    xtr, ytr, _, _ = load_data(args.seed)
    x_train, y_train = torch.from_numpy(xtr), torch.from_numpy(ytr)
    gen = torch.Generator().manual_seed(args.seed)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x_train, y_train),
                                         batch_size=args.batch_size, shuffle=True, generator=gen)
    batches = list(itertools.islice(iter(loader), n_batches))
    model = build_model(torch)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    loss_fn = torch.nn.CrossEntropyLoss()
    counter = itertools.count()

    def step():
        xb, yb = batches[next(counter) % len(batches)]
        return train_step(torch, model, opt, None, loss_fn, xb, yb, args.clip).detach()

    return step


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_framework_argument(p)
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--weight-decay", type=float, default=1e-2)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", default="runs")
    p.add_argument("--quick", action="store_true", help="two epochs, no accuracy threshold (for tests)")
    p.add_argument("--no-profile", action="store_true")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.quick:
        args.epochs = 2
    torch = load_framework(args.framework)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    nn = torch.nn
    os.makedirs(args.out, exist_ok=True)
    t_start = time.perf_counter()

    section(f"digits: CNN classifier on the 8x8 digits set ({torch.__name__} {torch.__version__}, "
            f"{args.threads} threads)")
    xtr, ytr, xte, yte = load_data(args.seed)
    x_train, y_train = torch.from_numpy(xtr), torch.from_numpy(ytr)
    x_test, y_test = torch.from_numpy(xte), torch.from_numpy(yte)
    print(f"train {tuple(x_train.shape)}, test {tuple(x_test.shape)}, classes 10")

    gen = torch.Generator().manual_seed(args.seed)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x_train, y_train),
                                         batch_size=args.batch_size, shuffle=True, generator=gen)
    model = build_model(torch)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params:,} parameters")
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    steps_per_epoch = len(loader)
    total_steps = args.epochs * steps_per_epoch
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=total_steps, pct_start=0.25)
    loss_fn = nn.CrossEntropyLoss()

    losses, eval_steps, test_accs, test_losses = [], [], [], []
    bar = Progress(total_steps, "digits", "samples")
    step = 0
    for epoch in range(args.epochs):
        model.train()
        for xb, yb in loader:
            loss = train_step(torch, model, opt, sched, loss_fn, xb, yb, args.clip)
            step += 1
            losses.append(loss.item())
            bar.update(step, losses[-1], xb.shape[0], extra=f"epoch {epoch + 1}")
        acc, tl, _ = evaluate(torch, model, x_test, y_test)
        eval_steps.append(step)
        test_accs.append(acc)
        test_losses.append(tl)
    train_time = bar.close()
    acc, test_loss, preds = evaluate(torch, model, x_test, y_test)
    print(f"test accuracy {acc * 100:.2f}% ({int(round(acc * len(yte)))}/{len(yte)}), test loss {test_loss:.4f}, "
          f"trained {total_steps} steps in {train_time:.1f}s "
          f"({total_steps * args.batch_size / train_time:.0f} samples/s)")

    png = plot_curves(os.path.join(args.out, "digits_curves.png"), f"digits CNN ({torch.__name__})", [
        ("cross-entropy", [("train (per step)", range(1, len(losses) + 1), losses, {"alpha": 0.3}),
                           ("train (smoothed)", range(1, len(losses) + 1), smooth(losses, steps_per_epoch), {}),
                           ("test", eval_steps, test_losses, {"marker": "o"})], None),
        ("test accuracy", [("test", eval_steps, test_accs, {"marker": "o"})], (ACC_THRESHOLD, "threshold")),
    ])
    print(f"loss curves: {png}")

    ckpt = os.path.join(args.out, "digits_cnn.pt")
    torch.save(model.state_dict(), ckpt)
    fresh = build_model(torch)
    fresh.load_state_dict(torch.load(ckpt))
    acc2, _, preds2 = evaluate(torch, fresh, x_test, y_test)
    with torch.no_grad():
        same_logits = np.array_equal(model(x_test).numpy(), fresh(x_test).numpy())
    reload_ok = bool(np.array_equal(preds, preds2) and same_logits)
    print(f"checkpoint: {ckpt} ({os.path.getsize(ckpt) / 1024:.0f} KiB); reloaded model gives "
          f"{'identical' if reload_ok else 'DIFFERENT'} predictions (accuracy {acc2 * 100:.2f}%)")

    if not args.no_profile:
        section("digits: profile of 5 training steps")
        profile_steps(torch, model, opt, loss_fn, loader, args.clip, steps=5)

    ok = reload_ok and (args.quick or acc >= ACC_THRESHOLD)
    if not ok:
        print(f"FAILED: accuracy {acc * 100:.2f}% (need >= {ACC_THRESHOLD * 100:.0f}%) or checkpoint mismatch")
    return {"name": "digits", "framework": torch.__name__, "accuracy": acc, "test_loss": test_loss,
            "train_time": train_time, "total_time": time.perf_counter() - t_start, "steps": total_steps,
            "png": png, "checkpoint": ckpt, "reload_ok": reload_ok, "ok": ok}


if __name__ == "__main__":
    sys.exit(0 if main()["ok"] else 1)
