// torch.linalg's orthogonal decompositions over LAPACK: qr (geqrf + orgqr),
// svd (gesdd), eigh (syevd), householder_product (orgqr) and lstsq (gelsy,
// gelsd, gelss, gels). See lapack_common.h for the batch layout.
#include <cmath>

#include "ops/lapack_common.h"
#include "ops/lapack_small.h"

namespace strata {

STRATA_DEFINE_STUB(small_syev_stub, linalg_detail::SmallSyevFn);
STRATA_DEFINE_STUB(small_potrf_stub, linalg_detail::SmallPotrfFn);

namespace {

using namespace linalg_detail;

// Per-thread LAPACK workspace, grown as needed. Large matrices run on the
// calling thread (lapack_common.h), so only its buffer can grow large, and
// Trim, at the end of each op, gives a large one back.
template <typename T>
std::vector<T>& scratch_buf() {
  thread_local std::vector<T> buf;
  return buf;
}
inline std::vector<int>& iscratch_buf() {
  thread_local std::vector<int> buf;
  return buf;
}
template <typename T>
T* scratch(int64_t n) {
  auto& buf = scratch_buf<T>();
  if (static_cast<int64_t>(buf.size()) < n) buf.resize(n);
  return buf.data();
}
inline int* iscratch(int64_t n) {
  auto& buf = iscratch_buf();
  if (static_cast<int64_t>(buf.size()) < n) buf.resize(n);
  return buf.data();
}
struct TrimScratch {
  ~TrimScratch() {
    constexpr size_t kKeep = size_t(1) << 18;  // elements kept between calls
    auto trim = [](auto& v) {
      if (v.size() > kKeep) std::decay_t<decltype(v)>().swap(v);
    };
    trim(scratch_buf<float>()), trim(scratch_buf<double>()), trim(iscratch_buf());
    trim(scratch_buf<std::complex<float>>()), trim(scratch_buf<std::complex<double>>());
  }
};

// LAPACK's workspace query answer (a float holding an integer) as a size.
template <typename T>
int lwork_of(T w) {
  return std::max(1, static_cast<int>(std::ceil(static_cast<double>(w))));
}
template <typename T>
int lwork_of(std::complex<T> w) {
  return lwork_of(w.real());
}

void check_finite(const char* op, const Tensor& a) {
  bool ok = visit_lapack(a.dtype(), [&]<typename T>() {
    const T* p = a.data_ptr<T>();
    for (int64_t i = 0; i < a.numel(); ++i) {
      if constexpr (is_complex_v<T>) {
        if (!std::isfinite(p[i].real()) || !std::isfinite(p[i].imag())) return false;
      } else if (!std::isfinite(p[i])) {
        return false;
      }
    }
    return true;
  });
  if (!ok)
    throw LinAlgError(str(op, ": The algorithm failed to converge because the input matrix contained non-finite "
                              "values."));
}

Tensor empty0(const Tensor& like) { return empty_tensor(std::vector<int64_t>{0}, like.dtype(), like.device()); }

// ---- QR --------------------------------------------------------------------------

Tensor2 linalg_qr_impl(const Tensor& A, std::string_view mode) {
  TrimScratch trim_scratch;
  const char* op = "linalg.qr";
  check_input(op, "A", A, 2, true);
  STRATA_CHECK(mode == "reduced" || mode == "complete" || mode == "r", "qr received unrecognized mode '", mode,
               "' but expected one of 'reduced' (default), 'r', or 'complete'");
  auto batch = batch_of(A);
  int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n);
  bool complete = mode == "complete", want_q = mode != "r";
  int64_t qc = complete ? m : k, rr = complete ? m : k;
  Tensor Q = want_q ? col_major(with(batch, {m, qc}), A.dtype(), A.device()) : empty0(A);
  Tensor R = col_major(with(batch, {rr, n}), A.dtype(), A.device());
  if (A.device().is_meta() || (R.numel() == 0 && Q.numel() == 0)) return {Q, R};
  int64_t count = count_of(batch);
  if (k == 0) {  // no reflectors: R is zeros, Q (complete) the identity
    zero_(R);
    if (want_q) {
      zero_(Q);
      if (qc > 0) fill_(diagonal(Q, 0, -2, -1), 1);
    }
    return {Q, R};
  }
  Tensor a = col_major(A.sizes(), A.dtype(), A.device(), &A);
  int mi = as_int(op, m), ni = as_int(op, n), ki = as_int(op, k), qci = as_int(op, qc);
  visit_lapack(A.dtype(), [&]<typename T>() {
    T q1;
    lapack::geqrf<T>(mi, ni, nullptr, mi, nullptr, &q1, -1);
    int lwork = std::max<int>(lwork_of(q1), static_cast<int>(std::min<int64_t>(m * n, kSmallN * kSmallN)));
    if (want_q) {
      T q2;
      lapack::orgqr<T>(mi, qci, ki, nullptr, mi, nullptr, &q2, -1);
      lwork = std::max(lwork, lwork_of(q2));
    }
    T* ab = a.data_ptr<T>();
    T* rb = R.data_ptr<T>();
    T* qb = want_q ? Q.data_ptr<T>() : nullptr;
    for_each_matrix(count, std::max(m, n), [&](int64_t i) {
      T* ai = ab + i * m * n;
      T* tau = scratch<T>(k + lwork);
      T* work = tau + k;
      const bool small = !is_complex_v<T> && std::max(m, n) <= kSmallN;
      T* keep = small ? work : nullptr;  // the input, in case the small path hands over to LAPACK
      if (small) std::copy(ai, ai + m * n, keep);
      bool done = false;
      if constexpr (!is_complex_v<T>) done = small && small_geqr2<T>(mi, ni, ai, tau);
      if (small && !done) std::copy(keep, keep + m * n, ai);
      if (!done) lapack::geqrf<T>(mi, ni, ai, mi, tau, work, lwork);
      T* ri = rb + i * rr * n;
      for (int64_t c = 0; c < n; ++c)
        for (int64_t r = 0; r < rr; ++r) ri[c * rr + r] = r <= c ? ai[c * m + r] : T(0);
      if (want_q) {
        T* qi = qb + i * m * qc;
        int64_t cc = std::min(n, qc);
        std::copy(ai, ai + m * cc, qi);
        std::fill(qi + m * cc, qi + m * qc, T(0));
        if constexpr (!is_complex_v<T>) {
          if (done) small_org2r<T>(mi, qci, ki, qi, tau);
          else lapack::orgqr<T>(mi, qci, ki, qi, mi, tau, work, lwork);
        } else {
          lapack::orgqr<T>(mi, qci, ki, qi, mi, tau, work, lwork);
        }
      }
    });
  });
  return {Q, R};
}
STRATA_IMPL_CPU_META(linalg_qr, linalg_qr_impl);

Tensor linalg_householder_product_impl(const Tensor& A, const Tensor& tau) {
  TrimScratch trim_scratch;
  const char* op = "torch.linalg.householder_product";
  check_input(op, "input", A, 2, true);
  check_input(op, "tau", tau, 1, true);
  check_same(op, A, "input", tau, "tau");
  int64_t m = A.size(-2), n = A.size(-1), k = tau.size(-1);
  STRATA_CHECK(m >= n, op, ": input.shape[-2] must be greater than or equal to input.shape[-1], got ",
               A.shape_str());
  STRATA_CHECK(n >= k, op, ": input.shape[-1] must be greater than or equal to tau.shape[-1], got input ",
               A.shape_str(), " and tau ", tau.shape_str());
  STRATA_CHECK(tau.dim() == A.dim() - 1 && batch_of(tau, 1) == batch_of(A), op,
               ": Expected batch dimensions of tau to be equal to input.shape[:-2], got input ", A.shape_str(),
               " and tau ", tau.shape_str());
  Tensor Q = col_major(A.sizes(), A.dtype(), A.device(), &A);
  if (A.device().is_meta() || Q.numel() == 0) return Q;
  Tensor t = contiguous(tau);
  int mi = as_int(op, m), ni = as_int(op, n), ki = as_int(op, k);
  int64_t count = count_of(batch_of(A));
  visit_lapack(A.dtype(), [&]<typename T>() {
    T q;
    lapack::orgqr<T>(mi, ni, ki, nullptr, mi, nullptr, &q, -1);
    int lwork = lwork_of(q);
    T* qb = Q.data_ptr<T>();
    const T* tb = t.data_ptr<T>();
    for_each_matrix(count, m, [&](int64_t i) {
      lapack::orgqr<T>(mi, ni, ki, qb + i * m * n, mi, tb + i * k, scratch<T>(lwork), lwork);
    });
  });
  return Q;
}
STRATA_IMPL_CPU_META(linalg_householder_product, linalg_householder_product_impl);

// ---- SVD -------------------------------------------------------------------------

Tensor3 linalg_svd_impl(const Tensor& A, bool full_matrices, bool compute_uv) {
  TrimScratch trim_scratch;
  const char* op = "linalg.svd";
  check_input(op, "A", A, 2, true);
  const ScalarType rt = to_real_value_type(A.dtype());  // S is real for complex A
  auto batch = batch_of(A);
  int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n);
  bool full = compute_uv && full_matrices;
  int64_t uc = full ? m : k, vr = full ? n : k;
  Tensor U = compute_uv ? col_major(with(batch, {m, uc}), A.dtype(), A.device()) : empty0(A);
  Tensor Vh = compute_uv ? col_major(with(batch, {vr, n}), A.dtype(), A.device()) : empty0(A);
  Tensor S = empty_tensor(with(batch, {k}), rt, A.device());
  if (A.device().is_meta()) return {U, S, Vh};
  int64_t count = count_of(batch);
  if (count == 0) return {U, S, Vh};
  if (k == 0) {  // singular vectors of an empty matrix: the identity (full) or nothing
    if (compute_uv) {
      zero_(U), zero_(Vh);
      if (U.numel()) fill_(diagonal(U, 0, -2, -1), 1);
      if (Vh.numel()) fill_(diagonal(Vh, 0, -2, -1), 1);
    }
    return {U, S, Vh};
  }
  Tensor a = col_major(A.sizes(), A.dtype(), A.device(), &A);
  check_finite(op, a);
  int mi = as_int(op, m), ni = as_int(op, n);
  char jobz = !compute_uv ? 'N' : (full ? 'A' : 'S');
  int ldu = mi, ldvt = std::max(1, as_int(op, vr));
  FirstFailure fail;
  if (is_complex_type(A.dtype())) {
    visit_lapack(A.dtype(), [&]<typename T>() {
      if constexpr (is_complex_v<T>) {
        using R = typename T::value_type;
        // rwork: LAPACK's cgesdd bound for the job (7 min(m, n) without vectors).
        const int64_t mx = std::max(m, n);
        const int64_t lrwork = compute_uv ? k * std::max(5 * k + 7, 2 * mx + 2 * k + 1) : 7 * k;
        T q;
        R rq[1];
        lapack::gesdd_c<R>(jobz, mi, ni, nullptr, mi, nullptr, nullptr, ldu, nullptr, ldvt, &q, -1, rq,
                           iscratch(8 * k));
        int lwork = lwork_of(q);
        T* ab = a.data_ptr<T>();
        R* sb = S.data_ptr<R>();
        T* ub = compute_uv ? U.data_ptr<T>() : nullptr;
        T* vb = compute_uv ? Vh.data_ptr<T>() : nullptr;
        for_each_matrix(count, std::max(m, n), [&](int64_t i) {
          T dummy[1];
          T* work = scratch<T>(lwork);
          R* rwork = scratch<R>(std::max<int64_t>(1, lrwork));
          int info = lapack::gesdd_c<R>(jobz, mi, ni, ab + i * m * n, mi, sb + i * k, ub ? ub + i * m * uc : dummy,
                                        ldu, vb ? vb + i * vr * n : dummy, ldvt, work, lwork, rwork,
                                        iscratch(8 * k));
          if (info > 0) fail.record(i, info);
        });
      }
    });
  } else visit_real(A.dtype(), [&]<typename T>() {
    T q;
    int* iw = iscratch(8 * k);
    lapack::gesdd<T>(jobz, mi, ni, nullptr, mi, nullptr, nullptr, ldu, nullptr, ldvt, &q, -1, iw);
    int lwork = lwork_of(q);
    T* ab = a.data_ptr<T>();
    T* sb = S.data_ptr<T>();
    T* ub = compute_uv ? U.data_ptr<T>() : nullptr;
    T* vb = compute_uv ? Vh.data_ptr<T>() : nullptr;
    for_each_matrix(count, std::max(m, n), [&](int64_t i) {
      T dummy[1];
      int info = lapack::gesdd<T>(jobz, mi, ni, ab + i * m * n, mi, sb + i * k, ub ? ub + i * m * uc : dummy, ldu,
                                  vb ? vb + i * vr * n : dummy, ldvt, scratch<T>(lwork), lwork, iscratch(8 * k));
      if (info > 0) fail.record(i, info);
    });
  });
  if (fail.failed())
    throw LinAlgError(str(op, ": ", fail.where(!batch.empty()), "The algorithm failed to converge because the input "
                          "matrix is ill-conditioned or has too many repeated singular values (error code: ",
                          fail.info.load(), ")."));
  return {U, S, Vh};
}
STRATA_IMPL_CPU_META(_linalg_svd, linalg_svd_impl);

