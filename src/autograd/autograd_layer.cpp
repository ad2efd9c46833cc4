// Note [The autograd layer]
// One boxed kernel serves DispatchKey::Autograd for every op. It runs only when
// some argument carries the Autograd key (a tensor that requires grad or has a
// history) and grad mode is on. For a differentiable op it records a node that
// owns the op's derivative (derivative.h), saves what the derivative asked for,
// runs the op below itself with Autograd excluded (so ops called inside kernels
// record nothing), and gives the outputs their history. Composite ops without a
// derivative of their own pass through with autograd still on, so the ops they
// are made of record themselves.
//
// In-place ops are the same op with out= aliasing `self`: the node's slot for
// self is self's old value, and self's history is rebased onto the node.
#include "autograd/anomaly.h"
#include "autograd/derivative.h"
#include "autograd/variable.h"
#include "ops/ops.h"

namespace strata::autograd {

namespace {

const Tensor kNoTensor;  // bound by reference where an argument is absent: no refcount traffic

bool is_tensor_arg(ArgType t) { return t == ArgType::Tensor || t == ArgType::OptTensor; }

void check_inplace_target(const OperatorEntry& op, const Tensor& self) {
  AutogradMeta* m = meta(self);
  if (!m) return;
  if (m->requires_grad && !m->grad_fn) {
    throw Error(str(op.name(), ": a leaf Variable that requires grad is being used in an in-place operation."));
  }
  if (m->is_view && m->view_base.defined()) {
    AutogradMeta* bm = meta(m->view_base);
    if (bm && bm->requires_grad && !bm->grad_fn) {
      throw Error(
          str(op.name(), ": a view of a leaf Variable that requires grad is being used in an in-place operation."));
    }
  }
}

// An op without a derivative that overwrites a tensor with history (x.uniform_()
// on a non-leaf): afterwards x's value no longer depends on its past, so its
// history is rebased onto a node that sends no gradient back, as in PyTorch
// (whose derivative for such ops is zero).
class OverwriteNode final : public Node {
 public:
  explicit OverwriteNode(std::string name) : name_(std::move(name)) {}
  variable_list apply(variable_list&&) override { return variable_list(next_edges.size()); }
  std::string name() const override { return name_; }

