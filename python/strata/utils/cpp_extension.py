"""strata.utils.cpp_extension: build C++ extensions against Strata's C++ API and load them.

An extension here is what tests/cpp/out_of_tree/ext_example.cpp is: C++ that includes Strata's headers
("dispatch/dispatcher.h", "ops/ops.h"), defines ops with Dispatcher::get().def("ns::op(Tensor a) -> Tensor") and
registers kernels with STRATA_LIBRARY_IMPL. `load` / `load_inline` compile it with the system C++ compiler into a
shared library linked to libstrata, load it (strata.ops.load_library) and return a module whose attributes are the
ops it defined (also reachable as strata.ops.<ns>.<op>). `CppExtension` / `BuildExtension` do the same build through
setuptools.

What does not work: sources written against torch's C++ API (torch/extension.h, pybind11 bindings) do not compile
against Strata's headers; `load` detects them and says so. There is no CUDA, so CUDAExtension and cuda sources
raise.
"""

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import types

__all__ = ["BuildExtension", "CppExtension", "CUDAExtension", "include_paths", "library_paths", "load",
           "load_inline", "get_default_build_root", "is_ninja_available", "verify_ninja_availability",
           "CUDA_HOME", "ROCM_HOME", "IS_WINDOWS", "IS_MACOS", "IS_LINUX"]

CUDA_HOME = None
ROCM_HOME = None
IS_WINDOWS = sys.platform == "win32"
IS_MACOS = sys.platform.startswith("darwin")
IS_LINUX = sys.platform.startswith("linux")
_CXX_STD = "-std=c++20"
_PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # .../strata


def include_paths(device_type="cpu"):
    """Where Strata's C++ headers are (the src/ tree of a source checkout)."""
    if device_type not in ("cpu", None) and device_type is not False:
        raise OSError(f"strata.utils.cpp_extension: no {device_type} headers: this build has only the CPU backend")
    for cand in (os.path.join(_PKG, "include"), os.path.join(os.path.dirname(os.path.dirname(_PKG)), "src")):
        if os.path.exists(os.path.join(cand, "dispatch", "dispatcher.h")):
            return [cand]
    raise OSError("strata.utils.cpp_extension: Strata's C++ headers were not found (they are in the src/ tree of a "
                  "source checkout); extensions cannot be built without them")


def library_paths(device_type="cpu"):
    """The directory holding libstrata.so."""
    return [_PKG]


def _no_cuda(what):
    return OSError(f"strata.utils.cpp_extension.{what}: CUDA is not available (this build of Strata has no CUDA "
                   "backend and CUDA_HOME is not set)")


def CppExtension(name, sources, *args, **kwargs):  # noqa: N802 - torch's name
    """A setuptools.Extension for C++ sources built against Strata (headers, libstrata, C++20)."""
    import setuptools

    kwargs["include_dirs"] = list(kwargs.get("include_dirs", [])) + include_paths()
    kwargs["library_dirs"] = list(kwargs.get("library_dirs", [])) + library_paths()
    kwargs["libraries"] = list(kwargs.get("libraries", [])) + ["strata"]
    kwargs["runtime_library_dirs"] = list(kwargs.get("runtime_library_dirs", [])) + library_paths()
    kwargs["language"] = "c++"
    return setuptools.Extension(name, sources, *args, **kwargs)


def CUDAExtension(name, sources, *args, **kwargs):  # noqa: N802 - torch's name
    raise _no_cuda("CUDAExtension")


def _build_ext_base():
    from setuptools.command.build_ext import build_ext

    return build_ext


def _make_build_extension():
    base = _build_ext_base()

    class BuildExtension(base):
        """setuptools build_ext for CppExtension: adds C++20 and -fPIC; refuses .cu sources."""

        @classmethod
        def with_options(cls, **options):
            class cls_with_options(cls):  # noqa: N801
                def __init__(self, *args, **kwargs):
                    kwargs.update(options)
                    super().__init__(*args, **kwargs)

            return cls_with_options

        def __init__(self, *args, **kwargs):
            self.no_python_abi_suffix = kwargs.pop("no_python_abi_suffix", False)
            self.use_ninja = kwargs.pop("use_ninja", False)
            super().__init__(*args, **kwargs)

        def build_extensions(self):
            for ext in self.extensions:
                if any(s.endswith((".cu", ".cuh")) for s in ext.sources):
                    raise _no_cuda("BuildExtension")
                args = ext.extra_compile_args
                if isinstance(args, dict):
                    args = args.get("cxx", [])
                args = list(args)
                if not any(a.startswith("-std=") for a in args):
                    args.append(_CXX_STD)
                ext.extra_compile_args = args + ["-fPIC"]
            super().build_extensions()

    return BuildExtension


def __getattr__(name):
    if name == "BuildExtension":
        cls = _make_build_extension()
        globals()["BuildExtension"] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get_default_build_root():
    return os.path.realpath(os.environ.get("STRATA_EXTENSIONS_DIR",
                                           os.path.join(tempfile.gettempdir(), "strata_extensions")))


def is_ninja_available():
    return shutil.which("ninja") is not None


def verify_ninja_availability():
    if not is_ninja_available():
        raise RuntimeError("Ninja is required to load C++ extensions")


