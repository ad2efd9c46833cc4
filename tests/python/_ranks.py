"""Starts a worker script on several ranks through strata's launcher, for the multi-rank tests
(test_distributed_more, test_dtensor, test_tensor_parallel, test_fsdp)."""
import os
import subprocess
import sys

PYTHON_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "python"))


def launch(args, nproc=2, timeout=240, **env_vars):
    """`python -m strata.distributed.run --standalone --nproc-per-node nproc *args` with python/ on the path, one
    OpenMP thread per rank and `env_vars` in the environment; returns the completed process."""
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR, OMP_NUM_THREADS="1", **env_vars)
    return subprocess.run([sys.executable, "-m", "strata.distributed.run", "--standalone", "--nproc-per-node",
                           str(nproc), *args], capture_output=True, text=True, timeout=timeout, env=env)


def run_worker(tmp_path, source, lib, nproc, timeout=240):
    """Writes `source` to tmp_path/worker.py and runs it on nproc ranks with LIB=lib (the library the worker imports)
    and OUT=tmp_path (where it writes its results); fails the test with the ranks' output when the run fails."""
    script = tmp_path / "worker.py"
    script.write_text(source)
    p = launch([str(script)], nproc=nproc, timeout=timeout, LIB=lib, OUT=str(tmp_path))
    assert p.returncode == 0, lib + p.stdout + p.stderr[-6000:]
    return p
