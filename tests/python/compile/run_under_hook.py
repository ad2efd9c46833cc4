"""Runs pytest with the frame hook installed, then prints how many frames the
callback saw (last line: "frames asked: N").

    python tests/python/compile/run_under_hook.py [--mode M] <pytest args>

Modes:
  none         the callback answers None for every code object: every function
               frame is offered to it and runs normally.
  run-default  every code object gets an entry that checks the argument tuple
               against the code's signature and answers RUN_DEFAULT.
  replace      every code object gets an entry that runs a copy of the code
               (a fresh code object marked SKIP) with the same arguments and
               returns its result: every hooked frame is disposed of unrun and
               the frames below it are hooked again. Only code of this
               repository is replaced (torch, pytest and the standard library
               run normally): some libraries look at their caller's frame,
               which is then the entry's.
"""
import os
import sys
import types

import pytest

from strata import _C

EF = _C._eval_frame


def n_args(code):
    return code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)


def make_callback(mode):
    asked = [0]
    served = [0]  # frames whose entry ran

    def check_then_default(args, func):
        served[0] += 1
        if len(args) != n_args(func.__code__):
            raise AssertionError(f"{func.__qualname__}: {len(args)} arguments, expected {n_args(func.__code__)}")
        return EF.RUN_DEFAULT

    copies = {}

    def run_copy(args, func):
        served[0] += 1
        code = func.__code__
        copy = copies.get(code)
        if copy is None:
            copy = code.replace()
            EF.set_code_state(copy, EF.SKIP)
            copies[code] = copy
        f = types.FunctionType(copy, func.__globals__, func.__name__, func.__defaults__, func.__closure__)
        f.__kwdefaults__ = func.__kwdefaults__
        f.__qualname__ = func.__qualname__
        argc, kwc = code.co_argcount, code.co_kwonlyargcount
        pos = list(args[:argc])
        kw = dict(zip(code.co_varnames[argc : argc + kwc], args[argc : argc + kwc]))
        i = argc + kwc
        if code.co_flags & 0x04:
            pos.extend(args[i])
            i += 1
        if code.co_flags & 0x08:
            kw.update(args[i])
        return f(*pos, **kw)

    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    # The project's own Python (not the virtual environment, which may live inside the checkout).
    own_dirs = (os.path.join(repo, "python") + os.sep, os.path.join(repo, "tests") + os.sep)
    own = {check_then_default.__code__, run_copy.__code__, n_args.__code__}  # what the entries call
    entry = {"none": None, "run-default": check_then_default, "replace": run_copy}[mode]

    def callback(code, func):
        asked[0] += 1
        if code in own:
            return EF.SKIP
        if mode == "replace" and not code.co_filename.startswith(own_dirs):
            return None
        return entry

    return callback, asked, served


def main(argv):
    mode = "none"
    if argv[:1] == ["--mode"]:
        mode, argv = argv[1], argv[2:]
    callback, asked, served = make_callback(mode)
    EF.set_callback(callback)
    try:
        rc = pytest.main(argv)
    finally:
        EF.set_callback(None)
        EF.clear_all()
    print(f"frames served by an entry: {served[0]}")
    print(f"frames asked: {asked[0]}")
    return int(rc)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
