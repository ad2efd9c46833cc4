"""strata.profiler: tables, chrome traces, record_function, explain(), hidden-copy warnings, threads."""

import inspect
import json
import threading
import warnings

import pytest

import strata
import strata.nn.functional as F
from strata import _C
from strata.profiler import ProfilerActivity, explain, profile, record_function


def _line_of(marker):
    """Line number in this file of the line containing marker (for warning locations)."""
    for i, line in enumerate(open(__file__).read().splitlines(), 1):
        if marker in line and "_line_of" not in line:
            return i
    raise AssertionError(marker)


def _by_key(avgs):
    return {e.key: e for e in avgs}


# ---- recording and tables -------------------------------------------------------


def test_table_names_counts_and_self_le_total():
    a, b = strata.randn(8, 16), strata.randn(16, 4)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            a + 1.0
        a @ b
        strata.outer(a[0], b[:, 0])  # composite: its kernel calls mul
    avgs = _by_key(prof.key_averages())
    assert avgs["strata::add"].count == 3
    assert avgs["strata::matmul"].count == 1
    assert avgs["strata::outer"].count == 1
    assert avgs["strata::mul"].count >= 1  # child of outer
    for e in avgs.values():
        assert 0 <= e.self_cpu_time_total <= e.cpu_time_total + 1e-9
        assert e.cpu_time == pytest.approx(e.cpu_time_total / e.count)
    outer = [e for e in prof.events() if e.name == "strata::outer"][0]
    assert [c.name for c in outer.cpu_children] == ["strata::mul"] or "strata::mul" in [
        c.name for c in outer.cpu_children]
    assert outer.self_cpu_time_total == pytest.approx(
        outer.cpu_time_total - sum(c.cpu_time_total for c in outer.cpu_children))
    table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=20)
    lines = table.splitlines()
    for col in ("Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "# of Calls"):
        assert col in lines[1]
    assert "Input Shapes" not in lines[1]
    assert lines[0].startswith("---") and lines[2].startswith("---") and lines[-2].startswith("---")
    assert lines[-1].startswith("Self CPU time total:")
    row = [l for l in lines if l.strip().startswith("strata::add ")][0]
    assert row.split()[-1] == "3"
    # Rows are sorted by the requested key, largest first.
    self_times = [e.self_cpu_time_total for e in
                  sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)]
    assert self_times == sorted(self_times, reverse=True)


@pytest.mark.parametrize("sort_by", ["cpu_time_total", "self_cpu_time_total", "cpu_time", "count",
                                     "cpu_memory_usage", "self_cpu_memory_usage", "cuda_time_total", None])
def test_table_sort_keys(sort_by):
    a = strata.randn(4, 4)
    with profile() as prof:
        a + a
        a * a
        a * a
    t = prof.key_averages().table(sort_by=sort_by, row_limit=1)
    body = [l for l in t.splitlines() if "strata::" in l]
    assert len(body) == 1  # row_limit
    if sort_by == "count":
        assert "strata::mul" in body[0]


def test_table_bad_sort_key():
    with profile() as prof:
        strata.ones(2) + 1
    with pytest.raises(ValueError, match="sort_by"):
        prof.key_averages().table(sort_by="nonsense")


def test_group_by_input_shape():
    x, y = strata.randn(2, 3), strata.randn(4, 5)
    with profile(record_shapes=True) as prof:
        x + x
        x + x
        y + y
    groups = [e for e in prof.key_averages(group_by_input_shape=True) if e.key == "strata::add"]
    by_shape = {str(e.input_shapes): e.count for e in groups}
    assert by_shape == {"[[2, 3], [2, 3], [], []]": 2, "[[4, 5], [4, 5], [], []]": 1}
    t = prof.key_averages(group_by_input_shape=True).table(sort_by="cpu_time_total")
    assert "Input Shapes" in t.splitlines()[1]
    assert "[[4, 5], [4, 5], [], []]" in t
    ev = [e for e in prof.events() if e.name == "strata::add"][0]
    assert ev.input_dtypes[:2] == ["float32", "float32"]
    # Ungrouped averages have one row per op.
    assert [e.count for e in prof.key_averages() if e.key == "strata::add"] == [3]


def test_group_by_shape_needs_record_shapes():
    with profile() as prof:
        strata.ones(2) + 1
    with pytest.raises(RuntimeError, match="record_shapes"):
        prof.key_averages(group_by_input_shape=True)


def test_scalar_arguments_record_as_scalar():
    x = strata.randn(3)
    with profile(record_shapes=True) as prof:
        x + 2.5
    ev = [e for e in prof.events() if e.name == "strata::add"][0]
    assert ev.input_shapes[0] == [3] and ev.input_shapes[1] == []
    assert ev.input_dtypes[1] == "Scalar"


