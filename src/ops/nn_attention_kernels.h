// Kernel interface of scaled_dot_product_attention and its fused backward
// (ops/nn_attention.cpp; CPU kernels in backends/cpu/kernels/attention_kernels.cpp).
//
// Unlike the other nn kernels these take strided operands: the heads of a
// transformer are usually view(B, T, H, D).transpose(1, 2) views, whose rows
// are contiguous but H * D apart, and the GEMMs read them in place through
// their leading dimension instead of copying every q, k, v (and gradient) to a
// contiguous tensor. Every matrix operand has a unit stride along its last dim
// and a valid row stride (>= its row length); its batch dims may have any
// strides (0 where broadcast), given per flattened batch index as an offset.
#pragma once

#include <vector>

#include "core/tensor.h"
#include "ops/stub.h"

namespace strata::nn {

// One (L x E) q, (S x E) k, (S x Ev) v, (L x Ev) out matrix per batch index.
struct AttnMat {
  int64_t rs = 0;                // row stride (elements)
  std::vector<int64_t> off;      // element offset from data_ptr per flattened batch index
};

struct AttnGeom {
  int64_t batch = 0;             // product of the broadcast batch dims
  int64_t l = 0, s = 0, e = 0, ev = 0;
  double scale = 1.0;
  bool causal = false;           // keep j <= i (top-left aligned, like torch)
  int mask_kind = 0;             // 0 none, 1 bool (true keeps), 2 additive
  int64_t m_rs = 0, m_cs = 0;    // mask strides along l and s (0 where broadcast)
  AttnMat q, k, v, mask, out;    // forward: out is the result; backward: out is grad_out
  AttnMat gq, gk, gv;            // backward only: the gradients, one per batch index (no broadcasting)
};

// out = softmax(scale q k^T + mask) v; rows with nothing to attend to give zeros.
using AttnForwardFn = void (*)(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                               const Tensor& out, const AttnGeom& g);
// grad_q/k/v of the forward above given grad_out, the probabilities recomputed per batch index.
using AttnBackwardFn = void (*)(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                                const Tensor& mask, const Tensor& gq, const Tensor& gk, const Tensor& gv,
                                const AttnGeom& g);

}  // namespace strata::nn

namespace strata {
STRATA_DECLARE_STUB(nn_attention_forward_stub, nn::AttnForwardFn);
STRATA_DECLARE_STUB(nn_attention_backward_stub, nn::AttnBackwardFn);
}  // namespace strata
