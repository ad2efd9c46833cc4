// strata._C._compile: the compiled path's graph IR (src/compile/graph.h) as
// seen from Python: building a graph, recording strata calls into it, reading
// its nodes and values, printing, dead-code elimination and running it,
// through Graph.run or the lower-overhead Graph.runner().
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/unique_ptr.h>
#include <structmember.h>

#include "autograd/engine.h"
#include "autograd/variable.h"
#include "bind.h"
#include "compile/graph.h"
#include "guards_bind.h"

namespace strata::py {

namespace {

using compile::Arg;
using compile::Graph;
using compile::Node;
using compile::Plan;
using compile::ValueKind;

struct ValueView {
  std::shared_ptr<Graph> g;
  int id;
  const compile::Value& v() const { return g->value(id); }
};

struct NodeView {
  std::shared_ptr<Graph> g;
  std::shared_ptr<Node> n;
};

// Stands for a Device argument recorded as "the graph's device".
struct GraphDeviceArg {};

bool is_tensor(nb::handle h) { return nb::isinstance<Tensor>(h); }

// A Python input or number as the IValue the graph uses.
IValue to_ivalue(nb::handle h, const char* what) {
  if (is_tensor(h)) return IValue(nb::cast<const Tensor&>(h));
  PyObject* p = h.ptr();
  if (PyBool_Check(p)) return IValue(p == Py_True);
  if (PyLong_Check(p)) return IValue(static_cast<int64_t>(nb::cast<int64_t>(h)));
  if (PyFloat_Check(p)) return IValue(PyFloat_AS_DOUBLE(p));
  throw TypeError(str("compile: ", what, " expects a Tensor or a Python int, float or bool, not ",
                      nb::cast<std::string>(nb::str(nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(p)))))));
}

nb::object result_to_python(const IValue& v) {
  const auto& r = v.raw();
  if (v.is_tensor()) return v.to_tensor().defined() ? wrap_tensor(v.to_tensor()) : nb::none();
  if (auto* b = std::get_if<bool>(&r)) return nb::bool_(*b);
  if (auto* i = std::get_if<int64_t>(&r)) return nb::int_(*i);
  if (auto* d = std::get_if<double>(&r)) return nb::float_(*d);
  if (v.is_none()) return nb::none();
  throw TypeError("compile: unsupported graph output");
}

nb::object constant_to_python(const IValue& v) {
  const auto& r = v.raw();
  if (v.is_none()) return nb::none();
  if (auto* b = std::get_if<bool>(&r)) return nb::bool_(*b);
  if (auto* i = std::get_if<int64_t>(&r)) return nb::int_(*i);
  if (auto* d = std::get_if<double>(&r)) return nb::float_(*d);
  if (auto* s = std::get_if<Scalar>(&r)) {
    if (s->is_bool()) return nb::bool_(s->to_bool());
    if (s->is_floating_point()) return nb::float_(s->to_double());
    if (s->is_complex()) return nb::steal(PyComplex_FromDoubles(s->to_complex().real(), s->to_complex().imag()));
    return nb::int_(s->to_int());
  }
  if (auto* l = std::get_if<std::vector<int64_t>>(&r)) {
    nb::list out;
    for (int64_t x : *l) out.append(nb::int_(x));
    return out;
  }
  if (auto* s = std::get_if<std::string>(&r)) return nb::str(s->c_str());
  if (auto* t = std::get_if<ScalarType>(&r)) return dtype_object(*t);
  if (auto* d = std::get_if<Device>(&r)) return nb::cast(*d);
  if (auto* t = std::get_if<Tensor>(&r)) {
    if (t->defined() && t->impl()->is_wrapped_number()) return constant_to_python(IValue(t->item()));
    return t->defined() ? wrap_tensor(*t) : nb::none();
  }
  if (auto* l = std::get_if<std::vector<Tensor>>(&r)) {
    nb::list out;
    for (const Tensor& t : *l) out.append(t.defined() ? wrap_tensor(t) : nb::none());
    return out;
  }
  return nb::none();
}

nb::object arg_to_python(const std::shared_ptr<Graph>& g, const Arg& a) {
  switch (a.kind) {
    case Arg::Kind::Value: return nb::cast(ValueView{g, a.value});
    case Arg::Kind::GraphDevice: return nb::cast(GraphDeviceArg{});
    case Arg::Kind::List: {
      nb::list out;
      for (const auto& e : a.elems) out.append(e.is_value() ? nb::cast(ValueView{g, e.value}) : constant_to_python(e.constant));
      return out;
    }
    default: return constant_to_python(a.constant);
  }
}

// Outputs as a tuple. The same value twice is the same object twice, and an
// output that is an input's tensor (returned as is, or written in place) is
// that input's Python object, as in eager code.
nb::tuple outputs_to_tuple(const std::vector<int>& ids, std::vector<IValue>& outs, const IValue* in = nullptr,
                           PyObject* const* in_objs = nullptr, size_t n_in = 0) {
  const size_t n = outs.size();
  nb::tuple t = nb::steal<nb::tuple>(PyTuple_New(static_cast<Py_ssize_t>(n)));
  for (size_t i = 0; i < n; ++i) {
    PyObject* o = nullptr;
    for (size_t j = 0; j < i && !o; ++j)
      if (ids[j] == ids[i]) o = PyTuple_GET_ITEM(t.ptr(), j);
    if (!o && outs[i].is_tensor() && outs[i].to_tensor().defined()) {
      for (size_t j = 0; j < n_in && !o; ++j)
        if (in[j].is_tensor() && in[j].to_tensor().is_same(outs[i].to_tensor())) o = in_objs[j];
    }
    if (o) {
      Py_INCREF(o);
    } else {
      o = result_to_python(outs[i]).release().ptr();
    }
    PyTuple_SET_ITEM(t.ptr(), i, o);
  }
  outs.clear();
  return t;
}

// Note [The graph runner]
// Graph.runner() returns a callable that keeps the graph alive, its Plan, and
// scratch space (environment, stack, outputs) reused from call to call; a
// call converts the arguments, runs the plan and builds the result tuple with
// no other Python in between. A re-entrant call (an op calling back into
// Python that calls the runner again) uses fresh scratch.
PyObject* const* objs(const nb::args& a) { return &PyTuple_GET_ITEM(a.ptr(), 0); }

