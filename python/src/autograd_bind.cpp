// Autograd in Python: the tensor attributes (requires_grad, grad, grad_fn,
// hooks), graph nodes as Python objects, the engine entry point, and the node
// type behind strata.autograd.Function.
#include <unordered_set>

#include <nanobind/stl/function.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/tuple.h>

#include "autocast/autocast.h"
#include "autograd/anomaly.h"
#include "autograd/derivative.h"
#include "autograd/engine.h"
#include "autograd/variable.h"
#include "bind.h"
#include "nested/nested.h"
#include "ops/ops.h"

namespace strata::py {

using namespace strata::autograd;

namespace {

Tensor tensor_or_undefined(nb::handle h) {
  if (h.is_none()) return Tensor();
  return nb::cast<Tensor>(h);
}

// A Python callable owned by C++ code that may drop it without the GIL (an op
// runs with the GIL released, Note [Releasing the GIL] in op_bind.cpp, and may
// destroy a tensor's autograd metadata and with it its hooks): the last
// reference takes the GIL to drop the object.
std::shared_ptr<nb::object> gil_safe_holder(nb::object fn) {
  return std::shared_ptr<nb::object>(new nb::object(std::move(fn)), [](nb::object* o) {
    nb::gil_scoped_acquire gil;
    delete o;
  });
}

// A Python hook: returns None (keep) or a replacement gradient.
GradHook make_hook(nb::object fn) {
  auto holder = gil_safe_holder(std::move(fn));
  return [holder](const Tensor& g) -> Tensor {
    nb::gil_scoped_acquire gil;
    nb::object r = (*holder)(wrap_tensor(g));
    if (r.is_none()) return Tensor();
    return nb::cast<Tensor>(r);
  };
}

// Node of a strata.autograd.Function: calls the Python backward through the
// ctx object (python/strata/autograd/function.py).
class PyFunctionNode final : public Node {
 public:
  PyFunctionNode(nb::object ctx, std::string name) : ctx_(std::move(ctx)), name_(std::move(name)) {}
  ~PyFunctionNode() override {
    nb::gil_scoped_acquire gil;
    ctx_.reset();
  }
  variable_list apply(variable_list&& grads) override {
    nb::gil_scoped_acquire gil;
    nb::list args;
    for (size_t i = 0; i < grads.size(); ++i) {
      if (grads[i].defined()) {
        args.append(wrap_tensor(grads[i]));
      } else if (input_geometry[i].defined() && is_differentiable_type(input_geometry[i].dtype)) {
        args.append(wrap_tensor(zeros(input_geometry[i].sizes, input_geometry[i].dtype, input_geometry[i].device)));
      } else {
        args.append(nb::none());
      }
    }
    nb::object r = ctx_.attr("_run_backward")(nb::tuple(args));
    variable_list out;
    for (nb::handle h : r) out.push_back(tensor_or_undefined(h));
    STRATA_CHECK(out.size() == next_edges.size(), "function ", name_, " returned an incorrect number of gradients (expected ",
                 next_edges.size(), ", got ", out.size(), ")");
    return out;
  }
  std::string name() const override { return name_; }
  void release_variables() override {
    nb::gil_scoped_acquire gil;
    ctx_.attr("_release")();
  }

 private:
  nb::object ctx_;
  std::string name_;
};

// What a Python pack hook returned, unpacked by the pair's unpack hook.
class PyPackedTensor final : public PackedTensor {
 public:
  PyPackedTensor(std::shared_ptr<nb::object> packed, std::shared_ptr<nb::object> unpack)
      : packed_(std::move(packed)), unpack_(std::move(unpack)) {}
  Tensor unpack() const override {
    nb::gil_scoped_acquire gil;
    nb::object r = (*unpack_)(*packed_);
    if (!nb::isinstance<Tensor>(r)) {
      throw nb::type_error(("Output of saved tensor unpack_hook expected to be a Tensor but got result of type " +
                            nb::cast<std::string>(nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(r.ptr()))).attr("__name__")))
                               .c_str());
    }
    return nb::cast<Tensor>(r);
  }

