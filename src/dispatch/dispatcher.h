// Note [The dispatcher]
// Every op has an OperatorEntry: its schema, flags, the kernels registered per
// dispatch key, and a table computed from them at registration time (so a call
// is a bit scan and an array load). A kernel is stored both unboxed (a typed
// function pointer taking the DispatchKeySet first, used by C++ callers) and
// boxed (a function over a Stack of IValues, used by the Python binding and by
// generic layers such as the profiler). Either form can be called through the
// other: registering a typed kernel generates its boxed wrapper; calling a
// boxed-only kernel from C++ boxes the arguments.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "dispatch/dispatch_key.h"
#include "dispatch/ivalue.h"
#include "dispatch/schema.h"

namespace strata {

using Tensor2 = std::tuple<Tensor, Tensor>;
using Tensor3 = std::tuple<Tensor, Tensor, Tensor>;

class OperatorEntry;
using BoxedKernel = std::function<void(const OperatorEntry&, DispatchKeySet, Stack&)>;

struct KernelFunction {
  void* unboxed = nullptr;
  BoxedKernel boxed;
  bool fallthrough = false;
  // C++ types of the arguments and returns, to check against the schema.
  std::vector<ArgType> arg_types, ret_types;
  bool typed = false;
  std::string debug_name;

  bool valid() const { return static_cast<bool>(boxed) || fallthrough; }
  static KernelFunction make_fallthrough() {
    KernelFunction k;
    k.fallthrough = true;
    k.debug_name = "fallthrough";
    return k;
  }
  static KernelFunction make_boxed(BoxedKernel fn, std::string name = "boxed") {
    KernelFunction k;
    k.boxed = std::move(fn);
    k.debug_name = std::move(name);
    return k;
  }
};

enum OpFlags : uint32_t {
  kNoFlags = 0,
  kPointwise = 1 << 0,
  kReduction = 1 << 1,
  kDifferentiable = 1 << 2,
  kFusible = 1 << 3,
  kView = 1 << 4,
  kInplace = 1 << 5,
  kFactory = 1 << 6,
  kComposite = 1 << 7,
  kRandom = 1 << 8,
  kNondeterministicOrder = 1 << 9,
};

// The empty kernel (no kernel for a key), a function-local static so that
// registrations from static initialisers of any library can use it.
inline const KernelFunction& no_kernel() {
  static const KernelFunction k;
  return k;
}

// Note [Registering while ops run]
// Kernels may be registered (a library loaded at run time, a test swapping a
// fallback) while other threads call ops. A registered kernel is therefore
// never modified nor freed once published: registered_, fallbacks_ and the
// computed table hold pointers to immutable KernelFunctions, the table's
// entries are atomics a registration replaces one by one, and a replaced
// kernel is kept (registrations are rare, so that costs nothing worth
// reclaiming). A call loads the entry once and uses the KernelFunction it got.
class OperatorEntry {
 public:
  OperatorEntry(FunctionSchema s, uint32_t flags, int id) : schema_(std::move(s)), flags_(flags), id_(id) {
    for (auto& t : table_) t.store(&no_kernel(), std::memory_order_relaxed);
  }

  const FunctionSchema& schema() const { return schema_; }
  const std::string& name() const { return schema_.name; }
  uint32_t flags() const { return flags_; }
  int id() const { return id_; }
  DispatchKeySet fallthrough_keys() const { return fallthrough_.load(std::memory_order_acquire); }

  // Kernel for the highest key in ks (ks already masked); throws if none.
  const KernelFunction& lookup(DispatchKeySet ks) const {
    const KernelFunction& k = *table_[static_cast<int>(ks.highest()) & 63].load(std::memory_order_acquire);
    if (__builtin_expect(!k.boxed, 0)) report_missing(ks);
    return k;
  }
  const KernelFunction& kernel_for(DispatchKey k) const {
    return *table_[static_cast<int>(k)].load(std::memory_order_acquire);
  }
  bool has_registered(DispatchKey k) const {
    const KernelFunction* r = registered_[static_cast<int>(k)].load(std::memory_order_acquire);
    return r && r->valid();
  }
  // Which key's kernel table[k] came from, for explain() and tests.
  DispatchKey source_of(DispatchKey k) const { return source_[static_cast<int>(k)].load(std::memory_order_relaxed); }

 private:
  friend class Dispatcher;
  [[noreturn]] void report_missing(DispatchKeySet ks) const;
  FunctionSchema schema_;
  uint32_t flags_;
  int id_;
  std::atomic<const KernelFunction*> registered_[kNumDispatchKeys] = {};
  std::atomic<const KernelFunction*> table_[kNumDispatchKeys];
  std::atomic<DispatchKey> source_[kNumDispatchKeys] = {};
  std::atomic<DispatchKeySet> fallthrough_{DispatchKeySet()};
};

class Dispatcher {
 public:
  static Dispatcher& get();

