// Note [Autograd metadata on a tensor]
// A tensor that takes part in autograd carries an AutogradMeta: either it is a
// leaf the user asked gradients for (requires_grad, .grad, and its
// AccumulateGrad sink), or it was produced by a recorded op (grad_fn and the
// output number). Both states put DispatchKey::Autograd into the tensor's key
// set, so ops on tensors that need no gradient never enter the autograd layer.
//
// Views remember their base. An in-place op through a view rewrites the base's
// history (CopySlices), and the view's grad_fn is regenerated from the base the
// next time it is asked for, detected by the version counter they share.
#pragma once

#include <atomic>
#include <memory>
#include <optional>

#include "autograd/node.h"

namespace strata {

struct AutogradMeta {
  bool requires_grad = false;  // leaves only; non-leaves require grad through grad_fn
  Tensor grad;
  std::shared_ptr<autograd::Node> grad_fn;
  // A leaf's gradient sink (Note [The autograd graph]), owned by this meta and
  // made at most once (grad_accumulator() in variable.cpp); edges to it share
  // ownership of this meta. Atomic: threads recording ops on one leaf read it
  // without a lock once it exists.
  std::atomic<autograd::AccumulateGrad*> grad_accumulator{nullptr};
  uint32_t output_nr = 0;
  bool retains_grad = false;
  // Hooks of a leaf, run by its AccumulateGrad before accumulating.
  std::vector<autograd::GradHook> leaf_hooks;

  // View tracking (Note above).
  bool is_view = false;
  Tensor view_base;
  uint32_t attr_version = 0;

  AutogradMeta() = default;
  AutogradMeta(const AutogradMeta&) = delete;
  AutogradMeta& operator=(const AutogradMeta&) = delete;
  ~AutogradMeta();
};

namespace autograd {

inline AutogradMeta* meta(const Tensor& t) { return t.defined() ? t.impl()->autograd_meta() : nullptr; }
AutogradMeta& ensure_meta(const Tensor& t);

// requires_grad as the user sees it: a leaf that asked for it, or any tensor
// with a grad_fn.
inline bool requires_grad(const Tensor& t) {
  AutogradMeta* m = meta(t);
  return m && (m->requires_grad || m->grad_fn);
}
void set_requires_grad(const Tensor& t, bool value);
bool is_leaf(const Tensor& t);

// The node that produced t (regenerating a stale view's history first).
std::shared_ptr<Node> grad_fn(const Tensor& t);
// Where t's gradient has to go: (grad_fn, output_nr), or the leaf's
// AccumulateGrad, or an invalid edge when t needs no gradient.
Edge gradient_edge(const Tensor& t);
std::shared_ptr<Node> grad_accumulator(const Tensor& t);

// Sets t's history (and the Autograd key) after a recorded op.
void set_history(const Tensor& t, std::shared_ptr<Node> fn, uint32_t output_nr);
// Records an in-place write to t by fn (input slot 0 of fn is t's old value).
// Handles the view case by rebasing the base's history.
void rebase_history(const Tensor& t, std::shared_ptr<Node> fn);
// Marks out as a view of in (after a view op produced it).
void mark_view(const Tensor& out, const Tensor& in);

// A tensor sharing t's storage and geometry with no autograd history.
Tensor detach(const Tensor& t);
// Same geometry and storage; keeps t's key set minus Autograd.
Tensor alias_without_history(const Tensor& t);
// What autograd needs of the vmap layer, set once by src/vmap at load time (so that autograd
// does not depend on it): `detach` returns a batched tensor of the detached physical tensor,
// `physical` the tensor a batched tensor wraps; both an empty Tensor when t is not batched.
struct BatchedHooks {
  Tensor (*detach)(const Tensor&) = nullptr;
  Tensor (*physical)(const Tensor&) = nullptr;
};
void set_batched_hooks(BatchedHooks hooks);

Tensor grad(const Tensor& t);
void set_grad(const Tensor& t, const Tensor& g);

// Whether grad mode is on for this thread (Autograd not excluded).
bool grad_mode_enabled();
// Sets grad mode for a scope, also able to turn it on under no_grad.
class GradModeGuard {
 public:
  explicit GradModeGuard(bool enabled);
  ~GradModeGuard();

 private:
  DispatchKeySet prev_excluded_;
};

// Sum a broadcast gradient back down to `shape`.
Tensor sum_to(const Tensor& grad, IntArrayRef shape);

}  // namespace autograd
}  // namespace strata
