// CPU reduction engine (sum, mean, prod, max/min, all/any, count_nonzero,
// norm) and argmax/argmin. Compiled once per ISA level.
//
// Note [Reduction engine]
// Every reduction is an Op with identity(), map(x) (input -> accumulator),
// combine(a, b) and finalize(acc, count). Over the geometry of
// ops/reduce_common.h the engine picks one of two loops:
//  - runs: each output walks its reduced elements as runs along the innermost
//    reduced dim. When that dim is contiguous the run is reduced with several
//    independent accumulator lanes (so the loop vectorizes) in blocks that are
//    combined pairwise (so float sums over millions of elements stay accurate).
//    Parallel over outputs, or, when there are fewer outputs than threads,
//    over slices of each output's reduced range with a final combine.
//  - columns: when the innermost *kept* dim is contiguous and the reduced dims
//    are outer, a block of adjacent outputs is accumulated together, one input
//    row at a time, vectorized across the block. Rows are summed in groups
//    into a second accumulator to bound rounding error.
#include <cmath>
#include <cstring>
#include <vector>

#include "backends/cpu/loops.h"
#include "ops/reduce_common.h"

namespace strata {
namespace cpu {
inline namespace STRATA_CPU_NS {
namespace {

template <typename T>
STRATA_ALWAYS_INLINE opmath_t<T> up(T x) {
  return static_cast<opmath_t<T>>(x);
}

// The accumulator of sum/prod: floats in opmath, integers and bool in int64.
template <typename T>
using sum_acc_t = std::conditional_t<is_float_v<T> || is_complex_v<T>, opmath_t<T>, int64_t>;
template <typename T>
using sum_out_t = std::conditional_t<is_float_v<T> || is_complex_v<T>, T, int64_t>;

template <typename T>
struct SumOp {
  using in_t = T;
  using acc_t = sum_acc_t<T>;
  using out_t = sum_out_t<T>;
  static constexpr bool kAccurate = is_float_v<T> || is_complex_v<T>;  // worth pairwise blocking
  // map is the identity and combine also works on GCC vectors (see reduce_block).
  static constexpr bool kVec = std::is_floating_point_v<T> && std::is_same_v<T, acc_t>;
  static acc_t identity() { return acc_t(0); }
  STRATA_ALWAYS_INLINE acc_t map(T x) const { return static_cast<acc_t>(up(x)); }
  template <typename A>
  STRATA_ALWAYS_INLINE static A combine(A a, A b) { return a + b; }
  out_t finalize(acc_t a, int64_t) const { return static_cast<out_t>(a); }
};

// nansum: NaN maps to zero. vmap does the same on a GCC vector of lanes, so
// the vectorized loop of reduce_block can run it (see kVec there).
template <typename T>
struct NanSumOp : SumOp<T> {
  using typename SumOp<T>::acc_t;
  STRATA_ALWAYS_INLINE acc_t map(T x) const {
    acc_t a = static_cast<acc_t>(up(x));
    return a != a ? acc_t(0) : a;
  }
  template <typename V>
  STRATA_ALWAYS_INLINE static V vmap(V x) {
    return x == x ? x : V{};
  }
};

template <typename T>
struct MeanOp : SumOp<T> {
  using typename SumOp<T>::acc_t;
  T finalize(acc_t a, int64_t n) const { return static_cast<T>(a / static_cast<acc_t>(n)); }
};

template <typename T>
struct ProdOp {
  using in_t = T;
  using acc_t = sum_acc_t<T>;
  using out_t = sum_out_t<T>;
  static constexpr bool kAccurate = false;
  static constexpr bool kVec = false;
  static acc_t identity() { return acc_t(1); }
  STRATA_ALWAYS_INLINE acc_t map(T x) const { return static_cast<acc_t>(up(x)); }
  STRATA_ALWAYS_INLINE static acc_t combine(acc_t a, acc_t b) { return a * b; }
  out_t finalize(acc_t a, int64_t) const { return static_cast<out_t>(a); }
};

// max/min propagate NaN: a NaN accumulator stays, a NaN input wins.
template <typename T, bool IsMax>
struct MinMaxOp {
  using in_t = T;
  using acc_t = opmath_t<T>;
  using out_t = T;
  static constexpr bool kAccurate = false;
  static constexpr bool kVec = std::is_floating_point_v<T> && std::is_same_v<T, acc_t>;
  static acc_t identity() {
    if constexpr (std::is_floating_point_v<acc_t>) {
      return IsMax ? -std::numeric_limits<acc_t>::infinity() : std::numeric_limits<acc_t>::infinity();
    } else {
      return IsMax ? std::numeric_limits<acc_t>::lowest() : std::numeric_limits<acc_t>::max();
    }
  }
  STRATA_ALWAYS_INLINE acc_t map(T x) const { return up(x); }
  template <typename A>
  STRATA_ALWAYS_INLINE static A combine(A a, A b) {
    if constexpr (IsMax) return (a > b || a != a) ? a : b;
    else return (a < b || a != a) ? a : b;
  }
  out_t finalize(acc_t a, int64_t) const { return static_cast<out_t>(a); }
};

template <typename T, bool IsAll>
struct AllAnyOp {
  using in_t = T;
  using acc_t = uint8_t;
  using out_t = bool;
  static constexpr bool kAccurate = false;
  static constexpr bool kVec = false;
  static acc_t identity() { return IsAll ? 1 : 0; }
  STRATA_ALWAYS_INLINE acc_t map(T x) const { return up(x) != opmath_t<T>(0); }
  STRATA_ALWAYS_INLINE static acc_t combine(acc_t a, acc_t b) { return IsAll ? (a & b) : (a | b); }
  out_t finalize(acc_t a, int64_t) const { return a != 0; }
};

template <typename T>
struct CountNonzeroOp {
  using in_t = T;
  using acc_t = int64_t;
  using out_t = int64_t;
  static constexpr bool kAccurate = false;
  static constexpr bool kVec = false;
  static acc_t identity() { return 0; }
  STRATA_ALWAYS_INLINE acc_t map(T x) const { return up(x) != opmath_t<T>(0); }
  STRATA_ALWAYS_INLINE static acc_t combine(acc_t a, acc_t b) { return a + b; }
  out_t finalize(acc_t a, int64_t) const { return a; }
};

enum class NormMode { L0, L1, L2, Inf, NegInf, P };

template <typename T, NormMode M>
struct NormOp {
  using in_t = T;
  using acc_t = opmath_t<T>;
  using out_t = T;
  static constexpr bool kAccurate = M != NormMode::Inf && M != NormMode::NegInf;
  static constexpr bool kVec = false;
  acc_t p;
  static acc_t identity() {
    if constexpr (M == NormMode::Inf) return acc_t(0);
    else if constexpr (M == NormMode::NegInf) return std::numeric_limits<acc_t>::infinity();
    else return acc_t(0);
  }
  STRATA_ALWAYS_INLINE acc_t map(T x) const {
    acc_t a = std::fabs(up(x));
    if constexpr (M == NormMode::L0) return a != acc_t(0) ? acc_t(1) : acc_t(0);
    else if constexpr (M == NormMode::L2) return a * a;
    else if constexpr (M == NormMode::P) return std::pow(a, p);
    else return a;
  }
  STRATA_ALWAYS_INLINE static acc_t combine(acc_t a, acc_t b) {
    if constexpr (M == NormMode::Inf) return (a > b || a != a) ? a : b;
    else if constexpr (M == NormMode::NegInf) return (a < b || a != a) ? a : b;
    else return a + b;
  }
  out_t finalize(acc_t a, int64_t) const {
    if constexpr (M == NormMode::L2) return static_cast<T>(std::sqrt(a));
    else if constexpr (M == NormMode::P) return static_cast<T>(std::pow(a, acc_t(1) / p));
    else return static_cast<T>(a);
  }
};

// ---- the engine ---------------------------------------------------------------

// Lanes of independent accumulators: 128 bytes of them, enough to hide the
// latency of a vector add at every ISA level.
template <typename Acc>
constexpr int64_t kLanes = 128 / sizeof(Acc) < 8 ? 8 : 128 / sizeof(Acc);
constexpr int64_t kPairwiseBlock = 4096;

// Bytes of one native vector register at this ISA level.
constexpr int64_t kVecBytes = STRATA_CPU_CAP >= 2 ? 64 : STRATA_CPU_CAP == 1 ? 32 : 16;

template <typename Op>
typename Op::acc_t reduce_block(const Op& op, const typename Op::in_t* __restrict p, int64_t n) {
  using Acc = typename Op::acc_t;
  constexpr int64_t L = kLanes<Acc>;
  Acc acc[L];
  for (int64_t j = 0; j < L; ++j) acc[j] = Op::identity();
  int64_t i = 0;
  if constexpr (Op::kVec && L * sizeof(Acc) % kVecBytes == 0) {
    // GCC keeps a vectorized `acc[j]` array loop's lanes on the stack (a load
    // and a store per vector add, ~2x slower on long sums), so the lanes are
    // held in vector registers here. Lane j still takes elements i % L == j,
    // so the result is bit-identical to the plain loop below.
    constexpr int64_t VL = kVecBytes / sizeof(Acc), NV = L / VL;
    typedef Acc V __attribute__((vector_size(kVecBytes)));
    V v[NV];
    std::memcpy(v, acc, sizeof(acc));
    for (; i + L <= n; i += L) {
#pragma GCC unroll 16
      for (int64_t k = 0; k < NV; ++k) {
        V x;
        std::memcpy(&x, p + i + k * VL, sizeof(V));
        if constexpr (requires { Op::vmap(x); }) x = Op::vmap(x);
        v[k] = Op::combine(v[k], x);
      }
    }
    std::memcpy(acc, v, sizeof(acc));
  } else {
    for (; i + L <= n; i += L) {
#pragma omp simd
      for (int64_t j = 0; j < L; ++j) acc[j] = Op::combine(acc[j], op.map(p[i + j]));
    }
  }
  for (int64_t j = 0; i + j < n; ++j) acc[j] = Op::combine(acc[j], op.map(p[i + j]));
  for (int64_t w = L / 2; w > 0; w /= 2)
    for (int64_t j = 0; j < w; ++j) acc[j] = Op::combine(acc[j], acc[j + w]);
  return acc[0];
}

// Pairwise over blocks: the rounding error of a float sum grows with log(n).
template <typename Op>
typename Op::acc_t reduce_contig(const Op& op, const typename Op::in_t* p, int64_t n) {
  if (!Op::kAccurate || n <= kPairwiseBlock) {
    if (n <= kPairwiseBlock) return reduce_block(op, p, n);
    typename Op::acc_t acc = Op::identity();
    for (int64_t i = 0; i < n; i += kPairwiseBlock)
      acc = Op::combine(acc, reduce_block(op, p + i, std::min(kPairwiseBlock, n - i)));
    return acc;
  }
  int64_t half = (n / 2 + kPairwiseBlock - 1) / kPairwiseBlock * kPairwiseBlock;
  // Left half first, as separate statements: function arguments are evaluated
  // in unspecified order (GCC: right to left), which walked memory backwards
  // block by block and defeated the hardware prefetcher (~2x on long sums).
  typename Op::acc_t lo = reduce_contig(op, p, half);
  typename Op::acc_t hi = reduce_contig(op, p + half, n - half);
  return Op::combine(lo, hi);
}

// Offset (in elements) of a linear index in a dims-innermost-first geometry.
STRATA_ALWAYS_INLINE int64_t offset_of(int64_t lin, IntArrayRef sizes, IntArrayRef strides) {
  int64_t off = 0;
  for (size_t d = 0; d < sizes.size(); ++d) {
    int64_t s = sizes[d];
    off += (lin % s) * strides[d];
    lin /= s;
  }
  return off;
}

// Calls f(offset, len, stride) for the runs along the innermost reduced dim
// that cover reduced linear indices [b, e).
template <typename F>
void walk_runs(const ReduceGeom& g, int64_t b, int64_t e, const F& f) {
  if (b >= e) return;  // also keeps a zero-size dim out of the index arithmetic
  const int64_t n0 = g.red_sizes[0], s0 = g.red_in[0];
  const size_t nd = g.red_sizes.size();
  int64_t idx[64];
  int64_t rem = b, off = 0;
  for (size_t d = 0; d < nd; ++d) {
    idx[d] = rem % g.red_sizes[d];
    rem /= g.red_sizes[d];
    off += idx[d] * g.red_in[d];
  }
  int64_t pos = b;
  while (pos < e) {
    int64_t len = std::min(n0 - idx[0], e - pos);
    f(off, len, s0);
    pos += len;
    if (pos >= e) break;
    off -= idx[0] * s0;
    idx[0] = 0;
    for (size_t d = 1; d < nd; ++d) {
      idx[d]++;
      off += g.red_in[d];
      if (idx[d] < g.red_sizes[d]) break;
      off -= idx[d] * g.red_in[d];
      idx[d] = 0;
    }
  }
}

template <typename Op>
typename Op::acc_t reduce_range(const Op& op, const ReduceGeom& g, const typename Op::in_t* base, int64_t b, int64_t e) {
  using Acc = typename Op::acc_t;
  Acc acc = Op::identity();
  walk_runs(g, b, e, [&](int64_t off, int64_t len, int64_t s) {
    const typename Op::in_t* p = base + off;
    if (s == 1) {
      acc = Op::combine(acc, reduce_contig(op, p, len));
    } else {
      for (int64_t i = 0; i < len; ++i) acc = Op::combine(acc, op.map(p[i * s]));
    }
  });
  return acc;
}

template <typename Op>
void reduce_by_runs(const Op& op, const ReduceGeom& g, const typename Op::in_t* in, typename Op::out_t* out) {
  using Acc = typename Op::acc_t;
  const int64_t nout = g.nout, nred = g.nred;
  const int nt = get_num_threads();
  if (nout >= nt || nout * nred < 2 * kGrainSize || nt == 1) {
    int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(nred, 1));
    parallel_for(0, nout, grain, [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) {
        // An empty reduction (nred == 0) may come with no data at all (in == nullptr): no offset from null.
        Acc acc = reduce_range(op, g, nred == 0 ? in : in + offset_of(o, g.keep_sizes, g.keep_in), 0, nred);
        out[offset_of(o, g.keep_sizes, g.keep_out)] = op.finalize(acc, nred);
      }
    });
    return;
  }
  // Few outputs, long reductions: split each output's range across threads.
  int64_t chunks = std::min<int64_t>(nt, (nred + kGrainSize - 1) / kGrainSize);
  std::vector<Acc> partial(chunks);
  for (int64_t o = 0; o < nout; ++o) {
    const typename Op::in_t* base = in + offset_of(o, g.keep_sizes, g.keep_in);
    parallel_for(0, chunks, 1, [&](int64_t cb, int64_t ce) {
      for (int64_t c = cb; c < ce; ++c) partial[c] = reduce_range(op, g, base, nred * c / chunks, nred * (c + 1) / chunks);
    });
    Acc acc = partial[0];
    for (int64_t c = 1; c < chunks; ++c) acc = Op::combine(acc, static_cast<Acc>(partial[c]));
    out[offset_of(o, g.keep_sizes, g.keep_out)] = op.finalize(acc, nred);
  }
}

template <typename Op>
void reduce_by_columns(const Op& op, const ReduceGeom& g, const typename Op::in_t* in, typename Op::out_t* out) {
  using Acc = typename Op::acc_t;
  using T = typename Op::in_t;
  constexpr int64_t W = 1024 / sizeof(Acc);
  constexpr int64_t kRowGroup = 256;
  const int64_t K = g.keep_sizes[0];
  const int64_t outer = g.nout / K;
  const int64_t nblk = (K + W - 1) / W;
  const int64_t nred = g.nred;
  // The outer kept dims, without the contiguous one.
  DimVector osz(g.keep_sizes.begin() + 1, g.keep_sizes.end());
  DimVector oin(g.keep_in.begin() + 1, g.keep_in.end());
  DimVector oout(g.keep_out.begin() + 1, g.keep_out.end());
  const int64_t ostride = g.keep_out[0];
  int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(W * nred, 1));
  parallel_for(0, outer * nblk, grain, [&](int64_t tb, int64_t te) {
    // Three levels (rows -> groups of kRowGroup rows -> groups of groups) keep
    // a float column sum over 10^5+ rows within a few ulp per level.
    Acc acc[W], tot[W], big[W];
    for (int64_t t = tb; t < te; ++t) {
      int64_t oo = t / nblk, j0 = (t % nblk) * W;
      int64_t w = std::min(W, K - j0);
      const T* base = in + offset_of(oo, osz, oin) + j0;
      for (int64_t j = 0; j < W; ++j) acc[j] = tot[j] = big[j] = Op::identity();
      int64_t rows = 0, groups = 0;
      walk_runs(g, 0, nred, [&](int64_t off, int64_t len, int64_t s) {
        int64_t i = 0;
        if constexpr (Op::kVec && !Op::kAccurate) {
          // max/min: fold four rows together before touching the accumulators,
          // which live in memory (W lanes exceed the register file), so there
          // are four loads per accumulator load/store instead of one.
          // max/min are exact, so only the order among equal-comparing values
          // (signed zeros, NaN payloads) can differ, and it is still fixed.
          if (w == W) {
            for (; i + 4 <= len; i += 4) {
              const T* __restrict r0 = base + off + i * s;
              const T* __restrict r1 = r0 + s;
              const T* __restrict r2 = r1 + s;
              const T* __restrict r3 = r2 + s;
#pragma omp simd
              for (int64_t j = 0; j < W; ++j) {
                Acc x = Op::combine(Op::combine(op.map(r0[j]), op.map(r1[j])), Op::combine(op.map(r2[j]), op.map(r3[j])));
                acc[j] = Op::combine(acc[j], x);
              }
            }
          }
        }
        for (; i < len; ++i) {
          const T* __restrict row = base + off + i * s;
          if (w == W) {
#pragma omp simd
            for (int64_t j = 0; j < W; ++j) acc[j] = Op::combine(acc[j], op.map(row[j]));
          } else {
            for (int64_t j = 0; j < w; ++j) acc[j] = Op::combine(acc[j], op.map(row[j]));
          }
          if (Op::kAccurate && ++rows == kRowGroup) {
            rows = 0;
            for (int64_t j = 0; j < W; ++j) {
              tot[j] = Op::combine(tot[j], acc[j]);
              acc[j] = Op::identity();
            }
            if (++groups == kRowGroup) {
              groups = 0;
              for (int64_t j = 0; j < W; ++j) {
                big[j] = Op::combine(big[j], tot[j]);
                tot[j] = Op::identity();
              }
            }
          }
        }
      });
      typename Op::out_t* o = out + offset_of(oo, osz, oout) + j0 * ostride;
      for (int64_t j = 0; j < w; ++j) o[j * ostride] = op.finalize(Op::combine(big[j], Op::combine(tot[j], acc[j])), nred);
    }
  });
}

template <typename Op>
void run_reduce(const Op& op, const Tensor& in, const Tensor& out, const ReduceGeom& g) {
  const auto* ip = in.data_ptr<typename Op::in_t>();
  auto* op_ = out.data_ptr<typename Op::out_t>();
  if (g.nout == 0) return;
  bool columns = g.red_in[0] != 1 && g.keep_in[0] == 1 && g.keep_sizes[0] > 1 && g.nred > 1;
  if (columns) reduce_by_columns(op, g, ip, op_);
  else reduce_by_runs(op, g, ip, op_);
}

void sum_kernel(const Tensor& in, const Tensor& out, const ReduceGeom& g, const ReduceArgs&) {
  visit_all_dtypes(in.dtype(), [&]<typename T>() { run_reduce(SumOp<T>{}, in, out, g); });
}
void nansum_kernel(const Tensor& in, const Tensor& out, const ReduceGeom& g, const ReduceArgs&) {
  visit_floating(in.dtype(), "nansum", [&]<typename T>() { run_reduce(NanSumOp<T>{}, in, out, g); });
}
void mean_kernel(const Tensor& in, const Tensor& out, const ReduceGeom& g, const ReduceArgs&) {
  VisitFloatAndComplex{}(in.dtype(), [&]<typename T>() { run_reduce(MeanOp<T>{}, in, out, g); });
}
void prod_kernel(const Tensor& in, const Tensor& out, const ReduceGeom& g, const ReduceArgs&) {
  visit_dtype_and_complex(in.dtype(), [&]<typename T>() { run_reduce(ProdOp<T>{}, in, out, g); });
}
void max_kernel(const Tensor& in, const Tensor& out, const ReduceGeom& g, const ReduceArgs&) {
  visit_dtype(in.dtype(), [&]<typename T>() { run_reduce(MinMaxOp<T, true>{}, in, out, g); });
}
void min_kernel(const Tensor& in, const Tensor& out, const ReduceGeom& g, const ReduceArgs&) {
  visit_dtype(in.dtype(), [&]<typename T>() { run_reduce(MinMaxOp<T, false>{}, in, out, g); });
}
void all_kernel(const Tensor& in, const Tensor& out, const ReduceGeom& g, const ReduceArgs&) {
  // all/any read the float8 dtypes too (torch's do; Note [Float8] in core/dtype.h).
  visit_all_dtypes_and_float8(in.dtype(), [&]<typename T>() { run_reduce(AllAnyOp<T, true>{}, in, out, g); });
}
void any_kernel(const Tensor& in, const Tensor& out, const ReduceGeom& g, const ReduceArgs&) {
  visit_all_dtypes_and_float8(in.dtype(), [&]<typename T>() { run_reduce(AllAnyOp<T, false>{}, in, out, g); });
}
void count_nonzero_kernel(const Tensor& in, const Tensor& out, const ReduceGeom& g, const ReduceArgs&) {
  visit_all_dtypes(in.dtype(), [&]<typename T>() { run_reduce(CountNonzeroOp<T>{}, in, out, g); });
}
void norm_kernel(const Tensor& in, const Tensor& out, const ReduceGeom& g, const ReduceArgs& a) {
  visit_floating(in.dtype(), "norm", [&]<typename T>() {
    using Acc = opmath_t<T>;
    Acc p = static_cast<Acc>(a.p);
    if (a.p == 2) run_reduce(NormOp<T, NormMode::L2>{p}, in, out, g);
    else if (a.p == 1) run_reduce(NormOp<T, NormMode::L1>{p}, in, out, g);
    else if (a.p == 0) run_reduce(NormOp<T, NormMode::L0>{p}, in, out, g);
    else if (std::isinf(a.p) && a.p > 0) run_reduce(NormOp<T, NormMode::Inf>{p}, in, out, g);
    else if (std::isinf(a.p)) run_reduce(NormOp<T, NormMode::NegInf>{p}, in, out, g);
    else run_reduce(NormOp<T, NormMode::P>{p}, in, out, g);
  });
}

// ---- argmax / argmin ----------------------------------------------------------

template <bool IsMax, typename A>
STRATA_ALWAYS_INLINE bool better(A x, A best) {
  // Strictly better keeps the first index on ties; a NaN beats any number.
  if constexpr (IsMax) return x > best || (x != x && best == best);
  else return x < best || (x != x && best == best);
}

template <typename T, bool IsMax>
void arg_reduce_impl(const T* in, T* values, int64_t* indices, int64_t outer, int64_t n, int64_t inner) {
  using A = opmath_t<T>;
  if (inner == 1) {
    // Rows: find the extreme value with the vectorized engine, then its first
    // position with a scan that stops early.
    int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(n, 1));
    parallel_for(0, outer, grain, [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) {
        const T* row = in + o * n;
        A m = reduce_contig(MinMaxOp<T, IsMax>{}, row, n);
        int64_t idx = 0;
        if (m != m) {
          while (idx < n && up(row[idx]) == up(row[idx])) ++idx;
        } else {
          while (idx < n && up(row[idx]) != m) ++idx;
        }
        indices[o] = idx;
        if (values) values[o] = static_cast<T>(m);
      }
    });
    return;
  }
  constexpr int64_t W = 64;
  const int64_t nblk = (inner + W - 1) / W;
  int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(W * n, 1));
  parallel_for(0, outer * nblk, grain, [&](int64_t tb, int64_t te) {
    A best[W];
    int64_t bi[W];
    for (int64_t t = tb; t < te; ++t) {
      int64_t o = t / nblk, j0 = (t % nblk) * W;
      int64_t w = std::min(W, inner - j0);
      const T* base = in + o * n * inner + j0;
      for (int64_t j = 0; j < w; ++j) {
        best[j] = up(base[j]);
        bi[j] = 0;
      }
      for (int64_t r = 1; r < n; ++r) {
        const T* row = base + r * inner;
#pragma omp simd
        for (int64_t j = 0; j < w; ++j) {
          A x = up(row[j]);
          bool b = better<IsMax>(x, best[j]);
          best[j] = b ? x : best[j];
          bi[j] = b ? r : bi[j];
        }
      }
      for (int64_t j = 0; j < w; ++j) {
        indices[o * inner + j0 + j] = bi[j];
        if (values) values[o * inner + j0 + j] = static_cast<T>(best[j]);
      }
    }
  });
}

