"""Tests of strata._dynamo.bytecode: instruction model, tables, stack depths and resume functions.

The module is loaded by file path: importing it as strata._dynamo.bytecode would run
strata/__init__, which needs the C extension, and these tests also run under a bare
CPython 3.12 (PYTHONPATH=python python3.12 -m pytest tests/python/compile/test_bytecode.py).
"""

import copy
import dis
import importlib.util
import json
import os
import random
import sys
import traceback
import types

import pytest

_PATH = os.path.join(os.path.dirname(__file__), "..", "..", "..", "python", "strata", "_dynamo", "bytecode.py")
_spec = importlib.util.spec_from_file_location("_strata_dynamo_bytecode_under_test", os.path.abspath(_PATH))
bc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bc)

PY312 = sys.version_info[:2] == (3, 12)


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------
def snapshot(fn, args, offset, hit=1, kwargs=None):
    """Run fn(*args) under an opcode tracer; return (locals, result) where locals is a deep copy of
    the frame's bound locals (varnames and cellvars, not freevars) the `hit`-th time the instruction
    at `offset` is about to run (None if it never is)."""
    code = fn.__code__
    own = set(code.co_varnames) | set(code.co_cellvars)
    seen = []
    count = [0]

    def tracer(frame, event, arg):
        if frame.f_code is not code:
            return None
        frame.f_trace_opcodes = True
        if event == "opcode" and frame.f_lasti == offset:
            count[0] += 1
            if count[0] == hit:
                seen.append(copy.deepcopy({k: v for k, v in frame.f_locals.items() if k in own}))
        return tracer

    old = sys.gettrace()
    sys.settrace(tracer)
    try:
        result = fn(*args, **(kwargs or {}))
    finally:
        sys.settrace(old)
    return (seen[0] if seen else None), result


def _prime_tracing():
    # CPython 3.12.1 delivers no opcode events during the first sys.settrace session that turns
    # f_trace_opcodes on (later sessions get them); run one throwaway session so snapshot() sees all.
    def tiny(v):
        return v + 1
    snapshot(tiny, (1,), 0)


_prime_tracing()


def resume(fn, offset, stack=(), live=None, stack_items=None, **kw):
    """Resume fn at offset with the given stack values (all "value" unless stack_items says) and
    live locals (a dict)."""
    live = live or {}
    items = stack_items if stack_items is not None else ["value"] * len(stack)
    g = bc.make_resume_function(fn, offset, items, list(live), **kw)
    return g(*stack, *live.values())


def line_offsets(fn, rel_line):
    """Offsets of instructions starting source line fn's def line + rel_line."""
    code = fn.__code__
    return [i.offset for i in bc.get_instructions(code) if i.starts_line == code.co_firstlineno + rel_line]


def first_at_line(fn, rel_line):
    offs = line_offsets(fn, rel_line)
    assert offs, f"no instruction starts line +{rel_line} of {fn.__name__}"
    return offs[0]


def instrs_on_line(fn, rel_line):
    line = fn.__code__.co_firstlineno + rel_line
    return [i for i in bc.get_instructions(fn.__code__) if i.positions.lineno == line]


def merged_lines(code):
    """co_lines with adjacent ranges of the same line merged (entry boundaries are an encoding detail)."""
    out = []
    for start, end, line in code.co_lines():
        if out and out[-1][2] == line and out[-1][1] == start:
            out[-1] = (out[-1][0], end, line)
        else:
            out.append((start, end, line))
    return out


def all_code_objects(code):
    yield code
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            yield from all_code_objects(c)


def stdlib_codes():
    import ast  # noqa: F401  (modules with varied bytecode)
    import inspect
    import textwrap
    mods = [dis, json.decoder, json.encoder, inspect, textwrap, copy, random, traceback]
    out = []
    for m in mods:
        src = open(m.__file__).read()
        out.extend(all_code_objects(compile(src, m.__file__, "exec")))
    return out


# ---------------------------------------------------------------------------
# Functions under test
# ---------------------------------------------------------------------------
def helper(v):
    return v * 3 - 1


