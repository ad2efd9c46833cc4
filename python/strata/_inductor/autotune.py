"""mode="max-autotune": timing a generated kernel's render variants, and GEMM routes, on the real shapes.

Note [Autotuning]
Under mode="max-autotune" (and "max-autotune-no-cudagraphs", the same on the CPU) compile_graph
(fusion.py) asks this module, for each kernel it generates, which render parameters (Note [Render
parameters] in cpp.py) to use:
  - every kernel: the OpenMP region threaded at its default threshold (the default), run serially
    (a kernel above the threshold) or threaded (below it); half the threads where there are at least 4;
  - pointwise kernels: the inner block (4096, 32768 (default), 131072 elements);
  - transposed pointwise kernels: the tile edge (32, 64 (default), 128);
  - row kernels: rows per scheduling chunk (one range per thread (default), 1, 16); without the
    prefetch of the next row;
  - column sums: columns per tile (half, default, double; max/min keep theirs, see below);
  - pointwise, transposed and column kernels on AVX-512: the kernel function compiled for 256-bit
    vectors (a target pragma; the flags prefer 512). Vector math functions (libmvec) of another width
    could round differently: the byte comparison below decides.
A kernel with a single candidate (one thread and no loop variant for its shape) is not timed, nor
is a graph captured with symbolic sizes (its kernels serve every size: backends.py passes tune=False).
None of these changes the order in which any output element is computed or accumulated, so every
candidate gives the default's bits; each candidate's outputs are still compared byte for byte with
the default's on the same inputs and a candidate that differs is excluded (stats["excluded"]).
Column max/min keep their tile width: their four-row fold runs on full tiles only, and which of two
equal-comparing values (-0.0, 0.0) wins could change with it.
The candidates are compiled as one translation unit (codecache.load_variants), called through the
same KernelCall as the step on fresh random inputs with the captured sizes, strides and dtypes
(indices of a gather within its table), round-robin (one call of each candidate per round, after a
warm-up call) until the budget (STRATA_AUTOTUNE_BUDGET_MS per kernel, default 150 ms) is spent, at
least 5 and at most 50 rounds; each candidate's time is its minimum, in the calling thread's CPU time
when strata runs one thread (other jobs' load then does not count) and in wall time otherwise. The
fastest wins unless it is within TIE (3 %) of the default, which then stays: ties keep the default
source. A winner other than the default must win again in a second round-robin of the two (same
budget), else the default stays: on a loaded machine one lucky minimum does not decide.
GEMM routes: each float32 linear / mm / matmul / addmm node that a GEMM step can run (Note [GEMM
epilogue steps] in fusion.py, here also below GEMM_EPILOGUE_MIN_WORK, without a bias or epilogue)
is timed as the oneDNN step and as its nodes run by eager (blas sgemm, then the epilogue node); the
faster is kept, ties to the route default mode takes. The two routes agree to float tolerance,
not bit for bit (checked: a route whose result is not close to the other's keeps the default).
Decisions are cached in memory and on disk next to the kernels ($STRATA_CACHE_DIR/codegen/autotune/
<key>.json, written whole and renamed), keyed by the sha256 of the default kernel source (comments
removed), the input sizes, strides and dtypes, the thread count, the ISA flags, the compiler version,
strata's version and VERSION; a later process reads the decision and times nothing. A file that
does not parse, is for another key or names a candidate that is not in the current set is ignored
(stats["corrupt"]) and the kernel is timed again.
STRATA_LOGS=autotune (or output_code) prints each decision: kernel, candidates with their times,
winner, and whether it came from the cache."""

import hashlib
import json
import os
import tempfile
import time

import strata

from . import codecache

VERSION = 1
TIE = 0.03
MIN_ROUNDS, MAX_ROUNDS = 5, 50
SERIAL = 1 << 62

stats = {"benchmarks": 0, "disk_hits": 0, "memory_hits": 0, "corrupt": 0, "excluded": 0, "gemm_benchmarks": 0}
decisions = []   # every decision of this process, in order (dicts, as logged)
_memory = {}


