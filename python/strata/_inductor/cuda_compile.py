"""Compiling rendered CUDA kernels (cuda.py) with NVRTC, reading their SASS, and running them on the host.

Note [Finding NVRTC]
The CUDA 13.0 wheels (scripts/setup.sh pins them: nvidia-cuda-nvrtc 13.0.88, nvidia-cuda-crt 13.0.88,
nvidia-cuda-runtime 13.0.96 for cuda_fp16.h / cuda_bf16.h, nvidia-cuda-cccl 13.0.85 for libcu++) install
into site-packages/nvidia/cu13/: lib/libnvrtc.so.13, lib/libnvrtc-builtins.so.13.0, include/ (the CUDA
headers), include/cccl/ (libcu++). The disassemblers come from nvidia-cuda-nvdisasm / nvidia-cuda-cuobjdump,
whose oldest wheels on PyPI are 13.2.51 (no 13.0 wheel exists); they read sm_90a cubins from NVRTC 13.0, into
nvidia/cu13/bin/. $STRATA_NVRTC_DIR overrides the library directory. NVRTC newer than 13.0 emits PTX that the
lent machines' driver (580) and ptxas 13.0 reject, so the pins matter for the GPU runs.

Note [Kernel compile options]
--gpu-architecture=sm_90a (PTX for compute_90a plus the sm_90a cubin), -std=c++20, -default-device (the
functors' helpers without __device__ become device functions), --fmad=false (cpp.py's -ffp-contract=off:
no FMA joins two rounded ops), --ptxas-options=-v (registers, spills and stack in the log, parsed into
Compiled.info), -diag-suppress=161 (GCC's unroll pragmas in the functor headers). The include path: src/backends/cuda/nvrtc_include (std headers and core/dtype.h for NVRTC),
src/, libcu++, the CUDA headers.

Note [Checking generated CUDA kernels without a GPU]
The same rendered source compiles as host C++ (g++, src/backends/cuda/nvrtc_host_emulation.h forced in
first) and runs its grid block by block with real threads per block. The functors then use glibc's libm where
the device uses CUDA's math library, so the emulation checks the kernel's indexing, vector paths, dtype
conversions and block reductions, not the device's last-bit transcendental values (CUDA documents those
as 1-2 ulp for expf/logf/tanhf)."""

import ctypes
import glob
import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

from . import codecache

ARCH = "sm_90a"
OPTIONS = ["-std=c++20", "-default-device", "--fmad=false", "--ptxas-options=-v",
           "-diag-suppress=161"]  # 161: the functors' `#pragma GCC unroll`, which NVRTC does not know
_lock = threading.Lock()
_memory = {}
_emulated = {}
stats = {"compiles": 0, "memory_hits": 0, "disk_hits": 0}


class NvrtcMissing(RuntimeError):
    pass


def _cu13():
    """site-packages/nvidia/cu13 of the installed CUDA 13 wheels, or None."""
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        spec = None
    for root in (spec.submodule_search_locations if spec and spec.submodule_search_locations else []):
        d = Path(root) / "cu13"
        if (d / "lib").is_dir():
            return d
    return None


def nvrtc_dir():
    d = os.environ.get("STRATA_NVRTC_DIR")
    if d:
        return Path(d)
    cu = _cu13()
    return cu / "lib" if cu else None


def _repo_src():
    return Path(codecache.include_dir())


def include_dirs():
    cu = _cu13()
    if cu is None or not (cu / "include" / "cccl" / "cuda" / "std" / "cmath").is_file():
        raise NvrtcMissing("CUDA kernels: the CUDA headers are missing (pip install nvidia-cuda-runtime==13.0.96 "
                           "nvidia-cuda-cccl==13.0.85 nvidia-cuda-crt==13.0.88: scripts/setup.sh)")
    src = _repo_src()
    return [src / "backends" / "cuda" / "nvrtc_include", src, cu / "include" / "cccl", cu / "include"]


def available():
    """(True, "") when NVRTC and the headers are installed, else (False, the reason)."""
    try:
        _ensure_loaded()
        include_dirs()
    except (NvrtcMissing, RuntimeError, ImportError) as e:
        return False, str(e)
    return True, ""


def _ensure_loaded():
    from strata._C import _cuda_nvrtc
    if _cuda_nvrtc.loaded():
        return _cuda_nvrtc
    d = nvrtc_dir()
    if d is None or not (d / "libnvrtc.so.13").exists():
        raise NvrtcMissing(f"CUDA kernels: libnvrtc.so.13 not found ({'in ' + str(d) if d else 'no nvidia/cu13 package'};"
                           " pip install nvidia-cuda-nvrtc==13.0.88, or set STRATA_NVRTC_DIR)")
    with _lock:
        if not _cuda_nvrtc.loaded():
            _cuda_nvrtc.load(str(d))
    return _cuda_nvrtc


