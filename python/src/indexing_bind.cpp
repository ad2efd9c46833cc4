// Note [Python indexing]
// Tensor.__getitem__ / __setitem__, in C++ because they are on every hot path.
// An index expression is lowered in two steps:
//  1. basic parts, left to right, through the view ops: int -> select,
//     slice -> slice, None -> unsqueeze, Ellipsis -> skip dims, and a Python
//     bool -> unsqueeze (then an empty slice for False);
//  2. the advanced parts (integer/bool tensors, lists, arrays) with one `index` (read) or `index_put_` (write) call. If the
//     advanced indices are adjacent their result dims stay in place (the op's
//     `dim` argument); if a slice/None/Ellipsis separates them, the indexed
//     dims are permuted to the front first (NumPy's rule).
// Ints (and 0-d integer tensors) are selects, as in PyTorch (NumPy would
// count them as advanced indices for the placement rule). Everything goes through the dispatcher, so
// autograd sees ordinary view and index ops.
#include <Python.h>

#include "bind.h"
#include "compile/graph.h"
#include "ops/ops.h"

namespace strata::py {

namespace {

enum class Kind { Int, Slice, None, Ellipsis, Bool, Tensor };

struct Item {
  Kind kind;
  int64_t value = 0;  // Int; Bool (0/1)
  Py_ssize_t start = 0, stop = 0, step = 1;
  Tensor t;
};

[[noreturn]] void invalid_index(nb::handle h) {
  std::string tn = nb::cast<std::string>(nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(h.ptr()))).attr("__name__"));
  throw IndexError(str("only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are valid "
                       "indices (got ",
                       tn, ")"));
}

int64_t py_to_int64(PyObject* p) {
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(p, &overflow);
  if (v == -1 && PyErr_Occurred()) throw nb::python_error();
  if (overflow) throw IndexError("index does not fit in int64");
  return v;
}

Tensor index_tensor_from(nb::handle h) {
  // A literal: while strata.compile records, a constant of the graph.
  ExcludeDispatchKeyGuard literal(DispatchKey::Tracer);
  Tensor t = tensor_from_data(h, std::nullopt, std::nullopt);
  // [] has no element to infer a dtype from: it means "no positions".
  if (t.numel() == 0 && is_floating_type(t.dtype())) t = to_dtype(t, ScalarType::Int64);
  STRATA_CHECK_INDEX(!is_floating_type(t.dtype()), "tensors used as indices must be long, int, byte or bool tensors");
  return compile::adopt_literal(t);
}

Item classify(nb::handle h) {
  PyObject* p = h.ptr();
  Item it;
  if (PyLong_CheckExact(p)) {
    it.kind = Kind::Int;
    it.value = py_to_int64(p);
  } else if (PySlice_Check(p)) {
    it.kind = Kind::Slice;
    if (PySlice_Unpack(p, &it.start, &it.stop, &it.step) != 0) throw nb::python_error();
    STRATA_CHECK_VALUE(it.step > 0, "step must be greater than zero");
  } else if (p == Py_None) {
    it.kind = Kind::None;
  } else if (p == Py_Ellipsis) {
    it.kind = Kind::Ellipsis;
  } else if (PyBool_Check(p)) {
    it.kind = Kind::Bool;
    it.value = p == Py_True;
  } else if (nb::isinstance<Tensor>(h)) {
    const Tensor& t = nb::cast<const Tensor&>(h);
    if (t.dim() == 0 && t.dtype() == ScalarType::Bool && !t.device().is_meta()) {
      it.kind = Kind::Bool;
      it.value = t.item().to_bool();
    } else if (t.dim() == 0 && is_integral_type(t.dtype(), false) && !t.device().is_meta() &&
               !t.key_set().has(DispatchKey::Vmap)) {  // a batched one indexes per entry (advanced index)
      // Like torch: a 0-d integer tensor selects (a view), as an int would.
      it.kind = Kind::Int;
      it.value = t.item().to_int();
    } else if (is_floating_type(t.dtype())) {
      throw IndexError("tensors used as indices must be long, int, byte or bool tensors");
    } else {
      it.kind = Kind::Tensor;
      it.t = t;
    }
  } else if (PyLong_Check(p) || (!PyFloat_Check(p) && PyIndex_Check(p) && !PySequence_Check(p))) {
    // int subclasses and NumPy integer scalars.
    nb::object i = nb::steal(PyNumber_Index(p));
    if (!i.is_valid()) throw nb::python_error();
    it.kind = Kind::Int;
    it.value = py_to_int64(i.ptr());
  } else if (PyList_Check(p) || PyTuple_Check(p) || nb::hasattr(h, "__array_interface__")) {
    it.kind = Kind::Tensor;
    it.t = index_tensor_from(h);
    if (it.t.dtype() == ScalarType::Bool && it.t.dim() == 0) {
      it.kind = Kind::Bool;
      it.value = it.t.item().to_bool();
    } else if (it.t.dim() == 0) {
      it.kind = Kind::Int;
      it.value = it.t.item().to_int();
    }
  } else {
    invalid_index(h);
  }
  return it;
}