void arg_reduce_kernel(const Tensor& in, const Tensor& values, const Tensor& indices, int64_t outer, int64_t n,
                       int64_t inner, bool is_max) {
  if (outer * inner == 0) return;
  visit_dtype(in.dtype(), [&]<typename T>() {
    const T* ip = in.data_ptr<T>();
    T* vp = values.defined() ? values.data_ptr<T>() : nullptr;
    int64_t* xp = indices.data_ptr<int64_t>();
    if (is_max) arg_reduce_impl<T, true>(ip, vp, xp, outer, n, inner);
    else arg_reduce_impl<T, false>(ip, vp, xp, outer, n, inner);
  });
}

}  // namespace
}  // namespace STRATA_CPU_NS
}  // namespace cpu

STRATA_REGISTER_CPU_KERNEL(reduce_sum_stub, cpu::sum_kernel);
STRATA_REGISTER_CPU_KERNEL(reduce_nansum_stub, cpu::nansum_kernel);
STRATA_REGISTER_CPU_KERNEL(reduce_mean_stub, cpu::mean_kernel);
STRATA_REGISTER_CPU_KERNEL(reduce_prod_stub, cpu::prod_kernel);
STRATA_REGISTER_CPU_KERNEL(reduce_max_stub, cpu::max_kernel);
STRATA_REGISTER_CPU_KERNEL(reduce_min_stub, cpu::min_kernel);
STRATA_REGISTER_CPU_KERNEL(reduce_all_stub, cpu::all_kernel);
STRATA_REGISTER_CPU_KERNEL(reduce_any_stub, cpu::any_kernel);
STRATA_REGISTER_CPU_KERNEL(reduce_count_nonzero_stub, cpu::count_nonzero_kernel);
STRATA_REGISTER_CPU_KERNEL(reduce_norm_stub, cpu::norm_kernel);
STRATA_REGISTER_CPU_KERNEL(arg_reduce_stub, cpu::arg_reduce_kernel);

}  // namespace strata
