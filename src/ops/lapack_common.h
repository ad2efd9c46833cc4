// Shared by the LAPACK-backed ops (lapack.cpp, lapack_decomp.cpp): argument
// checks with torch's wording, batches of column-major matrices, and the loop
// that runs one LAPACK call per matrix.
//
// Note [Batches of LAPACK calls]
// Each op copies its input once into a fresh buffer whose matrices are
// column-major and packed one after another (strides ..., 1, rows), which is
// what LAPACK overwrites in place; results are returned in that layout, as
// torch does. Large matrices run one after another, each using OpenBLAS's
// threads; small ones (where one call is a few microseconds and OpenBLAS runs
// single-threaded anyway) are split across our threads by matrix, so a batch
// of 8x8 systems costs its arithmetic and not a dispatch per matrix.
#pragma once

#include <algorithm>
#include <atomic>
#include <climits>
#include <complex>
#include <string>
#include <vector>

#include "backends/cpu/lapack.h"
#include "backends/cpu/parallel.h"
#include "core/linalg_error.h"
#include "core/shape.h"
#include "ops/api/complex.h"
#include "ops/api/lapack.h"
#include "ops/op_list.h"
#include "ops/ops.h"

namespace strata::linalg_detail {

inline std::string dims_str(const Tensor& t) {
  return std::to_string(t.size(-2)) + " by " + std::to_string(t.size(-1));
}

// A floating matrix (batch) on the CPU or Meta: torch's messages.
// complex_ok: the op also takes complex64/complex128 (see visit_lapack).
inline void check_input(const char* op, const char* name, const Tensor& t, int64_t min_dim = 2,
                        bool complex_ok = false) {
  STRATA_CHECK(t.dim() >= min_dim, op, ": The input tensor ", name, " must have at least ", min_dim,
               " dimensions, but got a tensor of shape ", t.shape_str());
  if (complex_ok && is_complex_type(t.dtype())) {
    STRATA_CHECK_T(NotImplementedError, t.device().is_cpu() || t.device().is_meta(), op,
                   ": LAPACK-backed linear algebra runs on the CPU; ", name, " is on ", t.device().str());
    if (t.device().is_cpu())
      STRATA_CHECK(lapack::available() && lapack::has_complex(), op, ": ",
                   lapack::available() ? "libopenblas.so.0 does not export the complex LAPACK routines"
                                       : lapack::unavailable_reason());
    return;
  }
  STRATA_CHECK(t.dtype() == ScalarType::Float32 || t.dtype() == ScalarType::Float64, op,
                    ": Expected a floating point tensor as input (float32 or float64). Got ", dtype_name(t.dtype()),
                    " for ", name, " of shape ", t.shape_str(),
                    (is_floating_type(t.dtype()) ? " (reduced precision: convert to float32 first)" : ""));
  STRATA_CHECK_T(NotImplementedError, t.device().is_cpu() || t.device().is_meta(), op,
                 ": LAPACK-backed linear algebra runs on the CPU; ", name, " is on ", t.device().str());
  if (t.device().is_cpu())
    STRATA_CHECK(lapack::available(), op, ": ", lapack::unavailable_reason());
}

inline void check_square(const char* op, const char* name, const Tensor& t) {
  STRATA_CHECK(t.size(-1) == t.size(-2), op, ": ", name, " must be batches of square matrices, but they are ",
               dims_str(t), " matrices");
}

inline void check_same(const char* op, const Tensor& a, const char* an, const Tensor& b, const char* bn) {
  STRATA_CHECK(a.dtype() == b.dtype(), op, ": Expected ", an, " and ", bn, " to have the same dtype, but got ", an,
               ".dtype = ", dtype_name(a.dtype()), " and ", bn, ".dtype = ", dtype_name(b.dtype()));
  STRATA_CHECK(a.device() == b.device(), op, ": Expected ", an, " and ", bn, " to be on the same device, but got ",
               a.device().str(), " and ", b.device().str());
}

inline std::vector<int64_t> batch_of(const Tensor& t, int64_t trailing = 2) {
  return std::vector<int64_t>(t.sizes().begin(), t.sizes().end() - trailing);
}
inline std::vector<int64_t> with(std::vector<int64_t> b, std::initializer_list<int64_t> tail) {
  b.insert(b.end(), tail.begin(), tail.end());
  return b;
}
inline int64_t count_of(const std::vector<int64_t>& batch) {
  int64_t n = 1;
  for (int64_t s : batch) n *= s;
  return n;
}

inline int as_int(const char* op, int64_t v) {
  STRATA_CHECK(v <= INT_MAX, op, ": a dimension of ", v, " exceeds LAPACK's 32-bit sizes");
  return static_cast<int>(v);
}

// True when t's matrices are packed column-major one after another (the
// layout col_major() makes), so LAPACK can read them in place.
inline bool is_packed_col_major(const Tensor& t) {
  const int64_t r = t.size(-2), c = t.size(-1);
  if ((r > 1 && t.stride(-2) != 1) || (c > 1 && t.stride(-1) != r)) return false;
  int64_t expect = r * c;
  for (int64_t d = t.dim() - 3; d >= 0; --d) {
    if (t.size(d) != 1 && t.stride(d) != expect) return false;
    expect *= t.size(d);
  }
  return true;
}

// Copies src (any strides, broadcast strides included) into `dst`, a packed
// batch of column-major r x c matrices. A plain copy_ into the transposed view
// would run the generic strided copy with inner loops of length r, which
// costs more than the factorisation for batches of 4x4 or 8x8 matrices.
template <typename T>
void pack_col_major(const Tensor& src, T* dst) {
  const int64_t nd = src.dim(), r = src.size(-2), c = src.size(-1), rs = src.stride(-2), cs = src.stride(-1);
  int64_t count = 1;
  for (int64_t d = 0; d < nd - 2; ++d) count *= src.size(d);
  const T* base = src.data_ptr<T>();
  parallel_for(0, count, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, r * c)), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      int64_t off = 0, rem = i;
      for (int64_t d = nd - 3; d >= 0; --d) {
        off += (rem % src.size(d)) * src.stride(d);
        rem /= src.size(d);
      }
      const T* s = base + off;
      T* o = dst + i * r * c;
      // 32 x 32 tiles keep a transposing copy of a large matrix in cache.
      for (int64_t j0 = 0; j0 < c; j0 += 32)
        for (int64_t k0 = 0; k0 < r; k0 += 32)
          for (int64_t j = j0; j < std::min(c, j0 + 32); ++j)
            for (int64_t k = k0; k < std::min(r, k0 + 32); ++k) o[j * r + k] = s[k * rs + j * cs];
    }
  });
}

