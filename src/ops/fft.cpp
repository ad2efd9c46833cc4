// torch.fft's primitives: _fft_c2c, _fft_r2c, _fft_c2r (decl/fft.def), CPU and Meta.
//
// Note [FFT library]
// The transforms are oneMKL's DFTI (backends/cpu/mkl_dft.cpp, loaded with dlopen): the library torch's x86 wheel
// uses, the fastest of the candidates we measured (docs/DESIGN.md, "FFT"), and permissively licensed. DFTI takes
// any strides for the signal dims and one batch dim (a count and a distance), so the input is read where it lies
// and the output is written in place: the largest batch dim goes to MKL, the other batch dims are a loop here.
// Only an input with a zero stride (an expanded tensor) is copied first. Results are laid out in the order of the
// input's strides (contiguous for a contiguous input), as torch's are.
// A two-sided r2c (torch.fft.fft of a real tensor) is the one-sided transform plus the conjugate-symmetric
// half, filled from it; c2r reads only the first last_dim_size / 2 + 1 entries of its last dim.
#include "ops/op_list.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <complex>

#include "backends/cpu/mkl_dft.h"
#include "core/shape.h"
#include "ops/api/complex.h"
#include "ops/api/fft.h"
#include "ops/ops.h"

namespace strata {

namespace {

DimVector fft_dims(const Tensor& self, IntArrayRef dim, const char* op, bool allow_empty) {
  STRATA_CHECK(allow_empty || !dim.empty(), op, ": expected at least one dim to transform");
  DimVector dims;
  for (int64_t d : dim) {
    int64_t w = wrap_dim(d, self.dim(), op);
    for (int64_t e : dims) STRATA_CHECK(e != w, op, ": dims must be unique (got ", shape_str(dim), ")");
    dims.push_back(w);
  }
  return dims;
}

double norm_scale(int64_t mode, double n, const char* op) {
  STRATA_CHECK(mode >= 0 && mode <= 2, op, ": normalization must be 0 (none), 1 (1/sqrt(n)) or 2 (1/n), got ",
               mode);
  return mode == 0 ? 1.0 : mode == 1 ? 1.0 / std::sqrt(n) : 1.0 / n;
}

void check_signal_sizes(const Tensor& t, const DimVector& dims, const char* op) {
  for (int64_t d : dims)
    STRATA_CHECK(t.size(d) >= 1, op, ": Invalid number of data points (", t.size(d), ") specified (dim ", d,
                 " of a tensor of shape ", t.shape_str(), ")");
}

// Runs the transforms of x into y (y's sizes are the output's; both any strides).
void run(cpu::dft::Kind kind, bool forward, Tensor x, const Tensor& y, const DimVector& dims, double scale) {
  if (y.numel() == 0) return;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (x.size(d) > 1 && x.stride(d) == 0) {
      x = contiguous(x);
      break;
    }
  cpu::dft::Geometry g;
  g.kind = kind;
  g.forward = forward;
  g.dbl = x.dtype() == ScalarType::Float64 || x.dtype() == ScalarType::ComplexDouble;
  g.scale = scale;
  const Tensor& real_side = kind == cpu::dft::Kind::C2R ? y : x;
  for (int64_t d : dims) {
    g.lengths.push_back(real_side.size(d));
    g.in_strides.push_back(x.stride(d));
    g.out_strides.push_back(y.stride(d));
  }
  // Batch dims, merged where both tensors step through them as one (a contiguous (8, 64, 64, n) batch is one
  // dim of 32768): the largest goes to MKL, the rest are looped over here.
  struct BatchDim {
    int64_t size, xs, ys;
  };
  std::vector<BatchDim> batch;
  for (int64_t d = 0; d < y.dim(); ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end() && y.size(d) > 1)
      batch.push_back({y.size(d), x.stride(d), y.stride(d)});
  std::stable_sort(batch.begin(), batch.end(), [](const BatchDim& a, const BatchDim& b) { return a.ys > b.ys; });
  std::vector<BatchDim> merged;
  for (const BatchDim& b : batch) {
    if (!merged.empty() && merged.back().xs == b.xs * b.size && merged.back().ys == b.ys * b.size)
      merged.back() = {merged.back().size * b.size, b.xs, b.ys};
    else
      merged.push_back(b);
  }
  size_t b0 = merged.size();
  for (size_t i = 0; i < merged.size(); ++i)
    if (b0 == merged.size() || merged[i].size > merged[b0].size) b0 = i;
  if (b0 < merged.size()) {
    g.howmany = merged[b0].size;
    g.in_dist = merged[b0].xs;
    g.out_dist = merged[b0].ys;
    merged.erase(merged.begin() + int64_t(b0));
  }
  // Several looped transforms of a layout whose innermost dim is a batch dim (MKL's strided "vector" layout, slow
  // for small counts; with counts in the hundreds it beats copying): transform a (batch..., signal...) copy
  // instead, as torch does.
  if (!merged.empty() && g.howmany < 64 && g.in_dist != 0 && std::abs(g.in_dist) < [&] {
        int64_t m = INT64_MAX;
        for (int64_t d : dims)
          if (x.size(d) > 1) m = std::min(m, std::abs(x.stride(d)));
        return m;
      }()) {
    DimVector perm;
    for (int64_t d = 0; d < x.dim(); ++d)
      if (std::find(dims.begin(), dims.end(), d) == dims.end()) perm.push_back(d);
    const int64_t nb = int64_t(perm.size());
    DimVector new_dims;
    for (size_t i = 0; i < dims.size(); ++i) {
      perm.push_back(dims[i]);
      new_dims.push_back(nb + int64_t(i));
    }
    Tensor xc = contiguous(permute(x, perm));
    Tensor yp = permute(y, perm);
    Tensor yc = empty_tensor(yp.sizes(), y.dtype(), y.device());
    run(kind, forward, xc, yc, new_dims, scale);
    copy_(yp, yc, false);
    return;
  }
  const size_t in_es = element_size(x.dtype()), out_es = element_size(y.dtype());
  const char* in = static_cast<const char*>(x.data_ptr());
  char* out = static_cast<char*>(y.data_ptr());
  DimVector idx(merged.size(), 0);
  while (true) {
    int64_t in_off = 0, out_off = 0;
    for (size_t i = 0; i < merged.size(); ++i) {
      in_off += idx[i] * merged[i].xs;
      out_off += idx[i] * merged[i].ys;
    }
    cpu::dft::execute(g, in + in_off * int64_t(in_es), out + out_off * int64_t(out_es));
    size_t i = merged.size();
    while (i > 0 && ++idx[i - 1] == merged[i - 1].size) idx[--i] = 0;
    if (i == 0) break;
  }
}

// out[..., k] = conj(out[(-j) mod n_j along the other signal dims, n - k]) for k >= n / 2 + 1 on the last dim:
// the half a two-sided r2c leaves out, read from the half it wrote (any strides).
template <typename C>
void fill_conjugate_symmetry_as(const Tensor& out, const DimVector& dims) {
  const int64_t nd = out.dim(), last = dims.back(), n = out.size(last), h = n / 2 + 1;
  std::vector<char> signal(size_t(nd), 0);
  for (int64_t d : dims) signal[size_t(d)] = 1;
  // Source index along d of destination index j.
  auto mirror = [&](int64_t d, int64_t j) {
    return d == last ? n - j : signal[size_t(d)] ? (out.size(d) - j) % out.size(d) : j;
  };
  // The innermost loop runs along the dim with the smallest stride; the last signal dim ranges over [h, n).
  int64_t inner = last;
  for (int64_t d = 0; d < nd; ++d)
    if (out.size(d) > 1 && std::abs(out.stride(d)) < std::abs(out.stride(inner))) inner = d;
  // (destination, source) offsets of every row along `inner`, built dim by dim.
  std::vector<std::pair<int64_t, int64_t>> rows{{0, 0}}, next;
  for (int64_t d = 0; d < nd; ++d) {
    if (d == inner) continue;
    const int64_t lo = d == last ? h : 0, hi = d == last ? n : out.size(d), st = out.stride(d);
    next.clear();
    next.reserve(rows.size() * size_t(hi - lo));
    for (const auto& r : rows)
      for (int64_t j = lo; j < hi; ++j) next.emplace_back(r.first + j * st, r.second + mirror(d, j) * st);
    rows.swap(next);
  }
  const int64_t si = out.stride(inner), ilo = inner == last ? h : 0, ihi = inner == last ? n : out.size(inner);
  DimVector src_inner(size_t(ihi - ilo));
  for (int64_t j = ilo; j < ihi; ++j) src_inner[size_t(j - ilo)] = mirror(inner, j) * si;
  C* base = static_cast<C*>(out.data_ptr());
  for (const auto& r : rows) {
    C* dst = base + r.first;
    const C* src = base + r.second;
    for (int64_t j = ilo; j < ihi; ++j) dst[j * si] = std::conj(src[src_inner[size_t(j - ilo)]]);
  }
}

void fill_conjugate_symmetry(const Tensor& out, const DimVector& dims) {
  if (out.size(dims.back()) - (out.size(dims.back()) / 2 + 1) <= 0) return;
  if (out.dtype() == ScalarType::ComplexDouble) fill_conjugate_symmetry_as<std::complex<double>>(out, dims);
  else fill_conjugate_symmetry_as<std::complex<float>>(out, dims);
}

// A result laid out in the order of x's strides, as torch does: the transform then reads and writes along the
// same axes (MKL is much slower when the input's and output's layouts differ).
Tensor empty_in_order_of(const Tensor& x, IntArrayRef sizes, ScalarType dtype) {
  const int64_t nd = x.dim();
  DimVector perm(nd);
  for (int64_t d = 0; d < nd; ++d) perm[d] = d;
  std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) { return x.stride(a) > x.stride(b); });
  bool identity = true;
  for (int64_t d = 0; d < nd; ++d) identity = identity && perm[d] == d;
  if (identity) return empty_tensor(sizes, dtype, x.device());
  DimVector psizes(nd), inverse(nd);
  for (int64_t d = 0; d < nd; ++d) {
    psizes[d] = sizes[perm[d]];
    inverse[perm[d]] = d;
  }
  return permute(empty_tensor(psizes, dtype, x.device()), inverse);
}

