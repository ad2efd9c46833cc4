// libFuzzer harness: indexing with random index tensors. index / index_put_ (accumulate or not) with
// int64 and bool indices, index_select, gather, scatter, scatter_add, index_add, take_along_dim,
// embedding and masked_select, on random small shapes with index values in and out of range (and of
// random shapes and dtypes). Out-of-range indices must raise IndexError / Error, never read or write
// outside the tensors (ASan); accepted index_select / gather / single-tensor index results are checked
// against a naive loop.
#include "fuzz_common.h"

using namespace strata;
using namespace strata::fuzz;

namespace {

Tensor random_index(FuzzedDataProvider& fdp, int64_t bound) {
  std::vector<int64_t> sizes(fdp.ConsumeIntegralInRange<int>(0, 3));
  for (auto& s : sizes) s = fdp.ConsumeIntegralInRange<int64_t>(0, 4);
  const bool as_bool = fdp.ConsumeIntegralInRange<int>(0, 5) == 0;
  Tensor t = empty_tensor(sizes, as_bool ? ScalarType::Bool : ScalarType::Int64, Device());
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (as_bool) {
      t.data_ptr<bool>()[i] = fdp.ConsumeBool();
    } else {
      const int64_t lim = std::max<int64_t>(bound, 1) * 2;
      t.data_ptr<int64_t>()[i] = fdp.ConsumeIntegralInRange<int>(0, 9) == 0 ? fdp.ConsumeIntegral<int64_t>()
                                                                               : fdp.ConsumeIntegralInRange<int64_t>(-lim, lim);
    }
  }
  return t;
}

int64_t wrap(int64_t i, int64_t n) { return i < 0 ? i + n : i; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider fdp(data, size);
  std::vector<int64_t> shape(fdp.ConsumeIntegralInRange<int>(0, 3));
  for (auto& s : shape) s = fdp.ConsumeIntegralInRange<int64_t>(0, 5);
  Tensor self = iota_f32(shape);
  const int64_t nd = self.dim();
  const int64_t dim = fdp.ConsumeIntegralInRange<int64_t>(-nd - 1, nd);
  const int64_t bound = nd == 0 ? 1 : self.size(((dim % std::max<int64_t>(nd, 1)) + nd) % std::max<int64_t>(nd, 1));
  Tensor idx = random_index(fdp, bound);
  const int op = fdp.ConsumeIntegralInRange<int>(0, 9);
  try {
    switch (op) {
      case 0: {  // self[idx] or self[idx, idx2]
        std::vector<Tensor> ids{idx};
        if (fdp.ConsumeBool()) ids.push_back(random_index(fdp, bound));
        Tensor r = index(self, ids);
        check_in_bounds(r);
        if (ids.size() == 1 && idx.dtype() == ScalarType::Int64 && nd >= 1) {
          const int64_t inner = self.numel() / std::max<int64_t>(self.size(0), 1);
          Tensor rc = contiguous(r);
          for (int64_t k = 0; k < idx.numel(); ++k) {
            const int64_t row = wrap(idx.data_ptr<int64_t>()[k], self.size(0));
            FUZZ_CHECK(row >= 0 && row < self.size(0));
            for (int64_t j = 0; j < inner; ++j)
              FUZZ_CHECK(rc.data_ptr<float>()[k * inner + j] == static_cast<float>(row * inner + j));
          }
        }
        break;
      }
      case 1: {
        std::vector<Tensor> ids{idx};
        Tensor values = iota_f32(std::vector<int64_t>(fdp.ConsumeIntegralInRange<int>(0, 2), fdp.ConsumeIntegralInRange<int64_t>(0, 3)));
        index_put_(self, ids, values, fdp.ConsumeBool());
        break;
      }
      case 2: {
        Tensor r = index_select(self, dim, idx);
        const int64_t d = dim < 0 ? dim + std::max<int64_t>(nd, 1) : dim;
        if (nd >= 1 && idx.dtype() == ScalarType::Int64) {
          for (int64_t k = 0; k < r.numel(); ++k) {
            // Coordinates of k in r; along d they name idx's entry.
            int64_t flat = k, src = 0;
            for (int64_t e = nd - 1; e >= 0; --e) {
              int64_t i = flat % r.size(e);
              flat /= r.size(e);
              if (e == d) i = wrap(idx.data_ptr<int64_t>()[i], self.size(d));
              src += i * self.stride(e);
            }
            FUZZ_CHECK(element_at<float>(r, k) == self.data_ptr<float>()[src]);
          }
        }
        break;
      }
      case 3: {
        Tensor r = gather(self, dim, idx);
        FUZZ_CHECK(r.numel() == idx.numel());
        break;
      }
      case 4: scatter(self, dim, idx, iota_f32(idx.sizes())); break;
      case 5: scatter_add(self, dim, idx, iota_f32(idx.sizes())); break;
      case 6: {
        std::vector<int64_t> src_shape(shape);
        if (dim >= -nd && dim < nd) src_shape[(dim + nd) % nd] = idx.numel();
        index_add(self, dim, idx, iota_f32(src_shape), 2);
        break;
      }
      case 7: take_along_dim(self, idx, fdp.ConsumeBool() ? std::optional<int64_t>(dim) : std::nullopt); break;
      case 8: embedding(self, idx, fdp.ConsumeIntegralInRange<int64_t>(-3, 3)); break;
      default: masked_select(self, idx); break;
    }
  } catch (const Error&) {
  }
  return 0;
}
