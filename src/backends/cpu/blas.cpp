// Note [Which BLAS]
// Measured on the development machine (2 vCPUs of an AMD EPYC Zen 4, AVX-512,
// KVM; +-15% noise), median GFLOP/s on 2 threads:
//   fp32 n=256/1024/4096: oneDNN 2.6 dnnl_sgemm 223/212/222, Debian OpenBLAS
//   0.3.21 (Cooperlake kernel) 181/199/201, scipy-openblas 0.3.34 153/187/203,
//   MKL 2026 170/164/183, torch.mm 170/187/184. Skinny M=64, N=K=4096: dnnl 208,
//   OpenBLAS 136-163, torch 108; M=1: dnnl 18.7, torch 11.4.
//   fp64 n=1024: OpenBLAS 90-98, MKL 89; oneDNN has no dgemm.
// Decision: fp32 GEMM goes to oneDNN's dnnl_sgemm (libdnnl.so.2), everything
// else (dgemm, gemv, axpy, dot, nrm2, trsv, syrk, trsm) to OpenBLAS's cblas
// (libopenblas.so.0). STRATA_BLAS=dnnl|openblas|naive moves a library to the
// front for fp32 GEMM (naive: no library at all).
//
// Both are loaded with dlopen at first use rather than linked: a missing
// library degrades to the next one (and finally to the built-in blocked GEMM
// of kernels/gemm_kernels.cpp) instead of failing to load libstrata, and we
// get to fix OpenBLAS's kernel choice before it initialises. On CPUs that
// Debian's OpenBLAS 0.3.21 does not recognise (Sapphire Rapids, see
// PERFORMANCE.md) it falls back to a generic core and runs about 6x slower; we
// load it, read openblas_get_corename(), and if the CPU has AVX-512 but the
// core is not an AVX-512 one we unload it, set OPENBLAS_CORETYPE=SkylakeX and
// load it again. Each library must also reproduce a small GEMM computed by a
// plain loop before it is used; one that does not is dropped with a warning.
#include "backends/cpu/blas.h"

#include <dlfcn.h>

#include <algorithm>
#include <bit>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "backends/cpu/gemm_native.h"
#include "backends/cpu/parallel.h"
#include "core/error.h"
#include "ops/stub.h"

namespace strata {
STRATA_DEFINE_STUB(native_sgemm_stub, cpublas::NativeGemmFn<float>);
STRATA_DEFINE_STUB(native_dgemm_stub, cpublas::NativeGemmFn<double>);
STRATA_DEFINE_STUB(int_gemm_stub, cpublas::IntGemmFn);
STRATA_DEFINE_STUB(native_sgemv_stub, cpublas::NativeGemvFn<float>);
STRATA_DEFINE_STUB(native_dgemv_stub, cpublas::NativeGemvFn<double>);
}  // namespace strata

namespace strata::cpublas {

namespace {

// CBLAS enum values (cblas.h); OpenBLAS's default build uses 32-bit ints.
enum : int { kRowMajor = 101, kNoTrans = 111, kTrans = 112, kUpper = 121, kLower = 122, kNonUnit = 131, kUnit = 132,
             kLeft = 141, kRight = 142 };

template <typename T>
struct Cblas {
  void (*gemm)(int, int, int, int, int, int, T, const T*, int, const T*, int, T, T*, int) = nullptr;
  void (*gemv)(int, int, int, int, T, const T*, int, const T*, int, T, T*, int) = nullptr;
  void (*axpy)(int, T, const T*, int, T*, int) = nullptr;
  T (*dot)(int, const T*, int, const T*, int) = nullptr;
  T (*nrm2)(int, const T*, int) = nullptr;
  void (*trsv)(int, int, int, int, int, const T*, int, T*, int) = nullptr;
  void (*syrk)(int, int, int, int, int, T, const T*, int, T, T*, int) = nullptr;
  void (*trsm)(int, int, int, int, int, int, int, T, const T*, int, T*, int) = nullptr;
  bool complete() const { return gemm && gemv && axpy && dot && nrm2 && trsv && syrk && trsm; }
};

using DnnlSgemm = int (*)(char, char, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, int64_t,
                          float, float*, int64_t);
using DnnlGemmBf16 = int (*)(char, char, int64_t, int64_t, int64_t, float, const uint16_t*, int64_t,
                             const uint16_t*, int64_t, float, float*, int64_t);
struct DnnlVersion {
  int major, minor, patch;
  const char* hash;
  unsigned cpu_runtime, gpu_runtime;
};

void warn(const std::string& msg) { std::fprintf(stderr, "strata: warning: %s\n", msg.c_str()); }

bool cpu_has_avx512() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
#else
  return false;
#endif
}

template <typename T>
void reference_gemm(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
                    const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p)
        acc += double(ta == Trans::N ? a[i * lda + p] : a[p * lda + i]) *
               double(tb == Trans::N ? b[p * ldb + j] : b[j * ldb + p]);
      c[i * ldc + j] = T(alpha * acc + (beta == T(0) ? 0.0 : double(beta) * c[i * ldc + j]));
    }
}