// The parsed index expression, left to right.
struct Items {
  std::vector<Item> v;
};

void collect(nb::handle idx, Items& out) {
  if (PyTuple_Check(idx.ptr())) {
    Py_ssize_t n = PyTuple_GET_SIZE(idx.ptr());
    out.v.reserve(n);
    for (Py_ssize_t i = 0; i < n; ++i) out.v.push_back(classify(PyTuple_GET_ITEM(idx.ptr(), i)));
  } else {
    out.v.push_back(classify(idx));
  }
}

struct Adv {
  int64_t pos;       // dim of the (basic-indexed) view it indexes
  int64_t consumed;  // dims it consumes (mask.dim() for masks)
  Tensor t;
};

struct Lowered {
  Tensor view;           // after the basic parts
  std::vector<Adv> adv;  // advanced parts, in order
};

bool is_mask(const Tensor& t) { return t.dtype() == ScalarType::Bool || t.dtype() == ScalarType::UInt8; }

Lowered lower_basic(const Tensor& self, Items& items) {
  const int64_t n = self.dim();
  int64_t consumed = 0;
  int ellipses = 0;
  for (const Item& it : items.v) {
    if (it.kind == Kind::Int || it.kind == Kind::Slice) consumed++;
    else if (it.kind == Kind::Tensor) consumed += is_mask(it.t) ? it.t.dim() : 1;
    else if (it.kind == Kind::Ellipsis) ellipses++;
  }
  STRATA_CHECK_INDEX(ellipses <= 1, "an index can only have a single ellipsis ('...')");
  if (consumed > n) {
    STRATA_CHECK_INDEX(n > 0, "invalid index of a 0-dim tensor. Use `tensor.item()` in Python or "
                       "`tensor.item<T>()` in C++ to convert a 0-dim tensor to a number");
    throw IndexError(str("too many indices for tensor of dimension ", n));
  }
  Lowered r;
  r.view = self;
  int64_t d = 0;   // dim of the view being built
  int64_t od = 0;  // dim of self, for messages
  for (Item& it : items.v) {
    switch (it.kind) {
      case Kind::Int: {
        int64_t size = r.view.sizes()[d];
        STRATA_CHECK_INDEX(it.value >= -size && it.value < size, "index ", it.value,
                           " is out of bounds for dimension ", od, " with size ", size);
        r.view = select(r.view, d, it.value);
        od++;
        break;
      }
      case Kind::Slice: {
        // A full slice leaves the view unchanged: skip the op.
        if (!(it.start == 0 && it.stop == PY_SSIZE_T_MAX && it.step == 1)) {
          r.view = slice(r.view, d, int64_t(it.start), int64_t(it.stop), int64_t(it.step));
        }
        d++;
        od++;
        break;
      }
      case Kind::None:
        r.view = unsqueeze(r.view, d);
        d++;
        break;
      case Kind::Bool:
        r.view = unsqueeze(r.view, d);
        if (!it.value) r.view = slice(r.view, d, int64_t(0), int64_t(0), 1);
        d++;
        break;
      case Kind::Ellipsis:
        d += n - consumed;
        od += n - consumed;
        break;
      case Kind::Tensor: {
        int64_t c = is_mask(it.t) ? it.t.dim() : 1;
        r.adv.push_back(Adv{d, c, it.t});
        d += c;
        od += c;
        break;
      }
    }
  }
  return r;
}