class Compiled:
    """PTX text, cubin bytes, NVRTC's log, and the ptxas facts of the kernel (Compiled.info)."""

    def __init__(self, name, ptx, cubin, log):
        self.name, self.ptx, self.cubin, self.log = name, ptx, cubin, log
        self.info = parse_ptxas_info(log)
        self._sass = None

    def sass(self):
        if self._sass is None:
            self._sass = disassemble(self.cubin)
        return self._sass

    def occupancy(self, block):
        """Resident warps per SM / 64 on an H100 (sm_90) for `block` threads a block, from the registers
        and static shared memory ptxas reported (occupancy() below)."""
        return occupancy(self.info["registers"], block, self.info["smem"])

    def report(self, block):
        """What a reader of the kernel wants first: registers, spills, stack, shared memory, occupancy, and
        the counts of the memory, MUFU and shuffle instructions in its SASS."""
        ops = sass_opcodes(self.sass())
        keep = sorted((o, n) for o, n in ops.items() if o.startswith(("LDG", "STG", "LDS", "STS", "LDL", "STL",
                                                                       "MUFU", "SHFL", "BAR", "CALL")))
        i = self.info
        return (f"{self.name} ({ARCH}): {i['registers']} registers, {i['spill_stores']} B spill stores, "
                f"{i['spill_loads']} B spill loads, {i['stack']} B stack, {i['smem']} B shared; occupancy at "
                f"{block} threads {self.occupancy(block):.0%}\n" + " ".join(f"{o}:{n}" for o, n in keep))


# sm_90 (H100/H200) limits per SM: 64K 32-bit registers allocated per warp in units of 256, 64 warps, 32 blocks,
# 228 KB of shared memory of which each block also takes 1 KB reserved (CUDA occupancy calculator's figures).
SM90 = {"regs": 65536, "reg_unit": 256, "warps": 64, "blocks": 32, "smem": 228 * 1024, "smem_reserved": 1024}


