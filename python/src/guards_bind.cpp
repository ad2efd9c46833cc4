// Note [Guard evaluation]
// A GuardSet holds the guards of one compiled entry. Every guard tests a
// value reached from the frame by a source path: a root (an argument, a
// global, a closure cell's contents) then steps (attribute, item, dict item
// read without __getitem__, a tensor's size or stride). Sources are interned
// into a tree keyed by path, so a check fetches each distinct prefix once:
// fifty parameter guards under L['self']._modules['layer1'] read
// L['self'], its _modules and layer1 once, not fifty times each.
//
// check() is a depth-first walk of that tree with the CPython API: a node's
// value is fetched from its parent's, its guards run, then its children; the
// first failure ends the walk. Nothing calls into Python except what the
// sources themselves require (a property getter, a module's __getattr__ when
// a path uses "attr" on a submodule) and == on a value of a type this file
// does not know. Tensors are read through nanobind's instance pointer: dtype,
// device, requires_grad, sizes, strides come from the TensorImpl. Guards that
// relate several values (symbolic-shape relations, no-aliasing) run after the
// walk on the values the walk kept in slots; the global-state guard runs
// first, as it is the cheapest.
//
// Any exception raised while reading a source or comparing a value makes the
// guard fail and is cleared: a miss is never an error. check_verbose() runs
// the guards one by one in insertion order, each source read from its root,
// and words the first failure for the recompile log; check_unshared() is the
// same evaluation without words (the cost the tree saves, and a cross-check).
#include "guards_bind.h"

#include <chrono>
#include <cmath>

#include <nanobind/stl/vector.h>

#include "autograd/variable.h"

namespace strata::py::guards {

namespace {

using compile::kDynamicDim;

PyTypeObject* g_tensor_type = nullptr;
PyTypeObject* g_dtype_type = nullptr;
PyTypeObject* g_device_type = nullptr;

// The strata Tensor behind a Python object, or null for anything else.
const Tensor* as_tensor(PyObject* v) {
  if (!PyObject_TypeCheck(v, g_tensor_type) || !nb::inst_ready(v)) return nullptr;
  return nb::inst_ptr<Tensor>(v);
}

std::string py_repr(PyObject* v) {
  PyObject* r = PyObject_Repr(v);
  if (!r) {
    PyErr_Clear();
    return "<unprintable " + std::string(Py_TYPE(v)->tp_name) + ">";
  }
  const char* s = PyUnicode_AsUTF8(r);
  std::string out = s ? s : "<unprintable>";
  if (!s) PyErr_Clear();
  Py_DECREF(r);
  return out;
}

// Python version differences, all here:
//   tp_name of a nanobind type: "Tensor" on 3.11, "strata._C.Tensor" on 3.12; messages use the
//   qualified name (PyType_GetQualName, 3.11+) on both: "Tensor", "Parameter", "int".
std::string type_name(PyTypeObject* t) {
  PyObject* q = PyType_GetQualName(t);
  const char* s = q ? PyUnicode_AsUTF8(q) : nullptr;
  std::string out = s ? s : t->tp_name;
  if (!s) PyErr_Clear();
  Py_XDECREF(q);
  return out;
}

// The pending exception as "AttributeError: ..." (cleared), or `fallback`.
std::string take_error(const char* fallback) {
  if (!PyErr_Occurred()) return fallback;
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  std::string s = type ? type_name(reinterpret_cast<PyTypeObject*>(type)) : "error";
  if (value) s += ": " + py_repr(value);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
  PyErr_Clear();
  return s;
}

// Types whose values add_equals accepts: immutable and compared without
// running user code (or torch-like device/dtype objects).
bool equals_supported(PyObject* v) {
  PyTypeObject* t = Py_TYPE(v);
  if (v == Py_None || t == &PyBool_Type || t == &PyLong_Type || t == &PyFloat_Type || t == &PyComplex_Type ||
      t == &PyUnicode_Type || t == &PyBytes_Type || t == g_dtype_type || t == g_device_type)
    return true;
  if (t == &PyTuple_Type) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(v); ++i)
      if (!equals_supported(PyTuple_GET_ITEM(v, i))) return false;
    return true;
  }
  std::string_view name = t->tp_name;
  return name == "device" || name.ends_with(".device") || name == "dtype" || name.ends_with(".dtype");
}

// Same exact type (True is not 1, 1 is not 1.0) and equal value; float
// equality is bitwise up to NaN payloads (-0.0 is not 0.0: a graph may
// depend on the sign). May leave an exception set (the caller clears it).
bool exact_equal(PyObject* expected, PyObject* v) {
  if (expected == v) return true;
  PyTypeObject* t = Py_TYPE(expected);
  if (Py_TYPE(v) != t) return false;
  if (t == &PyFloat_Type) {
    double a = PyFloat_AS_DOUBLE(expected), b = PyFloat_AS_DOUBLE(v);
    if (std::isnan(a)) return std::isnan(b);
    return a == b && std::signbit(a) == std::signbit(b);
  }
  if (t == &PyTuple_Type) {
    Py_ssize_t n = PyTuple_GET_SIZE(expected);
    if (PyTuple_GET_SIZE(v) != n) return false;
    for (Py_ssize_t i = 0; i < n; ++i)
      if (!exact_equal(PyTuple_GET_ITEM(expected, i), PyTuple_GET_ITEM(v, i))) return false;
    return true;
  }
  if (t == g_dtype_type) return nb::inst_ptr<DType>(expected)->type == nb::inst_ptr<DType>(v)->type;
  if (t == g_device_type) return *nb::inst_ptr<Device>(expected) == *nb::inst_ptr<Device>(v);
  if (t == &PyBool_Type || expected == Py_None) return false;  // singletons: identity already failed
  return PyObject_RichCompareBool(expected, v, Py_EQ) == 1;
}

int64_t normalize_dim(int64_t d, int64_t ndim) { return d < 0 ? d + ndim : d; }

