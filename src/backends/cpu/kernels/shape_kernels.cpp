// CPU kernels of the shape/index ops (tril/triu, gather, scatter, nonzero,
// masked_select). Kernels that only move elements are instantiated per element
// size. Bad indices are recorded inside the parallel loops and raised after
// them (exceptions must not cross an OpenMP region).
#include <atomic>
#include <cstring>
#include <vector>

#include "backends/cpu/kernels/nd_iter.h"
#include "backends/cpu/loops.h"
#include "core/shape.h"
#include "ops/shape_stubs.h"

namespace strata {
namespace cpu {
inline namespace STRATA_CPU_NS {
namespace {

template <int K>
void set_operand(NdGeom<K>& g, int k, const Tensor& t) {
  const int64_t es = static_cast<int64_t>(t.element_size());
  for (int d = 0; d < g.nd; ++d) g.strides[k][d] = t.stride(d) * es;
}

// The first out-of-range index seen by any thread.
struct BadIndex {
  std::atomic<bool> set{false};
  int64_t value = 0;
  void record(int64_t v) {
    bool expected = false;
    if (set.compare_exchange_strong(expected, true)) value = v;
  }
  bool any() const { return set.load(std::memory_order_relaxed); }
};

void tri_kernel(const Tensor& out, const Tensor& self, int64_t diagonal, bool lower) {
  NdGeom<2> g;
  g.nd = static_cast<int>(out.dim());
  STRATA_CHECK(g.nd <= kMaxIterDims, lower ? "tril" : "triu", ": too many dimensions");
  for (int d = 0; d < g.nd; ++d) g.sizes[d] = out.size(d);
  set_operand(g, 0, out);
  set_operand(g, 1, self);
  char* ob = static_cast<char*>(out.data_ptr());
  const char* ib = static_cast<const char*>(self.data_ptr());
  const bool same = ob == ib && g.strides[0][g.nd - 1] == g.strides[1][g.nd - 1];
  const int r = g.nd - 2, c = g.nd - 1;
  visit_elem_size(out.element_size(), [&]<typename E>() {
    const int64_t os = g.strides[0][c], is = g.strides[1][c];
    parallel_for(0, g.numel(), kGrainSize, [&](int64_t b, int64_t e) {
      for_each_run_nd(g, b, e, [&](const int64_t* off, const int64_t* idx, int64_t n) {
        char* o = ob + off[0];
        const char* in = ib + off[1];
        const int64_t row = idx[r], col0 = idx[c];
        // Columns [0, split) are kept by tril (dropped by triu), clamped to the run.
        int64_t split = lower ? row + diagonal + 1 : row + diagonal;
        split = std::clamp<int64_t>(split - col0, 0, n);
        int64_t keep_b = lower ? 0 : split, keep_e = lower ? split : n;
        for (int64_t j = 0; j < n; ++j) {
          bool keep = j >= keep_b && j < keep_e;
          if (keep) {
            if (!same) *reinterpret_cast<E*>(o + j * os) = *reinterpret_cast<const E*>(in + j * is);
          } else {
            *reinterpret_cast<E*>(o + j * os) = E(0);
          }
        }
      });
    });
  });
}

// Note [Gather by rows]
// index_select (and any gather whose index varies along `dim` only) over a
// self whose dims after `dim` form one contiguous block, into a contiguous
// out: each output row is one index load and one block copy, instead of an
// index load and a strided element copy per element. Returns false when the
// operands do not have that form (the element loop handles them).
bool gather_rows(const Tensor& out, const Tensor& self, int64_t dim, const Tensor& index, bool wrap, BadIndex& bad) {
  const int64_t nd = out.dim();
  if (!out.is_contiguous()) return false;
  int64_t inner = 1;
  for (int64_t d = nd - 1; d >= 0; --d) {
    if (d == dim) continue;
    if (out.size(d) != self.size(d) || (index.size(d) != 1 && index.stride(d) != 0)) return false;
    if (d > dim) {
      if (self.size(d) != 1 && self.stride(d) != inner) return false;
      inner *= self.size(d);
    }
  }
  // Narrow rows: the element loop, which runs along the contiguous output, is faster.
  if (inner * static_cast<int64_t>(self.element_size()) < 32) return false;
  const int64_t k = out.size(dim), dim_size = self.size(dim);
  const int64_t es = static_cast<int64_t>(self.element_size());
  const int64_t dim_stride = self.stride(dim) * es, row_bytes = inner * es;
  const int64_t istride = index.stride(dim) * static_cast<int64_t>(index.element_size());
  // Byte offsets in self of the outer positions (dims before `dim`).
  int64_t outer = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= out.size(d);
  std::vector<int64_t> outer_off(outer, 0);
  for (int64_t o = 0; o < outer; ++o) {
    int64_t rem = o, off = 0;
    for (int64_t d = dim - 1; d >= 0; --d) {
      off += (rem % out.size(d)) * self.stride(d) * es;
      rem /= out.size(d);
    }
    outer_off[o] = off;
  }
  const bool is64 = index.dtype() == ScalarType::Int64;
  char* ob = static_cast<char*>(out.data_ptr());
  const char* sb = static_cast<const char*>(self.data_ptr());
  const char* ib = static_cast<const char*>(index.data_ptr());
  {
    const int64_t grain = std::max<int64_t>(1, kGrainSize / 4 / std::max<int64_t>(inner, 1));
    parallel_for(0, outer * k, grain, [&](int64_t b, int64_t e) {
      int64_t o = b / k, j = b - o * k;
      for (int64_t r = b; r < e; ++r, ++j) {
        if (j == k) {
          j = 0;
          ++o;
        }
        int64_t x = load_index(ib + j * istride, is64);
        if (wrap && x < 0) x += dim_size;
        if (__builtin_expect(x < 0 || x >= dim_size, 0)) {
          bad.record(load_index(ib + j * istride, is64));
          return;
        }
        std::memcpy(ob + r * row_bytes, sb + outer_off[o] + x * dim_stride, static_cast<size_t>(row_bytes));
      }
    });
  }
  return true;
}

// Note [Gather along the last dim]
// index_select along the last dim into a contiguous out: the index is loaded,
// wrapped and checked once (not once per output element), then every output
// row is a contiguous loop o[j] = row[ix[j]] with a typed element copy.
bool gather_last_dim(const Tensor& out, const Tensor& self, int64_t dim, const Tensor& index, bool wrap,
                     BadIndex& bad) {
  const int64_t nd = out.dim();
  if (dim != nd - 1 || !out.is_contiguous()) return false;
  for (int64_t d = 0; d < dim; ++d) {
    if (out.size(d) != self.size(d) || (index.size(d) != 1 && index.stride(d) != 0)) return false;
  }
  const int64_t k = out.size(dim), dim_size = self.size(dim);
  if (k == 0) return true;
  const int64_t rows = out.numel() / k;
  const bool is64 = index.dtype() == ScalarType::Int64;
  const int64_t istride = index.stride(dim) * static_cast<int64_t>(index.element_size());
  const char* ib = static_cast<const char*>(index.data_ptr());
  std::vector<int64_t> ix(static_cast<size_t>(k));
  for (int64_t j = 0; j < k; ++j) {
    int64_t x = load_index(ib + j * istride, is64);
    if (wrap && x < 0) x += dim_size;
    if (x < 0 || x >= dim_size) {
      bad.record(load_index(ib + j * istride, is64));
      return true;
    }
    ix[j] = x * self.stride(dim);
  }
  char* ob = static_cast<char*>(out.data_ptr());
  const char* sb = static_cast<const char*>(self.data_ptr());
  const int64_t* xp = ix.data();
  visit_elem_size(out.element_size(), [&]<typename E>() {
    const int64_t grain = std::max<int64_t>(1, kGrainSize / 4 / k);
    parallel_for(0, rows, grain, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        int64_t rem = r, off = 0;  // element offset in self of row r
        for (int64_t d = dim - 1; d >= 0; --d) {
          off += (rem % out.size(d)) * self.stride(d);
          rem /= out.size(d);
        }
        E* o = reinterpret_cast<E*>(ob) + r * k;
        const E* s = reinterpret_cast<const E*>(sb) + off;
        for (int64_t j = 0; j < k; ++j) o[j] = s[xp[j]];
      }
    });
  });
  return true;
}

void gather_kernel(const Tensor& out, const Tensor& self, int64_t dim, const Tensor& index, bool wrap,
                   const char* op) {
  {
    BadIndex bad;
    if (gather_last_dim(out, self, dim, index, wrap, bad)) {
      STRATA_CHECK_INDEX(!bad.any(), op, ": index ", bad.value, " is out of bounds for dimension ", dim,
                         " with size ", self.size(dim));
      return;
    }
  }
  {
    BadIndex bad;
    if (gather_rows(out, self, dim, index, wrap, bad)) {
      STRATA_CHECK_INDEX(!bad.any(), op, ": index ", bad.value, " is out of bounds for dimension ", dim,
                         " with size ", self.size(dim));
      return;
    }
  }
  NdGeom<3> g;
  g.nd = static_cast<int>(out.dim());
  STRATA_CHECK(g.nd <= kMaxIterDims, op, ": too many dimensions");
  for (int d = 0; d < g.nd; ++d) g.sizes[d] = out.size(d);
  set_operand(g, 0, out);
  set_operand(g, 1, self);
  set_operand(g, 2, index);
  const int64_t es = static_cast<int64_t>(self.element_size());
  const int64_t dim_stride = self.stride(dim) * es, dim_size = self.size(dim);
  g.strides[1][dim] = 0;
  const bool is64 = index.dtype() == ScalarType::Int64;
  char* ob = static_cast<char*>(out.data_ptr());
  const char* sb = static_cast<const char*>(self.data_ptr());
  const char* ib = static_cast<const char*>(index.data_ptr());
  const int last = g.nd - 1;
  BadIndex bad;
  visit_elem_size(out.element_size(), [&]<typename E>() {
    const int64_t os = g.strides[0][last], ss = g.strides[1][last], is = g.strides[2][last];
    parallel_for(0, g.numel(), kGrainSize / 4, [&](int64_t b, int64_t e) {
      for_each_run_nd(g, b, e, [&](const int64_t* off, const int64_t*, int64_t n) {
        if (bad.any()) return;
        char* o = ob + off[0];
        const char* s = sb + off[1];
        const char* ip = ib + off[2];
        for (int64_t j = 0; j < n; ++j) {
          int64_t x = load_index(ip + j * is, is64);
          if (wrap && x < 0) x += dim_size;
          if (__builtin_expect(x < 0 || x >= dim_size, 0)) {
            bad.record(load_index(ip + j * is, is64));
            return;
          }
          *reinterpret_cast<E*>(o + j * os) = *reinterpret_cast<const E*>(s + j * ss + x * dim_stride);
        }
      });
    });
  });
  STRATA_CHECK_INDEX(!bad.any(), op, ": index ", bad.value, " is out of bounds for dimension ", dim, " with size ",
                     dim_size);
}

namespace {

// index_add's shape of scatter-add: the index varies along `dim` only (stride 0
// elsewhere) and out/src are contiguous, so the work is "add slice j of src into
// slice index[j] of out". Walking slices row by row keeps both sides streaming
// (the generic loop below walks `dim` innermost, a strided column walk that was
// 2.5-26x slower than torch on GCN-style scatters). Threads split the slice's
// columns, so each output element is still written by one thread, in index order.
bool scatter_add_slices(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src,
                        const Scalar& value, BadIndex& bad) {
  const int64_t nd = index.dim();
  if (nd == 0 || !out.is_contiguous() || !src.is_contiguous()) return false;
  for (int64_t d = 0; d < nd; ++d)
    if (d != dim && index.stride(d) != 0) return false;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= index.size(d);
  for (int64_t d = dim + 1; d < nd; ++d) inner *= index.size(d);
  if (inner < 8) return false;  // short rows: the generic loop is as good
  const int64_t L = index.size(dim), D = out.size(dim);
  const int64_t istride = index.stride(dim) * static_cast<int64_t>(index.element_size());
  const bool is64 = index.dtype() == ScalarType::Int64;
  const char* ib = static_cast<const char*>(index.data_ptr());
  for (int64_t j = 0; j < L; ++j) {  // validate once, before any write
    int64_t x = load_index(ib + j * istride, is64);
    if (x < 0 || x >= D) {
      bad.record(x);
      return true;
    }
  }
  visit_dtype(out.dtype(), [&]<typename T>() {
    using O = opmath_t<T>;
    const O alpha = static_cast<O>(value.to<T>());
    const bool unit = value.to_double() == 1.0;
    T* ob = static_cast<T*>(out.data_ptr());
    const T* sb = static_cast<const T*>(src.data_ptr());
    const int64_t chunk = std::max<int64_t>(64, std::min<int64_t>(inner, 1024));
    const int64_t per_outer = (inner + chunk - 1) / chunk;
    const int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(L * chunk, 1));
    parallel_for(0, outer * per_outer, grain, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        const int64_t o = t / per_outer, c0 = (t % per_outer) * chunk, c1 = std::min(inner, c0 + chunk);
        T* obase = ob + o * D * inner;
        const T* sbase = sb + o * L * inner;
        for (int64_t j = 0; j < L; ++j) {
          T* dst = obase + load_index(ib + j * istride, is64) * inner;
          const T* s = sbase + j * inner;
          if (unit) {
            for (int64_t c = c0; c < c1; ++c) dst[c] = static_cast<T>(static_cast<O>(dst[c]) + static_cast<O>(s[c]));
          } else {
            for (int64_t c = c0; c < c1; ++c)
              dst[c] = static_cast<T>(static_cast<O>(dst[c]) + static_cast<O>(s[c]) * alpha);
          }
        }
      }
    });
  });
  return true;
}

}  // namespace

