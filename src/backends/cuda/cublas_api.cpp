// Loading cuBLAS's function table (Note [cuBLAS selection] in cublas_api.h).
#include "backends/cuda/cublas_api.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "core/error.h"

namespace strata::cuda {

namespace {

std::atomic<const CublasApi*> g_table{nullptr};
std::mutex g_mu;
std::vector<std::string> g_dirs;  // guarded by g_mu
std::atomic<bool> g_allow_tf32{false};

// STRATA_CUBLAS=real: load the libraries even over the fake driver (tests of the loader, with stub libraries).
bool env_wants_real() {
  const char* e = std::getenv("STRATA_CUBLAS");
  return e && std::strcmp(e, "real") == 0;
}

bool has_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

void load_real(CublasApi& a, const std::vector<std::string>& dirs) {
  // The first directory holding libcublas.so.13; none: the dynamic linker's search path.
  std::string dir;
  for (const std::string& d : dirs) {
    if (!d.empty() && has_file(d + "/libcublas.so.13")) {
      dir = d + "/";
      break;
    }
  }
  // libcublas.so.13 needs libcublasLt.so.13: load it first, from the same place, so that it is found even where
  // libcublas's own search path would not find it.
  std::string lt_path = dir + "libcublasLt.so.13";
  void* lt = (dir.empty() || has_file(lt_path)) ? dlopen(lt_path.c_str(), RTLD_NOW | RTLD_GLOBAL) : nullptr;
  a.source = dir + "libcublas.so.13";
  void* h = dlopen(a.source.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* err = dlerror();
    std::string tried;
    for (const std::string& d : dirs) tried += (tried.empty() ? "" : ", ") + d;
    a.reason = "libcublas.so.13 could not be loaded (" + std::string(err ? err : "dlopen failed") +
               "); searched STRATA_CUBLAS_DIR, the nvidia-cublas Python package (" +
               (tried.empty() ? std::string("none found") : tried) + ") and the default library path";
    return;
  }
  std::string missing;
#define STRATA_CUBLAS_SYM(name, sym, params)                                   \
  a.name = reinterpret_cast<cublasStatus_t(*) params>(dlsym(h, sym));          \
  if (!a.name) missing += std::string(missing.empty() ? "" : ", ") + sym;
  STRATA_CUBLAS_FNS(STRATA_CUBLAS_SYM)
#undef STRATA_CUBLAS_SYM
  a.cublasGetStatusString = reinterpret_cast<const char* (*)(cublasStatus_t)>(dlsym(h, "cublasGetStatusString"));
  if (!missing.empty()) {
    a.reason = a.source + " lacks functions Strata needs: " + missing;
    return;
  }
  a.ok = true;
  if (!lt) lt = dlopen("libcublasLt.so.13", RTLD_NOW | RTLD_GLOBAL);  // already loaded as libcublas's dependency
  if (!lt) {
    a.lt_reason = "libcublasLt.so.13 could not be loaded";
    return;
  }
  std::string lt_missing;
#define STRATA_CUBLASLT_SYM(name, sym, params)                                 \
  a.name = reinterpret_cast<cublasStatus_t(*) params>(dlsym(lt, sym));         \
  if (!a.name) lt_missing += std::string(lt_missing.empty() ? "" : ", ") + sym;
  STRATA_CUBLASLT_FNS(STRATA_CUBLASLT_SYM)
#undef STRATA_CUBLASLT_SYM
  if (!lt_missing.empty()) {
    a.lt_reason = "libcublasLt.so.13 lacks " + lt_missing;
    return;
  }
  a.lt_ok = true;
}

}  // namespace

void set_cublas_search_dirs(std::vector<std::string> dirs) {
  std::lock_guard g(g_mu);
  g_dirs = std::move(dirs);
}

std::vector<std::string> cublas_search_dirs() {
  std::lock_guard g(g_mu);
  std::vector<std::string> out;
  if (const char* e = std::getenv("STRATA_CUBLAS_DIR"); e && *e) out.emplace_back(e);
  out.insert(out.end(), g_dirs.begin(), g_dirs.end());
  return out;
}

const CublasApi& cublas() {
  if (const CublasApi* t = g_table.load(std::memory_order_acquire)) return *t;
  const DriverApi& d = driver();  // outside g_mu: choosing the driver takes its own lock
  std::vector<std::string> dirs = cublas_search_dirs();
  std::lock_guard g(g_mu);
  if (const CublasApi* t = g_table.load(std::memory_order_relaxed)) return *t;
  auto* a = new CublasApi();  // outlives static destructors
  if (!d.ok) {
    a->reason = "no usable CUDA driver: " + d.reason;
  } else if (d.is_fake && !env_wants_real()) {
    fake::fill_cublas_table(*a);
  } else {
    load_real(*a, dirs);
  }
  g_table.store(a, std::memory_order_release);
  return *a;
}

std::string cublas_status_name(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "cuBLAS status " + std::to_string(s);
  }
}

void cublas_check(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  const CublasApi& a = cublas();
  std::string text = cublas_status_name(s);
  if (a.cublasGetStatusString) {
    if (const char* t = a.cublasGetStatusString(s)) text += std::string(" (") + t + ")";
  }
  STRATA_CHECK(false, "CUDA error: ", text, " when calling `", what, "`");
}

void set_allow_tf32(bool allow) { g_allow_tf32.store(allow, std::memory_order_relaxed); }
bool allow_tf32() { return g_allow_tf32.load(std::memory_order_relaxed); }

}  // namespace strata::cuda