// Symmetric matrices up to this order take small_syev_stub (tridiagonal
// reduction and implicit QL, vectorized per ISA level) instead of syevd: on one
// thread, float64, it took 0.47x torch's (MKL syevd) time on 4096 4x4 matrices,
// 0.63x on 1024 8x8, 0.52x on 256 32x32 and 0.80x on one 64x64 matrix, where
// syevd took 0.66x, 1.07x, 0.92x and 1.16x; at 128 QL's rotations cost more
// than syevd's divide and conquer (1.06x against 1.01x).
constexpr int64_t kSmallSyevN = 64;

// ---- eigh ------------------------------------------------------------------------

Tensor2 linalg_eigh_impl(const Tensor& A, std::string_view uplo, bool compute_v) {
  TrimScratch trim_scratch;
  const char* op = "linalg.eigh";
  check_input(op, "A", A, 2, true);
  check_square(op, "A", A);
  STRATA_CHECK(uplo == "L" || uplo == "U" || uplo == "l" || uplo == "u",
               "Expected UPLO argument to be 'L' or 'U', but got ", uplo);
  auto batch = batch_of(A);
  int64_t n = A.size(-1);
  // Hermitian input: real eigenvalues, complex eigenvectors.
  Tensor W = empty_tensor(with(batch, {n}), to_real_value_type(A.dtype()), A.device());
  Tensor V = compute_v ? col_major(A.sizes(), A.dtype(), A.device(), &A) : empty0(A);
  if (A.device().is_meta() || W.numel() == 0) return {W, V};
  Tensor a = compute_v ? V : col_major(A.sizes(), A.dtype(), A.device(), &A);
  check_finite(op, a);
  int ni = as_int(op, n);
  char up = (uplo == "U" || uplo == "u") ? 'U' : 'L', jobz = compute_v ? 'V' : 'N';
  int64_t count = count_of(batch);
  FirstFailure fail;
  if (is_complex_type(A.dtype())) {
    visit_lapack(A.dtype(), [&]<typename T>() {
      if constexpr (is_complex_v<T>) {
        using R = typename T::value_type;
        T q;
        R rq;
        int iq = 0;
        lapack::heevd_c<R>(jobz, up, ni, nullptr, ni, nullptr, &q, -1, &rq, -1, &iq, -1);
        int lwork = lwork_of(q), lrwork = lwork_of(rq), liwork = std::max(1, iq);
        T* ab = a.data_ptr<T>();
        R* wb = W.data_ptr<R>();
        for_each_matrix(count, n, [&](int64_t i) {
          T* work = scratch<T>(lwork);
          R* rwork = scratch<R>(lrwork);
          int info = lapack::heevd_c<R>(jobz, up, ni, ab + i * n * n, ni, wb + i * n, work, lwork, rwork, lrwork,
                                        iscratch(liwork), liwork);
          if (info > 0) fail.record(i, info);
        });
      }
    });
  } else visit_real(A.dtype(), [&]<typename T>() {
    T q;
    int iq = 0;
    lapack::syevd<T>(jobz, up, ni, nullptr, ni, nullptr, &q, -1, &iq, -1);
    int lwork = lwork_of(q), liwork = std::max(1, iq);
    T* ab = a.data_ptr<T>();
    T* wb = W.data_ptr<T>();
    const SmallSyevFn syev_small = small_syev_stub.get(DeviceType::CPU);
    for_each_matrix(count, n, [&](int64_t i) {
      T* ai = ab + i * n * n;
      if (n <= kSmallSyevN) {  // the eigenvectors overwrite A's storage, as syevd's do
        T* work = scratch<T>(2 * n * n + 3 * n);
        T* vec = compute_v ? work + n * n + 3 * n : nullptr;
        if (syev_small(std::is_same_v<T, double>, ni, ai, up, wb + i * n, vec, work)) {
          if (vec) std::copy(vec, vec + n * n, ai);
          return;
        }
      }
      int info = lapack::syevd<T>(jobz, up, ni, ai, ni, wb + i * n, scratch<T>(lwork), lwork,
                                  iscratch(liwork), liwork);
      if (info > 0) fail.record(i, info);
    }, kSmallSyevN + 1);
  });
  if (fail.failed())
    throw LinAlgError(str(op, ": ", fail.where(!batch.empty()), "The algorithm failed to converge because the input "
                          "matrix is ill-conditioned or has too many repeated eigenvalues (error code: ",
                          fail.info.load(), ")."));
  return {W, V};
}
STRATA_IMPL_CPU_META(_linalg_eigh, linalg_eigh_impl);