// Runs gemm_fn on a small problem with both transposes and beta != 0 and
// compares it with the plain loop above.
template <typename T, typename F>
bool gemm_matches_reference(F&& gemm_fn) {
  const int64_t m = 23, n = 19, k = 37;
  std::vector<T> a(k * m), b(k * n), c0(m * n), c1, c2;
  for (size_t i = 0; i < a.size(); ++i) a[i] = T(std::sin(0.37 * i + 0.1));
  for (size_t i = 0; i < b.size(); ++i) b[i] = T(std::cos(0.11 * i - 0.4));
  for (size_t i = 0; i < c0.size(); ++i) c0[i] = T(0.25 * (int(i % 7) - 3));
  for (int variant = 0; variant < 2; ++variant) {
    Trans ta = variant ? Trans::T : Trans::N, tb = variant ? Trans::N : Trans::T;
    int64_t lda = ta == Trans::N ? k : m, ldb = tb == Trans::N ? n : k;
    c1 = c0;
    c2 = c0;
    gemm_fn(ta, tb, m, n, k, T(1.5), a.data(), lda, b.data(), ldb, T(0.5), c1.data(), n);
    reference_gemm<T>(ta, tb, m, n, k, T(1.5), a.data(), lda, b.data(), ldb, T(0.5), c2.data(), n);
    for (size_t i = 0; i < c1.size(); ++i)
      if (!(std::abs(double(c1[i]) - double(c2[i])) <= 1e-4 * (1.0 + std::abs(double(c2[i]))))) return false;
  }
  return true;
}

bool env_is(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v && std::strcmp(v, value) == 0;
}

struct State {
  // oneDNN
  void* dnnl_handle = nullptr;
  DnnlSgemm dnnl_sgemm = nullptr;
  DnnlGemmBf16 dnnl_gemm_bf16 = nullptr;
  std::string dnnl_desc;
  // OpenBLAS
  void* ob_handle = nullptr;
  Cblas<float> sb;
  Cblas<double> db;
  void (*ob_set_threads)(int) = nullptr;
  std::string ob_desc;
  int ob_threads = -1;
  std::mutex ob_thread_mutex;

  Library sgemm_lib = Library::Native;
  bool naive = false;

  // Note [OpenBLAS on demand]
  // OpenBLAS is loaded by the first call that needs it (fp32 GEMM only when oneDNN is missing or STRATA_BLAS=openblas
  // asks for it; fp64 GEMM and the level 1-3 routines otherwise). An fp32 model never calls it, and loading it
  // anyway (its start-up GEMM check, its thread pool, buffers and code pages) added ~2 MiB to the first training step
  // of examples/train_digits.py.
  std::once_flag ob_once;
  Library other_lib_ = Library::Native;
  void ensure_openblas() {
    std::call_once(ob_once, [this] {
      if (naive) return;
      load_openblas();
      if (ob_handle) other_lib_ = Library::OpenBLAS;
    });
  }
  Library other_lib() {
    ensure_openblas();
    return other_lib_;
  }