def straight(a, b):
    x = a + 1
    y = x * b
    z = y - a
    w = helper(z) + x
    return x, y, z, w


def loop_range(n):
    t = 0
    for i in range(n):
        t = t + i * i
        t = t - 1
    return t


def loop_list(xs):
    acc = []
    for x in xs:
        acc.append(x * 2)
        acc.append(-x)
    return acc


def loop_while(n):
    i = 0
    s = 1
    while i < n:
        s = s * 2 + i
        i += 1
    return s


def try_except(x):
    r = 0
    try:
        r = x + 1
        r = r * 2
        if r > 10:
            raise ValueError("big")
        r = r + 100
    except ValueError:
        r = -r
    return r


def try_finally(x, log):
    try:
        y = x * 2
        y = 10 // (y - 4)
        log.append(("body", y))
    finally:
        log.append("finally")
    return y


class Recorder:
    def __init__(self, suppress=False):
        self.events = []
        self.suppress = suppress

    def __enter__(self):
        self.events.append("enter")
        return self

    def __exit__(self, et, ev, tb):
        self.events.append(("exit", et))
        return self.suppress


def with_block(cm, x):
    with cm as c:
        y = x + 1
        y = 10 // (y - 3)
        c.events.append(("body", y))
    return y


def after_call(x):
    y = helper(x) + 1
    return y * 2


def make_closure(k):
    def inner(a):
        b = a + k
        c = b * k
        return c - a
    return inner


def with_cell(a):
    c = a * 2
    d = a + 1
    g = lambda: c + d  # noqa: E731
    c = c + 100
    return g()


def with_cell_captured_early(a):
    c = a * 2
    g = lambda: c  # noqa: E731
    c = c + 100
    return g()


def many_args(a, b=2, *args, k=3, **kw):
    s = a + b + k
    s = s + sum(args)
    s = s + sum(kw.values())
    return s


def unbound_later(a):
    if a > 0:
        q = a
    r = a + 1
    return q + r


def raiser(a):
    b = a + 1
    c = b * 2
    d = {}[c]
    return d


def mixed(n, xs):
    total = 0
    k = 0
    while k < n:
        k += 1
        if k % 2:
            total += k
        else:
            total -= 1
    for x in xs:
        total += x
    try:
        total = total // (n - 3)
    except ZeroDivisionError:
        total = -1
    parts = [str(total), str(k)]
    res = "-".join(parts)
    if len(res) > 3:
        res = res[:3]
    else:
        res = res * 2
    return res, total


def branchy(a, b):
    out = []
    if a > b:
        out.append(a)
        m = a
    elif a == b:
        m = 0
    else:
        m = b
        out.append(-b)
    z = m * 2
    while z > 10:
        z //= 3
        out.append(z)
    t = (z, m, len(out))
    return out, t


def comprehensions(xs):
    ys = [x * 2 for x in xs]
    x = len(ys)
    zs = {k: k + x for k in ys if k > 2}
    total = sum(v for v in zs.values())
    return ys, zs, x, total


def outer_with_inner(a, b):
    scale = a + 1

    def inner(v):
        return v * scale + b
    r = inner(2)
    scale = scale * 10
    r = r + inner(3)
    return r


RANDOM_CASES = [
    (comprehensions, [([1, 2, 3],), ([],)]),
    (straight, [(1, 2), (5, -3)]),
    (loop_while, [(0,), (3,), (6,)]),
    (try_except, [(1,), (10,)]),
    (mixed, [(0, [1, 2]), (3, []), (5, [4, 5, 6])]),
    (branchy, [(5, 1), (2, 2), (1, 40)]),
    (unbound_later, [(3,)]),
]


