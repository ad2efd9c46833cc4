// The Vmap layer: BatchedTensorImpl, the vmap levels of a thread, and the
// boxed fallback on DispatchKey::Vmap (Note [Batched tensors and the Vmap key]
// in vmap.h). The batching rules live in batching_rules.cpp.
#include "vmap/vmap.h"

#include <atomic>
#include <mutex>
#include <set>

#include "autograd/variable.h"
#include "core/generator.h"
#include "dispatch/dispatcher.h"
#include "ops/ops.h"
#include "vmap/batching.h"

namespace strata::vmap {

namespace {

std::vector<int64_t> drop_dim(IntArrayRef v, int64_t d) {
  std::vector<int64_t> out;
  out.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    if (static_cast<int64_t>(i) != d) out.push_back(v[i]);
  return out;
}

struct ThreadState {
  std::vector<LevelInfo> levels;
  int64_t next_level = 1;
  // Inside the handling of a random op: levels[0, random_limit) still need
  // their randomness applied (innermost first); -1 when not in one.
  int64_t random_limit = -1;
  std::vector<std::string> warnings;
};
ThreadState& tstate() {
  thread_local ThreadState s;
  return s;
}

std::mutex g_warned_mu;
std::atomic<int64_t> g_slow_calls{0};
std::set<std::string>& warned_ops() {
  static auto* s = new std::set<std::string>();
  return *s;
}

}  // namespace

BatchedTensorImpl::BatchedTensorImpl(Tensor value, int64_t bdim, int64_t level)
    : TensorImpl(value.impl()->storage(), value.storage_offset(), drop_dim(value.sizes(), bdim),
                 drop_dim(value.strides(), bdim), value.dtype()),
      value_(std::move(value)),
      bdim_(bdim),
      level_(level) {
  set_key_set(value_.key_set().add(DispatchKey::Vmap));
  set_autograd_meta(value_.impl()->autograd_meta_ptr());
}

BatchedTensorImpl* maybe_batched(const Tensor& t) {
  if (!t.defined() || !t.key_set().has(DispatchKey::Vmap)) return nullptr;
  return dynamic_cast<BatchedTensorImpl*>(t.impl());
}

Tensor make_batched(Tensor physical, int64_t bdim, int64_t level) {
  STRATA_CHECK(physical.defined(), "vmap: cannot batch an undefined tensor");
  const int64_t n = physical.dim();
  STRATA_CHECK(bdim >= 0 && bdim < n, "vmap: batch dim ", bdim, " out of range for a tensor with ", n, " dims");
  if (BatchedTensorImpl* b = maybe_batched(physical))
    STRATA_CHECK(b->level() < level, "vmap: internal error: wrapping a level-", b->level(), " tensor at level ", level);
  return Tensor(make_intrusive<BatchedTensorImpl>(std::move(physical), bdim, level));
}

int64_t push_level(int64_t batch_size, Randomness r) {
  ThreadState& st = tstate();
  const int64_t level = st.next_level++;
  st.levels.push_back({level, batch_size, r});
  auto& tls = tls_local_dispatch_key_set();
  tls.included = tls.included.add(DispatchKey::Vmap);
  return level;
}

void pop_level() {
  ThreadState& st = tstate();
  STRATA_CHECK(!st.levels.empty(), "vmap: no active vmap level to leave");
  st.levels.pop_back();
  if (st.levels.empty()) {
    auto& tls = tls_local_dispatch_key_set();
    tls.included = tls.included.remove(DispatchKey::Vmap);
  }
}

const std::vector<LevelInfo>& active_levels() { return tstate().levels; }

std::pair<Tensor, std::optional<int64_t>> unwrap_at(const Tensor& t, int64_t level) {
  if (BatchedTensorImpl* b = maybe_batched(t))
    if (b->level() == level) return {b->value(), b->bdim()};
  return {t, std::nullopt};
}

Tensor remove_batch_dim(const Tensor& t, int64_t level, int64_t batch_size, int64_t out_dim) {
  auto [p, bd] = unwrap_at(t, level);
  if (bd) return *bd == out_dim ? p : movedim(p, std::vector<int64_t>{*bd}, std::vector<int64_t>{out_dim});
  std::vector<int64_t> sizes(t.sizes().begin(), t.sizes().end());
  sizes.insert(sizes.begin() + out_dim, batch_size);
  return expand(unsqueeze(t, out_dim), sizes);
}

void forget_warnings() {
  std::lock_guard<std::mutex> g(g_warned_mu);
  warned_ops().clear();
}

int64_t slow_path_calls() { return g_slow_calls.load(std::memory_order_relaxed); }

std::vector<std::string> take_warnings() {
  std::vector<std::string> out;
  out.swap(tstate().warnings);
  return out;
}

// ---------------------------------------------------------------------------
// Shared by the fallback and the rules (batching.h).

int64_t max_level(const Stack& s, size_t base) {
  int64_t lvl = -1;
  auto see = [&](const Tensor& t) {
    if (BatchedTensorImpl* b = maybe_batched(t)) lvl = std::max(lvl, b->level());
  };
  for (size_t i = base; i < s.size(); ++i) {
    if (s[i].is_tensor()) {
      see(s[i].to_tensor());
    } else if (s[i].is_tensor_list()) {
      for (const Tensor& t : s[i].to_tensor_list()) see(t);
    }
  }
  return lvl;
}

void call_physical(const OperatorEntry& op, Stack& s) {
  if (!detail::collect_keys_boxed(s).has(DispatchKey::Vmap) && tstate().random_limit <= 0) {
    // Nothing batched left: skip the second trip through this layer.
    ExcludeDispatchKeyGuard g(DispatchKey::Vmap);
    call_boxed(op, s);
    return;
  }
  call_boxed(op, s);
}

void wrap_results(Stack& s, int64_t level) {
  for (IValue& v : s) {
    if (v.is_tensor()) {
      if (v.to_tensor().defined()) v = IValue(make_batched(v.to_tensor(), 0, level));
    } else if (v.is_tensor_list()) {
      std::vector<Tensor> l = v.to_tensor_list();
      for (Tensor& t : l)
        if (t.defined()) t = make_batched(t, 0, level);
      v = IValue(std::move(l));
    }
  }
}

[[noreturn]] void inplace_error(const OperatorEntry& op, const std::string& arg) {
  throw Error(str("vmap: ", op.schema().full_name(), " writes into '", arg,
                  "', which is not batched at this vmap level, while another argument is: the batched "
                  "result has more elements than '", arg,
                  "' can hold. Use the out-of-place op, or map over '", arg, "' too."));
}

namespace {

bool is_random_op(const OperatorEntry& op) {
  if (op.flags() & kRandom) return true;
  for (const Argument& a : op.schema().args)
    if (a.name == "generator") return true;
  return false;
}

std::optional<int64_t> generator_arg(const OperatorEntry& op, const Stack& s, size_t base) {
  const auto& args = op.schema().args;
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i].name == "generator" && !s[base + i].is_none()) return s[base + i].to_int();
  return std::nullopt;
}

