// Advanced indexing: index (gather) and index_put_ (scatter, optionally
// accumulating). Checks, masks and shapes here; the loops run in a per-device
// kernel (backends/cpu/kernels/index_kernels.cpp).
#include "core/deterministic.h"
#include "core/shape.h"
#include "ops/index_kernel.h"
#include "ops/op_list.h"
#include "ops/ops.h"

namespace strata {

STRATA_DEFINE_STUB(index_stub, IndexFn);
STRATA_DEFINE_STUB(mask_indices_stub, MaskIndicesFn);

namespace {

bool is_mask_dtype(ScalarType t) { return t == ScalarType::Bool || t == ScalarType::UInt8; }

// The index tensors after masks were turned into coordinates: one int64
// tensor per indexed dim, all broadcast to b_shape (contiguous unless Meta).
struct Prepared {
  std::vector<Tensor> idx;
  DimVector b_shape;
  int64_t dim = 0;
};

Prepared prepare(const Tensor& self, TensorList indices, int64_t dim, const char* op) {
  const int64_t n = self.dim();
  STRATA_CHECK_INDEX(dim >= 0 && dim <= n, op, ": dim ", dim, " is out of range for a tensor of dimension ", n);
  Prepared p;
  p.dim = dim;
  int64_t d = dim;
  for (const Tensor& t : indices) {
    STRATA_CHECK(t.defined(), op, ": undefined index tensor");
    STRATA_CHECK(t.device() == self.device() || t.device().is_cpu(), op, ": indices should be either on cpu or on "
                 "the same device as the indexed tensor (", self.device().str(), "), got an index on ",
                 t.device().str());
    if (is_mask_dtype(t.dtype())) {
      const int64_t m = t.dim();
      STRATA_CHECK_INDEX(m > 0, op, ": a 0-dim boolean index is not supported by this op (index the tensor from "
                         "Python, or unsqueeze it instead)");
      STRATA_CHECK_INDEX(d + m <= n, op, ": too many indices for tensor of dimension ", n);
      for (int64_t j = 0; j < m; ++j) {
        STRATA_CHECK_INDEX(t.sizes()[j] == self.sizes()[d + j], "The shape of the mask ", t.shape_str(), " at index ",
                           j, " does not match the shape of the indexed tensor ", self.shape_str(), " at index ",
                           d + j);
      }
      if (t.device().is_meta()) {
        throw NotImplementedError(str(op, ": indexing with a boolean mask on the meta device is not supported: the "
                                      "result shape depends on the mask's values"));
      }
      Tensor mask = to_device(t, Device());
      int64_t nnz = mask_indices_stub.get(DeviceType::CPU)(mask, nullptr);
      std::vector<Tensor> rows;
      std::vector<int64_t*> ptrs;
      for (int64_t j = 0; j < m; ++j) {
        rows.push_back(empty_tensor(DimVector{nnz}, ScalarType::Int64, Device()));
        ptrs.push_back(rows.back().data_ptr<int64_t>());
      }
      mask_indices_stub.get(DeviceType::CPU)(mask, ptrs.data());
      for (auto& r : rows) p.idx.push_back(to_device(r, self.device().is_meta() ? Device() : self.device()));
      d += m;
    } else if (t.dtype() == ScalarType::Int64 || t.dtype() == ScalarType::Int32) {
      STRATA_CHECK_INDEX(d + 1 <= n, op, ": too many indices for tensor of dimension ", n);
      p.idx.push_back(t);
      d += 1;
    } else {
      throw IndexError(str(op, ": tensors used as indices must be long, int, byte or bool tensors, got ",
                           dtype_name(t.dtype())));
    }
  }
  DimVector b;
  try {
    for (const Tensor& t : p.idx) b = broadcast_shapes(b, t.sizes(), op);
  } catch (const Error&) {
    std::string shapes;
    for (const Tensor& t : p.idx) shapes += (shapes.empty() ? "" : ", ") + t.shape_str();
    throw IndexError(str(op, ": shape mismatch: indexing tensors could not be broadcast together with shapes ",
                         shapes));
  }
  p.b_shape = b;
  if (!self.device().is_meta()) {
    for (Tensor& t : p.idx) t = contiguous(expand(to_dtype(t, ScalarType::Int64), b));
  }
  return p;
}

DimVector result_shape(const Tensor& self, const Prepared& p) {
  const int64_t k = static_cast<int64_t>(p.idx.size());
  DimVector out(self.sizes().begin(), self.sizes().begin() + p.dim);
  out.insert(out.end(), p.b_shape.begin(), p.b_shape.end());
  out.insert(out.end(), self.sizes().begin() + p.dim + k, self.sizes().end());
  return out;
}

// Fills the geometry of self and of `other` (shape pre + B + post).
IndexKernelArgs make_args(const Tensor& self, const Prepared& p, const Tensor& other) {
  IndexKernelArgs a;
  a.dtype = self.dtype();
  a.self = static_cast<char*>(self.data_ptr());
  a.other = static_cast<char*>(other.data_ptr());
  const int64_t k = static_cast<int64_t>(p.idx.size());
  const int64_t nb = static_cast<int64_t>(p.b_shape.size());
  const int64_t dim = p.dim;
  a.first_dim = dim;
  for (const Tensor& t : p.idx) a.idx.push_back(t.data_ptr<int64_t>());
  for (int64_t i = 0; i < dim; ++i) {
    a.pre_sizes.push_back(self.sizes()[i]);
    a.pre_self_strides.push_back(self.strides()[i]);
    a.pre_other_strides.push_back(other.strides()[i]);
  }
  for (int64_t j = 0; j < k; ++j) {
    a.idx_sizes.push_back(self.sizes()[dim + j]);
    a.idx_strides.push_back(self.strides()[dim + j]);
  }
  for (int64_t j = 0; j < nb; ++j) {
    a.b_sizes.push_back(p.b_shape[j]);
    a.b_other_strides.push_back(other.strides()[dim + j]);
  }
  for (int64_t i = dim + k; i < self.dim(); ++i) {
    a.post_sizes.push_back(self.sizes()[i]);
    a.post_self_strides.push_back(self.strides()[i]);
    a.post_other_strides.push_back(other.strides()[i - k + nb]);
  }
  return a;
}

}  // namespace

Tensor index_impl(const Tensor& self, TensorList indices, int64_t dim) {
  Prepared p = prepare(self, indices, dim, "index");
  Tensor out = empty_tensor(result_shape(self, p), self.dtype(), self.device());
  if (self.device().is_meta()) return out;
  IndexKernelArgs a = make_args(self, p, out);
  a.op = "index";
  a.mode = IndexKernelArgs::Mode::Gather;
  index_stub(self.device().type, a);
  return out;
}
STRATA_IMPL_CPU_META(index, index_impl);

Tensor index_put_impl(const Tensor& self, TensorList indices, const Tensor& values, bool accumulate, int64_t dim) {
  Tensor v = values;
  // A Python number passed as values takes self's dtype, like x[i] = 1.5.
  if (v.impl()->is_wrapped_number()) v = to_dtype(v, self.dtype());
  STRATA_CHECK(v.dtype() == self.dtype(), "index_put_: Index put requires the source and destination dtypes match, "
               "got ", dtype_name(self.dtype()), " for the destination and ", dtype_name(v.dtype()), " for the source.");
  for (int64_t d = 0; d < self.dim(); ++d) {
    STRATA_CHECK(self.strides()[d] != 0 || self.sizes()[d] <= 1, "index_put_: unsupported operation: some elements "
                 "of the input tensor and the written-to tensor refer to a single memory location. Please clone() the "
                 "tensor before performing the operation.");
  }
  Prepared p = prepare(self, indices, dim, "index_put_");
  DimVector res = result_shape(self, p);
  bool fits = v.dim() <= static_cast<int64_t>(res.size());
  for (int64_t i = 0; fits && i < v.dim(); ++i) {
    int64_t have = v.sizes()[v.dim() - 1 - i], want = res[res.size() - 1 - i];
    fits = have == want || have == 1;
  }
  STRATA_CHECK(fits, "index_put_: shape mismatch: value tensor of shape ", v.shape_str(),
               " cannot be broadcast to indexing result of shape ", shape_str(res));
  if (self.device().is_meta()) return self;
  v = to_device(v, self.device());
  // Values that alias self are read from a snapshot.
  if (v.impl()->storage() == self.impl()->storage()) v = clone(v);
  Tensor ve = expand(v, res);
  IndexKernelArgs a = make_args(self, p, ve);
  a.op = "index_put_";
  a.mode = accumulate ? IndexKernelArgs::Mode::Accumulate : IndexKernelArgs::Mode::Put;
  a.ordered = deterministic_algorithms();
  index_stub(self.device().type, a);
  self.bump_version();
  return self;
}
STRATA_IMPL_CPU_META(index_put_, index_put_impl);

Tensor index_put_out_of_place(const Tensor& self, TensorList indices, const Tensor& values, bool accumulate,
                              int64_t dim) {
  return index_put_(clone(self), indices, values, accumulate, dim);
}
STRATA_IMPL_COMPOSITE(index_put, index_put_out_of_place);

}  // namespace strata
