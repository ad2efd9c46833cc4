"""Helpers shared by the training scripts that do not depend on the framework:
a one-line progress bar, loss-curve plots and small formatting helpers."""

import os
import sys
import time


class Progress:
    """One-line progress display: step, loss and throughput.

    On a terminal the line is rewritten in place with a carriage return; when
    stdout is a file or pipe (CI logs, the test suite) it prints a plain line
    roughly every ``every_frac`` of the run instead, so logs stay readable."""

    def __init__(self, total, desc, unit, every_frac=0.1, stream=None):
        self.total = max(1, int(total))
        self.desc = desc
        self.unit = unit
        self.stream = stream or sys.stdout
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.every = max(1, int(self.total * every_frac))
        self.start = time.perf_counter()
        self.count = 0  # samples or tokens seen
        self.last_len = 0

    def update(self, step, loss, n, extra=""):
        """``step`` is 1-based; ``n`` is the number of samples/tokens in this step."""
        self.count += n
        if not self.tty and step % self.every != 0 and step != self.total:
            return
        elapsed = time.perf_counter() - self.start
        rate = self.count / elapsed if elapsed > 0 else 0.0
        width = 24
        filled = int(width * step / self.total)
        bar = "#" * filled + "-" * (width - filled)
        line = (f"{self.desc} [{bar}] {step:>5}/{self.total} loss {loss:7.4f} "
                f"{rate:9.0f} {self.unit}/s {elapsed:6.1f}s{(' ' + extra) if extra else ''}")
        if self.tty:
            pad = " " * max(0, self.last_len - len(line))
            self.stream.write("\r" + line + pad)
            self.last_len = len(line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self):
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()
        return time.perf_counter() - self.start


def smooth(values, k):
    """Trailing moving average, for readable loss curves of noisy per-step losses."""
    out, acc = [], 0.0
    for i, v in enumerate(values):
        acc += v
        if i >= k:
            acc -= values[i - k]
        out.append(acc / min(i + 1, k))
    return out


def plot_curves(path, title, panels):
    """Writes a PNG with one subplot per panel.

    ``panels`` is a list of (ylabel, [(label, xs, ys, style_kwargs), ...], hline_or_None)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4))
    if len(panels) == 1:
        axes = [axes]
    for ax, (ylabel, series, hline) in zip(axes, panels):
        for label, xs, ys, kw in series:
            ax.plot(xs, ys, label=label, **kw)
        if hline is not None:
            value, label = hline
            ax.axhline(value, color="gray", linestyle="--", linewidth=1, label=label)
        ax.set_xlabel("step")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(title)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def section(title):
    print(f"\n== {title} " + "=" * max(0, 66 - len(title)), flush=True)
