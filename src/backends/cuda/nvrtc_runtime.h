// NVRTC (CUDA C -> PTX -> cubin), loaded with dlopen at first use through a function table, so that Strata builds
// and imports with no CUDA toolkit and compiles its generated kernels wherever the nvidia-cuda-nvrtc wheel is
// installed, GPU or not.
//
// Note [Loading NVRTC]
// The PyPI wheel ships only versioned files (nvidia/cu13/lib/libnvrtc.so.13 and libnvrtc-builtins.so.13.0),
// and libnvrtc dlopens its builtins library by soname at the first compile, which fails when that directory is
// not on the loader's path. load() therefore opens the builtins by full path first (RTLD_GLOBAL: the later
// by-name dlopen finds the loaded object), then libnvrtc by full path. The directory comes from the caller
// (python/strata/_inductor/cuda_compile.py finds it from the installed package or $STRATA_NVRTC_DIR). The
// function types are declared here from NVRTC's documented C API, so no CUDA header is needed to build.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace strata::cuda::nvrtc {

struct Compiled {
  std::string ptx;    // PTX text
  std::string cubin;  // the ELF image for the requested sm_XX target
  std::string log;    // NVRTC's log (ptxas -v lines when asked for with --ptxas-options=-v)
};

// Loads libnvrtc from `dir` (once per process; a later call with another directory raises, naming both).
// Raises strata::Error naming the files and dlerror() when the library or one of its functions is missing.
void load(const std::string& dir);

// Whether load() succeeded, and the directory it used.
bool loaded();
std::string loaded_dir();

// NVRTC's (major, minor) version; raises if not loaded.
std::pair<int, int> version();

// Compiles `source` (program name `name`, which names the kernel in errors) for `arch` ("sm_90a": PTX for
// compute_90a and a cubin for sm_90a), with extra NVRTC options. Raises strata::Error with the kernel name,
// the options and NVRTC's log on a compile error.
Compiled compile(const std::string& source, const std::string& name, const std::string& arch,
                 const std::vector<std::string>& options);

}  // namespace strata::cuda::nvrtc
