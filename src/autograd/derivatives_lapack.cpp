// Derivatives of the LAPACK-backed ops of decl/lapack.def, written with our own
// ops (so they are differentiable again). Real dtypes; the formulas are the
// standard matrix-calculus ones (for eigh and svd the ones with the gap matrix
// E of eigenvalue / squared singular value differences). Inputs that an op
// reads as symmetric (cholesky) get the symmetric gradient, as in torch.
#include "autograd/derivative_util.h"
#include "core/error.h"
#include "ops/api/lapack.h"
#include "ops/api/complex.h"
#include "ops/api/misc_more.h"

namespace strata::autograd {

namespace {

// The adjoint (the transpose for real tensors: conj of a real tensor is the tensor itself).
Tensor mH(const Tensor& t) { return conj(transpose(t, -2, -1)); }
Tensor half(const Tensor& t) { return mul(t, num(t, 0.5)); }
Tensor col(const Tensor& v) { return unsqueeze(unsqueeze(v, -1), -1); }  // batch -> batch x 1 x 1

bool vector_rhs(const TensorGeometry& a, const TensorGeometry& b) {
  if (b.sizes.size() == 1) return true;
  if (b.sizes.size() + 1 != a.sizes.size()) return false;
  for (size_t d = 0; d < b.sizes.size(); ++d)
    if (b.sizes[d] != a.sizes[d]) return false;
  return true;
}

// left: X = A^-1 B, gB = A^-T g, gA = -gB X^T.  right: X = B A^-1, gB = g A^-T, gA = -X^T gB.
void solve_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const Tensor A = ctx.input(0), X = ctx.output(0);
  const bool left = ctx.arg_bool(2);
  const bool vec = vector_rhs(ctx.input_geometry(0), ctx.input_geometry(1));
  Tensor gB = linalg_solve(mH(A), g[0], left);
  if (ctx.needs_grad(1)) out.set(1, gB);
  if (ctx.needs_grad(0)) {
    if (vec) out.set(0, neg(matmul(unsqueeze(gB, -1), unsqueeze(X, -2))));
    else out.set(0, neg(left ? matmul(gB, mH(X)) : matmul(mH(X), gB)));
  }
}
STRATA_DERIVATIVE(linalg_solve, save_inputs(0), save_outputs(0), solve_backward);

// X = A^-1: gA = -X^T g X^T.
void inv_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const Tensor Xt = mH(ctx.output(0));
  out.set(0, neg(matmul(Xt, matmul(g[0], Xt))));
}
STRATA_DERIVATIVE(linalg_inv, save_inputs(), save_outputs(0), inv_backward);

// d det = tr(adj(A) dA): gA = g adj(A)^T, which is g det A^-T for an invertible
// A. When some matrix of the batch is singular, the adjugate comes from the SVD
// instead, A = U diag(s) Vh: adj(A)^T = det(U) det(Vh) U diag(p) Vh with p_i the
// product of the other singular values (finite where A^-1 does not exist).
void det_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const Tensor A = ctx.input(0), det = ctx.output(0);
  const bool singular =
      A.numel() > 0 && !A.device().is_meta() && !all(ne(det, num(det, 0.0))).item().to_bool();
  if (!singular) {
    out.set(0, mul(col(mul(g[0], conj(det))), mH(linalg_inv(A))));
    return;
  }
  auto [U, S, Vh] = linalg_svd(A, false, true);
  const int64_t n = S.size(-1);
  Tensor ones = ones_like(narrow(S, -1, 0, 1));
  Tensor before = cat(std::vector<Tensor>{ones, narrow(cumprod(S, -1), -1, 0, n - 1)}, -1);
  Tensor Sr = flip(S, std::vector<int64_t>{-1});
  Tensor after = flip(cat(std::vector<Tensor>{ones, narrow(cumprod(Sr, -1), -1, 0, n - 1)}, -1),
                      std::vector<int64_t>{-1});
  Tensor p = mul(before, after);
  Tensor sign = mul(linalg_det(detach(U)), linalg_det(detach(Vh)));  // +-1: orthogonal factors
  Tensor adjT = matmul(mul(U, unsqueeze(p, -2)), Vh);
  out.set(0, mul(col(mul(g[0], sign)), adjT));
}
STRATA_DERIVATIVE(linalg_det, save_inputs(0), save_outputs(0), det_backward);