struct Runner {
  std::shared_ptr<Graph> g;
  std::shared_ptr<const Plan> plan;
  uint64_t version = ~uint64_t(0);
  std::vector<IValue> env, outs, in;
  Stack stack;
  bool busy = false;
  // A kernel plan (Graph.kernel_runner, Note [Kernel plans] in executor.cpp) is fixed: it is not
  // rebuilt from the graph, and its arena state lives here.
  bool fixed = false;
  std::unique_ptr<compile::ArenaState> arena;

  // Runs with the inputs taken out of `inputs` (the list is emptied), so each is released at its
  // last use in the graph (Note [Compiled backward frees saved values] in aot.py).
  nb::tuple call_consuming(nb::list inputs) {
    if (!fixed && version != g->version()) {
      plan = g->plan();
      version = g->version();
    }
    std::vector<IValue> in2, env2, outs2;
    Stack stack2;
    for (nb::handle h : inputs) {
      if (nb::isinstance<Tensor>(h)) {
        in2.emplace_back(*nb::inst_ptr<Tensor>(h));
      } else {
        in2.push_back(to_ivalue(h, "the graph runner"));
      }
    }
    inputs.clear();
    std::shared_ptr<const Plan> p = plan;
    compile::ArenaState* a = busy ? nullptr : arena.get();  // a re-entrant call never shares the arena
    const bool was_busy = busy;
    busy = true;
    struct Done {
      bool& busy;
      bool prev;
      ~Done() { busy = prev; }
    } done{busy, was_busy};
    compile::execute(*p, in2.data(), in2.size(), env2, stack2, outs2, a, true);
    return outputs_to_tuple(compile::plan_outputs(*p), outs2);
  }

  nb::tuple call(nb::args args) {
    if (!fixed && version != g->version()) {
      plan = g->plan();
      version = g->version();
    }
    const size_t n = args.size();
    if (busy) {
      std::vector<IValue> in2, env2, outs2;
      Stack stack2;
      for (size_t i = 0; i < n; ++i) in2.push_back(to_ivalue(args[i], "the graph runner"));
      compile::execute(*plan, in2.data(), n, env2, stack2, outs2);
      return outputs_to_tuple(compile::plan_outputs(*plan), outs2, in2.data(), objs(args), n);
    }
    busy = true;
    struct Done {
      Runner& r;
      ~Done() {
        r.in.clear();
        r.busy = false;
      }
    } done{*this};
    in.clear();
    for (size_t i = 0; i < n; ++i) {
      PyObject* p = args[i].ptr();
      if (nb::isinstance<Tensor>(nb::handle(p))) {
        in.emplace_back(*nb::inst_ptr<Tensor>(nb::handle(p)));
      } else {
        in.push_back(to_ivalue(nb::handle(p), "the graph runner"));
      }
    }
    std::shared_ptr<const Plan> p = plan;  // the graph may change during the call
    compile::execute(*p, in.data(), n, env, stack, outs, arena.get());
    return outputs_to_tuple(compile::plan_outputs(*p), outs, in.data(), objs(args), n);
  }

  // The frame cache's call (Note [The frame cache]): the inputs are objs[idx[i]], converted with
  // no tuple and no nanobind type lookup and moved into the plan's environment, and only the
  // outputs `pick` names become Python objects: the one object when !as_tuple, else a tuple. The
  // same rules as outputs_to_tuple: an output that is an input's tensor is that input's object,
  // the same value twice is one object.
  nb::object call_pick(PyObject* const* objs, const Py_ssize_t* idx, size_t n, const std::vector<Py_ssize_t>& pick,
                       bool as_tuple) {
    if (!fixed && version != g->version()) {
      plan = g->plan();
      version = g->version();
    }
    std::shared_ptr<const Plan> p = plan;
    std::vector<IValue> in2, env2, outs2;
    Stack stack2;
    const bool reentrant = busy;
    std::vector<IValue>& vin = reentrant ? in2 : in;
    std::vector<IValue>& venv = reentrant ? env2 : env;
    std::vector<IValue>& vouts = reentrant ? outs2 : outs;
    Stack& vstack = reentrant ? stack2 : stack;
    busy = true;
    struct Done {
      Runner& r;
      bool prev;
      ~Done() {
        r.in.clear();
        r.outs.clear();
        r.busy = prev;
      }
    } done{*this, reentrant};
    vin.clear();
    for (size_t i = 0; i < n; ++i) {
      PyObject* o = objs[idx[i]];
      if (is_tensor_object(o)) {
        vin.emplace_back(*nb::inst_ptr<Tensor>(nb::handle(o)));
      } else {
        vin.push_back(to_ivalue(nb::handle(o), "the graph runner"));
      }
    }
    compile::execute(*p, vin.data(), n, venv, vstack, vouts, reentrant ? nullptr : arena.get(), true);
    const std::vector<int>& ids = compile::plan_outputs(*p);
    auto object_of = [&](size_t k) -> PyObject* {
      IValue& v = vouts[k];
      if (v.is_tensor() && v.to_tensor().defined()) {
        const Tensor& t = v.to_tensor();
        for (size_t j = 0; j < n; ++j) {
          PyObject* o = objs[idx[j]];
          if (is_tensor_object(o) && nb::inst_ptr<Tensor>(nb::handle(o))->is_same(t)) return Py_NewRef(o);
        }
        return wrap_new_tensor(std::move(v.to_tensor())).release().ptr();
      }
      return result_to_python(v).release().ptr();
    };
    if (!as_tuple) return nb::steal(object_of(static_cast<size_t>(pick[0])));
    nb::object t = nb::steal(PyTuple_New(static_cast<Py_ssize_t>(pick.size())));
    for (size_t i = 0; i < pick.size(); ++i) {
      PyObject* o = nullptr;
      for (size_t j = 0; j < i && !o; ++j)
        if (ids[static_cast<size_t>(pick[j])] == ids[static_cast<size_t>(pick[i])]) o = Py_NewRef(PyTuple_GET_ITEM(t.ptr(), j));
      PyTuple_SET_ITEM(t.ptr(), static_cast<Py_ssize_t>(i), o ? o : object_of(static_cast<size_t>(pick[i])));
    }
    return t;
  }
};

