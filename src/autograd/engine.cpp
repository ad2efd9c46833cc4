// Note [The engine]
// A backward pass counts, for every node reachable from the roots, how many
// edges point at it; a node runs once all of them have delivered (or skipped)
// their gradient, so each node runs once with the sum of its gradients. Among
// ready nodes the most recently created runs first, which keeps the order
// deterministic and frees memory in roughly reverse order of creation. The
// pass runs on the calling thread.
#include "autograd/engine.h"

#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "autograd/anomaly.h"
#include "autograd/variable.h"
#include "core/shape.h"
#include "ops/ops.h"
#include "profiler/profiler.h"

namespace strata::autograd {

namespace {
struct ReadyOrder {
  bool operator()(const Node* a, const Node* b) const { return a->sequence_nr < b->sequence_nr; }
};

Tensor fit_gradient(const Node& producer, size_t index, Tensor g, const TensorGeometry& want) {
  if (!want.defined()) return g;
  IntArrayRef have = g.sizes();
  if (!std::equal(have.begin(), have.end(), want.sizes.begin(), want.sizes.end())) {
    bool broadcastable = have.size() >= want.sizes.size();
    for (size_t i = 0; broadcastable && i < want.sizes.size(); ++i) {
      int64_t h = have[have.size() - want.sizes.size() + i];
      broadcastable = h == want.sizes[i] || want.sizes[i] == 1;
    }
    if (broadcastable) {
      g = sum_to(g, want.sizes);
    } else {
      throw Error(str("Function ", producer.name(), " returned an invalid gradient at index ", index, " - got ",
                      shape_str(have), " but expected shape compatible with ", shape_str(want.sizes)));
    }
  }
  if (g.dtype() != want.dtype && is_differentiable_type(want.dtype)) g = to_dtype(g, want.dtype);
  return g;
}

void check_nan(const Node& n, const variable_list& outs) {
  for (size_t i = 0; i < outs.size(); ++i) {
    const Tensor& g = outs[i];
    if (!g.defined() || !is_differentiable_type(g.dtype()) || g.device().is_meta()) continue;
    if (any_nonzero(isnan(g))) {
      throw Error(str("Function '", n.name(), "' returned nan values in its ", i, "th output.\n",
                      n.creation_trace.empty() ? std::string("(the node was created before anomaly mode was on)")
                                               : n.creation_trace));
    }
  }
}
}  // namespace

namespace {
thread_local bool t_keep_graph = false;
}

bool backward_keeps_graph() { return t_keep_graph; }

variable_list run_backward(const variable_list& roots, const variable_list& grad_roots, const variable_list& inputs,
                           const BackwardOptions& opt) {
  STRATA_CHECK(grad_roots.empty() || grad_roots.size() == roots.size(), "backward: got ", roots.size(),
               " tensors and ", grad_roots.size(), " gradients");
  GradModeGuard grad_mode(opt.create_graph);
  struct KeepGraph {
    bool prev = t_keep_graph;
    ~KeepGraph() { t_keep_graph = prev; }
  } keep_graph_scope;
  t_keep_graph = opt.keep_graph;

  std::vector<Edge> root_edges;
  variable_list root_grads;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& r = roots[i];
    STRATA_CHECK(r.defined(), "backward: tensor ", i, " is undefined");
    Edge e = gradient_edge(r);
    STRATA_CHECK(e.valid(), "element ", i, " of tensors does not require grad and does not have a grad_fn");
    Tensor g = i < grad_roots.size() ? grad_roots[i] : Tensor();
    if (!g.defined()) {
      STRATA_CHECK(r.numel() == 1, "grad can be implicitly created only for scalar outputs (output ", i,
                   " has shape ", r.shape_str(), ")");
      g = ones_like(r);
    } else {
      STRATA_CHECK(std::equal(g.sizes().begin(), g.sizes().end(), r.sizes().begin(), r.sizes().end()),
                   "Mismatch in shape: grad_output[", i, "] has a shape of ", g.shape_str(), " and output[", i,
                   "] has a shape of ", r.shape_str(), ".");
      STRATA_CHECK(g.dtype() == r.dtype(), "backward: grad_output[", i, "] has dtype ", dtype_name(g.dtype()),
                   " but output[", i, "] has dtype ", dtype_name(r.dtype()), " (Found dtype ", dtype_name(g.dtype()),
                   " but expected ", dtype_name(r.dtype()), ")");
      STRATA_CHECK(g.device() == r.device(), "backward: grad_output[", i, "] is on ", g.device().str(),
                   " but output[", i, "] is on ", r.device().str());
    }
    root_edges.push_back(std::move(e));
    root_grads.push_back(std::move(g));
  }
  auto graph_root = std::make_shared<GraphRoot>(std::move(root_edges), std::move(root_grads));

