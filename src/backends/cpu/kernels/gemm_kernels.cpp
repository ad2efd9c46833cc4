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
#include <utility>
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

// ---- gemv ---------------------------------------------------------------------
//
// The vector-shaped products (a batch-1 linear layer is x @ W^T, a 'N' gemv
// with short rows). Accumulators live in vector registers (GCC vector
// extensions: plain `acc[l]` arrays end up on the stack), several rows or
// column panels are in flight at once so the FMA latency is hidden, and the
// lanes of a row are summed in log2 shuffle-and-add steps shared between 4 rows
// (not one dependent scalar add per lane, which bound the old loop).

template <typename T, int Bytes>
struct VecOf {
  typedef T type __attribute__((vector_size(Bytes)));
};
template <typename T>
using Vec = typename VecOf<T, kVecBytes>::type;
template <typename T>
constexpr int kLanes = kVecBytes / static_cast<int>(sizeof(T));

template <typename T>
STRATA_ALWAYS_INLINE Vec<T> vload(const T* p) {
  Vec<T> v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
template <typename T>
STRATA_ALWAYS_INLINE void vstore(T* p, Vec<T> v) {
  std::memcpy(p, &v, sizeof(v));
}
template <typename T, size_t... I>
STRATA_ALWAYS_INLINE Vec<T> vbroadcast_impl(T s, std::index_sequence<I...>) {
  return Vec<T>{((void)I, s)...};
}
// (Not `Vec<T>{} + s`: the compiler may not drop the + 0, which would turn -0.0 into +0.0.)
template <typename T>
STRATA_ALWAYS_INLINE Vec<T> vbroadcast(T s) {
  return vbroadcast_impl(s, std::make_index_sequence<kLanes<T>>());
}

// Lane i of the result is p[2i] + p[2i + 1] for i < L/2 and q[2i - L] + q[2i - L + 1]
// above: the pairwise sums of p's lanes, then of q's.
template <typename T, int Bytes, size_t... I>
STRATA_ALWAYS_INLINE typename VecOf<T, Bytes>::type pair_sums(typename VecOf<T, Bytes>::type p,
                                                              typename VecOf<T, Bytes>::type q,
                                                              std::index_sequence<I...>) {
  return __builtin_shufflevector(p, q, static_cast<int>(2 * I)...) +
         __builtin_shufflevector(p, q, static_cast<int>(2 * I + 1)...);
}
// The pairwise sums of v's lanes as a vector of half the width.
template <typename T, int Bytes, size_t... I>
STRATA_ALWAYS_INLINE typename VecOf<T, Bytes / 2>::type halve(typename VecOf<T, Bytes>::type v,
                                                              std::index_sequence<I...>) {
  return __builtin_shufflevector(v, v, static_cast<int>(2 * I)...) +
         __builtin_shufflevector(v, v, static_cast<int>(2 * I + 1)...);
}
// v holds 4 rows' partial sums in 4 contiguous groups of lanes; returns [row0, row1, row2, row3].
template <typename T, int Bytes>
STRATA_ALWAYS_INLINE typename VecOf<T, 4 * sizeof(T)>::type fold_groups(typename VecOf<T, Bytes>::type v) {
  constexpr int L = Bytes / static_cast<int>(sizeof(T));
  if constexpr (L == 4) return v;
  else return fold_groups<T, Bytes / 2>(halve<T, Bytes>(v, std::make_index_sequence<L / 2>()));
}

// The sum of v's lanes, halving the width at each step.
template <typename T, int Bytes>
STRATA_ALWAYS_INLINE T lane_sum(typename VecOf<T, Bytes>::type v) {
  constexpr int L = Bytes / static_cast<int>(sizeof(T));
  if constexpr (L == 2) return v[0] + v[1];
  else return lane_sum<T, Bytes / 2>(halve<T, Bytes>(v, std::make_index_sequence<L / 2>()));
}

template <typename T>
STRATA_ALWAYS_INLINE void store_y(T* y, T acc, T alpha, T beta) {
  // beta == 0 must not read y (it may hold NaN), as in BLAS.
  *y = beta == T(0) ? alpha * acc : alpha * acc + beta * *y;
}

// 'N', R rows at once (R = 1 or 4): y[i] = alpha * dot(A[i, :n], x) + beta * y[i].
// Two accumulators per row over the vector part, the < kLanes tail added to
// independent lanes, then the rows' lanes are summed together: pairwise sums of
// two rows share one vector, so 4 rows take log2 steps in all, not 4 each.
template <typename T, int R>
STRATA_ALWAYS_INLINE void gemv_n_rows(int64_t n, T alpha, const T* __restrict a, int64_t lda,
                                      const T* __restrict x, T beta, T* y, int64_t incy) {
  static_assert(R == 1 || R == 4);
  constexpr int VL = kLanes<T>;
  Vec<T> acc0[R], acc1[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = Vec<T>{};
  int64_t j = 0;
  for (; j + 2 * VL <= n; j += 2 * VL) {
    const Vec<T> x0 = vload(x + j), x1 = vload(x + j + VL);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      acc0[r] += vload(a + r * lda + j) * x0;
      acc1[r] += vload(a + r * lda + j + VL) * x1;
    }
  }
  if (j + VL <= n) {
    const Vec<T> x0 = vload(x + j);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc1[r] += vload(a + r * lda + j) * x0;
    j += VL;
  }
  const int tail = static_cast<int>(n - j);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    acc0[r] += acc1[r];
    if (tail) {
      alignas(kVecBytes) T t[VL] = {};
      const T* ar = a + r * lda + j;
      for (int l = 0; l < tail; ++l) t[l] = ar[l] * x[j + l];
      acc0[r] += vload(t);
    }
  }
  alignas(kVecBytes) T sums[4];
  if constexpr (R == 1) {
    sums[0] = lane_sum<T, kVecBytes>(acc0[0]);
  } else if constexpr (VL == 2) {
    const auto idx = std::make_index_sequence<VL>();
    Vec<T> u = pair_sums<T, kVecBytes>(acc0[0], acc0[1], idx), v = pair_sums<T, kVecBytes>(acc0[2], acc0[3], idx);
    vstore(sums, u);
    vstore(sums + 2, v);
  } else {
    const auto idx = std::make_index_sequence<VL>();
    Vec<T> u = pair_sums<T, kVecBytes>(acc0[0], acc0[1], idx), v = pair_sums<T, kVecBytes>(acc0[2], acc0[3], idx);
    auto w = fold_groups<T, kVecBytes>(pair_sums<T, kVecBytes>(u, v, idx));
    std::memcpy(sums, &w, sizeof(w));
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) store_y(y + r * incy, sums[r], alpha, beta);
}

