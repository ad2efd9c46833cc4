// exp for the softmax-type kernels (softmax_kernels.cpp, attention_kernels.cpp),
// written so that loops over it vectorize: libm's expf is not vectorized
// without -ffast-math. Include inside namespace strata::cpu::STRATA_CPU_NS.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

#include "backends/cpu/loops.h"

namespace strata {
namespace cpu {
inline namespace STRATA_CPU_NS {

// exp(x) for float, about 1 ulp: x = n*ln2 + r with |r| <= ln2/2, exp(r) by a
// degree-7 Taylor polynomial, 2^n applied in two halves so that results in the
// subnormal range come out right. NaN propagates through r.
STRATA_ALWAYS_INLINE float vexp(float x) {
  x = x < -104.0f ? -104.0f : x;
  x = x > 88.7228f ? 88.7228f : x;
  float n = std::nearbyint(x * 1.44269504088896341f);
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.0f / 5040;
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // NaN passes the clamps above; converting it to int is undefined (UBSan, fuzz_meta_ops: softmax of NaN).
  // p is NaN already, so any scale gives NaN: use 0.
  int32_t ni = static_cast<int32_t>(n == n ? n : 0.0f);
  int32_t n1 = ni >> 1, n2 = ni - n1;
  float s1 = std::bit_cast<float>((n1 + 127) << 23);
  float s2 = std::bit_cast<float>((n2 + 127) << 23);
  return p * s1 * s2;
}
// double: glibc's libmvec has a vector exp (backends/cpu/vector_math.h).
STRATA_ALWAYS_INLINE double vexp(double x) { return std::exp(x); }

}  // namespace STRATA_CPU_NS
}  // namespace cpu
}  // namespace strata