// A size or stride of a tensor value; false when it is not a tensor or the
// dimension is out of range.
bool tensor_dim(PyObject* v, int64_t d, bool stride, int64_t* out) {
  const Tensor* t = as_tensor(v);
  if (!t || !t->defined()) return false;
  int64_t nd = t->dim();
  d = normalize_dim(d, nd);
  if (d < 0 || d >= nd) return false;
  *out = stride ? t->strides()[d] : t->sizes()[d];
  return true;
}

// The value one step below `parent` (new reference), or null: a miss, with or
// without an exception set.
PyObject* fetch(const Node& n, PyObject* parent, PyObject* args, PyObject* globals, PyObject* closure) {
  switch (n.kind) {
    case StepKind::Arg:
      if (!args || n.index >= PyTuple_GET_SIZE(args)) return nullptr;
      return Py_NewRef(PyTuple_GET_ITEM(args, n.index));
    case StepKind::Global:
      if (!globals) return nullptr;
      return Py_XNewRef(PyDict_GetItemWithError(globals, n.key.ptr()));
    case StepKind::Closure: {
      if (!closure || n.index >= PyTuple_GET_SIZE(closure)) return nullptr;
      PyObject* cell = PyTuple_GET_ITEM(closure, n.index);
      if (!PyCell_Check(cell)) return nullptr;
      return Py_XNewRef(PyCell_GET(cell));  // an empty cell is a miss
    }
    case StepKind::Attr:
      return PyObject_GetAttr(parent, n.key.ptr());
    case StepKind::Item:
      if (n.int_item && (PyList_Check(parent) || PyTuple_Check(parent))) {
        Py_ssize_t size = PyList_Check(parent) ? PyList_GET_SIZE(parent) : PyTuple_GET_SIZE(parent);
        Py_ssize_t i = n.index < 0 ? n.index + size : n.index;
        if (i < 0 || i >= size) return nullptr;
        return Py_NewRef(PyList_Check(parent) ? PyList_GET_ITEM(parent, i) : PyTuple_GET_ITEM(parent, i));
      }
      // Dicts (subclasses too) are read without __getitem__/__missing__, so a
      // defaultdict is not written to by a check.
      if (PyDict_Check(parent)) return Py_XNewRef(PyDict_GetItemWithError(parent, n.key.ptr()));
      return PyObject_GetItem(parent, n.key.ptr());
    case StepKind::DictItem: {
      // A dict, else the object's namespace: a module's __dict__, an instance __dict__.
      if (PyDict_Check(parent)) return Py_XNewRef(PyDict_GetItemWithError(parent, n.key.ptr()));
      if (PyModule_Check(parent))
        return Py_XNewRef(PyDict_GetItemWithError(PyModule_GetDict(parent), n.key.ptr()));
      PyObject* d = PyObject_GenericGetDict(parent, nullptr);
      if (!d) return nullptr;
      PyObject* v = PyDict_Check(d) ? Py_XNewRef(PyDict_GetItemWithError(d, n.key.ptr())) : nullptr;
      Py_DECREF(d);
      return v;
    }
    case StepKind::Size:
    case StepKind::Stride: {
      int64_t out;
      if (!tensor_dim(parent, n.index, n.kind == StepKind::Stride, &out)) return nullptr;
      return PyLong_FromLongLong(out);
    }
  }
  return nullptr;
}

std::string step_text(StepKind k) {
  switch (k) {
    case StepKind::Arg:
      return "arg";
    case StepKind::Global:
      return "global";
    case StepKind::Closure:
      return "closure";
    case StepKind::Attr:
      return "attr";
    case StepKind::Item:
      return "item";
    case StepKind::DictItem:
      return "dict_item";
    case StepKind::Size:
      return "size";
    case StepKind::Stride:
      return "stride";
  }
  return "?";
}

std::optional<StepKind> parse_step(std::string_view s) {
  if (s == "arg") return StepKind::Arg;
  if (s == "global") return StepKind::Global;
  if (s == "closure") return StepKind::Closure;
  if (s == "attr") return StepKind::Attr;
  if (s == "item") return StepKind::Item;
  if (s == "dict_item") return StepKind::DictItem;
  if (s == "size") return StepKind::Size;
  if (s == "stride") return StepKind::Stride;
  return std::nullopt;
}

