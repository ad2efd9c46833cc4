// strata._C: the extension module.
#include <dlfcn.h>

#include "backends/cpu/parallel.h"
#include "bind.h"
#include "core/linalg_error.h"
#include "core/sanitizer_canary.h"
#include "ops/stub.h"
#include "ops/tensor_iterator.h"

namespace strata::py {

void bind_profiler(nb::module_& m);  // profiler_bind.cpp
void bind_surface(nb::module_& m);   // surface_bind.cpp
void bind_guards(nb::module_& m);    // guards_bind.cpp: strata._C._guards
void bind_compile(nb::module_& m);   // compile_bind.cpp
void bind_eval_frame(nb::module_& m);  // eval_frame.cpp: strata._C._eval_frame
void bind_distributed(nb::module_& m);  // distributed_bind.cpp: strata._C._distributed
void bind_vmap(nb::module_& m);  // vmap_bind.cpp
void bind_sparse(nb::module_& m);  // sparse_bind.cpp
void bind_nested(nb::module_& m);  // nested_bind.cpp
void bind_cuda(nb::module_& m);    // cuda_bind.cpp: strata._C._cuda
void bind_cuda_nvrtc(nb::module_& m);  // cuda_nvrtc_bind.cpp: strata._C._cuda_nvrtc

void bind_extras(nb::module_& m) {
  m.def("set_num_threads", [](int n) { set_num_threads(n); });
  m.def("get_num_threads", [] { return get_num_threads(); });
  m.def("_cpu_capability", [] { return std::string(cpu_capability_name(cpu_capability())); });
  m.def("get_default_dtype", [] { return dtype_object(default_dtype()); });
  m.def("set_default_dtype", [](const DType& d) { set_default_dtype(d.type); });
  // PyTorch's result_type: tensors and Python numbers (weakly typed).
  m.def("result_type", [](nb::handle a, nb::handle b) {
    auto as_tensor = [](nb::handle h) {
      if (nb::isinstance<Tensor>(h)) return nb::cast<Tensor>(h);
      STRATA_CHECK_TYPE(is_number(h), "result_type: expected a Tensor or a number");
      return wrap_number(h);
    };
    return dtype_object(result_type({as_tensor(a), as_tensor(b)}));
  });
  m.def("promote_types", [](const DType& a, const DType& b) { return dtype_object(promote_types(a.type, b.type)); });
  // Grad mode is the thread-local exclusion of the Autograd key: no_grad,
  // inference_mode and set_grad_enabled in Python flip it.
  m.def("_set_grad_enabled", [](bool on) {
    auto& tls = tls_local_dispatch_key_set();
    tls.excluded = on ? tls.excluded.remove(DispatchKey::Autograd) : tls.excluded.add(DispatchKey::Autograd);
  });
  m.def("_is_grad_enabled", [] { return !tls_local_dispatch_key_set().excluded.has(DispatchKey::Autograd); });
  // strata.inference_mode's thread-local flag: tensors made while it is on are inference tensors.
  m.def("_set_inference_mode_enabled", [](bool on) { set_inference_mode_enabled(on); });
  m.def("_is_inference_mode_enabled", [] { return inference_mode_enabled(); });
  m.def("_rename_privateuse1_backend", [](const std::string& n) { rename_privateuse1_backend(n); });
  // Loads a shared library whose static initialisers register ops, kernels or
  // backends with the dispatcher (strata.ops.load_library).
  m.def("_load_library", [](const std::string& path) {
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    STRATA_CHECK(h, "load_library: could not load ", path, ": ", dlerror());
  });
  m.def("_cpu_allocator_stats", [] {
    auto s = cpu_allocator_stats();
    nb::dict d;
    d["allocated_bytes"] = s.allocated_bytes;
    d["peak_bytes"] = s.peak_bytes;
    d["num_allocs"] = s.num_allocs;
    return d;
  });
  m.def("_reset_peak_memory_stats", [] { reset_cpu_peak_stats(); });
}

}  // namespace strata::py

// strata.linalg.LinAlgError (torch.linalg.LinAlgError is torch._C._LinAlgError too).
static PyObject* g_linalg_error = nullptr;
// strata.OutOfMemoryError (torch.OutOfMemoryError, also strata.cuda.OutOfMemoryError): a RuntimeError as torch's,
// and a MemoryError as Python's own out-of-memory error.
static PyObject* g_oom_error = nullptr;

namespace strata::py {
void bind_shared_memory(nb::module_& m);  // shared_memory_bind.cpp: share_memory_, multiprocessing reductions
}  // namespace strata::py

NB_MODULE(_C, m) {
  using namespace strata;
  g_linalg_error = PyErr_NewException("strata._C._LinAlgError", PyExc_RuntimeError, nullptr);
  m.attr("_LinAlgError") = nb::handle(g_linalg_error);
  {
    PyObject* bases = PyTuple_Pack(2, PyExc_RuntimeError, PyExc_MemoryError);
    g_oom_error = PyErr_NewException("strata.OutOfMemoryError", bases, nullptr);
    Py_DECREF(bases);
    m.attr("_OutOfMemoryError") = nb::handle(g_oom_error);
  }
  // dtype singletons live until exit by design.
  nb::set_leak_warnings(false);
#ifdef STRATA_SANITIZER_BUILD
  // Sanitizer builds only: the planted bugs the sanitizer job checks are reported through Python too.
  m.def("_sanitizer_canary", [](int kind, int64_t n) { return debug::sanitizer_canary(kind, n); });
#endif
  // Most specific first: each maps to the Python exception torch raises.
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const TypeError& e) {
      PyErr_SetString(PyExc_TypeError, e.what());
    } catch (const ValueError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const IndexError& e) {
      PyErr_SetString(PyExc_IndexError, e.what());
    } catch (const NotImplementedError& e) {
      PyErr_SetString(PyExc_NotImplementedError, e.what());
    } catch (const OutOfMemoryError& e) {
      PyErr_SetString(g_oom_error, e.what());
    } catch (const LinAlgError& e) {
      PyErr_SetString(g_linalg_error, e.what());
    } catch (const Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    } catch (const std::bad_alloc& e) {
      PyErr_SetString(PyExc_MemoryError, "out of memory (std::bad_alloc)");
    }
  });
  py::bind_tensor(m);
  py::bind_ops(m);
  py::bind_indexing(m);
  py::bind_extras(m);
  py::bind_autograd(m);
  py::bind_experimental(m);
  py::bind_profiler(m);
  py::bind_surface(m);
  py::bind_guards(m);
  py::bind_compile(m);
  py::bind_eval_frame(m);
  py::bind_distributed(m);
  py::bind_vmap(m);
  py::bind_shared_memory(m);
  py::bind_sparse(m);
  py::bind_nested(m);
  py::bind_cuda(m);
  py::bind_cuda_nvrtc(m);
}
