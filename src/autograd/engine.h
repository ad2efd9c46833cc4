// The backward engine: runs a recorded graph from some outputs back to the
// leaves (backward) or to chosen inputs (grad).
#pragma once

#include "autograd/node.h"

namespace strata::autograd {

struct BackwardOptions {
  bool keep_graph = false;    // retain_graph
  bool create_graph = false;  // record the backward pass itself
  bool allow_unused = false;
  // With inputs: accumulate into their .grad (backward(inputs=...)) instead
  // of returning the gradients (autograd.grad).
  bool accumulate_grad = true;
};

// Gradients of `roots` flow back; `grad_roots[i]` seeds root i (undefined:
// ones, allowed only for a one-element root). Returns, when `inputs` is
// non-empty and !accumulate_grad, the gradient of each input (undefined for an
// unused input when allow_unused).
variable_list run_backward(const variable_list& roots, const variable_list& grad_roots, const variable_list& inputs,
                           const BackwardOptions& options);

// Inside a backward pass on this thread: whether it keeps the graph (retain_graph), so that a
// node whose saved values will be released after it runs may drop them while it runs (compiled
// backward graphs free their saved tensors at their last use). False outside a backward pass.
bool backward_keeps_graph();

}  // namespace strata::autograd
