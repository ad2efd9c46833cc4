#include "sparse/sparse.h"

#include <atomic>

#include "autograd/variable.h"
#include "nested/nested.h"
#include "sparse/quantized.h"
#include "core/error.h"

namespace strata::sparse {

namespace {

DimVector contiguous_strides(IntArrayRef sizes) {
  DimVector st(sizes.size());
  int64_t s = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    st[i] = s;
    s *= std::max<int64_t>(sizes[i], 1);
  }
  return st;
}

std::atomic<SparseHandler> g_handler{nullptr};

std::string shape_of(IntArrayRef s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

void sparse_fallback(const OperatorEntry& op, DispatchKeySet, Stack& stack) {
  if (SparseHandler h = g_handler.load(std::memory_order_acquire)) {
    if (h(op, stack)) return;
  }
  const std::string which =
      first_argument_where(op, stack, [](const Tensor& t) { return maybe_sparse(t) != nullptr; });
  throw NotImplementedError(str("Could not run '", op.schema().full_name(), "' with a sparse tensor (layout ",
                                "strata.sparse_coo) for argument '", which, "': this op has no sparse ",
                                "implementation. Convert with .to_dense() first, or see docs/SPARSE.md for the ",
                                "ops that take sparse tensors."));
}

FallbackRegistrar g_sparse_layer(kSparseKey, KernelFunction::make_boxed(&sparse_fallback, "sparse"));

}  // namespace

std::string first_argument_where(const OperatorEntry& op, const Stack& stack, bool (*is_layout)(const Tensor&)) {
  const auto& args = op.schema().args;
  const size_t base = stack.size() - args.size();
  for (size_t i = 0; i < args.size(); ++i) {
    const IValue& v = stack[base + i];
    bool hit = v.is_tensor() && is_layout(v.to_tensor());
    if (v.is_tensor_list())
      for (const Tensor& t : v.to_tensor_list()) hit = hit || is_layout(t);
    if (hit) return args[i].name;
  }
  return {};
}

SparseTensorImpl::SparseTensorImpl(Tensor indices, Tensor values, IntArrayRef sizes, bool coalesced)
    : TensorImpl(make_storage(0, values.device()), 0, sizes, contiguous_strides(sizes), values.dtype()),
      indices_(std::move(indices)),
      values_(std::move(values)),
      coalesced_(coalesced) {
  set_key_set(values_.key_set().add(kSparseKey));
  set_autograd_meta(values_.impl()->autograd_meta_ptr());
}

SparseTensorImpl* maybe_sparse(const Tensor& t) {
  if (!t.defined() || !t.key_set().has(kSparseKey)) return nullptr;
  return dynamic_cast<SparseTensorImpl*>(t.impl());
}

Tensor make_sparse_coo(Tensor indices, Tensor values, IntArrayRef sizes, bool coalesced) {
  STRATA_CHECK(!maybe_sparse(indices) && !maybe_sparse(values),
               "sparse_coo_tensor(): indices and values must be dense tensors");
  STRATA_CHECK(indices.dtype() == ScalarType::Int64, "sparse_coo_tensor(): indices must be an int64 tensor, got ",
               dtype_name(indices.dtype()));
  STRATA_CHECK(indices.dim() == 2, "sparse_coo_tensor(): indices must be sparse_dim x nnz, but got: ",
               shape_of(indices.sizes()));
  STRATA_CHECK(values.dim() >= 1, "sparse_coo_tensor(): values must have at least one dimension (nnz), got ",
               shape_of(values.sizes()));
  STRATA_CHECK(indices.size(1) == values.size(0), "sparse_coo_tensor(): number of dimensions of indices (nnz = ",
               indices.size(1), ") must match the first dimension of values (", values.size(0), ")");
  const int64_t sd = indices.size(0), dd = values.dim() - 1;
  STRATA_CHECK(static_cast<int64_t>(sizes.size()) == sd + dd, "sparse_coo_tensor(): number of dimensions must be ",
               "sparse_dim (", sd, ") + dense_dim (", dd, "), but got ", sizes.size());
  for (int64_t d = 0; d < dd; ++d)
    STRATA_CHECK(values.size(d + 1) == sizes[sd + d], "sparse_coo_tensor(): values has size ",
                 shape_of(values.sizes()), " but the dense sizes are ", shape_of(sizes.subspan(sd)));
  for (int64_t s : sizes) STRATA_CHECK(s >= 0, "sparse_coo_tensor(): negative size in ", shape_of(sizes));
  STRATA_CHECK(indices.device() == values.device(), "sparse_coo_tensor(): indices are on ", indices.device().str(),
               " but values are on ", values.device().str());
  return Tensor(make_intrusive<SparseTensorImpl>(std::move(indices), std::move(values), sizes, coalesced));
}

Tensor detach_sparse(const Tensor& t) {
  SparseTensorImpl* s = maybe_sparse(t);
  STRATA_CHECK(s, "detach_sparse: expected a sparse tensor");
  return make_sparse_coo(s->indices(), autograd::alias_without_history(s->values()), t.sizes(), s->coalesced());
}

void set_sparse_handler(SparseHandler h) { g_handler.store(h, std::memory_order_release); }

void check_dense(const Tensor& t, const char* what) {
  STRATA_CHECK(!maybe_sparse(t), what, "(): not supported for sparse tensors (layout strata.sparse_coo); ",
               "call .to_dense() first");
  STRATA_CHECK(!t.key_set().has(nested::kNestedKey), what, "(): not supported for nested tensors (layout ",
               "strata.jagged); use .unbind() or .values() first");
  STRATA_CHECK(!maybe_quantized(t), what, "(): not supported for quantized tensors; call .dequantize() or ",
               ".int_repr() first");
}

}  // namespace strata::sparse