template <typename T>
void gemv_n_range(int64_t i0, int64_t i1, int64_t n, T alpha, const T* a, int64_t lda, const T* x, T beta, T* y,
                  int64_t incy) {
  int64_t i = i0;
  for (; i + 4 <= i1; i += 4) gemv_n_rows<T, 4>(n, alpha, a + i * lda, lda, x, beta, y + i * incy, incy);
  for (; i < i1; ++i) gemv_n_rows<T, 1>(n, alpha, a + i * lda, lda, x, beta, y + i * incy, incy);
}

// 'T' over the columns [j0, j0 + W * kLanes): acc[c] = sum_p x[p] * A[p, j0 + c]
// with the panel held in registers; even and odd rows go to separate
// accumulators so consecutive FMAs do not wait on each other.
template <typename T, int W>
STRATA_ALWAYS_INLINE void gemv_t_panel(int64_t m, const T* __restrict a, int64_t lda, const T* __restrict x,
                                       T* __restrict out) {
  constexpr int VL = kLanes<T>;
  Vec<T> e[W], o[W];
  for (int w = 0; w < W; ++w) e[w] = o[w] = Vec<T>{};
  int64_t p = 0;
  for (; p + 2 <= m; p += 2) {
    const Vec<T> x0 = vbroadcast(x[p]), x1 = vbroadcast(x[p + 1]);
    const T* r0 = a + p * lda;
    const T* r1 = r0 + lda;
    for (int w = 0; w < W; ++w) {
      e[w] += x0 * vload(r0 + w * VL);
      o[w] += x1 * vload(r1 + w * VL);
    }
  }
  if (p < m) {
    const Vec<T> x0 = vbroadcast(x[p]);
    for (int w = 0; w < W; ++w) e[w] += x0 * vload(a + p * lda + w * VL);
  }
  for (int w = 0; w < W; ++w) vstore(out + w * VL, e[w] + o[w]);
}

