// Losses: cross_entropy (fused log_softmax + gather), nll_loss, mse_loss,
// l1_loss, binary_cross_entropy(_with_logits).
#include "ops/fused_backward_kernels.h"
#include "ops/nn_util.h"
#include "ops/op_list.h"
#include "ops/pointwise.h"

namespace strata {

STRATA_DEFINE_STUB(nn_class_loss_stub, nn::ClassLossFn);
STRATA_DEFINE_STUB(nn_prob_loss_stub, nn::ProbLossFn);
STRATA_DEFINE_STUB(nn_sum_stub, nn::SumFn);
STRATA_DEFINE_STUB(nn_bce_logits_stub, PointwiseFn);
STRATA_DEFINE_STUB(nn_bce_stub, PointwiseFn);
STRATA_DEFINE_STUB(nn_cross_entropy_backward_stub, nn::CrossEntropyBackwardFn);

using namespace nn;

// Implementations live in strata::nn so their names cannot clash with other families.
namespace nn {

namespace {

// 'none' keeps x; 'mean'/'sum' reduce it to a 0-d tensor of x's dtype.
Tensor reduce_loss(const Tensor& x, Reduction r) {
  if (r == Reduction::None) return x;
  Tensor out = empty_tensor(std::vector<int64_t>{}, x.dtype(), x.device());
  if (x.device().is_meta()) return out;
  const ScalarType ct = compute_type(x.dtype());
  Tensor acc = empty_tensor(std::vector<int64_t>{}, ct, x.device());
  const double scale = r == Reduction::Mean ? 1.0 / static_cast<double>(x.numel()) : 1.0;
  nn_sum_stub(x.device().type, prep(x, ct), acc, scale);
  return to_dtype(acc, x.dtype());
}

// Validates class-index targets on the host: each is in [0, c) or ignore_index.
void check_targets(const char* op, const Tensor& target, int64_t c, int64_t ignore_index) {
  if (target.device().is_meta() || target.numel() == 0) return;
  Tensor t = contiguous(to_device(target, Device(DeviceType::CPU)));
  const int64_t* p = t.data_ptr<int64_t>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    STRATA_CHECK_INDEX(p[i] == ignore_index || (p[i] >= 0 && p[i] < c), op, ": Target ", p[i],
                       " is out of bounds (expected a class index in [0, ", c, ") or ignore_index=", ignore_index,
                       ").");
  }
}

struct ClassLayout {
  int64_t n, c, d;
  DimVector out_shape;  // input's shape without the class dim
};

ClassLayout class_layout(const char* op, const Tensor& input) {
  STRATA_CHECK(input.dim() >= 1, op, ": Expected input with at least 1 dimension (C) or (N, C, ...), but got a 0-d "
               "tensor");
  ClassLayout l;
  if (input.dim() == 1) {
    l.n = 1;
    l.c = input.size(0);
    l.d = 1;
    return l;
  }
  l.n = input.size(0);
  l.c = input.size(1);
  l.d = 1;
  l.out_shape.push_back(l.n);
  for (int64_t i = 2; i < input.dim(); ++i) {
    l.d *= input.size(i);
    l.out_shape.push_back(input.size(i));
  }
  return l;
}

void check_weight(const char* op, const std::optional<Tensor>& weight, int64_t c) {
  STRATA_CHECK(!has(weight) || (weight->dim() == 1 && weight->numel() == c), op,
               ": weight tensor should be defined either for all ", c, " classes or no classes but got weight "
               "tensor of shape: ", weight->shape_str());
}

Tensor class_index_loss(const char* op, const Tensor& input, const Tensor& target,
                        const std::optional<Tensor>& weight, Reduction red, int64_t ignore_index, double smoothing,
                        bool logits) {
  check_floating(op, input, "input");
  ClassLayout l = class_layout(op, input);
  STRATA_CHECK(is_integral_type(target.dtype(), false), op, ": expected target to hold class indices of type int64 "
               "(Long), or class probabilities of input's shape, but got a ", target.describe(), " for input of "
               "shape ", input.shape_str());
  STRATA_CHECK(std::equal(target.sizes().begin(), target.sizes().end(), l.out_shape.begin(), l.out_shape.end()), op,
               ": Expected target size ", shape_str(l.out_shape), ", got ", target.shape_str(),
               " (input of shape ", input.shape_str(), ")");
  check_weight(op, weight, l.c);
  Device dev = check_devices(op, {input, target, has(weight) ? *weight : Tensor()});
  const DimVector oshape = red == Reduction::None ? l.out_shape : DimVector{};
  if (dev.is_meta()) return empty_tensor(oshape, input.dtype(), dev);
  Tensor t = prep(target, ScalarType::Int64);
  check_targets(op, t, l.c, ignore_index);
  const ScalarType ct = compute_type(input.dtype());
  Tensor out = empty_tensor(oshape, ct, dev);
  if (out.numel() > 0) {
    ClassLossArgs a{l.n, l.c, l.d, red, ignore_index, smoothing, logits};
    nn_class_loss_stub(dev.type, prep(input, ct), t, prep_opt(weight, ct), out, a);
  }
  return to_dtype(out, input.dtype());
}

}  // namespace

Tensor cross_entropy_impl(const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight,
                          std::string_view reduction, int64_t ignore_index, double label_smoothing) {
  const char* op = "cross_entropy";
  Reduction red = parse_reduction(op, reduction);
  STRATA_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0, op,
               ": label_smoothing must be between 0.0 and 1.0. Got: ", label_smoothing);
  const bool probs = is_floating_type(target.dtype());
  if (!probs) return class_index_loss(op, input, target, weight, red, ignore_index, label_smoothing, true);
  check_floating(op, input, "input");
  STRATA_CHECK(std::equal(target.sizes().begin(), target.sizes().end(), input.sizes().begin(), input.sizes().end()),
               op, ": Expected floating-point targets (class probabilities) to have the input's shape ",
               input.shape_str(), ", but got target of shape ", target.shape_str(),
               " (class-index targets must be int64)");
  ClassLayout l = class_layout(op, input);
  check_weight(op, weight, l.c);
  Device dev = check_devices(op, {input, target, has(weight) ? *weight : Tensor()});
  const DimVector oshape = red == Reduction::None ? l.out_shape : DimVector{};
  if (dev.is_meta()) return empty_tensor(oshape, input.dtype(), dev);
  const ScalarType ct = compute_type(input.dtype());
  Tensor out = empty_tensor(oshape, ct, dev);
  if (out.numel() > 0) {
    ClassLossArgs a{l.n, l.c, l.d, red, ignore_index, label_smoothing, true};
    nn_prob_loss_stub(dev.type, prep(input, ct), prep(target, ct), prep_opt(weight, ct), out, a);
  }
  return to_dtype(out, input.dtype());
}
STRATA_IMPL_CPU_META(cross_entropy_loss, cross_entropy_impl);

