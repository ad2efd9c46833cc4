// The CPU LAPACK every torch.linalg op uses (ops/lapack*.cpp). Column-major,
// like LAPACK: a matrix argument is `a` with leading dimension lda >= max(1, rows).
//
// Note [Which LAPACK]
// LAPACK comes from the OpenBLAS that already serves our BLAS (blas.cpp):
// Debian's libopenblas.so.0 exports the reference LAPACK interface (dgesv_,
// dgetrf_, dpotrf_, dsyevd_, dgesdd_, ...) with OpenBLAS's own optimised
// getrf/potrf/lauum/trtri and the reference routines above its BLAS. It is the
// library we already load and check, it adds no dependency, and it runs on the
// threads we already configure; bench/linalg.py measures it against torch's
// LAPACK (MKL in torch's wheel) and docs/DESIGN.md records the figures.
// Every routine here returns LAPACK's info (0: success, > 0: the numerical
// failure the routine documents, < 0: a bad argument, which is our bug).
#pragma once

#include <complex>
#include <cstdint>

namespace strata::lapack {

// True once libopenblas is loaded and exports every routine below.
bool available();
// The reason available() is false, for error messages.
const char* unavailable_reason();

// Sizes are int (OpenBLAS's LP64 interface); callers check that they fit.
template <typename T> int getrf(int m, int n, T* a, int lda, int* ipiv);
template <typename T> int getrs(char trans, int n, int nrhs, const T* a, int lda, const int* ipiv, T* b, int ldb);
template <typename T> int potrf(char uplo, int n, T* a, int lda);
template <typename T> int geqrf(int m, int n, T* a, int lda, T* tau, T* work, int lwork);
template <typename T> int orgqr(int m, int n, int k, T* a, int lda, const T* tau, T* work, int lwork);
template <typename T>
int gesdd(char jobz, int m, int n, T* a, int lda, T* s, T* u, int ldu, T* vt, int ldvt, T* work, int lwork, int* iwork);
template <typename T>
int syevd(char jobz, char uplo, int n, T* a, int lda, T* w, T* work, int lwork, int* iwork, int liwork);
template <typename T>
int gelsy(int m, int n, int nrhs, T* a, int lda, T* b, int ldb, int* jpvt, T rcond, int* rank, T* work, int lwork);
template <typename T>
int gelsd(int m, int n, int nrhs, T* a, int lda, T* b, int ldb, T* s, T rcond, int* rank, T* work, int lwork,
          int* iwork);
template <typename T>
int gelss(int m, int n, int nrhs, T* a, int lda, T* b, int ldb, T* s, T rcond, int* rank, T* work, int lwork);
template <typename T> int gels(char trans, int m, int n, int nrhs, T* a, int lda, T* b, int ldb, T* work, int lwork);
// Triangular solve with a (column-major) n x n triangle: op(A) X = B, B is n x nrhs.
template <typename T>
int trtrs(char uplo, char trans, char diag, int n, int nrhs, const T* a, int lda, T* b, int ldb);

// Eigen-decomposition of a general n x n matrix (right eigenvectors only when
// jobvr == 'V'): real a gives eigenvalues wr + i wi and LAPACK's packed real
// eigenvectors (a conjugate pair as columns re, im); complex a (C = complex<T>)
// gives complex w and vr. rwork (complex only) holds 2n reals. Each eigenvector
// has Euclidean norm 1 and its largest component real.
template <typename T>
int geev(char jobvr, int n, T* a, int lda, T* wr, T* wi, T* vr, int ldvr, T* work, int lwork);
template <typename T>
int geev_c(char jobvr, int n, std::complex<T>* a, int lda, std::complex<T>* w, std::complex<T>* vr, int ldvr,
           std::complex<T>* work, int lwork, T* rwork);
// getrf, getrs, potrf, trtrs, geqrf and orgqr (then LAPACK's ungqr) are also
// instantiated for std::complex<float> and std::complex<double> (cgetrf_,
// zgetrf_, ...; potrf is then Hermitian and getrs/trtrs take trans 'C');
// has_complex() says whether they, heevd_c and gesdd_c were found.
bool has_complex();
// Hermitian eigen-decomposition (w real); rwork holds lrwork reals.
template <typename T>
int heevd_c(char jobz, char uplo, int n, std::complex<T>* a, int lda, T* w, std::complex<T>* work, int lwork,
            T* rwork, int lrwork, int* iwork, int liwork);
// Complex SVD (s real); rwork as LAPACK's cgesdd documents for jobz.
template <typename T>
int gesdd_c(char jobz, int m, int n, std::complex<T>* a, int lda, T* s, std::complex<T>* u, int ldu,
            std::complex<T>* vt, int ldvt, std::complex<T>* work, int lwork, T* rwork, int* iwork);
// Complex least squares (cgels_/zgels_ through gels<std::complex<T>> with
// trans 'N' or 'C', and cgelsy_, cgelsd_, cgelss_ and their z forms): s and
// rcond are real; rwork holds 2n reals for gelsy, 5 min(m, n) for gelss, and
// for gelsd what its workspace query (lwork = -1) returns in rwork[0], as
// iwork[0] gives liwork. has_complex_lstsq() says whether all eight were found.
bool has_complex_lstsq();
template <typename T>
int gelsy_c(int m, int n, int nrhs, std::complex<T>* a, int lda, std::complex<T>* b, int ldb, int* jpvt, T rcond,
            int* rank, std::complex<T>* work, int lwork, T* rwork);
template <typename T>
int gelsd_c(int m, int n, int nrhs, std::complex<T>* a, int lda, std::complex<T>* b, int ldb, T* s, T rcond, int* rank,
            std::complex<T>* work, int lwork, T* rwork, int* iwork);
template <typename T>
int gelss_c(int m, int n, int nrhs, std::complex<T>* a, int lda, std::complex<T>* b, int ldb, T* s, T rcond, int* rank,
            std::complex<T>* work, int lwork, T* rwork);
// True when libopenblas exports the geev routines (sgeev_, dgeev_, cgeev_, zgeev_).
bool has_geev();

// Keeps OpenBLAS's thread count equal to strata.get_num_threads().
void sync_threads();

}  // namespace strata::lapack
