"""What strata.compile costs and saves, against Strata eager and torch.compile.

    PYTHONPATH=python python bench/compile.py [--quick] [--no-torch] [--no-inductor]

(a) a function of 20 tiny pointwise ops on 4-float tensors, called again (cached): Strata eager,
    strata.compile, torch eager, torch.compile(backend="eager") (Dynamo alone) and
    torch.compile(backend="inductor") (needs a C++ compiler; skipped when it fails);
(b) one op (x + y) compiled vs its eager call;
(c) capture: microseconds per captured op (a chain of 200 ops) and the capture time of a 2-layer
    transformer (the main job's character model, examples/train_charlm.py) against Dynamo's
    time for the same model (torch.compile backend="eager": Dynamo alone, no code generation);
(d) the guard check per call of the cached entries of (a) and (c).
Times are per call, the minimum over repeats. Prints a table; asserts nothing."""

import argparse
import os
import sys
import time

import strata as st

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))


def per_call(fn, args, n, repeat=5):
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(n):
            fn(*args)
        best = min(best, (time.perf_counter() - t0) / n)
    return best


def twenty_ops(x, y):
    a = x + y
    b = a * x
    c = b - y
    d = c.relu()
    e = d * 0.5
    f = e + 1.0
    g = f.tanh()
    h = g * y
    i = h + a
    j = i.sigmoid()
    k = j - b
    l_ = k.abs()
    m = l_ * c
    n = m + d
    o = n.neg()
    p = o * f
    q = p + g
    r = q.exp()
    s = r / 4.0
    return s - h


def one_op(x, y):
    return x + y