// d log|det| = Re tr(A^-1 dA); the sign is piecewise constant for real A, and for
// complex A d sign = i sign Im tr(A^-1 dA), so (torch's formula)
// gA = (g_logabs - i Im(conj(g_sign) sign)) A^-H.
void slogdet_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const Tensor A = ctx.input(0);
  Tensor gd = g[1];
  if (is_complex_type(A.dtype())) {
    Tensor im = ctx.grad_defined(0) ? neg(imag(mul(conj(g[0]), ctx.output(0)))) : zeros_like(g[1]);
    gd = complex(g[1], im);
  }
  out.set(0, mul(col(gd), mH(linalg_inv(A))));
}
STRATA_DERIVATIVE(linalg_slogdet, save_inputs(0), save_outputs(0), slogdet_backward);

// A = L L^H: L^-1 dL = phi(L^-1 dA L^-H), so gA = L^-H M L^-1 with M the
// Hermitian part of phi(L^H gL) as torch writes it, 0.5 (tril(X) + tril(X, -1)^H)
// for X = L^H gL (only Hermitian dA are admissible; for real A this is the
// symmetrised gradient).
void cholesky_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const bool upper = ctx.arg_bool(1);
  const Tensor L = upper ? mH(ctx.output(0)) : ctx.output(0);
  const Tensor gL = upper ? mH(g[0]) : g[0];
  Tensor X = tril(matmul(mH(L), gL));
  Tensor M = half(add(X, mH(tril(X, -1))));
  Tensor S = linalg_solve_triangular(mH(L), M, /*upper=*/true, /*left=*/true);
  out.set(0, linalg_solve_triangular(L, S, /*upper=*/false, /*left=*/false));
}
STRATA_DERIVATIVE(linalg_cholesky_ex, save_inputs(), save_outputs(0), cholesky_backward);

// Only the triangle A's `upper` names takes part, so the gradient is masked to it.
void solve_triangular_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const Tensor A = ctx.input(0), X = ctx.output(0);
  const bool upper = ctx.arg_bool(2), left = ctx.arg_bool(3), unit = ctx.arg_bool(4);
  Tensor gB = linalg_solve_triangular(mH(A), g[0], !upper, left, unit);
  if (ctx.needs_grad(1)) out.set(1, gB);
  if (ctx.needs_grad(0)) {
    Tensor gA = neg(left ? matmul(gB, mH(X)) : matmul(mH(X), gB));
    out.set(0, upper ? triu(gA, unit ? 1 : 0) : tril(gA, unit ? -1 : 0));
  }
}
STRATA_DERIVATIVE(linalg_solve_triangular, save_inputs(0), save_outputs(0), solve_triangular_backward);

// A = QR with m >= n (Q m x n): with M = Q^H gQ - gR R^H and
// N = strictly_lower(M - M^H) + i Im diag(M) + gR R^H, gA = (gQ + Q (N - Q^H gQ)) R^-H.
Tensor qr_backward_tall(const Tensor& Q, const Tensor& R, const Tensor& gQ, const Tensor& gR) {
  Tensor QtgQ = matmul(mH(Q), gQ);
  Tensor gRRt = matmul(gR, mH(R));
  Tensor M = sub(QtgQ, gRRt);
  Tensor N = add(tril(sub(M, mH(M)), -1), gRRt);
  // Complex: Q^H dQ is skew-Hermitian with an imaginary diagonal and R's diagonal is real (LAPACK's
  // convention), which adds i Im diag(M) (zero for real input).
  if (is_complex_type(M.dtype())) {
    Tensor dm = imag(diagonal(M, 0, -2, -1));
    N = add(N, diag_embed(complex(zeros_like(dm), dm)));
  }
  Tensor Y = add(gQ, matmul(Q, sub(N, QtgQ)));
  // Y R^-T = (R^-1 Y^T)^T
  return mH(linalg_solve_triangular(R, mH(Y), /*upper=*/true));
}

