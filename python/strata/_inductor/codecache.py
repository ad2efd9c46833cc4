"""Compiling rendered kernels with the system C++ compiler, and caching them.

Note [The kernel cache]
A kernel's key is the sha256 of its source (whole-line comments removed), the compiler's version line, the flags and the ISA
level. In memory: key -> loaded function (one dlopen per key per process). On disk:
$STRATA_CACHE_DIR (default $XDG_CACHE_HOME/strata or ~/.cache/strata) /codegen/<key>.so. A compile
writes a temporary file in that directory and renames it over <key>.so (atomic on POSIX), so
concurrent processes compiling the same kernel each publish a complete file and readers never see a
partial one. Each .so exports strata_kernel_key, the sha256 of its source: a file that fails to
load or whose key does not match (a truncated or foreign file) is compiled again, never trusted.

Flags: -O3, the ISA level eager's CPU kernels dispatch to on this machine (-march=x86-64-v4
-mprefer-vector-width=512 with AVX-512, x86-64-v3 with AVX2+FMA, else x86-64-v2), -fno-math-errno
as eager, -ffp-contract=off (no FMA across two fused ops: eager rounds every op's result to the
dtype), -fopenmp, libmvec for the vector math functions."""

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

stats = {"compiles": 0, "disk_hits": 0, "memory_hits": 0, "corrupt": 0}
_memory = {}
_lock = threading.Lock()
_compiler_info = None


class CompilerMissing(RuntimeError):
    pass


def include_dir():
    d = Path(__file__).resolve().parents[3] / "src"
    if not (d / "ops" / "pointwise_functors.h").is_file():
        raise CompilerMissing(f"strata_cpp: the kernel headers (src/ops/pointwise_functors.h) are not at {d}")
    return str(d)


def compiler():
    """(path, version line) of the C++ compiler: $STRATA_CXX or g++ on PATH."""
    global _compiler_info
    if _compiler_info is None:
        name = os.environ.get("STRATA_CXX", "g++")
        path = shutil.which(name)
        if path is None:
            raise CompilerMissing(f"strata_cpp: no C++ compiler: {name!r} is not on PATH (set STRATA_CXX to "
                                  "a g++ compatible compiler); the graph runs on the eager runner instead")
        _compiler_info = (path, _compiler_version(path))
    return _compiler_info


