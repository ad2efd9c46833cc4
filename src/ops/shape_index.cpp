// Index-based ops: gather, scatter, scatter_add, index_select, index_add,
// take_along_dim, nonzero, masked_select. Checks and output shapes here; the
// loops are per-device stubs (see ops/shape_stubs.h).
#include "ops/out_overlap.h"
#include "ops/shape_common.h"
#include "ops/tensor_iterator.h"

namespace strata {

STRATA_DEFINE_STUB(gather_stub, GatherFn);
STRATA_DEFINE_STUB(scatter_stub, ScatterFn);
STRATA_DEFINE_STUB(nonzero_stub, NonzeroFn);
STRATA_DEFINE_STUB(masked_select_stub, MaskedSelectFn);

using namespace shape_detail;

namespace {

bool is_index_dtype(ScalarType t) { return t == ScalarType::Int64 || t == ScalarType::Int32; }

void check_same_device(std::initializer_list<Tensor> ts, const char* op) {
  std::vector<Tensor> v(ts);
  Device d = v[0].device();
  for (const Tensor& t : v)
    STRATA_CHECK(t.device() == d, op, ": expected all tensors on the same device, but got ", d.str(), " and ",
                 t.device().str());
}

// For ops whose out= may be self: returns the tensor to write into, holding self's values.
Tensor copy_of_self(const Tensor& self, const OptT& out, const char* op) {
  if (has_out(out) && out->is_same(self)) {
    self.bump_version();
    return self;
  }
  Tensor result = prepare_out(out, self.sizes(), self.dtype(), self.device(), op);
  if (!self.device().is_meta() && self.numel() > 0) copy_(result, self);
  return result;
}

void check_scatter_shapes(const Tensor& self, int64_t dim, const Tensor& index, const Tensor* src, const char* op) {
  STRATA_CHECK(dim_or_1(index) == dim_or_1(self), op, ": Index tensor must have the same number of dimensions as self "
               "tensor (index shape ", index.shape_str(), ", self shape ", self.shape_str(), ")");
  if (src) {
    STRATA_CHECK(dim_or_1(index) == dim_or_1(*src), op, ": Index tensor must have the same number of dimensions as "
                 "src tensor (index shape ", index.shape_str(), ", src shape ", src->shape_str(), ")");
  }
  if (index.numel() == 0) return;
  for (int64_t d = 0; d < dim_or_1(index); ++d) {
    const int64_t is = size_or_1(index, d);
    bool ok = (d == dim || is <= size_or_1(self, d)) && (!src || is <= size_or_1(*src, d));
    STRATA_CHECK(ok, op, ": Expected index ", index.shape_str(), " to be no larger than self ", self.shape_str(),
                 " apart from dimension ", dim, src ? str(" and to be no larger size than src ", src->shape_str()) : "");
  }
}

Tensor scatter_common(const Tensor& self, int64_t dim, const Tensor& index, const Tensor* src, const Scalar& value,
                      ScatterMode mode, const OptT& out, const char* op) {
  dim = wrap_dim(dim, self.dim(), op);
  // torch 2.13 takes int32 indices here as in gather (the kernel reads both widths).
  STRATA_CHECK(is_index_dtype(index.dtype()), op, ": Expected dtype int32/int64 for index, but got ",
               dtype_name(index.dtype()));
  if (src) {
    STRATA_CHECK(src->dtype() == self.dtype(), op, ": Expected self.dtype to be equal to src.dtype (got ",
                 dtype_name(self.dtype()), " and ", dtype_name(src->dtype()), ")");
    check_same_device({self, index, *src}, op);
  } else {
    check_same_device({self, index}, op);
  }
  check_scatter_shapes(self, dim, index, src, op);
  Tensor result = copy_of_self(self, out, op);
  if (self.device().is_meta() || index.numel() == 0) return result;
  Tensor s = src ? as_1d_if_scalar(*src) : Tensor();
  scatter_stub(self.device().type, as_1d_if_scalar(result), dim, as_1d_if_scalar(index), s, mode, value, op);
  return result;
}

}  // namespace

Tensor gather_impl(const Tensor& self, int64_t dim, const Tensor& index, bool /*sparse_grad*/, const OptT& out) {
  dim = wrap_dim(dim, self.dim(), "gather");
  if (has_out(out)) check_out_overlap("gather", *out, std::vector<Tensor>{self, index});
  STRATA_CHECK(is_index_dtype(index.dtype()), "gather(): Expected dtype int32/int64 for index, but got ",
               dtype_name(index.dtype()));
  check_same_device({self, index}, "gather");
  STRATA_CHECK(dim_or_1(index) == dim_or_1(self), "gather(): Index tensor must have the same number of dimensions as "
               "input tensor (index shape ", index.shape_str(), ", input shape ", self.shape_str(), ")");
  if (index.numel() > 0) {
    for (int64_t d = 0; d < dim_or_1(index); ++d) {
      STRATA_CHECK(d == dim || size_or_1(index, d) <= size_or_1(self, d), "gather(): Size does not match at dimension ",
                   d, " expected index ", index.shape_str(), " to be no larger than self ", self.shape_str(),
                   " apart from dimension ", dim);
    }
  }
  Tensor result = prepare_out(out, index.sizes(), self.dtype(), self.device(), "gather");
  if (self.device().is_meta() || result.numel() == 0) return result;
  gather_stub(self.device().type, as_1d_if_scalar(result), as_1d_if_scalar(self), dim, as_1d_if_scalar(index), false,
              "gather");
  return result;
}
STRATA_IMPL_CPU_META(gather, gather_impl);

Tensor scatter_src_impl(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src, const OptT& out) {
  // A Python number passed as src means the value overload.
  if (src.impl()->is_wrapped_number()) {
    return scatter_common(self, dim, index, nullptr, src.item(), ScatterMode::Value, out, "scatter");
  }
  return scatter_common(self, dim, index, &src, Scalar(), ScatterMode::Src, out, "scatter");
}
STRATA_IMPL_CPU_META(scatter_src, scatter_src_impl);

Tensor scatter_value_impl(const Tensor& self, int64_t dim, const Tensor& index, const Scalar& value, const OptT& out) {
  return scatter_common(self, dim, index, nullptr, value, ScatterMode::Value, out, "scatter");
}
STRATA_IMPL_CPU_META(scatter_value, scatter_value_impl);

Tensor scatter_add_impl(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src, const OptT& out) {
  return scatter_common(self, dim, index, &src, Scalar(int64_t(1)), ScatterMode::Add, out, "scatter_add");
}
STRATA_IMPL_CPU_META(scatter_add, scatter_add_impl);

namespace {

// A view of a 0-d or 1-d index spread over `sizes`: it varies along dim only.
Tensor spread_index(const Tensor& index, IntArrayRef sizes, int64_t dim) {
  DimVector strides(sizes.size(), 0);
  strides[dim] = index.dim() == 0 ? 0 : index.stride(0);
  return make_view(index, to_vec(sizes), std::move(strides), index.storage_offset());
}

}  // namespace

Tensor index_select_impl(const Tensor& self, int64_t dim, const Tensor& index, const OptT& out) {
  dim = wrap_dim(dim, self.dim(), "index_select");
  if (has_out(out)) check_out_overlap("index_select", *out, std::vector<Tensor>{self, index});
  STRATA_CHECK_INDEX(index.dim() <= 1, "index_select(): Index is supposed to be a vector, but got shape ",
                     index.shape_str());
  STRATA_CHECK(is_index_dtype(index.dtype()), "index_select(): Expected dtype int32 or int64 for index, but got ",
               dtype_name(index.dtype()));
  check_same_device({self, index}, "index_select");
  DimVector sizes = to_vec(self.sizes());
  if (self.dim() == 0) {
    STRATA_CHECK_INDEX(index.numel() == 1, "index_select(): Index to scalar can have only 1 value, got ",
                       index.numel(), " value(s)");
  } else {
    sizes[dim] = index.numel();
  }
  Tensor result = prepare_out(out, sizes, self.dtype(), self.device(), "index_select");
  if (self.device().is_meta() || result.numel() == 0) return result;
  Tensor r1 = as_1d_if_scalar(result);
  gather_stub(self.device().type, r1, as_1d_if_scalar(self), dim, spread_index(index, r1.sizes(), dim), false,
              "index_select");
  return result;
}
STRATA_IMPL_CPU_META(index_select, index_select_impl);

Tensor index_add_impl(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha,
                      const OptT& out) {
  dim = wrap_dim(dim, self.dim(), "index_add");
  STRATA_CHECK_INDEX(index.dim() <= 1, "index_add(): Index is supposed to be a vector, but got shape ",
                     index.shape_str());
  STRATA_CHECK(is_index_dtype(index.dtype()), "index_add(): Expected dtype int32/int64 for index, but got ",
               dtype_name(index.dtype()));
  STRATA_CHECK(self.dtype() == source.dtype(), "index_add(): self (", dtype_name(self.dtype()), ") and source (",
               dtype_name(source.dtype()), ") must have the same scalar type");
  check_same_device({self, index, source}, "index_add");
  STRATA_CHECK(dim_or_1(source) == dim_or_1(self), "index_add(): source tensor shape must match self tensor shape, "
               "excluding the specified dimension. Got self.shape = ", self.shape_str(), " source.shape = ",
               source.shape_str());
  for (int64_t d = 0; d < dim_or_1(self); ++d) {
    STRATA_CHECK(d == dim || size_or_1(source, d) == size_or_1(self, d), "index_add(): source tensor shape must match "
                 "self tensor shape, excluding the specified dimension. Got self.shape = ", self.shape_str(),
                 " source.shape = ", source.shape_str());
  }
  STRATA_CHECK(index.numel() == size_or_1(source, dim), "index_add(): Number of indices (", index.numel(),
               ") should be equal to source.size(dim): (", size_or_1(source, dim), "), for dim: ", dim);
  Tensor result = copy_of_self(self, out, "index_add");
  if (self.device().is_meta() || source.numel() == 0) return result;
  Tensor s1 = as_1d_if_scalar(source);
  scatter_stub(self.device().type, as_1d_if_scalar(result), dim, spread_index(index, s1.sizes(), dim), s1,
               ScatterMode::Add, alpha, "index_add");
  return result;
}
STRATA_IMPL_CPU_META(index_add, index_add_impl);

Tensor take_along_dim_impl(const Tensor& self, const Tensor& indices, std::optional<int64_t> dim, const OptT& out) {
  STRATA_CHECK(indices.dtype() == ScalarType::Int64, "take_along_dim(): dtype of indices should be int64 but got ",
               dtype_name(indices.dtype()));
  check_same_device({self, indices}, "take_along_dim");
  Tensor src, idx;
  int64_t d;
  if (!dim) {
    // Index the flattened tensor.
    Tensor sc = contiguous(self), ic = contiguous(indices);
    src = make_view(sc, DimVector{sc.numel()}, DimVector{1}, sc.storage_offset());
    idx = make_view(ic, DimVector{ic.numel()}, DimVector{1}, ic.storage_offset());
    d = 0;
  } else {
    STRATA_CHECK(self.dim() == indices.dim(), "take_along_dim(): input and indices should have the same number of "
                 "dimensions, but got ", self.dim(), " dimensions for input, and ", indices.dim(),
                 " dimensions for indices (shapes ", self.shape_str(), " and ", indices.shape_str(), ")");
    STRATA_CHECK_INDEX(self.dim() > 0, "take_along_dim(): Dimension specified as ", *dim,
                       " but tensor has no dimensions");
    d = wrap_dim(*dim, self.dim(), "take_along_dim");
    src = self;
    idx = indices;
    // Broadcast every dim but d.
    DimVector ss = to_vec(src.sizes()), is = to_vec(idx.sizes()), sst = to_vec(src.strides()),
              ist = to_vec(idx.strides());
    for (int64_t k = 0; k < src.dim(); ++k) {
      if (k == d || ss[k] == is[k]) continue;
      if (ss[k] == 1) {
        ss[k] = is[k];
        sst[k] = 0;
      } else if (is[k] == 1) {
        is[k] = ss[k];
        ist[k] = 0;
      } else {
        STRATA_CHECK(false, "take_along_dim(): input of shape ", self.shape_str(), " and indices of shape ",
                     indices.shape_str(), " cannot be broadcast apart from dimension ", d);
      }
    }
    src = make_view(src, ss, sst, src.storage_offset());
    idx = make_view(idx, is, ist, idx.storage_offset());
  }
  DimVector out_sizes = to_vec(idx.sizes());
  Tensor result = prepare_out(out, out_sizes, self.dtype(), self.device(), "take_along_dim");
  if (self.device().is_meta() || result.numel() == 0) return result;
  STRATA_CHECK_INDEX(src.size(d) > 0, "take_along_dim(): cannot take indices from an empty dimension ", d);
  gather_stub(self.device().type, result, src, d, idx, true, "take_along_dim");
  return result;
}
STRATA_IMPL_CPU_META(take_along_dim, take_along_dim_impl);

Tensor nonzero_impl(const Tensor& self, const OptT& out) {
  if (self.device().is_meta()) {
    throw NotImplementedError(str("nonzero: the output shape depends on the data, so it cannot run on the meta "
                                  "device (input ", self.describe(), ")"));
  }
  Tensor r = nonzero_stub.get(self.device().type)(contiguous(self));
  if (!has_out(out)) return r;
  Tensor result = prepare_out(out, r.sizes(), ScalarType::Int64, self.device(), "nonzero");
  if (r.numel() > 0) copy_(result, r);
  return result;
}
STRATA_IMPL_CPU_META(nonzero, nonzero_impl);

std::vector<Tensor> nonzero_numpy_impl(const Tensor& self) {
  Tensor nz = nonzero(self);
  const int64_t n = nz.size(0);
  std::vector<Tensor> cols;
  if (self.dim() == 0) {
    // A 0-d input is indexed as if it were 1-d: its single index is 0.
    Tensor z = empty_tensor(DimVector{n}, ScalarType::Int64, self.device());
    cols.push_back(fill_(z, Scalar(int64_t(0))));
    return cols;
  }
  for (int64_t d = 0; d < self.dim(); ++d)
    cols.push_back(make_view(nz, DimVector{n}, DimVector{nz.stride(0)}, nz.storage_offset() + d * nz.stride(1)));
  return cols;
}
STRATA_IMPL_COMPOSITE(_nonzero_numpy, nonzero_numpy_impl);

Tensor masked_select_impl(const Tensor& self, const Tensor& mask, const OptT& out) {
  STRATA_CHECK(mask.dtype() == ScalarType::Bool, "masked_select: expected BoolTensor for mask, but got ",
               dtype_name(mask.dtype()));
  check_same_device({self, mask}, "masked_select");
  if (has_out(out)) check_out_overlap("masked_select", *out, std::vector<Tensor>{self, mask});
  DimVector shape = broadcast_shapes(self.sizes(), mask.sizes(), "masked_select");
  if (self.device().is_meta()) {
    throw NotImplementedError(str("masked_select: the output shape depends on the data, so it cannot run on the meta "
                                  "device (input ", self.describe(), ")"));
  }
  // Expand both to the broadcast shape, then make them dense for the kernel.
  auto expand = [&](const Tensor& t) {
    DimVector st(shape.size(), 0);
    const size_t pad = shape.size() - t.dim();
    for (int64_t d = 0; d < t.dim(); ++d) st[pad + d] = t.size(d) == 1 ? 0 : t.stride(d);
    return contiguous(make_view(t, shape, st, t.storage_offset()));
  };
  Tensor r = masked_select_stub.get(self.device().type)(expand(self), expand(mask));
  if (!has_out(out)) return r;
  Tensor result = prepare_out(out, r.sizes(), self.dtype(), self.device(), "masked_select");
  if (r.numel() > 0) copy_(result, r);
  return result;
}
STRATA_IMPL_CPU_META(masked_select, masked_select_impl);

}  // namespace strata
