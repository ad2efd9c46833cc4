// The Tensor type as Python sees it, dtype and device objects, and data
// exchange: nested lists, NumPy (zero-copy both ways) and DLPack.
#include <Python.h>

#include <nanobind/ndarray.h>
#include <nanobind/stl/tuple.h>

#include <cstring>

#include "bind.h"
#include "nested/nested.h"
#include "sparse/quantized.h"
#include "sparse/sparse.h"
#include "core/allocator.h"
#include "ops/ops.h"

namespace strata::py {

// ---------------------------------------------------------------------------
// dtype objects

namespace {
// Owned references that are never released: a static nb::object would drop its reference in a
// C++ static destructor after the interpreter is finalized (CPython 3.12 then crashes at exit).
nb::handle g_dtype_objects[kNumScalarTypes];
}

nb::object dtype_object(ScalarType t) { return nb::borrow(g_dtype_objects[static_cast<int>(t)]); }

std::optional<ScalarType> to_scalar_type(nb::handle h) {
  if (nb::isinstance<DType>(h)) return nb::cast<const DType&>(h).type;
  // Python types as dtypes, like torch: float -> float64, int -> int64, bool -> bool.
  if (h.ptr() == reinterpret_cast<PyObject*>(&PyFloat_Type)) return ScalarType::Float64;
  if (h.ptr() == reinterpret_cast<PyObject*>(&PyLong_Type)) return ScalarType::Int64;
  if (h.ptr() == reinterpret_cast<PyObject*>(&PyBool_Type)) return ScalarType::Bool;
  if (h.ptr() == reinterpret_cast<PyObject*>(&PyComplex_Type)) return ScalarType::ComplexDouble;
  return std::nullopt;
}

std::optional<Device> to_device(nb::handle h) {
  if (nb::isinstance<Device>(h)) return nb::cast<Device>(h);
  if (PyUnicode_Check(h.ptr())) return Device(nb::cast<std::string>(h));
  if (PyLong_Check(h.ptr())) return Device(DeviceType::CUDA, static_cast<int8_t>(nb::cast<int64_t>(h)));
  return std::nullopt;
}

// ---------------------------------------------------------------------------
// numbers and nested data

bool is_number(nb::handle h) {
  PyObject* p = h.ptr();
  if (PyBool_Check(p) || PyLong_Check(p) || PyFloat_Check(p) || PyComplex_Check(p)) return true;
  if (nb::isinstance<Tensor>(h) || PySequence_Check(p)) return false;
  return PyIndex_Check(p) || PyObject_HasAttrString(p, "__float__");
}

Tensor wrap_number(nb::handle h) {
  PyObject* p = h.ptr();
  if (PyBool_Check(p)) return scalar_to_tensor(Scalar(p == Py_True), ScalarType::Bool, Device(), true);
  if (PyFloat_Check(p)) return scalar_to_tensor(Scalar(PyFloat_AS_DOUBLE(p)), ScalarType::Float64, Device(), true);
  if (PyComplex_Check(p)) {
    // A Python complex counts as the default complex dtype in promotion
    // (complex64 under the float32 default), like torch's wrapped numbers.
    Py_complex c = PyComplex_AsCComplex(p);
    return scalar_to_tensor(Scalar(std::complex<double>(c.real, c.imag)), ScalarType::ComplexDouble, Device(), true);
  }
  if (PyLong_Check(p) || PyIndex_Check(p)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(p, &overflow);
    if (v == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      nb::object idx = nb::steal(PyNumber_Index(p));
      v = PyLong_AsLongLongAndOverflow(idx.ptr(), &overflow);
    }
    if (overflow) {
      // As torch: a Python int beyond int64 is an OverflowError.
      PyErr_SetString(PyExc_OverflowError, "int too big to convert (it does not fit in int64)");
      throw nb::python_error();
    }
    return scalar_to_tensor(Scalar(int64_t(v)), ScalarType::Int64, Device(), true);
  }
  double d = PyFloat_AsDouble(p);
  if (d == -1.0 && PyErr_Occurred()) throw nb::python_error();
  return scalar_to_tensor(Scalar(d), ScalarType::Float64, Device(), true);
}

namespace {

// Like torch, the inferred dtype is the promotion of the elements' own types:
// bool -> bool, int -> int64, float -> the default dtype, a NumPy scalar or a
// 0-d tensor -> its dtype.
struct DataScan {
  DimVector shape;
  ScalarType type = ScalarType::Undefined;
  bool any = false;
  void add(ScalarType t) {
    type = any ? promote_types(type, t) : t;
    any = true;
  }
};

constexpr size_t kMaxDataDims = 64;

bool is_numpy_array(nb::handle h) { return nb::hasattr(h, "__array_interface__"); }

bool is_sequence_like(nb::handle h) {
  if (PyList_Check(h.ptr()) || PyTuple_Check(h.ptr())) return true;
  if (PyUnicode_Check(h.ptr()) || PyBytes_Check(h.ptr()) || nb::isinstance<Tensor>(h)) return false;
  // NumPy arrays nested in lists are sequences, NumPy scalars (and 0-d arrays) are not.
  if (is_numpy_array(h)) return nb::cast<int64_t>(h.attr("ndim")) > 0;
  return PySequence_Check(h.ptr());
}

// The dtype of a NumPy scalar / 0-d array, or nullopt for other objects.
std::optional<ScalarType> numpy_scalar_type(nb::handle h) {
  if (!is_numpy_array(h) || !nb::hasattr(h, "dtype")) return std::nullopt;
  std::string name = nb::cast<std::string>(h.attr("dtype").attr("name"));
  ScalarType st = dtype_from_name(name);
  STRATA_CHECK_TYPE(st != ScalarType::Undefined, "tensor(): can't convert np.", name, ". The only supported types "
                    "are: complex128, complex64, float64, float32, float16, int64, int32, int16, int8, uint64, uint32, "
                    "uint16, uint8, and bool.");
  return st;
}

void scan(nb::handle h, size_t depth, DataScan& s) {
  STRATA_CHECK_VALUE(depth <= kMaxDataDims, "tensor(): too many dimensions (more than ", kMaxDataDims,
                     ") in the nested data");
  if (nb::isinstance<Tensor>(h)) {
    const Tensor& t = nb::cast<const Tensor&>(h);
    STRATA_CHECK_VALUE(t.numel() == 1 && t.dim() == 0, "tensor(): only one element tensors can be converted to "
                       "Python scalars inside a nested sequence");
    STRATA_CHECK_VALUE(depth == s.shape.size(), "tensor(): expected sequence at dim ", depth);
    s.add(t.dtype());
    return;
  }
  if (is_sequence_like(h)) {
    nb::sequence seq = nb::borrow<nb::sequence>(h);
    int64_t n = static_cast<int64_t>(nb::len(seq));
    if (depth == s.shape.size() && !s.any) {
      s.shape.push_back(n);
    } else {
      STRATA_CHECK_VALUE(depth < s.shape.size() && s.shape[depth] == n, "expected sequence of length ",
                         depth < s.shape.size() ? s.shape[depth] : 0, " at dim ", depth, " (got ", n, ")");
    }
    for (int64_t i = 0; i < n; ++i) scan(seq[i], depth + 1, s);
    return;
  }
  STRATA_CHECK_VALUE(depth == s.shape.size(), "expected sequence of length ",
                     depth < s.shape.size() ? s.shape[depth] : 0, " at dim ", depth, " (got a scalar)");
  PyObject* p = h.ptr();
  // Exact checks first: numpy.float64 subclasses float and must keep its dtype.
  if (PyBool_Check(p)) {
    s.add(ScalarType::Bool);
  } else if (PyLong_CheckExact(p)) {
    s.add(ScalarType::Int64);
  } else if (PyFloat_CheckExact(p)) {
    s.add(default_dtype());
  } else if (PyComplex_CheckExact(p)) {
    s.add(default_complex_dtype());
  } else if (auto np_type = numpy_scalar_type(h)) {
    s.add(*np_type);
  } else if (PyLong_Check(p) || PyIndex_Check(p)) {
    s.add(ScalarType::Int64);
  } else if (PyComplex_Check(p)) {
    s.add(default_complex_dtype());
  } else if (PyFloat_Check(p) || PyObject_HasAttrString(p, "__float__")) {
    s.add(default_dtype());
  } else {
    throw TypeError(str("tensor(): could not infer dtype of ", nb::cast<std::string>(nb::str(h.type().attr("__name__")))));
  }
}

void fill(nb::handle h, double*& dp, int64_t*& ip, std::complex<double>*& cp) {
  if (nb::isinstance<Tensor>(h)) {
    Scalar v = nb::cast<const Tensor&>(h).item();
    if (cp) *cp++ = v.to_complex();
    else if (dp) *dp++ = v.to_double();
    else *ip++ = v.to_int();
    return;
  }
  if (is_sequence_like(h)) {
    for (nb::handle e : nb::borrow<nb::sequence>(h)) fill(e, dp, ip, cp);
    return;
  }
  PyObject* p = h.ptr();
  if (cp) {
    Py_complex c = PyComplex_AsCComplex(p);
    if (c.real == -1.0 && PyErr_Occurred()) throw nb::python_error();
    *cp++ = std::complex<double>(c.real, c.imag);
  } else if (dp) {
    double d = PyFloat_AsDouble(p);
    if (d == -1.0 && PyErr_Occurred()) throw nb::python_error();
    *dp++ = d;
  } else if (PyBool_Check(p)) {
    *ip++ = p == Py_True;
  } else {
    int overflow = 0;
    nb::object idx = nb::steal(PyNumber_Index(p));
    if (!idx.is_valid()) {
      // numpy.bool_ has no __index__.
      PyErr_Clear();
      int b = PyObject_IsTrue(p);
      if (b < 0) throw nb::python_error();
      *ip++ = b;
      return;
    }
    long long v = PyLong_AsLongLongAndOverflow(idx.ptr(), &overflow);
    STRATA_CHECK_VALUE(!overflow, "tensor(): Overflow when unpacking long long: ",
                       nb::cast<std::string>(nb::repr(idx)), " does not fit in int64");
    *ip++ = v;
  }
}

// ---------------------------------------------------------------------------
// NumPy / DLPack

nb::dlpack::dtype dl_dtype(ScalarType t) {
  using nb::dlpack::dtype_code;
  uint8_t bits = static_cast<uint8_t>(element_size(t) * 8);
  switch (t) {
    case ScalarType::Bool: return {static_cast<uint8_t>(dtype_code::Bool), 8, 1};
    case ScalarType::UInt8: return {static_cast<uint8_t>(dtype_code::UInt), 8, 1};
    case ScalarType::Float16:
    case ScalarType::Float32:
    case ScalarType::Float64: return {static_cast<uint8_t>(dtype_code::Float), bits, 1};
    case ScalarType::BFloat16: return {static_cast<uint8_t>(dtype_code::Bfloat), 16, 1};
    case ScalarType::UInt16:
    case ScalarType::UInt32:
    case ScalarType::UInt64: return {static_cast<uint8_t>(dtype_code::UInt), bits, 1};
    case ScalarType::ComplexFloat:
    case ScalarType::ComplexDouble: return {static_cast<uint8_t>(dtype_code::Complex), bits, 1};
    default: return {static_cast<uint8_t>(dtype_code::Int), bits, 1};
  }
}

ScalarType from_dl_dtype(nb::dlpack::dtype d) {
  using nb::dlpack::dtype_code;
  auto code = static_cast<dtype_code>(d.code);
  STRATA_CHECK_TYPE(d.lanes == 1, "from_dlpack: vector dtypes are not supported");
  if (code == dtype_code::Bool) return ScalarType::Bool;
  if (code == dtype_code::UInt) {
    switch (d.bits) {
      case 8: return ScalarType::UInt8;
      case 16: return ScalarType::UInt16;
      case 32: return ScalarType::UInt32;
      case 64: return ScalarType::UInt64;
    }
  }
  if (code == dtype_code::Complex && d.bits == 64) return ScalarType::ComplexFloat;
  if (code == dtype_code::Complex && d.bits == 128) return ScalarType::ComplexDouble;
  if (code == dtype_code::Int) {
    switch (d.bits) {
      case 8: return ScalarType::Int8;
      case 16: return ScalarType::Int16;
      case 32: return ScalarType::Int32;
      case 64: return ScalarType::Int64;
    }
  }
  if (code == dtype_code::Float) {
    switch (d.bits) {
      case 16: return ScalarType::Float16;
      case 32: return ScalarType::Float32;
      case 64: return ScalarType::Float64;
    }
  }
  if (code == dtype_code::Bfloat && d.bits == 16) return ScalarType::BFloat16;
  throw TypeError(str("can't convert array of dtype code ", int(d.code), " with ", int(d.bits),
                      " bits: the only supported types are: float64, float32, float16, bfloat16, int64, int32, "
                      "int16, int8, uint8, and bool."));
}

void release_pyobject(void* ctx) {
  nb::gil_scoped_acquire g;
  Py_XDECREF(static_cast<PyObject*>(ctx));
}

// A tensor over memory owned by a Python object (kept alive by the storage).
Tensor tensor_over_array(nb::ndarray<nb::ro, nb::device::cpu> a, nb::handle owner, const char* op) {
  ScalarType st = from_dl_dtype(a.dtype());
  size_t nd = a.ndim();
  DimVector sizes(nd), strides(nd);
  int64_t span = 1;
  bool empty = false;
  for (size_t i = 0; i < nd; ++i) {
    sizes[i] = static_cast<int64_t>(a.shape(i));
    strides[i] = static_cast<int64_t>(a.stride(i));
    STRATA_CHECK_VALUE(strides[i] >= 0, op, ": At least one stride in the given numpy array is negative, and "
                       "tensors with negative strides are not currently supported. (You can probably work around "
                       "this by making a copy of your array  with array.copy().)");
    if (sizes[i] == 0) empty = true;
    span += (sizes[i] - 1) * strides[i];
  }
  if (empty) span = 0;
  size_t nbytes = static_cast<size_t>(span) * element_size(st);
  PyObject* o = owner.ptr();
  Py_INCREF(o);
  void* ptr = const_cast<void*>(a.data());
  auto storage = make_intrusive<StorageImpl>(DataPtr(ptr, o, &release_pyobject), nbytes, Device());
  return Tensor(make_intrusive<TensorImpl>(storage, 0, sizes, strides, st));
}

// An ndarray view of a NumPy array, or a TypeError naming its dtype (object,
// string, complex and non-native byte-order arrays cannot be viewed).
nb::ndarray<nb::ro, nb::device::cpu> as_cpu_ndarray(nb::handle arr, const char* op) {
  nb::ndarray<nb::ro, nb::device::cpu> a;
  bool ok = false;
  try {
    ok = nb::try_cast(arr, a);
  } catch (const std::exception&) {  // nanobind's DLPack import throws for object/str arrays
    PyErr_Clear();
  }
  if (!ok) {
    std::string what = nb::hasattr(arr, "dtype") ? nb::cast<std::string>(nb::str(arr.attr("dtype"))) : "unknown";
    throw TypeError(str(op, ": can't convert np.ndarray of type ", what, " (the only supported types are: complex128, "
                        "complex64, float64, float32, float16, int64, int32, int16, int8, uint64, uint32, uint16, "
                        "uint8, and bool, in native byte order, with "
                        "strides that are multiples of the item size)"));
  }
  return a;
}

struct DLPackOwner {
  Tensor t;
  std::vector<int64_t> shape, strides;
};

}  // namespace

Tensor tensor_from_data(nb::handle data, std::optional<ScalarType> dtype, std::optional<Device> device) {
  Tensor out;
  if (nb::isinstance<Tensor>(data)) {
    out = clone(nb::cast<const Tensor&>(data));
    if (dtype) out = to_dtype(out, *dtype);
  } else if (nb::hasattr(data, "__array_interface__")) {
    // asarray(order="C") keeps 0-d arrays 0-d (ascontiguousarray makes them 1-d).
    nb::object arr = nb::module_::import_("numpy").attr("asarray")(data, nb::arg("order") = "C");
    try {
      out = clone(tensor_over_array(as_cpu_ndarray(arr, "tensor"), arr, "tensor"));
    } catch (const nb::cast_error&) {
      throw TypeError(str("tensor(): can't convert np.ndarray of type ",
                          nb::cast<std::string>(nb::str(arr.attr("dtype")))));
    }
    if (dtype) out = to_dtype(out, *dtype);
  } else {
    DataScan s;
    scan(data, 0, s);
    ScalarType natural = s.any ? s.type : default_dtype();
    ScalarType target = dtype.value_or(natural);
    bool as_complex = is_complex_type(natural);
    bool as_float = !as_complex && (is_floating_type(natural) || is_floating_type(target));
    Tensor buf = empty_tensor(s.shape,
                              as_complex ? ScalarType::ComplexDouble
                              : as_float ? ScalarType::Float64
                                         : ScalarType::Int64,
                              Device());
    std::complex<double>* cp = as_complex ? buf.data_ptr<std::complex<double>>() : nullptr;
    double* dp = as_float ? buf.data_ptr<double>() : nullptr;
    int64_t* ip = as_float || as_complex ? nullptr : buf.data_ptr<int64_t>();
    if (buf.numel() > 0 || s.shape.empty()) fill(data, dp, ip, cp);
    out = to_dtype(buf, target);
    if (out.is_same(buf)) out = buf;
  }
  if (device && *device != out.device()) out = to_device(out, *device);
  return out;
}

nb::object wrap_tensor(Tensor t) { return nb::cast(std::move(t), nb::rv_policy::move); }

namespace {
nb::object element_to_py(const char* p, ScalarType st) {
  return visit_all_dtypes_and_float8(st, [&]<typename T>() -> nb::object {
    T v;
    std::memcpy(&v, p, sizeof(T));
    if constexpr (std::is_same_v<T, bool>) return nb::bool_(v);
    else if constexpr (is_float_v<T> || is_float8_v<T>) return nb::float_(static_cast<double>(static_cast<opmath_t<T>>(v)));
    else if constexpr (is_complex_v<T>) return nb::steal(PyComplex_FromDoubles(v.real(), v.imag()));
    else if constexpr (std::is_same_v<T, uint64_t>) return nb::steal(PyLong_FromUnsignedLongLong(v));
    else return nb::int_(static_cast<int64_t>(v));
  });
}
nb::object to_list_rec(const char* p, const Tensor& t, int64_t d) {
  if (d == t.dim()) return element_to_py(p, t.dtype());
  int64_t n = t.sizes()[d], st = t.strides()[d] * static_cast<int64_t>(t.element_size());
  nb::list l;
  for (int64_t i = 0; i < n; ++i) l.append(to_list_rec(p + i * st, t, d + 1));
  return l;
}
}  // namespace

nb::object tensor_to_list(const Tensor& t0) {
  STRATA_CHECK(!t0.device().is_meta(), "tolist(): cannot read data of a tensor on the meta device");
  Tensor t = to_device(t0, Device());
  return to_list_rec(static_cast<const char*>(t.data_ptr()), t, 0);
}

// ---------------------------------------------------------------------------

void bind_tensor(nb::module_& m) {
  nb::class_<DType>(m, "dtype")
      .def_prop_ro("is_floating_point", [](const DType& d) { return is_floating_type(d.type); })
      .def_prop_ro("is_signed", [](const DType& d) { return is_signed_type(d.type); })
      .def_prop_ro("itemsize", [](const DType& d) { return element_size(d.type); })
      .def_prop_ro("is_complex", [](const DType& d) { return is_complex_type(d.type); })
      .def("to_complex", [](const DType& d) {
        STRATA_CHECK(is_floating_type(d.type) || is_complex_type(d.type), "to_complex: expected a floating-point "
                     "or complex dtype, got ", dtype_name(d.type));
        return dtype_object(to_complex_type(d.type));
      })
      .def("to_real", [](const DType& d) { return dtype_object(to_real_value_type(d.type)); })
      .def_prop_ro("_name", [](const DType& d) { return std::string(dtype_name(d.type)); })
      .def("__repr__", [](const DType& d) { return "strata." + std::string(dtype_name(d.type)); })
      .def("__reduce__", [](const DType& d) { return std::string(dtype_name(d.type)); });
  for (int i = 0; i < kNumScalarTypes; ++i) {
    auto st = static_cast<ScalarType>(i);
    g_dtype_objects[i] = nb::cast(DType{st}).release();
    m.attr(std::string(dtype_name(st)).c_str()) = g_dtype_objects[i];
  }
  m.attr("_dtype_objects") = nb::make_tuple();

  nb::class_<Device>(m, "device")
      .def("__init__", [](Device* d, const std::string& s) { new (d) Device(s); })
      .def("__init__",
           [](Device* d, const std::string& type, int64_t index) {
             Device parsed(type);
             new (d) Device(parsed.type, static_cast<int8_t>(index));
           })
      .def("__init__", [](Device* d, const Device& o) { new (d) Device(o); })
      .def_prop_ro("type", [](const Device& d) { return device_type_name(d.type); })
      .def_prop_ro("index", [](const Device& d) -> nb::object {
        return d.index < 0 ? nb::object(nb::none()) : nb::object(nb::int_(d.index));
      })
      .def("__eq__", [](const Device& a, nb::handle b) {
        auto d = to_device(b);
        return d && a == *d;
      })
      .def("__hash__", [](const Device& d) { return static_cast<int>(d.type) * 131 + d.index; })
      .def("__str__", &Device::str)
      .def("__repr__", [](const Device& d) {
        std::string s = "device(type='" + device_type_name(d.type) + "'";
        if (d.index >= 0) s += ", index=" + std::to_string(d.index);
        return s + ")";
      });

  nb::class_<Tensor>(m, "Tensor", nb::dynamic_attr(), nb::pooled(256))
      // torch's legacy constructor: Tensor() (empty), Tensor(2, 3) / Tensor(size) (uninitialised, the
      // default dtype), Tensor(data) (a copy in the default dtype), Tensor(tensor) (the same data).
      // The argument rules live in Python (strata._tensor_compat._legacy_tensor_ctor).
      .def("__init__",
           [](Tensor* self, nb::args args, nb::kwargs kwargs) {
             nb::object ctor = nb::module_::import_("strata._tensor_compat").attr("_legacy_tensor_ctor");
             nb::object r = ctor(*args, **kwargs);
             new (self) Tensor(nb::cast<Tensor>(r));
           })
      .def_prop_ro("_shape", [](const Tensor& t) -> nb::object {
        if (t.key_set().has(nested::kNestedKey)) [[unlikely]] return nested_shape(t);
        nb::tuple tup = nb::steal<nb::tuple>(PyTuple_New(t.dim()));
        for (int64_t i = 0; i < t.dim(); ++i) PyTuple_SET_ITEM(tup.ptr(), i, PyLong_FromLongLong(t.sizes()[i]));
        return tup;
      })
      .def_prop_ro("dtype", [](const Tensor& t) {
        if (t.key_set().has(sparse::kQuantizedKey)) [[unlikely]] return quantized_dtype_object(t);
        return dtype_object(t.dtype());
      })
      .def_prop_ro("device", [](const Tensor& t) { return t.device(); })
      .def_prop_ro("ndim", [](const Tensor& t) { return t.dim(); })
      .def_prop_ro("_version", [](const Tensor& t) { return t.version(); })
      .def_prop_ro("is_meta", [](const Tensor& t) { return t.device().is_meta(); })
      .def_prop_ro("is_cpu", [](const Tensor& t) { return t.device().is_cpu(); })
      .def_prop_ro("is_cuda", [](const Tensor& t) { return t.device().type == DeviceType::CUDA; })
      .def_prop_ro("_is_wrapped_number", [](const Tensor& t) { return t.impl()->is_wrapped_number(); })
      .def("dim", [](const Tensor& t) { return t.dim(); })
      .def("ndimension", [](const Tensor& t) { return t.dim(); })
      .def("numel", [](const Tensor& t) {
        if (nested::NestedTensorImpl* n = nested::maybe_nested(t)) [[unlikely]] return n->values().numel();
        return t.numel();
      })
      .def("nelement", [](const Tensor& t) {
        if (nested::NestedTensorImpl* n = nested::maybe_nested(t)) [[unlikely]] return n->values().numel();
        return t.numel();
      })
      .def("element_size", [](const Tensor& t) { return t.element_size(); })
      .def("storage_offset", [](const Tensor& t) { return t.storage_offset(); })
      .def("is_contiguous", [](const Tensor& t) { return t.is_contiguous(); })
      .def("is_floating_point", [](const Tensor& t) { return is_floating_type(t.dtype()); })
      .def("is_inference", [](const Tensor& t) { return t.impl()->is_inference(); })
      .def("is_complex", [](const Tensor& t) { return is_complex_type(t.dtype()); })
      .def("data_ptr",
           [](const Tensor& t) {
             STRATA_CHECK(!sparse::maybe_sparse(t), "Cannot access data pointer of Tensor that doesn't have storage "
                          "(a sparse tensor: use ._values().data_ptr())");
             return reinterpret_cast<uintptr_t>(t.data_ptr());
           })
      .def("_storage_ptr", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.impl()->storage().get()); })
      .def("_storage_nbytes", [](const Tensor& t) { return t.impl()->storage()->nbytes(); })
      .def("_is_same", [](const Tensor& a, const Tensor& b) { return a.is_same(b); })
      .def("_stride", [](const Tensor& t) {
        STRATA_CHECK(!sparse::maybe_sparse(t), "Sparse tensors do not have strides");
        nb::tuple tup = nb::steal<nb::tuple>(PyTuple_New(t.dim()));
        for (int64_t i = 0; i < t.dim(); ++i) PyTuple_SET_ITEM(tup.ptr(), i, PyLong_FromLongLong(t.strides()[i]));
        return tup;
      })
      .def("item", [](const Tensor& t) -> nb::object {
        sparse::check_dense(t, "item");
        STRATA_CHECK(!t.key_set().has(DispatchKey::Vmap), "vmap: item() on a batched tensor is not supported: "
                     "inside vmap a tensor's value differs per batch entry, so it cannot become one Python "
                     "value. Rewrite the code with tensor operations (e.g. strata.where instead of an if).");
        STRATA_CHECK(!t.device().is_meta(), "item(): Tensor.item() cannot be called on meta tensors");
        Tensor c = to_device(t, Device());
        STRATA_CHECK(c.numel() == 1, "a Tensor with ", c.numel(), " elements cannot be converted to Scalar");
        return element_to_py(static_cast<const char*>(c.data_ptr()), c.dtype());
      })
      .def("tolist", [](const Tensor& t) {
        sparse::check_dense(t, "tolist");
        STRATA_CHECK(!t.key_set().has(DispatchKey::Vmap), "vmap: tolist() on a batched tensor is not supported: "
                     "inside vmap a tensor's value differs per batch entry, so it cannot become one Python "
                     "value. Rewrite the code with tensor operations (e.g. strata.where instead of an if).");
        return tensor_to_list(t);
      })
      .def("_numpy", [](const Tensor& t) {
        sparse::check_dense(t, "numpy");
        STRATA_CHECK(!t.key_set().has(DispatchKey::Vmap), "vmap: numpy() on a batched tensor is not supported: "
                     "inside vmap a tensor's value differs per batch entry, so it cannot become one Python "
                     "value. Rewrite the code with tensor operations (e.g. strata.where instead of an if).");
        STRATA_CHECK_TYPE(t.device().is_cpu(), "can't convert ", device_type_name(t.device().type),
                          " device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host memory first.");
        STRATA_CHECK_TYPE(t.dtype() != ScalarType::BFloat16 && !is_float8_type(t.dtype()),
                          "Got unsupported ScalarType ", scalar_type_name(t.dtype()));
        auto* owner = new Tensor(t);
        nb::capsule cap(owner, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
        std::vector<size_t> shape(t.sizes().begin(), t.sizes().end());
        std::vector<int64_t> strides(t.strides().begin(), t.strides().end());
        return nb::ndarray<nb::numpy>(t.data_ptr(), t.dim(), shape.data(), cap, strides.data(), dl_dtype(t.dtype()),
                                      nb::device::cpu::value, 0);
      })
      .def("__dlpack__",
           // Consumers (NumPy >= 2, torch) pass max_version/dl_device/copy; an
           // unversioned capsule is a valid answer to any max_version.
           [](const Tensor& t0, nb::handle /*stream*/, nb::handle /*max_version*/, nb::handle dl_device,
              nb::handle copy) {
             sparse::check_dense(t0, "__dlpack__");
             STRATA_CHECK_TYPE(t0.device().is_cpu(), "__dlpack__: only CPU tensors can be exported for now (got a ",
                               t0.device().str(), " tensor; use .cpu() first)");
             if (!dl_device.is_none()) {
               auto dev = nb::cast<std::tuple<int, int>>(dl_device);
               STRATA_CHECK_VALUE(std::get<0>(dev) == 1, "__dlpack__: cannot export a cpu tensor to DLPack device ",
                                  std::get<0>(dev));
             }
             STRATA_CHECK_TYPE(!is_float8_type(t0.dtype()), "__dlpack__: ", dtype_name(t0.dtype()),
                               " tensors cannot be exported through DLPack yet (view them as uint8 first)");
             Tensor t = (!copy.is_none() && nb::cast<bool>(copy)) ? clone(t0) : t0;
             auto* owner = new Tensor(t);
             nb::capsule cap(owner, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
             std::vector<size_t> shape(t.sizes().begin(), t.sizes().end());
             std::vector<int64_t> strides(t.strides().begin(), t.strides().end());
             nb::ndarray<> arr(t.data_ptr(), t.dim(), shape.data(), cap, strides.data(), dl_dtype(t.dtype()),
                               nb::device::cpu::value, 0);
             // A framework-less ndarray converts to a DLPack capsule (owned by `cap`).
             return nb::cast(arr, nb::rv_policy::reference);
           },
           nb::arg("stream").none() = nb::none(), nb::kw_only(), nb::arg("max_version").none() = nb::none(),
           nb::arg("dl_device").none() = nb::none(), nb::arg("copy").none() = nb::none())
      .def("__dlpack_device__", [](const Tensor& t) { return nb::make_tuple(1, 0); });

  m.def("_from_numpy", [](nb::handle arr) {
    try {
      return tensor_over_array(as_cpu_ndarray(arr, "from_numpy"), arr, "from_numpy");
    } catch (const nb::cast_error&) {
      throw TypeError(str("from_numpy: can't convert np.ndarray of type ",
                          nb::cast<std::string>(nb::str(arr.attr("dtype"))), ". The only supported types are: "
                          "complex128, complex64, float64, float32, float16, int64, int32, int16, int8, uint64, "
                          "uint32, uint16, uint8, and bool."));
    }
  });
  m.def("_from_dlpack", [](nb::handle obj) {
    // nanobind accepts DLPack capsules and objects with __dlpack__.
    nb::ndarray<nb::ro> a;
    if (!nb::try_cast(obj, a)) {
      throw TypeError(str("from_dlpack: cannot import an object of type ",
                          nb::cast<std::string>(nb::str(obj.type().attr("__name__"))), " (no usable __dlpack__)"));
    }
    STRATA_CHECK(a.device_type() == nb::device::cpu::value, "from_dlpack: only CPU memory is supported for now");
    // The imported ndarray holds the producer's DLManagedTensor: keep a copy of
    // it alive as long as the storage.
    nb::capsule owner(new nb::ndarray<nb::ro>(a), [](void* p) noexcept { delete static_cast<nb::ndarray<nb::ro>*>(p); });
    return tensor_over_array(nb::ndarray<nb::ro, nb::device::cpu>(a), owner, "from_dlpack");
  });
  m.def("_tensor", [](nb::handle data, nb::handle dtype, nb::handle device) {
    std::optional<ScalarType> st;
    if (!dtype.is_none()) {
      st = to_scalar_type(dtype);
      STRATA_CHECK_TYPE(st, "tensor(): dtype must be a strata.dtype");
    }
    std::optional<Device> dev;
    if (!device.is_none()) dev = to_device(device);
    return tensor_from_data(data, st, dev);
  }, nb::arg("data").none(), nb::arg("dtype").none(), nb::arg("device").none());
}

}  // namespace strata::py
