#pragma once

#include "ops/op_list.h"

namespace strata {

inline Tensor matmul(const Tensor& self, const Tensor& other, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::matmul>(self, other, out); }
inline Tensor mm(const Tensor& self, const Tensor& mat2, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::mm>(self, mat2, out); }
inline Tensor bmm(const Tensor& self, const Tensor& mat2, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::bmm>(self, mat2, out); }
inline Tensor mv(const Tensor& self, const Tensor& vec, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::mv>(self, vec, out); }
inline Tensor dot(const Tensor& self, const Tensor& tensor, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::dot>(self, tensor, out); }
inline Tensor vdot(const Tensor& self, const Tensor& other, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::vdot>(self, other, out); }
inline Tensor outer(const Tensor& self, const Tensor& vec2, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::outer>(self, vec2, out); }
inline Tensor addmm(const Tensor& self, const Tensor& mat1, const Tensor& mat2, const Scalar& beta = 1, const Scalar& alpha = 1, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::addmm>(self, mat1, mat2, beta, alpha, out); }
inline Tensor addmv(const Tensor& self, const Tensor& mat, const Tensor& vec, const Scalar& beta = 1, const Scalar& alpha = 1, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::addmv>(self, mat, vec, beta, alpha, out); }
inline Tensor baddbmm(const Tensor& self, const Tensor& batch1, const Tensor& batch2, const Scalar& beta = 1, const Scalar& alpha = 1, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::baddbmm>(self, batch1, batch2, beta, alpha, out); }
inline Tensor addbmm(const Tensor& self, const Tensor& batch1, const Tensor& batch2, const Scalar& beta = 1, const Scalar& alpha = 1, const std::optional<Tensor>& out = std::nullopt) { return call<OpId::addbmm>(self, batch1, batch2, beta, alpha, out); }

inline Tensor blas_axpy(const Tensor& x, const Tensor& y, const Scalar& alpha = 1) { return call<OpId::blas_axpy>(x, y, alpha); }
inline Tensor blas_dot(const Tensor& x, const Tensor& y) { return call<OpId::blas_dot>(x, y); }
inline Tensor blas_nrm2(const Tensor& x) { return call<OpId::blas_nrm2>(x); }
inline Tensor blas_gemv(const Tensor& a, const Tensor& x, const std::optional<Tensor>& y = std::nullopt, const Scalar& alpha = 1, const Scalar& beta = 0, bool trans = false) { return call<OpId::blas_gemv>(a, x, y, alpha, beta, trans); }
inline Tensor blas_trsv(const Tensor& a, const Tensor& b, bool upper = true, bool trans = false, bool unit_diagonal = false) { return call<OpId::blas_trsv>(a, b, upper, trans, unit_diagonal); }
inline Tensor blas_gemm(const Tensor& a, const Tensor& b, const std::optional<Tensor>& c = std::nullopt, const Scalar& alpha = 1, const Scalar& beta = 0, bool trans_a = false, bool trans_b = false) { return call<OpId::blas_gemm>(a, b, c, alpha, beta, trans_a, trans_b); }
inline Tensor blas_syrk(const Tensor& a, const std::optional<Tensor>& c = std::nullopt, const Scalar& alpha = 1, const Scalar& beta = 0, bool upper = true, bool trans = false) { return call<OpId::blas_syrk>(a, c, alpha, beta, upper, trans); }
inline Tensor blas_trsm(const Tensor& a, const Tensor& b, const Scalar& alpha = 1, bool left = true, bool upper = true, bool trans = false, bool unit_diagonal = false) { return call<OpId::blas_trsm>(a, b, alpha, left, upper, trans, unit_diagonal); }

}  // namespace strata
