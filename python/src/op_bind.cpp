// Note [One generic binding]
// Python reaches every op through the same function: it parses the Python
// arguments against the op's schema (trying overloads in declaration order),
// builds a Stack, calls the dispatcher's boxed entry point, and converts the
// results. Nothing here is written per op; ops defined at run time (from
// another shared library) are bound the same way by _C._bind_op(name).
#include <Python.h>

#include <sstream>

#include "bind.h"

namespace strata::py {

namespace {

// Overload resolution runs twice: first without converting one-element tensors
// to numbers (so max(x, y) with a 0-d tensor y picks the tensor overload, as in
// torch), then, if nothing matched, with that conversion.
thread_local bool t_tensors_as_numbers = false;

bool is_index_like(nb::handle h) {
  return PyLong_Check(h.ptr()) || (!PyFloat_Check(h.ptr()) && PyIndex_Check(h.ptr()) && !nb::isinstance<Tensor>(h));
}

bool to_int(nb::handle h, int64_t* out) {
  if (PyBool_Check(h.ptr())) {
    *out = h.ptr() == Py_True;
    return true;
  }
  if (nb::isinstance<Tensor>(h)) {
    const Tensor& t = nb::cast<const Tensor&>(h);
    if (!t_tensors_as_numbers || t.numel() != 1 || !is_integral_type(t.dtype(), true)) return false;
    *out = t.item().to_int();
    return true;
  }
  if (!is_index_like(h)) return false;
  int overflow = 0;
  PyObject* idx = PyNumber_Index(h.ptr());
  if (!idx) {
    PyErr_Clear();
    return false;
  }
  long long v = PyLong_AsLongLongAndOverflow(idx, &overflow);
  Py_DECREF(idx);
  if (overflow) throw Error("Overflow when unpacking long: integer argument does not fit in int64");
  *out = v;
  return true;
}

bool to_double(nb::handle h, double* out) {
  if (PyFloat_Check(h.ptr())) {
    *out = PyFloat_AS_DOUBLE(h.ptr());
    return true;
  }
  int64_t i;
  if (to_int(h, &i)) {
    *out = static_cast<double>(i);
    return true;
  }
  if (nb::isinstance<Tensor>(h)) {
    const Tensor& t = nb::cast<const Tensor&>(h);
    if (!t_tensors_as_numbers || t.numel() != 1) return false;
    *out = t.item().to_double();
    return true;
  }
  if (PyObject_HasAttrString(h.ptr(), "__float__")) {
    double d = PyFloat_AsDouble(h.ptr());
    if (d == -1.0 && PyErr_Occurred()) {
      PyErr_Clear();
      return false;
    }
    *out = d;
    return true;
  }
  return false;
}

bool to_scalar(nb::handle h, Scalar* out) {
  if (PyBool_Check(h.ptr())) {
    *out = Scalar(h.ptr() == Py_True);
    return true;
  }
  if (PyFloat_Check(h.ptr())) {
    *out = Scalar(PyFloat_AS_DOUBLE(h.ptr()));
    return true;
  }
  if (nb::isinstance<Tensor>(h)) {
    const Tensor& t = nb::cast<const Tensor&>(h);
    if (!t_tensors_as_numbers || t.numel() != 1) return false;
    *out = t.item();
    return true;
  }
  int64_t i;
  if (is_index_like(h) && to_int(h, &i)) {
    *out = Scalar(i);
    return true;
  }
  double d;
  if (to_double(h, &d)) {
    *out = Scalar(d);
    return true;
  }
  return false;
}

bool to_int_list(nb::handle h, int list_size, std::vector<int64_t>* out) {
  int64_t v;
  if (!nb::isinstance<Tensor>(h) && to_int(h, &v)) {
    out->assign(list_size > 0 ? list_size : 1, v);
    return true;
  }
  if (!PyList_Check(h.ptr()) && !PyTuple_Check(h.ptr())) return false;
  nb::sequence seq = nb::borrow<nb::sequence>(h);
  size_t n = nb::len(seq);
  out->clear();
  out->reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (!to_int(seq[i], &v)) return false;
    out->push_back(v);
  }
  return true;
}

// Converts one Python value to the schema's type; false on a type mismatch.
bool convert_arg(const Argument& a, nb::handle h, IValue* out) {
  switch (a.type) {
    case ArgType::OptTensor:
      if (h.is_none()) return *out = IValue(), true;
      [[fallthrough]];
    case ArgType::Tensor:
      if (nb::isinstance<Tensor>(h)) return *out = IValue(nb::cast<Tensor>(h)), true;
      if (is_number(h)) return *out = IValue(wrap_number(h)), true;
      return false;
    case ArgType::TensorList: {
      if (!PyList_Check(h.ptr()) && !PyTuple_Check(h.ptr())) return false;
      std::vector<Tensor> v;
      for (nb::handle e : nb::borrow<nb::sequence>(h)) {
        if (!nb::isinstance<Tensor>(e)) return false;
        v.push_back(nb::cast<Tensor>(e));
      }
      return *out = IValue(std::move(v)), true;
    }
    case ArgType::OptScalar:
      if (h.is_none()) return *out = IValue(), true;
      [[fallthrough]];
    case ArgType::Scalar: {
      Scalar s;
      if (!to_scalar(h, &s)) return false;
      return *out = IValue(s), true;
    }
    case ArgType::OptInt:
      if (h.is_none()) return *out = IValue(), true;
      [[fallthrough]];
    case ArgType::Int: {
      int64_t v;
      if (PyFloat_Check(h.ptr()) || !to_int(h, &v)) return false;
      return *out = IValue(v), true;
    }
    case ArgType::OptIntList:
      if (h.is_none()) return *out = IValue(), true;
      [[fallthrough]];
    case ArgType::IntList: {
      std::vector<int64_t> v;
      if (!to_int_list(h, a.list_size, &v)) return false;
      return *out = IValue(std::move(v)), true;
    }
    case ArgType::OptFloat:
      if (h.is_none()) return *out = IValue(), true;
      [[fallthrough]];
    case ArgType::Float: {
      double d;
      if (!to_double(h, &d)) return false;
      return *out = IValue(d), true;
    }
    case ArgType::OptBool:
      if (h.is_none()) return *out = IValue(), true;
      [[fallthrough]];
    case ArgType::Bool:
      if (!PyBool_Check(h.ptr())) {
        if (!nb::hasattr(h, "__bool__") || PyLong_Check(h.ptr()) || PyFloat_Check(h.ptr())) return false;
        if (nb::isinstance<Tensor>(h)) return false;
        return *out = IValue(PyObject_IsTrue(h.ptr()) == 1), true;  // numpy.bool_
      }
      return *out = IValue(h.ptr() == Py_True), true;
    case ArgType::OptDType:
      if (h.is_none()) return *out = IValue(), true;
      [[fallthrough]];
    case ArgType::DType: {
      auto t = to_scalar_type(h);
      if (!t) return false;
      return *out = IValue(*t), true;
    }
    case ArgType::OptStr:
      if (h.is_none()) return *out = IValue(), true;
      [[fallthrough]];
    case ArgType::Str:
      if (!PyUnicode_Check(h.ptr())) return false;
      return *out = IValue(nb::cast<std::string>(h)), true;
    case ArgType::OptDevice: {
      if (h.is_none()) return *out = IValue(), true;
      auto d = to_device(h);
      if (!d) return false;
      return *out = IValue(*d), true;
    }
    default:
      return false;
  }
}

std::string py_type_name(nb::handle h) {
  if (nb::isinstance<Tensor>(h)) return "Tensor";
  return nb::cast<std::string>(nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(h.ptr()))).attr("__name__"));
}