// Note [Graph.add_node]
// Rebuilds a node from a description (strata.export.load): the op by its full
// name, its arguments in schema order. A Value stands for its tensor, the
// GraphDevice object for "the graph's device", a list may mix Values and
// None (Tensor[]), and anything else is a constant converted against the
// schema's type (a number for a Tensor argument is a wrapped number, as in
// the binding). The node is made by the recorder itself: each Value becomes a
// meta tensor of its recorded geometry bound to it, and the op is called with
// Tracer included, so the node, its constants, devices and result values are
// exactly what recording the same call produces.
Tensor meta_for_value(Graph& g, int vid, const OperatorEntry& op, const Argument& a) {
  const compile::Value& v = g.value(vid);
  if (v.kind != ValueKind::Tensor || v.dtype == ScalarType::Undefined)
    throw TypeError(str("Graph.add_node: argument '", a.name, "' of ", op.schema().full_name(), " refers to value ",
                        v.name, ", which is not a defined tensor"));
  const int64_t es = static_cast<int64_t>(element_size(v.dtype));
  int64_t extent = 1;
  for (size_t d = 0; d < v.sizes.size(); ++d) {
    if (v.sizes[d] == 0) extent = 0;
  }
  if (extent) {
    for (size_t d = 0; d < v.sizes.size(); ++d) extent += (v.sizes[d] - 1) * v.strides[d];
  }
  Tensor m(make_intrusive<TensorImpl>(make_storage(static_cast<size_t>(extent * es), Device(DeviceType::Meta)), 0,
                                       IntArrayRef(v.sizes), IntArrayRef(v.strides), v.dtype));
  if (v.requires_grad) autograd::set_requires_grad(m, true);
  g.bind(m, vid);
  return m;
}

std::vector<int> add_node(const std::shared_ptr<Graph>& g, const std::string& name, nb::sequence args,
                          const std::string& source, bool grad_enabled) {
  const OperatorEntry* op = Dispatcher::get().find(name);
  if (!op) throw ValueError(str("Graph.add_node: no op named '", name, "'"));
  const FunctionSchema& schema = op->schema();
  const size_t n = nb::len(args);
  if (n != schema.args.size())
    throw ValueError(str("Graph.add_node: ", schema.full_name(), " takes ", schema.args.size(),
                         " arguments in schema order (", schema.text, "), got ", n));
  Stack stack;
  stack.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const Argument& a = schema.args[i];
    nb::handle h = args[i];
    if (nb::isinstance<ValueView>(h)) {
      const auto& vv = nb::cast<const ValueView&>(h);
      if (vv.g != g) throw ValueError(str("Graph.add_node: argument '", a.name, "' is a value of another graph"));
      stack.emplace_back(meta_for_value(*g, vv.id, *op, a));
    } else if (nb::isinstance<GraphDeviceArg>(h)) {
      if (a.type != ArgType::OptDevice)
        throw TypeError(str("Graph.add_node: argument '", a.name, "' of ", schema.full_name(), " is not a device"));
      stack.emplace_back(Device(DeviceType::Meta));
    } else if (a.type == ArgType::TensorList) {
      if (!PyList_Check(h.ptr()) && !PyTuple_Check(h.ptr()))
        throw TypeError(str("Graph.add_node: argument '", a.name, "' of ", schema.full_name(), " must be a list"));
      std::vector<Tensor> l;
      for (nb::handle e : nb::borrow<nb::sequence>(h)) {
        if (e.is_none()) {
          l.emplace_back();
        } else if (nb::isinstance<ValueView>(e)) {
          const auto& vv = nb::cast<const ValueView&>(e);
          if (vv.g != g) throw ValueError(str("Graph.add_node: argument '", a.name, "' has a value of another graph"));
          l.push_back(meta_for_value(*g, vv.id, *op, a));
        } else {
          throw TypeError(str("Graph.add_node: the elements of argument '", a.name, "' of ", schema.full_name(),
                              " must be Values or None"));
        }
      }
      stack.emplace_back(std::move(l));
    } else {
      if (nb::isinstance<Tensor>(h))
        throw TypeError(str("Graph.add_node: argument '", a.name, "' of ", schema.full_name(),
                            " is a tensor: add it with add_constant and pass its Value"));
      IValue v;
      if (!convert_arg(a, h, &v))
        throw TypeError(str("Graph.add_node: argument '", a.name, "' of ", schema.full_name(), " expects ",
                            arg_type_name(a.type), ", got ",
                            nb::cast<std::string>(nb::repr(h))));
      stack.push_back(std::move(v));
    }
  }
  const size_t before = g->nodes().size();
  {
    autograd::GradModeGuard grad(grad_enabled);
    compile::RecordGuard rec(g);
    compile::set_source(source);
    call_boxed(*op, stack);
    compile::set_source("");
  }
  STRATA_CHECK(g->nodes().size() == before + 1, "Graph.add_node: recording ", schema.full_name(), " added ",
               g->nodes().size() - before, " nodes, expected one");
  return g->nodes().back()->outputs;
}

struct RecordContext {
  std::shared_ptr<Graph> g;
  std::unique_ptr<compile::RecordGuard> guard;
  bool aot = false;
};

thread_local std::vector<std::unique_ptr<compile::RecordGuard>> t_begun;

}  // namespace

// Note [The frame cache]
// strata.compile's per-code cache of entries, checked and run from C++: for
// each entry, the guards (GuardSet::check, no Python), the graph inputs (the
// frame's arguments by position, or a generated Python fetch function for
// inputs reached through attributes), the backend's callable (the graph's own
// Runner is called directly), and the result (one graph output, a tuple of
// them, or a generated Python finish function that rebuilds anything else and
// runs a graph break's instruction and resume function). A miss calls back
// into Python (eval_frame.py), which captures a new entry and adds it here.
struct CacheEntry {
  nb::object guards_obj;
  guards::GuardSet* gs = nullptr;
  nb::object extra;  // tuple appended to the arguments (globals of other modules), or None
  bool simple_inputs = false;
  std::vector<Py_ssize_t> arg_inputs;
  nb::object fetch;
  nb::object runner_obj;
  Runner* runner = nullptr;
  int ret_kind = 0;  // 0: finish(O, A, G, C); 1: O[i]; 2: tuple(O[i]...)
  std::vector<Py_ssize_t> ret_idx;
  nb::object finish;
  // on_error(fn, args, exc): the result when the graph raised before any effect and the frame has
  // try/with blocks (Note [Graph errors inside try blocks] in executor.cpp); None: it propagates.
  nb::object on_error;
};

nb::object& cache_miss_sentinel() {
  static nb::object* s = new nb::object(nb::steal(PyObject_CallNoArgs(reinterpret_cast<PyObject*>(&PyBaseObject_Type))));
  return *s;
}

