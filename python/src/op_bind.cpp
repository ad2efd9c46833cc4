// Note [One generic binding]
// Python reaches every op through the same function: it parses the Python
// arguments against the op's schema (trying overloads in declaration order),
// builds a Stack, calls the dispatcher's boxed entry point, and converts the
// results. Nothing here is written per op; ops defined at run time (from
// another shared library) are bound the same way by _C._bind_op(name).
#include <Python.h>
#include <structmember.h>

#include <sstream>

#include "bind.h"
#include "core/deterministic.h"
#include "compile/graph.h"

namespace strata::py {

namespace {

// Overload resolution runs twice: first without converting one-element tensors
// to numbers (so max(x, y) with a 0-d tensor y picks the tensor overload, as in
// torch), then, if nothing matched, with that conversion.
thread_local bool t_tensors_as_numbers = false;

// Note [Symbolic ints in recorded nodes] (src/compile/graph.h): set by the
// capture while it records with symbolic sizes. Off, parse() pays one branch.
thread_local bool t_note_symints = false;

// The graph value an int subclass stands for (its _strata_vid), or -1.
int symint_vid(PyObject* o) {
  if (PyLong_CheckExact(o) || !PyLong_Check(o) || PyBool_Check(o)) return -1;
  PyObject* v = PyObject_GetAttrString(o, "_strata_vid");
  if (!v) {
    PyErr_Clear();
    return -1;
  }
  long r = PyLong_Check(v) ? PyLong_AsLong(v) : -1;
  Py_DECREF(v);
  if (r == -1 && PyErr_Occurred()) PyErr_Clear();
  return static_cast<int>(r);
}

void note_symints(PyObject* const* slots, size_t nargs) {
  auto& notes = compile::symint_notes();
  notes.clear();
  auto note = [&](PyObject* o, size_t i, int elem) {
    int vid = symint_vid(o);
    if (vid >= 0) notes.push_back({static_cast<int>(i), elem, vid, PyLong_AsLongLong(o)});
  };
  for (size_t i = 0; i < nargs; ++i) {
    PyObject* o = slots[i];
    if (!o) continue;
    if (PyList_Check(o) || PyTuple_Check(o)) {
      nb::sequence seq = nb::borrow<nb::sequence>(o);
      size_t n = nb::len(seq);
      for (size_t j = 0; j < n; ++j) note(nb::object(seq[j]).ptr(), i, static_cast<int>(j));
    } else {
      note(o, i, -1);
    }
  }
}

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
  if (PyComplex_Check(h.ptr())) {
    Py_complex c = PyComplex_AsCComplex(h.ptr());
    *out = Scalar(std::complex<double>(c.real, c.imag));
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

}  // namespace

bool set_note_symints(bool on) {
  bool prev = t_note_symints;
  t_note_symints = on;
  if (!on) compile::symint_notes().clear();
  return prev;
}

// Converts one Python value to the schema's type; false on a type mismatch.
// Declared in bind.h: Graph.add_node converts constants with it too.
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

namespace {

std::string py_type_name(nb::handle h) {
  if (nb::isinstance<Tensor>(h)) return "Tensor";
  return nb::cast<std::string>(nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(h.ptr()))).attr("__name__"));
}

// Note [Vectorcall entry]
// Each op is a small CPython object (op_function, or op_method for Tensor
// methods) called through vectorcall: positional arguments arrive as a C
// array and keyword names as a tuple, so no tuple/dict is built per call (as
// nanobind's `*args, **kwargs` functions do). The schema is digested once,
// at bind time, into an OverloadInfo per overload: interned keyword names,
// defaults already expanded, and the facts the fast path needs. Behaviour is
// that of the old nanobind function: same resolution order, same messages.
//
// Fast path: every argument is positional and a Tensor. In the first pass of
// resolution a Tensor converts only to a `Tensor`/`Tensor?` parameter (every
// other kind rejects it while t_tensors_as_numbers is off), so the overload
// that pass would pick is exactly the first one whose leading parameters are
// Tensors and whose remaining ones all have defaults. Anything else (keywords,
// numbers, no such overload) takes the general path.

struct ArgInfo {
  const Argument* arg;
  nb::object name;             // interned: call sites intern their keywords, so lookup is a pointer compare
  std::optional<IValue> dflt;  // int[N] defaults already repeated N times
};

struct OverloadInfo {
  const OperatorEntry* entry;
  std::vector<ArgInfo> args;
  size_t npos = 0;           // parameters that may be passed positionally
  size_t tensor_prefix = 0;  // leading positional Tensor/Tensor? parameters
  size_t required_end = 0;   // every parameter from here on has a default
  bool varargs = false;      // the last positional parameter is int[]/int[]?: x.view(2, 3)
  int nret = 1;              // tensors returned; -1 for Tensor[]
  nb::object result_type;    // namedtuple type, or None
  std::vector<int> write_args;  // parameters the op writes (self of an in-place op, out=)
};

struct Overloads {
  std::string name;          // the op's name, as error messages give it
  std::string display_name;  // __name__: "add", or "add_" for the in-place method
  std::vector<OverloadInfo> ov;
};

PyTypeObject* g_tensor_type = nullptr;

inline bool is_tensor_obj(PyObject* o) {
  PyTypeObject* t = Py_TYPE(o);
  return (t == g_tensor_type || PyType_IsSubtype(t, g_tensor_type)) && nb::inst_ready(nb::handle(o));
}

// Position of keyword `name` in kwnames, or -1. Names from a `**dict` need not
// be interned, hence the second loop.
Py_ssize_t find_kw(PyObject* kwnames, PyObject* name) {
  Py_ssize_t n = PyTuple_GET_SIZE(kwnames);
  for (Py_ssize_t j = 0; j < n; ++j)
    if (PyTuple_GET_ITEM(kwnames, j) == name) return j;
  for (Py_ssize_t j = 0; j < n; ++j)
    if (PyUnicode_Compare(PyTuple_GET_ITEM(kwnames, j), name) == 0) return j;
  return -1;
}

// Fills `stack` for overload o from the vectorcall arguments (positional
// args[0, ngiven), keyword values after them, named by kwnames). Returns an
// empty string on success, else why the arguments do not fit this overload.
std::string parse(const OverloadInfo& o, PyObject* const* args, size_t ngiven, PyObject* kwnames, Stack& stack) {
  const size_t nargs = o.args.size();
  PyObject* slots_inline[16];
  std::vector<PyObject*> slots_heap;
  PyObject** slots = slots_inline;
  if (nargs > 16) {
    slots_heap.resize(nargs);
    slots = slots_heap.data();
  }
  std::fill(slots, slots + nargs, nullptr);
  nb::object packed;
  if (ngiven > o.npos) {
    if (!o.varargs) return str("takes ", o.npos, " positional arguments but ", ngiven, " were given");
    size_t first = o.npos - 1;
    nb::list l;
    for (size_t i = first; i < ngiven; ++i) {
      if (!is_index_like(args[i])) return "too many positional arguments";
      l.append(nb::handle(args[i]));
    }
    packed = l;
    for (size_t i = 0; i < first; ++i) slots[i] = args[i];
    slots[first] = packed.ptr();
  } else {
    for (size_t i = 0; i < ngiven; ++i) slots[i] = args[i];
  }
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  if (nkw > 0) {
    Py_ssize_t used = 0;
    for (size_t i = 0; i < nargs; ++i) {
      Py_ssize_t j = find_kw(kwnames, o.args[i].name.ptr());
      if (j < 0) continue;
      if (slots[i]) return str("got multiple values for argument '", o.args[i].arg->name, "'");
      slots[i] = args[ngiven + j];
      used++;
    }
    if (used != nkw) {
      for (Py_ssize_t j = 0; j < nkw; ++j) {
        std::string key = nb::cast<std::string>(nb::handle(PyTuple_GET_ITEM(kwnames, j)));
        bool known = false;
        for (const auto& a : o.args) known |= a.arg->name == key;
        if (!known) return str("got an unexpected keyword argument '", key, "'");
      }
    }
  }
  stack.clear();
  stack.reserve(std::max<size_t>(nargs, 3));
  for (size_t i = 0; i < nargs; ++i) {
    const Argument& a = *o.args[i].arg;
    if (!slots[i]) {
      if (!o.args[i].dflt) return str("missing required argument '", a.name, "' (", arg_type_name(a.type), ")");
      stack.push_back(*o.args[i].dflt);
      continue;
    }
    IValue v;
    if (!convert_arg(a, slots[i], &v)) {
      return str("argument '", a.name, "' must be ", arg_type_name(a.type), ", not ", py_type_name(slots[i]));
    }
    stack.push_back(std::move(v));
  }
  if (t_note_symints) note_symints(slots, nargs);
  return "";
}

// wrap_tensor() without nb::cast's lookups (the C++ type's Python type, an
// existing instance at the temporary's address): the type is known.
nb::object wrap_result(Tensor&& t) {
  nb::object o = nb::inst_alloc(nb::handle(reinterpret_cast<PyObject*>(g_tensor_type)));
  new (nb::inst_ptr<Tensor>(o)) Tensor(std::move(t));
  nb::inst_mark_ready(o);
  return o;
}

// An op may leave an output undefined (an absent gradient, say): Python sees None.
nb::object wrap_result_or_none(Tensor&& t) { return t.defined() ? wrap_result(std::move(t)) : nb::none(); }

nb::object results_to_python(const OverloadInfo& o, Stack& stack) {
  if (o.nret == 1) return wrap_result_or_none(std::move(stack.back().to_tensor()));
  if (o.nret == -1) {
    nb::list l;
    for (const auto& t : stack.back().to_tensor_list()) l.append(t.defined() ? wrap_tensor(t) : nb::none());
    return l;
  }
  size_t n = static_cast<size_t>(o.nret);
  nb::tuple items = nb::steal<nb::tuple>(PyTuple_New(static_cast<Py_ssize_t>(n)));
  for (size_t i = 0; i < n; ++i)
    PyTuple_SET_ITEM(items.ptr(), i,
                     wrap_result_or_none(std::move(stack[stack.size() - n + i].to_tensor())).release().ptr());
  if (o.result_type.is_valid() && !o.result_type.is_none()) return o.result_type(*items);
  return items;
}

// Note [Pooled stacks]
// Each op call needs a Stack; a new vector is a heap allocation and a free per
// call. A thread keeps a few stacks whose capacity survives between calls, one
// per nesting level (an op can call back into Python, e.g. an autograd
// Function or a hook, which calls ops again); deeper levels use a fresh one.
class PooledStack {
 public:
  PooledStack() {
    if (t_depth < kPooled) {
      stack_ = &t_pool[t_depth];
    } else {
      stack_ = &own_;
    }
    ++t_depth;
  }
  ~PooledStack() {
    stack_->clear();
    --t_depth;
  }
  PooledStack(const PooledStack&) = delete;
  PooledStack& operator=(const PooledStack&) = delete;
  Stack& get() { return *stack_; }

