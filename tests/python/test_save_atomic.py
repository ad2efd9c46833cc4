"""strata.save over an existing checkpoint is all or nothing: a process killed while saving, or a write
that fails part way (a file size limit standing in for a full disk), leaves the previous checkpoint
intact and loadable, and no temporary file behind that a later save would trip over."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import strata

_PYDIR = os.path.dirname(os.path.dirname(os.path.abspath(strata.__file__)))


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [_PYDIR, env.get("PYTHONPATH", "")] if p)
    return env


@pytest.mark.parametrize("fmt", ["ckpt.pt", "ckpt.safetensors"])
def test_killed_while_saving_leaves_the_old_checkpoint(tmp_path, fmt):
    path = tmp_path / fmt
    old = {"w": strata.arange(1000.0), "step": strata.tensor(1)}
    strata.save(old, path)
    # A child saves a large checkpoint over it in a loop; it is killed at some point during a save.
    code = textwrap.dedent(f"""
        import sys, strata
        big = {{"w": strata.ones(1 << 23), "step": strata.tensor(2)}}
        print("ready", flush=True)
        while True:
            strata.save(big, {str(path)!r})
    """)
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, env=_env())
    try:
        assert p.stdout.readline().strip() == b"ready"
        time.sleep(0.4)
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    got = strata.load(path)
    # Either the old checkpoint or one complete new one, never a torn file.
    if got["step"].item() == 1:
        assert strata.equal(got["w"], old["w"])
    else:
        assert got["step"].item() == 2 and got["w"].shape == (1 << 23,) and bool((got["w"] == 1).all())
    # A temporary file of the killed save may remain (nothing can remove it), but it is hidden and a new
    # save still works.
    leftovers = [n for n in os.listdir(tmp_path) if n != fmt]
    assert all(n.startswith("." + fmt) and n.endswith(".tmp") for n in leftovers), leftovers
    strata.save(old, path)
    assert strata.equal(strata.load(path)["w"], old["w"])


def test_write_failing_part_way_keeps_the_old_checkpoint(tmp_path):
    path = tmp_path / "ckpt.pt"
    strata.save({"w": strata.arange(10.0)}, path)
    before = path.read_bytes()
    # RLIMIT_FSIZE makes write() fail with EFBIG once the file reaches 1 MiB: the save of a 32 MiB checkpoint
    # fails part way through, as on a full disk.
    code = textwrap.dedent(f"""
        import resource, signal, strata
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
        try:
            strata.save({{"w": strata.ones(1 << 23)}}, {str(path)!r})
        except OSError as e:
            print("failed", e.errno)
        else:
            print("saved")
        print(strata.load({str(path)!r})["w"].tolist())
    """)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=_env())
    assert p.returncode == 0, p.stderr
    lines = p.stdout.split("\n")
    assert lines[0].startswith("failed"), p.stdout
    assert lines[1] == str([float(i) for i in range(10)])
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["ckpt.pt"]


def test_save_fsyncs_the_file_and_its_directory(tmp_path, monkeypatch):
    synced = []
    real = os.fsync

    def spy(fd):
        synced.append(os.path.realpath(f"/proc/self/fd/{fd}"))
        return real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    path = tmp_path / "ckpt.pt"
    strata.save({"w": strata.ones(3)}, path)
    assert str(tmp_path) in synced  # the rename is made durable too
    assert any(os.path.basename(s).startswith(".ckpt.pt.") for s in synced)  # the data, before the rename


def test_mmap_load_does_not_read_the_tensors(tmp_path):
    # Loading with mmap=True maps the file: the process's resident memory does not grow by the tensor's
    # size (a 64 MiB tensor; the pages are read only when touched).
    path = tmp_path / "big.pt"
    strata.save({"w": strata.ones(1 << 24)}, path)
    code = textwrap.dedent(f"""
        import strata
        def rss():
            with open("/proc/self/statm") as f:
                return int(f.read().split()[1]) * 4096
        before = rss()
        sd = strata.load({str(path)!r}, mmap=True)
        grown = rss() - before
        assert sd["w"].shape == (1 << 24,)
        print(grown < (16 << 20), sd["w"][123].item())
    """)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=_env())
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "True 1.0"
