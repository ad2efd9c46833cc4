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

void autocast_fallback(const OperatorEntry& op, DispatchKeySet ks, Stack& stack) {
  const Policy policy = lookup(op);
  if (policy == Policy::None) {
    redispatch_boxed(op, ks, DispatchKey::Autocast, stack);
    return;
  }
  const FunctionSchema& schema = op.schema();
  const size_t n = schema.args.size();
  const size_t base = stack.size() - n;
  auto is_input = [&](size_t i) { return !(schema.args[i].is_write && schema.args[i].kwarg_only); };

  ScalarType target = policy == Policy::LowerPrecision ? tls_dtype : ScalarType::Float32;
  if (policy == Policy::Promote) {
    ScalarType widest = ScalarType::Undefined;
    auto see = [&](const Tensor& t) {
      if (eligible(t)) widest = widest == ScalarType::Undefined ? t.dtype() : promote_types(widest, t.dtype());
    };
    for (size_t i = 0; i < n; ++i) {
      if (!is_input(i)) continue;
      const IValue& v = stack[base + i];
      if (v.is_tensor()) see(v.to_tensor());
      if (v.is_tensor_list())
        for (const Tensor& t : v.to_tensor_list()) see(t);
    }
    if (widest == ScalarType::Undefined) {
      redispatch_boxed(op, ks, DispatchKey::Autocast, stack);
      return;
    }
    target = widest;
  }
  // The casts and the op itself run without autocast (they are already in
  // the chosen precision), but with every other layer, autograd included.
  ExcludeDispatchKeyGuard no_autocast(DispatchKey::Autocast);
  auto cast = [&](const Tensor& t) { return eligible(t) && t.dtype() != target ? to_dtype(t, target) : t; };
  for (size_t i = 0; i < n; ++i) {
    if (!is_input(i)) continue;
    IValue& v = stack[base + i];
    if (v.is_tensor()) {
      if (v.to_tensor().defined()) v = IValue(cast(v.to_tensor()));
    } else if (v.is_tensor_list()) {
      std::vector<Tensor> list = v.to_tensor_list();
      for (Tensor& t : list) t = cast(t);
      v = IValue(std::move(list));
    }
  }
  // Continue below this layer with the keys of the (possibly cast) inputs.
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
Policy policy_of(std::string_view op_name) {
  auto it = policies().find(std::string(op_name));
  return it == policies().end() ? Policy::None : it->second;
}

}  // namespace strata::autocast
