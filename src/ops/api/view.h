// View ops (results share storage with self) and advanced indexing.
#pragma once

#include "ops/op_list.h"

namespace strata {

inline Tensor view(const Tensor& self, IntArrayRef size) { return call<OpId::view>(self, size); }
inline Tensor view(const Tensor& self, ScalarType dtype) { return call<OpId::view_dtype>(self, dtype); }
inline Tensor reshape(const Tensor& self, IntArrayRef shape) { return call<OpId::reshape>(self, shape); }
inline Tensor flatten(const Tensor& self, int64_t start_dim = 0, int64_t end_dim = -1) {
  return call<OpId::flatten>(self, start_dim, end_dim);
}
inline Tensor unflatten(const Tensor& self, int64_t dim, IntArrayRef sizes) {
  return call<OpId::unflatten>(self, dim, sizes);
}
inline Tensor transpose(const Tensor& self, int64_t dim0, int64_t dim1) {
  return call<OpId::transpose>(self, dim0, dim1);
}
inline Tensor swapaxes(const Tensor& self, int64_t a0, int64_t a1) { return call<OpId::swapaxes>(self, a0, a1); }
inline Tensor swapdims(const Tensor& self, int64_t d0, int64_t d1) { return call<OpId::swapdims>(self, d0, d1); }
inline Tensor permute(const Tensor& self, IntArrayRef dims) { return call<OpId::permute>(self, dims); }
inline Tensor movedim(const Tensor& self, IntArrayRef source, IntArrayRef destination) {
  return call<OpId::movedim>(self, source, destination);
}
inline Tensor moveaxis(const Tensor& self, IntArrayRef source, IntArrayRef destination) {
  return call<OpId::moveaxis>(self, source, destination);
}
inline Tensor t(const Tensor& self) { return call<OpId::t>(self); }
inline Tensor select(const Tensor& self, int64_t dim, int64_t index) { return call<OpId::select>(self, dim, index); }
inline Tensor slice(const Tensor& self, int64_t dim = 0, OptInt start = std::nullopt, OptInt end = std::nullopt,
                    int64_t step = 1) {
  return call<OpId::slice>(self, dim, start, end, step);
}
inline Tensor narrow(const Tensor& self, int64_t dim, int64_t start, int64_t length) {
  return call<OpId::narrow>(self, dim, start, length);
}
inline Tensor expand(const Tensor& self, IntArrayRef size, bool implicit = false) {
  return call<OpId::expand>(self, size, implicit);
}
inline Tensor broadcast_to(const Tensor& self, IntArrayRef size) { return call<OpId::broadcast_to>(self, size); }
inline Tensor squeeze(const Tensor& self) { return call<OpId::squeeze>(self); }
inline Tensor squeeze(const Tensor& self, int64_t dim) { return call<OpId::squeeze_dim>(self, dim); }
inline Tensor squeeze(const Tensor& self, IntArrayRef dims) { return call<OpId::squeeze_dims>(self, dims); }
inline Tensor unsqueeze(const Tensor& self, int64_t dim) { return call<OpId::unsqueeze>(self, dim); }
inline Tensor as_strided(const Tensor& self, IntArrayRef size, IntArrayRef stride,
                         OptInt storage_offset = std::nullopt) {
  return call<OpId::as_strided>(self, size, stride, storage_offset);
}
inline Tensor diagonal(const Tensor& self, int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1) {
  return call<OpId::diagonal>(self, offset, dim1, dim2);
}
inline Tensor unfold(const Tensor& self, int64_t dimension, int64_t size, int64_t step) {
  return call<OpId::unfold>(self, dimension, size, step);
}
inline std::vector<Tensor> unbind(const Tensor& self, int64_t dim = 0) { return call<OpId::unbind>(self, dim); }
inline Tensor alias(const Tensor& self) { return call<OpId::alias>(self); }
inline Tensor view_as(const Tensor& self, const Tensor& other) { return call<OpId::view_as>(self, other); }
inline Tensor expand_as(const Tensor& self, const Tensor& other) { return call<OpId::expand_as>(self, other); }
inline Tensor reshape_as(const Tensor& self, const Tensor& other) { return call<OpId::reshape_as>(self, other); }

// Advanced indexing: indices index consecutive dims of self from `dim` on
// (bool masks consume one dim per mask dim); see decl/view.def.
inline Tensor index(const Tensor& self, TensorList indices, int64_t dim = 0) {
  return call<OpId::index>(self, indices, dim);
}
inline Tensor index_put_(const Tensor& self, TensorList indices, const Tensor& values, bool accumulate = false,
                         int64_t dim = 0) {
  return call<OpId::index_put_>(self, indices, values, accumulate, dim);
}
inline Tensor index_put(const Tensor& self, TensorList indices, const Tensor& values, bool accumulate = false,
                        int64_t dim = 0) {
  return call<OpId::index_put>(self, indices, values, accumulate, dim);
}

// The strides that view(sizes) would give self, if any (PyTorch's rule: each
// run of dims that is contiguous in memory may be regrouped freely).
std::optional<DimVector> compute_view_strides(IntArrayRef old_sizes, IntArrayRef old_strides, IntArrayRef new_sizes);
// Replaces a single -1 in `shape` by the size that makes numel match.
DimVector infer_size(IntArrayRef shape, int64_t numel, const char* op);

}  // namespace strata
