// Note [Dispatch keys]
// A DispatchKeySet is 64 bits. The low bits are backend keys, the high bits are
// functionality keys; a higher bit means a higher priority, so the kernel that
// runs is the one for the highest set bit after masking out the keys that are
// excluded (thread-local) or fall through (per operator). A layer that has done
// its work redispatches with every key at or above its own removed.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/device.h"

namespace strata {

enum class DispatchKey : uint8_t {
  // Backends (lowest priority).
  CPU = 0,
  CUDA = 1,
  Meta = 2,
  PrivateUse1 = 3,
  MPS = 4,  // no kernels: tensors on MPS cannot be created in this build
  // Inner half of the profiler layer, below every functionality key and above
  // the backends: strata.profiler.explain() times the kernel itself with it.
  // Only ever in the thread-local included set, never in a tensor's key set.
  ProfilerKernel = 14,
  // Alias used only at registration: "this kernel works for every backend",
  // used for ops written in terms of other ops. Never in a tensor's key set.
  CompositeImplicit = 15,
  // Functionality keys, lowest to highest priority.
  ADInplaceOrView = 16,
  Autograd = 20,
  Autocast = 24,
  Vmap = 28,           // batched tensors of strata.vmap (src/vmap/vmap.h)
  Functionalize = 30,  // reserved
  Tracer = 36,         // reserved for the compiler
  Profiler = 40,       // boxed layer used by strata.profiler
  // Tensor subclasses with their own TensorImpl: their fallbacks run before
  // every other layer (src/sparse/sparse.h, quantized.h, src/nested/).
  Sparse = 42,
  Quantized = 43,
  Nested = 44,
  Python = 46,  // reserved: __torch_dispatch__-style hooks
  NumKeys = 64,
};
constexpr int kNumDispatchKeys = 64;
constexpr int kFirstFunctionalityKey = 16;

std::string_view dispatch_key_name(DispatchKey k);

constexpr DispatchKey backend_key_for(DeviceType t) { return static_cast<DispatchKey>(static_cast<int>(t)); }
constexpr bool is_backend_key(DispatchKey k) { return static_cast<int>(k) < 8; }

class DispatchKeySet {
 public:
  constexpr DispatchKeySet() = default;
  constexpr explicit DispatchKeySet(uint64_t raw, int) : bits_(raw) {}
  constexpr DispatchKeySet(DispatchKey k) : bits_(uint64_t(1) << static_cast<int>(k)) {}

  constexpr bool has(DispatchKey k) const { return bits_ & (uint64_t(1) << static_cast<int>(k)); }
  constexpr bool empty() const { return bits_ == 0; }
  constexpr uint64_t raw() const { return bits_; }
  constexpr DispatchKeySet add(DispatchKey k) const { return DispatchKeySet(bits_ | DispatchKeySet(k).bits_, 0); }
  constexpr DispatchKeySet remove(DispatchKey k) const {
    return DispatchKeySet(bits_ & ~DispatchKeySet(k).bits_, 0);
  }
  constexpr DispatchKeySet operator|(DispatchKeySet o) const { return DispatchKeySet(bits_ | o.bits_, 0); }
  constexpr DispatchKeySet operator&(DispatchKeySet o) const { return DispatchKeySet(bits_ & o.bits_, 0); }
  constexpr DispatchKeySet operator-(DispatchKeySet o) const { return DispatchKeySet(bits_ & ~o.bits_, 0); }
  constexpr bool operator==(const DispatchKeySet& o) const = default;

  // Highest-priority key; NumKeys when empty.
  constexpr DispatchKey highest() const {
    return bits_ ? static_cast<DispatchKey>(63 - __builtin_clzll(bits_)) : DispatchKey::NumKeys;
  }
  constexpr DispatchKey highest_backend() const { return DispatchKeySet(bits_ & 0xff, 0).highest(); }
  // Keys strictly below k: what a layer at k redispatches to.
  constexpr DispatchKeySet below(DispatchKey k) const {
    return DispatchKeySet(bits_ & ((uint64_t(1) << static_cast<int>(k)) - 1), 0);
  }

 private:
  uint64_t bits_ = 0;
};

// Thread-local include/exclude sets (no_grad excludes Autograd, autocast
// includes Autocast, tracing includes Tracer).
struct LocalDispatchKeySet {
  DispatchKeySet included;
  DispatchKeySet excluded;
};
LocalDispatchKeySet& tls_local_dispatch_key_set();

// RAII guards.
class ExcludeDispatchKeyGuard {
 public:
  explicit ExcludeDispatchKeyGuard(DispatchKeySet ks);
  ~ExcludeDispatchKeyGuard();

 private:
  DispatchKeySet prev_;
};
class IncludeDispatchKeyGuard {
 public:
  explicit IncludeDispatchKeyGuard(DispatchKeySet ks);
  ~IncludeDispatchKeyGuard();

 private:
  DispatchKeySet prev_;
};

}  // namespace strata