 private:
  static constexpr int kPooled = 4;
  static thread_local Stack t_pool[kPooled];
  static thread_local int t_depth;
  Stack* stack_;
  Stack own_;
};
thread_local Stack PooledStack::t_pool[PooledStack::kPooled];
thread_local int PooledStack::t_depth = 0;

// Note [Releasing the GIL]
// An op's kernel runs without the GIL, as in torch, so that other Python
// threads (running ops of their own, say) go on meanwhile. Dropping and
// re-taking the GIL costs ~100-200 ns, a fifth of a tiny op's whole call
// (docs/BINDING.md), so it is dropped only when the op has enough elements to
// touch for that to be noise: the tensor arguments' elements, or for a factory
// the product of a size list. Views never touch elements and keep the GIL.
// Code that runs under an op and calls back into Python (tensor and node
// hooks, a Function's backward, the profiler's and anomaly mode's stack hooks,
// the release of a NumPy array's memory) takes the GIL itself.
constexpr int64_t kGilReleaseElements = int64_t{1} << 15;

bool worth_releasing_gil(const OverloadInfo& o, const Stack& stack) {
  if (o.entry->flags() & kView) return false;
  int64_t n = 0;
  for (const IValue& v : stack) {
    const IValue::Storage& r = v.raw();
    if (const Tensor* t = std::get_if<Tensor>(&r)) {
      if (t->defined()) n += t->numel();
    } else if (const auto* l = std::get_if<std::vector<Tensor>>(&r)) {
      for (const Tensor& t : *l)
        if (t.defined()) n += t.numel();
    } else if (const auto* sizes = std::get_if<std::vector<int64_t>>(&r)) {
      int64_t p = 1;
      for (int64_t s : *sizes) {
        p *= std::max<int64_t>(s, 0);
        if (p >= kGilReleaseElements || p == 0) break;
      }
      n += p;
    }
    if (n >= kGilReleaseElements) return true;
  }
  return false;
}

// call_boxed, with the GIL released when worth it. An op that writes an
// inference tensor outside inference mode is refused first (Note [Inference tensors]).
inline void run_op(const OverloadInfo& o, Stack& stack) {
  if (!o.write_args.empty()) [[unlikely]] {
    const size_t base = stack.size() - o.args.size();
    for (int i : o.write_args) {
      const IValue& v = stack[base + i];
      if (v.is_tensor() && v.to_tensor().defined()) check_inplace_not_inference(*v.to_tensor().impl());
    }
  }
  if (worth_releasing_gil(o, stack)) {
    PyThreadState* ts = PyEval_SaveThread();
    try {
      call_boxed(*o.entry, stack);
    } catch (...) {
      PyEval_RestoreThread(ts);
      throw;
    }
    PyEval_RestoreThread(ts);
  } else {
    call_boxed(*o.entry, stack);
  }
}

// Note [out= of ops without an out argument]
// torch takes out= for many ops whose strata schema has none (reductions such
// as mean/amax/all, the (values, indices) ops, quantile...). When no overload
// parses and the call has an `out` keyword that no overload declares, the
// binding hands the call to strata._out.fallback(name, args, kwargs, out)
// (set by _C._set_out_fallback): it runs the op without out= and writes the
// result into out with torch's dtype and resize rules for that op, or returns
// NotImplemented (the op takes no out= in torch either) and the usual
// TypeError follows. Only calls that failed to parse get here: the ordinary
// path does no extra work.
PyObject* g_out_fallback = nullptr;

nb::object out_fallback(const Overloads& ov, PyObject* const* args, size_t nargs, PyObject* kwnames) {
  static PyObject* out_name = PyUnicode_InternFromString("out");
  Py_ssize_t j = find_kw(kwnames, out_name);
  if (j < 0) return nb::object();
  for (const OverloadInfo& o : ov.ov)
    for (const auto& a : o.args)
      if (a.arg->name == "out") return nb::object();
  nb::tuple pos = nb::steal<nb::tuple>(PyTuple_New(static_cast<Py_ssize_t>(nargs)));
  for (size_t i = 0; i < nargs; ++i) PyTuple_SET_ITEM(pos.ptr(), i, Py_NewRef(args[i]));
  nb::dict kw;
  Py_ssize_t nkw = PyTuple_GET_SIZE(kwnames);
  for (Py_ssize_t k = 0; k < nkw; ++k)
    if (k != j) kw[nb::handle(PyTuple_GET_ITEM(kwnames, k))] = nb::handle(args[nargs + k]);
  nb::object r = nb::handle(g_out_fallback)(nb::str(ov.name.c_str()), pos, kw, nb::handle(args[nargs + j]));
  if (r.ptr() == Py_NotImplemented) return nb::object();
  return r;
}

nb::object call_general(const Overloads& ov, PyObject* const* args, size_t nargs, PyObject* kwnames) {
  PooledStack pooled;
  Stack& stack = pooled.get();
  std::vector<std::string> why;
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (int pass = 0; pass < 2; ++pass) {
    t_tensors_as_numbers = pass == 1;
    for (const OverloadInfo& o : ov.ov) {
      std::string err = parse(o, args, nargs, kwnames, stack);
      if (err.empty()) {
        t_tensors_as_numbers = false;
        run_op(o, stack);
        // out= returns the very object passed in, as in torch.
        if (nkw > 0 && stack.size() == 1 && stack.back().is_tensor()) {
          static PyObject* out_name = PyUnicode_InternFromString("out");
          Py_ssize_t j = find_kw(kwnames, out_name);
          PyObject* out = j >= 0 ? args[nargs + j] : nullptr;
          if (out && nb::isinstance<Tensor>(nb::handle(out)) &&
              nb::cast<const Tensor&>(nb::handle(out)).is_same(stack.back().to_tensor()))
            return nb::borrow(nb::handle(out));
        }
        return results_to_python(o, stack);
      }
      if (pass == 1) why.push_back(std::move(err));
    }
  }
  t_tensors_as_numbers = false;
  if (nkw > 0 && g_out_fallback) {
    nb::object r = out_fallback(ov, args, nargs, kwnames);
    if (r.is_valid()) return r;
  }
  std::ostringstream ss;
  ss << ov.name << "() received an invalid combination of arguments - got (";
  for (size_t i = 0; i < nargs; ++i) ss << (i ? ", " : "") << py_type_name(args[i]);
  for (Py_ssize_t j = 0; j < nkw; ++j)
    ss << ", " << nb::cast<std::string>(nb::handle(PyTuple_GET_ITEM(kwnames, j))) << "="
       << py_type_name(args[nargs + j]);
  ss << "), but expected one of:";
  for (size_t i = 0; i < ov.ov.size(); ++i)
    ss << "\n * " << ov.ov[i].entry->schema().text << "\n      (" << why[i] << ")";
  throw TypeError(ss.str());
}

// C++ exceptions become Python ones exactly as in any nanobind function (the
// translators registered in module.cpp, nanobind's own, python_error): the
// exception is rethrown inside a nanobind function, which translates it.
thread_local std::exception_ptr t_pending_exception;
PyObject* g_rethrow = nullptr;

PyObject* raise_current_exception() {
  t_pending_exception = std::current_exception();
  Py_XDECREF(PyObject_CallNoArgs(g_rethrow));
  return nullptr;
}

struct OpFunction {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  Overloads* ov;
};

PyObject* call_op(const Overloads& ov, PyObject* const* args, size_t n, PyObject* kwnames) {
  try {
    if (!kwnames || PyTuple_GET_SIZE(kwnames) == 0) {
      bool all_tensors = true;
      for (size_t i = 0; i < n && all_tensors; ++i) all_tensors = is_tensor_obj(args[i]);
      if (all_tensors) {
        for (const OverloadInfo& o : ov.ov) {
          if (n > o.tensor_prefix || n < o.required_end) continue;  // the first pass would reject it
          PooledStack pooled;
          Stack& stack = pooled.get();
          stack.reserve(std::max<size_t>(o.args.size(), 3));
          for (size_t i = 0; i < n; ++i) stack.emplace_back(*nb::inst_ptr<Tensor>(nb::handle(args[i])));
          for (size_t i = n; i < o.args.size(); ++i) stack.push_back(*o.args[i].dflt);
          run_op(o, stack);
          return results_to_python(o, stack).release().ptr();
        }
      }
    }
    return call_general(ov, args, n, kwnames).release().ptr();
  } catch (...) {
    t_tensors_as_numbers = false;
    return raise_current_exception();
  }
}

PyObject* op_vectorcall(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  return call_op(*reinterpret_cast<OpFunction*>(self)->ov, args, PyVectorcall_NARGS(nargsf), kwnames);
}

// Tensor.<op>_ for an op with out=: self.<op>_(*args, **kwargs) calls the op
// as op(self, *args, out=self, **kwargs) and returns self (what the Python
// wrapper in _tensor.py did, without its frame and its tuple and dict).
PyObject* op_inplace_vectorcall(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  const Overloads& ov = *reinterpret_cast<OpFunction*>(self)->ov;
  const size_t n = PyVectorcall_NARGS(nargsf);
  if (n == 0) {
    PyErr_Format(PyExc_TypeError, "%s() missing 1 required positional argument: 'self'", ov.display_name.c_str());
    return nullptr;
  }
  static PyObject* out_name = PyUnicode_InternFromString("out");
  static PyObject* out_only = PyTuple_Pack(1, out_name);
  const Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  if (nkw > 0 && find_kw(kwnames, out_name) >= 0) {
    PyErr_Format(PyExc_TypeError, "strata._C.%s() got multiple values for keyword argument 'out'", ov.name.c_str());
    return nullptr;
  }
  PyObject* buf_inline[16];
  std::vector<PyObject*> buf_heap;
  PyObject** buf = buf_inline;
  if (n + nkw + 1 > 16) {
    buf_heap.resize(n + nkw + 1);
    buf = buf_heap.data();
  }
  std::copy(args, args + n, buf);
  buf[n] = args[0];  // out=self comes first among the keywords, as in op(self, *args, out=self, **kwargs)
  std::copy(args + n, args + n + nkw, buf + n + 1);
  nb::object names;
  PyObject* kw = out_only;
  if (nkw > 0) {
    names = nb::steal(PyTuple_New(nkw + 1));
    if (!names.is_valid()) return nullptr;
    PyTuple_SET_ITEM(names.ptr(), 0, Py_NewRef(out_name));
    for (Py_ssize_t j = 0; j < nkw; ++j) PyTuple_SET_ITEM(names.ptr(), j + 1, Py_NewRef(PyTuple_GET_ITEM(kwnames, j)));
    kw = names.ptr();
  }
  PyObject* r = call_op(ov, buf, n, kw);
  if (!r) return nullptr;
  Py_DECREF(r);
  return Py_NewRef(args[0]);
}

// Tensor.__eq__/__ne__/__lt__/__le__/__gt__/__ge__: the op for a Tensor or a
// number (or anything with __float__), NotImplemented for anything else (None,
// strings, lists...), so that Python falls back to the reflected comparison or
// identity, as for torch tensors.
PyObject* op_compare_vectorcall(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  const Overloads& ov = *reinterpret_cast<OpFunction*>(self)->ov;
  const size_t n = PyVectorcall_NARGS(nargsf);
  if (n != 2 || (kwnames && PyTuple_GET_SIZE(kwnames) > 0)) {
    PyErr_Format(PyExc_TypeError, "%s() takes 2 positional arguments (self, other)", ov.display_name.c_str());
    return nullptr;
  }
  PyObject* other = args[1];
  bool comparable = other != Py_None && (PyObject_TypeCheck(other, g_tensor_type) || PyLong_Check(other) ||
                                         PyFloat_Check(other));
  if (!comparable && other != Py_None) {
    static PyObject* float_name = PyUnicode_InternFromString("__float__");
    PyObject* attr = PyObject_GetAttr(other, float_name);  // hasattr(): only AttributeError means "no"
    if (attr) {
      Py_DECREF(attr);
      comparable = true;
    } else if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
      PyErr_Clear();
    } else {
      return nullptr;
    }
  }
  if (!comparable) Py_RETURN_NOTIMPLEMENTED;
  return call_op(ov, args, 2, nullptr);
}

