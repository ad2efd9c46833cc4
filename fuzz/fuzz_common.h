// Shared helpers of the libFuzzer harnesses (docs/HARDENING.md). A harness feeds random input to one part
// of the core; strata's exceptions (bad input, reported to the caller) are fine, anything else (a
// sanitizer report, a crash, an abort, a failed FUZZ_CHECK) is a finding.
#pragma once

#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/error.h"
#include "ops/ops.h"

#define FUZZ_CHECK(cond, ...)                                                    \
  do {                                                                           \
    if (!(cond)) {                                                               \
      std::fprintf(stderr, "FUZZ_CHECK failed at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                              \
    }                                                                            \
  } while (0)

namespace strata::fuzz {

// Tensors stay small: a harness must run thousands of inputs a second.
constexpr int64_t kMaxElements = 1 << 12;

// A size drawn mostly small, sometimes hostile (negative, huge, near overflow).
inline int64_t draw_size(FuzzedDataProvider& fdp, int64_t small_max = 6) {
  switch (fdp.ConsumeIntegralInRange<int>(0, 15)) {
    case 0: return -fdp.ConsumeIntegralInRange<int64_t>(1, 3);
    case 1: return int64_t(1) << fdp.ConsumeIntegralInRange<int>(20, 62);
    case 2: return fdp.ConsumeIntegral<int64_t>();
    default: return fdp.ConsumeIntegralInRange<int64_t>(0, small_max);
  }
}

inline std::vector<int64_t> draw_sizes(FuzzedDataProvider& fdp, int max_dims = 4, int64_t small_max = 6) {
  std::vector<int64_t> v(fdp.ConsumeIntegralInRange<int>(0, max_dims));
  for (auto& s : v) s = draw_size(fdp, small_max);
  return v;
}

// Product of the sizes, or -1 when one is negative or the product passes kMaxElements.
inline int64_t small_numel(IntArrayRef sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) {
    if (s < 0 || s > kMaxElements) return -1;
    n *= s;
    if (n > kMaxElements) return -1;
  }
  return n;
}

// A float tensor holding 0, 1, 2, ... (values identify elements).
inline Tensor iota_f32(IntArrayRef sizes, Device dev = Device()) {
  Tensor t = empty_tensor(sizes, ScalarType::Float32, dev);
  if (!dev.is_meta()) {
    float* p = t.data_ptr<float>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(i);
  }
  return t;
}

// Every element a view can address lies inside its storage: the contract the view ops must keep.
inline void check_in_bounds(const Tensor& t) {
  if (t.numel() == 0) return;
  int64_t lo = t.storage_offset(), hi = t.storage_offset();
  for (int64_t d = 0; d < t.dim(); ++d) {
    FUZZ_CHECK(t.size(d) >= 0);
    int64_t span = 0;
    FUZZ_CHECK(!__builtin_mul_overflow(t.size(d) - 1, t.stride(d), &span));
    FUZZ_CHECK(!__builtin_add_overflow(span < 0 ? lo : hi, span, span < 0 ? &lo : &hi));
  }
  FUZZ_CHECK(lo >= 0);
  const int64_t capacity = static_cast<int64_t>(t.impl()->storage()->nbytes() / t.element_size());
  FUZZ_CHECK(hi < capacity);
}

// The element at a flat (row-major) index, read through sizes and strides.
template <typename T>
T element_at(const Tensor& t, int64_t flat) {
  int64_t off = t.storage_offset();
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    const int64_t s = t.size(d);
    off += (flat % s) * t.stride(d);
    flat /= s;
  }
  return static_cast<const T*>(t.impl()->storage()->data())[off];
}

}  // namespace strata::fuzz
