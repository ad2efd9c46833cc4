// Note [Derivatives]
// Each differentiable op has one derivative, written with Strata's own ops (so
// a derivative is itself differentiable and double-backward works), registered
// against the op's id:
//
//   static void mul_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
//     if (ctx.needs_grad(0)) out.set(0, mul(g[0], ctx.input(1)));
//     if (ctx.needs_grad(1)) out.set(1, mul(g[0], ctx.input(0)));
//   }
//   STRATA_DERIVATIVE(mul, save_inputs(0, 1), save_outputs(), mul_backward);
//
// Argument numbers are the op's schema positions (out= is never one of them).
// The autograd layer saves only the tensor inputs and outputs a derivative
// names; every other argument (ints, scalars, lists) is kept by value, and
// every tensor input's shape and dtype is kept so that the engine can sum a
// broadcast gradient back to its input's shape and cast it to the input's
// dtype (derivatives need not do either). Gradients of outputs that received
// none arrive as zeros, so a derivative never sees an undefined gradient.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "dispatch/dispatcher.h"
#include "ops/op_list.h"

namespace strata::autograd {

// Note [Saved tensor hooks]
// strata.autograd.graph.saved_tensors_hooks(pack, unpack): while a pair of
// hooks is set on this thread (only the innermost pair applies), every tensor a
// node saves is given to pack and the node keeps what pack returned instead of
// the tensor; backward calls unpack on it to get the tensor back. The hooks
// are fixed at save time. Without hooks the only cost is one relaxed load of a
// global count of pushed pairs per saved tensor.
class PackedTensor {
 public:
  virtual ~PackedTensor() = default;
  virtual Tensor unpack() const = 0;
};
class SavedTensorHooks {
 public:
  virtual ~SavedTensorHooks() = default;
  virtual std::shared_ptr<const PackedTensor> pack(const Tensor& t) const = 0;
};
// The innermost pair of this thread, or null.
SavedTensorHooks* current_saved_tensor_hooks();
// Push raises (with the message) while hooks are disabled on this thread.
void push_saved_tensor_hooks(std::shared_ptr<SavedTensorHooks> hooks);
void pop_saved_tensor_hooks();
// disable_saved_tensors_hooks: nullopt means enabled. Disabling raises when
// hooks are set already.
void set_saved_tensor_hooks_disabled(std::optional<std::string> message);
const std::optional<std::string>& saved_tensor_hooks_disabled_message();

// A tensor kept for backward with the version it had when saved.
class SavedTensor {
 public:
  SavedTensor() = default;
  SavedTensor(const Tensor& t, bool is_output);
  // The saved tensor; throws PyTorch's in-place modification error if its
  // version moved. Outputs come back with `owner` as their grad_fn so that a
  // derivative that uses them is itself differentiable.
  Tensor unpack(const std::shared_ptr<Node>& owner, uint32_t output_nr) const;
  bool defined() const { return data_.defined() || hooked_; }
  void reset() {
    data_ = Tensor();
    hooked_.reset();
  }

 private:
  void pack_with(const SavedTensorHooks& hooks, const Tensor& t);
  Tensor data_;  // an output without history (its history would be a cycle)
  // With hooks (Note [Saved tensor hooks]): what pack returned, and for an
  // input that needs a gradient the edge an unpacked copy is attached to
  // under create_graph. One pointer, so that nodes without hooks stay small.
  struct Hooked {
    std::shared_ptr<const PackedTensor> packed;
    Edge edge;
  };
  std::unique_ptr<Hooked> hooked_;
  uint32_t version_ = 0;
  bool is_output_ = false;
};

class BackwardCtx;
class GradOut;
using BackwardFn = void (*)(const BackwardCtx& ctx, const variable_list& grads, GradOut& out);

struct Derivative {
  BackwardFn fn = nullptr;
  uint64_t save_inputs = 0;   // bit i: schema argument i (Tensor or Tensor[])
  uint64_t save_outputs = 0;  // bit i: flattened output i
  const char* node_name = nullptr;  // default: CamelCase(op name) + "Backward0"
  std::string resolved_name;        // filled at registration
};

void register_derivative(OpId op, Derivative d);
const Derivative* find_derivative(int op_id);

constexpr uint64_t save_inputs() { return 0; }
template <typename... I>
constexpr uint64_t save_inputs(int first, I... rest) {
  return (uint64_t(1) << first) | save_inputs(rest...);
}
template <typename... I>
constexpr uint64_t save_outputs(I... idx) {
  return save_inputs(idx...);
}

// What a derivative sees of the forward call.
class BackwardCtx {
 public:
  // Non-tensor argument i as recorded (ints, floats, scalars, lists, strings).
  const IValue& arg(int i) const {
    static const IValue none;
    const int32_t s = slots_.at(i).first;
    return s <= kFirstArg ? args_[kFirstArg - s] : none;
  }
  int64_t arg_int(int i) const { return arg(i).to_int(); }
  double arg_double(int i) const { return arg(i).to_double(); }
  bool arg_bool(int i) const { return arg(i).to_bool(); }
  Scalar arg_scalar(int i) const { return arg(i).to_scalar(); }
  const std::vector<int64_t>& arg_ints(int i) const { return arg(i).to_int_list(); }
  std::optional<int64_t> arg_opt_int(int i) const {
    return arg(i).is_none() ? std::nullopt : std::optional<int64_t>(arg(i).to_int());
  }
  std::optional<double> arg_opt_double(int i) const {
    return arg(i).is_none() ? std::nullopt : std::optional<double>(arg(i).to_double());
  }
  bool arg_is_none(int i) const { return arg(i).is_none(); }
  std::string_view arg_str(int i) const { return arg(i).to_string(); }