// Used by cross_entropy's derivative when no graph of the backward is recorded; the same checks as the forward.
Tensor cross_entropy_backward_impl(const Tensor& grad_output, const Tensor& input, const Tensor& target,
                                   const std::optional<Tensor>& weight, std::string_view reduction,
                                   int64_t ignore_index, double label_smoothing) {
  const char* op = "_cross_entropy_loss_backward";
  Reduction red = parse_reduction(op, reduction);
  STRATA_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0, op,
               ": label_smoothing must be between 0.0 and 1.0. Got: ", label_smoothing);
  check_floating(op, input, "input");
  ClassLayout l = class_layout(op, input);
  const bool probs = is_floating_type(target.dtype());
  if (probs) {
    STRATA_CHECK(std::equal(target.sizes().begin(), target.sizes().end(), input.sizes().begin(),
                            input.sizes().end()),
                 op, ": Expected floating-point targets (class probabilities) to have the input's shape ",
                 input.shape_str(), ", but got target of shape ", target.shape_str());
  } else {
    STRATA_CHECK(is_integral_type(target.dtype(), false), op, ": expected target to hold class indices of type "
                 "int64 (Long), or class probabilities of input's shape, but got a ", target.describe());
    STRATA_CHECK(std::equal(target.sizes().begin(), target.sizes().end(), l.out_shape.begin(), l.out_shape.end()),
                 op, ": Expected target size ", shape_str(l.out_shape), ", got ", target.shape_str(),
                 " (input of shape ", input.shape_str(), ")");
  }
  check_weight(op, weight, l.c);
  const DimVector gshape = red == Reduction::None ? l.out_shape : DimVector{};
  STRATA_CHECK(std::equal(grad_output.sizes().begin(), grad_output.sizes().end(), gshape.begin(), gshape.end()), op,
               ": expected grad_output of size ", shape_str(gshape), " for reduction='", reduction,
               "', but got ", grad_output.shape_str());
  check_floating(op, grad_output, "grad_output");
  Device dev = check_devices(op, {grad_output, input, target, has(weight) ? *weight : Tensor()});
  if (dev.is_meta()) return empty_tensor(input.sizes(), input.dtype(), dev);
  const ScalarType ct = compute_type(input.dtype());
  Tensor t = probs ? prep(target, ct) : prep(target, ScalarType::Int64);
  if (!probs) check_targets(op, t, l.c, ignore_index);
  Tensor gx = empty_tensor(input.sizes(), ct, dev);
  if (gx.numel() > 0) {
    ClassLossArgs a{l.n, l.c, l.d, red, ignore_index, label_smoothing, true};
    nn_cross_entropy_backward_stub(dev.type, prep(grad_output, ct), prep(input, ct), t, prep_opt(weight, ct), gx, a,
                                   probs);
  }
  return to_dtype(gx, input.dtype());
}
STRATA_IMPL_CPU_META(_cross_entropy_loss_backward, cross_entropy_backward_impl);

