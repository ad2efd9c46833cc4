"""What one compiled call of a one-op function costs, and where the time goes.

    PYTHONPATH=python python bench/compile_overhead.py [--calls N] [--repeat R] [--no-torch]

`f(x, y) = x + y` on 4-float tensors, called again and again (cached). Rows, ns per call, minimum
over R repeats of N calls, interleaved so that the machine's load weighs alike on every row:
  strata eager            f(x, y) called directly
  strata.compile          the default backend (strata_cpp) and backend="eager"
  torch eager / compile   the same in torch (inductor and backend="eager"), for reference
and the pieces of the compiled call (each measured alone, so they do not add up exactly):
  binder -> FrameCache    the wrapper's frame and the cache's call, entry replaced by a no-op
  guard check             entry.guards.check(args, globals, closure)
  backend callable        the entry's runner called directly with the inputs
Prints ratios (compiled / eager) from the same run; asserts nothing."""

import argparse
import time

import strata as st


def f(x, y):
    return x + y


def loop(fn, args, n):
    t0 = time.thread_time_ns()
    for _ in range(n):
        fn(*args)
    return time.thread_time_ns() - t0


def measure(rows, n, repeat):
    best = {name: float("inf") for name, _, _ in rows}
    for _ in range(repeat):
        for name, fn, args in rows:
            best[name] = min(best[name], loop(fn, args, n) / n)
    return best


def entry_of(fn):
    from strata._dynamo import eval_frame
    code = getattr(fn, "__wrapped__", fn).__code__
    return [e for s in eval_frame.states_of(code) for e in s.entries]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--no-torch", action="store_true")
    a = ap.parse_args()
    st.set_num_threads(1)
    x, y = st.randn(4), st.randn(4)
    rows = [("strata eager", f, (x, y))]
    c_cpp = st.compile(f)
    c_cpp(x, y)
    rows.append(("strata.compile (strata_cpp)", c_cpp, (x, y)))

    def g(x, y):
        return x + y
    c_eager = st.compile(g, backend="eager")
    c_eager(x, y)
    rows.append(("strata.compile (eager backend)", c_eager, (x, y)))
    ent = entry_of(c_cpp)[0]
    check = ent.guards.check
    rows.append(("  guard check alone", check, ((x, y), f.__globals__, None)))
    runner = getattr(ent, "compiled", None) or getattr(ent, "runner", None)
    if callable(runner):
        rows.append(("  backend callable alone", runner, (x, y)))
    torch = None
    if not a.no_torch:
        try:
            import torch
        except ImportError:
            torch = None
    if torch is not None:
        torch.set_num_threads(1)
        tx, ty = torch.randn(4), torch.randn(4)

        def tf(x, y):
            return x + y

        def tg(x, y):
            return x + y
        rows.append(("torch eager", tf, (tx, ty)))
        try:
            ti = torch.compile(tf)
            ti(tx, ty)
            rows.append(("torch.compile (inductor)", ti, (tx, ty)))
        except Exception as ex:  # no C++ toolchain
            print(f"torch.compile(inductor) unusable: {type(ex).__name__}")
        te = torch.compile(tg, backend="eager")
        te(tx, ty)
        rows.append(("torch.compile (eager backend)", te, (tx, ty)))
    best = measure(rows, a.calls, a.repeat)
    se, te_ = best["strata eager"], best.get("torch eager")
    for name, _, _ in rows:
        t = best[name]
        ref = te_ if name.startswith("torch") else se
        print(f"{name:34}{t:9.1f} ns  {t / ref:5.2f}x {'torch' if name.startswith('torch') else 'strata'} eager")


if __name__ == "__main__":
    main()