# ---------------------------------------------------------------------------
# Instruction model and tables
# ---------------------------------------------------------------------------
def test_instructions_skip_caches_and_fold_extended_arg():
    for code in stdlib_codes()[:300]:
        ins = bc.get_instructions(code)
        dis_ins = [i for i in dis.get_instructions(code) if i.opname != "EXTENDED_ARG"]
        assert [i.offset for i in ins] == [i.offset for i in dis_ins]
        assert all(i.opname != "CACHE" for i in ins)
        for a, b in zip(ins, ins[1:]):
            assert a.next_offset == b.start_offset
            assert bc.next_offset(code, a.offset) == b.start_offset
            assert bc.instruction_at(code, b.start_offset) is b
        assert ins[-1].next_offset == len(code.co_code)
        for i in ins:
            if i.jump_target is not None:
                assert i.jump_target == i.argval, (i, code)


def test_extended_arg_offsets():
    src = "def big():\n" + "".join(f"    v{j} = {j}\n" for j in range(300)) + "    return v299 + v0\n"
    ns = {}
    exec(src, ns)
    code = ns["big"].__code__
    ins = [i for i in bc.get_instructions(code) if i.opname == "STORE_FAST" and i.arg == 299]
    assert ins and ins[0].start_offset == ins[0].offset - 2
    assert bc.instruction_at(code, ins[0].start_offset) is ins[0]
    with pytest.raises(ValueError):
        bc.instruction_at(code, 1)


def test_exception_table_roundtrip():
    n = 0
    for code in stdlib_codes():
        entries = bc.parse_exception_table(code)
        ref = dis._parse_exception_table(code)
        assert [(e.start, e.end, e.target, e.depth, e.lasti) for e in entries] == \
            [(e.start, e.end, e.target, e.depth, e.lasti) for e in ref]
        assert bc.encode_exception_table(entries) == code.co_exceptiontable
        n += bool(entries)
    assert n > 20


def test_linetable_encoding_keeps_positions():
    for code in stdlib_codes()[:400]:
        pos = list(code.co_positions())
        new = code.replace(co_linetable=bc.encode_linetable(pos, code.co_firstlineno))
        assert list(new.co_positions()) == pos
        assert merged_lines(new) == merged_lines(code)


def test_version_table_agrees_with_the_interpreter():
    import opcode
    real = {n for n in opcode.opmap if opcode.opmap[n] < 256}
    indexed = {opcode.opname[o] for o in dis.haslocal + dis.hasfree} & real
    assert set(bc.VERSION_FACTS["localsplus_ops"]) == indexed
    assert set(bc.VERSION_FACTS["backward_jumps"]) == {opcode.opname[o] for o in dis.hasjrel
                                                        if "BACKWARD" in opcode.opname[o]} & real


# ---------------------------------------------------------------------------
# Stack depth analysis
# ---------------------------------------------------------------------------
def test_stack_depth_known_cases():
    code = loop_range.__code__
    # Inside the for body the iterator is on the stack.
    assert bc.stack_depth_at(code, first_at_line(loop_range, 3)) == 1
    assert bc.stack_depth_at(code, first_at_line(loop_range, 4)) == 1
    assert bc.stack_depth_at(code, first_at_line(loop_range, 1)) == 0
    assert bc.stack_depth_at(code, first_at_line(loop_range, 5)) == 0
    # Inside a with body: the __exit__ callable.
    assert bc.stack_depth_at(with_block.__code__, first_at_line(with_block, 2)) == 1
    # Nested for + with: iterator and __exit__.
    def nested(xs, cm):
        for x in xs:
            with cm:
                x = x + 1
        return 0
    assert bc.stack_depth_at(nested.__code__, first_at_line(nested, 3)) == 2
    # Conditional jumps: the condition is on top.
    for i in bc.get_instructions(branchy.__code__):
        if i.opname.startswith("POP_JUMP") and "NONE" not in i.opname:
            assert bc.stack_depth_at(branchy.__code__, i.offset) == 1
    # After a CALL: its result.
    call = [i for i in instrs_on_line(after_call, 1) if i.opname == "CALL"][0]
    assert bc.stack_depth_at(after_call.__code__, call.next_offset) == 1
    # Before the CALL (3.11: before PRECALL and between PRECALL and CALL): NULL, callable, argument.
    assert bc.stack_depth_at(after_call.__code__, call.start_offset) == 3
    ins = bc.get_instructions(after_call.__code__)
    prev = ins[ins.index(call) - 1]
    if prev.opname == "PRECALL":
        assert bc.stack_depth_at(after_call.__code__, prev.offset) == 3
    # Every RETURN_VALUE sees exactly the return value.
    for fn, _ in RANDOM_CASES:
        for i in bc.get_instructions(fn.__code__):
            if i.opname == "RETURN_VALUE" and bc.stack_depth_at(fn.__code__, i.offset) is not None:
                assert bc.stack_depth_at(fn.__code__, i.offset) == 1


