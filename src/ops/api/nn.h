// C++ API of strata.nn.functional (see decl/nn.def).
#pragma once

#include "ops/op_list.h"

namespace strata {

using OptT_ = std::optional<Tensor>;

inline Tensor relu(const Tensor& self, const OptT_& out = std::nullopt) { return call<OpId::relu>(self, out); }
inline Tensor relu_(const Tensor& self) { return call<OpId::relu>(self, OptT_(self)); }
inline Tensor gelu(const Tensor& input, std::string_view approximate = "none", const OptT_& out = std::nullopt) {
  return call<OpId::gelu>(input, approximate, out);
}
inline Tensor silu(const Tensor& input, const OptT_& out = std::nullopt) { return call<OpId::silu>(input, out); }
inline Tensor mish(const Tensor& input, const OptT_& out = std::nullopt) { return call<OpId::mish>(input, out); }
inline Tensor softplus(const Tensor& input, double beta = 1.0, double threshold = 20.0, const OptT_& out = std::nullopt) {
  return call<OpId::softplus>(input, beta, threshold, out);
}
inline Tensor leaky_relu(const Tensor& input, double negative_slope = 0.01, const OptT_& out = std::nullopt) {
  return call<OpId::leaky_relu>(input, negative_slope, out);
}
inline Tensor elu(const Tensor& input, double alpha = 1.0, double scale = 1.0, double input_scale = 1.0,
                  const OptT_& out = std::nullopt) {
  return call<OpId::elu>(input, alpha, scale, input_scale, out);
}
inline Tensor hardtanh(const Tensor& input, double min_val = -1.0, double max_val = 1.0, const OptT_& out = std::nullopt) {
  return call<OpId::hardtanh>(input, min_val, max_val, out);
}
inline Tensor hardsigmoid(const Tensor& input, const OptT_& out = std::nullopt) { return call<OpId::hardsigmoid>(input, out); }
inline Tensor hardswish(const Tensor& input, const OptT_& out = std::nullopt) { return call<OpId::hardswish>(input, out); }
inline Tensor log_sigmoid(const Tensor& input, const OptT_& out = std::nullopt) { return call<OpId::log_sigmoid>(input, out); }

inline Tensor linear(const Tensor& input, const Tensor& weight, const OptT_& bias = std::nullopt) {
  return call<OpId::linear>(input, weight, bias);
}
inline Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx = -1) {
  return call<OpId::embedding>(weight, indices, padding_idx, false, false);
}
inline Tensor embedding_renorm_(const Tensor& self, const Tensor& indices, double max_norm, double norm_type = 2.0) {
  return call<OpId::embedding_renorm_>(self, indices, max_norm, norm_type);
}
inline Tensor one_hot(const Tensor& input, int64_t num_classes = -1) { return call<OpId::one_hot>(input, num_classes); }

inline Tensor layer_norm(const Tensor& input, IntArrayRef normalized_shape, const OptT_& weight = std::nullopt,
                         const OptT_& bias = std::nullopt, double eps = 1e-5) {
  return call<OpId::layer_norm>(input, normalized_shape, weight, bias, eps, true);
}
inline Tensor rms_norm(const Tensor& input, IntArrayRef normalized_shape, const OptT_& weight = std::nullopt,
                       std::optional<double> eps = std::nullopt) {
  return call<OpId::rms_norm>(input, normalized_shape, weight, eps);
}
inline Tensor group_norm(const Tensor& input, int64_t num_groups, const OptT_& weight = std::nullopt,
                         const OptT_& bias = std::nullopt, double eps = 1e-5) {
  return call<OpId::group_norm>(input, num_groups, weight, bias, eps, true);
}
// Argument order of torch.batch_norm (F.batch_norm puts the running stats first).
inline Tensor batch_norm(const Tensor& input, const OptT_& weight, const OptT_& bias, const OptT_& running_mean,
                         const OptT_& running_var, bool training, double momentum = 0.1, double eps = 1e-5) {
  return call<OpId::batch_norm>(input, weight, bias, running_mean, running_var, training, momentum, eps, true);
}