  State() {
    const char* pref = std::getenv("STRATA_BLAS");
    naive = pref && std::strcmp(pref, "naive") == 0;
    if (pref && !naive && std::strcmp(pref, "dnnl") && std::strcmp(pref, "openblas") && *pref)
      warn(str("STRATA_BLAS=", pref, " is not one of dnnl, openblas, naive; using the default order"));
    if (naive) return;
    load_dnnl();
    // fp32 GEMM: the preferred library, then dnnl, then OpenBLAS, then our own.
    std::vector<Library> order = {Library::Dnnl, Library::OpenBLAS};
    if (env_is("STRATA_BLAS", "openblas")) std::swap(order[0], order[1]);
    for (Library l : order) {
      if (l == Library::Dnnl && dnnl_sgemm) {
        sgemm_lib = l;
        break;
      }
      if (l == Library::OpenBLAS && (ensure_openblas(), ob_handle)) {
        sgemm_lib = l;
        break;
      }
    }
  }

  void sync_openblas_threads() {
    int nt = std::max(1, get_num_threads());
    if (nt == ob_threads) return;
    std::lock_guard<std::mutex> g(ob_thread_mutex);
    if (nt != ob_threads && ob_set_threads) {
      ob_set_threads(nt);
      ob_threads = nt;
    }
  }

