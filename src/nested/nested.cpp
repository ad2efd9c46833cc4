#include "nested/nested.h"

#include <atomic>

#include "autograd/variable.h"
#include "core/error.h"
#include "core/shape.h"
#include "sparse/sparse.h"

namespace strata::nested {

namespace {

std::atomic<NestedHandler> g_handler{nullptr};

DimVector logical_sizes(const Tensor& values, const Tensor& offsets, int64_t ragged_idx) {
  DimVector s;
  s.push_back(offsets.size(0) - 1);
  for (int64_t d = 0; d < values.dim(); ++d) s.push_back(d == ragged_idx - 1 ? 0 : values.size(d));
  return s;
}

void nested_fallback(const OperatorEntry& op, DispatchKeySet, Stack& stack) {
  if (NestedHandler h = g_handler.load(std::memory_order_acquire)) {
    if (h(op, stack)) return;
  }
  const std::string which =
      sparse::first_argument_where(op, stack, [](const Tensor& t) { return maybe_nested(t) != nullptr; });
  throw NotImplementedError(str("Could not run '", op.schema().full_name(), "' with a nested tensor (layout ",
                                "strata.jagged) for argument '", which, "': this op has no nested ",
                                "implementation. Work on nt.values() or nt.unbind(), or see docs/NESTED.md for ",
                                "the ops that take nested tensors."));
}

FallbackRegistrar g_nested_layer(kNestedKey, KernelFunction::make_boxed(&nested_fallback, "nested"));

}  // namespace

NestedTensorImpl::NestedTensorImpl(Tensor values, Tensor offsets, Tensor lengths, int64_t ragged_idx,
                                   IntArrayRef sizes)
    : TensorImpl(make_storage(0, values.device()), 0, sizes, contiguous_strides(sizes), values.dtype()),
      values_(std::move(values)),
      offsets_(std::move(offsets)),
      lengths_(std::move(lengths)),
      ragged_idx_(ragged_idx) {
  set_key_set(values_.key_set().add(kNestedKey));
  set_autograd_meta(values_.impl()->autograd_meta_ptr());
}

NestedTensorImpl* maybe_nested(const Tensor& t) {
  if (!t.defined() || !t.key_set().has(kNestedKey)) return nullptr;
  return dynamic_cast<NestedTensorImpl*>(t.impl());
}

Tensor make_nested(Tensor values, Tensor offsets, Tensor lengths, int64_t ragged_idx) {
  STRATA_CHECK(!maybe_nested(values) && !maybe_nested(offsets) && !maybe_nested(lengths),
               "nested_tensor_from_jagged(): values, offsets and lengths must be dense tensors");
  STRATA_CHECK(values.dim() >= 1, "nested_tensor_from_jagged(): values must have at least one dimension");
  STRATA_CHECK(offsets.dim() == 1 && offsets.size(0) >= 1,
               "nested_tensor_from_jagged(): offsets must be a 1-D tensor of B + 1 entries");
  STRATA_CHECK(offsets.dtype() == ScalarType::Int64, "nested_tensor_from_jagged(): offsets must be int64, got ",
               dtype_name(offsets.dtype()));
  STRATA_CHECK(ragged_idx >= 1 && ragged_idx <= values.dim(), "nested_tensor_from_jagged(): jagged_dim ",
               ragged_idx, " is out of range for values with ", values.dim(), " dims (expected 1..", values.dim(),
               ")");
  if (lengths.defined()) {
    STRATA_CHECK(lengths.dim() == 1 && lengths.size(0) == offsets.size(0) - 1,
                 "nested_tensor_from_jagged(): lengths must be 1-D with B = ", offsets.size(0) - 1, " entries");
    STRATA_CHECK(lengths.dtype() == ScalarType::Int64, "nested_tensor_from_jagged(): lengths must be int64");
  }
  STRATA_CHECK(offsets.device() == values.device(), "nested_tensor_from_jagged(): offsets are on ",
               offsets.device().str(), " but values are on ", values.device().str());
  DimVector sizes = logical_sizes(values, offsets, ragged_idx);
  return Tensor(make_intrusive<NestedTensorImpl>(std::move(values), std::move(offsets), std::move(lengths),
                                                 ragged_idx, sizes));
}

Tensor detach_nested(const Tensor& t) {
  NestedTensorImpl* n = maybe_nested(t);
  STRATA_CHECK(n, "detach_nested: expected a nested tensor");
  return make_nested(autograd::alias_without_history(n->values()), n->offsets(), n->lengths(), n->ragged_idx());
}

void set_nested_handler(NestedHandler h) { g_handler.store(h, std::memory_order_release); }

}  // namespace strata::nested