// A Python list/tuple of ints and Nones as TensorSpec dims.
std::vector<int64_t> parse_dims(nb::handle seq, const char* what) {
  STRATA_CHECK_TYPE(PyList_Check(seq.ptr()) || PyTuple_Check(seq.ptr()), "add_tensor: ", what,
                    " must be a list or tuple of int or None, got ", Py_TYPE(seq.ptr())->tp_name);
  std::vector<int64_t> out;
  for (nb::handle h : seq) {
    if (h.is_none()) {
      out.push_back(kDynamicDim);
      continue;
    }
    STRATA_CHECK_TYPE(PyLong_Check(h.ptr()) && !PyBool_Check(h.ptr()), "add_tensor: ", what,
                      " entries must be int or None, got ", Py_TYPE(h.ptr())->tp_name);
    int64_t v = nb::cast<int64_t>(h);
    STRATA_CHECK_VALUE(v >= 0, "add_tensor: ", what, " entries must be >= 0, got ", v);
    out.push_back(v);
  }
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------
// Construction

GuardSet::GuardSet(std::vector<std::string> arg_names, std::vector<std::string> closure_names)
    : arg_names_(std::move(arg_names)), closure_names_(std::move(closure_names)) {}

void GuardSet::check_mutable() const {
  STRATA_CHECK(active_checks_ == 0, "GuardSet: guards cannot be added while the set is being checked");
  STRATA_CHECK(!cleared_, "GuardSet: the set was cleared by the garbage collector");
}

Node* GuardSet::intern_source(nb::handle source) {
  check_mutable();
  STRATA_CHECK_TYPE(PyList_Check(source.ptr()) || PyTuple_Check(source.ptr()),
                    "GuardSet: a source is a list of (kind, arg) steps, got ", Py_TYPE(source.ptr())->tp_name);
  nb::sequence steps = nb::borrow<nb::sequence>(source);
  size_t n = nb::len(steps);
  STRATA_CHECK_VALUE(n > 0, "GuardSet: empty source");
  Node* parent = nullptr;
  for (size_t i = 0; i < n; ++i) {
    nb::handle step = steps[i];
    STRATA_CHECK_TYPE((PyTuple_Check(step.ptr()) || PyList_Check(step.ptr())) && nb::len(step) == 2,
                      "GuardSet: a source step is a (kind, arg) pair, got ", py_repr(step.ptr()));
    nb::object kind_obj = step[0], arg = step[1];
    STRATA_CHECK_TYPE(PyUnicode_Check(kind_obj.ptr()), "GuardSet: a step kind is a str, got ",
                      py_repr(kind_obj.ptr()));
    std::string kind_name = nb::cast<std::string>(kind_obj);
    auto kind = parse_step(kind_name);
    STRATA_CHECK_VALUE(kind, "GuardSet: unknown source step '", kind_name,
                       "' (expected arg, global, closure, attr, item, dict_item, size, stride)");
    bool is_root = *kind == StepKind::Arg || *kind == StepKind::Global || *kind == StepKind::Closure;
    STRATA_CHECK_VALUE(is_root == (i == 0), "GuardSet: a source starts with one arg/global/closure root, got '",
                       kind_name, "' at step ", i);

    auto node = std::make_unique<Node>();
    node->kind = *kind;
    node->parent = parent;
    std::string base = parent ? parent->name : "";
    auto int_arg = [&](const char* what) {
      STRATA_CHECK_TYPE(PyLong_Check(arg.ptr()) && !PyBool_Check(arg.ptr()), "GuardSet: '", kind_name,
                        "' takes an int ", what, ", got ", py_repr(arg.ptr()));
      return nb::cast<int64_t>(arg);
    };
    auto str_arg = [&]() {
      STRATA_CHECK_TYPE(PyUnicode_Check(arg.ptr()), "GuardSet: '", kind_name, "' takes a str, got ",
                        py_repr(arg.ptr()));
      PyObject* s = Py_NewRef(arg.ptr());
      PyUnicode_InternInPlace(&s);
      return nb::steal(s);
    };
    switch (*kind) {
      case StepKind::Arg:
        node->index = int_arg("position");
        STRATA_CHECK_VALUE(node->index >= 0, "GuardSet: arg position must be >= 0, got ", node->index);
        node->name = node->index < static_cast<Py_ssize_t>(arg_names_.size())
                         ? "L['" + arg_names_[node->index] + "']"
                         : "L[" + std::to_string(node->index) + "]";
        node->match_key = "arg:" + std::to_string(node->index);
        break;
      case StepKind::Closure:
        node->index = int_arg("cell index");
        STRATA_CHECK_VALUE(node->index >= 0, "GuardSet: closure index must be >= 0, got ", node->index);
        node->name = node->index < static_cast<Py_ssize_t>(closure_names_.size())
                         ? "L['" + closure_names_[node->index] + "']"
                         : "C[" + std::to_string(node->index) + "]";
        node->match_key = "closure:" + std::to_string(node->index);
        break;
      case StepKind::Global:
        node->key = str_arg();
        node->name = "G[" + py_repr(node->key.ptr()) + "]";
        node->match_key = "global:" + nb::cast<std::string>(node->key);
        break;
      case StepKind::Attr:
        node->key = str_arg();
        node->name = base + "." + nb::cast<std::string>(node->key);
        node->match_key = "attr:" + nb::cast<std::string>(node->key);
        break;
      case StepKind::Item:
      case StepKind::DictItem: {
        PyObject* k = arg.ptr();
        STRATA_CHECK_TYPE(PyUnicode_Check(k) || (PyLong_Check(k) && !PyBool_Check(k)), "GuardSet: '", kind_name,
                          "' takes a str or int key, got ", py_repr(k));
        node->key = PyUnicode_Check(k) ? str_arg() : nb::borrow(arg);
        if (PyLong_Check(k)) {
          node->int_item = true;
          node->index = nb::cast<Py_ssize_t>(arg);
        }
        node->name = base + "[" + py_repr(k) + "]";
        node->match_key = kind_name + ":" + std::string(Py_TYPE(k)->tp_name) + ":" + py_repr(k);
        break;
      }
      case StepKind::Size:
      case StepKind::Stride:
        node->index = int_arg("dimension");
        node->name = base + (*kind == StepKind::Size ? ".size()[" : ".stride()[") + std::to_string(node->index) + "]";
        node->match_key = kind_name + ":" + std::to_string(node->index);
        break;
    }
    auto& siblings = parent ? parent->children : roots_;
    Node* found = nullptr;
    for (auto& s : siblings)
      if (s->match_key == node->match_key) found = s.get();
    if (!found) {
      siblings.push_back(std::move(node));
      found = siblings.back().get();
      ++num_nodes_;
    }
    parent = found;
  }
  return parent;
}

Guard& GuardSet::push(GuardKind kind, Node* node) {
  check_mutable();
  guards_.emplace_back();
  Guard& g = guards_.back();
  g.kind = kind;
  g.node = node;
  auto index = static_cast<uint32_t>(guards_.size() - 1);
  if (node) node->guards.push_back(index);
  if (kind == GuardKind::GlobalState) state_guards_.push_back(index);
  if (kind == GuardKind::DimRelation || kind == GuardKind::NoAliasing) cross_guards_.push_back(index);
  return g;
}

void GuardSet::add_tensor(nb::handle source, nb::handle dtype, nb::handle device, bool requires_grad,
                          nb::handle sizes, nb::handle strides, nb::handle example) {
  compile::TensorSpec spec;
  if (!example.is_none()) {
    STRATA_CHECK_TYPE(PyLong_Check(example.ptr()), "add_tensor: keys must be an int (dispatch_key_bits(t)) or None, "
                      "got ", py_repr(example.ptr()));
    spec.keys = nb::cast<uint64_t>(example);
  }
  auto st = to_scalar_type(dtype);
  STRATA_CHECK_TYPE(st, "add_tensor: dtype must be a strata dtype, got ", py_repr(dtype.ptr()));
  auto dev = to_device(device);
  STRATA_CHECK_TYPE(dev, "add_tensor: device must be a str or strata device, got ", py_repr(device.ptr()));
  spec.dtype = *st;
  spec.device = *dev;
  spec.requires_grad = requires_grad;
  spec.sizes = parse_dims(sizes, "sizes");
  if (!strides.is_none()) {
    spec.strides = parse_dims(strides, "strides");
    STRATA_CHECK_VALUE(spec.strides.size() == spec.sizes.size(), "add_tensor: ", spec.sizes.size(), " sizes but ",
                       spec.strides.size(), " strides");
    spec.check_strides = true;
  }
  Node* n = intern_source(source);
  push(GuardKind::Tensor, n).spec = std::move(spec);
}

void GuardSet::add_type(nb::handle source, nb::handle type) {
  STRATA_CHECK_TYPE(PyType_Check(type.ptr()), "add_type: expected a type, got ", py_repr(type.ptr()));
  Node* n = intern_source(source);
  push(GuardKind::Type, n).obj = nb::borrow(type);
}

void GuardSet::add_id(nb::handle source, nb::handle obj) {
  Node* n = intern_source(source);
  Guard& g = push(GuardKind::Id, n);
  g.obj = nb::borrow(obj);  // the strong reference keeps the id from being reused
  g.expected_repr = "id(" + n->name + ") == " + std::to_string(reinterpret_cast<uintptr_t>(obj.ptr())) + " (a " +
                    type_name(Py_TYPE(obj.ptr())) + ")";
}

void GuardSet::add_equals(nb::handle source, nb::handle value) {
  STRATA_CHECK_TYPE(equals_supported(value.ptr()),
                    "add_equals: values of type ", Py_TYPE(value.ptr())->tp_name,
                    " cannot be guarded by equality (None, bool, int, float, complex, str, bytes, tuples of these, "
                    "dtypes and devices can; use add_id or add_type)");
  Node* n = intern_source(source);
  Guard& g = push(GuardKind::Equals, n);
  g.obj = nb::borrow(value);
  g.expected_repr = py_repr(value.ptr());
}

void GuardSet::add_len(nb::handle source, Py_ssize_t n) {
  STRATA_CHECK_VALUE(n >= 0, "add_len: length must be >= 0, got ", n);
  Node* node = intern_source(source);
  push(GuardKind::Len, node).length = n;
}

void GuardSet::add_dict_keys(nb::handle source, nb::handle keys) {
  STRATA_CHECK_TYPE(PyList_Check(keys.ptr()) || PyTuple_Check(keys.ptr()),
                    "add_dict_keys: keys must be a list or tuple, got ", Py_TYPE(keys.ptr())->tp_name);
  nb::object tup = nb::steal(PySequence_Tuple(keys.ptr()));
  if (!tup) throw nb::python_error();
  // Keys are compared without user code (a user __eq__ could mutate the dict being iterated).
  for (nb::handle k : tup)
    STRATA_CHECK_TYPE(equals_supported(k.ptr()), "add_dict_keys: keys of type ", Py_TYPE(k.ptr())->tp_name,
                      " cannot be guarded (str, int, float, bool, None, bytes and tuples of these can)");
  Node* n = intern_source(source);
  Guard& g = push(GuardKind::DictKeys, n);
  g.obj = tup;
  g.length = PyTuple_GET_SIZE(tup.ptr());
  g.expected_repr = py_repr(nb::steal(PySequence_List(tup.ptr())).ptr());
}

void GuardSet::add_not_none(nb::handle source) { push(GuardKind::NotNone, intern_source(source)); }
void GuardSet::add_is_none(nb::handle source) { push(GuardKind::IsNone, intern_source(source)); }

void GuardSet::add_global_state(compile::GlobalState state) { push(GuardKind::GlobalState, nullptr).state = state; }

namespace {

struct ExprParser {
  GuardSet* set;
  std::vector<Leaf>* leaves;
  std::shared_ptr<const compile::ShapeExpr> parse(nb::handle h) {
    using K = compile::ShapeExpr::Kind;
    PyObject* p = h.ptr();
    if (PyLong_Check(p) && !PyBool_Check(p)) return compile::ShapeExpr::constant(nb::cast<int64_t>(h));
    STRATA_CHECK_TYPE((PyTuple_Check(p) || PyList_Check(p)) && nb::len(h) == 3 && PyUnicode_Check(h[0].ptr()),
                      "add_dim_relation: an expression is an int, (\"size\"|\"stride\", source, dim) or "
                      "(op, lhs, rhs) with op in add sub mul floordiv (+ - * //), got ",
                      py_repr(p));
    std::string op = nb::cast<std::string>(h[0]);
    if (op == "size" || op == "stride") {
      nb::object d = h[2];
      STRATA_CHECK_TYPE(PyLong_Check(d.ptr()) && !PyBool_Check(d.ptr()), "add_dim_relation: the dimension of a ",
                        op, " leaf is an int, got ", py_repr(d.ptr()));
      Leaf l;
      l.node = set->intern_source(h[1]);
      l.dim = nb::cast<int64_t>(d);
      l.stride = op == "stride";
      leaves->push_back(l);
      return compile::ShapeExpr::leaf(static_cast<int64_t>(leaves->size() - 1));
    }
    K k;
    if (op == "add" || op == "+")
      k = K::Add;
    else if (op == "sub" || op == "-")
      k = K::Sub;
    else if (op == "mul" || op == "*")
      k = K::Mul;
    else if (op == "floordiv" || op == "//")
      k = K::FloorDiv;
    else
      STRATA_CHECK_VALUE(false, "add_dim_relation: unknown operator '", op,
                         "' (expected size, stride, add, sub, mul, floordiv, + - * //)");
    auto a = parse(h[1]);
    auto b = parse(h[2]);
    return compile::ShapeExpr::binary(k, std::move(a), std::move(b));
  }
};

}  // namespace

void GuardSet::add_dim_relation(nb::handle lhs, const std::string& op, nb::handle rhs) {
  check_mutable();
  compile::DimRelation rel;
  rel.op = compile::parse_rel_op(op);
  std::vector<Leaf> leaves;
  ExprParser parser{this, &leaves};
  rel.lhs = parser.parse(lhs);
  rel.rhs = parser.parse(rhs);
  for (Leaf& l : leaves)
    if (l.node->slot < 0) l.node->slot = num_slots_++;
  Guard& g = push(GuardKind::DimRelation, nullptr);
  g.relation = std::move(rel);
  g.leaves = std::move(leaves);
}

void GuardSet::add_no_aliasing(nb::handle sources) {
  STRATA_CHECK_TYPE(PyList_Check(sources.ptr()) || PyTuple_Check(sources.ptr()),
                    "add_no_aliasing: expected a list of sources, got ", Py_TYPE(sources.ptr())->tp_name);
  std::vector<Node*> nodes;
  for (nb::handle s : sources) nodes.push_back(intern_source(s));
  for (Node* n : nodes)
    if (n->slot < 0) n->slot = num_slots_++;
  push(GuardKind::NoAliasing, nullptr).nodes = std::move(nodes);
}

// ---------------------------------------------------------------------------
// Evaluation

bool GuardSet::check_value(const Guard& g, PyObject* v) const {
  switch (g.kind) {
    case GuardKind::Tensor: {
      const Tensor* t = as_tensor(v);
      return t && g.spec.matches(*t);
    }
    case GuardKind::Type:
      return Py_TYPE(v) == reinterpret_cast<PyTypeObject*>(g.obj.ptr());
    case GuardKind::Id:
      return v == g.obj.ptr();
    case GuardKind::Equals:
      return exact_equal(g.obj.ptr(), v);
    case GuardKind::Len: {
      Py_ssize_t n = PyList_Check(v) ? PyList_GET_SIZE(v)
                     : PyTuple_Check(v) ? PyTuple_GET_SIZE(v)
                     : PyDict_Check(v)  ? PyDict_GET_SIZE(v)
                                        : PyObject_Size(v);
      return n == g.length;
    }
    case GuardKind::DictKeys: {
      if (!PyDict_Check(v) || PyDict_GET_SIZE(v) != g.length) return false;
      Py_ssize_t pos = 0, i = 0;
      PyObject *k, *val;
      while (PyDict_Next(v, &pos, &k, &val)) {
        PyObject* e = PyTuple_GET_ITEM(g.obj.ptr(), i++);
        if (k != e && !exact_equal(e, k)) return false;
      }
      return true;
    }
    case GuardKind::NotNone:
      return v != Py_None;
    case GuardKind::IsNone:
      return v == Py_None;
    default:
      return false;
  }
}

bool GuardSet::check_cross(const Guard& g, PyObject* const* slots) const {
  if (g.kind == GuardKind::DimRelation) {
    int64_t small[16];
    std::vector<int64_t> big;
    int64_t* vals = small;
    if (g.leaves.size() > 16) {
      big.resize(g.leaves.size());
      vals = big.data();
    }
    for (size_t i = 0; i < g.leaves.size(); ++i) {
      PyObject* v = slots[g.leaves[i].node->slot];
      if (!v || !tensor_dim(v, g.leaves[i].dim, g.leaves[i].stride, &vals[i])) return false;
    }
    return g.relation.holds(std::span<const int64_t>(vals, g.leaves.size()));
  }
  // NoAliasing: values that are not tensors take no part.
  const TensorImpl* small[16];
  std::vector<const TensorImpl*> big;
  const TensorImpl** impls = small;
  if (g.nodes.size() > 16) {
    big.resize(g.nodes.size());
    impls = big.data();
  }
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    PyObject* v = slots[g.nodes[i]->slot];
    if (!v) return false;
    const Tensor* t = as_tensor(v);
    impls[i] = t ? t->impl() : nullptr;
  }
  return !compile::any_storage_aliasing(std::span<const TensorImpl* const>(impls, g.nodes.size()));
}

