"""Bytecode utilities for strata.compile's graph breaks (CPython 3.11 and 3.12).

This module is pure Python and imports nothing from strata, so it can be loaded
(and tested) without the C extension.

Public API
----------
- ``Instr``, ``get_instructions(code)``, ``instruction_at(code, offset)``,
  ``next_offset(code, offset)``: the instruction model (CACHE entries skipped,
  EXTENDED_ARG folded into the instruction it prefixes).
- ``ExceptionTableEntry``, ``parse_exception_table(code)``,
  ``encode_exception_table(entries)``, ``encode_linetable(positions, firstlineno)``.
- ``stack_depth_at(code, offset)``, ``handler_depth_at(code, offset)``: abstract
  interpretation of stack effects over the control-flow graph.
- ``make_resume_code(code, offset, stack_items, live_locals, name=None, *, cells_as_objects=False)``,
  ``make_resume_function(fn, offset, stack_items, live_locals, name=None)``,
  ``resume_origin(code)``, ``ResumeUnsupported``, ``clear_cache()``.
"""

# Note [Resume functions]
# A graph break splits a frame: the compiled graph runs up to the break, the
# unsupported instruction runs eagerly, and the rest of the frame continues in a
# *resume function* that starts executing the original bytecode at `offset`
# with the operand stack and the locals rebuilt from its arguments.
#
# The resume code is the original code with a new prologue in front and its old
# header (MAKE_CELL ..., COPY_FREE_VARS, RESUME: everything up to and including
# the first RESUME) dropped:
#
#     MAKE_CELL <cell slot>...          # fresh (empty) cells for co_cellvars
#     COPY_FREE_VARS <n>                # closure cells, as the original did
#     RESUME 0
#     LOAD_FAST <arg>; STORE_FAST|STORE_DEREF <original slot>   # per live local
#     LOAD_FAST <arg> | PUSH_NULL       # per stack item, bottom to top
#     (clear the argument slots)        # so they hold no references
#     JUMP_FORWARD -> <offset>
#     <original body, every instruction kept>
#
# Arguments must be the first co_argcount slots of the frame's "localsplus"
# array (varnames, then cell-only variables, then free variables), so the new
# argument names are put in front of co_varnames and every localsplus-indexed
# instruction of the body is renumbered by the number of arguments. The body is
# re-assembled from a decoded instruction list: jumps are kept as references to
# instructions and re-encoded (growing EXTENDED_ARG prefixes where an argument
# no longer fits a byte), the exception table's start/end/target are remapped
# instruction by instruction, and the line table is re-encoded from the
# original per-instruction positions, so every original instruction keeps its
# line and columns (the prologue takes those of the target instruction).
# All jumps in 3.11/3.12 are relative, and the exception table depth is an
# absolute stack depth, which the prologue restores exactly; so a break inside
# try/with/for keeps its handlers and loop back-edges.
#
# Limitations (ResumeUnsupported where they can be detected):
# - generators / coroutines / async generators;
# - an offset inside an exception handler (except body, finally-on-exception,
#   __exit__ on the exception path): the thread's "current exception" cannot be
#   recreated;
# - an offset between KW_NAMES and its CALL (the keyword names live in the
#   interpreter, not on the stack);
# - a live cell variable passed by value gets a NEW cell: an inner function
#   created before the break keeps the old cell and will not see later stores
#   (pass the cell object itself with cells_as_objects=True to keep identity).

import dis
import opcode as _opcode
import sys
import types
from dataclasses import dataclass
from functools import lru_cache

__all__ = [
    "Instr", "get_instructions", "instruction_at", "next_offset",
    "ExceptionTableEntry", "parse_exception_table", "encode_exception_table",
    "encode_linetable", "stack_depth_at", "handler_depth_at",
    "ResumeUnsupported", "make_resume_code", "make_resume_function",
    "resume_origin", "clear_cache", "VERSION_FACTS",
]