 private:
  std::shared_ptr<nb::object> packed_, unpack_;
};

// A pair of Python hooks; pack runs with grad mode off (as in PyTorch).
class PySavedTensorHooks final : public SavedTensorHooks {
 public:
  PySavedTensorHooks(nb::object pack, nb::object unpack)
      : pack_(gil_safe_holder(std::move(pack))), unpack_(gil_safe_holder(std::move(unpack))) {}
  std::shared_ptr<const PackedTensor> pack(const Tensor& t) const override {
    nb::gil_scoped_acquire gil;
    GradModeGuard no_grad(false);
    nb::object r = (*pack_)(wrap_tensor(t));
    return std::make_shared<PyPackedTensor>(gil_safe_holder(std::move(r)), unpack_);
  }
  nb::object pack_fn() const { return *pack_; }
  nb::object unpack_fn() const { return *unpack_; }

 private:
  std::shared_ptr<nb::object> pack_, unpack_;
};

std::string python_stack() {
  nb::gil_scoped_acquire gil;
  try {
    nb::object lines = nb::module_::import_("traceback").attr("format_stack")();
    std::string s;
    for (nb::handle l : lines) s += nb::cast<std::string>(l);
    return s;
  } catch (...) {
    return std::string();
  }
}

}  // namespace

void bind_autograd(nb::module_& m) {
  set_anomaly_trace_fn(&python_stack);

  nb::class_<Node>(m, "_Node", nb::dynamic_attr())
      .def("name", &Node::name)
      .def_prop_ro("next_functions",
                   [](const Node& n) {
                     nb::list l;
                     for (const Edge& e : n.next_edges) {
                       l.append(nb::make_tuple(e.fn ? nb::cast(e.fn) : nb::none(), e.input_nr));
                     }
                     return nb::tuple(l);
                   })
      .def_prop_ro("_sequence_nr", [](const Node& n) { return n.sequence_nr; })
      .def("_register_prehook",
           [](Node& n, uint32_t index, nb::object fn) {
             n.pre_hooks[index].push_back(make_hook(std::move(fn)));
             return n.pre_hooks[index].size() - 1;
           })
      .def("_remove_prehook",
           [](Node& n, uint32_t index, size_t pos) {
             auto it = n.pre_hooks.find(index);
             if (it != n.pre_hooks.end() && pos < it->second.size()) it->second[pos] = nullptr;
           })
      .def("register_hook",
           [](Node& n, nb::object fn) {
             auto holder = gil_safe_holder(std::move(fn));
             n.post_hooks.push_back([holder](const variable_list& gin, const variable_list& gout) {
               nb::gil_scoped_acquire gil;
               auto conv = [](const variable_list& v) {
                 nb::list l;
                 for (const Tensor& t : v) l.append(t.defined() ? wrap_tensor(t) : nb::none());
                 return nb::tuple(l);
               };
               (*holder)(conv(gin), conv(gout));
             });
           })
      .def("__repr__", [](const Node& n) { return "<" + n.name() + " object>"; });

  nb::class_<Tensor> cls = nb::borrow<nb::class_<Tensor>>(nb::type<Tensor>());
  cls.def_prop_rw(
         "requires_grad", [](const Tensor& t) { return requires_grad(t); },
         [](const Tensor& t, bool v) { set_requires_grad(t, v); })
      .def(
          "requires_grad_",
          [](nb::handle self, bool v) {
            set_requires_grad(nb::cast<const Tensor&>(self), v);
            return nb::borrow(self);
          },
          nb::arg("requires_grad") = true)
      .def_prop_rw(
          "grad",
          // The Python object of .grad is kept in the tensor's __dict__ while
          // it still holds the same gradient, so `p.grad is p.grad` and a grad
          // assigned by the user stays the same object (as in torch).
          [](nb::handle self) -> nb::object {
            Tensor g = strata::autograd::grad(nb::cast<const Tensor&>(self));
            if (!g.defined()) return nb::none();
            // A nested tensor shares its values' autograd metadata: its gradient is the values' one,
            // shown with the tensor's structure (torch's nested .grad).
            if (nested::NestedTensorImpl* n = nested::maybe_nested(nb::cast<const Tensor&>(self)))
              if (!nested::maybe_nested(g))
                return wrap_tensor(nested::make_nested(g, n->offsets(), n->lengths(), n->ragged_idx()));
            nb::object d = nb::getattr(self, "__dict__", nb::none());
            if (d.is_valid() && !d.is_none()) {
              nb::dict dict = nb::borrow<nb::dict>(d);
              if (dict.contains("_grad_obj")) {
                nb::object cached = dict["_grad_obj"];
                if (nb::cast<const Tensor&>(cached).is_same(g)) return cached;
              }
              nb::object obj = wrap_tensor(g);
              dict["_grad_obj"] = obj;
              return obj;
            }
            return wrap_tensor(g);
          },
          [](nb::handle self, nb::handle g) {
            Tensor gt = tensor_or_undefined(g);
            if (nested::NestedTensorImpl* n = nested::maybe_nested(gt)) gt = n->values();
            set_grad(nb::cast<const Tensor&>(self), gt);
            nb::object d = nb::getattr(self, "__dict__", nb::none());
            if (d.is_valid() && !d.is_none()) {
              nb::dict dict = nb::borrow<nb::dict>(d);
              if (g.is_none()) {
                if (dict.contains("_grad_obj")) PyDict_DelItemString(dict.ptr(), "_grad_obj");
              } else {
                dict["_grad_obj"] = nb::borrow(g);
              }
            }
          },
          nb::arg("value").none())
      .def_prop_ro("grad_fn",
                   [](const Tensor& t) -> nb::object {
                     auto fn = strata::autograd::grad_fn(t);
                     return fn ? nb::cast(fn) : nb::none();
                   })
      .def_prop_ro("is_leaf", [](const Tensor& t) { return is_leaf(t); })
      .def_prop_ro("output_nr", [](const Tensor& t) { return meta(t) ? meta(t)->output_nr : 0u; })
      .def_prop_ro("retains_grad", [](const Tensor& t) { return meta(t) && meta(t)->retains_grad; })
      .def("detach", [](const Tensor& t) { return strata::autograd::detach(t); })
      .def("detach_",
           [](nb::handle self) {
             const Tensor& t = nb::cast<const Tensor&>(self);
             if (AutogradMeta* m = meta(t)) {
               STRATA_CHECK(!m->is_view, "Can't detach views in-place. Use detach() instead.");
               m->grad_fn = nullptr;
               m->requires_grad = false;
             }
             t.impl()->set_key_set(t.key_set().remove(DispatchKey::Autograd));
             return nb::borrow(self);
           })
      .def_prop_rw(
          "data", [](const Tensor& t) { return strata::autograd::detach(t); },
          [](const Tensor& t, const Tensor& src) {
            // Re-points this tensor at src's storage, geometry and dtype (torch's
            // set_data, used by Module.to(dtype)); history stays.
            STRATA_CHECK(t.device() == src.device(), "data: cannot assign a tensor on ", src.device().str(),
                         " to a tensor on ", t.device().str());
            t.impl()->set_dtype(src.dtype());
            t.impl()->set_storage(src.impl()->storage());
            t.impl()->set_geometry(DimVector(src.sizes().begin(), src.sizes().end()),
                                   DimVector(src.strides().begin(), src.strides().end()), src.storage_offset());
          })
      .def("retain_grad",
           [](const Tensor& t) {
             STRATA_CHECK(requires_grad(t), "can't retain_grad on Tensor that has requires_grad=False");
             AutogradMeta& m = ensure_meta(t);
             if (!m.grad_fn || m.retains_grad) return;
             m.retains_grad = true;
             // The hook holds the tensor's metadata weakly: a strong reference
             // would keep the graph alive from itself.
             auto alive = std::weak_ptr<AutogradMeta>(t.impl()->autograd_meta_ptr());
             m.grad_fn->retain_grad_hooks[m.output_nr] = ([alive](const Tensor& g) -> Tensor {
               if (auto am = alive.lock()) {
                 if (!am->grad.defined()) {
                   am->grad = grad_mode_enabled() ? g : clone(alias_without_history(g));
                 } else {
                   am->grad = add(am->grad, g);
                 }
               }
               return Tensor();
             });
           })
      .def("_register_hook", [](const Tensor& t, nb::object fn) -> nb::object {
        STRATA_CHECK(requires_grad(t), "cannot register a hook on a tensor that doesn't require gradient");
        AutogradMeta& m = ensure_meta(t);
        if (!m.grad_fn) {
          m.leaf_hooks.push_back(make_hook(std::move(fn)));
          return nb::make_tuple(nb::none(), 0, m.leaf_hooks.size() - 1);
        }
        auto fnode = strata::autograd::grad_fn(t);
        auto& hooks = fnode->pre_hooks[m.output_nr];
        hooks.push_back(make_hook(std::move(fn)));
        return nb::make_tuple(nb::cast(fnode), m.output_nr, hooks.size() - 1);
      })
      .def("_remove_leaf_hook", [](const Tensor& t, size_t pos) {
        if (AutogradMeta* m = meta(t); m && pos < m->leaf_hooks.size()) m->leaf_hooks[pos] = nullptr;
      });

  // Whether the graph behind `outputs` reaches a leaf that requires grad (an AccumulateGrad)
  // other than through the grad_fn nodes of `stops`: strata.func asks it at a top-level
  // transform to learn whether its results must keep their graph (a captured tensor that
  // requires grad). One walk of the graph, stopping at the first such leaf.
  m.def("_graph_reaches_other_leaf", [](const std::vector<Tensor>& outputs, const std::vector<Tensor>& stops) {
    std::unordered_set<const Node*> seen;
    for (const Tensor& t : stops)
      if (auto fn = grad_fn(t)) seen.insert(fn.get());
    std::vector<const Node*> stack;
    for (const Tensor& t : outputs) {
      Edge e = gradient_edge(t);
      if (e.fn) stack.push_back(e.fn.get());
    }
    while (!stack.empty()) {
      const Node* n = stack.back();
      stack.pop_back();
      if (!seen.insert(n).second) continue;
      if (n->is_accumulate_grad()) return true;
      for (const Edge& e : n->next_edges)
        if (e.fn) stack.push_back(e.fn.get());
    }
    return false;
  });

  m.def(
      "_run_backward",
      [](std::vector<Tensor> roots, nb::list grad_roots, bool keep_graph, bool create_graph, std::vector<Tensor> inputs,
         bool allow_unused, bool accumulate_grad) {
        variable_list grads;
        for (nb::handle h : grad_roots) grads.push_back(tensor_or_undefined(h));
        BackwardOptions opt;
        opt.keep_graph = keep_graph;
        opt.create_graph = create_graph;
        opt.allow_unused = allow_unused;
        opt.accumulate_grad = accumulate_grad;
        variable_list r;
        {
          // Independent backward passes in several threads run in parallel;
          // Python hooks and Function backwards take the GIL themselves.
          nb::gil_scoped_release release;
          r = run_backward(roots, grads, inputs, opt);
        }
        nb::list out;
        for (const Tensor& t : r) out.append(t.defined() ? wrap_tensor(t) : nb::none());
        return out;
      },
      nb::arg("roots"), nb::arg("grad_roots"), nb::arg("keep_graph"), nb::arg("create_graph"), nb::arg("inputs"),
      nb::arg("allow_unused"), nb::arg("accumulate_grad"));

  // Records a strata.autograd.Function call: outputs get a node whose backward
  // is ctx._run_backward; dirty inputs (mark_dirty) have their history rebased.
  m.def("_function_record", [](nb::object ctx, nb::list inputs, nb::list outputs, std::string name,
                               std::vector<bool> differentiable, std::vector<bool> dirty) {
    auto node = std::make_shared<PyFunctionNode>(ctx, std::move(name));
    for (nb::handle h : inputs) {
      Tensor t = tensor_or_undefined(h);
      node->next_edges.push_back(t.defined() && requires_grad(t) ? gradient_edge(t) : Edge{});
    }
    if (anomaly_mode_enabled()) node->creation_trace = current_anomaly_trace(node->name());
    size_t i = 0;
    for (nb::handle h : outputs) {
      Tensor t = tensor_or_undefined(h);
      node->add_input_geometry(t);
      if (t.defined() && is_differentiable_type(t.dtype()) && differentiable.at(i)) {
        if (dirty.at(i)) {
          rebase_history(t, node);
        } else {
          set_history(t, node, static_cast<uint32_t>(i));
        }
      }
      ++i;
    }
    return std::shared_ptr<Node>(node);
  });
  m.def("_set_history", [](const Tensor& t, std::shared_ptr<Node> fn, uint32_t nr) { set_history(t, fn, nr); });
  m.def("_make_subclass", [](nb::type_object cls, const Tensor& data, bool requires_grad) {
    Tensor t = alias_without_history(data);
    nb::object o = nb::inst_alloc(cls);
    new (nb::inst_ptr<Tensor>(o)) Tensor(t);
    nb::inst_mark_ready(o);
    if (requires_grad) set_requires_grad(t, true);
    return o;
  });
  m.def("_set_autocast_enabled", [](bool on) { autocast::set_enabled(on); });
  m.def("_is_autocast_enabled", [] { return autocast::is_enabled(); });
  m.def("_set_autocast_dtype", [](const DType& d) { autocast::set_dtype(d.type); });
  m.def("_get_autocast_dtype", [] { return dtype_object(autocast::dtype()); });
  m.def("_autocast_policy", [](const std::string& op) {
    switch (autocast::policy_of(op)) {
      case autocast::Policy::LowerPrecision: return "lower_precision";
      case autocast::Policy::Float32: return "float32";
      case autocast::Policy::Promote: return "promote";
      default: return "none";
    }
  });
  m.def("_set_anomaly_enabled", [](bool on, bool check_nan) { set_anomaly_mode(on, check_nan); });
  m.def("_is_anomaly_enabled", [] { return anomaly_mode_enabled(); });
  m.def("_is_anomaly_check_nan_enabled", [] { return anomaly_check_nan(); });

  // strata.autograd.graph.saved_tensors_hooks (Note [Saved tensor hooks] in
  // src/autograd/derivative.h).
  m.def("_push_saved_tensors_default_hooks", [](nb::object pack, nb::object unpack) {
    push_saved_tensor_hooks(std::make_shared<PySavedTensorHooks>(std::move(pack), std::move(unpack)));
  });
  m.def("_pop_saved_tensors_default_hooks", [] { pop_saved_tensor_hooks(); });
  m.def("_current_saved_tensors_default_hooks", []() -> nb::object {
    auto* h = dynamic_cast<PySavedTensorHooks*>(current_saved_tensor_hooks());
    if (!h) return nb::none();
    return nb::make_tuple(h->pack_fn(), h->unpack_fn());
  });
  m.def("_saved_tensors_hooks_disable", [](std::string msg) { set_saved_tensor_hooks_disabled(std::move(msg)); });
  m.def("_saved_tensors_hooks_enable", [] { set_saved_tensor_hooks_disabled(std::nullopt); });
  m.def("_saved_tensors_hooks_get_disabled_error_message", []() -> nb::object {
    const auto& m = saved_tensor_hooks_disabled_message();
    if (!m) return nb::none();
    return nb::str(m->c_str());
  });
}

}  // namespace strata::py
