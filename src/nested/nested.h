// Note [Nested (jagged) tensors and the Nested key]
// A nested tensor in torch's jagged layout is a NestedTensorImpl: a batch of B
// tensors that differ in the length of one dimension (the ragged one), packed
// into one dense `values` tensor whose dimension ragged_idx - 1 holds the B
// pieces one after another, plus int64 `offsets` (B + 1 entries: piece i is
// values.narrow(ragged_idx - 1, offsets[i], offsets[i + 1] - offsets[i])) and
// optional `lengths` (pieces with holes, from nested_tensor_from_jagged(...,
// lengths=) or narrow()). The logical shape is (B, ..., j, ...): values' sizes
// with the packed dim replaced by the ragged one and the batch dim in front.
// The impl stores 0 for the ragged size (it has no single value; Python's
// shape reports a symbolic nested int, docs/NESTED.md) and owns no element
// memory (an empty storage on the values' device). Its key set is the values'
// plus the Nested key, so every op given a nested tensor reaches
// nested_fallback (nested.cpp) before autograd: the fallback offers the call to
// a handler installed by python/strata/_nested.py, which implements the
// supported ops with dense ops on the values (so autograd is theirs); what it
// declines raises NotImplementedError naming the op and the layout.
// Autograd metadata is shared with the values (as sparse tensors do).
#pragma once

#include "core/tensor.h"
#include "dispatch/dispatcher.h"

namespace strata::nested {

// The Nested functionality key (44; Sparse and Quantized are 42 and 43).
inline constexpr DispatchKey kNestedKey = DispatchKey::Nested;

class NestedTensorImpl : public TensorImpl {
 public:
  NestedTensorImpl(Tensor values, Tensor offsets, Tensor lengths, int64_t ragged_idx, IntArrayRef sizes);
  const Tensor& values() const { return values_; }
  const Tensor& offsets() const { return offsets_; }
  const Tensor& lengths() const { return lengths_; }  // undefined when the pieces are contiguous
  int64_t ragged_idx() const { return ragged_idx_; }

 private:
  Tensor values_;
  Tensor offsets_;
  Tensor lengths_;
  int64_t ragged_idx_;
};

// The impl if t is nested, else null.
NestedTensorImpl* maybe_nested(const Tensor& t);
// Checks the parts agree (dims, dtypes, devices, offsets' length); not the
// offsets' values (Python checks those where it builds them).
Tensor make_nested(Tensor values, Tensor offsets, Tensor lengths, int64_t ragged_idx);

using NestedHandler = bool (*)(const OperatorEntry& op, Stack& stack);
void set_nested_handler(NestedHandler h);

// detach() / .data of a nested tensor: the same structure, values without history.
Tensor detach_nested(const Tensor& t);

}  // namespace strata::nested