struct FrameCache {
  std::vector<std::shared_ptr<CacheEntry>> entries;
  nb::object miss;

  // Runs entry e on the frame's arguments a (with its extra roots). *graph_done is set once the
  // graph has run: what raises later (a graph break's instruction, the resume function) is not the
  // graph's error, and on_error never sees it.
  static nb::object run_entry(CacheEntry& e, PyObject* a, PyObject* g, PyObject* c, bool* graph_done = nullptr) {
    if (e.runner && e.simple_inputs && e.ret_kind != 0)
      return e.runner->call_pick(&PyTuple_GET_ITEM(a, 0), e.arg_inputs.data(), e.arg_inputs.size(), e.ret_idx,
                                 e.ret_kind == 2);
    nb::object ins;
    if (e.simple_inputs) {
      ins = nb::steal(PyTuple_New(static_cast<Py_ssize_t>(e.arg_inputs.size())));
      for (size_t i = 0; i < e.arg_inputs.size(); ++i) {
        PyObject* v = PyTuple_GET_ITEM(a, e.arg_inputs[i]);
        Py_INCREF(v);
        PyTuple_SET_ITEM(ins.ptr(), static_cast<Py_ssize_t>(i), v);
      }
    } else {
      ins = e.fetch(nb::handle(a), nb::handle(g), nb::handle(c));
    }
    nb::tuple outs;
    if (e.runner) {
      outs = e.runner->call(nb::borrow<nb::args>(ins));
    } else {
      nb::object r = nb::steal(PyObject_Call(e.runner_obj.ptr(), ins.ptr(), nullptr));
      if (!r.is_valid()) throw nb::python_error();
      outs = nb::borrow<nb::tuple>(r);
    }
    if (e.ret_kind == 1) return outs[e.ret_idx[0]];
    if (e.ret_kind == 2) {
      nb::object t = nb::steal(PyTuple_New(static_cast<Py_ssize_t>(e.ret_idx.size())));
      for (size_t i = 0; i < e.ret_idx.size(); ++i) {
        PyObject* v = PyTuple_GET_ITEM(outs.ptr(), e.ret_idx[i]);
        Py_INCREF(v);
        PyTuple_SET_ITEM(t.ptr(), static_cast<Py_ssize_t>(i), v);
      }
      return t;
    }
    if (graph_done) *graph_done = true;
    return e.finish(outs, nb::handle(a), nb::handle(g), nb::handle(c));
  }

  // The result of the first entry whose guards hold, or the miss sentinel.
  nb::object lookup(nb::handle fn, nb::handle args) {
    if (!PyFunction_Check(fn.ptr())) throw TypeError("FrameCache: expected a function");
    if (!PyTuple_Check(args.ptr())) throw TypeError("FrameCache: expected the arguments as a tuple");
    PyObject* g = PyFunction_GET_GLOBALS(fn.ptr());
    PyObject* c = PyFunction_GET_CLOSURE(fn.ptr());
    if (!c) c = Py_None;
    for (size_t k = 0; k < entries.size(); ++k) {
      std::shared_ptr<CacheEntry> keep = entries[k];  // clear() may run while the entry does
      CacheEntry& e = *keep;
      nb::object ext;
      PyObject* a = args.ptr();
      if (!e.extra.is_none()) {
        ext = nb::steal(PySequence_Concat(a, e.extra.ptr()));
        if (!ext.is_valid()) throw nb::python_error();
        a = ext.ptr();
      }
      if (!e.gs->check(a, g, c)) continue;
      if (e.on_error.is_none()) return run_entry(e, a, g, c);
      compile::clear_failure_before_effects();
      bool graph_done = false;
      try {
        return run_entry(e, a, g, c, &graph_done);
      } catch (...) {
        if (graph_done || !compile::last_failure_before_effects()) throw;
        raise_as_python_error();
        nb::python_error err;
        return e.on_error(fn, args, err.value());
      }
    }
    return cache_miss_sentinel();
  }

  nb::object call(nb::handle fn, nb::handle args) {
    nb::object r = lookup(fn, args);
    if (r.is(cache_miss_sentinel())) return miss(fn, args);
    return r;
  }
};

// Note [Compiled function objects]
// What strata.compile(fn) returns is called on every step of a training loop, so its call is
// the first thing a compiled call pays for. A Python wrapper with fn's signature binds the
// arguments exactly as fn would (defaults, keywords, *args) but costs a Python frame, a tuple and
// a nanobind method call (~110 ns of a ~670 ns one-op call). CompiledFunction is a small CPython
// object around that wrapper: a call with exactly fn's positional parameters and no keywords
// (the common case) builds the frame's argument tuple from the vectorcall array and calls the
// FrameCache from C++; any other call goes to the wrapper. Every attribute (__name__,
// __wrapped__, __dict__, __code__, __class__, ...) is the wrapper's, read and written through,
// so the object passes for the function it was before; __get__ binds it as a method.
struct CompiledFunction {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject* cache;  // the FrameCache object
  PyObject* fn;     // the original function (what the cache's entries are keyed on)
  PyObject* slow;   // the Python wrapper
  Py_ssize_t nargs; // positional parameters of the fast path; -1: every call takes the wrapper
};

PyObject* cf_vectorcall(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* c = reinterpret_cast<CompiledFunction*>(self);
  const Py_ssize_t n = PyVectorcall_NARGS(nargsf);
  if (n != c->nargs || (kwnames && PyTuple_GET_SIZE(kwnames) > 0)) return PyObject_Vectorcall(c->slow, args, nargsf, kwnames);
  PyObject* tup = PyTuple_New(n);
  if (!tup) return nullptr;
  for (Py_ssize_t i = 0; i < n; ++i) PyTuple_SET_ITEM(tup, i, Py_NewRef(args[i]));
  nb::object t = nb::steal(tup);
  try {
    return nb::inst_ptr<FrameCache>(nb::handle(c->cache))->call(nb::handle(c->fn), t).release().ptr();
  } catch (...) {
    return raise_as_python_error();
  }
}

// copy, deepcopy and pickle treat it as Python treats a function: copies are the object itself, and
// it pickles by reference (its module and qualified name, which are the wrapper's).
PyObject* cf_copy(PyObject* self, PyObject*) { return Py_NewRef(self); }
PyObject* cf_reduce(PyObject* self, PyObject*) {
  return PyObject_GetAttrString(reinterpret_cast<CompiledFunction*>(self)->slow, "__qualname__");
}
PyObject* cf_copy_reduce_ex(PyObject* self, PyObject*) { return cf_reduce(self, nullptr); }
PyMethodDef cf_methods[] = {
    {"__copy__", cf_copy, METH_NOARGS, nullptr},
    {"__deepcopy__", cf_copy, METH_O, nullptr},
    {"__reduce__", cf_reduce, METH_NOARGS, nullptr},
    {"__reduce_ex__", cf_copy_reduce_ex, METH_O, nullptr},
    {nullptr, nullptr, 0, nullptr},
};

