#include "autograd/derivative.h"

#include <atomic>
#include <cctype>

#include "core/shape.h"

#include "autograd/variable.h"
#include "ops/ops.h"

namespace strata::autograd {

namespace {
std::vector<Derivative>& table() {
  static std::vector<Derivative> t(static_cast<size_t>(OpId::NumBuiltinOps));
  return t;
}

std::string legacy_type_name(const Tensor& t) {
  const char* n = "Tensor";
  switch (t.dtype()) {
    case ScalarType::Float32: n = "FloatTensor"; break;
    case ScalarType::Float64: n = "DoubleTensor"; break;
    case ScalarType::Float16: n = "HalfTensor"; break;
    case ScalarType::BFloat16: n = "BFloat16Tensor"; break;
    case ScalarType::Int64: n = "LongTensor"; break;
    case ScalarType::Int32: n = "IntTensor"; break;
    default: break;
  }
  return str("strata.", n, " ", shape_str(t.sizes()));
}
}  // namespace

void register_derivative(OpId op, Derivative d) {
  auto& t = table();
  size_t i = static_cast<size_t>(op);
  STRATA_CHECK(!t[i].fn, "register_derivative: op '", op_entry_name(op), "' already has a derivative");
  t[i] = d;
  t[i].resolved_name = d.node_name ? std::string(d.node_name) : backward_node_name(op_entry_name(op));
}

const Derivative* find_derivative(int op_id) {
  auto& t = table();
  if (op_id < 0 || static_cast<size_t>(op_id) >= t.size() || !t[op_id].fn) return nullptr;
  return &t[op_id];
}

std::string backward_node_name(std::string_view op_name) {
  op_name = op_name.substr(0, op_name.find('.'));  // "max.dim" -> "max"
  std::string out;
  bool upper = true;
  for (char c : op_name) {
    if (c == '_') {
      upper = true;
      continue;
    }
    out.push_back(upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c);
    upper = false;
  }
  return out + "Backward0";
}

// ---------------------------------------------------------------------------
namespace {
// Pairs pushed on any thread: the hot path reads this global first and touches
// thread-local state only when some thread has hooks set.
std::atomic<int64_t> g_hooks_pushed{0};
thread_local SavedTensorHooks* t_hooks_top = nullptr;
thread_local std::vector<std::shared_ptr<SavedTensorHooks>> t_hooks_stack;
thread_local std::optional<std::string> t_hooks_disabled;
}  // namespace

SavedTensorHooks* current_saved_tensor_hooks() { return t_hooks_top; }

void push_saved_tensor_hooks(std::shared_ptr<SavedTensorHooks> hooks) {
  if (t_hooks_disabled) throw Error(*t_hooks_disabled);
  STRATA_CHECK(hooks, "saved_tensors_hooks: no hooks given");
  t_hooks_top = hooks.get();
  t_hooks_stack.push_back(std::move(hooks));
  g_hooks_pushed.fetch_add(1, std::memory_order_relaxed);
}

void pop_saved_tensor_hooks() {
  STRATA_CHECK(!t_hooks_stack.empty(), "saved_tensors_hooks: no hooks to pop on this thread");
  t_hooks_stack.pop_back();
  t_hooks_top = t_hooks_stack.empty() ? nullptr : t_hooks_stack.back().get();
  g_hooks_pushed.fetch_sub(1, std::memory_order_relaxed);
}

void set_saved_tensor_hooks_disabled(std::optional<std::string> message) {
  if (message && !t_hooks_stack.empty()) throw Error(*message);
  t_hooks_disabled = std::move(message);
}

const std::optional<std::string>& saved_tensor_hooks_disabled_message() { return t_hooks_disabled; }

void SavedTensor::pack_with(const SavedTensorHooks& hooks, const Tensor& t) {
  const uint32_t before = t.version();
  hooked_ = std::make_unique<Hooked>();
  if (!is_output_ && requires_grad(t)) hooked_->edge = gradient_edge(t);
  hooked_->packed = hooks.pack(t);
  STRATA_CHECK(t.version() == before,
               "A saved tensor pack hook is modifying its input in place. Tensors provided as input to pack hook "
               "cannot be modified by in-place operations as this can lead to unexpected side-effects.");
}

SavedTensor::SavedTensor(const Tensor& t, bool is_output) : is_output_(is_output) {
  if (!t.defined()) return;
  if (t.impl()->is_inference()) [[unlikely]] check_saveable_not_inference(*t.impl());
  version_ = t.version();
  // A Python number the op wrapped into a tensor is not the user's tensor: it
  // is kept as is (PyTorch keeps it as a scalar).
  if (g_hooks_pushed.load(std::memory_order_relaxed) != 0) [[unlikely]] {
    if (SavedTensorHooks* hooks = t_hooks_top; hooks && !t.impl()->is_wrapped_number()) {
      pack_with(*hooks, t);
      return;
    }
  }
  if (is_output) {
    data_ = alias_without_history(t);
  } else {
    data_ = t;
  }
}

Tensor SavedTensor::unpack(const std::shared_ptr<Node>& owner, uint32_t output_nr) const {
  if (hooked_) [[unlikely]] {
    // Versions are not checked through hooks (as in PyTorch): what unpack
    // returns is the user's business.
    Tensor r = hooked_->packed->unpack();
    if (!grad_mode_enabled()) return r;
    // create_graph: gradients through the unpacked tensor reach the original.
    if (is_output_ && owner) {
      Tensor t = alias_without_history(r);
      set_history(t, owner, output_nr);
      return t;
    }
    if (hooked_->edge.valid()) {
      Tensor t = alias_without_history(r);
      set_history(t, hooked_->edge.fn, hooked_->edge.input_nr);
      return t;
    }
    return r;
  }
  if (!data_.defined()) return Tensor();
  if (data_.version() != version_) {
    std::string who;
    if (is_output_) {
      who = str(", which is output ", output_nr, " of ", owner->name(), ",");
    } else if (AutogradMeta* m = meta(data_); m && m->grad_fn) {
      who = str(", which is output ", m->output_nr, " of ", m->grad_fn->name(), ",");
    }
    throw Error(str("one of the variables needed for gradient computation has been modified by an inplace "
                    "operation: [",
                    legacy_type_name(data_), "]", who, " is at version ", data_.version(), "; expected version ",
                    version_,
                    " instead. Hint: enable anomaly detection to find the operation that failed to compute its "
                    "gradient, with strata.autograd.set_detect_anomaly(True)."));
  }
  if (!is_output_) return data_;
  Tensor t = alias_without_history(data_);
  // Only differentiable when the graph is being built (create_graph).
  if (grad_mode_enabled() && owner) set_history(t, owner, output_nr);
  return t;
}

// ---------------------------------------------------------------------------
Tensor BackwardCtx::input(int i) const {
  int s = slots_.at(i).first;
  STRATA_CHECK(s >= 0, "derivative of ", op_name(), ": argument ", i, " is not a tensor");
  const SavedTensor& st = saved_slots_.at(s);
  if (!slot_geometry_.at(s).defined()) return Tensor();  // an absent optional tensor
  STRATA_CHECK(st.defined(), "derivative of ", op_name(), ": input ", i,
               " was not saved (name it in the derivative's save_inputs)");
  return st.unpack(nullptr, 0);
}

std::vector<Tensor> BackwardCtx::input_list(int i) const {
  int s = slots_.at(i).first;
  STRATA_CHECK(s >= 0, "derivative of ", op_name(), ": argument ", i, " is not a tensor list");
  std::vector<Tensor> out;
  for (int k = 0; k < slots_.at(i).second; ++k) {
    const SavedTensor& st = saved_slots_.at(s + k);
    STRATA_CHECK(st.defined(), "derivative of ", op_name(), ": input list ", i, " was not saved");
    out.push_back(st.unpack(nullptr, 0));
  }
  return out;
}

const TensorGeometry& BackwardCtx::input_geometry(int i, int elem) const {
  int s = slots_.at(i).first;
  STRATA_CHECK(s >= 0 && elem < slots_.at(i).second, "derivative of ", op_name(), ": argument ", i,
               " is not a tensor");
  return slot_geometry_.at(s + elem);
}

size_t BackwardCtx::list_size(int i) const { return static_cast<size_t>(slots_.at(i).second); }

Tensor BackwardCtx::output(int i) const {
  STRATA_CHECK(i >= 0 && static_cast<size_t>(i) < saved_outputs_.size() && saved_outputs_[i].defined(), "derivative of ", op_name(), ": output ", i,
               " was not saved; name it in the derivative's save_outputs");
  return saved_outputs_[i].unpack(node_->shared_from_this(), static_cast<uint32_t>(i));
}

const TensorGeometry& BackwardCtx::output_geometry(int i) const { return node_->input_geometry.at(i); }

bool BackwardCtx::needs_grad(int i, int elem) const {
  int s = slots_.at(i).first;
  if (s < 0) return false;
  // A slot needs a gradient exactly when it has somewhere to send it.
  if (elem >= 0) return node_->next_edges.at(s + elem).valid();
  for (int k = 0; k < slots_[i].second; ++k)
    if (node_->next_edges[s + k].valid()) return true;
  return false;
}

void GradOut::set(int arg, Tensor g) {
  int s = ctx_->slots_.at(arg).first;
  STRATA_CHECK(s >= 0, "derivative of ", ctx_->op_name(), ": argument ", arg, " is not a tensor");
  slots_.at(s) = std::move(g);
}

void GradOut::set_list(int arg, std::vector<Tensor> gs) {
  int s = ctx_->slots_.at(arg).first;
  STRATA_CHECK(s >= 0 && static_cast<int>(gs.size()) == ctx_->slots_.at(arg).second, "derivative of ",
               ctx_->op_name(), ": wrong number of gradients for list argument ", arg);
  for (size_t k = 0; k < gs.size(); ++k) slots_.at(s + k) = std::move(gs[k]);
}

// ---------------------------------------------------------------------------
DerivativeNode::DerivativeNode(const OperatorEntry& op, const Derivative& d)
    : op_(&op), d_(&d) {
  ctx_.node_ = this;
  ctx_.op_name_ = &op.name();
}

variable_list DerivativeNode::apply(variable_list&& grads) {
  STRATA_CHECK(!released_,
               "Trying to backward through the graph a second time (or directly access saved tensors after they "
               "have already been freed). Saved intermediate values of the graph are freed when you call "
               ".backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the graph "
               "a second time or if you need to access saved tensors after calling backward. (node ",
               name(), ")");
  ctx_.grad_defined_.assign(grads.size(), 0);
  for (size_t i = 0; i < grads.size() && i < input_geometry.size(); ++i) {
    ctx_.grad_defined_[i] = grads[i].defined();
    const TensorGeometry& g = input_geometry[i];
    if (!grads[i].defined() && g.defined() && is_differentiable_type(g.dtype)) {
      grads[i] = zeros(g.sizes, g.dtype, g.device);
    }
  }
  GradOut out;
  out.ctx_ = &ctx_;
  out.slots_.resize(next_edges.size());
  d_->fn(ctx_, grads, out);
  return std::move(out.slots_);
}

void DerivativeNode::release_variables() {
  // Like PyTorch, only a node that had saved tensors refuses a second pass.
  for (auto& s : ctx_.saved_slots_) released_ |= s.defined(), s.reset();
  for (auto& s : ctx_.saved_outputs_) released_ |= s.defined(), s.reset();
}

}  // namespace strata::autograd