# ---------------------------------------------------------------------------
# Note [Version table]: every difference between 3.11 and 3.12 this module
# relies on. Facts the two versions share are stated once below the table.
# ---------------------------------------------------------------------------
_VERSION_TABLE = {
    (3, 11): {
        # Instructions whose argument indexes the localsplus array.
        "localsplus_ops": ("LOAD_FAST", "STORE_FAST", "DELETE_FAST", "MAKE_CELL", "LOAD_CLOSURE",
                           "LOAD_DEREF", "STORE_DEREF", "DELETE_DEREF", "LOAD_CLASSDEREF"),
        # Relative jumps whose argument counts backwards.
        "backward_jumps": ("JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "POP_JUMP_BACKWARD_IF_FALSE",
                           "POP_JUMP_BACKWARD_IF_TRUE", "POP_JUMP_BACKWARD_IF_NONE",
                           "POP_JUMP_BACKWARD_IF_NOT_NONE"),
        # Instructions after which control never falls through.
        "no_fallthrough": ("JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "RETURN_VALUE",
                           "RAISE_VARARGS", "RERAISE"),
        # 3.11's LOAD_FAST raises UnboundLocalError itself; 3.12's trusts the
        # compiler's proof that the local is bound, so reads of locals the
        # resume function leaves unbound must become the checking form.
        "unchecked_load_fast": None,
        "checked_load_fast": None,
        # Prologue: load an argument and clear its slot in one instruction
        # (None: LOAD_FAST, then DELETE_FAST of every argument at the end).
        "load_and_clear": None,
        # Real stack effects where dis.stack_effect follows the compiler's
        # bookkeeping instead: 3.11's compiler books a call's pops partly on
        # PRECALL (-oparg) and partly on CALL (-1), so between the two the
        # stack really holds the arguments; RETURN_GENERATOR's frame resumes
        # with the first sent value pushed (popped by the POP_TOP after it).
        "stack_effect_fixups": {"PRECALL": lambda arg: 0, "CALL": lambda arg: -(arg + 1),
                                "RETURN_GENERATOR": lambda arg: 1},
    },
    (3, 12): {
        "localsplus_ops": ("LOAD_FAST", "STORE_FAST", "DELETE_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR",
                           "MAKE_CELL", "LOAD_CLOSURE", "LOAD_DEREF", "STORE_DEREF", "DELETE_DEREF",
                           "LOAD_FROM_DICT_OR_DEREF"),
        "backward_jumps": ("JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT"),
        "no_fallthrough": ("JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "RETURN_VALUE",
                           "RETURN_CONST", "RAISE_VARARGS", "RERAISE"),
        "unchecked_load_fast": "LOAD_FAST",
        "checked_load_fast": "LOAD_FAST_CHECK",
        "load_and_clear": "LOAD_FAST_AND_CLEAR",
        "stack_effect_fixups": {"RETURN_GENERATOR": lambda arg: 1},
    },
}
# Shared by 3.11 and 3.12:
# - co_code is 2-byte code units; EXTENDED_ARG prefixes shift the argument by
#   8 bits; each opcode is followed by opcode._inline_cache_entries[op] CACHE
#   units (a list indexed by opcode in both versions).
# - all jumps are relative (dis.hasjabs is empty): target = offset of the unit
#   after the instruction's caches +/- 2 * arg.
# - the exception table is a sequence of (start, length, target, depth<<1|lasti)
#   big-endian 6-bit varints in code units, the first byte of an entry marked
#   with 0x80; the line table is PEP 626/657's location table.
# - the frame header is MAKE_CELL*, COPY_FREE_VARS?, RESUME 0 (generators put
#   RETURN_GENERATOR/POP_TOP before RESUME).

_PY = sys.version_info[:2]
if _PY not in _VERSION_TABLE:  # pragma: no cover - checked at import
    raise ImportError(f"strata._dynamo.bytecode supports CPython 3.11 and 3.12, not {sys.version.split()[0]}")
VERSION_FACTS = _VERSION_TABLE[_PY]