PyObject* cf_getattro(PyObject* self, PyObject* name) {
  if (PyUnicode_Check(name)) {
    for (const PyMethodDef* m = cf_methods; m->ml_name; ++m)
      if (PyUnicode_CompareWithASCIIString(name, m->ml_name) == 0) return PyObject_GenericGetAttr(self, name);
  }
  return PyObject_GetAttr(reinterpret_cast<CompiledFunction*>(self)->slow, name);
}

int cf_setattro(PyObject* self, PyObject* name, PyObject* v) {
  PyObject* slow = reinterpret_cast<CompiledFunction*>(self)->slow;
  return v ? PyObject_SetAttr(slow, name, v) : PyObject_DelAttr(slow, name);
}

PyObject* cf_repr(PyObject* self) { return PyObject_Repr(reinterpret_cast<CompiledFunction*>(self)->slow); }

PyObject* cf_descr_get(PyObject* self, PyObject* obj, PyObject*) {
  if (obj == nullptr || obj == Py_None) return Py_NewRef(self);
  return PyMethod_New(self, obj);
}

int cf_traverse(PyObject* self, visitproc visit, void* arg) {
  auto* c = reinterpret_cast<CompiledFunction*>(self);
  Py_VISIT(c->cache);
  Py_VISIT(c->fn);
  Py_VISIT(c->slow);
  Py_VISIT(Py_TYPE(self));
  return 0;
}

int cf_clear(PyObject* self) {
  auto* c = reinterpret_cast<CompiledFunction*>(self);
  Py_CLEAR(c->cache);
  Py_CLEAR(c->fn);
  Py_CLEAR(c->slow);
  return 0;
}

void cf_dealloc(PyObject* self) {
  PyTypeObject* tp = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  cf_clear(self);
  PyObject_GC_Del(self);
  Py_DECREF(tp);
}

PyMemberDef cf_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, static_cast<Py_ssize_t>(offsetof(CompiledFunction, vectorcall)), READONLY,
     nullptr},
    {nullptr, 0, 0, 0, nullptr},
};

PyTypeObject* compiled_function_type() {
  static PyTypeObject* tp = [] {
    PyType_Slot slots[] = {
        {Py_tp_dealloc, reinterpret_cast<void*>(cf_dealloc)},
        {Py_tp_call, reinterpret_cast<void*>(PyVectorcall_Call)},
        {Py_tp_repr, reinterpret_cast<void*>(cf_repr)},
        {Py_tp_getattro, reinterpret_cast<void*>(cf_getattro)},
        {Py_tp_setattro, reinterpret_cast<void*>(cf_setattro)},
        {Py_tp_descr_get, reinterpret_cast<void*>(cf_descr_get)},
        {Py_tp_traverse, reinterpret_cast<void*>(cf_traverse)},
        {Py_tp_clear, reinterpret_cast<void*>(cf_clear)},
        {Py_tp_members, cf_members},
        {Py_tp_methods, cf_methods},
        {0, nullptr},
    };
    PyType_Spec spec = {"strata._C._compile.CompiledFunction", sizeof(CompiledFunction), 0,
                        Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_DISALLOW_INSTANTIATION |
                            Py_TPFLAGS_METHOD_DESCRIPTOR | Py_TPFLAGS_HAVE_GC,
                        slots};
    PyObject* t = PyType_FromSpec(&spec);
    if (!t) throw nb::python_error();
    return reinterpret_cast<PyTypeObject*>(t);
  }();
  return tp;
}

nb::object make_compiled_function(nb::object cache, nb::object fn, nb::object slow, Py_ssize_t nargs) {
  if (!nb::isinstance<FrameCache>(cache)) throw TypeError("CompiledFunction: expected a FrameCache");
  PyTypeObject* tp = compiled_function_type();
  auto* c = PyObject_GC_New(CompiledFunction, tp);
  if (!c) throw nb::python_error();
  c->vectorcall = cf_vectorcall;
  c->cache = cache.release().ptr();
  c->fn = fn.release().ptr();
  c->slow = slow.release().ptr();
  c->nargs = nargs;
  PyObject_GC_Track(reinterpret_cast<PyObject*>(c));
  return nb::steal(reinterpret_cast<PyObject*>(c));
}

void bind_frame_cache(nb::module_& m) {
  m.attr("CACHE_MISS") = cache_miss_sentinel();
  m.def("clear_failure_before_effects", &compile::clear_failure_before_effects);
  m.def("last_failure_before_effects", &compile::last_failure_before_effects,
        "Whether the last graph that raised on this thread did so before any step with an effect outside the call "
        "(Note [Graph errors inside try blocks] in src/compile/executor.cpp).");
  nb::class_<FrameCache>(m, "FrameCache", "A frame's compiled entries, checked and run from C++ (Note [The frame cache]).")
      .def("__init__", [](FrameCache* self, nb::object miss) { new (self) FrameCache{{}, std::move(miss)}; })
      .def("__call__", &FrameCache::call)
      .def("lookup", &FrameCache::lookup, "The result of the first entry whose guards hold, or CACHE_MISS.")
      .def(
          "add",
          [](FrameCache& fc, nb::object guards_obj, nb::object extra, nb::object arg_inputs, nb::object fetch,
             nb::object runner, int ret_kind, std::vector<Py_ssize_t> ret_idx, nb::object finish, nb::object on_error) {
            auto e = std::make_shared<CacheEntry>();
            e->guards_obj = guards_obj;
            e->gs = nb::inst_ptr<guards::GuardSet>(guards_obj);
            e->extra = (extra.is_none() || nb::len(extra) == 0) ? nb::none() : nb::object(nb::tuple(extra));
            if (!arg_inputs.is_none()) {
              e->simple_inputs = true;
              e->arg_inputs = nb::cast<std::vector<Py_ssize_t>>(arg_inputs);
            }
            e->fetch = fetch;
            e->runner_obj = runner;
            if (nb::isinstance<Runner>(runner)) e->runner = nb::inst_ptr<Runner>(runner);
            STRATA_CHECK_VALUE(ret_kind >= 0 && ret_kind <= 2, "FrameCache.add: bad ret_kind");
            STRATA_CHECK_VALUE(ret_kind != 1 || ret_idx.size() == 1, "FrameCache.add: ret_kind 1 takes one index");
            e->ret_kind = ret_kind;
            e->ret_idx = std::move(ret_idx);
            e->finish = finish;
            e->on_error = on_error;
            fc.entries.push_back(std::move(e));
          },
          nb::arg("guards"), nb::arg("extra").none(), nb::arg("arg_inputs").none(), nb::arg("fetch").none(),
          nb::arg("runner"), nb::arg("ret_kind"), nb::arg("ret_idx"), nb::arg("finish").none(),
          nb::arg("on_error").none() = nb::none())
      .def("clear", [](FrameCache& fc) { fc.entries.clear(); })
      .def("compiled_function", [](FrameCache& fc, nb::object fn, nb::object wrapper, Py_ssize_t nargs) {
             return make_compiled_function(nb::find(&fc), std::move(fn), std::move(wrapper), nargs);
           }, nb::arg("fn"), nb::arg("wrapper"), nb::arg("nargs"),
           "The object strata.compile returns (Note [Compiled function objects]): calls with nargs positional "
           "arguments and no keywords go from C++ to this cache, every other call and every attribute to wrapper.")
      .def("__len__", [](const FrameCache& fc) { return fc.entries.size(); });
}