inline Tensor cross_entropy(const Tensor& input, const Tensor& target, const OptT_& weight = std::nullopt,
                            std::string_view reduction = "mean", int64_t ignore_index = -100,
                            double label_smoothing = 0.0) {
  return call<OpId::cross_entropy_loss>(input, target, weight, reduction, ignore_index, label_smoothing);
}
inline Tensor nll_loss(const Tensor& input, const Tensor& target, const OptT_& weight = std::nullopt,
                       std::string_view reduction = "mean", int64_t ignore_index = -100) {
  return call<OpId::nll_loss>(input, target, weight, reduction, ignore_index);
}
inline Tensor mse_loss(const Tensor& input, const Tensor& target, std::string_view reduction = "mean") {
  return call<OpId::mse_loss>(input, target, reduction);
}
inline Tensor l1_loss(const Tensor& input, const Tensor& target, std::string_view reduction = "mean") {
  return call<OpId::l1_loss>(input, target, reduction);
}
inline Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                               const OptT_& weight = std::nullopt,
                                               const OptT_& pos_weight = std::nullopt,
                                               std::string_view reduction = "mean") {
  return call<OpId::binary_cross_entropy_with_logits>(input, target, weight, pos_weight, reduction);
}
inline Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const OptT_& weight = std::nullopt,
                                   std::string_view reduction = "mean") {
  return call<OpId::binary_cross_entropy>(input, target, weight, reduction);
}

inline Tensor conv1d(const Tensor& input, const Tensor& weight, const OptT_& bias = std::nullopt,
                     IntArrayRef stride = std::vector<int64_t>{1}, IntArrayRef padding = std::vector<int64_t>{0},
                     IntArrayRef dilation = std::vector<int64_t>{1}, int64_t groups = 1) {
  return call<OpId::conv1d>(input, weight, bias, stride, padding, dilation, groups);
}
inline Tensor conv1d(const Tensor& input, const Tensor& weight, const OptT_& bias, IntArrayRef stride,
                     std::string_view padding, IntArrayRef dilation = std::vector<int64_t>{1}, int64_t groups = 1) {
  return call<OpId::conv1d_padding>(input, weight, bias, stride, padding, dilation, groups);
}
inline Tensor conv2d(const Tensor& input, const Tensor& weight, const OptT_& bias = std::nullopt,
                     IntArrayRef stride = std::vector<int64_t>{1, 1}, IntArrayRef padding = std::vector<int64_t>{0, 0},
                     IntArrayRef dilation = std::vector<int64_t>{1, 1}, int64_t groups = 1) {
  return call<OpId::conv2d>(input, weight, bias, stride, padding, dilation, groups);
}
inline Tensor conv2d(const Tensor& input, const Tensor& weight, const OptT_& bias, IntArrayRef stride,
                     std::string_view padding, IntArrayRef dilation = std::vector<int64_t>{1, 1}, int64_t groups = 1) {
  return call<OpId::conv2d_padding>(input, weight, bias, stride, padding, dilation, groups);
}
inline Tensor2 max_pool2d_with_indices(const Tensor& input, IntArrayRef kernel_size, OptIntArrayRef stride = std::nullopt,
                                       IntArrayRef padding = std::vector<int64_t>{0, 0},
                                       IntArrayRef dilation = std::vector<int64_t>{1, 1}, bool ceil_mode = false) {
  return call<OpId::max_pool2d_with_indices>(input, kernel_size, stride, padding, dilation, ceil_mode);
}
inline Tensor max_pool2d(const Tensor& input, IntArrayRef kernel_size, OptIntArrayRef stride = std::nullopt,
                         IntArrayRef padding = std::vector<int64_t>{0, 0},
                         IntArrayRef dilation = std::vector<int64_t>{1, 1}, bool ceil_mode = false) {
  return call<OpId::max_pool2d>(input, kernel_size, stride, padding, dilation, ceil_mode);
}
inline Tensor avg_pool2d(const Tensor& input, IntArrayRef kernel_size, OptIntArrayRef stride = std::nullopt,
                         IntArrayRef padding = std::vector<int64_t>{0, 0}, bool ceil_mode = false,
                         bool count_include_pad = true, std::optional<int64_t> divisor_override = std::nullopt) {
  return call<OpId::avg_pool2d>(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override);
}
inline Tensor adaptive_avg_pool2d(const Tensor& input, IntArrayRef output_size) {
  return call<OpId::adaptive_avg_pool2d>(input, output_size);
}
inline Tensor pad(const Tensor& input, IntArrayRef pad, std::string_view mode = "constant",
                  std::optional<double> value = std::nullopt) {
  return call<OpId::pad>(input, pad, mode, value);
}
inline Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                           const OptT_& attn_mask = std::nullopt, double dropout_p = 0.0,
                                           bool is_causal = false, std::optional<double> scale = std::nullopt,
                                           bool enable_gqa = false) {
  return call<OpId::scaled_dot_product_attention>(query, key, value, attn_mask, dropout_p, is_causal, scale,
                                                  enable_gqa);
}

}  // namespace strata