// Tensor.__rsub__ etc.: self.__rsub__(other) is sub(other, self).
PyObject* op_reflected_vectorcall(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  const Overloads& ov = *reinterpret_cast<OpFunction*>(self)->ov;
  if (PyVectorcall_NARGS(nargsf) != 2 || (kwnames && PyTuple_GET_SIZE(kwnames) > 0)) {
    PyErr_Format(PyExc_TypeError, "%s() takes 2 positional arguments (self, other)", ov.display_name.c_str());
    return nullptr;
  }
  PyObject* swapped[2] = {args[1], args[0]};
  return call_op(ov, swapped, 2, nullptr);
}

// Tensor.__add__ and the other binary operators: a TypeError (an operand the
// op does not take) becomes NotImplemented, so that Python tries the other
// operand's reflected method and otherwise raises its own "unsupported operand
// type(s)" error, as torch's operators do. `a.add(x)` keeps the TypeError.
PyObject* not_implemented_on_type_error(PyObject* r) {
  if (r || !PyErr_ExceptionMatches(PyExc_TypeError)) return r;
  PyErr_Clear();
  Py_RETURN_NOTIMPLEMENTED;
}
PyObject* op_operator_vectorcall(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  return not_implemented_on_type_error(op_vectorcall(self, args, nargsf, kwnames));
}
PyObject* op_reflected_operator_vectorcall(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  return not_implemented_on_type_error(op_reflected_vectorcall(self, args, nargsf, kwnames));
}

