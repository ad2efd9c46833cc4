// Helpers shared by the implementations of decl/misc_more.def (misc_more.cpp,
// misc_more_index.cpp).
#pragma once

#include "ops/op_list.h"
#include "ops/ops.h"
#include "ops/pointwise.h"
#include "ops/tensor_iterator.h"

namespace strata::misc_detail {

using OptT = std::optional<Tensor>;

inline bool has_out(const OptT& out) { return out && out->defined(); }

// A composite's result written to out= when one was given: out is resized to
// the result's shape and the result copied (and cast) into it. The result is
// computed in full first, so out may alias an input (the in-place methods).
// When out is `self` (an in-place method), its shape cannot change.
inline Tensor finish_out(const Tensor& r, const OptT& out, const char* op, const Tensor* self = nullptr) {
  if (!has_out(out)) return r;
  Tensor o = *out;
  if (self && o.is_same(*self)) {
    STRATA_CHECK(std::equal(r.sizes().begin(), r.sizes().end(), o.sizes().begin(), o.sizes().end()), op,
                 ": output with shape ", o.shape_str(), " doesn't match the broadcast shape ", r.shape_str());
  }
  STRATA_CHECK(o.device() == r.device(), op, ": Expected out tensor on ", r.device().str(), ", but got one on ",
               o.device().str());
  STRATA_CHECK(can_cast(r.dtype(), o.dtype()), op, ": result type ", dtype_name(r.dtype()),
               " can't be cast to the desired output type ", dtype_name(o.dtype()));
  if (!std::equal(r.sizes().begin(), r.sizes().end(), o.sizes().begin(), o.sizes().end())) {
    resize_out(o, r.sizes(), op);
  }
  copy_(o, r);
  return o;
}

}  // namespace strata::misc_detail
