// linear, embedding, one_hot.
#include "ops/fused_backward_kernels.h"
#include "ops/nn_util.h"
#include "ops/op_list.h"

namespace strata {

STRATA_DEFINE_STUB(nn_linear_stub, nn::LinearFn);
STRATA_DEFINE_STUB(nn_minmax_stub, nn::MinMaxFn);
STRATA_DEFINE_STUB(nn_embedding_stub, nn::EmbeddingFn);
STRATA_DEFINE_STUB(nn_one_hot_stub, nn::OneHotFn);
STRATA_DEFINE_STUB(nn_embedding_bag_stub, nn::EmbeddingBagFn);
STRATA_DEFINE_STUB(nn_embedding_renorm_stub, nn::EmbeddingRenormFn);
STRATA_DEFINE_STUB(nn_embedding_backward_stub, nn::EmbeddingBackwardFn);

using namespace nn;

// Implementations live in strata::nn so their names cannot clash with other families.
namespace nn {

Tensor linear_impl(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias) {
  const char* op = "linear";
  STRATA_CHECK(input.dim() >= 1, "linear: input must have at least 1 dimension, but got a 0-d tensor");
  STRATA_CHECK(weight.dim() == 1 || weight.dim() == 2, "linear: weight must be 1-D or 2-D, but got weight of shape ",
               weight.shape_str());
  check_same_dtype(op, input, "input", weight, "weight");
  if (has(bias)) check_same_dtype(op, input, "input", *bias, "bias");
  check_floating(op, input, "input");
  Device dev = check_devices(op, {input, weight, has(bias) ? *bias : Tensor()});
  const int64_t k = input.size(-1);
  const int64_t n = weight.dim() == 2 ? weight.size(0) : 1;
  const int64_t wk = weight.size(-1);
  DimVector lead(input.sizes().begin(), input.sizes().end() - 1);
  const int64_t rows = checked_numel(lead, op);
  STRATA_CHECK(wk == k, "linear: mat1 and mat2 shapes cannot be multiplied (", rows, "x", k, " and ", wk, "x", n,
               ") for input of shape ", input.shape_str(), " and weight of shape ", weight.shape_str());
  DimVector out_shape = lead;
  if (weight.dim() == 2) out_shape.push_back(n);
  const bool fast_bias = has(bias) && bias->dim() == 1 && bias->size(0) == n && weight.dim() == 2;
  if (has(bias) && !fast_bias) {
    // Anything else must broadcast to the output (torch's addmm rule).
    bool ok = bias->dim() <= static_cast<int64_t>(out_shape.size());
    for (int64_t i = 1; ok && i <= bias->dim(); ++i) {
      const int64_t b = bias->size(-i), o = out_shape[out_shape.size() - i];
      ok = b == o || b == 1;
    }
    STRATA_CHECK(ok, "linear: bias of shape ", bias->shape_str(), " cannot be broadcast to the output shape ",
                 shape_str(out_shape), " (weight of shape ", weight.shape_str(), ")");
  }
  if (dev.is_meta()) return empty_tensor(out_shape, input.dtype(), dev);
  const ScalarType ct = compute_type(input.dtype());
  Tensor y = empty_tensor(std::vector<int64_t>{rows, n}, ct, dev);
  if (y.numel() > 0) {
    Tensor x = prep(input, ct), w = prep(weight, ct);
    Tensor b = fast_bias ? prep(*bias, ct) : Tensor();
    nn_linear_stub(dev.type, x, w, b, y, rows, n, k);
  }
  Tensor out = reshape_contig(y, out_shape);
  if (has(bias) && !fast_bias) out = add(out, to_dtype(*bias, ct));
  return to_dtype(out, input.dtype());
}
STRATA_IMPL_CPU_META(linear, linear_impl);

namespace {
Tensor index_tensor(const char* op, const Tensor& idx, const char* what) {
  STRATA_CHECK(idx.dtype() == ScalarType::Int64 || idx.dtype() == ScalarType::Int32, op, ": expected ", what,
               " to have one of the following scalar types: Long, Int; but got a ", idx.describe());
  return prep(idx, ScalarType::Int64);
}
}  // namespace

Tensor embedding_impl(const Tensor& weight, const Tensor& indices, int64_t padding_idx, bool, bool) {
  const char* op = "embedding";
  STRATA_CHECK(weight.dim() == 2, "embedding: 'weight' must be 2-D, but got weight of shape ", weight.shape_str());
  Device dev = check_devices(op, {weight, indices});
  DimVector out_shape(indices.sizes().begin(), indices.sizes().end());
  out_shape.push_back(weight.size(1));
  Tensor idx = index_tensor(op, indices, "indices");
  if (dev.is_meta()) return empty_tensor(out_shape, weight.dtype(), dev);
  Tensor out = empty_tensor(out_shape, weight.dtype(), dev);
  if (idx.numel() == 0) return out;
  int64_t lo = 0, hi = 0;
  nn_minmax_stub(dev.type, idx, &lo, &hi);
  const int64_t v = weight.size(0);
  STRATA_CHECK_INDEX(lo >= 0 && hi < v, "embedding: index out of range in self (indices range over [", lo, ", ", hi,
                     "] but weight has ", v, " rows)");
  if (out.numel() > 0) nn_embedding_stub(dev.type, contiguous(weight), idx, out);
  return out;
}
STRATA_IMPL_CPU_META(embedding, embedding_impl);

// F.embedding_bag (python/strata/nn/_functional_nn_ops.py prepares offsets as bags + 1 boundaries).
Tensor3 embedding_bag_impl(const Tensor& weight, const Tensor& indices, const Tensor& offsets, int64_t mode,
                           const std::optional<Tensor>& per_sample_weights, int64_t padding_idx, bool) {
  const char* op = "_embedding_bag";
  STRATA_CHECK(weight.dim() == 2, op, ": weight has to be a 2D Tensor, but got weight of shape ", weight.shape_str());
  STRATA_CHECK(indices.dim() == 1 && offsets.dim() == 1 && offsets.numel() >= 1, op,
               ": expected 1-D indices and 1-D offsets of at least one boundary, but got indices of shape ",
               indices.shape_str(), " and offsets of shape ", offsets.shape_str());
  STRATA_CHECK(mode >= 0 && mode <= 2, op, ": mode must be 0 (sum), 1 (mean) or 2 (max), but got ", mode);
  check_floating(op, weight, "weight");
  const bool has_psw = has(per_sample_weights);
  if (has_psw) {
    STRATA_CHECK(mode == 0, op, ": per_sample_weights is only supported for mode sum, but got mode ", mode);
    STRATA_CHECK(per_sample_weights->dim() == 1 && per_sample_weights->numel() == indices.numel(), op,
                 ": per_sample_weights of shape ", per_sample_weights->shape_str(), " must have the shape of indices ",
                 indices.shape_str());
    check_same_dtype(op, weight, "weight", *per_sample_weights, "per_sample_weights");
  }
  Device dev = check_devices(op, {weight, indices, offsets, has_psw ? *per_sample_weights : Tensor()});
  Tensor idx = index_tensor(op, indices, "indices");
  Tensor off = index_tensor(op, offsets, "offsets");
  const int64_t n = idx.numel(), bags = off.numel() - 1, v = weight.size(0), d = weight.size(1);
  const ScalarType wt = weight.dtype();
  const DimVector oshape{bags, d};
  const DimVector ashape = mode == 2 ? oshape : DimVector{n};
  const ScalarType at = mode == 2 ? ScalarType::Int64 : wt;
  if (dev.is_meta()) {
    return {empty_tensor(oshape, wt, dev), empty_tensor(DimVector{n}, ScalarType::Int64, dev),
            empty_tensor(ashape, at, dev)};
  }
  if (n > 0) {
    int64_t lo = 0, hi = 0;
    nn_minmax_stub(dev.type, idx, &lo, &hi);
    STRATA_CHECK_INDEX(lo >= 0 && hi < v, "embedding_bag: index out of range in self (indices range over [", lo, ", ",
                       hi, "] but weight has ", v, " rows)");
  }
  // Boundaries clamped to [0, n]; a bag that would end before it starts is empty (the kernel takes max(start, end)).
  Tensor bounds = empty_tensor(DimVector{bags + 1}, ScalarType::Int64, dev);
  {
    const int64_t* src = off.data_ptr<int64_t>();
    int64_t* dst = bounds.data_ptr<int64_t>();
    for (int64_t b = 0; b <= bags; ++b) dst[b] = std::clamp<int64_t>(src[b], 0, n);
  }
  const ScalarType ct = compute_type(wt);
  Tensor out = empty_tensor(oshape, ct, dev);
  Tensor o2b = empty_tensor(DimVector{n}, ScalarType::Int64, dev);
  Tensor aux = empty_tensor(ashape, mode == 2 ? ScalarType::Int64 : ct, dev);
  Tensor psw = has_psw ? prep(*per_sample_weights, ct) : Tensor();
  nn_embedding_bag_stub(dev.type, prep(weight, ct), idx, bounds, mode, psw, padding_idx, out, o2b, aux);
  if (ct != wt) {
    out = to_dtype(out, wt);
    if (mode != 2) aux = to_dtype(aux, wt);
  }
  return {out, o2b, aux};
}
STRATA_IMPL_CPU_META(_embedding_bag, embedding_bag_impl);

// Used by embedding's derivative when no graph of the backward is recorded (the composite index_add formula
// stays for double backward). A negative padding_idx matches no index.
Tensor embedding_dense_backward_impl(const Tensor& grad_output, const Tensor& indices, int64_t num_weights,
                                     int64_t padding_idx, bool scale_grad_by_freq) {
  const char* op = "_embedding_dense_backward";
  STRATA_CHECK(grad_output.dim() >= 1, op, ": expected grad_output with at least 1 dimension, but got a 0-d tensor");
  check_floating(op, grad_output, "grad_output");
  STRATA_CHECK(num_weights >= 0, op, ": num_weights must be non-negative, but got ", num_weights);
  const int64_t d = grad_output.size(-1);
  STRATA_CHECK(grad_output.numel() == indices.numel() * d, op, ": expected grad_output of size indices.shape + [",
               d, "] (indices of shape ", indices.shape_str(), "), but got ", grad_output.shape_str());
  Device dev = check_devices(op, {grad_output, indices});
  Tensor idx = index_tensor(op, indices, "indices");
  const DimVector oshape{num_weights, d};
  if (dev.is_meta()) return empty_tensor(oshape, grad_output.dtype(), dev);
  if (idx.numel() > 0) {
    int64_t lo = 0, hi = 0;
    nn_minmax_stub(dev.type, idx, &lo, &hi);
    STRATA_CHECK_INDEX(lo >= 0 && hi < num_weights, op, ": index out of range (indices range over [", lo, ", ", hi,
                       "] but num_weights is ", num_weights, ")");
  }
  const ScalarType ct = compute_type(grad_output.dtype());
  Tensor out = empty_tensor(oshape, ct, dev);
  if (out.numel() > 0) {
    nn_embedding_backward_stub(dev.type, reshape_contig(prep(grad_output, ct), DimVector{indices.numel(), d}),
                               reshape_contig(idx, DimVector{idx.numel()}), out, padding_idx, scale_grad_by_freq);
  }
  return to_dtype(out, grad_output.dtype());
}
STRATA_IMPL_CPU_META(_embedding_dense_backward, embedding_dense_backward_impl);

// F.embedding(max_norm=...): renormalises the looked-up rows of weight in place first.
Tensor embedding_renorm_impl(const Tensor& self, const Tensor& indices, double max_norm, double norm_type) {
  const char* op = "embedding_renorm_";
  STRATA_CHECK(self.dim() == 2, op, ": 'self' must be 2-D, but got weight of shape ", self.shape_str());
  check_floating(op, self, "weight");
  STRATA_CHECK(max_norm >= 0 && norm_type > 0, op, ": expected max_norm >= 0 and norm_type > 0, but got max_norm=",
               max_norm, " and norm_type=", norm_type);
  Device dev = check_devices(op, {self, indices});
  Tensor idx = index_tensor(op, indices, "indices");
  if (dev.is_meta() || idx.numel() == 0) return self;
  int64_t lo = 0, hi = 0;
  nn_minmax_stub(dev.type, idx, &lo, &hi);
  STRATA_CHECK_INDEX(lo >= 0 && hi < self.size(0), op, ": index out of range in self (indices range over [", lo, ", ",
                     hi, "] but weight has ", self.size(0), " rows)");
  const ScalarType ct = compute_type(self.dtype());
  Tensor w = prep(self, ct);
  nn_embedding_renorm_stub(dev.type, w, idx, max_norm, norm_type);
  if (w.is_same(self)) self.bump_version();
  else copy_(self, w);
  return self;
}
STRATA_IMPL_CPU_META(embedding_renorm_, embedding_renorm_impl);

Tensor one_hot_impl(const Tensor& input, int64_t num_classes) {
  const char* op = "one_hot";
  STRATA_CHECK(input.dtype() == ScalarType::Int64, "one_hot is only applicable to index tensor of type LongTensor "
               "(int64), but got a ", input.describe());
  STRATA_CHECK(num_classes >= -1, "one_hot: num_classes should be positive or -1, but got ", num_classes);
  Device dev = input.device();
  if (dev.is_meta()) {
    STRATA_CHECK(num_classes != -1, "one_hot: cannot infer num_classes (num_classes=-1) on the meta device");
    DimVector s(input.sizes().begin(), input.sizes().end());
    s.push_back(num_classes);
    return empty_tensor(s, ScalarType::Int64, dev);
  }
  Tensor idx = contiguous(input);
  int64_t lo = 0, hi = -1;
  if (idx.numel() > 0) {
    nn_minmax_stub(dev.type, idx, &lo, &hi);
  } else {
    STRATA_CHECK(num_classes != -1, op, ": Can not infer total number of classes from empty tensor.");
  }
  STRATA_CHECK(lo >= 0, op, ": Class values must be non-negative (got ", lo, ").");
  if (num_classes == -1) num_classes = hi + 1;
  STRATA_CHECK(hi < num_classes, op, ": Class values must be smaller than num_classes (got ", hi,
               " with num_classes=", num_classes, ").");
  DimVector s(input.sizes().begin(), input.sizes().end());
  s.push_back(num_classes);
  Tensor out = empty_tensor(s, ScalarType::Int64, dev);
  if (out.numel() > 0) nn_one_hot_stub(dev.type, idx, out, num_classes);
  return out;
}
STRATA_IMPL_CPU_META(one_hot, one_hot_impl);

}  // namespace nn
}  // namespace strata
