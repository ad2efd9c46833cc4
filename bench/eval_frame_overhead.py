"""Per-frame cost of strata.compile's PEP 523 hook (strata._C._eval_frame).

    PYTHONPATH=python python bench/eval_frame_overhead.py [--calls N] [--repeat R]

A loop calls a tiny Python function `tiny(x): return x` N times; each row is
the loop's time per call in ns (minimum over R repeats), so a row's excess over
"no hook" is the hook's cost per frame.
  no hook                    the default evaluator
  hook, code marked SKIP     the hook installed, tiny's code SKIP (the common
                             case of code the compiler left alone)
  hook, thread disabled      installed, but set_enabled(False) on this thread
  entry: C callable          tiny's frame served by an entry that is a C
                             function of (args, func) (operator.is_), so the
                             frame is never run: args tuple + call + disposal
  entry: Python lambda       served by `lambda args, func: args[0]`
  plain call of the lambda   what calling that lambda directly costs, for scale
"""

import argparse
import operator
import sys
import time

from strata import _C

EF = _C._eval_frame


def tiny(x):
    return x


def loop(fn, n):
    t0 = time.perf_counter_ns()
    for i in range(n):
        fn(i)
    return time.perf_counter_ns() - t0


def loop2(fn, n):
    t0 = time.perf_counter_ns()
    a = (0,)
    for i in range(n):
        fn(a, None)
    return time.perf_counter_ns() - t0


def best(f, fn, n, repeat):
    return min(f(fn, n) for _ in range(repeat)) / n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    n, r = a.calls, a.repeat
    rows = []
    rows.append(("no hook", best(loop, tiny, n, r)))

    skip_all = lambda code, func: EF.SKIP  # noqa: E731
    EF.set_callback(skip_all)
    loop(tiny, 10)  # tiny, loop and the rest get marked SKIP
    rows.append(("hook, code marked SKIP", best(loop, tiny, n, r)))
    prev = EF.set_enabled(False)
    rows.append(("hook, thread disabled", best(loop, tiny, n, r)))
    EF.set_enabled(prev)

    EF.set_code_state(tiny.__code__, operator.is_)
    assert tiny(1) is False
    rows.append(("entry: C callable", best(loop, tiny, n, r)))
    lam = lambda args, func: args[0]  # noqa: E731
    EF.set_code_state(lam.__code__, EF.SKIP)
    EF.set_code_state(tiny.__code__, lam)
    assert tiny(5) == 5
    rows.append(("entry: Python lambda", best(loop, tiny, n, r)))
    EF.set_callback(None)
    EF.clear_all()
    rows.append(("plain call of the lambda", best(loop2, lam, n, r)))

    print(f"Python {sys.version.split()[0]}, {n} calls, min of {r}")
    base = rows[0][1]
    for name, ns in rows:
        print(f"  {name:28s} {ns:7.1f} ns/call   ({ns - base:+6.1f} vs no hook)")


if __name__ == "__main__":
    main()