_OPMAP = _opcode.opmap
_OPNAME = _opcode.opname
_CACHES = _opcode._inline_cache_entries
_HAVE_ARGUMENT = _opcode.HAVE_ARGUMENT
_EXTENDED_ARG = _OPMAP["EXTENDED_ARG"]
_CACHE = _OPMAP["CACHE"]
_RESUME = _OPMAP["RESUME"]
_MAKE_CELL = _OPMAP["MAKE_CELL"]
_COPY_FREE_VARS = _OPMAP["COPY_FREE_VARS"]
_LOAD_FAST = _OPMAP["LOAD_FAST"]
_STORE_FAST = _OPMAP["STORE_FAST"]
_DELETE_FAST = _OPMAP["DELETE_FAST"]
_STORE_DEREF = _OPMAP["STORE_DEREF"]
_PUSH_NULL = _OPMAP["PUSH_NULL"]
_JUMP_FORWARD = _OPMAP["JUMP_FORWARD"]
_PUSH_EXC_INFO = _OPMAP["PUSH_EXC_INFO"]
_POP_EXCEPT = _OPMAP["POP_EXCEPT"]
_KW_NAMES = _OPMAP["KW_NAMES"]
_PRECALL = _OPMAP.get("PRECALL", -1)  # 3.11 only

_JREL = frozenset(dis.hasjrel)
_BACKWARD = frozenset(_OPMAP[n] for n in VERSION_FACTS["backward_jumps"])
_NO_FALLTHROUGH = frozenset(_OPMAP[n] for n in VERSION_FACTS["no_fallthrough"])
_LOCALSPLUS_OPS = frozenset(_OPMAP[n] for n in VERSION_FACTS["localsplus_ops"])
_UNCHECKED_LOAD = _OPMAP[VERSION_FACTS["unchecked_load_fast"]] if VERSION_FACTS["unchecked_load_fast"] else None
_CHECKED_LOAD = _OPMAP[VERSION_FACTS["checked_load_fast"]] if VERSION_FACTS["checked_load_fast"] else None
_LOAD_AND_CLEAR = _OPMAP[VERSION_FACTS["load_and_clear"]] if VERSION_FACTS["load_and_clear"] else None

_EFFECT_FIXUPS = {_OPMAP[n]: f for n, f in VERSION_FACTS["stack_effect_fixups"].items()}


def _stack_effect(op, arg, jump):
    f = _EFFECT_FIXUPS.get(op)
    if f is not None:
        return f(arg)
    return dis.stack_effect(op, arg, jump=jump)


_CO_VARARGS = 0x04
_CO_VARKEYWORDS = 0x08
_CO_GENERATOR_LIKE = 0x20 | 0x80 | 0x100 | 0x200  # GENERATOR, COROUTINE, ITERABLE_COROUTINE, ASYNC_GENERATOR


# ---------------------------------------------------------------------------
# Decoding
# ---------------------------------------------------------------------------
class _Raw:
    """One decoded instruction: `start` is the offset of its first EXTENDED_ARG
    prefix (or of the opcode itself), `offset` that of the opcode, `next` that of
    the unit after its CACHE entries; offsets in bytes."""

    __slots__ = ("start", "offset", "op", "arg", "ncache", "next")

    def __init__(self, start, offset, op, arg, ncache, nxt):
        self.start, self.offset, self.op, self.arg, self.ncache, self.next = start, offset, op, arg, ncache, nxt

    def jump_target(self):
        if self.op not in _JREL:
            return None
        return self.next - 2 * self.arg if self.op in _BACKWARD else self.next + 2 * self.arg


@lru_cache(maxsize=512)
def _decode(code):
    co = code.co_code
    out = []
    ext = 0
    start = None
    i, n = 0, len(co)
    while i < n:
        op, a = co[i], co[i + 1]
        if start is None:
            start = i
        if op == _EXTENDED_ARG:
            ext = (ext | a) << 8
            i += 2
            continue
        ncache = _CACHES[op]
        nxt = i + 2 + 2 * ncache
        out.append(_Raw(start, i, op, ext | a, ncache, nxt))
        ext, start = 0, None
        i = nxt
    return tuple(out)