 private:
  std::string name_;
};

void run_below(const OperatorEntry& op, DispatchKeySet ks, Stack& stack) {
  ExcludeDispatchKeyGuard guard(DispatchKey::Autograd);
  redispatch_boxed(op, ks, DispatchKey::Autograd, stack);
}

void autograd_fallback(const OperatorEntry& op, DispatchKeySet ks, Stack& stack) {
  const FunctionSchema& schema = op.schema();
  const size_t n = schema.args.size();
  const size_t base = stack.size() - n;

  // Which argument is written (`out` kwarg, or `self` of a declared in-place
  // op), and whether any other tensor argument requires grad: one pass.
  int out_idx = -1, inplace_idx = -1, out_arg = -1;
  bool any_grad = false;
  for (size_t i = 0; i < n; ++i) {
    const IValue& v = stack[base + i];
    const Argument& a = schema.args[i];
    if (a.is_write && a.kwarg_only) {
      out_arg = static_cast<int>(i);
      if (!v.is_none()) out_idx = static_cast<int>(i);
      continue;  // the out= tensor's own history does not matter
    }
    if (a.is_write) inplace_idx = static_cast<int>(i);
    if (v.is_tensor()) {
      any_grad = any_grad || requires_grad(v.to_tensor());
    } else if (v.is_tensor_list()) {
      for (const Tensor& t : v.to_tensor_list()) any_grad = any_grad || requires_grad(t);
    }
  }
  if (!any_grad) {
    redispatch_boxed(op, ks, DispatchKey::Autograd, stack);
    return;
  }
  const bool differentiable = op.flags() & kDifferentiable;
  if (out_idx >= 0) {
    const Tensor& out = stack[base + out_idx].to_tensor();
    for (size_t i = 0; i < n && inplace_idx < 0; ++i) {
      if (static_cast<int>(i) != out_idx && stack[base + i].is_tensor() && stack[base + i].to_tensor().defined() &&
          stack[base + i].to_tensor().is_same(out)) {
        inplace_idx = static_cast<int>(i);
      }
    }
    if (inplace_idx < 0 && differentiable) {
      throw Error(str(op.name(),
                      "(): functions with out=... arguments don't support automatic differentiation, but one of the "
                      "arguments requires grad."));
    }
  }
  if (!differentiable) {
    Tensor target = inplace_idx >= 0 ? stack[base + inplace_idx].to_tensor() : Tensor();
    const bool overwrites_history = target.defined() && requires_grad(target);
    if (overwrites_history) check_inplace_target(op, target);
    run_below(op, ks, stack);
    if (overwrites_history && is_differentiable_type(target.dtype())) {
      auto node = std::make_shared<OverwriteNode>(backward_node_name(op.name()));
      node->next_edges.push_back(Edge{});
      node->add_input_geometry(target);
      rebase_history(target, node);
    }
    return;
  }
  const Derivative* d = find_derivative(op.id());
  if (!d && op.source_of(ks.highest_backend()) == DispatchKey::CompositeImplicit && inplace_idx < 0) {
    redispatch_boxed(op, ks, DispatchKey::Autograd, stack);
    return;
  }

  Tensor self_before;
  if (inplace_idx >= 0) {
    self_before = stack[base + inplace_idx].to_tensor();
    check_inplace_target(op, self_before);
  }

  std::shared_ptr<Node> node;
  DerivativeNode* dn = nullptr;
  if (d) {
    auto p = std::make_shared<DerivativeNode>(op, *d);
    dn = p.get();
    node = std::move(p);
  } else {
    node = std::make_shared<NotImplementedNode>(op.name());
  }
  if (anomaly_mode_enabled()) node->creation_trace = current_anomaly_trace(op.name());

  // Inputs: one slot per tensor (list elements included), in schema order.
  BackwardCtx* ctx = dn ? &dn->ctx() : nullptr;
  const uint64_t save_inputs = d ? d->save_inputs : 0;
  if (ctx) {
    ctx->slots_.assign(n, {-1, 0});
  }
  auto add_slot = [&](size_t arg, const Tensor& t) {
    if (t.defined()) {
      node->next_edges.emplace_back(requires_grad(t) ? gradient_edge(t) : Edge{});
    } else {
      node->next_edges.emplace_back();
    }
    if (!ctx) return;
    ctx->slot_geometry_.emplace_back(t);
    SavedTensor& saved = ctx->saved_slots_.emplace_back();
    if (t.defined() && (save_inputs >> arg & 1)) {
      // self of an in-place op is about to be overwritten: keep its old value.
      saved = static_cast<int>(arg) == inplace_idx ? SavedTensor(clone(t), false) : SavedTensor(t, false);
    }
  };
  for (size_t i = 0; i < n; ++i) {
    if (static_cast<int>(i) == out_arg) continue;  // out= is never an input
    const IValue& v = stack[base + i];
    const ArgType type = schema.args[i].type;
    if (is_tensor_arg(type)) {
      if (ctx) ctx->slots_[i] = {static_cast<int32_t>(node->next_edges.size()), 1};
      add_slot(i, v.is_tensor() ? v.to_tensor() : kNoTensor);
    } else if (type == ArgType::TensorList) {
      const auto& list = v.to_tensor_list();
      if (ctx) ctx->slots_[i] = {static_cast<int32_t>(node->next_edges.size()), static_cast<int32_t>(list.size())};
      for (const Tensor& t : list) add_slot(i, t);
    } else if (ctx && !v.is_none()) {
      ctx->slots_[i].first = BackwardCtx::kFirstArg - static_cast<int32_t>(ctx->args_.size());
      ctx->args_.push_back(v);
    }
  }

  // A view op's first argument is the tensor viewed.
  const bool is_view_op = op.flags() & kView;
  Tensor view_input;
  if (is_view_op && n > 0 && stack[base].is_tensor()) view_input = stack[base].to_tensor();

  run_below(op, ks, stack);

  // Outputs, flattened (tuples are separate stack entries, lists expand).
  const uint64_t save_outputs = d ? d->save_outputs : 0;
  uint32_t k = 0;
  auto add_output = [&](const Tensor& o) {
    node->add_input_geometry(o);
    if (save_outputs) ctx->saved_outputs_.emplace_back();
    if (!o.defined() || !is_differentiable_type(o.dtype())) {
      // Integer outputs (sort's indices) get no history, but a derivative may need them: keep them as plain
      // tensors (a saved output would be given this node as grad_fn under create_graph).
      if (o.defined() && k < 64 && (save_outputs >> k & 1)) ctx->saved_outputs_[k] = SavedTensor(o, false);
      return;
    }
    if (inplace_idx >= 0 && k == 0) {
      rebase_history(self_before, node);
    } else {
      set_history(o, node, k);
      if (view_input.defined()) mark_view(o, view_input);
    }
    if (k < 64 && (save_outputs >> k & 1)) ctx->saved_outputs_[k] = SavedTensor(o, true);
  };
  for (size_t i = base; i < stack.size(); ++i) {
    if (stack[i].is_tensor()) {
      add_output(stack[i].to_tensor());
      ++k;
    } else if (stack[i].is_tensor_list()) {
      for (const Tensor& t : stack[i].to_tensor_list()) {
        add_output(t);
        ++k;
      }
    }
  }
}

}  // namespace

namespace {
struct Init {
  Init() {
    Dispatcher::get().register_fallback(DispatchKey::Autograd,
                                        KernelFunction::make_boxed(&autograd_fallback, "autograd_fallback"));
  }
} init;
}  // namespace

}  // namespace strata::autograd
