"""The GPU test suite's pieces on a machine without a GPU (docs/CUDA.md, "GPU test suite"): scripts/test_gpu.sh
says "no GPU" and exits at once, the `cuda` marker skips, bench/cuda.py runs on the fake driver."""

import os
import subprocess
import sys

import pytest

from gpu_check import no_gpu_reason

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PKG_PARENT = os.path.join(ROOT, "python")
no_gpu = pytest.mark.skipif(no_gpu_reason() is None, reason="this machine has a GPU: scripts/test_gpu.sh would run it all")


@no_gpu
def test_script_says_no_gpu_and_exits_at_once(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("STRATA_GPU_DRY", "STRATA_GPU_REQUIRED")}
    env.update(OUT=str(tmp_path), PYTHON=sys.executable)
    for mode in ("all", "test"):
        r = subprocess.run(["bash", os.path.join(ROOT, "scripts", "test_gpu.sh"), mode], env=env, capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "no GPU: " in r.stdout, r.stdout
        log = (tmp_path / "test_gpu.log").read_text()
        assert "no GPU: " in log and "== build" not in log  # nothing was built
    r = subprocess.run(["bash", os.path.join(ROOT, "scripts", "test_gpu.sh")], capture_output=True, text=True,
                       env=dict(env, STRATA_GPU_REQUIRED="1"), timeout=60)
    assert r.returncode == 2 and "no GPU: " in r.stdout, r.stdout + r.stderr
    r = subprocess.run(["bash", os.path.join(ROOT, "scripts", "test_gpu.sh"), "bogus"], capture_output=True, text=True,
                       env=env, timeout=60)
    assert r.returncode == 3 and "usage" in r.stdout


@no_gpu
def test_the_cuda_marker_skips_without_a_gpu(tmp_path):
    (tmp_path / "test_marked.py").write_text(
        "import pytest\n\n@pytest.mark.cuda\ndef test_needs_gpu():\n    raise AssertionError('ran without a GPU')\n\n"
        "def test_plain():\n    pass\n")
    # Run inside tests/python's configuration (its conftest and pytest.ini) on a copy of the file.
    target = os.path.join(ROOT, "tests", "python", f"test_zz_marker_probe_{os.getpid()}.py")
    with open(target, "w") as f:
        f.write((tmp_path / "test_marked.py").read_text())
    try:
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", target],
                           cwd=ROOT, env=dict(os.environ, PYTHONPATH=PKG_PARENT), capture_output=True, text=True,
                           timeout=120)
    finally:
        os.unlink(target)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 passed, 1 skipped" in r.stdout and "needs a GPU: " in r.stdout, r.stdout
    assert "PytestUnknownMarkWarning" not in r.stdout + r.stderr


def test_bench_runs_on_the_fake_driver(tmp_path):
    out = tmp_path / "bench.txt"
    env = dict(os.environ, STRATA_CUDA_DRIVER="fake", PYTHONPATH=PKG_PARENT)
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "cuda.py"), "--quick", "--out", str(out)], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    text = out.read_text()
    for row in ("H2D pageable [GB/s]", "D2H pinned [GB/s]", "D2D (read+write) [GB/s]", "empty(1000) cuda, alloc+free [ns]",
                "Event.record [ns]", "with stream(s): (enter+exit) [ns]"):
        assert row in text, text
    assert "FAKE driver" in text


@no_gpu
def test_bench_says_no_gpu():
    env = {k: v for k, v in os.environ.items() if k != "STRATA_CUDA_DRIVER"}
    env["PYTHONPATH"] = PKG_PARENT
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "cuda.py"), "--quick"], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.startswith("no GPU: "), r.stdout + r.stderr
