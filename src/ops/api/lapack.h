#pragma once

#include "ops/op_list.h"

namespace strata {

inline Tensor3 linalg_lu_factor_ex(const Tensor& A, bool pivot = true, bool check_errors = false) { return call<OpId::linalg_lu_factor_ex>(A, pivot, check_errors); }
inline Tensor linalg_lu_solve(const Tensor& LU, const Tensor& pivots, const Tensor& B, bool left = true, bool adjoint = false) { return call<OpId::linalg_lu_solve>(LU, pivots, B, left, adjoint); }
inline Tensor linalg_solve(const Tensor& A, const Tensor& B, bool left = true) { return call<OpId::linalg_solve>(A, B, left); }
inline Tensor linalg_inv(const Tensor& A) { return call<OpId::linalg_inv>(A); }
inline Tensor linalg_det(const Tensor& A) { return call<OpId::linalg_det>(A); }
inline Tensor2 linalg_slogdet(const Tensor& A) { return call<OpId::linalg_slogdet>(A); }
inline Tensor2 linalg_cholesky_ex(const Tensor& A, bool upper = false, bool check_errors = false) { return call<OpId::linalg_cholesky_ex>(A, upper, check_errors); }
inline Tensor linalg_solve_triangular(const Tensor& A, const Tensor& B, bool upper, bool left = true, bool unitriangular = false) { return call<OpId::linalg_solve_triangular>(A, B, upper, left, unitriangular); }
inline Tensor2 linalg_qr(const Tensor& A, std::string_view mode = "reduced") { return call<OpId::linalg_qr>(A, mode); }
inline Tensor3 linalg_svd(const Tensor& A, bool full_matrices = false, bool compute_uv = true) { return call<OpId::_linalg_svd>(A, full_matrices, compute_uv); }
inline Tensor2 linalg_eigh(const Tensor& A, std::string_view uplo = "L", bool compute_v = true) { return call<OpId::_linalg_eigh>(A, uplo, compute_v); }
inline Tensor2 linalg_eig(const Tensor& A) { return call<OpId::linalg_eig>(A); }
inline Tensor linalg_eigvals(const Tensor& A) { return call<OpId::linalg_eigvals>(A); }
inline Tensor linalg_householder_product(const Tensor& A, const Tensor& tau) { return call<OpId::linalg_householder_product>(A, tau); }

}  // namespace strata
