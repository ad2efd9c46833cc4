// strata._C entry points behind sparse COO tensors (python/strata/_sparse.py)
// and affine-quantized tensors (python/strata/_quantized.py), docs/SPARSE.md:
// building one from its parts, reading them back, and the handlers through
// which the Sparse and Quantized keys' fallbacks hand an op to Python.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bind.h"
#include "sparse/quantized.h"
#include "sparse/sparse.h"

namespace strata::py {

namespace {

// strata._sparse._handle(name, args, arg_names) -> result or NotImplemented. A strong reference that is
// never released: a static nb::object would be destroyed after the interpreter, without the GIL.
PyObject* g_py_handler = nullptr;
PyObject* g_py_qhandler = nullptr;  // the same for quantized tensors (strata._quantized._handle)
PyObject* g_qdtypes = nullptr;      // [strata.qint8, strata.quint8, strata.qint32]

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
  if (PyList_Check(h.ptr())) {  // Tensor[] results (split, unbind, chunk)
    std::vector<Tensor> ts;
    for (nb::handle x : nb::borrow<nb::list>(h)) ts.push_back(nb::cast<Tensor>(x));
    return IValue(std::move(ts));
  }
  throw TypeError(str("sparse handler returned an unsupported value of type ", Py_TYPE(h.ptr())->tp_name));
}

bool call_handler(PyObject* handler, const OperatorEntry& op, Stack& stack) {
  nb::gil_scoped_acquire gil;
  if (!handler) return false;
  const auto& args = op.schema().args;
  const size_t base = stack.size() - args.size();
  nb::list pyargs, names;
  for (size_t i = 0; i < args.size(); ++i) {
    pyargs.append(ivalue_to_py(stack[base + i]));
    names.append(nb::str(args[i].name.c_str()));
  }
  nb::object r = nb::handle(handler)(nb::str(op.schema().name.c_str()), nb::tuple(pyargs), nb::tuple(names));
  if (r.ptr() == Py_NotImplemented) return false;
  stack.resize(base);
  if (PyTuple_Check(r.ptr())) {
    for (nb::handle x : nb::borrow<nb::tuple>(r)) stack.push_back(py_to_ivalue(x));
  } else {
    stack.push_back(py_to_ivalue(r));
  }
  return true;
}

bool python_handler(const OperatorEntry& op, Stack& stack) { return call_handler(g_py_handler, op, stack); }
bool python_qhandler(const OperatorEntry& op, Stack& stack) { return call_handler(g_py_qhandler, op, stack); }

void replace_ref(PyObject*& slot, nb::object h) {
  PyObject* old = slot;
  slot = h.release().ptr();
  Py_XDECREF(old);
}

}  // namespace

bool call_py_handler(PyObject* handler, const OperatorEntry& op, Stack& stack) {
  return call_handler(handler, op, stack);
}

nb::object quantized_dtype_object(const Tensor& t) {
  sparse::QuantizedTensorImpl* q = sparse::maybe_quantized(t);
  if (!q || !g_qdtypes) return dtype_object(t.dtype());
  return nb::borrow(PyList_GetItem(g_qdtypes, static_cast<Py_ssize_t>(q->qdtype())));
}

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
    replace_ref(g_py_handler, std::move(h));
    set_sparse_handler(&python_handler);
  });

  // Quantized tensors.
  m.def("_quant_make", [](const Tensor& int_repr, int qdtype, double scale, int64_t zero_point,
                          std::optional<Tensor> scales, std::optional<Tensor> zero_points, int64_t axis) {
    STRATA_CHECK(qdtype >= 0 && qdtype <= 2, "_quant_make: bad quantized dtype code ", qdtype);
    return make_quantized(int_repr, static_cast<QDtype>(qdtype), scale, zero_point, scales.value_or(Tensor()),
                          zero_points.value_or(Tensor()), axis);
  });
  // (int_repr, qdtype code, scale, zero_point, scales, zero_points, axis) or None when t is not quantized.
  m.def("_quant_parts", [](const Tensor& t) -> nb::object {
    QuantizedTensorImpl* q = maybe_quantized(t);
    if (!q) return nb::none();
    auto opt = [](const Tensor& x) -> nb::object { return x.defined() ? wrap_tensor(x) : nb::none(); };
    return nb::make_tuple(wrap_tensor(q->int_repr()), static_cast<int>(q->qdtype()), q->scale(), q->zero_point(),
                          opt(q->scales()), opt(q->zero_points()), q->axis());
  });
  m.def("_is_quantized", [](const Tensor& t) { return maybe_quantized(t) != nullptr; });
  m.def("_quant_set_handler", [](nb::object h) {
    replace_ref(g_py_qhandler, std::move(h));
    set_quantized_handler(&python_qhandler);
  });
  m.def("_quant_set_dtypes", [](nb::list l) {
    STRATA_CHECK(l.size() == 3, "_quant_set_dtypes: expected [qint8, quint8, qint32]");
    replace_ref(g_qdtypes, std::move(l));
  });
}

}  // namespace strata::py