def occupancy(registers, block, smem=0, sm=SM90):
    """Fraction of the SM's warps resident for a kernel using `registers` per thread and `smem` static bytes."""
    wpb = -(-block // 32)
    per_warp = -(-max(1, registers) * 32 // sm["reg_unit"]) * sm["reg_unit"]
    by_regs = (sm["regs"] // per_warp) // wpb
    by_smem = sm["smem"] // (smem + sm["smem_reserved"])
    blocks = min(by_regs, by_smem, sm["warps"] // wpb, sm["blocks"])
    return blocks * wpb / sm["warps"]


_INFO = {
    "registers": re.compile(r"Used (\d+) registers"),
    "stack": re.compile(r"(\d+) bytes stack frame"),
    "spill_stores": re.compile(r"(\d+) bytes spill stores"),
    "spill_loads": re.compile(r"(\d+) bytes spill loads"),
    "smem": re.compile(r"(\d+) bytes smem"),
}


def parse_ptxas_info(log):
    """{registers, stack, spill_stores, spill_loads, smem} from ptxas -v lines (0 where absent)."""
    return {k: int(m.group(1)) if (m := r.search(log)) else 0 for k, r in _INFO.items()}


def _key(source, name, arch, options):
    nv = _ensure_loaded()
    h = hashlib.sha256()
    for part in (source, name, arch, " ".join(options), repr(nv.version())):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def compile(source, name="strata_kernel", arch=ARCH, options=None):
    """NVRTC: PTX and cubin for a rendered source (a str or cuda.CudaSource). Cached in memory and on disk
    ($STRATA_CACHE_DIR/cuda/<key>.{ptx,cubin,log}, written whole and renamed, as codecache.py does)."""
    text = getattr(source, "source", source)
    nv = _ensure_loaded()
    opts = list(OPTIONS if options is None else options) + [f"-I{d}" for d in include_dirs()]
    key = _key(codecache.strip_comments(text), name, arch, opts)
    with _lock:
        hit = _memory.get(key)
    if hit is not None:
        stats["memory_hits"] += 1
        return hit
    d = codecache.cache_dir().parent / "cuda"
    d.mkdir(parents=True, exist_ok=True)
    files = [d / f"{key}.{ext}" for ext in ("ptx", "cubin", "log")]
    if all(f.exists() for f in files):
        try:
            c = Compiled(name, files[0].read_text(), files[1].read_bytes(), files[2].read_text())
            if c.cubin[:4] == b"\x7fELF":
                stats["disk_hits"] += 1
                with _lock:
                    _memory[key] = c
                return c
        except (OSError, UnicodeDecodeError):
            pass
    ptx, cubin, log = nv.compile(text, name, arch, opts)
    stats["compiles"] += 1
    c = Compiled(name, ptx, cubin, log)
    for f, data in zip(files, (ptx.encode(), cubin, log.encode())):
        fd, tmp = tempfile.mkstemp(prefix=".c-", dir=d)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, f)
    with _lock:
        _memory[key] = c
    return c


def tool(name):
    """Path of nvdisasm / cuobjdump: nvidia/cu13/bin of the wheels, else PATH, else None."""
    cu = _cu13()
    if cu is not None and (cu / "bin" / name).is_file():
        return str(cu / "bin" / name)
    return shutil.which(name)


def disassemble(cubin):
    """SASS text of a cubin (nvdisasm, else cuobjdump -sass); raises NvrtcMissing when neither exists."""
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(cubin)
        path = f.name
    try:
        nvd, cuo = tool("nvdisasm"), tool("cuobjdump")
        if nvd:
            cmd = [nvd, "-c", path]
        elif cuo:
            cmd = [cuo, "-sass", path]
        else:
            raise NvrtcMissing("CUDA kernels: neither nvdisasm nor cuobjdump is installed "
                               "(pip install nvidia-cuda-nvdisasm==13.2.51)")
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed: {r.stderr[-2000:]}")
        return r.stdout
    finally:
        os.unlink(path)


def sass_opcodes(sass):
    """{opcode with modifiers: count} of SASS text (e.g. 'LDG.E.128.CONSTANT': 2)."""
    counts = {}
    for m in re.finditer(r"^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", sass, re.M):
        counts[m.group(1)] = counts.get(m.group(1), 0) + 1
    return counts


# ---- host emulation (Note [Checking generated CUDA kernels without a GPU]) ----------------------------------

def _wrapper(cs):
    """extern "C" strata_emu_run(bufs, a, b, grid, block): calls the kernel with typed pointers under launch()."""
    args, k = [], 0
    for t, nm in cs.params:
        if t == "int64_t":
            args.append("a" if not any(a == "a" for a in args) else "b")
        else:
            base = t.replace(" __restrict__", "")
            args.append(f"static_cast<{base}>(bufs[{k}])")
            k += 1
    return ('extern "C" void strata_emu_run(void* const* bufs, int64_t a, int64_t b, unsigned grid, unsigned block) {\n'
            f"  (void)a; (void)b;\n  strata_emu::launch(grid, block, [&] {{ {cs.name}({', '.join(args)}); }});\n}}\n")


def emulate(cs):
    """The host build of a rendered kernel (g++, -O1, no FMA contraction): a callable
    run(pointers, a, b, grid, block) with a, b the kernel's integer arguments (n, or rows and cols)."""
    path, _ = codecache.compiler()
    src = cs.source + "\n" + _wrapper(cs)
    key = hashlib.sha256((src + path).encode()).hexdigest()
    with _lock:
        fn = _emulated.get(key)
    if fn is not None:
        return fn
    d = Path(tempfile.mkdtemp(prefix="strata-cuda-emu-"))
    cpp, so = d / "k.cpp", d / "k.so"
    cpp.write_text(src)
    header = _repo_src() / "backends" / "cuda" / "nvrtc_host_emulation.h"
    cmd = [path, "-std=c++20", "-O1", "-ffp-contract=off", "-fno-math-errno", "-fPIC", "-shared", "-pthread",
           "-include", str(header), "-I", str(_repo_src()), str(cpp), "-o", str(so), "-lm"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"CUDA host emulation: g++ failed on {cs.name}:\n{r.stderr[-4000:]}")
    lib = ctypes.CDLL(str(so))
    f = lib.strata_emu_run
    f.argtypes = (ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint, ctypes.c_uint)
    f.restype = None
    f._lib = lib
    shutil.rmtree(d, ignore_errors=True)

    def run(pointers, a, b=0, grid=1, block=32):
        arr = (ctypes.c_void_p * max(1, len(pointers)))(*pointers)
        f(arr, a, b, grid, block)

    with _lock:
        _emulated[key] = run
    return run


def library_layout():
    """Where the CUDA wheels put NVRTC and the disassemblers (for docs and error messages)."""
    cu = _cu13()
    if cu is None:
        return {}
    return {"nvrtc": sorted(glob.glob(str(cu / "lib" / "libnvrtc*"))), "nvdisasm": tool("nvdisasm"),
            "cuobjdump": tool("cuobjdump"), "include": str(cu / "include")}
