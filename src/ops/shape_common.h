// Helpers shared by the shape/index op implementations (shape_*.cpp).
#pragma once

#include "core/shape.h"
#include "ops/op_list.h"
#include "ops/ops.h"
#include "ops/pointwise.h"
#include "ops/shape_stubs.h"

namespace strata::shape_detail {

using OptT = std::optional<Tensor>;

inline bool has_out(const OptT& out) { return out && out->defined(); }

// The result tensor of an op with an optional out=: a new tensor, or out resized to `sizes`.
// exact_dtype: out must have the op's dtype (index ops); otherwise it only has to be a safe cast target.
inline Tensor prepare_out(const OptT& out, IntArrayRef sizes, ScalarType dtype, Device device, const char* op,
                          bool exact_dtype = true) {
  if (!has_out(out)) return empty_tensor(sizes, dtype, device);
  Tensor o = *out;
  STRATA_CHECK(o.device() == device, op, ": Expected out tensor on ", device.str(), ", but got one on ",
               o.device().str());
  if (exact_dtype) {
    STRATA_CHECK(o.dtype() == dtype, op, ": Expected out tensor to have dtype ", dtype_name(dtype), ", but got ",
                 dtype_name(o.dtype()), " instead");
  } else {
    STRATA_CHECK(can_cast(dtype, o.dtype()), op, ": result type ", dtype_name(dtype),
                 " can't be cast to the desired output type ", dtype_name(o.dtype()));
  }
  if (!std::equal(sizes.begin(), sizes.end(), o.sizes().begin(), o.sizes().end())) resize_out(o, sizes, op);
  o.bump_version();
  return o;
}

// PyTorch treats a 0-d tensor as 1-d of size 1 in the index ops.
inline Tensor as_1d_if_scalar(const Tensor& t) {
  if (t.dim() != 0) return t;
  return make_view(t, DimVector{1}, DimVector{1}, t.storage_offset());
}
inline int64_t size_or_1(const Tensor& t, int64_t d) { return t.dim() == 0 ? 1 : t.size(d); }
inline int64_t dim_or_1(const Tensor& t) { return t.dim() == 0 ? 1 : t.dim(); }

inline DimVector to_vec(IntArrayRef a) { return DimVector(a.begin(), a.end()); }

}  // namespace strata::shape_detail