// Iterates index's positions with `dim` moved innermost, so that one thread
// owns every write that can land on a given output line (no races for add,
// and duplicates resolve in index order).
void scatter_kernel(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src, ScatterMode mode,
                    const Scalar& value, const char* op) {
  if (mode == ScatterMode::Add) {
    BadIndex bad;
    if (scatter_add_slices(out, dim, index, src, value, bad)) {
      STRATA_CHECK_INDEX(!bad.any(), op, ": index ", bad.value, " is out of bounds for dimension ", dim,
                         " with size ", out.size(dim));
      return;
    }
  }
  const int nd = static_cast<int>(index.dim());
  STRATA_CHECK(nd <= kMaxIterDims, op, ": too many dimensions");
  NdGeom<3> g;
  g.nd = nd;
  const bool has_src = mode != ScatterMode::Value;
  int p = 0;
  auto put = [&](int d) {
    g.sizes[p] = index.size(d);
    g.strides[0][p] = d == dim ? 0 : out.stride(d) * static_cast<int64_t>(out.element_size());
    g.strides[1][p] = index.stride(d) * static_cast<int64_t>(index.element_size());
    g.strides[2][p] = has_src ? src.stride(d) * static_cast<int64_t>(src.element_size()) : 0;
    p++;
  };
  for (int d = 0; d < nd; ++d)
    if (d != dim) put(d);
  put(static_cast<int>(dim));
  const int64_t L = index.size(dim);
  const int64_t M = L == 0 ? 0 : g.numel() / L;
  const int64_t dim_stride = out.stride(dim) * static_cast<int64_t>(out.element_size()), dim_size = out.size(dim);
  const bool is64 = index.dtype() == ScalarType::Int64;
  char* ob = static_cast<char*>(out.data_ptr());
  const char* ib = static_cast<const char*>(index.data_ptr());
  const char* sb = has_src ? static_cast<const char*>(src.data_ptr()) : nullptr;
  const int64_t is = g.strides[1][nd - 1], ss = g.strides[2][nd - 1];
  BadIndex bad;
  auto drive = [&](auto&& store) {
    parallel_for(0, M, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(L, 1)), [&](int64_t mb, int64_t me) {
      for_each_run_nd(g, mb * L, me * L, [&](const int64_t* off, const int64_t*, int64_t n) {
        if (bad.any()) return;
        char* o = ob + off[0];
        const char* ip = ib + off[1];
        const char* s = sb ? sb + off[2] : nullptr;
        for (int64_t j = 0; j < n; ++j) {
          int64_t x = load_index(ip + j * is, is64);
          if (__builtin_expect(x < 0 || x >= dim_size, 0)) {
            bad.record(x);
            return;
          }
          store(o + x * dim_stride, s ? s + j * ss : nullptr);
        }
      });
    });
  };
  if (mode == ScatterMode::Add) {
    visit_dtype(out.dtype(), [&]<typename T>() {
      using O = opmath_t<T>;
      const O alpha = static_cast<O>(value.to<T>());
      const bool unit = value.to_double() == 1.0;
      drive([&](char* dst, const char* s) {
        T& d = *reinterpret_cast<T*>(dst);
        O v = static_cast<O>(*reinterpret_cast<const T*>(s));
        d = static_cast<T>(static_cast<O>(d) + (unit ? v : static_cast<O>(v * alpha)));
      });
    });
  } else {
    visit_elem_size(out.element_size(), [&]<typename E>() {
      if (mode == ScatterMode::Src) {
        drive([](char* dst, const char* s) { *reinterpret_cast<E*>(dst) = *reinterpret_cast<const E*>(s); });
      } else {
        E bits{};
        visit_dtype(out.dtype(), [&]<typename T>() {
          if constexpr (sizeof(T) == sizeof(E)) {
            T v = value.to<T>();
            std::memcpy(&bits, &v, sizeof(T));
          }
        });
        drive([bits](char* dst, const char*) { *reinterpret_cast<E*>(dst) = bits; });
      }
    });
  }
  STRATA_CHECK_INDEX(!bad.any(), op, ": index ", bad.value, " is out of bounds for dimension ", dim, " with size ",
                     dim_size);
}