void bind_codegen(nb::module_& m);  // codegen_bind.cpp

void bind_compile(nb::module_& parent) {
  nb::module_ m = parent.def_submodule("_compile", "Graph IR of strata.compile (capture, print, run).");

  nb::class_<GraphDeviceArg>(m, "GraphDevice")
      .def(nb::init<>())
      .def("__repr__", [](const GraphDeviceArg&) { return std::string("<graph device>"); });

  nb::class_<ValueView>(m, "Value")
      .def_prop_ro("id", [](const ValueView& v) { return v.id; })
      .def_prop_ro("name", [](const ValueView& v) { return v.v().name; })
      .def_prop_ro("kind", [](const ValueView& v) { return std::string(compile::value_kind_name(v.v().kind)); })
      .def_prop_ro("dtype",
                   [](const ValueView& v) -> nb::object {
                     const auto& x = v.v();
                     if (x.kind != ValueKind::Tensor || x.dtype == ScalarType::Undefined) return nb::none();
                     return dtype_object(x.dtype);
                   })
      .def_prop_ro("shape",
                   [](const ValueView& v) {
                     nb::list l;
                     for (int64_t s : v.v().sizes) l.append(nb::int_(s));
                     return nb::tuple(l);
                   })
      .def_prop_ro("stride",
                   [](const ValueView& v) {
                     nb::list l;
                     for (int64_t s : v.v().strides) l.append(nb::int_(s));
                     return nb::tuple(l);
                   })
      .def_prop_ro("device",
                   [](const ValueView& v) -> nb::object {
                     if (v.v().kind != ValueKind::Tensor) return nb::none();
                     return nb::str(v.v().device.str().c_str());
                   })
      .def_prop_ro("requires_grad", [](const ValueView& v) { return v.v().requires_grad; })
      .def_prop_ro("is_input", [](const ValueView& v) { return v.v().origin == compile::ValueOrigin::Input; })
      .def_prop_ro("is_constant", [](const ValueView& v) { return v.v().origin == compile::ValueOrigin::Constant; })
      .def_prop_ro("constant",
                   [](const ValueView& v) -> nb::object {
                     const auto& x = v.v();
                     if (x.origin != compile::ValueOrigin::Constant) return nb::none();
                     if (x.constant.is_tensor()) return wrap_tensor(x.constant.to_tensor());
                     return constant_to_python(x.constant);
                   })
      .def("__eq__",
           [](const ValueView& a, nb::handle b) {
             return nb::isinstance<ValueView>(b) && nb::cast<const ValueView&>(b).g == a.g &&
                    nb::cast<const ValueView&>(b).id == a.id;
           })
      .def("__hash__", [](const ValueView& v) { return std::hash<int>()(v.id); })
      .def("__repr__", [](const ValueView& v) {
        const auto& x = v.v();
        std::string s = "Value(" + std::to_string(x.id) + ", " + x.name + ", " + compile::value_kind_name(x.kind);
        if (x.kind == ValueKind::Tensor && x.dtype != ScalarType::Undefined) {
          s += ", " + std::string(dtype_name(x.dtype)) + "[";
          for (size_t i = 0; i < x.sizes.size(); ++i) s += (i ? ", " : "") + std::to_string(x.sizes[i]);
          s += "], " + x.device.str();
        }
        return s + ")";
      });

  nb::class_<NodeView>(m, "Node")
      .def_prop_ro("op", [](const NodeView& n) { return n.n->op->schema().full_name(); })
      .def_prop_ro("op_id", [](const NodeView& n) { return n.n->op->id(); })
      .def_prop_ro("schema", [](const NodeView& n) { return n.n->op->schema().text; })
      .def_prop_ro("args",
                   [](const NodeView& n) {
                     nb::list l;
                     for (const Arg& a : n.n->args) l.append(arg_to_python(n.g, a));
                     return l;
                   })
      .def_prop_ro("arg_names",
                   [](const NodeView& n) {
                     nb::list l;
                     for (const auto& a : n.n->op->schema().args) l.append(nb::str(a.name.c_str()));
                     return l;
                   })
      .def_prop_ro("outputs", [](const NodeView& n) { return n.n->outputs; })
      .def_prop_ro("source", [](const NodeView& n) { return n.n->source; })
      .def_prop_ro("grad_enabled", [](const NodeView& n) { return n.n->grad_enabled; })
      .def_prop_ro("autocast",
                   [](const NodeView& n) -> nb::object {
                     return n.n->autocast == ScalarType::Undefined ? nb::none() : dtype_object(n.n->autocast);
                   })
      .def_prop_ro("has_side_effects", [](const NodeView& n) { return n.n->has_side_effects(); })
      .def_prop_ro("flags", [](const NodeView& n) { return n.n->op->flags(); })
      .def_prop_ro("input_ids",
                   [](const NodeView& n) {
                     std::vector<int> ids;
                     for (const Arg& a : n.n->args) {
                       if (a.kind == Arg::Kind::Value) ids.push_back(a.value);
                       for (const auto& e : a.elems)
                         if (e.is_value()) ids.push_back(e.value);
                     }
                     return ids;
                   })
      .def_prop_ro("list_return", [](const NodeView& n) { return n.n->list_return; })
      .def("__repr__", [](const NodeView& n) {
        std::string s = "Node(" + n.n->op->schema().full_name() + " -> [";
        for (size_t i = 0; i < n.n->outputs.size(); ++i) s += (i ? ", " : "") + n.g->value(n.n->outputs[i]).name;
        return s + "])";
      });

  nb::class_<Runner>(m, "GraphRunner", nb::dynamic_attr())
      .def("__call__", [](Runner& r, nb::args args) { return r.call(std::move(args)); })
      .def("call_consuming", &Runner::call_consuming, nb::arg("inputs"),
           "Runs on the inputs in the list, which is emptied first: each input is released at its last use.")
      .def_prop_ro("num_kernels", [](const Runner& r) { return compile::plan_num_kernels(*r.plan); })
      .def_prop_ro("arena_bytes", [](const Runner& r) { return compile::plan_arena_bytes(*r.plan); })
      .def_prop_ro("keeps_arena", [](const Runner& r) { return r.arena && r.arena->keep; })
      .def_prop_ro("arena_allocated", [](const Runner& r) {
        return r.arena && r.arena->buffer.defined() ? static_cast<int64_t>(r.arena->buffer.numel()) : int64_t{0};
      })
      .def_prop_ro("calls", [](const Runner& r) { return r.arena ? r.arena->calls : int64_t{0}; })
      .def_prop_ro("fallbacks", [](const Runner& r) { return r.arena ? r.arena->fallbacks : int64_t{0}; },
                   "Kernel steps that ran their nodes instead (an input not contiguous, another size).")
      .def_prop_ro("graph", [](const Runner& r) { return r.g; });
  bind_frame_cache(m);

  nb::class_<RecordContext>(m, "_RecordContext")
      .def("__enter__",
           [](RecordContext& c) {
             STRATA_CHECK(!c.guard, "compile: this record() context is already active");
             c.guard = std::make_unique<compile::RecordGuard>(c.g, c.aot);
             return c.g;
           })
      .def("__exit__", [](RecordContext& c, nb::args) {
        c.guard.reset();
        return false;
      });

  nb::class_<Graph>(m, "Graph")
      .def(nb::new_([] { return std::make_shared<Graph>(); }))
      .def(
          "add_input",
          [](Graph& g, const std::string& name, nb::handle example, nb::handle device) {
            if (is_tensor(example)) {
              std::optional<Device> d;
              if (!device.is_none()) d = to_device(device);
              return g.add_input(name, nb::cast<const Tensor&>(example), d);
            }
            return g.add_input(name, to_ivalue(example, "add_input"));
          },
          nb::arg("name"), nb::arg("example"), nb::arg("device") = nb::none())
      .def(
          "add_constant",
          [](Graph& g, nb::handle value, const std::string& name) {
            if (is_tensor(value)) return g.add_constant(nb::cast<const Tensor&>(value), name);
            return g.add_constant(to_ivalue(value, "add_constant"), name);
          },
          nb::arg("value"), nb::arg("name") = "")
      .def("bind", [](Graph& g, const Tensor& t, int vid) { g.bind(t, vid); }, nb::arg("tensor"), nb::arg("vid"))
      .def("value_of", [](const Graph& g, const Tensor& t) { return g.value_of(t); }, nb::arg("tensor"))
      .def("clear_bindings", &Graph::clear_bindings)
      .def("set_outputs", [](Graph& g, std::vector<int> outs) { g.set_outputs(std::move(outs)); })
      .def_prop_ro("outputs", [](const Graph& g) { return g.outputs(); })
      .def_prop_ro("inputs", [](const Graph& g) { return g.inputs(); })
      .def_prop_ro("constants", [](const Graph& g) { return g.constants(); })
      .def_prop_ro("num_ops", &Graph::num_ops)
      .def_prop_ro("base_grad_enabled", &Graph::base_grad_enabled,
                   "The grad mode the graph was made in: nodes recorded in it follow the caller's mode when "
                   "the graph runs, the others run in their own.")
      .def_prop_ro("nodes",
                   [](std::shared_ptr<Graph> g) {
                     nb::list l;
                     for (const auto& n : g->nodes()) l.append(nb::cast(NodeView{g, n}));
                     return l;
                   })
      .def_prop_ro("values",
                   [](std::shared_ptr<Graph> g) {
                     nb::list l;
                     for (size_t i = 0; i < g->values().size(); ++i) l.append(nb::cast(ValueView{g, static_cast<int>(i)}));
                     return l;
                   })
      .def("value", [](std::shared_ptr<Graph> g, int vid) {
        (void)g->value(vid);
        return ValueView{g, vid};
      })
      .def("add_node", &add_node, nb::arg("op"), nb::arg("args"), nb::arg("source") = "",
           nb::arg("grad_enabled") = true)
      .def("eliminate_dead_code", &Graph::eliminate_dead_code)
      .def(
          "extract",
          [](const Graph& g, const std::vector<int>& inputs, const std::vector<int>& nodes,
             const std::vector<int>& outputs, std::optional<bool> grad_enabled) {
            return g.extract(inputs, nodes, outputs, grad_enabled);
          },
          nb::arg("inputs"), nb::arg("nodes"), nb::arg("outputs"), nb::arg("grad_enabled") = nb::none(),
          "A new graph of the nodes at the given positions: inputs (value ids) become its inputs, constants "
          "they read are copied, outputs are value ids of this graph.")
      .def("print_readable", &Graph::print_readable)
      .def("__str__", &Graph::print_readable)
      .def("run",
           [](const Graph& g, nb::sequence inputs) {
             std::vector<IValue> in;
             std::vector<PyObject*> in_objs;
             nb::list held(inputs);  // keeps every input object alive for the identity check
             for (nb::handle h : held) {
               in.push_back(to_ivalue(h, "Graph.run"));
               in_objs.push_back(h.ptr());
             }
             std::vector<IValue> outs = g.run(in);
             nb::list l;
             nb::tuple t = outputs_to_tuple(g.outputs(), outs, in.data(), in_objs.data(), in.size());
             for (nb::handle h : t) l.append(h);
             return l;
           })
      .def(
          "run_meta",
          [](const Graph& g, nb::sequence inputs) {
            std::vector<IValue> in;
            for (nb::handle h : inputs) in.push_back(to_ivalue(h, "Graph.run_meta"));
            std::vector<IValue> outs = g.run_meta(in);
            nb::list l;
            for (const IValue& v : outs) l.append(v.is_tensor() ? wrap_tensor(v.to_tensor()) : nb::none());
            return l;
          },
          "Runs the graph on Meta inputs with every device argument Meta and constant tensors made Meta "
          "(Note [Replaying a graph on Meta]); tensor outputs, None for others.")
      .def(
          "kernel_runner",
          [](std::shared_ptr<Graph> g, nb::list specs, int64_t arena_bytes, bool keep, std::vector<int> order) {
            std::vector<compile::KernelSpec> ks;
            for (nb::handle h : specs) {
              auto t = nb::cast<nb::tuple>(h);
              STRATA_CHECK(t.size() >= 13 && t.size() <= 15,
                           "Graph.kernel_runner: a kernel spec has 13 to 15 fields, got ", t.size());
              compile::KernelSpec s;
              if (t.size() >= 14) s.name = nb::cast<std::string>(t[13]);
              if (t.size() == 15 && !t[14].is_none()) s.out_into = nb::cast<std::vector<int>>(t[14]);
              s.fn = nb::cast<uintptr_t>(t[0]);
              s.rows = nb::cast<bool>(t[1]);
              s.ref = nb::cast<int64_t>(t[2]);
              s.numel = nb::cast<int64_t>(t[3]);
              s.cols = nb::cast<int64_t>(t[4]);
              auto st = to_scalar_type(t[5]);
              STRATA_CHECK(st.has_value(), "Graph.kernel_runner: dtype must be a strata dtype");
              s.dtype = *st;
              s.in_vids = nb::cast<std::vector<int>>(t[6]);
              s.out_vids = nb::cast<std::vector<int>>(t[7]);
              s.out_shapes = nb::cast<std::vector<std::vector<int64_t>>>(t[8]);
              s.nodes = nb::cast<std::vector<int>>(t[9]);
              s.arena_offsets = nb::cast<std::vector<int64_t>>(t[10]);
              if (!t[11].is_none()) {
                s.check_sizes = true;
                s.ref_sizes = nb::cast<std::vector<int64_t>>(t[11]);
              }
              // (out dtypes, strided geometry or None, status): KernelCall's fields (codegen_bind.cpp).
              auto extra = nb::cast<nb::tuple>(t[12]);
              STRATA_CHECK(extra.size() == 3, "Graph.kernel_runner: the extra field has 3 entries");
              for (nb::handle d : nb::cast<nb::list>(extra[0])) {
                auto dt = to_scalar_type(d);
                STRATA_CHECK(dt.has_value(), "Graph.kernel_runner: output dtypes must be strata dtypes");
                s.out_dtypes.push_back(*dt);
              }
              if (!extra[1].is_none()) {
                auto geo = nb::cast<nb::tuple>(extra[1]);
                STRATA_CHECK(geo.size() == 4, "Graph.kernel_runner: a geometry has 4 entries");
                s.strided = true;
                s.out_shapes = nb::cast<std::vector<std::vector<int64_t>>>(geo[0]);
                s.in_sizes = nb::cast<std::vector<std::vector<int64_t>>>(geo[1]);
                s.in_strides = nb::cast<std::vector<std::vector<int64_t>>>(geo[2]);
                s.out_strides = nb::cast<std::vector<std::vector<int64_t>>>(geo[3]);
              }
              s.status = nb::cast<bool>(extra[2]);
              ks.push_back(std::move(s));
            }
            STRATA_CHECK(arena_bytes >= 0, "Graph.kernel_runner: negative arena size");
            auto r = std::make_unique<Runner>();
            r->g = g;
            r->plan = compile::build_kernel_plan(*g, ks, arena_bytes, order);
            r->version = g->version();
            r->fixed = true;
            r->arena = std::make_unique<compile::ArenaState>();
            r->arena->keep = keep;
            return r;
          },
          nb::arg("kernels"), nb::arg("arena_bytes"), nb::arg("keep_arena"), nb::arg("order") = std::vector<int>(),
          "A runner of the graph with generated kernels in place of some nodes (Note [Kernel plans] in "
          "src/compile/executor.cpp). kernels: (fn address, rows, ref, numel, cols, dtype, input ids, output ids, "
          "row-kernel output shapes, replaced node positions, arena byte offset per output or -1, the sizes the "
          "ref input must have or None, (output dtypes, strided geometry (output shapes, input sizes, input "
          "strides, output strides) or None, status word)[, the profiler's name[, per output the index of the "
          "input it is written into or -1 (Note [Reinplacing])]]); keep_arena: "
          "the arena and the tensors over it are made at the first call and reused (mode reduce-overhead); order: "
          "every node position in the order to run them (empty: graph order).")
      .def("runner", [](std::shared_ptr<Graph> g) {
        auto r = std::make_unique<Runner>();
        r->g = g;
        r->plan = g->plan();
        r->version = g->version();
        return r;
      });

  m.def(
      "record", [](std::shared_ptr<Graph> g, bool aot) { return RecordContext{std::move(g), nullptr, aot}; },
      nb::arg("graph"), nb::arg("aot") = false,
      "Records strata calls into graph while the context is active. aot=True: record for AOT autograd "
      "(composites as the ops they are made of; see Note [Recording for AOT autograd]).");
  m.def("begin_record", [](std::shared_ptr<Graph> g) { t_begun.push_back(std::make_unique<compile::RecordGuard>(g)); });
  m.def("end_record", [] {
    STRATA_CHECK(!t_begun.empty(), "compile: end_record() without a matching begin_record()");
    t_begun.pop_back();
  });
  m.def("set_source", [](std::string s) { compile::set_source(std::move(s)); });
  m.def("get_source", [] { return compile::current_source(); });
  m.def("is_recording", [] { return compile::is_recording(); });
  m.def("backward_keeps_graph", [] { return autograd::backward_keeps_graph(); },
        "Inside a backward pass: whether it keeps the graph (retain_graph).");
  m.def("set_note_symints", [](bool on) { return py::set_note_symints(on); }, nb::arg("on"),
        "Note [Symbolic ints in recorded nodes]: while on, an int subclass with _strata_vid passed to an op "
        "becomes a reference to that graph value in the recorded node. Returns the previous setting.");
  bind_codegen(m);  // codegen_bind.cpp: KernelCall
}

}  // namespace strata::py
