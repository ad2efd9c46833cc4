// conv1d/conv2d (im2col + GEMM kernels), max/avg/adaptive pooling and pad.
#include "ops/nn_more_kernels.h"
#include "ops/nn_util.h"
#include "ops/op_list.h"

namespace strata {

STRATA_DEFINE_STUB(nn_conv2d_stub, nn::Conv2dFn);
STRATA_DEFINE_STUB(nn_avg_pool2d_stub, nn::AvgPool2dFn);
STRATA_DEFINE_STUB(nn_pad_stub, nn::PadFn);

using namespace nn;

// Implementations live in strata::nn so their names cannot clash with other families.
namespace nn {

namespace {

std::string join_x(IntArrayRef v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? " x " : "") + std::to_string(v[i]);
  return s;
}

// k spatial dims (1 or 2); pad_lo/pad_hi per spatial dim.
Tensor conv_nd(const char* op, int k, const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
               const DimVector& stride, const DimVector& pad_lo, const DimVector& pad_hi, const DimVector& dilation,
               int64_t groups) {
  check_conv_operands(op, k, input, weight, bias);
  const int64_t nd = input.dim();
  for (int i = 0; i < k; ++i) {
    STRATA_CHECK(stride[i] > 0, op, ": non-positive stride is not supported (got stride=", shape_str(stride), ")");
    STRATA_CHECK(dilation[i] > 0, op, ": dilation should be greater than zero (got dilation=", shape_str(dilation),
                 ")");
    STRATA_CHECK(pad_lo[i] >= 0 && pad_hi[i] >= 0, op, ": negative padding is not supported (got padding=",
                 shape_str(pad_lo), ")");
  }
  STRATA_CHECK(groups > 0, op, ": non-positive groups is not supported (got groups=", groups, ")");
  const bool batched = nd == k + 2;
  const int64_t n = batched ? input.size(0) : 1;
  const int64_t c = input.size(batched ? 1 : 0);
  const int64_t o = weight.size(0);
  STRATA_CHECK(o % groups == 0, op, ": Given groups=", groups, ", expected weight to be divisible by ", groups,
               " at dimension 0, but got weight of size ", weight.shape_str(), " instead");
  STRATA_CHECK(c == weight.size(1) * groups, op, ": Given groups=", groups, ", weight of size ", weight.shape_str(),
               ", expected input", input.shape_str(), " to have ", weight.size(1) * groups, " channels, but got ", c,
               " channels instead");
  STRATA_CHECK(!has(bias) || (bias->dim() == 1 && bias->size(0) == o), op, ": Given weight of size ",
               weight.shape_str(), ", expected bias to be 1-dimensional with ", o, " elements, but got bias of size ",
               bias->shape_str(), " instead");
  DimVector in_sp, padded, ksz, out_sp;
  for (int i = 0; i < k; ++i) {
    in_sp.push_back(input.size(nd - k + i));
    padded.push_back(in_sp[i] + pad_lo[i] + pad_hi[i]);
    ksz.push_back(dilation[i] * (weight.size(2 + i) - 1) + 1);
  }
  for (int i = 0; i < k; ++i) {
    STRATA_CHECK(padded[i] >= ksz[i], op, ": Calculated padded input size per channel: (", join_x(padded),
                 "). Kernel size: (", join_x(ksz), "). Kernel size can't be greater than actual input size");
    out_sp.push_back((padded[i] - ksz[i]) / stride[i] + 1);
  }
  // Like torch: an empty plane only with an empty batch or no channels (the output would be the bias alone).
  STRATA_CHECK(input.numel() != 0 || n == 0 || c == 0, op,
               ": Only zero batch or zero channel inputs are supported, but got input shape: ", input.shape_str());
  Device dev = check_devices(op, {input, weight, has(bias) ? *bias : Tensor()});
  DimVector out_shape;
  if (batched) out_shape.push_back(n);
  out_shape.push_back(o);
  out_shape.insert(out_shape.end(), out_sp.begin(), out_sp.end());
  if (dev.is_meta()) return empty_tensor(out_shape, input.dtype(), dev);
  const ScalarType ct = compute_type(input.dtype());
  Tensor y = empty_tensor(out_shape, ct, dev);
  if (y.numel() > 0) {
    // Everything runs as 2-D, batched: conv1d gets a height of 1.
    const int64_t h = k == 2 ? in_sp[0] : 1, w = in_sp[k - 1];
    Tensor x = reshape_contig(prep(input, ct), std::vector<int64_t>{n, c, h, w});
    Tensor wt = prep(weight, ct);
    wt = reshape_contig(wt, std::vector<int64_t>{o, weight.size(1), k == 2 ? weight.size(2) : 1, weight.size(1 + k)});
    Tensor y4 = reshape_contig(y, std::vector<int64_t>{n, o, k == 2 ? out_sp[0] : 1, out_sp[k - 1]});
    Window2d p{wt.size(2), wt.size(3), k == 2 ? stride[0] : 1, stride[k - 1], k == 2 ? pad_lo[0] : 0, pad_lo[k - 1],
               k == 2 ? dilation[0] : 1, dilation[k - 1]};
    nn_conv2d_stub(dev.type, x, wt, prep_opt(bias, ct), y4, p, groups);
  }
  return to_dtype(y, input.dtype());
}

Tensor conv_int_pad(const char* op, int k, const Tensor& input, const Tensor& weight,
                    const std::optional<Tensor>& bias, IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation,
                    int64_t groups) {
  DimVector pad = expand_param(padding, k, op, "padding");
  return conv_nd(op, k, input, weight, bias, expand_param(stride, k, op, "stride"), pad, pad,
                 expand_param(dilation, k, op, "dilation"), groups);
}

Tensor conv_str_pad(const char* op, int k, const Tensor& input, const Tensor& weight,
                    const std::optional<Tensor>& bias, IntArrayRef stride, std::string_view padding,
                    IntArrayRef dilation, int64_t groups) {
  DimVector st = expand_param(stride, k, op, "stride"), dil = expand_param(dilation, k, op, "dilation");
  DimVector lo(k, 0), hi(k, 0);
  if (padding == "same") {
    for (int i = 0; i < k; ++i)
      STRATA_CHECK(st[i] == 1, op, ": padding='same' is not supported for strided convolutions");
    STRATA_CHECK(weight.dim() == k + 2, op, ": expected weight to be ", k + 2,
                 "-dimensional, but got weight of size ", weight.shape_str());
    for (int i = 0; i < k; ++i) {
      // Odd totals put the extra element on the right, like torch.
      const int64_t total = std::max<int64_t>(dil[i], 1) * (weight.size(2 + i) - 1);
      lo[i] = total / 2;
      hi[i] = total - lo[i];
    }
  } else {
    STRATA_CHECK(padding == "valid", op, ": Invalid padding string: '", padding, "' (expected 'same' or 'valid')");
  }
  return conv_nd(op, k, input, weight, bias, st, lo, hi, dil, groups);
}

}  // namespace

Tensor conv1d_impl(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias, IntArrayRef stride,
                   IntArrayRef padding, IntArrayRef dilation, int64_t groups) {
  return conv_int_pad("conv1d", 1, input, weight, bias, stride, padding, dilation, groups);
}
STRATA_IMPL_CPU_META(conv1d, conv1d_impl);
Tensor conv1d_padding_impl(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                           IntArrayRef stride, std::string_view padding, IntArrayRef dilation, int64_t groups) {
  return conv_str_pad("conv1d", 1, input, weight, bias, stride, padding, dilation, groups);
}
STRATA_IMPL_CPU_META(conv1d_padding, conv1d_padding_impl);
Tensor conv2d_impl(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias, IntArrayRef stride,
                   IntArrayRef padding, IntArrayRef dilation, int64_t groups) {
  return conv_int_pad("conv2d", 2, input, weight, bias, stride, padding, dilation, groups);
}
STRATA_IMPL_CPU_META(conv2d, conv2d_impl);
Tensor conv2d_padding_impl(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                           IntArrayRef stride, std::string_view padding, IntArrayRef dilation, int64_t groups) {
  return conv_str_pad("conv2d", 2, input, weight, bias, stride, padding, dilation, groups);
}
STRATA_IMPL_CPU_META(conv2d_padding, conv2d_padding_impl);

// ---- pooling ----------------------------------------------------------------

namespace {

int64_t pool_out_size(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dil, bool ceil_mode) {
  const int64_t num = in + 2 * pad - dil * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  // Floor division (num may be negative when the window does not fit).
  int64_t out = (num >= 0 ? num / stride : -((-num + stride - 1) / stride)) + 1;
  // The last window must start inside the input or the left padding.
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

struct PoolGeom {
  int64_t planes, h, w, oh, ow;
  DimVector out_shape;
  Window2d p;
};

PoolGeom pool_geometry(const char* op, const Tensor& input, IntArrayRef kernel_size, OptIntArrayRef stride,
                       IntArrayRef padding, IntArrayRef dilation, bool ceil_mode) {
  const int64_t nd = input.dim();
  STRATA_CHECK(nd == 3 || nd == 4, op, ": Expected 3D or 4D (batch mode) tensor for input, but got input of size: ",
               input.shape_str());
  for (int64_t d = nd - 3; d < nd; ++d)
    STRATA_CHECK(input.size(d) > 0, op, ": Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size "
                 "for input and non-zero channel and spatial dims, but got input of size: ", input.shape_str());
  DimVector k = expand_param(kernel_size, 2, op, "kernel_size");
  DimVector s = (stride && !stride->empty()) ? expand_param(*stride, 2, op, "stride") : k;
  DimVector pd = expand_param(padding, 2, op, "padding");
  DimVector dl = expand_param(dilation, 2, op, "dilation");
  STRATA_CHECK(k[0] > 0 && k[1] > 0, op, ": kernel_size must be greater than zero, but got kH: ", k[0], " kW: ", k[1]);
  STRATA_CHECK(s[0] > 0 && s[1] > 0, op, ": stride must be greater than zero, but got dH: ", s[0], " dW: ", s[1]);
  STRATA_CHECK(dl[0] > 0 && dl[1] > 0, op, ": dilation must be greater than zero, but got dilationH: ", dl[0],
               " dilationW: ", dl[1]);
  for (int i = 0; i < 2; ++i) {
    STRATA_CHECK(pd[i] >= 0, op, ": negative padding is not supported (got padding=", shape_str(pd), ")");
    // Like torch, the limit is half the kernel size (not the dilated one), for max and average pooling.
    STRATA_CHECK(pd[i] <= k[i] / 2, op, ": pad should be smaller than or equal to half of kernel size, but got padW = ",
                 pd[1], ", padH = ", pd[0], ", kW = ", k[1], ", kH = ", k[0]);
  }
  PoolGeom g;
  g.h = input.size(nd - 2);
  g.w = input.size(nd - 1);
  g.planes = input.numel() / (g.h * g.w);
  g.oh = pool_out_size(g.h, k[0], pd[0], s[0], dl[0], ceil_mode);
  g.ow = pool_out_size(g.w, k[1], pd[1], s[1], dl[1], ceil_mode);
  STRATA_CHECK(g.oh > 0 && g.ow > 0, op, ": Given input size: (", input.size(nd - 3), "x", g.h, "x", g.w,
               "). Calculated output size: (", input.size(nd - 3), "x", g.oh, "x", g.ow,
               "). Output size is too small");
  g.out_shape.assign(input.sizes().begin(), input.sizes().end() - 2);
  g.out_shape.push_back(g.oh);
  g.out_shape.push_back(g.ow);
  g.p = Window2d{k[0], k[1], s[0], s[1], pd[0], pd[1], dl[0], dl[1]};
  return g;
}

Window3d window3d(const Window2d& p) {
  return Window3d{{1, p.kh, p.kw}, {1, p.sh, p.sw}, {0, p.ph, p.pw}, {1, p.dh, p.dw}};
}

}  // namespace

Tensor2 max_pool2d_with_indices_impl(const Tensor& input, IntArrayRef kernel_size, OptIntArrayRef stride,
                                     IntArrayRef padding, IntArrayRef dilation, bool ceil_mode) {
  const char* op = "max_pool2d";
  check_floating(op, input, "input");
  PoolGeom g = pool_geometry(op, input, kernel_size, stride, padding, dilation, ceil_mode);
  Device dev = input.device();
  Tensor idx = empty_tensor(g.out_shape, ScalarType::Int64, dev);
  if (dev.is_meta()) return {empty_tensor(g.out_shape, input.dtype(), dev), idx};
  const ScalarType ct = compute_type(input.dtype());
  Tensor y = empty_tensor(g.out_shape, ct, dev);
  if (y.numel() > 0) {
    // The 1-to-3-D max pooling kernel (nn_more_kernels.cpp), with a unit depth.
    Tensor x = reshape_contig(prep(input, ct), std::vector<int64_t>{g.planes, 1, g.h, g.w});
    nn_max_pool3d_stub(dev.type, x, reshape_contig(y, std::vector<int64_t>{g.planes, 1, g.oh, g.ow}),
                       reshape_contig(idx, std::vector<int64_t>{g.planes, 1, g.oh, g.ow}), window3d(g.p));
  }
  return {to_dtype(y, input.dtype()), idx};
}
STRATA_IMPL_CPU_META(max_pool2d_with_indices, max_pool2d_with_indices_impl);

Tensor max_pool2d_impl(const Tensor& input, IntArrayRef kernel_size, OptIntArrayRef stride, IntArrayRef padding,
                       IntArrayRef dilation, bool ceil_mode) {
  const char* op = "max_pool2d";
  check_floating(op, input, "input");
  PoolGeom g = pool_geometry(op, input, kernel_size, stride, padding, dilation, ceil_mode);
  Device dev = input.device();
  if (dev.is_meta()) return empty_tensor(g.out_shape, input.dtype(), dev);
  const ScalarType ct = compute_type(input.dtype());
  Tensor y = empty_tensor(g.out_shape, ct, dev);
  if (y.numel() > 0) {
    Tensor x = reshape_contig(prep(input, ct), std::vector<int64_t>{g.planes, 1, g.h, g.w});
    nn_max_pool3d_stub(dev.type, x, reshape_contig(y, std::vector<int64_t>{g.planes, 1, g.oh, g.ow}), Tensor(),
                       window3d(g.p));
  }
  return to_dtype(y, input.dtype());
}
STRATA_IMPL_CPU_META(max_pool2d, max_pool2d_impl);

Tensor avg_pool2d_impl(const Tensor& input, IntArrayRef kernel_size, OptIntArrayRef stride, IntArrayRef padding,
                       bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor_override) {
  const char* op = "avg_pool2d";
  check_floating(op, input, "input");
  STRATA_CHECK(!divisor_override || *divisor_override != 0, op, ": divisor must be not zero");
  std::vector<int64_t> one{1, 1};
  PoolGeom g = pool_geometry(op, input, kernel_size, stride, padding, one, ceil_mode);
  Device dev = input.device();
  if (dev.is_meta()) return empty_tensor(g.out_shape, input.dtype(), dev);
  const ScalarType ct = compute_type(input.dtype());
  Tensor y = empty_tensor(g.out_shape, ct, dev);
  if (y.numel() > 0) {
    Tensor x = reshape_contig(prep(input, ct), std::vector<int64_t>{g.planes, g.h, g.w});
    nn_avg_pool2d_stub(dev.type, x, reshape_contig(y, std::vector<int64_t>{g.planes, g.oh, g.ow}), g.p,
                       count_include_pad, divisor_override.value_or(0));
  }
  return to_dtype(y, input.dtype());
}
STRATA_IMPL_CPU_META(avg_pool2d, avg_pool2d_impl);

Tensor adaptive_avg_pool2d_impl(const Tensor& input, IntArrayRef output_size) {
  const char* op = "adaptive_avg_pool2d";
  const int64_t nd = input.dim();
  STRATA_CHECK(nd == 3 || nd == 4, op, ": Expected 3D or 4D tensor, but got input of size: ", input.shape_str());
  for (int64_t d = nd - 2; d < nd; ++d)
    STRATA_CHECK(input.size(d) > 0, op, ": Expected input to have non-zero size for non-batch dimensions, but input "
                 "has sizes ", input.shape_str(), " with dimension ", d, " being empty");
  STRATA_CHECK(output_size.size() == 2 || output_size.size() == 1, op,
               ": output_size must be 2 (got ", shape_str(output_size), ")");
  DimVector os = expand_param(output_size, 2, op, "output_size");
  STRATA_CHECK(os[0] >= 0 && os[1] >= 0, op, ": elements of output_size must be greater than or equal to 0 but "
               "received {", os[0], ", ", os[1], "}");
  check_floating(op, input, "input");
  DimVector out_shape(input.sizes().begin(), input.sizes().end() - 2);
  out_shape.push_back(os[0]);
  out_shape.push_back(os[1]);
  Device dev = input.device();
  if (dev.is_meta()) return empty_tensor(out_shape, input.dtype(), dev);
  const ScalarType ct = compute_type(input.dtype());
  Tensor y = empty_tensor(out_shape, ct, dev);
  if (y.numel() > 0) {
    const int64_t h = input.size(nd - 2), w = input.size(nd - 1), planes = input.numel() / (h * w);
    // The 1-to-3-D adaptive pooling kernel (nn_more_kernels.cpp), with a unit depth.
    nn_adaptive_pool3d_stub(dev.type, reshape_contig(prep(input, ct), std::vector<int64_t>{planes, 1, h, w}),
                            reshape_contig(y, std::vector<int64_t>{planes, 1, os[0], os[1]}), Tensor());
  }
  return to_dtype(y, input.dtype());
}
STRATA_IMPL_CPU_META(adaptive_avg_pool2d, adaptive_avg_pool2d_impl);

// ---- pad --------------------------------------------------------------------

Tensor pad_impl(const Tensor& input, IntArrayRef pad, std::string_view mode, std::optional<double> value) {
  const char* op = "pad";
  const int64_t nd = input.dim(), np = static_cast<int64_t>(pad.size());
  STRATA_CHECK(np % 2 == 0, op, ": Padding length must be divisible by 2 (got pad=", shape_str(pad), ")");
  STRATA_CHECK(np / 2 <= nd, op, ": Padding length should be less than or equal to two times the input dimension "
               "but got padding length ", np, " and input of dimension ", nd);
  const bool constant = mode == "constant";
  STRATA_CHECK_VALUE(constant || mode == "reflect" || mode == "replicate" || mode == "circular", op,
                     ": Unrecognised padding mode '", mode, "' (expected constant, reflect, replicate or circular)");
  if (!constant) {
    STRATA_CHECK(!value || *value == 0, op, ": Padding mode \"", mode, "\" doesn't take in value argument");
    const int64_t pairs = np / 2;
    STRATA_CHECK(pairs >= 1 && pairs <= 3 && (nd == pairs + 1 || nd == pairs + 2), op, ": padding mode '", mode,
                 "' with ", np, " padding values expects a ", pairs + 1, "D or ", pairs + 2,
                 "D (batch mode) input, but got input of size ", input.shape_str(),
                 " (only 2D, 3D, 4D, 5D inputs with 1 to 3 padded dimensions are supported)");
  }
  if (np == 0) return clone(input);
  DimVector out_shape(input.sizes().begin(), input.sizes().end());
  std::vector<int64_t> lo(nd, 0), hi(nd, 0);
  for (int64_t i = 0; i < np / 2; ++i) {
    const int64_t d = nd - 1 - i;
    lo[d] = pad[2 * i];
    hi[d] = pad[2 * i + 1];
    const int64_t n = input.size(d);
    out_shape[d] = n + lo[d] + hi[d];
    STRATA_CHECK(out_shape[d] >= 0, op, ": The input size ", n, ", plus negative padding ", lo[d], " and ", hi[d],
                 " resulted in a negative output size, which is invalid. Check dimension ", d, " of your input.");
    if (mode == "reflect") {
      STRATA_CHECK(lo[d] < n && hi[d] < n, op, ": Padding size should be less than the corresponding input dimension, "
                   "but got: padding (", lo[d], ", ", hi[d], ") at dimension ", d, " of input ", input.shape_str());
    } else if (mode == "circular") {
      STRATA_CHECK(lo[d] <= n && hi[d] <= n, op, ": Padding value causes wrapping around more than once (padding (",
                   lo[d], ", ", hi[d], ") at dimension ", d, " of input ", input.shape_str(), ")");
    } else if (mode == "replicate") {
      STRATA_CHECK(n > 0 || out_shape[d] == 0, op, ": cannot replicate-pad the empty dimension ", d, " of input ",
                   input.shape_str());
    }
  }
  Device dev = input.device();
  Tensor y = empty_tensor(out_shape, input.dtype(), dev);
  if (dev.is_meta() || y.numel() == 0) return y;
  std::vector<std::vector<int64_t>> maps(nd);
  for (int64_t d = 0; d < nd; ++d) {
    const int64_t n = input.size(d);
    auto& m = maps[d];
    m.resize(out_shape[d]);
    for (int64_t o = 0; o < out_shape[d]; ++o) {
      int64_t i = o - lo[d];
      if (i < 0 || i >= n) {
        if (constant) i = -1;
        else if (mode == "reflect") i = i < 0 ? -i : 2 * (n - 1) - i;
        else if (mode == "replicate") i = i < 0 ? 0 : n - 1;
        else i = ((i % n) + n) % n;
      }
      m[o] = i;
    }
  }
  nn_pad_stub(dev.type, contiguous_input(input), y, maps, value.value_or(0.0));
  return y;
}
STRATA_IMPL_CPU_META(pad, pad_impl);

}  // namespace nn
}  // namespace strata
