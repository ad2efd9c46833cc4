#include "backends/cuda/nvrtc_runtime.h"

#include <dlfcn.h>

#include <mutex>
#include <type_traits>

#include "core/error.h"

namespace strata::cuda::nvrtc {
namespace {

// NVRTC's C API (nvrtc.h): results are an int enum (0 = NVRTC_SUCCESS), a program is an opaque pointer.
using Program = struct ProgramImpl*;
using Result = int;

#define STRATA_NVRTC_FNS(X)                                                                                       \
  X(nvrtcVersion, Result (*)(int*, int*))                                                                         \
  X(nvrtcGetErrorString, const char* (*)(Result))                                                                 \
  X(nvrtcCreateProgram, Result (*)(Program*, const char*, const char*, int, const char* const*, const char* const*)) \
  X(nvrtcDestroyProgram, Result (*)(Program*))                                                                    \
  X(nvrtcCompileProgram, Result (*)(Program, int, const char* const*))                                            \
  X(nvrtcGetProgramLogSize, Result (*)(Program, size_t*))                                                         \
  X(nvrtcGetProgramLog, Result (*)(Program, char*))                                                               \
  X(nvrtcGetPTXSize, Result (*)(Program, size_t*))                                                                \
  X(nvrtcGetPTX, Result (*)(Program, char*))                                                                      \
  X(nvrtcGetCUBINSize, Result (*)(Program, size_t*))                                                              \
  X(nvrtcGetCUBIN, Result (*)(Program, char*))

struct Api {
#define STRATA_NVRTC_PTR(f, type) std::type_identity_t<type> f = nullptr;
  STRATA_NVRTC_FNS(STRATA_NVRTC_PTR)
#undef STRATA_NVRTC_PTR
  std::string dir;
  bool ok = false;
};

std::mutex& load_mutex() {
  static auto* m = new std::mutex();
  return *m;
}
Api& api() {
  static auto* a = new Api();  // outlives static destructors (kernels may compile during shutdown)
  return *a;
}

const Api& checked() {
  const Api& a = api();
  STRATA_CHECK(a.ok, "NVRTC is not loaded: call strata._C._cuda_nvrtc.load(dir) with the directory holding "
               "libnvrtc.so.13 (python/strata/_inductor/cuda_compile.py finds it from the nvidia-cuda-nvrtc wheel)");
  return a;
}

std::string err(const Api& a, Result r) {
  const char* s = a.nvrtcGetErrorString ? a.nvrtcGetErrorString(r) : nullptr;
  return str(s ? s : "unknown NVRTC error", " (", r, ")");
}

// Destroys the program on every path out of compile().
struct ProgramGuard {
  const Api& a;
  Program p = nullptr;
  ~ProgramGuard() {
    if (p) a.nvrtcDestroyProgram(&p);
  }
};

}  // namespace

void load(const std::string& dir) {
  std::lock_guard<std::mutex> lock(load_mutex());
  Api& a = api();
  if (a.ok) {
    STRATA_CHECK(a.dir == dir, "NVRTC is already loaded from ", a.dir, "; cannot load it again from ", dir);
    return;
  }
  // Note [Loading NVRTC]: the builtins by full path first, global, so libnvrtc's own dlopen by name finds them.
  const std::string builtins = dir + "/libnvrtc-builtins.so.13.0", lib = dir + "/libnvrtc.so.13";
  if (!dlopen(builtins.c_str(), RTLD_NOW | RTLD_GLOBAL)) {
    const char* e = dlerror();
    throw Error(str("NVRTC: cannot load ", builtins, ": ", e ? e : "unknown error",
                    " (install nvidia-cuda-nvrtc==13.0.88 or set STRATA_NVRTC_DIR)"));
  }
  void* h = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    throw Error(str("NVRTC: cannot load ", lib, ": ", e ? e : "unknown error"));
  }
  Api fresh;
#define STRATA_NVRTC_SYM(f, type)                                                   \
  fresh.f = reinterpret_cast<type>(dlsym(h, #f));                                   \
  STRATA_CHECK(fresh.f != nullptr, "NVRTC: ", lib, " has no function " #f " (is it NVRTC 12 or newer?)");
  STRATA_NVRTC_FNS(STRATA_NVRTC_SYM)
#undef STRATA_NVRTC_SYM
  fresh.dir = dir;
  fresh.ok = true;
  a = fresh;
}

bool loaded() {
  std::lock_guard<std::mutex> lock(load_mutex());
  return api().ok;
}

std::string loaded_dir() {
  std::lock_guard<std::mutex> lock(load_mutex());
  return api().dir;
}

std::pair<int, int> version() {
  const Api& a = checked();
  int major = 0, minor = 0;
  Result r = a.nvrtcVersion(&major, &minor);
  STRATA_CHECK(r == 0, "NVRTC: nvrtcVersion failed: ", err(a, r));
  return {major, minor};
}

Compiled compile(const std::string& source, const std::string& name, const std::string& arch,
                 const std::vector<std::string>& options) {
  const Api& a = checked();
  STRATA_CHECK_VALUE(arch.rfind("sm_", 0) == 0 && arch.size() > 3,
                     "NVRTC: kernel ", name, ": arch must name a real target such as \"sm_90a\", got \"", arch, "\"");
  ProgramGuard g{a};
  Result r = a.nvrtcCreateProgram(&g.p, source.c_str(), (name + ".cu").c_str(), 0, nullptr, nullptr);
  STRATA_CHECK(r == 0, "NVRTC: kernel ", name, ": nvrtcCreateProgram failed: ", err(a, r));
  std::vector<std::string> opts{"--gpu-architecture=" + arch};
  opts.insert(opts.end(), options.begin(), options.end());
  std::vector<const char*> argv;
  for (const auto& o : opts) argv.push_back(o.c_str());
  const Result cr = a.nvrtcCompileProgram(g.p, static_cast<int>(argv.size()), argv.data());
  Compiled out;
  size_t n = 0;
  if (a.nvrtcGetProgramLogSize(g.p, &n) == 0 && n > 1) {
    out.log.resize(n);
    a.nvrtcGetProgramLog(g.p, out.log.data());
    out.log.resize(n - 1);  // the size counts the terminating NUL
  }
  if (cr != 0) {
    std::string joined;
    for (const auto& o : opts) joined += (joined.empty() ? "" : " ") + o;
    throw Error(str("NVRTC: kernel ", name, " failed to compile for ", arch, ": ", err(a, cr), "\noptions: ", joined,
                    "\n", out.log));
  }
  r = a.nvrtcGetPTXSize(g.p, &n);
  STRATA_CHECK(r == 0, "NVRTC: kernel ", name, ": nvrtcGetPTXSize failed: ", err(a, r));
  out.ptx.resize(n);
  r = a.nvrtcGetPTX(g.p, out.ptx.data());
  STRATA_CHECK(r == 0, "NVRTC: kernel ", name, ": nvrtcGetPTX failed: ", err(a, r));
  if (!out.ptx.empty() && out.ptx.back() == '\0') out.ptx.pop_back();
  r = a.nvrtcGetCUBINSize(g.p, &n);
  STRATA_CHECK(r == 0, "NVRTC: kernel ", name, ": nvrtcGetCUBINSize failed: ", err(a, r));
  out.cubin.resize(n);
  if (n) {
    r = a.nvrtcGetCUBIN(g.p, out.cubin.data());
    STRATA_CHECK(r == 0, "NVRTC: kernel ", name, ": nvrtcGetCUBIN failed: ", err(a, r));
  }
  return out;
}

}  // namespace strata::cuda::nvrtc
