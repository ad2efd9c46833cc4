#include "dispatch/dispatcher.h"
#include "core/hot.h"

#include <sstream>

namespace strata {

void register_builtin_schemas(Dispatcher& d);  // ops/op_list.cpp

std::string_view dispatch_key_name(DispatchKey k) {
  switch (k) {
    case DispatchKey::CPU: return "CPU";
    case DispatchKey::CUDA: return "CUDA";
    case DispatchKey::Meta: return "Meta";
    case DispatchKey::PrivateUse1: return "PrivateUse1";
    case DispatchKey::MPS: return "MPS";
    case DispatchKey::ProfilerKernel: return "ProfilerKernel";
    case DispatchKey::CompositeImplicit: return "CompositeImplicit";
    case DispatchKey::ADInplaceOrView: return "ADInplaceOrView";
    case DispatchKey::Autograd: return "Autograd";
    case DispatchKey::Autocast: return "Autocast";
    case DispatchKey::Vmap: return "Vmap";
    case DispatchKey::Functionalize: return "Functionalize";
    case DispatchKey::Tracer: return "Tracer";
    case DispatchKey::Profiler: return "Profiler";
    case DispatchKey::Sparse: return "Sparse";
    case DispatchKey::Quantized: return "Quantized";
    case DispatchKey::Nested: return "Nested";
    case DispatchKey::Python: return "Python";
    default: return "Undefined";
  }
}

std::atomic<uint64_t> g_global_included_keys{0};

STRATA_HOT LocalDispatchKeySet& tls_local_dispatch_key_set() {
  thread_local LocalDispatchKeySet s;
  return s;
}

ExcludeDispatchKeyGuard::ExcludeDispatchKeyGuard(DispatchKeySet ks) {
  auto& tls = tls_local_dispatch_key_set();
  prev_ = tls.excluded;
  tls.excluded = tls.excluded | ks;
}
ExcludeDispatchKeyGuard::~ExcludeDispatchKeyGuard() { tls_local_dispatch_key_set().excluded = prev_; }
IncludeDispatchKeyGuard::IncludeDispatchKeyGuard(DispatchKeySet ks) {
  auto& tls = tls_local_dispatch_key_set();
  prev_ = tls.included;
  tls.included = tls.included | ks;
}
IncludeDispatchKeyGuard::~IncludeDispatchKeyGuard() { tls_local_dispatch_key_set().included = prev_; }

Dispatcher& Dispatcher::get() {
  static Dispatcher* d = [] {
    auto* p = new Dispatcher();  // never destroyed: kernels may run during exit
    register_builtin_schemas(*p);
    return p;
  }();
  return *d;
}

namespace {
// A kernel published to readers: never freed (Note [Registering while ops run]).
const KernelFunction* publish(KernelFunction k) { return new KernelFunction(std::move(k)); }
}  // namespace

Dispatcher::Dispatcher() : ops_(new std::atomic<OperatorEntry*>[kMaxOps]) {
  // Functionality layers are transparent until something registers for them.
  static const KernelFunction* const fallthrough = publish(KernelFunction::make_fallthrough());
  for (int k = 0; k < kNumDispatchKeys; ++k)
    fallbacks_[k].store(k >= kFirstFunctionalityKey ? fallthrough : &no_kernel(), std::memory_order_relaxed);
}

OperatorEntry& Dispatcher::def(const std::string& schema_text, uint32_t flags, int id) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  FunctionSchema schema = parse_schema(schema_text);
  std::string full = schema.full_name();
  STRATA_CHECK(!by_name_.count(full), "Dispatcher::def: operator ", full, " is already defined");
  const size_t n = num_ops_.load(std::memory_order_relaxed);
  if (id < 0) id = static_cast<int>(n);
  STRATA_CHECK(id == static_cast<int>(n), "Dispatcher::def: operator ids must be dense (", full, ")");
  STRATA_CHECK(n < kMaxOps, "Dispatcher::def: too many operators (", kMaxOps, ") to define ", full);
  auto* op = new OperatorEntry(std::move(schema), flags, id);  // never freed: see the header
  recompute(*op);
  ops_[n].store(op, std::memory_order_release);
  num_ops_.store(n + 1, std::memory_order_release);
  by_name_[full] = op;
  // The first overload also answers to the bare name.
  by_name_.emplace(op->schema().name, op);
  return *op;
}

OperatorEntry* Dispatcher::find(std::string_view name) const {
  std::lock_guard<std::recursive_mutex> g(mu_);
  auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? nullptr : it->second;
}

std::vector<OperatorEntry*> Dispatcher::overloads(std::string_view name) const {
  std::lock_guard<std::recursive_mutex> g(mu_);
  std::vector<OperatorEntry*> out;
  for (size_t i = 0, n = num_ops(); i < n; ++i)
    if (op(static_cast<int>(i)).schema().name == name) out.push_back(&op(static_cast<int>(i)));
  return out;
}

void Dispatcher::register_kernel(OperatorEntry& op, DispatchKey key, KernelFunction k) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  if (k.typed) {
    const auto& s = op.schema();
    bool ok = k.arg_types.size() == s.args.size() && k.ret_types.size() == s.returns.size();
    for (size_t i = 0; ok && i < s.args.size(); ++i) ok = k.arg_types[i] == s.args[i].type;
    for (size_t i = 0; ok && i < s.returns.size(); ++i) {
      ok = k.ret_types[i] == s.returns[i] ||
           (k.ret_types[i] == ArgType::TensorList && s.returns[i] == ArgType::TensorList);
    }
    if (!ok) {
      std::ostringstream ss;
      ss << "Dispatcher: kernel " << k.debug_name << " for " << s.full_name() << " has C++ signature (";
      for (size_t i = 0; i < k.arg_types.size(); ++i) ss << (i ? ", " : "") << arg_type_name(k.arg_types[i]);
      ss << ") which does not match the schema " << s.text;
      throw Error(ss.str());
    }
  }
  op.registered_[static_cast<int>(key)].store(publish(std::move(k)), std::memory_order_release);
  recompute(op);
}

