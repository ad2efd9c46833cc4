// torch.linalg's LU and Cholesky family over LAPACK: lu_factor_ex, lu_solve,
// solve, inv, det, slogdet, cholesky_ex, solve_triangular. Shapes and dtypes
// are computed for Meta too; see lapack_common.h for the batch layout.
#include <cmath>

#include "ops/lapack_common.h"
#include "ops/lapack_small.h"

namespace strata {

namespace {

using namespace linalg_detail;

// ---- LU ------------------------------------------------------------------------

// Factors every matrix of `lu` (column-major, in place); pivots is int32 of
// shape batch x min(m, n); info (int32, one per matrix) records singularity.
void lu_factor_into(const char* op, Tensor& lu, Tensor& pivots, Tensor& info) {
  int64_t m = lu.size(-2), n = lu.size(-1), k = std::min(m, n);
  int64_t count = info.numel();
  int* piv = pivots.data_ptr<int>();
  int* inf = info.data_ptr<int>();
  if (m == 0 || n == 0) {
    std::fill(inf, inf + count, 0);
    return;
  }
  int mi = as_int(op, m), ni = as_int(op, n);
  visit_lapack(lu.dtype(), [&]<typename T>() {
    T* base = lu.data_ptr<T>();
    if constexpr (!is_complex_v<T>) if (m == n && n <= kSmallN) {
      for_each_matrix(count, n, [&](int64_t i) { inf[i] = small_getrf<T>(ni, base + i * n * n, piv + i * n); });
      return;
    }
    for_each_matrix(count, std::max(m, n), [&](int64_t i) {
      inf[i] = lapack::getrf<T>(mi, ni, base + i * m * n, std::max(mi, 1), piv + i * k);
    });
  });
}

Tensor3 linalg_lu_factor_ex_impl(const Tensor& A, bool pivot, bool check_errors) {
  const char* op = "linalg.lu_factor_ex";
  check_input(op, "A", A, 2, true);
  STRATA_CHECK_T(NotImplementedError, pivot, op,
                 ": LU without pivoting is not implemented on the CPU (LAPACK always pivots), as in torch");
  auto batch = batch_of(A);
  int64_t m = A.size(-2), n = A.size(-1);
  Tensor lu = col_major(A.sizes(), A.dtype(), A.device(), &A);
  Tensor pivots = empty_tensor(with(batch, {std::min(m, n)}), ScalarType::Int32, A.device());
  Tensor info = empty_tensor(batch, ScalarType::Int32, A.device());
  if (A.device().is_meta()) return {lu, pivots, info};
  lu_factor_into(op, lu, pivots, info);
  if (check_errors) {
    const int* inf = info.data_ptr<int>();
    for (int64_t i = 0; i < info.numel(); ++i)
      if (inf[i] > 0)
        throw LinAlgError(str(op, ": ", batch.empty() ? "" : "(Batch element " + std::to_string(i) + "): ", "U[",
                              inf[i], ",", inf[i], "] is zero and using it on lu_solve would result in a division by "
                              "zero. If you still want to perform the factorization, consider calling "
                              "linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)"));
  }
  return {lu, pivots, info};
}
STRATA_IMPL_CPU_META(linalg_lu_factor_ex, linalg_lu_factor_ex_impl);

// Solves with factored matrices in `lu` (batch broadcast to x's already) into x
// (column-major, n x k each); trans: 'N', 'T' or (complex) 'C'.
void lu_solve_into(const char* op, const Tensor& lu, const Tensor& pivots, Tensor& x, char trans) {
  int64_t n = lu.size(-1), k = x.size(-1), count = x.numel() / std::max<int64_t>(1, n * k);
  if (n == 0 || k == 0) return;
  count = count_of(batch_of(x));
  int ni = as_int(op, n), ki = as_int(op, k);
  const int* piv = pivots.data_ptr<int>();
  visit_lapack(x.dtype(), [&]<typename T>() {
    const T* a = lu.data_ptr<T>();
    T* b = x.data_ptr<T>();
    if constexpr (!is_complex_v<T>) if (n <= kSmallN) {
      trans = trans == 'C' ? 'T' : trans;
      for_each_matrix(count, n, [&](int64_t i) { small_getrs<T>(trans, ni, ki, a + i * n * n, piv + i * n, b + i * n * k); });
      return;
    }
    for_each_matrix(count, n, [&](int64_t i) {
      lapack::getrs<T>(trans, ni, ki, a + i * n * n, ni, piv + i * n, b + i * n * k, ni);
    });
  });
}

// True when B is a batch of vectors for A (torch's rule for linalg.solve).
bool is_vector_rhs(const Tensor& A, const Tensor& B) {
  if (B.dim() == 1) return true;
  if (B.dim() != A.dim() - 1) return false;
  for (int64_t d = 0; d < B.dim(); ++d)
    if (B.size(d) != A.size(d)) return false;
  return true;
}

Tensor linalg_lu_solve_impl(const Tensor& LU, const Tensor& pivots, const Tensor& B, bool left, bool adjoint) {
  const char* op = "linalg.lu_solve";
  check_input(op, "LU", LU, 2, true);
  check_input(op, "B", B, 2, true);
  check_square(op, "LU", LU);
  check_same(op, LU, "LU", B, "B");
  STRATA_CHECK(pivots.dtype() == ScalarType::Int32, op, ": pivots should be a Tensor of scalar type int32, got ",
               dtype_name(pivots.dtype()));
  STRATA_CHECK(pivots.dim() == LU.dim() - 1 && pivots.size(-1) == LU.size(-1), op,
               ": pivots must have shape batch x ", LU.size(-1), " for LU of shape ", LU.shape_str(), ", got ",
               pivots.shape_str());
  // X A = B  <=>  A^T X^T = B^T
  Tensor Bl = left ? B : transpose(B, -2, -1);
  int64_t n = LU.size(-1);
  STRATA_CHECK(Bl.size(-2) == n, op, ": Incompatible shapes of A and B for the equation ", left ? "AX = B" : "XA = B",
               " (", n, "x", n, " and ", B.size(-2), "x", B.size(-1), ")");
  auto batch = broadcast_shapes(batch_of(LU), batch_of(Bl), op);
  std::vector<int64_t> bv(batch.begin(), batch.end());
  Tensor X = col_major(with(bv, {n, Bl.size(-1)}), B.dtype(), B.device(), &Bl);
  if (!B.device().is_meta() && X.numel() > 0) {
    // getrs only reads the factors: use them in place when lu_factor's layout.
    Tensor lu = batch_of(LU) == bv && is_packed_col_major(LU) ? LU
                                                              : col_major(with(bv, {n, n}), LU.dtype(), LU.device(), &LU);
    Tensor piv = contiguous(expand(pivots, with(bv, {n})));
    // left: op(A) X = B with op = adjoint ('C') or none; right: X op(A) = B, that
    // is op(A)^T X^T = B^T: 'T' for op = none, and for op = adjoint conj(A) X^T =
    // B^T, solved as A conj(X^T) = conj(B^T) (only complex differs from 'T').
    bool conj_solve = !left && adjoint && is_complex_type(X.dtype());
    if (conj_solve) copy_(X, conj_physical(X));
    lu_solve_into(op, lu, piv, X, left ? (adjoint ? 'C' : 'N') : (conj_solve ? 'N' : adjoint ? 'N' : 'T'));
    if (conj_solve) copy_(X, conj_physical(X));
  }
  return left ? X : transpose(X, -2, -1);
}
STRATA_IMPL_CPU_META(linalg_lu_solve, linalg_lu_solve_impl);

Tensor linalg_solve_impl(const Tensor& A, const Tensor& B, bool left) {
  const char* op = "torch.linalg.solve";
  check_input(op, "A", A, 2, true);
  check_input(op, "B", B, 1, true);
  check_same("linalg.solve", A, "A", B, "B");
  check_square("linalg.solve", "A", A);
  bool vec = is_vector_rhs(A, B);
  STRATA_CHECK(left || !vec, "linalg.solve: Vector broadcasting of the left hand side is not supported for left=False. "
               "In this case linalg.solve is equivalent to B / A.squeeze(-1)");
  Tensor Bm = vec ? unsqueeze(B, -1) : B;
  Tensor Al = left ? A : transpose(A, -2, -1);
  Tensor Bl = left ? Bm : transpose(Bm, -2, -1);
  int64_t n = A.size(-1);
  STRATA_CHECK(Bl.size(-2) == n, "linalg.solve: Incompatible shapes of A and B for the equation ",
               left ? "AX = B" : "XA = B", " (", A.size(-2), "x", A.size(-1), " and ", Bm.size(-2), "x", Bm.size(-1),
               ")");
  auto batch = broadcast_shapes(batch_of(Al), batch_of(Bl), "linalg.solve");
  std::vector<int64_t> bv(batch.begin(), batch.end());
  Tensor X = col_major(with(bv, {n, Bl.size(-1)}), B.dtype(), B.device(), &Bl);
  if (!A.device().is_meta() && X.numel() > 0) {
    Tensor lu = col_major(with(bv, {n, n}), A.dtype(), A.device(), &Al);
    Tensor piv = empty_tensor(with(bv, {n}), ScalarType::Int32, A.device());
    Tensor info = empty_tensor(bv, ScalarType::Int32, A.device());
    lu_factor_into(op, lu, piv, info);
    const int* inf = info.data_ptr<int>();
    for (int64_t i = 0; i < info.numel(); ++i)
      if (inf[i] > 0)
        throw LinAlgError(str(op, ": ", bv.empty() ? "" : "(Batch element " + std::to_string(i) + "): ",
                              "The solver failed because the input matrix is singular."));
    lu_solve_into(op, lu, piv, X, 'N');
  }
  Tensor R = left ? X : transpose(X, -2, -1);
  return vec ? squeeze(R, -1) : R;
}
STRATA_IMPL_CPU_META(linalg_solve, linalg_solve_impl);

Tensor linalg_inv_impl(const Tensor& A) {
  const char* op = "linalg.inv";
  check_input(op, "A", A, 2, true);
  check_square(op, "A", A);
  int64_t n = A.size(-1);
  auto batch = batch_of(A);
  Tensor X = col_major(A.sizes(), A.dtype(), A.device());
  if (A.device().is_meta() || X.numel() == 0) return X;
  Tensor lu = col_major(A.sizes(), A.dtype(), A.device(), &A);
  Tensor piv = empty_tensor(with(batch, {n}), ScalarType::Int32, A.device());
  Tensor info = empty_tensor(batch, ScalarType::Int32, A.device());
  lu_factor_into(op, lu, piv, info);
  const int* inf = info.data_ptr<int>();
  for (int64_t i = 0; i < info.numel(); ++i)
    if (inf[i] > 0)
      throw LinAlgError(str(op, ": ", batch.empty() ? "" : "(Batch element " + std::to_string(i) + "): ",
                            "The diagonal element ", inf[i],
                            " is zero, the inversion could not be completed because the input matrix is singular."));
  visit_lapack(A.dtype(), [&]<typename T>() {
    T* x = X.data_ptr<T>();
    int64_t count = info.numel();
    for (int64_t i = 0; i < count; ++i) {
      T* xi = x + i * n * n;
      std::fill(xi, xi + n * n, T(0));
      for (int64_t j = 0; j < n; ++j) xi[j * n + j] = T(1);
    }
  });
  lu_solve_into(op, lu, piv, X, 'N');
  return X;
}
STRATA_IMPL_CPU_META(linalg_inv, linalg_inv_impl);

// The sign of a pivot permutation (LAPACK's 1-based row interchanges).
inline int p_sign(const int* p, int64_t n) {
  int s = 1;
  for (int64_t j = 0; j < n; ++j)
    if (p[j] != j + 1) s = -s;
  return s;
}

// log|det|, its sign and det itself (each optional) of every matrix from its
// LU factors: det is the product of U's diagonal, which stays finite where
// exp(log|det|) would not be exact.
template <typename T>
void lu_logdet(const Tensor& lu, const Tensor& piv, T* sign, T* logabs, T* det, int64_t count, int64_t n) {
  const T* a = lu.data_ptr<T>();
  const int* p = piv.data_ptr<int>();
  parallel_for(0, count, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, n)), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const T* m = a + i * n * n;
      T s = 1, l = 0, prod = 1;
      for (int64_t j = 0; j < n; ++j) {
        T d = m[j * n + j];
        prod *= d;
        if (p[i * n + j] != j + 1) s = -s;
        if (d < 0) s = -s, d = -d;
        if (d == 0 || std::isnan(d)) s = d == 0 ? 0 : d;
        if (logabs) l += std::log(d);
      }
      if (det) det[i] = p_sign(p + i * n, n) * prod;
      if (sign) sign[i] = s;
      if (logabs) logabs[i] = l;
    }
  });
}

// The complex form: sign = p_sign * prod(d / |d|) (0 for a singular matrix),
// log|det| = sum log|d|, det = p_sign * prod(d).
template <typename C>
void lu_logdet_complex(const Tensor& lu, const Tensor& piv, C* sign, typename C::value_type* logabs, C* det,
                       int64_t count, int64_t n) {
  using R = typename C::value_type;
  const C* a = lu.data_ptr<C>();
  const int* p = piv.data_ptr<int>();
  parallel_for(0, count, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, n)), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const C* m = a + i * n * n;
      C s = R(p_sign(p + i * n, n)), prod = R(1);
      R l = 0;
      for (int64_t j = 0; j < n; ++j) {
        C d = m[j * n + j];
        R ad = std::abs(d);
        prod *= d;
        s = ad == 0 ? C(0) : s * (d / ad);
        l += std::log(ad);
      }
      if (det) det[i] = R(p_sign(p + i * n, n)) * prod;
      if (sign) sign[i] = s;
      if (logabs) logabs[i] = l;
    }
  });
}

// Factors A (a column-major copy) and hands the factors to f(lu, piv, count, n).
template <typename F>
void with_lu(const char* op, const Tensor& A, const F& f) {
  auto batch = batch_of(A);
  int64_t n = A.size(-1);
  Tensor lu = col_major(A.sizes(), A.dtype(), A.device(), &A);
  Tensor piv = empty_tensor(with(batch, {n}), ScalarType::Int32, A.device());
  Tensor info = empty_tensor(batch, ScalarType::Int32, A.device());
  lu_factor_into(op, lu, piv, info);
  f(lu, piv, info.numel(), n);
}

Tensor2 linalg_slogdet_impl(const Tensor& A) {
  const char* op = "linalg.slogdet";
  check_input(op, "A", A, 2, true);
  check_square(op, "A", A);
  auto batch = batch_of(A);
  Tensor sign = empty_tensor(batch, A.dtype(), A.device());
  Tensor logabs = empty_tensor(batch, to_real_value_type(A.dtype()), A.device());
  if (A.device().is_meta() || sign.numel() == 0) return {sign, logabs};
  with_lu(op, A, [&](const Tensor& lu, const Tensor& piv, int64_t count, int64_t n) {
    visit_lapack(A.dtype(), [&]<typename T>() {
      if constexpr (is_complex_v<T>)
        lu_logdet_complex<T>(lu, piv, sign.data_ptr<T>(), logabs.data_ptr<typename T::value_type>(), nullptr, count,
                             n);
      else lu_logdet<T>(lu, piv, sign.data_ptr<T>(), logabs.data_ptr<T>(), nullptr, count, n);
    });
  });
  return {sign, logabs};
}
STRATA_IMPL_CPU_META(linalg_slogdet, linalg_slogdet_impl);

Tensor linalg_det_impl(const Tensor& A) {
  const char* op = "linalg.det";
  check_input(op, "A", A, 2, true);
  check_square(op, "A", A);
  Tensor det = empty_tensor(batch_of(A), A.dtype(), A.device());
  if (A.device().is_meta() || det.numel() == 0) return det;
  with_lu(op, A, [&](const Tensor& lu, const Tensor& piv, int64_t count, int64_t n) {
    visit_lapack(A.dtype(), [&]<typename T>() {
      if constexpr (is_complex_v<T>) lu_logdet_complex<T>(lu, piv, nullptr, nullptr, det.data_ptr<T>(), count, n);
      else lu_logdet<T>(lu, piv, nullptr, nullptr, det.data_ptr<T>(), count, n);
    });
  });
  return det;
}
STRATA_IMPL_CPU_META(linalg_det, linalg_det_impl);

// ---- Cholesky ------------------------------------------------------------------

Tensor2 linalg_cholesky_ex_impl(const Tensor& A, bool upper, bool check_errors) {
  const char* op = "linalg.cholesky";
  check_input(op, "A", A, 2, true);
  check_square(op, "A", A);
  auto batch = batch_of(A);
  int64_t n = A.size(-1);
  Tensor L = col_major(A.sizes(), A.dtype(), A.device(), &A);
  Tensor info = empty_tensor(batch, ScalarType::Int32, A.device());
  // upper: U = L^H (the conjugate matters for complex input).
  auto out = [&](const Tensor& l) { return upper ? (is_complex_type(l.dtype()) ? conj(transpose(l, -2, -1))
                                                                               : transpose(l, -2, -1)) : l; };
  if (A.device().is_meta()) return {out(L), info};
  int* inf = info.data_ptr<int>();
  int64_t count = info.numel();
  if (n == 0) {
    std::fill(inf, inf + count, 0);
    return {out(L), info};
  }
  int ni = as_int(op, n);
  visit_lapack(A.dtype(), [&]<typename T>() {
    T* base = L.data_ptr<T>();
    if constexpr (!is_complex_v<T>) if (n <= kSmallN) {
      const SmallPotrfFn potrf_small = small_potrf_stub.get(DeviceType::CPU);
      lapack::sync_threads();
      parallel_for(0, count, std::max<int64_t>(64, 16384 / (n * n)), [&](int64_t b, int64_t e) {
        potrf_small(std::is_same_v<T, double>, ni, e - b, base + b * n * n, inf + b);
      });
      return;
    }
    for_each_matrix(count, n, [&](int64_t i) {
      T* m = base + i * n * n;
      inf[i] = lapack::potrf<T>('L', ni, m, ni);
      for (int64_t c = 1; c < n; ++c)  // zero the strict upper triangle (column c, rows < c)
        std::fill(m + c * n, m + c * n + c, T(0));
    });
  });
  if (check_errors)
    for (int64_t i = 0; i < count; ++i)
      if (inf[i] > 0)
        throw LinAlgError(str(op, ": ", batch.empty() ? "" : "(Batch element " + std::to_string(i) + "): ",
                              "The factorization could not be completed because the input is not positive-definite "
                              "(the leading minor of order ", inf[i], " is not positive-definite)."));
  return {out(L), info};
}
STRATA_IMPL_CPU_META(linalg_cholesky_ex, linalg_cholesky_ex_impl);

// ---- triangular solve ------------------------------------------------------------

Tensor linalg_solve_triangular_impl(const Tensor& A, const Tensor& B, bool upper, bool left, bool unitriangular) {
  const char* op = "linalg.solve_triangular";
  check_input(op, "A", A, 2, true);
  check_input(op, "B", B, 2, true);
  check_same(op, A, "A", B, "B");
  check_square(op, "A", A);
  // X A = B  <=>  A^T X^T = B^T, with A^T's triangle flipped.
  Tensor Al = left ? A : transpose(A, -2, -1);
  Tensor Bl = left ? B : transpose(B, -2, -1);
  bool up = left ? upper : !upper;
  int64_t n = A.size(-1), k = Bl.size(-1);
  STRATA_CHECK(Bl.size(-2) == n, op, ": Incompatible shapes of A and B for the equation ", left ? "AX = B" : "XA = B",
               " (", A.size(-2), "x", A.size(-1), " and ", B.size(-2), "x", B.size(-1), ")");
  auto batch = broadcast_shapes(batch_of(Al), batch_of(Bl), op);
  std::vector<int64_t> bv(batch.begin(), batch.end());
  Tensor X = col_major(with(bv, {n, k}), B.dtype(), B.device(), &Bl);
  if (!A.device().is_meta() && X.numel() > 0) {
    // trtrs only reads A: a batch already packed column-major is used as it is,
    // and one packed row-major is A^T column-major, solved with trans='T' and
    // the other triangle (no copy of A either way).
    bool same_batch = batch_of(Al) == bv;
    bool as_is = same_batch && is_packed_col_major(Al);
    bool as_t = !as_is && same_batch && is_packed_col_major(transpose(Al, -2, -1));
    Tensor At = as_is || as_t ? Al : col_major(with(bv, {n, n}), A.dtype(), A.device(), &Al);
    char uplo = (up != as_t) ? 'U' : 'L', trans = as_t ? 'T' : 'N';
    int ni = as_int(op, n), ki = as_int(op, k);
    int64_t count = count_of(bv);
    visit_lapack(A.dtype(), [&]<typename T>() {
      const T* a = At.data_ptr<T>();
      T* x = X.data_ptr<T>();
      for_each_matrix(count, n, [&](int64_t i) {
        // trtrs reports an exactly zero diagonal entry instead of dividing by
        // it; torch returns inf/nan there, and so do we: plain substitution
        // (IEEE division) for that matrix.
        if (lapack::trtrs<T>(uplo, trans, unitriangular ? 'U' : 'N', ni, ki, a + i * n * n, ni, x + i * n * k, ni) >
            0) {
          const T* mem = a + i * n * n;
          auto at = [&](int64_t r, int64_t c) { return as_t ? mem[r * n + c] : mem[c * n + r]; };  // A[r, c]
          T* xi = x + i * n * k;
          for (int64_t c = 0; c < k; ++c) {
            T* col = xi + c * n;
            if (up) {
              for (int64_t r = n - 1; r >= 0; --r) {
                T s = col[r];
                for (int64_t j = r + 1; j < n; ++j) s -= at(r, j) * col[j];
                col[r] = unitriangular ? s : s / at(r, r);
              }
            } else {
              for (int64_t r = 0; r < n; ++r) {
                T s = col[r];
                for (int64_t j = 0; j < r; ++j) s -= at(r, j) * col[j];
                col[r] = unitriangular ? s : s / at(r, r);
              }
            }
          }
        }
      });
    });
  }
  return left ? X : transpose(X, -2, -1);
}
STRATA_IMPL_CPU_META(linalg_solve_triangular, linalg_solve_triangular_impl);

}  // namespace

}  // namespace strata
