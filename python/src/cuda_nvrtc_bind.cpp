// strata._C._cuda_nvrtc: NVRTC behind python/strata/_inductor/cuda_compile.py (src/backends/cuda/nvrtc_runtime.h).
// Compiling releases the GIL: NVRTC programs are independent, and a kernel can take a second to compile.
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "backends/cuda/nvrtc_runtime.h"
#include "bind.h"

namespace strata::py {

void bind_cuda_nvrtc(nb::module_& parent) {
  nb::module_ m = parent.def_submodule("_cuda_nvrtc", "NVRTC (CUDA C -> PTX and cubin), loaded at run time");
  namespace nv = strata::cuda::nvrtc;
  m.def("load", &nv::load, nb::arg("dir"),
        "Loads libnvrtc.so.13 (and its builtins) from dir; once per process.");
  m.def("loaded", &nv::loaded);
  m.def("loaded_dir", &nv::loaded_dir);
  m.def("version", &nv::version);
  m.def(
      "compile",
      [](const std::string& source, const std::string& name, const std::string& arch,
         const std::vector<std::string>& options) {
        nv::Compiled c;
        {
          nb::gil_scoped_release release;
          c = nv::compile(source, name, arch, options);
        }
        return nb::make_tuple(c.ptx, nb::bytes(c.cubin.data(), c.cubin.size()), c.log);
      },
      nb::arg("source"), nb::arg("name"), nb::arg("arch") = "sm_90a", nb::arg("options") = std::vector<std::string>{},
      "(ptx: str, cubin: bytes, log: str) for the CUDA C source; raises RuntimeError with NVRTC's log.");
}

}  // namespace strata::py
