// LAPACK from the OpenBLAS blas.cpp loads (see Note [Which LAPACK] in lapack.h).
// blas.cpp opens libopenblas first (fixing its kernel choice on CPUs it does not
// know); we then take a second reference to the same loaded library and look up
// the Fortran entry points. Character arguments are followed by their hidden
// lengths (size_t), as gfortran's calling convention has them.
#include "backends/cpu/lapack.h"

#include <dlfcn.h>

#include <atomic>
#include <cstddef>
#include <mutex>

#include "backends/cpu/blas.h"
#include "backends/cpu/parallel.h"

namespace strata::lapack {

namespace {

template <typename T>
struct Fns {
  void (*getrf)(const int*, const int*, T*, const int*, int*, int*) = nullptr;
  void (*getrs)(const char*, const int*, const int*, const T*, const int*, const int*, T*, const int*, int*,
                size_t) = nullptr;
  void (*potrf)(const char*, const int*, T*, const int*, int*, size_t) = nullptr;
  void (*geqrf)(const int*, const int*, T*, const int*, T*, T*, const int*, int*) = nullptr;
  void (*orgqr)(const int*, const int*, const int*, T*, const int*, const T*, T*, const int*, int*) = nullptr;
  void (*gesdd)(const char*, const int*, const int*, T*, const int*, T*, T*, const int*, T*, const int*, T*,
                const int*, int*, int*, size_t) = nullptr;
  void (*syevd)(const char*, const char*, const int*, T*, const int*, T*, T*, const int*, int*, const int*, int*,
                size_t, size_t) = nullptr;
  void (*gelsy)(const int*, const int*, const int*, T*, const int*, T*, const int*, int*, const T*, int*, T*,
                const int*, int*) = nullptr;
  void (*gelsd)(const int*, const int*, const int*, T*, const int*, T*, const int*, T*, const T*, int*, T*,
                const int*, int*, int*) = nullptr;
  void (*gelss)(const int*, const int*, const int*, T*, const int*, T*, const int*, T*, const T*, int*, T*,
                const int*, int*) = nullptr;
  void (*gels)(const char*, const int*, const int*, const int*, T*, const int*, T*, const int*, T*, const int*, int*,
               size_t) = nullptr;
  void (*trtrs)(const char*, const char*, const char*, const int*, const int*, const T*, const int*, T*, const int*,
                int*, size_t, size_t, size_t) = nullptr;

  bool complete() const {
    return getrf && getrs && potrf && geqrf && orgqr && gesdd && syevd && gelsy && gelsd && gelss && gels && trtrs;
  }
};

// geev: real (wr, wi, packed vectors) and complex (w, rwork) forms; jobvl, jobvr.
template <typename T>
using GeevR = void (*)(const char*, const char*, const int*, T*, const int*, T*, T*, T*, const int*, T*, const int*,
                       T*, const int*, int*, size_t, size_t);
template <typename T>
using GeevC = void (*)(const char*, const char*, const int*, std::complex<T>*, const int*, std::complex<T>*,
                       std::complex<T>*, const int*, std::complex<T>*, const int*, std::complex<T>*, const int*, T*,
                       int*, size_t, size_t);

// heevd: jobz, uplo, n, a, lda, w (real), work, lwork, rwork, lrwork, iwork, liwork, info.
template <typename T>
using HeevdC = void (*)(const char*, const char*, const int*, std::complex<T>*, const int*, T*, std::complex<T>*,
                        const int*, T*, const int*, int*, const int*, int*, size_t, size_t);
// gesdd: jobz, m, n, a, lda, s (real), u, ldu, vt, ldvt, work, lwork, rwork, iwork, info.
template <typename T>
using GesddC = void (*)(const char*, const int*, const int*, std::complex<T>*, const int*, T*, std::complex<T>*,
                        const int*, std::complex<T>*, const int*, std::complex<T>*, const int*, T*, int*, int*,
                        size_t);

// Complex least squares (s, rcond, rwork real): gelsy (rwork 2n), gelsd (rwork and
// iwork sized by the workspace query), gelss (rwork 5 min(m, n)); gels is Fns::gels.
template <typename T>
using GelsyC = void (*)(const int*, const int*, const int*, std::complex<T>*, const int*, std::complex<T>*, const int*,
                        int*, const T*, int*, std::complex<T>*, const int*, T*, int*);
template <typename T>
using GelsdC = void (*)(const int*, const int*, const int*, std::complex<T>*, const int*, std::complex<T>*, const int*,
                        T*, const T*, int*, std::complex<T>*, const int*, T*, int*, int*);
template <typename T>
using GelssC = void (*)(const int*, const int*, const int*, std::complex<T>*, const int*, std::complex<T>*, const int*,
                        T*, const T*, int*, std::complex<T>*, const int*, T*, int*);

struct State {
  Fns<float> s;
  Fns<double> d;
  Fns<std::complex<float>> c;  // only getrf, getrs, potrf, trtrs (see has_complex)
  Fns<std::complex<double>> z;
  HeevdC<float> cheevd = nullptr;
  HeevdC<double> zheevd = nullptr;
  GesddC<float> cgesdd = nullptr;
  GesddC<double> zgesdd = nullptr;
  GelsyC<float> cgelsy = nullptr;
  GelsyC<double> zgelsy = nullptr;
  GelsdC<float> cgelsd = nullptr;
  GelsdC<double> zgelsd = nullptr;
  GelssC<float> cgelss = nullptr;
  GelssC<double> zgelss = nullptr;
  GeevR<float> sgeev = nullptr;
  GeevR<double> dgeev = nullptr;
  GeevC<float> cgeev = nullptr;
  GeevC<double> zgeev = nullptr;
  void (*set_threads)(int) = nullptr;
  std::atomic<int> threads{-1};
  const char* reason = "LAPACK has not been loaded";
  bool ok = false;

