"""Generated CUDA kernels where NVRTC is missing: a clear reason, no crash (runs on every machine, wheels or not)."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def _run(code, **env):
    e = dict(os.environ, PYTHONPATH=str(ROOT / "python"), **env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=e,
                          timeout=120)


def test_a_missing_library_is_a_reason_not_a_crash(tmp_path):
    r = _run("""
        from strata._inductor import cuda_compile
        ok, why = cuda_compile.available()
        print(ok)
        print(why)
        try:
            cuda_compile.compile('extern "C" __global__ void k() {}', name="k")
        except cuda_compile.NvrtcMissing as e:
            print("raised:", e)
    """, STRATA_NVRTC_DIR=str(tmp_path))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "False"
    assert "libnvrtc.so.13 not found" in lines[1] and str(tmp_path) in lines[1]
    assert lines[2].startswith("raised:") and "STRATA_NVRTC_DIR" in lines[2]


def test_loading_from_a_directory_without_the_builtins_names_the_file(tmp_path):
    # libnvrtc present but not its builtins library: the load names the file it could not open.
    (tmp_path / "libnvrtc.so.13").write_bytes(b"not a library")
    r = _run("""
        from strata._C import _cuda_nvrtc
        import sys
        try:
            _cuda_nvrtc.load(sys.argv[1] if len(sys.argv) > 1 else "")
        except RuntimeError as e:
            print(e)
        print(_cuda_nvrtc.loaded())
    """.replace('sys.argv[1] if len(sys.argv) > 1 else ""', repr(str(tmp_path))))
    assert r.returncode == 0, r.stderr
    assert "libnvrtc-builtins.so.13.0" in r.stdout and str(tmp_path) in r.stdout
    assert r.stdout.splitlines()[-1] == "False"