struct Overloads {
  std::string name;
  std::vector<const OperatorEntry*> entries;
  std::vector<nb::object> result_types;  // namedtuple per entry, or None
};

// Fills `stack` for schema s from (args, kwargs). Returns an empty string on
// success, else why the arguments do not fit this overload.
std::string parse(const FunctionSchema& s, const nb::args& args, const nb::kwargs& kwargs, Stack& stack) {
  const size_t nargs = s.args.size();
  size_t npos_schema = 0;
  while (npos_schema < nargs && !s.args[npos_schema].kwarg_only) npos_schema++;
  size_t ngiven = args.size();
  std::vector<nb::handle> slots(nargs);
  nb::object packed;
  if (ngiven > npos_schema) {
    // Varargs for an int list, as in x.view(2, 3) or zeros(2, 3).
    if (npos_schema > 0 && (s.args[npos_schema - 1].type == ArgType::IntList ||
                            s.args[npos_schema - 1].type == ArgType::OptIntList)) {
      size_t first = npos_schema - 1;
      nb::list l;
      for (size_t i = first; i < ngiven; ++i) {
        if (!is_index_like(args[i])) return "too many positional arguments";
        l.append(args[i]);
      }
      packed = l;
      for (size_t i = 0; i < first; ++i) slots[i] = args[i];
      slots[first] = packed;
    } else {
      return str("takes ", npos_schema, " positional arguments but ", ngiven, " were given");
    }
  } else {
    for (size_t i = 0; i < ngiven; ++i) slots[i] = args[i];
  }
  if (kwargs.size() > 0) {
    size_t used = 0;
    for (size_t i = 0; i < nargs; ++i) {
      const char* nm = s.args[i].name.c_str();
      if (PyDict_Contains(kwargs.ptr(), nb::str(nm).ptr()) == 1) {
        if (slots[i].ptr()) return str("got multiple values for argument '", s.args[i].name, "'");
        slots[i] = kwargs[nm];
        used++;
      }
    }
    if (used != kwargs.size()) {
      for (auto [k, v] : kwargs) {
        std::string key = nb::cast<std::string>(k);
        bool known = false;
        for (const auto& a : s.args) known |= a.name == key;
        if (!known) return str("got an unexpected keyword argument '", key, "'");
      }
    }
  }
  stack.clear();
  stack.reserve(nargs + 1);
  for (size_t i = 0; i < nargs; ++i) {
    const Argument& a = s.args[i];
    if (!slots[i].ptr()) {
      if (!a.default_value) return str("missing required argument '", a.name, "' (", arg_type_name(a.type), ")");
      IValue d = *a.default_value;
      // int[2] stride=1 -> [1, 1]
      if (a.list_size > 1 && !d.is_none()) {
        const auto& l = d.to_int_list();
        if (l.size() == 1) d = IValue(std::vector<int64_t>(a.list_size, l[0]));
      }
      stack.push_back(std::move(d));
      continue;
    }
    IValue v;
    if (!convert_arg(a, slots[i], &v)) {
      return str("argument '", a.name, "' must be ", arg_type_name(a.type), ", not ", py_type_name(slots[i]));
    }
    stack.push_back(std::move(v));
  }
  return "";
}

