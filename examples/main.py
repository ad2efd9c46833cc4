"""The main job: train the digits classifier, then the character language
model, under Strata (default) or PyTorch, and print a summary.

    python examples/main.py [--framework strata|torch] [--quick] [--out runs] [--threads 2] [--no-profile]

Exits non-zero if either job misses its threshold (>= 97% digits test accuracy;
validation loss below 0.6x the corpus's unigram character entropy) or if a
reloaded checkpoint does not reproduce the model's predictions."""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_charlm  # noqa: E402
import train_digits  # noqa: E402
from common import section  # noqa: E402
from framework import add_framework_argument  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_framework_argument(ap)
    ap.add_argument("--quick", action="store_true", help="a few steps of each job, no thresholds (for tests)")
    ap.add_argument("--out", default="runs")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-profile", action="store_true")
    args = ap.parse_args(argv)

    common = ["--framework", args.framework, "--out", args.out, "--threads", str(args.threads)]
    common += ["--quick"] if args.quick else []
    common += ["--no-profile"] if args.no_profile else []
    t0, cpu0 = time.perf_counter(), time.process_time()
    digits = train_digits.main(common)
    charlm = train_charlm.main(common)
    total, cpu = time.perf_counter() - t0, time.process_time() - cpu0

    section(f"summary ({digits['framework']}{', quick' if args.quick else ''})")
    mark = {True: "ok", False: "FAILED"}
    print(f"digits: test accuracy {digits['accuracy'] * 100:.2f}% (threshold {train_digits.ACC_THRESHOLD * 100:.0f}%"
          f"{', not enforced' if args.quick else ''}), test loss {digits['test_loss']:.4f}, "
          f"{digits['steps']} steps, train {digits['train_time']:.1f}s, total {digits['total_time']:.1f}s "
          f"[{mark[digits['ok']]}]")
    print(f"charlm: validation loss {charlm['val_loss']:.3f} nats/char vs unigram entropy {charlm['entropy']:.3f} "
          f"(ratio {charlm['val_loss'] / charlm['entropy']:.2f}, need < {train_charlm.ENTROPY_RATIO}"
          f"{', not enforced' if args.quick else ''}), {charlm['steps']} steps, train {charlm['train_time']:.1f}s, "
          f"total {charlm['total_time']:.1f}s [{mark[charlm['ok']]}]")
    for r in (digits, charlm):
        print(f"{r['name']}: curves {r['png']}; checkpoint {r['checkpoint']} "
              f"(reload {'identical' if r['reload_ok'] else 'MISMATCH'})")
    # CPU time is the steadier number on a shared machine, where wall time depends on the neighbours.
    print(f"main job: {total:.1f}s wall, {cpu:.1f}s CPU ({args.threads} threads)")
    ok = digits["ok"] and charlm["ok"]
    if not ok:
        print("main job FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