def budget_s():
    try:
        return max(1.0, float(os.environ.get("STRATA_AUTOTUNE_BUDGET_MS", "150"))) / 1000
    except ValueError:
        return 0.15


def _threads():
    return strata.get_num_threads()


# ---- candidates ------------------------------------------------------------------------------------

def _thread_options(total):
    from .cpp import PARALLEL_MIN
    n = _threads()
    opts = [{}]
    if n > 1:
        # Below the threshold the default is already serial: the other choice is threading it anyway.
        opts.append({"parallel_min": SERIAL} if total >= PARALLEL_MIN else {"parallel_min": 0})
        if n >= 4:
            opts.append({"parallel_min": 0, "threads": n // 2})
    return opts


def candidates(kind, total, **info):
    """Render parameter dicts for a kernel, the default ({}) first (Note [Autotuning])."""
    from .cpp import BLOCK, TILE
    shapes = [{}]
    if kind == "pointwise":
        inner = info.get("inner", total)
        shapes += [{"block": b} for b in (1 << 12, 1 << 17) if b != BLOCK and inner > min(b, BLOCK)]
    elif kind == "tiled":
        shapes += [{"tile": t} for t in (32, 128) if t != TILE]
    elif kind == "rows":
        shapes.append({"prefetch": 0})
        if info.get("rows", 0) > 2 * _threads():
            shapes += [{"chunk": c} for c in (1, 16)]
    elif kind == "columns":
        if info.get("op") in ("sum", "mean"):
            w = info["w"]
            shapes += [{"cols_w": w // 2}, {"cols_w": w * 2}]
    out = []
    if kind in ("pointwise", "tiled", "columns") and "-mprefer-vector-width=512" in codecache.isa_flags():
        # 256-bit vectors on AVX-512 (row kernels' `omp simd` sums would add in another order: not offered).
        out.append({"vec": 256})
    for t in _thread_options(total):
        for s in shapes:
            c = {**t, **s}
            # Serial: one block or one tile is as good as another for the thread split; keep the shape
            # variants threaded only.
            if c.get("parallel_min") == SERIAL and s and kind != "tiled":
                continue
            out.append(c)
    return sorted(out, key=lambda c: c != {})   # the default first (a stable sort)


def describe(params):
    if not params:
        return "default"
    return ",".join(f"{k}={'serial' if v == SERIAL else v}" for k, v in sorted(params.items()))


# ---- the decision cache ----------------------------------------------------------------------------

def _key(kind, default_source, spec):
    _, version = codecache.compiler()
    h = hashlib.sha256()
    for part in (f"autotune-{VERSION}", getattr(strata, "__version__", ""), kind,
                 codecache.strip_comments(default_source), repr(spec), str(_threads()),
                 " ".join(codecache.isa_flags()), version):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def _dir():
    d = codecache.cache_dir() / "autotune"
    d.mkdir(parents=True, exist_ok=True)
    return d


def _lookup(key, valid):
    """The cached winner for key (memory, then disk), or None; valid(winner) says whether a
    winner read from disk names a current candidate."""
    hit = _memory.get(key)
    if hit is not None:
        stats["memory_hits"] += 1
        return hit, "memory"
    path = _dir() / f"{key}.json"
    if not path.exists():
        return None, None
    try:
        rec = json.loads(path.read_text())
        if not isinstance(rec, dict) or rec.get("key") != key or rec.get("version") != VERSION:
            raise ValueError("not this key's record")
        winner = rec["winner"]
        if not valid(winner):
            raise ValueError("winner is not a current candidate")
    except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError):
        stats["corrupt"] += 1
        return None, None
    stats["disk_hits"] += 1
    _memory[key] = rec
    return rec, "disk"


def _store(key, rec):
    _memory[key] = rec
    try:
        d = _dir()
        fd, tmp = tempfile.mkstemp(prefix=".a-", suffix=".json", dir=d)
        with os.fdopen(fd, "w") as f:
            json.dump(rec, f)
        os.replace(tmp, d / f"{key}.json")
    except OSError:
        pass


def _log(rec, source_of):
    from .._dynamo import logs
    d = dict(rec, source=source_of)
    decisions.append(d)
    if logs.enabled("autotune") or logs.enabled("output_code"):
        times = rec.get("times") or {}
        cands = ", ".join(f"{c}: {times[c] * 1e6:.1f} us" if isinstance(times.get(c), float) else f"{c}: {times.get(c)}"
                          for c in times)
        logs._emit("autotune", f"{rec['name']} ({rec['kind']}, {rec['spec']}): winner {rec['winner_name']}"
                               f" ({'timed' if source_of == 'timed' else 'cached in ' + source_of});"
                               + (f" candidates: {cands}" if cands else ""))


# ---- inputs and timing -----------------------------------------------------------------------------

def random_input(shape, stride, dtype, high=None):
    """A fresh tensor with these sizes, strides and dtype over its own storage, filled with random
    values (integers in [1, 8), or in [0, high) for gather indices)."""
    shape, stride = tuple(shape), tuple(stride)
    extent = 1 + sum((s - 1) * st for s, st in zip(shape, stride) if s > 0)
    if any(s == 0 for s in shape):
        extent = 1
    name = str(dtype).replace("strata.", "")
    g = _generator()
    if name == "bool":
        flat = strata.rand(extent, generator=g) > 0.5
    elif name.startswith(("int", "uint")):
        flat = strata.randint(0 if high is not None else 1, high if high is not None else 8, (extent,),
                              generator=g).to(dtype)
    else:
        flat = strata.randn(extent, generator=g).to(dtype)
    return flat.as_strided(shape, stride)


_gen = None


def _generator():
    """A generator of our own: timing must not advance the user's random stream (a compiled step with
    dropout draws the same masks under every mode)."""
    global _gen
    if _gen is None:
        _gen = strata.Generator()
        _gen.manual_seed(0x5EED)
    return _gen


def _bytes(outs):
    return [o.contiguous().view(strata.uint8).numpy().tobytes() if o.numel() else b"" for o in outs]


def _clock():
    """The calling thread's CPU time with one thread (all the work runs on it: other jobs' load does not
    count), wall time with more (the other threads' work must count)."""
    return time.thread_time if _threads() == 1 else time.perf_counter


def _time_all(calls, inputs, budget):
    """[min seconds per call], round-robin (one call of each per round) after a warm-up call each."""
    best = [float("inf")] * len(calls)
    for c in calls:
        c(*inputs)
    clock = _clock()
    end = time.perf_counter() + budget
    rounds = 0
    while rounds < MIN_ROUNDS or (rounds < MAX_ROUNDS and time.perf_counter() < end):
        for k, c in enumerate(calls):
            t0 = clock()
            c(*inputs)
            best[k] = min(best[k], clock() - t0)
        rounds += 1
    return best


def _pick(times, default=0):
    """The index of the fastest time, or default when the fastest is within TIE of it."""
    k = min(range(len(times)), key=lambda i: (times[i], i))
    if times[default] != float("inf") and times[k] >= times[default] * (1 - TIE):
        return default
    return k


def _confirmed(calls, k, inputs, default=0):
    """Whether candidate k, which beat the default, beats it again (by TIE) in a second round-robin: on a
    loaded machine one lucky minimum does not decide."""
    again = _time_all([calls[default], calls[k]], inputs, budget_s())
    return again[1] < again[0] * (1 - TIE)


# ---- kernels ---------------------------------------------------------------------------------------

def tune_kernel(name, kind, render, cands, make_call, make_inputs, spec, nargs=2):
    """(source, params) of the fastest candidate of a generated kernel (Note [Autotuning]).
    render(params) -> source; make_call(fn) -> the step's KernelCall for a loaded function;
    make_inputs() -> fresh input tensors; spec: the input sizes, strides and dtypes (part of the key)."""
    default_source = render({})
    if len(cands) < 2:
        return default_source, {}   # nothing to choose (one thread and no loop variant for this shape)
    key = _key(kind, default_source, spec)
    names = [describe(c) for c in cands]
    rec, where = _lookup(key, lambda w: isinstance(w, dict) and describe(w) in names)
    if rec is not None:
        _log(rec, where)
        return render(rec["winner"]), rec["winner"]
    stats["benchmarks"] += 1
    sources = [render(c) for c in cands]
    try:
        fns = codecache.load_variants(sources, nargs)
    except RuntimeError:
        fns = [codecache.load(s, nargs) for s in sources]
    calls = [make_call(fn) for fn in fns]
    inputs = make_inputs()
    ref = calls[0](*inputs)
    times = {}
    usable = []
    if ref is not None:
        want = _bytes(ref)
        for k, c in enumerate(calls):
            got = c(*inputs) if k else ref
            if got is None or _bytes(got) != want:
                stats["excluded"] += 1
                times[names[k]] = "excluded (different result)"
                continue
            usable.append(k)
    winner = 0
    if len(usable) > 1:
        measured = _time_all([calls[k] for k in usable], inputs, budget_s())
        for k, t in zip(usable, measured):
            times[names[k]] = t
        winner = usable[_pick(measured)]
        if winner != 0 and not _confirmed(calls, winner, inputs):
            times["confirmation"] = f"{names[winner]} not faster again: default kept"
            winner = 0
    rec = {"version": VERSION, "key": key, "name": name, "kind": kind, "spec": spec_text(spec),
           "winner": cands[winner], "winner_name": names[winner], "times": times}
    _store(key, rec)
    _log(rec, "timed")
    return sources[winner], cands[winner]


def spec_text(spec):
    return "; ".join(f"{list(sh)}/{list(st)} {str(dt).replace('strata.', '')}" for sh, st, dt in spec)


# ---- GEMM routes -----------------------------------------------------------------------------------

def gemm_route(name, desc, ops, default, step_call, eager_call, make_inputs, spec):
    """"dnnl" (the GEMM step) or "eager" (its nodes node by node) for one GEMM plan, whichever is
    faster on fresh inputs (ties: default). step_call and eager_call take the same inputs."""
    routes = ["dnnl", "eager"]
    key = _key("gemm", f"{desc} {ops}", spec)
    rec, where = _lookup(key, lambda w: w in routes)
    if rec is not None:
        _log(rec, where)
        return rec["winner"]
    stats["gemm_benchmarks"] += 1
    calls = {"dnnl": step_call, "eager": eager_call}
    order = [default] + [r for r in routes if r != default]
    inputs = make_inputs()
    outs = {r: calls[r](*inputs) for r in order}
    times = {}
    winner = default
    if outs["dnnl"] is None:
        times["dnnl"] = "declined"
        winner = "eager"
    else:
        a, b = outs["dnnl"][0], outs["eager"][0]
        if not strata.allclose(a, b, rtol=1e-4, atol=1e-4 * max(1.0, float(b.abs().max()) if b.numel() else 1.0)):
            times["dnnl"] = "excluded (not close to eager)"
            stats["excluded"] += 1
        else:
            measured = _time_all([calls[r] for r in order], inputs, budget_s())
            times = dict(zip(order, measured))
            k = _pick(measured)
            if k != 0 and not _confirmed([calls[r] for r in order], k, inputs):
                times["confirmation"] = f"{order[k]} not faster again: {default} kept"
                k = 0
            winner = order[k]
    rec = {"version": VERSION, "key": key, "name": name, "kind": "gemm", "spec": f"{ops} desc={desc}",
           "winner": winner, "winner_name": winner, "times": times}
    _store(key, rec)
    _log(rec, "timed")
    return winner
