"""The restricted unpickler behind ``strata.load(..., weights_only=True)``.

It interprets pickle opcodes itself instead of handing the stream to ``pickle.Unpickler``: only the opcodes that build
data exist here, and each one checks its operands, so a hostile file can neither call code nor make the loader
allocate more than the file holds (the C unpickler grows its memo table to whatever index a PUT names, for one).

What it builds: None, bools, ints, floats, complex, str, bytes, bytearray, tuples, lists, dicts, sets, frozensets,
and whatever the caller's ``find_global`` hands out for a ``GLOBAL``: tensor rebuilders, dtypes, ``Size``, ``device``,
``OrderedDict``..., plus the classes and functions the user allow-listed. ``REDUCE`` and ``NEWOBJ`` call only objects
that came from ``find_global``; ``BUILD`` sets state only on instances of allow-listed classes. ``INST``, ``OBJ``,
the ``EXT`` opcodes, text ``PERSID`` and out-of-band buffers are refused.
"""

import pickle
import struct
from collections import OrderedDict

UnpicklingError = pickle.UnpicklingError

_unpack_i4 = struct.Struct("<i").unpack_from
_unpack_u4 = struct.Struct("<I").unpack_from
_unpack_u8 = struct.Struct("<Q").unpack_from
_unpack_u2 = struct.Struct("<H").unpack_from
_unpack_f8 = struct.Struct(">d").unpack_from

HIGHEST_PROTOCOL = 5

# Opcodes that exist in pickle but that this unpickler never executes, with what they would do.
_REFUSED = {
    b"i"[0]: "INST (calls a class named in the stream)",
    b"o"[0]: "OBJ (calls a class from the stack)",
    0x82: "EXT1 (calls a registered extension)",
    0x83: "EXT2 (calls a registered extension)",
    0x84: "EXT4 (calls a registered extension)",
    b"P"[0]: "PERSID (text persistent id)",
    b"S"[0]: "STRING (quoted text string)",
    0x97: "NEXT_BUFFER (out-of-band buffer)",
    0x98: "READONLY_BUFFER (out-of-band buffer)",
}


class _Mark:
    __slots__ = ()