void qr_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const std::string_view mode = ctx.arg_str(1);
  STRATA_CHECK(mode != "r", "The derivative of linalg.qr depends on Q, which is not computed when mode='r'. Please "
               "use linalg.qr(A, mode='reduced') if you are going to differentiate through linalg.qr.");
  const Tensor Q = ctx.output(0), R = ctx.output(1);
  const int64_t m = Q.size(-2), n = R.size(-1);
  STRATA_CHECK(!(mode == "complete" && m > n), "The QR decomposition is not differentiable when mode='complete' and "
               "nrows > ncols.");
  if (m >= n) {
    out.set(0, qr_backward_tall(Q, R, g[0], g[1]));
    return;
  }
  // m < n: A = [X | Y] with X = Q R1 and Y = Q R2 (R2 = Q^T Y).
  Tensor R1 = narrow(R, -1, 0, m), gR1 = narrow(g[1], -1, 0, m), gR2 = narrow(g[1], -1, m, n - m);
  Tensor Y = matmul(Q, narrow(R, -1, m, n - m));
  Tensor gX = qr_backward_tall(Q, R1, add(g[0], matmul(Y, mH(gR2))), gR1);
  out.set(0, cat(std::vector<Tensor>{gX, matmul(Q, gR2)}, -1));
}
STRATA_DERIVATIVE(linalg_qr, save_inputs(), save_outputs(0, 1), qr_backward);

// A = U diag(S) Vh (k = min(m, n) singular values). With E_ij = S_j^2 - S_i^2:
//   gA = U [ (skew(U^H gU) S + S skew(V^H gV)) / E + diag(gS) ] Vh
//        + (I - U U^H) gU S^-1 Vh + U S^-1 gV^H (I - V V^H),
// skew(X) = X - X^H, plus torch's diagonal term for complex A (below).
// Singular vectors beyond the first k (full_matrices) carry no gradient.
void svd_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const bool compute_uv = ctx.arg_bool(2);
  Tensor U, S, Vh;
  if (compute_uv) {
    U = ctx.output(0), S = ctx.output(1), Vh = ctx.output(2);
  } else {  // svdvals: the vectors were not computed; recompute them
    auto r = linalg_svd(ctx.input(0), false, true);
    U = std::get<0>(r), S = std::get<1>(r), Vh = std::get<2>(r);
  }
  const int64_t m = U.size(-2), n = Vh.size(-1), k = S.size(-1);
  U = narrow(U, -1, 0, k), Vh = narrow(Vh, -2, 0, k);
  const bool has_uv = compute_uv && (ctx.grad_defined(0) || ctx.grad_defined(2));
  if (!has_uv) {
    out.set(0, matmul(mul(U, unsqueeze(g[1], -2)), Vh));
    return;
  }
  Tensor gU = narrow(g[0], -1, 0, k), gS = g[1], gV = mH(narrow(g[2], -2, 0, k));
  Tensor V = mH(Vh);
  Tensor S2 = mul(S, S);
  Tensor E = sub(unsqueeze(S2, -2), unsqueeze(S2, -1));
  E = add(E, diag_embed(ones_like(S)));  // the diagonal is replaced below; avoid 0/0
  Tensor UtgU = matmul(mH(U), gU), VtgV = matmul(mH(V), gV);
  UtgU = sub(UtgU, mH(UtgU)), VtgV = sub(VtgV, mH(VtgV));
  Tensor inner = div(add(mul(UtgU, unsqueeze(S, -2)), mul(unsqueeze(S, -1), VtgV)), E);
  inner = sub(inner, diag_embed(diagonal(inner, 0, -2, -1)));
  inner = add(inner, diag_embed(gS));
  if (is_complex_type(U.dtype())) {
    // torch's complex term: diag(U^H gU - (U^H gU)^H) / (2 S) = i Im diag(U^H gU) / S. The loss must not
    // depend on the common phase of a pair (u_i, v_i): Im diag(U^H gU) = -Im diag(V^H gV).
    Tensor du = diagonal(UtgU, 0, -2, -1), dv = diagonal(VtgV, 0, -2, -1);
    if (!U.device().is_meta() && du.numel() > 0)
      STRATA_CHECK(all(le(abs(add(imag(du), imag(dv))), num(S, 1e-2))).item().to_bool(),
                   "svd_backward: The singular vectors in the complex case are specified up to multiplication by "
                   "e^{i phi}. The specified loss function depends on this phase term, making it ill-defined.");
    inner = add(inner, diag_embed(div(du, mul(S, num(S, 2.0)))));
  }
  Tensor gA;
  if (m > k) {
    Tensor gUSinv = div(gU, unsqueeze(S, -2));
    gA = add(matmul(U, inner), sub(gUSinv, matmul(U, matmul(mH(U), gUSinv))));
    gA = matmul(gA, Vh);
  } else if (n > k) {
    Tensor gVSinv = div(gV, unsqueeze(S, -2));
    gA = add(matmul(inner, Vh), sub(mH(gVSinv), matmul(matmul(mH(gVSinv), V), Vh)));
    gA = matmul(U, gA);
  } else {
    gA = matmul(U, matmul(inner, Vh));
  }
  out.set(0, gA);
}
STRATA_DERIVATIVE_NAMED(_linalg_svd, save_inputs(0), save_outputs(0, 1, 2), svd_backward, "LinalgSvdBackward0");

