// layer_norm, rms_norm, group_norm, batch_norm.
#include <cfloat>

#include "ops/nn_util.h"
#include "ops/op_list.h"

namespace strata {

STRATA_DEFINE_STUB(nn_row_norm_stub, nn::RowNormFn);
STRATA_DEFINE_STUB(nn_group_norm_stub, nn::GroupNormFn);
STRATA_DEFINE_STUB(nn_batch_norm_stub, nn::BatchNormFn);

using namespace nn;

// Implementations live in strata::nn so their names cannot clash with other families.
namespace nn {

namespace {

// Checks input's trailing dims against normalized_shape; returns (rows, d).
std::pair<int64_t, int64_t> check_normalized_shape(const char* op, const Tensor& input, IntArrayRef ns,
                                                   const std::optional<Tensor>& weight,
                                                   const std::optional<Tensor>& bias) {
  STRATA_CHECK(!ns.empty(), op, ": Expected normalized_shape to be at least 1-dimensional, i.e., containing at least "
               "one element, but got normalized_shape = ", shape_str(ns));
  for (const auto* t : {&weight, &bias}) {
    if (!has(*t)) continue;
    STRATA_CHECK(std::equal((*t)->sizes().begin(), (*t)->sizes().end(), ns.begin(), ns.end()), op, ": Expected ",
                 t == &weight ? "weight" : "bias", " to be of same shape as normalized_shape, but got ",
                 t == &weight ? "weight" : "bias", " of shape ", (*t)->shape_str(), " and normalized_shape = ",
                 shape_str(ns));
  }
  const int64_t nd = input.dim(), k = static_cast<int64_t>(ns.size());
  bool ok = nd >= k;
  for (int64_t i = 0; ok && i < k; ++i) ok = input.size(nd - k + i) == ns[i];
  STRATA_CHECK(ok, op, ": Given normalized_shape=", shape_str(ns), ", expected input with shape [*",
               [&] {
                 std::string s;
                 for (int64_t v : ns) s += ", " + std::to_string(v);
                 return s;
               }(),
               "], but got input of size", input.shape_str());
  const int64_t d = checked_numel(ns, op);
  const int64_t rows = d == 0 ? 0 : input.numel() / d;
  return {rows, d};
}

Tensor row_norm(const char* op, const Tensor& input, IntArrayRef ns, const std::optional<Tensor>& weight,
                const std::optional<Tensor>& bias, double eps, bool rms) {
  check_floating(op, input, "input");
  auto [rows, d] = check_normalized_shape(op, input, ns, weight, bias);
  Device dev = check_devices(op, {input, has(weight) ? *weight : Tensor(), has(bias) ? *bias : Tensor()});
  if (dev.is_meta()) return empty_tensor(input.sizes(), input.dtype(), dev);
  const ScalarType ct = compute_type(input.dtype());
  Tensor y = empty_tensor(input.sizes(), ct, dev);
  if (y.numel() > 0)
    nn_row_norm_stub(dev.type, prep(input, ct), prep_opt(weight, ct), prep_opt(bias, ct), y, rows, d, eps, rms);
  return to_dtype(y, input.dtype());
}

double finfo_eps(ScalarType t) {
  switch (t) {
    case ScalarType::Float16: return 0.0009765625;
    case ScalarType::BFloat16: return 0.0078125;
    case ScalarType::Float32: return FLT_EPSILON;
    default: return DBL_EPSILON;
  }
}

Tensor wrapped(double v) { return scalar_to_tensor(Scalar(v), ScalarType::Float64, Device(), true); }

}  // namespace

Tensor layer_norm_impl(const Tensor& input, IntArrayRef ns, const std::optional<Tensor>& weight,
                       const std::optional<Tensor>& bias, double eps, bool) {
  return row_norm("layer_norm", input, ns, weight, bias, eps, false);
}
STRATA_IMPL_CPU_META(layer_norm, layer_norm_impl);

Tensor rms_norm_impl(const Tensor& input, IntArrayRef ns, const std::optional<Tensor>& weight,
                     std::optional<double> eps) {
  check_floating("rms_norm", input, "input");
  return row_norm("rms_norm", input, ns, weight, std::nullopt, eps.value_or(finfo_eps(input.dtype())), true);
}
STRATA_IMPL_CPU_META(rms_norm, rms_norm_impl);

Tensor group_norm_impl(const Tensor& input, int64_t groups, const std::optional<Tensor>& weight,
                       const std::optional<Tensor>& bias, double eps, bool) {
  const char* op = "group_norm";
  check_floating(op, input, "input");
  STRATA_CHECK(input.dim() >= 2, op, ": Expected at least 2 dimensions for input tensor but received ", input.dim());
  STRATA_CHECK(groups > 0, op, ": num_groups must be positive, but got ", groups);
  const int64_t n = input.size(0), c = input.size(1);
  STRATA_CHECK(c % groups == 0, op, ": Expected number of channels in input to be divisible by num_groups, but got "
               "input of shape ", input.shape_str(), " and num_groups=", groups);
  for (const auto* t : {&weight, &bias}) {
    STRATA_CHECK(!has(*t) || ((*t)->dim() == 1 && (*t)->numel() == c), op, ": Expected ",
                 t == &weight ? "weight" : "bias", " to be a vector of size equal to the number of channels in "
                 "input, but got ", t == &weight ? "weight" : "bias", " of shape ", (*t)->shape_str(),
                 " and input of shape ", input.shape_str());
  }
  Device dev = check_devices(op, {input, has(weight) ? *weight : Tensor(), has(bias) ? *bias : Tensor()});
  if (dev.is_meta()) return empty_tensor(input.sizes(), input.dtype(), dev);
  const ScalarType ct = compute_type(input.dtype());
  Tensor y = empty_tensor(input.sizes(), ct, dev);
  const int64_t s = (n * c != 0) ? input.numel() / (n * c) : 0;
  if (y.numel() > 0)
    nn_group_norm_stub(dev.type, prep(input, ct), prep_opt(weight, ct), prep_opt(bias, ct), y, n, c, s, groups, eps);
  return to_dtype(y, input.dtype());
}
STRATA_IMPL_CPU_META(group_norm, group_norm_impl);

Tensor batch_norm_impl(const Tensor& input, const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
                       const std::optional<Tensor>& running_mean, const std::optional<Tensor>& running_var,
                       bool training, double momentum, double eps, bool) {
  const char* op = "batch_norm";
  check_floating(op, input, "input");
  STRATA_CHECK(input.dim() >= 2, op, ": Expected at least 2 dimensions for input (N, C, ...), but got input of shape ",
               input.shape_str());
  const int64_t n = input.size(0), c = input.size(1);
  const std::pair<const std::optional<Tensor>*, const char*> params[] = {
      {&weight, "weight"}, {&bias, "bias"}, {&running_mean, "running_mean"}, {&running_var, "running_var"}};
  for (auto [t, name] : params) {
    STRATA_CHECK(!has(*t) || (*t)->numel() == c, op, ": ", name, " should contain ", c, " elements not ",
                 (*t)->numel(), " (input of shape ", input.shape_str(), ")");
  }
  STRATA_CHECK(training || (has(running_mean) && has(running_var)), op,
               ": running_mean and running_var must be defined in evaluation mode (training=False)");
  const int64_t s = (n * c != 0) ? input.numel() / (n * c) : 0;
  STRATA_CHECK_VALUE(!training || n * s != 1, op, ": Expected more than 1 value per channel when training, got "
                     "input size ", input.shape_str());
  Device dev = check_devices(op, {input, has(weight) ? *weight : Tensor(), has(bias) ? *bias : Tensor(),
                                  has(running_mean) ? *running_mean : Tensor(),
                                  has(running_var) ? *running_var : Tensor()});
  if (dev.is_meta()) return empty_tensor(input.sizes(), input.dtype(), dev);
  const ScalarType ct = compute_type(input.dtype());
  Tensor y = empty_tensor(input.sizes(), ct, dev);
  std::vector<int64_t> cs{c};
  Tensor bm, bv, rm, rv;
  if (training) {
    bm = empty_tensor(cs, ScalarType::Float64, dev);
    bv = empty_tensor(cs, ScalarType::Float64, dev);
    if (n * s == 0) {
      // No values: like torch, the batch statistics are NaN.
      fill_(bm, std::nan(""));
      fill_(bv, std::nan(""));
    }
  } else {
    rm = prep(*running_mean, ScalarType::Float64);
    rv = prep(*running_var, ScalarType::Float64);
  }
  if (y.numel() > 0)
    nn_batch_norm_stub(dev.type, prep(input, ct), prep_opt(weight, ct), prep_opt(bias, ct), rm, rv, y, bm, bv, n, c,
                       s, training, eps);
  if (training && n * s > 0) {
    // running = (1 - momentum) running + momentum batch (unbiased variance).
    const double cnt = static_cast<double>(n * s);
    if (has(running_mean)) {
      Tensor upd = add(mul(*running_mean, wrapped(1 - momentum)),
                       mul(to_dtype(bm, running_mean->dtype()), wrapped(momentum)));
      copy_(*running_mean, upd);
    }
    if (has(running_var)) {
      Tensor unbiased = mul(bv, wrapped(cnt / std::max(cnt - 1, 1.0)));
      Tensor upd = add(mul(*running_var, wrapped(1 - momentum)),
                       mul(to_dtype(unbiased, running_var->dtype()), wrapped(momentum)));
      copy_(*running_var, upd);
    }
  }
  return to_dtype(y, input.dtype());
}
STRATA_IMPL_CPU_META(batch_norm, batch_norm_impl);

}  // namespace nn
}  // namespace strata