// The tensor the index op runs on, its `dim` argument, and the index tensors.
struct AdvPlan {
  Tensor target;
  int64_t dim = 0;
  std::vector<Tensor> indices;
  int64_t result_dim = 0;
};

AdvPlan plan_advanced(Lowered& low) {
  AdvPlan p;
  bool adjacent = true;
  int64_t total = 0, bdims = 0;
  for (size_t i = 0; i < low.adv.size(); ++i) {
    const Adv& a = low.adv[i];
    if (i > 0) adjacent &= a.pos == low.adv[i - 1].pos + low.adv[i - 1].consumed;
    total += a.consumed;
    bdims = std::max<int64_t>(bdims, is_mask(a.t) ? 1 : a.t.dim());
    p.indices.push_back(a.t);
  }
  const int64_t n = low.view.dim();
  p.result_dim = n - total + bdims;
  if (adjacent) {
    p.target = low.view;
    p.dim = low.adv[0].pos;
    return p;
  }
  DimVector perm;
  std::vector<bool> used(n, false);
  for (const Adv& a : low.adv) {
    for (int64_t j = 0; j < a.consumed; ++j) {
      perm.push_back(a.pos + j);
      used[a.pos + j] = true;
    }
  }
  for (int64_t d = 0; d < n; ++d)
    if (!used[d]) perm.push_back(d);
  p.target = permute(low.view, perm);
  p.dim = 0;
  return p;
}

nb::object getitem(const Tensor& self, nb::handle idx) {
  PyObject* p = idx.ptr();
  // Fast paths: x[i] and x[a:b:c].
  if (PyLong_CheckExact(p) && self.dim() > 0) {
    int64_t i = py_to_int64(p);
    int64_t size = self.sizes()[0];
    STRATA_CHECK_INDEX(i >= -size && i < size, "index ", i, " is out of bounds for dimension 0 with size ", size);
    return wrap_tensor(select(self, 0, i));
  }
  if (PySlice_Check(p) && self.dim() > 0) {
    Py_ssize_t start, stop, step;
    if (PySlice_Unpack(p, &start, &stop, &step) != 0) throw nb::python_error();
    STRATA_CHECK_VALUE(step > 0, "step must be greater than zero");
    return wrap_tensor(slice(self, 0, int64_t(start), int64_t(stop), int64_t(step)));
  }
  Items items;
  collect(idx, items);
  Lowered low = lower_basic(self, items);
  if (low.adv.empty()) {
    // x[()], x[...], x[:]: a new tensor object that aliases self.
    if (low.view.is_same(self)) return wrap_tensor(alias(self));
    return wrap_tensor(std::move(low.view));
  }
  AdvPlan plan = plan_advanced(low);
  return wrap_tensor(index(plan.target, plan.indices, plan.dim));
}

// Value to assign, converted to a tensor (numbers to 0-d of self's dtype).
bool as_scalar(nb::handle h, Scalar* out) {
  PyObject* p = h.ptr();
  if (PyBool_Check(p)) return *out = Scalar(p == Py_True), true;
  if (PyLong_Check(p)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(p, &overflow);
    if (v == -1 && PyErr_Occurred()) throw nb::python_error();
    if (overflow) throw Error("value cannot be converted to int64 without overflow");
    return *out = Scalar(int64_t(v)), true;
  }
  if (PyFloat_Check(p)) return *out = Scalar(PyFloat_AS_DOUBLE(p)), true;
  if (nb::isinstance<Tensor>(h) || PySequence_Check(p) || nb::hasattr(h, "__array_interface__")) return false;
  if (PyIndex_Check(p)) {
    nb::object i = nb::steal(PyNumber_Index(p));
    if (!i.is_valid()) throw nb::python_error();
    return as_scalar(i, out);
  }
  if (PyObject_HasAttrString(p, "__float__")) {
    double d = PyFloat_AsDouble(p);
    if (d == -1.0 && PyErr_Occurred()) throw nb::python_error();
    return *out = Scalar(d), true;
  }
  return false;
}