  // Declares an op. Built-in ops get their id from the OpId enum; ops defined
  // from outside the library get the next free id.
  OperatorEntry& def(const std::string& schema, uint32_t flags = 0, int id = -1);
  // Looks up by "name" or "name.overload"; null if absent.
  OperatorEntry* find(std::string_view name) const;
  // All overloads sharing a name, in declaration order.
  std::vector<OperatorEntry*> overloads(std::string_view name) const;
  OperatorEntry& op(int id) const { return *ops_[id].load(std::memory_order_acquire); }
  size_t num_ops() const { return num_ops_.load(std::memory_order_acquire); }

  void register_kernel(OperatorEntry& op, DispatchKey key, KernelFunction k);
  // A kernel used for key by every op that has none of its own
  // (KernelFunction::make_fallthrough() to make a key transparent).
  void register_fallback(DispatchKey key, KernelFunction k);
  const KernelFunction& fallback(DispatchKey key) const {
    return *fallbacks_[static_cast<int>(key)].load(std::memory_order_acquire);
  }

 private:
  Dispatcher();
  void recompute(OperatorEntry& op);
  // Entries are never freed nor moved (Note [Registering while ops run]); a
  // fixed array so that op(id) needs no lock while def() appends.
  static constexpr size_t kMaxOps = size_t(1) << 14;
  std::unique_ptr<std::atomic<OperatorEntry*>[]> ops_;
  std::atomic<size_t> num_ops_{0};
  std::unordered_map<std::string, OperatorEntry*> by_name_;
  std::atomic<const KernelFunction*> fallbacks_[kNumDispatchKeys] = {};
  mutable std::recursive_mutex mu_;
};

// ---------------------------------------------------------------------------
// Type mapping between C++ kernel signatures and schema argument types.

template <typename T>
struct ArgTypeOf;
#define STRATA_ARG_TYPE(cpp, at)              \
  template <>                                 \
  struct ArgTypeOf<cpp> {                     \
    static constexpr ArgType value = ArgType::at; \
  };
STRATA_ARG_TYPE(Tensor, Tensor)
STRATA_ARG_TYPE(std::optional<Tensor>, OptTensor)
STRATA_ARG_TYPE(TensorList, TensorList)
STRATA_ARG_TYPE(std::vector<Tensor>, TensorList)
STRATA_ARG_TYPE(Scalar, Scalar)
STRATA_ARG_TYPE(std::optional<Scalar>, OptScalar)
STRATA_ARG_TYPE(int64_t, Int)
STRATA_ARG_TYPE(std::optional<int64_t>, OptInt)
STRATA_ARG_TYPE(IntArrayRef, IntList)
STRATA_ARG_TYPE(OptIntArrayRef, OptIntList)
STRATA_ARG_TYPE(double, Float)
STRATA_ARG_TYPE(std::optional<double>, OptFloat)
STRATA_ARG_TYPE(bool, Bool)
STRATA_ARG_TYPE(std::optional<bool>, OptBool)
STRATA_ARG_TYPE(ScalarType, DType)
STRATA_ARG_TYPE(std::optional<ScalarType>, OptDType)
STRATA_ARG_TYPE(std::string_view, Str)
STRATA_ARG_TYPE(std::optional<std::string_view>, OptStr)
STRATA_ARG_TYPE(std::optional<Device>, OptDevice)
STRATA_ARG_TYPE(Tensor2, TensorTuple2)
STRATA_ARG_TYPE(Tensor3, TensorTuple3)
#undef STRATA_ARG_TYPE

namespace detail {

template <typename T>
using arg_t = std::remove_cvref_t<T>;

// IValue -> C++ argument, by value (spans point into the IValue, which the
// stack keeps alive for the call).
template <typename T>
arg_t<T> from_ivalue(const IValue& v) {
  using D = arg_t<T>;
  if constexpr (std::is_same_v<D, Tensor>) {
    return v.to_tensor();
  } else if constexpr (std::is_same_v<D, std::optional<Tensor>>) {
    return v.is_none() ? std::optional<Tensor>() : std::optional<Tensor>(v.to_tensor());
  } else if constexpr (std::is_same_v<D, TensorList>) {
    return TensorList(v.to_tensor_list());
  } else if constexpr (std::is_same_v<D, Scalar>) {
    return v.to_scalar();
  } else if constexpr (std::is_same_v<D, std::optional<Scalar>>) {
    return v.is_none() ? std::optional<Scalar>() : std::optional<Scalar>(v.to_scalar());
  } else if constexpr (std::is_same_v<D, int64_t>) {
    return v.to_int();
  } else if constexpr (std::is_same_v<D, std::optional<int64_t>>) {
    return v.is_none() ? std::optional<int64_t>() : std::optional<int64_t>(v.to_int());
  } else if constexpr (std::is_same_v<D, IntArrayRef>) {
    return IntArrayRef(v.to_int_list());
  } else if constexpr (std::is_same_v<D, OptIntArrayRef>) {
    return v.is_none() ? OptIntArrayRef() : OptIntArrayRef(IntArrayRef(v.to_int_list()));
  } else if constexpr (std::is_same_v<D, double>) {
    return v.to_double();
  } else if constexpr (std::is_same_v<D, std::optional<double>>) {
    return v.is_none() ? std::optional<double>() : std::optional<double>(v.to_double());
  } else if constexpr (std::is_same_v<D, bool>) {
    return v.to_bool();
  } else if constexpr (std::is_same_v<D, std::optional<bool>>) {
    return v.is_none() ? std::optional<bool>() : std::optional<bool>(v.to_bool());
  } else if constexpr (std::is_same_v<D, ScalarType>) {
    return v.to_dtype();
  } else if constexpr (std::is_same_v<D, std::optional<ScalarType>>) {
    return v.is_none() ? std::optional<ScalarType>() : std::optional<ScalarType>(v.to_dtype());
  } else if constexpr (std::is_same_v<D, std::string_view>) {
    return std::string_view(v.to_string());
  } else if constexpr (std::is_same_v<D, std::optional<std::string_view>>) {
    return v.is_none() ? std::optional<std::string_view>() : std::optional<std::string_view>(v.to_string());
  } else if constexpr (std::is_same_v<D, std::optional<Device>>) {
    return v.is_none() ? std::optional<Device>() : std::optional<Device>(v.to_device());
  } else {
    static_assert(sizeof(D) == 0, "unsupported kernel argument type");
  }
}

inline void push_result(Stack& s, Tensor t) { s.emplace_back(std::move(t)); }
inline void push_result(Stack& s, std::vector<Tensor> t) { s.emplace_back(std::move(t)); }
inline void push_result(Stack& s, Tensor2 t) {
  s.emplace_back(std::move(std::get<0>(t)));
  s.emplace_back(std::move(std::get<1>(t)));
}
inline void push_result(Stack& s, Tensor3 t) {
  s.emplace_back(std::move(std::get<0>(t)));
  s.emplace_back(std::move(std::get<1>(t)));
  s.emplace_back(std::move(std::get<2>(t)));
}

template <typename Ret>
Ret pop_result(Stack& s) {
  if constexpr (std::is_same_v<Ret, Tensor>) {
    return std::move(s.back().to_tensor());
  } else if constexpr (std::is_same_v<Ret, std::vector<Tensor>>) {
    return s.back().to_tensor_list();
  } else if constexpr (std::is_same_v<Ret, Tensor2>) {
    size_t n = s.size();
    return {s[n - 2].to_tensor(), s[n - 1].to_tensor()};
  } else {
    size_t n = s.size();
    return {s[n - 3].to_tensor(), s[n - 2].to_tensor(), s[n - 1].to_tensor()};
  }
}

template <typename T>
void collect_keys(DispatchKeySet& ks, const T& v) {
  using D = arg_t<T>;
  if constexpr (std::is_same_v<D, Tensor>) {
    if (v.defined()) ks = ks | v.key_set();
  } else if constexpr (std::is_same_v<D, std::optional<Tensor>>) {
    if (v && v->defined()) ks = ks | v->key_set();
  } else if constexpr (std::is_same_v<D, TensorList> || std::is_same_v<D, std::vector<Tensor>>) {
    for (const auto& t : v)
      if (t.defined()) ks = ks | t.key_set();
  } else if constexpr (std::is_same_v<D, std::optional<Device>>) {
    if (v) ks = ks.add(backend_key_for(v->type));
  }
}

DispatchKeySet collect_keys_boxed(const Stack& s);

template <typename F>
struct FnTraits;
template <typename R, typename... A>
struct FnTraits<R (*)(A...)> {
  using ret = R;
  using args = std::tuple<A...>;
  static constexpr size_t arity = sizeof...(A);
};

template <typename Ret, typename... Args, size_t... I>
Ret call_from_stack(Ret (*fn)(DispatchKeySet, Args...), DispatchKeySet ks, Stack& s, std::index_sequence<I...>) {
  size_t base = s.size() - sizeof...(Args);
  return fn(ks, from_ivalue<Args>(s[base + I])...);
}

template <auto F, typename Ret, typename... Args>
Ret drop_keys(DispatchKeySet, Args... args) {
  return F(std::forward<Args>(args)...);
}

template <typename Ret, typename... Args>
KernelFunction make_kernel_from(Ret (*fn)(DispatchKeySet, Args...), std::string name) {
  KernelFunction k;
  k.unboxed = reinterpret_cast<void*>(fn);
  k.boxed = [fn](const OperatorEntry&, DispatchKeySet ks, Stack& s) {
    Ret r = call_from_stack(fn, ks, s, std::index_sequence_for<Args...>{});
    s.resize(s.size() - sizeof...(Args));
    push_result(s, std::move(r));
  };
  k.arg_types = {ArgTypeOf<arg_t<Args>>::value...};
  k.ret_types = {ArgTypeOf<Ret>::value};
  k.typed = true;
  k.debug_name = std::move(name);
  return k;
}

template <auto F, typename Ret, typename... Args>
KernelFunction make_kernel_nokeys(Ret (*)(Args...), std::string name) {
  return make_kernel_from<Ret, Args...>(&drop_keys<F, Ret, Args...>, std::move(name));
}

}  // namespace detail

// Kernel from a function Ret(Args...) (backend kernels: no key set needed).
template <auto F>
KernelFunction make_kernel(std::string name = "") {
  return detail::make_kernel_nokeys<F>(F, std::move(name));
}
// Kernel from a function Ret(DispatchKeySet, Args...) (layers that redispatch).
template <auto F>
KernelFunction make_kernel_with_keys(std::string name = "") {
  return detail::make_kernel_from(F, std::move(name));
}

// Calls op with keys ks (already masked by TLS and fallthrough).
template <typename Ret, typename... Args>
Ret call_with_keys(const OperatorEntry& op, DispatchKeySet ks, Args... args) {
  const KernelFunction& k = op.lookup(ks);
  if (__builtin_expect(k.unboxed != nullptr, 1)) {
    return reinterpret_cast<Ret (*)(DispatchKeySet, Args...)>(k.unboxed)(ks, std::forward<Args>(args)...);
  }
  Stack s;
  s.reserve(sizeof...(Args) + 1);
  (s.emplace_back(IValue(args)), ...);
  k.boxed(op, ks, s);
  return detail::pop_result<Ret>(s);
}

// Keys included on every thread on top of each thread's own included set
// (the profiler, while a session records all threads). Raw DispatchKeySet bits.
extern std::atomic<uint64_t> g_global_included_keys;

inline DispatchKeySet apply_tls(DispatchKeySet ks, const OperatorEntry& op) {
  const LocalDispatchKeySet& tls = tls_local_dispatch_key_set();
  const DispatchKeySet global(g_global_included_keys.load(std::memory_order_relaxed), 0);
  ks = (ks | tls.included | global) - tls.excluded - op.fallthrough_keys();
  if (ks.highest_backend() == DispatchKey::NumKeys) ks = ks.add(DispatchKey::CPU);
  return ks;
}

// The entry point every C++ op function uses.
template <typename Ret, typename... Args>
Ret call_op(const OperatorEntry& op, Args... args) {
  DispatchKeySet ks;
  (detail::collect_keys(ks, args), ...);
  return call_with_keys<Ret, Args...>(op, apply_tls(ks, op), std::forward<Args>(args)...);
}

// From a layer at key `self`: continue with the keys below it.
template <typename Ret, typename... Args>
Ret redispatch(const OperatorEntry& op, DispatchKeySet ks, DispatchKey self, Args... args) {
  return call_with_keys<Ret, Args...>(op, ks.below(self) - op.fallthrough_keys(), std::forward<Args>(args)...);
}

// Boxed call: arguments on the stack (all of them, defaults filled), results
// replace them.
void call_boxed(const OperatorEntry& op, Stack& stack);
void redispatch_boxed(const OperatorEntry& op, DispatchKeySet ks, DispatchKey self, Stack& stack);

struct KernelRegistrar {
  KernelRegistrar(const char* op_name, DispatchKey key, KernelFunction k);
};
struct FallbackRegistrar {
  FallbackRegistrar(DispatchKey key, KernelFunction k);
};

}  // namespace strata


// Registers fn as the kernel of an op declared by name (used by libraries
// outside Strata; built-in ops use STRATA_IMPL from ops/op_list.h, which also
// checks the signature at compile time).
#define STRATA_LIBRARY_IMPL(op_name, key, fn)                                        \
  static ::strata::KernelRegistrar STRATA_UNIQUE(strata_reg_)(op_name, ::strata::DispatchKey::key, \
                                                              ::strata::make_kernel<&fn>(#fn))