  State() {
    (void)cpublas::other_library();  // blas.cpp loads (and if needed reloads) libopenblas first
    void* h = nullptr;
    for (const char* name : {"libopenblas.so.0", "libopenblas.so"})
      if ((h = dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;
    if (!h) {
      reason = "torch.linalg needs LAPACK, which Strata takes from libopenblas.so.0 (not found; on Debian: "
               "apt-get install libopenblas0-pthread)";
      return;
    }
    auto sym = [&](auto& fn, const char* name) { fn = reinterpret_cast<std::decay_t<decltype(fn)>>(dlsym(h, name)); };
    sym(s.getrf, "sgetrf_"), sym(s.getrs, "sgetrs_"), sym(s.potrf, "spotrf_"), sym(s.geqrf, "sgeqrf_");
    sym(s.orgqr, "sorgqr_"), sym(s.gesdd, "sgesdd_"), sym(s.syevd, "ssyevd_"), sym(s.gelsy, "sgelsy_");
    sym(s.gelsd, "sgelsd_"), sym(s.gelss, "sgelss_"), sym(s.gels, "sgels_"), sym(s.trtrs, "strtrs_");
    sym(d.getrf, "dgetrf_"), sym(d.getrs, "dgetrs_"), sym(d.potrf, "dpotrf_"), sym(d.geqrf, "dgeqrf_");
    sym(d.orgqr, "dorgqr_"), sym(d.gesdd, "dgesdd_"), sym(d.syevd, "dsyevd_"), sym(d.gelsy, "dgelsy_");
    sym(d.gelsd, "dgelsd_"), sym(d.gelss, "dgelss_"), sym(d.gels, "dgels_"), sym(d.trtrs, "dtrtrs_");
    sym(c.getrf, "cgetrf_"), sym(c.getrs, "cgetrs_"), sym(c.potrf, "cpotrf_"), sym(c.trtrs, "ctrtrs_");
    sym(z.getrf, "zgetrf_"), sym(z.getrs, "zgetrs_"), sym(z.potrf, "zpotrf_"), sym(z.trtrs, "ztrtrs_");
    sym(c.geqrf, "cgeqrf_"), sym(c.orgqr, "cungqr_"), sym(z.geqrf, "zgeqrf_"), sym(z.orgqr, "zungqr_");
    sym(cheevd, "cheevd_"), sym(zheevd, "zheevd_"), sym(cgesdd, "cgesdd_"), sym(zgesdd, "zgesdd_");
    sym(sgeev, "sgeev_"), sym(dgeev, "dgeev_"), sym(cgeev, "cgeev_"), sym(zgeev, "zgeev_");
    sym(c.gels, "cgels_"), sym(z.gels, "zgels_"), sym(cgelsy, "cgelsy_"), sym(zgelsy, "zgelsy_");
    sym(cgelsd, "cgelsd_"), sym(zgelsd, "zgelsd_"), sym(cgelss, "cgelss_"), sym(zgelss, "zgelss_");
    sym(set_threads, "openblas_set_num_threads");
    if (!s.complete() || !d.complete()) {
      reason = "libopenblas.so.0 does not export the LAPACK routines torch.linalg needs (a BLAS-only build?)";
      return;
    }
    ok = true;
  }
};

State& state() {
  static State s;
  return s;
}

template <typename T>
const Fns<T>& fns() {
  if constexpr (std::is_same_v<T, float>) return state().s;
  else if constexpr (std::is_same_v<T, double>) return state().d;
  else if constexpr (std::is_same_v<T, std::complex<float>>) return state().c;
  else return state().z;
}

}  // namespace

bool available() { return state().ok; }
const char* unavailable_reason() { return state().reason; }

void sync_threads() {
  State& st = state();
  int nt = std::max(1, get_num_threads());
  if (st.set_threads && st.threads.load(std::memory_order_relaxed) != nt) {
    st.set_threads(nt);
    st.threads.store(nt, std::memory_order_relaxed);
  }
}

template <typename T>
int getrf(int m, int n, T* a, int lda, int* ipiv) {
  int info = 0;
  fns<T>().getrf(&m, &n, a, &lda, ipiv, &info);
  return info;
}
template <typename T>
int getrs(char trans, int n, int nrhs, const T* a, int lda, const int* ipiv, T* b, int ldb) {
  int info = 0;
  fns<T>().getrs(&trans, &n, &nrhs, a, &lda, ipiv, b, &ldb, &info, 1);
  return info;
}
template <typename T>
int potrf(char uplo, int n, T* a, int lda) {
  int info = 0;
  fns<T>().potrf(&uplo, &n, a, &lda, &info, 1);
  return info;
}
template <typename T>
int geqrf(int m, int n, T* a, int lda, T* tau, T* work, int lwork) {
  int info = 0;
  fns<T>().geqrf(&m, &n, a, &lda, tau, work, &lwork, &info);
  return info;
}
template <typename T>
int orgqr(int m, int n, int k, T* a, int lda, const T* tau, T* work, int lwork) {
  int info = 0;
  fns<T>().orgqr(&m, &n, &k, a, &lda, tau, work, &lwork, &info);
  return info;
}
template <typename T>
int gesdd(char jobz, int m, int n, T* a, int lda, T* s, T* u, int ldu, T* vt, int ldvt, T* work, int lwork,
          int* iwork) {
  int info = 0;
  fns<T>().gesdd(&jobz, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, work, &lwork, iwork, &info, 1);
  return info;
}
template <typename T>
int syevd(char jobz, char uplo, int n, T* a, int lda, T* w, T* work, int lwork, int* iwork, int liwork) {
  int info = 0;
  fns<T>().syevd(&jobz, &uplo, &n, a, &lda, w, work, &lwork, iwork, &liwork, &info, 1, 1);
  return info;
}
template <typename T>
int gelsy(int m, int n, int nrhs, T* a, int lda, T* b, int ldb, int* jpvt, T rcond, int* rank, T* work, int lwork) {
  int info = 0;
  fns<T>().gelsy(&m, &n, &nrhs, a, &lda, b, &ldb, jpvt, &rcond, rank, work, &lwork, &info);
  return info;
}
template <typename T>
int gelsd(int m, int n, int nrhs, T* a, int lda, T* b, int ldb, T* s, T rcond, int* rank, T* work, int lwork,
          int* iwork) {
  int info = 0;
  fns<T>().gelsd(&m, &n, &nrhs, a, &lda, b, &ldb, s, &rcond, rank, work, &lwork, iwork, &info);
  return info;
}
template <typename T>
int gelss(int m, int n, int nrhs, T* a, int lda, T* b, int ldb, T* s, T rcond, int* rank, T* work, int lwork) {
  int info = 0;
  fns<T>().gelss(&m, &n, &nrhs, a, &lda, b, &ldb, s, &rcond, rank, work, &lwork, &info);
  return info;
}
template <typename T>
int gels(char trans, int m, int n, int nrhs, T* a, int lda, T* b, int ldb, T* work, int lwork) {
  int info = 0;
  fns<T>().gels(&trans, &m, &n, &nrhs, a, &lda, b, &ldb, work, &lwork, &info, 1);
  return info;
}
template <typename T>
int trtrs(char uplo, char trans, char diag, int n, int nrhs, const T* a, int lda, T* b, int ldb) {
  int info = 0;
  fns<T>().trtrs(&uplo, &trans, &diag, &n, &nrhs, a, &lda, b, &ldb, &info, 1, 1, 1);
  return info;
}

bool has_complex() {
  const State& st = state();
  auto six = [](const auto& f) { return f.getrf && f.getrs && f.potrf && f.trtrs && f.geqrf && f.orgqr; };
  return st.ok && six(st.c) && six(st.z) && st.cheevd && st.zheevd && st.cgesdd && st.zgesdd;
}

bool has_complex_lstsq() {
  const State& st = state();
  return st.ok && st.c.gels && st.z.gels && st.cgelsy && st.zgelsy && st.cgelsd && st.zgelsd && st.cgelss && st.zgelss;
}

template <typename T>
int gelsy_c(int m, int n, int nrhs, std::complex<T>* a, int lda, std::complex<T>* b, int ldb, int* jpvt, T rcond,
            int* rank, std::complex<T>* work, int lwork, T* rwork) {
  int info = 0;
  if constexpr (std::is_same_v<T, float>)
    state().cgelsy(&m, &n, &nrhs, a, &lda, b, &ldb, jpvt, &rcond, rank, work, &lwork, rwork, &info);
  else
    state().zgelsy(&m, &n, &nrhs, a, &lda, b, &ldb, jpvt, &rcond, rank, work, &lwork, rwork, &info);
  return info;
}
template <typename T>
int gelsd_c(int m, int n, int nrhs, std::complex<T>* a, int lda, std::complex<T>* b, int ldb, T* s, T rcond, int* rank,
            std::complex<T>* work, int lwork, T* rwork, int* iwork) {
  int info = 0;
  if constexpr (std::is_same_v<T, float>)
    state().cgelsd(&m, &n, &nrhs, a, &lda, b, &ldb, s, &rcond, rank, work, &lwork, rwork, iwork, &info);
  else
    state().zgelsd(&m, &n, &nrhs, a, &lda, b, &ldb, s, &rcond, rank, work, &lwork, rwork, iwork, &info);
  return info;
}
template <typename T>
int gelss_c(int m, int n, int nrhs, std::complex<T>* a, int lda, std::complex<T>* b, int ldb, T* s, T rcond, int* rank,
            std::complex<T>* work, int lwork, T* rwork) {
  int info = 0;
  if constexpr (std::is_same_v<T, float>)
    state().cgelss(&m, &n, &nrhs, a, &lda, b, &ldb, s, &rcond, rank, work, &lwork, rwork, &info);
  else
    state().zgelss(&m, &n, &nrhs, a, &lda, b, &ldb, s, &rcond, rank, work, &lwork, rwork, &info);
  return info;
}
#define STRATA_LAPACK_LSTSQ_C(T)                                                                                     \
  template int gelsy_c<T>(int, int, int, std::complex<T>*, int, std::complex<T>*, int, int*, T, int*,              \
                          std::complex<T>*, int, T*);                                                              \
  template int gelsd_c<T>(int, int, int, std::complex<T>*, int, std::complex<T>*, int, T*, T, int*,                \
                          std::complex<T>*, int, T*, int*);                                                        \
  template int gelss_c<T>(int, int, int, std::complex<T>*, int, std::complex<T>*, int, T*, T, int*,                \
                          std::complex<T>*, int, T*);
STRATA_LAPACK_LSTSQ_C(float)
STRATA_LAPACK_LSTSQ_C(double)
#undef STRATA_LAPACK_LSTSQ_C

bool has_geev() {
  const State& st = state();
  return st.ok && st.sgeev && st.dgeev && st.cgeev && st.zgeev;
}

template <typename T>
int geev(char jobvr, int n, T* a, int lda, T* wr, T* wi, T* vr, int ldvr, T* work, int lwork) {
  int info = 0, one = 1;
  const char jobvl = 'N';
  T dummy[1];
  if constexpr (std::is_same_v<T, float>)
    state().sgeev(&jobvl, &jobvr, &n, a, &lda, wr, wi, dummy, &one, vr, &ldvr, work, &lwork, &info, 1, 1);
  else
    state().dgeev(&jobvl, &jobvr, &n, a, &lda, wr, wi, dummy, &one, vr, &ldvr, work, &lwork, &info, 1, 1);
  return info;
}
template <typename T>
int geev_c(char jobvr, int n, std::complex<T>* a, int lda, std::complex<T>* w, std::complex<T>* vr, int ldvr,
           std::complex<T>* work, int lwork, T* rwork) {
  int info = 0, one = 1;
  const char jobvl = 'N';
  std::complex<T> dummy[1];
  if constexpr (std::is_same_v<T, float>)
    state().cgeev(&jobvl, &jobvr, &n, a, &lda, w, dummy, &one, vr, &ldvr, work, &lwork, rwork, &info, 1, 1);
  else
    state().zgeev(&jobvl, &jobvr, &n, a, &lda, w, dummy, &one, vr, &ldvr, work, &lwork, rwork, &info, 1, 1);
  return info;
}
template <typename T>
int heevd_c(char jobz, char uplo, int n, std::complex<T>* a, int lda, T* w, std::complex<T>* work, int lwork,
            T* rwork, int lrwork, int* iwork, int liwork) {
  int info = 0;
  if constexpr (std::is_same_v<T, float>)
    state().cheevd(&jobz, &uplo, &n, a, &lda, w, work, &lwork, rwork, &lrwork, iwork, &liwork, &info, 1, 1);
  else
    state().zheevd(&jobz, &uplo, &n, a, &lda, w, work, &lwork, rwork, &lrwork, iwork, &liwork, &info, 1, 1);
  return info;
}
template <typename T>
int gesdd_c(char jobz, int m, int n, std::complex<T>* a, int lda, T* s, std::complex<T>* u, int ldu,
            std::complex<T>* vt, int ldvt, std::complex<T>* work, int lwork, T* rwork, int* iwork) {
  int info = 0;
  if constexpr (std::is_same_v<T, float>)
    state().cgesdd(&jobz, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, work, &lwork, rwork, iwork, &info, 1);
  else
    state().zgesdd(&jobz, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, work, &lwork, rwork, iwork, &info, 1);
  return info;
}
template int heevd_c<float>(char, char, int, std::complex<float>*, int, float*, std::complex<float>*, int, float*, int,
                            int*, int);
template int heevd_c<double>(char, char, int, std::complex<double>*, int, double*, std::complex<double>*, int,
                             double*, int, int*, int);
template int gesdd_c<float>(char, int, int, std::complex<float>*, int, float*, std::complex<float>*, int,
                            std::complex<float>*, int, std::complex<float>*, int, float*, int*);
template int gesdd_c<double>(char, int, int, std::complex<double>*, int, double*, std::complex<double>*, int,
                             std::complex<double>*, int, std::complex<double>*, int, double*, int*);
template int geev<float>(char, int, float*, int, float*, float*, float*, int, float*, int);
template int geev<double>(char, int, double*, int, double*, double*, double*, int, double*, int);
template int geev_c<float>(char, int, std::complex<float>*, int, std::complex<float>*, std::complex<float>*, int,
                           std::complex<float>*, int, float*);
template int geev_c<double>(char, int, std::complex<double>*, int, std::complex<double>*, std::complex<double>*, int,
                            std::complex<double>*, int, double*);

#define STRATA_LAPACK_INST(T)                                                                                      \
  template int getrf<T>(int, int, T*, int, int*);                                                                 \
  template int getrs<T>(char, int, int, const T*, int, const int*, T*, int);                                      \
  template int potrf<T>(char, int, T*, int);                                                                       \
  template int geqrf<T>(int, int, T*, int, T*, T*, int);                                                           \
  template int orgqr<T>(int, int, int, T*, int, const T*, T*, int);                                                \
  template int gesdd<T>(char, int, int, T*, int, T*, T*, int, T*, int, T*, int, int*);                             \
  template int syevd<T>(char, char, int, T*, int, T*, T*, int, int*, int);                                         \
  template int gelsy<T>(int, int, int, T*, int, T*, int, int*, T, int*, T*, int);                                  \
  template int gelsd<T>(int, int, int, T*, int, T*, int, T*, T, int*, T*, int, int*);                              \
  template int gelss<T>(int, int, int, T*, int, T*, int, T*, T, int*, T*, int);                                    \
  template int gels<T>(char, int, int, int, T*, int, T*, int, T*, int);                                            \
  template int trtrs<T>(char, char, char, int, int, const T*, int, T*, int);
STRATA_LAPACK_INST(float)
STRATA_LAPACK_INST(double)
#define STRATA_LAPACK_INST_C(T)                                                                                    \
  template int getrf<T>(int, int, T*, int, int*);                                                                 \
  template int getrs<T>(char, int, int, const T*, int, const int*, T*, int);                                      \
  template int potrf<T>(char, int, T*, int);                                                                       \
  template int trtrs<T>(char, char, char, int, int, const T*, int, T*, int);                                      \
  template int geqrf<T>(int, int, T*, int, T*, T*, int);                                                           \
  template int orgqr<T>(int, int, int, T*, int, const T*, T*, int);                                                \
  template int gels<T>(char, int, int, int, T*, int, T*, int, T*, int);
STRATA_LAPACK_INST_C(std::complex<float>)
STRATA_LAPACK_INST_C(std::complex<double>)
#undef STRATA_LAPACK_INST_C
#undef STRATA_LAPACK_INST

}  // namespace strata::lapack
