// oneDNN's primitive API, loaded with dlopen at first use, shared by the files that build primitives
// (dnnl_conv.cpp, dnnl_matmul.cpp). Compiled once; the header is needed at build time for the types only, and a
// missing library (or one of another major version, whose C API differs) only means Strata's own paths.
#pragma once

#if __has_include(<oneapi/dnnl/dnnl.h>)
#include <oneapi/dnnl/dnnl.h>
#if DNNL_VERSION_MAJOR == 2
#define STRATA_HAVE_DNNL_PRIMITIVES 1
#endif
#endif

#ifdef STRATA_HAVE_DNNL_PRIMITIVES

#include <mutex>

namespace strata::cpu::dnnl_runtime {

#define STRATA_DNNL_FNS(X)                                                                                        \
  X(dnnl_version) X(dnnl_engine_create) X(dnnl_stream_create) X(dnnl_stream_wait) X(dnnl_memory_desc_init_by_tag) \
  X(dnnl_memory_desc_init_by_strides) X(dnnl_memory_desc_equal) X(dnnl_memory_desc_get_size) X(dnnl_memory_create) \
  X(dnnl_memory_set_data_handle) X(dnnl_memory_destroy) X(dnnl_dilated_convolution_forward_desc_init)             \
  X(dnnl_matmul_desc_init) X(dnnl_primitive_desc_create) X(dnnl_primitive_desc_destroy)                          \
  X(dnnl_primitive_desc_query) X(dnnl_primitive_desc_query_md) X(dnnl_reorder_primitive_desc_create)            \
  X(dnnl_primitive_create) X(dnnl_primitive_destroy) X(dnnl_primitive_execute) X(dnnl_primitive_attr_create)    \
  X(dnnl_primitive_attr_destroy) X(dnnl_primitive_attr_set_scratchpad_mode)

struct Api {
#define STRATA_DNNL_PTR(f) decltype(&::f) f = nullptr;
  STRATA_DNNL_FNS(STRATA_DNNL_PTR)
#undef STRATA_DNNL_PTR
  dnnl_engine_t engine = nullptr;  // one CPU engine
  dnnl_stream_t stream = nullptr;  // and one stream on it, for every primitive
  bool ok = false;                 // the library, every function above, the engine and the stream are there
};

// The library's functions, engine and stream, loaded once.
const Api& api();

// Held while a primitive is prepared and run: guards the shared stream, the primitive caches and the data handles
// of their cached memory objects.
std::mutex& mutex();

// Whether the environment variable `name` is set to "0" (a user's switch to turn one use of oneDNN off).
bool disabled_by(const char* name);

}  // namespace strata::cpu::dnnl_runtime

#endif
