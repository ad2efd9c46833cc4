// C++ API of the ops declared in decl/misc_more.def (einsum, tensordot,
// structural and counting ops).
#pragma once

#include "ops/op_list.h"

namespace strata {

inline Tensor einsum(std::string_view equation, TensorList tensors, OptIntArrayRef path = std::nullopt) {
  return call<OpId::einsum>(equation, tensors, path);
}
inline Tensor tensordot(const Tensor& self, const Tensor& other, IntArrayRef dims_self, IntArrayRef dims_other,
                        const std::optional<Tensor>& out = std::nullopt) {
  return call<OpId::tensordot>(self, other, dims_self, dims_other, out);
}
inline Tensor kron(const Tensor& self, const Tensor& other, const std::optional<Tensor>& out = std::nullopt) {
  return call<OpId::kron>(self, other, out);
}
inline Tensor linalg_cross(const Tensor& self, const Tensor& other, int64_t dim = -1,
                           const std::optional<Tensor>& out = std::nullopt) {
  return call<OpId::linalg_cross>(self, other, dim, out);
}
inline Tensor diag_embed(const Tensor& self, int64_t offset = 0, int64_t dim1 = -2, int64_t dim2 = -1) {
  return call<OpId::diag_embed>(self, offset, dim1, dim2);
}
inline std::vector<Tensor> broadcast_tensors(TensorList tensors) { return call<OpId::broadcast_tensors>(tensors); }
inline Tensor searchsorted(const Tensor& sorted_sequence, const Tensor& self, bool out_int32 = false,
                           bool right = false, OptStr side = std::nullopt,
                           const std::optional<Tensor>& sorter = std::nullopt,
                           const std::optional<Tensor>& out = std::nullopt) {
  return call<OpId::searchsorted>(sorted_sequence, self, out_int32, right, side, sorter, out);
}
inline Tensor scatter_reduce(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                             std::string_view reduce, bool include_self = true,
                             const std::optional<Tensor>& out = std::nullopt) {
  return call<OpId::scatter_reduce>(self, dim, index, src, reduce, include_self, out);
}
inline Tensor3 unique2(const Tensor& self, bool sorted = true, bool return_inverse = false,
                       bool return_counts = false) {
  return call<OpId::_unique2>(self, sorted, return_inverse, return_counts);
}

}  // namespace strata