// A = V diag(L) V^H: gA = V (diag(gL) + P(V^H gV) / E) V^H with E_ij = L_j - L_i
// off the diagonal and P(X) = (X - X^H) / 2 (torch's formula: the result is
// Hermitian, so it is the symmetrised real gradient). For complex A a loss that
// depends on the eigenvectors' phases (unique only up to e^{i phi}) is refused.
void eigh_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const bool compute_v = ctx.arg_bool(2);
  Tensor L, V;
  if (compute_v) {
    L = ctx.output(0), V = ctx.output(1);
  } else {
    auto r = linalg_eigh(ctx.input(0), ctx.arg_str(1), true);
    L = std::get<0>(r), V = std::get<1>(r);
  }
  const bool cplx = is_complex_type(V.dtype());
  Tensor inner = cplx ? complex(diag_embed(g[0]), zeros_like(diag_embed(g[0]))) : diag_embed(g[0]);
  if (compute_v && ctx.grad_defined(1)) {
    Tensor E = sub(unsqueeze(L, -2), unsqueeze(L, -1));
    E = add(E, diag_embed(ones_like(L)));
    Tensor VhgV = matmul(mH(V), g[1]);
    if (cplx && !V.device().is_meta() && V.numel() > 0) {
      Tensor d = diagonal(VhgV, 0, -2, -1);
      STRATA_CHECK(all(le(abs(imag(d)), num(real(d), 1e-2))).item().to_bool(),
                   "linalg_eigh_backward: The eigenvectors in the complex case are specified up to multiplication "
                   "by e^{i phi}. The specified loss function depends on this quantity, so it is ill-defined.");
    }
    Tensor P = div(half(sub(VhgV, mH(VhgV))), E);
    inner = add(inner, sub(P, diag_embed(diagonal(P, 0, -2, -1))));
  }
  Tensor gA = matmul(V, matmul(inner, mH(V)));
  out.set(0, half(add(gA, mH(gA))));  // only Hermitian dA are admissible
}
STRATA_DERIVATIVE_NAMED(_linalg_eigh, save_inputs(0), save_outputs(0, 1), eigh_backward, "LinalgEighBackward0");


// ---- LU (square A = P L U; L unit lower, U upper, both packed in LU) ---------------------

// The permutation matrices P of LAPACK's row interchanges (pivots, 1-based, int32),
// batched like LU, in LU's dtype: P[perm[i], i] = 1 after applying the swaps to 0..n-1.
Tensor lu_permutation(const Tensor& pivots, int64_t n, ScalarType dtype, Device dev) {
  Tensor piv = contiguous(to_dtype(to_device(pivots, Device(DeviceType::CPU)), ScalarType::Int64));
  const int64_t k = piv.size(-1), batch = k ? piv.numel() / k : 0;
  std::vector<int64_t> sizes(piv.sizes().begin(), piv.sizes().end());
  sizes.back() = n;
  sizes.push_back(n);
  Tensor P = zeros(IntArrayRef(sizes), ScalarType::Float64, Device(DeviceType::CPU));
  const int64_t* pv = piv.data_ptr<int64_t>();
  double* pp = P.data_ptr<double>();
  std::vector<int64_t> perm(static_cast<size_t>(n));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t i = 0; i < n; ++i) perm[i] = i;
    for (int64_t i = 0; i < k; ++i) std::swap(perm[i], perm[pv[b * k + i] - 1]);
    for (int64_t i = 0; i < n; ++i) pp[b * n * n + perm[i] * n + i] = 1.0;
  }
  return to_device(to_dtype(P, dtype), dev);
}

Tensor unit_lower(const Tensor& LU) {
  return add(tril(LU, -1), eye(LU.size(-1), std::nullopt, LU.dtype(), LU.device()));
}

// From the gradient gA of the matrix A = P L U that LU stands for to the gradient of the
// packed LU: <gA, P (dL U + L dU)> gives tril(P^T gA U^T, -1) + triu(L^T P^T gA).
Tensor lu_packed_grad(const Tensor& LU, const Tensor& P, const Tensor& gA) {
  Tensor PtgA = matmul(mH(P), gA);
  return add(tril(matmul(PtgA, mH(triu(LU))), -1), triu(matmul(mH(unit_lower(LU)), PtgA)));
}