void op_dealloc(PyObject* self) {
  PyTypeObject* tp = Py_TYPE(self);
  delete reinterpret_cast<OpFunction*>(self)->ov;
  PyObject_Free(self);
  Py_DECREF(tp);
}

PyObject* op_get_name(PyObject* self, void*) {
  return PyUnicode_FromString(reinterpret_cast<OpFunction*>(self)->ov->display_name.c_str());
}

PyObject* op_get_doc(PyObject* self, void*) {
  std::string doc;
  for (const auto& o : reinterpret_cast<OpFunction*>(self)->ov->ov)
    doc += (doc.empty() ? "" : "\n") + o.entry->schema().text;
  return PyUnicode_FromString(doc.c_str());
}

PyObject* op_repr(PyObject* self) {
  const char* kind = Py_TYPE(self)->tp_descr_get ? "op method" : "op function";
  return PyUnicode_FromFormat("<%s %s>", kind, reinterpret_cast<OpFunction*>(self)->ov->display_name.c_str());
}

// An op_method behaves like a Python function in a class: bound on instance
// access, itself on class access. With Py_TPFLAGS_METHOD_DESCRIPTOR,
// `a.add(b)` and `a + b` skip the bound-method object and call with self first.
PyObject* op_descr_get(PyObject* self, PyObject* obj, PyObject*) {
  if (obj == nullptr || obj == Py_None) return Py_NewRef(self);
  return PyMethod_New(self, obj);
}