struct RandomLimitGuard {
  explicit RandomLimitGuard(int64_t limit) : prev(tstate().random_limit) { tstate().random_limit = limit; }
  ~RandomLimitGuard() { tstate().random_limit = prev; }
  int64_t prev;
};

// Calls op once per entry of `level` and stacks the results (Note [Batched
// tensors and the Vmap key], step 3). batch_size is used when no argument is
// batched at level (a random op under randomness="different"). same_rng:
// every entry starts from the generator state of the first.
void loop_fallback(const OperatorEntry& op, Stack& stack, size_t base, int64_t level, int64_t batch_size,
                   bool same_rng) {
  const FunctionSchema& schema = op.schema();
  const size_t nargs = schema.args.size();
  struct Slot {
    Tensor phys;
    int64_t bdim;
  };
  std::vector<std::optional<Slot>> slots(nargs);
  std::vector<std::vector<std::optional<Slot>>> list_slots(nargs);
  int64_t B = -1;
  auto note = [&](const Tensor& t) -> std::optional<Slot> {
    auto [p, bd] = unwrap_at(t, level);
    if (!bd) return std::nullopt;
    const int64_t n = p.size(*bd);
    if (B >= 0 && B != n)
      throw Error(str("vmap: ", schema.full_name(), ": arguments batched at the same level have batch sizes ", B,
                      " and ", n));
    B = n;
    return Slot{p, *bd};
  };
  for (size_t i = 0; i < nargs; ++i) {
    const IValue& v = stack[base + i];
    if (v.is_tensor()) {
      slots[i] = note(v.to_tensor());
    } else if (v.is_tensor_list()) {
      for (const Tensor& t : v.to_tensor_list()) list_slots[i].push_back(note(t));
    }
  }
  const bool any_batched = B >= 0;
  if (!any_batched) B = batch_size;
  int write_arg = -1;
  for (size_t i = 0; i < nargs; ++i) {
    if (!schema.args[i].is_write || stack[base + i].is_none()) continue;
    if (!slots[i]) inplace_error(op, schema.args[i].name);
    if (write_arg < 0) write_arg = static_cast<int>(i);
  }
  std::optional<int64_t> gen_id = same_rng ? generator_arg(op, stack, base) : std::nullopt;
  std::optional<CPUGenerator> saved;
  if (same_rng) {
    GeneratorGuard g(gen_id);
    saved = *g;
  }
  std::vector<Stack> outs;
  outs.reserve(static_cast<size_t>(B));
  for (int64_t e = 0; e < B; ++e) {
    Stack s(stack.begin() + static_cast<std::ptrdiff_t>(base), stack.end());
    for (size_t i = 0; i < nargs; ++i) {
      if (slots[i]) {
        s[i] = IValue(select(slots[i]->phys, slots[i]->bdim, e));
      } else if (!list_slots[i].empty()) {
        std::vector<Tensor> l = s[i].to_tensor_list();
        for (size_t j = 0; j < l.size(); ++j)
          if (list_slots[i][j]) l[j] = select(list_slots[i][j]->phys, list_slots[i][j]->bdim, e);
        s[i] = IValue(std::move(l));
      }
    }
    if (same_rng) {
      GeneratorGuard g(gen_id);
      *g = *saved;
    }
    call_physical(op, s);
    outs.push_back(std::move(s));
  }
  if (write_arg >= 0 && schema.returns.size() == 1) {
    // In place or out=: the written batched tensor is the result.
    IValue written = stack[base + static_cast<size_t>(write_arg)];
    stack.resize(base);
    stack.push_back(std::move(written));
    return;
  }
  stack.resize(base);
  const size_t nret = outs.empty() ? 0 : outs[0].size();
  if (outs.empty()) throw Error(str("vmap: ", schema.full_name(), ": cannot run over a batch of size 0"));
  auto stack_col = [&](auto get) -> Tensor {
    std::vector<Tensor> col;
    col.reserve(outs.size());
    for (Stack& o : outs) col.push_back(get(o));
    if (!col[0].defined()) return Tensor();
    return make_batched(strata::stack(col, 0), 0, level);
  };
  for (size_t j = 0; j < nret; ++j) {
    const IValue& first = outs[0][j];
    if (first.is_tensor()) {
      stack.push_back(IValue(stack_col([&](Stack& o) { return o[j].to_tensor(); })));
    } else if (first.is_tensor_list()) {
      std::vector<Tensor> l;
      for (size_t k = 0; k < first.to_tensor_list().size(); ++k)
        l.push_back(stack_col([&](Stack& o) { return o[j].to_tensor_list().at(k); }));
      stack.push_back(IValue(std::move(l)));
    } else {
      // A Python value (bool, int, float): the same for every entry, or the
      // op's answer depends on the data, which one batched call cannot give.
      for (const Stack& o : outs) {
        if (o[j].raw().index() != first.raw().index() || o[j].to_scalar().to<double>() != first.to_scalar().to<double>())
          throw Error(str("vmap: ", schema.full_name(), " returns a Python value that differs between batch entries "
                          "(data-dependent control flow is not supported inside vmap); use tensor ops instead"));
      }
      stack.push_back(first);
    }
  }
}

