// Note [The autograd graph]
// Running a differentiable op on tensors that require grad records a Node: a
// function from the gradients of the op's outputs to the gradients of its
// inputs. Each input slot of the op becomes an Edge to the node that produced
// that input (its grad_fn, at the output number it came from), or to the
// AccumulateGrad node of a leaf, or an invalid edge when the input needs no
// gradient. Nodes hold their successors strongly and nothing holds a node but
// the tensors it produced and the nodes after it, so a graph lives exactly as
// long as some output (or a running backward) can reach it. The exception is a
// leaf's AccumulateGrad: it is part of the leaf's AutogradMeta, made once, and
// an edge to it shares ownership of that meta (keeping the leaf's .grad and
// hooks alive, not its data), so recording an op on leaves creates no sinks.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/small_vector.h"
#include "core/tensor.h"

namespace strata {
struct AutogradMeta;
}

namespace strata::autograd {

class Node;

struct Edge {
  std::shared_ptr<Node> fn;
  uint32_t input_nr = 0;
  bool valid() const { return fn != nullptr; }
};

// Sizes kept by autograd for every recorded tensor: inline up to 6 dims, so
// recording an op does not allocate for them.
class SmallDims {
 public:
  SmallDims() = default;
  SmallDims(IntArrayRef s) { set(s); }  // NOLINT: implicit, like the DimVector it replaces
  SmallDims(const SmallDims& o) { set(o); }
  SmallDims(SmallDims&& o) noexcept { take(std::move(o)); }
  SmallDims& operator=(const SmallDims& o) {
    if (this != &o) set(o);
    return *this;
  }
  SmallDims& operator=(SmallDims&& o) noexcept {
    if (this != &o) take(std::move(o));
    return *this;
  }
  const int64_t* data() const { return n_ > kInline ? heap_.get() : inline_.data(); }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  const int64_t* begin() const { return data(); }
  const int64_t* end() const { return data() + n_; }
  int64_t operator[](size_t i) const { return data()[i]; }
  operator IntArrayRef() const { return IntArrayRef(data(), n_); }  // NOLINT

 private:
  void set(IntArrayRef s) {
    n_ = s.size();
    int64_t* dst = inline_.data();
    if (n_ > kInline) {
      heap_.reset(new int64_t[n_]);
      dst = heap_.get();
    }
    std::copy(s.begin(), s.end(), dst);
  }
  void take(SmallDims&& o) {
    n_ = o.n_;
    heap_ = std::move(o.heap_);
    if (n_ <= kInline) std::copy(o.inline_.begin(), o.inline_.begin() + n_, inline_.begin());
    o.n_ = 0;
  }
  static constexpr size_t kInline = 6;
  std::array<int64_t, kInline> inline_;  // only the first n_ are set
  std::unique_ptr<int64_t[]> heap_;
  size_t n_ = 0;
};

// Shape, dtype and device of one input of a node (one output of the forward
// op), used to make zero gradients and to check the ones that arrive.
struct TensorGeometry {
  SmallDims sizes;
  ScalarType dtype = ScalarType::Undefined;
  Device device;

  TensorGeometry() = default;
  // Built in place (emplace_back(t)) when recording: no temporary to move.
  explicit TensorGeometry(const Tensor& t)
      : sizes(t.defined() ? SmallDims(t.sizes()) : SmallDims()),
        dtype(t.defined() ? t.dtype() : ScalarType::Undefined),
        device(t.defined() ? t.device() : Device()) {}
  bool defined() const { return dtype != ScalarType::Undefined; }
  static TensorGeometry of(const Tensor& t) { return TensorGeometry(t); }
};

using variable_list = std::vector<Tensor>;
// A hook sees a gradient and may return a replacement (an undefined tensor
// keeps the original).
using GradHook = std::function<Tensor(const Tensor&)>;
using PostHook = std::function<void(const variable_list& grad_inputs, const variable_list& grad_outputs)>;

class Node : public std::enable_shared_from_this<Node> {
 public:
  Node();
  virtual ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // Gradients of the forward outputs in, gradients of the forward inputs out
  // (one per next edge).
  virtual variable_list apply(variable_list&& grads) = 0;
  virtual std::string name() const = 0;
  // Frees saved tensors once backward has passed (unless retain_graph).
  virtual void release_variables() {}
  virtual bool is_accumulate_grad() const { return false; }

  // Inline for the common one or two inputs and one output: a node is one
  // allocation.
  SmallVec<Edge, 2> next_edges;
  // One entry per forward output: what a gradient flowing in must look like.
  SmallVec<TensorGeometry, 1> input_geometry;
  // Creation order: the engine runs later nodes first among the ready ones.
  uint64_t sequence_nr;
  // Hooks on the gradient arriving at input slot i (from tensor.register_hook
  // on a non-leaf output) and after the node ran.
  std::map<uint32_t, std::vector<GradHook>> pre_hooks;
  std::vector<PostHook> post_hooks;
  // retain_grad() of output i: runs after the user's hooks on that slot.
  std::map<uint32_t, GradHook> retain_grad_hooks;
  // Where the forward op was called from, recorded in anomaly mode.
  std::string creation_trace;

  uint32_t num_outputs() const { return static_cast<uint32_t>(next_edges.size()); }
  // Index this node's gradient-of-input i would be stored under.
  uint32_t add_input_geometry(const Tensor& t) {
    input_geometry.emplace_back(t);
    return static_cast<uint32_t>(input_geometry.size() - 1);
  }
};

// Sink of a leaf tensor: adds the incoming gradient into leaf.grad. It lives
// in the leaf's AutogradMeta (created once, on first use) and edges to it
// share ownership of that meta, so a graph keeps the leaf's grad and hooks
// alive but not its data, and recording an op allocates no sink.
class AccumulateGrad final : public Node {
 public:
  AccumulateGrad(AutogradMeta& owner, const Tensor& variable);
  variable_list apply(variable_list&& grads) override;
  std::string name() const override { return "AccumulateGrad"; }
  bool is_accumulate_grad() const override { return true; }

 private:
  AutogradMeta* owner_;
  // Backward passes in several threads may reach one leaf at once (as in
  // torch, each accumulation is atomic with respect to the others).
  std::mutex mu_;
};

// Raises when run: recorded for differentiable ops that have no derivative yet
// so that the forward still works and the error names the op.
class NotImplementedNode final : public Node {
 public:
  explicit NotImplementedNode(std::string op) : op_(std::move(op)) {}
  variable_list apply(variable_list&& grads) override;
  std::string name() const override { return "NotImplemented"; }

 private:
  std::string op_;
};

// A node that only forwards gradients unchanged to its edges (used by
// detach-like identities and as the root of a backward pass).
class GraphRoot final : public Node {
 public:
  GraphRoot(std::vector<Edge> roots, variable_list grads);
  variable_list apply(variable_list&&) override { return grads_; }
  std::string name() const override { return "GraphRoot"; }

 private:
  variable_list grads_;
};

// The id source for sequence_nr (per thread, like PyTorch).
uint64_t next_sequence_nr();

}  // namespace strata::autograd
