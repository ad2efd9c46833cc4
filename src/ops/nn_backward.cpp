// Fused backward ops of the nn family (decl/nn_backward.def): argument checks,
// shapes and dtypes here; kernels in backends/cpu/kernels/nn_backward_kernels.cpp.
#include "ops/nn_backward_kernels.h"
#include "ops/nn_util.h"
#include "ops/op_list.h"

namespace strata {

STRATA_DEFINE_STUB(nn_conv2d_backward_stub, nn::Conv2dBackwardFn);
STRATA_DEFINE_STUB(nn_layer_norm_backward_stub, nn::LayerNormBackwardFn);

namespace nn {

namespace {
bool same_sizes(IntArrayRef a, IntArrayRef b) { return std::equal(a.begin(), a.end(), b.begin(), b.end()); }
}  // namespace

Tensor3 conv2d_backward_impl(const Tensor& grad_output, const Tensor& input, const Tensor& weight, IntArrayRef stride,
                             IntArrayRef padding, IntArrayRef dilation, int64_t groups, bool input_grad,
                             bool weight_grad) {
  const char* op = "_conv2d_backward";
  STRATA_CHECK(input.dim() == 4 && weight.dim() == 4 && grad_output.dim() == 4, op,
               ": expected 4-D grad_output, input and weight, but got grad_output of size ", grad_output.shape_str(),
               ", input of size ", input.shape_str(), " and weight of size ", weight.shape_str());
  check_floating(op, input, "input");
  check_same_dtype(op, input, "input", weight, "weight");
  check_same_dtype(op, input, "input", grad_output, "grad_output");
  const DimVector st = expand_param(stride, 2, op, "stride"), pd = expand_param(padding, 2, op, "padding");
  const DimVector dl = expand_param(dilation, 2, op, "dilation");
  for (int i = 0; i < 2; ++i)
    STRATA_CHECK(st[i] > 0 && dl[i] > 0 && pd[i] >= 0, op, ": expected positive stride and dilation and "
                 "non-negative padding, but got stride=", shape_str(st), ", padding=", shape_str(pd),
                 ", dilation=", shape_str(dl));
  STRATA_CHECK(groups > 0, op, ": non-positive groups is not supported (got groups=", groups, ")");
  const int64_t n = input.size(0), c = input.size(1), o = weight.size(0);
  STRATA_CHECK(o % groups == 0 && c == weight.size(1) * groups && grad_output.size(0) == n &&
                   grad_output.size(1) == o,
               op, ": shapes do not match: grad_output ", grad_output.shape_str(), ", input ", input.shape_str(),
               ", weight ", weight.shape_str(), ", groups=", groups);
  Device dev = check_devices(op, {grad_output, input, weight});
  const ScalarType dt = input.dtype();
  if (dev.is_meta())
    return {empty_tensor(input.sizes(), dt, dev), empty_tensor(weight.sizes(), dt, dev),
            empty_tensor(DimVector{o}, dt, dev)};
  const ScalarType ct = compute_type(dt);
  Tensor gx = empty_tensor(input.sizes(), ct, dev), gw = empty_tensor(weight.sizes(), ct, dev);
  Tensor gb = empty_tensor(DimVector{o}, ct, dev);
  // The output positions come from grad_output, and the kernel checks every
  // input position it reads against the input's bounds.
  Window2d p{weight.size(2), weight.size(3), st[0], st[1], pd[0], pd[1], dl[0], dl[1]};
  nn_conv2d_backward_stub(dev.type, prep(grad_output, ct), prep(input, ct), prep(weight, ct),
                          input_grad ? gx : Tensor(), weight_grad ? gw : Tensor(), gb, p, groups);
  if (!input_grad) fill_(gx, 0.0);
  if (!weight_grad) fill_(gw, 0.0);
  return {to_dtype(gx, dt), to_dtype(gw, dt), to_dtype(gb, dt)};
}
STRATA_IMPL_CPU_META(_conv2d_backward, conv2d_backward_impl);

Tensor3 layer_norm_backward_impl(const Tensor& grad_out, const Tensor& input, IntArrayRef normalized_shape,
                                 const std::optional<Tensor>& weight, double eps) {
  const char* op = "_layer_norm_backward";
  check_floating(op, input, "input");
  check_same_dtype(op, input, "input", grad_out, "grad_out");
  STRATA_CHECK(same_sizes(grad_out.sizes(), input.sizes()), op, ": expected grad_out of the input's size ",
               input.shape_str(), ", but got ", grad_out.shape_str());
  STRATA_CHECK(!normalized_shape.empty(), op, ": Expected normalized_shape to be at least 1-dimensional, but got "
               "normalized_shape = ", shape_str(normalized_shape));
  const int64_t nd = input.dim(), k = static_cast<int64_t>(normalized_shape.size());
  bool ok = nd >= k;
  for (int64_t i = 0; ok && i < k; ++i) ok = input.size(nd - k + i) == normalized_shape[i];
  STRATA_CHECK(ok, op, ": Given normalized_shape=", shape_str(normalized_shape), ", expected input with trailing "
               "dims equal to it, but got input of size ", input.shape_str());
  if (has(weight))
    STRATA_CHECK(same_sizes(weight->sizes(), normalized_shape), op, ": Expected weight to be of same shape as "
                 "normalized_shape, but got weight of shape ", weight->shape_str(), " and normalized_shape = ",
                 shape_str(normalized_shape));
  Device dev = check_devices(op, {grad_out, input, has(weight) ? *weight : Tensor()});
  const ScalarType dt = input.dtype();
  if (dev.is_meta())
    return {empty_tensor(input.sizes(), dt, dev), empty_tensor(normalized_shape, dt, dev),
            empty_tensor(normalized_shape, dt, dev)};
  const int64_t d = checked_numel(normalized_shape, op);
  const int64_t rows = d == 0 ? 0 : input.numel() / d;
  const ScalarType ct = compute_type(dt);
  Tensor gx = empty_tensor(input.sizes(), ct, dev);
  Tensor gw = empty_tensor(normalized_shape, ct, dev), gb = empty_tensor(normalized_shape, ct, dev);
  nn_layer_norm_backward_stub(dev.type, prep(grad_out, ct), prep(input, ct), prep_opt(weight, ct), gx, gw, gb, rows,
                              d, eps);
  return {to_dtype(gx, dt), to_dtype(gw, dt), to_dtype(gb, dt)};
}
STRATA_IMPL_CPU_META(_layer_norm_backward, layer_norm_backward_impl);

}  // namespace nn
}  // namespace strata