def test_profile_memory_columns():
    with profile(profile_memory=True) as prof:
        strata.ones(1000) + 1
    ev = [e for e in prof.events() if e.name == "strata::add"][0]
    assert ev.num_allocs >= 1 and ev.cpu_memory_usage >= 3900  # net: temporaries inside are freed
    t = prof.key_averages().table()
    assert "CPU Mem" in t and "Self CPU Mem" in t


def test_with_stack_points_at_this_file():
    x = strata.ones(3)
    with profile(with_stack=True) as prof:
        x.neg()  # STACK_MARK
    ev = [e for e in prof.events() if e.name == "strata::neg"][0]
    assert ev.stack and __file__ in ev.stack[0]
    assert f"({_line_of('STACK_MARK')})" in ev.stack[0]


def test_results_only_after_stop():
    p = profile()
    with p:
        with pytest.raises(RuntimeError, match="after the with-block"):
            p.events()
    assert isinstance(p.events(), list)


# ---- off path ----------------------------------------------------------------------


def test_off_path_adds_no_records():
    a = strata.ones(4)
    a + a  # before
    assert not strata.profiler.is_profiling()
    assert "Profiler" not in _C._tls_dispatch_keys()[0]
    with profile() as prof:
        assert strata.profiler.is_profiling()
        assert "Profiler" in _C._tls_dispatch_keys()[0]
        a * a
    assert not strata.profiler.is_profiling()
    assert "Profiler" not in _C._tls_dispatch_keys()[0]
    a - a  # after
    with record_function("outside"):
        a.neg()
    assert [e.name for e in prof.events()] == ["strata::mul"]
    # A token from a finished session is ignored.
    tok = _C._record_function_enter("x", "user_annotation")
    assert tok == -1
    _C._record_function_exit(tok)


def test_session_survives_exception():
    with pytest.raises(RuntimeError):
        with profile() as prof:
            strata.ones(2) + strata.ones(3)
    assert not strata.profiler.is_profiling()
    ev = [e for e in prof.events() if e.name == "strata::add"]
    assert len(ev) == 1 and ev[0].cpu_time_total >= 0


# ---- record_function -------------------------------------------------------------


def test_record_function_nesting_and_decorator():
    x = strata.randn(3, 3)

    @record_function("decorated")
    def step(t):
        return t.relu() if hasattr(t, "relu") else t.abs()

    with profile() as prof:
        with record_function("outer"):
            x + x
            with record_function("inner"):
                x * x
                step(x)
            step(x)
    evs = prof.events()
    by = {}
    for e in evs:
        by.setdefault(e.name, []).append(e)
    outer, inner = by["outer"][0], by["inner"][0]
    assert inner.cpu_parent is outer
    assert by["strata::add"][0].cpu_parent is outer
    assert by["strata::mul"][0].cpu_parent is inner
    decorated = by["decorated"]
    assert len(decorated) == 2
    assert {d.cpu_parent.name for d in decorated} == {"inner", "outer"}
    for d in decorated:
        assert len(d.cpu_children) >= 1 and d.cpu_children[0].name.startswith("strata::")
    for e in evs:
        if e.cpu_parent is not None:
            assert e.cpu_parent.start_ns <= e.start_ns and e.end_ns <= e.cpu_parent.end_ns
            assert e.depth == e.cpu_parent.depth + 1
    assert outer.is_user_annotation and outer.category == "user_annotation"
    avgs = _by_key(prof.key_averages())
    assert avgs["decorated"].count == 2
    assert avgs["outer"].self_cpu_time_total <= avgs["outer"].cpu_time_total


def test_record_function_recursion():
    rf = record_function("rec")

    def f(n):
        with rf:
            if n:
                f(n - 1)

    with profile() as prof:
        f(2)
    recs = [e for e in prof.events() if e.name == "rec"]
    assert [e.depth for e in recs] == [0, 1, 2]


# ---- chrome trace ---------------------------------------------------------------------


