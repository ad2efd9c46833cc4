// sort, argsort, topk: shapes and checks; the per-slice work is in the stubs.
#include "ops/shape_common.h"

namespace strata {

STRATA_DEFINE_STUB(sort_stub, SortFn);
STRATA_DEFINE_STUB(topk_stub, TopkFn);

using namespace shape_detail;

std::tuple<Tensor, Tensor> sort_impl(const Tensor& self, int64_t dim, bool descending, std::optional<bool> /*stable*/) {
  // The CPU sort is always stable, so `stable` needs no separate path.
  dim = wrap_dim(dim, self.dim(), "sort");
  Tensor values = empty_tensor(self.sizes(), self.dtype(), self.device());
  Tensor indices = empty_tensor(self.sizes(), ScalarType::Int64, self.device());
  if (self.device().is_meta() || self.numel() == 0) return {values, indices};
  sort_stub(self.device().type, as_1d_if_scalar(values), as_1d_if_scalar(indices), as_1d_if_scalar(self), dim,
            descending);
  return {values, indices};
}
STRATA_IMPL_CPU_META(sort, sort_impl);

Tensor argsort_impl(const Tensor& self, int64_t dim, bool descending, bool stable) {
  return std::get<1>(sort(self, dim, descending, stable));
}
STRATA_IMPL_COMPOSITE(argsort, argsort_impl);

std::tuple<Tensor, Tensor> topk_impl(const Tensor& self, int64_t k, int64_t dim, bool largest, bool sorted) {
  (void)sorted;  // results always come sorted, which `sorted=False` allows
  dim = wrap_dim(dim, self.dim(), "topk");
  STRATA_CHECK(self.dtype() != ScalarType::Bool, "topk(): does not support bool dtypes");
  const int64_t n = size_or_1(self, dim);
  STRATA_CHECK(k >= 0 && k <= n, "topk(): selected index k out of range (k = ", k, ", but the size of dimension ", dim,
               " is ", n, " for input of shape ", self.shape_str(), ")");
  DimVector sizes = to_vec(self.sizes());
  if (self.dim() > 0) sizes[dim] = k;
  Tensor values = empty_tensor(sizes, self.dtype(), self.device());
  Tensor indices = empty_tensor(sizes, ScalarType::Int64, self.device());
  if (self.device().is_meta() || values.numel() == 0) return {values, indices};
  // A 0-d input gives its one element even for k = 0 (as PyTorch does).
  topk_stub(self.device().type, as_1d_if_scalar(values), as_1d_if_scalar(indices), as_1d_if_scalar(self),
            self.dim() == 0 ? 1 : k, dim, largest);
  return {values, indices};
}
STRATA_IMPL_CPU_META(topk, topk_impl);

}  // namespace strata
