// Kernel stubs of the fused cross_entropy and embedding backward ops
// (decl/nn_backward.def). Contiguous float32/float64 operands only.
#pragma once

#include "ops/nn_kernels.h"

namespace strata::nn {

// go: 0-d (mean/sum) or (n, d) (none); x and gx (n, c, d); target (n, d) int64
// (validated) or, when `probs`, like x; weight (c) or undefined.
using CrossEntropyBackwardFn = void (*)(const Tensor& go, const Tensor& x, const Tensor& target, const Tensor& weight,
                                        const Tensor& gx, const ClassLossArgs& a, bool probs);
// grad (m, d), idx (m) int64 in [0, v) (validated), out (v, d).
using EmbeddingBackwardFn = void (*)(const Tensor& grad, const Tensor& idx, const Tensor& out, int64_t padding_idx,
                                     bool scale_grad_by_freq);

}  // namespace strata::nn

namespace strata {
STRATA_DECLARE_STUB(nn_cross_entropy_backward_stub, nn::CrossEntropyBackwardFn);
STRATA_DECLARE_STUB(nn_embedding_backward_stub, nn::EmbeddingBackwardFn);
}  // namespace strata
