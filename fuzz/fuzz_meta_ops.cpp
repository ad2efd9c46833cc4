// libFuzzer harness: random op sequences on CPU and on Meta. The same ops with the same arguments run
// on a CPU tensor and on a Meta tensor of the same shape; both must agree: both raise, or both return
// the same sizes and dtype (Meta computes shapes without data, so a disagreement is a wrong shape rule
// in one of the two). The CPU results must keep their elements inside their storage.
#include "core/shape.h"
#include "fuzz_common.h"

using namespace strata;
using namespace strata::fuzz;

namespace {

struct Args {
  int op;
  int64_t i0, i1;
  std::vector<int64_t> sizes;
  bool flag;
};

Tensor apply(const Args& a, const Tensor& x, const Tensor& y) {
  const DimVector dims{a.i0};
  switch (a.op) {
    case 0: return add(x, y);
    case 1: return mul(x, y);
    case 2: return matmul(x, y);
    case 3: return sum(x, OptIntArrayRef(dims), a.flag);
    case 4: return mean(x, OptIntArrayRef(dims), a.flag);
    case 5: return amax(x, dims, a.flag);
    case 6: return argmax(x, a.flag ? OptInt(a.i0) : std::nullopt, a.flag);
    case 7: return softmax(x, a.i0);
    case 8: return transpose(x, a.i0, a.i1);
    case 9: return reshape(x, a.sizes);
    case 10: return expand(x, a.sizes);
    case 11: return unsqueeze(x, a.i0);
    case 12: {
      std::vector<Tensor> ts{x, y};
      return cat(ts, a.i0);
    }
    case 13: return flip(x, dims);
    case 14: return repeat(x, a.sizes);
    case 15: return tril(x, a.i0);
    case 16: return where(gt(x, y), x, y);
    case 17: return roll(x, DimVector{a.i1}, dims);
    case 18: return maximum(x, y);
    default: return relu(neg(x));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider fdp(data, size);
  auto shape_x = draw_sizes(fdp, 4, 4), shape_y = draw_sizes(fdp, 4, 4);
  if (small_numel(shape_x) < 0 || small_numel(shape_y) < 0) return 0;
  const Device meta(DeviceType::Meta);
  Tensor cx = iota_f32(shape_x), cy = iota_f32(shape_y);
  Tensor mx = iota_f32(shape_x, meta), my = iota_f32(shape_y, meta);
  const int steps = fdp.ConsumeIntegralInRange<int>(1, 5);
  for (int s = 0; s < steps && fdp.remaining_bytes() > 0; ++s) {
    Args a{fdp.ConsumeIntegralInRange<int>(0, 19), fdp.ConsumeIntegralInRange<int64_t>(-5, 4),
           fdp.ConsumeIntegralInRange<int64_t>(-5, 4), draw_sizes(fdp, 4, 4), fdp.ConsumeBool()};
    if (a.op == 14) {  // repeat: keep the CPU's copy small (the harness checks shapes, not bandwidth)
      int64_t n = std::max<int64_t>(cx.numel(), 1);
      bool big = false;
      for (int64_t r : a.sizes) big |= r > 64 || (r > 0 && __builtin_mul_overflow(n, r, &n)) || n > (1 << 16);
      if (big) continue;
    }
    if (std::getenv("STRATA_FUZZ_VERBOSE"))  // replaying a finding: which op on which shapes
      std::fprintf(stderr, "step %d: op %d (i0=%ld i1=%ld sizes=%s flag=%d) on x %s, y %s\n", s, a.op,
                   static_cast<long>(a.i0), static_cast<long>(a.i1), shape_str(a.sizes).c_str(), a.flag,
                   cx.shape_str().c_str(), cy.shape_str().c_str());
    Tensor rc, rm;
    std::string cpu_error, meta_error;
    try {
      rc = apply(a, cx, cy);
    } catch (const OutOfMemoryError&) {
      continue;  // a huge result of an empty input: Meta allocates nothing, the CPU cannot (not a shape rule)
    } catch (const Error& e) {
      cpu_error = e.what();
    }
    try {
      rm = apply(a, mx, my);
    } catch (const Error& e) {
      meta_error = e.what();
    }
    if (cpu_error.empty() != meta_error.empty()) {
      std::fprintf(stderr, "op %d (i0=%ld i1=%ld sizes=%s flag=%d) on x %s (strides %s), y %s: CPU %s, Meta %s\n", a.op,
                   static_cast<long>(a.i0), static_cast<long>(a.i1), shape_str(a.sizes).c_str(), a.flag,
                   cx.shape_str().c_str(), shape_str(cx.strides()).c_str(), cy.shape_str().c_str(),
                   cpu_error.empty() ? "ok" : cpu_error.c_str(), meta_error.empty() ? "ok" : meta_error.c_str());
      FUZZ_CHECK(cpu_error.empty() == meta_error.empty());
    }
    if (!cpu_error.empty()) continue;
    FUZZ_CHECK(rm.device().is_meta());
    FUZZ_CHECK(DimVector(rc.sizes().begin(), rc.sizes().end()) == DimVector(rm.sizes().begin(), rm.sizes().end()));
    FUZZ_CHECK(rc.dtype() == rm.dtype());
    check_in_bounds(rc);
    // Kept as the next x only while small even without its zero sizes: a reduction over the empty dim of
    // [3, 0, 2**30] rightly allocates [1, 2**30] (gigabytes).
    std::vector<int64_t> nonzero(rc.sizes().begin(), rc.sizes().end());
    for (auto& v : nonzero) v = std::max<int64_t>(v, 1);
    if (small_numel(nonzero) < 0 || rc.dtype() != ScalarType::Float32) continue;
    // The result feeds the next step as x (y stays): chains reach shapes no single draw gives.
    cx = rc;
    mx = rm;
  }
  return 0;
}