bool GuardSet::walk(const Node& n, PyObject* parent, const Ctx& c, PyObject** slots) {
  PyObject* v = fetch(n, parent, c.args, c.globals, c.closure);
  if (!v) return false;
  bool ok = true;
  for (uint32_t gi : n.guards)
    if (!check_value(guards_[gi], v)) {
      ok = false;
      break;
    }
  if (ok)
    for (const auto& child : n.children)
      if (!walk(*child, v, c, slots)) {
        ok = false;
        break;
      }
  if (ok && n.slot >= 0) {
    slots[n.slot] = v;  // the slot owns the reference until the end of the check
    return true;
  }
  Py_DECREF(v);
  return ok;
}

namespace {

// Owns the values kept for the cross-value guards during one check.
struct Slots {
  PyObject* small[32];
  std::vector<PyObject*> big;
  PyObject** data;
  int n;
  explicit Slots(int count) : n(count) {
    if (count > 32) big.assign(count, nullptr);
    data = count > 32 ? big.data() : small;
    std::fill(data, data + n, nullptr);
  }
  ~Slots() {
    for (int i = 0; i < n; ++i) Py_XDECREF(data[i]);
  }
};

struct ActiveCheck {  // no guard may be added while a check runs (a getter could try)
  int& count;
  explicit ActiveCheck(int& c) : count(c) { ++count; }
  ~ActiveCheck() { --count; }
};

bool valid_context(PyObject* args, PyObject* globals, PyObject* closure) {
  return args && PyTuple_Check(args) && (!globals || PyDict_Check(globals)) && (!closure || PyTuple_Check(closure));
}

}  // namespace

