// Note [Batched tensors and the Vmap key]
// strata.vmap runs a function once on batched tensors instead of once per
// batch entry. A batched tensor is a BatchedTensorImpl: it wraps a physical
// tensor (the real data, with the batch dimension at `bdim`) and records the
// vmap level it belongs to; its own sizes are the logical ones (the physical
// sizes without bdim). Its key set is the physical one plus Vmap, so every op
// that reads one reaches vmap_fallback (src/vmap/vmap.cpp) before autograd and
// the backends. The fallback finds the highest level among the arguments,
// then, in order:
//   1. runs the op's batching rule, if one is registered and accepts the call
//      (it moves batch dims, calls the op on the physical tensors, rewraps);
//   2. for a composite op without writes, runs its composite kernel on the
//      batched tensors, so that the ops it is made of meet their rules;
//   3. otherwise slices every batch entry, calls the op per entry, stacks the
//      results, and records a one-time performance warning for that op.
// Nested vmap = nested wrappers: the physical tensor of a level-2 wrapper may
// be a level-1 wrapper, and a wrapper always has a higher level than anything
// inside it. Ops on physical tensors go through the dispatcher again, so the
// inner levels are handled by the same fallback.
//
// While any vmap is active, Vmap is also in the thread's included key set:
// random ops with no batched input (strata.rand inside vmap) reach the
// fallback, which applies the level's randomness mode. When no vmap is active
// and no tensor is batched, Vmap is absent from every key set and the
// dispatcher does exactly what it did before (no extra work on the tiny-op
// path).
//
// The wrapper's storage, offset and strides are those of the physical tensor
// without bdim (a view of batch entry 0), so device() and the storage version
// counter are right; code that reads the data of a batched tensor directly
// (item(), printing) is refused by the Python layer instead of seeing entry 0.
// Its autograd metadata is the physical tensor's (shared), so requires_grad
// and grad_fn read through; strata.autograd.grad unwraps batched tensors to
// their physical ones (python/strata/func/_vmap.py).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace strata::vmap {

class BatchedTensorImpl : public TensorImpl {
 public:
  BatchedTensorImpl(Tensor value, int64_t bdim, int64_t level);
  const Tensor& value() const { return value_; }
  int64_t bdim() const { return bdim_; }
  int64_t level() const { return level_; }

 private:
  Tensor value_;
  int64_t bdim_;
  int64_t level_;
};

// What Tensor::item() says about a batched tensor (src/core/tensor.cpp).
inline constexpr const char* kItemOfBatched = "vmap: item() on a batched tensor is not supported";

enum class Randomness : int { Error = 0, Different = 1, Same = 2 };

struct LevelInfo {
  int64_t level;
  int64_t batch_size;
  Randomness randomness;
};

// The wrapper if t is batched (at any level), else null.
BatchedTensorImpl* maybe_batched(const Tensor& t);
// t wrapped as a batched tensor of `level` with the batch at physical dim bdim.
Tensor make_batched(Tensor physical, int64_t bdim, int64_t level);
// Enters a vmap level (returns its number) / leaves the innermost one.
int64_t push_level(int64_t batch_size, Randomness r);
void pop_level();
const std::vector<LevelInfo>& active_levels();
// t at `level` as (physical, bdim); bdim is nullopt when t is not batched there.
std::pair<Tensor, std::optional<int64_t>> unwrap_at(const Tensor& t, int64_t level);
// The logical tensor of `level` back as a plain tensor with the batch at
// out_dim (expanded when t is not batched at that level).
Tensor remove_batch_dim(const Tensor& t, int64_t level, int64_t batch_size, int64_t out_dim);
// Performance warnings recorded since the last call (one per op, ever).
std::vector<std::string> take_warnings();
// How many calls took the per-entry loop for want of a rule (tests use it to
// check that a rule ran).
int64_t slow_path_calls();
// Every op warns again (tests).
void forget_warnings();

}  // namespace strata::vmap