nb::object results_to_python(const Overloads& ov, size_t which, Stack& stack) {
  const FunctionSchema& s = ov.entries[which]->schema();
  if (s.returns.size() == 1 && s.returns[0] == ArgType::TensorList) {
    nb::list l;
    for (const auto& t : stack.back().to_tensor_list()) l.append(wrap_tensor(t));
    return l;
  }
  size_t n = s.returns[0] == ArgType::TensorTuple2 ? 2 : s.returns[0] == ArgType::TensorTuple3 ? 3 : 1;
  if (n == 1) return wrap_tensor(std::move(stack.back().to_tensor()));
  nb::list items;
  for (size_t i = stack.size() - n; i < stack.size(); ++i) items.append(wrap_tensor(stack[i].to_tensor()));
  const nb::object& nt = ov.result_types[which];
  if (nt.is_valid() && !nt.is_none()) return nt(*nb::tuple(items));
  return nb::tuple(items);
}

nb::object call_overloads(const Overloads& ov, nb::args args, nb::kwargs kwargs) {
  Stack stack;
  std::vector<std::string> why;
  for (int pass = 0; pass < 2; ++pass) {
    t_tensors_as_numbers = pass == 1;
    for (size_t i = 0; i < ov.entries.size(); ++i) {
      std::string err = parse(ov.entries[i]->schema(), args, kwargs, stack);
      if (err.empty()) {
        t_tensors_as_numbers = false;
        call_boxed(*ov.entries[i], stack);
        // out= returns the very object passed in, as in torch.
        if (kwargs.size() > 0 && stack.size() == 1 && stack.back().is_tensor()) {
          PyObject* o = PyDict_GetItemString(kwargs.ptr(), "out");
          if (o && nb::isinstance<Tensor>(nb::handle(o)) &&
              nb::cast<const Tensor&>(nb::handle(o)).is_same(stack.back().to_tensor()))
            return nb::borrow(nb::handle(o));
        }
        return results_to_python(ov, i, stack);
      }
      if (pass == 1) why.push_back(std::move(err));
    }
  }
  t_tensors_as_numbers = false;
  std::ostringstream ss;
  ss << ov.name << "() received an invalid combination of arguments - got (";
  for (size_t i = 0; i < args.size(); ++i) ss << (i ? ", " : "") << py_type_name(args[i]);
  for (auto [k, v] : kwargs) ss << ", " << nb::cast<std::string>(k) << "=" << py_type_name(v);
  ss << "), but expected one of:";
  for (size_t i = 0; i < ov.entries.size(); ++i)
    ss << "\n * " << ov.entries[i]->schema().text << "\n      (" << why[i] << ")";
  throw TypeError(ss.str());
}