double signal_numel(const Tensor& t, const DimVector& dims) {
  double n = 1;
  for (int64_t d : dims) n *= double(t.size(d));
  return n;
}

void check_library(const Tensor& t) {
  if (!t.device().is_meta()) STRATA_CHECK(cpu::dft::available(), cpu::dft::unavailable_reason());
}

}  // namespace

Tensor _fft_c2c_impl(const Tensor& self, IntArrayRef dim, int64_t normalization, bool forward) {
  constexpr const char* op = "_fft_c2c";
  STRATA_CHECK(is_complex_type(self.dtype()), op, " expects a complex input tensor, but got ",
               scalar_type_name(self.dtype()));
  DimVector dims = fft_dims(self, dim, op, true);
  check_signal_sizes(self, dims, op);
  const double scale = norm_scale(normalization, signal_numel(self, dims), op);
  Tensor out = empty_in_order_of(self, self.sizes(), self.dtype());
  if (self.device().is_meta() || out.numel() == 0) return out;
  if (dims.empty()) {
    copy_(out, self, false);
    return out;
  }
  check_library(self);
  run(cpu::dft::Kind::C2C, forward, self, out, dims, scale);
  return out;
}
STRATA_IMPL_CPU_META(_fft_c2c, _fft_c2c_impl);

