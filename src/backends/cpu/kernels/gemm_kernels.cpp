// The built-in GEMM (fallback when no BLAS library loads) and the integer
// matmul loop. Compiled once per ISA level, so the micro-kernel's plain C++
// loops become SSE, AVX2 or AVX-512 code.
//
// Structure (Goto/BLIS style, simplified): op(B) is packed in kc x nc blocks
// into NR-wide column panels, op(A) in mc x kc blocks into MR-high row panels
// (both zero-padded), and an MR x NR register tile accumulates over kc. Threads
// split the NR panels of one block, sharing the packed A and B.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "backends/cpu/gemm_native.h"
#include "backends/cpu/loops.h"

namespace strata {
namespace cpu {
inline namespace STRATA_CPU_NS {
namespace {

constexpr int kVecBytes = STRATA_CPU_CAP == 2 ? 64 : (STRATA_CPU_CAP == 1 ? 32 : 16);

template <typename T>
struct Blocking {
  static constexpr int NR = 2 * kVecBytes / static_cast<int>(sizeof(T));  // two vector registers wide
  static constexpr int MR = 6;  // 12 accumulators: fits 16 registers with room for the B loads
  static constexpr int64_t KC = 256;
  static constexpr int64_t MC = 96;
  static constexpr int64_t NC = 4096 / NR * NR;
};

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
template <typename T>
std::unique_ptr<T[], FreeDeleter> aligned_buffer(int64_t n) {
  size_t bytes = (static_cast<size_t>(n) * sizeof(T) + 63) / 64 * 64;
  return std::unique_ptr<T[], FreeDeleter>(static_cast<T*>(std::aligned_alloc(64, bytes ? bytes : 64)));
}

template <typename T, int MR, int NR>
STRATA_ALWAYS_INLINE void micro_kernel(int64_t kc, const T* __restrict ap, const T* __restrict bp, T alpha, T beta,
                                       T* __restrict c, int64_t ldc, int mr, int nr) {
  T acc[MR][NR];
  for (int i = 0; i < MR; ++i)
#pragma omp simd
    for (int j = 0; j < NR; ++j) acc[i][j] = T(0);
  for (int64_t p = 0; p < kc; ++p) {
    const T* __restrict b = bp + p * NR;
    const T* __restrict a = ap + p * MR;
    for (int i = 0; i < MR; ++i) {
      T av = a[i];
#pragma omp simd
      for (int j = 0; j < NR; ++j) acc[i][j] += av * b[j];
    }
  }
  if (mr == MR && nr == NR) {
    for (int i = 0; i < MR; ++i) {
      T* __restrict ci = c + i * ldc;
      if (beta == T(0)) {
#pragma omp simd
        for (int j = 0; j < NR; ++j) ci[j] = alpha * acc[i][j];
      } else {
#pragma omp simd
        for (int j = 0; j < NR; ++j) ci[j] = alpha * acc[i][j] + beta * ci[j];
      }
    }
    return;
  }
  for (int i = 0; i < mr; ++i) {
    T* ci = c + i * ldc;
    for (int j = 0; j < nr; ++j) ci[j] = beta == T(0) ? alpha * acc[i][j] : alpha * acc[i][j] + beta * ci[j];
  }
}

// One thread's GEMM (the blocked loops).
template <typename T>
void gemm_serial(char ta, char tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
                 int64_t ldb, T beta, T* c, int64_t ldc) {
  using B = Blocking<T>;
  constexpr int MR = B::MR, NR = B::NR;
  if (m <= 0 || n <= 0) return;
  if (k <= 0 || alpha == T(0)) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
    return;
  }
  const bool a_t = ta == 'T', b_t = tb == 'T';
  const int64_t nc_max = std::min<int64_t>(B::NC, (n + NR - 1) / NR * NR);
  const int64_t kc_max = std::min<int64_t>(B::KC, k);
  const int64_t mc_max = std::min<int64_t>(B::MC, (m + MR - 1) / MR * MR);
  auto bpack = aligned_buffer<T>(nc_max * kc_max);
  auto apack = aligned_buffer<T>(mc_max * kc_max);

  for (int64_t jc = 0; jc < n; jc += B::NC) {
    const int64_t nc = std::min<int64_t>(B::NC, n - jc);
    const int64_t npanels = (nc + NR - 1) / NR;
    for (int64_t pc = 0; pc < k; pc += B::KC) {
      const int64_t kc = std::min<int64_t>(B::KC, k - pc);
      const T beta_eff = pc == 0 ? beta : T(1);
      T* bp = bpack.get();
      auto pack_b = [&](int64_t p0, int64_t p1) {
        for (int64_t jp = p0; jp < p1; ++jp) {
          T* dst = bp + jp * kc * NR;
          const int64_t j0 = jc + jp * NR;
          const int nr = static_cast<int>(std::min<int64_t>(NR, n - j0));
          for (int64_t p = 0; p < kc; ++p) {
            T* d = dst + p * NR;
            if (!b_t) {
              const T* s = b + (pc + p) * ldb + j0;
              for (int j = 0; j < nr; ++j) d[j] = s[j];
            } else {
              const T* s = b + j0 * ldb + (pc + p);
              for (int j = 0; j < nr; ++j) d[j] = s[j * ldb];
            }
            for (int j = nr; j < NR; ++j) d[j] = T(0);
          }
        }
      };
      pack_b(0, npanels);

      for (int64_t ic = 0; ic < m; ic += B::MC) {
        const int64_t mc = std::min<int64_t>(B::MC, m - ic);
        const int64_t mpanels = (mc + MR - 1) / MR;
        T* ap = apack.get();
        for (int64_t ip = 0; ip < mpanels; ++ip) {
          T* dst = ap + ip * kc * MR;
          const int64_t i0 = ic + ip * MR;
          const int mr = static_cast<int>(std::min<int64_t>(MR, m - i0));
          for (int64_t p = 0; p < kc; ++p) {
            T* d = dst + p * MR;
            for (int i = 0; i < mr; ++i) d[i] = a_t ? a[(pc + p) * lda + i0 + i] : a[(i0 + i) * lda + pc + p];
            for (int i = mr; i < MR; ++i) d[i] = T(0);
          }
        }
        auto run = [&](int64_t p0, int64_t p1) {
          for (int64_t jp = p0; jp < p1; ++jp) {
            const int64_t j0 = jc + jp * NR;
            const int nr = static_cast<int>(std::min<int64_t>(NR, n - j0));
            for (int64_t ip = 0; ip < mpanels; ++ip) {
              const int64_t i0 = ic + ip * MR;
              const int mr = static_cast<int>(std::min<int64_t>(MR, m - i0));
              micro_kernel<T, MR, NR>(kc, ap + ip * kc * MR, bp + jp * kc * NR, alpha, beta_eff, c + i0 * ldc + j0,
                                      ldc, mr, nr);
            }
          }
        };
        run(0, npanels);
      }
    }
  }
}

// Threads split C into independent column (or, for narrow C, row) ranges and
// each runs the serial GEMM on its part: one parallel region and no barriers
// inside it, which also keeps a busy, shared machine from stalling every block.
template <typename T>
void native_gemm(char ta, char tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
                 int64_t ldb, T beta, T* c, int64_t ldc) {
  using B = Blocking<T>;
  const int nt = get_num_threads();
  if (nt <= 1 || static_cast<double>(m) * n * k < 96.0 * 96 * 96 || in_parallel_region())
    return gemm_serial(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  const bool split_n = (n + B::NR - 1) / B::NR >= 2 * nt || n >= m;
  const int64_t unit = split_n ? B::NR : B::MR;
  const int64_t units = ((split_n ? n : m) + unit - 1) / unit;
  parallel_for(0, units, 1, [&](int64_t u0, int64_t u1) {
    const int64_t lo = u0 * unit, hi = std::min(u1 * unit, split_n ? n : m);
    if (lo >= hi) return;
    if (split_n) {
      const T* bs = tb == 'T' ? b + lo * ldb : b + lo;
      gemm_serial(ta, tb, m, hi - lo, k, alpha, a, lda, bs, ldb, beta, c + lo, ldc);
    } else {
      const T* as = ta == 'T' ? a + lo : a + lo * lda;
      gemm_serial(ta, tb, hi - lo, n, k, alpha, as, lda, b, ldb, beta, c + lo * ldc, ldc);
    }
  });
}

void native_sgemm(char ta, char tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                  const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  native_gemm<float>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void native_dgemm(char ta, char tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
                  const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  native_gemm<double>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// Dot product with several independent vector accumulators (GCC leaves an
// `omp simd reduction` inside a lambda scalar, and one accumulator would be
// bound by the FMA latency anyway).
template <typename T>
STRATA_ALWAYS_INLINE T dot_contig(const T* __restrict a, const T* __restrict b, int64_t n) {
  constexpr int L = 4 * kVecBytes / static_cast<int>(sizeof(T));
  T acc[L];
  for (int l = 0; l < L; ++l) acc[l] = T(0);
  int64_t j = 0;
  for (; j + L <= n; j += L) {
#pragma omp simd
    for (int l = 0; l < L; ++l) acc[l] += a[j + l] * b[j + l];
  }
  T s = 0;
  for (int l = 0; l < L; ++l) s += acc[l];
  for (; j < n; ++j) s += a[j] * b[j];
  return s;
}

// gemv for the vector-shaped products: stream A once, at memory bandwidth.
template <typename T>
void native_gemv(char trans, int64_t m, int64_t n, T alpha, const T* a, int64_t lda, const T* x, int64_t incx,
                 T beta, T* y, int64_t incy) {
  const int64_t xlen = trans == 'N' ? n : m;
  std::vector<T> xbuf;
  if (incx != 1) {
    xbuf.resize(static_cast<size_t>(xlen));
    for (int64_t i = 0; i < xlen; ++i) xbuf[i] = x[i * incx];
    x = xbuf.data();
  }
  const bool big = static_cast<double>(m) * n >= 65536.0;
  if (trans == 'N') {
    // y[i] = dot(A[i, :], x): rows split between threads.
    auto rows = [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        T acc = dot_contig(a + i * lda, x, n);
        y[i * incy] = beta == T(0) ? alpha * acc : alpha * acc + beta * y[i * incy];
      }
    };
    if (big) parallel_for(0, m, std::max<int64_t>(1, 16384 / std::max<int64_t>(n, 1)), rows);
    else rows(0, m);
    return;
  }
  // y[j] = sum_p x[p] * A[p, j]: threads own column chunks that stay in L1
  // while the rows of A stream past.
  constexpr int64_t kChunk = 1024;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  auto cols = [&](int64_t c0, int64_t c1) {
    alignas(64) T acc[kChunk];
    for (int64_t ch = c0; ch < c1; ++ch) {
      const int64_t j0 = ch * kChunk, len = std::min(kChunk, n - j0);
      for (int64_t j = 0; j < len; ++j) acc[j] = T(0);
      for (int64_t p = 0; p < m; ++p) {
        const T xv = x[p];
        const T* __restrict r = a + p * lda + j0;
#pragma omp simd
        for (int64_t j = 0; j < len; ++j) acc[j] += xv * r[j];
      }
      for (int64_t j = 0; j < len; ++j) {
        T* yj = y + (j0 + j) * incy;
        *yj = beta == T(0) ? alpha * acc[j] : alpha * acc[j] + beta * *yj;
      }
    }
  };
  if (big && chunks > 1) {
    parallel_for(0, chunks, 1, cols);
  } else if (big && get_num_threads() > 1 && !in_parallel_region()) {
    // One chunk of columns but many rows: split the rows, add the partial sums.
    const int nt = get_num_threads();
    std::vector<T> part(static_cast<size_t>(nt) * n, T(0));
    parallel_for(0, m, std::max<int64_t>(1, 16384 / std::max<int64_t>(n, 1)), [&](int64_t p0, int64_t p1) {
      T* acc = part.data() + static_cast<int64_t>(omp_get_thread_num()) * n;
      for (int64_t p = p0; p < p1; ++p) {
        const T xv = x[p];
        const T* __restrict r = a + p * lda;
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) acc[j] += xv * r[j];
      }
    });
    for (int64_t j = 0; j < n; ++j) {
      T s = 0;
      for (int t = 0; t < nt; ++t) s += part[t * n + j];
      T* yj = y + j * incy;
      *yj = beta == T(0) ? alpha * s : alpha * s + beta * *yj;
    }
  } else {
    cols(0, chunks);
  }
}

void native_sgemv(char t, int64_t m, int64_t n, float alpha, const float* a, int64_t lda, const float* x,
                  int64_t incx, float beta, float* y, int64_t incy) {
  native_gemv<float>(t, m, n, alpha, a, lda, x, incx, beta, y, incy);
}
void native_dgemv(char t, int64_t m, int64_t n, double alpha, const double* a, int64_t lda, const double* x,
                  int64_t incx, double beta, double* y, int64_t incy) {
  native_gemv<double>(t, m, n, alpha, a, lda, x, incx, beta, y, incy);
}

// Integer matmul: accumulate a row of C in uint64 (wrapping, no UB), then
// narrow, which gives the same bits as accumulating in the integer type.
template <typename T>
void int_gemm_typed(const cpublas::IntGemmArgs& g) {
  const T* a = static_cast<const T*>(g.a);
  const T* b = static_cast<const T*>(g.b);
  T* c = static_cast<T*>(g.c);
  const uint64_t alpha = static_cast<uint64_t>(g.alpha), beta = static_cast<uint64_t>(g.beta);
  const int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, g.n * std::max<int64_t>(g.k, 1)));
  parallel_for(0, g.m, grain, [&](int64_t i0, int64_t i1) {
    std::vector<uint64_t> acc(static_cast<size_t>(g.n));
    for (int64_t i = i0; i < i1; ++i) {
      std::fill(acc.begin(), acc.end(), 0);
      for (int64_t p = 0; p < g.k; ++p) {
        const uint64_t av = static_cast<uint64_t>(static_cast<int64_t>(a[i * g.a_rs + p * g.a_cs]));
        const T* brow = b + p * g.b_rs;
        if (g.b_cs == 1) {
#pragma omp simd
          for (int64_t j = 0; j < g.n; ++j) acc[j] += av * static_cast<uint64_t>(static_cast<int64_t>(brow[j]));
        } else {
          for (int64_t j = 0; j < g.n; ++j)
            acc[j] += av * static_cast<uint64_t>(static_cast<int64_t>(brow[j * g.b_cs]));
        }
      }
      T* crow = c + i * g.c_rs;
      for (int64_t j = 0; j < g.n; ++j) {
        uint64_t v = alpha * acc[j];
        if (beta != 0) v += beta * static_cast<uint64_t>(static_cast<int64_t>(crow[j * g.c_cs]));
        crow[j * g.c_cs] = static_cast<T>(v);
      }
    }
  });
}

void int_gemm(const cpublas::IntGemmArgs& g) {
  switch (g.dtype) {
    case ScalarType::UInt8: return int_gemm_typed<uint8_t>(g);
    case ScalarType::Int8: return int_gemm_typed<int8_t>(g);
    case ScalarType::Int16: return int_gemm_typed<int16_t>(g);
    case ScalarType::Int32: return int_gemm_typed<int32_t>(g);
    case ScalarType::Int64: return int_gemm_typed<int64_t>(g);
    default: throw Error(str("int_gemm: unsupported dtype ", dtype_name(g.dtype)));
  }
}

}  // namespace
}  // namespace STRATA_CPU_NS
}  // namespace cpu

STRATA_REGISTER_CPU_KERNEL(native_sgemm_stub, cpu::native_sgemm);
STRATA_REGISTER_CPU_KERNEL(native_dgemm_stub, cpu::native_dgemm);
STRATA_REGISTER_CPU_KERNEL(int_gemm_stub, cpu::int_gemm);
STRATA_REGISTER_CPU_KERNEL(native_sgemv_stub, cpu::native_sgemv);
STRATA_REGISTER_CPU_KERNEL(native_dgemv_stub, cpu::native_dgemv);

}  // namespace strata
