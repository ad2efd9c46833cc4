// Complex linear algebra through the C++ API (the ops of decl/lapack.def and the
// complex GEMM of backends/cpu/blas_complex.cpp); tests/python/test_linalg_complex.py
// compares the same ops with torch and NumPy in depth.
#include <gtest/gtest.h>

#include <complex>

#include "core/linalg_error.h"
#include "ops/api/lapack.h"
#include "ops/ops.h"

using namespace strata;
using C = std::complex<double>;

namespace {
Tensor cmat(int64_t r, int64_t c, double seed) {
  Tensor t = empty_tensor(std::vector<int64_t>{r, c}, ScalarType::ComplexDouble, Device());
  C* p = t.data_ptr<C>();
  for (int64_t i = 0; i < r * c; ++i) p[i] = C(std::sin(seed + 1.3 * i), std::cos(seed * 0.7 + 0.9 * i));
  return t;
}
}  // namespace

TEST(LinalgComplex, EigOfARotationIsPlusMinusI) {
  Tensor a = empty_tensor(std::vector<int64_t>{2, 2}, ScalarType::Float64, Device());
  double* p = a.data_ptr<double>();
  p[0] = 0, p[1] = -1, p[2] = 1, p[3] = 0;
  auto [L, V] = linalg_eig(a);
  ASSERT_EQ(L.dtype(), ScalarType::ComplexDouble);
  ASSERT_EQ(V.dtype(), ScalarType::ComplexDouble);
  Tensor l = contiguous(L);
  C l0 = l.data_ptr<C>()[0], l1 = l.data_ptr<C>()[1];
  EXPECT_NEAR(std::abs(l0.imag()), 1.0, 1e-14);
  EXPECT_NEAR(l0.real(), 0.0, 1e-14);
  EXPECT_NEAR(std::abs(l0 - std::conj(l1)), 0.0, 1e-14);
  // A V = V diag(L)
  Tensor av = matmul(to_dtype(a, ScalarType::ComplexDouble), V);
  Tensor vl = mul(V, unsqueeze(L, 0));
  EXPECT_LT(amax(abs(sub(av, vl))).item().to_double(), 1e-14);
}

TEST(LinalgComplex, GemmMatchesALoopAndSolveInvertsIt) {
  Tensor a = cmat(5, 4, 0.3), b = cmat(4, 3, 1.1);
  Tensor c = contiguous(matmul(a, b));
  for (int64_t i = 0; i < 5; ++i)
    for (int64_t j = 0; j < 3; ++j) {
      C s = 0;
      for (int64_t k = 0; k < 4; ++k) s += a.data_ptr<C>()[i * 4 + k] * b.data_ptr<C>()[k * 3 + j];
      EXPECT_NEAR(std::abs(c.data_ptr<C>()[i * 3 + j] - s), 0.0, 1e-13);
    }
  Tensor m = add(cmat(4, 4, 2.0), mul(eye(4, std::nullopt, ScalarType::ComplexDouble, Device()),
                                      scalar_to_tensor(Scalar(4.0), ScalarType::ComplexDouble, Device(), true)));
  Tensor x = linalg_solve(m, b);
  EXPECT_LT(amax(abs(sub(matmul(m, x), b))).item().to_double(), 1e-12);
  EXPECT_THROW(linalg_inv(zeros(std::vector<int64_t>{3, 3}, ScalarType::ComplexDouble)), LinAlgError);
}
