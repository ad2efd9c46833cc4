// libFuzzer harness: TensorIterator over random layouts. Inputs are as_strided views of random
// geometry (zero strides, transposed and gapped layouts, storage offsets) of float / double / int64
// buffers; add (with broadcasting and type promotion), where and copy_ into a random-layout
// destination (out= included) are compared element by element with a naive loop over sizes and
// strides. Overlapping destinations must be refused with an error.
#include <algorithm>
#include <cmath>

#include "core/shape.h"
#include "fuzz_common.h"

using namespace strata;
using namespace strata::fuzz;

namespace {

ScalarType draw_dtype(FuzzedDataProvider& fdp) {
  switch (fdp.ConsumeIntegralInRange<int>(0, 2)) {
    case 0: return ScalarType::Float32;
    case 1: return ScalarType::Float64;
    default: return ScalarType::Int64;
  }
}

double read_as_double(const Tensor& t, int64_t flat) {
  switch (t.dtype()) {
    case ScalarType::Float32: return element_at<float>(t, flat);
    case ScalarType::Float64: return element_at<double>(t, flat);
    case ScalarType::Int64: return static_cast<double>(element_at<int64_t>(t, flat));
    case ScalarType::Bool: return element_at<bool>(t, flat) ? 1.0 : 0.0;
    default: FUZZ_CHECK(false); return 0;
  }
}

// A view with random geometry over a fresh buffer of small integers (exact in every dtype).
Tensor random_layout(FuzzedDataProvider& fdp, ScalarType dt) {
  const int nd = fdp.ConsumeIntegralInRange<int>(0, 4);
  std::vector<int64_t> sizes(nd), strides(nd);
  int64_t need = 1;
  for (int d = 0; d < nd; ++d) {
    sizes[d] = fdp.ConsumeIntegralInRange<int64_t>(0, 5);
    strides[d] = fdp.ConsumeIntegralInRange<int64_t>(0, 24);
  }
  const int64_t off = fdp.ConsumeIntegralInRange<int64_t>(0, 7);
  need = off + 1;
  for (int d = 0; d < nd; ++d) need += sizes[d] > 0 ? (sizes[d] - 1) * strides[d] : 0;
  Tensor buf = empty_tensor(DimVector{need}, dt, Device());
  for (int64_t i = 0; i < need; ++i) {
    const int64_t v = (i * 7 + 3) % 19 - 9;
    switch (dt) {
      case ScalarType::Float32: buf.data_ptr<float>()[i] = static_cast<float>(v); break;
      case ScalarType::Float64: buf.data_ptr<double>()[i] = static_cast<double>(v); break;
      case ScalarType::Int64: buf.data_ptr<int64_t>()[i] = v; break;
      case ScalarType::Bool: buf.data_ptr<bool>()[i] = v > 0; break;
      default: break;
    }
  }
  return as_strided(buf, sizes, strides, off);
}

// Flat index into a broadcast operand for the flat index of the result of shape `out`.
int64_t broadcast_flat(IntArrayRef out, IntArrayRef in, int64_t flat) {
  int64_t r = 0, mul = 1;
  for (int64_t d = static_cast<int64_t>(out.size()) - 1, e = static_cast<int64_t>(in.size()) - 1; d >= 0; --d, --e) {
    const int64_t i = flat % out[d];
    flat /= out[d];
    if (e >= 0) {
      if (in[e] != 1) r += i * mul;
      mul *= in[e];
    }
  }
  return r;
}

// True when no two elements of t share memory (sufficient test: sorted by stride, each dim steps past
// everything the smaller-stride dims reach). Writes into other layouts have no defined result.
bool distinct_elements(const Tensor& t) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size)
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.size(d) > 1) dims.emplace_back(t.stride(d), t.size(d));
  std::sort(dims.begin(), dims.end());
  int64_t reach = 0;
  for (auto [st, sz] : dims) {
    if (st <= reach) return false;
    reach += (sz - 1) * st;
  }
  return true;
}

bool same_value(double got, double want) { return got == want || (std::isnan(got) && std::isnan(want)); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider fdp(data, size);
  Tensor a = random_layout(fdp, draw_dtype(fdp));
  Tensor b = random_layout(fdp, draw_dtype(fdp));
  const int what = fdp.ConsumeIntegralInRange<int>(0, 3);
  try {
    if (what == 0 || what == 1) {  // add, optionally into an out= of random layout
      Tensor r;
      if (what == 1) {
        Tensor out = random_layout(fdp, draw_dtype(fdp));
        r = add(a, b, 1, out);
        if (!distinct_elements(r)) return 0;
      } else {
        r = add(a, b);
      }
      const DimVector shape = broadcast_shapes(a.sizes(), b.sizes());
      FUZZ_CHECK(DimVector(r.sizes().begin(), r.sizes().end()) == shape);
      for (int64_t k = 0; k < r.numel(); ++k) {
        double want = read_as_double(a, broadcast_flat(shape, a.sizes(), k)) +
                      read_as_double(b, broadcast_flat(shape, b.sizes(), k));
        if (r.dtype() == ScalarType::Float32) want = static_cast<float>(want);
        FUZZ_CHECK(same_value(read_as_double(r, k), want));
      }
    } else if (what == 2) {  // copy_ into a destination of random layout (broadcasting src)
      Tensor dst = random_layout(fdp, draw_dtype(fdp));
      copy_(dst, a);
      if (!distinct_elements(dst)) return 0;
      for (int64_t k = 0; k < dst.numel(); ++k) {
        double want = read_as_double(a, broadcast_flat(dst.sizes(), a.sizes(), k));
        if (dst.dtype() == ScalarType::Float32) want = static_cast<float>(want);
        FUZZ_CHECK(same_value(read_as_double(dst, k), want));
      }
    } else {  // where(cond, a, b): a third operand of its own layout
      Tensor c = random_layout(fdp, ScalarType::Bool);
      Tensor r = where(c, a, b);
      const DimVector shape = broadcast_shapes(broadcast_shapes(a.sizes(), b.sizes()), c.sizes());
      FUZZ_CHECK(DimVector(r.sizes().begin(), r.sizes().end()) == shape);
      for (int64_t k = 0; k < r.numel(); ++k) {
        const bool take_a = read_as_double(c, broadcast_flat(shape, c.sizes(), k)) != 0;
        double want = take_a ? read_as_double(a, broadcast_flat(shape, a.sizes(), k))
                             : read_as_double(b, broadcast_flat(shape, b.sizes(), k));
        if (r.dtype() == ScalarType::Float32) want = static_cast<float>(want);
        FUZZ_CHECK(same_value(read_as_double(r, k), want));
      }
    }
  } catch (const Error&) {
  }
  return 0;
}