def test_handler_depth():
    code = try_except.__code__
    assert bc.handler_depth_at(code, first_at_line(try_except, 3)) == 0
    assert bc.handler_depth_at(code, first_at_line(try_except, 9)) == 1  # r = -r inside except
    assert bc.handler_depth_at(code, first_at_line(try_except, 10)) == 0


def test_stack_depth_analysis_is_consistent_on_stdlib():
    for code in stdlib_codes():
        depths = [bc.stack_depth_at(code, i.offset) for i in bc.get_instructions(code)]
        assert max(d for d in depths if d is not None) <= code.co_stacksize
        assert depths[0] == 0


# ---------------------------------------------------------------------------
# Resume functions
# ---------------------------------------------------------------------------
def test_straight_line():
    off = first_at_line(straight, 3)
    live, res = snapshot(straight, (3, 4), off)
    assert live == {"a": 3, "b": 4, "x": 4, "y": 16}
    assert resume(straight, off, live=live) == res
    # Different live values flow through.
    assert resume(straight, off, live={"a": 1, "x": 2, "y": 10}) == (2, 10, 9, helper(9) + 2)
    g = bc.make_resume_function(straight, off, [], ["a", "x", "y"])
    assert g.__name__ == f"__resume_at_{off}_straight"
    assert g.__code__.co_argcount == 3
    assert not g.__code__.co_flags & 0x0C


@pytest.mark.parametrize("n", [1, 2, 5])
def test_for_loop_over_range(n):
    off = first_at_line(loop_range, 4)  # t = t - 1, inside the loop
    for k in range(1, n + 1):
        live, res = snapshot(loop_range, (n,), off, hit=k)
        it = iter(range(n))
        for _ in range(k):
            next(it)
        assert live["i"] == k - 1
        assert resume(loop_range, off, stack=[it], live=live) == res == loop_range(n)


@pytest.mark.parametrize("xs", [[1], [3, 4], [5, 6, 7, 8]])
def test_for_loop_over_list(xs):
    off = first_at_line(loop_list, 3)  # acc.append(-x)
    for k in range(1, len(xs) + 1):
        live, res = snapshot(loop_list, (xs,), off, hit=k)
        it = iter(xs)
        for _ in range(k):
            next(it)
        assert resume(loop_list, off, stack=[it], live=live) == res


@pytest.mark.parametrize("n", [1, 3, 7])
def test_while_loop(n):
    checked = 0
    for off in line_offsets(loop_while, 3) + line_offsets(loop_while, 4):  # 3.11/3.12 copy the test
        for k in range(1, n + 1):
            live, res = snapshot(loop_while, (n,), off, hit=k)
            if live is not None:
                assert resume(loop_while, off, live=live) == res
                checked += 1
    assert checked >= n + 1


@pytest.mark.parametrize("x", [1, 10])
def test_try_except_handler_catches_after_resume(x):
    off = first_at_line(try_except, 4)  # r = r * 2, inside try
    live, res = snapshot(try_except, (x,), off)
    assert resume(try_except, off, live=live) == res
    assert resume(try_except, off, live={"x": 0, "r": 6}) == -12  # raised after resuming, caught
    assert resume(try_except, off, live={"x": 0, "r": 1}) == 102


def test_try_finally():
    off = first_at_line(try_finally, 3)  # y = 10 // (y - 4), inside try
    log = []
    live, res = snapshot(try_finally, (5, []), off)
    live["log"] = log
    assert resume(try_finally, off, live=live) == res == 1
    assert log == [("body", 1), "finally"]
    log2 = []
    with pytest.raises(ZeroDivisionError):
        resume(try_finally, off, live={"x": 2, "log": log2, "y": 4})
    assert log2 == ["finally"]


