// Note [One declaration per op]
// Every built-in op is declared once, in one of the decl/*.def files, as
//   STRATA_OP(id, "schema", C++ signature, flags)
// From that line come: the OpId enum, the schema registered with the
// dispatcher (which the Python binding and the test database read), and the
// C++ signature that every kernel registered for the op is checked against at
// compile time.
#pragma once

#include "dispatch/dispatcher.h"

namespace strata {

// Short names for the argument types used in decl/*.def signatures.
using TensorRef = const Tensor&;
using OptTensorRef = const std::optional<Tensor>&;
using ScalarRef = const Scalar&;
using OptScalarRef = const std::optional<Scalar>&;
using OptInt = std::optional<int64_t>;
using OptDouble = std::optional<double>;
using OptBool = std::optional<bool>;
using OptDType = std::optional<ScalarType>;
using OptDevice = std::optional<Device>;
using OptStr = std::optional<std::string_view>;
using TensorVec = std::vector<Tensor>;

enum class OpId : int {
#define STRATA_OP(id, schema, sig, flags) id,
#include "ops/decl/all.def"
#undef STRATA_OP
  NumBuiltinOps
};

template <OpId>
struct OpSig;
#define STRATA_OP(id, schema, sig, flags) \
  template <>                             \
  struct OpSig<OpId::id> {                \
    using type = sig;                     \
  };
#include "ops/decl/all.def"
#undef STRATA_OP

template <OpId id>
using OpFnPtr = typename OpSig<id>::type*;

namespace detail {
template <typename Sig>
struct WithKeys;
template <typename R, typename... A>
struct WithKeys<R(A...)> {
  using type = R (*)(DispatchKeySet, A...);
};
}  // namespace detail
// Signature of a layer kernel (autograd, autocast, tracer) for op `id`: the
// declared one with the DispatchKeySet in front.
template <OpId id>
using OpKeyedFnPtr = typename detail::WithKeys<typename OpSig<id>::type>::type;

inline const OperatorEntry& op_entry(OpId id) { return Dispatcher::get().op(static_cast<int>(id)); }

namespace detail {
template <OpId id, typename Sig>
struct OpCall;
template <OpId id, typename Ret, typename... Args>
struct OpCall<id, Ret(Args...)> {
  static Ret run(Args... args) { return call_op<Ret, Args...>(op_entry(id), std::forward<Args>(args)...); }
  static Ret redispatch(DispatchKeySet ks, DispatchKey self, Args... args) {
    return strata::redispatch<Ret, Args...>(op_entry(id), ks, self, std::forward<Args>(args)...);
  }
};
}  // namespace detail

// strata::call<OpId::add>(a, b, alpha): dispatch a built-in op.
template <OpId id, typename... A>
decltype(auto) call(A&&... a) {
  return detail::OpCall<id, typename OpSig<id>::type>::run(std::forward<A>(a)...);
}
template <OpId id, typename... A>
decltype(auto) redispatch_op(DispatchKeySet ks, DispatchKey self, A&&... a) {
  return detail::OpCall<id, typename OpSig<id>::type>::redispatch(ks, self, std::forward<A>(a)...);
}

}  // namespace strata

// Registers fn as the kernel of built-in op `op` for a dispatch key; fn's
// signature must be exactly the one declared for the op.
#define STRATA_IMPL(op, key, fn)                                                               \
  static_assert(std::is_same_v<decltype(&fn), ::strata::OpFnPtr<::strata::OpId::op>>,        \
                "kernel " #fn " does not match the declared signature of op " #op);          \
  static ::strata::KernelRegistrar STRATA_UNIQUE(strata_reg_)(                                \
      ::strata::op_entry_name(::strata::OpId::op), ::strata::DispatchKey::key, ::strata::make_kernel<&fn>(#fn))
// Registers fn, a layer kernel taking the DispatchKeySet first, for a
// functionality key; it continues with redispatch_op<OpId::op>(ks, key, ...).
#define STRATA_IMPL_WITH_KEYS(op, key, fn)                                                        \
  static_assert(std::is_same_v<decltype(&fn), ::strata::OpKeyedFnPtr<::strata::OpId::op>>,       \
                "layer kernel " #fn " does not match the declared signature of op " #op);       \
  static ::strata::KernelRegistrar STRATA_UNIQUE(strata_reg_)(                                   \
      ::strata::op_entry_name(::strata::OpId::op), ::strata::DispatchKey::key,                   \
      ::strata::make_kernel_with_keys<&fn>(#fn))
// One device-generic implementation (shape logic plus a per-device stub) for
// CPU and Meta at once.
#define STRATA_IMPL_CPU_META(op, fn) \
  STRATA_IMPL(op, CPU, fn);          \
  STRATA_IMPL(op, Meta, fn)
// An op written in terms of other ops: works on every backend.
#define STRATA_IMPL_COMPOSITE(op, fn) STRATA_IMPL(op, CompositeImplicit, fn)

namespace strata {
// Full name ("max.dim") of a built-in op, usable during static init.
const char* op_entry_name(OpId id);
}  // namespace strata
