#include <cstdlib>
#include <cstring>

#include "ops/stub.h"

namespace strata {

namespace {
CpuCapability detect() {
  CpuCapability best = CpuCapability::Default;
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) best = CpuCapability::AVX2;
  if (best == CpuCapability::AVX2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
    best = CpuCapability::AVX512;
#endif
  if (const char* env = std::getenv("STRATA_CPU_CAPABILITY")) {
    CpuCapability want = best;
    if (!std::strcmp(env, "default")) want = CpuCapability::Default;
    if (!std::strcmp(env, "avx2")) want = CpuCapability::AVX2;
    if (!std::strcmp(env, "avx512")) want = CpuCapability::AVX512;
    // Never above what the CPU can run.
    if (static_cast<int>(want) < static_cast<int>(best)) best = want;
  }
  return best;
}
}  // namespace

CpuCapability cpu_capability() {
  static const CpuCapability c = detect();
  return c;
}

const char* cpu_capability_name(CpuCapability c) {
  switch (c) {
    case CpuCapability::AVX2: return "avx2";
    case CpuCapability::AVX512: return "avx512";
    default: return "default";
  }
}

}  // namespace strata