def test_with_block_exit_runs_once():
    off = first_at_line(with_block, 3)  # y = 10 // (y - 3), inside with
    cm = Recorder()
    cm.__enter__()
    y = resume(with_block, off, stack=[cm.__exit__], live={"cm": cm, "x": 4, "c": cm, "y": 5})
    assert y == 5
    assert cm.events == ["enter", ("body", 5), ("exit", None)]
    # An exception after resuming reaches __exit__ once and propagates.
    cm = Recorder()
    with pytest.raises(ZeroDivisionError):
        resume(with_block, off, stack=[cm.__exit__], live={"cm": cm, "x": 4, "c": cm, "y": 3})
    assert cm.events == [("exit", ZeroDivisionError)]
    # A suppressing __exit__: execution continues after the with; y is still 3 then.
    cm = Recorder(suppress=True)
    assert resume(with_block, off, stack=[cm.__exit__], live={"cm": cm, "x": 4, "c": cm, "y": 3}) == 3
    assert cm.events == [("exit", ZeroDivisionError)]


def test_after_call_result_on_stack():
    call = [i for i in instrs_on_line(after_call, 1) if i.opname == "CALL"][0]
    off = call.next_offset
    assert resume(after_call, off, stack=[helper(4)], live={"x": 4}) == after_call(4)
    assert resume(after_call, off, stack=[100], live={"x": 4}) == 202


def test_before_call_with_null():
    call = [i for i in instrs_on_line(after_call, 1) if i.opname == "CALL"][0]
    # 3.11 puts PRECALL before CALL; resume at the first instruction of the call sequence after the args.
    ins = bc.get_instructions(after_call.__code__)
    k = ins.index(call)
    if ins[k - 1].opname == "PRECALL":
        k -= 1
    off = ins[k].start_offset
    assert bc.stack_depth_at(after_call.__code__, off) == 3
    r = resume(after_call, off, stack=[lambda v: v + 1000, 7], live={"x": 7},
               stack_items=["null", "value", "value"])
    assert r == (1007 + 1) * 2


def test_closure_freevars():
    inner = make_closure(5)
    off = first_at_line(inner, 2)  # c = b * k
    live, res = snapshot(inner, (3,), off)
    assert live == {"a": 3, "b": 8}
    assert resume(inner, off, live=live) == res == inner(3)
    g = bc.make_resume_function(inner, off, [], ["a", "b"])
    assert g.__code__.co_freevars == inner.__code__.co_freevars


def test_live_cellvar():
    off = first_at_line(with_cell, 3)  # g = lambda: c + d (created after the break)
    live, res = snapshot(with_cell, (4,), off)
    assert live == {"a": 4, "c": 8, "d": 5}
    assert resume(with_cell, off, live=live) == res == with_cell(4)


def test_cellvar_captured_before_break():
    fn = with_cell_captured_early
    off = first_at_line(fn, 3)  # c = c + 100, after the lambda captured c
    lam = next(c for c in fn.__code__.co_consts if isinstance(c, types.CodeType))
    # By value: the resume function makes a new cell; the lambda made before the break keeps the
    # old one and misses the later store (the documented limitation).
    cell = types.CellType(8)
    g = types.FunctionType(lam, {}, "g", None, (cell,))
    assert resume(fn, off, live={"a": 4, "c": 8, "g": g}) == 8
    # As the cell object itself: identity kept, the store is seen as in the original.
    cell = types.CellType(8)
    g = types.FunctionType(lam, {}, "g", None, (cell,))
    assert resume(fn, off, live={"a": 4, "c": cell, "g": g}, cells_as_objects=True) == 108 == fn(4)