def _check_sources(sources):
    for s in sources:
        if s.endswith((".cu", ".cuh")):
            raise _no_cuda("load")
        with open(s, encoding="utf-8", errors="replace") as f:
            text = f.read()
        if "torch/extension.h" in text or "PYBIND11_MODULE" in text or "TORCH_LIBRARY" in text:
            raise RuntimeError(
                f"strata.utils.cpp_extension: {s} is written against torch's C++ API (torch/extension.h, pybind11 "
                "or TORCH_LIBRARY), which Strata does not provide. A Strata extension includes Strata's headers "
                "(\"dispatch/dispatcher.h\", \"ops/ops.h\"), defines its ops with "
                "Dispatcher::get().def(\"ns::op(Tensor a) -> Tensor\") and registers kernels with "
                "STRATA_LIBRARY_IMPL(\"ns::op\", CPU, fn) (see tests/cpp/out_of_tree/ext_example.cpp).")


def _module_of(name, new_ops):
    from .. import ops

    mod = types.ModuleType(name)
    mod.__file__ = None
    for full in new_ops:
        ns, _, op = full.partition("::")
        op = op.split(".", 1)[0]
        setattr(mod, op, getattr(getattr(ops, ns), op))
    mod.__all__ = sorted(k for k in vars(mod) if not k.startswith("_"))
    return mod


def load(name, sources, extra_cflags=None, extra_cuda_cflags=None, extra_ldflags=None, extra_include_paths=None,
         build_directory=None, verbose=False, with_cuda=None, is_python_module=True, is_standalone=False,
         keep_intermediates=True):
    """Compiles `sources` (C++ against Strata's API) into <build_directory>/<name>.so, loads it and returns a module
    of the ops it defined (None when is_python_module is False). An unchanged build is reused."""
    from .. import _C, ops

    if isinstance(sources, str):
        sources = [sources]
    sources = [os.path.abspath(s) for s in sources]
    if with_cuda or extra_cuda_cflags:
        raise _no_cuda("load")
    if is_standalone:
        raise NotImplementedError("strata.utils.cpp_extension.load(is_standalone=True): standalone executables are "
                                  "not supported; build a shared library (the default)")
    _check_sources(sources)
    build_directory = build_directory or os.path.join(get_default_build_root(), name)
    os.makedirs(build_directory, exist_ok=True)
    cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        raise RuntimeError("strata.utils.cpp_extension.load: no C++ compiler found (set CXX)")
    incs = include_paths() + list(extra_include_paths or [])
    cmd = [cxx, _CXX_STD, "-O2", "-fPIC", "-shared", *[f"-I{p}" for p in incs], *(extra_cflags or []), *sources,
           f"-L{_PKG}", "-lstrata", f"-Wl,-rpath,{_PKG}", *(extra_ldflags or [])]
    digest = hashlib.sha256()
    for s in sources:
        with open(s, "rb") as f:
            digest.update(f.read())
    digest.update("\0".join(cmd).encode())
    digest.update(os.path.getmtime(os.path.join(_PKG, "libstrata.so")).hex().encode()
                  if os.path.exists(os.path.join(_PKG, "libstrata.so")) else b"")
    tag = digest.hexdigest()[:16]
    out = os.path.join(build_directory, f"{name}_{tag}.so")
    if not os.path.exists(out):
        tmp = out + ".tmp"
        if verbose:
            print(" ".join(cmd + ["-o", tmp]), file=sys.stderr)
        r = subprocess.run(cmd + ["-o", tmp], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"Error building extension '{name}':\n{r.stderr[-8000:]}")
        os.replace(tmp, out)
    before = {s["name"] for s in _C._op_schemas()}
    ops.load_library(out)
    new = [s["name"] for s in _C._op_schemas() if s["name"] not in before]
    if not is_python_module:
        return None
    mod = _module_of(name, new)
    mod.__file__ = out
    return mod


def load_inline(name, cpp_sources, cuda_sources=None, functions=None, extra_cflags=None, extra_cuda_cflags=None,
                extra_ldflags=None, extra_include_paths=None, build_directory=None, verbose=False, with_cuda=None,
                is_python_module=True, with_pytorch_error_handling=True, keep_intermediates=True,
                use_pch=False, no_implicit_headers=False):
    """`load` of sources given as strings. `functions`, if given, names ops the sources must define (torch generates
    pybind bindings for them; Strata binds every op an extension defines, from its schema)."""
    if cuda_sources:
        raise _no_cuda("load_inline")
    if isinstance(cpp_sources, str):
        cpp_sources = [cpp_sources]
    build_directory = build_directory or os.path.join(get_default_build_root(), name)
    os.makedirs(build_directory, exist_ok=True)
    text = "\n".join(cpp_sources)
    if not no_implicit_headers and "dispatch/dispatcher.h" not in text:
        text = '#include "dispatch/dispatcher.h"\n#include "ops/ops.h"\n' + text
    path = os.path.join(build_directory, "main.cpp")
    if not os.path.exists(path) or open(path, encoding="utf-8").read() != text:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    mod = load(name, [path], extra_cflags=extra_cflags, extra_ldflags=extra_ldflags,
               extra_include_paths=extra_include_paths, build_directory=build_directory, verbose=verbose,
               is_python_module=True)
    if functions:
        names = [functions] if isinstance(functions, str) else list(functions)
        missing = [f for f in names if not hasattr(mod, f)]
        if missing:
            raise RuntimeError(f"load_inline: the sources define no op named {', '.join(missing)} (ops found: "
                               f"{', '.join(mod.__all__) or 'none'})")
    return mod if is_python_module else None