void Dispatcher::register_fallback(DispatchKey key, KernelFunction k) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  fallbacks_[static_cast<int>(key)].store(publish(std::move(k)), std::memory_order_release);
  for (size_t i = 0, n = num_ops(); i < n; ++i) recompute(op(static_cast<int>(i)));
}

// Note [Computing the dispatch table]
// For each key: the op's own kernel; else, for a backend key, the op's
// CompositeImplicit kernel (it is written in terms of other ops, so it works on
// every backend); else the key's global fallback. Functionality keys whose
// entry is a fallthrough are collected into a mask that calls remove before
// the bit scan, so a transparent layer costs nothing.
// Under mu_; readers see each entry switch from one published kernel to
// another (Note [Registering while ops run]). The fallthrough mask is stored
// last: a key that stops being a fallthrough has its kernel in place first.
void Dispatcher::recompute(OperatorEntry& op) {
  DispatchKeySet fallthrough;
  const KernelFunction* composite = op.registered_[static_cast<int>(DispatchKey::CompositeImplicit)].load();
  for (int k = 0; k < kNumDispatchKeys; ++k) {
    auto key = static_cast<DispatchKey>(k);
    const KernelFunction* chosen = nullptr;
    DispatchKey source = key;
    const KernelFunction* reg = op.registered_[k].load();
    const KernelFunction* fb = fallbacks_[k].load();
    if (reg && reg->valid()) {
      chosen = reg;
    } else if (is_backend_key(key) && composite && composite->valid()) {
      chosen = composite;
      source = DispatchKey::CompositeImplicit;
    } else if (fb && fb->valid()) {
      chosen = fb;
    }
    if (chosen && chosen->fallthrough) {
      fallthrough = fallthrough.add(key);
    } else {
      op.table_[k].store(chosen ? chosen : &no_kernel(), std::memory_order_release);
    }
    op.source_[k].store(source, std::memory_order_relaxed);
  }
  op.fallthrough_.store(fallthrough, std::memory_order_release);
  // A key that became a fallthrough loses its kernel only once it is masked.
  for (int k = 0; k < kNumDispatchKeys; ++k)
    if (fallthrough.has(static_cast<DispatchKey>(k))) op.table_[k].store(&no_kernel(), std::memory_order_release);
}

void OperatorEntry::report_missing(DispatchKeySet ks) const {
  DispatchKey k = ks.highest();
  std::ostringstream ss;
  ss << "Could not run '" << schema_.full_name() << "' with arguments from the '" << dispatch_key_name(k)
     << "' backend: no kernel is registered for it. '" << schema_.full_name() << "' has kernels for: [";
  bool first = true;
  for (int i = 0; i < kNumDispatchKeys; ++i) {
    const KernelFunction* r = registered_[i].load();
    if (r && r->valid() && !r->fallthrough) {
      ss << (first ? "" : ", ") << dispatch_key_name(static_cast<DispatchKey>(i));
      first = false;
    }
  }
  ss << "]";
  if (k == DispatchKey::CUDA) {
    ss << ". Strata's CUDA backend has no kernel for '" << schema_.full_name()
       << "' yet (factories, copies, views, the common elementwise ops, the basic reductions and softmax run on "
          "cuda devices): compute on the CPU with .cpu(), or see docs/CUDA.md";
  }
  throw NotImplementedError(ss.str());
}

namespace detail {
STRATA_HOT DispatchKeySet collect_keys_boxed(const Stack& s) {
  DispatchKeySet ks;
  for (const IValue& v : s) {
    if (v.is_tensor()) {
      if (v.to_tensor().defined()) ks = ks | v.to_tensor().key_set();
    } else if (v.is_tensor_list()) {
      for (const auto& t : v.to_tensor_list())
        if (t.defined()) ks = ks | t.key_set();
    } else if (v.is_device()) {
      ks = ks.add(backend_key_for(v.to_device().type));
    }
  }
  return ks;
}
}  // namespace detail

STRATA_HOT void call_boxed(const OperatorEntry& op, Stack& stack) {
  DispatchKeySet ks = apply_tls(detail::collect_keys_boxed(stack), op);
  op.lookup(ks).boxed(op, ks, stack);
}

void redispatch_boxed(const OperatorEntry& op, DispatchKeySet ks, DispatchKey self, Stack& stack) {
  DispatchKeySet below = ks.below(self) - op.fallthrough_keys();
  op.lookup(below).boxed(op, below, stack);
}

KernelRegistrar::KernelRegistrar(const char* op_name, DispatchKey key, KernelFunction k) {
  Dispatcher& d = Dispatcher::get();
  OperatorEntry* op = d.find(op_name);
  STRATA_CHECK(op, "KernelRegistrar: unknown operator '", op_name, "'");
  d.register_kernel(*op, key, std::move(k));
}

FallbackRegistrar::FallbackRegistrar(DispatchKey key, KernelFunction k) {
  Dispatcher::get().register_fallback(key, std::move(k));
}

}  // namespace strata