bool GuardSet::check(PyObject* args, PyObject* globals, PyObject* closure) {
  if (cleared_) return false;
  if (closure == Py_None) closure = nullptr;
  if (globals == Py_None) globals = nullptr;
  if (!valid_context(args, globals, closure)) return false;
  for (uint32_t gi : state_guards_)
    if (!guards_[gi].state.matches()) return false;
  ActiveCheck active(active_checks_);
  Ctx c{args, globals, closure};
  Slots slots(num_slots_);
  bool ok = true;
  for (const auto& root : roots_)
    if (!walk(*root, nullptr, c, slots.data)) {
      ok = false;
      break;
    }
  if (ok)
    for (uint32_t gi : cross_guards_)
      if (!check_cross(guards_[gi], slots.data)) {
        ok = false;
        break;
      }
  if (!ok && PyErr_Occurred()) PyErr_Clear();
  return ok;
}

PyObject* GuardSet::resolve(const Node& n, const Ctx& c) const {
  PyObject* parent = nullptr;
  if (n.parent) {
    parent = resolve(*n.parent, c);
    if (!parent) return nullptr;
  }
  PyObject* v = fetch(n, parent, c.args, c.globals, c.closure);
  Py_XDECREF(parent);
  return v;
}

bool GuardSet::check_unshared(PyObject* args, PyObject* globals, PyObject* closure) {
  if (cleared_) return false;
  if (closure == Py_None) closure = nullptr;
  if (globals == Py_None) globals = nullptr;
  if (!valid_context(args, globals, closure)) return false;
  ActiveCheck active(active_checks_);
  Ctx c{args, globals, closure};
  bool ok = true;
  for (const Guard& g : guards_) {
    if (g.kind == GuardKind::GlobalState) {
      ok = g.state.matches();
    } else if (g.node) {
      PyObject* v = resolve(*g.node, c);
      ok = v && check_value(g, v);
      Py_XDECREF(v);
    } else {
      Slots slots(num_slots_);
      auto fill = [&](Node* n) {
        if (!slots.data[n->slot]) slots.data[n->slot] = resolve(*n, c);
      };
      for (const Leaf& l : g.leaves) fill(l.node);
      for (Node* n : g.nodes) fill(n);
      ok = check_cross(g, slots.data);
    }
    if (!ok) break;
  }
  if (!ok && PyErr_Occurred()) PyErr_Clear();
  return ok;
}