def test_cell_shared_with_inner_function():
    fn = outer_with_inner
    # Before the inner function exists: the cell variable passed by value is enough.
    off = first_at_line(fn, 3)  # def inner
    live, res = snapshot(fn, (1, 2), off)
    assert live == {"a": 1, "b": 2, "scale": 2}
    assert resume(fn, off, live=live) == res == 68
    # After it exists (r = inner(2)): pass its cell so the later "scale = scale * 10" reaches it.
    off = first_at_line(fn, 5)
    live, res = snapshot(fn, (1, 2), off)
    inner = live["inner"]
    cells = dict(zip(inner.__code__.co_freevars, inner.__closure__))
    assert set(cells) == {"b", "scale"} == set(fn.__code__.co_cellvars)
    for name, cell in cells.items():  # the original run went on storing into these cells
        cell.cell_contents = live[name]
        live[name] = cell
    assert resume(fn, off, live=live, cells_as_objects=True) == res == 68


def comp_shadow(xs, x):
    ys = [x * 2 for x in xs]
    return ys, x


def comp_fresh(xs):
    ys = [x * 2 for x in xs]
    x = len(ys)
    return ys, x


def _comprehension_body_offset(code):
    ins = bc.get_instructions(code)
    for a, b in zip(ins, ins[1:]):
        if a.opname == "FOR_ITER" and b.opname == "STORE_FAST" and b.argval == "x":
            return b.next_offset
    raise AssertionError("no comprehension loop")


@pytest.mark.skipif(not PY312, reason="3.12 inlines comprehensions (PEP 709)")
def test_resume_inside_inlined_comprehension():
    # Inside the loop the stack holds: the saved outer x (NULL when unbound), the list, the iterator.
    off = _comprehension_body_offset(comp_shadow.__code__)
    assert bc.stack_depth_at(comp_shadow.__code__, off) == 3
    it = iter([0, 1, 2, 3])
    next(it), next(it)
    assert resume(comp_shadow, off, stack=[7, [0], it], live={"xs": None, "x": 1}) == ([0, 2, 4, 6], 7)
    off = _comprehension_body_offset(comp_fresh.__code__)
    it = iter([5, 6])
    next(it)
    assert resume(comp_fresh, off, stack=[[], it], live={"x": 5}, stack_items=["null", "value", "value"]) == \
        ([10, 12], 2)


@pytest.mark.skipif(PY312, reason="3.11 compiles comprehensions to their own code object")
def test_resume_inside_comprehension_code():
    code = next(c for c in comp_shadow.__code__.co_consts if isinstance(c, types.CodeType))
    listcomp = types.FunctionType(code, globals())
    off = _comprehension_body_offset(code)
    assert bc.stack_depth_at(code, off) == 2  # the list and the iterator
    it = iter([0, 1, 2, 3])
    next(it), next(it)
    assert resume(listcomp, off, stack=[[0], it], live={"x": 1}) == [0, 2, 4, 6]


def test_kwonly_defaults_varargs():
    off = first_at_line(many_args, 2)  # s = s + sum(args)
    live, res = snapshot(many_args, (1, 2, 3, 4), off, kwargs={"k": 5, "z": 6})
    assert set(live) == {"a", "b", "args", "k", "kw", "s"}
    assert resume(many_args, off, live=live) == res == 1 + 2 + 5 + 3 + 4 + 6


def test_unbound_local_stays_unbound():
    off = first_at_line(unbound_later, 3)  # r = a + 1
    assert resume(unbound_later, off, live={"a": 2, "q": 2}) == 5
    with pytest.raises(UnboundLocalError):
        resume(unbound_later, off, live={"a": 2})
    # Also an argument (which the compiler knows is bound) left out.
    off = first_at_line(straight, 2)
    with pytest.raises(UnboundLocalError):
        resume(straight, off, live={"x": 1})


def test_traceback_line_numbers():
    off = first_at_line(raiser, 2)  # c = b * 2
    with pytest.raises(KeyError) as ei:
        resume(raiser, off, live={"a": 1, "b": 2})
    tb = ei.value.__traceback__
    frames = traceback.extract_tb(tb)
    assert frames[-1].lineno == raiser.__code__.co_firstlineno + 3
    assert frames[-1].name.startswith("__resume_at_")
    if hasattr(frames[-1], "colno"):  # 3.11+: columns kept too
        assert frames[-1].line.strip().startswith("d = {}[c]")