// Square A = P L U: L^-1 P^T dA U^-1 = L^-1 dL + dU U^-1 (strictly lower + upper), so
// P^T gA = L^-T (tril(L^T gL, -1) + triu(gU U^T)) U^-T, for strictly lower gL and upper gU.
Tensor lu_core(const Tensor& L, const Tensor& U, const Tensor& gL, const Tensor& gU) {
  Tensor M = add(tril(matmul(mH(L), gL), -1), triu(matmul(gU, mH(U))));
  Tensor S = linalg_solve_triangular(mH(L), M, /*upper=*/true, /*left=*/true, /*unitriangular=*/true);
  return linalg_solve_triangular(mH(U), S, /*upper=*/false, /*left=*/false);
}

// m x n: square as above. Wide (m < n, U = [U1 U2]): dU2 = L^-1 (P^T dA2 - dL U2) moves
// -L^-T gU2 U2^T into gL and gives P^T gA2 = L^-T gU2. Tall (m > n, L = [L1; L2]):
// dL2 = (P^T dA)_2 U^-1 - L2 dU U^-1 moves -L2^T gL2 U^-T into gU and gives gL2 U^-T.
void lu_factor_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const Tensor LU = ctx.output(0);
  const int64_t m = LU.size(-2), n = LU.size(-1);
  const Tensor P = lu_permutation(detach(ctx.output(1)), m, LU.dtype(), LU.device());
  const Tensor& gLU = g[0];
  Tensor S;
  if (m == n) {
    S = lu_core(unit_lower(LU), triu(LU), tril(gLU, -1), triu(gLU));
  } else if (m < n) {
    Tensor sq = narrow(LU, -1, 0, m), gsq = narrow(gLU, -1, 0, m);
    Tensor L = unit_lower(sq), U2 = narrow(LU, -1, m, n - m), gU2 = narrow(gLU, -1, m, n - m);
    Tensor LtgU2 = linalg_solve_triangular(mH(L), gU2, /*upper=*/true, /*left=*/true, /*unitriangular=*/true);
    Tensor gL = tril(sub(gsq, matmul(LtgU2, mH(U2))), -1);
    S = cat(std::vector<Tensor>{lu_core(L, triu(sq), gL, triu(gsq)), LtgU2}, -1);
  } else {
    Tensor sq = narrow(LU, -2, 0, n), gsq = narrow(gLU, -2, 0, n);
    Tensor U = triu(sq), L2 = narrow(LU, -2, n, m - n), gL2 = narrow(gLU, -2, n, m - n);
    Tensor gL2Ut = linalg_solve_triangular(mH(U), gL2, /*upper=*/false, /*left=*/false);
    Tensor gU = triu(sub(gsq, matmul(mH(L2), gL2Ut)));
    S = cat(std::vector<Tensor>{lu_core(unit_lower(sq), U, tril(gsq, -1), gU), gL2Ut}, -2);
  }
  out.set(0, matmul(P, S));
}
STRATA_DERIVATIVE(linalg_lu_factor_ex, save_inputs(), save_outputs(0, 1), lu_factor_backward);

// X = op(A)^-1 B (left) or B op(A)^-1 (right), op = transpose when adjoint: gB solves with
// the other op; gA follows from dX = -op(A)^-1 op(dA) X, then goes to the packed LU.
void lu_solve_backward(const BackwardCtx& ctx, const variable_list& g, GradOut& out) {
  const Tensor LU = ctx.input(0), piv = ctx.input(1), X = ctx.output(0);
  const bool left = ctx.arg_bool(3), adjoint = ctx.arg_bool(4);
  Tensor gB = linalg_lu_solve(LU, piv, g[0], left, !adjoint);
  if (ctx.needs_grad(2)) out.set(2, gB);
  if (ctx.needs_grad(0)) {
    Tensor gA = left ? (adjoint ? matmul(X, mH(gB)) : matmul(gB, mH(X)))
                     : (adjoint ? matmul(mH(gB), X) : matmul(mH(X), gB));
    const Tensor P = lu_permutation(piv, LU.size(-1), LU.dtype(), LU.device());
    out.set(0, lu_packed_grad(LU, P, neg(gA)));
  }
}
STRATA_DERIVATIVE(linalg_lu_solve, save_inputs(0, 1), save_outputs(0), lu_solve_backward);

}  // namespace

}  // namespace strata::autograd
