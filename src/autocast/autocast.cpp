#include "autocast/autocast.h"

#include <string>
#include <unordered_map>

#include "dispatch/dispatcher.h"
#include "ops/ops.h"

namespace strata::autocast {

namespace {

thread_local ScalarType tls_dtype = ScalarType::BFloat16;

// Which ops run in which precision under CPU autocast. Matrix products and
// convolutions gain from bfloat16/float16; normalisations, softmax, losses and
// reductions lose accuracy in them; ops that combine several tensors must see
// one dtype.
const std::unordered_map<std::string, Policy>& policies() {
  static const std::unordered_map<std::string, Policy> p = [] {
    std::unordered_map<std::string, Policy> m;
    for (const char* n : {"mm", "bmm", "matmul", "addmm", "baddbmm", "addbmm", "linear", "conv1d", "conv2d",
                          "conv1d.padding", "conv2d.padding", "scaled_dot_product_attention"})
      m[n] = Policy::LowerPrecision;
    for (const char* n : {"softmax", "log_softmax", "layer_norm", "rms_norm", "group_norm", "batch_norm",
                          "cross_entropy_loss", "nll_loss", "mse_loss", "l1_loss", "binary_cross_entropy",
                          "binary_cross_entropy_with_logits", "sum", "mean", "prod", "cumsum", "cumprod",
                          "logsumexp", "norm", "norm.str", "var.correction", "var_mean.correction"})
      m[n] = Policy::Float32;
    for (const char* n : {"cat", "stack", "where", "lerp", "atan2", "index_put_", "index_put", "index_add",
                          "scatter_add", "scatter.src", "addcmul", "addcdiv"})
      m[n] = Policy::Promote;
    return m;
  }();
  return p;
}

std::vector<Policy>& policy_table() {
  static std::vector<Policy> t;
  return t;
}

Policy lookup(const OperatorEntry& op) {
  auto& t = policy_table();
  const size_t id = static_cast<size_t>(op.id());
  if (id >= t.size()) {
    // Ops can be defined later (extensions): (re)build lazily.
    Dispatcher& d = Dispatcher::get();
    t.assign(d.num_ops(), Policy::None);
    for (size_t i = 0; i < t.size(); ++i) {
      auto it = policies().find(d.op(static_cast<int>(i)).name());
      if (it != policies().end()) t[i] = it->second;
    }
    if (id >= t.size()) return Policy::None;
  }
  return t[id];
}

bool eligible(const Tensor& t) {
  return t.defined() && is_floating_type(t.dtype()) && t.dtype() != ScalarType::Float64 &&
         !t.impl()->is_wrapped_number();
}

// The dtype op's inputs are cast to under the current autocast dtype; Undefined when nothing is
// cast (no policy, or Promote with no eligible input).
ScalarType target_of(const OperatorEntry& op, Policy policy, const Stack& stack) {
  if (policy == Policy::None) return ScalarType::Undefined;
  if (policy != Policy::Promote) return policy == Policy::LowerPrecision ? tls_dtype : ScalarType::Float32;
  const FunctionSchema& schema = op.schema();
  const size_t n = schema.args.size();
  const size_t base = stack.size() - n;
  ScalarType widest = ScalarType::Undefined;
  auto see = [&](const Tensor& t) {
    if (eligible(t)) widest = widest == ScalarType::Undefined ? t.dtype() : promote_types(widest, t.dtype());
  };
  for (size_t i = 0; i < n; ++i) {
    if (schema.args[i].is_write && schema.args[i].kwarg_only) continue;
    const IValue& v = stack[base + i];
    if (v.is_tensor()) see(v.to_tensor());
    if (v.is_tensor_list())
      for (const Tensor& t : v.to_tensor_list()) see(t);
  }
  return widest;
}

void cast_to(const OperatorEntry& op, ScalarType target, Stack& stack) {
  const FunctionSchema& schema = op.schema();
  const size_t n = schema.args.size();
  const size_t base = stack.size() - n;
  auto cast = [&](const Tensor& t) { return eligible(t) && t.dtype() != target ? to_dtype(t, target) : t; };
  for (size_t i = 0; i < n; ++i) {
    if (schema.args[i].is_write && schema.args[i].kwarg_only) continue;  // out=: written, not read
    IValue& v = stack[base + i];
    if (v.is_tensor()) {
      if (v.to_tensor().defined()) v = IValue(cast(v.to_tensor()));
    } else if (v.is_tensor_list()) {
      std::vector<Tensor> list = v.to_tensor_list();
      for (Tensor& t : list) t = cast(t);
      v = IValue(std::move(list));
    }
  }
}

void autocast_fallback(const OperatorEntry& op, DispatchKeySet ks, Stack& stack) {
  const ScalarType target = target_of(op, lookup(op), stack);
  if (target == ScalarType::Undefined) {
    redispatch_boxed(op, ks, DispatchKey::Autocast, stack);
    return;
  }
  ExcludeDispatchKeyGuard no_autocast(DispatchKey::Autocast);
  cast_to(op, target, stack);
  DispatchKeySet keys = apply_tls(detail::collect_keys_boxed(stack), op).below(DispatchKey::Autocast);
  op.lookup(keys).boxed(op, keys, stack);
}

struct Init {
  Init() {
    Dispatcher::get().register_fallback(DispatchKey::Autocast,
                                        KernelFunction::make_boxed(&autocast_fallback, "autocast_fallback"));
  }
} init;

}  // namespace

bool is_enabled() { return tls_local_dispatch_key_set().included.has(DispatchKey::Autocast); }
void set_enabled(bool on) {
  auto& tls = tls_local_dispatch_key_set();
  tls.included = on ? tls.included.add(DispatchKey::Autocast) : tls.included.remove(DispatchKey::Autocast);
}
ScalarType dtype() { return tls_dtype; }
void set_dtype(ScalarType t) {
  STRATA_CHECK(t == ScalarType::BFloat16 || t == ScalarType::Float16,
               "autocast: in CPU autocast, the target dtype must be bfloat16 or float16 (got ", dtype_name(t), ")");
  tls_dtype = t;
}
Policy policy_of(const OperatorEntry& op) { return lookup(op); }
bool is_active() {
  const auto& tls = tls_local_dispatch_key_set();
  return tls.included.has(DispatchKey::Autocast) && !tls.excluded.has(DispatchKey::Autocast);
}
void cast_inputs(const OperatorEntry& op, Stack& stack) {
  const ScalarType target = target_of(op, lookup(op), stack);
  if (target != ScalarType::Undefined) cast_to(op, target, stack);
}
Policy policy_of(std::string_view op_name) {
  auto it = policies().find(std::string(op_name));
  return it == policies().end() ? Policy::None : it->second;
}

}  // namespace strata::autocast
