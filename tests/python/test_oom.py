"""Out of memory in the CPU allocator: a request the address space cannot hold raises MemoryError (which
strata.OutOfMemoryError names) after the allocator gave its cached blocks back and tried once more, and the
process keeps working. Run in a subprocess under an RLIMIT_AS limit."""

import os
import subprocess
import sys
import textwrap

import strata

_PYDIR = os.path.dirname(os.path.dirname(os.path.abspath(strata.__file__)))


def _run(code):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [_PYDIR, env.get("PYTHONPATH", "")] if p)
    env["OMP_NUM_THREADS"] = "1"
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=300, env=env)


def test_out_of_memory_raises_and_the_process_goes_on():
    p = _run("""
        import resource, strata
        def vm():
            with open("/proc/self/statm") as f:
                return int(f.read().split()[0]) * 4096
        limit = vm() + (768 << 20)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        assert issubclass(strata.OutOfMemoryError, MemoryError) and issubclass(strata.OutOfMemoryError, RuntimeError)
        for n in (1 << 30, 1 << 28):   # 4 GiB, then 1 GiB of float32: neither fits
            try:
                strata.empty(n)
            except MemoryError as e:
                assert "out of memory" in str(e), e
            else:
                raise SystemExit("no MemoryError for %d floats" % n)
        # Fill the cache with freed blocks, then ask for more than fits beside them: the cached blocks are
        # released and the request succeeds on the retry.
        held = [strata.ones(16 << 20) for _ in range(8)]   # 8 x 64 MiB
        del held
        big = strata.ones(120 << 20)                        # 480 MiB: needs the cached 512 MiB back
        assert big.sum().item() == 120 << 20
        del big
        try:
            strata.ones(1 << 28) + 1
        except MemoryError:
            pass
        x = strata.arange(1000.0)
        print((x * 2).sum().item())
    """)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.strip() == "999000.0"
