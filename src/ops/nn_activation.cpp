// Activation functions: pointwise ops on the shared TensorIterator machinery
// (broadcast-free unary, out= and in-place through out=self). Math in
// ops/nn_functors.h, CPU loops in backends/cpu/kernels/nn_activation_kernels.cpp.
#include "ops/op_list.h"
#include "ops/ops.h"
#include "ops/pointwise.h"

namespace strata {

namespace {
using OptT = std::optional<Tensor>;

// Activations other than relu are defined on floating types only (like torch's
// CPU kernels); checked up front so Meta tensors raise too.
void check_float(const char* op, const Tensor& x) {
  STRATA_CHECK(is_floating_type(x.dtype()), op, ": \"", op, "\" not implemented for '", dtype_name(x.dtype()),
               "' (expected a floating-point input, got a ", x.describe(), ")");
}

Tensor run_act(const char* op, const DispatchStub<PointwiseFn>& stub, const Tensor& x, const OptT& out,
               const PwArgs& a = {}) {
  check_float(op, x);
  return run_pointwise(op, stub, PwRule::Promote, {x}, out, a);
}
}  // namespace

STRATA_DEFINE_STUB(nn_relu_stub, PointwiseFn);
STRATA_DEFINE_STUB(nn_gelu_stub, PointwiseFn);
STRATA_DEFINE_STUB(nn_silu_stub, PointwiseFn);
STRATA_DEFINE_STUB(nn_mish_stub, PointwiseFn);
STRATA_DEFINE_STUB(nn_softplus_stub, PointwiseFn);
STRATA_DEFINE_STUB(nn_leaky_relu_stub, PointwiseFn);
STRATA_DEFINE_STUB(nn_elu_stub, PointwiseFn);
STRATA_DEFINE_STUB(nn_hardtanh_stub, PointwiseFn);
STRATA_DEFINE_STUB(nn_hardsigmoid_stub, PointwiseFn);
STRATA_DEFINE_STUB(nn_hardswish_stub, PointwiseFn);
STRATA_DEFINE_STUB(nn_log_sigmoid_stub, PointwiseFn);

// Implementations live in strata::nn so their names cannot clash with other families.
namespace nn {

Tensor relu_impl(const Tensor& self, const OptT& out) {
  STRATA_CHECK(self.dtype() != ScalarType::Bool, "relu: \"clamp_min\" not implemented for 'Bool' (got a ",
               self.describe(), ")");
  return run_pointwise("relu", nn_relu_stub, PwRule::Promote, {self}, out);
}
STRATA_IMPL_CPU_META(relu, relu_impl);

Tensor gelu_impl(const Tensor& x, std::string_view approximate, const OptT& out) {
  STRATA_CHECK(approximate == "none" || approximate == "tanh",
               "gelu: approximate argument must be either none or tanh, but got '", approximate, "'");
  PwArgs a;
  a.a = approximate == "tanh" ? 1 : 0;
  return run_act("gelu", nn_gelu_stub, x, out, a);
}
STRATA_IMPL_CPU_META(gelu, gelu_impl);

Tensor silu_impl(const Tensor& x, const OptT& out) { return run_act("silu", nn_silu_stub, x, out); }
STRATA_IMPL_CPU_META(silu, silu_impl);
Tensor mish_impl(const Tensor& x, const OptT& out) { return run_act("mish", nn_mish_stub, x, out); }
STRATA_IMPL_CPU_META(mish, mish_impl);
Tensor hardsigmoid_impl(const Tensor& x, const OptT& out) { return run_act("hardsigmoid", nn_hardsigmoid_stub, x, out); }
STRATA_IMPL_CPU_META(hardsigmoid, hardsigmoid_impl);
Tensor hardswish_impl(const Tensor& x, const OptT& out) { return run_act("hardswish", nn_hardswish_stub, x, out); }
STRATA_IMPL_CPU_META(hardswish, hardswish_impl);
Tensor log_sigmoid_impl(const Tensor& x, const OptT& out) { return run_act("log_sigmoid", nn_log_sigmoid_stub, x, out); }
STRATA_IMPL_CPU_META(log_sigmoid, log_sigmoid_impl);

Tensor softplus_impl(const Tensor& x, double beta, double threshold, const OptT& out) {
  return run_act("softplus", nn_softplus_stub, x, out, PwArgs{beta, threshold, 0});
}
STRATA_IMPL_CPU_META(softplus, softplus_impl);

Tensor leaky_relu_impl(const Tensor& x, double slope, const OptT& out) {
  return run_act("leaky_relu", nn_leaky_relu_stub, x, out, PwArgs{slope, 0, 0});
}
STRATA_IMPL_CPU_META(leaky_relu, leaky_relu_impl);

Tensor elu_impl(const Tensor& x, double alpha, double scale, double input_scale, const OptT& out) {
  return run_act("elu", nn_elu_stub, x, out, PwArgs{alpha, scale, input_scale});
}
STRATA_IMPL_CPU_META(elu, elu_impl);

Tensor hardtanh_impl(const Tensor& x, double min_val, double max_val, const OptT& out) {
  STRATA_CHECK(min_val <= max_val, "hardtanh: min_val cannot be greater than max_val (got min_val=", min_val,
               ", max_val=", max_val, ")");
  return run_act("hardtanh", nn_hardtanh_stub, x, out, PwArgs{min_val, max_val, 0});
}
STRATA_IMPL_CPU_META(hardtanh, hardtanh_impl);

}  // namespace nn
}  // namespace strata