def _compiler_version(path):
    """The compiler's `--version` line, remembered on disk per binary (its resolved path, size and
    mtime; a replaced compiler gets a new entry): a warm process starts no compiler at all."""
    try:
        real = os.path.realpath(path)
        st = os.stat(real)
        ident = f"{real}\0{st.st_size}\0{st.st_mtime_ns}"
        memo = cache_dir() / f"compiler-{hashlib.sha256(ident.encode()).hexdigest()[:32]}.txt"
    except OSError:
        memo = None
    if memo is not None:
        try:
            line = memo.read_text()
            if line.startswith(ident + "\n"):
                return line.split("\n", 2)[1]
        except (OSError, UnicodeDecodeError):
            pass
    version = subprocess.run([path, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    if memo is not None:
        try:  # written whole and renamed, as the kernels are
            fd, tmp = tempfile.mkstemp(prefix=".c-", dir=memo.parent)
            with os.fdopen(fd, "w") as f:
                f.write(f"{ident}\n{version}\n")
            os.replace(tmp, memo)
        except OSError:
            pass
    return version


_isa = None
_flags = None


def isa_flags():
    """Read from /proc/cpuinfo once per process."""
    global _isa
    if _isa is None:
        _isa = _probe_isa()
    return list(_isa)


def _probe_isa():
    try:
        flags = set()
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        flags = set()
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags:
        return ["-march=x86-64-v4", "-mprefer-vector-width=512"]
    if {"avx2", "fma", "bmi2"} <= flags:
        return ["-march=x86-64-v3"]
    return ["-march=x86-64-v2"]


def flags():
    global _flags
    if _flags is None:
        _flags = ["-std=c++20", "-O3", *isa_flags(), "-fno-math-errno", "-ffp-contract=off", "-fopenmp",
                  "-fPIC", "-shared", "-I", include_dir()]
    return list(_flags)


def cache_dir():
    root = os.environ.get("STRATA_CACHE_DIR")
    if not root:
        root = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "strata")
    d = Path(root) / "codegen"
    d.mkdir(parents=True, exist_ok=True)
    return d


def _source_hash(source):
    return hashlib.sha256(source.encode()).hexdigest()


def key_of(source):
    path, version = compiler()
    h = hashlib.sha256()
    for part in (source, version, " ".join(flags())):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def _try_load(so, want, nargs=2, symbols=None):
    """The kernel function (or, with symbols, the list of those functions) of a cached .so whose
    key matches want; None for a file that does not load or is not that kernel's."""
    try:
        lib = ctypes.CDLL(str(so))
        got = (ctypes.c_char * 65).in_dll(lib, "strata_kernel_key").value.decode()
        fns = [getattr(lib, name) for name in (symbols or ["strata_kernel"])]
    except (OSError, ValueError, UnicodeDecodeError, AttributeError):
        return None
    if got != want:
        return None
    for fn in fns:
        fn.argtypes = (ctypes.c_void_p,) + (ctypes.c_int64,) * (nargs - 1)
        fn.restype = None
        fn._lib = lib  # keeps the handle alive
    return fns if symbols else fns[0]


def strip_comments(source):
    """The code without its whole-line comments: the node names and source lines they give do not
    change the kernel, so the same kernel captured elsewhere shares the cache entry."""
    return "\n".join(line for line in source.splitlines() if not line.lstrip().startswith("//")) + "\n"


def load(source, nargs=2):
    """The kernel's strata_kernel function (ctypes), compiled on a miss of both caches; it takes a
    pointer array and nargs - 1 int64 sizes (pointwise kernels: n; row kernels: rows, cols)."""
    return _cached(strip_comments(source), nargs)


def load_variants(sources, nargs=2):
    """[strata_kernel of each source] from one shared object: the sources (kernels of one signature,
    each defining `extern "C" void strata_kernel(`) are renamed strata_kernel_v<i> and compiled as one
    translation unit, cached like a single kernel (mode="max-autotune" times the candidates of a
    kernel this way: one compiler call per kernel, not one per candidate)."""
    marker = 'extern "C" void strata_kernel('
    parts = []
    for i, src in enumerate(sources):
        src = strip_comments(src)
        if src.count(marker) != 1:
            raise ValueError("load_variants: each source must define strata_kernel once")
        parts.append(src.replace(marker, f'extern "C" void strata_kernel_v{i}('))
    return _cached("".join(parts), nargs, [f"strata_kernel_v{i}" for i in range(len(sources))])


def _cached(source, nargs, symbols=None):
    """What _try_load/_compile give for source (strata_kernel, or the functions named by symbols): from
    memory, else from the disk cache, else compiled; a cached file that is not this kernel's counts as
    corrupt and is rebuilt."""
    key = key_of(source)
    with _lock:
        fn = _memory.get(key)
        if fn is not None:
            stats["memory_hits"] += 1
            return fn
        src_hash = _source_hash(source)
        d = cache_dir()
        so = d / f"{key}.so"
        if so.exists():
            fn = _try_load(so, src_hash, nargs, symbols)
            if fn is not None:
                stats["disk_hits"] += 1
                _memory[key] = fn
                return fn
            stats["corrupt"] += 1
        fn = _compile(source, src_hash, d, so, nargs, symbols)
        _memory[key] = fn
        return fn


def _compile(source, src_hash, d, so, nargs=2, symbols=None):
    path, _ = compiler()
    full = source + f'\nextern "C" const char strata_kernel_key[] = "{src_hash}";\n'
    fd, tmp_cpp = tempfile.mkstemp(prefix=".k-", suffix=".cpp", dir=d)
    tmp_so = tmp_cpp[:-4] + ".so"
    try:
        with os.fdopen(fd, "w") as f:
            f.write(full)
        cmd = [path, *flags(), tmp_cpp, "-o", tmp_so, "-lmvec", "-lm"]
        stats["compiles"] += 1
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"strata_cpp: the C++ compiler failed ({' '.join(cmd)}):\n{r.stderr[-4000:]}")
        # A fresh inode: a process that already dlopen'ed an older file at this path keeps its mapping.
        os.replace(tmp_so, so)
    finally:
        for p in (tmp_cpp, tmp_so):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass
    fn = _try_load(so, src_hash, nargs, symbols)
    if fn is None:
        raise RuntimeError(f"strata_cpp: the freshly compiled kernel {so} does not load")
    return fn
