// softmax, log_softmax, cumsum and cumprod: device-generic checks, dtypes and
// the [outer, n, inner] view of a contiguous input the kernels run over.
#include "core/shape.h"
#include "ops/op_list.h"
#include "ops/ops.h"
#include "ops/reduce_common.h"
#include "profiler/hidden_copy.h"

namespace strata {

STRATA_DEFINE_STUB(softmax_stub, SoftmaxFn);
STRATA_DEFINE_STUB(scan_stub, ScanFn);

namespace {

struct Split {
  int64_t outer = 1, n = 1, inner = 1;
};
Split split_at(const Tensor& t, int64_t d) {
  Split s;
  for (int64_t i = 0; i < t.dim(); ++i) (i < d ? s.outer : i == d ? s.n : s.inner) *= t.size(i);
  return s;
}

Tensor softmax_common(const char* op, const Tensor& self, int64_t dim, OptDType dtype, bool log) {
  Tensor in = dtype && *dtype != self.dtype() ? to_dtype(self, *dtype) : self;
  if (!is_floating_type(in.dtype())) {
    throw NotImplementedError(str(op, ": \"softmax_kernel_impl\" not implemented for '", dtype_name(in.dtype()),
                                  "' (input ", in.describe(), ")"));
  }
  int64_t d = wrap_dim(dim, in.dim(), op);
  Tensor out = empty_tensor(in.sizes(), in.dtype(), in.device());
  if (in.device().is_meta() || in.numel() == 0) return out;
  in = contiguous_input(in, "self");
  Split s = split_at(in, d);
  softmax_stub(in.device().type, in, out, s.outer, s.n, s.inner, log);
  return out;
}

Tensor scan_common(const char* op, const Tensor& self, int64_t dim, OptDType dtype, bool prod) {
  Tensor in = dtype && *dtype != self.dtype() ? to_dtype(self, *dtype) : self;
  int64_t d = wrap_dim(dim, in.dim(), op);
  ScalarType natural = is_floating_type(in.dtype()) || is_complex_type(in.dtype()) ? in.dtype() : ScalarType::Int64;
  Tensor out = empty_tensor(in.sizes(), natural, in.device());
  if (!in.device().is_meta() && in.numel() > 0) {
    in = contiguous_input(in, "self");
    Split s = split_at(in, d);
    scan_stub(in.device().type, in, out, s.outer, s.n, s.inner, prod);
  }
  return dtype && *dtype != natural ? to_dtype(out, *dtype) : out;
}

}  // namespace

Tensor softmax_impl(const Tensor& self, int64_t dim, OptDType dtype) {
  return softmax_common("softmax", self, dim, dtype, false);
}
STRATA_IMPL_CPU_META(softmax, softmax_impl);

Tensor log_softmax_impl(const Tensor& self, int64_t dim, OptDType dtype) {
  return softmax_common("log_softmax", self, dim, dtype, true);
}
STRATA_IMPL_CPU_META(log_softmax, log_softmax_impl);

Tensor cumsum_impl(const Tensor& self, int64_t dim, OptDType dtype) {
  return scan_common("cumsum", self, dim, dtype, false);
}
STRATA_IMPL_CPU_META(cumsum, cumsum_impl);

Tensor cumprod_impl(const Tensor& self, int64_t dim, OptDType dtype) {
  return scan_common("cumprod", self, dim, dtype, true);
}
STRATA_IMPL_CPU_META(cumprod, cumprod_impl);

}  // namespace strata