std::string GuardSet::value_failure(const Guard& g, PyObject* v) const {
  const std::string& name = g.node->name;
  auto got = [&](const std::string& what) { return describe(g) + " (got " + what + ")"; };
  switch (g.kind) {
    case GuardKind::Tensor: {
      const Tensor* t = as_tensor(v);
      if (!t) return name + ": expected a Tensor, got " + type_name(Py_TYPE(v));
      return g.spec.mismatch(*t, name);
    }
    case GuardKind::Type:
      return got(type_name(Py_TYPE(v)));
    case GuardKind::Id:
      return got("id " + std::to_string(reinterpret_cast<uintptr_t>(v)) + ", a " + type_name(Py_TYPE(v)));
    case GuardKind::Equals: {
      std::string r = py_repr(v);
      if (Py_TYPE(v) != Py_TYPE(g.obj.ptr())) r += " of type " + type_name(Py_TYPE(v));
      return got(r);
    }
    case GuardKind::Len: {
      Py_ssize_t n = PyObject_Size(v);
      if (n < 0) {
        PyErr_Clear();
        return got("a " + type_name(Py_TYPE(v)) + " without len()");
      }
      return got(std::to_string(n));
    }
    case GuardKind::DictKeys: {
      if (!PyDict_Check(v)) return got("a " + type_name(Py_TYPE(v)));
      return got(py_repr(nb::steal(PySequence_List(nb::steal(PyDict_Keys(v)).ptr())).ptr()));
    }
    case GuardKind::NotNone:
      return got("None");
    case GuardKind::IsNone:
      return got("a " + type_name(Py_TYPE(v)));
    default:
      return describe(g);
  }
}

std::string GuardSet::cross_failure(const Guard& g, PyObject* const* slots) const {
  if (g.kind == GuardKind::DimRelation) {
    std::vector<int64_t> vals(g.leaves.size());
    std::vector<std::string> names;
    for (const Leaf& l : g.leaves) names.push_back(leaf_name(l));
    for (size_t i = 0; i < g.leaves.size(); ++i)
      if (!tensor_dim(slots[g.leaves[i].node->slot], g.leaves[i].dim, g.leaves[i].stride, &vals[i]))
        return names[i] + ": " + g.leaves[i].node->name + " is not a Tensor with that dimension (for " +
               describe(g) + ")";
    return g.relation.failure(vals, names);
  }
  std::vector<const TensorImpl*> impls;
  for (Node* n : g.nodes) {
    const Tensor* t = as_tensor(slots[n->slot]);
    impls.push_back(t ? t->impl() : nullptr);
  }
  size_t a = 0, b = 0;
  if (compile::any_storage_aliasing(impls, &a, &b))
    return g.nodes[a]->name + " and " + g.nodes[b]->name + " share storage (for " + describe(g) + ")";
  return describe(g);
}

