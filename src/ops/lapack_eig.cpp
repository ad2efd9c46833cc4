// torch.linalg.eig / eigvals over LAPACK's geev (sgeev/dgeev for real input,
// cgeev/zgeev for complex input). The results are complex for every input, as
// in torch: a real matrix has complex conjugate eigenvalue pairs, which dgeev
// returns as wr +- i wi with the pair's eigenvectors packed into two real
// columns (re, im); we unpack them into v and conj(v). Eigenvectors are
// LAPACK's: each of Euclidean norm 1 with its largest component real (torch
// returns the same normalization, from MKL's geev). See lapack_common.h for
// the batch layout.
#include <cmath>

#include "ops/lapack_common.h"

namespace strata {

namespace {

using namespace linalg_detail;

template <typename T>
std::vector<T>& eig_scratch() {
  thread_local std::vector<T> buf;
  return buf;
}
template <typename T>
T* eig_buf(int64_t n) {
  auto& b = eig_scratch<T>();
  if (static_cast<int64_t>(b.size()) < n) b.resize(n);
  return b.data();
}

template <typename T>
bool finite_matrix(const T* p, int64_t len) {
  for (int64_t i = 0; i < len; ++i) {
    if constexpr (is_complex_v<T>) {
      if (!std::isfinite(p[i].real()) || !std::isfinite(p[i].imag())) return false;
    } else if (!std::isfinite(p[i])) {
      return false;
    }
  }
  return true;
}

void check_eig_input(const char* op, const Tensor& A) {
  STRATA_CHECK(A.dim() >= 2, op, ": The input tensor A must have at least 2 dimensions, but got a tensor of shape ",
               A.shape_str());
  STRATA_CHECK(A.dtype() == ScalarType::Float32 || A.dtype() == ScalarType::Float64 || is_complex_type(A.dtype()),
               op, ": Expected a floating point or complex tensor as input (float32, float64, complex64 or "
               "complex128). Got ", dtype_name(A.dtype()), " for A of shape ", A.shape_str());
  STRATA_CHECK_T(NotImplementedError, A.device().is_cpu() || A.device().is_meta(), op,
                 ": LAPACK-backed linear algebra runs on the CPU; A is on ", A.device().str());
  check_square(op, "A", A);
  if (A.device().is_cpu()) {
    STRATA_CHECK(lapack::available(), op, ": ", lapack::unavailable_reason());
    STRATA_CHECK(lapack::has_geev(), op, ": libopenblas.so.0 does not export LAPACK's geev routines");
  }
}

// Eigenvalues W (batch x n) and, when compute_v, eigenvectors V (batch x n x n,
// column-major), both complex.
Tensor2 eig_into(const char* op, const Tensor& A, bool compute_v) {
  check_eig_input(op, A);
  auto batch = batch_of(A);
  const int64_t n = A.size(-1);
  const ScalarType ct = to_complex_type(A.dtype());
  Tensor W = empty_tensor(with(batch, {n}), ct, A.device());
  Tensor V = compute_v ? col_major(A.sizes(), ct, A.device())
                       : empty_tensor(std::vector<int64_t>{0}, ct, A.device());
  if (A.device().is_meta() || W.numel() == 0) return {W, V};
  Tensor a = col_major(A.sizes(), A.dtype(), A.device(), &A);
  // Non-finite input never reaches geev (it would fail or loop): eig refuses it as torch does; eigvals
  // gives NaN eigenvalues for such a matrix (torch's eigvals returns NaNs there, or crashes in MKL).
  if (compute_v)
    STRATA_CHECK(all(isfinite(a)).item().to_bool(), "torch.linalg.eig: input tensor should not contain infs or NaNs.");
  const int ni = as_int(op, n);
  const int64_t count = count_of(batch);
  const char jobv = compute_v ? 'V' : 'N';
  FirstFailure fail;
  visit_lapack(A.dtype(), [&]<typename T>() {
    T* ab = a.data_ptr<T>();
    if constexpr (is_complex_v<T>) {
      using R = typename T::value_type;
      T q;
      R rq[1];
      lapack::geev_c<R>(jobv, ni, nullptr, ni, nullptr, nullptr, ni, &q, -1, rq);
      const int lwork = std::max(1, static_cast<int>(std::ceil(static_cast<double>(q.real()))));
      T* wb = W.data_ptr<T>();
      T* vb = compute_v ? V.data_ptr<T>() : nullptr;
      for_each_matrix(count, n, [&](int64_t i) {
        if (!compute_v && !finite_matrix(ab + i * n * n, n * n)) {
          std::fill(wb + i * n, wb + (i + 1) * n, T(NAN, NAN));
          return;
        }
        T* work = eig_buf<T>(lwork + (compute_v ? 0 : 1));
        T* vr = compute_v ? vb + i * n * n : work + lwork;  // vr is not referenced for jobvr 'N'
        int info = lapack::geev_c<R>(jobv, ni, ab + i * n * n, ni, wb + i * n, vr, ni, work, lwork,
                                     eig_buf<R>(2 * n));
        if (info > 0) fail.record(i, info);
      });
    } else {
      using C = std::complex<T>;
      T q;
      lapack::geev<T>(jobv, ni, nullptr, ni, nullptr, nullptr, nullptr, ni, &q, -1);
      const int lwork = std::max(1, static_cast<int>(std::ceil(static_cast<double>(q))));
      C* wb = W.data_ptr<C>();
      C* vb = compute_v ? V.data_ptr<C>() : nullptr;
      for_each_matrix(count, n, [&](int64_t i) {
        if (!compute_v && !finite_matrix(ab + i * n * n, n * n)) {
          std::fill(wb + i * n, wb + (i + 1) * n, C(NAN, NAN));
          return;
        }
        T* buf = eig_buf<T>(lwork + 2 * n + (compute_v ? n * n : 1));
        T *work = buf, *wr = buf + lwork, *wi = wr + n, *vr = wi + n;
        int info = lapack::geev<T>(jobv, ni, ab + i * n * n, ni, wr, wi, vr, ni, work, lwork);
        if (info > 0) {
          fail.record(i, info);
          return;
        }
        C* w = wb + i * n;
        for (int64_t j = 0; j < n; ++j) w[j] = C(wr[j], wi[j]);
        if (!vb) return;
        C* v = vb + i * n * n;
        for (int64_t j = 0; j < n; ++j) {
          const T* re = vr + j * n;
          if (wi[j] == T(0) || j + 1 == n) {
            for (int64_t r = 0; r < n; ++r) v[j * n + r] = C(re[r], 0);
          } else {  // a pair: columns j, j+1 hold re and im of the vector of wr[j] + i wi[j] (wi[j] > 0)
            const T* im = re + n;
            for (int64_t r = 0; r < n; ++r) {
              v[j * n + r] = C(re[r], im[r]);
              v[(j + 1) * n + r] = C(re[r], -im[r]);
            }
            ++j;
          }
        }
      });
    }
  });
  if (fail.failed())
    throw LinAlgError(str(op, ": ", fail.where(!batch.empty()), "The algorithm failed to converge because the input "
                          "matrix is ill-conditioned or has too many repeated eigenvalues (error code: ",
                          fail.info.load(), ")."));
  return {W, V};
}

Tensor2 linalg_eig_impl(const Tensor& A) { return eig_into("linalg.eig", A, true); }
STRATA_IMPL_CPU_META(linalg_eig, linalg_eig_impl);

Tensor linalg_eigvals_impl(const Tensor& A) { return std::get<0>(eig_into("linalg.eigvals", A, false)); }
STRATA_IMPL_CPU_META(linalg_eigvals, linalg_eigvals_impl);

}  // namespace

}  // namespace strata
