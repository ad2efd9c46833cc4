// strata._C entry points behind strata.profiler (python/strata/profiler):
// sessions, record_function ranges, explain() facts, and the Python side of
// the silent-cost warnings (turning a C++ report into a warning at the user's
// line).
#include <Python.h>
#include <frameobject.h>

#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>

#include "backends/cpu/parallel.h"
#include "bind.h"
#include "profiler/hidden_copy.h"
#include "profiler/profiler.h"

namespace strata::py {

namespace {

using profiler::Session;

// Files under this directory are the framework's own Python code: warnings
// and stacks point at the first frame outside it.
std::string& package_dir() {
  static std::string d;
  return d;
}
PyObject* g_hidden_copy_category = nullptr;

bool is_internal(const std::string& file) {
  const std::string& d = package_dir();
  return !d.empty() && file.compare(0, d.size(), d) == 0;
}

std::string code_filename(PyFrameObject* f) {
  PyCodeObject* code = PyFrame_GetCode(f);
  std::string out;
  if (PyObject* fn = PyObject_GetAttrString(reinterpret_cast<PyObject*>(code), "co_filename")) {
    if (const char* s = PyUnicode_AsUTF8(fn)) out = s;
    Py_DECREF(fn);
  }
  PyErr_Clear();
  Py_DECREF(code);
  return out;
}

std::string code_name(PyFrameObject* f) {
  PyCodeObject* code = PyFrame_GetCode(f);
  std::string out;
  if (PyObject* fn = PyObject_GetAttrString(reinterpret_cast<PyObject*>(code), "co_name")) {
    if (const char* s = PyUnicode_AsUTF8(fn)) out = s;
    Py_DECREF(fn);
  }
  PyErr_Clear();
  Py_DECREF(code);
  return out;
}

// Walks the current Python stack, innermost first; f returns false to stop.
template <typename F>
void walk_frames(F&& f) {
  PyFrameObject* frame = PyEval_GetFrame();  // borrowed
  Py_XINCREF(frame);
  while (frame) {
    bool go_on = f(frame);
    PyFrameObject* back = go_on ? PyFrame_GetBack(frame) : nullptr;
    Py_DECREF(frame);
    frame = back;
  }
}

void warn_hidden_copy(const std::string& message) {
  if (!Py_IsInitialized()) return;
  PyGILState_STATE g = PyGILState_Ensure();
  std::string file;
  int line = 0;
  walk_frames([&](PyFrameObject* fr) {
    std::string fn = code_filename(fr);
    if (is_internal(fn)) return true;
    file = fn;
    line = PyFrame_GetLineNumber(fr);
    return false;
  });
  std::string msg = message;
  if (!file.empty()) msg += " (at " + file + ":" + std::to_string(line) + ")";
  PyObject* cat = g_hidden_copy_category ? g_hidden_copy_category : PyExc_UserWarning;
  int rc = file.empty() ? PyErr_WarnEx(cat, msg.c_str(), 1)
                        : PyErr_WarnExplicit(cat, msg.c_str(), file.c_str(), line, nullptr, nullptr);
  if (rc < 0) {
    // Warnings are errors here: raise it out of the op.
    nb::python_error err;
    PyGILState_Release(g);
    throw err;
  }
  PyGILState_Release(g);
}

std::string python_stack() {
  // Ops run without the GIL (Note [Releasing the GIL] in op_bind.cpp): take
  // it; the thread's Python frames are still those of the call.
  if (!Py_IsInitialized()) return "";
  PyGILState_STATE g = PyGILState_Ensure();
  std::string out;
  std::vector<std::string> frames;
  walk_frames([&](PyFrameObject* fr) {
    std::string fn = code_filename(fr);
    if (!is_internal(fn))
      frames.push_back(fn + "(" + std::to_string(PyFrame_GetLineNumber(fr)) + "): " + code_name(fr));
    return frames.size() < 32;
  });
  // Innermost first, as torch's FunctionEvent.stack; one frame per line.
  for (size_t i = 0; i < frames.size(); ++i) out += (i ? "\n" : "") + frames[i];
  PyGILState_Release(g);
  return out;
}

nb::list key_names(uint64_t raw) {
  nb::list l;
  DispatchKeySet ks(raw, 0);
  while (!ks.empty()) {
    DispatchKey k = ks.highest();
    std::string_view n = dispatch_key_name(k);
    if (n != "Undefined") l.append(nb::str(std::string(n).c_str()));  // unnamed (unused) bits
    ks = ks.remove(k);
  }
  return l;
}

nb::str key_name(DispatchKey k) {
  return nb::str(k == DispatchKey::NumKeys ? "" : std::string(dispatch_key_name(k)).c_str());
}

nb::object explain_dict(const profiler::ExplainInfo& x) {
  nb::dict d;
  d["tensor_keys"] = key_names(x.tensor_keys);
  d["tls_included"] = key_names(x.tls_included);
  d["tls_excluded"] = key_names(x.tls_excluded);
  d["fallthrough"] = key_names(x.fallthrough);
  d["dispatch_keys"] = key_names(x.dispatch_keys);
  nb::list layers;
  for (auto& [k, n] : x.layers) layers.append(nb::make_tuple(key_name(k), n));
  d["layers"] = layers;
  d["backend_key"] = key_name(x.backend_key);
  d["kernel_source"] = key_name(x.kernel_source);
  d["kernel_name"] = x.kernel_name;
  d["kernel_start_ns"] = x.kernel_start_ns;
  d["kernel_end_ns"] = x.kernel_end_ns;
  d["allocs"] = x.allocs;
  d["alloc_bytes"] = x.alloc_bytes;
  d["peak_increase"] = x.peak_increase;
  return d;
}

nb::list events_to_python(Session& s) {
  nb::list out;
  for (auto& [tid, events] : s.take_events()) {
    for (size_t i = 0; i < events.size(); ++i) {
      profiler::Event& e = events[i];
      nb::list shapes;
      for (auto& sh : e.input_shapes) {
        nb::list l;
        for (int64_t v : sh) l.append(v);
        shapes.append(l);
      }
      nb::list dtypes;
      for (auto& dt : e.input_dtypes) dtypes.append(nb::str(dt.c_str()));
      nb::dict d;
      d["name"] = e.name;
      d["category"] = e.category;
      d["start_ns"] = e.start_ns;
      d["end_ns"] = e.end_ns;
      d["thread"] = tid;
      d["index"] = static_cast<int64_t>(i);
      d["depth"] = e.depth;
      d["parent"] = e.parent;
      d["input_shapes"] = shapes;
      d["input_dtypes"] = dtypes;
      if (!e.input_values.empty() || !e.output_shapes.empty()) {
        auto to_lists = [](const std::vector<std::vector<int64_t>>& v) {
          nb::list l;
          for (auto& x : v) {
            nb::list inner;
            for (int64_t y : x) inner.append(y);
            l.append(inner);
          }
          return l;
        };
        d["input_values"] = to_lists(e.input_values);
        d["output_shapes"] = to_lists(e.output_shapes);
      }
      d["alloc_bytes"] = e.alloc_bytes;
      d["num_allocs"] = e.num_allocs;
      d["stack"] = e.stack;
      d["explain"] = e.explain ? explain_dict(*e.explain) : nb::none();
      out.append(d);
    }
  }
  return out;
}

}  // namespace

void bind_profiler(nb::module_& m) {
  nb::class_<Session>(m, "_ProfilerSession")
      .def_prop_ro("start_ns", &Session::start_ns)
      .def_prop_ro("id", &Session::id);
  m.def(
      "_profiler_start",
      [](bool record_shapes, bool profile_memory, bool with_stack, bool explain, bool all_threads, bool record_args) {
        profiler::ProfilerConfig c;
        c.record_args = record_args;
        c.all_threads = all_threads;
        c.record_shapes = record_shapes;
        c.profile_memory = profile_memory;
        c.with_stack = with_stack;
        c.explain = explain;
        return profiler::start(c);
      },
      nb::arg("record_shapes") = false, nb::arg("profile_memory") = false, nb::arg("with_stack") = false,
      nb::arg("explain") = false, nb::arg("all_threads") = false, nb::arg("record_args") = false);
  m.def("_profiler_stop", [](const std::shared_ptr<Session>& s) { profiler::stop(s); });
  // Moves the recorded events out of the session (call after _profiler_stop).
  m.def("_profiler_events", [](const std::shared_ptr<Session>& s) { return events_to_python(*s); });
  m.def("_profiler_is_recording", [] { return profiler::is_recording(); });
  m.def("_profiler_now_ns", [] { return profiler::now_ns(); });
  m.def("_profiler_thread_id", [] { return profiler::current_thread_id(); });
  m.def("_record_function_enter", [](const std::string& name, const std::string& category) {
    return profiler::begin_range(name, category);
  }, nb::arg("name"), nb::arg("category") = "user_annotation");
  m.def("_record_function_exit", [](int64_t token) { profiler::end_range(token); });
  m.def("_set_warn_hidden_copy", [](bool on) { profiler::set_warn_hidden_copy(on); });
  m.def("_warn_hidden_copy_enabled", [] { return profiler::warn_hidden_copy_enabled(); });
  m.def("_profiler_set_package_dir", [](const std::string& d) { package_dir() = d; });
  m.def("_dispatch_key_names", [](uint64_t raw) { return key_names(raw); });
  m.def("_tls_dispatch_keys", [] {
    const auto& tls = tls_local_dispatch_key_set();
    return nb::make_tuple(key_names(tls.included.raw()), key_names(tls.excluded.raw()));
  });
  // Facts explain() reports for matmul-family ops.
  m.def("_profiler_facts", [](const DType& dt) {
    nb::dict d;
    d["isa"] = profiler::isa_level();
    d["num_threads"] = get_num_threads();
    d["blas_library"] = profiler::blas_library_for(dt.type);
    d["blas_backend"] = profiler::blas_backend_description();
    return d;
  });
  m.def("_is_matmul_family", [](const std::string& n) { return profiler::is_matmul_family(n); });

  g_hidden_copy_category = PyErr_NewExceptionWithDoc(
      "strata.HiddenCopyWarning",
      "An op silently made a contiguous copy of an input (strata.set_warn_on('hidden_copy', True)).",
      PyExc_UserWarning, nullptr);
  if (!g_hidden_copy_category) throw nb::python_error();
  m.attr("HiddenCopyWarning") = nb::borrow(g_hidden_copy_category);
  profiler::set_hidden_copy_handler(&warn_hidden_copy);
  profiler::set_stack_hook(&python_stack);
}

}  // namespace strata::py