// Splits [0, n) into one piece per thread (at least `grain` long each).
int64_t num_pieces(int64_t n, int64_t grain) {
  return std::max<int64_t>(1, std::min<int64_t>(get_num_threads(), (n + grain - 1) / grain));
}

template <typename T>
STRATA_ALWAYS_INLINE bool is_nonzero(T v) {
  return static_cast<opmath_t<T>>(v) != opmath_t<T>(0);
}

Tensor nonzero_kernel(const Tensor& self) {
  const int64_t n = self.numel();
  const int nd = static_cast<int>(self.dim());
  const int64_t pieces = num_pieces(n, kGrainSize);
  const int64_t per = (n + pieces - 1) / pieces;
  std::vector<int64_t> counts(pieces + 1, 0);
  const std::vector<int64_t> sizes(self.sizes().begin(), self.sizes().end());
  return visit_dtype(self.dtype(), [&]<typename T>() {
    const T* in = self.data_ptr<T>();
    parallel_for(0, pieces, 1, [&](int64_t pb, int64_t pe) {
      for (int64_t piece = pb; piece < pe; ++piece) {
        int64_t b = piece * per, e = std::min(n, b + per), c = 0;
        for (int64_t i = b; i < e; ++i) c += is_nonzero(in[i]);
        counts[piece + 1] = c;
      }
    });
    for (int64_t i = 0; i < pieces; ++i) counts[i + 1] += counts[i];
    std::vector<int64_t> shape{counts[pieces], nd};
    Tensor out = empty_tensor(shape, ScalarType::Int64, self.device());
    int64_t* o = out.data_ptr<int64_t>();
    parallel_for(0, pieces, 1, [&](int64_t pb, int64_t pe) {
      std::vector<int64_t> idx(nd);
      for (int64_t piece = pb; piece < pe; ++piece) {
        int64_t b = piece * per, e = std::min(n, b + per);
        if (b >= e) continue;
        int64_t rem = b;
        for (int d = nd - 1; d >= 0; --d) {
          idx[d] = rem % sizes[d];
          rem /= sizes[d];
        }
        int64_t* w = o + counts[piece] * nd;
        for (int64_t i = b; i < e; ++i) {
          if (is_nonzero(in[i])) {
            for (int d = 0; d < nd; ++d) w[d] = idx[d];
            w += nd;
          }
          for (int d = nd - 1; d >= 0; --d) {
            if (++idx[d] < sizes[d]) break;
            idx[d] = 0;
          }
        }
      }
    });
    return out;
  });
}