std::optional<std::string> GuardSet::check_verbose(PyObject* args, PyObject* globals, PyObject* closure) {
  if (cleared_) return std::string("the guard set was cleared by the garbage collector");
  if (closure == Py_None) closure = nullptr;
  if (globals == Py_None) globals = nullptr;
  STRATA_CHECK_TYPE(args && PyTuple_Check(args), "check_verbose: args must be a tuple");
  STRATA_CHECK_TYPE(!globals || PyDict_Check(globals), "check_verbose: globals must be a dict or None");
  STRATA_CHECK_TYPE(!closure || PyTuple_Check(closure), "check_verbose: closure must be a tuple or None");
  ActiveCheck active(active_checks_);
  Ctx c{args, globals, closure};
  auto unreadable = [&](const Node& n, const Guard& g) {
    // Find the first step on the path that cannot be read, for the message.
    std::vector<const Node*> chain;
    for (const Node* p = &n; p; p = p->parent) chain.insert(chain.begin(), p);
    PyObject* cur = nullptr;
    std::string msg;
    for (const Node* p : chain) {
      PyObject* v = fetch(*p, cur, c.args, c.globals, c.closure);
      if (!v) {
        msg = p->name + ": " + take_error("missing");
        break;
      }
      Py_XDECREF(cur);
      cur = v;
    }
    Py_XDECREF(cur);
    if (msg.empty()) msg = n.name + ": could not be read";
    return msg + " (for " + describe(g) + ")";
  };
  for (const Guard& g : guards_) {
    if (g.kind == GuardKind::GlobalState) {
      if (!g.state.matches()) return g.state.mismatch();
      continue;
    }
    if (g.node) {
      PyObject* v = resolve(*g.node, c);
      if (!v) {
        PyErr_Clear();
        return unreadable(*g.node, g);
      }
      bool ok = check_value(g, v);
      std::optional<std::string> msg;
      if (!ok) {
        std::string why = PyErr_Occurred() ? take_error("") : "";
        msg = value_failure(g, v);
        if (!why.empty()) *msg += " [" + why + "]";
      }
      Py_DECREF(v);
      if (msg) return msg;
      continue;
    }
    Slots slots(num_slots_);
    std::vector<Node*> needed = g.nodes;
    for (const Leaf& l : g.leaves) needed.push_back(l.node);
    for (Node* n : needed) {
      if (slots.data[n->slot]) continue;
      slots.data[n->slot] = resolve(*n, c);
      if (!slots.data[n->slot]) {
        PyErr_Clear();
        return unreadable(*n, g);
      }
    }
    if (!check_cross(g, slots.data)) return cross_failure(g, slots.data);
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------
// Descriptions

std::string GuardSet::leaf_name(const Leaf& l) const {
  return l.node->name + (l.stride ? ".stride()[" : ".size()[") + std::to_string(l.dim) + "]";
}

std::string GuardSet::describe(const Guard& g) const {
  const std::string name = g.node ? g.node->name : "";
  switch (g.kind) {
    case GuardKind::Tensor:
      return g.spec.describe(name);
    case GuardKind::Type:
      return "type(" + name + ") is " + type_name(reinterpret_cast<PyTypeObject*>(g.obj.ptr()));
    case GuardKind::Id:
      return g.expected_repr;
    case GuardKind::Equals:
      return name + " == " + g.expected_repr;
    case GuardKind::Len:
      return "len(" + name + ") == " + std::to_string(g.length);
    case GuardKind::DictKeys:
      return "list(" + name + ".keys()) == " + g.expected_repr;
    case GuardKind::NotNone:
      return name + " is not None";
    case GuardKind::IsNone:
      return name + " is None";
    case GuardKind::GlobalState:
      return g.state.describe();
    case GuardKind::DimRelation: {
      std::vector<std::string> names;
      for (const Leaf& l : g.leaves) names.push_back(leaf_name(l));
      return g.relation.str(names);
    }
    case GuardKind::NoAliasing: {
      std::string s = "no storage aliasing among ";
      for (size_t i = 0; i < g.nodes.size(); ++i) s += (i ? ", " : "") + g.nodes[i]->name;
      return s;
    }
  }
  return "?";
}

std::vector<std::string> GuardSet::describe() const {
  std::vector<std::string> out;
  out.reserve(guards_.size());
  for (const Guard& g : guards_) out.push_back(describe(g));
  return out;
}

int GuardSet::traverse(visitproc visit, void* arg) {
  for (const Guard& g : guards_) Py_VISIT(g.obj.ptr());
  return 0;
}

void GuardSet::clear() {
  // Breaking a reference cycle: the set cannot be checked afterwards (every check fails).
  cleared_ = true;
  for (Guard& g : guards_) g.obj.reset();
}

// ---------------------------------------------------------------------------
// Binding

namespace {

int guardset_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  if (!nb::inst_ready(self)) return 0;
  return nb::inst_ptr<GuardSet>(self)->traverse(visit, arg);
}

int guardset_clear(PyObject* self) {
  if (nb::inst_ready(self)) nb::inst_ptr<GuardSet>(self)->clear();
  return 0;
}

PyType_Slot guardset_slots[] = {{Py_tp_traverse, reinterpret_cast<void*>(guardset_traverse)},
                                {Py_tp_clear, reinterpret_cast<void*>(guardset_clear)},
                                {0, nullptr}};

nb::dict global_state_dict() {
  compile::GlobalState s = compile::GlobalState::current();
  nb::dict d;
  d["grad_enabled"] = *s.grad_enabled;
  d["default_dtype"] = dtype_object(*s.default_dtype);
  d["autocast_enabled"] = *s.autocast_enabled;
  d["autocast_dtype"] = dtype_object(*s.autocast_dtype);
  return d;
}

std::optional<ScalarType> optional_dtype(nb::handle h, const char* what) {
  if (h.is_none()) return std::nullopt;
  auto st = to_scalar_type(h);
  STRATA_CHECK_TYPE(st, "add_global_state: ", what, " must be a strata dtype or None, got ", py_repr(h.ptr()));
  return st;
}

}  // namespace

}  // namespace strata::py::guards

