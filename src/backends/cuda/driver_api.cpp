// Loading the driver's function table (Note [Driver selection] in driver_api.h).
#include "backends/cuda/driver_api.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "backends/cuda/fake_driver.h"
#include "core/error.h"

namespace strata::cuda {

namespace {

std::atomic<bool> g_want_fake{false};
std::atomic<const DriverApi*> g_table{nullptr};
std::atomic<const DriverApi*> g_loading{nullptr};  // the table being filled, for error_text while cuInit fails
std::mutex g_load_mu;

bool env_wants_fake() {
  const char* e = std::getenv("STRATA_CUDA_DRIVER");
  return e && std::strcmp(e, "fake") == 0;
}

void load_real(DriverApi& a) {
  a.source = "libcuda.so.1";
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* err = dlerror();
    a.reason = std::string("libcuda.so.1 could not be loaded (no NVIDIA driver is installed on this machine: ") +
               (err ? err : "dlopen failed") + ")";
    return;
  }
  std::string missing;
#define STRATA_CUDA_SYM(name, sym, ret, params)                              \
  a.name = reinterpret_cast<ret(*) params>(dlsym(h, sym));                   \
  if (!a.name && std::strcmp(sym, "cuEventElapsedTime_v2") == 0) {          \
    a.name = reinterpret_cast<ret(*) params>(dlsym(h, "cuEventElapsedTime")); \
  }                                                                          \
  if (!a.name) missing += std::string(missing.empty() ? "" : ", ") + sym;
  STRATA_CUDA_DRIVER_FNS(STRATA_CUDA_SYM)
#undef STRATA_CUDA_SYM
  if (!missing.empty()) {
    a.reason = "libcuda.so.1 lacks functions Strata needs (the driver is too old): " + missing;
    return;
  }
  CUresult r = a.cuInit(0);
  if (r != CUDA_SUCCESS) {
    a.reason = "cuInit failed: " + error_text(r) + (r == CUDA_ERROR_NO_DEVICE ? " (no GPU is visible)" : "");
    return;
  }
  a.ok = true;
}

}  // namespace

const DriverApi& driver() {
  if (const DriverApi* t = g_table.load(std::memory_order_acquire)) return *t;
  std::lock_guard g(g_load_mu);
  if (const DriverApi* t = g_table.load(std::memory_order_relaxed)) return *t;
  auto* a = new DriverApi();  // outlives static destructors
  g_loading.store(a);
  if (g_want_fake.load() || env_wants_fake()) {
    fake::fill_table(*a);
    a->ok = a->cuInit(0) == CUDA_SUCCESS;
  } else {
    load_real(*a);
  }
  g_table.store(a, std::memory_order_release);
  return *a;
}

bool available() { return driver().ok; }

std::string unavailable_reason() {
  const DriverApi& d = driver();
  return d.ok ? std::string() : d.reason;
}

bool use_fake_driver() {
  std::lock_guard g(g_load_mu);
  if (const DriverApi* t = g_table.load()) return t->is_fake;
  g_want_fake.store(true);
  return true;
}

std::string error_text(CUresult r) {
  const DriverApi* d = g_table.load();
  if (!d) d = g_loading.load();
  const char* name = nullptr;
  const char* text = nullptr;
  if (d && d->cuGetErrorName && d->cuGetErrorName(r, &name) != CUDA_SUCCESS) name = nullptr;
  if (d && d->cuGetErrorString && d->cuGetErrorString(r, &text) != CUDA_SUCCESS) text = nullptr;
  std::string s = name ? name : "CUresult " + std::to_string(r);
  if (text) s += std::string(": ") + text;
  return s;
}

void check(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) [[likely]]
    return;
  if (r == CUDA_ERROR_OUT_OF_MEMORY) throw OutOfMemoryError(str("CUDA error in ", what, ": ", error_text(r)));
  throw Error(str("CUDA error in ", what, ": ", error_text(r)));
}

}  // namespace strata::cuda