@lru_cache(maxsize=512)
def _index_by_offset(code):
    """Byte offset (opcode offset and EXTENDED_ARG prefix start) -> index in _decode."""
    m = {}
    for k, r in enumerate(_decode(code)):
        m[r.start] = k
        m[r.offset] = k
    return m


@dataclass(frozen=True)
class Instr:
    """One instruction: CACHE entries skipped, EXTENDED_ARG folded in.

    offset: the opcode's byte offset; start_offset: where its EXTENDED_ARG
    prefixes begin (== offset without prefixes; jumps and the exception table
    point there); next_offset: the instruction after it and its CACHE entries.
    jump_target: byte offset a relative jump goes to (None for non-jumps).
    starts_line: the line number if a new source line starts here.
    """

    opname: str
    opcode: int
    arg: object
    argval: object
    argrepr: str
    offset: int
    start_offset: int
    next_offset: int
    cache_count: int
    starts_line: object
    positions: object
    is_jump_target: bool
    jump_target: object


@lru_cache(maxsize=256)
def _instructions(code):
    raws = _decode(code)
    by_offset = {r.offset: r for r in raws}
    out = []
    # show_caches=False is the default in both versions (the keyword is
    # deprecated from 3.13); EXTENDED_ARG shows up as its own entry: skipped.
    for ins in dis.get_instructions(code):
        if ins.opcode == _EXTENDED_ARG:
            continue
        r = by_offset[ins.offset]
        out.append(Instr(ins.opname, ins.opcode, ins.arg, ins.argval, ins.argrepr, ins.offset, r.start, r.next,
                         r.ncache, ins.starts_line, ins.positions, ins.is_jump_target, r.jump_target()))
    return tuple(out)


def get_instructions(code):
    """The instructions of `code` (a tuple of Instr), in order."""
    return _instructions(code)


def instruction_at(code, offset):
    """The Instr at byte `offset` (its opcode offset or the start of its EXTENDED_ARG prefix)."""
    k = _index_by_offset(code).get(offset)
    if k is None:
        raise ValueError(f"instruction_at: no instruction of {code.co_qualname} starts at offset {offset}")
    return _instructions(code)[k]


def next_offset(code, offset):
    """Byte offset of the instruction after the one at `offset` (CACHE entries skipped)."""
    k = _index_by_offset(code).get(offset)
    if k is None:
        raise ValueError(f"next_offset: no instruction of {code.co_qualname} starts at offset {offset}")
    return _decode(code)[k].next


# ---------------------------------------------------------------------------
# Exception table and line table
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class ExceptionTableEntry:
    """[start, end) byte range covered, handler byte offset, stack depth to unwind to, push lasti."""

    start: int
    end: int
    target: int
    depth: int
    lasti: bool


def parse_exception_table(code):
    """co_exceptiontable (of a code object, or the bytes) as ExceptionTableEntry list, offsets in bytes."""
    data = code.co_exceptiontable if isinstance(code, types.CodeType) else bytes(code)
    out = []
    i, n = 0, len(data)

    def varint():
        nonlocal i
        b = data[i]
        i += 1
        val = b & 63
        while b & 64:
            b = data[i]
            i += 1
            val = (val << 6) | (b & 63)
        return val

    while i < n:
        start = varint() * 2
        length = varint() * 2
        target = varint() * 2
        dl = varint()
        out.append(ExceptionTableEntry(start, start + length, target, dl >> 1, bool(dl & 1)))
    return out


def _exc_varint(out, val, first):
    chunks = [val & 63]
    val >>= 6
    while val:
        chunks.append(val & 63)
        val >>= 6
    chunks.reverse()
    for j, c in enumerate(chunks):
        if j + 1 < len(chunks):
            c |= 64
        if first and j == 0:
            c |= 128
        out.append(c)