namespace strata::py {

void bind_guards(nb::module_& parent) {
  using namespace guards;
  nb::module_ m = parent.def_submodule("_guards", "Guard evaluator of strata.compile (see Note [Guard evaluation])");
  g_tensor_type = reinterpret_cast<PyTypeObject*>(nb::type<Tensor>().ptr());
  g_dtype_type = reinterpret_cast<PyTypeObject*>(nb::type<DType>().ptr());
  g_device_type = reinterpret_cast<PyTypeObject*>(nb::type<Device>().ptr());

  m.def("dispatch_key_bits", [](const Tensor& t) { return t.key_set().raw(); },
        "A tensor's dispatch key set as an int (what add_tensor's keys guard).");
  // Keys of tensors that capture does not follow (a vmap-batched tensor: its ops are rewritten by the
  // Vmap layer, a kernel would read its physical data): such a call runs eagerly.
  m.attr("TRANSFORM_KEYS") = (DispatchKeySet(DispatchKey::Vmap) | DispatchKeySet(DispatchKey::Functionalize) |
                              DispatchKeySet(DispatchKey::Python) | DispatchKeySet(DispatchKey::Nested)).raw();
  nb::class_<GuardSet>(m, "GuardSet", nb::type_slots(guardset_slots))
      .def(nb::init<std::vector<std::string>, std::vector<std::string>>(), nb::arg("arg_names"),
           nb::arg("closure_names") = std::vector<std::string>{})
      .def("add_tensor", &GuardSet::add_tensor, nb::arg("source"), nb::arg("dtype"), nb::arg("device"),
           nb::arg("requires_grad"), nb::arg("sizes"), nb::arg("strides").none() = nb::none(),
           nb::arg("keys").none() = nb::none(),
           "keys: the dispatch key set (dispatch_key_bits) the guarded tensor must have (None: not guarded).")
      .def("add_type", &GuardSet::add_type, nb::arg("source"), nb::arg("type"))
      .def("add_id", &GuardSet::add_id, nb::arg("source"), nb::arg("obj").none())
      .def("add_equals", &GuardSet::add_equals, nb::arg("source"), nb::arg("value").none())
      .def("add_len", &GuardSet::add_len, nb::arg("source"), nb::arg("n"))
      .def("add_dict_keys", &GuardSet::add_dict_keys, nb::arg("source"), nb::arg("keys"))
      .def("add_not_none", &GuardSet::add_not_none, nb::arg("source"))
      .def("add_is_none", &GuardSet::add_is_none, nb::arg("source"))
      .def(
          "add_global_state",
          [](GuardSet& gs, std::optional<bool> grad_enabled, nb::handle default_dtype,
             std::optional<bool> autocast_enabled, nb::handle autocast_dtype) {
            compile::GlobalState s;
            s.grad_enabled = grad_enabled;
            s.default_dtype = optional_dtype(default_dtype, "default_dtype");
            s.autocast_enabled = autocast_enabled;
            s.autocast_dtype = optional_dtype(autocast_dtype, "autocast_dtype");
            gs.add_global_state(s);
          },
          nb::arg("grad_enabled").none() = nb::none(), nb::arg("default_dtype").none() = nb::none(),
          nb::arg("autocast_enabled").none() = nb::none(), nb::arg("autocast_dtype").none() = nb::none())
      .def("add_dim_relation", &GuardSet::add_dim_relation, nb::arg("lhs"), nb::arg("op"), nb::arg("rhs"))
      .def("add_no_aliasing", &GuardSet::add_no_aliasing, nb::arg("sources"))
      .def(
          "check",
          [](GuardSet& gs, nb::handle args, nb::handle globals, nb::handle closure) {
            return gs.check(args.ptr(), globals.ptr(), closure.ptr());
          },
          nb::arg("args"), nb::arg("globals").none(), nb::arg("closure").none() = nb::none())
      .def(
          "_check_unshared",
          [](GuardSet& gs, nb::handle args, nb::handle globals, nb::handle closure) {
            return gs.check_unshared(args.ptr(), globals.ptr(), closure.ptr());
          },
          nb::arg("args"), nb::arg("globals").none(), nb::arg("closure").none() = nb::none())
      .def(
          "check_verbose",
          [](GuardSet& gs, nb::handle args, nb::handle globals, nb::handle closure) {
            return gs.check_verbose(args.ptr(), globals.ptr(), closure.ptr());
          },
          nb::arg("args"), nb::arg("globals").none(), nb::arg("closure").none() = nb::none())
      .def(
          "_time_check",
          [](GuardSet& gs, nb::handle args, nb::handle globals, nb::handle closure, int64_t iterations,
             bool shared) {
            // Mean ns per check() called from C++ (what the frame-evaluation hook pays, without the
            // Python method call); for bench/guards_bench.py.
            STRATA_CHECK_VALUE(iterations > 0, "_time_check: iterations must be > 0");
            auto start = std::chrono::steady_clock::now();
            bool all = true;
            for (int64_t i = 0; i < iterations; ++i)
              all &= shared ? gs.check(args.ptr(), globals.ptr(), closure.ptr())
                            : gs.check_unshared(args.ptr(), globals.ptr(), closure.ptr());
            double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
            STRATA_CHECK_VALUE(all, "_time_check: the guards do not hold for these arguments");
            return ns / static_cast<double>(iterations);
          },
          nb::arg("args"), nb::arg("globals").none(), nb::arg("closure").none(), nb::arg("iterations"),
          nb::arg("shared") = true)
      .def("describe", [](const GuardSet& gs) { return gs.describe(); })
      .def_prop_ro("_num_nodes", &GuardSet::num_nodes)
      .def("__len__", &GuardSet::size);

  m.def("global_state", &global_state_dict,
        "The current values of what add_global_state guards: grad_enabled, default_dtype, autocast_enabled, "
        "autocast_dtype (pass them back as keywords).");
}

}  // namespace strata::py