  // Where the gradients asked for by autograd.grad / backward(inputs=) arrive.
  std::unordered_map<const Node*, std::vector<std::pair<uint32_t, size_t>>> captures;
  std::vector<std::shared_ptr<Node>> keep_alive;
  for (size_t j = 0; j < inputs.size(); ++j) {
    Edge e = gradient_edge(inputs[j]);
    STRATA_CHECK(e.valid(), "One of the differentiated Tensors (input ", j, ") does not require grad");
    captures[e.fn.get()].push_back({e.input_nr, j});
    keep_alive.push_back(e.fn);
  }

  // Dependency counts over everything reachable.
  std::unordered_map<const Node*, int> deps;
  std::vector<Node*> order;  // discovery order
  {
    std::unordered_set<const Node*> seen{graph_root.get()};
    std::vector<Node*> stack{graph_root.get()};
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      order.push_back(n);
      for (const Edge& e : n->next_edges) {
        if (!e.valid()) continue;
        ++deps[e.fn.get()];
        if (seen.insert(e.fn.get()).second) stack.push_back(e.fn.get());
      }
    }
  }
  // With inputs, only nodes that lead to one of them need to run.
  std::unordered_set<const Node*> needed;
  const bool prune = !inputs.empty();
  if (prune) {
    // Reverse topological order of discovery is not enough for DAGs, so
    // iterate to a fixed point (graphs are small compared to their tensors).
    for (auto& [node, list] : captures) {
      if (opt.accumulate_grad && node->is_accumulate_grad()) needed.insert(node);
    }
    bool changed = true;
    while (changed) {
      changed = false;
      for (auto it = order.rbegin(); it != order.rend(); ++it) {
        Node* n = *it;
        if (needed.count(n)) continue;
        for (const Edge& e : n->next_edges) {
          if (e.valid() && (needed.count(e.fn.get()) || captures.count(e.fn.get()))) {
            needed.insert(n);
            changed = true;
            break;
          }
        }
      }
    }
  }

  variable_list results(inputs.size());
  std::unordered_map<const Node*, variable_list> buffers;
  std::priority_queue<Node*, std::vector<Node*>, ReadyOrder> ready;
  ready.push(graph_root.get());

  while (!ready.empty()) {
    Node* n = ready.top();
    ready.pop();
    variable_list in;
    if (auto it = buffers.find(n); it != buffers.end()) {
      in = std::move(it->second);
      buffers.erase(it);
    }
    in.resize(n->input_geometry.size());
    for (auto& [idx, hooks] : n->pre_hooks) {
      if (idx >= in.size() || !in[idx].defined()) continue;
      for (auto& h : hooks) {
        if (!h) continue;  // removed
        Tensor r = h(in[idx]);
        if (r.defined()) in[idx] = std::move(r);
      }
    }
    for (auto& [idx, hook] : n->retain_grad_hooks) {
      if (idx < in.size() && in[idx].defined() && hook) hook(in[idx]);
    }
    if (auto it = captures.find(n); it != captures.end()) {
      for (auto [input_nr, j] : it->second) {
        if (!opt.accumulate_grad && input_nr < in.size()) results[j] = in[input_nr];
      }
    }
    bool run = n == graph_root.get() || !prune || needed.count(n);
    if (n->is_accumulate_grad() && prune && !opt.accumulate_grad) run = false;
    variable_list outs;
    if (run) {
      bool any = n == graph_root.get();
      for (const Tensor& g : in) any |= g.defined();
      if (any) {
        variable_list grads_in = n->post_hooks.empty() ? variable_list() : in;  // only post-hooks read them
        if (__builtin_expect(profiler::is_recording(), 0)) {
          // Backward nodes show in the profile under their PyTorch-style names.
          std::string name = n->name();
          profiler::RecordScope scope(name, "autograd");
          outs = n->apply(std::move(in));
        } else {
          outs = n->apply(std::move(in));
        }
        if (anomaly_mode_enabled() && anomaly_check_nan()) check_nan(*n, outs);
        for (auto& h : n->post_hooks) h(outs, grads_in);
      }
      if (!opt.keep_graph) n->release_variables();
    }
    for (size_t i = 0; i < n->next_edges.size(); ++i) {
      const Edge& e = n->next_edges[i];
      if (!e.valid()) continue;
      Node* next = e.fn.get();
      if (i < outs.size() && outs[i].defined()) {
        Tensor g = fit_gradient(*n, i, std::move(outs[i]),
                                e.input_nr < next->input_geometry.size() ? next->input_geometry[e.input_nr]
                                                                         : TensorGeometry());
        variable_list& buf = buffers[next];
        if (buf.size() <= e.input_nr) buf.resize(std::max<size_t>(next->input_geometry.size(), e.input_nr + 1));
        buf[e.input_nr] = buf[e.input_nr].defined() ? add(buf[e.input_nr], g) : std::move(g);
      }
      if (--deps[next] == 0) ready.push(next);
    }
  }

  if (!inputs.empty() && !opt.accumulate_grad && !opt.allow_unused) {
    for (size_t j = 0; j < results.size(); ++j) {
      STRATA_CHECK(results[j].defined(),
                   "One of the differentiated Tensors appears to not have been used in the graph. Set "
                   "allow_unused=True if this is the desired behavior.");
    }
  }
  return results;
}

}  // namespace strata::autograd