// ---- least squares ---------------------------------------------------------------

Tensor3 linalg_lstsq_impl(const Tensor& A, const Tensor& B, std::optional<double> rcond,
                          std::optional<std::string_view> driver_arg) {
  TrimScratch trim_scratch;
  const char* op = "torch.linalg.lstsq";
  check_input(op, "A", A, 2, true);
  check_input(op, "B", B, 1, true);
  check_same("linalg.lstsq", A, "A", B, "B");
  if (is_complex_type(A.dtype()) && A.device().is_cpu())
    STRATA_CHECK(lapack::has_complex_lstsq(), op, ": libopenblas.so.0 does not export the complex least-squares "
                 "routines (cgels_, cgelsy_, cgelsd_, cgelss_ and their z forms)");
  std::string_view driver = driver_arg ? *driver_arg : "gelsy";
  STRATA_CHECK(driver == "gels" || driver == "gelsy" || driver == "gelsd" || driver == "gelss", op,
               ": parameter `driver` should be one of (gels, gelsy, gelsd, gelss)");
  bool vec = B.dim() == 1;
  if (B.dim() == A.dim() - 1) {
    vec = true;
    for (int64_t d = 0; d < B.dim(); ++d) vec = vec && B.size(d) == A.size(d);
  }
  Tensor Bm = vec ? unsqueeze(B, -1) : B;
  int64_t m = A.size(-2), n = A.size(-1), k = Bm.size(-1), mn = std::max(m, n);
  STRATA_CHECK(Bm.dim() >= 2 && Bm.size(-2) == m, "torch.linalg.lstsq: input.size(-2) should match other.size(-2), "
               "got A of shape ", A.shape_str(), " and B of shape ", B.shape_str());
  auto bb = broadcast_shapes(batch_of(A), batch_of(Bm), "linalg.lstsq");
  std::vector<int64_t> batch(bb.begin(), bb.end());
  bool has_rank = driver != "gels", has_sv = driver == "gelsd" || driver == "gelss";
  Tensor rank = has_rank ? empty_tensor(batch, ScalarType::Int64, A.device())
                         : empty_tensor(std::vector<int64_t>{0}, ScalarType::Int64, A.device());
  const ScalarType real_dt = to_real_value_type(A.dtype());
  Tensor sv = has_sv ? empty_tensor(with(batch, {std::min(m, n)}), real_dt, A.device())
                     : empty_tensor(std::vector<int64_t>{0}, real_dt, A.device());
  // LAPACK overwrites B (max(m, n) rows) with the solution in its first n rows.
  Tensor X = col_major(with(batch, {mn, k}), A.dtype(), A.device());
  Tensor sol = narrow(X, -2, 0, n);
  if (vec) sol = squeeze(sol, -1);
  if (A.device().is_meta()) return {sol, rank, sv};
  int64_t count = count_of(batch);
  if (count == 0) return {sol, rank, sv};
  zero_(X);
  if (m > 0 && k > 0) copy_(narrow(X, -2, 0, m), expand(Bm, with(batch, {m, k})));
  if (m == 0 || n == 0) {
    if (has_rank) zero_(rank);
    if (has_sv) zero_(sv);
    return {sol, rank, sv};
  }
  Tensor a = col_major(with(batch, {m, n}), A.dtype(), A.device(), &A);
  int mi = as_int(op, m), ni = as_int(op, n), ki = as_int(op, k), ldb = as_int(op, mn);
  FirstFailure fail;
  visit_lapack(A.dtype(), [&]<typename T>() {
    using R = decltype(std::abs(T{}));  // the real type of T
    constexpr bool cplx = is_complex_v<T>;
    R rc = rcond ? static_cast<R>(*rcond) : std::numeric_limits<R>::epsilon() * static_cast<R>(mn);
    T q = 0;
    int iq = 1;
    R sdummy[1], rq = 0;
    if (driver == "gels") {
      lapack::gels<T>('N', mi, ni, ki, nullptr, mi, nullptr, ldb, &q, -1);
    } else if constexpr (cplx) {
      if (driver == "gelsy") lapack::gelsy_c<R>(mi, ni, ki, nullptr, mi, nullptr, ldb, nullptr, rc, &iq, &q, -1, &rq);
      else if (driver == "gelsd")
        lapack::gelsd_c<R>(mi, ni, ki, nullptr, mi, nullptr, ldb, sdummy, rc, &iq, &q, -1, &rq, &iq);
      else lapack::gelss_c<R>(mi, ni, ki, nullptr, mi, nullptr, ldb, sdummy, rc, &iq, &q, -1, &rq);
    } else {
      if (driver == "gelsy") lapack::gelsy<T>(mi, ni, ki, nullptr, mi, nullptr, ldb, nullptr, rc, &iq, &q, -1);
      else if (driver == "gelsd")
        lapack::gelsd<T>(mi, ni, ki, nullptr, mi, nullptr, ldb, sdummy, rc, &iq, &q, -1, &iq);
      else lapack::gelss<T>(mi, ni, ki, nullptr, mi, nullptr, ldb, sdummy, rc, &iq, &q, -1);
    }
    int lwork = lwork_of(q), liwork = std::max(iq, 1);
    // complex rwork: gelsy 2n, gelss 5 min(m, n), gelsd what the query said
    int64_t lrwork = !cplx ? 0 : driver == "gelsy" ? 2 * n : driver == "gelss" ? 5 * std::min(m, n)
                                                                                : static_cast<int64_t>(lwork_of(rq));
    T* ab = a.data_ptr<T>();
    T* xb = X.data_ptr<T>();
    R* sb = has_sv ? sv.data_ptr<R>() : nullptr;
    int64_t* rk = has_rank ? rank.data_ptr<int64_t>() : nullptr;
    int64_t kk = std::min(m, n);
    for_each_matrix(count, mn, [&](int64_t i) {
      T* ai = ab + i * m * n;
      T* xi = xb + i * mn * k;
      T* work = scratch<T>(lwork);
      int r = 0, info = 0;
      if (driver == "gels") {
        info = lapack::gels<T>('N', mi, ni, ki, ai, mi, xi, ldb, work, lwork);
      } else if constexpr (cplx) {
        R* rwork = scratch<R>(std::max<int64_t>(1, lrwork));
        if (driver == "gelsy") {
          int* jpvt = iscratch(n);
          std::fill(jpvt, jpvt + n, 0);
          info = lapack::gelsy_c<R>(mi, ni, ki, ai, mi, xi, ldb, jpvt, rc, &r, work, lwork, rwork);
        } else if (driver == "gelsd") {
          info = lapack::gelsd_c<R>(mi, ni, ki, ai, mi, xi, ldb, sb + i * kk, rc, &r, work, lwork, rwork,
                                    iscratch(liwork));
        } else {
          info = lapack::gelss_c<R>(mi, ni, ki, ai, mi, xi, ldb, sb + i * kk, rc, &r, work, lwork, rwork);
        }
      } else {
        if (driver == "gelsy") {
          int* jpvt = iscratch(n);
          std::fill(jpvt, jpvt + n, 0);
          info = lapack::gelsy<T>(mi, ni, ki, ai, mi, xi, ldb, jpvt, rc, &r, work, lwork);
        } else if (driver == "gelsd") {
          info = lapack::gelsd<T>(mi, ni, ki, ai, mi, xi, ldb, sb + i * kk, rc, &r, work, lwork, iscratch(liwork));
        } else {
          info = lapack::gelss<T>(mi, ni, ki, ai, mi, xi, ldb, sb + i * kk, rc, &r, work, lwork);
        }
      }
      if (rk) rk[i] = r;
      if (info > 0) fail.record(i, info);
    });
  });
  if (fail.failed())
    throw LinAlgError(str(op, ": ", fail.where(!batch.empty()),
                          driver == "gels" ? "The least squares solution could not be computed because the input "
                                             "matrix does not have full rank (error code: "
                                           : "The algorithm failed to converge (error code: ",
                          fail.info.load(), ")."));
  return {sol, rank, sv};
}
STRATA_IMPL_CPU_META(_linalg_lstsq, linalg_lstsq_impl);

}  // namespace

}  // namespace strata
