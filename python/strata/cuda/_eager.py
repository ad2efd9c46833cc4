"""Builds Strata's eager CUDA kernels (Note [CUDA eager kernels] in src/backends/cuda/eager_kernels.cpp).

The C++ backend renders one CUDA C source per (op, dtypes, dims, index width) and calls build() once per source:

- on a real driver: NVRTC to an sm_90a cubin through strata._inductor.cuda_compile (cached in memory and on disk
  under $STRATA_CACHE_DIR/cuda);
- on the fake driver (fake=True): g++ compiles the same source with src/backends/cuda/nvrtc_host_emulation.h into
  a shared object exporting strata_emu_entry, cached on disk under $STRATA_CACHE_DIR/cuda-emu/<sha256>.so; the
  backend registers that entry with the fake driver under the kernel's name, so the generated kernel runs
  (emulated) in stream order.
"""
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

_lock = threading.Lock()
stats = {"nvrtc": 0, "emulated_compiles": 0, "emulated_disk_hits": 0}
sources = {}  # kernel name -> source, for tests and for reading what ran


def _emu_dir():
    from strata._inductor import codecache
    d = codecache.cache_dir().parent / "cuda-emu"
    d.mkdir(parents=True, exist_ok=True)
    return d


def _emulated(source, name):
    from strata._inductor import codecache
    path, _ = codecache.compiler()
    src_dir = Path(codecache.include_dir())
    header = src_dir / "backends" / "cuda" / "nvrtc_host_emulation.h"
    h = hashlib.sha256()
    # The headers a kernel includes: a change to a functor rebuilds the kernels that use it.
    deps = sorted((src_dir / "ops").glob("*functors*.h")) + [src_dir / "core" / "dtype.h"]
    for part in [source, path, header.read_text()] + [f.read_text() for f in deps]:
        h.update(part.encode())
        h.update(b"\0")
    so = _emu_dir() / f"{h.hexdigest()}.so"
    if so.exists():
        stats["emulated_disk_hits"] += 1
        return str(so)
    with tempfile.TemporaryDirectory(prefix="strata-cuda-eager-") as d:
        cpp = Path(d) / f"{name}.cpp"
        cpp.write_text(source)
        tmp = Path(d) / "k.so"
        cmd = [path, "-std=c++20", "-O1", "-ffp-contract=off", "-fno-math-errno", "-fPIC", "-shared", "-pthread",
               "-include", str(header), "-I", str(src_dir), str(cpp), "-o", str(tmp), "-lm"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"CUDA host emulation of {name}: g++ failed:\n{r.stderr[-4000:]}")
        # Copied next to its final name, then renamed: a concurrent reader sees the whole file or none.
        fd, part = tempfile.mkstemp(prefix=".e-", dir=so.parent)
        os.close(fd)
        shutil.copyfile(tmp, part)
        os.replace(part, so)
    stats["emulated_compiles"] += 1
    return str(so)


def build(source, name, fake):
    with _lock:
        sources[name] = source
    if fake:
        return _emulated(source, name)
    from strata._inductor import cuda_compile
    c = cuda_compile.compile(source, name)
    stats["nvrtc"] += 1
    return c.cubin


def compile_for_device(source, name):
    """The NVRTC build of an eager kernel's source (for SASS checks on machines without a GPU)."""
    from strata._inductor import cuda_compile
    return cuda_compile.compile(source, name)
