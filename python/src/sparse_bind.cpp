// strata._C entry points behind sparse COO tensors (python/strata/_sparse.py,
// docs/SPARSE.md): building one from indices and values, reading its parts,
// and the handler through which the Sparse key's fallback hands an op to Python.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bind.h"
#include "sparse/sparse.h"

namespace strata::py {

namespace {

// strata._sparse._handle(name, args, arg_names) -> result or NotImplemented. A strong reference that is
// never released: a static nb::object would be destroyed after the interpreter, without the GIL.
PyObject* g_py_handler = nullptr;

nb::object ivalue_to_py(const IValue& v) {
  const auto& raw = v.raw();
  if (v.is_none()) return nb::none();
  if (v.is_tensor()) return wrap_tensor(v.to_tensor());
  if (auto* d = std::get_if<double>(&raw)) return nb::float_(*d);
  if (auto* i = std::get_if<int64_t>(&raw)) return nb::int_(*i);
  if (auto* b = std::get_if<bool>(&raw)) return nb::bool_(*b);
  if (auto* s = std::get_if<Scalar>(&raw)) {
    if (s->is_bool()) return nb::bool_(s->to_int() != 0);
    if (s->is_integral(false)) return nb::int_(s->to_int());
    return nb::float_(s->to_double());
  }
  if (auto* l = std::get_if<std::vector<int64_t>>(&raw)) {
    nb::list out;
    for (int64_t x : *l) out.append(x);
    return nb::tuple(out);
  }
  if (v.is_tensor_list()) {
    nb::list out;
    for (const Tensor& t : v.to_tensor_list()) out.append(t.defined() ? wrap_tensor(t) : nb::none());
    return out;
  }
  if (auto* s = std::get_if<std::string>(&raw)) return nb::str(s->c_str());
  if (auto* t = std::get_if<ScalarType>(&raw)) return dtype_object(*t);
  if (v.is_device()) return nb::str(v.to_device().str().c_str());
  return nb::none();
}

IValue py_to_ivalue(nb::handle h) {
  if (h.is_none()) return IValue();
  if (nb::isinstance<Tensor>(h)) return IValue(nb::cast<Tensor>(h));
  if (PyBool_Check(h.ptr())) return IValue(h.ptr() == Py_True);
  if (PyLong_Check(h.ptr())) return IValue(nb::cast<int64_t>(h));
  if (PyFloat_Check(h.ptr())) return IValue(nb::cast<double>(h));
  throw TypeError(str("sparse handler returned an unsupported value of type ", Py_TYPE(h.ptr())->tp_name));
}

bool python_handler(const OperatorEntry& op, Stack& stack) {
  nb::gil_scoped_acquire gil;
  if (!g_py_handler) return false;
  const auto& args = op.schema().args;
  const size_t base = stack.size() - args.size();
  nb::list pyargs, names;
  for (size_t i = 0; i < args.size(); ++i) {
    pyargs.append(ivalue_to_py(stack[base + i]));
    names.append(nb::str(args[i].name.c_str()));
  }
  nb::object r = nb::handle(g_py_handler)(nb::str(op.schema().name.c_str()), nb::tuple(pyargs), nb::tuple(names));
  if (r.ptr() == Py_NotImplemented) return false;
  stack.resize(base);
  if (PyTuple_Check(r.ptr())) {
    for (nb::handle x : nb::borrow<nb::tuple>(r)) stack.push_back(py_to_ivalue(x));
  } else {
    stack.push_back(py_to_ivalue(r));
  }
  return true;
}

}  // namespace

void bind_sparse(nb::module_& m) {
  using namespace strata::sparse;
  m.def("_sparse_coo_make", [](const Tensor& indices, const Tensor& values, std::vector<int64_t> size,
                               bool coalesced) { return make_sparse_coo(indices, values, size, coalesced); });
  // (indices, values, coalesced) of a sparse tensor, or None when t is dense.
  m.def("_sparse_parts", [](const Tensor& t) -> nb::object {
    SparseTensorImpl* s = maybe_sparse(t);
    if (!s) return nb::none();
    return nb::make_tuple(wrap_tensor(s->indices()), wrap_tensor(s->values()), s->coalesced());
  });
  m.def("_is_sparse", [](const Tensor& t) { return maybe_sparse(t) != nullptr; });
  m.def("_sparse_set_coalesced", [](const Tensor& t, bool c) {
    SparseTensorImpl* s = maybe_sparse(t);
    STRATA_CHECK(s, "_coalesced_(): expected a sparse tensor");
    s->set_coalesced(c);
  });
  m.def("_sparse_set_handler", [](nb::object h) {
    PyObject* old = g_py_handler;
    g_py_handler = h.release().ptr();
    Py_XDECREF(old);
    set_sparse_handler(&python_handler);
  });
}

}  // namespace strata::py
