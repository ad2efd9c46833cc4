// Kernel stubs of the ops in decl/nn_more.def. The op code (ops/nn_pool.cpp,
// ops/nn_upsample.cpp, ops/nn_conv_more.cpp) validates the arguments, makes
// the operands contiguous, converts 16-bit floats to float32 and views every
// input as (planes, D, H, W): 1-D and 2-D pooling and interpolation run as 3-D
// with unit dims, so each kernel is written once.
#pragma once

#include <vector>

#include "core/tensor.h"
#include "ops/nn_kernels.h"
#include "ops/stub.h"

namespace strata::nn {

// Window per spatial dim (D, H, W): kernel, stride, padding, dilation.
struct Window3d {
  int64_t k[3], s[3], p[3], d[3];
};
// x (planes, D, H, W) -> y (planes, OD, OH, OW); indices (flat within a plane) may be undefined.
using MaxPool3dFn = void (*)(const Tensor& x, const Tensor& y, const Tensor& indices, const Window3d& w);
// divisor 0: the window's size (with or without the padding).
using AvgPool3dFn = void (*)(const Tensor& x, const Tensor& y, const Window3d& w, bool count_include_pad,
                             int64_t divisor);
// g (planes, OD, OH, OW) -> gx (planes, D, H, W), written whole.
using AvgPool3dBackwardFn = void (*)(const Tensor& g, const Tensor& gx, const Window3d& w, bool count_include_pad,
                                     int64_t divisor);
// Adaptive windows: [floor(o * in / out), ceil((o + 1) * in / out)). Max when indices is defined, else mean.
using AdaptivePool3dFn = void (*)(const Tensor& x, const Tensor& y, const Tensor& indices);
using AdaptiveAvgPool3dBackwardFn = void (*)(const Tensor& g, const Tensor& gx);
// src, indices (planes, q); out (planes, p) is written whole: zeros, then out[indices] = (or +=) src.
// Indices were checked to lie in [0, p).
using PoolScatterFn = void (*)(const Tensor& src, const Tensor& indices, const Tensor& out, bool accumulate);

// One spatial axis of an interpolation: output position o reads the input at idx[o * taps + t] with weight
// w[o * taps + t] (indices in range; weights in the kernel's type, float or double).
struct InterpAxis {
  int64_t taps = 1;
  std::vector<int64_t> idx{0};
  std::vector<double> w{1.0};
};
// x (planes, D, H, W) -> y (planes, OD, OH, OW), separable: sum over taps of the product of the three weights.
using InterpolateFn = void (*)(const Tensor& x, const Tensor& y, const InterpAxis* axes);
// The transpose: gx (planes, D, H, W) written whole from g (planes, OD, OH, OW).
using InterpolateBackwardFn = void (*)(const Tensor& g, const Tensor& gx, const InterpAxis* axes);

// x (n, c, h, w) -> cols (n, c * kh * kw, oh * ow) (torch's unfold layout), and its transpose (cols -> x,
// written whole).
using Im2colFn = void (*)(const Tensor& x, const Tensor& cols, int64_t oh, int64_t ow, const Window2d& p);
using Col2imFn = void (*)(const Tensor& cols, const Tensor& x, int64_t oh, int64_t ow, const Window2d& p);

// The (planes, D, H, W) view of a contiguous tensor of these sizes whose last k (1 to 3) dims are spatial.
inline DimVector as_3d(IntArrayRef sizes, int k) {
  const int64_t nd = static_cast<int64_t>(sizes.size());
  int64_t planes = 1;
  for (int64_t i = 0; i < nd - k; ++i) planes *= sizes[i];
  DimVector v{planes, 1, 1, 1};
  for (int i = 0; i < k; ++i) v[4 - k + i] = sizes[nd - k + i];
  return v;
}

}  // namespace strata::nn

namespace strata {
STRATA_DECLARE_STUB(nn_max_pool3d_stub, nn::MaxPool3dFn);
STRATA_DECLARE_STUB(nn_avg_pool3d_stub, nn::AvgPool3dFn);
STRATA_DECLARE_STUB(nn_avg_pool3d_backward_stub, nn::AvgPool3dBackwardFn);
STRATA_DECLARE_STUB(nn_adaptive_pool3d_stub, nn::AdaptivePool3dFn);
STRATA_DECLARE_STUB(nn_adaptive_avg_pool3d_backward_stub, nn::AdaptiveAvgPool3dBackwardFn);
STRATA_DECLARE_STUB(nn_pool_scatter_stub, nn::PoolScatterFn);
STRATA_DECLARE_STUB(nn_interpolate_stub, nn::InterpolateFn);
STRATA_DECLARE_STUB(nn_interpolate_backward_stub, nn::InterpolateBackwardFn);
STRATA_DECLARE_STUB(nn_im2col_stub, nn::Im2colFn);
STRATA_DECLARE_STUB(nn_col2im_stub, nn::Col2imFn);
}  // namespace strata
