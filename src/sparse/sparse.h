// Note [Sparse COO tensors and the Sparse key]
// A sparse COO tensor is a SparseTensorImpl: it holds two dense tensors,
// indices (int64, [sparse_dim, nnz]) and values ([nnz, *dense_sizes]), and its
// own sizes are the logical ones (sparse sizes then dense sizes). It owns no
// element memory: its storage is an empty allocation on the values' device,
// so nothing can read elements through it. Its key set is the values' one
// plus the Sparse key (kSparseKey), the highest functionality key in use, so every op that is given
// a sparse tensor reaches sparse_fallback (sparse.cpp) before autograd and the
// backends. The fallback offers the call to a handler installed by the Python
// layer (python/strata/_sparse.py implements the supported ops on indices and
// values with dense ops); what the handler declines raises NotImplementedError
// naming the op and the layout. With no sparse tensor in a call the key is
// absent and dispatch is unchanged. Autograd metadata is shared with the values
// at construction (requires_grad/grad_fn read through), as batched tensors do.
// See docs/SPARSE.md.
#pragma once

#include "core/tensor.h"
#include "dispatch/dispatcher.h"

namespace strata::sparse {

// The Sparse functionality key (42: above Profiler, below Quantized and Nested).
inline constexpr DispatchKey kSparseKey = DispatchKey::Sparse;

class SparseTensorImpl : public TensorImpl {
 public:
  SparseTensorImpl(Tensor indices, Tensor values, IntArrayRef sizes, bool coalesced);
  const Tensor& indices() const { return indices_; }
  const Tensor& values() const { return values_; }
  int64_t sparse_dim() const { return indices_.size(0); }
  int64_t dense_dim() const { return values_.dim() - 1; }
  int64_t nnz() const { return values_.size(0); }
  bool coalesced() const { return coalesced_; }
  void set_coalesced(bool c) { coalesced_ = c; }

 private:
  Tensor indices_;
  Tensor values_;
  bool coalesced_;
};

// The impl if t is sparse, else null.
SparseTensorImpl* maybe_sparse(const Tensor& t);
// Checks shapes (not index bounds: that is check_invariants' job, in Python).
Tensor make_sparse_coo(Tensor indices, Tensor values, IntArrayRef sizes, bool coalesced);

// Called by the fallback with the op's arguments on top of the stack; returns
// false to decline (the fallback then raises). Installed by the Python binding.
using SparseHandler = bool (*)(const OperatorEntry& op, Stack& stack);
void set_sparse_handler(SparseHandler h);

// detach() of a sparse tensor: the same indices, the values without history.
Tensor detach_sparse(const Tensor& t);

// The name of the first argument (a tensor or in a tensor list) for which `is_layout` holds: the argument a
// layout key's fallback (sparse, nested) names when it refuses an op. The op's arguments are on top of `stack`.
std::string first_argument_where(const OperatorEntry& op, const Stack& stack, bool (*is_layout)(const Tensor&));

// "tolist(): not supported for sparse tensors ..." unless t is dense (not sparse, not quantized).
void check_dense(const Tensor& t, const char* what);

}  // namespace strata::sparse
