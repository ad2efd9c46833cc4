// The geometry handed from the device-generic index/index_put_ code
// (ops/index.cpp) to the per-device kernels.
#pragma once

#include <vector>

#include "core/tensor.h"
#include "ops/stub.h"

namespace strata {

// Note [Index geometry]
// self is viewed as pre + indexed + post dims; the indexed dims are replaced
// by the broadcast index shape B. `other` (the output for a gather, the
// values for a put) has shape pre + B + post. For each (pre, B) position the
// kernel copies one block of post-shaped elements between self and other.
struct IndexKernelArgs {
  enum class Mode { Gather, Put, Accumulate };
  Mode mode = Mode::Gather;
  // Put: write on one thread, in index order (the last of duplicate indices
  // wins), instead of threads racing on duplicates (deterministic algorithms).
  bool ordered = false;
  const char* op = "index";
  ScalarType dtype = ScalarType::Float32;
  char* self = nullptr;   // at self's storage offset
  char* other = nullptr;  // at other's storage offset
  // One int64 array of numel(B) entries per indexed dim (contiguous over B).
  std::vector<const int64_t*> idx;
  DimVector idx_sizes, idx_strides;  // self's size and stride of each indexed dim
  int64_t first_dim = 0;             // self dim of idx[0], for messages
  DimVector pre_sizes, pre_self_strides, pre_other_strides;
  DimVector b_sizes, b_other_strides;
  DimVector post_sizes, post_self_strides, post_other_strides;
};
using IndexFn = void (*)(const IndexKernelArgs&);

// Row-major positions of the nonzero elements of a bool/uint8 mask: fills
// rows[j][i] with the j-th coordinate of the i-th nonzero element. With
// rows == nullptr it only counts them. Returns the count.
using MaskIndicesFn = int64_t (*)(const Tensor& mask, int64_t* const* rows);

STRATA_DECLARE_STUB(index_stub, IndexFn);
STRATA_DECLARE_STUB(mask_indices_stub, MaskIndicesFn);

}  // namespace strata
