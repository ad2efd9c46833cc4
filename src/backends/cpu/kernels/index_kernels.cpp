// Gather / scatter loops of advanced indexing, and mask -> coordinates.
// Compiled once per ISA level. The copy loops depend only on the element
// size, so every dtype shares four instantiations; only accumulation needs
// the real type.
#include <atomic>
#include <cstring>

#include "backends/cpu/loops.h"
#include "ops/index_kernel.h"

namespace strata {
namespace cpu {
inline namespace STRATA_CPU_NS {
namespace {

// Element offsets of every position of an N-d grid under some strides,
// row-major (the last dim fastest).
void grid_offsets(const DimVector& sizes, const DimVector& strides, int64_t* out, int64_t n) {
  const int64_t nd = static_cast<int64_t>(sizes.size());
  parallel_for(0, n, kGrainSize, [&](int64_t begin, int64_t end) {
    int64_t idx[64];
    int64_t rem = begin, off = 0;
    for (int64_t d = nd - 1; d >= 0; --d) {
      idx[d] = rem % sizes[d];
      rem /= sizes[d];
      off += idx[d] * strides[d];
    }
    for (int64_t i = begin; i < end; ++i) {
      out[i] = off;
      for (int64_t d = nd - 1; d >= 0; --d) {
        off += strides[d];
        if (++idx[d] < sizes[d]) break;
        off -= idx[d] * strides[d];
        idx[d] = 0;
      }
    }
  });
}

// Post dims, with neighbours merged where both operands allow it and size-1
// dims dropped, so that the common cases become a single strided run.
struct Post {
  DimVector sizes, s_self, s_other;  // innermost last
  int64_t numel = 1;
};

Post coalesce_post(const IndexKernelArgs& a) {
  Post p;
  for (size_t i = 0; i < a.post_sizes.size(); ++i) {
    int64_t sz = a.post_sizes[i];
    p.numel *= sz;
    if (sz == 1) continue;
    if (!p.sizes.empty() && p.s_self.back() == a.post_self_strides[i] * sz &&
        p.s_other.back() == a.post_other_strides[i] * sz) {
      p.sizes.back() *= sz;
      p.s_self.back() = a.post_self_strides[i];
      p.s_other.back() = a.post_other_strides[i];
      continue;
    }
    p.sizes.push_back(sz);
    p.s_self.push_back(a.post_self_strides[i]);
    p.s_other.push_back(a.post_other_strides[i]);
  }
  return p;
}

// Calls f(self_off, other_off, n, inner_self_stride, inner_other_stride) for
// runs covering post positions [r, r + cnt).
template <typename F>
STRATA_ALWAYS_INLINE void for_post_runs(const Post& p, int64_t r, int64_t cnt, F&& f) {
  const int64_t nd = static_cast<int64_t>(p.sizes.size());
  if (nd == 0) {
    f(int64_t(0), int64_t(0), cnt, int64_t(0), int64_t(0));
    return;
  }
  if (nd == 1) {
    f(r * p.s_self[0], r * p.s_other[0], cnt, p.s_self[0], p.s_other[0]);
    return;
  }
  int64_t idx[64];
  int64_t rem = r, os = 0, oo = 0;
  for (int64_t d = nd - 1; d >= 0; --d) {
    idx[d] = rem % p.sizes[d];
    rem /= p.sizes[d];
    os += idx[d] * p.s_self[d];
    oo += idx[d] * p.s_other[d];
  }
  const int64_t inner = p.sizes[nd - 1];
  while (cnt > 0) {
    int64_t n = std::min(cnt, inner - idx[nd - 1]);
    f(os, oo, n, p.s_self[nd - 1], p.s_other[nd - 1]);
    cnt -= n;
    // Step to the start of the next inner run.
    os += n * p.s_self[nd - 1];
    oo += n * p.s_other[nd - 1];
    idx[nd - 1] += n;
    for (int64_t d = nd - 1; d > 0 && idx[d] == p.sizes[d]; --d) {
      os -= idx[d] * p.s_self[d];
      oo -= idx[d] * p.s_other[d];
      idx[d] = 0;
      idx[d - 1]++;
      os += p.s_self[d - 1];
      oo += p.s_other[d - 1];
    }
  }
}

template <int ES>
struct Bits;
template <>
struct Bits<1> {
  using type = uint8_t;
};
template <>
struct Bits<2> {
  using type = uint16_t;
};
template <>
struct Bits<4> {
  using type = uint32_t;
};
template <>
struct Bits<8> {
  using type = uint64_t;
};
template <>
struct Bits<16> {  // complex128
  struct type {
    uint64_t lo, hi;
  };
};

// Block copy: per (pre, B) block, between self + self_blk[j] and
// other + other_blk[j], over the post positions.
template <typename E>
void copy_blocks(bool gather, E* self, E* other, const int64_t* self_pre, const int64_t* other_pre, int64_t nb,
                 const int64_t* self_b, const int64_t* other_b, int64_t nblocks, const Post& post, bool ordered) {
  const int64_t nr = post.numel;
  const int64_t total = nblocks * nr;
  // ordered: one thread, blocks in index order (IndexKernelArgs::ordered).
  auto parallel_for = [ordered](int64_t begin, int64_t end, int64_t grain, const auto& f) {
    if (ordered) {
      if (begin < end) f(begin, end);
    } else {
      ::strata::parallel_for(begin, end, grain, f);
    }
  };
  if (nr == 1) {
    // One element per block: the x[idx] / x[mask] case.
    parallel_for(0, total, kGrainSize / 4, [&](int64_t begin, int64_t end) {
      for (int64_t j = begin; j < end; ++j) {
        int64_t p = j / nb, b = j - p * nb;
        E* s = self + self_pre[p] + self_b[b];
        E* o = other + other_pre[p] + other_b[b];
        if (gather) *o = *s;
        else *s = *o;
      }
    });
    return;
  }
  parallel_for(0, total, kGrainSize, [&](int64_t begin, int64_t end) {
    int64_t blk = begin / nr, r = begin - blk * nr, pos = begin;
    while (pos < end) {
      int64_t p = blk / nb, b = blk - p * nb;
      E* s0 = self + self_pre[p] + self_b[b];
      E* o0 = other + other_pre[p] + other_b[b];
      int64_t cnt = std::min(nr - r, end - pos);
      for_post_runs(post, r, cnt, [&](int64_t os, int64_t oo, int64_t n, int64_t ss, int64_t so) {
        E* s = s0 + os;
        E* o = o0 + oo;
        if (gather) {
          if (ss == 1 && so == 1) std::memcpy(o, s, n * sizeof(E));
          else
            for (int64_t i = 0; i < n; ++i) o[i * so] = s[i * ss];
        } else {
          if (ss == 1 && so == 1) std::memcpy(s, o, n * sizeof(E));
          else
            for (int64_t i = 0; i < n; ++i) s[i * ss] = o[i * so];
        }
      });
      pos += cnt;
      r = 0;
      blk++;
    }
  });
}

// Accumulation must add duplicates one after the other: threads split the
// post positions (distinct memory per thread), never the blocks.
template <typename T>
void accumulate_blocks(T* self, const T* other, const int64_t* self_pre, const int64_t* other_pre, int64_t nb,
                       const int64_t* self_b, const int64_t* other_b, int64_t nblocks, const Post& post) {
  const int64_t nr = post.numel;
  int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(nblocks, 1));
  parallel_for(0, nr, grain, [&](int64_t r0, int64_t r1) {
    for (int64_t blk = 0; blk < nblocks; ++blk) {
      int64_t p = blk / nb, b = blk - p * nb;
      T* s0 = self + self_pre[p] + self_b[b];
      const T* o0 = other + other_pre[p] + other_b[b];
      for_post_runs(post, r0, r1 - r0, [&](int64_t os, int64_t oo, int64_t n, int64_t ss, int64_t so) {
        T* s = s0 + os;
        const T* o = o0 + oo;
        for (int64_t i = 0; i < n; ++i) {
          s[i * ss] = static_cast<T>(static_cast<opmath_t<T>>(s[i * ss]) + static_cast<opmath_t<T>>(o[i * so]));
        }
      });
    }
  });
}

int64_t prod(const DimVector& v) {
  int64_t n = 1;
  for (int64_t s : v) n *= s;
  return n;
}

[[noreturn]] void throw_out_of_bounds(const IndexKernelArgs& a, int64_t b) {
  for (size_t j = 0; j < a.idx.size(); ++j) {
    int64_t v = a.idx[j][b], size = a.idx_sizes[j];
    if (v < -size || v >= size) {
      throw IndexError(str("index ", v, " is out of bounds for dimension ", a.first_dim + int64_t(j), " with size ",
                           size));
    }
  }
  throw IndexError(str(a.op, ": index out of bounds"));
}

void index_kernel(const IndexKernelArgs& a) {
  const int64_t nb = prod(a.b_sizes);
  const int64_t npre = prod(a.pre_sizes);
  const int64_t k = static_cast<int64_t>(a.idx.size());
  const Post post = coalesce_post(a);
  if (post.numel == 1 && npre == 1 && a.b_sizes.size() <= 1 && a.mode != IndexKernelArgs::Mode::Accumulate) {
    // x[idx], x[mask] and their writes: one element per index position, so
    // compute each offset and move the element in one pass.
    const bool gather = a.mode == IndexKernelArgs::Mode::Gather;
    const int64_t ob = a.b_sizes.empty() ? 0 : a.b_other_strides[0];
    auto run = [&]<int ES>() {
      using E = typename Bits<ES>::type;
      E* self = reinterpret_cast<E*>(a.self);
      E* other = reinterpret_cast<E*>(a.other);
      std::atomic<int64_t> bad{nb};
      // A write validates every index before touching self; a read checks as it goes.
      auto pass = [&](bool move) {
        // An ordered write runs on one thread: duplicates are written in index order.
        const int64_t grain = !gather && move && a.ordered ? std::max<int64_t>(nb, 1) : kGrainSize / 4;
        parallel_for(0, nb, grain, [&](int64_t begin, int64_t end) {
          for (int64_t b = begin; b < end; ++b) {
            int64_t off = 0;
            bool ok = true;
            for (int64_t j = 0; j < k; ++j) {
              int64_t v = a.idx[j][b], size = a.idx_sizes[j];
              const bool in = v >= -size && v < size;
              ok &= in;
              // An out-of-range index adds nothing: its product with the stride may overflow (fuzz_indexing).
              off += (in ? (v < 0 ? v + size : v) : 0) * a.idx_strides[j];
            }
            if (!ok) {
              int64_t cur = bad.load();
              while (b < cur && !bad.compare_exchange_weak(cur, b)) {
              }
              break;
            }
            if (!move) continue;
            if (gather) other[b * ob] = self[off];
            else self[off] = other[b * ob];
          }
        });
      };
      if (!gather) pass(false);
      if (bad.load() == nb) pass(true);
      return bad.load();
    };
    int64_t b = nb;
    switch (element_size(a.dtype)) {
      case 1: b = run.template operator()<1>(); break;
      case 2: b = run.template operator()<2>(); break;
      case 4: b = run.template operator()<4>(); break;
      case 8: b = run.template operator()<8>(); break;
      case 16: b = run.template operator()<16>(); break;
      default: throw NotImplementedError(str(a.op, ": unsupported element size ", element_size(a.dtype)));
    }
    if (b < nb) throw_out_of_bounds(a, b);
    return;
  }
  // Offsets into self of every B position, checking bounds first (no throw
  // inside the parallel region: record the first bad position instead).
  std::vector<int64_t> self_b(nb);
  std::atomic<int64_t> bad{nb};
  parallel_for(0, nb, kGrainSize / std::max<int64_t>(k, 1), [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      int64_t off = 0;
      for (int64_t j = 0; j < k; ++j) {
        int64_t v = a.idx[j][b], size = a.idx_sizes[j];
        if (v < -size || v >= size) {
          int64_t cur = bad.load();
          while (b < cur && !bad.compare_exchange_weak(cur, b)) {
          }
          break;
        }
        off += (v < 0 ? v + size : v) * a.idx_strides[j];
      }
      self_b[b] = off;
    }
  });
  if (int64_t b = bad.load(); b < nb) throw_out_of_bounds(a, b);
  if (npre * nb * post.numel == 0) return;
  std::vector<int64_t> other_b(nb), self_pre(npre), other_pre(npre);
  grid_offsets(a.b_sizes, a.b_other_strides, other_b.data(), nb);
  grid_offsets(a.pre_sizes, a.pre_self_strides, self_pre.data(), npre);
  grid_offsets(a.pre_sizes, a.pre_other_strides, other_pre.data(), npre);
  const int64_t nblocks = npre * nb;
  if (a.mode == IndexKernelArgs::Mode::Accumulate) {
    visit_dtype(a.dtype, [&]<typename T>() {
      accumulate_blocks<T>(reinterpret_cast<T*>(a.self), reinterpret_cast<const T*>(a.other), self_pre.data(),
                           other_pre.data(), nb, self_b.data(), other_b.data(), nblocks, post);
    });
    return;
  }
  const bool gather = a.mode == IndexKernelArgs::Mode::Gather;
  auto run = [&]<int ES>() {
    using E = typename Bits<ES>::type;
    copy_blocks<E>(gather, reinterpret_cast<E*>(a.self), reinterpret_cast<E*>(a.other), self_pre.data(),
                   other_pre.data(), nb, self_b.data(), other_b.data(), nblocks, post, a.ordered && !gather);
  };
  switch (element_size(a.dtype)) {
    case 1: run.template operator()<1>(); break;
    case 2: run.template operator()<2>(); break;
    case 4: run.template operator()<4>(); break;
    case 8: run.template operator()<8>(); break;
    case 16: run.template operator()<16>(); break;
    default: throw NotImplementedError(str(a.op, ": unsupported element size ", element_size(a.dtype)));
  }
}

// Calls f(offset, stride, n, idx) for runs along the mask's last dim that
// cover linear positions [begin, end); idx holds the run start's coordinates.
template <typename F>
void mask_runs(const DimVector& sizes, const DimVector& strides, int64_t begin, int64_t end, F&& f) {
  const int64_t nd = static_cast<int64_t>(sizes.size());
  if (nd == 0) {
    if (begin < end) f(int64_t(0), int64_t(0), int64_t(1), static_cast<const int64_t*>(nullptr));
    return;
  }
  int64_t idx[64];
  int64_t rem = begin, off = 0;
  for (int64_t d = nd - 1; d >= 0; --d) {
    idx[d] = rem % sizes[d];
    rem /= sizes[d];
    off += idx[d] * strides[d];
  }
  const int64_t inner = sizes[nd - 1], st = strides[nd - 1];
  int64_t pos = begin;
  while (pos < end) {
    int64_t n = std::min(end - pos, inner - idx[nd - 1]);
    f(off, st, n, static_cast<const int64_t*>(idx));
    pos += n;
    off += n * st;
    idx[nd - 1] += n;
    for (int64_t d = nd - 1; d > 0 && idx[d] == sizes[d]; --d) {
      off -= idx[d] * strides[d];
      idx[d] = 0;
      idx[d - 1]++;
      off += strides[d - 1];
    }
  }
}

// Two passes over fixed chunks: count per chunk in parallel, then each chunk
// writes its coordinates from its prefix-sum position.
int64_t mask_indices_kernel(const Tensor& mask, int64_t* const* rows) {
  const int64_t n = mask.numel();
  const int64_t nd = mask.dim();
  if (n == 0) return 0;
  const uint8_t* base = static_cast<const uint8_t*>(mask.data_ptr());
  const DimVector sizes(mask.sizes().begin(), mask.sizes().end());
  const DimVector strides(mask.strides().begin(), mask.strides().end());
  const int64_t chunk = 1 << 18;
  const int64_t nchunks = (n + chunk - 1) / chunk;
  std::vector<int64_t> counts(nchunks + 1, 0);
  parallel_for(0, nchunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      int64_t cnt = 0;
      mask_runs(sizes, strides, c * chunk, std::min(n, (c + 1) * chunk),
                [&](int64_t off, int64_t st, int64_t len, const int64_t*) {
                  const uint8_t* p = base + off;
                  int64_t k = 0;
                  if (st == 1) {
#pragma omp simd reduction(+ : k)
                    for (int64_t i = 0; i < len; ++i) k += p[i] != 0;
                  } else {
                    for (int64_t i = 0; i < len; ++i) k += p[i * st] != 0;
                  }
                  cnt += k;
                });
      counts[c + 1] = cnt;
    }
  });
  for (int64_t c = 0; c < nchunks; ++c) counts[c + 1] += counts[c];
  if (!rows) return counts[nchunks];
  parallel_for(0, nchunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      int64_t pos = counts[c];
      mask_runs(sizes, strides, c * chunk, std::min(n, (c + 1) * chunk),
                [&](int64_t off, int64_t st, int64_t len, const int64_t* idx) {
                  const uint8_t* p = base + off;
                  int64_t* last = nd > 0 ? rows[nd - 1] : nullptr;
                  const int64_t first = nd > 0 ? idx[nd - 1] : 0;
                  for (int64_t i = 0; i < len; ++i) {
                    if (!p[i * st]) continue;
                    for (int64_t d = 0; d + 1 < nd; ++d) rows[d][pos] = idx[d];
                    if (last) last[pos] = first + i;
                    pos++;
                  }
                });
    }
  });
  return counts[nchunks];
}

}  // namespace
}  // namespace STRATA_CPU_NS
}  // namespace cpu

STRATA_REGISTER_CPU_KERNEL(index_stub, cpu::index_kernel);
STRATA_REGISTER_CPU_KERNEL(mask_indices_stub, cpu::mask_indices_kernel);

}  // namespace strata