Tensor nll_loss_impl(const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight,
                     std::string_view reduction, int64_t ignore_index) {
  Reduction red = parse_reduction("nll_loss", reduction);
  return class_index_loss("nll_loss", input, target, weight, red, ignore_index, 0.0, false);
}
STRATA_IMPL_CPU_META(nll_loss, nll_loss_impl);

namespace {
Tensor regression_loss(const char* op, const Tensor& input, const Tensor& target, std::string_view reduction,
                       bool squared) {
  Reduction red = parse_reduction(op, reduction);
  ScalarType rt = result_type({input, target});
  STRATA_CHECK(is_floating_type(rt), op, ": not implemented for '", dtype_name(rt),
               "' (expected floating-point input and target, got ", input.describe(), " and ", target.describe(), ")");
  Tensor d = sub(input, target);
  Tensor e = squared ? mul(d, d) : abs(d);
  return reduce_loss(e, red);
}
}  // namespace

Tensor mse_loss_impl(const Tensor& input, const Tensor& target, std::string_view reduction) {
  return regression_loss("mse_loss", input, target, reduction, true);
}
STRATA_IMPL_CPU_META(mse_loss, mse_loss_impl);

Tensor l1_loss_impl(const Tensor& input, const Tensor& target, std::string_view reduction) {
  return regression_loss("l1_loss", input, target, reduction, false);
}
STRATA_IMPL_CPU_META(l1_loss, l1_loss_impl);

Tensor bce_with_logits_impl(const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight,
                            const std::optional<Tensor>& pos_weight, std::string_view reduction) {
  const char* op = "binary_cross_entropy_with_logits";
  Reduction red = parse_reduction(op, reduction);
  STRATA_CHECK_VALUE(std::equal(target.sizes().begin(), target.sizes().end(), input.sizes().begin(),
                                input.sizes().end()),
                     op, ": Target size (", target.shape_str(), ") must be the same as input size (",
                     input.shape_str(), ")");
  check_floating(op, input, "input");
  Tensor pw = has(pos_weight) ? *pos_weight : scalar_to_tensor(Scalar(1.0), ScalarType::Float64, Device(), true);
  Tensor loss = run_pointwise(op, nn_bce_logits_stub, PwRule::Promote, {input, target, pw}, std::nullopt);
  if (has(weight)) loss = mul(loss, *weight);
  return reduce_loss(loss, red);
}
STRATA_IMPL_CPU_META(binary_cross_entropy_with_logits, bce_with_logits_impl);

Tensor bce_impl(const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight,
                std::string_view reduction) {
  const char* op = "binary_cross_entropy";
  Reduction red = parse_reduction(op, reduction);
  STRATA_CHECK_VALUE(std::equal(target.sizes().begin(), target.sizes().end(), input.sizes().begin(),
                                input.sizes().end()),
                     op, ": Using a target size (", target.shape_str(), ") that is different to the input size (",
                     input.shape_str(), ") is deprecated. Please ensure they have the same size.");
  check_floating(op, input, "input");
  if (!input.device().is_meta() && input.numel() > 0) {
    Tensor zero = scalar_to_tensor(Scalar(0.0), ScalarType::Float64, Device(), true);
    Tensor one = scalar_to_tensor(Scalar(1.0), ScalarType::Float64, Device(), true);
    STRATA_CHECK(!any_nonzero(logical_or(lt(input, zero), gt(input, one))), op,
                 ": all elements of input should be between 0 and 1");
  }
  Tensor loss = run_pointwise(op, nn_bce_stub, PwRule::Promote, {input, target}, std::nullopt);
  if (has(weight)) loss = mul(loss, *weight);
  return reduce_loss(loss, red);
}
STRATA_IMPL_CPU_META(binary_cross_entropy, bce_impl);

}  // namespace nn
}  // namespace strata