def _check_trace(path):
    with open(path) as f:
        d = json.load(f)
    assert isinstance(d["traceEvents"], list)
    xs = [e for e in d["traceEvents"] if e.get("ph") == "X"]
    for e in d["traceEvents"]:
        for k in ("ph", "name", "pid", "tid", "ts"):
            assert k in e, (k, e)
        assert e["ph"] in ("X", "M")
    for e in xs:
        for k in ("cat", "dur", "args"):
            assert k in e
        assert isinstance(e["ts"], (int, float)) and isinstance(e["dur"], (int, float))
        assert e["dur"] >= 0 and e["ts"] >= 0
    # Per thread, complete events must nest properly (contained or disjoint).
    eps = 1e-3
    for tid in {e["tid"] for e in xs}:
        evs = sorted((e for e in xs if e["tid"] == tid), key=lambda e: (e["ts"], -e["dur"]))
        stack = []
        for e in evs:
            while stack and e["ts"] >= stack[-1]["ts"] + stack[-1]["dur"] - eps:
                stack.pop()  # disjoint from the open range: it has ended
            if stack:
                p = stack[-1]
                assert e["ts"] + e["dur"] <= p["ts"] + p["dur"] + eps, (e, p)
            stack.append(e)
    return d, xs


def test_chrome_trace(tmp_path):
    a, b = strata.randn(6, 5), strata.randn(5, 7)
    with profile(record_shapes=True) as prof:
        with record_function("block"):
            c = a @ b
            strata.outer(a[0], b[0])
        c.sum()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    d, xs = _check_trace(path)
    names = [e["name"] for e in xs]
    assert "block" in names and "strata::matmul" in names and "strata::mul" in names
    block = [e for e in xs if e["name"] == "block"][0]
    assert block["cat"] == "user_annotation"
    mm = [e for e in xs if e["name"] == "strata::matmul"][0]
    assert mm["cat"] == "cpu_op"
    assert mm["args"]["Input Dims"][:2] == [[6, 5], [5, 7]]
    assert mm["args"]["Input type"][:2] == ["float32", "float32"]
    assert block["ts"] <= mm["ts"] and mm["ts"] + mm["dur"] <= block["ts"] + block["dur"] + 1e-3
    sm = [e for e in xs if e["name"].startswith("strata::sum")][0]
    assert sm["ts"] >= block["ts"] + block["dur"] - 1e-3  # after the block, not inside it
    assert any(e["ph"] == "M" and e["name"] == "thread_name" for e in d["traceEvents"])


# ---- threads -------------------------------------------------------------------------


def test_profiling_from_two_threads():
    results, errors = {}, []
    barrier = threading.Barrier(2)

    def work(name, op, n):
        try:
            x = strata.randn(16, 16)
            barrier.wait()
            with profile() as prof:
                for _ in range(n):
                    op(x)
            results[name] = (prof, threading.get_native_id())
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    t1 = threading.Thread(target=work, args=("a", lambda x: x + x, 50))
    t2 = threading.Thread(target=work, args=("b", lambda x: x * x, 30))
    t1.start(), t2.start()
    t1.join(), t2.join()
    assert not errors
    pa, tid_a = results["a"]
    pb, tid_b = results["b"]
    assert {e.name for e in pa.events()} == {"strata::add"}
    assert {e.name for e in pb.events()} == {"strata::mul"}
    assert len(pa.events()) == 50 and len(pb.events()) == 30
    assert {e.thread for e in pa.events()} == {tid_a}
    assert {e.thread for e in pb.events()} == {tid_b}
    assert tid_a != tid_b


def test_other_threads_are_recorded_too():
    # As torch's profiler: every thread's ops, each with its thread.
    x = strata.randn(4)
    with profile() as prof:
        t = threading.Thread(target=lambda: x.neg())
        t.start()
        t.join()
        x.abs()
    events = sorted(prof.events(), key=lambda e: e.name)
    assert [e.name for e in events] == ["strata::abs", "strata::neg"]
    assert events[0].thread != events[1].thread
    t = threading.Thread(target=lambda: x.neg())  # after the profile: not recorded anywhere
    t.start()
    t.join()
    assert len(prof.events()) == 2


# ---- explain -------------------------------------------------------------------------


def test_explain_matmul(capsys):
    a, b = strata.randn(8, 4), strata.randn(4, 3)
    ex = explain(lambda: a @ b)
    out = capsys.readouterr().out
    assert ex.result.shape == (8, 3)
    assert len(ex.calls) == 1
    c = ex.calls[0]
    assert c.name == "strata::matmul"
    assert "CPU" in c.tensor_keys
    assert c.keys_passed[0] == "Profiler" and c.keys_passed[-1] == "CPU"
    assert c.backend_key == "CPU"
    assert c.kernel and c.kernel_source == "CPU"
    assert c.python_binding_us is not None and c.python_binding_us >= 0
    assert c.dispatcher_us >= 0 and c.kernel_us >= 0
    assert c.allocs >= 1 and c.alloc_bytes >= 8 * 3 * 4
    assert c.blas is not None
    assert c.blas["num_threads"] == strata.get_num_threads()
    assert c.blas["isa"] in ("default", "avx2", "avx512")
    assert c.blas["blas_library"] in ("oneDNN", "OpenBLAS", "built-in blocked GEMM")
    for s in ("strata::matmul", c.kernel, "Profiler", "CPU", "BLAS", "ISA", "Python binding", "allocations"):
        assert s in out
    assert str(ex) in out