def test_positions_preserved_after_offset():
    for fn, _ in RANDOM_CASES:
        code = fn.__code__
        ins = bc.get_instructions(code)
        off = ins[len(ins) // 2].start_offset
        depth = bc.stack_depth_at(code, off)
        if depth is None or bc.handler_depth_at(code, off):
            continue
        new = bc.make_resume_code(code, off, ["value"] * depth, [])
        code_map, omap = bc.resume_origin(new)
        assert code_map is code
        orig_pos = {i.offset: i.positions for i in ins}
        new_ins = {i.offset: i for i in bc.get_instructions(new)}
        for new_off, orig_off in omap.items():
            assert new_ins[new_off].positions == orig_pos[orig_off]
            assert new_ins[new_off].opname.replace("_CHECK", "") == \
                bc.instruction_at(code, orig_off).opname.replace("_CHECK", "")


def test_nested_resume():
    off1 = first_at_line(mixed, 3)  # while k < n
    live, res = snapshot(mixed, (5, [4, 5, 6]), off1)
    g1 = bc.make_resume_function(mixed, off1, [], list(live))
    assert g1(*live.values()) == res
    # Resume g1 at the offset that holds the original "parts = ..." line.
    _, omap = bc.resume_origin(g1.__code__)
    inv = {o: n for n, o in omap.items()}
    off2 = inv[first_at_line(mixed, 16)]
    live2, res2 = snapshot(g1, tuple(live.values()), off2)
    assert res2 == res
    g2 = bc.make_resume_function(g1, off2, [], list(live2))
    assert g2(*live2.values()) == res
    assert "___live_n" not in live2  # the argument slots are cleared by the prologue


def test_many_locals_and_long_jumps():
    # 300 locals: renumbering pushes indices past 255 (EXTENDED_ARG grows); a long loop body makes
    # jumps longer than 255 code units.
    body = "".join(f"        v{j} = v{j - 1} + {j}\n" if j else "        v0 = i\n" for j in range(300))
    src = f"def big(n):\n    t = 0\n    for i in range(n):\n{body}        t += v299\n    return t\n"
    ns = {}
    exec(src, ns)
    big = ns["big"]
    off = first_at_line(big, 4)  # v1 = v0 + 1 inside the loop
    for k in (1, 2):
        live, res = snapshot(big, (3,), off, hit=k)
        it = iter(range(3))
        for _ in range(k):
            next(it)
        assert resume(big, off, stack=[it], live=live) == res == big(3)


def test_generator_unsupported():
    def gen(n):
        for i in range(n):
            yield i
    with pytest.raises(bc.ResumeUnsupported):
        bc.make_resume_code(gen.__code__, 2, [], [])


def test_inside_except_handler_unsupported():
    off = first_at_line(try_except, 9)
    with pytest.raises(bc.ResumeUnsupported):
        bc.make_resume_code(try_except.__code__, off, ["value"] * bc.stack_depth_at(try_except.__code__, off), ["r"])


def kw_call(x):
    y = helper(v=x)
    return y


def test_between_kw_names_and_call_unsupported():
    code = kw_call.__code__
    ins = bc.get_instructions(code)
    kw = [i for i in ins if i.opname == "KW_NAMES"][0]
    call = [i for i in ins if i.opname == "CALL"][0]
    for off in {kw.next_offset, call.offset}:
        with pytest.raises(bc.ResumeUnsupported):
            bc.make_resume_code(code, off, ["value"] * bc.stack_depth_at(code, off), ["x"])
    # At KW_NAMES itself the names are set again: fine.
    r = resume(kw_call, kw.offset, stack=[lambda v: v * 5, 3], live={"x": 3}, stack_items=["null", "value", "value"])
    assert r == 15


def test_bad_arguments():
    off = first_at_line(loop_range, 4)
    with pytest.raises(ValueError):
        bc.make_resume_code(loop_range.__code__, off, [], ["t"])  # the iterator is missing
    with pytest.raises(ValueError):
        bc.make_resume_code(loop_range.__code__, off + 1, ["value"], [])
    with pytest.raises(ValueError):
        bc.make_resume_code(loop_range.__code__, off, ["value"], ["nope"])
    with pytest.raises(ValueError):
        bc.make_resume_code(loop_range.__code__, off, ["thing"], [])


def test_cache_returns_same_code():
    off = first_at_line(straight, 3)
    a = bc.make_resume_code(straight.__code__, off, [], ["a", "x", "y"])
    b = bc.make_resume_code(straight.__code__, off, [], ["a", "x", "y"])
    c = bc.make_resume_code(straight.__code__, off, [], ["a", "x"])
    assert a is b and a is not c
    assert bc.make_resume_code(straight.__code__, off, [], ["a", "x", "y"], name="r1").co_name == "r1"


def test_resume_code_is_structurally_sound_on_stdlib():
    # Every statement boundary of many stdlib functions: the resume code's own stack analysis agrees,
    # the jump lands where the original instruction now is, and tables round-trip.
    rng = random.Random(0)
    count = 0
    for code in stdlib_codes():
        if code.co_flags & 0x3A0 or code.co_name == "<module>":
            continue
        ins = bc.get_instructions(code)
        body = ins[[i.opname for i in ins].index("RESUME") + 1:]
        cands = [i for i in body if bc.stack_depth_at(code, i.offset) is not None
                 and not bc.handler_depth_at(code, i.offset)]
        for i in rng.sample(cands, min(3, len(cands))):
            depth = bc.stack_depth_at(code, i.start_offset)
            items = [rng.choice(["value", "null"]) for _ in range(depth)]
            live = [n for n in code.co_varnames + code.co_cellvars if rng.random() < 0.5]
            live = list(dict.fromkeys(live))
            try:
                new = bc.make_resume_code(code, i.start_offset, items, live)
            except bc.ResumeUnsupported:
                assert bc.instruction_at(code, i.start_offset).opname in ("CALL", "PRECALL")
                continue
            _, omap = bc.resume_origin(new)
            inv = {o: n for n, o in omap.items()}
            assert bc.stack_depth_at(new, inv[i.offset]) == depth
            assert new.co_argcount == items.count("value") + len(live)
            assert bc.parse_exception_table(new) is not None
            list(dis.get_instructions(new))
            count += 1
    assert count > 200


def test_random_statement_offsets():
    rng = random.Random(1234)
    checked = 0
    for fn, arg_sets in RANDOM_CASES:
        code = fn.__code__
        cands = [i.offset for i in bc.get_instructions(code)
                 if i.starts_line is not None and i.opname != "RESUME"
                 and bc.stack_depth_at(code, i.offset) == 0 and bc.handler_depth_at(code, i.offset) == 0]
        for args in arg_sets:
            expected = fn(*copy.deepcopy(args))
            for off in rng.sample(cands, min(8, len(cands))):
                hit = rng.choice([1, 1, 2])
                live, res = snapshot(fn, copy.deepcopy(args), off, hit=hit)
                if live is None:
                    continue
                assert res == expected
                assert resume(fn, off, live=live) == expected, (fn.__name__, args, off, live)
                checked += 1
    assert checked > 40


def test_resume_of_a_long_function_after_the_cache_is_cleared():
    # A ~50-line function resumed at line 30 after clear_cache(): the cold path gives the right result
    # (its cost is measured in the notes, never asserted here).
    src = "def fifty(a, b):\n    t = 0\n" + "".join(
        f"    if a > {j}:\n        t = t + a * {j} - b\n" for j in range(24)) + "    return t\n"
    ns = {}
    exec(src, ns)
    code = ns["fifty"].__code__
    off = first_at_line(ns["fifty"], 30)
    bc.clear_cache()
    bc.make_resume_code(code, off, [], ["a", "b", "t"])
    assert resume(ns["fifty"], off, live={"a": 100, "b": 1, "t": 0}) == ns["fifty"](100, 1) - sum(
        100 * j - 1 for j in range(14))