PyGetSetDef op_getset[] = {
    {"__name__", op_get_name, nullptr, nullptr, nullptr},
    {"__qualname__", op_get_name, nullptr, nullptr, nullptr},
    {"__doc__", op_get_doc, nullptr, nullptr, nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyMemberDef op_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, static_cast<Py_ssize_t>(offsetof(OpFunction, vectorcall)), READONLY,
     nullptr},
    {nullptr, 0, 0, 0, nullptr},
};

PyTypeObject* make_op_type(const char* name, bool method) {
  std::vector<PyType_Slot> slots = {
      {Py_tp_dealloc, reinterpret_cast<void*>(op_dealloc)},
      {Py_tp_call, reinterpret_cast<void*>(PyVectorcall_Call)},
      {Py_tp_repr, reinterpret_cast<void*>(op_repr)},
      {Py_tp_getset, op_getset},
      {Py_tp_members, op_members},
  };
  if (method) slots.push_back({Py_tp_descr_get, reinterpret_cast<void*>(op_descr_get)});
  slots.push_back({0, nullptr});
  unsigned flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_DISALLOW_INSTANTIATION;
  if (method) flags |= Py_TPFLAGS_METHOD_DESCRIPTOR;
  PyType_Spec spec = {name, sizeof(OpFunction), 0, flags, slots.data()};
  PyObject* t = PyType_FromSpec(&spec);
  if (!t) throw nb::python_error();
  return reinterpret_cast<PyTypeObject*>(t);
}

