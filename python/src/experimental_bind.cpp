// Introspection of the dispatcher for tests (_has_kernel, _kernel_keys), and
// experimental entry points that measure where the generic binding's time
// goes (bench/binding_overhead.py, docs/BINDING.md). The _raw_* functions are
// plain CPython METH_FASTCALL functions: no nanobind argument machinery, no
// schema parsing; they are not part of the API and exist only to be timed.
#include <Python.h>

#include <chrono>

#include "autograd/derivative.h"
#include "bind.h"
#include "ops/ops.h"

namespace strata::py {

namespace {

DispatchKey key_from_name(const std::string& name) {
  for (int k = 0; k < kNumDispatchKeys; ++k) {
    auto key = static_cast<DispatchKey>(k);
    if (dispatch_key_name(key) == name) return key;
  }
  throw ValueError(str("unknown dispatch key '", name, "'"));
}

const OperatorEntry& find_op(const std::string& name) {
  const OperatorEntry* op = Dispatcher::get().find(name);
  STRATA_CHECK_VALUE(op, "no operator named '", name, "'");
  return *op;
}

// Translates the C++ exception in flight into a Python error (the _raw_*
// functions are outside nanobind, so its translator does not run for them).
PyObject* set_python_error() {
  try {
    throw;
  } catch (const TypeError& e) {
    PyErr_SetString(PyExc_TypeError, e.what());
  } catch (const ValueError& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  } catch (const NotImplementedError& e) {
    PyErr_SetString(PyExc_NotImplementedError, e.what());
  } catch (const OutOfMemoryError& e) {
    PyErr_SetString(PyExc_MemoryError, e.what());
  } catch (nb::python_error& e) {
    e.restore();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
  return nullptr;
}

// Minimal argument handling: exactly two strata Tensors, positional.
bool two_tensors(PyObject* const* args, Py_ssize_t nargs, Tensor** a, Tensor** b) {
  if (nargs != 2 || !nb::inst_check(nb::handle(args[0])) || !nb::inst_check(nb::handle(args[1])) ||
      !nb::isinstance<Tensor>(nb::handle(args[0])) || !nb::isinstance<Tensor>(nb::handle(args[1]))) {
    PyErr_SetString(PyExc_TypeError, "_raw_add(a, b): expected two strata.Tensor arguments");
    return false;
  }
  *a = nb::inst_ptr<Tensor>(nb::handle(args[0]));
  *b = nb::inst_ptr<Tensor>(nb::handle(args[1]));
  return true;
}

// (b) raw CPython entry point + the unboxed C++ call: the floor for a binding.
PyObject* raw_add(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  Tensor *a, *b;
  if (!two_tensors(args, nargs, &a, &b)) return nullptr;
  try {
    Tensor r = add(*a, *b);
    return nb::cast(std::move(r), nb::rv_policy::move).release().ptr();
  } catch (...) {
    return set_python_error();
  }
}

// (b') raw entry point, but through a Stack and the boxed dispatcher call, as
// the generic binding does: isolates the cost of boxing.
PyObject* raw_add_boxed(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  Tensor *a, *b;
  if (!two_tensors(args, nargs, &a, &b)) return nullptr;
  try {
    static const OperatorEntry& op = op_entry(OpId::add);
    Stack s;
    s.reserve(4);
    s.emplace_back(*a);
    s.emplace_back(*b);
    s.emplace_back(Scalar(int64_t(1)));
    s.emplace_back();
    call_boxed(op, s);
    return nb::cast(std::move(s.back().to_tensor()), nb::rv_policy::move).release().ptr();
  } catch (...) {
    return set_python_error();
  }
}

// Returns its first argument: the cost of calling into C++ at all.
PyObject* raw_noop(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs < 1) Py_RETURN_NONE;
  return Py_NewRef(args[0]);
}

// Wraps an existing tensor object's C++ value into a new Python object:
// the cost of result wrapping alone.
PyObject* raw_wrap(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  Tensor *a, *b;
  if (!two_tensors(args, nargs, &a, &b)) return nullptr;
  return nb::cast(Tensor(*a), nb::rv_policy::move).release().ptr();
}

PyMethodDef g_raw_methods[] = {
    {"_raw_add", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(&raw_add)), METH_FASTCALL,
     "_raw_add(a, b): add through a minimal METH_FASTCALL entry point (benchmark only)"},
    {"_raw_add_boxed", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(&raw_add_boxed)),
     METH_FASTCALL, "_raw_add_boxed(a, b): like _raw_add, but through a Stack and call_boxed (benchmark only)"},
    {"_raw_noop", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(&raw_noop)), METH_FASTCALL,
     "_raw_noop(x, ...): returns x (benchmark only)"},
    {"_raw_wrap", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(&raw_wrap)), METH_FASTCALL,
     "_raw_wrap(a, b): a new Python object for a's tensor (benchmark only)"},
};

}  // namespace

void bind_experimental(nb::module_& m) {
  m.def("_has_kernel", [](const std::string& name, const std::string& key) {
    return find_op(name).has_registered(key_from_name(key));
  }, nb::arg("name"), nb::arg("key"));
  // Keys with a kernel registered directly for the op (not fallbacks).
  m.def("_kernel_keys", [](const std::string& name) {
    const OperatorEntry& op = find_op(name);
    std::vector<std::string> keys;
    for (int k = 0; k < kNumDispatchKeys; ++k) {
      auto key = static_cast<DispatchKey>(k);
      if (op.has_registered(key) && !op.kernel_for(key).fallthrough) keys.emplace_back(dispatch_key_name(key));
    }
    return keys;
  });
  // Autograd status of an op: declared differentiable, has a derivative of
  // its own, or is composite (differentiable through the ops it calls).
  m.def("_op_autograd_info", [](const std::string& name) {
    const OperatorEntry& op = find_op(name);
    nb::dict d;
    d["differentiable"] = bool(op.flags() & kDifferentiable);
    d["has_derivative"] = autograd::find_derivative(op.id()) != nullptr;
    d["composite"] = op.has_registered(DispatchKey::CompositeImplicit);
    return d;
  });
  for (PyMethodDef& def : g_raw_methods) {
    PyObject* f = PyCFunction_NewEx(&def, nullptr, nullptr);
    if (!f) throw nb::python_error();
    m.attr(def.ml_name) = nb::steal(f);
  }
  // (b'') nanobind's typed fast path (no schema parsing, unboxed call).
  m.def("_nb_add", [](const Tensor& a, const Tensor& b) { return add(a, b); });
  // The C++ side alone: ns per add(a, b) called from C++ (dispatcher + kernel
  // + allocation), to subtract from the Python timings.
  m.def("_bench_cpp_add", [](const Tensor& a, const Tensor& b, int64_t n) {
    nb::gil_scoped_release release;
    auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < n; ++i) {
      Tensor r = add(a, b);
      asm volatile("" : : "r"(r.impl()) : "memory");
    }
    auto t1 = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(n);
  });
}

}  // namespace strata::py