void warn_slow(const OperatorEntry& op) {
  const std::string& name = op.schema().full_name();
  {
    std::lock_guard<std::mutex> g(g_warned_mu);
    if (!warned_ops().insert(name).second) return;
  }
  tstate().warnings.push_back(str("strata.vmap: no batching rule for ", name,
                                  "; it runs once per batch entry and the results are stacked, which is correct "
                                  "but slower than a batched call. (This warning is shown once per op.)"));
}

void vmap_fallback(const OperatorEntry& op, DispatchKeySet ks, Stack& stack) {
  ThreadState& st = tstate();
  const size_t nargs = op.schema().args.size();
  STRATA_CHECK(stack.size() >= nargs, "vmap: op '", op.schema().full_name(), "' called with ", stack.size(),
               " arguments, its schema has ", nargs);
  const size_t base = stack.size() - nargs;

  const int64_t next_random =
      (st.random_limit < 0 ? static_cast<int64_t>(st.levels.size()) : st.random_limit) - 1;
  if (next_random >= 0 && is_random_op(op)) {
    // Each active level applies its randomness mode, innermost first: the
    // per-entry calls of one level come back here for the next outer one.
    const LevelInfo L = st.levels[static_cast<size_t>(next_random)];
    if (L.randomness == Randomness::Error)
      throw Error(str("vmap: called random operation ", op.schema().full_name(),
                      " while in randomness error mode. Please either use the 'same' or 'different' randomness "
                      "flags on vmap or perform the randomness operation out of vmap"));
    bool batched_here = false;
    for (size_t i = base; i < stack.size() && !batched_here; ++i) {
      if (stack[i].is_tensor()) batched_here = unwrap_at(stack[i].to_tensor(), L.level).second.has_value();
      else if (stack[i].is_tensor_list())
        for (const Tensor& t : stack[i].to_tensor_list()) batched_here = batched_here || unwrap_at(t, L.level).second;
    }
    RandomLimitGuard done(next_random);
    if (L.randomness == Randomness::Different || batched_here) {
      loop_fallback(op, stack, base, L.level, L.batch_size, L.randomness == Randomness::Same);
      return;
    }
    // "same" with nothing batched here: one draw, shared by every entry.
    call_boxed(op, stack);
    return;
  }

  const int64_t level = max_level(stack, base);
  if (level < 0) {
    redispatch_boxed(op, ks, DispatchKey::Vmap, stack);
    return;
  }
  if (const BatchRule* rule = find_rule(op)) {
    if ((*rule)(op, stack, base, level)) return;
  }
  const DispatchKey backend = ks.highest_backend();
  if (backend != DispatchKey::NumKeys && op.source_of(backend) == DispatchKey::CompositeImplicit) {
    bool writes = false;
    for (size_t i = 0; i < nargs; ++i)
      writes = writes || (op.schema().args[i].is_write && !stack[base + i].is_none());
    if (!writes) {
      // Its ops meet their own rules. A composite that reads a value of its
      // input (a bounds check through item()) cannot run batched: it loops.
      Stack saved(stack.begin() + static_cast<std::ptrdiff_t>(base), stack.end());
      try {
        op.kernel_for(backend).boxed(op, ks.below(DispatchKey::Vmap), stack);
        return;
      } catch (const Error& e) {
        if (std::string_view(e.what()).find(kItemOfBatched) == std::string_view::npos) throw;
        stack.resize(base);
        stack.insert(stack.end(), saved.begin(), saved.end());
      }
    }
  }
  warn_slow(op);
  g_slow_calls.fetch_add(1, std::memory_order_relaxed);
  loop_fallback(op, stack, base, level, -1, false);
}

FallbackRegistrar g_vmap_layer(DispatchKey::Vmap, KernelFunction::make_boxed(&vmap_fallback, "vmap"));

// detach()/.data of a batched tensor: the detached physical tensor, wrapped again at the same
// level and batch dim (nested wrappers recurse through alias_without_history).
Tensor detach_batched(const Tensor& t) {
  BatchedTensorImpl* b = maybe_batched(t);
  if (!b) return Tensor();
  return make_batched(autograd::alias_without_history(b->value()), b->bdim(), b->level());
}
Tensor physical_of(const Tensor& t) {
  BatchedTensorImpl* b = maybe_batched(t);
  return b ? b->value() : Tensor();
}
const bool g_hooks_set = (autograd::set_batched_hooks({&detach_batched, &physical_of}), true);

}  // namespace

}  // namespace strata::vmap
