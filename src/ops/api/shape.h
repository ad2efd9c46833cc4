#pragma once

#include "ops/op_list.h"

namespace strata {

inline Tensor cat(TensorList tensors, int64_t dim = 0, const std::optional<Tensor>& out = {}) {
  return call<OpId::cat>(tensors, dim, out);
}
inline Tensor stack(TensorList tensors, int64_t dim = 0, const std::optional<Tensor>& out = {}) {
  return call<OpId::stack>(tensors, dim, out);
}
inline std::vector<Tensor> split(const Tensor& self, int64_t split_size, int64_t dim = 0) {
  return call<OpId::split_Tensor>(self, split_size, dim);
}
inline std::vector<Tensor> split(const Tensor& self, IntArrayRef split_sizes, int64_t dim = 0) {
  return call<OpId::split_sizes>(self, split_sizes, dim);
}
inline std::vector<Tensor> split_with_sizes(const Tensor& self, IntArrayRef split_sizes, int64_t dim = 0) {
  return call<OpId::split_with_sizes>(self, split_sizes, dim);
}
inline std::vector<Tensor> chunk(const Tensor& self, int64_t chunks, int64_t dim = 0) {
  return call<OpId::chunk>(self, chunks, dim);
}
inline Tensor flip(const Tensor& self, IntArrayRef dims) { return call<OpId::flip>(self, dims); }
inline Tensor roll(const Tensor& self, IntArrayRef shifts, IntArrayRef dims = {}) {
  return call<OpId::roll>(self, shifts, dims);
}
inline Tensor repeat(const Tensor& self, IntArrayRef repeats) { return call<OpId::repeat>(self, repeats); }
inline Tensor tile(const Tensor& self, IntArrayRef dims) { return call<OpId::tile>(self, dims); }
inline Tensor tril(const Tensor& self, int64_t diagonal = 0, const std::optional<Tensor>& out = {}) {
  return call<OpId::tril>(self, diagonal, out);
}
inline Tensor triu(const Tensor& self, int64_t diagonal = 0, const std::optional<Tensor>& out = {}) {
  return call<OpId::triu>(self, diagonal, out);
}
inline Tensor gather(const Tensor& self, int64_t dim, const Tensor& index, const std::optional<Tensor>& out = {}) {
  return call<OpId::gather>(self, dim, index, false, out);
}
inline Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                      const std::optional<Tensor>& out = {}) {
  return call<OpId::scatter_src>(self, dim, index, src, out);
}
inline Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, const Scalar& value,
                      const std::optional<Tensor>& out = {}) {
  return call<OpId::scatter_value>(self, dim, index, value, out);
}
inline Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                          const std::optional<Tensor>& out = {}) {
  return call<OpId::scatter_add>(self, dim, index, src, out);
}
inline Tensor index_select(const Tensor& self, int64_t dim, const Tensor& index,
                           const std::optional<Tensor>& out = {}) {
  return call<OpId::index_select>(self, dim, index, out);
}
inline Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                        const Scalar& alpha = 1, const std::optional<Tensor>& out = {}) {
  return call<OpId::index_add>(self, dim, index, source, alpha, out);
}
inline Tensor take_along_dim(const Tensor& self, const Tensor& indices, std::optional<int64_t> dim = {},
                             const std::optional<Tensor>& out = {}) {
  return call<OpId::take_along_dim>(self, indices, dim, out);
}
inline Tensor nonzero(const Tensor& self, const std::optional<Tensor>& out = {}) {
  return call<OpId::nonzero>(self, out);
}
inline std::vector<Tensor> nonzero_numpy(const Tensor& self) { return call<OpId::_nonzero_numpy>(self); }
inline Tensor masked_select(const Tensor& self, const Tensor& mask, const std::optional<Tensor>& out = {}) {
  return call<OpId::masked_select>(self, mask, out);
}
inline std::tuple<Tensor, Tensor> sort(const Tensor& self, int64_t dim = -1, bool descending = false,
                                       std::optional<bool> stable = false) {
  return call<OpId::sort>(self, dim, descending, stable);
}
inline Tensor argsort(const Tensor& self, int64_t dim = -1, bool descending = false, bool stable = false) {
  return call<OpId::argsort>(self, dim, descending, stable);
}
inline std::tuple<Tensor, Tensor> topk(const Tensor& self, int64_t k, int64_t dim = -1, bool largest = true,
                                       bool sorted = true) {
  return call<OpId::topk>(self, k, dim, largest, sorted);
}

}  // namespace strata
