// Note [Kernel stubs]
// An op's implementation (shape and dtype logic, device-generic) calls its
// inner loop through a stub: one function pointer per device type, and for the
// CPU one per ISA level. CPU kernel files are compiled once per ISA level
// (see backends/cpu/CMakeLists section in the top CMakeLists) and each build
// registers itself; at run time the best level the CPU supports is used.
#pragma once

#include <atomic>

#include "core/device.h"
#include "core/error.h"

namespace strata {

enum class CpuCapability : int { Default = 0, AVX2 = 1, AVX512 = 2 };
constexpr int kNumCpuCapabilities = 3;
// Detected once (overridable with STRATA_CPU_CAPABILITY=default|avx2|avx512).
CpuCapability cpu_capability();
const char* cpu_capability_name(CpuCapability c);

template <typename Fn>
struct DispatchStub {
  const char* name;
  Fn cpu[kNumCpuCapabilities] = {};
  Fn other[4] = {};  // CUDA, Meta (unused), PrivateUse1

  // constexpr so stubs are constant-initialised, before any registrar runs.
  constexpr explicit DispatchStub(const char* n) : name(n) {}

  Fn get(DeviceType t) const {
    if (t == DeviceType::CPU) {
      for (int c = static_cast<int>(cpu_capability()); c >= 0; --c)
        if (cpu[c]) return cpu[c];
    } else if (Fn f = other[static_cast<int>(t)]) {
      return f;
    }
    throw NotImplementedError(str(name, ": no kernel for device type ", device_type_name(t)));
  }
  template <typename... A>
  void operator()(DeviceType t, A&&... a) const {
    get(t)(std::forward<A>(a)...);
  }
};

template <typename Fn>
struct StubRegistrar {
  StubRegistrar(DispatchStub<Fn>& stub, int cap, Fn fn) { stub.cpu[cap] = fn; }
  StubRegistrar(DispatchStub<Fn>& stub, DeviceType t, Fn fn) { stub.other[static_cast<int>(t)] = fn; }
};

}  // namespace strata

#define STRATA_DECLARE_STUB(name, fn_type) extern ::strata::DispatchStub<fn_type> name
#define STRATA_DEFINE_STUB(name, fn_type) constinit ::strata::DispatchStub<fn_type> name(#name)