def chain(x, n_ops=200):
    for _ in range(n_ops // 2):
        x = x * 1.0001
        x = x + 0.5
    return x


def entry_of(fn):
    from strata._dynamo import eval_frame
    code = getattr(fn, "__wrapped__", fn).__code__
    return next(st for st in eval_frame.states_of(code) if st.entries).entries[0]


def guard_cost(entry, args, g, c, n):
    check = entry.guards.check
    t0 = time.perf_counter()
    for _ in range(n):
        check(args, g, c)
    return (time.perf_counter() - t0) / n


def transformer(T):
    import train_charlm
    T.manual_seed(0)
    m = train_charlm.build_model(T, vocab_size=64, block=32, d_model=64, n_layers=2, n_heads=4, dropout=0.0)
    m.eval()
    idx = T.randint(0, 64, (4, 32))
    return m, idx


def first_call_minus_warm(make_compiled, args, reset):
    reset()
    cf = make_compiled()
    t0 = time.perf_counter()
    cf(*args)
    first = time.perf_counter() - t0
    warm = per_call(cf, args, 20, 3)
    return first - warm, cf


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--no-inductor", action="store_true")
    a = ap.parse_args()
    n = 2000 if a.quick else 20000
    rows = []   # (section, what, seconds, ratio text)

    torch = None
    if not a.no_torch:
        try:
            import torch
            import torch._dynamo
        except ImportError:
            torch = None

    # (a) 20 tiny ops
    x, y = st.randn(4), st.randn(4)
    st_eager = per_call(twenty_ops, (x, y), n)
    cf = st.compile(twenty_ops)
    cf(x, y)
    st_comp = per_call(cf, (x, y), n)
    g_a = guard_cost(entry_of(cf), (x, y), twenty_ops.__globals__, None, n)
    rows += [("a", "strata eager, 20 ops", st_eager, "1.00x"),
             ("a", "strata.compile, 20 ops (cached)", st_comp, f"{st_eager / st_comp:.2f}x faster than strata eager")]
    try:  # the fusing backend (generated C++, needs g++): one kernel for the 20 ops
        cpp = st.compile(twenty_ops, backend="strata_cpp")
        cpp(x, y)
        st_cpp = per_call(cpp, (x, y), n)
        rows.append(("a", "strata.compile(backend=strata_cpp), 20 ops (cached)", st_cpp,
                     f"{st_cpp / st_eager:.2f}x strata eager's time"))
    except Exception as ex:
        rows.append(("a", f"strata_cpp: unusable ({type(ex).__name__})", float("nan"), ""))
    if torch is not None:
        tx, ty = torch.randn(4), torch.randn(4)
        t_eager = per_call(twenty_ops, (tx, ty), n)
        rows.append(("a", "torch eager, 20 ops", t_eager, f"strata.compile is {t_eager / st_comp:.2f}x faster"))
        torch._dynamo.reset()
        tce = torch.compile(twenty_ops, backend="eager")
        tce(tx, ty)
        t_ce = per_call(tce, (tx, ty), n)
        rows.append(("a", "torch.compile(backend=eager), 20 ops", t_ce,
                     f"strata.compile is {t_ce / st_comp:.2f}x faster"))
        if not a.no_inductor:
            try:
                torch._dynamo.reset()
                tci = torch.compile(twenty_ops, backend="inductor")
                t0 = time.perf_counter()
                tci(tx, ty)
                ind_compile = time.perf_counter() - t0
                t_ci = per_call(tci, (tx, ty), n)
                rows.append(("a", f"torch.compile(inductor), 20 ops (compile {ind_compile:.1f} s)", t_ci,
                             f"strata.compile is {t_ci / st_comp:.2f}x faster"))
            except Exception as ex:  # no working C++ toolchain
                rows.append(("a", f"torch.compile(inductor): unusable ({type(ex).__name__})", float("nan"), ""))

    # (b) one op
    e1 = per_call(one_op, (x, y), n)
    c1 = st.compile(one_op)
    c1(x, y)
    k1 = per_call(c1, (x, y), n)
    rows += [("b", "strata eager, x + y", e1, "1.00x"),
             ("b", "strata.compile, x + y (cached)", k1, f"{k1 / e1:.2f}x the eager call")]

    # (c) capture cost
    cx = st.randn(4)
    cap, _ = first_call_minus_warm(lambda: st.compile(chain), (cx,), st.compiler.reset)
    rows.append(("c", "capture, per op (chain of 200 ops)", cap / 200, ""))
    m, idx = transformer(st)
    cold, cm = first_call_minus_warm(lambda: st.compile(m), (idx,), st.compiler.reset)
    ops = sum(len(g.nodes) for g in st.compiler.explain(m)(idx).graphs)
    st_cap, cm = first_call_minus_warm(lambda: st.compile(m), (idx,), st.compiler.reset)
    rows.append(("c", f"capture, 2-layer transformer ({ops} ops; first in process {cold * 1e3:.0f} ms)", st_cap,
                 f"{st_cap / ops * 1e6:.0f} us/op"))
    if torch is not None:
        tm, tidx = transformer(torch)
        t_cap, _ = first_call_minus_warm(lambda: torch.compile(tm, backend="eager"), (tidx,), torch._dynamo.reset)
        rows.append(("c", "Dynamo (backend=eager), same transformer", t_cap,
                     f"strata capture is {t_cap / st_cap:.1f}x faster"))

    # (d) guard checks
    rows.append(("d", "guard check, 20-op function (2 tensors)", g_a, ""))
    from strata._dynamo import eval_frame
    fwd_code = type(m).forward
    ent = next(st for st in eval_frame.states_of(fwd_code.__code__) if st.entries).entries[0]
    g_t = guard_cost(ent, (m, idx), fwd_code.__globals__, fwd_code.__closure__, n)
    rows.append(("d", f"guard check, transformer forward ({len(ent.guard_descriptions)} guards)", g_t,
                 f"{g_t / max(len(ent.guard_descriptions), 1) * 1e9:.0f} ns/guard"))

    print(f"{'':3}{'what':70}{'time':>12}  ratio")
    for sec, what, t, ratio in rows:
        ts = "n/a" if t != t else (f"{t * 1e6:9.2f} us" if t < 1e-3 else f"{t * 1e3:9.1f} ms")
        print(f"({sec}) {what:68}{ts:>12}  {ratio}")


if __name__ == "__main__":
    main()
