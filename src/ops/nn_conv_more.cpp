// Transposed convolution (1-D, 2-D: the conv2d input-gradient kernel, i.e.
// GEMM + col2im; 3-D: 2-D slices summed into the output depth), conv3d (depth
// taps gathered into channels, then conv2d) and im2col/col2im (F.unfold and
// F.fold). conv3d and conv_transpose3d are composites: their gradients come
// from the ops they are made of.
#include <algorithm>

#include "ops/nn_backward_kernels.h"
#include "ops/nn_more_kernels.h"
#include "ops/nn_util.h"
#include "ops/op_list.h"

namespace strata {

STRATA_DEFINE_STUB(nn_im2col_stub, nn::Im2colFn);
STRATA_DEFINE_STUB(nn_col2im_stub, nn::Col2imFn);

namespace nn {
namespace {

std::string join_x(IntArrayRef v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? " x " : "") + std::to_string(v[i]);
  return s;
}
std::string tuple_str(IntArrayRef v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + ")";
}

Tensor host_index(const std::vector<int64_t>& v, Device dev) {
  Tensor t = empty_tensor(DimVector{static_cast<int64_t>(v.size())}, ScalarType::Int64, Device(DeviceType::CPU));
  if (!v.empty()) std::copy(v.begin(), v.end(), t.data_ptr<int64_t>());
  return dev == t.device() ? t : to_device(t, dev);
}

struct TransposeGeom {
  bool batched;
  int64_t n, cin, cout;
  DimVector stride, padding, out_pad, dilation, in_sp, out_sp;
};

// Checks shared by conv_transpose{1,2,3}d (torch's messages) and the output size.
TransposeGeom transpose_geometry(const char* op, int k, const Tensor& input, const Tensor& weight,
                                 const std::optional<Tensor>& bias, IntArrayRef stride, IntArrayRef padding,
                                 IntArrayRef output_padding, int64_t groups, IntArrayRef dilation) {
  check_conv_operands(op, k, input, weight, bias);
  const int64_t nd = input.dim();
  STRATA_CHECK(groups > 0, op, ": non-positive groups is not supported (got groups=", groups, ")");
  TransposeGeom g;
  g.batched = nd == k + 2;
  g.n = g.batched ? input.size(0) : 1;
  g.cin = input.size(g.batched ? 1 : 0);
  STRATA_CHECK(weight.size(0) % groups == 0, op, ": Given groups=", groups, ", expected weight to be divisible by ",
               groups, " at dimension 0, but got weight of size ", weight.shape_str(), " instead");
  STRATA_CHECK(g.cin == weight.size(0), "Given transposed=1, weight of size ", weight.shape_str(),
               ", expected input", input.shape_str(), " to have ", weight.size(0), " channels, but got ", g.cin,
               " channels instead");
  g.cout = weight.size(1) * groups;
  STRATA_CHECK(!has(bias) || (bias->dim() == 1 && bias->size(0) == g.cout), op, ": Given transposed=1, weight of "
               "size ", weight.shape_str(), ", expected bias to be 1-dimensional with ", g.cout,
               " elements, but got bias of size ", bias->shape_str(), " instead");
  g.stride = expand_param(stride, k, op, "stride");
  g.padding = expand_param(padding, k, op, "padding");
  g.out_pad = expand_param(output_padding, k, op, "output_padding");
  g.dilation = expand_param(dilation, k, op, "dilation");
  for (int i = 0; i < k; ++i) {
    STRATA_CHECK(g.stride[i] > 0, op, ": non-positive stride is not supported (got stride=", shape_str(g.stride), ")");
    STRATA_CHECK(g.dilation[i] > 0, op, ": dilation should be greater than zero (got dilation=",
                 shape_str(g.dilation), ")");
    STRATA_CHECK(g.padding[i] >= 0, op, ": negative padding is not supported (got padding=", shape_str(g.padding),
                 ")");
    STRATA_CHECK(g.out_pad[i] >= 0 && (g.out_pad[i] < g.stride[i] || g.out_pad[i] < g.dilation[i]), op,
                 ": output padding must be smaller than either stride or dilation, but got output_padding=",
                 shape_str(g.out_pad), ", stride=", shape_str(g.stride), ", dilation=", shape_str(g.dilation));
    const int64_t in = input.size(nd - k + i);
    constexpr int64_t kLimit = int64_t{1} << 40;  // keeps the output size arithmetic inside int64
    STRATA_CHECK(g.stride[i] < kLimit && g.padding[i] < kLimit && g.dilation[i] < kLimit && g.out_pad[i] < kLimit,
                 op, ": stride, padding, output_padding and dilation must be below 2^40 (got stride=",
                 shape_str(g.stride), ", padding=", shape_str(g.padding), ", dilation=", shape_str(g.dilation), ")");
    g.in_sp.push_back(in);
    g.out_sp.push_back((in - 1) * g.stride[i] - 2 * g.padding[i] + g.dilation[i] * (weight.size(2 + i) - 1) +
                       g.out_pad[i] + 1);
  }
  for (int i = 0; i < k; ++i)
    STRATA_CHECK(g.out_sp[i] > 0, op, ": Given input size per channel: (", join_x(g.in_sp),
                 "). Calculated output size per channel: (", join_x(g.out_sp), "). Output size is too small");
  return g;
}

DimVector transpose_out_shape(const TransposeGeom& g) {
  DimVector s;
  if (g.batched) s.push_back(g.n);
  s.push_back(g.cout);
  s.insert(s.end(), g.out_sp.begin(), g.out_sp.end());
  return s;
}

// conv_transpose1d/2d: the input gradient of conv2d (GEMM + col2im) with the input as grad_output.
Tensor conv_transpose_2d_path(const char* op, int k, const Tensor& input, const Tensor& weight,
                              const std::optional<Tensor>& bias, IntArrayRef stride, IntArrayRef padding,
                              IntArrayRef output_padding, int64_t groups, IntArrayRef dilation) {
  const TransposeGeom g =
      transpose_geometry(op, k, input, weight, bias, stride, padding, output_padding, groups, dilation);
  Device dev = check_devices(op, {input, weight, has(bias) ? *bias : Tensor()});
  const DimVector out_shape = transpose_out_shape(g);
  if (dev.is_meta()) return empty_tensor(out_shape, input.dtype(), dev);
  const ScalarType ct = compute_type(input.dtype());
  Tensor y = empty_tensor(out_shape, ct, dev);
  if (y.numel() == 0) return to_dtype(y, input.dtype());
  const int64_t h = k == 2 ? g.in_sp[0] : 1, w = g.in_sp[k - 1];
  const int64_t oh = k == 2 ? g.out_sp[0] : 1, ow = g.out_sp[k - 1];
  const int64_t kh = k == 2 ? weight.size(2) : 1, kw = weight.size(1 + k);
  Tensor x4 = reshape_contig(prep(input, ct), DimVector{g.n, g.cin, h, w});
  Tensor w4 = reshape_contig(prep(weight, ct), DimVector{g.cin, weight.size(1), kh, kw});
  Tensor y4 = reshape_contig(y, DimVector{g.n, g.cout, oh, ow});
  Window2d p{kh, kw, k == 2 ? g.stride[0] : 1, g.stride[k - 1], k == 2 ? g.padding[0] : 0, g.padding[k - 1],
             k == 2 ? g.dilation[0] : 1, g.dilation[k - 1]};
  Tensor bias_scratch = empty_tensor(DimVector{g.cin}, ct, dev);
  if (x4.numel() == 0) {
    fill_(y4, 0.0);
  } else {
    // y4 is both the shape holder of conv2d's input and the gradient written; the input is only read for
    // the weight gradient, which is not requested.
    nn_conv2d_backward_stub(dev.type, x4, y4, w4, y4, Tensor(), bias_scratch, p, groups);
  }
  if (has(bias)) y4 = add(y4, reshape_contig(prep(*bias, ct), DimVector{g.cout, 1, 1}));
  return to_dtype(reshape_contig(contiguous_input(y4), out_shape), input.dtype());
}

// Per-dim 'same' padding: the total, odd totals with the extra element on the right (like torch).
void same_padding(int k, const Tensor& weight, const DimVector& dil, DimVector& lo, DimVector& hi) {
  for (int i = 0; i < k; ++i) {
    const int64_t total = dil[i] * (weight.size(2 + i) - 1);
    lo[i] = total / 2;
    hi[i] = total - lo[i];
  }
}

}  // namespace

Tensor conv_transpose1d_impl(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                             IntArrayRef stride, IntArrayRef padding, IntArrayRef output_padding, int64_t groups,
                             IntArrayRef dilation) {
  return conv_transpose_2d_path("conv_transpose1d", 1, input, weight, bias, stride, padding, output_padding, groups,
                                dilation);
}
STRATA_IMPL_CPU_META(conv_transpose1d, conv_transpose1d_impl);
Tensor conv_transpose2d_impl(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                             IntArrayRef stride, IntArrayRef padding, IntArrayRef output_padding, int64_t groups,
                             IntArrayRef dilation) {
  return conv_transpose_2d_path("conv_transpose2d", 2, input, weight, bias, stride, padding, output_padding, groups,
                                dilation);
}
STRATA_IMPL_CPU_META(conv_transpose2d, conv_transpose2d_impl);

// Each input depth slice, transposed-convolved in 2-D with the weight's depth taps as extra output channels,
// lands at output depths id * stride - padding + kd * dilation; index_add sums the overlaps.
Tensor conv_transpose3d_impl(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                             IntArrayRef stride, IntArrayRef padding, IntArrayRef output_padding, int64_t groups,
                             IntArrayRef dilation) {
  const char* op = "conv_transpose3d";
  const TransposeGeom g =
      transpose_geometry(op, 3, input, weight, bias, stride, padding, output_padding, groups, dilation);
  Tensor x = g.batched ? input : unsqueeze(input, 0);
  const int64_t n = g.n, cin = g.cin, d = g.in_sp[0], kd = weight.size(2), coutg = weight.size(1);
  const int64_t od = g.out_sp[0], sd = g.stride[0], pd = g.padding[0], dd = g.dilation[0];
  Tensor x2 = reshape(permute(x, DimVector{0, 2, 1, 3, 4}), DimVector{n * d, cin, g.in_sp[1], g.in_sp[2]});
  Tensor w2 = reshape(weight, DimVector{cin, coutg * kd, weight.size(3), weight.size(4)});
  Tensor z = call<OpId::conv_transpose2d>(x2, w2, std::optional<Tensor>(), DimVector{g.stride[1], g.stride[2]},
                              DimVector{g.padding[1], g.padding[2]}, DimVector{g.out_pad[1], g.out_pad[2]}, groups,
                              DimVector{g.dilation[1], g.dilation[2]});
  const int64_t oh = z.size(2), ow = z.size(3);
  z = reshape(z, DimVector{n, d, groups, coutg, kd, oh, ow});
  z = reshape(permute(z, DimVector{0, 2, 3, 1, 4, 5, 6}), DimVector{n, g.cout, d * kd, oh, ow});
  const int64_t full = (d - 1) * sd + dd * (kd - 1) + 1, buf = std::max(full, pd + od);
  if (dd == 1 && sd == kd && pd + od <= full) {
    // Stride equal to the kernel depth (the usual 2x upsampling): every output depth gets exactly one tap, in
    // (id, kd) order, so the slices need no summing.
    Tensor y = narrow(z, 2, pd, od);
    if (has(bias)) y = add(y, reshape(*bias, DimVector{g.cout, 1, 1, 1}));
    y = contiguous(y);
    return g.batched ? y : squeeze(y, 0);
  }
  std::vector<int64_t> idx;
  idx.reserve(static_cast<size_t>(d * kd));
  for (int64_t i = 0; i < d; ++i)
    for (int64_t j = 0; j < kd; ++j) idx.push_back(i * sd + j * dd);
  Tensor y = index_add(zeros(DimVector{n, g.cout, buf, oh, ow}, z.dtype(), z.device()), 2,
                       host_index(idx, z.device()), z);
  y = narrow(y, 2, pd, od);
  if (has(bias)) y = add(y, reshape(*bias, DimVector{g.cout, 1, 1, 1}));
  y = contiguous(y);
  return g.batched ? y : squeeze(y, 0);
}
STRATA_IMPL_COMPOSITE(conv_transpose3d, conv_transpose3d_impl);

namespace {

// conv3d as conv2d: the kd depth taps of each output depth become channels (c, kd), and the output depths a
// batch dim. Padding is given per side (lo, hi) so that 'same' works with odd totals.
Tensor conv3d_lohi(const char* op, const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                   const DimVector& st, const DimVector& lo, const DimVector& hi, const DimVector& dil,
                   int64_t groups) {
  const int64_t nd = input.dim();
  STRATA_CHECK(nd == 4 || nd == 5, op, ": Expected 4D (unbatched) or 5D (batched) input to ", op,
               ", but got input of size: ", input.shape_str());
  STRATA_CHECK(weight.dim() == 5, op, ": expected weight to be 5-dimensional, but got weight of size ",
               weight.shape_str());
  check_floating(op, input, "input");
  STRATA_CHECK(input.dtype() == weight.dtype(), op, ": Input type (", dtype_name(input.dtype()),
               ") and weight type (", dtype_name(weight.dtype()), ") should be the same");
  STRATA_CHECK(groups > 0, op, ": non-positive groups is not supported (got groups=", groups, ")");
  for (int i = 0; i < 3; ++i) {
    STRATA_CHECK(st[i] > 0, op, ": non-positive stride is not supported (got stride=", shape_str(st), ")");
    STRATA_CHECK(dil[i] > 0, op, ": dilation should be greater than zero (got dilation=", shape_str(dil), ")");
    STRATA_CHECK(lo[i] >= 0 && hi[i] >= 0, op, ": negative padding is not supported (got padding=", shape_str(lo),
                 ")");
  }
  Tensor x = nd == 5 ? input : unsqueeze(input, 0);
  const int64_t n = x.size(0), c = x.size(1), o = weight.size(0);
  STRATA_CHECK(o % groups == 0, op, ": Given groups=", groups, ", expected weight to be divisible by ", groups,
               " at dimension 0, but got weight of size ", weight.shape_str(), " instead");
  STRATA_CHECK(c == weight.size(1) * groups, "Given groups=", groups, ", weight of size ", weight.shape_str(),
               ", expected input", input.shape_str(), " to have ", weight.size(1) * groups, " channels, but got ", c,
               " channels instead");
  STRATA_CHECK(!has(bias) || (bias->dim() == 1 && bias->size(0) == o), op, ": Given weight of size ",
               weight.shape_str(), ", expected bias to be 1-dimensional with ", o, " elements, but got bias of size ",
               bias->shape_str(), " instead");
  DimVector padded, ksz;
  for (int i = 0; i < 3; ++i) {
    padded.push_back(x.size(2 + i) + lo[i] + hi[i]);
    ksz.push_back(dil[i] * (weight.size(2 + i) - 1) + 1);
  }
  for (int i = 0; i < 3; ++i)
    STRATA_CHECK(padded[i] >= ksz[i], "Calculated padded input size per channel: (", join_x(padded),
                 "). Kernel size: (", join_x(ksz), "). Kernel size can't be greater than actual input size");
  // Depth padding, and the H/W padding when it is asymmetric, go through pad (zeros).
  const bool sym_hw = lo[1] == hi[1] && lo[2] == hi[2];
  if (lo[0] || hi[0] || !sym_hw)
    x = pad(x, DimVector{sym_hw ? 0 : lo[2], sym_hw ? 0 : hi[2], sym_hw ? 0 : lo[1], sym_hw ? 0 : hi[1], lo[0], hi[0]});
  const int64_t kd = weight.size(2), dp = x.size(2), h = x.size(3), w = x.size(4);
  const int64_t od = (dp - ksz[0]) / st[0] + 1;
  std::vector<int64_t> idx;
  idx.reserve(static_cast<size_t>(od * kd));
  for (int64_t i = 0; i < od; ++i)
    for (int64_t j = 0; j < kd; ++j) idx.push_back(i * st[0] + j * dil[0]);
  Tensor cols = index_select(x, 2, host_index(idx, x.device()));  // (n, c, od * kd, h, w)
  cols = reshape(permute(reshape(cols, DimVector{n, c, od, kd, h, w}), DimVector{0, 2, 1, 3, 4, 5}),
                 DimVector{n * od, c * kd, h, w});
  Tensor w2 = reshape(weight, DimVector{o, weight.size(1) * kd, weight.size(3), weight.size(4)});
  const DimVector pad_hw = sym_hw ? DimVector{lo[1], lo[2]} : DimVector{0, 0};
  Tensor y = conv2d(cols, w2, bias, DimVector{st[1], st[2]}, pad_hw, DimVector{dil[1], dil[2]}, groups);
  y = contiguous(permute(reshape(y, DimVector{n, od, o, y.size(2), y.size(3)}), DimVector{0, 2, 1, 3, 4}));
  return nd == 5 ? y : squeeze(y, 0);
}

}  // namespace

Tensor conv3d_impl(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias, IntArrayRef stride,
                   IntArrayRef padding, IntArrayRef dilation, int64_t groups) {
  const char* op = "conv3d";
  const DimVector p = expand_param(padding, 3, op, "padding");
  return conv3d_lohi(op, input, weight, bias, expand_param(stride, 3, op, "stride"), p, p,
                     expand_param(dilation, 3, op, "dilation"), groups);
}
STRATA_IMPL_COMPOSITE(conv3d, conv3d_impl);

Tensor conv3d_padding_impl(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                           IntArrayRef stride, std::string_view padding, IntArrayRef dilation, int64_t groups) {
  const char* op = "conv3d";
  const DimVector st = expand_param(stride, 3, op, "stride"), dil = expand_param(dilation, 3, op, "dilation");
  DimVector lo(3, 0), hi(3, 0);
  if (padding == "same") {
    for (int i = 0; i < 3; ++i)
      STRATA_CHECK(st[i] == 1, op, ": padding='same' is not supported for strided convolutions");
    STRATA_CHECK(weight.dim() == 5, op, ": expected weight to be 5-dimensional, but got weight of size ",
                 weight.shape_str());
    same_padding(3, weight, dil, lo, hi);
  } else {
    STRATA_CHECK(padding == "valid", op, ": Invalid padding string: '", padding, "' (expected 'same' or 'valid')");
  }
  return conv3d_lohi(op, input, weight, bias, st, lo, hi, dil, groups);
}
STRATA_IMPL_COMPOSITE(conv3d_padding, conv3d_padding_impl);

// ---- im2col / col2im ----------------------------------------------------------

namespace {

struct UnfoldArgs {
  DimVector k, d, p, s;
};
UnfoldArgs unfold_args(const char* op, IntArrayRef kernel_size, IntArrayRef dilation, IntArrayRef padding,
                       IntArrayRef stride) {
  UnfoldArgs a{expand_param(kernel_size, 2, op, "kernel_size"), expand_param(dilation, 2, op, "dilation"),
               expand_param(padding, 2, op, "padding"), expand_param(stride, 2, op, "stride")};
  for (int i = 0; i < 2; ++i) {
    STRATA_CHECK(a.k[i] > 0, op, ": kernel size should be greater than zero, but got kernel_size=", tuple_str(a.k));
    STRATA_CHECK(a.d[i] > 0, op, ": dilation should be greater than zero, but got dilation=", tuple_str(a.d));
    STRATA_CHECK(a.p[i] >= 0, op, ": padding should be non-negative, but got padding=", tuple_str(a.p));
    STRATA_CHECK(a.s[i] > 0, op, ": stride should be greater than zero, but got stride=", tuple_str(a.s));
  }
  return a;
}
DimVector blocks(const UnfoldArgs& a, int64_t h, int64_t w) {
  return {(h + 2 * a.p[0] - a.d[0] * (a.k[0] - 1) - 1) / a.s[0] + 1,
          (w + 2 * a.p[1] - a.d[1] * (a.k[1] - 1) - 1) / a.s[1] + 1};
}
Window2d window_of(const UnfoldArgs& a) { return {a.k[0], a.k[1], a.s[0], a.s[1], a.p[0], a.p[1], a.d[0], a.d[1]}; }

}  // namespace

Tensor im2col_impl(const Tensor& input, IntArrayRef kernel_size, IntArrayRef dilation, IntArrayRef padding,
                   IntArrayRef stride) {
  const char* op = "im2col";
  const int64_t nd = input.dim();
  STRATA_CHECK((nd == 3 || nd == 4) && input.size(nd - 1) > 0 && input.size(nd - 2) > 0 && input.size(nd - 3) > 0,
               "Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input, but got: ",
               input.shape_str());
  check_floating(op, input, "input");
  const UnfoldArgs a = unfold_args(op, kernel_size, dilation, padding, stride);
  const int64_t h = input.size(nd - 2), w = input.size(nd - 1), c = input.size(nd - 3);
  const int64_t n = nd == 4 ? input.size(0) : 1;
  const DimVector b = blocks(a, h, w);
  STRATA_CHECK(b[0] >= 1 && b[1] >= 1, "Given input with spatial size ", tuple_str(DimVector{h, w}),
               ", kernel_size=", tuple_str(a.k), ", dilation=", tuple_str(a.d), ", padding=", tuple_str(a.p),
               ", calculated shape of the array of sliding blocks as ", tuple_str(b),
               ", but its components must be at least one.");
  DimVector out_shape;
  if (nd == 4) out_shape.push_back(n);
  out_shape.push_back(c * a.k[0] * a.k[1]);
  out_shape.push_back(b[0] * b[1]);
  Device dev = input.device();
  if (dev.is_meta()) return empty_tensor(out_shape, input.dtype(), dev);
  const ScalarType ct = compute_type(input.dtype());
  Tensor y = empty_tensor(out_shape, ct, dev);
  if (y.numel() > 0)
    nn_im2col_stub(dev.type, reshape_contig(prep(input, ct), DimVector{n, c, h, w}), y, b[0], b[1], window_of(a));
  return to_dtype(y, input.dtype());
}
STRATA_IMPL_CPU_META(im2col, im2col_impl);

Tensor col2im_impl(const Tensor& input, IntArrayRef output_size, IntArrayRef kernel_size, IntArrayRef dilation,
                   IntArrayRef padding, IntArrayRef stride) {
  const char* op = "col2im";
  const int64_t nd = input.dim();
  STRATA_CHECK((nd == 2 || nd == 3) && input.size(nd - 1) > 0 && input.size(nd - 2) > 0,
               "Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size and non-zero dimensions "
               "for input, but got: ", input.shape_str());
  check_floating(op, input, "input");
  const DimVector os = expand_param(output_size, 2, op, "output_size");
  const UnfoldArgs a = unfold_args(op, kernel_size, dilation, padding, stride);
  const int64_t kk = a.k[0] * a.k[1], rows = input.size(nd - 2), l = input.size(nd - 1);
  STRATA_CHECK(rows % kk == 0, "Expected size of input's dimension ", nd - 2,
               " to be divisible by the product of kernel_size, but got input.size(", nd - 2, ")=", rows,
               " and kernel_size=", tuple_str(a.k));
  const DimVector b = blocks(a, os[0], os[1]);
  STRATA_CHECK(b[0] >= 1 && b[1] >= 1 && b[0] * b[1] == l, "Given output_size=", tuple_str(os), ", kernel_size=",
               tuple_str(a.k), ", dilation=", tuple_str(a.d), ", padding=", tuple_str(a.p), ", stride=",
               tuple_str(a.s), ", expected size of input's dimension ", nd - 1,
               " to match the calculated number of sliding blocks ", b[0], " * ", b[1], " = ", b[0] * b[1],
               ", but got input.size(", nd - 1, ")=", l, ".");
  const int64_t n = nd == 3 ? input.size(0) : 1, c = rows / kk;
  DimVector out_shape;
  if (nd == 3) out_shape.push_back(n);
  out_shape.insert(out_shape.end(), {c, os[0], os[1]});
  Device dev = input.device();
  if (dev.is_meta()) return empty_tensor(out_shape, input.dtype(), dev);
  const ScalarType ct = compute_type(input.dtype());
  Tensor y = empty_tensor(out_shape, ct, dev);
  if (y.numel() > 0)
    nn_col2im_stub(dev.type, reshape_contig(prep(input, ct), DimVector{n, rows, l}),
                   reshape_contig(y, DimVector{n, c, os[0], os[1]}), b[0], b[1], window_of(a));
  return to_dtype(y, input.dtype());
}
STRATA_IMPL_CPU_META(col2im, col2im_impl);

}  // namespace nn
}  // namespace strata
