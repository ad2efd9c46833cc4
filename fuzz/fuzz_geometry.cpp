// libFuzzer harness: tensor geometry. A chain of view ops (view, reshape, as_strided, expand,
// broadcast_to, permute, transpose, select, slice, narrow, unfold, diagonal, squeeze, unsqueeze,
// flatten, unflatten) with random sizes, strides and dims, hostile ones included (negative, huge,
// overflowing). Each op either raises strata::Error or returns a tensor whose every element lies in
// its storage and whose values are the right elements of the base (checked by reading them all).
#include "core/shape.h"
#include "fuzz_common.h"

using namespace strata;
using namespace strata::fuzz;

namespace {

// A size of either sign (draw_size may return INT64_MIN, which has no negation).
int64_t signed_size(FuzzedDataProvider& fdp) {
  const int64_t v = draw_size(fdp);
  return fdp.ConsumeBool() || v == INT64_MIN ? v : -v;
}

Tensor step(FuzzedDataProvider& fdp, const Tensor& x) {
  const int64_t nd = x.dim();
  auto dim = [&] { return fdp.ConsumeIntegralInRange<int64_t>(-nd - 1, nd); };
  switch (fdp.ConsumeIntegralInRange<int>(0, 15)) {
    case 0: return view(x, draw_sizes(fdp));
    case 1: return reshape(x, draw_sizes(fdp));
    case 2: {
      auto sizes = draw_sizes(fdp);
      std::vector<int64_t> strides(sizes.size());
      for (auto& s : strides) s = draw_size(fdp, 8);
      if (fdp.ConsumeBool()) strides.resize(fdp.ConsumeIntegralInRange<size_t>(0, strides.size() + 1));
      OptInt off = std::nullopt;
      if (fdp.ConsumeBool()) off = draw_size(fdp, 16);
      return as_strided(x, sizes, strides, off);
    }
    case 3: return expand(x, draw_sizes(fdp, 5));
    case 4: return broadcast_to(x, draw_sizes(fdp, 5));
    case 5: {
      std::vector<int64_t> p(fdp.ConsumeIntegralInRange<size_t>(0, nd + 1));
      for (auto& d : p) d = dim();
      return permute(x, p);
    }
    case 6: return transpose(x, dim(), dim());
    case 7: return select(x, dim(), draw_size(fdp));
    case 8: {
      OptInt a = std::nullopt, b = std::nullopt;
      if (fdp.ConsumeBool()) a = signed_size(fdp);
      if (fdp.ConsumeBool()) b = signed_size(fdp);
      return slice(x, dim(), a, b, draw_size(fdp, 3));
    }
    case 9: return narrow(x, dim(), draw_size(fdp), draw_size(fdp));
    case 10: return unfold(x, dim(), draw_size(fdp), draw_size(fdp, 3));
    case 11: return diagonal(x, signed_size(fdp), dim(), dim());
    case 12: return fdp.ConsumeBool() ? squeeze(x) : squeeze(x, dim());
    case 13: return unsqueeze(x, dim());
    case 14: return flatten(x, dim(), dim());
    default: return unflatten(x, dim(), draw_sizes(fdp, 3));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider fdp(data, size);
  auto base_sizes = draw_sizes(fdp, 4, 5);
  for (auto& s : base_sizes) s = ((s % 6) + 6) % 6;
  const Device dev = fdp.ConsumeBool() ? Device(DeviceType::Meta) : Device();
  Tensor x = iota_f32(base_sizes, dev);
  const int steps = fdp.ConsumeIntegralInRange<int>(1, 6);
  for (int i = 0; i < steps && fdp.remaining_bytes() > 0; ++i) {
    Tensor y;
    try {
      y = step(fdp, x);
    } catch (const Error&) {
      continue;
    }
    if (std::getenv("STRATA_FUZZ_VERBOSE"))  // replaying a finding: which views led there
      std::fprintf(stderr, "step %d: %s strides %s offset %ld -> %s strides %s offset %ld\n", i, x.shape_str().c_str(),
                   shape_str(x.strides()).c_str(), static_cast<long>(x.storage_offset()), y.shape_str().c_str(),
                   shape_str(y.strides()).c_str(), static_cast<long>(y.storage_offset()));
    check_in_bounds(y);
    FUZZ_CHECK(y.device() == x.device());
    if (!dev.is_meta() && y.numel() <= kMaxElements) {
      // contiguous() reads every element through the view; the values must be the addressed ones. It may
      // refuse an empty view whose sizes have no int64 contiguous strides ([0, 27, 2**60]), as torch does.
      Tensor c;
      try {
        c = contiguous(y);
      } catch (const Error&) {
        FUZZ_CHECK(y.numel() == 0);
        continue;
      }
      const float* p = c.data_ptr<float>();
      for (int64_t k = 0; k < c.numel(); ++k) FUZZ_CHECK(p[k] == element_at<float>(y, k));
    }
    if (y.numel() <= kMaxElements) x = y;
  }
  return 0;
}