Tensor masked_select_kernel(const Tensor& self, const Tensor& mask) {
  const int64_t n = self.numel();
  const int64_t pieces = num_pieces(n, kGrainSize);
  const int64_t per = (n + pieces - 1) / pieces;
  std::vector<int64_t> counts(pieces + 1, 0);
  const bool* m = mask.data_ptr<bool>();
  parallel_for(0, pieces, 1, [&](int64_t pb, int64_t pe) {
    for (int64_t piece = pb; piece < pe; ++piece) {
      int64_t b = piece * per, e = std::min(n, b + per), c = 0;
      for (int64_t i = b; i < e; ++i) c += m[i];
      counts[piece + 1] = c;
    }
  });
  for (int64_t i = 0; i < pieces; ++i) counts[i + 1] += counts[i];
  std::vector<int64_t> shape{counts[pieces]};
  Tensor out = empty_tensor(shape, self.dtype(), self.device());
  visit_elem_size(self.element_size(), [&]<typename E>() {
    const E* in = static_cast<const E*>(self.data_ptr());
    E* o = static_cast<E*>(out.data_ptr());
    parallel_for(0, pieces, 1, [&](int64_t pb, int64_t pe) {
      for (int64_t piece = pb; piece < pe; ++piece) {
        int64_t b = piece * per, e = std::min(n, b + per);
        E* w = o + counts[piece];
        for (int64_t i = b; i < e; ++i)
          if (m[i]) *w++ = in[i];
      }
    });
  });
  return out;
}

}  // namespace
}  // namespace STRATA_CPU_NS
}  // namespace cpu

STRATA_REGISTER_CPU_KERNEL(tri_stub, cpu::tri_kernel);
STRATA_REGISTER_CPU_KERNEL(gather_stub, cpu::gather_kernel);
STRATA_REGISTER_CPU_KERNEL(scatter_stub, cpu::scatter_kernel);
STRATA_REGISTER_CPU_KERNEL(nonzero_stub, cpu::nonzero_kernel);
STRATA_REGISTER_CPU_KERNEL(masked_select_stub, cpu::masked_select_kernel);

}  // namespace strata
