// Kernel stubs of the fused nn backward ops (decl/nn_backward.def). Same
// contract as ops/nn_kernels.h: contiguous float32/float64 operands only.
#pragma once

#include "ops/nn_kernels.h"

namespace strata::nn {

// g (n, o, oh, ow), x (n, c, h, w), w (o, c / groups, kh, kw); writes gx (like
// x), gw (like w) and gb (o). gx and gw may be undefined (not wanted).
using Conv2dBackwardFn = void (*)(const Tensor& g, const Tensor& x, const Tensor& w, const Tensor& gx,
                                  const Tensor& gw, const Tensor& gb, const Window2d& p, int64_t groups);
// Rows of length d; w may be undefined. Writes gx (rows, d), gw and gb (d).
using LayerNormBackwardFn = void (*)(const Tensor& go, const Tensor& x, const Tensor& w, const Tensor& gx,
                                     const Tensor& gw, const Tensor& gb, int64_t rows, int64_t d, double eps);

}  // namespace strata::nn

namespace strata {
STRATA_DECLARE_STUB(nn_conv2d_backward_stub, nn::Conv2dBackwardFn);
STRATA_DECLARE_STUB(nn_layer_norm_backward_stub, nn::LayerNormBackwardFn);
}  // namespace strata