// PyTorch drops leading size-1 dims of the value that the target lacks, so
// x[0] = y[None] works.
Tensor strip_leading_ones(Tensor v, int64_t ndim) {
  while (v.dim() > ndim && v.sizes()[0] == 1) v = select(v, 0, 0);
  return v;
}

void setitem(const Tensor& self, nb::handle idx, nb::handle value) {
  check_inplace_not_inference(*self.impl());  // an inference tensor outside inference mode (Note [Inference tensors])
  Scalar s;
  bool is_scalar = as_scalar(value, &s);
  Tensor vt;
  if (!is_scalar) {
    if (nb::isinstance<Tensor>(value)) {
      vt = nb::cast<Tensor>(value);
    } else if (value.is_none()) {
      throw TypeError("can't assign a NoneType to a " + self.describe());
    } else {
      ExcludeDispatchKeyGuard literal(DispatchKey::Tracer);
      vt = compile::adopt_literal(tensor_from_data(value, self.dtype(), std::nullopt));
    }
  }
  Tensor target;
  if (PyLong_CheckExact(idx.ptr()) && self.dim() > 0) {
    int64_t i = py_to_int64(idx.ptr());
    int64_t size = self.sizes()[0];
    STRATA_CHECK_INDEX(i >= -size && i < size, "index ", i, " is out of bounds for dimension 0 with size ", size);
    target = select(self, 0, i);
  } else {
    Items items;
    collect(idx, items);
    Lowered low = lower_basic(self, items);
    if (!low.adv.empty()) {
      AdvPlan plan = plan_advanced(low);
      if (is_scalar) {
        vt = compile::adopt_literal(scalar_to_tensor(s, self.dtype(), Device()));
      } else {
        vt = strip_leading_ones(to_dtype(vt, self.dtype()), plan.result_dim);
      }
      index_put_(plan.target, plan.indices, vt, false, plan.dim);
      return;
    }
    target = low.view;
  }
  if (is_scalar) {
    fill_(target, s);
  } else {
    // copy_ broadcasts only within the same number of dims: expand first.
    copy_(target, expand(strip_leading_ones(vt, target.dim()), target.sizes()));
  }
}

}  // namespace

void bind_indexing(nb::module_& m) {
  nb::object cls = m.attr("Tensor");
  cls.attr("__getitem__") =
      nb::cpp_function(&getitem, nb::is_method(), nb::name("__getitem__"), nb::arg("idx").none());
  cls.attr("__setitem__") = nb::cpp_function(&setitem, nb::is_method(), nb::name("__setitem__"),
                                             nb::arg("idx").none(), nb::arg("value").none());
  // Same operations as plain functions, for timing and for Python helpers.
  m.def("_getitem", &getitem, nb::arg("self"), nb::arg("idx").none());
  m.def("_setitem", &setitem, nb::arg("self"), nb::arg("idx").none(), nb::arg("value").none());
  // In-place view ops (transpose_, squeeze_, ...) re-point self at the
  // geometry of a view of itself.
  m.def("_set_geometry_from", [](const Tensor& self, const Tensor& view) {
    STRATA_CHECK(self.impl()->storage() == view.impl()->storage(),
                 "_set_geometry_from: the view does not share self's storage");
    self.impl()->set_geometry(DimVector(view.sizes().begin(), view.sizes().end()),
                              DimVector(view.strides().begin(), view.strides().end()), view.storage_offset());
  });
}

}  // namespace strata::py