// 'T' for the columns [c0, c1) of A (m rows): y[j] = alpha * sum_p x[p] A[p, j] + beta * y[j].
template <typename T>
void gemv_t_cols(int64_t c0, int64_t c1, int64_t m, T alpha, const T* a, int64_t lda, const T* x, T beta, T* y,
                 int64_t incy) {
  constexpr int VL = kLanes<T>, W = 4;
  alignas(kVecBytes) T buf[W * VL];
  int64_t j = c0;
  auto flush = [&](int64_t len) {
    T* __restrict yj = y + j * incy;
    if (incy != 1) {
      for (int64_t l = 0; l < len; ++l) store_y(yj + l * incy, buf[l], alpha, beta);
    } else if (beta == T(0)) {
#pragma omp simd
      for (int64_t l = 0; l < len; ++l) yj[l] = alpha * buf[l];
    } else {
#pragma omp simd
      for (int64_t l = 0; l < len; ++l) yj[l] = alpha * buf[l] + beta * yj[l];
    }
  };
  for (; j + W * VL <= c1; j += W * VL) {
    gemv_t_panel<T, W>(m, a + j, lda, x, buf);
    flush(W * VL);
  }
  for (; j + VL <= c1; j += VL) {
    gemv_t_panel<T, 1>(m, a + j, lda, x, buf);
    flush(VL);
  }
  if (j < c1) {
    // Fewer than kLanes columns: lanes stay independent, so no long add chain.
    const int len = static_cast<int>(c1 - j);
    for (int l = 0; l < len; ++l) buf[l] = T(0);
    for (int64_t p = 0; p < m; ++p) {
      const T xv = x[p];
      const T* r = a + p * lda + j;
      for (int l = 0; l < len; ++l) buf[l] += xv * r[l];
    }
    flush(len);
  }
}

template <typename T>
void native_gemv(char trans, int64_t m, int64_t n, T alpha, const T* a, int64_t lda, const T* x, int64_t incx,
                 T beta, T* y, int64_t incy) {
  if (m <= 0 || n <= 0) {
    const int64_t len = trans == 'N' ? m : n;
    for (int64_t i = 0; i < len; ++i) y[i * incy] = beta == T(0) ? T(0) : beta * y[i * incy];
    return;
  }
  const int64_t xlen = trans == 'N' ? n : m;
  // x is read once per row block (or per column panel): make it contiguous.
  constexpr int64_t kStackX = 1024;
  alignas(64) T xstack[kStackX];
  std::vector<T> xheap;
  if (incx != 1) {
    T* dst = xstack;
    if (xlen > kStackX) {
      xheap.resize(static_cast<size_t>(xlen));
      dst = xheap.data();
    }
    for (int64_t i = 0; i < xlen; ++i) dst[i] = x[i * incx];
    x = dst;
  }
  const bool threads = static_cast<double>(m) * n >= 65536.0 && get_num_threads() > 1 && !in_parallel_region();
  if (trans == 'N') {
    auto rows = [&](int64_t i0, int64_t i1) { gemv_n_range(i0, i1, n, alpha, a, lda, x, beta, y, incy); };
    if (!threads) return rows(0, m);
    // Row blocks of 4 per unit so only the last block of the matrix takes the one-row path.
    const int64_t blocks = (m + 3) / 4;
    const int64_t grain = std::max<int64_t>(1, 4096 / std::max<int64_t>(n, 1));
    parallel_for(0, blocks, grain, [&](int64_t b0, int64_t b1) { rows(b0 * 4, std::min(m, b1 * 4)); });
    return;
  }
  constexpr int64_t kPanel = 4 * kLanes<T>;
  const int64_t panels = (n + kPanel - 1) / kPanel;
  auto cols = [&](int64_t p0, int64_t p1) {
    gemv_t_cols(p0 * kPanel, std::min(n, p1 * kPanel), m, alpha, a, lda, x, beta, y, incy);
  };
  if (!threads) return cols(0, panels);
  const int nt = get_num_threads();
  if (panels >= 2 * nt) return parallel_for(0, panels, 1, cols);
  // Few columns but many rows: split the rows, each thread sums its rows into
  // its own partial result, and the partials are added at the end.
  std::vector<T> part(static_cast<size_t>(nt) * n, T(0));
  parallel_for(0, m, std::max<int64_t>(1, 16384 / n), [&](int64_t p0, int64_t p1) {
    T* dst = part.data() + static_cast<int64_t>(omp_get_thread_num()) * n;
    gemv_t_cols<T>(0, n, p1 - p0, T(1), a + p0 * lda, lda, x + p0, T(1), dst, 1);
  });
  for (int64_t j = 0; j < n; ++j) {
    T s = 0;
    for (int t = 0; t < nt; ++t) s += part[t * n + j];
    store_y(y + j * incy, s, alpha, beta);
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