PyTypeObject* g_function_type = nullptr;
PyTypeObject* g_method_type = nullptr;

nb::object make_result_type(const FunctionSchema& s) {
  bool named = !s.return_names.empty();
  for (const auto& n : s.return_names) named = named && !n.empty();
  if (!named) return nb::none();
  nb::list fields;
  for (const auto& n : s.return_names) fields.append(nb::str(n.c_str()));
  return nb::module_::import_("collections").attr("namedtuple")(nb::str(("strata_return_types_" + s.name).c_str()),
                                                                 fields);
}

enum class OpKind {
  Function, Method, InplaceMethod, ComparisonMethod, ReflectedMethod, OperatorMethod, ReflectedOperatorMethod
};

nb::object make_op_function(const std::string& name, OpKind kind = OpKind::Function) {
  auto ov = std::make_unique<Overloads>();
  ov->name = name;
  ov->display_name = kind == OpKind::InplaceMethod ? name + "_" : name;
  for (auto* e : Dispatcher::get().overloads(name)) {
    const FunctionSchema& s = e->schema();
    OverloadInfo o;
    o.entry = e;
    for (const Argument& a : s.args) {
      ArgInfo ai{&a, nb::steal(PyUnicode_InternFromString(a.name.c_str())), a.default_value};
      // int[2] stride=1 -> [1, 1]
      if (ai.dflt && a.list_size > 1 && !ai.dflt->is_none()) {
        const auto& l = ai.dflt->to_int_list();
        if (l.size() == 1) ai.dflt = IValue(std::vector<int64_t>(a.list_size, l[0]));
      }
      o.args.push_back(std::move(ai));
    }
    while (o.npos < s.args.size() && !s.args[o.npos].kwarg_only) o.npos++;
    o.varargs = o.npos > 0 && (s.args[o.npos - 1].type == ArgType::IntList ||
                               s.args[o.npos - 1].type == ArgType::OptIntList);
    while (o.tensor_prefix < o.npos && (s.args[o.tensor_prefix].type == ArgType::Tensor ||
                                        s.args[o.tensor_prefix].type == ArgType::OptTensor))
      o.tensor_prefix++;
    for (size_t i = 0; i < s.args.size(); ++i)
      if (!s.args[i].default_value) o.required_end = i + 1;
    if (s.returns.size() == 1 && s.returns[0] == ArgType::TensorList) o.nret = -1;
    else if (!s.returns.empty() && s.returns[0] == ArgType::TensorTuple2) o.nret = 2;
    else if (!s.returns.empty() && s.returns[0] == ArgType::TensorTuple3) o.nret = 3;
    o.result_type = make_result_type(s);
    for (size_t i = 0; i < s.args.size(); ++i)
      if (s.args[i].is_write) o.write_args.push_back(static_cast<int>(i));
    ov->ov.push_back(std::move(o));
  }
  STRATA_CHECK(!ov->ov.empty(), "_bind_op: no operator named '", name, "'");
  auto* f = PyObject_New(OpFunction, kind == OpKind::Function ? g_function_type : g_method_type);
  if (!f) throw nb::python_error();
  f->vectorcall = kind == OpKind::InplaceMethod      ? op_inplace_vectorcall
                  : kind == OpKind::ComparisonMethod ? op_compare_vectorcall
                  : kind == OpKind::ReflectedMethod  ? op_reflected_vectorcall
                  : kind == OpKind::OperatorMethod   ? op_operator_vectorcall
                  : kind == OpKind::ReflectedOperatorMethod ? op_reflected_operator_vectorcall
                                                     : op_vectorcall;
  f->ov = ov.release();
  return nb::steal(reinterpret_cast<PyObject*>(f));
}