nb::object make_result_type(const FunctionSchema& s) {
  bool named = !s.return_names.empty();
  for (const auto& n : s.return_names) named = named && !n.empty();
  if (!named) return nb::none();
  nb::list fields;
  for (const auto& n : s.return_names) fields.append(nb::str(n.c_str()));
  return nb::module_::import_("collections").attr("namedtuple")(nb::str(("strata_return_types_" + s.name).c_str()),
                                                                 fields);
}

nb::object make_op_function(const std::string& name, bool as_method = false) {
  auto ov = std::make_shared<Overloads>();
  ov->name = name;
  for (auto* e : Dispatcher::get().overloads(name)) {
    ov->entries.push_back(e);
    ov->result_types.push_back(make_result_type(e->schema()));
  }
  STRATA_CHECK(!ov->entries.empty(), "_bind_op: no operator named '", name, "'");
  auto fn = [ov](nb::args args, nb::kwargs kwargs) { return call_overloads(*ov, args, kwargs); };
  // A method version binds `self` as the first positional argument.
  if (as_method) return nb::cpp_function(fn, nb::name(name.c_str()), nb::is_method());
  return nb::cpp_function(fn, nb::name(name.c_str()));
}

nb::dict schema_info(const OperatorEntry& e) {
  const FunctionSchema& s = e.schema();
  nb::dict d;
  d["name"] = s.name;
  d["overload"] = s.overload;
  d["schema"] = s.text;
  d["flags"] = e.flags();
  nb::list args;
  for (const auto& a : s.args) {
    nb::dict ad;
    ad["name"] = a.name;
    ad["type"] = arg_type_name(a.type);
    ad["kwarg_only"] = a.kwarg_only;
    ad["has_default"] = a.default_value.has_value();
    ad["is_write"] = a.is_write;
    args.append(ad);
  }
  d["args"] = args;
  return d;
}

}  // namespace

void bind_ops(nb::module_& m) {
  nb::module_ ops = m.def_submodule("_ops", "every dispatcher op, bound generically from its schema");
  auto& d = Dispatcher::get();
  for (size_t i = 0; i < d.num_ops(); ++i) {
    const std::string& name = d.op(static_cast<int>(i)).schema().name;
    if (!nb::hasattr(ops, name.c_str())) ops.attr(name.c_str()) = make_op_function(name);
  }
  m.def("_op_method", [](const std::string& name) { return make_op_function(name, true); });
  m.def("_bind_op", [ops](const std::string& name) {
    nb::object f = make_op_function(name);
    std::string attr = name;
    for (auto& c : attr)
      if (c == ':') c = '_';
    ops.attr(attr.c_str()) = f;
    return f;
  });
  m.def("_op_schemas", [] {
    nb::list l;
    auto& d = Dispatcher::get();
    for (size_t i = 0; i < d.num_ops(); ++i) l.append(schema_info(d.op(static_cast<int>(i))));
    return l;
  });
  m.def("_op_flags", [] {
    nb::dict f;
    f["pointwise"] = uint32_t(kPointwise);
    f["reduction"] = uint32_t(kReduction);
    f["differentiable"] = uint32_t(kDifferentiable);
    f["fusible"] = uint32_t(kFusible);
    f["view"] = uint32_t(kView);
    f["inplace"] = uint32_t(kInplace);
    f["factory"] = uint32_t(kFactory);
    f["composite"] = uint32_t(kComposite);
    f["random"] = uint32_t(kRandom);
    return f;
  });
}

}  // namespace strata::py