  // Saved tensor argument i (must be named in save_inputs); undefined when the
  // argument was an absent optional tensor.
  Tensor input(int i) const;
  std::vector<Tensor> input_list(int i) const;
  // Shape, dtype, device of tensor argument i (always kept).
  const TensorGeometry& input_geometry(int i, int elem = 0) const;
  size_t list_size(int i) const;
  bool input_defined(int i) const { return input_geometry(i).defined(); }
  // Saved output i (must be named in save_outputs).
  Tensor output(int i) const;
  const TensorGeometry& output_geometry(int i) const;
  // Whether argument i (for a list: element elem, or any when elem < 0) needs
  // a gradient.
  bool needs_grad(int i, int elem = -1) const;
  const std::string& op_name() const { return *op_name_; }
  // Whether output k received a gradient (grads[k] is zeros otherwise); for
  // ops whose outputs' derivatives are independent terms that 0 * inf would
  // poison.
  bool grad_defined(int k) const { return k < static_cast<int>(grad_defined_.size()) && grad_defined_[k]; }

 public:
  // Filled by the autograd layer when it records the op.
  // Inline sizes cover the common ops (up to 4 schema arguments, 2 tensor
  // inputs, 1 output), so these tables live inside the node's allocation.
  // The non-tensor arguments that are not None, in schema order.
  SmallVec<IValue, 3> args_;
  // Schema arg -> (first input slot, number of slots) for a tensor argument;
  // (kFirstArg - k, 0) for a non-tensor argument kept as args_[k]; (-1, 0)
  // for anything else (None, out=).
  SmallVec<std::pair<int32_t, int32_t>, 4> slots_;
  static constexpr int32_t kFirstArg = -2;
  SmallVec<TensorGeometry, 2> slot_geometry_;
  SmallVec<SavedTensor, 2> saved_slots_;
  SmallVec<SavedTensor, 1> saved_outputs_;
  Node* node_ = nullptr;
  const std::string* op_name_ = nullptr;
  SmallVec<uint8_t, 4> grad_defined_;
};

// Where a derivative puts the gradients of the op's inputs.
class GradOut {
 public:
  void set(int arg, Tensor g);
  void set_list(int arg, std::vector<Tensor> gs);

 private:
  friend class DerivativeNode;
  const BackwardCtx* ctx_ = nullptr;
  variable_list slots_;
};

// The recorded node of an op with a derivative.
class DerivativeNode final : public Node {
 public:
  DerivativeNode(const OperatorEntry& op, const Derivative& d);
  variable_list apply(variable_list&& grads) override;
  std::string name() const override { return d_->resolved_name; }
  void release_variables() override;
  BackwardCtx& ctx() { return ctx_; }
  const OperatorEntry& op() const { return *op_; }

 private:
  friend class BackwardCtx;
  const OperatorEntry* op_;
  const Derivative* d_;
  BackwardCtx ctx_;
  bool released_ = false;
};

// "max_pool2d_with_indices" -> "MaxPool2DWithIndicesBackward0"
std::string backward_node_name(std::string_view op_name);

struct DerivativeRegistrar {
  DerivativeRegistrar(OpId op, Derivative d) { register_derivative(op, d); }
};

}  // namespace strata::autograd

#define STRATA_DERIVATIVE(op, saved_in, saved_out, fn)                                       \
  static ::strata::autograd::DerivativeRegistrar STRATA_UNIQUE(strata_deriv_)(               \
      ::strata::OpId::op, ::strata::autograd::Derivative{&fn, saved_in, saved_out, nullptr})
#define STRATA_DERIVATIVE_NAMED(op, saved_in, saved_out, fn, node_name)                      \
  static ::strata::autograd::DerivativeRegistrar STRATA_UNIQUE(strata_deriv_)(               \
      ::strata::OpId::op, ::strata::autograd::Derivative{&fn, saved_in, saved_out, node_name})