class WeightsUnpickler:
    """``WeightsUnpickler(data, find_global, persistent_load, allowed_classes).load()``.

    ``find_global(module, name)`` returns the object for a GLOBAL or raises UnpicklingError; ``persistent_load(pid)``
    resolves BINPERSID; ``is_allowed_class(obj)`` says whether BUILD may set state on ``obj``.
    """

    def __init__(self, data, find_global, persistent_load, may_build, encoding="ASCII", errors="strict", start=0):
        self.data = data if isinstance(data, (bytes, bytearray)) else bytes(data)
        self.start = self.end = start  # load() reads one pickle from `start`; `end` is just past its STOP
        self.find_global = find_global
        self.persistent_load = persistent_load
        self.may_build = may_build
        self.encoding, self.errors = encoding, errors

    def _fail(self, msg):
        raise UnpicklingError(msg)

    def _call(self, func, args, kwargs, name=None):
        # An allowed callable given bad arguments by the file is the file's fault: reported as an unpickling error.
        try:
            return func(*args, **kwargs)
        except UnpicklingError:
            raise
        except Exception as e:
            name = name or getattr(func, "__qualname__", None) or repr(func)
            raise UnpicklingError(f"{name}() failed while unpickling: {type(e).__name__}: {e}") from e

    def load(self):
        data = self.data
        n = len(data)
        pos = self.start
        stack = []
        metastack = []
        memo = {}
        callables = {}  # id -> object, for everything find_global returned: the only things REDUCE/NEWOBJ call
        fail = self._fail

        def take(k):
            nonlocal pos
            if k < 0 or pos + k > n:
                fail(f"pickle data was truncated: {k} bytes wanted at offset {pos}, {n - pos} left")
            b = data[pos : pos + k]
            pos += k
            return b

        def line():
            nonlocal pos
            end = data.find(b"\n", pos)
            if end < 0:
                fail(f"pickle data was truncated: no end of line after offset {pos}")
            b = data[pos:end]
            pos = end + 1
            return b

        def pop_mark():
            nonlocal stack
            if not metastack:
                fail("unbalanced MARK: an opcode wanted a MARK that is not on the stack")
            items = stack
            stack = metastack.pop()
            return items

        def pop():
            if not stack:
                fail("pickle stack underflow")
            return stack.pop()

        def top():
            if not stack:
                fail("pickle stack underflow")
            return stack[-1]

        def text(b):
            try:
                return b.decode("utf-8", "surrogatepass")
            except UnicodeDecodeError as e:
                fail(f"string is not valid UTF-8: {e}")

        def legacy_str(b):
            if self.encoding == "bytes":
                return bytes(b)
            try:
                return b.decode(self.encoding, self.errors)
            except (UnicodeDecodeError, LookupError) as e:
                fail(f"cannot decode a protocol-0/1 string with encoding {self.encoding!r}: {e}")

        def set_items(target, items):
            if len(items) % 2:
                fail("SETITEMS with an odd number of items")
            if not isinstance(target, dict):
                fail(f"SETITEM(S) on a {type(target).__name__}; only dicts take items")
            try:
                for i in range(0, len(items), 2):
                    target[items[i]] = items[i + 1]
            except TypeError as e:
                fail(f"unhashable dict key: {e}")

        def global_(module, name):
            obj = self.find_global(module, name)
            callables[id(obj)] = obj
            return obj

        while True:
            if pos >= n:
                fail("pickle data was truncated: no STOP opcode")
            op = data[pos]
            pos += 1
            if op == 0x80:  # PROTO
                proto = take(1)[0]
                if proto > HIGHEST_PROTOCOL:
                    fail(f"unsupported pickle protocol: {proto}")
            elif op == 0x95:  # FRAME: only a length hint
                take(8)
            elif op == 0x2E:  # STOP
                if not stack:
                    fail("STOP with an empty stack")
                self.end = pos
                return stack[-1]
            elif op == 0x28:  # MARK
                metastack.append(stack)
                stack = []
            elif op == 0x30:  # POP
                if stack:
                    stack.pop()
                else:
                    pop_mark()
            elif op == 0x31:  # POP_MARK
                pop_mark()
            elif op == 0x32:  # DUP
                stack.append(top())
            elif op == 0x4E:  # NONE
                stack.append(None)
            elif op == 0x88:
                stack.append(True)
            elif op == 0x89:
                stack.append(False)
            elif op == 0x4A:  # BININT
                stack.append(_unpack_i4(take(4))[0])
            elif op == 0x4B:  # BININT1
                stack.append(take(1)[0])
            elif op == 0x4D:  # BININT2
                stack.append(_unpack_u2(take(2))[0])
            elif op == 0x8A:  # LONG1
                stack.append(int.from_bytes(take(take(1)[0]), "little", signed=True))
            elif op == 0x8B:  # LONG4
                k = _unpack_i4(take(4))[0]
                if k < 0:
                    fail("LONG4 with a negative byte count")
                stack.append(int.from_bytes(take(k), "little", signed=True))
            elif op == 0x49:  # INT (text; "00"/"01" are protocol 0's False/True)
                b = line()
                if b == b"00":
                    stack.append(False)
                elif b == b"01":
                    stack.append(True)
                else:
                    try:
                        stack.append(int(b))
                    except ValueError as e:
                        fail(f"bad INT: {e}")
            elif op == 0x4C:  # LONG (text)
                b = line()
                try:
                    stack.append(int(b[:-1] if b.endswith(b"L") else b))
                except ValueError as e:
                    fail(f"bad LONG: {e}")
            elif op == 0x47:  # BINFLOAT
                stack.append(_unpack_f8(take(8))[0])
            elif op == 0x46:  # FLOAT (text)
                try:
                    stack.append(float(line()))
                except ValueError as e:
                    fail(f"bad FLOAT: {e}")
            elif op == 0x58:  # BINUNICODE
                stack.append(text(take(_unpack_u4(take(4))[0])))
            elif op == 0x8C:  # SHORT_BINUNICODE
                stack.append(text(take(take(1)[0])))
            elif op == 0x8D:  # BINUNICODE8
                stack.append(text(take(_unpack_u8(take(8))[0])))
            elif op == 0x56:  # UNICODE (text)
                try:
                    stack.append(line().decode("raw-unicode-escape"))
                except UnicodeDecodeError as e:
                    fail(f"bad UNICODE: {e}")
            elif op == 0x54:  # BINSTRING
                k = _unpack_i4(take(4))[0]
                if k < 0:
                    fail("BINSTRING with a negative length")
                stack.append(legacy_str(take(k)))
            elif op == 0x55:  # SHORT_BINSTRING
                stack.append(legacy_str(take(take(1)[0])))
            elif op == 0x42:  # BINBYTES
                stack.append(bytes(take(_unpack_u4(take(4))[0])))
            elif op == 0x43:  # SHORT_BINBYTES
                stack.append(bytes(take(take(1)[0])))
            elif op == 0x8E:  # BINBYTES8
                stack.append(bytes(take(_unpack_u8(take(8))[0])))
            elif op == 0x96:  # BYTEARRAY8
                stack.append(bytearray(take(_unpack_u8(take(8))[0])))
            elif op == 0x29:  # EMPTY_TUPLE
                stack.append(())
            elif op == 0x74:  # TUPLE
                items = pop_mark()  # rebinds `stack`: never inside stack.append(...)
                stack.append(tuple(items))
            elif op == 0x85:  # TUPLE1
                stack.append((pop(),))
            elif op == 0x86:  # TUPLE2
                b = pop()
                stack.append((pop(), b))
            elif op == 0x87:  # TUPLE3
                c = pop()
                b = pop()
                stack.append((pop(), b, c))
            elif op == 0x5D:  # EMPTY_LIST
                stack.append([])
            elif op == 0x6C:  # LIST
                items = pop_mark()
                stack.append(items)
            elif op == 0x61:  # APPEND
                v = pop()
                target = top()
                if type(target) is not list:
                    fail(f"APPEND to a {type(target).__name__}; only lists take appends")
                target.append(v)
            elif op == 0x65:  # APPENDS
                items = pop_mark()
                target = top()
                if type(target) is not list:
                    fail(f"APPENDS to a {type(target).__name__}; only lists take appends")
                target.extend(items)
            elif op == 0x7D:  # EMPTY_DICT
                stack.append({})
            elif op == 0x64:  # DICT
                items = pop_mark()
                d = {}
                set_items(d, items)
                stack.append(d)
            elif op == 0x73:  # SETITEM
                v = pop()
                k = pop()
                set_items(top(), [k, v])
            elif op == 0x75:  # SETITEMS
                items = pop_mark()
                set_items(top(), items)
            elif op == 0x8F:  # EMPTY_SET
                stack.append(set())
            elif op == 0x90:  # ADDITEMS
                items = pop_mark()
                target = top()
                if type(target) is not set:
                    fail(f"ADDITEMS to a {type(target).__name__}; only sets take items")
                try:
                    target.update(items)
                except TypeError as e:
                    fail(f"unhashable set item: {e}")
            elif op == 0x91:  # FROZENSET
                items = pop_mark()
                try:
                    stack.append(frozenset(items))
                except TypeError as e:
                    fail(f"unhashable frozenset item: {e}")
            elif op == 0x67:  # GET
                try:
                    idx = int(line())
                except ValueError as e:
                    fail(f"bad GET: {e}")
                if idx not in memo:
                    fail(f"memo value not found at index {idx}")
                stack.append(memo[idx])
            elif op in (0x68, 0x6A):  # BINGET, LONG_BINGET
                idx = take(1)[0] if op == 0x68 else _unpack_u4(take(4))[0]
                if idx not in memo:
                    fail(f"memo value not found at index {idx}")
                stack.append(memo[idx])
            elif op == 0x70:  # PUT
                try:
                    idx = int(line())
                except ValueError as e:
                    fail(f"bad PUT: {e}")
                if idx < 0:
                    fail("negative PUT index")
                memo[idx] = top()
            elif op in (0x71, 0x72):  # BINPUT, LONG_BINPUT
                idx = take(1)[0] if op == 0x71 else _unpack_u4(take(4))[0]
                memo[idx] = top()
            elif op == 0x94:  # MEMOIZE
                memo[len(memo)] = top()
            elif op == 0x63:  # GLOBAL
                module = text(line())
                name = text(line())
                stack.append(global_(module, name))
            elif op == 0x93:  # STACK_GLOBAL
                name = pop()
                module = pop()
                if not (isinstance(module, str) and isinstance(name, str)):
                    fail("STACK_GLOBAL wants two strings")
                stack.append(global_(module, name))
            elif op == 0x51:  # BINPERSID
                stack.append(self.persistent_load(pop()))
            elif op == 0x52:  # REDUCE
                args = pop()
                func = pop()
                if callables.get(id(func)) is not func:
                    fail(f"REDUCE calls {type(func).__name__!s} {func!r:.100}, which is not an allowed global")
                if type(args) is not tuple:
                    fail(f"REDUCE arguments must be a tuple, got {type(args).__name__}")
                stack.append(self._call(func, args, {}))
            elif op in (0x81, 0x92):  # NEWOBJ, NEWOBJ_EX
                kwargs = pop() if op == 0x92 else {}
                args = pop()
                cls = pop()
                if callables.get(id(cls)) is not cls or not isinstance(cls, type):
                    fail(f"NEWOBJ on {cls!r:.100}, which is not an allowed class")
                if type(args) is not tuple or type(kwargs) is not dict:
                    fail("NEWOBJ arguments must be a tuple (and a dict of keywords)")
                stack.append(self._call(cls.__new__, (cls, *args), kwargs, name=f"{cls.__qualname__}.__new__"))
            elif op == 0x62:  # BUILD
                state = pop()
                inst = top()
                if type(inst) is OrderedDict and type(state) is dict:
                    # A module state_dict carries its `_metadata` (per-module versions) as an attribute.
                    if not all(isinstance(k, str) and not k.startswith("__") for k in state):
                        fail("BUILD on an OrderedDict may only set plain attributes")
                    inst.__dict__.update(state)
                    continue
                if not self.may_build(inst):
                    fail(f"BUILD on a {type(inst).__module__}.{type(inst).__qualname__}, which is not an allowed class")
                setstate = getattr(inst, "__setstate__", None)
                if setstate is not None:
                    self._call(setstate, (state,), {}, name=f"{type(inst).__qualname__}.__setstate__")
                else:
                    slotstate = None
                    if isinstance(state, tuple) and len(state) == 2:
                        state, slotstate = state
                    if state:
                        if not isinstance(state, dict):
                            fail(f"BUILD state must be a dict, got {type(state).__name__}")
                        inst.__dict__.update(state)
                    if slotstate:
                        if not isinstance(slotstate, dict):
                            fail(f"BUILD slot state must be a dict, got {type(slotstate).__name__}")
                        for k, v in slotstate.items():
                            setattr(inst, k, v)
            elif op in _REFUSED:
                fail(f"unsupported opcode {_REFUSED[op]} at offset {pos - 1}: it is never executed with weights_only")
            else:
                fail(f"invalid pickle opcode {op:#04x} at offset {pos - 1}")
