// float32 2-D convolution forward through oneDNN's convolution primitive, when libdnnl.so.2 can be loaded (see
// dnnl_conv.cpp for why and when). Compiled once, called by the per-ISA conv kernel.
#pragma once

#include <cstdint>

namespace strata::cpu::dnnl_conv {

// Contiguous NCHW input/output, OIHW weight ([o, c / groups, kh, kw]); pads are symmetric (top/left = bottom/right
// as far as the output size needs them); dilation as in torch (1 = dense).
struct Conv2dShape {
  int64_t n, c, h, w, o, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw, groups;
};

// y = conv(x, w) + b (b may be null). Returns false, touching nothing, when oneDNN is unavailable, disabled
// (STRATA_DNNL_CONV=0), failed its start-up check, or cannot run this shape; the caller then uses its own path.
bool forward_f32(const Conv2dShape& s, const float* x, const float* w, const float* b, float* y);

// Whether forward_f32 is worth calling for this shape (measured, see dnnl_conv.cpp).
bool preferred(const Conv2dShape& s);

}  // namespace strata::cpu::dnnl_conv
