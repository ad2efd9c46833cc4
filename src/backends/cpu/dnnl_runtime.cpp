#include "backends/cpu/dnnl_runtime.h"

#ifdef STRATA_HAVE_DNNL_PRIMITIVES

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>

namespace strata::cpu::dnnl_runtime {

const Api& api() {
  static const Api* the = [] {
    auto* a = new Api();  // outlives static destructors
    void* h = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!h) return a;
    bool all = true;
#define STRATA_DNNL_SYM(f)                                 \
  a->f = reinterpret_cast<decltype(&::f)>(dlsym(h, #f)); \
  all = all && a->f;
    STRATA_DNNL_FNS(STRATA_DNNL_SYM)
#undef STRATA_DNNL_SYM
    if (!all || a->dnnl_version()->major != 2) return a;
    if (a->dnnl_engine_create(&a->engine, dnnl_cpu, 0) != dnnl_success) return a;
    if (a->dnnl_stream_create(&a->stream, a->engine, dnnl_stream_default_flags) != dnnl_success) return a;
    a->ok = true;
    return a;
  }();
  return *the;
}

std::mutex& mutex() {
  static auto* m = new std::mutex();
  return *m;
}

bool disabled_by(const char* name) {
  const char* v = std::getenv(name);
  return v && std::strcmp(v, "0") == 0;
}

}  // namespace strata::cpu::dnnl_runtime

#endif
