// Derivatives of the complex-number ops (ops/decl/complex.def).
//
// Note [Complex gradients]
// As in torch, the gradient of a real loss L with respect to a complex z is
// dL/dx + i dL/dy (the conjugate Wirtinger derivative times 2), so for a
// holomorphic f the chain rule is grad_in = grad_out * conj(f'(z)). Every
// derivative that multiplies by f'(z) writes conj(f'(z)); conj of a real tensor
// is the tensor itself, so real gradients are unchanged. A real input reached
// by a complex gradient keeps its real part (autograd/engine.cpp casts it).
#include "autograd/derivative_util.h"

namespace strata::autograd {
namespace {

// real(z): dL/dz = g + 0i.
void real_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const TensorGeometry& in = ctx.input_geometry(0);
  out.set(0, is_complex_type(in.dtype) ? complex(g[0], zeros_like(g[0])) : g[0]);
}
STRATA_DERIVATIVE_NAMED(real, save_inputs(), save_outputs(), real_backward, "RealBackward0");

// imag(z): dL/dz = 0 + g i.
void imag_backward(const BackwardCtx&, const variable_list& g, GradOut& out) {
  out.set(0, complex(zeros_like(g[0]), g[0]));
}
STRATA_DERIVATIVE_NAMED(imag, save_inputs(), save_outputs(), imag_backward, "ImagBackward0");

void view_as_real_backward(const BackwardCtx&, const variable_list& g, GradOut& out) {
  out.set(0, view_as_complex(contiguous(g[0])));
}
STRATA_DERIVATIVE_NAMED(view_as_real, save_inputs(), save_outputs(), view_as_real_backward, "ViewAsRealBackward0");

void view_as_complex_backward(const BackwardCtx&, const variable_list& g, GradOut& out) {
  out.set(0, view_as_real(g[0]));
}
STRATA_DERIVATIVE_NAMED(view_as_complex, save_inputs(), save_outputs(), view_as_complex_backward,
                        "ViewAsComplexBackward0");

void conj_physical_backward(const BackwardCtx&, const variable_list& g, GradOut& out) {
  out.set(0, conj_physical(g[0]));
}
STRATA_DERIVATIVE_NAMED(conj_physical, save_inputs(), save_outputs(), conj_physical_backward,
                        "ConjPhysicalBackward0");

void complex_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  if (ctx.needs_grad(0)) out.set(0, real(g[0]));
  if (ctx.needs_grad(1)) out.set(1, imag(g[0]));
}
STRATA_DERIVATIVE_NAMED(complex, save_inputs(), save_outputs(), complex_backward, "ComplexBackward0");

}  // namespace
}  // namespace strata::autograd