def encode_exception_table(entries):
    """Bytes for co_exceptiontable from ExceptionTableEntry (byte offsets, sorted, non-overlapping)."""
    out = bytearray()
    for e in entries:
        if e.start % 2 or e.end % 2 or e.target % 2 or e.end <= e.start:
            raise ValueError(f"encode_exception_table: bad entry {e}")
        _exc_varint(out, e.start // 2, True)
        _exc_varint(out, (e.end - e.start) // 2, False)
        _exc_varint(out, e.target // 2, False)
        _exc_varint(out, (e.depth << 1) | int(e.lasti), False)
    return bytes(out)


def _lt_varint(out, val):
    while val >= 64:
        out.append(64 | (val & 63))
        val >>= 6
    out.append(val)


def _lt_svarint(out, val):
    _lt_varint(out, ((-val) << 1) | 1 if val < 0 else val << 1)


def encode_linetable(positions, firstlineno):
    """co_linetable from one (line, end_line, col, end_col) per code unit (any of them None).

    Uses the long form (or "no column" / "no location") for every entry, runs of
    equal positions merged up to 8 code units per entry."""
    out = bytearray()
    line = firstlineno
    i, n = 0, len(positions)
    while i < n:
        pos = positions[i]
        j = i + 1
        while j < n and j - i < 8 and positions[j] == pos:
            j += 1
        length = j - i
        ln, end_ln, col, end_col = pos
        if ln is None:
            out.append(0x80 | (15 << 3) | (length - 1))
        elif end_ln is None or end_ln < ln:
            out.append(0x80 | (13 << 3) | (length - 1))
            _lt_svarint(out, ln - line)
            line = ln
        else:
            out.append(0x80 | (14 << 3) | (length - 1))
            _lt_svarint(out, ln - line)
            _lt_varint(out, end_ln - ln)
            _lt_varint(out, 0 if col is None else col + 1)
            _lt_varint(out, 0 if end_col is None else end_col + 1)
            line = ln
        i = j
    return bytes(out)


# ---------------------------------------------------------------------------
# Stack depth analysis
# ---------------------------------------------------------------------------
@lru_cache(maxsize=256)
def _analyze(code):
    """Per instruction index: (operand stack depth, active handler depth) before it, or None if unreachable.

    Handler depth counts PUSH_EXC_INFO minus POP_EXCEPT: > 0 inside an except /
    exceptional-finally / exceptional-__exit__ block."""
    raws = _decode(code)
    idx = _index_by_offset(code)
    nraw = len(raws)
    cover = [None] * nraw
    for e in parse_exception_table(code):
        k = idx[e.start]
        end = idx[e.end] if e.end < len(code.co_code) else nraw
        for j in range(k, end):
            cover[j] = e
    state = [None] * nraw
    work = [(0, 0, 0)]
    while work:
        k, d, h = work.pop()
        while k < nraw:
            seen = state[k]
            if seen is not None:
                if seen[0] != d:
                    raise ValueError(f"stack_depth_at: inconsistent stack depth at offset {raws[k].start} of "
                                     f"{code.co_qualname}: {seen[0]} vs {d}")
                break
            state[k] = (d, h)
            r = raws[k]
            e = cover[k]
            if e is not None:
                work.append((idx[e.target], e.depth + 1 + int(e.lasti), h))
            op = r.op
            arg = r.arg if op >= _HAVE_ARGUMENT else None
            if op == _PUSH_EXC_INFO:
                h2 = h + 1
            elif op == _POP_EXCEPT:
                h2 = h - 1
            else:
                h2 = h
            if op in _JREL:
                work.append((idx[r.jump_target()], d + _stack_effect(op, arg, True), h2))
            if op in _NO_FALLTHROUGH:
                break
            d += _stack_effect(op, arg, False)
            if d < 0:
                raise ValueError(f"stack_depth_at: negative stack depth after offset {r.offset} of {code.co_qualname}")
            h = h2
            k += 1
    return tuple(state)


def _state_at(code, offset, who):
    k = _index_by_offset(code).get(offset)
    if k is None:
        raise ValueError(f"{who}: no instruction of {code.co_qualname} starts at offset {offset}")
    return _analyze(code)[k]


def stack_depth_at(code, offset):
    """Operand stack depth just before the instruction at `offset` (None if it is unreachable)."""
    s = _state_at(code, offset, "stack_depth_at")
    return None if s is None else s[0]


def handler_depth_at(code, offset):
    """How many exception handlers (except/finally/__exit__ on the exception path) are active
    before the instruction at `offset` (None if it is unreachable)."""
    s = _state_at(code, offset, "handler_depth_at")
    return None if s is None else s[1]


# ---------------------------------------------------------------------------
# Assembly
# ---------------------------------------------------------------------------
class _Ins:
    __slots__ = ("op", "arg", "ncache", "target", "pos", "orig")

    def __init__(self, op, arg, ncache, target, pos, orig):
        self.op, self.arg, self.ncache, self.target, self.pos, self.orig = op, arg, ncache, target, pos, orig


def _ext_count(arg):
    if arg < 0:
        raise ValueError(f"bytecode: negative argument {arg}")
    if arg <= 0xFF:
        return 0
    if arg <= 0xFFFF:
        return 1
    if arg <= 0xFFFFFF:
        return 2
    return 3


def _assemble(ins):
    """Encode `ins` (jump targets are indices into `ins`). Returns (co_code, start offsets in units, total units)."""
    sizes = [_ext_count(i.arg) + 1 + i.ncache for i in ins]
    while True:
        offs = [0] * (len(ins) + 1)
        acc = 0
        for k, s in enumerate(sizes):
            offs[k] = acc
            acc += s
        offs[len(ins)] = acc
        changed = False
        for k, i in enumerate(ins):
            if i.target is None:
                continue
            nxt = offs[k] + sizes[k]
            t = offs[i.target]
            arg = nxt - t if i.op in _BACKWARD else t - nxt
            if arg < 0:
                raise ValueError(f"bytecode: {_OPNAME[i.op]} cannot reach its target")
            i.arg = arg
            s = _ext_count(arg) + 1 + i.ncache
            if s > sizes[k]:  # sizes only grow, so this terminates; spare prefixes are EXTENDED_ARG 0
                sizes[k] = s
                changed = True
        if not changed:
            break
    out = bytearray()
    for k, i in enumerate(ins):
        nprefix = sizes[k] - 1 - i.ncache
        for j in range(nprefix, 0, -1):
            out += bytes((_EXTENDED_ARG, (i.arg >> (8 * j)) & 0xFF))
        out += bytes((i.op, i.arg & 0xFF))
        out += bytes((_CACHE, 0)) * i.ncache
    return bytes(out), offs, sizes


# ---------------------------------------------------------------------------
# Resume functions
# ---------------------------------------------------------------------------
class ResumeUnsupported(Exception):
    """make_resume_code cannot build a correct resume function for this frame / offset;
    the caller should run the rest of the frame eagerly."""

    def __init__(self, reason):
        super().__init__(reason)
        self.reason = reason


_resume_cache = {}
_resume_origins = {}


def clear_cache():
    """Drop cached resume codes and decoded instructions."""
    _resume_cache.clear()
    _resume_origins.clear()
    for f in (_decode, _index_by_offset, _instructions, _analyze):
        f.cache_clear()


def resume_origin(code):
    """For a code object built by make_resume_code: (original code, {resume byte offset:
    original byte offset} for every kept instruction). None for other code objects."""
    return _resume_origins.get(id(code), (None, None))[1]


def _unique(name, taken):
    while name in taken:
        name = name + "_"
    taken.add(name)
    return name


def make_resume_code(code, offset, stack_items, live_locals, name=None, *, cells_as_objects=False):
    """A code object that continues `code` at byte `offset` (see Note [Resume functions]).

    Called as ``f(*stack_values, *local_values)``: one positional argument per
    "value" entry of `stack_items` (the operand stack bottom to top, entries
    "value" or "null"; "null" entries take no argument and are recreated with
    PUSH_NULL), then one per name of `live_locals` (names of co_varnames or
    co_cellvars; a cell variable is passed by value, or as the cell object itself
    when cells_as_objects=True). Locals not listed stay unbound.
    Raises ResumeUnsupported for frames it cannot resume correctly and
    ValueError for a bad offset or a stack that does not match the depth there.
    """
    stack_items = tuple(stack_items)
    live_locals = tuple(live_locals)
    key = (code, code.co_filename, code.co_qualname, offset, stack_items, live_locals, name, cells_as_objects)
    hit = _resume_cache.get(key)
    if hit is not None:
        return hit
    new = _make_resume_code(code, offset, stack_items, live_locals, name, cells_as_objects)
    _resume_cache[key] = new
    return new


def _make_resume_code(code, offset, stack_items, live_locals, name, cells_as_objects):
    qual = code.co_qualname
    if code.co_flags & _CO_GENERATOR_LIKE:
        raise ResumeUnsupported(f"make_resume_code: {qual} is a generator or coroutine")
    for s in stack_items:
        if s not in ("value", "null"):
            raise ValueError(f"make_resume_code: stack item {s!r} is neither 'value' nor 'null'")
    if len(set(live_locals)) != len(live_locals):
        raise ValueError(f"make_resume_code: live_locals {live_locals} has duplicates")

    raws = _decode(code)
    idx = _index_by_offset(code)
    k_target = idx.get(offset)
    if k_target is None:
        raise ValueError(f"make_resume_code: no instruction of {qual} starts at offset {offset}")
    header_end = next((k for k, r in enumerate(raws) if r.op == _RESUME), None)
    if header_end is None:
        raise ResumeUnsupported(f"make_resume_code: {qual} has no RESUME")
    k_target = max(k_target, header_end + 1)
    if k_target >= len(raws):
        raise ValueError(f"make_resume_code: offset {offset} is past the end of {qual}")
    state = _analyze(code)[k_target]
    if state is None:
        raise ValueError(f"make_resume_code: offset {offset} of {qual} is unreachable")
    if state[0] != len(stack_items):
        raise ValueError(f"make_resume_code: the stack of {qual} at offset {offset} holds {state[0]} items, "
                         f"stack_items has {len(stack_items)}")
    if state[1] > 0:
        raise ResumeUnsupported(f"make_resume_code: offset {offset} of {qual} is inside an exception handler")
    # KW_NAMES hands the keyword names of the next CALL over in interpreter state, not on the stack.
    k = k_target - 1
    while k > header_end and raws[k].op == _PRECALL:
        k -= 1
    if k > header_end and raws[k].op == _KW_NAMES and k != k_target:
        raise ResumeUnsupported(f"make_resume_code: offset {offset} of {qual} is between KW_NAMES and its CALL")

    varnames, cellvars, freevars = code.co_varnames, code.co_cellvars, code.co_freevars
    # The original localsplus layout: varnames, cells that are not also varnames, freevars.
    slot = {n: j for j, n in enumerate(varnames)}
    for c in cellvars:
        if c not in slot:
            slot[c] = len(slot)
    cellset = set(cellvars)
    for n in live_locals:
        if n not in slot or n in freevars:
            raise ValueError(f"make_resume_code: {n!r} is not a local or cell variable of {qual}")

    taken = set(varnames) | cellset | set(freevars)
    arg_names = []
    for j, s in enumerate(stack_items):
        if s == "value":
            arg_names.append(_unique(f"___stack{j}", taken))
    n_stack_args = len(arg_names)
    for n in live_locals:
        arg_names.append(_unique(f"___live_{n}", taken))
    nargs = len(arg_names)

    # Positions per instruction of the original: that of its opcode unit.
    unit_pos = list(code.co_positions())
    target_pos = unit_pos[raws[k_target].offset // 2]

    live = set(live_locals)
    cell_objects = {n for n in live_locals if cells_as_objects and n in cellset}
    ins = []

    def emit(op, arg=0, target=None, pos=target_pos, orig=None):
        ins.append(_Ins(op, arg, _CACHES[op], target, pos, orig))

    # Prologue.
    for c in cellvars:
        if c not in cell_objects:
            emit(_MAKE_CELL, nargs + slot[c])
    if freevars:
        emit(_COPY_FREE_VARS, len(freevars))
    emit(_RESUME, 0)
    load = _LOAD_AND_CLEAR if _LOAD_AND_CLEAR is not None else _LOAD_FAST
    for j, n in enumerate(live_locals):
        emit(load, n_stack_args + j)
        emit(_STORE_DEREF if (n in cellset and n not in cell_objects) else _STORE_FAST, nargs + slot[n])
    a = 0
    for s in stack_items:
        if s == "null":
            emit(_PUSH_NULL)
        else:
            emit(load, a)
            a += 1
    if _LOAD_AND_CLEAR is None:
        for j in range(nargs):
            emit(_DELETE_FAST, j)
    jump = len(ins)
    emit(_JUMP_FORWARD, 0)

    # Body: every instruction after the header, localsplus indices renumbered.
    base = len(ins)
    first_body = header_end + 1
    nonlive_slots = {slot[n] for n in varnames if n not in live}
    for r in raws[first_body:]:
        op, arg = r.op, r.arg
        if op in _LOCALSPLUS_OPS:
            if op == _UNCHECKED_LOAD and arg in nonlive_slots:
                op = _CHECKED_LOAD
            arg += nargs
        ins.append(_Ins(op, arg, r.ncache, None, unit_pos[r.offset // 2], r.start))
    for k in range(first_body, len(raws)):
        t = raws[k].jump_target()
        if t is not None:
            tk = idx[t]
            if tk < first_body:
                raise ResumeUnsupported(f"make_resume_code: {qual} jumps into its header")
            ins[base + k - first_body].target = base + tk - first_body
    ins[jump].target = base + k_target - first_body

    co_code, offs, sizes = _assemble(ins)
    total_units = offs[len(ins)]

    def new_offset(orig_byte):
        if orig_byte >= len(code.co_code):
            return total_units * 2
        k = idx[orig_byte]
        return offs[base + max(k, first_body) - first_body] * 2

    entries = []
    for e in parse_exception_table(code):
        s, t = new_offset(e.start), new_offset(e.end)
        if t > s:
            entries.append(ExceptionTableEntry(s, t, new_offset(e.target), e.depth, e.lasti))

    positions = []
    for k, i in enumerate(ins):
        positions.extend([i.pos] * sizes[k])

    fname = name or f"__resume_at_{offset}_{code.co_name}"
    new_code = code.replace(
        co_argcount=nargs,
        co_posonlyargcount=0,
        co_kwonlyargcount=0,
        co_nlocals=len(arg_names) + len(varnames),
        co_varnames=tuple(arg_names) + varnames,
        co_stacksize=max(code.co_stacksize, len(stack_items), 1),
        co_flags=code.co_flags & ~(_CO_VARARGS | _CO_VARKEYWORDS),
        co_code=co_code,
        co_name=fname,
        co_qualname=fname,
        co_linetable=encode_linetable(positions, code.co_firstlineno),
        co_exceptiontable=encode_exception_table(entries),
    )
    omap = {}
    for k, i in enumerate(ins):
        if i.orig is not None:
            orig_raw = raws[idx[i.orig]]
            omap[(offs[k] + sizes[k] - 1 - i.ncache) * 2] = orig_raw.offset
    _resume_origins[id(new_code)] = (new_code, (code, omap))
    return new_code


def make_resume_function(fn, offset, stack_items, live_locals, name=None, *, cells_as_objects=False):
    """A function running make_resume_code(fn.__code__, ...) with fn's globals and closure."""
    code = make_resume_code(fn.__code__, offset, stack_items, live_locals, name, cells_as_objects=cells_as_objects)
    return types.FunctionType(code, fn.__globals__, code.co_name, None, fn.__closure__)
