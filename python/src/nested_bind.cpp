// strata._C entry points behind nested tensors in the jagged layout (python/strata/_nested.py,
// docs/NESTED.md): building one from values and offsets, reading the parts back, and the handler
// through which the Nested key's fallback hands an op to Python.
#include "bind.h"
#include "nested/nested.h"

namespace strata::py {

namespace {

PyObject* g_nested_handler = nullptr;  // strata._nested._handle; a strong reference never released
PyObject* g_nested_shape = nullptr;    // strata._nested._shape_of(t) -> tuple with a nested int

bool python_nested_handler(const OperatorEntry& op, Stack& stack) {
  return call_py_handler(g_nested_handler, op, stack);
}

void replace(PyObject*& slot, nb::object h) {
  PyObject* old = slot;
  slot = h.release().ptr();
  Py_XDECREF(old);
}

}  // namespace

nb::object nested_shape(const Tensor& t) {
  STRATA_CHECK(g_nested_shape, "nested tensors: strata._nested is not loaded");
  return nb::handle(g_nested_shape)(wrap_tensor(t));
}

void bind_nested(nb::module_& m) {
  using namespace strata::nested;
  m.def("_nested_make", [](const Tensor& values, const Tensor& offsets, std::optional<Tensor> lengths,
                           int64_t ragged_idx) {
    return make_nested(values, offsets, lengths.value_or(Tensor()), ragged_idx);
  }, nb::arg("values"), nb::arg("offsets"), nb::arg("lengths").none(), nb::arg("ragged_idx"));
  // (values, offsets, lengths or None, ragged_idx) of a nested tensor, or None when t is not nested.
  m.def("_nested_parts", [](const Tensor& t) -> nb::object {
    NestedTensorImpl* n = maybe_nested(t);
    if (!n) return nb::none();
    return nb::make_tuple(wrap_tensor(n->values()), wrap_tensor(n->offsets()),
                          n->lengths().defined() ? wrap_tensor(n->lengths()) : nb::none(), n->ragged_idx());
  });
  m.def("_is_nested", [](const Tensor& t) { return maybe_nested(t) != nullptr; });
  m.def("_nested_set_handler", [](nb::object handler, nb::object shape_of) {
    replace(g_nested_handler, std::move(handler));
    replace(g_nested_shape, std::move(shape_of));
    set_nested_handler(&python_nested_handler);
  });
}

}  // namespace strata::py