Tensor _fft_r2c_impl(const Tensor& self, IntArrayRef dim, int64_t normalization, bool onesided) {
  constexpr const char* op = "_fft_r2c";
  STRATA_CHECK(self.dtype() == ScalarType::Float32 || self.dtype() == ScalarType::Float64, op,
               " expects a float32 or float64 input tensor, but got ", scalar_type_name(self.dtype()));
  DimVector dims = fft_dims(self, dim, op, false);
  check_signal_sizes(self, dims, op);
  const double scale = norm_scale(normalization, signal_numel(self, dims), op);
  const int64_t last = dims.back(), n = self.size(last);
  DimVector sizes(self.sizes().begin(), self.sizes().end());
  if (onesided) sizes[last] = n / 2 + 1;
  Tensor out = empty_in_order_of(self, sizes, to_complex_type(self.dtype()));
  if (self.device().is_meta() || out.numel() == 0) return out;
  check_library(self);
  run(cpu::dft::Kind::R2C, true, self, onesided ? out : narrow(out, last, 0, n / 2 + 1), dims, scale);
  if (!onesided) fill_conjugate_symmetry(out, dims);
  return out;
}
STRATA_IMPL_CPU_META(_fft_r2c, _fft_r2c_impl);

Tensor _fft_c2r_impl(const Tensor& self, IntArrayRef dim, int64_t normalization, int64_t last_dim_size) {
  constexpr const char* op = "_fft_c2r";
  STRATA_CHECK(is_complex_type(self.dtype()), op, " expects a complex input tensor, but got ",
               scalar_type_name(self.dtype()));
  DimVector dims = fft_dims(self, dim, op, false);
  STRATA_CHECK(last_dim_size >= 1, op, ": Invalid number of data points (", last_dim_size, ") specified");
  check_signal_sizes(self, dims, op);
  const int64_t last = dims.back(), half = last_dim_size / 2 + 1;
  STRATA_CHECK(self.size(last) >= half, op, ": an output of ", last_dim_size, " points along dim ", last,
               " needs at least ", half, " input points there, but the input has shape ", self.shape_str());
  DimVector sizes(self.sizes().begin(), self.sizes().end());
  sizes[last] = last_dim_size;
  Tensor out = empty_in_order_of(self, sizes, to_real_value_type(self.dtype()));
  const double scale = norm_scale(normalization, signal_numel(out, dims), op);
  if (self.device().is_meta() || out.numel() == 0) return out;
  check_library(self);
  Tensor x = narrow(self, last, 0, half);
  if (dims.size() > 1) {
    // As torch (and NumPy): a c2c over the other dims, then a 1-D c2r. MKL's multi-dimensional c2r gives other
    // values where the input is not exactly Hermitian-symmetric.
    DimVector others(dims.begin(), dims.end() - 1);
    Tensor tmp = empty_in_order_of(x, x.sizes(), x.dtype());
    run(cpu::dft::Kind::C2C, false, x, tmp, others, 1.0);
    x = tmp;
    dims = DimVector{last};
  }
  run(cpu::dft::Kind::C2R, false, x, out, dims, scale);
  return out;
}
STRATA_IMPL_CPU_META(_fft_c2r, _fft_c2r_impl);

}  // namespace strata
