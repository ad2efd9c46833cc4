// Symmetric eigenproblems and Cholesky factors of small matrices without a
// LAPACK call (small_syev_stub and small_potrf_stub of ops/lapack_small.h), compiled per ISA level like the other
// kernels: the reflector updates and the rotations applied to the eigenvector
// columns are the inner loops, and they vectorize.
#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "backends/cpu/loops.h"
#include "ops/lapack_small.h"

namespace strata {
namespace cpu {
inline namespace STRATA_CPU_NS {
namespace {

// Eigenvalues (ascending, into w) and, when v is given, eigenvectors (columns
// of v, n x n, ldv n; v may alias a) of the symmetric n x n matrix whose `uplo`
// triangle a holds (column-major, lda n), as LAPACK's syev does it: Householder
// reduction to tridiagonal form T = Q^T A Q (sytd2's reflectors, dlarfg's sign
// choice), Q accumulated backwards (org2l's order), then implicit QL
// iterations with Wilkinson-style shifts on T whose Givens rotations are
// applied to Q's columns (steqr's QL branch). The matrix is first scaled by a
// power of two (exact) so that its largest entry is about 1, which keeps the
// squares in the reflectors and rotations away from overflow and underflow.
// work holds n * n + 3 * n elements. Returns false when the QL iterations did
// not converge in 30 n steps or the input is not finite (the caller then uses
// LAPACK). Accuracy is that of syev/syevd: eigenvalues to a small multiple of
// eps * ||A||, orthonormal eigenvectors.
template <typename T>
bool syev_ql(int n, const T* a, char uplo, T* w, T* v, T* work) {
  T* m = work;
  T* e = m + n * n;
  T* tau = e + n;
  T* p = tau + n;
  T* d = w;
  T amax = 0;
  for (int c = 0; c < n; ++c)
    for (int r = c; r < n; ++r) {  // the lower triangle of the full symmetric copy
      T x = uplo == 'L' ? a[c * n + r] : a[r * n + c];
      m[c * n + r] = x;
      amax = std::max(amax, std::abs(x));
    }
  if (!(amax <= std::numeric_limits<T>::max())) return false;
  if (amax == T(0)) {
    std::fill(d, d + n, T(0));
    if (v)
      for (int i = 0; i < n * n; ++i) v[i] = (i % (n + 1) == 0) ? T(1) : T(0);
    return true;
  }
  int ex = 0;
  std::frexp(amax, &ex);
  const bool scaled = ex > std::numeric_limits<T>::max_exponent / 2 - 8 ||
                      ex < std::numeric_limits<T>::min_exponent / 2 + 8;
  for (int c = 0; c < n; ++c)
    for (int r = c; r < n; ++r) {
      if (scaled) m[c * n + r] = std::ldexp(m[c * n + r], -ex);
      m[r * n + c] = m[c * n + r];
    }
  // Tridiagonal reduction, one reflector H_k = I - tau v v^T per column k; v
  // (v[k + 1] = 1) is kept below the subdiagonal of column k.
  for (int k = 0; k + 2 < n; ++k) {
    T* col = m + k * n;
    d[k] = col[k];
    T alpha = col[k + 1], sigma = 0;
    for (int i = k + 2; i < n; ++i) sigma += col[i] * col[i];
    if (sigma == T(0)) {
      tau[k] = 0;
      e[k] = alpha;
      continue;
    }
    T beta = -std::copysign(std::sqrt(alpha * alpha + sigma), alpha);
    T t = (beta - alpha) / beta, scal = T(1) / (alpha - beta);
    col[k + 1] = 1;
    for (int i = k + 2; i < n; ++i) col[i] *= scal;
    tau[k] = t;
    e[k] = beta;
    // B <- H B H on the trailing block B: p = t B v, w = p - (t/2)(p.v) v,
    // B -= v w^T + w v^T.
    for (int i = k + 1; i < n; ++i) p[i] = 0;
    for (int j = k + 1; j < n; ++j) {
      const T* bj = m + j * n;
      const T vj = col[j];
      for (int i = k + 1; i < n; ++i) p[i] += bj[i] * vj;
    }
    T pv = 0;
    for (int i = k + 1; i < n; ++i) {
      p[i] *= t;
      pv += p[i] * col[i];
    }
    const T h = T(-0.5) * t * pv;
    for (int i = k + 1; i < n; ++i) p[i] += h * col[i];
    for (int j = k + 1; j < n; ++j) {
      T* bj = m + j * n;
      const T vj = col[j], wj = p[j];
      for (int i = k + 1; i < n; ++i) bj[i] -= col[i] * wj + p[i] * vj;
    }
  }
  if (n >= 2) {
    d[n - 2] = m[(n - 2) * n + n - 2];
    e[n - 2] = m[(n - 2) * n + n - 1];
  }
  d[n - 1] = m[(n - 1) * n + n - 1];
  e[n - 1] = 0;
  T* z = v;
  if (z) {  // Q = H_0 ... H_{n-3}, built from the right: Q <- H_k Q
    for (int i = 0; i < n * n; ++i) z[i] = (i % (n + 1) == 0) ? T(1) : T(0);
    for (int k = n - 3; k >= 0; --k) {
      if (tau[k] == T(0)) continue;
      const T* vk = m + k * n;
      for (int j = k + 1; j < n; ++j) {
        T* zj = z + j * n;
        T s = 0;
        for (int i = k + 1; i < n; ++i) s += vk[i] * zj[i];
        s *= tau[k];
        for (int i = k + 1; i < n; ++i) zj[i] -= s * vk[i];
      }
    }
  }
  // Implicit QL on (d, e), e[i] coupling d[i] and d[i + 1].
  const T eps = std::numeric_limits<T>::epsilon(), tiny = std::numeric_limits<T>::min();
  int iters = 0;
  for (int l = 0; l < n; ++l) {
    for (;;) {
      int mm = l;
      for (; mm < n - 1; ++mm)
        if (std::abs(e[mm]) <= eps * (std::abs(d[mm]) + std::abs(d[mm + 1])) + tiny) break;
      if (mm == l) break;
      if (++iters > 30 * n) return false;
      T g = (d[l + 1] - d[l]) / (T(2) * e[l]);
      T r = std::hypot(g, T(1));
      g = d[mm] - d[l] + e[l] / (g + std::copysign(r, g));
      T s = 1, c = 1, pp = 0;
      bool deflated = false;
      for (int i = mm - 1; i >= l; --i) {
        T f = s * e[i], b = c * e[i];
        r = std::sqrt(f * f + g * g);
        e[i + 1] = r;
        if (r == T(0)) {  // f and g underflowed: split here
          d[i + 1] -= pp;
          e[mm] = 0;
          deflated = true;
          break;
        }
        s = f / r;
        c = g / r;
        g = d[i + 1] - pp;
        r = (d[i] - g) * s + T(2) * c * b;
        pp = s * r;
        d[i + 1] = g + pp;
        g = c * r - b;
        if (z) {
          T* z0 = z + i * n;
          T* z1 = z + (i + 1) * n;
          for (int k = 0; k < n; ++k) {
            T zf = z1[k];
            z1[k] = s * z0[k] + c * zf;
            z0[k] = c * z0[k] - s * zf;
          }
        }
      }
      if (deflated) continue;
      d[l] -= pp;
      e[l] = g;
      e[mm] = 0;
    }
  }
  for (int i = 0; i < n; ++i) {  // ascending, by selection (steqr's order)
    int best = i;
    for (int j = i + 1; j < n; ++j)
      if (d[j] < d[best]) best = j;
    if (best != i) {
      std::swap(d[i], d[best]);
      if (z) std::swap_ranges(z + i * n, z + i * n + n, z + best * n);
    }
  }
  if (scaled)
    for (int i = 0; i < n; ++i) d[i] = std::ldexp(d[i], ex);
  return true;
}

// Lower Cholesky factors of G matrices at once (n x n, column-major, packed
// at a, a + n * n, ...), each in LAPACK potf2's left-looking dot-product
// order, with the G matrices in the lanes of the inner
// loops: one 4x4 factorization is a chain of dependent square roots and
// divisions, G independent ones fill the vector units instead of waiting on
// that chain. A matrix that is not positive-definite is factored again alone
// (G = 1) from its untouched input, so its info and its partial factor are
// exactly potf2's. The strict upper triangles are set to zero.
template <typename T, int G>
void potrf_group(int n, T* a, int* info) {
  constexpr int kMaxN = 16;
  const int nn = n * n;
  T buf[kMaxN * kMaxN * G];
  for (int c = 0; c < n; ++c)
    for (int r = c; r < n; ++r)
      for (int g = 0; g < G; ++g) buf[(c * n + r) * G + g] = a[g * nn + c * n + r];
  bool ok[G];
  for (int g = 0; g < G; ++g) ok[g] = true;
  for (int j = 0; j < n; ++j) {
    T* dj = buf + (j * n + j) * G;
    T d[G], inv[G];
    for (int g = 0; g < G; ++g) d[g] = dj[g];
    for (int k = 0; k < j; ++k) {
      const T* x = buf + (k * n + j) * G;
      for (int g = 0; g < G; ++g) d[g] -= x[g] * x[g];
    }
    if constexpr (G == 1) {
      if (!(d[0] > T(0))) {
        dj[0] = d[0];
        info[0] = j + 1;
        for (int c = 0; c < n; ++c)  // potf2 stops here: the factor so far, the rest of the input
          for (int r = c; r < n; ++r) a[c * n + r] = buf[c * n + r];
        for (int c = 1; c < n; ++c) std::fill(a + c * n, a + c * n + c, T(0));
        return;
      }
    }
    for (int g = 0; g < G; ++g) {
      ok[g] = ok[g] && d[g] > T(0);
      d[g] = std::sqrt(d[g] > T(0) ? d[g] : T(1));
      dj[g] = d[g];
      inv[g] = T(1) / d[g];
    }
    for (int r = j + 1; r < n; ++r) {
      T* y = buf + (j * n + r) * G;
      T s[G];
      for (int g = 0; g < G; ++g) s[g] = y[g];
      for (int k = 0; k < j; ++k) {
        const T* xr = buf + (k * n + r) * G;
        const T* xj = buf + (k * n + j) * G;
        for (int g = 0; g < G; ++g) s[g] -= xr[g] * xj[g];
      }
      for (int g = 0; g < G; ++g) y[g] = s[g] * inv[g];
    }
  }
  for (int g = 0; g < G; ++g) {
    T* m = a + g * nn;
    if (!ok[g]) {
      if constexpr (G > 1) potrf_group<T, 1>(n, m, info + g);
      continue;
    }
    info[g] = 0;
    for (int c = 0; c < n; ++c) {
      std::fill(m + c * n, m + c * n + c, T(0));
      for (int r = c; r < n; ++r) m[c * n + r] = buf[(c * n + r) * G + g];
    }
  }
}

void small_potrf_kernel(bool dbl, int n, int64_t count, void* a, int* info) {
  auto run = [&]<typename T>(T* m) {
    constexpr int G = 64 / sizeof(T);  // one 512-bit register of lanes
    const int64_t nn = int64_t(n) * n;
    int64_t i = 0;
    for (; i + G <= count; i += G) potrf_group<T, G>(n, m + i * nn, info + i);
    for (; i < count; ++i) potrf_group<T, 1>(n, m + i * nn, info + i);
  };
  if (dbl) run(static_cast<double*>(a));
  else run(static_cast<float*>(a));
}

bool small_syev_kernel(bool dbl, int n, const void* a, char uplo, void* w, void* v, void* work) {
  if (dbl)
    return syev_ql<double>(n, static_cast<const double*>(a), uplo, static_cast<double*>(w), static_cast<double*>(v),
                           static_cast<double*>(work));
  return syev_ql<float>(n, static_cast<const float*>(a), uplo, static_cast<float*>(w), static_cast<float*>(v),
                        static_cast<float*>(work));
}

}  // namespace
}  // namespace STRATA_CPU_NS
}  // namespace cpu

STRATA_REGISTER_CPU_KERNEL(small_syev_stub, cpu::small_syev_kernel);
STRATA_REGISTER_CPU_KERNEL(small_potrf_stub, cpu::small_potrf_kernel);

}  // namespace strata