// Note [Operator slots]
// `a + b` reaches Tensor.__add__ through CPython's generic slot for classes
// that define __add__ in Python (slot_nb_add: a method-cache lookup of
// "__add__", then a vectorcall). Tensor's own number slots call the op
// directly for the common case, two plain Tensors. Every other case follows
// the generic slot's protocol, written out here because CPython's version
// only calls __add__ when the slot is its own: the left operand's __add__
// when it is a Tensor (of any subclass), else the right one's __radd__, and
// then the right one's __radd__ when __add__ gave NotImplemented and the right
// operand's type shares this slot (otherwise CPython calls that type's slot
// itself). Assigning Tensor.__add__ again (profiler.explain does, for a while)
// makes CPython put its generic slot back: still correct, only without the
// shortcut until _install_operator_slots runs again.
struct FastSlot {
  const Overloads* ov = nullptr;
  binaryfunc self_slot = nullptr;
  PyObject* name = nullptr;    // "__add__"
  PyObject* rname = nullptr;   // "__radd__"
  size_t offset = 0;           // of the slot in PyNumberMethods
};
FastSlot g_fast_slots[5];

// type(self).<name>(self, other), looked up on the type as the operator
// protocol does (an instance attribute never counts); NotImplemented if absent.
PyObject* call_type_dunder(PyObject* self, PyObject* name, PyObject* other) {
  PyObject* f = PyObject_GetAttr(reinterpret_cast<PyObject*>(Py_TYPE(self)), name);
  if (!f) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return nullptr;
    PyErr_Clear();
    Py_RETURN_NOTIMPLEMENTED;
  }
  PyObject* args[2] = {self, other};
  PyObject* r = PyObject_Vectorcall(f, args, 2, nullptr);
  Py_DECREF(f);
  return r;
}

template <int I>
PyObject* fast_binary_slot(PyObject* a, PyObject* b) {
  const FastSlot& s = g_fast_slots[I];
  if (Py_TYPE(a) == g_tensor_type && Py_TYPE(b) == g_tensor_type) {
    PyObject* args[2] = {a, b};
    return not_implemented_on_type_error(call_op(*s.ov, args, 2, nullptr));
  }
  if (!PyObject_TypeCheck(a, g_tensor_type)) return call_type_dunder(b, s.rname, a);
  PyObject* r = call_type_dunder(a, s.name, b);
  if (r != Py_NotImplemented || Py_TYPE(a) == Py_TYPE(b)) return r;
  PyNumberMethods* nb = Py_TYPE(b)->tp_as_number;
  if (nb && *reinterpret_cast<binaryfunc*>(reinterpret_cast<char*>(nb) + s.offset) == &fast_binary_slot<I>) {
    Py_DECREF(r);
    return call_type_dunder(b, s.rname, a);
  }
  return r;
}

