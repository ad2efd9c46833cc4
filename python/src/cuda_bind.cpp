// strata._C._cuda: the CUDA runtime (src/backends/cuda/) for python/strata/cuda/: devices, streams, events, the
// caching allocator's controls and statistics, and the fake driver's test hooks.
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "backends/cuda/caching_allocator.h"
#include "backends/cuda/cublas_api.h"
#include "backends/cuda/cuda_runtime.h"
#include "backends/cuda/eager_kernels.h"
#include "backends/cuda/fake_driver.h"
#include "backends/cuda/pinned_memory.h"
#include "bind.h"

namespace strata::py {

namespace {

using cuda::Stream;

uintptr_t handle_int(const Stream& s) { return reinterpret_cast<uintptr_t>(s.handle); }
Stream stream_from(uintptr_t h, int device) { return Stream{reinterpret_cast<cuda::CUstream>(h), device}; }

void require_fake(const char* what) {
  STRATA_CHECK(cuda::available() && cuda::driver().is_fake, what, ": only with the fake CUDA driver ",
               "(STRATA_CUDA_DRIVER=fake)");
}

}  // namespace

void bind_cuda(nb::module_& parent) {
  nb::module_ m = parent.def_submodule("_cuda", "Strata's CUDA runtime");
  m.def("is_available", [] { return cuda::available() && cuda::device_count() > 0; });
  m.def("unavailable_reason", [] {
    if (!cuda::available()) return cuda::unavailable_reason();
    if (cuda::device_count() == 0) return std::string("the NVIDIA driver sees no CUDA device");
    return std::string();
  });
  m.def("driver_source", [] { return cuda::driver().source; });
  // Eager kernels are built by python/strata/cuda/_eager.py (NVRTC, or g++ host emulation on the fake driver).
  cuda::set_kernel_builder([](const std::string& source, const std::string& name, bool fake) -> std::string {
    nb::gil_scoped_acquire gil;
    try {
      nb::object r = nb::module_::import_("strata.cuda._eager").attr("build")(source, name, fake);
      if (nb::isinstance<nb::bytes>(r)) {
        nb::bytes b = nb::borrow<nb::bytes>(r);
        return std::string(b.c_str(), b.size());
      }
      return nb::cast<std::string>(r);
    } catch (nb::python_error& e) {
      throw Error(str("CUDA eager kernel ", name, ": building it failed: ", e.what()));
    }
  });
  m.def("eager_kernels_built", [] { return cuda::eager_kernels_built(); });
  m.def("eager_launches", [] { return cuda::eager_launches(); });
  m.def("is_fake", [] { return cuda::available() && cuda::driver().is_fake; });
  m.def("device_count", [] { return cuda::available() ? cuda::device_count() : 0; });
  m.def("lazy_init", [] { cuda::lazy_init(); });
  m.def("current_device", [] { return cuda::current_device(); });
  m.def("set_device", [](int d) { cuda::set_device(d); });
  m.def("synchronize", [](int d) { cuda::synchronize(d); });
  m.def("mem_get_info", [](int d) { return cuda::mem_get_info(d); });
  m.def("get_device_properties", [](int d) {
    const cuda::DeviceProperties& p = cuda::device_properties(d);
    nb::dict r;
    r["name"] = p.name;
    r["major"] = p.major;
    r["minor"] = p.minor;
    r["total_memory"] = p.total_memory;
    r["multi_processor_count"] = p.multi_processor_count;
    r["max_threads_per_block"] = p.max_threads_per_block;
    r["max_threads_per_multi_processor"] = p.max_threads_per_multi_processor;
    r["warp_size"] = p.warp_size;
    r["L2_cache_size"] = p.l2_cache_size;
    r["regs_per_block"] = p.regs_per_block;
    r["shared_memory_per_block"] = p.shared_memory_per_block;
    r["shared_memory_per_block_optin"] = p.shared_memory_per_block_optin;
    r["clock_rate"] = p.clock_rate_khz;
    return r;
  });

  // Streams travel as (handle, device) pairs; python/strata/cuda/streams.py wraps them.
  m.def("new_stream", [](int d) {
    Stream s = cuda::new_stream(d);
    return std::make_pair(handle_int(s), s.device);
  });
  m.def("default_stream", [](int d) {
    Stream s = cuda::default_stream(d);
    return std::make_pair(handle_int(s), s.device);
  });
  m.def("current_stream", [](int d) {
    Stream s = cuda::current_stream(d);
    return std::make_pair(handle_int(s), s.device);
  });
  m.def("set_current_stream", [](uintptr_t h, int d) { cuda::set_current_stream(stream_from(h, d)); });
  m.def("stream_id", [](uintptr_t h, int d) { return stream_from(h, d).id(); });
  m.def("stream_query", [](uintptr_t h, int d) { return stream_from(h, d).query(); });
  m.def("stream_synchronize", [](uintptr_t h, int d) { stream_from(h, d).synchronize(); });
  m.def("stream_wait_event", [](uintptr_t h, int d, const cuda::Event& e) {
    if (e.recorded()) stream_from(h, d).wait(e.handle());
  });
  m.def("stream_wait_stream", [](uintptr_t h, int d, uintptr_t h2, int d2) {
    cuda::stream_wait_stream(stream_from(h, d), stream_from(h2, d2));
  });

  nb::class_<cuda::Event>(m, "Event")
      .def(nb::init<bool>(), nb::arg("enable_timing") = false)
      .def("record", [](cuda::Event& e, uintptr_t h, int d) { e.record(stream_from(h, d)); })
      .def("query", &cuda::Event::query)
      .def("synchronize", &cuda::Event::synchronize)
      .def("elapsed_time", &cuda::Event::elapsed_time)
      .def_prop_ro("device", &cuda::Event::device)
      .def_prop_ro("handle", [](const cuda::Event& e) { return reinterpret_cast<uintptr_t>(e.handle()); })
      .def_prop_ro("recorded", &cuda::Event::recorded);

  // The caching allocator.
  m.def("memory_stats", [](int d) {
    cuda::check_device(d, "memory_stats");
    return cuda::caching_allocator().memory_stats(d);
  });
  m.def("memory_summary", [](int d) {
    cuda::check_device(d, "memory_summary");
    return cuda::caching_allocator().memory_summary(d);
  });
  m.def("empty_cache", [] { cuda::caching_allocator().empty_cache(); });
  m.def("reset_peak_memory_stats", [](int d) {
    cuda::check_device(d, "reset_peak_memory_stats");
    cuda::caching_allocator().reset_peak_stats(d);
  });
  m.def("reset_accumulated_memory_stats", [](int d) {
    cuda::check_device(d, "reset_accumulated_memory_stats");
    cuda::caching_allocator().reset_accumulated_stats(d);
  });
  m.def("record_stream", [](const Tensor& t, uintptr_t h, int d) {
    STRATA_CHECK(t.device().type == DeviceType::CUDA, "record_stream: expected a CUDA tensor, got a ",
                 t.describe());
    cuda::caching_allocator().record_stream(t.impl()->storage()->data(), stream_from(h, d));
  });
  m.def("snapshot", [](int d) {
    std::vector<std::tuple<uintptr_t, size_t, bool, bool, int64_t>> out;
    for (const cuda::BlockInfo& b : cuda::caching_allocator().snapshot(d)) {
      out.emplace_back(b.ptr, b.size, b.allocated, b.small, b.stream_id);
    }
    return out;
  });
  m.def("new_pool_id", [] { return cuda::caching_allocator().new_pool_id(); });
  m.def("begin_allocate_to_pool", [](int d, std::pair<uint64_t, uint64_t> id, std::optional<uintptr_t> h) {
    Stream s = stream_from(h.value_or(0), d);
    cuda::caching_allocator().begin_allocate_to_pool(d, id, h ? &s : nullptr);
  });
  m.def("end_allocate_to_pool",
        [](int d, std::pair<uint64_t, uint64_t> id) { cuda::caching_allocator().end_allocate_to_pool(d, id); });
  m.def("release_pool",
        [](int d, std::pair<uint64_t, uint64_t> id) { cuda::caching_allocator().release_pool(d, id); });
  m.def("pin_memory", [](const Tensor& t) { return cuda::pin_memory(t); });
  m.def("is_pinned", [](const Tensor& t) {
    if (!t.device().is_cpu() || !cuda::available()) return false;
    const size_t n = std::max<size_t>(1, static_cast<size_t>(t.numel()) * t.element_size());
    return cuda::is_pinned(t.data_ptr(), n);
  });
  m.def("empty_pinned_cache", [] { cuda::empty_pinned_cache(); });
  m.def("pinned_stats", [] {
    cuda::PinnedStats s = cuda::pinned_stats();
    return std::make_tuple(s.allocated_bytes, s.cached_bytes, s.host_alloc_calls);
  });
  m.def("set_sync_debug_mode", [](int mode) { cuda::set_sync_debug_mode(mode); });
  m.def("get_sync_debug_mode", [] { return cuda::sync_debug_mode(); });
  // "warn": a UserWarning attributed to the Python line running (the user's, or strata's own wrapper around it).
  cuda::set_sync_warn_handler([](const std::string& msg) {
    nb::gil_scoped_acquire gil;
    if (PyErr_WarnEx(PyExc_UserWarning, msg.c_str(), 1) < 0) throw nb::python_error();
  });
  m.def("data_address", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()); });

  // The fake driver's hooks (tests only).
  m.def("fake_run_pending", [](uintptr_t h, int d, size_t max_ops) {
    require_fake("fake_run_pending");
    cuda::DeviceGuard g(d);
    return cuda::fake::run_pending(reinterpret_cast<cuda::CUstream>(h), max_ops);
  });
  m.def("fake_pending", [](uintptr_t h, int d) {
    require_fake("fake_pending");
    cuda::DeviceGuard g(d);
    return cuda::fake::pending(reinterpret_cast<cuda::CUstream>(h));
  });
  m.def("fake_set_manual_progress", [](bool on) {
    require_fake("fake_set_manual_progress");
    cuda::fake::set_manual_progress(on);
  });
  m.def("fake_set_total_memory", [](int d, size_t bytes) {
    require_fake("fake_set_total_memory");
    cuda::fake::set_total_memory(d, bytes);
  });
  m.def("fake_used_memory", [](int d) {
    require_fake("fake_used_memory");
    return cuda::fake::used_memory(d);
  });

  // cuBLAS (cublas_api.h): where it came from, TF32, and the fake cuBLAS's record of its last GEMM (tests only).
  m.def("cublas_info", [] {
    const cuda::CublasApi& a = cuda::cublas();
    return std::make_tuple(a.ok, a.source, a.reason);
  });
  m.def("cublaslt_info", [] {
    const cuda::CublasApi& a = cuda::cublas();
    return std::make_pair(a.lt_ok, a.lt_reason);
  });
  m.def("set_cublas_search_dirs", [](std::vector<std::string> dirs) { cuda::set_cublas_search_dirs(std::move(dirs)); });
  m.def("cublas_search_dirs", [] { return cuda::cublas_search_dirs(); });
  m.def("set_allow_tf32", [](bool on) { cuda::set_allow_tf32(on); });
  m.def("allow_tf32", [] { return cuda::allow_tf32(); });
  m.def("fake_cublas_calls", [] {
    require_fake("fake_cublas_calls");
    return cuda::fake::gemm_calls();
  });
  m.def("fake_cublaslt_calls", [] {
    require_fake("fake_cublaslt_calls");
    return std::make_pair(cuda::fake::lt_matmul_calls(), cuda::fake::lt_bias_calls());
  });
  m.def("fake_cublas_last_gemm", [] {
    require_fake("fake_cublas_last_gemm");
    cuda::fake::GemmCall c = cuda::fake::last_gemm_call();
    std::map<std::string, double> d{{"transa", c.transa}, {"transb", c.transb}, {"m", c.m}, {"n", c.n}, {"k", c.k},
                                    {"lda", c.lda}, {"ldb", c.ldb}, {"ldc", c.ldc},
                                    {"stride_a", static_cast<double>(c.stride_a)},
                                    {"stride_b", static_cast<double>(c.stride_b)},
                                    {"stride_c", static_cast<double>(c.stride_c)}, {"batch", c.batch},
                                    {"a_type", c.a_type}, {"c_type", c.c_type}, {"compute_type", c.compute_type},
                                    {"alpha", c.alpha}, {"beta", c.beta},
                                    {"stream", static_cast<double>(reinterpret_cast<uintptr_t>(c.stream))}};
    return d;
  });
}

}  // namespace strata::py
