// max/avg pooling in 1 and 3 dims, adaptive pooling (avg 1-D/3-D, max 1-D to
// 3-D), the pooling gradients and the scatter behind max unpooling. Every input
// is viewed as (planes, D, H, W) so that one kernel serves 1, 2 and 3 dims.
#include <algorithm>

#include "ops/nn_more_kernels.h"
#include "ops/nn_util.h"
#include "ops/op_list.h"

namespace strata {

STRATA_DEFINE_STUB(nn_max_pool3d_stub, nn::MaxPool3dFn);
STRATA_DEFINE_STUB(nn_avg_pool3d_stub, nn::AvgPool3dFn);
STRATA_DEFINE_STUB(nn_avg_pool3d_backward_stub, nn::AvgPool3dBackwardFn);
STRATA_DEFINE_STUB(nn_adaptive_pool3d_stub, nn::AdaptivePool3dFn);
STRATA_DEFINE_STUB(nn_adaptive_avg_pool3d_backward_stub, nn::AdaptiveAvgPool3dBackwardFn);
STRATA_DEFINE_STUB(nn_pool_scatter_stub, nn::PoolScatterFn);

namespace nn {
namespace {

// Output length of one pooled dim (torch's rule; ceil_mode drops a last window that would start in the padding).
int64_t pooled_size(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dil, bool ceil_mode) {
  const int64_t num = in + 2 * pad - dil * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  int64_t out = (num >= 0 ? num / stride : -((-num + stride - 1) / stride)) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

std::string dims_x(IntArrayRef v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "x" : "") + std::to_string(v[i]);
  return s;
}


struct PoolPlan {
  Window3d win;
  DimVector out_shape;
};

// Checks and output shape of max/avg pooling over the last k dims.
PoolPlan plan_pool(const char* op, int k, const Tensor& input, IntArrayRef kernel_size, OptIntArrayRef stride,
                   IntArrayRef padding, IntArrayRef dilation, bool ceil_mode, bool is_max) {
  const int64_t nd = input.dim();
  if (k == 1)
    STRATA_CHECK(nd == 2 || nd == 3, op, ": Expected 2D or 3D (batch mode) tensor with optional 0 dim batch size for "
                 "input, but got: ", input.shape_str());
  else
    STRATA_CHECK(nd == k + 1 || nd == k + 2, "non-empty ", k + 1, "D or ", k + 2,
                 "D (batch mode) tensor expected for input (", op, ": got input of size ", input.shape_str(), ")");
  for (int64_t d = nd - k - 1; d < nd; ++d)
    STRATA_CHECK(input.size(d) > 0, op, ": Expected ", k + 1, "D or ", k + 2, "D (batch mode) tensor with optional "
                 "0 dim batch size for input and non-zero channel and spatial dims, but got input of size: ",
                 input.shape_str());
  check_floating(op, input, "input");
  const DimVector ks = expand_param(kernel_size, k, op, "kernel_size");
  const DimVector ss = (stride && !stride->empty()) ? expand_param(*stride, k, op, "stride") : ks;
  const DimVector ps = expand_param(padding, k, op, "padding");
  const DimVector ds = expand_param(dilation, k, op, "dilation");
  PoolPlan plan;
  Window3d& w = plan.win;
  DimVector in_sp, out_sp;
  for (int i = 0; i < 3; ++i) w.k[i] = w.s[i] = w.d[i] = 1, w.p[i] = 0;
  for (int i = 0; i < k; ++i) {
    const int j = 3 - k + i;
    w.k[j] = ks[i], w.s[j] = ss[i], w.p[j] = ps[i], w.d[j] = ds[i];
    STRATA_CHECK(ks[i] > 0, op, ": kernel_size must be greater than zero, but got kernel_size=", shape_str(ks));
    STRATA_CHECK(ss[i] > 0, op, ": stride must be greater than zero, but got stride=", shape_str(ss));
    STRATA_CHECK(ds[i] > 0, op, ": dilation must be greater than zero, but got dilation=", shape_str(ds));
    STRATA_CHECK(ps[i] >= 0, op, ": padding must be non-negative, but got ", shape_str(ps));
    // Keeps the window arithmetic below (dilation * kernel, input + padding) inside int64.
    constexpr int64_t kLimit = int64_t{1} << 40;
    STRATA_CHECK(ks[i] < kLimit && ss[i] < kLimit && ds[i] < kLimit && ps[i] < kLimit && ds[i] * (ks[i] - 1) < kLimit,
                 op, ": kernel_size, stride, padding and dilation must be below 2^40 (got kernel_size=",
                 shape_str(ks), ", stride=", shape_str(ss), ", padding=", shape_str(ps), ", dilation=",
                 shape_str(ds), ")");
    STRATA_CHECK(ps[i] <= ks[i] / 2, op, ": pad should be at most half of effective kernel size, but got pad=",
                 shape_str(ps), ", kernel_size=", shape_str(ks), " and dilation=", shape_str(ds));
    const int64_t n = input.size(nd - k + i);
    in_sp.push_back(n);
    out_sp.push_back(pooled_size(n, ks[i], ps[i], ss[i], is_max ? ds[i] : 1, ceil_mode));
  }
  for (int i = 0; i < k; ++i)
    STRATA_CHECK(out_sp[i] > 0, op, ": Given input size: (", input.size(nd - k - 1), "x", dims_x(in_sp),
                 "). Calculated output size: (", input.size(nd - k - 1), "x", dims_x(out_sp),
                 "). Output size is too small");
  plan.out_shape.assign(input.sizes().begin(), input.sizes().end() - k);
  plan.out_shape.insert(plan.out_shape.end(), out_sp.begin(), out_sp.end());
  return plan;
}

Tensor2 max_pool_nd(const char* op, int k, const Tensor& input, IntArrayRef kernel_size, OptIntArrayRef stride,
                    IntArrayRef padding, IntArrayRef dilation, bool ceil_mode) {
  PoolPlan plan = plan_pool(op, k, input, kernel_size, stride, padding, dilation, ceil_mode, true);
  Device dev = input.device();
  Tensor idx = empty_tensor(plan.out_shape, ScalarType::Int64, dev);
  if (dev.is_meta()) return {empty_tensor(plan.out_shape, input.dtype(), dev), idx};
  const ScalarType ct = compute_type(input.dtype());
  Tensor y = empty_tensor(plan.out_shape, ct, dev);
  if (y.numel() > 0)
    nn_max_pool3d_stub(dev.type, reshape_contig(prep(input, ct), as_3d(input.sizes(), k)),
                       reshape_contig(y, as_3d(y.sizes(), k)), reshape_contig(idx, as_3d(y.sizes(), k)), plan.win);
  return {to_dtype(y, input.dtype()), idx};
}

Tensor avg_pool_nd(const char* op, int k, const Tensor& input, IntArrayRef kernel_size, OptIntArrayRef stride,
                   IntArrayRef padding, bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor) {
  STRATA_CHECK(!divisor || *divisor != 0, op, ": divisor must be not zero");
  const std::vector<int64_t> one{1};
  PoolPlan plan = plan_pool(op, k, input, kernel_size, stride, padding, one, ceil_mode, false);
  Device dev = input.device();
  if (dev.is_meta()) return empty_tensor(plan.out_shape, input.dtype(), dev);
  const ScalarType ct = compute_type(input.dtype());
  Tensor y = empty_tensor(plan.out_shape, ct, dev);
  if (y.numel() > 0)
    nn_avg_pool3d_stub(dev.type, reshape_contig(prep(input, ct), as_3d(input.sizes(), k)),
                       reshape_contig(y, as_3d(y.sizes(), k)), plan.win, count_include_pad, divisor.value_or(0));
  return to_dtype(y, input.dtype());
}

// Adaptive pooling: avg (indices undefined) or max.
Tensor2 adaptive_pool_nd(const char* op, int k, const Tensor& input, IntArrayRef output_size, bool is_max) {
  const int64_t nd = input.dim();
  if (k == 1)
    STRATA_CHECK(nd == 2 || nd == 3, "Expected 2 to 3 dimensions, but got ", nd,
                 "-dimensional tensor for argument #1 'self' (while checking arguments for ", op, ")");
  else
    STRATA_CHECK(nd == k + 1 || nd == k + 2, op, "(): Expected ", k + 1, "D or ", k + 2, "D tensor, but got ",
                 input.shape_str());
  for (int64_t d = nd == k + 2 ? 1 : 0; d < nd; ++d)
    STRATA_CHECK(input.size(d) > 0, op, "(): Expected input to have non-zero size for non-batch dimensions, but "
                 "input has sizes ", input.shape_str(), " with dimension ", d, " being empty");
  check_floating(op, input, "input");
  const DimVector os = expand_param(output_size, k, op, "output_size");
  for (int i = 0; i < k; ++i)
    STRATA_CHECK(os[i] >= 0, op, "(): elements of output_size must be greater than or equal to 0 but received ",
                 shape_str(os));
  DimVector out_shape(input.sizes().begin(), input.sizes().end() - k);
  out_shape.insert(out_shape.end(), os.begin(), os.end());
  Device dev = input.device();
  Tensor idx = is_max ? empty_tensor(out_shape, ScalarType::Int64, dev) : Tensor();
  if (dev.is_meta()) return {empty_tensor(out_shape, input.dtype(), dev), idx};
  const ScalarType ct = compute_type(input.dtype());
  Tensor y = empty_tensor(out_shape, ct, dev);
  if (y.numel() > 0)
    nn_adaptive_pool3d_stub(dev.type, reshape_contig(prep(input, ct), as_3d(input.sizes(), k)),
                            reshape_contig(y, as_3d(out_shape, k)),
                            is_max ? reshape_contig(idx, as_3d(out_shape, k)) : Tensor());
  return {to_dtype(y, input.dtype()), idx};
}

// Checks of a gradient op's grad_output against the input size it maps back to.
void check_grad_shape(const char* op, const Tensor& g, IntArrayRef input_size, int k) {
  STRATA_CHECK(k >= 1 && k <= 3 && static_cast<int64_t>(input_size.size()) == g.dim() && g.dim() >= k, op,
               ": grad_output of size ", g.shape_str(), " does not match input_size ", shape_str(input_size),
               " with ", k, " spatial dims");
  for (int64_t i = 0; i < g.dim() - k; ++i)
    STRATA_CHECK(g.size(i) == input_size[i], op, ": grad_output of size ", g.shape_str(),
                 " does not match input_size ", shape_str(input_size));
  for (int64_t v : input_size) STRATA_CHECK(v >= 0, op, ": invalid input_size ", shape_str(input_size));
  check_floating(op, g, "grad_output");
}

}  // namespace

Tensor2 max_pool1d_with_indices_impl(const Tensor& input, IntArrayRef kernel_size, OptIntArrayRef stride,
                                     IntArrayRef padding, IntArrayRef dilation, bool ceil_mode) {
  return max_pool_nd("max_pool1d", 1, input, kernel_size, stride, padding, dilation, ceil_mode);
}
STRATA_IMPL_CPU_META(max_pool1d_with_indices, max_pool1d_with_indices_impl);
Tensor2 max_pool3d_with_indices_impl(const Tensor& input, IntArrayRef kernel_size, OptIntArrayRef stride,
                                     IntArrayRef padding, IntArrayRef dilation, bool ceil_mode) {
  return max_pool_nd("max_pool3d", 3, input, kernel_size, stride, padding, dilation, ceil_mode);
}
STRATA_IMPL_CPU_META(max_pool3d_with_indices, max_pool3d_with_indices_impl);

Tensor avg_pool1d_impl(const Tensor& input, IntArrayRef kernel_size, OptIntArrayRef stride, IntArrayRef padding,
                       bool ceil_mode, bool count_include_pad) {
  return avg_pool_nd("avg_pool1d", 1, input, kernel_size, stride, padding, ceil_mode, count_include_pad, {});
}
STRATA_IMPL_CPU_META(avg_pool1d, avg_pool1d_impl);
Tensor avg_pool3d_impl(const Tensor& input, IntArrayRef kernel_size, OptIntArrayRef stride, IntArrayRef padding,
                       bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor_override) {
  return avg_pool_nd("avg_pool3d", 3, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override);
}
STRATA_IMPL_CPU_META(avg_pool3d, avg_pool3d_impl);

Tensor adaptive_avg_pool1d_impl(const Tensor& input, IntArrayRef output_size) {
  return std::get<0>(adaptive_pool_nd("adaptive_avg_pool1d", 1, input, output_size, false));
}
STRATA_IMPL_CPU_META(adaptive_avg_pool1d, adaptive_avg_pool1d_impl);
Tensor adaptive_avg_pool3d_impl(const Tensor& input, IntArrayRef output_size) {
  return std::get<0>(adaptive_pool_nd("adaptive_avg_pool3d", 3, input, output_size, false));
}
STRATA_IMPL_CPU_META(adaptive_avg_pool3d, adaptive_avg_pool3d_impl);
Tensor2 adaptive_max_pool1d_impl(const Tensor& input, IntArrayRef output_size) {
  return adaptive_pool_nd("adaptive_max_pool1d", 1, input, output_size, true);
}
STRATA_IMPL_CPU_META(adaptive_max_pool1d, adaptive_max_pool1d_impl);
Tensor2 adaptive_max_pool2d_impl(const Tensor& input, IntArrayRef output_size) {
  return adaptive_pool_nd("adaptive_max_pool2d", 2, input, output_size, true);
}
STRATA_IMPL_CPU_META(adaptive_max_pool2d, adaptive_max_pool2d_impl);
Tensor2 adaptive_max_pool3d_impl(const Tensor& input, IntArrayRef output_size) {
  return adaptive_pool_nd("adaptive_max_pool3d", 3, input, output_size, true);
}
STRATA_IMPL_CPU_META(adaptive_max_pool3d, adaptive_max_pool3d_impl);

Tensor pool_scatter_impl(const Tensor& src, const Tensor& indices, IntArrayRef output_size, bool accumulate) {
  const char* op = accumulate ? "_pool_scatter" : "max_unpool";
  const int k = static_cast<int>(output_size.size());
  STRATA_CHECK(k >= 1 && k <= 3 && src.dim() >= k, op, ": expected 1 to 3 output sizes and an input of at least "
               "that many dims, but got output_size=", shape_str(output_size), " and input of size ", src.shape_str());
  STRATA_CHECK(indices.dtype() == ScalarType::Int64, op, ": expected indices to be int64, but got ",
               indices.describe());
  STRATA_CHECK(std::ranges::equal(src.sizes(), indices.sizes()), op,
               ": Expected shape of indices to be same as that of the input "
               "tensor (", src.shape_str(), ") but got indices tensor with shape: ", indices.shape_str());
  check_floating(op, src, "input");
  for (int64_t v : output_size) STRATA_CHECK(v >= 0, op, ": invalid output_size ", shape_str(output_size));
  DimVector out_shape(src.sizes().begin(), src.sizes().end() - k);
  out_shape.insert(out_shape.end(), output_size.begin(), output_size.end());
  Device dev = check_devices(op, {src, indices});
  if (dev.is_meta()) return empty_tensor(out_shape, src.dtype(), dev);
  const ScalarType ct = compute_type(src.dtype());
  Tensor out = empty_tensor(out_shape, ct, dev);
  if (out.numel() == 0) return to_dtype(out, src.dtype());
  const int64_t p = checked_numel(output_size, op), planes = out.numel() / p;
  const int64_t q = planes == 0 ? 0 : src.numel() / planes;
  Tensor idx = contiguous_input(indices);
  if (idx.numel() > 0) {
    int64_t lo = 0, hi = 0;
    nn_minmax_stub(dev.type, idx, &lo, &hi);
    STRATA_CHECK(lo >= 0 && hi < p, op, ": Found an invalid max index: ", lo < 0 ? lo : hi,
                 " (output volumes are of size ", dims_x(output_size), ")");
  }
  nn_pool_scatter_stub(dev.type, reshape_contig(prep(src, ct), DimVector{planes, q}),
                       reshape_contig(idx, DimVector{planes, q}), reshape_contig(out, DimVector{planes, p}),
                       accumulate);
  return to_dtype(out, src.dtype());
}
STRATA_IMPL_CPU_META(_pool_scatter, pool_scatter_impl);

Tensor avg_pool_backward_impl(const Tensor& grad_output, IntArrayRef input_size, IntArrayRef kernel_size,
                              IntArrayRef stride, IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                              std::optional<int64_t> divisor) {
  const char* op = "_avg_pool_backward";
  const int k = static_cast<int>(kernel_size.size());
  check_grad_shape(op, grad_output, input_size, k);
  Window3d w;
  for (int i = 0; i < 3; ++i) w.k[i] = w.s[i] = w.d[i] = 1, w.p[i] = 0;
  const DimVector ss = stride.empty() ? DimVector(kernel_size.begin(), kernel_size.end())
                                      : expand_param(stride, k, op, "stride");
  const DimVector ps = expand_param(padding, k, op, "padding");
  const int64_t nd = grad_output.dim();
  for (int i = 0; i < k; ++i) {
    const int j = 3 - k + i;
    w.k[j] = kernel_size[i], w.s[j] = ss[i], w.p[j] = ps[i];
    STRATA_CHECK(w.k[j] > 0 && w.s[j] > 0 && w.p[j] >= 0, op, ": invalid window kernel_size=",
                 shape_str(kernel_size), " stride=", shape_str(ss), " padding=", shape_str(ps));
    STRATA_CHECK(grad_output.size(nd - k + i) ==
                     pooled_size(input_size[nd - k + i], w.k[j], w.p[j], w.s[j], 1, ceil_mode),
                 op, ": grad_output of size ", grad_output.shape_str(), " does not match the pooled size of ",
                 shape_str(input_size));
  }
  STRATA_CHECK(!divisor || *divisor != 0, op, ": divisor must be not zero");
  Device dev = grad_output.device();
  if (dev.is_meta()) return empty_tensor(input_size, grad_output.dtype(), dev);
  const ScalarType ct = compute_type(grad_output.dtype());
  Tensor gx = empty_tensor(input_size, ct, dev);
  if (gx.numel() == 0) return to_dtype(gx, grad_output.dtype());
  if (grad_output.numel() == 0) return to_dtype(fill_(gx, 0.0), grad_output.dtype());
  nn_avg_pool3d_backward_stub(dev.type, reshape_contig(prep(grad_output, ct), as_3d(grad_output.sizes(), k)),
                              reshape_contig(gx, as_3d(input_size, k)), w, count_include_pad, divisor.value_or(0));
  return to_dtype(gx, grad_output.dtype());
}
STRATA_IMPL_CPU_META(_avg_pool_backward, avg_pool_backward_impl);

Tensor adaptive_avg_pool_backward_impl(const Tensor& grad_output, IntArrayRef input_size, int64_t spatial_dims) {
  const char* op = "_adaptive_avg_pool_backward";
  const int k = static_cast<int>(spatial_dims);
  check_grad_shape(op, grad_output, input_size, k);
  Device dev = grad_output.device();
  if (dev.is_meta()) return empty_tensor(input_size, grad_output.dtype(), dev);
  const ScalarType ct = compute_type(grad_output.dtype());
  Tensor gx = empty_tensor(input_size, ct, dev);
  if (gx.numel() == 0) return to_dtype(gx, grad_output.dtype());
  if (grad_output.numel() == 0) return to_dtype(fill_(gx, 0.0), grad_output.dtype());
  nn_adaptive_avg_pool3d_backward_stub(dev.type,
                                       reshape_contig(prep(grad_output, ct), as_3d(grad_output.sizes(), k)),
                                       reshape_contig(gx, as_3d(input_size, k)));
  return to_dtype(gx, grad_output.dtype());
}
STRATA_IMPL_CPU_META(_adaptive_avg_pool_backward, adaptive_avg_pool_backward_impl);

}  // namespace nn
}  // namespace strata
