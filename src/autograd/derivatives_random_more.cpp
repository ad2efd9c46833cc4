// Derivatives of the samplers in decl/random_more.def. Only poisson is
// differentiable in torch, with a zero gradient: a sample is piecewise
// constant in its rate. The in-place samplers overwrite their input, and
// binomial has no derivative in torch.
#include "autograd/derivative_util.h"

namespace strata::autograd {
namespace {

void poisson_backward(const BackwardCtx&, const variable_list& g, GradOut& out) { out.set(0, zeros_like(g[0])); }
STRATA_DERIVATIVE(poisson, save_inputs(), save_outputs(), poisson_backward);

}  // namespace
}  // namespace strata::autograd