// A fresh tensor of `shape` (..., r, c) whose matrices are column-major and
// packed, holding `src` (broadcast to `shape`) when given.
inline Tensor col_major(IntArrayRef shape, ScalarType dt, Device dev, const Tensor* src = nullptr) {
  std::vector<int64_t> s(shape.begin(), shape.end());
  std::swap(s[s.size() - 1], s[s.size() - 2]);
  Tensor buf = empty_tensor(s, dt, dev);
  Tensor view = transpose(buf, -2, -1);
  if (src && !dev.is_meta() && buf.numel() > 0) {
    Tensor full = expand(*src, shape);
    if (dev.is_cpu() && src->dtype() == dt && (dt == ScalarType::Float32 || dt == ScalarType::Float64)) {
      if (dt == ScalarType::Float32) pack_col_major<float>(full, buf.data_ptr<float>());
      else pack_col_major<double>(full, buf.data_ptr<double>());
    } else if (dev.is_cpu() && src->dtype() == dt && is_complex_type(dt)) {
      if (dt == ScalarType::ComplexFloat) pack_col_major<std::complex<float>>(full, buf.data_ptr<std::complex<float>>());
      else pack_col_major<std::complex<double>>(full, buf.data_ptr<std::complex<double>>());
    } else {
      copy_(view, full);
    }
  }
  return view;
}

template <typename F>
auto visit_real(ScalarType dt, F&& f) {
  if (dt == ScalarType::Float32) return f.template operator()<float>();
  return f.template operator()<double>();
}

// float, double, std::complex<float>, std::complex<double>: for the ops that
// take complex input (check_input(..., complex_ok = true)).
template <typename F>
auto visit_lapack(ScalarType dt, F&& f) {
  if (dt == ScalarType::ComplexFloat) return f.template operator()<std::complex<float>>();
  if (dt == ScalarType::ComplexDouble) return f.template operator()<std::complex<double>>();
  return visit_real(dt, std::forward<F>(f));
}

// Runs f(i) for every matrix i of a batch; `work` is a rough flop count of one
// call. Small matrices spread over our threads (see the Note above).
// serial_from: the order from which matrices run one after another (LAPACK
// then threads each call itself); kernels of our own that serve larger
// matrices single-threaded pass their own bound.
template <typename F>
void for_each_matrix(int64_t count, int64_t n, const F& f, int64_t serial_from = 48) {
  lapack::sync_threads();
  if (count <= 1 || n >= serial_from) {
    for (int64_t i = 0; i < count; ++i) f(i);
    return;
  }
  int64_t work = std::max<int64_t>(1, n * n * n);
  int64_t grain = std::max<int64_t>(1, 20000 / work);
  parallel_for(0, count, grain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) f(i);
  });
}

// The first batch element whose info was positive (or -1), kept across threads.
struct FirstFailure {
  std::atomic<int64_t> index{INT64_MAX};
  std::atomic<int> info{0};
  void record(int64_t i, int inf) {
    int64_t cur = index.load();
    while (i < cur && !index.compare_exchange_weak(cur, i)) {
    }
    if (index.load() == i) info.store(inf);
  }
  bool failed() const { return index.load() != INT64_MAX; }
  // "(Batch element 3): " for a batched input, "" otherwise.
  std::string where(bool batched) const {
    return batched ? "(Batch element " + std::to_string(index.load()) + "): " : "";
  }
};

}  // namespace strata::linalg_detail
