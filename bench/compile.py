"""What strata.compile costs and saves, against Strata eager and torch.compile.

    PYTHONPATH=python python bench/compile.py [--quick] [--no-torch] [--no-inductor]

(a) a function of 20 tiny pointwise ops on 4-float tensors, called again (cached): Strata eager,
    strata.compile, torch eager, torch.compile(backend="eager") (Dynamo alone) and
    torch.compile(backend="inductor") (needs a C++ compiler; skipped when it fails);
(b) one op (x + y) compiled vs its eager call;
(c) capture: microseconds per captured op (a chain of 200 ops) and the capture time of a 2-layer
    transformer (the main job's character model, examples/train_charlm.py) against Dynamo's
    time for the same model (torch.compile backend="eager": Dynamo alone, no code generation);
(d) the guard check per call of the cached entries of (a) and (c);
(e) the fusion table (shared/seeds/000_52b58f9c700bbed3.txt): each case under Strata eager,
    strata.compile(backend="strata_cpp") and torch.compile(inductor, CPU) in the same run, with
    torch eager for reference (`--table-only` runs just this section).
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


# ---- (e) the fusion table -------------------------------------------------------------------------
# Each case: (name, make(T) -> (fn, args), repeats); T is strata or torch, fn uses T's own functional.

def _gelu_tanh(T, n):
    x = T.randn(n)
    return (lambda x: 0.5 * x * (1 + T.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))), (x,)


def _chain7(T, n):
    x, y = T.randn(n), T.randn(n)
    return (lambda x, y: ((x * y + 1).relu() * 0.5 - y).abs() * 2 + x), (x, y)


def _linear_act(T, act):
    F = T.nn.functional
    x, w, b = T.randn(512, 1024), T.randn(1024, 1024) * 0.03, T.randn(1024)
    f = {"relu": F.relu, "gelu": F.gelu, "silu": F.silu}[act]
    return (lambda x, w, b: f(F.linear(x, w, b))), (x, w, b)


def _ln_residual_dropout(T):
    F = T.nn.functional
    x, h = T.randn(4096, 1024), T.randn(4096, 1024)
    w, b = T.randn(1024), T.randn(1024)
    return (lambda x, h, w, b: F.layer_norm(x + F.dropout(h, 0.1, training=True), (1024,), w, b)), (x, h, w, b)


def _softmax(T):
    x = T.randn(4096, 1024)
    return (lambda x: T.nn.functional.softmax(x, -1)), (x,)


def _embedding_scale(T):
    F = T.nn.functional
    table, idx = T.randn(32000, 512), T.randint(0, 32000, (32, 256))
    return (lambda idx, table: F.embedding(idx, table) * 22.627416997969522), (idx, table)


def _swiglu(T):
    F = T.nn.functional
    x, w1, w3 = T.randn(256, 512), T.randn(512, 1376) * 0.04, T.randn(512, 1376) * 0.04
    return (lambda x, w1, w3: F.silu(x @ w1) * (x @ w3)), (x, w1, w3)


def fusion_cases(quick):
    big = (1 << 22) if quick else (1 << 25)
    return [
        (f"tanh-GELU written out, {big >> 20}M floats", lambda T: _gelu_tanh(T, big), 3 if quick else 5),
        ("7-op pointwise chain, 1M floats", lambda T: _chain7(T, 1 << 20), 10),
        ("linear(512x1024 @ 1024x1024) + bias + ReLU", lambda T: _linear_act(T, "relu"), 5),
        ("linear + bias + GELU", lambda T: _linear_act(T, "gelu"), 5),
        ("linear + bias + SiLU", lambda T: _linear_act(T, "silu"), 5),
        ("LayerNorm(x + dropout(h)), (4096, 1024)", _ln_residual_dropout, 10),
        ("softmax(-1), (4096, 1024)", _softmax, 10),
        ("embedding(32000x512)[32x256] * scale", _embedding_scale, 10),
        ("SwiGLU silu(x@W1) * (x@W3), 256x512x1376", _swiglu, 10),
    ]


def fusion_table(torch, quick, inductor=True, cases=None):
    """Rows (what, strata eager, strata_cpp, torch eager, torch.compile) in seconds per call."""
    out = []
    words = [w for w in (cases or "").split(",") if w]
    for name, make, reps in fusion_cases(quick):
        if words and not any(w in name for w in words):
            continue
        st.manual_seed(0)
        fn, args = make(st)
        eager = per_call(fn, args, 1, reps)
        try:
            cf = st.compile(fn, backend="strata_cpp")
            cf(*args)
            cpp = per_call(cf, args, 1, reps)
        except Exception:
            cpp = float("nan")
        t_eager = t_comp = float("nan")
        if torch is not None:
            tfn, targs = make(torch)
            t_eager = per_call(tfn, targs, 1, reps)
            if inductor:
                try:
                    torch._dynamo.reset()
                    tc = torch.compile(tfn, backend="inductor")
                    tc(*targs)
                    t_comp = per_call(tc, targs, 1, reps)
                except Exception:
                    pass
        out.append((name, eager, cpp, t_eager, t_comp))
    return out


def mode_table(quick, cases, modes, rounds=5):
    """strata_cpp under each mode on the fusion-table cases: rows (what, {mode: (seconds per call, first call
    seconds incl. compile)}), the modes timed interleaved (one repeat of each per round, min over rounds)."""
    out = []
    words = [w for w in (cases or "").split(",") if w]
    for name, make, reps in fusion_cases(quick):
        if words and not any(w in name for w in words):
            continue
        st.manual_seed(0)
        fn, args = make(st)
        fns, first = {}, {}
        for m in modes:
            st.compiler.reset()
            t0 = time.perf_counter()
            fns[m] = st.compile(fn, backend="strata_cpp", mode=m)
            fns[m](*args)
            first[m] = time.perf_counter() - t0
        best = {m: float("inf") for m in modes}
        # One thread: the thread's CPU time (other jobs' load does not count); more: wall time.
        clock = time.thread_time if st.get_num_threads() == 1 else time.perf_counter
        for _ in range(rounds):
            for m in modes:
                for _ in range(max(1, reps // 2)):
                    t0 = clock()
                    fns[m](*args)
                    best[m] = min(best[m], clock() - t0)
        out.append((name, {m: (best[m], first[m]) for m in modes}))
    return out


def print_mode_table(rows, modes):
    clock = "thread CPU" if st.get_num_threads() == 1 else "wall"
    print(f"strata_cpp by mode, {clock} ms per call (min over interleaved rounds); first call (compile incl.) in "
          f"brackets; ratio = {modes[0]} / {modes[-1]}")
    for name, r in rows:
        cells = "  ".join(f"{m}: {r[m][0] * 1e3:8.3f} [{r[m][1]:.2f} s]" for m in modes)
        print(f"    {name:46} {cells}  {r[modes[0]][0] / r[modes[-1]][0]:.3f}x")


def print_fusion_table(rows):
    def ms(t):
        return "n/a" if t != t else f"{t * 1e3:.3f}"
    print(f"(e) fusion table, ms per call (min over repeats); ratio = other's time / strata_cpp's")
    print(f"    {'case':46}{'strata':>9}{'cpp':>9}{'torch':>9}{'inductor':>9}  cpp vs eager, vs inductor")
    for name, e, c, te, tc in rows:
        r1 = f"{e / c:.2f}x" if c == c else "n/a"
        r2 = f"{tc / c:.2f}x" if c == c and tc == tc else "n/a"
        print(f"    {name:46}{ms(e):>9}{ms(c):>9}{ms(te):>9}{ms(tc):>9}  {r1:>6}, {r2:>6}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--no-inductor", action="store_true")
    ap.add_argument("--table-only", action="store_true", help="only (e), the fusion table")
    ap.add_argument("--cases", default=None,
                    help="with --table-only: only the fusion-table cases whose name contains one of these "
                         "comma-separated words (e.g. 'linear,SwiGLU')")
    ap.add_argument("--modes", default=None,
                    help="with --table-only: compare strata_cpp under these comma-separated modes instead "
                         "(e.g. 'default,max-autotune'), timed interleaved")
    a = ap.parse_args()
    if a.table_only and a.modes:
        modes = [m for m in a.modes.split(",") if m]
        print_mode_table(mode_table(a.quick, a.cases, modes), modes)
        return
    if a.table_only:
        torch = None
        if not a.no_torch:
            try:
                import torch
                import torch._dynamo
            except ImportError:
                torch = None
        print_fusion_table(fusion_table(torch, a.quick, not a.no_inductor, a.cases))
        return
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
    print()
    print_fusion_table(fusion_table(torch, a.quick, not a.no_inductor))


if __name__ == "__main__":
    main()
