// Derivatives of linalg.eig and linalg.eigvals (ops/lapack_eig.cpp), torch's
// formulas (see Note [Complex gradients] in derivatives_complex.cpp for the
// convention). With A = V diag(L) V^-1 and eigenvectors of unit norm:
//   gA = V^-H (diag(gL) + P(V^H gV) / conj(E)) V^H,  E_ij = L_j - L_i (i != j),
// where P(X) = X - V^H V diag(Re diag(X)) projects out the directions that only
// rescale the eigenvectors. A loss that depends on the phase of an eigenvector
// (ill-defined: the vectors are unique only up to e^{i phi}) is refused, as
// torch does. A real input keeps the real part (autograd/engine.cpp).
#include "autograd/derivative_util.h"
#include "core/error.h"
#include "ops/api/complex.h"
#include "ops/api/lapack.h"
#include "ops/api/misc_more.h"

namespace strata::autograd {

namespace {

Tensor adj(const Tensor& t) { return conj(transpose(t, -2, -1)); }

// V^-H diag(gL) V^H
Tensor eigvals_grad(const Tensor& V, const Tensor& gL) {
  Tensor Vh = adj(V);
  return linalg_solve(Vh, mul(unsqueeze(gL, -1), Vh), true);
}

void eig_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const Tensor L = ctx.output(0), V = ctx.output(1);
  const bool has_gL = ctx.grad_defined(0), has_gV = ctx.grad_defined(1);
  if (!has_gV) {
    out.set(0, eigvals_grad(V, g[0]));
    return;
  }
  const Tensor Vh = adj(V);
  Tensor VhgV = matmul(Vh, g[1]);
  Tensor d = diagonal(VhgV, 0, -2, -1);
  if (!VhgV.device().is_meta() && d.numel() > 0)
    STRATA_CHECK(all(le(abs(imag(d)), num(real(d), 1e-2))).item().to_bool(),
                 "linalg_eig_backward: The eigenvectors in the complex case are specified up to multiplication by "
                 "e^{i phi}. The specified loss function depends on this quantity, so it is ill-defined.");
  VhgV = sub(VhgV, matmul(Vh, mul(V, unsqueeze(real(d), -2))));
  Tensor Lc = conj(L);
  Tensor E = sub(unsqueeze(Lc, -2), unsqueeze(Lc, -1));
  E = add(E, diag_embed(ones_like(Lc)));
  Tensor inner = div(VhgV, E);
  if (has_gL) inner = add(sub(inner, diag_embed(diagonal(inner, 0, -2, -1))), diag_embed(g[0]));
  out.set(0, linalg_solve(Vh, matmul(inner, Vh), true));
}
STRATA_DERIVATIVE_NAMED(linalg_eig, save_inputs(), save_outputs(0, 1), eig_backward, "LinalgEigBackward0");

// eigvals: the eigenvectors were not computed; recompute them.
void eigvals_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  auto r = linalg_eig(ctx.input(0));
  out.set(0, eigvals_grad(std::get<1>(r), g[0]));
}
STRATA_DERIVATIVE_NAMED(linalg_eigvals, save_inputs(0), save_outputs(), eigvals_backward, "LinalgEigvalsBackward0");

}  // namespace

}  // namespace strata::autograd
