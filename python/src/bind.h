// Shared pieces of the Python binding (nanobind).
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include "core/shape.h"
#include "core/tensor.h"
#include "dispatch/dispatcher.h"

namespace nb = nanobind;

namespace strata::py {

// Python-side dtype object: a singleton per ScalarType (strata.float32 ...).
struct DType {
  ScalarType type;
};

nb::object dtype_object(ScalarType t);
// Accepts a strata dtype object, or a NumPy/torch dtype-like with a name.
std::optional<ScalarType> to_scalar_type(nb::handle h);
std::optional<Device> to_device(nb::handle h);

// Python number -> 0-d wrapped tensor (participates in promotion by category).
Tensor wrap_number(nb::handle h);
bool is_number(nb::handle h);

// A Python value as the IValue for schema argument a (numbers for a Tensor
// argument become wrapped numbers); false when it does not fit the type.
bool convert_arg(const Argument& a, nb::handle h, IValue* out);
// Note [Symbolic ints in recorded nodes] (src/compile/graph.h): turns noting
// of int subclasses on or off for this thread; returns the previous setting.
bool set_note_symints(bool on);

nb::object wrap_tensor(Tensor t);
// In a catch block of a CPython-level function (not a nanobind one): sets the Python error the
// exception being handled becomes (the module's translators, as in any nanobind function) and
// returns nullptr.
PyObject* raise_as_python_error();
// wrap_tensor() for a tensor no Python object wraps yet (an op's result), without nb::cast's
// lookups; None for an undefined tensor. And a strata.Tensor check without nanobind's type lookup.
nb::object wrap_new_tensor(Tensor&& t);
bool is_tensor_object(PyObject* o);
// t.dtype for a quantized tensor: strata.qint8 / quint8 / qint32 (sparse_bind.cpp).
nb::object quantized_dtype_object(const Tensor& t);
// Offers a boxed call to a Python handler (name, args, arg_names) -> result or NotImplemented: false when
// it declines; otherwise the stack holds the results (sparse_bind.cpp; the Sparse, Quantized and Nested keys).
bool call_py_handler(PyObject* handler, const OperatorEntry& op, Stack& stack);
nb::object tensor_to_list(const Tensor& t);
// t.shape of a nested tensor: a tuple whose ragged entry is a symbolic nested int (nested_bind.cpp).
nb::object nested_shape(const Tensor& t);
Tensor tensor_from_data(nb::handle data, std::optional<ScalarType> dtype, std::optional<Device> device);

void bind_tensor(nb::module_& m);
void bind_ops(nb::module_& m);
void bind_indexing(nb::module_& m);
void bind_extras(nb::module_& m);
void bind_autograd(nb::module_& m);  // autograd_bind.cpp: requires_grad, grad, grad_fn, engine, Function
void bind_experimental(nb::module_& m);  // experimental_bind.cpp: introspection, binding benchmarks

}  // namespace strata::py