// Returns how many slots now take the shortcut.
int install_operator_slots() {
  PyNumberMethods* nm = g_tensor_type->tp_as_number;
  if (!nm) return 0;
  struct Entry {
    const char* name;
    const char* rname;
    size_t offset;
    binaryfunc fast;
  };
  const Entry entries[5] = {
      {"__add__", "__radd__", offsetof(PyNumberMethods, nb_add), fast_binary_slot<0>},
      {"__sub__", "__rsub__", offsetof(PyNumberMethods, nb_subtract), fast_binary_slot<1>},
      {"__mul__", "__rmul__", offsetof(PyNumberMethods, nb_multiply), fast_binary_slot<2>},
      {"__truediv__", "__rtruediv__", offsetof(PyNumberMethods, nb_true_divide), fast_binary_slot<3>},
      {"__matmul__", "__rmatmul__", offsetof(PyNumberMethods, nb_matrix_multiply), fast_binary_slot<4>},
  };
  int installed = 0;
  for (int i = 0; i < 5; ++i) {
    const Entry& e = entries[i];
    FastSlot& fs = g_fast_slots[i];
    if (!fs.name) {
      fs.name = PyUnicode_InternFromString(e.name);
      fs.rname = PyUnicode_InternFromString(e.rname);
      fs.offset = e.offset;
    }
    PyObject* m = PyDict_GetItemWithError(g_tensor_type->tp_dict, fs.name);  // borrowed
    if (!m && PyErr_Occurred()) throw nb::python_error();
    // Only the operator method (the op, NotImplemented on a TypeError) is what the generic slot would call.
    if (!m || Py_TYPE(m) != g_method_type || reinterpret_cast<OpFunction*>(m)->vectorcall != op_operator_vectorcall)
      continue;
    fs.ov = reinterpret_cast<OpFunction*>(m)->ov;
    *reinterpret_cast<binaryfunc*>(reinterpret_cast<char*>(nm) + e.offset) = e.fast;
    installed++;
  }
  return installed;
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

PyObject* raise_as_python_error() { return raise_current_exception(); }
nb::object wrap_new_tensor(Tensor&& t) { return wrap_result_or_none(std::move(t)); }
bool is_tensor_object(PyObject* o) { return is_tensor_obj(o); }

void bind_ops(nb::module_& m) {
  nb::module_ ops = m.def_submodule("_ops", "every dispatcher op, bound generically from its schema");
  g_tensor_type = reinterpret_cast<PyTypeObject*>(nb::type<Tensor>().ptr());
  g_function_type = make_op_type("strata._C.op_function", false);
  g_method_type = make_op_type("strata._C.op_method", true);
  m.attr("op_function") = nb::handle(reinterpret_cast<PyObject*>(g_function_type));
  m.attr("op_method") = nb::handle(reinterpret_cast<PyObject*>(g_method_type));
  g_rethrow = nb::cpp_function([] {
                std::exception_ptr p = std::move(t_pending_exception);
                t_pending_exception = nullptr;
                std::rethrow_exception(p);
              }).release().ptr();
  auto& d = Dispatcher::get();
  for (size_t i = 0; i < d.num_ops(); ++i) {
    const std::string& name = d.op(static_cast<int>(i)).schema().name;
    if (!nb::hasattr(ops, name.c_str())) ops.attr(name.c_str()) = make_op_function(name);
  }
  m.def("_op_method", [](const std::string& name) { return make_op_function(name, OpKind::Method); });
  // Note [out= of ops without an out argument].
  m.def("_set_out_fallback", [](nb::object f) {
    Py_XDECREF(g_out_fallback);
    g_out_fallback = f.is_none() ? nullptr : f.release().ptr();
  });
  // strata.use_deterministic_algorithms (python/strata/_settings.py).
  set_determinism_warn_handler([](const std::string& msg) {
    nb::gil_scoped_acquire gil;
    if (PyErr_WarnEx(PyExc_UserWarning, msg.c_str(), 1) < 0) throw nb::python_error();
  });
  m.def("_set_deterministic_algorithms",
        [](bool on, bool warn_only) { set_deterministic_algorithms(on, warn_only); });
  // After Tensor's operators are set: `a + b` on two Tensors skips CPython's generic slot (Note [Operator slots]).
  m.def("_install_operator_slots", [] { return install_operator_slots(); });
  // Tensor.<name>_ for an op with out=: op(self, *args, out=self, **kwargs), returns self.
  m.def("_op_inplace_method", [](const std::string& name) { return make_op_function(name, OpKind::InplaceMethod); });
  // Tensor.__rsub__ etc.: the op with the operands swapped.
  m.def("_op_reflected_method",
        [](const std::string& name) { return make_op_function(name, OpKind::ReflectedMethod); });
  // Tensor.__add__, __rsub__ etc.: as the two above, with NotImplemented for operands the op does not take.
  m.def("_op_operator_method", [](const std::string& name) { return make_op_function(name, OpKind::OperatorMethod); });
  m.def("_op_reflected_operator_method",
        [](const std::string& name) { return make_op_function(name, OpKind::ReflectedOperatorMethod); });
  // Tensor.__eq__ etc.: the op, or NotImplemented when `other` is not a Tensor or a number.
  m.def("_op_comparison_method",
        [](const std::string& name) { return make_op_function(name, OpKind::ComparisonMethod); });
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
