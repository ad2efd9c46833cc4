"""A process that imported strata exits cleanly (run under 3.11 and 3.12 like the other compile
tests): C++ static destructors in the extension must not touch Python objects after the
interpreter is finalized (CPython 3.12 crashed with SIGSEGV there when the dtype objects were
static nb::objects)."""

import os
import subprocess
import sys

import strata

CODE = """
import strata, strata.func
xs = [strata.zeros(2, dtype=d) for d in (strata.float32, strata.float64, strata.int64, strata.bool,
                                          strata.complex64, strata.uint16)]
f = strata.compile(lambda x: x * 2 + 1)
f(strata.randn(4))
print("ok")
"""


def test_a_process_using_strata_exits_with_status_zero():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stdout, r.stderr)
    assert strata.float32 is strata.float32
