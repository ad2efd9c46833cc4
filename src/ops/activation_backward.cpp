// Fused activation backwards (decl/activation_backward.def): one pointwise pass
// grad_output x f'(x) on the shared TensorIterator machinery (broadcasting and
// type promotion of the two inputs like any binary op). Math in
// ops/activation_backward_functors.h, CPU loops in
// backends/cpu/kernels/activation_backward_kernels.cpp.
#include "ops/op_list.h"
#include "ops/pointwise.h"

namespace strata {

STRATA_DEFINE_STUB(act_threshold_backward_stub, PointwiseFn);
STRATA_DEFINE_STUB(act_gelu_backward_stub, PointwiseFn);
STRATA_DEFINE_STUB(act_silu_backward_stub, PointwiseFn);
STRATA_DEFINE_STUB(act_sigmoid_backward_stub, PointwiseFn);
STRATA_DEFINE_STUB(act_tanh_backward_stub, PointwiseFn);

namespace act_bw {
namespace {

// Checked from the dtypes alone so that Meta tensors raise the same error.
void check_dtypes(const char* op, const Tensor& grad, const Tensor& x, bool float_only) {
  ScalarType common = promote_types(grad.dtype(), x.dtype());
  bool ok = float_only ? is_floating_type(common) : common != ScalarType::Bool;
  STRATA_CHECK_T(NotImplementedError, ok, op, ": not implemented for '", dtype_name(common), "' (got grad_output ",
                 grad.describe(), " and ", x.describe(), "; expected ",
                 float_only ? "floating-point tensors" : "numeric tensors", ")");
}

Tensor run(const char* op, const DispatchStub<PointwiseFn>& stub, const Tensor& grad, const Tensor& x,
           bool float_only, const PwArgs& a = {}) {
  check_dtypes(op, grad, x, float_only);
  return run_pointwise(op, stub, PwRule::Promote, {grad, x}, std::nullopt, a);
}

Tensor threshold_backward_impl(const Tensor& grad, const Tensor& self, const Scalar& threshold) {
  PwArgs a;
  a.a = threshold.to_double();
  return run("threshold_backward", act_threshold_backward_stub, grad, self, false, a);
}

Tensor gelu_backward_impl(const Tensor& grad, const Tensor& self, std::string_view approximate) {
  STRATA_CHECK(approximate == "none" || approximate == "tanh",
               "gelu_backward: approximate argument must be either none or tanh, but got '", approximate, "'");
  PwArgs a;
  a.a = approximate == "tanh" ? 1 : 0;
  return run("gelu_backward", act_gelu_backward_stub, grad, self, true, a);
}

Tensor silu_backward_impl(const Tensor& grad, const Tensor& self) {
  return run("silu_backward", act_silu_backward_stub, grad, self, true);
}
Tensor sigmoid_backward_impl(const Tensor& grad, const Tensor& output) {
  return run("sigmoid_backward", act_sigmoid_backward_stub, grad, output, true);
}
Tensor tanh_backward_impl(const Tensor& grad, const Tensor& output) {
  return run("tanh_backward", act_tanh_backward_stub, grad, output, true);
}

}  // namespace

STRATA_IMPL_CPU_META(threshold_backward, threshold_backward_impl);
STRATA_IMPL_CPU_META(gelu_backward, gelu_backward_impl);
STRATA_IMPL_CPU_META(silu_backward, silu_backward_impl);
STRATA_IMPL_CPU_META(sigmoid_backward, sigmoid_backward_impl);
STRATA_IMPL_CPU_META(tanh_backward, tanh_backward_impl);

}  // namespace act_bw
}  // namespace strata
