"""Runs a snippet in a subprocess on the fake CUDA driver (docs/CUDA.md, "The fake driver"), so that the rest of
the test process keeps seeing no CUDA. Shared by the test_cuda_*.py files."""
import os
import subprocess
import sys
import textwrap

import strata

# The subprocesses import the same strata as this process (the in-place build, or a sanitizer build's copy).
PKG_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(strata.__file__)))


def run_fake(code, **env):
    """Runs `code` (dedented) after a prelude binding strata, _C, cc = _C._cuda and fake = strata.cuda._fake;
    extra environment variables from env. Returns its stdout; a non-zero exit fails with its output."""
    e = dict(os.environ)
    e.update({"STRATA_CUDA_DRIVER": "fake", "PYTHONPATH": PKG_PARENT})
    e.update({k: str(v) for k, v in env.items()})
    prelude = "import strata\nfrom strata import _C\ncc = _C._cuda\nfake = strata.cuda._fake\n"
    r = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], env=e, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout
