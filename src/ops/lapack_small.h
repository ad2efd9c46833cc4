// Unblocked LU (partial pivoting), LU solves and QR for small column-major
// matrices (n <= kSmallN), used instead of a LAPACK call per matrix in batches
// of small matrices. A LAPACK call pays its interface (argument checks,
// workspace and thread decisions, the blocked driver choosing its unblocked
// path) on every matrix: about 0.4 us for an 8x8 getrf + getrs pair, more
// than the arithmetic. These loops are LAPACK's unblocked algorithms (getf2:
// the largest pivot in magnitude, first on ties; geqr2 and org2r) with the
// same info conventions, so results agree with LAPACK's to rounding and
// failures are reported identically. Cholesky and symmetric eigenproblems of
// small matrices are kernels compiled per ISA level (the stubs below).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

#include "ops/stub.h"

namespace strata::linalg_detail {

constexpr int kSmallN = 16;

// LU of the n x n matrix a (lda n) in place; ipiv is 1-based. Returns 0 or
// the 1-based index of the first exactly zero pivot (the factorisation goes on).
template <typename T>
int small_getrf(int n, T* a, int* ipiv) {
  int info = 0;
  for (int j = 0; j < n; ++j) {
    T* cj = a + j * n;
    int p = j;
    T best = std::abs(cj[j]);
    for (int i = j + 1; i < n; ++i) {
      T v = std::abs(cj[i]);
      if (v > best) best = v, p = i;
    }
    ipiv[j] = p + 1;
    if (cj[p] != T(0)) {
      if (p != j)
        for (int c = 0; c < n; ++c) std::swap(a[c * n + j], a[c * n + p]);
      T inv = T(1) / cj[j];
      for (int i = j + 1; i < n; ++i) cj[i] *= inv;
    } else if (info == 0) {
      info = j + 1;
    }
    for (int c = j + 1; c < n; ++c) {
      T* cc = a + c * n;
      T f = cc[j];
      if (f != T(0))
        for (int i = j + 1; i < n; ++i) cc[i] -= cj[i] * f;
    }
  }
  return info;
}

// Solves op(A) X = B with A's LU factors from small_getrf; B is n x nrhs (ldb n).
template <typename T>
void small_getrs(char trans, int n, int nrhs, const T* a, const int* ipiv, T* b) {
  for (int r = 0; r < nrhs; ++r) {
    T* x = b + r * n;
    if (trans == 'N') {
      for (int j = 0; j < n; ++j)
        if (int p = ipiv[j] - 1; p != j) std::swap(x[j], x[p]);
      for (int j = 0; j < n; ++j) {  // L (unit) y = P b
        T v = x[j];
        for (int i = j + 1; i < n; ++i) x[i] -= a[j * n + i] * v;
      }
      for (int j = n - 1; j >= 0; --j) {  // U x = y
        x[j] /= a[j * n + j];
        T v = x[j];
        for (int i = 0; i < j; ++i) x[i] -= a[j * n + i] * v;
      }
    } else {
      for (int j = 0; j < n; ++j) {  // U^T y = b
        T s = x[j];
        for (int i = 0; i < j; ++i) s -= a[j * n + i] * x[i];
        x[j] = s / a[j * n + j];
      }
      for (int j = n - 1; j >= 0; --j) {  // L^T z = y
        T s = x[j];
        for (int i = j + 1; i < n; ++i) s -= a[j * n + i] * x[i];
        x[j] = s;
      }
      for (int j = n - 1; j >= 0; --j)
        if (int p = ipiv[j] - 1; p != j) std::swap(x[j], x[p]);
    }
  }
}

// Householder QR of the m x n matrix a (lda m) in place, as LAPACK's geqr2
// (reflectors below the diagonal, R on and above it, dlarfg's sign choice
// beta = -sign(alpha) * norm). Returns false, leaving the matrix in an
// unspecified state, when a column is so small that dlarfg would rescale it
// (the caller then uses LAPACK for that matrix).
template <typename T>
bool small_geqr2(int m, int n, T* a, T* tau) {
  const int k = std::min(m, n);
  const T tiny = std::numeric_limits<T>::min() / std::numeric_limits<T>::epsilon();
  for (int j = 0; j < k; ++j) {
    T* cj = a + j * m;
    T alpha = cj[j], ss = 0;
    for (int i = j + 1; i < m; ++i) ss += cj[i] * cj[i];
    if (ss == T(0)) {
      tau[j] = 0;
    } else {
      T beta = -std::copysign(std::sqrt(alpha * alpha + ss), alpha);
      if (!(std::abs(beta) >= tiny) || !std::isfinite(beta)) return false;
      tau[j] = (beta - alpha) / beta;
      T scale = T(1) / (alpha - beta);
      for (int i = j + 1; i < m; ++i) cj[i] *= scale;
      cj[j] = beta;
    }
    if (tau[j] != T(0)) {  // apply H = I - tau v v^T (v = [1; cj[j+1:]]) to the trailing columns
      for (int c = j + 1; c < n; ++c) {
        T* cc = a + c * m;
        T w = cc[j];
        for (int i = j + 1; i < m; ++i) w += cj[i] * cc[i];
        w *= tau[j];
        cc[j] -= w;
        for (int i = j + 1; i < m; ++i) cc[i] -= w * cj[i];
      }
    }
  }
  return true;
}

// The first qc columns of Q = H_0 ... H_{k-1} from geqr2's reflectors, in
// place in q (m x qc, lda m, reflectors in its first k columns), as LAPACK's org2r.
template <typename T>
void small_org2r(int m, int qc, int k, T* q, const T* tau) {
  for (int j = k; j < qc; ++j) {
    T* cj = q + j * m;
    for (int i = 0; i < m; ++i) cj[i] = T(0);
    cj[j] = T(1);
  }
  for (int j = k - 1; j >= 0; --j) {
    T* cj = q + j * m;
    for (int c = j + 1; c < qc; ++c) {  // H_j applied to the columns on its right
      T* cc = q + c * m;
      T w = cc[j];
      for (int i = j + 1; i < m; ++i) w += cj[i] * cc[i];
      w *= tau[j];
      cc[j] -= w;
      for (int i = j + 1; i < m; ++i) cc[i] -= w * cj[i];
    }
    for (int i = j + 1; i < m; ++i) cj[i] *= -tau[j];
    cj[j] = T(1) - tau[j];
    for (int i = 0; i < j; ++i) cj[i] = T(0);
  }
}

// Eigenvalues (ascending, into w) and optionally eigenvectors (v, n x n
// column-major, or null) of a small symmetric matrix (a's `uplo` triangle,
// column-major), float (dbl false) or double: tridiagonal reduction and
// implicit QL, see backends/cpu/kernels/linalg_small_kernels.cpp. work holds
// n * n + 3 * n elements. False: not converged or not finite (use LAPACK).
using SmallSyevFn = bool (*)(bool dbl, int n, const void* a, char uplo, void* w, void* v, void* work);
// Lower Cholesky factors of `count` n x n matrices (n <= kSmallN, packed
// column-major at a) in place, strict upper triangles zeroed, info as potf2's
// (its left-looking order, so results agree with LAPACK's to rounding),
// several matrices per vector instruction.
using SmallPotrfFn = void (*)(bool dbl, int n, int64_t count, void* a, int* info);
}  // namespace strata::linalg_detail
namespace strata {
STRATA_DECLARE_STUB(small_syev_stub, linalg_detail::SmallSyevFn);
STRATA_DECLARE_STUB(small_potrf_stub, linalg_detail::SmallPotrfFn);
}  // namespace strata