  void* open_openblas() {
    for (const char* name : {"libopenblas.so.0", "libopenblas.so"})
      if (void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL)) return h;
    return nullptr;
  }

  void load_openblas() {
    void* h = open_openblas();
    if (!h) return;
    auto corename_of = [](void* handle) -> std::string {
      auto f = reinterpret_cast<char* (*)()>(dlsym(handle, "openblas_get_corename"));
      return f ? std::string(f()) : std::string("unknown");
    };
    std::string core = corename_of(h);
    std::string note;
    if (!std::getenv("OPENBLAS_CORETYPE") && detail::needs_coretype_fix(cpu_has_avx512(), core.c_str())) {
      // OpenBLAS reads OPENBLAS_CORETYPE only while initialising: reload it.
      dlclose(h);
      setenv("OPENBLAS_CORETYPE", "SkylakeX", 1);
      h = open_openblas();
      unsetenv("OPENBLAS_CORETYPE");  // other OpenBLAS copies in the process choose for themselves
      if (!h) return;
      std::string fixed = corename_of(h);
      if (detail::needs_coretype_fix(true, fixed.c_str()))
        warn(str("OpenBLAS chose the slow '", core, "' kernel on this AVX-512 CPU and could not be reloaded with ",
                 "OPENBLAS_CORETYPE=SkylakeX; set that variable before starting Python"));
      else
        note = str(", forced from ", core);
      core = fixed;
    }
    Cblas<float> s;
    Cblas<double> d;
    auto sym = [&](auto& fn, const char* name) { fn = reinterpret_cast<std::decay_t<decltype(fn)>>(dlsym(h, name)); };
    sym(s.gemm, "cblas_sgemm"), sym(s.gemv, "cblas_sgemv"), sym(s.axpy, "cblas_saxpy"), sym(s.dot, "cblas_sdot");
    sym(s.nrm2, "cblas_snrm2"), sym(s.trsv, "cblas_strsv"), sym(s.syrk, "cblas_ssyrk"), sym(s.trsm, "cblas_strsm");
    sym(d.gemm, "cblas_dgemm"), sym(d.gemv, "cblas_dgemv"), sym(d.axpy, "cblas_daxpy"), sym(d.dot, "cblas_ddot");
    sym(d.nrm2, "cblas_dnrm2"), sym(d.trsv, "cblas_dtrsv"), sym(d.syrk, "cblas_dsyrk"), sym(d.trsm, "cblas_dtrsm");
    sym(ob_set_threads, "openblas_set_num_threads");
    if (!s.complete() || !d.complete()) {
      warn("libopenblas lacks CBLAS symbols; using the built-in BLAS loops");
      dlclose(h);
      return;
    }
    ob_handle = h;
    sb = s;
    db = d;
    sync_openblas_threads();
    auto sg = [&](Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float al, const float* a, int64_t lda,
                  const float* b, int64_t ldb, float be, float* c, int64_t ldc) {
      sb.gemm(kRowMajor, ta == Trans::N ? kNoTrans : kTrans, tb == Trans::N ? kNoTrans : kTrans, int(m), int(n),
              int(k), al, a, int(lda), b, int(ldb), be, c, int(ldc));
    };
    auto dg = [&](Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, double al, const double* a, int64_t lda,
                  const double* b, int64_t ldb, double be, double* c, int64_t ldc) {
      db.gemm(kRowMajor, ta == Trans::N ? kNoTrans : kTrans, tb == Trans::N ? kNoTrans : kTrans, int(m), int(n),
              int(k), al, a, int(lda), b, int(ldb), be, c, int(ldc));
    };
    if (!gemm_matches_reference<float>(sg) || !gemm_matches_reference<double>(dg)) {
      warn(str("OpenBLAS (", core, " kernel) gave a wrong GEMM result in the start-up check; not using it"));
      ob_handle = nullptr;
      return;
    }
    auto cfg = reinterpret_cast<char* (*)()>(dlsym(h, "openblas_get_config"));
    std::string version = "OpenBLAS";
    if (cfg) {
      std::string c = cfg();  // "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ..."
      size_t sp = c.find(' ', c.find(' ') + 1);
      version = c.substr(0, sp);
    }
    ob_desc = str(version, " (", core, " kernel", note, ")");
  }

  // bfloat16 GEMM with float32 accumulation and output: checked once against
  // float32 arithmetic on bfloat16-representable inputs (exact products, so
  // only summation order differs).
  void load_dnnl_bf16(void* h) {
    auto fn = reinterpret_cast<DnnlGemmBf16>(dlsym(h, "dnnl_gemm_bf16bf16f32"));
    if (!fn) return;
    const int64_t m = 5, n = 7, k = 9;
    std::vector<uint16_t> a(m * k), b(k * n);
    std::vector<float> c(m * n, 0.f), ref(m * n, 0.f);
    auto bits = [](float f) { return static_cast<uint16_t>(std::bit_cast<uint32_t>(f) >> 16); };
    auto val = [](uint16_t u) { return std::bit_cast<float>(static_cast<uint32_t>(u) << 16); };
    for (int64_t i = 0; i < m * k; ++i) a[i] = bits(static_cast<float>((i * 7) % 11) - 5.f);
    for (int64_t i = 0; i < k * n; ++i) b[i] = bits(static_cast<float>((i * 5) % 13) * 0.25f - 1.f);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t p = 0; p < k; ++p) ref[i * n + j] += val(a[i * k + p]) * val(b[p * n + j]);
    if (fn('N', 'N', m, n, k, 1.f, a.data(), k, b.data(), n, 0.f, c.data(), n) != 0) return;
    for (int64_t i = 0; i < m * n; ++i)
      if (std::abs(c[i] - ref[i]) > 1e-3f * (1.f + std::abs(ref[i]))) {
        warn("oneDNN's dnnl_gemm_bf16bf16f32 gave a wrong result in the start-up check; not using it");
        return;
      }
    dnnl_gemm_bf16 = fn;
  }

  void load_dnnl() {
    void* h = nullptr;
    for (const char* name : {"libdnnl.so.2", "libdnnl.so.3", "libdnnl.so"})
      if ((h = dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;
    if (!h) return;
    auto fn = reinterpret_cast<DnnlSgemm>(dlsym(h, "dnnl_sgemm"));
    if (!fn) {
      dlclose(h);
      return;
    }
    bool ok = true;
    auto g = [&](Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float al, const float* a, int64_t lda,
                 const float* b, int64_t ldb, float be, float* c, int64_t ldc) {
      if (fn(char(ta), char(tb), m, n, k, al, a, lda, b, ldb, be, c, ldc) != 0) ok = false;
    };
    if (!gemm_matches_reference<float>(g) || !ok) {
      warn("oneDNN's dnnl_sgemm gave a wrong result in the start-up check; not using it");
      return;  // keep it loaded: unloading a library with live OpenMP state is not safe
    }
    dnnl_handle = h;
    dnnl_sgemm = fn;
    load_dnnl_bf16(h);
    auto ver = reinterpret_cast<const DnnlVersion* (*)()>(dlsym(h, "dnnl_version"));
    dnnl_desc = "oneDNN";
    if (ver) {
      const DnnlVersion* v = ver();
      dnnl_desc = str("oneDNN ", v->major, ".", v->minor, ".", v->patch);
    }
  }
};

State& state() {
  static State s;
  return s;
}

bool fits_int(std::initializer_list<int64_t> v) {
  for (int64_t x : v)
    if (x > INT_MAX || x < INT_MIN) return false;
  return true;
}

// A row-major matrix with `rows` rows stored with leading dimension ld: when it
// has at most one row the ld is never used, but BLAS still checks it.
int64_t fix_ld(int64_t ld, int64_t rows, int64_t cols) {
  int64_t need = std::max<int64_t>(1, cols);
  if (rows <= 1) return std::max(ld, need);
  STRATA_CHECK(ld >= need, "cpublas: leading dimension ", ld, " is smaller than the row length ", cols);
  return ld;
}

int cb(Trans t) { return t == Trans::N ? kNoTrans : kTrans; }
int cb(Uplo u) { return u == Uplo::Upper ? kUpper : kLower; }
int cb(Diag d) { return d == Diag::Unit ? kUnit : kNonUnit; }
int cb(Side s) { return s == Side::Left ? kLeft : kRight; }

template <typename T>
Cblas<T>& cblas() {
  if constexpr (std::is_same_v<T, float>) return state().sb;
  else return state().db;
}

template <typename T>
void scale_c(int64_t m, int64_t n, T beta, T* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
}

// Products up to this many multiply-adds run single-threaded (about 5 us of work).
constexpr double kSmallGemm = 96.0 * 96 * 96;
// Vector-shaped products up to this many multiply-adds use the built-in gemv.
constexpr double kSmallGemv = 256.0 * 1024;

template <typename T>
void gemm_impl(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
               int64_t ldb, T beta, T* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  ldc = fix_ld(ldc, m, n);
  if (k <= 0) return scale_c(m, n, beta, c, ldc);
  lda = ta == Trans::N ? fix_ld(lda, m, k) : fix_ld(lda, k, m);
  ldb = tb == Trans::N ? fix_ld(ldb, k, n) : fix_ld(ldb, n, k);
  if ((m == 1 || n == 1) && static_cast<double>(m) * n * k <= kSmallGemv) {
    // Small vector-shaped products (a batch-1 linear layer): a plain gemv
    // loop skips the libraries' per-call overhead (1x64 @ 64x64: about 0.2 us
    // here against 0.5 us in dnnl_sgemm). Large ones stay with the libraries:
    // they are memory-bound and dnnl streamed 4096x4096 @ 4096x1 at least as
    // fast as this loop in our (noisy) measurements; not re-tuned since.
    auto gemv = [&](char t, int64_t rows, int64_t cols, const T* mat, int64_t ld, const T* x, int64_t incx, T* y,
                    int64_t incy) {
      if constexpr (std::is_same_v<T, float>)
        native_sgemv_stub(DeviceType::CPU, t, rows, cols, alpha, mat, ld, x, incx, beta, y, incy);
      else
        native_dgemv_stub(DeviceType::CPU, t, rows, cols, alpha, mat, ld, x, incx, beta, y, incy);
    };
    if (m == 1) {
      // c[0, :] = x @ op(B), x = row 0 of op(A)
      int64_t incx = ta == Trans::N ? 1 : lda;
      if (tb == Trans::N) gemv('T', k, n, b, ldb, a, incx, c, 1);
      else gemv('N', n, k, b, ldb, a, incx, c, 1);
    } else {
      // c[:, 0] = op(A) @ x, x = column 0 of op(B)
      int64_t incx = tb == Trans::N ? ldb : 1;
      if (ta == Trans::N) gemv('N', m, k, a, lda, b, incx, c, ldc);
      else gemv('T', k, m, a, lda, b, incx, c, ldc);
    }
    return;
  }
  State& s = state();
  Library lib = std::is_same_v<T, float> ? s.sgemm_lib : s.other_lib();
  if (lib == Library::Dnnl) {
    if constexpr (std::is_same_v<T, float>) {
      int status = 0;
#ifdef _OPENMP
      // oneDNN (OpenMP build) sizes its team from the calling thread's setting.
      // Small products run on one thread: a parallel region costs microseconds,
      // and on a busy machine a barrier can wait a whole scheduler slice.
      int nt = std::max(1, get_num_threads());
      bool small = static_cast<double>(m) * n * k <= kSmallGemm;
      int want = small ? 1 : nt;
      int before = omp_get_max_threads();
      if (!in_parallel_region() && before != want) omp_set_num_threads(want);
      status = s.dnnl_sgemm(char(ta), char(tb), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
      if (!in_parallel_region() && before != want) omp_set_num_threads(before);
#else
      status = s.dnnl_sgemm(char(ta), char(tb), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#endif
      if (status == 0) return;
      // dnnl refuses only on invalid arguments, which fix_ld rules out; fall through to be safe.
    }
  }
  if (lib != Library::Native && fits_int({m, n, k, lda, ldb, ldc}) && (s.ensure_openblas(), s.ob_handle)) {
    s.sync_openblas_threads();
    cblas<T>().gemm(kRowMajor, cb(ta), cb(tb), int(m), int(n), int(k), alpha, a, int(lda), b, int(ldb), beta, c,
                    int(ldc));
    return;
  }
  detail::native_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// ---- built-in level 1/2/3 loops (used when OpenBLAS is unavailable) ---------

template <typename T>
void gemv_native(Trans t, int64_t m, int64_t n, T alpha, const T* a, int64_t lda, const T* x, int64_t incx, T beta,
                 T* y, int64_t incy) {
  int64_t rows = t == Trans::N ? m : n, cols = t == Trans::N ? n : m;
  for (int64_t i = 0; i < rows; ++i) {
    T acc = 0;
    for (int64_t j = 0; j < cols; ++j) acc += (t == Trans::N ? a[i * lda + j] : a[j * lda + i]) * x[j * incx];
    y[i * incy] = beta == T(0) ? alpha * acc : alpha * acc + beta * y[i * incy];
  }
}

template <typename T>
T nrm2_native(int64_t n, const T* x, int64_t incx) {
  // Scaled sum of squares: no overflow or underflow for extreme values.
  T scale = 0, ssq = 1;
  for (int64_t i = 0; i < n; ++i) {
    T v = std::abs(x[i * incx]);
    if (v == T(0)) continue;
    if (std::isnan(v)) return v;
    if (scale < v) {
      ssq = T(1) + ssq * (scale / v) * (scale / v);
      scale = v;
    } else {
      ssq += (v / scale) * (v / scale);
    }
  }
  return scale * std::sqrt(ssq);
}

// Element (i, j) of op(A) for a row-major A.
template <typename T>
inline T opa(const T* a, int64_t lda, Trans t, int64_t i, int64_t j) {
  return t == Trans::N ? a[i * lda + j] : a[j * lda + i];
}

template <typename T>
void trsv_native(Uplo uplo, Trans t, Diag diag, int64_t n, const T* a, int64_t lda, T* x, int64_t incx) {
  bool lower = (uplo == Uplo::Lower) != (t == Trans::T);  // op(A)'s triangle
  if (lower) {
    for (int64_t i = 0; i < n; ++i) {
      T s = x[i * incx];
      for (int64_t j = 0; j < i; ++j) s -= opa(a, lda, t, i, j) * x[j * incx];
      x[i * incx] = diag == Diag::Unit ? s : s / opa(a, lda, t, i, i);
    }
  } else {
    for (int64_t i = n - 1; i >= 0; --i) {
      T s = x[i * incx];
      for (int64_t j = i + 1; j < n; ++j) s -= opa(a, lda, t, i, j) * x[j * incx];
      x[i * incx] = diag == Diag::Unit ? s : s / opa(a, lda, t, i, i);
    }
  }
}

template <typename T>
void syrk_native(Uplo uplo, Trans t, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, T beta, T* c,
                 int64_t ldc) {
  for (int64_t i = 0; i < n; ++i) {
    int64_t j0 = uplo == Uplo::Upper ? i : 0, j1 = uplo == Uplo::Upper ? n : i + 1;
    for (int64_t j = j0; j < j1; ++j) {
      T acc = 0;
      for (int64_t p = 0; p < k; ++p) acc += opa(a, lda, t, i, p) * opa(a, lda, t, j, p);
      c[i * ldc + j] = beta == T(0) ? alpha * acc : alpha * acc + beta * c[i * ldc + j];
    }
  }
}

template <typename T>
void trsm_native(Side side, Uplo uplo, Trans t, Diag diag, int64_t m, int64_t n, T alpha, const T* a, int64_t lda,
                 T* b, int64_t ldb) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) b[i * ldb + j] *= alpha;
  if (side == Side::Left) {
    // Each column of B is one triangular solve with op(A).
    for (int64_t j = 0; j < n; ++j) trsv_native(uplo, t, diag, m, a, lda, b + j, ldb);
  } else {
    // X op(A) = B  <=>  op(A)^T x_row = b_row for every row.
    Trans tt = t == Trans::N ? Trans::T : Trans::N;
    for (int64_t i = 0; i < m; ++i) trsv_native(uplo, tt, diag, n, a, lda, b + i * ldb, 1);
  }
}

template <typename T>
bool use_openblas(std::initializer_list<int64_t> dims) {
  State& s = state();
  if (s.other_lib() != Library::OpenBLAS || !fits_int(dims)) return false;
  s.sync_openblas_threads();
  return true;
}

const char* lib_name(Library l) {
  switch (l) {
    case Library::Dnnl: return "dnnl";
    case Library::OpenBLAS: return "openblas";
    default: return "native";
  }
}

}  // namespace

namespace detail {
bool needs_coretype_fix(bool cpu_has_avx512, const char* corename) {
  if (!cpu_has_avx512 || !corename) return false;
  for (const char* good : {"SkylakeX", "Cooperlake", "SapphireRapids", "Zen4", "Zen5"})
    if (strcasecmp(corename, good) == 0) return false;
  return true;
}
void native_gemm(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                 const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  native_sgemm_stub(DeviceType::CPU, char(ta), char(tb), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void native_gemm(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
                 const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  native_dgemm_stub(DeviceType::CPU, char(ta), char(tb), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
}  // namespace detail

void gemm(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  gemm_impl<float>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void gemm(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  gemm_impl<double>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

bool has_gemm_bf16() { return state().dnnl_gemm_bf16 != nullptr; }

bool gemm_bf16(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a, int64_t lda,
               const uint16_t* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  DnnlGemmBf16 fn = state().dnnl_gemm_bf16;
  if (!fn) return false;
  if (m <= 0 || n <= 0) return true;
  ldc = fix_ld(ldc, m, n);
  if (k <= 0) {
    scale_c(m, n, beta, c, ldc);
    return true;
  }
  lda = ta == Trans::N ? fix_ld(lda, m, k) : fix_ld(lda, k, m);
  ldb = tb == Trans::N ? fix_ld(ldb, k, n) : fix_ld(ldb, n, k);
  int st = fn(char(ta), char(tb), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  STRATA_CHECK(st == 0, "cpublas::gemm_bf16: oneDNN returned status ", st, " for m=", m, " n=", n, " k=", k);
  return true;
}

#define STRATA_BLAS_LEVEL12(T)                                                                                   \
  void gemv(Trans t, int64_t m, int64_t n, T alpha, const T* a, int64_t lda, const T* x, int64_t incx, T beta,   \
            T* y, int64_t incy) {                                                                                \
    if (m <= 0 || n <= 0) {                                                                                      \
      int64_t len = t == Trans::N ? m : n;                                                                       \
      for (int64_t i = 0; i < len; ++i) y[i * incy] = beta == T(0) ? T(0) : beta * y[i * incy];                 \
      return;                                                                                                    \
    }                                                                                                            \
    lda = fix_ld(lda, m, n);                                                                                     \
    if (use_openblas<T>({m, n, lda, incx, incy}))                                                                \
      return cblas<T>().gemv(kRowMajor, cb(t), int(m), int(n), alpha, a, int(lda), x, int(incx), beta, y,       \
                             int(incy));                                                                         \
    gemv_native<T>(t, m, n, alpha, a, lda, x, incx, beta, y, incy);                                              \
  }                                                                                                              \
  void axpy(int64_t n, T alpha, const T* x, int64_t incx, T* y, int64_t incy) {                                  \
    if (n <= 0) return;                                                                                          \
    if (use_openblas<T>({n, incx, incy})) return cblas<T>().axpy(int(n), alpha, x, int(incx), y, int(incy));     \
    for (int64_t i = 0; i < n; ++i) y[i * incy] += alpha * x[i * incx];                                          \
  }                                                                                                              \
  T dot(int64_t n, const T* x, int64_t incx, const T* y, int64_t incy) {                                         \
    if (n <= 0) return T(0);                                                                                     \
    if (use_openblas<T>({n, incx, incy})) return cblas<T>().dot(int(n), x, int(incx), y, int(incy));             \
    T acc = 0;                                                                                                   \
    for (int64_t i = 0; i < n; ++i) acc += x[i * incx] * y[i * incy];                                            \
    return acc;                                                                                                  \
  }                                                                                                              \
  T nrm2(int64_t n, const T* x, int64_t incx) {                                                                  \
    if (n <= 0) return T(0);                                                                                     \
    if (use_openblas<T>({n, incx})) return cblas<T>().nrm2(int(n), x, int(incx));                                \
    return nrm2_native<T>(n, x, incx);                                                                           \
  }                                                                                                              \
  void trsv(Uplo uplo, Trans t, Diag diag, int64_t n, const T* a, int64_t lda, T* x, int64_t incx) {             \
    if (n <= 0) return;                                                                                          \
    lda = fix_ld(lda, n, n);                                                                                     \
    if (use_openblas<T>({n, lda, incx}))                                                                         \
      return cblas<T>().trsv(kRowMajor, cb(uplo), cb(t), cb(diag), int(n), a, int(lda), x, int(incx));           \
    trsv_native<T>(uplo, t, diag, n, a, lda, x, incx);                                                           \
  }                                                                                                              \
  void syrk(Uplo uplo, Trans t, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, T beta, T* c,            \
            int64_t ldc) {                                                                                       \
    if (n <= 0) return;                                                                                          \
    ldc = fix_ld(ldc, n, n);                                                                                     \
    if (k <= 0) alpha = T(0);                                                                                    \
    lda = t == Trans::N ? fix_ld(lda, n, std::max<int64_t>(k, 1)) : fix_ld(lda, k, n);                           \
    if (use_openblas<T>({n, k, lda, ldc}))                                                                       \
      return cblas<T>().syrk(kRowMajor, cb(uplo), cb(t), int(n), int(k), alpha, a, int(lda), beta, c, int(ldc)); \
    syrk_native<T>(uplo, t, n, k, alpha, a, lda, beta, c, ldc);                                                  \
  }                                                                                                              \
  void trsm(Side side, Uplo uplo, Trans t, Diag diag, int64_t m, int64_t n, T alpha, const T* a, int64_t lda,    \
            T* b, int64_t ldb) {                                                                                 \
    if (m <= 0 || n <= 0) return;                                                                                \
    int64_t na = side == Side::Left ? m : n;                                                                     \
    lda = fix_ld(lda, na, na);                                                                                   \
    ldb = fix_ld(ldb, m, n);                                                                                     \
    if (use_openblas<T>({m, n, lda, ldb}))                                                                       \
      return cblas<T>().trsm(kRowMajor, cb(side), cb(uplo), cb(t), cb(diag), int(m), int(n), alpha, a,           \
                             int(lda), b, int(ldb));                                                             \
    trsm_native<T>(side, uplo, t, diag, m, n, alpha, a, lda, b, ldb);                                            \
  }

STRATA_BLAS_LEVEL12(float)
STRATA_BLAS_LEVEL12(double)
#undef STRATA_BLAS_LEVEL12

Library sgemm_library() { return state().sgemm_lib; }
Library other_library() { return state().other_lib(); }

std::string backend_name() {
  State& s = state();
  auto describe = [&](Library l) -> std::string {
    switch (l) {
      case Library::Dnnl: return s.dnnl_desc + " dnnl_sgemm";
      case Library::OpenBLAS: return s.ob_desc;
      default: return str("built-in blocked GEMM (", cpu_capability_name(cpu_capability()), ")");
    }
  };
  std::string r = str("fp32 gemm: ", describe(s.sgemm_lib), "; other BLAS: ", describe(s.other_lib()), "; ",
                      std::max(1, get_num_threads()), " threads");
  if (const char* pref = std::getenv("STRATA_BLAS"))
    if (*pref) r += str(" (STRATA_BLAS=", pref, ", fp32 via ", lib_name(s.sgemm_lib), ")");
  return r;
}

}  // namespace strata::cpublas

// C entry point so Python (strata.blas.backend(), via ctypes) and the benchmark
// can show which library is in use without a binding of their own.
extern "C" __attribute__((visibility("default"))) const char* strata_blas_backend_name() {
  static thread_local std::string s;
  s = strata::cpublas::backend_name();
  return s.c_str();
}