def test_explain_add_and_composite():
    a, b = strata.randn(5), strata.randn(5)
    ex = explain(lambda: (a + b, strata.outer(a, b)), verbose=False)
    add = ex.find("add")[0]
    assert add.kernel and add.backend_key == "CPU" and add.kernel_source == "CPU"
    assert add.blas is None
    assert add.python_binding_us is not None
    assert add.kernel in str(ex)
    outer = ex.find("outer")[0]
    assert outer.kernel_source == "CompositeImplicit"
    assert "CompositeImplicit" in str(outer)
    mul = [c for c in outer.children if c.name == "strata::mul"]
    assert mul and mul[0].python_binding_us is None  # called from C++
    assert outer.kernel_self_us <= outer.kernel_us
    # Nothing left switched on or patched.
    assert not strata.profiler.is_profiling()
    assert "ProfilerKernel" not in _C._tls_dispatch_keys()[0]
    assert strata.add is _C._ops.add or not hasattr(strata.add, "__wrapped__")
    assert isinstance(strata.Tensor.__dict__["neg"], _C.op_method)  # restored, not a Python wrapper


def test_explain_shows_thread_local_layers():
    x = strata.randn(3)
    with strata.no_grad():
        ex = explain(lambda: x.neg(), verbose=False)
    c = ex.calls[0]
    assert "Autograd" in c.tls_excluded
    assert "Autograd" not in c.dispatch_keys


# ---- hidden-copy warnings -----------------------------------------------------------


def test_hidden_copy_warning_names_op_and_line():
    x = strata.randn(4, 3, 5).transpose(0, 1)  # (3, 4, 5): batch rows cannot be folded
    w = strata.randn(5, 2)
    with strata.profiler.warn_on("hidden_copy"):
        with pytest.warns(strata.HiddenCopyWarning, match="matmul") as rec:
            x @ w  # HIDDEN_COPY_MARK
    assert len(rec) == 1
    assert rec[0].filename == __file__
    assert rec[0].lineno == _line_of("HIDDEN_COPY_MARK")
    assert "[3, 4, 5]" in str(rec[0].message)
    assert not strata.profiler.is_warn_on("hidden_copy")


def test_no_hidden_copy_warning_for_contiguous_or_when_off():
    x = strata.randn(3, 4, 5)
    w = strata.randn(5, 2)
    xt = strata.randn(4, 3, 5).transpose(0, 1)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        strata.set_warn_on("hidden_copy", True)
        try:
            x @ w
            x.transpose(1, 2).transpose(1, 2) @ w
        finally:
            strata.set_warn_on("hidden_copy", False)
        xt @ w  # off again
    assert [r for r in rec if issubclass(r.category, strata.HiddenCopyWarning)] == []
    assert "Profiler" not in _C._tls_dispatch_keys()[0]


def test_hidden_copy_warning_conv2d():
    x = strata.randn(1, 5, 5, 2).permute(0, 3, 1, 2)  # channels-last layout
    w = strata.randn(3, 2, 3, 3)
    with strata.profiler.warn_on("hidden_copy"):
        with pytest.warns(strata.HiddenCopyWarning, match="conv2d"):
            F.conv2d(x, w)


def test_hidden_copy_warning_as_error():
    xt = strata.randn(4, 3, 5).transpose(0, 1)
    w = strata.randn(5, 2)
    with strata.profiler.warn_on("hidden_copy"), warnings.catch_warnings():
        warnings.simplefilter("error", strata.HiddenCopyWarning)
        with pytest.raises(strata.HiddenCopyWarning):
            xt @ w
    xt @ w  # still works afterwards


def test_set_warn_on_validates():
    with pytest.raises(ValueError, match="unknown warning kind"):
        strata.set_warn_on("nope", True)


# ---- autograd integration (the engine records each backward node) ---------------------


@pytest.mark.skipif(not hasattr(strata.Tensor, "grad_fn"), reason="autograd not merged yet")
def test_backward_nodes_recorded():
    a = strata.randn(3, 4, requires_grad=True)
    b = strata.randn(4, 2, requires_grad=True)
    with profile() as prof:
        (a @ b).sum().backward()
    names = {e.name for e in prof.events()}
    assert any("Backward" in n for n in names), names
