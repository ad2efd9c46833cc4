#include "autograd/node.h"

#include "autograd/variable.h"
#include "ops/ops.h"

namespace strata::autograd {

uint64_t next_sequence_nr() {
  thread_local uint64_t n = 0;
  return n++;
}

Node::Node() : sequence_nr(next_sequence_nr()) {}

AccumulateGrad::AccumulateGrad(AutogradMeta& owner, const Tensor& variable) : owner_(&owner) {
  // Run after every node that can feed it: leaves accumulate last.
  sequence_nr = UINT64_MAX;
  add_input_geometry(variable);
}

variable_list AccumulateGrad::apply(variable_list&& grads) {
  Tensor g = std::move(grads[0]);
  grads.clear();
  if (!g.defined()) return {};
  std::lock_guard<std::mutex> lock(mu_);
  AutogradMeta& m = *owner_;
  for (auto& hook : m.leaf_hooks) {
    if (!hook) continue;  // removed
    Tensor r = hook(g);
    if (r.defined()) g = std::move(r);
  }
  const ScalarType dtype = input_geometry[0].dtype;
  if (g.dtype() != dtype) g = to_dtype(g, dtype);
  const bool build_graph = grad_mode_enabled();
  if (!m.grad.defined()) {
    if (build_graph) {
      m.grad = g;
    } else if (g.impl_ptr().use_count() == 1 && g.impl()->storage().use_count() == 1 && g.is_contiguous() &&
               !g.impl()->is_wrapped_number()) {
      // Nobody else can see this buffer: keep it instead of copying.
      m.grad = alias_without_history(g);
    } else {
      m.grad = clone(alias_without_history(g));
    }
  } else if (build_graph) {
    m.grad = add(m.grad, g);
  } else {
    GradModeGuard no_grad(false);
    Tensor acc = m.grad;
    add(acc, g, 1, acc);
  }
  return {};
}

variable_list NotImplementedNode::apply(variable_list&&) {
  throw NotImplementedError(str("the derivative for '", op_, "' is not implemented"));
}

GraphRoot::GraphRoot(std::vector<Edge> roots, variable_list grads) : grads_(std::move(grads)) {
  next_edges.append(roots.begin(), roots.end());
}

}  // namespace strata::autograd
